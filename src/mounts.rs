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
    // Not synced: the record names this process, and a reader drops the
    // records of processes that are gone.
    crate::atomic::replace_with(
        &path,
        mountpoint.as_os_str().as_bytes(),
        crate::atomic::CREATE_MODE,
        crate::atomic::Durability::Unsynced,
    )
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
    let mounted = crate::mounting::sessionfs_mount_points();
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
        if mounted.iter().any(|m| *m == point.to_string_lossy()) {
            found.push((pid, point));
        }
    }
    // The oldest daemon first: the same answer every time.
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
