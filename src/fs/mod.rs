//! The FUSE adapter: translates kernel requests into calls on [`Core`] and
//! its results into replies. No session logic lives here.

mod caps;
mod guard;
pub mod inode;
mod organize;
mod records;

use organize::MetaWrite;
use records::RecordWrite;

use crate::core::scratch::{ScratchFile, ScratchFiles};
use crate::core::Core;
use crate::error::Error;
use crate::key::SessionKey;
use crate::procinfo::tgid_of;
use crate::scrollback::View;
use crate::work;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyWrite, Request, WriteFlags,
};
pub use guard::Guarded;
use inode::{InodeTable, Node, RootFile, SessionFile, ROOT};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

/// Most things change under the kernel's feet: by default, no attribute or
/// entry caching (see [`ttls`] for what may be kept).
const TTL: Duration = Duration::ZERO;

/// The I/O size `scrollback` asks for: `cat`, `cp` and Python's buffered
/// reads take `st_blksize` as their read size, and each read is a round trip
/// to the daemon; a ring of 8 MiB is read in 8 of these instead of 64.
const SCROLLBACK_BLKSIZE: u32 = 1 << 20;

/// How long the kernel may keep a node's attributes and its entry: [`TTL`]
/// for everything whose size or existence changes under the kernel's feet.
/// `input` and `ctl` never change (0200, size 0) and exist as long as their
/// directory. The root and a session's directory never change either (0755,
/// the daemon's start), but a session's directory can go: its entry is
/// still looked up on every path walk, while the permission check of the
/// walk through it needs no `getattr`. `echo cmd > KEY/input` so costs one
/// lookup and the open, where it cost two lookups, two getattrs and the open.
fn ttls(node: &Node) -> (Duration, Duration) {
    const FIXED: Duration = Duration::from_secs(60);
    match node {
        Node::Session(_, SessionFile::Input | SessionFile::Ctl) | Node::RootFile(RootFile::Ctl) => {
            (FIXED, FIXED)
        }
        Node::Root | Node::Session(_, SessionFile::Dir) => (FIXED, TTL),
        _ => (TTL, TTL),
    }
}

/// What an open file handle reads or writes.
#[derive(Debug)]
enum Handle {
    /// A per-handle view of the ring (see `scrollback`), owned by process `tgid`.
    Scrollback {
        key: SessionKey,
        /// Held by the handle so a read touches nothing else.
        ring: Arc<crate::scrollback::Scrollback>,
        view: View,
        tgid: u32,
    },
    /// Generated text, fixed at open so a reader sees one consistent version.
    Snapshot(Vec<u8>),
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
}

/// Cloning shares the state: a clone goes with work handed to the pool.
#[derive(Clone)]
pub struct SessionFs {
    core: Arc<Core>,
    inodes: Arc<InodeTable>,
    handles: Arc<Mutex<HashMap<u64, Handle>>>,
    scratch: Arc<ScratchFiles>,
    next_fh: Arc<AtomicU64>,
    uid: u32,
    gid: u32,
    started: SystemTime,
}

fn errno(e: &Error) -> Errno {
    Errno::from_i32(e.errno)
}

/// A kernel reply answered from the slow-operation pool. When the pool
/// gives up on it (full, or past the deadline) the reason also goes to the
/// session's `status.error`.
struct Later<R> {
    reply: R,
    core: Arc<Core>,
    key: Option<SessionKey>,
}

impl<R> Later<R> {
    fn abandoned(&self, err: &Error) {
        if let Some(key) = &self.key {
            self.core.record_refusal(key, err.clone());
        }
    }
}

impl work::Answer<usize> for Later<ReplyWrite> {
    fn done(self, result: Result<usize, Error>) {
        match result {
            Ok(n) => self.reply.written(n as u32),
            Err(e) => self.reply.error(errno(&e)),
        }
    }
    fn abandon(self, err: Error) {
        self.abandoned(&err);
        self.done(Err(err));
    }
}

impl work::Answer<()> for Later<ReplyEmpty> {
    fn done(self, result: Result<(), Error>) {
        match result {
            Ok(()) => self.reply.ok(),
            Err(e) => self.reply.error(errno(&e)),
        }
    }
    fn abandon(self, err: Error) {
        self.abandoned(&err);
        self.done(Err(err));
    }
}

/// A write that may wait on a session, and so goes to the pool.
enum SlowWrite {
    Input(SessionKey),
    SessionCtl(SessionKey),
    RootCtl,
}

impl SessionFs {
    pub fn new(core: Arc<Core>) -> Self {
        SessionFs {
            core,
            inodes: Arc::new(InodeTable::default()),
            handles: Arc::new(Mutex::new(HashMap::new())),
            scratch: Arc::new(ScratchFiles::default()),
            next_fh: Arc::new(AtomicU64::new(1)),
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            started: SystemTime::now(),
        }
    }

    fn handles(&self) -> MutexGuard<'_, HashMap<u64, Handle>> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn attr(&self, ino: u64, kind: FileType, perm: u16, size: u64, mtime: SystemTime) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: self.started,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// The node behind `ino`, if its session still exists.
    fn node(&self, ino: u64) -> Result<Node, Error> {
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
        if let Node::Session(key, _) | Node::Page(key, _) = &node {
            if !self.core.exists(key) {
                return Err(Error::not_found(format!("no session {key}")));
            }
        }
        Ok(node)
    }

    /// Size the scrollback shows this caller: its own handle's view when the
    /// calling process has one open (so `tail -f`, which polls `fstat`, sees
    /// growth past the ring's cap), else the bytes held.
    fn scrollback_size(&self, key: &SessionKey, fh: Option<u64>, pid: u32) -> Result<u64, Error> {
        let rt = self.core.session_runtime(key)?;
        let ring = rt.scrollback();
        // (handle, owning process, view length) of this session's views,
        // taken with the table locked; `/proc` is read after it is released.
        let views: Vec<(u64, u32, u64)> = {
            let handles = self.handles();
            let own = |h: &Handle| match h {
                Handle::Scrollback { key: k, view, .. } if k == key => Some(ring.view_len(view)),
                _ => None,
            };
            if let Some(size) = fh.and_then(|fh| handles.get(&fh)).and_then(own) {
                return Ok(size);
            }
            handles
                .iter()
                .filter_map(|(fh, h)| match h {
                    Handle::Scrollback {
                        key: k, view, tgid, ..
                    } if k == key => Some((*fh, *tgid, ring.view_len(view))),
                    _ => None,
                })
                .collect()
        };
        if !views.is_empty() {
            let tgid = tgid_of(pid);
            // The newest handle of this process: `tail -F` reopens.
            let newest = views
                .iter()
                .filter(|(_, t, _)| *t == tgid)
                .max_by_key(|(fh, _, _)| *fh);
            if let Some((_, _, size)) = newest {
                return Ok(*size);
            }
        }
        Ok(ring.len() as u64)
    }

    fn getattr_node(&self, node: &Node, fh: Option<u64>, pid: u32) -> Result<FileAttr, Error> {
        let ino = self.inodes.ino(node);
        let now = SystemTime::now();
        Ok(match node {
            Node::SessionsJson
            | Node::View(_)
            | Node::Facet(..)
            | Node::ViewLink(..)
            | Node::Scratch(..) => {
                let (kind, perm, size) = self.views_attr(node)?;
                self.attr(ino, kind, perm, size, now)
            }
            Node::Root => self.attr(ino, FileType::Directory, 0o755, 0, self.started),
            Node::RootFile(RootFile::Readme) => self.attr(
                ino,
                FileType::RegularFile,
                0o444,
                self.core.readme().len() as u64,
                self.started,
            ),
            Node::RootFile(RootFile::Status) => self.attr(
                ino,
                FileType::RegularFile,
                0o444,
                self.core.root_status().len() as u64,
                now,
            ),
            Node::RootFile(RootFile::Ctl) => {
                self.attr(ino, FileType::RegularFile, 0o200, 0, self.started)
            }
            Node::SlotsDir
            | Node::TranscriptsDir
            | Node::World(_)
            | Node::Slot(..)
            | Node::HostedFile(_)
            | Node::RunFile => {
                let (kind, perm, size) = self.records_attr(node)?;
                self.attr(ino, kind, perm, size, now)
            }
            Node::Page(key, n) => self.attr(
                ino,
                FileType::RegularFile,
                0o444,
                self.core.transcript_page(key, *n as usize)?.len() as u64,
                now,
            ),
            Node::Session(key, file) => match file {
                SessionFile::Dir => self.attr(ino, FileType::Directory, 0o755, 0, self.started),
                SessionFile::TranscriptDir => {
                    self.attr(ino, FileType::Directory, 0o555, 0, self.started)
                }
                SessionFile::Latest => {
                    let target = latest_target(self.core.transcript_pages(key)?);
                    self.attr(ino, FileType::Symlink, 0o777, target.len() as u64, now)
                }
                SessionFile::Scrollback => {
                    let size = self.scrollback_size(key, fh, pid)?;
                    let mtime = self.core.session_runtime(key)?.scrollback().last_append();
                    FileAttr {
                        blksize: SCROLLBACK_BLKSIZE,
                        ..self.attr(ino, FileType::RegularFile, 0o444, size, mtime)
                    }
                }
                SessionFile::Screen => self.attr(
                    ino,
                    FileType::RegularFile,
                    0o444,
                    self.core.screen(key)?.len() as u64,
                    now,
                ),
                SessionFile::Status => self.attr(
                    ino,
                    FileType::RegularFile,
                    0o444,
                    self.core.status(key)?.len() as u64,
                    now,
                ),
                SessionFile::Meta => self.attr(
                    ino,
                    FileType::RegularFile,
                    0o600,
                    self.core.meta_json(key)?.len() as u64,
                    self.core.meta_modified(),
                ),
                SessionFile::Field(f) => self.attr(
                    ino,
                    FileType::RegularFile,
                    0o600,
                    self.core.field_text(key, *f)?.len() as u64,
                    self.core.meta_modified(),
                ),
                SessionFile::Input | SessionFile::Ctl => {
                    self.attr(ino, FileType::RegularFile, 0o200, 0, now)
                }
            },
        })
    }

    fn lookup_node(&self, parent: u64, name: &OsStr) -> Result<Node, Error> {
        let name = name
            .to_str()
            .ok_or_else(|| Error::not_found("names here are UTF-8"))?;
        crate::faults::maybe_panic("lookup", name.as_bytes());
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
                    "slots" => return Ok(Node::SlotsDir),
                    "agent-transcripts" => return Ok(Node::TranscriptsDir),
                    "sessions.json" => return Ok(Node::SessionsJson),
                    _ => {}
                }
                if let Some(view) = inode::ViewDir::from_name(name) {
                    return Ok(Node::View(view));
                }
                let key =
                    SessionKey::parse(name).map_err(|_| Error::not_found(format!("no {name}")))?;
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
                let page = parse_page_name(name)
                    .ok_or_else(|| Error::not_found(format!("no {name} in a transcript")))?;
                if (page as usize) < self.core.transcript_pages(&key)? {
                    Ok(Node::Page(key, page))
                } else {
                    Err(Error::not_found(format!("{key} has no {name}")))
                }
            }
            _ => Err(Error::new(libc::ENOTDIR, "not a directory")),
        }
    }

    /// How the kernel treats an open file. Direct I/O everywhere: reads
    /// are not clamped to a cached size, so the scrollback and generated
    /// files always show what is there now. No `flush` on close for handles
    /// whose flush does nothing: that is a round trip saved on every `close`
    /// (`echo cmd > input` pays it once per command).
    fn open_flags(&self, fh: u64) -> FopenFlags {
        match self.handles().get(&fh) {
            Some(Handle::Meta(_) | Handle::Record(_)) | None => FopenFlags::FOPEN_DIRECT_IO,
            Some(_) => FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_NOFLUSH,
        }
    }

    fn add_handle(&self, handle: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles().insert(fh, handle);
        fh
    }

    fn open_node(&self, node: &Node, flags: OpenFlags, pid: u32) -> Result<u64, Error> {
        let mode = flags.acc_mode();
        if matches!(
            node,
            Node::SlotsDir
                | Node::TranscriptsDir
                | Node::World(_)
                | Node::Slot(..)
                | Node::HostedFile(_)
                | Node::RunFile
        ) {
            let handle = self.records_open(
                node,
                mode != OpenAccMode::O_WRONLY,
                mode != OpenAccMode::O_RDONLY,
                flags.0 & libc::O_TRUNC != 0,
            )?;
            return Ok(self.add_handle(handle));
        }
        let writes = mode != OpenAccMode::O_RDONLY;
        let reads = mode != OpenAccMode::O_WRONLY;
        let read_only = |what: &str| -> Result<(), Error> {
            if writes {
                Err(Error::access(format!("{what} is read-only")))
            } else {
                Ok(())
            }
        };
        let write_only = |what: &str| -> Result<(), Error> {
            if reads {
                Err(Error::access(format!("{what} is write-only")))
            } else {
                Ok(())
            }
        };
        let handle = match node {
            Node::Root
            | Node::Session(_, SessionFile::Dir)
            | Node::Session(_, SessionFile::TranscriptDir) => {
                return Err(Error::new(libc::EISDIR, "a directory"))
            }
            Node::Session(_, SessionFile::Latest) | Node::ViewLink(..) => {
                return Err(Error::new(libc::ELOOP, "a symlink"))
            }
            Node::View(_) | Node::Facet(..) => return Err(Error::new(libc::EISDIR, "a directory")),
            Node::SessionsJson => {
                read_only("sessions.json")?;
                Handle::Snapshot(self.sessions_json())
            }
            Node::Scratch(key, name) => {
                let file = self
                    .scratch_get(key, name)
                    .ok_or_else(|| Error::not_found(format!("no {name} in {key}")))?;
                if file.symlink.is_some() {
                    return Err(Error::new(libc::ELOOP, "a symlink"));
                }
                if writes && flags.0 & libc::O_TRUNC != 0 {
                    self.scratch_resize(key, name, 0)?;
                }
                Handle::Scratch(key.clone(), name.clone())
            }
            Node::SlotsDir
            | Node::TranscriptsDir
            | Node::World(_)
            | Node::Slot(..)
            | Node::HostedFile(_)
            | Node::RunFile => unreachable!("records nodes are opened above"),
            Node::Page(key, n) => {
                read_only("a transcript page")?;
                Handle::Snapshot(self.core.transcript_page(key, *n as usize)?.to_vec())
            }
            Node::RootFile(RootFile::Readme) => {
                read_only("README")?;
                Handle::Snapshot(self.core.readme())
            }
            Node::RootFile(RootFile::Status) => {
                read_only("status")?;
                Handle::Snapshot(self.core.root_status())
            }
            Node::RootFile(RootFile::Ctl) => {
                write_only("ctl")?;
                Handle::RootCtl
            }
            Node::Session(key, file) => {
                let refuse = |e: Error| {
                    log::warn!("{key}/{}: {}", file.name(), e.message);
                    e
                };
                match file {
                    SessionFile::Dir | SessionFile::TranscriptDir | SessionFile::Latest => {
                        unreachable!("handled above")
                    }
                    SessionFile::Scrollback => {
                        read_only("scrollback").map_err(refuse)?;
                        let rt = self.core.session_runtime(key)?;
                        Handle::Scrollback {
                            key: key.clone(),
                            ring: rt.scrollback().clone(),
                            view: rt.scrollback().open_view(),
                            tgid: tgid_of(pid),
                        }
                    }
                    SessionFile::Screen => {
                        read_only("screen").map_err(refuse)?;
                        Handle::Snapshot(self.core.screen(key)?)
                    }
                    SessionFile::Status => {
                        read_only("status").map_err(refuse)?;
                        Handle::Snapshot(self.core.status(key)?)
                    }
                    SessionFile::Meta | SessionFile::Field(_) if writes => {
                        if reads {
                            return Err(refuse(Error::invalid(format!(
                                "{} is read or replaced whole: open it for reading or for writing",
                                file.name()
                            ))));
                        }
                        Handle::Meta(MetaWrite::new(&self.core, key, *file)?)
                    }
                    SessionFile::Meta => Handle::Snapshot(self.core.meta_json(key)?),
                    SessionFile::Field(f) => Handle::Snapshot(self.core.field_text(key, *f)?),
                    SessionFile::Input => {
                        write_only("input").map_err(refuse)?;
                        Handle::Input(key.clone())
                    }
                    SessionFile::Ctl => {
                        write_only("ctl").map_err(refuse)?;
                        Handle::SessionCtl(key.clone())
                    }
                }
            }
        };
        Ok(self.add_handle(handle))
    }

    fn read_handle(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Error> {
        let mut handles = self.handles();
        // A file read happens with the table unlocked.
        if let Some(Handle::Hosted(id)) = handles.get(&fh) {
            let id = id.clone();
            drop(handles);
            return self
                .core
                .slots()
                .read_transcript(&id, offset, size as usize);
        }
        match handles.get_mut(&fh) {
            Some(Handle::Snapshot(bytes)) => {
                let start = (offset as usize).min(bytes.len());
                let end = start.saturating_add(size as usize).min(bytes.len());
                Ok(bytes[start..end].to_vec())
            }
            Some(Handle::Scrollback { ring, view, .. }) => {
                Ok(ring.read(view, offset, size as usize))
            }
            Some(Handle::Scratch(key, name)) => {
                Ok(self.scratch.read(key, name, offset, size as usize))
            }
            Some(_) => Err(Error::new(libc::EBADF, "not open for reading")),
            None => Err(Error::new(libc::EBADF, "no such handle")),
        }
    }

    /// Runs `work` on a handle taken out of the table, so the table's lock
    /// is not held during the file I/O or metadata commits it may do.
    fn with_handle<T>(&self, fh: u64, work: impl FnOnce(&mut Handle) -> T) -> Option<T> {
        // Bound first: a guard in a match's scrutinee would live through its arms.
        let taken = self.handles().remove(&fh);
        let mut handle = taken?;
        let result = work(&mut handle);
        self.handles().insert(fh, handle);
        Some(result)
    }

    /// Commits what a buffered handle still holds (at `flush` and `fsync`).
    fn finish_handle(&self, fh: u64) -> Result<(), Error> {
        self.with_handle(fh, |h| match h {
            Handle::Record(r) => r.finish(&self.core),
            Handle::Meta(m) => m.finish(&self.core),
            _ => Ok(()),
        })
        .unwrap_or(Ok(()))
        .inspect_err(|e| log::warn!("{}", e.message))
    }

    fn write_handle(&self, fh: u64, offset: u64, data: &[u8]) -> Result<usize, Error> {
        let buffered = self
            .with_handle(fh, |h| match h {
                Handle::Record(r) => Some(r.write(&self.core, offset, data)),
                Handle::Meta(m) => Some(m.write(&self.core, offset, data)),
                _ => None,
            })
            .flatten();
        if let Some(result) = buffered {
            return result
                .map(|()| data.len())
                .inspect_err(|e| log::warn!("{}", e.message));
        }
        let scratch = match self.handles().get(&fh) {
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

    /// The write `fh` takes, if it is one that may wait on a session.
    fn slow_write(&self, fh: u64) -> Option<SlowWrite> {
        match self.handles().get(&fh)? {
            Handle::Input(key) => Some(SlowWrite::Input(key.clone())),
            Handle::SessionCtl(key) => Some(SlowWrite::SessionCtl(key.clone())),
            Handle::RootCtl => Some(SlowWrite::RootCtl),
            _ => None,
        }
    }

    /// Hands a write to `input` or a `ctl` file to the pool, which answers
    /// it when the session has taken it (or refuses it at the deadline).
    /// `ctl` commands are parsed here, so a malformed one fails at once.
    fn write_later(&self, target: SlowWrite, data: &[u8], reply: ReplyWrite) {
        if !matches!(target, SlowWrite::Input(_)) {
            if let Err(e) = commands(data) {
                return reply.error(errno(&e));
            }
        }
        let (what, key) = match &target {
            SlowWrite::Input(key) => (format!("input to {key}"), Some(key.clone())),
            SlowWrite::SessionCtl(key) => (format!("ctl of {key}"), Some(key.clone())),
            SlowWrite::RootCtl => ("ctl".to_string(), None),
        };
        // `stop` must work however many writes are stuck: it may take a reserved place.
        let urgent = matches!(target, SlowWrite::SessionCtl(_))
            && commands(data).is_ok_and(|c| c.iter().all(|c| *c == "stop"));
        let core = self.core.clone();
        let data = data.to_vec();
        let answer = Later {
            reply,
            core: core.clone(),
            key,
        };
        let job = move || match target {
            SlowWrite::Input(key) => core.write_input(&key, &data),
            SlowWrite::SessionCtl(key) => {
                for command in commands(&data)? {
                    core.session_ctl(&key, command)?;
                }
                Ok(data.len())
            }
            SlowWrite::RootCtl => {
                for command in commands(&data)? {
                    core.root_ctl(command)?;
                }
                Ok(data.len())
            }
        };
        let pool = self.core.work();
        if urgent {
            pool.submit_urgent(what, work::DEADLINE, answer, job);
        } else {
            pool.submit(what, work::DEADLINE, answer, job);
        }
    }

    /// `flush`/`fsync`: a metadata commit may archive, which ends the
    /// session's processes first, so it is answered from the pool.
    fn finish_later(&self, fh: u64, reply: ReplyEmpty) {
        let commits = matches!(self.handles().get(&fh), Some(Handle::Meta(_)));
        if !commits {
            return match self.finish_handle(fh) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            };
        }
        let fs = self.clone();
        let answer = Later {
            reply,
            core: self.core.clone(),
            key: None,
        };
        self.core.work().submit(
            "a metadata commit".to_string(),
            work::DEADLINE,
            answer,
            move || fs.finish_handle(fh),
        );
    }

    fn readdir_entries(&self, ino: u64) -> Result<Vec<(u64, FileType, String)>, Error> {
        let node = self.node(ino)?;
        let mut entries = vec![
            (ino, FileType::Directory, ".".to_string()),
            (ROOT, FileType::Directory, "..".to_string()),
        ];
        match node {
            Node::Root => {
                for f in RootFile::ALL {
                    entries.push((f.ino(), FileType::RegularFile, f.name().to_string()));
                }
                entries.push((
                    self.inodes.ino(&Node::SessionsJson),
                    FileType::RegularFile,
                    "sessions.json".to_string(),
                ));
                for view in inode::ViewDir::ALL {
                    entries.push((
                        self.inodes.ino(&Node::View(view)),
                        FileType::Directory,
                        view.name().to_string(),
                    ));
                }
                for (node, name) in [
                    (Node::SlotsDir, "slots"),
                    (Node::TranscriptsDir, "agent-transcripts"),
                ] {
                    entries.push((
                        self.inodes.ino(&node),
                        FileType::Directory,
                        name.to_string(),
                    ));
                }
                for key in self.core.keys() {
                    if self.core.is_archived(&key) {
                        continue;
                    }
                    let ino = self
                        .inodes
                        .ino(&Node::Session(key.clone(), SessionFile::Dir));
                    entries.push((ino, FileType::Directory, key.to_string()));
                }
            }
            Node::Session(key, SessionFile::Dir) => {
                for f in SessionFile::FILES {
                    let ino = self.inodes.ino(&Node::Session(key.clone(), f));
                    entries.push((ino, FileType::RegularFile, f.name().to_string()));
                }
                if self.core.has_transcript(&key) {
                    let ino = self
                        .inodes
                        .ino(&Node::Session(key.clone(), SessionFile::TranscriptDir));
                    entries.push((ino, FileType::Directory, "transcript".to_string()));
                }
                // Backups editors make by rename (`meta.json~`) stay reachable
                // by name but are not listed: the directory shows no litter.
                for (name, link) in self
                    .scratch_names(&key)
                    .into_iter()
                    .filter(|(n, _)| !n.ends_with('~'))
                {
                    let ino = self.inodes.ino(&Node::Scratch(key.clone(), name.clone()));
                    let kind = if link {
                        FileType::Symlink
                    } else {
                        FileType::RegularFile
                    };
                    entries.push((ino, kind, name));
                }
            }
            parent @ (Node::View(_) | Node::Facet(..)) => {
                for (node, kind, name) in self.views_entries(&parent)? {
                    entries.push((self.inodes.ino(&node), kind, name));
                }
            }
            Node::Session(key, SessionFile::TranscriptDir) => {
                entries[1].0 = self
                    .inodes
                    .ino(&Node::Session(key.clone(), SessionFile::Dir));
                for n in 0..self.core.transcript_pages(&key)? as u64 {
                    let ino = self.inodes.ino(&Node::Page(key.clone(), n));
                    entries.push((ino, FileType::RegularFile, format!("page-{n}")));
                }
                let ino = self
                    .inodes
                    .ino(&Node::Session(key.clone(), SessionFile::Latest));
                entries.push((ino, FileType::Symlink, "latest".to_string()));
            }
            parent @ (Node::SlotsDir | Node::World(_) | Node::TranscriptsDir) => {
                if let Node::World(_) = parent {
                    entries[1].0 = self.inodes.ino(&Node::SlotsDir);
                }
                for (node, kind, name) in self.records_entries(&parent)? {
                    entries.push((self.inodes.ino(&node), kind, name));
                }
            }
            _ => return Err(Error::new(libc::ENOTDIR, "not a directory")),
        }
        Ok(entries)
    }
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

/// The commands in one write to a `ctl` file: one per line.
fn commands(data: &[u8]) -> Result<Vec<&str>, Error> {
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

impl Filesystem for SessionFs {
    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.lookup_node(parent.0, name).and_then(|node| {
            let attr = self.getattr_node(&node, None, req.pid())?;
            Ok((attr, ttls(&node)))
        }) {
            Ok((attr, (attr_ttl, entry_ttl))) => {
                reply.entry_with_ttls(&attr_ttl, &entry_ttl, &attr, Generation(0))
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.node(ino.0).and_then(|node| {
            let attr = self.getattr_node(&node, fh.map(|f| f.0), req.pid())?;
            Ok((attr, ttls(&node).0))
        }) {
            Ok((attr, ttl)) => reply.attr(&ttl, &attr),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let result = self.node(ino.0).and_then(|node| {
            if let Some(size) = size {
                self.check_size(&node, size)?;
            }
            let editable = matches!(
                node,
                Node::Session(_, SessionFile::Meta | SessionFile::Field(_)) | Node::Scratch(..)
            );
            let writable = editable
                || matches!(
                    node,
                    Node::RootFile(RootFile::Ctl)
                        | Node::Session(_, SessionFile::Input)
                        | Node::Session(_, SessionFile::Ctl)
                        | Node::Slot(..)
                        | Node::RunFile
                );
            if let (Node::HostedFile(id), Some(size)) = (&node, size) {
                if size != self.core.slots().transcript_len(id) {
                    return Err(Error::perm("transcripts are append-only: use >>"));
                }
            }
            // Editors fchmod what they save; the mode of these files is fixed
            // and the call succeeds without changing it.
            if (mode.is_some() || uid.is_some() || gid.is_some()) && !editable {
                return Err(Error::perm("modes and owners here are fixed"));
            }
            if let (Some(size), Some(fh)) = (size, fh) {
                self.with_handle(fh.0, |h| {
                    if let Handle::Meta(m) = h {
                        m.truncate(size)
                    }
                });
            }
            if let (Node::Scratch(key, name), Some(size)) = (&node, size) {
                self.scratch_resize(key, name, size)?;
            }
            // `echo x > input` truncates before it writes: a stream has nothing to cut.
            if size.is_some() && !writable {
                return Err(Error::access("read-only file"));
            }
            self.getattr_node(&node, fh.map(|f| f.0), req.pid())
        });
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        if let Ok(Node::SlotsDir) = self.node(parent.0) {
            // `mkdir -p slots/GUID`: a world exists for any well-formed GUID.
            let result = name
                .to_str()
                .ok_or_else(|| Error::invalid("a world is a GUID"))
                .and_then(crate::slots::parse_world)
                .inspect_err(|e| log::warn!("mkdir slots/{name:?}: {}", e.message))
                .and_then(|w| self.getattr_node(&Node::World(w), None, req.pid()));
            return match result {
                Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
                Err(e) => reply.error(errno(&e)),
            };
        }
        if parent.0 != ROOT {
            return reply.error(Errno::EPERM);
        }
        let result = name
            .to_str()
            .ok_or_else(|| Error::invalid("session keys are ASCII"))
            .and_then(|n| self.core.create(n))
            .and_then(|key| {
                self.getattr_node(&Node::Session(key, SessionFile::Dir), None, req.pid())
            });
        match result {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let (Ok(parent @ Node::SlotsDir), Some(name)) = (self.node(parent.0), name.to_str()) {
            return match self.records_rmdir(&parent, name) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            };
        }
        let err = match self.lookup_node(parent.0, name) {
            Ok(Node::Session(key, SessionFile::Dir)) => {
                log::warn!("rmdir {key}: refused; archive a session to put it away");
                Errno::EPERM
            }
            Ok(_) => Errno::ENOTDIR,
            Err(e) => errno(&e),
        };
        reply.error(err);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let (Ok(parent @ (Node::World(_) | Node::TranscriptsDir)), Some(name)) =
            (self.node(parent.0), name.to_str())
        {
            return match self.records_unlink(&parent, name) {
                Ok(()) => reply.ok(),
                Err(e) => {
                    log::warn!("rm {name}: {}", e.message);
                    reply.error(errno(&e))
                }
            };
        }
        match self.lookup_node(parent.0, name) {
            Ok(Node::Scratch(key, name)) => {
                self.scratch_remove(&key, &name);
                reply.ok()
            }
            Ok(_) => reply.error(Errno::EPERM),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self
            .node(ino.0)
            .and_then(|node| self.open_node(&node, flags, req.pid()))
        {
            Ok(fh) => reply.opened(FileHandle(fh), self.open_flags(fh)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.read_handle(fh.0, offset, size) {
            Ok(bytes) => reply.data(&bytes),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if let Some(target) = self.slow_write(fh.0) {
            return self.write_later(target, data, reply);
        }
        match self.write_handle(fh.0, offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Errors here reach close(): what is still buffered must stand alone.
        self.finish_later(fh.0, reply);
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: fuser::ReplyCreate,
    ) {
        let result = self.node(parent.0).and_then(|parent| {
            let name = name
                .to_str()
                .ok_or_else(|| Error::invalid("names here are UTF-8"))?;
            if let Node::Session(key, SessionFile::Dir) = &parent {
                if !Self::is_scratch_name(name) {
                    return Err(Error::new(libc::EEXIST, format!("{name} exists")));
                }
                // An editor's swap, probe or temporary file: held in memory.
                if self.scratch_get(key, name).is_some() {
                    return Err(Error::new(libc::EEXIST, format!("{name} exists")));
                }
                self.scratch_put(key, name, ScratchFile::default())?;
                let node = Node::Scratch(key.clone(), name.to_string());
                let ino = self.inodes.ino(&node);
                let attr = self.attr(ino, FileType::RegularFile, 0o600, 0, SystemTime::now());
                let fh = self.add_handle(Handle::Scratch(key.clone(), name.to_string()));
                return Ok((attr, fh));
            }
            let (node, handle) = self
                .records_create(&parent, name)
                .inspect_err(|e| log::warn!("create {name:?}: {}", e.message))?;
            let ino = self.inodes.ino(&node);
            let attr = match self.records_attr(&node) {
                Ok((kind, perm, size)) => self.attr(ino, kind, perm, size, SystemTime::now()),
                // Not written yet: an empty file until its first record arrives.
                Err(_) => self.attr(ino, FileType::RegularFile, 0o600, 0, SystemTime::now()),
            };
            Ok((attr, self.add_handle(handle)))
        });
        match result {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(fh),
                FopenFlags::FOPEN_DIRECT_IO,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // An editor's in-place save commits here at the latest.
        self.finish_later(fh.0, reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        // Editors' lock links (emacs's `.#meta.json`) live with the scratch files.
        let result = self
            .node(parent.0)
            .and_then(|parent| match (parent, link_name.to_str()) {
                (Node::Session(key, SessionFile::Dir), Some(name))
                    if Self::is_scratch_name(name) =>
                {
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
                    self.getattr_node(&Node::Scratch(key, name.to_string()), None, req.pid())
                }
                _ => Err(Error::perm(
                    "symlinks can only be made in session directories",
                )),
            });
        match result {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        // A rename may commit metadata or archive, which ends the session's
        // processes first: it is answered from the pool.
        let fs = self.clone();
        let (name, newname) = (name.to_owned(), newname.to_owned());
        let answer = Later {
            reply,
            core: self.core.clone(),
            key: None,
        };
        let what = format!("rename {name:?} -> {newname:?}");
        self.core
            .work()
            .submit(what, work::DEADLINE, answer, move || {
                let (Some(from), Some(to)) = (name.to_str(), newname.to_str()) else {
                    return Err(Error::invalid("names here are UTF-8"));
                };
                match (fs.node(parent.0)?, fs.node(newparent.0)?) {
                    (Node::Session(a, SessionFile::Dir), Node::Session(b, SessionFile::Dir))
                        if a == b =>
                    {
                        fs.rename_in_session(&a, from, to)
                    }
                    (
                        from_dir @ (Node::Root | Node::View(_)),
                        to_dir @ (Node::Root | Node::View(_)),
                    ) => fs.rename_session(&from_dir, from, &to_dir, to),
                    _ => Err(Error::new(
                        libc::EXDEV,
                        "cannot move between these directories",
                    )),
                }
                .inspect_err(|e| log::warn!("rename {name:?} -> {newname:?}: {}", e.message))
            });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.handles().remove(&fh.0);
        reply.ok();
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.node(ino.0) {
            Ok(Node::Session(key, SessionFile::Latest)) => match self.core.transcript_pages(&key) {
                Ok(pages) => reply.data(latest_target(pages).as_bytes()),
                Err(e) => reply.error(errno(&e)),
            },
            Ok(node @ Node::ViewLink(..)) => reply.data(organize::link_target(&node).as_bytes()),
            Ok(Node::Scratch(key, name)) => {
                match self.scratch_get(&key, &name).and_then(|f| f.symlink) {
                    Some(target) => reply.data(target.as_bytes()),
                    None => reply.error(Errno::EINVAL),
                }
            }
            Ok(_) => reply.error(Errno::EINVAL),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.node(ino.0) {
            Ok(
                Node::Root
                | Node::Session(_, SessionFile::Dir)
                | Node::Session(_, SessionFile::TranscriptDir)
                | Node::SlotsDir
                | Node::World(_)
                | Node::TranscriptsDir
                | Node::View(_)
                | Node::Facet(..),
            ) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Ok(_) => reply.error(Errno::ENOTDIR),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.readdir_entries(ino.0) {
            Ok(entries) => {
                for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize)
                {
                    if reply.add(INodeNo(ino), (i + 1) as u64, kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    // No extended attributes here; saying so once stops the kernel asking.
    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: fuser::ReplyXattr,
    ) {
        reply.error(Errno::from_i32(libc::EOPNOTSUPP));
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: fuser::ReplyXattr) {
        reply.error(Errno::from_i32(libc::EOPNOTSUPP));
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::from_i32(libc::EOPNOTSUPP));
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::from_i32(libc::EOPNOTSUPP));
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(Errno::ENOTTY);
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }
}
