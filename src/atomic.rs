//! Replacing a file whole: the new content goes to a temporary file beside
//! it, which is renamed over the old one, so a reader or a crash sees the
//! old file or the new one, never part of either. How far the new file is
//! made to last is each caller's choice ([`Durability`]).

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The mode `File::create` and `std::fs::write` give a new file (the umask
/// then takes its bits away).
pub const CREATE_MODE: u32 = 0o666;

/// How many names [`Pending::new`] tries when one is taken.
const NAME_TRIES: usize = 16;

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

/// A new file under a temporary name beside its target, written through
/// [`Pending::file`] and put in place by [`Pending::commit`]. Dropped
/// before that, it is removed: nothing of it is left.
#[derive(Debug)]
pub struct Pending {
    file: File,
    tmp: PathBuf,
    target: PathBuf,
    durability: Durability,
    /// Renamed into place: there is no temporary file left to remove.
    placed: bool,
}

impl Pending {
    /// An empty file of `mode` that will replace `target`, made to last as
    /// `durability` says.
    pub fn new(target: &Path, mode: u32, durability: Durability) -> std::io::Result<Pending> {
        let mut tries = 0;
        loop {
            let tmp = temporary_beside(target);
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&tmp)
            {
                Ok(file) => {
                    return Ok(Pending {
                        file,
                        tmp,
                        target: target.to_path_buf(),
                        durability,
                        placed: false,
                    })
                }
                // A temporary a crashed process left under a name this one
                // got again: the next name is free.
                Err(e) if e.kind() == ErrorKind::AlreadyExists && tries < NAME_TRIES => {
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The new file, to write the content to.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Copies `from`'s bytes and permissions into the new file, as
    /// `std::fs::copy` does; the bytes copied. A missing `from` fails with
    /// `NotFound`.
    pub fn copy_from(&mut self, from: &Path) -> std::io::Result<u64> {
        let mut source = File::open(from)?;
        let meta = source.metadata()?;
        if !meta.is_file() {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                format!("{} is not a regular file", from.display()),
            ));
        }
        let copied = std::io::copy(&mut source, &mut self.file)?;
        self.file.set_permissions(meta.permissions())?;
        Ok(copied)
    }

    /// Puts the new file in place of the target (synced first if asked).
    pub fn commit(mut self) -> std::io::Result<()> {
        if self.durability == Durability::Synced {
            self.file.sync_all()?;
        }
        std::fs::rename(&self.tmp, &self.target)?;
        self.placed = true;
        if self.durability == Durability::Synced {
            sync_parent(&self.target)?;
        }
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.placed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
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
    write_with(path, mode, durability, |file| file.write_all(bytes))
}

/// Replaces `path` with what `write` writes to the new file (of `mode`,
/// made to last as `durability` says): for content made as it is written.
/// When `write` fails, `path` is left as it was and the temporary removed.
pub fn write_with<T>(
    path: &Path,
    mode: u32,
    durability: Durability,
    write: impl FnOnce(&mut File) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let mut pending = Pending::new(path, mode, durability)?;
    let written = write(pending.file())?;
    pending.commit()?;
    Ok(written)
}

/// Makes `dir` (and its parents) with mode 0700 if it is missing, and
/// checks it is a directory of this user's that no one else may enter: a
/// private place for copies of another program's files.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    let mine = meta.uid() == nix::unistd::getuid().as_raw();
    if !meta.is_dir() || !mine || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::new(
            ErrorKind::PermissionDenied,
            format!(
                "{} is not a private directory of this user's",
                dir.display()
            ),
        ));
    }
    Ok(())
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
    use std::os::unix::fs::PermissionsExt;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_replacement_leaves_the_new_content_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, b"old").unwrap();
        replace(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(names(dir.path()), ["f.json"], "no temporary file is left");
        assert_eq!(mode(&path), 0o600);
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
        assert_eq!(names(dir.path()), ["d"], "no temporary file is left");
    }

    #[test]
    fn an_unsynced_replacement_has_the_mode_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        replace_with(&path, b"a", 0o640, Durability::Unsynced).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"a");
        assert_eq!(mode(&path), 0o640);
        replace_with(&path, b"b", 0o600, Durability::Unsynced).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"b");
        assert_eq!(mode(&path), 0o600, "the new file's mode, not the old one's");
        assert_eq!(names(dir.path()), ["f"]);
    }

    #[test]
    fn a_write_that_fails_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"old").unwrap();
        let n = write_with(&path, 0o600, Durability::Synced, |f| {
            f.write_all(b"new")?;
            Ok(3)
        })
        .unwrap();
        assert_eq!(n, 3, "what the writer returns is returned");
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let failed = write_with(&path, 0o600, Durability::Synced, |f| {
            f.write_all(b"half")?;
            Err::<(), _>(std::io::Error::other("stopped"))
        });
        assert_eq!(failed.unwrap_err().to_string(), "stopped");
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(names(dir.path()), ["f"]);
    }

    #[test]
    fn a_pending_file_appears_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut pending = Pending::new(&path, CREATE_MODE, Durability::Unsynced).unwrap();
        pending.file().write_all(b"kept").unwrap();
        assert!(!path.exists(), "not in place before the commit");
        pending.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"kept");

        let mut dropped = Pending::new(&path, CREATE_MODE, Durability::Unsynced).unwrap();
        dropped.file().write_all(b"dropped").unwrap();
        assert_eq!(names(dir.path()).len(), 2, "the temporary beside it");
        drop(dropped);
        assert_eq!(std::fs::read(&path).unwrap(), b"kept");
        assert_eq!(names(dir.path()), ["f"]);
    }

    #[test]
    fn a_name_left_by_a_crashed_process_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        // The next names this process would take, already there.
        let taken = temporary_beside(&path);
        let n: u64 = taken
            .to_string_lossy()
            .rsplit('.')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let stale: Vec<PathBuf> = (n + 1..n + 4)
            .map(|i| path.with_file_name(format!(".f.tmp.{}.{i}", std::process::id())))
            .collect();
        for s in &stale {
            std::fs::write(s, b"stale").unwrap();
        }
        replace(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        for s in &stale {
            assert_eq!(std::fs::read(s).unwrap(), b"stale", "left as it was");
        }
    }

    #[test]
    fn a_copy_has_the_source_s_bytes_and_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("from");
        std::fs::write(&from, b"conversation").unwrap();
        std::fs::set_permissions(&from, std::fs::Permissions::from_mode(0o640)).unwrap();
        let to = dir.path().join("to");
        let mut pending = Pending::new(&to, 0o600, Durability::Unsynced).unwrap();
        assert_eq!(pending.copy_from(&from).unwrap(), 12);
        pending.commit().unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"conversation");
        assert_eq!(mode(&to), 0o640);

        let mut missing = Pending::new(&to, 0o600, Durability::Unsynced).unwrap();
        let e = missing.copy_from(&dir.path().join("gone")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        let e = missing.copy_from(dir.path()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "a directory is no file");
        drop(missing);
        assert_eq!(names(dir.path()), ["from", "to"]);
    }
}
