//! Conversations found in the engines' own stores (SPEC §2): every Claude
//! Code, Codex, Gemini and opencode session already on the machine shows
//! up without being asked. Nothing is ever written into a store; opencode's
//! SQLite store is read into files of sessionfs's own
//! ([`opencode_mirror`]), which are indexed as the other stores' files are.
//!
//! The catalog is an index, not a scan: one entry per conversation with its
//! file's size, mtime and inode and a summary read from a bounded head and
//! tail of it. inotify says which files appeared, changed or went (its
//! queue is read, without waiting, whenever the index is consulted, so a
//! file written before a request is seen by it); a periodic walk is the
//! safety net. The index is saved in the state directory, so a restart
//! re-reads only files whose size or mtime changed. Walks and reads happen
//! outside the index's lock; their results are merged under it.

mod decoded;
pub mod opencode_db;
pub mod opencode_mirror;
mod persist;
mod summary;
mod walk;
mod watch;

pub use summary::{Stamp, Summary};
pub use walk::codex_rollout_id;

use crate::engine::{EngineTable, Store};
use crate::key::SessionKey;
use crate::sync::lock;
use crate::transcript::StoreKind;
pub use decoded::{DecodedCopies, NotDecoded, MAX_DECODED_BYTES};
use std::collections::{BTreeSet, HashMap};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use walk::{Root, Seen};
use watch::{Change, Watcher};

/// Without inotify, how long a walk is trusted before a listing walks again.
const RESCAN_AFTER: Duration = Duration::from_secs(1);
/// With inotify, how often the background thread walks anyway.
const SAFETY_RESCAN: Duration = Duration::from_secs(60);
/// How often the background thread looks at the event queue.
const TICK: Duration = Duration::from_millis(250);
/// Files summarised per batch (each batch merged at once).
const BATCH: usize = 256;

/// One conversation file of an engine's store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFile {
    pub kind: StoreKind,
    pub path: PathBuf,
    /// Modification time, milliseconds since the epoch.
    pub mtime_ms: u64,
}

/// One conversation as the index knows it.
#[derive(Debug, Clone)]
pub struct Indexed {
    pub file: StoreFile,
    pub stamp: Stamp,
    /// Possibly of an older state of the file: see [`Indexed::is_summarised`].
    /// Set through [`Indexed::set_summary`], which keeps what is made of it.
    pub(crate) summary: Option<Arc<Summary>>,
    /// When this entry was last changed (the index's sequence number):
    /// the walk or batch of events it is from.
    seq: u64,
    /// The index's version once this entry was in it: a batch or walk is
    /// merged after its sequence number was taken, and a reader that read
    /// the version meanwhile must still see the entry as changed after it.
    merged: u64,
    /// The summary's time of the store's first row, kept beside it: a
    /// listing reads it for every conversation.
    created_ms: Option<u64>,
    /// What the listing made of this entry as it is: an entry that changes
    /// is a new one (or has this emptied), so the text is never stale.
    pub listing_text: MadeOnce,
}

/// A text made once from an unchanging value and kept with it, with the
/// text's digest. A copy of the value starts empty, as it may be changed;
/// [`MadeOnce::forget`] empties it when something else the text shows
/// changed (a conversation's usage counted).
#[derive(Debug, Default)]
pub struct MadeOnce(Mutex<Made>);

#[derive(Debug, Default)]
struct Made {
    /// Bumped by every forget: a text made across one is not kept.
    forgets: u64,
    text: Option<(Arc<[u8]>, u64)>,
}

impl Clone for MadeOnce {
    fn clone(&self) -> MadeOnce {
        MadeOnce::default()
    }
}

impl MadeOnce {
    /// The text and its digest, made now by `make` if they are not there.
    /// `make` runs without the lock held.
    pub fn get_or_make(&self, make: impl FnOnce() -> (Arc<[u8]>, u64)) -> (Arc<[u8]>, u64) {
        let forgets = {
            let made = lock(&self.0);
            if let Some(text) = &made.text {
                return text.clone();
            }
            made.forgets
        };
        let text = make();
        let mut made = lock(&self.0);
        if made.forgets == forgets {
            made.text = Some(text.clone());
        }
        text
    }

    /// Drops the text kept, and any being made now.
    pub fn forget(&self) {
        let mut made = lock(&self.0);
        made.forgets += 1;
        made.text = None;
    }
}

impl Indexed {
    fn new(file: StoreFile, stamp: Stamp, summary: Option<Arc<Summary>>, seq: u64) -> Indexed {
        Indexed {
            file,
            stamp,
            created_ms: summary.as_ref().and_then(|s| s.skim.created_ms),
            summary,
            seq,
            merged: seq,
            listing_text: MadeOnce::default(),
        }
    }

    /// Takes `summary` as this entry's; what was made of the old one goes.
    fn set_summary(&mut self, summary: Summary) {
        self.created_ms = summary.skim.created_ms;
        self.summary = Some(Arc::new(summary));
        self.listing_text = MadeOnce::default();
    }

    /// Whether the summary is of the file as it is now.
    pub fn is_summarised(&self) -> bool {
        self.summary.as_ref().is_some_and(|s| s.at == self.stamp)
    }

    /// The store's own title, else its first prompt.
    pub fn title(&self) -> Option<&str> {
        self.summary.as_deref().and_then(|s| s.title())
    }

    /// The directory the agent ran in.
    pub fn cwd(&self) -> Option<&str> {
        self.summary.as_ref().and_then(|s| s.skim.cwd.as_deref())
    }

    /// The index's version (see [`Catalog::version`]) when this entry last
    /// changed: an entry not changed since a version needs no second look.
    pub fn changed_at(&self) -> u64 {
        self.merged
    }

    /// The time of the store's first row.
    pub fn created_ms(&self) -> Option<u64> {
        self.created_ms
    }
}

/// Every conversation, by key.
pub type StoreFiles = HashMap<SessionKey, Arc<Indexed>>;

#[derive(Debug, Default)]
struct Index {
    /// Shared with readers: a listing holds it while it works, changes
    /// copy it only if one does.
    files: Arc<StoreFiles>,
    /// The keys of `files` whose summary is missing or of an older state
    /// of the file: what a listing reads first, found without a look at
    /// every conversation.
    stale: BTreeSet<SessionKey>,
    /// Bumped by every change, so a walk does not undo what changed after
    /// it started.
    seq: u64,
    /// Bumped when a conversation comes or goes, not when one is written
    /// to: what the listing's members depend on.
    keys_version: u64,
    /// Keys removed by events, and when: a walk that started before does
    /// not bring them back.
    tombs: HashMap<SessionKey, u64>,
    walked: Option<Instant>,
    /// Differs from what was saved.
    dirty: bool,
    /// Counts files summarised for the first time; `saved_summaries` is
    /// its value in the last file written.
    new_summaries: u64,
    saved_summaries: u64,
    /// Counts summaries read again after their file changed;
    /// `saved_resummaries` is its value in the last file written.
    resummaries: u64,
    saved_resummaries: u64,
    changed_at: Option<Instant>,
    saved_at: Option<Instant>,
    /// Events were lost: walk everything.
    overflow: bool,
}

/// Keeps `stale` in step with one entry of `files` (None: it is gone).
fn note_stale(stale: &mut BTreeSet<SessionKey>, key: &SessionKey, entry: Option<&Indexed>) {
    if entry.is_some_and(|e| !e.is_summarised()) {
        if !stale.contains(key) {
            stale.insert(key.clone());
        }
    } else {
        stale.remove(key);
    }
}

impl Index {
    /// Every stale key found by looking at every entry: after a change of
    /// the whole index (a load, a walk).
    fn restale(&mut self) {
        self.stale = self
            .files
            .iter()
            .filter(|(_, e)| !e.is_summarised())
            .map(|(k, _)| k.clone())
            .collect();
    }

    fn touch(&mut self) {
        self.seq += 1;
        self.dirty = true;
        self.changed_at = Some(Instant::now());
    }
}

/// How far the index is, for the root `status`.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CatalogStats {
    pub conversations: usize,
    pub summarised: usize,
    pub watching: bool,
    /// Every summary read so far is saved.
    pub saved: bool,
    /// Files this process summarised (a bounded read each) since it started.
    pub files_read: usize,
}

/// The stores of every engine, indexed.
#[derive(Debug)]
pub struct Catalog {
    roots: Vec<Root>,
    /// opencode's stores, mirrored into files under the state directory.
    mirrors: Vec<opencode_mirror::Mirror>,
    index: Mutex<Index>,
    watcher: Mutex<Option<Watcher>>,
    walking: AtomicBool,
    saved: Option<PathBuf>,
    /// Files summarised by this process (each a bounded read).
    reads: AtomicUsize,
    /// Copies of the whole index made by [`Catalog::all`].
    #[cfg(test)]
    pub copies: AtomicUsize,
}

/// A file's key, if its root's engine and its id make one.
fn key_of(roots: &[Root], root: usize, id: &str) -> Option<SessionKey> {
    SessionKey::new(&roots[root].engine, id)
        .inspect_err(|_| log::debug!("{id}: not a usable session id"))
        .ok()
}

/// Which of two files of one conversation is listed: of a rollout both
/// plain and compressed, the plain one (newer); of Gemini's files sharing a
/// `sessionId` (a resume also writes a stub of two rows), the larger.
fn prefer(kind: StoreKind, old: (&Path, u64), new: (&Path, u64)) -> bool {
    if kind == StoreKind::Gemini {
        return new.1 > old.1 || (new.1 == old.1 && new.0 == old.0);
    }
    crate::transcript::is_compressed(old.0) || !crate::transcript::is_compressed(new.0)
}

impl Catalog {
    /// The roots of the engines' stores; an opencode store's is its mirror
    /// under `state_dir` (none without one).
    fn roots(
        engines: &EngineTable,
        state_dir: Option<&Path>,
    ) -> (Vec<Root>, Vec<opencode_mirror::Mirror>) {
        let mut mirrors = Vec::new();
        let roots = engines
            .iter()
            .filter_map(|e| {
                let (kind, path) = match &e.store {
                    Store::Claude(root) => (StoreKind::Claude, root.clone()),
                    Store::Codex(root) => (StoreKind::Codex, root.clone()),
                    Store::Gemini(root) => (StoreKind::Gemini, root.clone()),
                    Store::Opencode(data) => {
                        let base = state_dir?.join("stores").join(&e.name);
                        let mirror = opencode_mirror::Mirror::new(
                            data.clone(),
                            base.join("mirror"),
                            base.join("scratch"),
                        );
                        let path = mirror.dir().to_path_buf();
                        mirrors.push(mirror);
                        (StoreKind::Opencode, path)
                    }
                    Store::None | Store::Hosted => return None,
                };
                Some(Root {
                    engine: e.name.clone(),
                    kind,
                    path,
                    header_ids: Default::default(),
                    defer_headers: Default::default(),
                    deferred: Default::default(),
                })
            })
            .collect();
        (roots, mirrors)
    }

    /// Brings the mirrored stores up to date (each only if its database
    /// changed since it was last read), those not made whole yet too.
    fn sync_mirrors(&self) {
        for m in &self.mirrors {
            m.sync();
        }
    }

    /// [`Catalog::sync_mirrors`] for a request: a mirror not made whole a
    /// first time is left to the catalog's thread.
    fn sync_made_mirrors(&self) {
        for m in &self.mirrors {
            m.sync_if_made();
        }
    }

    /// An index that walks the stores when consulted (no inotify, nothing
    /// saved); the first walk happens at the first use.
    pub fn new(engines: &EngineTable) -> Catalog {
        Self::with_state(engines, None)
    }

    fn with_state(engines: &EngineTable, state_dir: Option<&Path>) -> Catalog {
        let (roots, mirrors) = Self::roots(engines, state_dir);
        Catalog {
            roots,
            mirrors,
            index: Mutex::new(Index::default()),
            watcher: Mutex::new(None),
            walking: AtomicBool::new(false),
            saved: None,
            reads: AtomicUsize::new(0),
            #[cfg(test)]
            copies: AtomicUsize::new(0),
        }
    }

    /// The index saved in `state_dir`, brought up to date by one walk
    /// (a `stat` per file). With `watch` (a daemon's, kept current by
    /// [`Catalog::start`]), inotify watches every directory from before it
    /// is walked, and the opencode mirrors are made by the catalog's thread
    /// (their files come as inotify says); without, they are made now.
    pub fn open(engines: &EngineTable, state_dir: &Path, watch: bool) -> Catalog {
        let mut catalog = Catalog::with_state(engines, Some(state_dir));
        if watch {
            // There to be watched from the start.
            for m in &catalog.mirrors {
                let files = m.dir().join(opencode_mirror::TOP);
                if let Err(e) = crate::atomic::private_dir(&files) {
                    log::warn!("cannot make {}: {e}", files.display());
                }
            }
        } else {
            catalog.sync_mirrors();
        }
        let saved = state_dir.join("catalog.json");
        {
            let loaded = persist::load(&saved, &catalog.roots);
            // The Gemini files already known are not read again.
            for (key, e) in &loaded {
                if let Some(r) = catalog
                    .roots
                    .iter()
                    .find(|r| r.kind == StoreKind::Gemini && r.engine == key.engine())
                {
                    lock(&r.header_ids).insert(e.stamp.ino, key.id().to_string());
                }
            }
            let mut index = lock(&catalog.index);
            index.files = Arc::new(loaded.into_iter().map(|(k, e)| (k, Arc::new(e))).collect());
            index.restale();
        }
        catalog.saved = Some(saved);
        if watch {
            match Watcher::new() {
                Ok(w) => *lock(&catalog.watcher) = Some(w),
                Err(e) => log::warn!("no inotify ({e}); the stores are walked every second"),
            }
        }
        // A daemon's first walk only looks: the Gemini files it has not
        // seen are read by its catalog thread, and come as they are read.
        for r in catalog.roots.iter().filter(|_| watch) {
            r.defer_headers.store(true, Ordering::Release);
        }
        catalog.rescan();
        for r in &catalog.roots {
            r.defer_headers.store(false, Ordering::Release);
        }
        catalog
    }

    /// Reads the headers of the Gemini files the first walk left, and
    /// adds their conversations.
    fn read_deferred(&self) {
        let mut upserts = Vec::new();
        let mut removals = Vec::new();
        for (i, r) in self.roots.iter().enumerate() {
            let paths = std::mem::take(&mut *lock(&r.deferred));
            for path in paths {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let Some(id) = r.id_of(&path, name) else {
                    continue;
                };
                let Some(key) = key_of(&self.roots, i, &id) else {
                    continue;
                };
                self.look_at(i, key, id, path, &mut upserts, &mut removals);
            }
        }
        if upserts.is_empty() && removals.is_empty() {
            return;
        }
        let batch = {
            let mut index = lock(&self.index);
            index.seq += 1;
            index.seq
        };
        self.apply(Vec::new(), removals, upserts, batch);
    }

    /// Keeps the index current from a thread of its own: events, the
    /// periodic walk, summaries of new and changed files, saving.
    pub fn start(self: &Arc<Self>) {
        let catalog = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("catalog".into())
            .spawn(move || {
                // What the first walk left, then the mirrors (a fresh
                // state directory has none yet).
                if let Some(c) = catalog.upgrade() {
                    c.read_deferred();
                    c.sync_mirrors();
                }
                let mut looked_at = None;
                loop {
                    std::thread::sleep(TICK);
                    let Some(c) = catalog.upgrade() else { return };
                    c.background_tick(&mut looked_at);
                }
            });
        if let Err(e) = spawned {
            log::warn!("cannot start the catalog thread: {e}");
        }
    }

    /// `looked_at`: the index's version when every summary was last found
    /// current, so an idle index is not searched every tick.
    fn background_tick(&self, looked_at: &mut Option<u64>) {
        self.sync_mirrors();
        self.sync();
        let (due, version) = {
            let index = lock(&self.index);
            let due = index.overflow || index.walked.is_none_or(|t| t.elapsed() > SAFETY_RESCAN);
            (due, index.seq)
        };
        if due {
            self.rescan();
        }
        if due || *looked_at != Some(version) {
            // Summaries first, so a listing rarely has to read any itself.
            while self.summarise_stale(Some(BATCH)) == BATCH {}
            *looked_at = Some(lock(&self.index).seq);
        }
        self.save_if_due();
    }

    fn save_if_due(&self) {
        let due = {
            let index = lock(&self.index);
            let quiet = index
                .changed_at
                .is_none_or(|t| t.elapsed() > Duration::from_secs(1));
            let long_ago = index.saved_at.is_none_or(|t| t.elapsed() > SAFETY_RESCAN);
            let unsaved = index.new_summaries > index.saved_summaries;
            // Summaries read again are written out once they are a
            // hundredth of the index: a restart then reads at most that many
            // files again, and one busy conversation among 100,000 does not
            // rewrite every summary each minute.
            let again = index.resummaries - index.saved_resummaries;
            let worth = again.saturating_mul(100) >= index.files.len() as u64;
            index.dirty && quiet && (unsaved || (long_ago && worth))
        };
        if due {
            self.save();
        }
    }

    /// Writes the index to the state directory.
    pub fn save(&self) {
        let Some(path) = &self.saved else { return };
        let (files, new, again) = {
            let mut index = lock(&self.index);
            index.dirty = false;
            index.saved_at = Some(Instant::now());
            (index.files.clone(), index.new_summaries, index.resummaries)
        };
        match persist::save(path, &files) {
            Ok(()) => {
                let mut index = lock(&self.index);
                index.saved_summaries = index.saved_summaries.max(new);
                index.saved_resummaries = index.saved_resummaries.max(again);
            }
            Err(e) => {
                log::warn!("cannot save {}: {e}", path.display());
                lock(&self.index).dirty = true;
            }
        }
    }

    /// Saves if something was summarised since the last save (for
    /// one-shot users such as `sessionfs ls`).
    pub fn save_if_new(&self) {
        let unsaved = {
            let index = lock(&self.index);
            index.new_summaries > index.saved_summaries
        };
        if unsaved {
            self.save();
        }
    }

    fn watch_dir(&self, root: usize, dir: &Path, depth: u8) {
        if let Some(w) = lock(&self.watcher).as_mut() {
            w.watch(&self.roots, root, dir, depth);
        }
    }

    fn watching(&self) -> bool {
        lock(&self.watcher).is_some()
    }

    /// Walks every store (outside the lock) and merges what it saw.
    pub fn rescan(&self) {
        if self.walking.swap(true, Ordering::AcqRel) {
            // Another thread walks right now; its result will do.
            return;
        }
        let started = {
            let mut index = lock(&self.index);
            index.overflow = false;
            index.seq
        };
        let found = walk::walk_all(&self.roots, &mut |root, dir, depth| {
            self.watch_dir(root, dir, depth)
        });
        self.merge_walk(found, started);
        self.walking.store(false, Ordering::Release);
    }

    fn merge_walk(&self, found: Vec<Seen>, started: u64) {
        let mut seen: HashMap<SessionKey, Seen> = HashMap::with_capacity(found.len());
        for s in found {
            let Some(key) = key_of(&self.roots, s.root, &s.id) else {
                continue;
            };
            match seen.get(&key) {
                Some(old)
                    if !prefer(
                        self.roots[s.root].kind,
                        (&old.path, old.size),
                        (&s.path, s.size),
                    ) => {}
                _ => {
                    seen.insert(key, s);
                }
            }
        }
        let mut index = lock(&self.index);
        // What the walk saw is as of its start: any batch of events read
        // since is newer.
        let seq = started;
        let old = index.files.clone();
        let mut next: StoreFiles = HashMap::with_capacity(seen.len());
        for (k, e) in old.iter() {
            if e.seq > started {
                next.insert(k.clone(), e.clone());
            }
        }
        let mut changed = false;
        let mut found_new = false;
        for (key, s) in seen {
            if next.contains_key(&key) || index.tombs.get(&key).is_some_and(|t| *t > started) {
                continue;
            }
            let stamp = s.stamp();
            let entry = match old.get(&key) {
                Some(o) if o.file.path == s.path && o.stamp == stamp => o.clone(),
                o => {
                    changed = true;
                    if o.is_none() {
                        found_new = true;
                        log::debug!("{key}: found in {}", s.path.display());
                    }
                    let mut entry = Indexed::new(
                        StoreFile {
                            kind: self.roots[s.root].kind,
                            mtime_ms: s.mtime_ms,
                            path: s.path.clone(),
                        },
                        stamp,
                        o.filter(|o| o.file.path == s.path)
                            .and_then(|o| o.summary.clone()),
                        seq,
                    );
                    // The version the touch below makes.
                    entry.merged = index.seq + 1;
                    Arc::new(entry)
                }
            };
            next.insert(key, entry);
        }
        if changed || next.len() != old.len() {
            log::debug!("catalog: {} conversations in the stores", next.len());
            index.touch();
        }
        // Nothing new and as many as before: the same conversations.
        if found_new || next.len() != old.len() {
            index.keys_version += 1;
        }
        index.files = Arc::new(next);
        index.restale();
        index.tombs.retain(|_, t| *t > started);
        index.walked = Some(Instant::now());
    }

    /// Reads the events queued so far and applies them; without inotify,
    /// walks again if the last walk is older than a second.
    ///
    /// Each batch of events gets a sequence number when it is read; what
    /// its `stat`s find is merged only over entries older than it, so two
    /// threads applying batches (no lock is held meanwhile) never undo a
    /// newer one.
    pub fn sync(&self) {
        self.sync_made_mirrors();
        // Bound first: a guard in a match's scrutinee would live through its arms.
        let drained = {
            let mut watcher = lock(&self.watcher);
            watcher.as_mut().map(|w| {
                let changes = w.drain(&self.roots);
                let mut index = lock(&self.index);
                if !changes.is_empty() {
                    index.seq += 1;
                }
                (changes, index.seq)
            })
        };
        let (changes, batch) = match drained {
            Some(drained) => drained,
            None => {
                let stale = lock(&self.index)
                    .walked
                    .is_none_or(|t| t.elapsed() > RESCAN_AFTER);
                if stale {
                    self.rescan();
                }
                return;
            }
        };
        if changes.is_empty() {
            return;
        }
        let mut upserts: Vec<(SessionKey, Seen)> = Vec::new();
        let mut removals: Vec<(SessionKey, PathBuf)> = Vec::new();
        let mut gone_dirs: Vec<PathBuf> = Vec::new();
        for change in changes {
            match change {
                Change::File { root, path } => {
                    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    let Some(id) = self.roots[root].id_of(&path, name) else {
                        continue;
                    };
                    let Some(key) = key_of(&self.roots, root, &id) else {
                        continue;
                    };
                    self.look_at(root, key, id, path, &mut upserts, &mut removals);
                }
                Change::NewDir { root, path, depth } => {
                    let mut found = Vec::new();
                    walk::walk(
                        &self.roots,
                        root,
                        &path,
                        depth,
                        &mut |r, d, depth| self.watch_dir(r, d, depth),
                        &mut found,
                    );
                    for s in found {
                        if let Some(key) = key_of(&self.roots, s.root, &s.id) {
                            upserts.push((key, s));
                        }
                    }
                }
                Change::GoneDir { path } => gone_dirs.push(path),
                Change::Overflow => lock(&self.index).overflow = true,
            }
        }
        self.apply(gone_dirs, removals, upserts, batch);
    }

    /// Merges what events (batch `seq`) said: directories and files gone,
    /// files present.
    fn apply(
        &self,
        gone_dirs: Vec<PathBuf>,
        removals: Vec<(SessionKey, PathBuf)>,
        upserts: Vec<(SessionKey, Seen)>,
        seq: u64,
    ) {
        let mut index = lock(&self.index);
        let mut changed = false;
        let mut keys_changed = false;
        {
            let index = &mut *index;
            let files = Arc::make_mut(&mut index.files);
            for dir in gone_dirs {
                let gone: Vec<SessionKey> = files
                    .iter()
                    .filter(|(_, e)| e.seq <= seq && e.file.path.starts_with(&dir))
                    .map(|(k, _)| k.clone())
                    .collect();
                for key in gone {
                    files.remove(&key);
                    index.stale.remove(&key);
                    index.tombs.insert(key, seq);
                    changed = true;
                    keys_changed = true;
                }
            }
            for (key, path) in removals {
                if files
                    .get(&key)
                    .is_some_and(|e| e.file.path == path && e.seq <= seq)
                {
                    files.remove(&key);
                    index.stale.remove(&key);
                    let tomb = index.tombs.entry(key).or_insert(seq);
                    *tomb = (*tomb).max(seq);
                    changed = true;
                    keys_changed = true;
                }
            }
            for (key, s) in upserts {
                // A newer batch or walk already said more of this file.
                if index.tombs.get(&key).is_some_and(|t| *t > seq)
                    || files.get(&key).is_some_and(|e| e.seq > seq)
                {
                    continue;
                }
                let stamp = s.stamp();
                let summary = match files.get(&key) {
                    Some(o) if o.file.path == s.path && o.stamp == stamp => continue,
                    Some(o) if o.file.path == s.path => o.summary.clone(),
                    Some(o)
                        if !prefer(
                            self.roots[s.root].kind,
                            (&o.file.path, o.stamp.size),
                            (&s.path, s.size),
                        ) =>
                    {
                        continue
                    }
                    Some(_) => None,
                    None => {
                        log::debug!("{key}: found in {}", s.path.display());
                        keys_changed = true;
                        None
                    }
                };
                let mut entry = Indexed::new(
                    StoreFile {
                        kind: self.roots[s.root].kind,
                        mtime_ms: s.mtime_ms,
                        path: s.path,
                    },
                    stamp,
                    summary,
                    seq,
                );
                // The version the touch below makes.
                entry.merged = index.seq + 1;
                note_stale(&mut index.stale, &key, Some(&entry));
                files.insert(key, Arc::new(entry));
                changed = true;
            }
        }
        if changed {
            index.touch();
        }
        if keys_changed {
            index.keys_version += 1;
        }
    }

    /// One file an event named: present (an upsert) or gone (a removal,
    /// or for a plain rollout, its compressed successor).
    fn look_at(
        &self,
        root: usize,
        key: SessionKey,
        id: String,
        path: PathBuf,
        upserts: &mut Vec<(SessionKey, Seen)>,
        removals: &mut Vec<(SessionKey, PathBuf)>,
    ) {
        match walk::stat(root, id.clone(), path.clone()) {
            Some(s) => {
                // A compressed rollout whose plain one is still there waits.
                let plain = path
                    .to_string_lossy()
                    .strip_suffix(".zst")
                    .map(PathBuf::from);
                if !plain.is_some_and(|p| p.is_file()) {
                    upserts.push((key, s));
                }
            }
            None => {
                let zst = PathBuf::from(format!("{}.zst", path.display()));
                match (
                    crate::transcript::is_compressed(&path),
                    walk::stat(root, id, zst),
                ) {
                    (false, Some(s)) => upserts.push((key, s)),
                    _ => removals.push((key, path)),
                }
            }
        }
    }

    /// Makes sure what was written to the stores before this call is in
    /// the index.
    pub fn refresh(&self) {
        if self.watching() {
            self.sync();
        } else {
            self.rescan();
        }
    }

    /// Changes whenever the index does (after reading the events queued).
    pub fn version(&self) -> u64 {
        self.sync();
        lock(&self.index).seq
    }

    /// Changes whenever a conversation comes or goes (after reading the
    /// events queued); writes to one leave it as it is.
    pub fn keys_version(&self) -> u64 {
        self.sync();
        lock(&self.index).keys_version
    }

    /// Every conversation, current as of this call.
    pub fn files(&self) -> Arc<StoreFiles> {
        self.sync();
        lock(&self.index).files.clone()
    }

    /// Every conversation with a summary of its file as it is now (files
    /// changed since their last summary are read, a bounded part each).
    pub fn summarised(&self) -> Arc<StoreFiles> {
        self.sync();
        self.summarise_stale(None);
        lock(&self.index).files.clone()
    }

    /// Summarises up to `limit` entries whose summary is missing or old;
    /// returns how many it read.
    fn summarise_stale(&self, limit: Option<usize>) -> usize {
        let stale: Vec<(SessionKey, Arc<Indexed>)> = {
            let index = lock(&self.index);
            index
                .stale
                .iter()
                .take(limit.unwrap_or(usize::MAX))
                .filter_map(|k| Some((k.clone(), index.files.get(k)?.clone())))
                .collect()
        };
        let n = stale.len();
        self.summarise(stale);
        n
    }

    fn summarise(&self, stale: Vec<(SessionKey, Arc<Indexed>)>) {
        if stale.is_empty() {
            return;
        }
        self.reads.fetch_add(stale.len(), Ordering::Relaxed);
        let read: Vec<(SessionKey, Arc<Indexed>, Summary)> = stale
            .into_iter()
            .map(|(k, e)| {
                let s = summary::read(e.file.kind, &e.file.path, e.stamp, e.summary.as_deref());
                (k, e, s)
            })
            .collect();
        let mut index = lock(&self.index);
        let (mut fresh, mut again) = (0, 0);
        let mut changed = false;
        {
            let index = &mut *index;
            let files = Arc::make_mut(&mut index.files);
            for (key, was, summary) in read {
                let Some(now) = files.get_mut(&key) else {
                    continue;
                };
                // Only if the file is still the one read.
                if now.file.path != was.file.path || now.stamp != summary.at {
                    continue;
                }
                if now.summary.is_none() {
                    fresh += 1;
                } else {
                    again += 1;
                }
                changed |= now.summary.as_deref() != Some(&summary);
                Arc::make_mut(now).set_summary(summary);
                note_stale(&mut index.stale, &key, Some(&**now));
            }
        }
        index.new_summaries += fresh;
        index.resummaries += again;
        if changed {
            index.touch();
        }
    }

    /// Whether every conversation's summary is of its file as it is now.
    pub fn all_summarised(&self) -> bool {
        lock(&self.index).stale.is_empty()
    }

    /// One conversation's entry, its summary current.
    pub fn summary_of(&self, key: &SessionKey) -> Option<Arc<Indexed>> {
        let entry = self.files().get(key).cloned()?;
        if entry.is_summarised() {
            return Some(entry);
        }
        self.summarise(vec![(key.clone(), entry)]);
        lock(&self.index).files.get(key).cloned()
    }

    /// Drops the listing text kept for one conversation: something it
    /// shows besides its file changed. No walk, no read.
    pub fn forget_listing_text(&self, key: &SessionKey) {
        let entry = lock(&self.index).files.get(key).cloned();
        if let Some(entry) = entry {
            entry.listing_text.forget();
        }
    }

    /// Every conversation in the stores; `fresh` makes sure what was
    /// written before this call is in it.
    pub fn all(&self, fresh: bool) -> HashMap<SessionKey, StoreFile> {
        if fresh && !self.watching() {
            self.rescan();
        }
        #[cfg(test)]
        self.copies.fetch_add(1, Ordering::Relaxed);
        self.files()
            .iter()
            .map(|(k, e)| (k.clone(), e.file.clone()))
            .collect()
    }

    /// The store file of one conversation.
    pub fn find(&self, key: &SessionKey) -> Option<StoreFile> {
        self.kind_of(key.engine())?;
        if let Some(e) = self.files().get(key) {
            if e.file.path.exists() {
                return Some(e.file.clone());
            }
            // Gone since: what the events say next (a compressed successor?).
            self.sync();
            if !self.watching() {
                self.rescan();
            }
            return lock(&self.index)
                .files
                .get(key)
                .filter(|e| e.file.path.exists())
                .map(|e| e.file.clone());
        }
        if !self.watching() {
            let recent = lock(&self.index)
                .walked
                .is_some_and(|t| t.elapsed() < Duration::from_millis(100));
            if !recent {
                self.rescan();
                return lock(&self.index).files.get(key).map(|e| e.file.clone());
            }
        }
        None
    }

    pub fn kind_of(&self, engine: &str) -> Option<StoreKind> {
        self.roots
            .iter()
            .find(|r| r.engine == engine)
            .map(|r| r.kind)
    }

    pub fn stats(&self) -> CatalogStats {
        let watching = self.watching();
        let index = lock(&self.index);
        CatalogStats {
            conversations: index.files.len(),
            summarised: index.files.len().saturating_sub(index.stale.len()),
            watching,
            saved: index.new_summaries == index.saved_summaries,
            files_read: self.reads.load(Ordering::Relaxed),
        }
    }
}

/// The working directory a store's session ran in, from its first lines.
pub fn store_cwd(file: &StoreFile) -> Option<String> {
    use crate::transcript::{read_line_capped, NextLine};
    // The rows that say it are short: longer ones are read past, not kept.
    const ROW_MAX: usize = 1 << 20;
    let mut reader = BufReader::new(crate::transcript::open_store(&file.path, 0).ok()?);
    let mut line = Vec::new();
    for _ in 0..64 {
        match read_line_capped(&mut reader, &mut line, ROW_MAX).ok()? {
            NextLine::End => return None,
            NextLine::TooLong(_) => continue,
            NextLine::Line => {}
        }
        let Ok(row) = serde_json::from_slice::<serde_json::Value>(&line) else {
            continue;
        };
        let cwd = match file.kind {
            StoreKind::Claude | StoreKind::Opencode => row.get("cwd"),
            StoreKind::Codex => row.get("payload").and_then(|p| p.get("cwd")),
            StoreKind::Gemini => {
                if let Some(cwd) = crate::transcript::gemini_row_cwd(&row) {
                    return Some(cwd);
                }
                None
            }
        };
        if let Some(cwd) = cwd.and_then(|c| c.as_str()) {
            return Some(cwd.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap as Map;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real")
    }

    /// A copy of the recorded Gemini chats, as `DIR/.gemini/tmp/proj/chats`:
    /// the directory (kept while it is held) and the chats folder.
    fn recorded_gemini_chats() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let chats = dir.path().join(".gemini/tmp/proj/chats");
        std::fs::create_dir_all(&chats).unwrap();
        for f in std::fs::read_dir(fixtures().join("gemini/tmp/proj/chats")).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), chats.join(f.file_name())).unwrap();
        }
        (dir, chats)
    }

    #[test]
    fn finds_every_real_store_and_no_subagent_file() {
        let env: Map<String, String> = [
            ("CLAUDE_CONFIG_DIR", fixtures().join("claude")),
            ("CODEX_HOME", fixtures().join("codex")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string_lossy().into_owned()))
        .collect();
        let engines = EngineTable::load(&env, Path::new("/nonexistent"), None).unwrap();
        let catalog = Catalog::new(&engines);
        let all = catalog.all(true);
        let claude = all.keys().filter(|k| k.engine() == "claude").count();
        let codex: Vec<_> = all.keys().filter(|k| k.engine() == "codex").collect();
        assert_eq!(claude, 7);
        assert_eq!(codex.len(), 1);
        assert_eq!(codex[0].id(), "019e1625-789d-76c0-80ab-3724b5ddb799");
        assert!(all.keys().all(|k| !k.id().starts_with("agent-")));
        let file = catalog
            .find(&SessionKey::parse("codex:019e1625-789d-76c0-80ab-3724b5ddb799").unwrap())
            .unwrap();
        assert!(store_cwd(&file).is_some());
    }

    #[test]
    fn a_daemons_first_walk_reads_no_gemini_header_and_its_thread_does() {
        let (dir, chats) = recorded_gemini_chats();
        let env: Map<String, String> = [(
            "GEMINI_CLI_HOME".to_string(),
            dir.path().to_string_lossy().into_owned(),
        )]
        .into_iter()
        .collect();
        let engines = EngineTable::load(&env, Path::new("/nonexistent"), None).unwrap();
        let gemini = |c: &Catalog| {
            let mut ids: Vec<String> = lock(&c.index)
                .files
                .keys()
                .filter(|k| k.engine() == "gemini")
                .map(|k| k.id().to_string())
                .collect();
            ids.sort();
            ids
        };
        let state = dir.path().join("state");
        let c = Catalog::open(&engines, &state, true);
        assert!(gemini(&c).is_empty());
        c.read_deferred();
        let both = [
            "1cfc1266-1670-4774-a8c6-20387a7cff4c",
            "950dc958-6f78-402e-9c17-682235d87ebc",
        ];
        assert_eq!(gemini(&c), both);
        c.summarised();
        c.save();
        drop(c);
        // Saved: the next daemon's first walk knows them without a read
        // (only the resume's stub, which is no conversation, is left).
        let again = Catalog::open(&engines, &state, true);
        assert_eq!(gemini(&again), both);
        let left: Vec<PathBuf> = again
            .roots
            .iter()
            .flat_map(|r| lock(&r.deferred).clone())
            .collect();
        assert_eq!(
            left,
            [chats.join("session-2026-12-02T17-13-950dc958.jsonl")]
        );
    }

    #[test]
    fn gemini_conversations_are_named_by_their_header_and_a_stub_is_never_listed() {
        let (dir, chats) = recorded_gemini_chats();
        // Not a conversation: the header is not whole yet.
        std::fs::write(
            chats.join("session-2026-12-02T18-00-22222222.jsonl"),
            "{\"sess",
        )
        .unwrap();
        let env: Map<String, String> = [(
            "GEMINI_CLI_HOME".to_string(),
            dir.path().to_string_lossy().into_owned(),
        )]
        .into_iter()
        .collect();
        let engines = EngineTable::load(&env, Path::new("/nonexistent"), None).unwrap();
        let catalog = Catalog::new(&engines);
        let all = catalog.summarised();
        let mut ids: Vec<&str> = all
            .keys()
            .filter(|k| k.engine() == "gemini")
            .map(|k| k.id())
            .collect();
        ids.sort();
        assert_eq!(
            ids,
            [
                "1cfc1266-1670-4774-a8c6-20387a7cff4c",
                "950dc958-6f78-402e-9c17-682235d87ebc"
            ]
        );
        let key = SessionKey::parse("gemini:950dc958-6f78-402e-9c17-682235d87ebc").unwrap();
        let entry = all.get(&key).unwrap();
        assert!(entry
            .file
            .path
            .ends_with("session-2026-12-02T17-12-950dc958.jsonl"));
        assert_eq!(entry.title(), Some("please runcmd now"));
        assert_eq!(store_cwd(&entry.file).as_deref(), Some("/tmp/gx/proj"));
    }

    #[test]
    fn opencode_conversations_are_listed_from_the_mirror_with_their_titles() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("share/opencode");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::copy(
            fixtures().join("opencode/opencode.db"),
            data.join("opencode.db"),
        )
        .unwrap();
        let env: Map<String, String> = [(
            "XDG_DATA_HOME".to_string(),
            dir.path().join("share").to_string_lossy().into_owned(),
        )]
        .into_iter()
        .collect();
        let engines = EngineTable::load(&env, Path::new("/nonexistent"), None).unwrap();
        // Without a state directory there is no mirror, and so none listed.
        assert!(Catalog::new(&engines)
            .summarised()
            .keys()
            .all(|k| k.engine() != "opencode"));
        let catalog = Catalog::open(&engines, &dir.path().join("state"), false);
        let all = catalog.summarised();
        let mut ids: Vec<&str> = all
            .keys()
            .filter(|k| k.engine() == "opencode")
            .map(|k| k.id())
            .collect();
        ids.sort();
        assert_eq!(
            ids,
            [
                "ses_dc65617ccffeU6hKtTLqxR8T0S",
                "ses_dc6565eebffeCQTY5tKnH2eIoz",
                "ses_dc657275effe6U6t0ZcxDq3HFk",
                "ses_dc6575822ffeTWJ17WUcNZlj0I"
            ]
        );
        let key = SessionKey::parse("opencode:ses_dc657275effe6U6t0ZcxDq3HFk").unwrap();
        let entry = all.get(&key).unwrap();
        assert_eq!(entry.title(), Some("Greeting"));
        assert_eq!(entry.cwd(), Some("/tmp/ocx/proj"));
        // The session's own creation time.
        assert_eq!(entry.created_ms().map(|ms| ms / 1000), Some(1_796_263_696));
        assert_eq!(store_cwd(&entry.file).as_deref(), Some("/tmp/ocx/proj"));
        let idx =
            crate::transcript::TurnIndex::build(StoreKind::Opencode, &entry.file.path).unwrap();
        assert_eq!(idx.turn_count(), 1);
        assert_eq!(idx.title().as_deref(), Some("Greeting"));
    }

    /// A Claude store root in a temporary directory, and its engines.
    fn claude_world() -> (tempfile::TempDir, EngineTable) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("claude/projects/-p")).unwrap();
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        let env: Map<String, String> = [(
            "CLAUDE_CONFIG_DIR".to_string(),
            dir.path().join("claude").to_string_lossy().into_owned(),
        )]
        .into_iter()
        .collect();
        let engines = EngineTable::load(&env, Path::new("/nonexistent"), None).unwrap();
        (dir, engines)
    }

    fn conversation(dir: &Path, id: &str, prompt: &str) -> PathBuf {
        let path = dir.join(format!("claude/projects/-p/{id}.jsonl"));
        let row = serde_json::json!({
            "type": "user", "sessionId": id, "cwd": "/w",
            "timestamp": "2026-01-02T03:04:05.000Z",
            "message": {"role": "user", "content": prompt},
        });
        std::fs::write(&path, format!("{row}\n")).unwrap();
        path
    }

    fn append(path: &Path, text: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    fn title(c: &Catalog, id: &str) -> Option<String> {
        let key = SessionKey::new("claude", id).unwrap();
        c.summarised()
            .get(&key)
            .and_then(|e| e.title().map(str::to_string))
    }

    /// Makes the next write visible as a new mtime even on coarse clocks.
    fn later(path: &Path) {
        let t = std::fs::metadata(path).unwrap().modified().unwrap();
        let f = std::fs::File::options().append(true).open(path).unwrap();
        f.set_modified(t + Duration::from_secs(2)).unwrap();
    }

    #[test]
    fn only_changed_files_are_read_again() {
        let (dir, engines) = claude_world();
        let ids: Vec<String> = (0..5).map(|i| format!("c{i}")).collect();
        let paths: Vec<PathBuf> = ids
            .iter()
            .map(|id| conversation(dir.path(), id, &format!("prompt of {id}")))
            .collect();
        let c = Catalog::open(&engines, &dir.path().join("state"), false);
        assert_eq!(c.summarised().len(), 5);
        assert_eq!(c.stats().files_read, 5);
        assert_eq!(title(&c, "c3").as_deref(), Some("prompt of c3"));
        let created = c.summarised()[&SessionKey::new("claude", "c3").unwrap()].created_ms();
        assert_eq!(created, Some(1_767_323_045_000));

        // Nothing changed: nothing is read.
        c.rescan();
        c.summarised();
        assert_eq!(c.stats().files_read, 5);

        // One file grows: only it is read, and only what was appended — a
        // title far from both ends of the file is still found.
        let filler = serde_json::json!({"type": "assistant", "message": {"role": "assistant", "content": "x".repeat(1000)}});
        let filler = format!("{filler}\n").repeat(100);
        append(&paths[1], &filler);
        later(&paths[1]);
        c.rescan();
        assert_eq!(title(&c, "c1").as_deref(), Some("prompt of c1"));
        assert_eq!(c.stats().files_read, 6);
        append(
            &paths[1],
            &format!("{{\"type\":\"custom-title\",\"customTitle\":\"Renamed\"}}\n{filler}"),
        );
        later(&paths[1]);
        c.rescan();
        assert_eq!(title(&c, "c1").as_deref(), Some("Renamed"));
        assert_eq!(c.stats().files_read, 7);
        // Read from scratch, head and tail alone would not have seen it.
        let fresh = Catalog::open(&engines, &dir.path().join("elsewhere"), false);
        assert_eq!(title(&fresh, "c1").as_deref(), Some("prompt of c1"));

        // A new file is read; a removed one is gone.
        conversation(dir.path(), "c9", "new one");
        std::fs::remove_file(&paths[4]).unwrap();
        c.rescan();
        let files = c.summarised();
        assert_eq!(c.stats().files_read, 8);
        assert!(files.contains_key(&SessionKey::new("claude", "c9").unwrap()));
        assert!(!files.contains_key(&SessionKey::new("claude", "c4").unwrap()));
    }

    #[test]
    fn saved_summaries_are_taken_again_at_the_next_start() {
        let (dir, engines) = claude_world();
        let state = dir.path().join("state");
        for i in 0..4 {
            conversation(dir.path(), &format!("s{i}"), &format!("prompt {i}"));
        }
        let first = Catalog::open(&engines, &state, false);
        first.summarised();
        assert_eq!(first.stats().files_read, 4);
        first.save_if_new();
        assert!(state.join("catalog.json").is_file());
        drop(first);

        // A restart reads nothing it already knows.
        let second = Catalog::open(&engines, &state, false);
        assert_eq!(second.stats().summarised, 4);
        assert_eq!(title(&second, "s2").as_deref(), Some("prompt 2"));
        assert_eq!(second.stats().files_read, 0);

        // A file changed while no daemon ran is the only one read.
        let path = dir.path().join("claude/projects/-p/s1.jsonl");
        append(&path, "{\"type\":\"ai-title\",\"aiTitle\":\"Later\"}\n");
        later(&path);
        let third = Catalog::open(&engines, &state, false);
        assert_eq!(title(&third, "s1").as_deref(), Some("Later"));
        assert_eq!(third.stats().files_read, 1);

        // A damaged file is only a cache: everything is read again.
        std::fs::write(state.join("catalog.json"), b"{not json").unwrap();
        let fourth = Catalog::open(&engines, &state, false);
        assert_eq!(fourth.summarised().len(), 4);
        assert_eq!(fourth.stats().files_read, 4);
    }

    #[test]
    fn summaries_read_again_are_saved_once_they_are_a_hundredth_of_the_index() {
        let (dir, engines) = claude_world();
        let state = dir.path().join("state");
        let paths: Vec<PathBuf> = (0..200)
            .map(|i| conversation(dir.path(), &format!("c{i}"), "p"))
            .collect();
        let c = Catalog::open(&engines, &state, false);
        c.summarised();
        c.save_if_new();
        // Each save writes a new file and renames it over the old one.
        let saved_at = || {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(state.join("catalog.json")).unwrap().ino()
        };
        let first = saved_at();
        // One file written and read again, then quiet for long, as a
        // minute after the last save; then a save if one is due.
        let written_then_quiet = |path: &Path| {
            append(path, "{\"type\":\"user\"}\n");
            later(path);
            c.rescan();
            c.summarised();
            {
                let mut index = lock(&c.index);
                index.changed_at = None;
                index.saved_at = None;
            }
            c.save_if_due();
        };
        written_then_quiet(&paths[0]);
        assert_eq!(saved_at(), first, "one of 200 read again: not written");
        written_then_quiet(&paths[1]);
        assert_ne!(saved_at(), first, "two of 200: written");
        // A restart reads only what changed since.
        let again = Catalog::open(&engines, &state, false);
        again.summarised();
        assert_eq!(again.stats().files_read, 0);
    }

    #[test]
    fn inotify_shows_new_files_without_a_walk() {
        let (dir, engines) = claude_world();
        conversation(dir.path(), "w0", "first");
        let c = Catalog::open(&engines, &dir.path().join("state"), true);
        assert!(c.stats().watching);
        let walked = lock(&c.index).walked;
        conversation(dir.path(), "w1", "second");
        // A new project folder, and a file in it.
        std::fs::create_dir_all(dir.path().join("claude/projects/-q")).unwrap();
        let row = r#"{"type":"user","message":{"role":"user","content":"third"}}"#;
        std::fs::write(
            dir.path().join("claude/projects/-q/w2.jsonl"),
            format!("{row}\n"),
        )
        .unwrap();
        let files = c.files();
        assert!(files.contains_key(&SessionKey::new("claude", "w1").unwrap()));
        assert!(files.contains_key(&SessionKey::new("claude", "w2").unwrap()));
        assert_eq!(lock(&c.index).walked, walked, "no walk was needed");
        std::fs::remove_file(dir.path().join("claude/projects/-p/w0.jsonl")).unwrap();
        assert!(!c
            .files()
            .contains_key(&SessionKey::new("claude", "w0").unwrap()));
        assert_eq!(title(&c, "w2").as_deref(), Some("third"));
    }

    /// The index's stale keys are those a look at every entry finds.
    fn stale_keys(c: &Catalog) -> Vec<String> {
        let index = lock(&c.index);
        let scanned: BTreeSet<SessionKey> = index
            .files
            .iter()
            .filter(|(_, e)| !e.is_summarised())
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(index.stale, scanned, "the stale keys kept in step");
        scanned.iter().map(|k| k.id().to_string()).collect()
    }

    #[test]
    fn stale_keys_follow_loads_walks_events_and_summaries() {
        let (dir, engines) = claude_world();
        let state = dir.path().join("state");
        let a = conversation(dir.path(), "a", "first");
        conversation(dir.path(), "b", "second");
        let c = Catalog::open(&engines, &state, true);
        assert_eq!(stale_keys(&c), ["a", "b"], "a walk finds them unread");
        assert_eq!(c.stats().summarised, 0);
        c.summarised();
        assert!(stale_keys(&c).is_empty());
        assert_eq!(c.stats().summarised, 2);

        // An event of a write makes one stale; reading it makes it fresh.
        append(
            &a,
            "{\"type\":\"custom-title\",\"customTitle\":\"Later\"}\n",
        );
        later(&a);
        c.sync();
        assert_eq!(stale_keys(&c), ["a"]);
        assert_eq!(c.stats().summarised, 1);
        assert_eq!(title(&c, "a").as_deref(), Some("Later"));
        assert!(stale_keys(&c).is_empty());

        // A new one comes stale, and leaves the set when its file goes.
        let n = conversation(dir.path(), "n", "third");
        c.sync();
        assert_eq!(stale_keys(&c), ["n"]);
        std::fs::remove_file(&n).unwrap();
        c.sync();
        assert!(stale_keys(&c).is_empty());
        assert_eq!(c.stats().conversations, 2);
        c.save_if_new();

        // A load keeps what was saved: nothing stale; a walk agrees.
        let again = Catalog::open(&engines, &state, false);
        assert!(stale_keys(&again).is_empty());
        assert_eq!(again.stats().summarised, 2);
        append(&a, "{\"type\":\"user\"}\n");
        later(&a);
        again.rescan();
        assert_eq!(stale_keys(&again), ["a"]);
    }

    #[test]
    fn the_keys_version_moves_when_a_conversation_comes_or_goes_only() {
        let (dir, engines) = claude_world();
        let a = conversation(dir.path(), "a", "first");
        for watch in [true, false] {
            let c = Catalog::open(&engines, &dir.path().join(format!("state{watch}")), watch);
            let mut seen = c.keys_version();
            let mut moved = |c: &Catalog| {
                // Without inotify, a walk is trusted for a second.
                lock(&c.index).walked = None;
                let now = c.keys_version();
                std::mem::replace(&mut seen, now) != now
            };
            append(&a, "{\"type\":\"user\"}\n");
            later(&a);
            assert!(!moved(&c), "written to (watch: {watch})");
            let size = std::fs::metadata(&a).unwrap().len();
            let entry = c.files()[&SessionKey::new("claude", "a").unwrap()].clone();
            assert_eq!(entry.stamp.size, size, "the write was seen");
            let b = conversation(dir.path(), "b", "second");
            assert!(moved(&c), "one came (watch: {watch})");
            std::fs::remove_file(&b).unwrap();
            assert!(moved(&c), "one went (watch: {watch})");
        }
    }

    #[test]
    fn a_walk_never_undoes_what_events_said_after_it_started() {
        let (dir, engines) = claude_world();
        let a = conversation(dir.path(), "a", "doomed");
        let c = Catalog::open(&engines, &dir.path().join("state"), true);
        // A walk sees `a` and not `b`...
        let started = lock(&c.index).seq;
        let found = walk::walk_all(&c.roots, &mut |_, _, _| {});
        // ...meanwhile `a` goes and `b` comes, and the events are applied...
        std::fs::remove_file(&a).unwrap();
        conversation(dir.path(), "b", "newborn");
        c.sync();
        // ...then the walk's older view is merged.
        c.merge_walk(found, started);
        let files = lock(&c.index).files.clone();
        assert!(!files.contains_key(&SessionKey::new("claude", "a").unwrap()));
        assert!(files.contains_key(&SessionKey::new("claude", "b").unwrap()));
        // The next walk agrees.
        c.rescan();
        assert_eq!(c.files().len(), 1);
    }

    #[test]
    fn an_entry_merged_after_a_version_was_read_is_changed_after_it() {
        let (dir, engines) = claude_world();
        let c = Catalog::open(&engines, &dir.path().join("state"), false);
        // A walk and a batch of events each take their number, then look
        // at the files outside the lock...
        let started = lock(&c.index).seq;
        let a = conversation(dir.path(), "a", "walked");
        let found = walk::walk_all(&c.roots, &mut |_, _, _| {});
        let batch = {
            let mut index = lock(&c.index);
            index.seq += 1;
            index.seq
        };
        let b = conversation(dir.path(), "b", "evented");
        let seen = walk::stat(0, "b".to_string(), b).unwrap();
        // ...while a reader (the usage counter) reads the version and the
        // entries, and later looks only at those changed after it.
        let read = lock(&c.index).seq;
        assert!(lock(&c.index).files.is_empty());
        c.merge_walk(found, started);
        let key_b = SessionKey::new("claude", "b").unwrap();
        c.apply(Vec::new(), Vec::new(), vec![(key_b.clone(), seen)], batch);
        let files = lock(&c.index).files.clone();
        let key_a = SessionKey::new("claude", "a").unwrap();
        assert!(files[&key_a].changed_at() > read);
        assert!(files[&key_b].changed_at() > read);
        assert!(a.exists());
    }

    #[test]
    fn rollout_ids_are_read_from_names() {
        assert_eq!(
            codex_rollout_id(
                "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl.zst"
            ),
            Some("019e1625-789d-76c0-80ab-3724b5ddb799")
        );
        assert_eq!(codex_rollout_id("rollout-x.jsonl"), None);
        assert_eq!(codex_rollout_id("notes.jsonl"), None);
    }
}

#[cfg(test)]
mod made_once_tests {
    use super::MadeOnce;
    use std::sync::Arc;

    fn text(s: &str) -> (Arc<[u8]>, u64) {
        (Arc::from(s.as_bytes()), s.len() as u64)
    }

    #[test]
    fn a_listing_text_made_across_a_forget_is_not_kept() {
        let made = MadeOnce::default();
        assert_eq!(&*made.get_or_make(|| text("one")).0, b"one");
        // Kept: not made again.
        assert_eq!(&*made.get_or_make(|| unreachable!()).0, b"one");
        made.forget();
        // Made while a forget happens: given, not kept.
        let given = made.get_or_make(|| {
            made.forget();
            text("stale")
        });
        assert_eq!(&*given.0, b"stale");
        assert_eq!(&*made.get_or_make(|| text("fresh")).0, b"fresh");
        assert_eq!(&*made.get_or_make(|| unreachable!()).0, b"fresh");
    }
}
