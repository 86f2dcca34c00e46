//! The mounted tree as a plain API: every kernel call the adapter gets is
//! one method here, taking inode and handle numbers and returning
//! `Result<Attr | bytes | entries, Error>`. The request lifecycle lives
//! here (the handle table, buffered writes and their commits, scratch
//! files, directory snapshots), so it can be driven and tested without a
//! mount. Nothing here knows FUSE exists.

use crate::core::agents::session_agent::{empty_prompt, PromptWrite, Taken};
use crate::core::tree::handles::{DirEntry, DirSnapshot, Handle, HandleTable};
use crate::core::tree::mtimes::{digest, program_time, Stamps};
use crate::core::tree::node::{
    Cap, Content, Entry, InodeTable, Kind, Node, Opens, RootFile, SessionFile, ViewDir, ROOT,
};
use crate::core::tree::save::MetaWrite;
use crate::core::tree::scratch::{ScratchFile, ScratchFiles};
use crate::core::tree::slot_files::RecordWrite;
use crate::core::tree::step::{Later, Opened, ReadStep, Step};
use crate::core::{Concern, Core};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::procinfo::tgid_of;
use crate::sync::lock;
use crate::terminal::ring::{Scrollback, View, Waker};
use std::ffi::OsStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// A node's attributes, as the kernel sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub perm: u16,
    pub size: u64,
    pub mtime: SystemTime,
    /// What of this node never changes, so a client may keep it.
    pub fixed: Fixed,
    /// The generation of its inode number: derived from what the node is,
    /// so the number names the same node with the same generation in every
    /// daemon, and a number that a hash collision gave to another node
    /// after a restart is told apart (an NFS handle goes stale, not astray).
    pub generation: u64,
    /// The read size to suggest (`st_blksize`): `cat`, `cp` and buffered
    /// readers take it, and each read is a round trip to the daemon.
    pub io_size: u32,
}

/// What of a node stays the same for as long as it exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixed {
    /// Its size, times or existence change at any moment.
    Nothing,
    /// Its attributes for a while (the root: a mode that never changes, an
    /// mtime that may show a change late).
    Attributes,
    /// A session's directory: its attributes and its entry for a while. It
    /// can leave its parent (archived, unarchived); the kernel is told then.
    Directory,
    /// A directory of the root (`archived/`, `slots/`, ...): its entry for
    /// good, its attributes for a while.
    RootDirectory,
    /// A view's link: its attributes and its entry for a while. Its session
    /// can leave the view (a project, favourite or archive changed); the
    /// kernel is told to drop the entry then ([`Core::on_members_changed`]).
    ///
    /// [`Core::on_members_changed`]: crate::core::Core::on_members_changed
    Member,
    /// Its attributes and its entry: `input` and `ctl` (size 0, write-only)
    /// exist as long as their directory.
    AttributesAndEntry,
    /// Its entry only: it exists as long as its directory, but its size and
    /// times change.
    Entry,
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access {
    pub reads: bool,
    pub writes: bool,
    /// `O_TRUNC`.
    pub truncates: bool,
}

impl Access {
    pub const READ: Access = Access {
        reads: true,
        writes: false,
        truncates: false,
    };
    pub const WRITE: Access = Access {
        reads: false,
        writes: true,
        truncates: false,
    };
}

/// A `setattr` call: what it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetAttr {
    /// A mode or owner change (`chmod`, `chown`).
    pub owner_or_mode: bool,
    pub size: Option<u64>,
}

/// A write that may wait on a session, and so runs off the request
/// threads: the adapter hands [`SlowWrite::run`] to the pool.
#[derive(Debug)]
pub struct SlowWrite {
    target: Target,
    data: Vec<u8>,
}

#[derive(Debug, Clone)]
enum Target {
    Input(SessionKey),
    SessionCtl(SessionKey),
    RootCtl,
}

impl SlowWrite {
    /// What the pool names it by.
    pub fn what(&self) -> String {
        match &self.target {
            Target::Input(key) => format!("input to {key}"),
            Target::SessionCtl(key) => format!("ctl of {key}"),
            Target::RootCtl => "ctl".to_string(),
        }
    }

    /// Whose `status.error` hears of it if the pool gives up.
    pub fn concern(&self) -> Concern {
        match &self.target {
            Target::Input(key) | Target::SessionCtl(key) => Concern::Session(key.clone()),
            Target::RootCtl => Concern::Root,
        }
    }

    /// `stop` must work however many writes are stuck: it may take a reserved place.
    pub fn urgent(&self) -> bool {
        matches!(self.target, Target::SessionCtl(_))
            && commands(&self.data).is_ok_and(|c| c.iter().all(|c| *c == "stop"))
    }

    /// Does an `input` write at once if the session takes it without
    /// waiting; `None` sends it to the pool.
    pub fn run_now(&self, core: &Core) -> Option<usize> {
        match &self.target {
            Target::Input(key) if !self.data.is_empty() => core.write_input_now(key, &self.data),
            _ => None,
        }
    }

    /// Does the write; may wait on the session.
    pub fn run(self, core: &Core) -> Result<usize> {
        match self.target {
            Target::Input(key) => core.write_input(&key, &self.data),
            Target::SessionCtl(key) => {
                for command in commands(&self.data)? {
                    core.session_ctl(&key, command)?;
                }
                Ok(self.data.len())
            }
            Target::RootCtl => {
                for command in commands(&self.data)? {
                    core.root_ctl(command)?;
                }
                Ok(self.data.len())
            }
        }
    }
}

/// The commands in one write to a `ctl` file: one per line.
fn commands(data: &[u8]) -> Result<Vec<&str>> {
    let text =
        std::str::from_utf8(data).map_err(|_| Error::invalid("ctl commands are UTF-8 text"))?;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return Err(Error::invalid("empty ctl command"));
    }
    Ok(lines)
}

/// Up to `size` bytes of a file at `offset` (nothing past its end or when
/// it does not exist yet).
fn read_at(path: &std::path::Path, offset: u64, size: u32) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&format!("cannot read {}", path.display()), &e)),
    };
    let mut buf = vec![0; size.min(1 << 20) as usize];
    let n = f
        .read_at(&mut buf, offset)
        .map_err(|e| Error::io(&format!("cannot read {}", path.display()), &e))?;
    buf.truncate(n);
    Ok(buf)
}

/// FNV-1a of the node's name: the same in every build and run.
fn generation_of(node: &Node) -> u64 {
    crate::hashing::fnv1a(node.label().as_bytes()) | 1
}

/// `page-N` with N in plain decimal.
fn parse_page_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("page-")?;
    let plain = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    plain.then(|| digits.parse().ok())?
}

/// Where `transcript/latest` points.
fn latest_target(pages: usize) -> String {
    format!("page-{}", pages.saturating_sub(1))
}

fn utf8(name: &std::ffi::OsStr) -> Result<&str> {
    name.to_str()
        .ok_or_else(|| Error::invalid("names here are UTF-8"))
}

/// The mounted tree: the core, inode numbers, open handles, scratch files.
#[derive(Debug)]
pub struct Files {
    pub(in crate::core) core: Arc<Core>,
    pub(in crate::core) inodes: InodeTable,
    pub(in crate::core) handles: HandleTable,
    pub(in crate::core) scratch: ScratchFiles,
    stamps: Stamps,
    /// The time of `README` and the root's `ctl`.
    program_time: SystemTime,
    /// Metadata files just removed (`mv` from another filesystem), with
    /// the process that removed them: missing to it alone until it makes
    /// them again, or for [`REMOVED_FOR`].
    removed: Mutex<Vec<(SessionKey, SessionFile, u32, Instant)>>,
    started: SystemTime,
    evict: std::sync::OnceLock<EvictHook>,
}

/// What a buffering handle holds, out of the handle table.
enum Buffer {
    Record(Arc<Mutex<RecordWrite>>),
    Meta(Arc<Mutex<MetaWrite>>),
    Prompt(Arc<Mutex<PromptWrite>>),
}

/// The most a buffering handle holds: a prompt, a slot record or a
/// transcript entry (1 MiB; metadata 64 KiB).
const BUFFERED_MAX: u64 = 1 << 20;

/// What [`Files::on_evict`] calls with the entries (parent's number,
/// name) the kernel is to drop. It must not wait: it is called on a
/// request thread, and the kernel locks the parent directory to drop one.
pub struct EvictHook(pub Box<dyn Fn(Vec<Entry>) + Send + Sync>);

impl std::fmt::Debug for EvictHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EvictHook")
    }
}

/// How long a removed `meta.json` or one-line file stays missing if nothing
/// makes it again: long enough for a copy to follow its `unlink`.
const REMOVED_FOR: Duration = Duration::from_secs(10);

/// At most this many removals are remembered at once.
const REMOVED_MAX: usize = 1024;

impl Files {
    pub fn new(core: Arc<Core>) -> Self {
        Self::with_scratch(core, ScratchFiles::default())
    }

    /// With scratch files capped otherwise (tests).
    pub fn with_scratch(core: Arc<Core>, scratch: ScratchFiles) -> Self {
        let open_bytes = core.config.open_bytes;
        Files {
            core,
            inodes: InodeTable::default(),
            handles: HandleTable::with_limit(open_bytes),
            scratch,
            stamps: Stamps::default(),
            program_time: program_time().unwrap_or_else(SystemTime::now),
            removed: Mutex::default(),
            started: SystemTime::now(),
            evict: std::sync::OnceLock::new(),
        }
    }

    pub fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Records a refusal where its user can read it: the session's
    /// `status.error` for a session's files, else the root `status`'s
    /// `error`, with `what` (the call) before its reason. One recorded
    /// below already is not logged again.
    fn refuse(&self, node: Option<&Node>, what: &str, e: Error) -> Error {
        let concern = match node.and_then(Node::session) {
            Some(key) => Concern::Session(key.clone()),
            None => Concern::Root,
        };
        self.core.record(&concern, e.with_context(what))
    }

    /// [`Files::refuse`] for a call on `name` in directory `parent`.
    fn refuse_in(&self, parent: u64, name: &std::ffi::OsStr, what: &str, e: Error) -> Error {
        let node = self.node(parent).ok();
        let what = format!(
            "{what} {}",
            crate::input_checks::preview(&name.to_string_lossy())
        );
        self.refuse(node.as_ref(), &what, e)
    }

    /// When the mount started: the time of the directories.
    pub fn started(&self) -> SystemTime {
        self.started
    }

    /// Whether `file` of `key` was removed by process `tgid` and not made again yet.
    fn is_removed(&self, key: &SessionKey, file: SessionFile, tgid: u32) -> bool {
        lock(&self.removed)
            .iter()
            .any(|(k, f, t, at)| k == key && *f == file && *t == tgid && at.elapsed() < REMOVED_FOR)
    }

    /// Ends a removal of `file` of `key` by process `tgid`; whether there was one.
    fn take_removed(&self, key: &SessionKey, file: SessionFile, tgid: u32) -> bool {
        let mut removed = lock(&self.removed);
        let found = removed.iter().any(|(k, f, t, at)| {
            k == key && *f == file && *t == tgid && at.elapsed() < REMOVED_FOR
        });
        removed.retain(|(k, f, t, at)| {
            !(k == key && *f == file && *t == tgid) && at.elapsed() < REMOVED_FOR
        });
        found
    }

    fn attr(&self, node: &Node, size: u64, mtime: SystemTime) -> Attr {
        let row = node.row();
        let fixed = match node {
            Node::Session(_, SessionFile::Input | SessionFile::Ctl | SessionFile::Prompt)
            | Node::RootFile(RootFile::Ctl) => Fixed::AttributesAndEntry,
            // Their mtime may show a change late; a facet's entry is
            // looked up every time, so it goes at once.
            Node::Root | Node::Facet(..) => Fixed::Attributes,
            // The same attributes for its life (its target's length, the
            // mount's start); its entry until its session leaves the view.
            Node::ViewLink(..) => Fixed::Member,
            Node::Session(_, SessionFile::Dir) => Fixed::Directory,
            // Always there, never renamed, removed or replaced.
            Node::View(_) | Node::SlotsDir | Node::TranscriptsDir => Fixed::RootDirectory,
            // Never the target of a rename or an unlink that succeeds.
            Node::Session(
                _,
                SessionFile::Scrollback
                | SessionFile::Screen
                | SessionFile::Status
                | SessionFile::State
                | SessionFile::Wait
                | SessionFile::Events
                | SessionFile::Usage,
            )
            | Node::RootFile(RootFile::Readme | RootFile::Status | RootFile::UsageJson)
            | Node::SessionsJson => Fixed::Entry,
            _ => Fixed::Nothing,
        };
        Attr {
            ino: self.inodes.ino(node),
            kind: row.kind,
            perm: row.perm,
            size,
            mtime,
            fixed,
            generation: generation_of(node),
            // A ring of 8 MiB is read in 8 round trips instead of 2,048.
            io_size: if row.content == Content::Ring {
                1 << 20
            } else {
                4096
            },
        }
    }

    /// The node behind `ino`, if its session still exists.
    fn node(&self, ino: u64) -> Result<Node> {
        let node = match self.inodes.node(ino) {
            Some(node) => node,
            None => {
                // A number from an earlier daemon (an NFS handle): it names a
                // session this daemon has not listed yet.
                self.inodes.learn(&self.core.keys());
                self.inodes
                    .node(ino)
                    .ok_or_else(|| Error::not_found(format!("no inode {ino}")))?
            }
        };
        if let Node::Session(key, _)
        | Node::Page(key, _)
        | Node::Earlier(key, _)
        | Node::EarlierPage(key, _, _) = &node
        {
            if !self.core.exists(key) {
                return Err(Error::not_found(format!("no session {key}")));
            }
        }
        Ok(node)
    }

    /// `attr` of `node` as an entry the kernel keeps (a lookup, `mkdir`,
    /// `create`, `symlink`): its number is held until the kernel forgets it.
    /// `parent` and `name` are what the kernel looked it up by.
    fn entry_attr(&self, node: &Node, attr: Attr, parent: u64, name: &std::ffi::OsStr) -> Attr {
        let entry = (parent, name.to_string_lossy().into_owned());
        let (ino, to_evict) = self.inodes.looked_up(node, entry);
        if !to_evict.is_empty() {
            match self.evict.get() {
                Some(hook) => (hook.0)(to_evict),
                None => log::debug!("{} entries to drop, and no one to tell", to_evict.len()),
            }
        }
        Attr { ino, ..attr }
    }

    /// Sets what is told the entries the kernel is to drop when it holds
    /// too many numbers (once; later calls are ignored).
    pub fn on_evict(&self, hook: EvictHook) {
        if self.evict.set(hook).is_err() {
            log::debug!("the entry-eviction hook was already set");
        }
    }

    /// The entries of `key`'s links in the views that the kernel holds:
    /// what it is to drop when the session's membership changes.
    pub fn referenced_links_of(&self, key: &SessionKey) -> Vec<Entry> {
        self.inodes.referenced_links_of(key)
    }

    /// `forget`: the kernel dropped `n` lookups of `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        self.inodes.forget(ino, n);
    }

    /// How many inode numbers this daemon holds.
    pub fn inodes_referenced(&self) -> usize {
        self.inodes.count()
    }

    /// What the kernel and open files hold of the daemon (root `status`).
    fn usage(&self) -> crate::core::sessions::status::Usage {
        let (open_bytes, open_bytes_limit) = self.handles.memory_bytes();
        crate::core::sessions::status::Usage {
            inodes: self.inodes_referenced(),
            open_bytes,
            open_bytes_limit,
        }
    }

    /// The node behind `ino` as far as this daemon knows it, without
    /// asking whether its session still exists (for reports).
    pub fn known_node(&self, ino: u64) -> Option<Node> {
        self.inodes.node(ino)
    }

    /// Size the scrollback shows this caller: its own handle's view when the
    /// calling process has one open (so `tail -f`, which polls `fstat`, sees
    /// growth past the ring's cap), else the bytes held.
    fn scrollback_size(&self, key: &SessionKey, fh: Option<u64>, pid: u32) -> Result<u64> {
        if let Some((ring, view)) = fh.and_then(|fh| self.handles.scrollback_ring(fh, key)) {
            return Ok(ring.view_len(&view));
        }
        if let Some(len) = self.core.archived_scrollback_len(key) {
            return Ok(len);
        }
        // A session never opened in this daemon has an empty ring.
        let Some(rt) = self.core.existing_runtime(key)? else {
            return Ok(0);
        };
        let ring = rt.scrollback();
        // `/proc` is read only when someone holds this session's open.
        if self.handles.scrollback_open(key) {
            if let Some(view) = self.handles.newest_scrollback_of(key, tgid_of(pid)) {
                return Ok(ring.view_len(&view));
            }
        }
        Ok(ring.len() as u64)
    }

    /// Size and time of generated text: dated when its content was first
    /// seen to differ, `first` before that.
    fn dated_text(
        &self,
        ino: u64,
        text: &[u8],
        first: impl FnOnce() -> SystemTime,
    ) -> (u64, SystemTime) {
        (
            text.len() as u64,
            self.stamps.dated(ino, digest(&[text]), first),
        )
    }

    /// The attributes of `node`, as process `pid` (holding `fh`, if any) sees them.
    fn attr_of(&self, node: &Node, fh: Option<u64>, pid: u32) -> Result<Attr> {
        let started = self.started;
        let ino = self.inodes.ino(node);
        // A listing's names, dated by when they last differed.
        // (Sorted: a listing's order follows activity; its members are what date it.)
        let names = |mut names: Vec<String>, first: &dyn Fn() -> SystemTime| {
            names.sort_unstable();
            let joined = names.join("/");
            self.stamps.dated(ino, digest(&[joined.as_bytes()]), first)
        };
        let (size, mtime) = match node {
            // Their members (sessions, and the flags views group by),
            // dated without listing them on every path walk.
            Node::Root | Node::View(_) | Node::Facet(..) => {
                (0, self.core.members_changed(&self.stamps))
            }
            Node::SlotsDir | Node::TranscriptsDir | Node::World(_) => (
                0,
                names(
                    self.records_entries(node)?
                        .into_iter()
                        .map(|(_, _, n)| n)
                        .collect(),
                    &|| started,
                ),
            ),
            Node::Session(key, SessionFile::Dir) => {
                // Its metadata, and its members: editors' files come and go.
                let record = self.core.meta_changed(key);
                let members = names(
                    self.scratch_names(key)
                        .into_iter()
                        .map(|(n, _)| n)
                        .collect(),
                    &|| record,
                );
                (0, record.max(members))
            }
            Node::Session(key, SessionFile::TranscriptDir | SessionFile::Latest)
            | Node::Page(key, _) => {
                let at = self.core.transcript_modified(key)?;
                let size = match node {
                    Node::Page(key, n) => self.core.transcript_page(key, *n as usize)?.len() as u64,
                    Node::Session(_, SessionFile::Latest) => self.link_target(node)?.len() as u64,
                    _ => 0,
                };
                (size, at)
            }
            Node::Events(file) => {
                let meta = self.core.event_stream_meta(*file)?;
                (
                    meta.as_ref().map_or(0, |m| m.len()),
                    meta.and_then(|m| m.modified().ok()).unwrap_or(started),
                )
            }
            Node::SessionsJson => {
                let text = self.core.sessions_json();
                let at = self
                    .stamps
                    .listing(ino, &text, || self.core.listing_changed());
                (text.len(), at)
            }
            // A view's link always names the same session.
            Node::ViewLink(..) => (self.link_target(node)?.len() as u64, started),
            Node::Written(conversation) => (
                self.link_target(node)?.len() as u64,
                self.core.meta_changed(conversation),
            ),
            Node::Earlier(key, id) => (0, self.core.earlier_modified(key, id)),
            Node::EarlierPage(key, id, n) => (
                self.core.earlier_page(key, id, *n as usize)?.len() as u64,
                self.core.earlier_modified(key, id),
            ),
            Node::Scratch(key, name) => {
                let f = self
                    .scratch_get(key, name)
                    .ok_or_else(|| Error::not_found(format!("no {name} in {key}")))?;
                let at = self.stamps.dated(
                    ino,
                    digest(&[
                        &f.len.to_le_bytes(),
                        f.symlink.as_deref().unwrap_or("").as_bytes(),
                    ]),
                    SystemTime::now,
                );
                if let Some(target) = f.symlink {
                    // A link an editor made (emacs's lock): a symlink, not a file.
                    let mut attr = self.attr(node, target.len() as u64, at);
                    attr.kind = Kind::Symlink;
                    attr.perm = 0o777;
                    return Ok(attr);
                }
                (f.len, at)
            }
            Node::RootFile(RootFile::Readme) | Node::RootFile(RootFile::Ctl) => (
                if matches!(node, Node::RootFile(RootFile::Readme)) {
                    self.core.readme().len() as u64
                } else {
                    0
                },
                self.program_time,
            ),
            Node::RootFile(RootFile::Status) => {
                self.dated_text(ino, &self.core.root_status(self.usage()), || started)
            }
            Node::RootFile(RootFile::UsageJson) => {
                self.dated_text(ino, &self.core.usage_json(), || started)
            }
            Node::HostedFile(id) => {
                let path = self.core.slots().transcript_path(id);
                let at = std::fs::metadata(path)
                    .and_then(|m| m.modified())
                    .unwrap_or(started);
                (self.records_size(node)?, at)
            }
            Node::Slot(..) | Node::RunFile => {
                let size = self.records_size(node)?;
                (size, self.stamps.dated(ino, size, || started))
            }
            Node::Session(key, file) => match file {
                SessionFile::Dir | SessionFile::TranscriptDir | SessionFile::Latest => {
                    unreachable!("matched above")
                }
                SessionFile::Scrollback => {
                    let size = self.scrollback_size(key, fh, pid)?;
                    (size, self.core.output_changed(key))
                }
                SessionFile::Screen => (
                    self.core.screen(key)?.len() as u64,
                    self.core.output_changed(key),
                ),
                SessionFile::Status => self.dated_text(ino, &self.core.status(key)?, || {
                    self.core.output_changed(key)
                }),
                SessionFile::Meta => (
                    self.core.meta_json(key)?.len() as u64,
                    self.core.meta_changed(key),
                ),
                SessionFile::Field(f) => (
                    self.core.field_text(key, *f)?.len() as u64,
                    self.core.meta_changed(key),
                ),
                // Write-only streams: their attributes never change.
                SessionFile::Input | SessionFile::Ctl => (0, self.core.created_at(key)),
                // Every change of state is a line of `events`: its mtime
                // dates the last one, whether or not anyone looked.
                SessionFile::State => {
                    let changed = std::fs::metadata(self.core.events_path(key)?)
                        .and_then(|m| m.modified())
                        .unwrap_or_else(|_| self.core.created_at(key));
                    (self.core.state_line(key)?.len() as u64, changed)
                }
                // Streams: what a read returns is not known before it.
                SessionFile::Wait | SessionFile::Prompt => (0, self.core.created_at(key)),
                SessionFile::Events => {
                    let meta = std::fs::metadata(self.core.events_path(key)?).ok();
                    (
                        meta.as_ref().map_or(0, |m| m.len()),
                        meta.and_then(|m| m.modified().ok()).unwrap_or(self.started),
                    )
                }
                // Made at `open` (git runs in the pool, never here): an
                // open handle's text gives it (`fstat`, as `tail` and
                // `less` ask); a path alone, nothing is known.
                SessionFile::Diff => match fh.and_then(|fh| self.diff_text(fh)) {
                    Some(text) => self.dated_text(ino, &text, || self.core.output_changed(key)),
                    None => (0, self.core.output_changed(key)),
                },
                SessionFile::Usage => self.dated_text(ino, &self.core.session_usage(key)?, || {
                    self.core.created_at(key)
                }),
                // What the last turn shows changes only with the store.
                SessionFile::TranscriptLast => (
                    self.core.transcript_last(key)?.len() as u64,
                    self.core.transcript_modified(key)?,
                ),
            },
        };
        Ok(self.attr(node, size, mtime))
    }

    /// `getattr`.
    pub fn getattr(&self, ino: u64, fh: Option<u64>, pid: u32) -> Result<Attr> {
        self.attr_of(&self.node(ino)?, fh, pid)
    }

    /// The node `name` in directory `parent`.
    fn lookup_node(&self, parent: u64, name: &std::ffi::OsStr) -> Result<Node> {
        // NAME_MAX, as on a disk: the kernel leaves the check to us.
        if name.len() > 255 {
            return Err(Error::new(
                libc::ENAMETOOLONG,
                "a name is at most 255 bytes",
            ));
        }
        let name = name
            .to_str()
            .ok_or_else(|| Error::not_found("names here are UTF-8"))?;
        crate::test_hooks::maybe_panic("lookup", name.as_bytes());
        crate::test_hooks::maybe_pause("lookup", name.as_bytes());
        match self.node(parent)? {
            parent @ (Node::SlotsDir | Node::World(_) | Node::TranscriptsDir) => {
                self.records_lookup(&parent, name)
            }
            parent @ (Node::View(_) | Node::Facet(..)) => self.views_lookup(&parent, name),
            Node::Root => {
                if let Some(f) = RootFile::from_name(name) {
                    return Ok(Node::RootFile(f));
                }
                match name {
                    "events" => return Ok(Node::Events(self.core.event_stream_file())),
                    "slots" => return Ok(Node::SlotsDir),
                    "agent-transcripts" => return Ok(Node::TranscriptsDir),
                    "sessions.json" => return Ok(Node::SessionsJson),
                    _ => {}
                }
                if let Some(view) = ViewDir::from_name(name) {
                    return Ok(Node::View(view));
                }
                let key =
                    SessionKey::parse(name).map_err(|_| Error::not_found(format!("no {name}")))?;
                // A conversation another session's process writes is that
                // session, whose link it is.
                if self.core.written_by_other(&key) {
                    return Ok(Node::Written(key));
                }
                // Archived sessions live under archived/ only.
                if self.core.exists(&key) && !self.core.is_archived(&key) {
                    Ok(Node::Session(key, SessionFile::Dir))
                } else {
                    Err(Error::not_found(format!("no session {key}")))
                }
            }
            Node::Session(key, SessionFile::Dir) => {
                if name == "transcript" && self.core.has_transcript(&key) {
                    return Ok(Node::Session(key, SessionFile::TranscriptDir));
                }
                if let Some(f) = SessionFile::from_name(name) {
                    return Ok(Node::Session(key, f));
                }
                if self.scratch_get(&key, name).is_some() {
                    return Ok(Node::Scratch(key, name.to_string()));
                }
                Err(Error::not_found(format!("no {name} in {key}")))
            }
            Node::Session(key, SessionFile::TranscriptDir) => {
                if name == "latest" {
                    return Ok(Node::Session(key, SessionFile::Latest));
                }
                if name == "last" {
                    return Ok(Node::Session(key, SessionFile::TranscriptLast));
                }
                if self.core.is_earlier(&key, name) {
                    return Ok(Node::Earlier(key, name.to_string()));
                }
                let page = parse_page_name(name)
                    .ok_or_else(|| Error::not_found(format!("no {name} in a transcript")))?;
                if (page as usize) < self.core.transcript_pages(&key)? {
                    Ok(Node::Page(key, page))
                } else {
                    Err(Error::not_found(format!("{key} has no {name}")))
                }
            }
            Node::Earlier(key, id) => {
                let page = parse_page_name(name)
                    .ok_or_else(|| Error::not_found(format!("no {name} in a transcript")))?;
                if (page as usize) < self.core.earlier_pages(&key, &id)? {
                    Ok(Node::EarlierPage(key, id, page))
                } else {
                    Err(Error::not_found(format!(
                        "{key}/transcript/{id} has no {name}"
                    )))
                }
            }
            _ => Err(Error::new(libc::ENOTDIR, "not a directory")),
        }
    }

    /// `lookup`.
    pub fn lookup(&self, parent: u64, name: &std::ffi::OsStr, pid: u32) -> Result<Attr> {
        // What the kernel asks by name: a listing with attributes spares most.
        log::trace!("lookup {name:?} in {parent}");
        let node = self.lookup_node(parent, name)?;
        let attr = self.found_attr(&node, pid)?;
        Ok(self.entry_attr(&node, attr, parent, name))
    }

    /// The attributes a lookup of `node` by process `pid` gives, not yet
    /// counted as held.
    fn found_attr(&self, node: &Node, pid: u32) -> Result<Attr> {
        if let Node::Session(key, file @ (SessionFile::Meta | SessionFile::Field(_))) = node {
            if self.is_removed(key, *file, tgid_of(pid)) {
                return Err(Error::not_found(format!(
                    "{} of {key} was removed by this process",
                    file.name()
                )));
            }
        }
        self.attr_of(node, None, pid)
    }

    /// Checks `mode` against the node's row in the node table.
    fn check_opens(node: &Node, mode: Access) -> Result<()> {
        let what = match node {
            Node::Session(_, file) => file.name().to_string(),
            _ => node.label(),
        };
        match node.row().opens {
            Opens::Dir => Err(Error::new(libc::EISDIR, "a directory")),
            Opens::Link => Err(Error::new(libc::ELOOP, "a symlink")),
            Opens::Read if mode.writes => Err(Error::access(format!("{what} is read-only"))),
            // Only the privileged get past the kernel's mode check to read a
            // write-only stream (`tar`, `grep -r` as root): it reads as
            // empty, as a file of mode 0200 with nothing kept would.
            Opens::Write | Opens::Append if mode.reads && !mode.writes => Ok(()),
            Opens::Write | Opens::Append if mode.reads => {
                Err(Error::access(format!("{what} is write-only")))
            }
            Opens::ReadOrReplace | Opens::ReadOrAppend if mode.reads && mode.writes => {
                Err(Error::invalid(format!(
                    "{what} is read or written whole: open it for reading or for writing, not both"
                )))
            }
            _ => Ok(()),
        }
    }

    /// `open`: a handle number.
    pub fn open(&self, ino: u64, mode: Access, pid: u32) -> Result<u64> {
        self.open_made(ino, mode, pid, None)
    }

    /// [`Files::open`], with the text of a generated file made already
    /// (in the pool: a `diff`).
    fn open_made(&self, ino: u64, mode: Access, pid: u32, made: Option<Vec<u8>>) -> Result<u64> {
        let node = self.node(ino)?;
        Self::check_opens(&node, mode)
            .map_err(|e| self.refuse(Some(&node), &format!("open {}", node.label()), e))?;
        // Refusals known now fail the `open`, where a shell's `echo x >`
        // reports them: a refusal at `close` it would ignore.
        if let (Node::Session(key, file @ (SessionFile::Input | SessionFile::Prompt)), true) =
            (&node, mode.writes)
        {
            self.core
                .check_takes_input(key, *file == SessionFile::Prompt)
                .map_err(|e| self.refuse(Some(&node), &format!("open {}", node.label()), e))?;
        }
        // The kernel passes O_TRUNC on with the open rather than as a
        // setattr of its own: it does here exactly what a truncation to 0
        // does (a stream has nothing to cut, a transcript refuses unless
        // empty, a scratch file is emptied).
        if mode.truncates {
            let to_zero = SetAttr {
                owner_or_mode: false,
                size: Some(0),
            };
            self.apply_setattr(&node, to_zero, None).map_err(|e| {
                self.refuse(Some(&node), &format!("truncate {} to 0", node.label()), e)
            })?;
        }
        let handle = match (&node, node.row().content) {
            _ if !mode.writes && matches!(node.row().opens, Opens::Write | Opens::Append) => {
                Handle::Snapshot(Arc::default())
            }
            (_, Content::Records) => self
                .records_open(&node, mode.writes)
                .map_err(|e| self.refuse(None, &format!("open {}", node.label()), e))?,
            (Node::Scratch(key, name), _) => {
                let file = self
                    .scratch_get(key, name)
                    .ok_or_else(|| Error::not_found(format!("no {name} in {key}")))?;
                if file.symlink.is_some() {
                    return Err(Error::new(libc::ELOOP, "a symlink"));
                }
                Handle::Scratch(key.clone(), name.clone())
            }
            (Node::Session(key, file), Content::Metadata) if mode.writes => {
                Handle::meta(MetaWrite::new(&self.core, key, *file)?)
            }
            (Node::Session(key, SessionFile::Scrollback), _) => {
                let ring = match self.core.archived_scrollback(key) {
                    Some(kept) => kept,
                    None => self.core.session_runtime(key)?.scrollback().clone(),
                };
                Handle::Scrollback {
                    key: key.clone(),
                    view: ring.open_view(),
                    ring,
                    tgid: tgid_of(pid),
                }
            }
            (Node::Session(key, SessionFile::Input), _) => Handle::Input(key.clone()),
            (Node::Session(key, SessionFile::Wait), _) => Handle::Wait(key.clone()),
            (Node::Session(key, SessionFile::Events), _) => {
                Handle::Events(self.core.events_path(key)?)
            }
            (Node::Events(file), _) => Handle::EventStream(self.core.open_event_stream(*file)?),
            (Node::Session(key, SessionFile::Prompt), _) => {
                Handle::prompt(PromptWrite::new(key.clone()))
            }
            (Node::Session(key, SessionFile::Ctl), _) => Handle::SessionCtl(key.clone()),
            (Node::RootFile(RootFile::Ctl), _) => Handle::RootCtl,
            (Node::Page(key, page), _) => Handle::Page {
                key: key.clone(),
                page: *page,
                text: self.core.transcript_page(key, *page as usize)?,
            },
            // The listing's text is shared with its cache and every handle
            // on it: at 100,000 sessions it is tens of megabytes.
            (Node::SessionsJson, _) => Handle::Listing(self.core.sessions_json()),
            _ => match made {
                Some(text) => Handle::Snapshot(Arc::new(text)),
                None => Handle::Snapshot(Arc::new(self.generate(&node)?)),
            },
        };
        // The reason for a refusal is in a `status`: it can always be read.
        let status = matches!(
            node,
            Node::RootFile(RootFile::Status) | Node::Session(_, SessionFile::Status)
        );
        self.handles
            .add_reading(handle, status)
            .map_err(|e| self.refuse(Some(&node), &format!("open {}", node.label()), e))
    }

    /// The text a `diff` handle holds.
    fn diff_text(&self, fh: u64) -> Option<Arc<Vec<u8>>> {
        match self.handles.files().get(&fh) {
            Some(Handle::Snapshot(text)) => Some(text.clone()),
            _ => None,
        }
    }

    /// The text of a generated file, as an `open` fixes it for its handle.
    fn generate(&self, node: &Node) -> Result<Vec<u8>> {
        match node {
            Node::Page(key, n) => Ok(self.core.transcript_page(key, *n as usize)?.to_vec()),
            Node::EarlierPage(key, id, n) => self.core.earlier_page(key, id, *n as usize),
            Node::RootFile(RootFile::Readme) => Ok(self.core.readme()),
            Node::RootFile(RootFile::Status) => Ok(self.core.root_status(self.usage())),
            Node::RootFile(RootFile::UsageJson) => Ok(self.core.usage_json().to_vec()),
            Node::Session(key, SessionFile::Screen) => self.core.screen(key),
            Node::Session(key, SessionFile::Status) => self.core.status(key),
            Node::Session(key, SessionFile::State) => self.core.state_line(key),
            Node::Session(key, SessionFile::TranscriptLast) => self.core.transcript_last(key),
            Node::Session(key, SessionFile::Meta) => self.core.meta_json(key),
            // Callers without a mount only: `open_request` makes it in the pool.
            Node::Session(key, SessionFile::Diff) => self.core.session_diff(key),
            Node::Session(key, SessionFile::Usage) => self.core.session_usage(key),
            Node::Session(key, SessionFile::Field(f)) => self.core.field_text(key, *f),
            _ => Err(Error::new(libc::EISDIR, "a directory")),
        }
    }

    /// The `sessions.json` version a handle holds.
    #[cfg(test)]
    pub(in crate::core) fn listing_of(
        &self,
        fh: u64,
    ) -> Option<Arc<crate::pieced_text::PiecedText>> {
        match self.handles.files().get(&fh) {
            Some(Handle::Listing(text)) => Some(text.clone()),
            _ => None,
        }
    }

    /// `read`, as a new buffer.
    #[cfg(test)]
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.read_into(fh, offset, size, &mut out)?;
        Ok(out)
    }

    /// [`Files::read`] into a buffer the caller keeps and reuses (cleared
    /// first), so that a read allocates nothing.
    pub fn read_into(&self, fh: u64, offset: u64, size: u32, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        let mut handles = self.handles.files();
        // A file read happens with the table unlocked.
        match handles.get(&fh) {
            Some(Handle::Hosted(id)) => {
                let id = id.clone();
                drop(handles);
                let bytes = self
                    .core
                    .slots()
                    .read_transcript(&id, offset, size as usize)?;
                out.extend_from_slice(&bytes);
                return Ok(());
            }
            Some(Handle::Scrollback { ring, view, .. }) => {
                let (ring, before) = (ring.clone(), *view);
                drop(handles);
                // The copy runs with the table unlocked.
                let mut seen = before;
                ring.read_into(&mut seen, offset, size as usize, out);
                // A reader that fell behind moved its view forward; views
                // only move forward, so a racing read of the same handle
                // cannot move it back.
                if seen != before {
                    if let Some(Handle::Scrollback { view, .. }) = self.handles.files().get_mut(&fh)
                    {
                        view.advance_to(seen);
                    }
                }
                return Ok(());
            }
            _ => {}
        }
        if let Some(Handle::Events(path)) = handles.get(&fh) {
            let path = path.clone();
            drop(handles);
            out.extend_from_slice(&read_at(&path, offset, size)?);
            return Ok(());
        }
        if let Some(Handle::EventStream(file)) = handles.get(&fh) {
            let file = file.clone();
            drop(handles);
            if let Some(file) = file {
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0; size.min(1 << 20) as usize];
                let n = file
                    .read_at(&mut buf, offset)
                    .map_err(|e| Error::io("cannot read the events file", &e))?;
                out.extend_from_slice(&buf[..n]);
            }
            return Ok(());
        }
        // A read past a page's text renders it again (with the table
        // unlocked): turns appended to the store since extend it. Anything
        // else (a store replaced or cut) is not taken: the reader keeps the
        // one version it had, and the next open shows the new one.
        if let Some(Handle::Page { key, page, text }) = handles.get(&fh) {
            let (key, page, mut text) = (key.clone(), *page, text.clone());
            drop(handles);
            if offset.saturating_add(u64::from(size)) > text.len() as u64 {
                let newer = self.core.transcript_page(&key, page as usize).ok();
                if let Some(newer) = newer.filter(|n| n.len() > text.len() && n.starts_with(&text))
                {
                    // Past the cap on what open files hold, the reader
                    // keeps the text it had until it opens again.
                    if self.handles.grow_page(fh, &newer) {
                        text = newer;
                    }
                }
            }
            let start = (offset as usize).min(text.len());
            let end = start.saturating_add(size as usize).min(text.len());
            out.extend_from_slice(&text[start..end]);
            return Ok(());
        }
        match handles.get_mut(&fh) {
            Some(Handle::Snapshot(bytes)) => {
                let start = (offset as usize).min(bytes.len());
                let end = start.saturating_add(size as usize).min(bytes.len());
                out.extend_from_slice(&bytes[start..end]);
                Ok(())
            }
            Some(Handle::Listing(text)) => {
                text.read_into(offset, size as usize, out);
                Ok(())
            }
            Some(Handle::Scratch(key, name)) => {
                out.extend_from_slice(&self.scratch.read(key, name, offset, size as usize));
                Ok(())
            }
            // Past the line the blocked read returned (see `wait_key`): the end.
            Some(Handle::Wait(_)) => Ok(()),
            Some(_) => Err(Error::new(libc::EBADF, "not open for reading")),
            None => Err(Error::new(libc::EBADF, "no such handle")),
        }
    }

    /// The ring and view of a `scrollback` handle whose reader is following
    /// the output (its last two reads found nothing at the end): its next
    /// dry read may be held until output comes.
    fn following(&self, fh: u64) -> Option<(Arc<Scrollback>, View)> {
        match self.handles.files().get(&fh) {
            Some(Handle::Scrollback { ring, view, .. }) if view.following() => {
                Some((ring.clone(), *view))
            }
            _ => None,
        }
    }

    /// `poll` on a handle: whether a read would find something new without
    /// waiting. `scrollback` says no when its handle has read everything
    /// held (`waker` is then called once more output arrives), `wait` while
    /// the session is starting or busy (`waker`: at the next state change).
    /// Every other file is always ready, as a regular file is.
    pub fn poll_readable(&self, fh: u64, waker: Option<Waker>) -> Result<bool> {
        enum Polled {
            Ring(
                Arc<crate::terminal::ring::Scrollback>,
                crate::terminal::ring::View,
            ),
            Wait(SessionKey),
            Ready,
        }
        // The table is unlocked before anything else is looked at.
        let polled = match self.handles.files().get(&fh) {
            Some(Handle::Scrollback { ring, view, .. }) => Polled::Ring(ring.clone(), *view),
            Some(Handle::Wait(key)) => Polled::Wait(key.clone()),
            Some(_) => Polled::Ready,
            None => return Err(Error::new(libc::EBADF, "no such handle")),
        };
        Ok(match polled {
            Polled::Ring(ring, view) => ring.ready_or_wake(&view, waker),
            Polled::Wait(key) => self.core.wait_ready_or_wake(&key, waker),
            Polled::Ready => true,
        })
    }

    /// The write `fh` takes, if it is one that may wait on a session: the
    /// adapter runs it in the pool. `ctl` commands are parsed here, so a
    /// malformed one fails at once.
    pub(in crate::core) fn slow_write(&self, fh: u64, data: &[u8]) -> Option<Result<SlowWrite>> {
        let target = match self.handles.files().get(&fh)? {
            Handle::Input(key) => Target::Input(key.clone()),
            Handle::SessionCtl(key) => Target::SessionCtl(key.clone()),
            Handle::RootCtl => Target::RootCtl,
            _ => return None,
        };
        if let Err(e) = commands(data) {
            match &target {
                Target::Input(_) => {}
                Target::SessionCtl(key) => {
                    let e = e.with_context(format_args!("{key}/ctl"));
                    return Some(Err(self.core.record(&Concern::Session(key.clone()), e)));
                }
                // Not UTF-8, or nothing but blanks: no command ran.
                Target::RootCtl => {
                    return Some(Err(self.core.record(&Concern::Root, e.with_context("ctl"))))
                }
            }
        }
        Some(Ok(SlowWrite {
            target,
            data: data.to_vec(),
        }))
    }

    /// `write` to a handle that buffers (metadata, records, scratch files).
    /// Each write is checked as it arrives, so a refusal reaches the writer.
    pub fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<usize> {
        let buffer = self.buffer(fh);
        // A write grows a buffer to where it ends (a stream: by its
        // length); each handle's own cap, at most 1 MiB, bounds that.
        let len = data.len() as u64;
        let bound = offset.saturating_add(len).min(BUFFERED_MAX + len);
        if buffer.is_some() {
            self.handles
                .reserve(fh, bound)
                .map_err(|e| self.refuse_buffering(fh, e))?;
        }
        // With the table unlocked: a commit of the same handle under way
        // is waited for.
        let buffered = buffer.map(|b| {
            let (result, own) = match b {
                // Refusals of records and metadata are recorded where they
                // are made; a prompt's at `flush`.
                Buffer::Record(r) => {
                    let mut r = lock(&r);
                    (r.write(&self.core, offset, data), r.memory_bytes())
                }
                Buffer::Meta(m) => {
                    let mut m = lock(&m);
                    (m.write(&self.core, offset, data), m.memory_bytes())
                }
                Buffer::Prompt(p) => {
                    let mut p = lock(&p);
                    (p.write(data), p.memory_bytes())
                }
            };
            self.handles.settle(fh, own);
            result
        });
        if let Some(result) = buffered {
            return result.map(|()| data.len());
        }
        let scratch = match self.handles.files().get(&fh) {
            Some(Handle::Scratch(key, name)) => Some((key.clone(), name.clone())),
            _ => None,
        };
        if let Some((key, name)) = scratch {
            self.scratch_write(&key, &name, offset, data)?;
            return Ok(data.len());
        }
        // `input` and `ctl` writes never get here: they go to the pool.
        Err(Error::new(libc::EBADF, "not open for writing"))
    }

    /// Records a refusal of a write to buffering handle `fh` where its
    /// writer can read it: its session's `status`, else the root's.
    fn refuse_buffering(&self, fh: u64, e: Error) -> Error {
        let concern = match self.handles.files().get(&fh) {
            Some(Handle::Meta(m)) => m.key.clone(),
            Some(Handle::Prompt(p)) => p.key.clone(),
            _ => None,
        }
        .map_or(Concern::Root, Concern::Session);
        self.core.record(&concern, e)
    }

    /// The buffer of `fh` when it is a handle that buffers, taken out of
    /// the table so that it is locked with the table unlocked.
    fn buffer(&self, fh: u64) -> Option<Buffer> {
        match self.handles.files().get(&fh)? {
            Handle::Record(b) => Some(Buffer::Record(b.buffer())),
            Handle::Meta(b) => Some(Buffer::Meta(b.buffer())),
            Handle::Prompt(b) => Some(Buffer::Prompt(b.buffer())),
            _ => None,
        }
    }

    /// Whether `flush`/`fsync` on `fh` does anything: only buffered writes
    /// (metadata, records) commit there; the kernel may skip the others.
    fn finish_does_work(&self, fh: u64) -> bool {
        matches!(
            self.handles.files().get(&fh),
            Some(Handle::Meta(_) | Handle::Record(_) | Handle::Prompt(_)) | None
        )
    }

    /// A `flush` of a `prompt` handle: the session and what its handle
    /// gives; `None` for any other handle or one that sent its text already.
    fn take_prompt(&self, fh: u64) -> Option<(SessionKey, Taken)> {
        let Some(Buffer::Prompt(prompt)) = self.buffer(fh) else {
            return None;
        };
        let mut prompt = lock(&prompt);
        let key = prompt.key.clone();
        prompt.take().map(|r| (key, r))
    }

    /// The session whose `wait` `fh` reads, if it is a `wait` handle.
    fn wait_key(&self, fh: u64) -> Option<SessionKey> {
        match self.handles.files().get(&fh) {
            Some(Handle::Wait(key)) => Some(key.clone()),
            _ => None,
        }
    }

    /// Whether finishing `fh` commits to a store: metadata (which may
    /// archive, ending the session's processes first), a slot record or a
    /// transcript entry, each under a writers' lock other processes share.
    /// The adapter then runs [`Files::finish`] in the pool; a refusal the
    /// pool makes concerns what this returns.
    fn finish_commits(&self, fh: u64) -> Option<Concern> {
        match self.handles.files().get(&fh)? {
            Handle::Meta(m) => m.key.clone().map(Concern::Session),
            Handle::Record(_) => Some(Concern::Root),
            _ => None,
        }
    }

    /// Whether a `write` to `fh` may commit: a slot record is put as soon
    /// as it is whole, transcript entries line by line, each under a
    /// writers' lock. The adapter then runs [`Files::write`] in the pool.
    fn write_commits(&self, fh: u64) -> bool {
        matches!(self.handles.files().get(&fh), Some(Handle::Record(_)))
    }

    /// `flush` and `fsync`: commits what a buffered handle still holds.
    /// Errors here reach `close()`: what is buffered must stand alone.
    pub fn finish(&self, fh: u64) -> Result<()> {
        // With the table unlocked: another call on the same handle under
        // way is waited for. Each buffer records its refusals itself.
        match self.buffer(fh) {
            Some(Buffer::Record(r)) => lock(&r).finish(&self.core),
            Some(Buffer::Meta(m)) => lock(&m).finish(&self.core),
            _ => Ok(()),
        }
    }

    /// `release`: the handle is gone; nothing is committed here (its
    /// errors would reach nobody).
    pub fn release(&self, fh: u64) {
        if let Some(Handle::Scrollback { key, ring, .. }) = self.handles.remove(fh) {
            drop(ring);
            if !self.handles.scrollback_open(&key) {
                self.core.forget_unused_runtime(&key);
            }
        }
    }

    /// `setattr`: size, mode and owner (times are taken and ignored).
    pub fn setattr(&self, ino: u64, set: SetAttr, fh: Option<u64>, pid: u32) -> Result<Attr> {
        let node = self.node(ino)?;
        self.setattr_node(&node, set, fh, pid).map_err(|e| {
            let what = match set.size {
                Some(size) if !set.owner_or_mode => format!("truncate {} to {size}", node.label()),
                _ => format!("chmod/chown {}", node.label()),
            };
            self.refuse(Some(&node), &what, e)
        })
    }

    fn setattr_node(&self, node: &Node, set: SetAttr, fh: Option<u64>, pid: u32) -> Result<Attr> {
        self.apply_setattr(node, set, fh)?;
        self.attr_of(node, fh, pid)
    }

    /// A metadata file is written whole: it may be cut (to 0, or within
    /// what this handle wrote), never extended with NUL bytes.
    fn check_meta_size(&self, node: &Node, size: u64, fh: Option<u64>) -> Result<()> {
        let written = match fh.and_then(|fh| self.buffer(fh)) {
            Some(Buffer::Meta(m)) => lock(&m).len(),
            _ => 0,
        };
        if size <= written {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "{} is written whole: it can be cut to 0 or within what was written ({written} bytes), not extended to {size}",
            node.label()
        )))
    }

    /// What `setattr` changes, without the attributes it answers with.
    fn apply_setattr(&self, node: &Node, set: SetAttr, fh: Option<u64>) -> Result<()> {
        if let Some(size) = set.size {
            self.check_size(node, size)?;
            if node.row().content == Content::Metadata {
                self.check_meta_size(node, size, fh)?;
            }
        }
        let row = node.row();
        // A hosted transcript is append-only: no size is set, not even its own.
        let writable = row.cap != Cap::ReadOnly && !matches!(node, Node::HostedFile(_));
        if let (Node::HostedFile(id), Some(size)) = (node, set.size) {
            if size != self.core.slots().transcript_len(id) {
                return Err(Error::perm("transcripts are append-only: use >>"));
            }
        }
        // Editors fchmod what they save; the mode of these files is fixed
        // and the call succeeds without changing it.
        if set.owner_or_mode && !row.editable {
            return Err(Error::perm("modes and owners here are fixed"));
        }
        if let (Some(size), Some(fh)) = (set.size, fh) {
            if let Some(Buffer::Meta(m)) = self.buffer(fh) {
                lock(&m).truncate(size);
            }
        }
        if let (Node::Scratch(key, name), Some(size)) = (node, set.size) {
            self.scratch_resize(key, name, size)?;
        }
        // `echo x > input` truncates before it writes: a stream has nothing to cut.
        if set.size.is_some() && !writable {
            return Err(Error::access("read-only file"));
        }
        Ok(())
    }

    /// `mkdir`: a session in the root, a world in `slots/`.
    pub fn mkdir(&self, parent: u64, name: &std::ffi::OsStr, pid: u32) -> Result<Attr> {
        self.mkdir_node(parent, name, pid)
            .map_err(|e| self.refuse_in(parent, name, "mkdir", e))
    }

    fn mkdir_node(&self, parent: u64, name: &std::ffi::OsStr, pid: u32) -> Result<Attr> {
        if let Ok(Node::SlotsDir) = self.node(parent) {
            // `mkdir -p slots/GUID`: a world exists for any well-formed GUID.
            let world = name
                .to_str()
                .ok_or_else(|| Error::invalid("a world is a GUID"))
                .and_then(crate::core::records::slots::parse_world)?;
            let node = Node::World(world);
            let attr = self.attr_of(&node, None, pid)?;
            return Ok(self.entry_attr(&node, attr, parent, name));
        }
        if parent != ROOT {
            return Err(Error::perm(
                "directories are made in the root and slots/ only",
            ));
        }
        let key = name
            .to_str()
            .ok_or_else(|| Error::invalid("session keys are ASCII"))
            .and_then(|n| self.core.create(n))?;
        let node = Node::Session(key, SessionFile::Dir);
        let attr = self.attr_of(&node, None, pid)?;
        Ok(self.entry_attr(&node, attr, parent, name))
    }

    /// `rmdir`: only empty worlds go; sessions are archived instead.
    pub fn rmdir(&self, parent: u64, name: &std::ffi::OsStr) -> Result<()> {
        if let (Ok(parent @ Node::SlotsDir), Some(name)) = (self.node(parent), name.to_str()) {
            let removed = self
                .records_rmdir(&parent, name)
                .map_err(|e| self.refuse(None, &format!("rmdir slots/{name}"), e))?;
            self.inodes.renumber(&removed);
            return Ok(());
        }
        let node = self.lookup_node(parent, name)?;
        let e = match node {
            Node::Session(_, SessionFile::Dir) => {
                Error::perm("archive a session to put it away (mv KEY archived/)")
            }
            // The kernel refuses rmdir of a file itself: this is one of
            // the mount's own directories.
            _ => Error::perm("the mount's own directories cannot be removed"),
        };
        Err(self.refuse(Some(&node), &format!("rmdir {}", node.label()), e))
    }

    /// Whether an `unlink` in `parent` may commit: forgetting a slot record
    /// takes the records' writers' lock. The adapter then runs it in the pool.
    fn unlink_commits(&self, parent: u64) -> bool {
        matches!(self.inodes.node(parent), Some(Node::World(_)))
    }

    /// `unlink`: slot records and scratch files.
    pub fn unlink(&self, parent: u64, name: &std::ffi::OsStr) -> Result<()> {
        self.unlink_by(parent, name, 0)
    }

    /// `unlink` by thread `pid`.
    pub fn unlink_by(&self, parent: u64, name: &std::ffi::OsStr, pid: u32) -> Result<()> {
        if let (Ok(parent @ (Node::World(_) | Node::TranscriptsDir)), Some(name)) =
            (self.node(parent), name.to_str())
        {
            return self
                .records_unlink(&parent, name)
                .map_err(|e| self.refuse(None, &format!("rm {name}"), e));
        }
        match self.lookup_node(parent, name)? {
            Node::Scratch(key, name) => {
                self.scratch_remove(&key, &name);
                Ok(())
            }
            // A copy from another filesystem (`mv`, `cp --remove-destination`)
            // removes its target first: accepted, and nothing changes until
            // the new file's content commits.
            Node::Session(key, file @ (SessionFile::Meta | SessionFile::Field(_))) => {
                log::debug!(
                    "{key}: {} removed; it stays as it was until written",
                    file.name()
                );
                let tgid = tgid_of(pid);
                let mut removed = lock(&self.removed);
                removed.retain(|(k, f, t, at)| {
                    at.elapsed() < REMOVED_FOR && !(*k == key && *f == file && *t == tgid)
                });
                if removed.len() >= REMOVED_MAX {
                    removed.remove(0);
                }
                removed.push((key, file, tgid, Instant::now()));
                Ok(())
            }
            node => Err(self.refuse(
                Some(&node),
                &format!("rm {}", node.label()),
                Error::perm("only files an editor made can be removed"),
            )),
        }
    }

    /// `create`: an editor's scratch file in a session directory, a slot
    /// record, a hosted transcript. The attributes and an open handle.
    pub fn create(&self, parent: u64, name: &std::ffi::OsStr) -> Result<(Attr, u64)> {
        self.create_by(parent, name, 0)
    }

    /// `create` by thread `pid`.
    pub fn create_by(&self, parent: u64, name: &std::ffi::OsStr, pid: u32) -> Result<(Attr, u64)> {
        self.create_node(parent, name, pid)
            .map_err(|e| self.refuse_in(parent, name, "create", e))
    }

    fn create_node(&self, dir: u64, os_name: &std::ffi::OsStr, pid: u32) -> Result<(Attr, u64)> {
        let parent = self.node(dir)?;
        let name = utf8(os_name)?;
        if let Node::Session(key, SessionFile::Dir) = &parent {
            let tgid = tgid_of(pid);
            if let Some(file) =
                SessionFile::from_name(name).filter(|f| self.take_removed(key, *f, tgid))
            {
                // Made again after `rm`: an empty file whose first write
                // replaces what it held, committed at close.
                let node = Node::Session(key.clone(), file);
                let handle = Handle::meta(MetaWrite::new(&self.core, key, file)?);
                let attr = self.attr_of(&node, None, 0)?;
                let fh = self.handles.add(handle)?;
                let attr = Attr { size: 0, ..attr };
                return Ok((self.entry_attr(&node, attr, dir, os_name), fh));
            }
            if !Self::is_scratch_name(name) {
                return Err(Error::new(libc::EEXIST, format!("{name} exists")));
            }
            // An editor's swap, probe or temporary file: held in memory.
            if self.scratch_get(key, name).is_some() {
                return Err(Error::new(libc::EEXIST, format!("{name} exists")));
            }
            self.scratch_put(key, name, ScratchFile::default())?;
            let node = Node::Scratch(key.clone(), name.to_string());
            let attr = self.attr(&node, 0, SystemTime::now());
            let fh = self
                .handles
                .add(Handle::Scratch(key.clone(), name.to_string()))
                .inspect_err(|_| {
                    self.scratch_remove(key, name);
                })?;
            return Ok((self.entry_attr(&node, attr, dir, os_name), fh));
        }
        let (node, handle) = self.records_create(&parent, name)?;
        let fh = self.handles.add(handle)?;
        // Not written yet: an empty file until its first record arrives.
        let size = self.records_size(&node).unwrap_or(0);
        let attr = self.attr(&node, size, SystemTime::now());
        Ok((self.entry_attr(&node, attr, dir, os_name), fh))
    }

    /// `symlink`: editors' lock links (emacs's `.#meta.json`) live with
    /// the scratch files.
    pub fn symlink(
        &self,
        parent: u64,
        link_name: &std::ffi::OsStr,
        target: &std::path::Path,
        pid: u32,
    ) -> Result<Attr> {
        self.symlink_node(parent, link_name, target, pid)
            .map_err(|e| self.refuse_in(parent, link_name, "symlink", e))
    }

    fn symlink_node(
        &self,
        parent: u64,
        link_name: &std::ffi::OsStr,
        target: &std::path::Path,
        pid: u32,
    ) -> Result<Attr> {
        match (self.node(parent)?, link_name.to_str()) {
            (Node::Session(key, SessionFile::Dir), Some(name)) if Self::is_scratch_name(name) => {
                if self.scratch_get(&key, name).is_some() {
                    return Err(Error::new(libc::EEXIST, format!("{name} exists")));
                }
                self.scratch_put(
                    &key,
                    name,
                    ScratchFile {
                        data: Vec::new(),
                        symlink: Some(target.to_string_lossy().into_owned()),
                    },
                )?;
                let node = Node::Scratch(key, name.to_string());
                let attr = self.attr_of(&node, None, pid)?;
                Ok(self.entry_attr(&node, attr, parent, link_name))
            }
            _ => Err(Error::perm(
                "symlinks can only be made in session directories",
            )),
        }
    }

    /// `rename`: may commit metadata or archive, which ends the session's
    /// processes first; the adapter runs it in the pool.
    pub fn rename(
        &self,
        parent: u64,
        name: &std::ffi::OsStr,
        newparent: u64,
        newname: &std::ffi::OsStr,
    ) -> Result<()> {
        let (from, to) = (utf8(name)?, utf8(newname)?);
        match (self.node(parent)?, self.node(newparent)?) {
            (Node::Session(a, SessionFile::Dir), Node::Session(b, SessionFile::Dir)) if a == b => {
                self.rename_in_session(&a, from, to).inspect(|()| {
                    // Whatever the kernel holds by either name is another file now.
                    for name in [from, to].into_iter().filter(|n| Self::is_scratch_name(n)) {
                        self.inodes
                            .renumber(&Node::Scratch(a.clone(), name.to_string()));
                    }
                })
            }
            (from_dir @ (Node::Root | Node::View(_)), to_dir @ (Node::Root | Node::View(_))) => {
                self.rename_session(&from_dir, from, &to_dir, to)
            }
            _ => Err(Error::new(
                libc::EXDEV,
                "cannot move between these directories",
            )),
        }
        .map_err(|e| {
            // A session moved in or out of archived/ hears of it; else the parent's.
            let moved = SessionKey::parse(from)
                .ok()
                .filter(|k| self.core.exists(k))
                .map(|k| Node::Session(k, SessionFile::Dir));
            let node = moved.or_else(|| self.node(parent).ok());
            let what = format!(
                "rename {} -> {}",
                crate::input_checks::preview(from),
                crate::input_checks::preview(to)
            );
            self.refuse(node.as_ref(), &what, e)
        })
    }

    /// `mknod`: no special files (or plain files made this way) anywhere.
    pub fn mknod(&self, parent: u64, name: &std::ffi::OsStr) -> Result<Attr> {
        let e = Error::perm("no device, FIFO, socket or file can be made with mknod here");
        Err(self.refuse_in(parent, name, "mknod", e))
    }

    /// `link`: a file here has one name.
    pub fn link(&self, ino: u64, newparent: u64, newname: &std::ffi::OsStr) -> Result<Attr> {
        let e = Error::perm("hard links cannot be made here");
        let node = self.node(ino).ok();
        let what = match &node {
            Some(n) => format!("link {}", n.label()),
            None => "link".to_string(),
        };
        let scope = node.or_else(|| self.node(newparent).ok());
        let what = format!(
            "{what} -> {}",
            crate::input_checks::preview(&newname.to_string_lossy())
        );
        Err(self.refuse(scope.as_ref(), &what, e))
    }

    /// `setxattr`, `removexattr`: there are no extended attributes.
    pub fn set_xattr(&self, ino: u64, name: &std::ffi::OsStr) -> Result<()> {
        let node = self.node(ino)?;
        let e = Error::new(libc::EOPNOTSUPP, "extended attributes are not supported");
        if copied_by_tools(name) {
            // Editors and `cp -a` carry ACLs and security labels over on
            // every save and ignore this answer: it is no one's mistake.
            log::debug!("{}: {} not kept", node.label(), name.to_string_lossy());
            return Err(e);
        }
        let what = format!(
            "set extended attribute {} of {}",
            crate::input_checks::preview(&name.to_string_lossy()),
            node.label()
        );
        Err(self.refuse(Some(&node), &what, e))
    }

    /// Where a symlink points: `transcript/latest`, a view's link, an
    /// editor's lock link.
    fn link_target(&self, node: &Node) -> Result<String> {
        match node {
            Node::Session(key, SessionFile::Latest) => {
                Ok(latest_target(self.core.transcript_pages(key)?))
            }
            Node::ViewLink(..) => Ok(crate::core::tree::view_files::link_target(node)),
            Node::Written(conversation) => self
                .core
                .conversation_owner(conversation)
                .map(|owner| owner.to_string())
                .ok_or_else(|| {
                    Error::not_found(format!(
                        "{conversation} is no longer written by another session"
                    ))
                }),
            Node::Scratch(key, name) => self
                .scratch_get(key, name)
                .and_then(|f| f.symlink)
                .ok_or_else(|| Error::invalid("not a symlink")),
            _ => Err(Error::invalid("not a symlink")),
        }
    }

    /// `readlink`.
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        self.link_target(&self.node(ino)?).map(String::into_bytes)
    }

    /// `opendir`: the listing is taken here, once; `readdir` only pages
    /// through it.
    pub fn opendir(&self, ino: u64) -> Result<u64> {
        let entries = self.entries(ino)?;
        self.handles.add_dir(entries)
    }

    /// `readdir`: the snapshot `opendir` took.
    pub fn readdir(&self, ino: u64, fh: u64) -> Result<DirSnapshot> {
        match self.handles.dir(fh) {
            Some(entries) => Ok(entries),
            // A handle this daemon did not open (none should come): list afresh.
            None => Ok(Arc::new(self.entries(ino)?)),
        }
    }

    /// `readdirplus`: the entries of `opendir`'s snapshot from `offset`,
    /// each with what a lookup of it by process `pid` gives, handed to
    /// `add` with the offset of the entry after it. `add` returns true
    /// when the reply is full and the entry was not sent.
    ///
    /// Every entry sent but `.` and `..` is a lookup the kernel holds (it
    /// forgets it later), so it is counted as one; the one that did not fit
    /// is not. An entry whose attributes cost a lot to make ([`costly`]) is
    /// given only at the head of a reply: a reply that began elsewhere ends
    /// before it, so a plain `ls` (whose first batch the kernel asks with
    /// attributes) never pays for it, and the kernel asks for it with
    /// attributes only once it is looking entries up (`ls -l`). An entry
    /// gone since `opendir` is left out; one whose attributes cannot be
    /// made is sent all the same, with attributes kept for no time.
    pub fn readdir_plus(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
        pid: u32,
        mut add: impl FnMut(u64, &str, &Attr) -> bool,
    ) -> Result<()> {
        let entries = self.readdir(ino, fh)?;
        let parent = self.node(ino).ok();
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        // Whether anything went in yet, and whether the reply began with a
        // costly entry.
        let (mut sent, mut from_costly) = (false, false);
        for (i, e) in entries.iter().enumerate().skip(start) {
            let next = (i + 1) as u64;
            if e.name == "." || e.name == ".." {
                // The kernel takes neither number nor attributes of these.
                if add(next, &e.name, &self.dot_attr(e)) {
                    break;
                }
                sent = true;
                continue;
            }
            let costly = parent.as_ref().is_some_and(|p| costly(p, &e.name));
            if sent && costly && !from_costly {
                break;
            }
            let name = std::ffi::OsStr::new(&e.name);
            let node = match self.lookup_node(ino, name) {
                Ok(node) => node,
                Err(err) => {
                    log::debug!("readdirplus: {}: {err}; left out", e.name);
                    continue;
                }
            };
            let attr = match self.found_attr(&node, pid) {
                Ok(attr) => attr,
                Err(err) if err.errno == libc::ENOENT => {
                    log::debug!("readdirplus: {}: {err}; left out", e.name);
                    continue;
                }
                // Listed all the same (a damaged world file is), with
                // attributes the kernel keeps for no time: it asks again,
                // and hears the error, when the entry is used.
                Err(err) => {
                    log::debug!("readdirplus: {}: {err}; listed without attributes", e.name);
                    Attr {
                        fixed: Fixed::Nothing,
                        ..self.attr(&node, 0, self.started)
                    }
                }
            };
            let attr = self.entry_attr(&node, attr, ino, name);
            if add(next, &e.name, &attr) {
                // Not sent: the kernel holds nothing of it.
                self.inodes.forget(attr.ino, 1);
                break;
            }
            if !sent {
                from_costly = costly;
            }
            sent = true;
        }
        Ok(())
    }

    /// What `.` and `..` are given in a listing with attributes: their
    /// number and type; the kernel reads nothing else of them.
    fn dot_attr(&self, e: &DirEntry) -> Attr {
        Attr {
            ino: e.ino,
            kind: Kind::Dir,
            perm: 0o555,
            size: 0,
            mtime: self.started,
            fixed: Fixed::Nothing,
            generation: 0,
            io_size: 4096,
        }
    }

    /// `releasedir`.
    pub fn releasedir(&self, fh: u64) {
        self.handles.remove_dir(fh);
    }

    fn entry(&self, node: &Node, kind: Kind, name: impl Into<String>) -> DirEntry {
        DirEntry {
            ino: self.inodes.ino(node),
            kind,
            name: name.into(),
        }
    }

    /// A directory's entries, `.` and `..` first.
    fn entries(&self, ino: u64) -> Result<Vec<DirEntry>> {
        let node = self.node(ino)?;
        let mut entries = vec![
            DirEntry {
                ino,
                kind: Kind::Dir,
                name: ".".to_string(),
            },
            DirEntry {
                ino: ROOT,
                kind: Kind::Dir,
                name: "..".to_string(),
            },
        ];
        match node {
            Node::Root => {
                for f in RootFile::ALL {
                    if f != RootFile::UsageJson {
                        entries.push(self.entry(&Node::RootFile(f), Kind::File, f.name()));
                    }
                }
                // The two made of every session, after the cheap ones.
                entries.push(self.entry(&Node::SessionsJson, Kind::File, "sessions.json"));
                let usage = Node::RootFile(RootFile::UsageJson);
                entries.push(self.entry(&usage, Kind::File, "usage.json"));
                let events = Node::Events(self.core.event_stream_file());
                entries.push(self.entry(&events, Kind::File, "events"));
                for view in ViewDir::ALL {
                    entries.push(self.entry(&Node::View(view), Kind::Dir, view.name()));
                }
                entries.push(self.entry(&Node::SlotsDir, Kind::Dir, "slots"));
                entries.push(self.entry(&Node::TranscriptsDir, Kind::Dir, "agent-transcripts"));
                for key in self.core.keys_in(false) {
                    let name = key.as_str().to_owned();
                    entries.push(self.entry(
                        &Node::Session(key, SessionFile::Dir),
                        Kind::Dir,
                        name,
                    ));
                }
            }
            Node::Session(key, SessionFile::Dir) => {
                for f in SessionFile::FILES {
                    entries.push(self.entry(&Node::Session(key.clone(), f), Kind::File, f.name()));
                }
                if self.core.has_transcript(&key) {
                    let node = Node::Session(key.clone(), SessionFile::TranscriptDir);
                    entries.push(self.entry(&node, Kind::Dir, "transcript"));
                }
                // Backups editors make by rename (`meta.json~`) stay reachable
                // by name but are not listed: the directory shows no litter.
                for (name, link) in self
                    .scratch_names(&key)
                    .into_iter()
                    .filter(|(n, _)| !n.ends_with('~'))
                {
                    let kind = if link { Kind::Symlink } else { Kind::File };
                    let node = Node::Scratch(key.clone(), name.clone());
                    entries.push(self.entry(&node, kind, name));
                }
            }
            parent @ (Node::View(_) | Node::Facet(..)) => {
                for (node, kind, name) in self.views_entries(&parent)? {
                    entries.push(self.entry(&node, kind, name));
                }
            }
            Node::Session(key, SessionFile::TranscriptDir) => {
                entries[1].ino = self
                    .inodes
                    .ino(&Node::Session(key.clone(), SessionFile::Dir));
                for n in 0..self.core.transcript_pages(&key)? as u64 {
                    entries.push(self.entry(
                        &Node::Page(key.clone(), n),
                        Kind::File,
                        format!("page-{n}"),
                    ));
                }
                let node = Node::Session(key.clone(), SessionFile::Latest);
                entries.push(self.entry(&node, Kind::Symlink, "latest"));
                let node = Node::Session(key.clone(), SessionFile::TranscriptLast);
                entries.push(self.entry(&node, Kind::File, "last"));
                for id in self.core.earlier_conversations(&key) {
                    let node = Node::Earlier(key.clone(), id.clone());
                    entries.push(self.entry(&node, Kind::Dir, id));
                }
            }
            Node::Earlier(key, id) => {
                entries[1].ino = self
                    .inodes
                    .ino(&Node::Session(key.clone(), SessionFile::TranscriptDir));
                for n in 0..self.core.earlier_pages(&key, &id)? as u64 {
                    entries.push(self.entry(
                        &Node::EarlierPage(key.clone(), id.clone(), n),
                        Kind::File,
                        format!("page-{n}"),
                    ));
                }
            }
            parent @ (Node::SlotsDir | Node::World(_) | Node::TranscriptsDir) => {
                if let Node::World(_) = parent {
                    entries[1].ino = self.inodes.ino(&Node::SlotsDir);
                }
                for (node, kind, name) in self.records_entries(&parent)? {
                    entries.push(self.entry(&node, kind, name));
                }
            }
            _ => return Err(Error::new(libc::ENOTDIR, "not a directory")),
        }
        Ok(entries)
    }
}

/// Whether the attributes of entry `name` of directory `parent` cost a
/// listing much to give, even to find out that it exists: `sessions.json`
/// is every session's document; `screen`'s size is the VT mirror's text,
/// made (and fed the whole ring) for it; everything in a transcript
/// directory is counted or rendered from the conversation's store.
fn costly(parent: &Node, name: &str) -> bool {
    match parent {
        Node::Root => name == "sessions.json" || name == "usage.json",
        Node::Session(_, SessionFile::Dir) => name == "screen",
        Node::Session(_, SessionFile::TranscriptDir) => true,
        _ => false,
    }
}

/// Attributes that tools copy from one file to the next by themselves
/// (vim, `sed -i`, `cp -a`): access ACLs and security labels.
fn copied_by_tools(name: &std::ffi::OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.starts_with(b"system.posix_acl_") || name.starts_with(b"security.")
}

/// One method per kernel request that may be answered later: each says
/// whether it is done now or answered later, and from where.
impl Files {
    /// `open`: the handle, and whether its `flush` does anything.
    pub fn open_request(self: &Arc<Self>, ino: u64, mode: Access, pid: u32) -> Step<Opened> {
        // A `diff` runs git: made in the pool, with its deadline.
        if let (Ok(Node::Session(key, SessionFile::Diff)), false) = (self.node(ino), mode.writes) {
            let files = self.clone();
            let what = format!("the diff of {key}");
            let concern = Concern::Session(key.clone());
            return Step::Later(Later::pool(
                self.core.clone(),
                what,
                concern.clone(),
                false,
                move || {
                    let text = files
                        .core
                        .session_diff(&key)
                        .map_err(|e| files.core.record(&concern, e))?;
                    let fh = files.open_made(ino, mode, pid, Some(text))?;
                    Ok(Opened {
                        fh,
                        flushes: files.finish_does_work(fh),
                    })
                },
            ));
        }
        Step::Done(self.open(ino, mode, pid).map(|fh| Opened {
            fh,
            flushes: self.finish_does_work(fh),
        }))
    }

    /// `read` into `out`. A `wait` read at offset 0 blocks until the
    /// session settles (at once with `nonblock`); a dry read of a
    /// `scrollback` whose reader follows the output may be held.
    pub fn read_request(
        &self,
        fh: u64,
        offset: u64,
        size: u32,
        read: ReadBy,
        out: &mut Vec<u8>,
    ) -> ReadStep {
        if offset == 0 {
            if let Some(key) = self.wait_key(fh) {
                let core = self.core.clone();
                return ReadStep::Later(Later::event(move |reply| {
                    core.wait(&key, read.tid, read.nonblock, reply)
                }));
            }
        }
        if let Err(e) = self.read_into(fh, offset, size, out) {
            return ReadStep::Failed(e);
        }
        if !out.is_empty() || read.nonblock {
            return ReadStep::Data;
        }
        match self.following(fh) {
            Some((ring, view)) => ReadStep::Follow(ring, view),
            None => ReadStep::Data,
        }
    }

    /// `write`: answered now, or from the pool where it may wait on a
    /// session (`input`, a `ctl` file) or commits under a writers' lock
    /// other processes share (a slot record, transcript entries).
    pub fn write_request(self: &Arc<Self>, fh: u64, offset: u64, data: &[u8]) -> Step<usize> {
        match self.slow_write(fh, data) {
            Some(Ok(slow)) => {
                if let Some(n) = slow.run_now(&self.core) {
                    return Step::Done(Ok(n));
                }
                let core = self.core.clone();
                let (what, concern, urgent) = (slow.what(), slow.concern(), slow.urgent());
                Step::Later(Later::pool(
                    self.core.clone(),
                    what,
                    concern,
                    urgent,
                    move || slow.run(&core),
                ))
            }
            Some(Err(e)) => Step::Done(Err(e)),
            None if self.write_commits(fh) => {
                let data = data.to_vec();
                let what = "a write to a slot record or transcript".to_string();
                self.in_pool(what, move |files| files.write(fh, offset, &data))
            }
            None => Step::Done(self.write(fh, offset, data)),
        }
    }

    /// `flush` and `fsync` by thread `tid`. A prompt is typed and
    /// submitted: the answer comes once the agent took it, or EINTR once
    /// the writer gets a signal. A commit waits for a writers' lock, and a
    /// metadata commit may archive, which ends the session's processes
    /// first: it runs in the pool.
    pub fn finish_request(self: &Arc<Self>, fh: u64, tid: u32, op: &str) -> Step<()> {
        match self.take_prompt(fh) {
            Some((key, Taken::Text(text))) => {
                let core = self.core.clone();
                return Step::Later(Later::event(move |reply| {
                    let concern = Concern::Session(key.clone());
                    let answer = crate::core::tree::step::recording(core.clone(), concern, reply);
                    core.prompt_at_close(key, text, tid, answer)
                }));
            }
            // A blank prompt's refusal is a debug line only: a shell's
            // redirection flushes once before the write.
            Some((key, Taken::Refused(e))) => {
                return Step::Done(Err(self.core.record(&Concern::Session(key), e)))
            }
            Some((key, Taken::Empty)) => {
                return Step::Done(Err(self
                    .core
                    .record(&Concern::Session(key), empty_prompt())))
            }
            None => {}
        }
        let Some(concern) = self.finish_commits(fh) else {
            return Step::Done(self.finish(fh));
        };
        let files = self.clone();
        Step::Later(Later::pool(
            self.core.clone(),
            format!("the commit at {op}"),
            concern,
            false,
            move || files.finish(fh),
        ))
    }

    /// `unlink` by thread `pid`: forgetting a slot record takes the
    /// records' writers' lock, so it runs in the pool.
    pub fn unlink_request(self: &Arc<Self>, parent: u64, name: &OsStr, pid: u32) -> Step<()> {
        if !self.unlink_commits(parent) {
            return Step::Done(self.unlink_by(parent, name, pid));
        }
        let name = name.to_owned();
        let what = format!("rm {}", name.to_string_lossy());
        self.in_pool(what, move |files| files.unlink_by(parent, &name, pid))
    }

    /// `mkdir` by thread `pid`: making a session records it in the
    /// sidecar, under the writers' lock other daemons share.
    pub fn mkdir_request(self: &Arc<Self>, parent: u64, name: &OsStr, pid: u32) -> Step<Attr> {
        let name = name.to_owned();
        let what = format!("mkdir {}", name.to_string_lossy());
        self.in_pool(what, move |files| files.mkdir(parent, &name, pid))
    }

    /// `rename`: it may commit metadata or archive, which ends the
    /// session's processes first. A refusal names its session itself; the
    /// pool's (full, too late) goes to the root's status.
    pub fn rename_request(
        self: &Arc<Self>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
    ) -> Step<()> {
        let (name, newname) = (name.to_owned(), newname.to_owned());
        let what = format!("rename {name:?} -> {newname:?}");
        self.in_pool(what, move |files| {
            files.rename(parent, &name, newparent, &newname)
        })
    }
}

impl Files {
    /// `job` answered from the pool, named `what` in its messages; when
    /// the pool gives up on it, the reason goes to the root's `status` (a
    /// refusal the job makes names its own session).
    fn in_pool<T: Send + 'static>(
        self: &Arc<Self>,
        what: String,
        job: impl FnOnce(&Files) -> Result<T> + Send + 'static,
    ) -> Step<T> {
        let files = self.clone();
        Step::Later(Later::pool(
            self.core.clone(),
            what,
            Concern::Root,
            false,
            move || job(&files),
        ))
    }
}

/// Who reads, as a `read` request says.
#[derive(Debug, Clone, Copy)]
pub struct ReadBy {
    /// The calling thread (FUSE gives a thread id).
    pub tid: u32,
    /// `O_NONBLOCK`: nothing waits.
    pub nonblock: bool,
}
