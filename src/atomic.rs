//! Replacing a file whole: the new content goes to a temporary file beside
//! it, which is synced and renamed over the old one, so a reader or a crash
//! sees the old file or the new one, never part of either.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How far a replacement is made to last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The content and the rename are synced: a crash keeps the new file.
    Synced,
    /// Nothing is synced: a crash may keep the old file (state that is
    /// cheap to make again, or rewritten often).
    Unsynced,
}

/// A name beside `path`, unique in this process and among processes.
pub fn temporary_beside(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.tmp.{}.{n}", std::process::id()))
}

/// Replaces `path` with `bytes`, synced, with mode 0600.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace_with(path, bytes, 0o600, Durability::Synced)
}

/// Replaces `path` with `bytes`: a new file of `mode`, made to last as
/// `durability` says. The temporary file is removed on failure.
pub fn replace_with(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    durability: Durability,
) -> std::io::Result<()> {
    let tmp = temporary_beside(path);
    let made = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        file.write_all(bytes)?;
        if durability == Durability::Synced {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if durability == Durability::Synced {
            sync_parent(path)?;
        }
        Ok(())
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    made
}

/// Syncs the directory holding `path`, so a rename or a new name in it lasts.
pub fn sync_parent(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_leaves_the_new_content_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, b"old").unwrap();
        replace(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no temporary file is left");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn a_failed_replacement_keeps_the_old_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        // A directory in the way: the rename fails.
        let path = dir.path().join("d");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("inside"), b"x").unwrap();
        assert!(replace(&path, b"new").is_err());
        assert!(path.join("inside").exists());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no temporary file is left");
    }
}
