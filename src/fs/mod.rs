//! The FUSE adapter: translates kernel requests into calls on the core's
//! [`Files`] and its results into replies, nothing else. Work that may wait
//! on a session, or on a writers' lock other processes share (the
//! sidecar's, the slot records', a transcript's), goes to the pool with its
//! reply. Every error goes back through [`fail`], which logs it.

mod attrs;
pub mod entry_eviction;
mod follow;
mod guard;
pub mod moved_sessions;
mod notify;

use crate::core::{Access, Attr, Core, Files, Opened, ReadBy, ReadStep, Reply, SetAttr, Step};
use crate::error::Error;
use attrs::{file_type, ttls, KernelAttrs, TTL};
use fuser::{
    Errno, FileAttr, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};
pub use guard::Guarded;
pub use moved_sessions::MovedEntries;
pub use notify::{EntryNotices, KernelNotices};
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::SystemTime;

/// Reads are at most 1 MiB (the kernel's largest request); a buffer grown
/// past what one read needs is not kept.
const READ_BUFFER_KEEP: usize = 2 << 20;

thread_local! {
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The filesystem as the kernel calls it.
pub struct SessionFs {
    files: Arc<Files>,
    attrs: KernelAttrs,
    /// Reads of `scrollback` held at the end for readers that follow.
    follows: Arc<follow::Follows>,
    /// Told once the kernel's `INIT` is answered: the mount serves.
    on_ready: Option<Box<dyn FnOnce() + Send + Sync>>,
}

/// The one way an error goes back to the kernel: logged (at debug: the
/// refusals users should see are logged as warnings where they are made,
/// and a missed lookup is routine), then its errno.
fn fail(op: &str, e: &Error) -> Errno {
    log::debug!("{op}: {e}");
    Errno::from_i32(e.errno)
}

/// A kernel reply, sent once: now on the request thread, or later by
/// whoever the core hands it to (boxed only then).
trait KernelReply<T>: Send + 'static {
    fn send(self, result: Result<T, Error>);
}

/// A kernel reply the core keeps until its answer comes.
struct Kept<R>(R);

impl<T, R: KernelReply<T>> Reply<T> for Kept<R> {
    fn answer(self: Box<Self>, result: Result<T, Error>) {
        self.0.send(result);
    }
}

/// Sends a request's answer to its reply: now, or by handing the reply to
/// whoever answers later.
fn answer<T, R: KernelReply<T>>(step: Step<T>, reply: R) {
    match step {
        Step::Done(result) => reply.send(result),
        Step::Later(later) => later.reply_to(Box::new(Kept(reply))),
    }
}

/// An entry reply (`mkdir`) with what makes its attributes.
struct EntryReply(ReplyEntry, KernelAttrs, &'static str);

impl KernelReply<Attr> for EntryReply {
    fn send(self, result: Result<Attr, Error>) {
        let EntryReply(reply, attrs, op) = self;
        attrs.reply_entry(op, result, reply);
    }
}

/// A write's reply.
struct WriteReply(ReplyWrite);

impl KernelReply<usize> for WriteReply {
    fn send(self, result: Result<usize, Error>) {
        match result {
            Ok(n) => self.0.written(n as u32),
            Err(e) => self.0.error(fail("write", &e)),
        }
    }
}

/// An empty reply (`flush`, `fsync`, `unlink`, `rename`) and its call.
struct EmptyReply(ReplyEmpty, &'static str);

impl KernelReply<()> for EmptyReply {
    fn send(self, result: Result<(), Error>) {
        SessionFs::reply_empty(self.1, result, self.0);
    }
}

/// An `open`, answered now or from the pool (a `diff`).
struct OpenReply(ReplyOpen);

impl KernelReply<Opened> for OpenReply {
    fn send(self, result: Result<Opened, Error>) {
        match result {
            // Direct I/O: reads are not clamped to a cached size, so the
            // scrollback and generated files always show what is there now.
            // No flush round trip on close where flush does nothing
            // (`echo cmd > input` pays it once per command).
            Ok(opened) if opened.flushes => self
                .0
                .opened(FileHandle(opened.fh), FopenFlags::FOPEN_DIRECT_IO),
            Ok(opened) => self.0.opened(
                FileHandle(opened.fh),
                FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_NOFLUSH,
            ),
            Err(e) => self.0.error(fail("open", &e)),
        }
    }
}

/// A blocked `wait` read of at most `.1` bytes.
struct WaitData(ReplyData, usize);

impl KernelReply<Vec<u8>> for WaitData {
    fn send(self, result: Result<Vec<u8>, Error>) {
        match result {
            Ok(bytes) => self.0.data(&bytes[..bytes.len().min(self.1)]),
            Err(e) => self.0.error(fail("wait", &e)),
        }
    }
}

fn open_mode(flags: OpenFlags) -> Access {
    let mode = flags.acc_mode();
    Access {
        reads: mode != OpenAccMode::O_WRONLY,
        writes: mode != OpenAccMode::O_RDONLY,
        truncates: flags.0 & libc::O_TRUNC != 0,
    }
}

impl SessionFs {
    pub fn new(core: Arc<Core>, share_read: bool) -> std::io::Result<Self> {
        let files = Arc::new(Files::new(core));
        Ok(SessionFs {
            follows: follow::Follows::start(files.clone())?,
            attrs: KernelAttrs {
                uid: nix::unistd::getuid().as_raw(),
                gid: nix::unistd::getgid().as_raw(),
                others: if share_read { 0o055 } else { 0 },
                started: files.started(),
                expirable: false,
            },
            files,
            on_ready: None,
        })
    }

    /// `ready` is called once the kernel has connected, as the mount
    /// begins to serve. It must not wait: the kernel's first request waits
    /// for it (and nothing here may ask the mount anything: the daemon
    /// answers its own requests).
    pub fn on_ready(&mut self, ready: Box<dyn FnOnce() + Send + Sync>) {
        self.on_ready = Some(ready);
    }

    /// The mounted tree, for what the daemon sets up once the mount exists.
    pub fn files(&self) -> &Arc<Files> {
        &self.files
    }

    fn attr(&self, a: &Attr) -> FileAttr {
        self.attrs.attr(a)
    }

    fn reply_entry(&self, op: &str, result: Result<Attr, Error>, reply: ReplyEntry) {
        self.attrs.reply_entry(op, result, reply);
    }

    fn reply_empty(op: &str, result: Result<(), Error>, reply: ReplyEmpty) {
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail(op, &e)),
        }
    }
}

impl Filesystem for SessionFs {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        // Every file is opened with direct I/O; this lets `mmap` map them
        // all the same (through the page cache, filled from the handle).
        if let Err(missing) = config.add_capabilities(fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP) {
            log::debug!("kernel lacks {missing:?}: mmap of files here fails with ENODEV");
        }
        // `echo x > input` opens with O_TRUNC: the truncation goes with the
        // OPEN (every file's open handles it) instead of a SETATTR and a
        // GETATTR of its own.
        if let Err(missing) = config.add_capabilities(fuser::InitFlags::FUSE_ATOMIC_O_TRUNC) {
            log::debug!("kernel lacks {missing:?}: O_TRUNC costs a setattr");
        }
        // Listings carry their entries' attributes (`ls -l` of N sessions
        // is not N lookups); AUTO: only the first batch of a listing and
        // those after lookups in it, so a plain `ls` stays plain.
        let plus = fuser::InitFlags::FUSE_DO_READDIRPLUS | fuser::InitFlags::FUSE_READDIRPLUS_AUTO;
        if let Err(missing) = config.add_capabilities(plus) {
            log::debug!("kernel lacks {missing:?}: listings carry no attributes");
        }
        self.attrs.expirable = config
            .capabilities()
            .contains(fuser::InitFlags::FUSE_HAS_EXPIRE_ONLY);
        if let Some(ready) = self.on_ready.take() {
            ready();
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.reply_entry(
            "lookup",
            self.files.lookup(parent.0, name, req.pid()),
            reply,
        );
    }

    // Every entry replied is one lookup the kernel holds; once it holds
    // none, the number is let go (`batch_forget` comes here one by one).
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.files.forget(ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.files.getattr(ino.0, fh.map(|f| f.0), req.pid()) {
            Ok(a) => reply.attr(&ttls(a.fixed, self.attrs.expirable).0, &self.attr(&a)),
            Err(e) => reply.error(fail("getattr", &e)),
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
        let set = SetAttr {
            owner_or_mode: mode.is_some() || uid.is_some() || gid.is_some(),
            size,
        };
        match self.files.setattr(ino.0, set, fh.map(|f| f.0), req.pid()) {
            Ok(a) => reply.attr(&TTL, &self.attr(&a)),
            Err(e) => reply.error(fail("setattr", &e)),
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
        let step = self.files.mkdir_request(parent.0, name, req.pid());
        let reply = EntryReply(reply, self.attrs, "mkdir");
        answer(step, reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::reply_empty("rmdir", self.files.rmdir(parent.0, name), reply);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let step = self.files.unlink_request(parent.0, name, req.pid());
        answer(step, EmptyReply(reply, "unlink"));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let step = self.files.open_request(ino.0, open_mode(flags), req.pid());
        answer(step, OpenReply(reply));
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let read = ReadBy {
            tid: req.pid(),
            nonblock: flags.0 & libc::O_NONBLOCK != 0,
        };
        // Each request thread keeps one reply buffer: a fresh 1 MiB buffer
        // per read would be mapped and faulted in anew every time.
        READ_BUFFER.with_borrow_mut(|buf| {
            let step = self.files.read_request(fh.0, offset, size, read, buf);
            match step {
                ReadStep::Data => reply.data(buf),
                ReadStep::Failed(e) => reply.error(fail("read", &e)),
                // Nothing at the end of a followed scrollback: held a
                // moment for output (see `follow`).
                ReadStep::Follow(ring, view) => {
                    if let Some(reply) = self.follows.hold(fh.0, offset, size, reply, &ring, view) {
                        reply.data(&[]);
                    }
                }
                ReadStep::Later(later) => {
                    later.reply_to(Box::new(Kept(WaitData(reply, size as usize))))
                }
            }
            if buf.capacity() > READ_BUFFER_KEEP {
                *buf = Vec::new();
            }
        });
    }

    fn poll(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        notifier: fuser::PollNotifier,
        events: fuser::PollEvents,
        flags: fuser::PollFlags,
        reply: fuser::ReplyPoll,
    ) {
        use fuser::PollEvents as E;
        // The kernel asks to hear of readiness only when it will wait.
        let waker: Option<crate::terminal::ring::Waker> =
            if flags.contains(fuser::PollFlags::FUSE_POLL_SCHEDULE_NOTIFY) {
                Some(Box::new(move || {
                    // The poller may be gone; the kernel then ignores it.
                    let _ = notifier.notify();
                }))
            } else {
                None
            };
        match self.files.poll_readable(fh.0, waker) {
            Ok(readable) => {
                let mut ready = events & (E::POLLOUT | E::POLLWRNORM);
                if readable {
                    ready |= events & (E::POLLIN | E::POLLRDNORM);
                }
                reply.poll(ready)
            }
            Err(e) => reply.error(fail("poll", &e)),
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
        let step = self.files.write_request(fh.0, offset, data);
        answer(step, WriteReply(reply));
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Errors here reach close(): what is still buffered must stand alone.
        let step = self.files.finish_request(fh.0, req.pid(), "flush");
        answer(step, EmptyReply(reply, "flush"));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: fuser::ReplyCreate,
    ) {
        match self.files.create_by(parent.0, name, req.pid()) {
            Ok((a, fh)) => reply.created(
                &TTL,
                &self.attr(&a),
                Generation(a.generation),
                FileHandle(fh),
                FopenFlags::FOPEN_DIRECT_IO,
            ),
            Err(e) => reply.error(fail("create", &e)),
        }
    }

    fn fsync(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // An editor's in-place save commits here at the latest.
        let step = self.files.finish_request(fh.0, req.pid(), "fsync");
        answer(step, EmptyReply(reply, "fsync"));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        let result = self.files.symlink(parent.0, link_name, target, req.pid());
        self.reply_entry("symlink", result, reply);
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
        let step = self
            .files
            .rename_request(parent.0, name, newparent.0, newname);
        answer(step, EmptyReply(reply, "rename"));
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
        self.follows.released(fh.0);
        self.files.release(fh.0);
        reply.ok();
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.files.readlink(ino.0) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(fail("readlink", &e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.files.opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(fail("opendir", &e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match self.files.readdir(ino.0, fh.0) {
            Ok(entries) => entries,
            Err(e) => return reply.error(fail("readdir", &e)),
        };
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, e) in entries.iter().enumerate().skip(start) {
            if reply.add(INodeNo(e.ino), (i + 1) as u64, file_type(e.kind), &e.name) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let expirable = self.attrs.expirable;
        let result = self
            .files
            .readdir_plus(ino.0, fh.0, offset, req.pid(), |next, name, a| {
                // fuser gives one timeout for the entry and its attributes:
                // the shorter, so neither is kept longer than a lookup's.
                let (attr_ttl, entry_ttl) = ttls(a.fixed, expirable);
                reply.add(
                    INodeNo(a.ino),
                    next,
                    name,
                    &attr_ttl.min(entry_ttl),
                    &self.attr(a),
                    Generation(a.generation),
                )
            });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(fail("readdirplus", &e)),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.files.releasedir(fh.0);
        reply.ok();
    }

    // No extended attributes here. ENOSYS, not EOPNOTSUPP: the kernel then
    // stops asking (and tells callers EOPNOTSUPP itself), which spares a
    // `security.capability` round trip on every truncating open (`echo x >
    // KEY/input`).
    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: fuser::ReplyXattr,
    ) {
        reply.error(Errno::from_i32(libc::ENOSYS));
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: fuser::ReplyXattr) {
        reply.error(Errno::from_i32(libc::ENOSYS));
    }

    // Setting one is a refusal the user hears of (`status.error`).
    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty("setxattr", self.files.set_xattr(ino.0, name), reply);
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::reply_empty("removexattr", self.files.set_xattr(ino.0, name), reply);
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let result = self.files.mknod(parent.0, name);
        self.reply_entry("mknod", result, reply);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let result = self.files.link(ino.0, newparent.0, newname);
        self.reply_entry("link", result, reply);
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
