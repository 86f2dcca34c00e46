//! Waiting for a writers' lock that other processes share: the sidecar's,
//! the slot records', a hosted transcript's. Another sessionfs holds one
//! for the length of one write, but any process may take it (a tool, a
//! daemon that hangs), so the wait has a deadline, shorter than the pool's,
//! so that the caller hears why rather than only that it took too long.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a writer waits for a lock held elsewhere before it gives up.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// How long an operation that keeps a directory of the mount locked in the
/// kernel while it waits (`mkdir`, `rm`) waits: every lookup and listing
/// of that directory waits with it.
pub const DIR_LOCK_WAIT: Duration = Duration::from_secs(1);

/// How long a writer waits for a lock that another writer gave up on and
/// that has not been seen free since: long enough for another sessionfs's
/// write, short enough that writers queued behind a stuck lock fail almost
/// at once instead of waiting in turn.
const STILL_HELD_WAIT: Duration = Duration::from_millis(100);

/// The longest pause between two attempts.
const PAUSE_MAX: Duration = Duration::from_millis(50);

/// Takes the exclusive `flock` on `file` (opened from `path`), waiting at
/// most `wait`. Past it: ETIMEDOUT, with a reason that names `what` (the
/// lock, in words) and `path`.
pub fn lock_within(file: &File, path: &Path, what: &str, wait: Duration) -> Result<()> {
    let until = Instant::now() + wait;
    // Short pauses first: a lock another sessionfs holds is free again
    // within a write and an fsync.
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => {
                return Err(Error::io(&format!("cannot lock {}", path.display()), &e))
            }
        }
        let now = Instant::now();
        if now >= until {
            return Err(Error::new(
                libc::ETIMEDOUT,
                format!(
                    "{what} ({}) is held by another process (another sessionfs, or a tool) for more than {} s; nothing was changed, try again",
                    path.display(),
                    wait.as_secs_f32()
                ),
            ));
        }
        std::thread::sleep(pause.min(until - now));
        pause = (pause * 2).min(PAUSE_MAX);
    }
}

/// A lock file every writer of one store takes, in any process. Once a
/// writer gave up on it, the next ones wait only [`STILL_HELD_WAIT`] until
/// it is seen free again, as writes to a stuck session fail at once.
#[derive(Debug)]
pub struct SharedLock {
    path: PathBuf,
    /// The lock in words, for reasons: "the metadata lock".
    what: &'static str,
    given_up: AtomicBool,
}

impl SharedLock {
    pub fn new(path: PathBuf, what: &'static str) -> SharedLock {
        SharedLock {
            path,
            what,
            given_up: AtomicBool::new(false),
        }
    }

    /// Takes the lock, waiting at most `wait`; held until the file is dropped.
    pub fn take(&self, wait: Duration) -> Result<File> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(|e| Error::io(&format!("cannot open {}", self.path.display()), &e))?;
        let given_up = self.given_up.load(Ordering::Relaxed);
        let wait = if given_up {
            wait.min(STILL_HELD_WAIT)
        } else {
            wait
        };
        let taken = lock_within(&file, &self.path, self.what, wait);
        let timed_out = taken.as_ref().is_err_and(|e| e.errno == libc::ETIMEDOUT);
        self.given_up.store(timed_out, Ordering::Relaxed);
        if timed_out && given_up {
            return Err(Error::new(
                libc::ETIMEDOUT,
                format!(
                    "{} ({}) is still held by another process (another sessionfs, or a tool); nothing was changed, try again",
                    self.what,
                    self.path.display()
                ),
            ));
        }
        taken.map(|()| file)
    }
}

/// The per-key advisory lock that arbitrates the one writer is a `flock`
/// (not an `fcntl` lock) because it belongs to the open file description: a
/// forked dtach master inherits it and holds it for as long as it lives,
/// across daemon restarts.
///
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

    fn open(path: &Path) -> File {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap()
    }

    #[test]
    fn a_held_lock_is_given_up_at_the_deadline_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let held = open(&path);
        held.lock().unwrap();
        let wait = Duration::from_millis(200);
        let t0 = Instant::now();
        let err = lock_within(&open(&path), &path, "the test lock", wait).unwrap_err();
        assert!(t0.elapsed() >= wait);
        assert!(t0.elapsed() < wait * 5, "waited {:?}", t0.elapsed());
        assert_eq!(err.errno, libc::ETIMEDOUT);
        assert!(
            err.message.starts_with("the test lock ("),
            "{}",
            err.message
        );
        assert!(err.message.contains("held by another process"));
    }

    #[test]
    fn a_lock_freed_during_the_wait_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let held = open(&path);
        held.lock().unwrap();
        let freer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        let file = open(&path);
        lock_within(&file, &path, "the test lock", Duration::from_secs(5)).unwrap();
        freer.join().unwrap();
        assert!(open(&path).try_lock().is_err(), "it is held now");
    }

    #[test]
    fn after_one_gives_up_the_next_wait_is_short_until_the_lock_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let shared = SharedLock::new(path.clone(), "the test lock");
        let held = open(&path);
        held.lock().unwrap();
        let wait = Duration::from_millis(600);
        assert!(shared.take(wait).is_err());
        let t0 = Instant::now();
        let err = shared.take(wait).unwrap_err();
        assert_eq!(err.errno, libc::ETIMEDOUT);
        assert!(err.message.contains("is still held"), "{}", err.message);
        assert!(t0.elapsed() < wait, "waited {:?} again", t0.elapsed());
        drop(held);
        drop(shared.take(wait).unwrap());
        // Seen free: a writer waits its whole time again.
        let held = open(&path);
        held.lock().unwrap();
        let t0 = Instant::now();
        assert!(shared.take(wait).is_err());
        assert!(t0.elapsed() >= wait);
    }

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
