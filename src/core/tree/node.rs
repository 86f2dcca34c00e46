//! Inode numbers: fixed for the root's files, and derived from the session
//! key and file (or the slot, world, page...) for everything else, so a file
//! keeps its number while the daemon runs (editors check it) and across
//! restarts (NFS exports and long-running clients keep their handles).

pub use crate::core::organize::views::ViewDir;
use crate::core::records::slots::{MAX_SLOT_RECORD_BYTES, MAX_TRANSCRIPT_BYTES};
use crate::core::tree::scratch;
use crate::core::{MetaField, META_FILE_MAX};
use crate::key::SessionKey;
use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

pub const ROOT: u64 = 1;

/// The files of the root directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RootFile {
    Readme,
    Status,
    Ctl,
    /// `usage.json`: tokens and cost by day, project and engine.
    UsageJson,
}

impl RootFile {
    pub const ALL: [RootFile; 4] = [
        RootFile::Readme,
        RootFile::Status,
        RootFile::Ctl,
        RootFile::UsageJson,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RootFile::Readme => "README",
            RootFile::Status => "status",
            RootFile::Ctl => "ctl",
            RootFile::UsageJson => "usage.json",
        }
    }

    pub fn ino(self) -> u64 {
        match self {
            RootFile::Readme => 2,
            RootFile::Status => 3,
            RootFile::Ctl => 4,
            RootFile::UsageJson => USAGE_JSON,
        }
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
    /// What the session is doing: one line (`core::agents::session_agent`).
    State,
    /// Blocks until the session is not starting or busy (`waits.rs`).
    Wait,
    /// The session's state changes, JSON lines.
    Events,
    /// A prompt, typed and submitted on close.
    Prompt,
    /// `transcript/last`: the last complete turn.
    TranscriptLast,
    /// What the session changed in its git workspace (`git diff`), made
    /// at `open` in the pool.
    Diff,
    /// Its tokens and cost, JSON (`core::organize::usage_files`).
    Usage,
}

impl SessionFile {
    /// In listing order: `screen` last, as a listing with attributes
    /// gives it only at the head of a reply (its size is the VT mirror's
    /// text), so the files before it come in the first.
    pub const FILES: [SessionFile; 16] = [
        SessionFile::Scrollback,
        SessionFile::Input,
        SessionFile::Status,
        SessionFile::Ctl,
        SessionFile::Meta,
        SessionFile::Field(MetaField::Title),
        SessionFile::Field(MetaField::Project),
        SessionFile::Field(MetaField::Favourite),
        SessionFile::Field(MetaField::Archive),
        SessionFile::State,
        SessionFile::Wait,
        SessionFile::Events,
        SessionFile::Prompt,
        SessionFile::Diff,
        SessionFile::Usage,
        SessionFile::Screen,
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
            SessionFile::State => "state",
            SessionFile::Wait => "wait",
            SessionFile::Events => "events",
            SessionFile::Prompt => "prompt",
            SessionFile::TranscriptLast => "last",
            SessionFile::Diff => "diff",
            SessionFile::Usage => "usage",
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
            SessionFile::State => 13,
            SessionFile::Wait => 14,
            SessionFile::Events => 15,
            // Past 15: the two spare bits above the hash hold the rest.
            SessionFile::Prompt => 16,
            SessionFile::TranscriptLast => 17,
            SessionFile::Diff => 18,
            SessionFile::Usage => 19,
        }
    }

    fn from_offset(n: u64) -> Option<Self> {
        [
            SessionFile::Dir,
            SessionFile::TranscriptDir,
            SessionFile::Latest,
            SessionFile::TranscriptLast,
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
    /// The root `events`: every session's changes. The number is its
    /// file's inode on disk, so the name gets a new inode when the file is
    /// rotated and `tail -F` moves to the new one.
    Events(u64),
    /// `archived/`, `favourites/`, `projects/`, `engines/`.
    View(ViewDir),
    /// `projects/NAME/` or `engines/ENGINE/`.
    Facet(ViewDir, String),
    /// A symlink to a session directory inside a view.
    ViewLink(ViewDir, Option<String>, SessionKey),
    /// A conversation another session writes or wrote (its agent switched
    /// to it in its own process): a symlink in the root to that session.
    Written(SessionKey),
    /// `KEY/transcript/ID/`: a conversation the session's process wrote
    /// before its current one.
    Earlier(SessionKey, String),
    /// `KEY/transcript/ID/page-N`.
    EarlierPage(SessionKey, String, u64),
    /// A file an editor made in a session directory, kept in memory.
    Scratch(SessionKey, String),
}

/// A view's directory is numbered, like every directory of the root.
impl ViewDir {
    /// Fixed, like every directory of the root.
    pub fn ino(self) -> u64 {
        FIRST_VIEW + self as u64
    }
}

/// What a node is to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
}

/// Which `open` calls a node takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opens {
    /// A directory: EISDIR.
    Dir,
    /// A symlink: ELOOP.
    Link,
    /// Read only: a writer gets EACCES.
    Read,
    /// Write only: a reader gets EACCES.
    Write,
    /// Read, or replaced whole by a writer; not both (EINVAL).
    ReadOrReplace,
    /// Read, or appended to; not both (EINVAL), never truncated (EPERM).
    ReadOrAppend,
    /// Appended to only.
    Append,
    /// Anything a regular file takes (editors' scratch files).
    Any,
}

/// How far `truncate` may take a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// Not writable: refused as read-only.
    ReadOnly,
    /// A stream: holds nothing, so only 0 is a size.
    Stream,
    /// A file of at most this many bytes.
    Bytes(u64),
}

/// Where a node's content comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Entries, not bytes.
    Listing,
    /// A link target.
    Target,
    /// Text generated at `open`, fixed for that handle.
    Generated,
    /// The session's output ring, read through a per-handle view.
    Ring,
    /// Writes go to a session or the daemon (`input`, `ctl`), off the request threads.
    Commands,
    /// The session's metadata, replaced by the save protocol (`save.rs`).
    Metadata,
    /// Bytes kept in memory for an editor (`scratch.rs`).
    Scratch,
    /// Slot records and hosted transcripts (`records.rs`).
    Records,
}

/// One row of the node table: everything about a kind of node that does
/// not depend on the session it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRow {
    pub kind: Kind,
    pub perm: u16,
    pub opens: Opens,
    pub cap: Cap,
    pub content: Content,
    /// `chmod`/`chown` succeed without changing anything (editors `fchmod`
    /// what they save); elsewhere they are EPERM.
    pub editable: bool,
}

const fn row(kind: Kind, perm: u16, opens: Opens, cap: Cap, content: Content) -> NodeRow {
    NodeRow {
        kind,
        perm,
        opens,
        cap,
        content,
        editable: false,
    }
}

const DIR: NodeRow = row(
    Kind::Dir,
    0o755,
    Opens::Dir,
    Cap::ReadOnly,
    Content::Listing,
);
const READ_DIR: NodeRow = row(
    Kind::Dir,
    0o555,
    Opens::Dir,
    Cap::ReadOnly,
    Content::Listing,
);
const LINK: NodeRow = row(
    Kind::Symlink,
    0o777,
    Opens::Link,
    Cap::ReadOnly,
    Content::Target,
);
const GENERATED: NodeRow = row(
    Kind::File,
    0o444,
    Opens::Read,
    Cap::ReadOnly,
    Content::Generated,
);
const COMMANDS: NodeRow = row(
    Kind::File,
    0o200,
    Opens::Write,
    Cap::Stream,
    Content::Commands,
);
const METADATA: NodeRow = NodeRow {
    editable: true,
    ..row(
        Kind::File,
        0o600,
        Opens::ReadOrReplace,
        Cap::Bytes(META_FILE_MAX),
        Content::Metadata,
    )
};

impl Node {
    /// The node table: one row per kind of node. (A scratch file that is a
    /// symlink is told apart by its content, not here.)
    pub fn row(&self) -> NodeRow {
        match self {
            Node::Root | Node::View(_) | Node::Facet(..) => DIR,
            Node::SlotsDir | Node::TranscriptsDir | Node::World(_) => DIR,
            Node::Session(_, SessionFile::Dir) => DIR,
            Node::Session(_, SessionFile::TranscriptDir) | Node::Earlier(..) => READ_DIR,
            Node::Session(_, SessionFile::Latest) | Node::ViewLink(..) | Node::Written(_) => LINK,
            Node::RootFile(RootFile::Readme | RootFile::Status | RootFile::UsageJson)
            | Node::SessionsJson => GENERATED,
            Node::Events(_) => GENERATED,
            Node::Page(..) | Node::EarlierPage(..) => GENERATED,
            Node::Session(
                _,
                SessionFile::Screen | SessionFile::Status | SessionFile::Diff | SessionFile::Usage,
            ) => GENERATED,
            Node::Session(
                _,
                SessionFile::State
                | SessionFile::Wait
                | SessionFile::Events
                | SessionFile::TranscriptLast,
            ) => GENERATED,
            Node::Session(_, SessionFile::Prompt) => COMMANDS,
            Node::Session(_, SessionFile::Scrollback) => NodeRow {
                content: Content::Ring,
                ..GENERATED
            },
            Node::RootFile(RootFile::Ctl) => COMMANDS,
            Node::Session(_, SessionFile::Input | SessionFile::Ctl) => COMMANDS,
            Node::Session(_, SessionFile::Meta | SessionFile::Field(_)) => METADATA,
            Node::Scratch(..) => NodeRow {
                editable: true,
                ..row(
                    Kind::File,
                    0o600,
                    Opens::Any,
                    Cap::Bytes(scratch::FILE_MAX),
                    Content::Scratch,
                )
            },
            Node::Slot(..) => row(
                Kind::File,
                0o600,
                Opens::ReadOrReplace,
                Cap::Bytes(MAX_SLOT_RECORD_BYTES),
                Content::Records,
            ),
            Node::HostedFile(_) => row(
                Kind::File,
                0o600,
                Opens::ReadOrAppend,
                Cap::Bytes(MAX_TRANSCRIPT_BYTES),
                Content::Records,
            ),
            Node::RunFile => row(
                Kind::File,
                0o200,
                Opens::Append,
                Cap::Stream,
                Content::Records,
            ),
        }
    }

    /// How messages about this node name it.
    pub fn label(&self) -> String {
        match self {
            Node::Root => "/".to_string(),
            Node::RootFile(f) => f.name().to_string(),
            Node::Session(key, SessionFile::Dir) => key.to_string(),
            Node::Session(key, f) => format!("{key}/{}", f.name()),
            Node::Page(key, n) => format!("{key}/transcript/page-{n}"),
            Node::SlotsDir => "slots".to_string(),
            Node::World(w) => format!("slots/{w}"),
            Node::Slot(w, n) => format!("slot record {w}/{n}"),
            Node::TranscriptsDir => "agent-transcripts".to_string(),
            Node::HostedFile(id) => format!("transcript {id}.jsonl"),
            Node::RunFile => "agent-transcripts/run".to_string(),
            Node::SessionsJson => "sessions.json".to_string(),
            Node::Events(_) => "events".to_string(),
            Node::View(v) => v.name().to_string(),
            Node::Facet(v, name) => format!("{}/{name}", v.name()),
            Node::ViewLink(v, _, key) => format!("{}/{key}", v.name()),
            Node::Written(key) => format!("{key} (a link to the session that writes it)"),
            Node::Earlier(key, id) => format!("{key}/transcript/{id}"),
            Node::EarlierPage(key, id, n) => format!("{key}/transcript/{id}/page-{n}"),
            Node::Scratch(key, name) => format!("scratch file {key}/{name}"),
        }
    }

    /// The session a node belongs to, if any.
    pub fn session(&self) -> Option<&SessionKey> {
        match self {
            Node::Session(key, _)
            | Node::Page(key, _)
            | Node::Scratch(key, _)
            | Node::Earlier(key, _)
            | Node::EarlierPage(key, _, _) => Some(key),
            _ => None,
        }
    }
}

/// Session files: `01` in the top two bits, 56 bits from the key's hash,
/// then the file's offset in the low 4 bits.
const SESSION_SPACE: u64 = 1 << 62;
const SESSION_HASH_BITS: u32 = 56;
/// Offsets past 15 put their high bits in the two bits between the hash and
/// the space, so the numbers of the first sixteen files never changed.
const OFFSET_HIGH: u32 = 60;
/// Transcript pages: `10`, 42 bits from the key's hash, 20 bits of page.
const PAGE_SPACE: u64 = 2 << 62;
const PAGE_HASH_BITS: u32 = 42;
const PAGE_BITS: u32 = 20;
/// Other named nodes (worlds, slots, hosted files, facets, view links,
/// scratch files): `11` and 62 bits from the node's hash.
const NAMED_SPACE: u64 = 3 << 62;
const NAMED_HASH_BITS: u32 = 62;

const SLOTS_DIR: u64 = 5;
const TRANSCRIPTS_DIR: u64 = 6;
const RUN_FILE: u64 = 7;
const SESSIONS_JSON: u64 = 8;
const FIRST_VIEW: u64 = 9;
/// After the four views.
const USAGE_JSON: u64 = 13;
/// The root `events`: this bit and the low bits of its file's inode on
/// disk, so each file it was has a number of its own, none kept in a table.
const EVENTS_SPACE: u64 = 1 << 40;
pub const EVENTS_FILE_BITS: u64 = crate::agent::stream::FILE_ID_BITS;

/// FNV-1a of the parts, each ended by a NUL: a hash whose value never
/// changes between builds or runs, so the numbers it gives survive a
/// daemon restart.
fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut h = crate::hashing::Fnv1a::new();
    for part in parts {
        h.write(part);
        h.write(&[0]);
    }
    h.finish()
}

/// Numbers handed out in one space: each name's hash picks its slot, and
/// the rare collision takes the next free one (so only colliding names
/// depend on the order they were first seen).
#[derive(Debug)]
struct Space<T> {
    bits: u32,
    by_slot: HashMap<u64, T>,
    by_name: HashMap<T, u64>,
    /// The slots the kernel holds lookups on. A slot it holds none of is
    /// kept only while there are few such: its number comes back from its
    /// hash when it is named again.
    referenced: HashMap<u64, Referenced>,
    /// Referenced slots whose name is gone (see `renumber`): not in `by_slot`.
    stale: HashSet<u64>,
    /// Counts lookups, to tell the ones looked up longest ago.
    clock: u64,
    /// Lookups since the kernel was last asked to drop entries.
    since_drop: usize,
}

/// The kernel's hold on one number.
#[derive(Debug)]
struct Referenced {
    lookups: u64,
    /// The clock at its last lookup.
    last: u64,
    /// The directory and name the kernel last looked it up by.
    entry: Entry,
}

/// A directory entry as the kernel holds it: its parent's number and name.
pub type Entry = (u64, String);

/// Slots the kernel holds no lookup on, kept until there are this many:
/// then they all go (a listing hands out numbers the kernel never looks up).
const UNREFERENCED_MAX: usize = 4096;

/// Named numbers the kernel may hold at once. Any well-formed GUID under
/// `slots/` is a world, and the kernel keeps what it looked up until memory
/// runs short; past this many, it is asked to drop the quarter it looked up
/// longest ago (those in use stay).
pub const REFERENCED_MAX: usize = 16 * 1024;

impl<T: Clone + Eq + std::hash::Hash> Space<T> {
    fn new(bits: u32) -> Self {
        Space {
            bits,
            by_slot: HashMap::new(),
            by_name: HashMap::new(),
            referenced: HashMap::new(),
            stale: HashSet::new(),
            clock: 0,
            since_drop: REFERENCED_MAX / 4,
        }
    }

    fn slot(&mut self, name: &T, hash: u64) -> u64 {
        if let Some(slot) = self.by_name.get(name) {
            return *slot;
        }
        // Numbers renumbered away may be referenced with no name behind them.
        let referenced_named = self.referenced.len().saturating_sub(self.stale.len());
        if self.by_slot.len().saturating_sub(referenced_named) >= UNREFERENCED_MAX {
            self.drop_unreferenced();
        }
        let mask = (1u64 << self.bits) - 1;
        let mut slot = hash & mask;
        while self.by_slot.contains_key(&slot) || self.referenced.contains_key(&slot) {
            slot = (slot + 1) & mask;
        }
        self.by_slot.insert(slot, name.clone());
        self.by_name.insert(name.clone(), slot);
        slot
    }

    fn name(&self, slot: u64) -> Option<T> {
        self.by_slot.get(&slot).cloned()
    }

    /// The slot of `name`, counted as one more lookup the kernel holds
    /// under `entry`; and, when the kernel holds too many, the entries it
    /// is to drop.
    fn looked_up(&mut self, name: &T, hash: u64, entry: Entry) -> (u64, Vec<Entry>) {
        let slot = self.slot(name, hash);
        self.clock += 1;
        let last = self.clock;
        let referenced = self.referenced.entry(slot).or_insert(Referenced {
            lookups: 0,
            last,
            entry: (0, String::new()),
        });
        referenced.lookups += 1;
        referenced.last = last;
        referenced.entry = entry;
        self.since_drop += 1;
        (slot, self.entries_to_evict())
    }

    /// Past [`REFERENCED_MAX`], and once per quarter of it looked up since the
    /// last time: the entries looked up longest ago, down to three
    /// quarters. They count as looked up now, so one the kernel keeps (a
    /// file open, a working directory) is not asked for again first.
    fn entries_to_evict(&mut self) -> Vec<Entry> {
        if self.referenced.len() <= REFERENCED_MAX || self.since_drop < REFERENCED_MAX / 4 {
            return Vec::new();
        }
        self.since_drop = 0;
        let mut by_age: Vec<(u64, u64)> =
            self.referenced.iter().map(|(s, h)| (h.last, *s)).collect();
        by_age.sort_unstable();
        let excess = self.referenced.len() - REFERENCED_MAX * 3 / 4;
        let mut entries = Vec::with_capacity(excess);
        for (_, slot) in by_age.into_iter().take(excess) {
            self.clock += 1;
            if let Some(referenced) = self.referenced.get_mut(&slot) {
                referenced.last = self.clock;
                entries.push(referenced.entry.clone());
            }
        }
        entries
    }

    /// The kernel let go of `n` lookups of `slot`: at none, the slot is free.
    fn forget(&mut self, slot: u64, n: u64) {
        if let Some(referenced) = self.referenced.get_mut(&slot) {
            if referenced.lookups > n {
                referenced.lookups -= n;
                return;
            }
        }
        self.referenced.remove(&slot);
        self.stale.remove(&slot);
        if let Some(name) = self.by_slot.remove(&slot) {
            // A name given another number since keeps it.
            if self.by_name.get(&name) == Some(&slot) {
                self.by_name.remove(&name);
            }
        }
    }

    /// `name` is to get another number at its next lookup. The one it has
    /// is not given to anything else while the kernel holds it; until the
    /// kernel forgets it, it still names `name` when `resolves`, else
    /// nothing (what the kernel holds by it is gone).
    fn renumber(&mut self, name: &T, resolves: bool) {
        if let Some(slot) = self.by_name.remove(name) {
            let referenced = self.referenced.contains_key(&slot);
            if !resolves || !referenced {
                self.by_slot.remove(&slot);
            }
            if !resolves && referenced {
                self.stale.insert(slot);
            }
        }
    }

    fn drop_unreferenced(&mut self) {
        let referenced = &self.referenced;
        self.by_slot.retain(|slot, _| referenced.contains_key(slot));
        self.by_name.retain(|_, slot| referenced.contains_key(slot));
    }

    fn len(&self) -> usize {
        self.by_slot.len() + self.stale.len()
    }
}

#[derive(Debug)]
struct Table {
    sessions: Space<SessionKey>,
    pages: Space<SessionKey>,
    named: Space<Node>,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            sessions: Space::new(SESSION_HASH_BITS),
            pages: Space::new(PAGE_HASH_BITS),
            named: Space::new(NAMED_HASH_BITS),
        }
    }
}

fn key_hash(key: &SessionKey) -> u64 {
    stable_hash(&[key.as_str().as_bytes()])
}

fn named_hash(node: &Node) -> u64 {
    let view = |v: &ViewDir| v.name().as_bytes();
    match node {
        Node::World(w) => stable_hash(&[b"world", w.as_bytes()]),
        Node::Slot(w, n) => stable_hash(&[b"slot", w.as_bytes(), n.to_string().as_bytes()]),
        Node::HostedFile(id) => stable_hash(&[b"hosted", id.as_bytes()]),
        Node::Facet(v, name) => stable_hash(&[b"facet", view(v), name.as_bytes()]),
        Node::ViewLink(v, facet, key) => stable_hash(&[
            b"link",
            view(v),
            facet.as_deref().unwrap_or("").as_bytes(),
            key.as_str().as_bytes(),
        ]),
        Node::Scratch(key, name) => {
            stable_hash(&[b"scratch", key.as_str().as_bytes(), name.as_bytes()])
        }
        Node::Written(key) => stable_hash(&[b"written", key.as_str().as_bytes()]),
        Node::Earlier(key, id) => {
            stable_hash(&[b"earlier", key.as_str().as_bytes(), id.as_bytes()])
        }
        Node::EarlierPage(key, id, n) => stable_hash(&[
            b"earlier-page",
            key.as_str().as_bytes(),
            id.as_bytes(),
            n.to_string().as_bytes(),
        ]),
        other => stable_hash(&[format!("{other:?}").as_bytes()]),
    }
}

/// Whether `node` is numbered in the named space.
fn is_named(node: &Node) -> bool {
    matches!(
        node,
        Node::World(_)
            | Node::Slot(..)
            | Node::HostedFile(_)
            | Node::Facet(..)
            | Node::ViewLink(..)
            | Node::Written(_)
            | Node::Earlier(..)
            | Node::EarlierPage(..)
            | Node::Scratch(..)
    )
}

/// Inode numbers derived from what a node is (its session key and file, a
/// page number, a slot's name), so the same file has the same number in
/// every daemon that serves it, across restarts.
#[derive(Debug, Default)]
pub struct InodeTable {
    table: Mutex<Table>,
}

impl InodeTable {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        lock(&self.table)
    }

    pub fn ino(&self, node: &Node) -> u64 {
        match node {
            Node::Root => ROOT,
            Node::RootFile(f) => f.ino(),
            Node::Session(key, file) => {
                let slot = self.table().sessions.slot(key, key_hash(key));
                let offset = file.offset();
                SESSION_SPACE | (offset >> 4) << OFFSET_HIGH | slot << 4 | (offset & 15)
            }
            Node::SlotsDir => SLOTS_DIR,
            Node::TranscriptsDir => TRANSCRIPTS_DIR,
            Node::RunFile => RUN_FILE,
            Node::SessionsJson => SESSIONS_JSON,
            Node::View(v) => v.ino(),
            Node::World(_)
            | Node::Slot(..)
            | Node::HostedFile(_)
            | Node::Facet(..)
            | Node::ViewLink(..)
            | Node::Written(_)
            | Node::Earlier(..)
            | Node::EarlierPage(..)
            | Node::Scratch(..) => NAMED_SPACE | self.table().named.slot(node, named_hash(node)),
            Node::Events(file) => EVENTS_SPACE | (file & EVENTS_FILE_BITS),
            Node::Page(key, n) => {
                let slot = self.table().pages.slot(key, key_hash(key));
                PAGE_SPACE | slot << PAGE_BITS | (*n).min((1 << PAGE_BITS) - 1)
            }
        }
    }

    /// The number of `node` as a lookup (or `mkdir`, `create`...) hands it
    /// to the kernel, which holds it until it forgets it (see [`forget`]).
    /// Sessions' and pages' numbers are kept while their session is known;
    /// the named ones (any well-formed world GUID is one) only while the
    /// kernel holds them.
    ///
    /// [`forget`]: InodeTable::forget
    /// `entry` is the directory and name it was looked up by; when the
    /// kernel holds too many, the entries it is to drop come back too.
    pub fn looked_up(&self, node: &Node, entry: Entry) -> (u64, Vec<Entry>) {
        if is_named(node) {
            let (slot, to_evict) = self.table().named.looked_up(node, named_hash(node), entry);
            (NAMED_SPACE | slot, to_evict)
        } else {
            (self.ino(node), Vec::new())
        }
    }

    /// After `rmdir` of a world: the kernel keeps the directory's inode
    /// marked dead as long as anything holds it (a working directory, an
    /// open listing), and a dead directory takes no new file (ENOENT). The
    /// world is still there by name, so its next lookup gets another
    /// number, hence a live inode; the old one still names the world.
    ///
    /// After an editor's scratch file is removed or renamed away: a file
    /// made under its name later (a symlink where a file was) gets another
    /// number, since the kernel takes a number it holds coming back as
    /// another type of file for a broken inode (EIO to whoever holds it).
    /// The old number then names nothing (ENOENT).
    pub fn renumber(&self, node: &Node) {
        if is_named(node) {
            let resolves = !matches!(node, Node::Scratch(..));
            self.table().named.renumber(node, resolves);
        }
    }

    /// The kernel dropped `n` lookups of `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        if ino & (3 << 62) == NAMED_SPACE {
            self.table().named.forget(ino & !NAMED_SPACE, n);
        }
    }

    /// The entries (parent, name) the kernel holds of `key`'s links in
    /// the views, as it last looked them up. One pass over what it holds
    /// (at most [`REFERENCED_MAX`] and a quarter), made when a session's
    /// metadata changes.
    pub fn referenced_links_of(&self, key: &SessionKey) -> Vec<Entry> {
        let t = self.table();
        let named = &t.named;
        named
            .referenced
            .iter()
            .filter(|(slot, _)| {
                matches!(named.by_slot.get(slot), Some(Node::ViewLink(_, _, k)) if k == key)
            })
            .map(|(_, referenced)| referenced.entry.clone())
            .collect()
    }

    /// How many numbers the table holds.
    pub fn count(&self) -> usize {
        let t = self.table();
        t.sessions.len() + t.pages.len() + t.named.len()
    }

    /// Makes the numbers of `keys` known, so that a number a client kept
    /// from an earlier daemon resolves before this one has listed it.
    pub fn learn<'a>(&self, keys: impl IntoIterator<Item = &'a SessionKey>) {
        let mut t = self.table();
        for key in keys {
            let hash = key_hash(key);
            t.sessions.slot(key, hash);
            t.pages.slot(key, hash);
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
            n if n & !EVENTS_FILE_BITS == EVENTS_SPACE => {
                return Some(Node::Events(n & EVENTS_FILE_BITS))
            }
            _ => {}
        }
        let t = self.table();
        match ino & (3 << 62) {
            SESSION_SPACE => {
                let key = t.sessions.name((ino & ((1 << OFFSET_HIGH) - 1)) >> 4)?;
                let offset = (ino >> OFFSET_HIGH & 3) << 4 | (ino & 15);
                Some(Node::Session(key, SessionFile::from_offset(offset)?))
            }
            PAGE_SPACE => {
                let key = t.pages.name((ino & !PAGE_SPACE) >> PAGE_BITS)?;
                Some(Node::Page(key, ino & ((1 << PAGE_BITS) - 1)))
            }
            NAMED_SPACE => t.named.name(ino & !NAMED_SPACE),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stable_hash_is_the_one_earlier_daemons_used() {
        // FNV-1a of "ab\0c\0": numbers a restarted daemon hands out again.
        assert_eq!(stable_hash(&[b"ab", b"c"]), 0xad22_872f_536e_4705);
    }

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
        assert_ne!(t.ino(&Node::World("w".into())), slot_ino);
        assert_eq!(t.node(slot_ino), Some(slot));
        assert_eq!(t.node(t.ino(&Node::RunFile)), Some(Node::RunFile));
        let page = Node::Page(b.clone(), 7);
        assert_eq!(t.node(t.ino(&page)), Some(page));
    }

    #[test]
    fn files_past_the_sixteenth_keep_the_first_sixteen_numbers() {
        let t = InodeTable::default();
        let key = SessionKey::parse("claude:x").unwrap();
        let dir = t.ino(&Node::Session(key.clone(), SessionFile::Dir));
        // The layout of the first sixteen files is what it always was.
        assert_eq!(dir & 15, 0);
        assert_eq!(
            t.ino(&Node::Session(key.clone(), SessionFile::Events)),
            dir | 15
        );
        let mut seen = std::collections::HashSet::new();
        for f in SessionFile::FILES.into_iter().chain([
            SessionFile::Dir,
            SessionFile::TranscriptDir,
            SessionFile::Latest,
            SessionFile::TranscriptLast,
        ]) {
            let node = Node::Session(key.clone(), f);
            let ino = t.ino(&node);
            assert!(seen.insert(ino), "{f:?} shares a number");
            assert_eq!(t.node(ino), Some(node));
        }
    }

    #[test]
    fn another_table_gives_the_same_numbers_in_any_order() {
        let keys: Vec<SessionKey> = (0..500)
            .map(|i| SessionKey::parse(&format!("shell:s{i}")).unwrap())
            .collect();
        let first = InodeTable::default();
        let numbers: Vec<u64> = keys
            .iter()
            .map(|k| first.ino(&Node::Session(k.clone(), SessionFile::Meta)))
            .collect();
        let second = InodeTable::default();
        for (k, ino) in keys.iter().zip(&numbers).rev() {
            assert_eq!(
                second.ino(&Node::Session(k.clone(), SessionFile::Meta)),
                *ino
            );
        }
        // A number kept from an earlier daemon resolves once keys are learnt.
        let third = InodeTable::default();
        assert_eq!(third.node(numbers[42]), None);
        third.learn(&keys);
        assert_eq!(
            third.node(numbers[42]),
            Some(Node::Session(keys[42].clone(), SessionFile::Meta))
        );
    }

    fn world(i: usize) -> Node {
        Node::World(format!("{i:08x}-0000-4000-8000-000000000000"))
    }

    /// A lookup of `node` in `slots/` (where the name matters not here).
    fn look_up(t: &InodeTable, node: &Node) -> (u64, Vec<Entry>) {
        t.looked_up(node, (SLOTS_DIR, node.label()))
    }

    #[test]
    fn numbers_the_kernel_forgot_are_let_go_and_come_back_the_same() {
        let t = InodeTable::default();
        let worlds: Vec<Node> = (0..10_000).map(world).collect();
        let numbers: Vec<u64> = worlds.iter().map(|w| look_up(&t, w).0).collect();
        assert_eq!(t.count(), worlds.len());
        // Referenced twice, forgotten once: still there.
        assert_eq!(look_up(&t, &worlds[7]).0, numbers[7]);
        for ino in &numbers {
            t.forget(*ino, 1);
        }
        assert_eq!(t.count(), 1);
        assert_eq!(t.node(numbers[7]), Some(worlds[7].clone()));
        t.forget(numbers[7], 1);
        assert_eq!(t.count(), 0);
        assert_eq!(t.node(numbers[7]), None);
        // Named again, a node gets the number it had.
        assert_eq!(look_up(&t, &worlds[7]).0, numbers[7]);
        assert_eq!(t.ino(&worlds[9]), numbers[9]);
        // Sessions keep theirs: a forget of one of their files changes nothing.
        let key = SessionKey::parse("shell:a").unwrap();
        let meta = Node::Session(key, SessionFile::Meta);
        let ino = look_up(&t, &meta).0;
        t.forget(ino, 1);
        assert_eq!(t.node(ino), Some(meta));
    }

    #[test]
    fn numbers_the_kernel_never_held_are_capped() {
        let t = InodeTable::default();
        let referenced = Node::World("referenced".into());
        let ino = look_up(&t, &referenced).0;
        // A listing hands out numbers without lookups.
        for n in 1..=3 * UNREFERENCED_MAX as u32 {
            t.ino(&Node::Slot("w".into(), n));
        }
        assert!(t.count() <= UNREFERENCED_MAX + 1, "{} numbers", t.count());
        assert_eq!(t.node(ino), Some(referenced));
    }

    #[test]
    fn past_the_cap_the_kernel_is_asked_to_drop_the_oldest_entries() {
        let t = InodeTable::default();
        let mut asked = Vec::new();
        for i in 0..=REFERENCED_MAX {
            let (_, to_evict) = look_up(&t, &world(i));
            asked.extend(to_evict);
        }
        // One past the cap: down to three quarters, oldest first, by the
        // names they were looked up by.
        assert_eq!(asked.len(), REFERENCED_MAX / 4 + 1);
        assert_eq!(asked[0], (SLOTS_DIR, world(0).label()));
        assert_eq!(
            asked[REFERENCED_MAX / 4],
            (SLOTS_DIR, world(REFERENCED_MAX / 4).label())
        );
        for (i, _) in asked.iter().enumerate() {
            t.forget(t.ino(&world(i)), 1);
        }
        assert_eq!(t.count(), REFERENCED_MAX * 3 / 4);
        // Not again until another quarter is looked up; then the oldest
        // still referenced, first.
        let mut again = Vec::new();
        for i in REFERENCED_MAX + 1..REFERENCED_MAX + 1 + REFERENCED_MAX / 4 + 1 {
            again.extend(look_up(&t, &world(i)).1);
        }
        assert_eq!(
            again.first(),
            Some(&(SLOTS_DIR, world(REFERENCED_MAX / 4 + 1).label()))
        );
    }

    #[test]
    fn a_renumbered_world_gets_another_number_and_keeps_the_old_one_while_held() {
        let t = InodeTable::default();
        let w = world(1);
        let (old, _) = look_up(&t, &w);
        t.renumber(&w);
        let (new, _) = look_up(&t, &w);
        assert_ne!(old, new);
        assert_eq!(t.node(old), Some(w.clone()), "the kernel still holds it");
        assert_eq!(t.node(new), Some(w.clone()));
        t.forget(old, 1);
        assert_eq!(t.node(old), None);
        assert_eq!(t.ino(&w), new, "forgetting the old number keeps the new");
        t.forget(new, 1);
        assert_eq!(t.node(new), None);
        // Not referenced: renumbering lets the number go at once.
        let (n, _) = look_up(&t, &w);
        t.forget(n, 1);
        t.renumber(&w);
        assert_eq!(t.count(), 0);
    }

    #[test]
    fn a_renumbered_scratch_file_leaves_its_old_number_naming_nothing() {
        let t = InodeTable::default();
        let f = Node::Scratch(SessionKey::parse("shell:s").unwrap(), "x".into());
        let (old, _) = look_up(&t, &f);
        t.renumber(&f);
        assert_eq!(t.node(old), None, "the removed file is gone");
        let (new, _) = look_up(&t, &f);
        assert_ne!(old, new, "not given out again while the kernel holds it");
        t.forget(old, 1);
        t.forget(new, 1);
        assert_eq!(t.count(), 0);
        assert_eq!(look_up(&t, &f).0, old, "its own number once let go");
    }

    #[test]
    fn colliding_hashes_take_the_next_slot() {
        let mut space = Space::new(4);
        let a = space.slot(&"a", 3);
        let b = space.slot(&"b", 3);
        let c = space.slot(&"c", 15);
        let d = space.slot(&"d", 15);
        assert_eq!((a, b, c, d), (3, 4, 15, 0));
        assert_eq!(space.name(4), Some("b"));
        assert_eq!(space.slot(&"b", 3), 4);
    }
}
