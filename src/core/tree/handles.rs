//! The table of open handles: what each open file reads or writes, and
//! each open directory's entries as `opendir` saw them.

use crate::core::tree::handle_memory::{HandleMemory, Pinned};
use crate::core::tree::node::Kind;
use crate::core::tree::save::MetaWrite;
use crate::core::tree::slot_files::RecordWrite;
use crate::error::Result;
use crate::key::SessionKey;
use crate::pieced_text::PiecedText;
use crate::sync::lock;
use crate::terminal::ring::{Scrollback, View};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// What an open file handle reads or writes.
#[derive(Debug)]
pub(in crate::core) enum Handle {
    /// A per-handle view of the ring (see `scrollback`), owned by process `tgid`.
    Scrollback {
        key: SessionKey,
        /// Held by the handle so a read touches nothing else.
        ring: Arc<Scrollback>,
        view: View,
        tgid: u32,
    },
    /// Generated text, fixed at open so a reader sees one consistent
    /// version; shared by every handle opened on the same version.
    Snapshot(Arc<Vec<u8>>),
    /// A version of `sessions.json`, shared with its cache and every
    /// handle opened on it.
    Listing(Arc<PiecedText>),
    /// A transcript page: the text rendered at open, rendered again when a
    /// read reaches past it, so `tail -f` and `less +F` see appended turns.
    Page {
        key: SessionKey,
        page: u64,
        text: Arc<Vec<u8>>,
    },
    Input(SessionKey),
    SessionCtl(SessionKey),
    RootCtl,
    /// A slot record or transcript entries being written.
    Record(Buffered<RecordWrite>),
    /// A hosted transcript being read.
    Hosted(String),
    /// `meta.json` or a one-line metadata file being written.
    Meta(Buffered<MetaWrite>),
    /// An editor's scratch file in a session directory.
    Scratch(SessionKey, String),
    /// `wait`: the first read blocks until the session settles.
    Wait(SessionKey),
    /// A session's `events`, read from its file in the state directory.
    Events(std::path::PathBuf),
    /// The root `events`: the file it was when opened (none yet: empty),
    /// read on after a rotation moved it aside, as any open file is.
    EventStream(Option<std::sync::Arc<std::fs::File>>),
    /// `prompt`: the text so far, sent at `flush`.
    Prompt(Buffered<crate::core::agents::session_agent::PromptWrite>),
}

/// What a handle that buffers writes holds. The buffer has a lock of its
/// own, taken with the table unlocked: calls on one open file that meet (a
/// `write` while a `flush` of the same file commits, from a process it was
/// shared with; two threads) wait for each other instead of finding the
/// handle gone, and the table's lock is never held across a commit's I/O.
/// What the table is asked about the handle without waiting (its session,
/// what it writes) is kept beside the buffer.
#[derive(Debug)]
pub(in crate::core) struct Buffered<T> {
    /// The session it concerns, if any.
    pub(in crate::core) key: Option<SessionKey>,
    /// For a slot record: its world and slot.
    pub(in crate::core) slot: Option<(String, u32)>,
    buffer: Arc<Mutex<T>>,
}

impl<T> Buffered<T> {
    /// The buffer, to lock once the table is unlocked.
    pub(in crate::core) fn buffer(&self) -> Arc<Mutex<T>> {
        self.buffer.clone()
    }
}

impl Handle {
    pub(in crate::core) fn record(write: RecordWrite) -> Handle {
        let slot = match &write {
            RecordWrite::Slot { world, slot, .. } => Some((world.clone(), *slot)),
            RecordWrite::Append { .. } => None,
        };
        Handle::Record(Buffered {
            key: None,
            slot,
            buffer: Arc::new(Mutex::new(write)),
        })
    }

    pub(in crate::core) fn meta(write: MetaWrite) -> Handle {
        Handle::Meta(Buffered {
            key: Some(write.key().clone()),
            slot: None,
            buffer: Arc::new(Mutex::new(write)),
        })
    }

    pub(in crate::core) fn prompt(
        write: crate::core::agents::session_agent::PromptWrite,
    ) -> Handle {
        Handle::Prompt(Buffered {
            key: Some(write.key.clone()),
            slot: None,
            buffer: Arc::new(Mutex::new(write)),
        })
    }
}

impl Handle {
    /// Bytes this handle's own buffers take (what is written to it and not
    /// yet committed).
    fn own_bytes(&self) -> u64 {
        match self {
            Handle::Record(r) => lock(&r.buffer).memory_bytes(),
            Handle::Meta(m) => lock(&m.buffer).memory_bytes(),
            Handle::Prompt(p) => lock(&p.buffer).memory_bytes(),
            _ => 0,
        }
    }

    /// The text this handle reads, which other handles may share.
    fn text(&self) -> Option<Pinned> {
        match self {
            Handle::Snapshot(text) | Handle::Page { text, .. } => Some(pinned(text)),
            Handle::Listing(text) => Some((Arc::as_ptr(text) as usize, text.bytes())),
            _ => None,
        }
    }
}

fn pinned(text: &Arc<Vec<u8>>) -> Pinned {
    (Arc::as_ptr(text) as usize, text.capacity() as u64)
}

/// What a directory snapshot takes: its entries and their names.
fn dir_bytes(entries: &Vec<DirEntry>) -> u64 {
    let names: usize = entries.iter().map(|e| e.name.capacity()).sum();
    (entries.capacity() * std::mem::size_of::<DirEntry>() + names) as u64
}

/// One directory entry: inode, kind, name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: Kind,
    pub name: String,
}

/// A directory's entries as one `opendir` saw them.
pub type DirSnapshot = Arc<Vec<DirEntry>>;

/// Open files and directories by handle number. Numbers are never reused
/// while the daemon runs.
#[derive(Debug)]
pub(in crate::core) struct HandleTable {
    next: AtomicU64,
    files: Mutex<HashMap<u64, Handle>>,
    /// Each open directory's entries, taken at `opendir`: offsets stay
    /// stable however the directory changes during one listing.
    dirs: Mutex<HashMap<u64, DirSnapshot>>,
    /// Each session's open `scrollback` handles and the processes owning
    /// them, so a `stat` of one session's finds them without looking at
    /// every handle (`tail -F` of each of N sessions stats them all).
    scrollbacks: Mutex<HashMap<SessionKey, Vec<(u64, u32)>>>,
    /// What all of them hold together, against its cap.
    held: HandleMemory,
    /// Handles a `stat` of `scrollback` looked at.
    #[cfg(test)]
    pub(in crate::core) scrollbacks_visited: AtomicU64,
}

impl Default for HandleTable {
    fn default() -> Self {
        Self::with_limit(crate::config::DEFAULT_OPEN_BYTES)
    }
}

impl HandleTable {
    /// A table whose handles may hold at most `max` bytes together.
    pub(in crate::core) fn with_limit(max: u64) -> Self {
        HandleTable {
            next: AtomicU64::new(1),
            files: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            scrollbacks: Mutex::new(HashMap::new()),
            held: HandleMemory::new(max),
            #[cfg(test)]
            scrollbacks_visited: AtomicU64::new(0),
        }
    }

    /// The open files, locked: never held across I/O.
    pub(in crate::core) fn files(&self) -> MutexGuard<'_, HashMap<u64, Handle>> {
        lock(&self.files)
    }

    fn dirs(&self) -> MutexGuard<'_, HashMap<u64, DirSnapshot>> {
        lock(&self.dirs)
    }

    fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn scrollbacks(&self) -> MutexGuard<'_, HashMap<SessionKey, Vec<(u64, u32)>>> {
        lock(&self.scrollbacks)
    }

    /// Adds an open handle: ENOMEM when the handles would hold more than
    /// their cap together.
    pub(in crate::core) fn add(&self, handle: Handle) -> Result<u64> {
        self.add_reading(handle, false)
    }

    /// [`HandleTable::add`], for a handle that reads a `status` when
    /// `status` says so: it may use the cap's reserve.
    pub(in crate::core) fn add_reading(&self, handle: Handle, status: bool) -> Result<u64> {
        let fh = self.next();
        self.held
            .open(fh, handle.own_bytes(), handle.text(), status)?;
        let scrollback = match &handle {
            Handle::Scrollback { key, tgid, .. } => Some((key.clone(), *tgid)),
            _ => None,
        };
        self.files().insert(fh, handle);
        if let Some((key, tgid)) = scrollback {
            self.scrollbacks().entry(key).or_default().push((fh, tgid));
        }
        Ok(fh)
    }

    pub(in crate::core) fn remove(&self, fh: u64) -> Option<Handle> {
        let handle = self.files().remove(&fh);
        if let Some(handle) = &handle {
            self.held.close(fh, handle.text().map(|(addr, _)| addr));
        }
        if let Some(Handle::Scrollback { key, .. }) = &handle {
            let mut scrollbacks = self.scrollbacks();
            if let Some(open) = scrollbacks.get_mut(key) {
                open.retain(|(h, _)| *h != fh);
                if open.is_empty() {
                    scrollbacks.remove(key);
                }
            }
        }
        handle
    }

    /// The view of `scrollback` handle `fh`, if it is one of `key`'s.
    pub(in crate::core) fn scrollback_view(&self, fh: u64, key: &SessionKey) -> Option<View> {
        match self.files().get(&fh) {
            Some(Handle::Scrollback { key: k, view, .. }) if k == key => Some(*view),
            _ => None,
        }
    }

    /// The ring and view of `scrollback` handle `fh`, if it is one of `key`'s.
    pub(in crate::core) fn scrollback_ring(
        &self,
        fh: u64,
        key: &SessionKey,
    ) -> Option<(Arc<Scrollback>, View)> {
        match self.files().get(&fh) {
            Some(Handle::Scrollback {
                key: k, ring, view, ..
            }) if k == key => Some((ring.clone(), *view)),
            _ => None,
        }
    }

    /// Whether some process holds `key`'s `scrollback` open.
    pub(in crate::core) fn scrollback_open(&self, key: &SessionKey) -> bool {
        self.scrollbacks().contains_key(key)
    }

    /// The view of the newest `scrollback` handle of `key` that process
    /// `tgid` holds (`tail -F` reopens, and stats by name).
    pub(in crate::core) fn newest_scrollback_of(
        &self,
        key: &SessionKey,
        tgid: u32,
    ) -> Option<View> {
        let mut own: Vec<u64> = self
            .scrollbacks()
            .get(key)?
            .iter()
            .filter(|(_, t)| *t == tgid)
            .map(|(fh, _)| *fh)
            .collect();
        own.sort_unstable_by(|a, b| b.cmp(a));
        // One may be out of the table for a moment (see `with`): the next then.
        own.into_iter().find_map(|fh| {
            #[cfg(test)]
            self.scrollbacks_visited.fetch_add(1, Ordering::Relaxed);
            self.scrollback_view(fh, key)
        })
    }

    /// Charges `bound` more bytes a write to buffering handle `fh` may
    /// buffer, before it does: ENOSPC past the cap, and nothing is charged.
    pub(in crate::core) fn reserve(&self, fh: u64, bound: u64) -> Result<()> {
        self.held.reserve(fh, bound)
    }

    /// After a write: `fh`'s buffer now takes `own` bytes.
    pub(in crate::core) fn settle(&self, fh: u64, own: u64) {
        self.held.settle(fh, own);
    }

    /// A transcript page handle takes the longer text its page now has,
    /// unless that would go past the cap (it then keeps the one it had).
    pub(in crate::core) fn grow_page(&self, fh: u64, newer: &Arc<Vec<u8>>) -> bool {
        let mut files = self.files();
        let Some(Handle::Page { text, .. }) = files.get_mut(&fh) else {
            return false;
        };
        if !self.held.repin(pinned(text).0, pinned(newer)) {
            return false;
        }
        *text = newer.clone();
        true
    }

    /// What open handles hold together, and their cap.
    pub(in crate::core) fn memory_bytes(&self) -> (u64, u64) {
        (self.held.total(), self.held.max())
    }

    /// Adds an open directory's snapshot: ENOMEM past the cap.
    pub(in crate::core) fn add_dir(&self, entries: Vec<DirEntry>) -> Result<u64> {
        let fh = self.next();
        self.held.open(fh, dir_bytes(&entries), None, false)?;
        self.dirs().insert(fh, Arc::new(entries));
        Ok(fh)
    }

    pub(in crate::core) fn dir(&self, fh: u64) -> Option<DirSnapshot> {
        self.dirs().get(&fh).cloned()
    }

    pub(in crate::core) fn remove_dir(&self, fh: u64) {
        if self.dirs().remove(&fh).is_some() {
            self.held.close(fh, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::ring::Scrollback;

    fn scrollback(key: &SessionKey, ring: &Arc<Scrollback>, tgid: u32) -> Handle {
        Handle::Scrollback {
            key: key.clone(),
            ring: ring.clone(),
            view: ring.open_view(),
            tgid,
        }
    }

    #[test]
    fn each_sessions_scrollback_handles_are_kept_by_session() {
        let table = HandleTable::default();
        let (a, b) = (
            SessionKey::parse("shell:a").unwrap(),
            SessionKey::parse("shell:b").unwrap(),
        );
        let ring = Arc::new(Scrollback::new(1024));
        let a1 = table.add(scrollback(&a, &ring, 7)).unwrap();
        let a2 = table.add(scrollback(&a, &ring, 7)).unwrap();
        let b1 = table.add(scrollback(&b, &ring, 8)).unwrap();
        let other = table.add(Handle::Input(a.clone())).unwrap();
        assert_eq!(table.scrollbacks()[&a], [(a1, 7), (a2, 7)]);
        assert!(table.newest_scrollback_of(&a, 7).is_some());
        assert!(table.newest_scrollback_of(&a, 8).is_none());
        assert!(table.scrollback_view(b1, &a).is_none(), "b's, not a's");
        table.remove(other);
        table.remove(a2);
        assert_eq!(table.scrollbacks()[&a], [(a1, 7)]);
        table.remove(a1);
        table.remove(b1);
        assert!(!table.scrollback_open(&a) && !table.scrollback_open(&b));
        assert!(table.scrollbacks().is_empty(), "nothing left behind");
    }
}
