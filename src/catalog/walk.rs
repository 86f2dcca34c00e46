//! Walking the stores' directories: which files are conversations, and
//! their size, mtime and inode (a `stat` each, never a read).

use super::summary::Stamp;
use crate::clock::mtime_ms;
use crate::sync::lock;
use crate::transcript::StoreKind;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// One engine's store.
#[derive(Debug, Clone)]
pub struct Root {
    pub engine: String,
    pub kind: StoreKind,
    pub path: PathBuf,
    /// Gemini: the ids read from files' headers by inode, so a walk
    /// reads each file once, not at every walk.
    pub header_ids: Arc<Mutex<HashMap<u64, String>>>,
    /// Gemini: while set, a file whose header is not known yet is not
    /// read but kept in `deferred` (a daemon's first walk, before its
    /// mount is ready, reads no file).
    pub defer_headers: Arc<AtomicBool>,
    pub deferred: Arc<Mutex<Vec<PathBuf>>>,
}

/// Header ids remembered at most; past it the memory starts again.
const HEADER_IDS_MAX: usize = 1 << 18;

impl Root {
    /// The directory under the root that holds the conversations.
    fn top(&self) -> &'static str {
        match self.kind {
            StoreKind::Claude => "projects",
            StoreKind::Codex => "sessions",
            StoreKind::Gemini => "tmp",
            StoreKind::Opencode => super::opencode_mirror::TOP,
        }
    }

    /// How deep below the root the directories holding conversation files
    /// lie: Claude's `projects/<folder>/`, Codex's `sessions/YYYY/MM/DD/`,
    /// Gemini's `tmp/<project>/chats/`.
    pub fn file_depth(&self) -> u8 {
        match self.kind {
            StoreKind::Claude => 2,
            StoreKind::Codex => 4,
            StoreKind::Gemini => 3,
            StoreKind::Opencode => 1,
        }
    }

    /// Whether a file's name is that of a conversation.
    pub fn is_conversation_name(&self, name: &str) -> bool {
        match self.kind {
            StoreKind::Claude | StoreKind::Opencode => name.ends_with(".jsonl"),
            StoreKind::Codex => codex_rollout_id(name).is_some(),
            StoreKind::Gemini => name.starts_with("session-") && name.ends_with(".jsonl"),
        }
    }

    /// The session id of the conversation file `name` at `path`: its name
    /// gives it, except Gemini's (only the id's first 8 digits), whose
    /// first line says it (read, bounded).
    pub fn id_of(&self, path: &Path, name: &str) -> Option<String> {
        match self.kind {
            StoreKind::Claude | StoreKind::Opencode => {
                name.strip_suffix(".jsonl").map(str::to_string)
            }
            StoreKind::Codex => codex_rollout_id(name).map(str::to_string),
            StoreKind::Gemini if self.is_conversation_name(name) => self.gemini_id(path, name),
            StoreKind::Gemini => None,
        }
    }

    /// A Gemini file's id: remembered by inode (a header is written once,
    /// with the file) while it still fits the name's 8 digits (an inode used
    /// again), else read.
    fn gemini_id(&self, path: &Path, name: &str) -> Option<String> {
        let ino = std::fs::metadata(path).ok()?.ino();
        let short = name
            .strip_suffix(".jsonl")
            .and_then(|s| s.rsplit('-').next())
            .unwrap_or("");
        if let Some(id) = lock(&self.header_ids).get(&ino) {
            if !short.is_empty() && id.starts_with(short) {
                return Some(id.clone());
            }
        }
        if self.defer_headers.load(Ordering::Acquire) {
            let mut deferred = lock(&self.deferred);
            if deferred.len() < HEADER_IDS_MAX {
                deferred.push(path.to_path_buf());
                return None;
            }
        }
        let id = gemini_header_id(path)?;
        let mut ids = lock(&self.header_ids);
        if ids.len() >= HEADER_IDS_MAX {
            ids.clear();
        }
        ids.insert(ino, id.clone());
        Some(id)
    }

    /// Whether a directory at `depth` (its parent at `depth - 1`) is on the
    /// way to conversation files.
    pub fn wants_dir(&self, depth: u8, name: &str) -> bool {
        match depth {
            0 => false,
            1 => name == self.top(),
            3 if self.kind == StoreKind::Gemini => name == "chats",
            d => d <= self.file_depth(),
        }
    }
}

/// The `sessionId` of a Gemini store's header line (its first, about 220
/// bytes); `None` until the line is whole.
pub fn gemini_header_id(path: &Path) -> Option<String> {
    const HEADER_MAX: usize = 4 << 10;
    let f = std::fs::File::open(path).ok()?;
    let head = crate::transcript::read_up_to(&f, 0, HEADER_MAX).ok()?;
    let line = &head[..memchr::memchr(b'\n', &head)?];
    crate::transcript::gemini_session_id(line)
}

/// The id at the end of a rollout's name: `rollout-<time>-<uuid>.jsonl[.zst]`.
pub fn codex_rollout_id(name: &str) -> Option<&str> {
    let stem = name
        .strip_suffix(".jsonl")
        .or_else(|| name.strip_suffix(".jsonl.zst"))?;
    let rest = stem.strip_prefix("rollout-")?;
    // 36 characters of a uuid are its hyphenated form, the only one taken.
    let id = rest.get(rest.len().checked_sub(36)?..)?;
    uuid::Uuid::try_parse(id).is_ok().then_some(id)
}

/// A conversation file as a `stat` saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub root: usize,
    pub id: String,
    pub path: PathBuf,
    pub size: u64,
    pub mtime_ms: u64,
    pub ino: u64,
}

impl Seen {
    /// What says whether the file changed since it was last summarised.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            size: self.size,
            mtime_ms: self.mtime_ms,
            ino: self.ino,
        }
    }
}

/// `stat` of a conversation file (following links); `None` if it is not a
/// regular file (any more).
pub fn stat(root: usize, id: String, path: PathBuf) -> Option<Seen> {
    let meta = std::fs::metadata(&path).ok().filter(|m| m.is_file())?;
    Some(Seen {
        root,
        id,
        size: meta.len(),
        mtime_ms: mtime_ms(&meta),
        ino: meta.ino(),
        path,
    })
}

/// Walks `dir`, at `depth` below root `root`, collecting conversation files
/// into `found`. `on_dir` is called for every directory before it is read
/// (to watch it first, so nothing created meanwhile is missed).
pub fn walk(
    roots: &[Root],
    root: usize,
    dir: &Path,
    depth: u8,
    on_dir: &mut dyn FnMut(usize, &Path, u8),
    found: &mut Vec<Seen>,
) {
    let r = &roots[root];
    on_dir(root, dir, depth);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if depth == r.file_depth() {
            if let Some(id) = r.id_of(&entry.path(), &name) {
                // Relative to the open directory, not a path walk per file;
                // a link is followed the long way.
                let meta = entry
                    .metadata()
                    .ok()
                    .filter(|m| !m.file_type().is_symlink())
                    .or_else(|| std::fs::metadata(entry.path()).ok());
                if let Some(meta) = meta.filter(|m| m.is_file()) {
                    found.push(Seen {
                        root,
                        id,
                        path: entry.path(),
                        size: meta.len(),
                        mtime_ms: mtime_ms(&meta),
                        ino: meta.ino(),
                    });
                }
            }
        } else if r.wants_dir(depth + 1, &name) && entry.path().is_dir() {
            walk(roots, root, &entry.path(), depth + 1, on_dir, found);
        }
    }
}

/// Every conversation file of every root.
pub fn walk_all(roots: &[Root], on_dir: &mut dyn FnMut(usize, &Path, u8)) -> Vec<Seen> {
    let mut found = Vec::new();
    for (i, r) in roots.iter().enumerate() {
        walk(roots, i, &r.path, 0, on_dir, &mut found);
    }
    found
}
