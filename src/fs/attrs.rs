//! How the core's attributes reach the kernel: the `FileAttr` every node
//! gets (owner, modes for others, creation time) and how long the kernel
//! may keep attributes and entries.

use super::fail;
use crate::core::{Attr, Fixed, Kind};
use crate::error::Error;
use fuser::{FileAttr, FileType, Generation, INodeNo, ReplyEntry};
use std::time::{Duration, SystemTime};

/// Most things change under the kernel's feet: by default, no attribute or
/// entry caching (see [`ttls`] for what may be kept).
pub(super) const TTL: Duration = Duration::ZERO;

/// How long the kernel may keep a node's attributes and its entry: what
/// never changes is kept (no `getattr` on every path walk through a
/// session directory, one lookup less for `echo cmd > KEY/input`);
/// everything else is asked for every time. A session directory's entry is
/// kept only when the kernel can be told to expire it (`expirable`).
pub(super) fn ttls(fixed: Fixed, expirable: bool) -> (Duration, Duration) {
    const KEPT: Duration = Duration::from_secs(60);
    // A directory's attributes: its mtime moves with what it holds, but a
    // path walk needs them (the kernel checks search permission), so they
    // are kept for a moment.
    const MOMENT: Duration = Duration::from_secs(1);
    match fixed {
        Fixed::AttributesAndEntry => (KEPT, KEPT),
        Fixed::Attributes => (MOMENT, TTL),
        Fixed::RootDirectory => (MOMENT, KEPT),
        Fixed::Member => (MOMENT, MOMENT),
        Fixed::Directory if expirable => (MOMENT, MOMENT),
        Fixed::Directory => (MOMENT, TTL),
        Fixed::Entry => (TTL, KEPT),
        Fixed::Nothing => (TTL, TTL),
    }
}

pub(super) fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::Dir => FileType::Directory,
        Kind::File => FileType::RegularFile,
        Kind::Symlink => FileType::Symlink,
    }
}

/// Turns the core's attributes into the kernel's: what every node of this
/// mount shares. Copied into replies answered from the pool.
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelAttrs {
    pub(super) uid: u32,
    pub(super) gid: u32,
    /// The permission bits others get: none (private, the default) or
    /// read and search (`share=read`). The kernel enforces them
    /// (`default_permissions`); no one but the owner ever gets write.
    pub(super) others: u16,
    /// When the mount started: every node's creation time.
    pub(super) started: SystemTime,
    /// The kernel marks an entry stale on request (`FUSE_EXPIRE_ONLY`), so
    /// session directories' entries can be kept (see [`super::moved`]).
    pub(super) expirable: bool,
}

impl KernelAttrs {
    pub(super) fn attr(&self, a: &Attr) -> FileAttr {
        let kind = file_type(a.kind);
        FileAttr {
            ino: INodeNo(a.ino),
            size: a.size,
            blocks: a.size.div_ceil(512),
            atime: a.mtime,
            mtime: a.mtime,
            ctime: a.mtime,
            crtime: self.started,
            kind,
            // The owner's bits as the node table gives them; group and
            // others read (and search) only what the owner may, if shared.
            // (A symlink's mode means nothing and is 0777 everywhere.)
            perm: if kind == FileType::Symlink {
                0o777
            } else {
                let owner = a.perm & 0o700;
                // Read where the owner reads, search where the owner searches.
                let read = if owner & 0o400 != 0 { 0o044 } else { 0 };
                let search = if owner & 0o100 != 0 { 0o011 } else { 0 };
                owner | ((read | search) & self.others)
            },
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: a.io_size,
            flags: 0,
        }
    }

    pub(super) fn reply_entry(&self, op: &str, result: Result<Attr, Error>, reply: ReplyEntry) {
        match result {
            Ok(a) => {
                let (attr_ttl, entry_ttl) = ttls(a.fixed, self.expirable);
                reply.entry_with_ttls(
                    &attr_ttl,
                    &entry_ttl,
                    &self.attr(&a),
                    Generation(a.generation),
                )
            }
            Err(e) => reply.error(fail(op, &e)),
        }
    }
}
