//! Which mounts serve a state directory. Each daemon leaves a record,
//! `<state dir>/mounts/PID`, holding its mount point, so a client (`sessionfs
//! ls`, the verbs for scripts) finds its mount without reading any file of
//! any mount: a read from the mount of a stopped or stuck daemon (someone
//! else's, on the same machine) would never return.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("mounts")
}

/// Records that this process serves `mountpoint` for `state_dir`.
pub fn record(state_dir: &Path, mountpoint: &Path) -> std::io::Result<()> {
    let dir = dir(state_dir);
    crate::config::make_private_dir(&dir).map_err(|e| std::io::Error::other(e.message))?;
    let path = dir.join(std::process::id().to_string());
    let tmp = dir.join(format!(".{}.tmp", std::process::id()));
    std::fs::write(&tmp, mountpoint.as_os_str().as_bytes())?;
    std::fs::rename(&tmp, path)
}

/// Removes this process's record (a clean stop).
pub fn forget(state_dir: &Path) {
    let _ = std::fs::remove_file(dir(state_dir).join(std::process::id().to_string()));
}

/// The mount points served for `state_dir` now: records whose daemon runs
/// and whose mount point is a sessionfs mount. Records of daemons that are
/// gone are removed.
pub fn serving(state_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir(state_dir)) else {
        return Vec::new();
    };
    let mounted = sessionfs_mounts();
    let mut found: Vec<(u32, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(entry.path());
            continue;
        }
        let Ok(point) = std::fs::read(entry.path()) else {
            continue;
        };
        let point = PathBuf::from(OsString::from_vec(point));
        if mounted.contains(&point) {
            found.push((pid, point));
        }
    }
    // The oldest daemon first: the same answer every time.
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// Every sessionfs mount point, from `/proc/self/mounts`.
fn sessionfs_mounts() -> Vec<PathBuf> {
    let Ok(table) = std::fs::read_to_string("/proc/self/mounts") else {
        return Vec::new();
    };
    table
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let (source, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
            // Mounted as root the subtype is not shown: the source names it.
            let ours = kind == "fuse.sessionfs" || (kind == "fuse" && source == "sessionfs");
            ours.then(|| unescape_mount_field(point))
        })
        .collect()
}

/// `/proc/self/mounts` writes space, tab, newline and backslash as `\ooo`.
fn unescape_mount_field(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_fields_are_unescaped() {
        assert_eq!(
            unescape_mount_field(r"/tmp/a\040b\011c\134d"),
            PathBuf::from("/tmp/a b\tc\\d")
        );
        assert_eq!(unescape_mount_field(r"/x\0"), PathBuf::from(r"/x\0"));
    }

    #[test]
    fn records_of_gone_daemons_are_dropped_and_unmounted_points_skipped() {
        let state = tempfile::tempdir().unwrap();
        record(state.path(), Path::new("/not/a/mount")).unwrap();
        // This process runs, but nothing is mounted there.
        assert!(serving(state.path()).is_empty());
        assert!(dir(state.path())
            .join(std::process::id().to_string())
            .exists());
        std::fs::write(dir(state.path()).join("4000000000"), "/gone").unwrap();
        serving(state.path());
        assert!(!dir(state.path()).join("4000000000").exists());
        forget(state.path());
        assert!(!dir(state.path())
            .join(std::process::id().to_string())
            .exists());
    }
}
