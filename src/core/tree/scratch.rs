//! Editors' scratch files in session directories (swap files, `4913`,
//! `sed -i` temporaries, backups, emacs's lock links), held in memory.
//!
//! Every byte is charged against two caps checked before anything grows:
//! one file holds at most [`FILE_MAX`] bytes (EFBIG past it), and all the
//! daemon's scratch files together at most [`TOTAL_MAX`] (ENOSPC past it,
//! as a full disk would say). Each file also costs its name, its link
//! target and [`FILE_OVERHEAD`], so a flood of empty files is bounded too.

use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::sync::lock;
use std::collections::HashMap;
use std::sync::Mutex;

/// Largest one scratch file may be (a `meta.json` is at most 64 KiB; this
/// leaves room for an editor's swap file with its undo history).
pub const FILE_MAX: u64 = 16 << 20;
/// Largest all scratch files of this daemon may be together.
pub const TOTAL_MAX: u64 = 64 << 20;
/// What one file costs besides its bytes: the table entry and its key.
pub const FILE_OVERHEAD: u64 = 256;

/// One scratch file: bytes, or a symbolic link's target.
#[derive(Debug, Clone, Default)]
pub struct ScratchFile {
    pub data: Vec<u8>,
    pub symlink: Option<String>,
}

/// What `stat` needs of a scratch file, without copying its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScratchInfo {
    pub len: u64,
    pub symlink: Option<String>,
}

type Name = (SessionKey, String);

#[derive(Debug, Default)]
struct Inner {
    files: HashMap<Name, ScratchFile>,
    /// The sum of [`charge`] over `files`.
    charged: u64,
}

/// Every scratch file of the daemon, with its caps.
#[derive(Debug)]
pub struct ScratchFiles {
    inner: Mutex<Inner>,
    file_max: u64,
    total_max: u64,
}

impl Default for ScratchFiles {
    fn default() -> Self {
        Self::with_limits(FILE_MAX, TOTAL_MAX)
    }
}

/// What a file of `len` bytes costs against the total.
fn charge_of(name: &str, symlink: Option<&str>, len: u64) -> u64 {
    FILE_OVERHEAD + name.len() as u64 + symlink.map_or(0, |t| t.len() as u64) + len
}

fn charge(name: &Name, f: &ScratchFile) -> u64 {
    charge_of(&name.1, f.symlink.as_deref(), f.data.len() as u64)
}

fn missing(key: &SessionKey, name: &str) -> Error {
    Error::not_found(format!("no {name} in {key}"))
}

impl ScratchFiles {
    pub fn with_limits(file_max: u64, total_max: u64) -> Self {
        ScratchFiles {
            inner: Mutex::new(Inner::default()),
            file_max,
            total_max,
        }
    }

    /// Refuses a file of `len` bytes past the per-file cap.
    fn check_len(&self, key: &SessionKey, name: &str, len: u64) -> Result<()> {
        if len > self.file_max {
            return Err(Error::too_big(
                &format!("scratch file {key}/{name}"),
                len,
                self.file_max,
            ));
        }
        Ok(())
    }

    /// Refuses growing the total from `old` to `new` charged bytes past its cap.
    fn check_total(
        &self,
        inner: &Inner,
        key: &SessionKey,
        name: &str,
        old: u64,
        new: u64,
    ) -> Result<()> {
        let total = inner.charged - old + new;
        if new > old && total > self.total_max {
            return Err(Error::new(
                libc::ENOSPC,
                format!(
                    "{key}/{name}: scratch files would hold {total} bytes, over the limit of {} bytes for all of them",
                    self.total_max
                ),
            ));
        }
        Ok(())
    }

    pub fn info(&self, key: &SessionKey, name: &str) -> Option<ScratchInfo> {
        lock(&self.inner)
            .files
            .get(&(key.clone(), name.to_string()))
            .map(|f| ScratchInfo {
                len: f.data.len() as u64,
                symlink: f.symlink.clone(),
            })
    }

    /// The whole content (for a commit by rename).
    pub fn data(&self, key: &SessionKey, name: &str) -> Option<Vec<u8>> {
        lock(&self.inner)
            .files
            .get(&(key.clone(), name.to_string()))
            .map(|f| f.data.clone())
    }

    /// Up to `size` bytes from `offset`; empty past the end.
    pub fn read(&self, key: &SessionKey, name: &str, offset: u64, size: usize) -> Vec<u8> {
        let inner = lock(&self.inner);
        let Some(f) = inner.files.get(&(key.clone(), name.to_string())) else {
            return Vec::new();
        };
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(f.data.len());
        let end = start.saturating_add(size).min(f.data.len());
        f.data[start..end].to_vec()
    }

    /// Names in one session directory, and whether each is a symlink.
    pub fn names(&self, key: &SessionKey) -> Vec<(String, bool)> {
        lock(&self.inner)
            .files
            .iter()
            .filter(|((k, _), _)| k == key)
            .map(|((_, n), f)| (n.clone(), f.symlink.is_some()))
            .collect()
    }

    /// Adds `file` under `name`, replacing what was there.
    pub fn put(&self, key: &SessionKey, name: &str, file: ScratchFile) -> Result<()> {
        self.check_len(key, name, file.data.len() as u64)?;
        let id = (key.clone(), name.to_string());
        let mut inner = lock(&self.inner);
        let old = inner.files.get(&id).map_or(0, |f| charge(&id, f));
        let new = charge(&id, &file);
        self.check_total(&inner, key, name, old, new)?;
        inner.charged = inner.charged - old + new;
        inner.files.insert(id, file);
        Ok(())
    }

    /// Places `data` at `offset`, as a write to a regular file would; the
    /// caps are checked before any byte is allocated.
    pub fn write(&self, key: &SessionKey, name: &str, offset: u64, data: &[u8]) -> Result<()> {
        let end = offset.saturating_add(data.len() as u64);
        self.check_len(key, name, end)?;
        let id = (key.clone(), name.to_string());
        let mut inner = lock(&self.inner);
        let f = inner.files.get(&id).ok_or_else(|| missing(key, name))?;
        let old = charge(&id, f);
        let len = (f.data.len() as u64).max(end);
        let new = charge_of(name, f.symlink.as_deref(), len);
        self.check_total(&inner, key, name, old, new)?;
        inner.charged = inner.charged - old + new;
        let file_max = self.file_max as usize;
        let f = inner.files.get_mut(&id).expect("looked up above");
        // Both fit in memory: `end` is within the per-file cap.
        let (offset, end) = (offset as usize, end as usize);
        if f.data.capacity() < end {
            // Amortised growth, but never past the cap.
            let want = end.max(f.data.capacity().saturating_mul(2).min(file_max));
            f.data.reserve_exact(want - f.data.len());
        }
        if f.data.len() < end {
            f.data.resize(end, 0);
        }
        f.data[offset..end].copy_from_slice(data);
        Ok(())
    }

    /// `truncate`: cuts or zero-extends to `size`, within the caps.
    pub fn resize(&self, key: &SessionKey, name: &str, size: u64) -> Result<()> {
        self.check_len(key, name, size)?;
        let id = (key.clone(), name.to_string());
        let mut inner = lock(&self.inner);
        let f = inner.files.get(&id).ok_or_else(|| missing(key, name))?;
        let old = charge(&id, f);
        let new = charge_of(name, f.symlink.as_deref(), size);
        self.check_total(&inner, key, name, old, new)?;
        inner.charged = inner.charged - old + new;
        let f = inner.files.get_mut(&id).expect("looked up above");
        f.data.resize(size as usize, 0);
        f.data.shrink_to(size as usize);
        Ok(())
    }

    pub fn remove(&self, key: &SessionKey, name: &str) -> Option<ScratchFile> {
        let id = (key.clone(), name.to_string());
        let mut inner = lock(&self.inner);
        let f = inner.files.remove(&id)?;
        inner.charged -= charge(&id, &f);
        Some(f)
    }

    /// Moves `from` to `to` in one session directory, replacing `to`.
    pub fn rename(&self, key: &SessionKey, from: &str, to: &str) -> Result<()> {
        let (src, dst) = (
            (key.clone(), from.to_string()),
            (key.clone(), to.to_string()),
        );
        let mut inner = lock(&self.inner);
        if from == to {
            return match inner.files.contains_key(&src) {
                true => Ok(()),
                false => Err(missing(key, from)),
            };
        }
        let f = inner.files.get(&src).ok_or_else(|| missing(key, from))?;
        let old = charge(&src, f) + inner.files.get(&dst).map_or(0, |g| charge(&dst, g));
        let new = charge(&dst, f);
        self.check_total(&inner, key, to, old, new)?;
        let f = inner.files.remove(&src).expect("looked up above");
        inner.files.insert(dst, f);
        inner.charged = inner.charged - old + new;
        Ok(())
    }

    /// Bytes charged against [`TOTAL_MAX`] now.
    pub fn charged(&self) -> u64 {
        lock(&self.inner).charged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SessionKey {
        SessionKey::parse("shell:a").unwrap()
    }

    #[test]
    fn offsets_past_the_file_cap_are_efbig_and_change_nothing() {
        let s = ScratchFiles::with_limits(1000, 10_000);
        s.put(&key(), "x", ScratchFile::default()).unwrap();
        s.write(&key(), "x", 0, b"abc").unwrap();
        for offset in [1 << 33, 1 << 40, 1 << 62, u64::MAX] {
            assert_eq!(
                s.write(&key(), "x", offset, b"z").unwrap_err().errno,
                libc::EFBIG
            );
            assert_eq!(
                s.resize(&key(), "x", offset).unwrap_err().errno,
                libc::EFBIG
            );
        }
        assert_eq!(
            s.write(&key(), "x", 998, b"zzz").unwrap_err().errno,
            libc::EFBIG
        );
        s.write(&key(), "x", 997, b"zzz").unwrap();
        assert_eq!(s.info(&key(), "x").unwrap().len, 1000);
        s.resize(&key(), "x", 3).unwrap();
        assert_eq!(s.data(&key(), "x").unwrap(), b"abc");
    }

    #[test]
    fn the_total_is_enospc_and_counts_every_file() {
        let s = ScratchFiles::with_limits(1000, 3 * 1000);
        for n in ["a", "b"] {
            s.put(&key(), n, ScratchFile::default()).unwrap();
            s.write(&key(), n, 0, &[1; 1000]).unwrap();
        }
        s.put(&key(), "c", ScratchFile::default()).unwrap();
        let before = s.charged();
        let err = s.write(&key(), "c", 0, &[1; 1000]).unwrap_err();
        assert_eq!(err.errno, libc::ENOSPC, "{}", err.message);
        assert_eq!(s.charged(), before);
        assert_eq!(s.info(&key(), "c").unwrap().len, 0);
        // Freeing one makes room.
        s.remove(&key(), "a").unwrap();
        s.write(&key(), "c", 0, &[1; 1000]).unwrap();
        // Shrinking is always allowed.
        s.resize(&key(), "c", 0).unwrap();
        s.rename(&key(), "b", "c").unwrap();
        assert!(s.info(&key(), "b").is_none());
        assert_eq!(s.charged(), charge_of("c", None, 1000));
    }

    #[test]
    fn empty_files_are_charged_too() {
        let s = ScratchFiles::with_limits(1000, 100 * FILE_OVERHEAD);
        let mut made = 0;
        while s
            .put(&key(), &format!("f{made}"), ScratchFile::default())
            .is_ok()
        {
            made += 1;
        }
        assert!(made > 0 && made < 100, "{made}");
    }

    #[test]
    fn reads_past_the_end_are_empty() {
        let s = ScratchFiles::default();
        s.put(
            &key(),
            "x",
            ScratchFile {
                data: b"hello".to_vec(),
                symlink: None,
            },
        )
        .unwrap();
        assert_eq!(s.read(&key(), "x", 1, 3), b"ell");
        assert!(s.read(&key(), "x", u64::MAX, 4096).is_empty());
    }
}
