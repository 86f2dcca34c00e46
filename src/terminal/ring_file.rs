//! Where a scrollback ring keeps its bytes: a file, so that the daemon that
//! comes after this one (a restart, a crash) finds everything this one
//! showed.
//!
//! A kept ring is `<runtime dir>/<stem>.ring`: a header page, then `cap`
//! bytes used as a circle (stream offset `p` lives at `HEADER + p % cap`).
//! The file is sparse and the runtime directory is usually a tmpfs, so it
//! costs the bytes it holds, in place of the daemon's own memory: the ring
//! has no other copy. The one daemon holding the file's `flock` writes it;
//! another daemon joined to the same master keeps an anonymous ring
//! (`memfd`), starting from a copy of the kept one.
//!
//! The header says which bytes are held. It is written after the bytes it
//! newly claims and before the bytes that overwrite what it gave up, so a
//! daemon killed at any moment leaves a header that claims only whole,
//! right bytes. Nothing is synced: the point is to outlive the daemon, not
//! the machine.

use std::ffi::CString;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where the bytes start: one page for the header keeps them page-aligned.
const HEADER: u64 = 4096;
const MAGIC: &[u8; 8] = b"SFSRING1";
/// Byte offsets of the header's fields (little-endian u64s, then the key).
const CAP_AT: u64 = 8;
const START_AT: u64 = 16;
const KEY_LEN_AT: u64 = 32;
const KEY_AT: u64 = 34;
/// The longest key a header names (keys are at most 128 + an engine).
const KEY_MAX: usize = 1024;

/// The byte range a ring holds: stream offsets `[start, total)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bounds {
    pub start: u64,
    pub total: u64,
}

/// A ring's file: kept under a name, or anonymous.
#[derive(Debug)]
pub struct RingFile {
    file: File,
    cap: u64,
    /// The kept file's name, when this daemon holds its lock.
    kept: Option<PathBuf>,
}

/// What opening a kept ring found.
#[derive(Debug)]
pub enum Opened {
    /// No file: the ring starts empty and makes one at its first byte.
    Absent,
    /// The kept file, locked by this daemon, with what it held.
    Kept(RingFile, Bounds),
    /// Another daemon holds the kept file: an anonymous copy of it.
    Copy(RingFile, Bounds),
}

impl RingFile {
    /// A ring that lives only as long as this daemon holds it.
    pub fn anonymous(cap: u64) -> io::Result<RingFile> {
        let name = CString::new("sessionfs-ring").map_err(io::Error::other)?;
        let fd =
            nix::sys::memfd::memfd_create(&name, nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)
                .map_err(io::Error::from)?;
        let ring = RingFile {
            file: File::from(fd),
            cap,
            kept: None,
        };
        ring.write_header(b"", Bounds::default())?;
        Ok(ring)
    }

    /// Opens the kept ring at `path` if there is one, with the bytes it
    /// held (the newest `cap` of them if it was kept at another size). A
    /// file that is not a ring of `key` is started afresh.
    pub fn open(path: &Path, key: &str, cap: u64) -> io::Result<Opened> {
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Opened::Absent),
            Err(e) => return Err(e),
        };
        let owned = match file.try_lock() {
            Ok(()) => true,
            Err(TryLockError::WouldBlock) => false,
            Err(TryLockError::Error(e)) => return Err(e),
        };
        let old = read_header(&file, key);
        if owned {
            let mut ring = RingFile {
                file,
                cap,
                kept: Some(path.to_path_buf()),
            };
            let bounds = match old {
                Some((old_cap, bounds)) if old_cap == cap => bounds,
                Some((old_cap, bounds)) => ring.refit(old_cap, bounds, key)?,
                None => {
                    log::warn!("{}: not a ring of {key}; started afresh", path.display());
                    ring.reset(key, 0)?;
                    Bounds::default()
                }
            };
            return Ok(Opened::Kept(ring, bounds));
        }
        let copy = RingFile::anonymous(cap)?;
        let bounds = match old {
            Some((old_cap, bounds)) => copy.take_from(&file, old_cap, bounds)?,
            None => Bounds::default(),
        };
        copy.write_header(key.as_bytes(), bounds)?;
        Ok(Opened::Copy(copy, bounds))
    }

    /// Makes the kept ring at `path`, empty at stream offset `total`; `None`
    /// when another daemon made it first and holds it.
    pub fn create(path: &Path, key: &str, cap: u64, total: u64) -> io::Result<Option<RingFile>> {
        // Made and locked as a session's lock file is: whoever holds it writes.
        let Some(file) =
            crate::filelock::try_lock(path).map_err(|e| io::Error::from_raw_os_error(e.errno))?
        else {
            return Ok(None);
        };
        let ring = RingFile {
            file,
            cap,
            kept: Some(path.to_path_buf()),
        };
        ring.reset(key, total)?;
        Ok(Some(ring))
    }

    /// The kept file's name, if this is one.
    #[cfg(test)]
    pub fn kept(&self) -> Option<&Path> {
        self.kept.as_deref()
    }

    /// Writes `data` at stream offset `pos` (the caller has made room).
    pub fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        let (first, rest) = self.split(pos, data.len());
        self.file.write_all_at(&data[..first], self.place(pos))?;
        if rest > 0 {
            self.file.write_all_at(&data[first..], HEADER)?;
        }
        Ok(())
    }

    /// Appends `n` bytes from stream offset `pos`, held, to `out`.
    pub fn read_at(&self, pos: u64, n: usize, out: &mut Vec<u8>) -> io::Result<()> {
        let (first, rest) = self.split(pos, n);
        let at = out.len();
        out.resize(at + n, 0);
        let filled = (|| {
            self.read_fill(&mut out[at..at + first], self.place(pos))?;
            if rest > 0 {
                self.read_fill(&mut out[at + first..], HEADER)?;
            }
            Ok(())
        })();
        if filled.is_err() {
            out.truncate(at);
        }
        filled
    }

    /// Records which bytes are held.
    pub fn save_bounds(&self, bounds: Bounds) -> io::Result<()> {
        let mut field = [0u8; 16];
        field[..8].copy_from_slice(&bounds.start.to_le_bytes());
        field[8..].copy_from_slice(&bounds.total.to_le_bytes());
        self.file.write_all_at(&field, START_AT)
    }

    /// Drops every byte (their pages too), the stream going on at `total`.
    pub fn reset(&self, key: &str, total: u64) -> io::Result<()> {
        self.file.set_len(HEADER)?;
        self.write_header(
            key.as_bytes(),
            Bounds {
                start: total,
                total,
            },
        )
    }

    /// Removes the kept file's name; the ring goes on unnamed until dropped.
    pub fn unlink(&mut self) -> io::Result<()> {
        match self.kept.take() {
            Some(path) => std::fs::remove_file(path),
            None => Ok(()),
        }
    }

    /// Bytes of the file in memory or on disk (its allocated blocks).
    #[cfg(test)]
    pub fn resident_bytes(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        self.file.metadata().map_or(0, |m| m.blocks() * 512)
    }

    /// Copies what `old` (a ring of `old_cap`) holds, the newest `cap`
    /// bytes of it, into this empty ring.
    fn take_from(&self, old: &File, old_cap: u64, bounds: Bounds) -> io::Result<Bounds> {
        let source = RingFile {
            file: old.try_clone()?,
            cap: old_cap,
            kept: None,
        };
        self.copy_newest(&source, bounds)
    }

    /// Copies the newest bytes of `bounds` in `source` that fit here, a MiB
    /// at a time, and records them as held.
    fn copy_newest(&self, source: &RingFile, bounds: Bounds) -> io::Result<Bounds> {
        let held = (bounds.total - bounds.start).min(self.cap);
        let from = bounds.total - held;
        let mut buf = Vec::new();
        let mut pos = from;
        while pos < bounds.total {
            let n = (bounds.total - pos).min(1 << 20) as usize;
            buf.clear();
            source.read_at(pos, n, &mut buf)?;
            self.write_at(pos, &buf)?;
            pos += n as u64;
        }
        let kept = Bounds {
            start: from,
            total: bounds.total,
        };
        self.save_bounds(kept)?;
        Ok(kept)
    }

    /// The kept file was written at another size: keeps its newest bytes.
    fn refit(&mut self, old_cap: u64, bounds: Bounds, key: &str) -> io::Result<Bounds> {
        let fresh = RingFile::anonymous(old_cap)?;
        let copied = fresh.take_from(&self.file, old_cap, bounds)?;
        self.reset(key, copied.start)?;
        self.copy_newest(&fresh, copied)
    }

    fn write_header(&self, key: &[u8], bounds: Bounds) -> io::Result<()> {
        let key = &key[..key.len().min(KEY_MAX)];
        let mut header = Vec::with_capacity(KEY_AT as usize + key.len());
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&self.cap.to_le_bytes());
        header.extend_from_slice(&bounds.start.to_le_bytes());
        header.extend_from_slice(&bounds.total.to_le_bytes());
        header.extend_from_slice(&(key.len() as u16).to_le_bytes());
        header.extend_from_slice(key);
        self.file.write_all_at(&header, 0)
    }

    /// Where stream offset `pos` lives in the file.
    fn place(&self, pos: u64) -> u64 {
        HEADER + pos % self.cap.max(1)
    }

    /// How `n` bytes from `pos` split at the circle's end: before it, after.
    fn split(&self, pos: u64, n: usize) -> (usize, usize) {
        let room = self.cap.max(1) - pos % self.cap.max(1);
        let first = (n as u64).min(room) as usize;
        (first, n - first)
    }

    /// Fills `buf` from `at`; a hole or the end of a sparse file reads as
    /// zeros, as a ring never written there would hold nothing else.
    fn read_fill(&self, buf: &mut [u8], mut at: u64) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], at) {
                Ok(0) => {
                    buf[done..].fill(0);
                    return Ok(());
                }
                Ok(n) => {
                    done += n;
                    at += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The header's cap and bounds, if `file` is a sound ring of `key`.
fn read_header(file: &File, key: &str) -> Option<(u64, Bounds)> {
    let mut header = vec![0u8; KEY_AT as usize + KEY_MAX];
    let n = file.read_at(&mut header, 0).ok()?;
    header.truncate(n);
    let field = |at: u64| -> Option<u64> {
        let at = at as usize;
        Some(u64::from_le_bytes(header.get(at..at + 8)?.try_into().ok()?))
    };
    if header.get(..8)? != MAGIC {
        return None;
    }
    let cap = field(CAP_AT)?;
    let bounds = Bounds {
        start: field(START_AT)?,
        total: field(START_AT + 8)?,
    };
    let key_len = u16::from_le_bytes(
        header
            .get(KEY_LEN_AT as usize..KEY_AT as usize)?
            .try_into()
            .ok()?,
    ) as usize;
    let named = header.get(KEY_AT as usize..KEY_AT as usize + key_len)?;
    let sound = named == key.as_bytes()
        && bounds.start <= bounds.total
        && bounds.total - bounds.start <= cap
        && cap > 0;
    sound.then_some((cap, bounds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(from: u64, n: usize) -> Vec<u8> {
        (from..from + n as u64).map(|i| (i % 251) as u8).collect()
    }

    fn read(ring: &RingFile, pos: u64, n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        ring.read_at(pos, n, &mut out).unwrap();
        out
    }

    #[test]
    fn bytes_wrap_around_the_circle() {
        let ring = RingFile::anonymous(10).unwrap();
        ring.write_at(0, &bytes(0, 10)).unwrap();
        ring.write_at(10, &bytes(10, 7)).unwrap();
        assert_eq!(read(&ring, 7, 10), bytes(7, 10));
    }

    #[test]
    fn a_kept_ring_is_found_again_with_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shell:a.ring");
        {
            let ring = RingFile::create(&path, "shell:a", 64, 0).unwrap().unwrap();
            ring.write_at(0, b"hello").unwrap();
            ring.save_bounds(Bounds { start: 0, total: 5 }).unwrap();
        }
        match RingFile::open(&path, "shell:a", 64).unwrap() {
            Opened::Kept(ring, bounds) => {
                assert_eq!(bounds, Bounds { start: 0, total: 5 });
                assert_eq!(read(&ring, 0, 5), b"hello");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_second_opener_gets_a_copy_and_the_first_keeps_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shell:a.ring");
        let owner = RingFile::create(&path, "shell:a", 8, 0).unwrap().unwrap();
        owner.write_at(0, b"abcdefghij").unwrap();
        owner
            .save_bounds(Bounds {
                start: 2,
                total: 10,
            })
            .unwrap();
        assert!(RingFile::create(&path, "shell:a", 8, 0).unwrap().is_none());
        match RingFile::open(&path, "shell:a", 8).unwrap() {
            Opened::Copy(copy, bounds) => {
                assert_eq!(
                    bounds,
                    Bounds {
                        start: 2,
                        total: 10
                    }
                );
                assert_eq!(read(&copy, 2, 8), b"cdefghij");
                copy.write_at(10, b"XY").unwrap();
                assert_eq!(read(&owner, 4, 6), b"efghij", "the copy is its own");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_ring_kept_at_another_size_keeps_its_newest_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shell:a.ring");
        {
            let ring = RingFile::create(&path, "shell:a", 16, 0).unwrap().unwrap();
            ring.write_at(0, &bytes(0, 16)).unwrap();
            ring.write_at(16, &bytes(16, 4)).unwrap();
            ring.save_bounds(Bounds {
                start: 4,
                total: 20,
            })
            .unwrap();
        }
        match RingFile::open(&path, "shell:a", 6).unwrap() {
            Opened::Kept(ring, bounds) => {
                assert_eq!(
                    bounds,
                    Bounds {
                        start: 14,
                        total: 20
                    }
                );
                assert_eq!(read(&ring, 14, 6), bytes(14, 6));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_damaged_or_foreign_header_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shell:a.ring");
        for junk in [b"not a ring at all".to_vec(), Vec::new(), {
            // Claims more than its cap.
            let mut h = MAGIC.to_vec();
            h.extend_from_slice(&8u64.to_le_bytes());
            h.extend_from_slice(&0u64.to_le_bytes());
            h.extend_from_slice(&100u64.to_le_bytes());
            h.extend_from_slice(&7u16.to_le_bytes());
            h.extend_from_slice(b"shell:a");
            h
        }] {
            std::fs::write(&path, &junk).unwrap();
            match RingFile::open(&path, "shell:a", 8).unwrap() {
                Opened::Kept(_, bounds) => assert_eq!(bounds, Bounds::default()),
                other => panic!("{other:?}"),
            }
        }
        // Another key's ring.
        drop(RingFile::create(&path, "shell:b", 8, 0).unwrap());
        match RingFile::open(&path, "shell:a", 8).unwrap() {
            Opened::Kept(_, bounds) => assert_eq!(bounds, Bounds::default()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reset_gives_the_pages_back() {
        let ring = RingFile::anonymous(1 << 20).unwrap();
        ring.write_at(0, &vec![7u8; 1 << 20]).unwrap();
        assert!(ring.resident_bytes() >= 1 << 20);
        ring.reset("shell:a", 1 << 20).unwrap();
        assert!(ring.resident_bytes() <= HEADER, "{}", ring.resident_bytes());
    }
}
