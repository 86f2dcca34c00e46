//! sessionfs's own metadata store (SPEC §6): one JSON file keyed by session
//! key, never inside an engine's store. Every change is read-modify-write
//! under an exclusive `flock`, written to a temporary file, fsynced and
//! renamed, so two daemons never lose each other's edits and a crash leaves
//! the old or the new file, never half of one. A change waits for the lock
//! for a bounded time (see [`crate::filelock`]), then fails with ETIMEDOUT,
//! changing nothing.

use crate::error::{Error, Result};
use crate::filelock::{SharedLock, LOCK_WAIT};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// A change written and synced but not installed yet: see
/// [`Sidecar::prepare`]. Dropped without a commit, its file is removed.
#[derive(Debug)]
pub struct Prepared {
    tmp: PathBuf,
    /// The file it was made from.
    base: Stamp,
    sessions: BTreeMap<String, SessionMeta>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        // Gone already once committed (renamed into place).
        let _ = std::fs::remove_file(&self.tmp);
    }
}

fn body(sessions: &BTreeMap<String, SessionMeta>) -> Vec<u8> {
    serde_json::to_vec_pretty(&SidecarFile {
        sessions: sessions.clone(),
    })
    .expect("sidecar serialises")
}

/// Writes `bytes` to `path` and syncs it. `in_place` overwrites an existing
/// file without truncating it first, so the space it holds is reused.
fn write_synced(path: &Path, bytes: &[u8], in_place: bool) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(!in_place)
        .open(path)?;
    f.write_all_at(bytes, 0)?;
    f.set_len(bytes.len() as u64)?;
    f.sync_all()
}

/// What sessionfs itself remembers of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// Milliseconds since the epoch.
    pub created_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default)]
    pub favourite: bool,
    #[serde(default)]
    pub archived: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The engine's own id for the conversation when it is not the key's id
    /// (a new Codex session, a Claude conversation resumed under a new id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The conversations its process wrote before the current one (Claude's
    /// `/clear`, Codex's `/new`), oldest first; the key's own id is first
    /// when the session began as it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversations: Vec<String>,
    /// When this session's record last changed (milliseconds since the
    /// epoch; 0 in records written before it was kept): the mtime of its
    /// `meta.json` and one-line files.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub changed_ms: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct SidecarFile {
    #[serde(default)]
    sessions: BTreeMap<String, SessionMeta>,
}

/// Identity of the file on disk, to notice another daemon's writes.
type Stamp = Option<(u64, i64, i64, u64)>;

#[derive(Debug)]
struct Cache {
    stamp: Stamp,
    sessions: BTreeMap<String, SessionMeta>,
    /// Why the file on disk could not be read; writes are refused meanwhile
    /// so a damaged file is never overwritten with less than it held.
    broken: Option<String>,
    /// Bumped whenever `sessions` is replaced: exact where the file's mtime
    /// may not move between two quick writes.
    generation: u64,
}

#[derive(Debug)]
pub struct Sidecar {
    path: PathBuf,
    lock: SharedLock,
    cache: Mutex<Cache>,
}

fn stamp(path: &Path) -> Stamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.ino(), m.mtime(), m.mtime_nsec(), m.size()))
}

fn load(path: &Path) -> std::result::Result<BTreeMap<String, SessionMeta>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice::<SidecarFile>(&bytes)
            .map(|f| f.sessions)
            .map_err(|e| format!("{} is damaged: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

impl Sidecar {
    pub fn open(state_dir: &Path) -> Sidecar {
        let sidecar = Sidecar {
            path: state_dir.join("sidecar.json"),
            lock: SharedLock::new(state_dir.join("sidecar.lock"), "the metadata lock"),
            cache: Mutex::new(Cache {
                stamp: None,
                sessions: BTreeMap::new(),
                broken: None,
                generation: 0,
            }),
        };
        drop(sidecar.refresh());
        sidecar
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Re-reads the file if another writer changed it. The file is read
    /// with the cache unlocked: every `getattr` goes through here.
    fn refresh(&self) -> std::sync::MutexGuard<'_, Cache> {
        let now = stamp(&self.path);
        {
            let cache = self.cache();
            if now == cache.stamp && !(now.is_none() && cache.broken.is_some()) {
                return cache;
            }
        }
        // Stamped before reading: a change made meanwhile is read again next time.
        let loaded = load(&self.path);
        let mut cache = self.cache();
        if cache.stamp == now && cache.broken.is_none() {
            // Another thread installed this version meanwhile.
            return cache;
        }
        cache.stamp = now;
        cache.generation += 1;
        match loaded {
            Ok(sessions) => {
                cache.sessions = sessions;
                cache.broken = None;
            }
            Err(reason) => {
                log::error!("{reason}; metadata changes are refused until it is repaired");
                cache.broken = Some(reason);
            }
        }
        cache
    }

    /// When the metadata last changed on disk (by any daemon).
    pub fn modified(&self) -> std::time::SystemTime {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH)
    }

    /// Changes whenever the metadata does (by any daemon), as of this call.
    pub fn generation(&self) -> u64 {
        self.refresh().generation
    }

    pub fn get(&self, key: &str) -> Option<SessionMeta> {
        self.refresh().sessions.get(key).cloned()
    }

    pub fn all(&self) -> BTreeMap<String, SessionMeta> {
        self.refresh().sessions.clone()
    }

    /// Takes the writers' lock: every writer, in any daemon, holds it
    /// from reading the file to installing its new version. Held elsewhere
    /// for longer than `wait`: ETIMEDOUT, and nothing changes.
    fn lock(&self, wait: Duration) -> Result<File> {
        self.lock.take(wait)
    }

    /// Applies `change` to the newest state on disk and writes the result to
    /// a temporary file, synced, without installing it: whatever can fail
    /// (a full disk) fails here and changes nothing. [`Sidecar::commit`]
    /// installs it with a rename. The lock is not held in between.
    pub fn prepare(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, SessionMeta>) -> Result<()>,
    ) -> Result<Prepared> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let _lock = self.lock(LOCK_WAIT)?;
        let base = stamp(&self.path);
        let mut sessions = load(&self.path).map_err(|reason| {
            self.cache().broken = Some(reason.clone());
            Error::new(libc::EIO, reason)
        })?;
        change(&mut sessions)?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let prepared = Prepared {
            tmp: self
                .path
                .with_extension(format!("json.prepared{}.{n}", std::process::id())),
            base,
            sessions,
        };
        // Dropped on failure, `prepared` removes what was written.
        write_synced(&prepared.tmp, &body(&prepared.sessions), false)
            .map_err(|e| Error::io(&format!("cannot write {}", self.path.display()), &e))?;
        Ok(prepared)
    }

    /// Installs a prepared change. If another writer changed the file since
    /// it was prepared, `change` (the same change) is applied again to the
    /// newest state and written over the prepared file, in the space it
    /// already holds, so nothing the other writer did is lost.
    pub fn commit(
        &self,
        mut prepared: Prepared,
        change: impl FnOnce(&mut BTreeMap<String, SessionMeta>) -> Result<()>,
    ) -> Result<()> {
        let _lock = self.lock(LOCK_WAIT)?;
        let failed =
            |e: std::io::Error| Error::io(&format!("cannot write {}", self.path.display()), &e);
        if stamp(&self.path) != prepared.base {
            let mut sessions = load(&self.path).map_err(|reason| Error::new(libc::EIO, reason))?;
            change(&mut sessions)?;
            write_synced(&prepared.tmp, &body(&sessions), true).map_err(failed)?;
            prepared.sessions = sessions;
        }
        std::fs::rename(&prepared.tmp, &self.path)
            .and_then(|()| File::open(self.path.parent().unwrap_or(Path::new("/")))?.sync_all())
            .map_err(failed)?;
        let written = stamp(&self.path);
        let mut cache = self.cache();
        cache.stamp = written;
        cache.sessions = std::mem::take(&mut prepared.sessions);
        cache.broken = None;
        cache.generation += 1;
        Ok(())
    }

    /// Applies `change` to the newest state on disk and writes it back atomically.
    pub fn update<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, SessionMeta>) -> Result<T>,
    ) -> Result<T> {
        self.update_within(LOCK_WAIT, change)
    }

    /// [`Sidecar::update`], waiting at most `wait` for the writers' lock.
    pub fn update_within<T>(
        &self,
        wait: Duration,
        change: impl FnOnce(&mut BTreeMap<String, SessionMeta>) -> Result<T>,
    ) -> Result<T> {
        let _lock = self.lock(wait)?;
        // The flock serialises writers (threads open it separately); the
        // cache is locked only to install the result, not across the fsync.
        let mut sessions = load(&self.path).map_err(|reason| {
            self.cache().broken = Some(reason.clone());
            Error::new(libc::EIO, reason)
        })?;
        let before = sessions.clone();
        let result = change(&mut sessions)?;
        // Each record that changed is dated, so one session's edit moves
        // only its own files' times.
        let now = crate::runtime::record::now_ms();
        for (key, meta) in sessions.iter_mut() {
            if before.get(key) != Some(meta) {
                meta.changed_ms = now;
            }
        }
        self.write(&sessions)?;
        let written = stamp(&self.path);
        let mut cache = self.cache();
        cache.stamp = written;
        cache.sessions = sessions;
        cache.broken = None;
        cache.generation += 1;
        Ok(result)
    }

    fn write(&self, sessions: &BTreeMap<String, SessionMeta>) -> Result<()> {
        let tmp = self
            .path
            .with_extension(format!("json.tmp{}", std::process::id()));
        let body = serde_json::to_vec_pretty(&SidecarFile {
            sessions: sessions.clone(),
        })
        .expect("sidecar serialises");
        let written = File::create(&tmp)
            .and_then(|mut f| f.write_all(&body).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .and_then(|()| File::open(self.path.parent().unwrap_or(Path::new("/")))?.sync_all());
        written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io(&format!("cannot write {}", self.path.display()), &e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_handles_see_each_others_writes() {
        let dir = tempfile::tempdir().unwrap();
        let a = Sidecar::open(dir.path());
        let b = Sidecar::open(dir.path());
        a.update(|s| {
            s.insert("shell:x".into(), SessionMeta::default());
            Ok(())
        })
        .unwrap();
        b.update(|s| {
            s.insert("shell:y".into(), SessionMeta::default());
            Ok(())
        })
        .unwrap();
        assert_eq!(a.all().len(), 2);
        assert!(b.get("shell:x").is_some());
    }

    #[test]
    fn a_change_dates_only_the_records_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sidecar::open(dir.path());
        s.update(|all| {
            all.insert("shell:a".into(), SessionMeta::default());
            all.insert("shell:b".into(), SessionMeta::default());
            Ok(())
        })
        .unwrap();
        let b_before = s.get("shell:b").unwrap().changed_ms;
        assert!(b_before > 0);
        let start = std::time::Instant::now();
        while crate::runtime::record::now_ms() == b_before {
            assert!(start.elapsed().as_secs() < 5);
            std::thread::yield_now();
        }
        s.update(|all| {
            all.get_mut("shell:a").unwrap().title = Some("t".into());
            Ok(())
        })
        .unwrap();
        assert!(s.get("shell:a").unwrap().changed_ms > b_before);
        assert_eq!(s.get("shell:b").unwrap().changed_ms, b_before);
    }

    #[test]
    fn the_generation_moves_with_every_change_by_anyone() {
        let dir = tempfile::tempdir().unwrap();
        let a = Sidecar::open(dir.path());
        let b = Sidecar::open(dir.path());
        let first = a.generation();
        assert_eq!(a.generation(), first, "nothing changed");
        for i in 0..3 {
            // Quick writes, as many as fit in one tick of a coarse clock.
            b.update(|s| {
                s.insert(format!("shell:{i}"), SessionMeta::default());
                Ok(())
            })
            .unwrap();
            let seen = a.generation();
            assert_ne!(seen, first);
            a.update(|s| {
                s.remove(&format!("shell:{i}"));
                Ok(())
            })
            .unwrap();
            assert_ne!(a.generation(), seen);
        }
    }

    #[test]
    fn a_failed_change_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sidecar::open(dir.path());
        let err = s
            .update(|m| {
                m.insert("shell:z".into(), SessionMeta::default());
                Err::<(), _>(Error::invalid("no"))
            })
            .unwrap_err();
        assert_eq!(err.errno, libc::EINVAL);
        assert!(s.all().is_empty());
    }

    fn archive(m: &mut BTreeMap<String, SessionMeta>) -> Result<()> {
        m.entry("shell:a".into()).or_default().archived = true;
        Ok(())
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("prepared"))
            .collect()
    }

    #[test]
    fn a_prepared_change_is_installed_by_its_commit_only() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sidecar::open(dir.path());
        let prepared = s.prepare(archive).unwrap();
        assert!(s.get("shell:a").is_none(), "not before the commit");
        s.commit(prepared, archive).unwrap();
        assert!(s.get("shell:a").unwrap().archived);
        assert!(Sidecar::open(dir.path()).get("shell:a").unwrap().archived);
        assert!(leftovers(dir.path()).is_empty());
        // Dropped without a commit: nothing changes, nothing is left.
        let prepared = s
            .prepare(|m| {
                m.clear();
                Ok(())
            })
            .unwrap();
        drop(prepared);
        assert!(s.get("shell:a").is_some());
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_commit_keeps_what_another_writer_did_in_between() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sidecar::open(dir.path());
        let prepared = s.prepare(archive).unwrap();
        Sidecar::open(dir.path())
            .update(|m| {
                m.insert("shell:b".into(), SessionMeta::default());
                Ok(())
            })
            .unwrap();
        s.commit(prepared, archive).unwrap();
        let all = Sidecar::open(dir.path()).all();
        assert!(all["shell:a"].archived);
        assert!(
            all.contains_key("shell:b"),
            "the other writer's change is kept"
        );
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_damaged_file_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("sidecar.json"), b"{not json").unwrap();
        let s = Sidecar::open(dir.path());
        assert!(s.all().is_empty());
        assert!(s.update(|_| Ok(())).is_err());
        assert_eq!(
            std::fs::read(dir.path().join("sidecar.json")).unwrap(),
            b"{not json"
        );
    }
}
