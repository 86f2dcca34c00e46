//! Inode numbers: fixed for the root's files, and a block of numbers per
//! session, handed out on first sight and kept for the daemon's life, so a
//! file keeps its number (editors check it) while the daemon runs.

use crate::core::MetaField;
use crate::key::SessionKey;
use std::collections::HashMap;
use std::sync::Mutex;

pub const ROOT: u64 = 1;
const FIRST_SESSION: u64 = 1 << 16;
/// Transcript pages: a range of their own, 2^24 pages per session.
const FIRST_PAGE: u64 = 1 << 40;
const PAGES_PER_SESSION: u64 = 1 << 24;
/// Numbers reserved per session directory and its files.
const PER_SESSION: u64 = 16;

/// The files of the root directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RootFile {
    Readme,
    Status,
    Ctl,
}

impl RootFile {
    pub const ALL: [RootFile; 3] = [RootFile::Readme, RootFile::Status, RootFile::Ctl];

    pub fn name(self) -> &'static str {
        match self {
            RootFile::Readme => "README",
            RootFile::Status => "status",
            RootFile::Ctl => "ctl",
        }
    }

    pub fn ino(self) -> u64 {
        2 + self as u64
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// A session directory or one of its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionFile {
    Dir,
    Scrollback,
    Screen,
    Input,
    Status,
    Ctl,
    Meta,
    /// `transcript/`, for engines that keep a conversation store.
    TranscriptDir,
    /// `transcript/latest`, a symlink to the newest page.
    Latest,
    /// `title`, `project`, `favourite`, `archive`: one-line metadata files.
    Field(MetaField),
}

impl SessionFile {
    pub const FILES: [SessionFile; 10] = [
        SessionFile::Scrollback,
        SessionFile::Screen,
        SessionFile::Input,
        SessionFile::Status,
        SessionFile::Ctl,
        SessionFile::Meta,
        SessionFile::Field(MetaField::Title),
        SessionFile::Field(MetaField::Project),
        SessionFile::Field(MetaField::Favourite),
        SessionFile::Field(MetaField::Archive),
    ];

    pub fn name(self) -> &'static str {
        match self {
            SessionFile::Dir => ".",
            SessionFile::Scrollback => "scrollback",
            SessionFile::Screen => "screen",
            SessionFile::Input => "input",
            SessionFile::Status => "status",
            SessionFile::Ctl => "ctl",
            SessionFile::Meta => "meta.json",
            SessionFile::TranscriptDir => "transcript",
            SessionFile::Latest => "latest",
            SessionFile::Field(f) => f.name(),
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::FILES.into_iter().find(|f| f.name() == name)
    }

    fn offset(self) -> u64 {
        match self {
            SessionFile::Dir => 0,
            SessionFile::Scrollback => 1,
            SessionFile::Screen => 2,
            SessionFile::Input => 3,
            SessionFile::Status => 4,
            SessionFile::Ctl => 5,
            SessionFile::Meta => 6,
            SessionFile::TranscriptDir => 7,
            SessionFile::Latest => 8,
            SessionFile::Field(MetaField::Title) => 9,
            SessionFile::Field(MetaField::Project) => 10,
            SessionFile::Field(MetaField::Favourite) => 11,
            SessionFile::Field(MetaField::Archive) => 12,
        }
    }

    fn from_offset(n: u64) -> Option<Self> {
        [
            SessionFile::Dir,
            SessionFile::TranscriptDir,
            SessionFile::Latest,
        ]
        .into_iter()
        .chain(Self::FILES)
        .find(|f| f.offset() == n)
    }
}

/// What an inode number stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Node {
    Root,
    RootFile(RootFile),
    Session(SessionKey, SessionFile),
    /// `transcript/page-N`.
    Page(SessionKey, u64),
    /// `slots/`.
    SlotsDir,
    /// `slots/WORLD_GUID/` (lowercase GUID).
    World(String),
    /// `slots/WORLD_GUID/SLOT`.
    Slot(String, u32),
    /// `agent-transcripts/`.
    TranscriptsDir,
    /// `agent-transcripts/SESSION_ID.jsonl`.
    HostedFile(String),
    /// `agent-transcripts/run`.
    RunFile,
    /// `sessions.json`.
    SessionsJson,
    /// `archived/`, `favourites/`, `projects/`, `engines/`.
    View(ViewDir),
    /// `projects/NAME/` or `engines/ENGINE/`.
    Facet(ViewDir, String),
    /// A symlink to a session directory inside a view.
    ViewLink(ViewDir, Option<String>, SessionKey),
    /// A file an editor made in a session directory, kept in memory.
    Scratch(SessionKey, String),
}

/// The directories that show sessions another way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ViewDir {
    Archived,
    Favourites,
    Projects,
    Engines,
}

impl ViewDir {
    pub const ALL: [ViewDir; 4] = [
        ViewDir::Archived,
        ViewDir::Favourites,
        ViewDir::Projects,
        ViewDir::Engines,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ViewDir::Archived => "archived",
            ViewDir::Favourites => "favourites",
            ViewDir::Projects => "projects",
            ViewDir::Engines => "engines",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }
}

#[derive(Debug, Default)]
struct Table {
    keys: Vec<SessionKey>,
    index: HashMap<SessionKey, u64>,
    /// Nodes named by strings other than session keys (worlds, slots,
    /// hosted transcripts), numbered on first sight.
    named: Vec<Node>,
    named_index: HashMap<Node, u64>,
}

const SLOTS_DIR: u64 = 5;
const TRANSCRIPTS_DIR: u64 = 6;
const RUN_FILE: u64 = 7;
const SESSIONS_JSON: u64 = 8;
const FIRST_VIEW: u64 = 9;
const FIRST_NAMED: u64 = 1 << 50;

#[derive(Debug, Default)]
pub struct InodeTable {
    table: Mutex<Table>,
}

impl InodeTable {
    /// The session's number, handed out on first sight.
    fn index_of(&self, key: &SessionKey) -> u64 {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        match t.index.get(key) {
            Some(i) => *i,
            None => {
                let i = t.keys.len() as u64;
                t.keys.push(key.clone());
                t.index.insert(key.clone(), i);
                i
            }
        }
    }

    fn key_at(&self, index: u64) -> Option<SessionKey> {
        let t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.keys.get(index as usize).cloned()
    }

    pub fn ino(&self, node: &Node) -> u64 {
        match node {
            Node::Root => ROOT,
            Node::RootFile(f) => f.ino(),
            Node::Session(key, file) => {
                FIRST_SESSION + self.index_of(key) * PER_SESSION + file.offset()
            }
            Node::SlotsDir => SLOTS_DIR,
            Node::TranscriptsDir => TRANSCRIPTS_DIR,
            Node::RunFile => RUN_FILE,
            Node::SessionsJson => SESSIONS_JSON,
            Node::View(v) => FIRST_VIEW + *v as u64,
            Node::World(_)
            | Node::Slot(..)
            | Node::HostedFile(_)
            | Node::Facet(..)
            | Node::ViewLink(..)
            | Node::Scratch(..) => {
                let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
                let next = t.named.len() as u64;
                let idx = *t.named_index.entry(node.clone()).or_insert(next);
                if idx == next {
                    t.named.push(node.clone());
                }
                FIRST_NAMED + idx
            }
            Node::Page(key, n) => {
                FIRST_PAGE
                    + self.index_of(key) * PAGES_PER_SESSION
                    + (*n).min(PAGES_PER_SESSION - 1)
            }
        }
    }

    pub fn node(&self, ino: u64) -> Option<Node> {
        if ino == ROOT {
            return Some(Node::Root);
        }
        if let Some(f) = RootFile::ALL.into_iter().find(|f| f.ino() == ino) {
            return Some(Node::RootFile(f));
        }
        match ino {
            SLOTS_DIR => return Some(Node::SlotsDir),
            TRANSCRIPTS_DIR => return Some(Node::TranscriptsDir),
            RUN_FILE => return Some(Node::RunFile),
            SESSIONS_JSON => return Some(Node::SessionsJson),
            n if (FIRST_VIEW..FIRST_VIEW + 4).contains(&n) => {
                return Some(Node::View(ViewDir::ALL[(n - FIRST_VIEW) as usize]))
            }
            _ => {}
        }
        if let Some(rel) = ino.checked_sub(FIRST_NAMED) {
            let t = self.table.lock().unwrap_or_else(|e| e.into_inner());
            return t.named.get(rel as usize).cloned();
        }
        if let Some(rel) = ino.checked_sub(FIRST_PAGE) {
            let key = self.key_at(rel / PAGES_PER_SESSION)?;
            return Some(Node::Page(key, rel % PAGES_PER_SESSION));
        }
        let rel = ino.checked_sub(FIRST_SESSION)?;
        let key = self.key_at(rel / PER_SESSION)?;
        Some(Node::Session(
            key,
            SessionFile::from_offset(rel % PER_SESSION)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_stable_and_reversible() {
        let t = InodeTable::default();
        let a = SessionKey::parse("shell:a").unwrap();
        let b = SessionKey::parse("shell:b").unwrap();
        let na = Node::Session(a.clone(), SessionFile::Meta);
        let ino = t.ino(&na);
        t.ino(&Node::Session(b.clone(), SessionFile::Dir));
        assert_eq!(t.ino(&na), ino);
        assert_eq!(t.node(ino), Some(na));
        assert_eq!(
            t.node(RootFile::Ctl.ino()),
            Some(Node::RootFile(RootFile::Ctl))
        );
        assert_eq!(t.node(ROOT), Some(Node::Root));
        assert_eq!(t.node(999), None);
        let slot = Node::Slot("w".into(), 3);
        let slot_ino = t.ino(&slot);
        assert_eq!(t.ino(&Node::World("w".into())), slot_ino + 1);
        assert_eq!(t.node(slot_ino), Some(slot));
        assert_eq!(t.node(t.ino(&Node::RunFile)), Some(Node::RunFile));
        let page = Node::Page(b.clone(), 7);
        assert_eq!(t.node(t.ino(&page)), Some(page));
    }
}
