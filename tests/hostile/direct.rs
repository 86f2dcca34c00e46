//! The catalogue's calls made on the core in this process, without a
//! mount: `sessionfs::core::Files`, one method per kernel request, driven
//! as the FUSE adapter (`src/fs`) drives it. The kernel's own part is
//! played here too, and only that: paths resolved by lookups, a lookup
//! before `mkdir`, `unlink`, `rmdir`, `link`, `symlink` and `mknod` (a name
//! that exists is EEXIST, one that does not ENOENT, without asking), a name
//! over 255 bytes (ENAMETOOLONG), `O_DIRECTORY` on a file (ENOTDIR),
//! `O_APPEND` writing at the size, and `getxattr`, which the daemon answers
//! ENOSYS and the kernel then EOPNOTSUPP.

use crate::Op;
use sessionfs::core::tree::node::ROOT;
use sessionfs::core::{Access, Attr, Core, Files, Kind, SetAttr};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A daemon's core over scratch directories, with no mount: `mnt` is the
/// mount point it was told of (a plain directory).
pub struct Direct {
    _dir: tempfile::TempDir,
    pub files: std::sync::Arc<Files>,
    pub mnt: PathBuf,
    pid: u32,
}

fn errno(e: sessionfs::error::Error) -> i32 {
    e.errno
}

impl Direct {
    pub fn new() -> Direct {
        let dir = tempfile::Builder::new()
            .prefix("sfs-direct")
            .tempdir_in("/tmp")
            .unwrap();
        let config = crate::common::scratch_config(dir.path());
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let core = Core::new(config, &mnt).unwrap();
        Direct {
            _dir: dir,
            files: std::sync::Arc::new(Files::new(core)),
            mnt,
            pid: std::process::id(),
        }
    }

    /// The daemon's state directory (sidecar, slot records, transcripts).
    pub fn state(&self) -> PathBuf {
        self._dir.path().join("state/sessionfs")
    }

    /// The directory holding the last component of `rel`, and that name.
    fn parent_of(&self, rel: &str) -> Result<(u64, OsString), i32> {
        let mut parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        let name = parts.pop().expect("a path with a name");
        let mut dirs = vec![ROOT];
        for part in parts {
            match part {
                "." => {}
                ".." => {
                    if dirs.len() > 1 {
                        dirs.pop();
                    }
                }
                _ => {
                    let a = self.lookup(*dirs.last().unwrap(), OsStr::new(part))?;
                    if a.kind != Kind::Dir {
                        return Err(libc::ENOTDIR);
                    }
                    dirs.push(a.ino);
                }
            }
        }
        if name == ".." && dirs.len() > 1 {
            dirs.pop();
        }
        Ok((*dirs.last().unwrap(), OsString::from(name)))
    }

    fn lookup(&self, parent: u64, name: &OsStr) -> Result<Attr, i32> {
        if name.as_bytes().len() > 255 {
            return Err(libc::ENAMETOOLONG);
        }
        self.files.lookup(parent, name, self.pid).map_err(errno)
    }

    /// The attributes of `rel`, found by lookups.
    pub fn resolve(&self, rel: &str) -> Result<Attr, i32> {
        let (parent, name) = self.parent_of(rel)?;
        self.lookup(parent, &name)
    }

    /// A name that must not exist yet, as the kernel checks before it asks.
    fn new_name(&self, rel: &str) -> Result<(u64, OsString), i32> {
        let (parent, name) = self.parent_of(rel)?;
        match self.lookup(parent, &name) {
            Ok(_) => Err(libc::EEXIST),
            Err(libc::ENOENT) => Ok((parent, name)),
            Err(e) => Err(e),
        }
    }

    /// open(2): a lookup, then `open`, or `create` where `O_CREAT` finds
    /// nothing. The file's number and the handle.
    fn open(&self, rel: &str, flags: i32) -> Result<(u64, u64), i32> {
        let (parent, name) = self.parent_of(rel)?;
        let found = match self.lookup(parent, &name) {
            Err(libc::ENOENT) if flags & libc::O_CREAT != 0 => {
                let (a, fh) = self
                    .files
                    .create_by(parent, &name, self.pid)
                    .map_err(errno)?;
                return Ok((a.ino, fh));
            }
            found => found?,
        };
        if flags & libc::O_DIRECTORY != 0 && found.kind != Kind::Dir {
            return Err(libc::ENOTDIR);
        }
        // As the adapter's `open_mode`.
        let acc = flags & libc::O_ACCMODE;
        let access = Access {
            reads: acc != libc::O_WRONLY,
            writes: acc != libc::O_RDONLY,
            truncates: flags & libc::O_TRUNC != 0,
        };
        let fh = self
            .files
            .open(found.ino, access, self.pid)
            .map_err(errno)?;
        Ok((found.ino, fh))
    }

    /// One `write` request, as the adapter makes it: what the core
    /// answers later (the pool) is waited for here.
    fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<usize, i32> {
        self.files
            .write_request(fh, offset, data)
            .wait()
            .map_err(errno)
    }

    /// close(2): `flush` (a prompt is taken there), then `release`.
    fn close(&self, fh: u64) -> Result<(), i32> {
        let result = self.files.finish_request(fh, self.pid, "flush").wait();
        self.files.release(fh);
        result.map_err(errno)
    }

    fn setattr(&self, rel: &str, set: SetAttr) -> Result<(), i32> {
        let a = self.resolve(rel)?;
        self.files
            .setattr(a.ino, set, None, self.pid)
            .map(drop)
            .map_err(errno)
    }

    /// Runs `op`: Ok or the first errno, as `run` does through a mount.
    pub fn run(&self, op: &Op) -> Result<(), i32> {
        match op {
            Op::Write {
                path,
                flags,
                data,
                at,
            } => {
                let (ino, fh) = self.open(path, *flags)?;
                let start = match at {
                    Some(at) => *at,
                    None if flags & libc::O_APPEND != 0 => {
                        self.files
                            .getattr(ino, Some(fh), self.pid)
                            .map_err(errno)?
                            .size
                    }
                    None => 0,
                };
                let mut result = Ok(());
                let mut done = 0usize;
                while done < data.len() {
                    match self.write(fh, start + done as u64, &data[done..]) {
                        Ok(0) => panic!("a write to {path} took nothing"),
                        Ok(n) => done += n,
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    }
                }
                let closed = self.close(fh);
                result.and(closed)
            }
            Op::Open(path, flags) => {
                let (_, fh) = self.open(path, *flags)?;
                self.close(fh)
            }
            Op::Read(path) => {
                let (_, fh) = self.open(path, libc::O_RDONLY)?;
                let mut buf = Vec::new();
                let result = self.files.read_into(fh, 0, 4096, &mut buf).map_err(errno);
                let _ = self.close(fh);
                result
            }
            Op::Truncate(path, size) => self.setattr(
                path,
                SetAttr {
                    owner_or_mode: false,
                    size: Some(*size as u64),
                },
            ),
            Op::Ftruncate(path, size) => {
                let (ino, fh) = self.open(path, libc::O_WRONLY)?;
                let set = SetAttr {
                    owner_or_mode: false,
                    size: Some(*size as u64),
                };
                let result = self
                    .files
                    .setattr(ino, set, Some(fh), self.pid)
                    .map(drop)
                    .map_err(errno);
                let _ = self.close(fh);
                result
            }
            Op::Mkdir(path) => {
                let (parent, name) = self.new_name(path)?;
                self.files
                    .mkdir(parent, &name, self.pid)
                    .map(drop)
                    .map_err(errno)
            }
            Op::Rmdir(path) => {
                self.resolve(path)?;
                let (parent, name) = self.parent_of(path)?;
                self.files.rmdir(parent, &name).map_err(errno)
            }
            Op::Unlink(path) => {
                self.resolve(path)?;
                let (parent, name) = self.parent_of(path)?;
                self.files.unlink_by(parent, &name, self.pid).map_err(errno)
            }
            Op::Rename(a, b) => {
                self.resolve(a)?;
                let (parent, name) = self.parent_of(a)?;
                let (newparent, newname) = self.parent_of(b)?;
                self.files
                    .rename(parent, &name, newparent, &newname)
                    .map_err(errno)
            }
            Op::Link(a, b) => {
                let from = self.resolve(a)?;
                let (newparent, newname) = self.new_name(b)?;
                self.files
                    .link(from.ino, newparent, &newname)
                    .map(drop)
                    .map_err(errno)
            }
            Op::Symlink(target, path) => {
                let (parent, name) = self.new_name(path)?;
                self.files
                    .symlink(parent, &name, Path::new(target), self.pid)
                    .map(drop)
                    .map_err(errno)
            }
            Op::Mknod(path, _, _) => {
                let (parent, name) = self.new_name(path)?;
                self.files.mknod(parent, &name).map(drop).map_err(errno)
            }
            Op::Chmod(path, _) | Op::Chown(path) => self.setattr(
                path,
                SetAttr {
                    owner_or_mode: true,
                    size: None,
                },
            ),
            Op::SetXattr(path) | Op::RemoveXattr(path) => {
                let a = self.resolve(path)?;
                self.files
                    .set_xattr(a.ino, OsStr::new("user.hostile"))
                    .map_err(errno)
            }
            Op::GetXattr(path) => {
                self.resolve(path)?;
                Err(libc::EOPNOTSUPP)
            }
            Op::Then(first, second) => {
                self.run(first)
                    .unwrap_or_else(|e| panic!("setup {first:?} failed: errno {e}"));
                self.run(second)
            }
        }
    }
}
