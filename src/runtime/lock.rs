//! The per-key advisory lock that arbitrates the one writer.
//!
//! `flock` (not `fcntl` locks) because it belongs to the open file
//! description: a forked dtach master inherits it and holds it for as long as
//! it lives, across daemon restarts.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Tries to take the lock without waiting: `Some(file)` holds it, `None`
/// means someone else does. The file is opened close-on-exec; the launcher
/// hands it to the dtach master alone.
pub fn try_lock(path: &Path) -> Result<Option<File>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(&format!("cannot open lock {}", path.display()), &e))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => {
            Err(Error::io(&format!("cannot lock {}", path.display()), &e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_open_file_description_is_refused_until_release() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lock");
        let first = try_lock(&path).unwrap().expect("first wins");
        assert!(try_lock(&path).unwrap().is_none());
        drop(first);
        assert!(try_lock(&path).unwrap().is_some());
    }
}
