//! Putting the filesystem on its mount point and taking it off: the checks
//! that refuse a bad mount point, and the kernel mount as type
//! `fuse.sessionfs` (fuser mounts as plain `fuse` when it runs as root).

use crate::error::{Error, Result};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// The filesystem type after `fuse.` and the source column of the mount table.
pub const FS_NAME: &str = "sessionfs";

/// One row of `/proc/self/mountinfo` that matters here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountRow {
    pub mount_point: String,
    pub fs_type: String,
    pub source: String,
}

/// Reads the mount table rows: field 5 is the mount point, and after the
/// ` - ` separator come the type and the source. Octal escapes (`\040` for a
/// space) are decoded.
pub fn parse_mountinfo(text: &str) -> Vec<MountRow> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mount_point = unescape(left.split(' ').nth(4)?);
            let mut right = right.split(' ');
            let fs_type = right.next()?.to_string();
            let source = unescape(right.next()?);
            Some(MountRow {
                mount_point,
                fs_type,
                source,
            })
        })
        .collect()
}

fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let s = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(s, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount points of every sessionfs mount this process can see.
pub fn sessionfs_mount_points() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    parse_mountinfo(&text)
        .into_iter()
        .filter(is_sessionfs)
        .map(|row| row.mount_point)
        .collect()
}

/// Whether a row is a sessionfs mount, whoever mounted it and how.
fn is_sessionfs(row: &MountRow) -> bool {
    row.fs_type == format!("fuse.{FS_NAME}") || (row.fs_type == "fuse" && row.source == FS_NAME)
}

/// Refuses a mount point that would surprise: one that is already a
/// sessionfs mount (a second daemon would stack on it), a dead FUSE mount,
/// or, unless `nonempty`, a directory whose files the mount would hide.
pub fn check_mount_point(mount_point: &Path, nonempty: bool) -> Result<()> {
    let shown = mount_point.display();
    let mut entries = match std::fs::read_dir(mount_point) {
        Ok(entries) => entries,
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            return Err(Error::new(
                libc::ENOTCONN,
                format!("{shown} is a mount whose daemon is gone; unmount it first (fusermount3 -u {shown})"),
            ))
        }
        Err(e) => return Err(Error::io(&format!("mount point {shown}"), &e)),
    };
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let here = mount_point.to_string_lossy();
    if parse_mountinfo(&table)
        .iter()
        .any(|row| row.mount_point == here && is_sessionfs(row))
    {
        return Err(Error::busy(format!(
            "{shown} is already a sessionfs mount; unmount it first (fusermount3 -u {shown})"
        )));
    }
    if !nonempty && entries.next().is_some() {
        return Err(Error::new(
            libc::ENOTEMPTY,
            format!("{shown} is not empty and the mount would hide its files; use an empty directory or -o nonempty"),
        ));
    }
    Ok(())
}

/// Mounts `/dev/fuse` on `mount_point` as `fuse.sessionfs` with mount(2),
/// which only root may do; the caller serves the returned descriptor.
/// Others go through fusermount3 (fuser does that), which names the type
/// from the subtype option itself.
pub fn mount_as_root(mount_point: &Path, allow_other: bool) -> Result<OwnedFd> {
    use nix::mount::{mount, MsFlags};
    // std opens with O_CLOEXEC: the masters the daemon launches never hold it.
    let fd: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map_err(|e| Error::io("cannot open /dev/fuse", &e))?
        .into();
    let mut data = format!(
        "fd={},rootmode=40000,user_id={},group_id={},default_permissions",
        fd.as_raw_fd(),
        nix::unistd::getuid(),
        nix::unistd::getgid()
    );
    if allow_other {
        data.push_str(",allow_other");
    }
    mount(
        Some(FS_NAME),
        mount_point,
        Some(format!("fuse.{FS_NAME}").as_str()),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(data.as_str()),
    )
    .map_err(|e| {
        Error::new(
            e as i32,
            format!("cannot mount {}: {e}", mount_point.display()),
        )
        .with_source(e)
    })?;
    Ok(fd)
}

/// Takes a mount made by `mount_as_root` off, lazily if a reader still
/// holds a file open (the daemon is leaving either way).
pub fn unmount_as_root(mount_point: &Path) -> Result<()> {
    use nix::mount::{umount2, MntFlags};
    match umount2(mount_point, MntFlags::empty()) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EBUSY) => umount2(mount_point, MntFlags::MNT_DETACH)
            .map_err(|e| Error::new(e as i32, format!("lazy unmount failed: {e}")).with_source(e)),
        // Already unmounted (fusermount3 -u, umount): nothing left to do.
        Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => Ok(()),
        Err(e) => Err(Error::new(e as i32, format!("unmount failed: {e}")).with_source(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_rows_are_read_with_their_escapes() {
        let text =
            "36 35 98:0 / /mnt/my\\040sessions rw,nosuid - fuse.sessionfs sessionfs rw,user_id=0\n\
                    37 35 0:5 / /tmp/x rw shared:1 - fuse sessionfs rw\n\
                    38 35 0:6 / /proc rw - proc proc rw\n";
        let rows = parse_mountinfo(text);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].mount_point, "/mnt/my sessions");
        assert!(is_sessionfs(&rows[0]));
        assert!(is_sessionfs(&rows[1]));
        assert!(!is_sessionfs(&rows[2]));
    }

    #[test]
    fn a_non_empty_directory_is_refused_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        check_mount_point(dir.path(), false).unwrap();
        std::fs::write(dir.path().join("notes"), "x").unwrap();
        let err = check_mount_point(dir.path(), false).unwrap_err();
        assert_eq!(err.errno, libc::ENOTEMPTY);
        assert!(err.message.contains("-o nonempty"), "{}", err.message);
        check_mount_point(dir.path(), true).unwrap();
    }
}
