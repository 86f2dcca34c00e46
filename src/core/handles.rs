//! The table of open handles: what each open file reads or writes, and
//! each open directory's entries as `opendir` saw them.

use super::node::Kind;
use super::records::RecordWrite;
use super::save::MetaWrite;
use crate::key::SessionKey;
use crate::scrollback::{Scrollback, View};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// What an open file handle reads or writes.
#[derive(Debug)]
pub(super) enum Handle {
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
    Record(RecordWrite),
    /// A hosted transcript being read.
    Hosted(String),
    /// `meta.json` or a one-line metadata file being written.
    Meta(MetaWrite),
    /// An editor's scratch file in a session directory.
    Scratch(SessionKey, String),
    /// `wait`: the first read blocks until the session settles.
    Wait(SessionKey),
    /// `events`, read from its file in the state directory.
    Events(std::path::PathBuf),
    /// `prompt`: the text so far, sent at `flush`.
    Prompt(super::agent_state::PromptWrite),
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
pub(super) struct HandleTable {
    next: AtomicU64,
    files: Mutex<HashMap<u64, Handle>>,
    /// Each open directory's entries, taken at `opendir`: offsets stay
    /// stable however the directory changes during one listing.
    dirs: Mutex<HashMap<u64, DirSnapshot>>,
}

impl Default for HandleTable {
    fn default() -> Self {
        HandleTable {
            next: AtomicU64::new(1),
            files: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
        }
    }
}

impl HandleTable {
    /// The open files, locked: never held across I/O.
    pub(super) fn files(&self) -> MutexGuard<'_, HashMap<u64, Handle>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn dirs(&self) -> MutexGuard<'_, HashMap<u64, DirSnapshot>> {
        self.dirs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn add(&self, handle: Handle) -> u64 {
        let fh = self.next();
        self.files().insert(fh, handle);
        fh
    }

    pub(super) fn remove(&self, fh: u64) -> Option<Handle> {
        self.files().remove(&fh)
    }

    /// Runs `work` on a handle taken out of the table, so the table's lock
    /// is not held during the file I/O or metadata commits it may do.
    pub(super) fn with<T>(&self, fh: u64, work: impl FnOnce(&mut Handle) -> T) -> Option<T> {
        // Bound first: a guard in a match's scrutinee would live through its arms.
        let taken = self.files().remove(&fh);
        let mut handle = taken?;
        let result = work(&mut handle);
        self.files().insert(fh, handle);
        Some(result)
    }

    pub(super) fn add_dir(&self, entries: Vec<DirEntry>) -> u64 {
        let fh = self.next();
        self.dirs().insert(fh, Arc::new(entries));
        fh
    }

    pub(super) fn dir(&self, fh: u64) -> Option<DirSnapshot> {
        self.dirs().get(&fh).cloned()
    }

    pub(super) fn remove_dir(&self, fh: u64) {
        self.dirs().remove(&fh);
    }
}
