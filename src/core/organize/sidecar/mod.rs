//! sessionfs's own metadata store (SPEC §6), keyed by session key, never
//! inside an engine's store. Every change is made under an exclusive
//! `flock` taken by every writer in any daemon, to the newest records on
//! disk, and appended to the journal (see [`journal`]) and synced before it
//! is installed in memory: two daemons never lose each other's edits, a
//! crash keeps a change whole or not at all, and a change costs the same
//! at ten records as at a hundred thousand. A change waits for the lock for
//! a bounded time (see [`crate::filelock`]), then fails with ETIMEDOUT,
//! changing nothing.

mod journal;
mod records;

pub use records::{Change, Records, Written};

use crate::error::{Error, Result};
use crate::filelock::{SharedLock, LOCK_WAIT};
use crate::sync::lock;
use journal::Stamp;
use records::Index;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The journal is folded into the base once it is bigger than the base
/// and than this.
const COMPACT_MIN: u64 = 256 << 10;

/// How long a compaction waits for the writers' lock: it is done later
/// when a writer holds it.
const COMPACT_WAIT: Duration = Duration::from_millis(100);

/// A change checked and given room on disk, not installed yet: see
/// [`Sidecar::prepare`].
#[derive(Debug)]
#[must_use = "a prepared change is installed by Sidecar::commit"]
pub struct Prepared {
    _checked: (),
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
    /// The git worktree made for the session (`new ... worktree=BRANCH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<Worktree>,
    /// The commit HEAD was on in the workspace when the session first
    /// launched, for a session without a worktree: what its `diff` is
    /// against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// The model asked for at `new`, passed at every launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The agent's permission mode asked for at `new`, passed at every launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The conversation this session was forked from: its first launch
    /// forks it, later ones resume its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_of: Option<String>,
}

impl SessionMeta {
    /// No record: the default, as a constant (every field empty).
    pub const fn none() -> SessionMeta {
        SessionMeta {
            created_ms: 0,
            title: None,
            project: None,
            favourite: false,
            archived: false,
            workspace: None,
            conversation: None,
            conversations: Vec::new(),
            changed_ms: 0,
            worktree: None,
            base_commit: None,
            model: None,
            mode: None,
            fork_of: None,
        }
    }
}

/// A session's git worktree, as `new` made it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    /// The repository it was made from (its top level).
    pub repo: String,
    /// Where it is checked out.
    pub path: String,
    pub branch: String,
    /// What the branch started from, as given (or the repository's HEAD
    /// then: its branch, else its commit).
    pub base: String,
    /// The commit `base` named then.
    pub base_commit: String,
    /// Removed by `prune`; the branch is kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pruned: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Default)]
struct Cache {
    index: Index,
    /// The base file as last read.
    base: Stamp,
    /// The journal as last read, and how much of it is installed.
    journal: Stamp,
    read_to: u64,
    /// Why the records on disk could not be read; writes are refused
    /// meanwhile so a damaged file is never overwritten with less than it
    /// held.
    broken: Option<String>,
}

#[derive(Debug)]
pub struct Sidecar {
    base: PathBuf,
    journal: PathBuf,
    lock: SharedLock,
    cache: Mutex<Cache>,
}

/// What a look at the files on disk says to read.
enum Catch {
    /// The journal grew: its lines from this offset.
    Tail(u64, Option<u64>),
    /// Read everything again.
    All,
}

/// Reads the base and the whole journal.
fn load(
    base: &Path,
    journal: &Path,
) -> std::result::Result<(BTreeMap<String, SessionMeta>, journal::Tail), String> {
    let mut sessions = journal::read_base(base)?;
    let tail = journal::read_tail(journal, 0)?;
    for line in &tail.lines {
        match &line.meta {
            Some(meta) => sessions.insert(line.key.clone(), meta.clone()),
            None => sessions.remove(&line.key),
        };
    }
    Ok((sessions, tail))
}

/// The records a state directory holds (the base with the journal over
/// it), read without a daemon: for tools and tests.
pub fn read_records(
    state_dir: &Path,
) -> std::result::Result<BTreeMap<String, SessionMeta>, String> {
    load(
        &state_dir.join("sidecar.json"),
        &state_dir.join("sidecar.journal"),
    )
    .map(|(sessions, _)| sessions)
}

impl Sidecar {
    pub fn open(state_dir: &Path) -> Sidecar {
        let sidecar = Sidecar {
            base: state_dir.join("sidecar.json"),
            journal: state_dir.join("sidecar.journal"),
            lock: SharedLock::new(state_dir.join("sidecar.lock"), "the metadata lock"),
            cache: Mutex::new(Cache::default()),
        };
        drop(sidecar.refresh());
        sidecar
    }

    fn cache(&self) -> MutexGuard<'_, Cache> {
        lock(&self.cache)
    }

    /// Reads what another writer changed since the last look: the new
    /// journal lines, or everything when the files were replaced. The
    /// files are read with the cache unlocked: every `getattr` comes here.
    fn refresh(&self) -> MutexGuard<'_, Cache> {
        let base = journal::stamp(&self.base);
        let journal = journal::stamp(&self.journal);
        let catch = {
            let cache = self.cache();
            if base == cache.base
                && journal == cache.journal
                && !(base.is_none() && cache.broken.is_some())
            {
                return cache;
            }
            let same_journal = match (journal, cache.journal) {
                (Some(now), Some(then)) => now.ino == then.ino && now.size >= cache.read_to,
                (None, None) => true,
                _ => false,
            };
            if base == cache.base && same_journal && cache.broken.is_none() {
                Catch::Tail(cache.read_to, journal.map(|j| j.ino))
            } else {
                Catch::All
            }
        };
        match catch {
            Catch::Tail(from, ino) => {
                let tail = journal::read_tail(&self.journal, from);
                let mut cache = self.cache();
                // Another thread read it meanwhile: what it installed holds.
                if cache.read_to != from || cache.journal.map(|j| j.ino) != ino {
                    return cache;
                }
                match tail {
                    Ok(tail) if tail.ino == ino => {
                        for line in tail.lines {
                            cache.index.set(line.key, line.meta);
                        }
                        cache.read_to = from + tail.consumed;
                        cache.journal = journal;
                    }
                    // Replaced between the look and the read: next time.
                    Ok(_) => {}
                    Err(reason) => Self::broke(&mut cache, reason),
                }
                cache
            }
            Catch::All => {
                let loaded = load(&self.base, &self.journal);
                let mut cache = self.cache();
                if cache.base == base && cache.journal == journal && cache.broken.is_none() {
                    // Another thread installed this version meanwhile.
                    return cache;
                }
                cache.base = base;
                cache.journal = journal;
                match loaded {
                    Ok((sessions, tail)) => {
                        cache.index.reload(sessions);
                        cache.read_to = tail.consumed;
                        cache.broken = None;
                    }
                    Err(reason) => {
                        cache.index.generation += 1;
                        Self::broke(&mut cache, reason);
                    }
                }
                cache
            }
        }
    }

    fn broke(cache: &mut Cache, reason: String) {
        if cache.broken.as_deref() != Some(reason.as_str()) {
            log::error!("{reason}; metadata changes are refused until it is repaired");
        }
        cache.broken = Some(reason);
    }

    /// When the metadata last changed on disk (by any daemon).
    pub fn modified(&self) -> std::time::SystemTime {
        let mtime = |p: &Path| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH)
        };
        mtime(&self.base).max(mtime(&self.journal))
    }

    /// Changes whenever the metadata does (by any daemon), as of this call.
    pub fn generation(&self) -> u64 {
        self.refresh().index.generation
    }

    /// The changes since generation `since`, oldest first, and the
    /// generation they lead to, as of this call; `None` when they are not
    /// all known any more.
    pub fn changes_since(&self, since: u64) -> Option<(u64, Vec<Change>)> {
        let cache = self.refresh();
        let changes = cache.index.changes_since(since)?;
        Some((cache.index.generation, changes))
    }

    pub fn get(&self, key: &str) -> Option<SessionMeta> {
        self.refresh().index.sessions.get(key).cloned()
    }

    pub fn all(&self) -> BTreeMap<String, SessionMeta> {
        self.refresh().index.sessions.clone()
    }

    /// The session whose record names `conversation` as its current or an
    /// earlier conversation, other than its own id.
    pub fn owner_of(&self, conversation: &crate::key::SessionKey) -> Option<String> {
        self.refresh().index.owner_of(conversation).cloned()
    }

    /// Takes the writers' lock: every writer, in any daemon, holds it
    /// from reading the records to installing its change. Held elsewhere
    /// for longer than `wait`: ETIMEDOUT, and nothing changes.
    fn lock(&self, wait: Duration) -> Result<File> {
        self.lock.take(wait)
    }

    /// Applies `change` to the newest records (the writers' lock held) and
    /// returns what it writes, dated, with where the journal's whole lines end.
    fn stage<T>(
        &self,
        change: impl FnOnce(&mut Records) -> Result<T>,
    ) -> Result<(T, Written, u64)> {
        let cache = self.refresh();
        if let Some(reason) = &cache.broken {
            return Err(Error::new(libc::EIO, reason.clone()));
        }
        let mut records = Records::new(&cache.index);
        let result = change(&mut records)?;
        // Each record that changed is dated, so one session's edit moves
        // only its own files' times.
        let now = crate::clock::now_ms();
        let changes = records
            .into_changes()
            .into_iter()
            .map(|(key, meta)| {
                let meta = meta.map(|mut m| {
                    m.changed_ms = now;
                    m
                });
                (key, meta)
            })
            .collect();
        Ok((result, changes, cache.read_to))
    }

    /// Appends `changes` (staged at `at`) and installs them.
    fn write(&self, changes: Written, at: u64) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let (end, stamp) = journal::append(&self.journal, at, &journal::encode(&changes))
            .map_err(|e| Error::io(&format!("cannot write {}", self.journal.display()), &e))?;
        let mut cache = self.cache();
        for (key, meta) in changes {
            cache.index.set(key, meta);
        }
        // A reader may have installed some of these lines already (each
        // holds the whole record, so installing one twice changes nothing);
        // no other writer can have appended after them: the lock is held.
        cache.read_to = end;
        cache.journal = stamp;
        Ok(())
    }

    /// Checks `change` against the newest records and reserves room on disk
    /// for what it writes, without installing it: a full disk fails here
    /// and changes nothing. [`Sidecar::commit`] installs it; the lock is
    /// not held in between.
    pub fn prepare(&self, change: impl FnOnce(&mut Records) -> Result<()>) -> Result<Prepared> {
        let _lock = self.lock(LOCK_WAIT)?;
        let ((), changes, _) = self.stage(change)?;
        let len = journal::encode(&changes).len() as u64;
        journal::reserve(&self.journal, len)
            .map_err(|e| Error::io(&format!("cannot write {}", self.journal.display()), &e))?;
        Ok(Prepared { _checked: () })
    }

    /// Installs a prepared change: `change` (the same change) is applied
    /// to the newest records, so nothing another writer did meanwhile is lost.
    pub fn commit(
        &self,
        prepared: Prepared,
        change: impl FnOnce(&mut Records) -> Result<()>,
    ) -> Result<()> {
        drop(prepared);
        self.update(change)
    }

    /// Applies `change` to the newest records and writes it durably.
    pub fn update<T>(&self, change: impl FnOnce(&mut Records) -> Result<T>) -> Result<T> {
        self.update_within(LOCK_WAIT, change)
    }

    /// [`Sidecar::update`], waiting at most `wait` for the writers' lock.
    pub fn update_within<T>(
        &self,
        wait: Duration,
        change: impl FnOnce(&mut Records) -> Result<T>,
    ) -> Result<T> {
        let _lock = self.lock(wait)?;
        let (result, changes, at) = self.stage(change)?;
        self.write(changes, at)?;
        Ok(result)
    }

    /// Folds the journal into the base once it has grown past it. Called
    /// from a thread of its own: it costs a pass over every record.
    pub fn compact_if_due(&self) {
        let due = |cache: &Cache| {
            let journal = cache.journal.map_or(0, |j| j.size);
            let base = cache.base.map_or(0, |b| b.size);
            cache.broken.is_none() && journal > COMPACT_MIN && journal > base
        };
        if !due(&self.refresh()) {
            return;
        }
        let Ok(_lock) = self.lock(COMPACT_WAIT) else {
            return;
        };
        let sessions = {
            let cache = self.refresh();
            if !due(&cache) {
                return;
            }
            cache.index.sessions.clone()
        };
        match journal::compact(&self.base, &self.journal, sessions) {
            Ok((base, journal)) => {
                let mut cache = self.cache();
                cache.base = base;
                cache.journal = journal;
                cache.read_to = 0;
                log::debug!(
                    "the metadata journal is folded into {}",
                    self.base.display()
                );
            }
            Err(e) => log::warn!("cannot fold the metadata journal: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_record_is_the_default_record() {
        assert_eq!(SessionMeta::none(), SessionMeta::default());
    }

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
        while crate::clock::now_ms() == b_before {
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

    fn archive(m: &mut Records) -> Result<()> {
        m.entry_or("shell:a", SessionMeta::default).archived = true;
        Ok(())
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("tmp"))
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
                m.remove("shell:a");
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

    fn title(s: &Sidecar, key: &str, title: &str) {
        s.update(|all| {
            all.entry_or(key, SessionMeta::default).title = Some(title.into());
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn a_change_appends_to_the_journal_and_leaves_the_base_alone() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sidecar::open(dir.path());
        title(&s, "shell:a", "one");
        let base = std::fs::read(dir.path().join("sidecar.json")).ok();
        let journal = std::fs::read(dir.path().join("sidecar.journal")).unwrap();
        title(&s, "shell:b", "two");
        assert_eq!(std::fs::read(dir.path().join("sidecar.json")).ok(), base);
        let grown = std::fs::read(dir.path().join("sidecar.journal")).unwrap();
        assert!(grown.starts_with(&journal) && grown.len() > journal.len());
        assert_eq!(grown.iter().filter(|b| **b == b'\n').count(), 2);
        let records = read_records(dir.path()).unwrap();
        assert_eq!(records["shell:b"].title.as_deref(), Some("two"));
    }

    #[test]
    fn another_handle_reads_only_the_new_lines_and_sees_each_change() {
        let dir = tempfile::tempdir().unwrap();
        let a = Sidecar::open(dir.path());
        let b = Sidecar::open(dir.path());
        for i in 0..20 {
            title(&a, &format!("shell:{i}"), "t");
            let before = b.generation();
            title(&a, "shell:0", &format!("round {i}"));
            assert_eq!(
                b.get("shell:0").unwrap().title.as_deref(),
                Some(format!("round {i}").as_str())
            );
            let (_, changes) = b.changes_since(before).unwrap();
            assert_eq!(changes.len(), 1, "{changes:?}");
            assert_eq!(changes[0].key, "shell:0");
        }
    }

    /// A sidecar with one record `shell:a`, then `extra` written at the
    /// journal's end behind its back; the journal's path and its bytes.
    fn journal_ending_with(dir: &Path, extra: &[u8]) -> (Sidecar, PathBuf, Vec<u8>) {
        let s = Sidecar::open(dir);
        title(&s, "shell:a", "kept");
        let journal = dir.join("sidecar.journal");
        let mut bytes = std::fs::read(&journal).unwrap();
        bytes.extend_from_slice(extra);
        std::fs::write(&journal, &bytes).unwrap();
        (s, journal, bytes)
    }

    #[test]
    fn a_line_torn_by_a_crash_is_ignored_then_cut_by_the_next_change() {
        let dir = tempfile::tempdir().unwrap();
        journal_ending_with(dir.path(), b"{\"key\":\"shell:b\",\"meta\":{\"crea");
        let fresh = Sidecar::open(dir.path());
        assert!(fresh.get("shell:b").is_none());
        assert_eq!(fresh.get("shell:a").unwrap().title.as_deref(), Some("kept"));
        title(&fresh, "shell:c", "after");
        let records = read_records(dir.path()).unwrap();
        assert_eq!(records.len(), 2, "{records:?}");
        assert_eq!(records["shell:c"].title.as_deref(), Some("after"));
    }

    #[test]
    fn a_damaged_journal_line_refuses_changes_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (s, journal, damaged) = journal_ending_with(dir.path(), b"not json\n");
        let err = s
            .update(|all| {
                all.remove("shell:a");
                Ok(())
            })
            .unwrap_err();
        assert_eq!(err.errno, libc::EIO);
        assert!(err.message.contains("damaged"), "{}", err.message);
        assert_eq!(std::fs::read(&journal).unwrap(), damaged);
    }

    #[test]
    fn a_compaction_folds_the_journal_into_the_base_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sidecar::open(dir.path());
        let other = Sidecar::open(dir.path());
        let mut n = 0;
        while journal::stamp(&dir.path().join("sidecar.journal")).map_or(0, |j| j.size)
            <= COMPACT_MIN
        {
            title(&s, &format!("shell:{}", n % 50), &format!("title {n}"));
            n += 1;
        }
        let before = s.all();
        s.compact_if_due();
        assert_eq!(
            std::fs::metadata(dir.path().join("sidecar.journal"))
                .unwrap()
                .len(),
            0
        );
        assert_eq!(s.all(), before);
        assert_eq!(other.all(), before, "another handle reads the new base");
        assert_eq!(read_records(dir.path()).unwrap(), before);
        // Changes go on after it, seen by both.
        title(&other, "shell:new", "after");
        assert_eq!(s.get("shell:new").unwrap().title.as_deref(), Some("after"));
    }
}
