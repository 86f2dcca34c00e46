//! No request can take the daemon down: every kernel call reaches
//! [`SessionFs`] through [`Guarded`], which runs the handler under
//! `catch_unwind`. A panic is logged and put in the session's
//! `status.error` when the call concerned one; the reply the handler was
//! holding is dropped unanswered, and fuser answers a dropped reply with
//! EIO. The request thread lives on.
//!
//! This relies on `panic = "unwind"` (the default; Cargo.toml sets no
//! other).

use super::SessionFs;
use crate::core::Concern;
use crate::error::Error;
use crate::terminal::vt_mirror::panic_message;
use fuser::{
    AccessFlags, CopyFileRangeFlags, FileHandle, Filesystem, INodeNo, IoctlFlags, KernelConfig,
    LockOwner, OpenFlags, PollEvents, PollFlags, PollNotifier, RenameFlags, ReplyAttr, ReplyBmap,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl,
    ReplyLock, ReplyLseek, ReplyOpen, ReplyPoll, ReplyStatfs, ReplyWrite, ReplyXattr, Request,
    TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::SystemTime;

/// The filesystem as mounted: [`SessionFs`] with every handler guarded.
pub struct Guarded(pub SessionFs);

/// Runs `body`; if it panics, hands `on_panic` the message and returns.
pub fn guard(body: impl FnOnce(), on_panic: impl FnOnce(String)) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(body)) {
        on_panic(panic_message(panic.as_ref()));
    }
}

impl SessionFs {
    /// After a handler panicked: the log, and the session's status when
    /// the request was about one. Nothing here may panic in turn.
    fn handler_panicked(&self, op: &str, ino: Option<u64>, why: &str) {
        let message = format!("internal error in {op}: {why}; answered EIO");
        let node = ino.and_then(|ino| self.files.known_node(ino));
        match node.as_ref().and_then(|n| n.session()) {
            Some(key) => {
                log::debug!("{op} panicked on inode {ino:?}");
                let err = Error::new(libc::EIO, message).at_level(log::Level::Error);
                self.files
                    .core()
                    .record(&Concern::Session(key.clone()), err);
            }
            None => log::error!("{message} (inode {ino:?})"),
        }
    }
}

impl Guarded {
    fn run(&self, op: &str, ino: Option<u64>, body: impl FnOnce()) {
        guard(body, |why| {
            // The report itself must not unwind into fuser either.
            guard(
                || self.0.handler_panicked(op, ino, &why),
                |again| log::error!("internal error in {op}: {why}; then reporting it: {again}"),
            )
        });
    }
}

/// One line per kernel call: its parameters after `req`, and the inode a
/// panic is reported against. Every call of the trait is passed on, so a
/// handler [`SessionFs`] gains later is guarded without a change here
/// (`batch_forget` takes a type fuser does not export: its default calls
/// `forget` for each node, which is passed on).
macro_rules! guarded {
    ($( fn $op:ident($($arg:ident: $ty:ty),* $(,)?) @ $ino:expr; )*) => {
        impl Filesystem for Guarded {
            fn init(&mut self, req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
                let fs = &mut self.0;
                catch_unwind(AssertUnwindSafe(|| fs.init(req, config))).unwrap_or_else(|panic| {
                    Err(std::io::Error::other(format!(
                        "internal error in init: {}",
                        panic_message(panic.as_ref())
                    )))
                })
            }

            fn destroy(&mut self) {
                let fs = &mut self.0;
                guard(|| fs.destroy(), |why| log::error!("internal error in destroy: {why}"));
            }

            $(
                fn $op(&self, req: &Request, $($arg: $ty),*) {
                    let ino: Option<INodeNo> = $ino;
                    self.run(stringify!($op), ino.map(|i| i.0), || self.0.$op(req, $($arg),*));
                }
            )*
        }
    };
}

guarded! {
    fn lookup(parent: INodeNo, name: &OsStr, reply: ReplyEntry) @ Some(parent);
    fn forget(ino: INodeNo, nlookup: u64) @ Some(ino);
    fn getattr(ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) @ Some(ino);
    fn setattr(
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        crtime: Option<SystemTime>,
        chgtime: Option<SystemTime>,
        bkuptime: Option<SystemTime>,
        flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) @ Some(ino);
    fn readlink(ino: INodeNo, reply: ReplyData) @ Some(ino);
    fn mknod(parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry)
        @ Some(parent);
    fn mkdir(parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry)
        @ Some(parent);
    fn unlink(parent: INodeNo, name: &OsStr, reply: ReplyEmpty) @ Some(parent);
    fn rmdir(parent: INodeNo, name: &OsStr, reply: ReplyEmpty) @ Some(parent);
    fn symlink(parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry)
        @ Some(parent);
    fn rename(
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) @ Some(parent);
    fn link(ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) @ Some(ino);
    fn open(ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) @ Some(ino);
    fn read(
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) @ Some(ino);
    fn write(
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) @ Some(ino);
    fn flush(ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) @ Some(ino);
    fn release(
        ino: INodeNo,
        fh: FileHandle,
        flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        flush: bool,
        reply: ReplyEmpty,
    ) @ Some(ino);
    fn fsync(ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) @ Some(ino);
    fn opendir(ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) @ Some(ino);
    fn readdir(ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectory) @ Some(ino);
    fn readdirplus(ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectoryPlus)
        @ Some(ino);
    fn releasedir(ino: INodeNo, fh: FileHandle, flags: OpenFlags, reply: ReplyEmpty) @ Some(ino);
    fn fsyncdir(ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) @ Some(ino);
    fn statfs(ino: INodeNo, reply: ReplyStatfs) @ Some(ino);
    fn setxattr(
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) @ Some(ino);
    fn getxattr(ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) @ Some(ino);
    fn listxattr(ino: INodeNo, size: u32, reply: ReplyXattr) @ Some(ino);
    fn removexattr(ino: INodeNo, name: &OsStr, reply: ReplyEmpty) @ Some(ino);
    fn access(ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) @ Some(ino);
    fn create(
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) @ Some(parent);
    fn getlk(
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) @ Some(ino);
    fn setlk(
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) @ Some(ino);
    fn bmap(ino: INodeNo, blocksize: u32, idx: u64, reply: ReplyBmap) @ Some(ino);
    fn ioctl(
        ino: INodeNo,
        fh: FileHandle,
        flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) @ Some(ino);
    fn poll(
        ino: INodeNo,
        fh: FileHandle,
        ph: PollNotifier,
        events: PollEvents,
        flags: PollFlags,
        reply: ReplyPoll,
    ) @ Some(ino);
    fn fallocate(
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) @ Some(ino);
    fn lseek(ino: INodeNo, fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek)
        @ Some(ino);
    fn copy_file_range(
        ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) @ Some(ino_out);
}

#[cfg(test)]
mod tests {
    use super::guard;

    #[test]
    fn a_panic_is_reported_and_goes_no_further() {
        let mut reported = None;
        guard(|| panic!("boom {}", 7), |why| reported = Some(why));
        assert_eq!(reported.as_deref(), Some("boom 7"));
        let mut ran = false;
        guard(|| ran = true, |_| unreachable!("no panic"));
        assert!(ran);
    }
}
