//! Decoded copies of compressed rollouts (`.jsonl.zst`): the index and the
//! pages read plain files, so a compressed store is decoded once into the
//! runtime directory (often a tmpfs, that is memory) and decoded again only
//! when the rollout is newer than its copy. A copy is at most
//! [`MAX_DECODED_BYTES`]: a rollout that decodes to more is refused, and
//! the refusal remembered so it is neither decoded nor reported again until
//! the rollout changes.

use super::StoreFile;
use crate::atomic::{self, Durability, Pending};
use crate::clock::path_mtime_ms;
use crate::error::Error;
use crate::sync::lock;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Largest a decoded copy may be (as large as a hosted transcript may grow).
pub const MAX_DECODED_BYTES: u64 = 256 << 20;

/// Refusals remembered; past this many they are forgotten all at once.
const REFUSED_MAX: usize = 4096;

/// Why a rollout has no decoded copy.
#[derive(Debug)]
pub struct NotDecoded {
    pub error: Error,
    /// The first refusal of this version of the rollout: the one to report.
    pub first: bool,
}

/// The decoded copies under one directory.
#[derive(Debug)]
pub struct DecodedCopies {
    dir: PathBuf,
    max_bytes: u64,
    /// Rollouts refused, with the modification time they were refused at.
    refused: Mutex<HashMap<PathBuf, u64>>,
}

impl DecodedCopies {
    pub fn new(dir: PathBuf) -> Self {
        Self::with_cap(dir, MAX_DECODED_BYTES)
    }

    /// With another cap on a copy, in bytes (tests).
    pub fn with_cap(dir: PathBuf, max_bytes: u64) -> Self {
        DecodedCopies {
            dir,
            max_bytes,
            refused: Mutex::new(HashMap::new()),
        }
    }

    /// A plain file with the store's lines: the store itself, or for a
    /// compressed rollout its decoded copy, made again when the rollout is
    /// newer than the copy.
    pub fn readable(&self, file: &StoreFile) -> Result<PathBuf, NotDecoded> {
        if !crate::transcript::is_compressed(&file.path) {
            return Ok(file.path.clone());
        }
        let name = file.path.file_name().unwrap_or_default().to_string_lossy();
        let copy = self.dir.join(name.trim_end_matches(".zst"));
        if path_mtime_ms(&copy).unwrap_or(0) >= file.mtime_ms && copy.exists() {
            return Ok(copy);
        }
        let refused = |error: Error, first: bool| NotDecoded { error, first };
        if self.refused_before(file) {
            return Err(refused(self.too_big(file), false));
        }
        let io = |e: std::io::Error| {
            let what = format!("cannot decode {}", file.path.display());
            refused(Error::io(&what, &e), true)
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        // A temporary file of its own: two request threads may decode the
        // same rollout at once. Not synced: a copy is a cache in the
        // runtime directory (usually a tmpfs), decoded again when missing.
        let mut pending =
            Pending::new(&copy, atomic::CREATE_MODE, Durability::Unsynced).map_err(io)?;
        match self.decode(&file.path, pending.file()) {
            Ok(n) if n <= self.max_bytes => {
                pending.commit().map_err(io)?;
                Ok(copy)
            }
            // Dropped, the partial copy is removed.
            Ok(_) => {
                drop(pending);
                self.remember(file);
                Err(refused(self.too_big(file), true))
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Decodes `path` into `out`, stopping one byte past the cap; the bytes written.
    fn decode(&self, path: &Path, out: &mut std::fs::File) -> std::io::Result<u64> {
        let decoder = crate::transcript::open_store(path, 0)?;
        std::io::copy(&mut decoder.take(self.max_bytes + 1), out)
    }

    fn too_big(&self, file: &StoreFile) -> Error {
        Error::new(
            libc::EFBIG,
            format!(
                "{} decodes to more than {} bytes, the most a decoded copy may hold: its transcript is not shown",
                file.path.display(),
                self.max_bytes
            ),
        )
    }

    fn refused_before(&self, file: &StoreFile) -> bool {
        let refused = lock(&self.refused);
        refused.get(&file.path) == Some(&file.mtime_ms)
    }

    fn remember(&self, file: &StoreFile) {
        let mut refused = lock(&self.refused);
        if refused.len() >= REFUSED_MAX {
            refused.clear();
        }
        refused.insert(file.path.clone(), file.mtime_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::StoreKind;
    use std::io::Write;

    /// A rollout of `frames` zstd frames of `frame` spaces each.
    fn rollout(dir: &Path, frame: usize, frames: usize) -> StoreFile {
        let path = dir.join("rollout-x.jsonl.zst");
        let one = zstd::encode_all(&vec![b' '; frame][..], 1).unwrap();
        let mut f = std::fs::File::create(&path).unwrap();
        for _ in 0..frames {
            f.write_all(&one).unwrap();
        }
        StoreFile {
            kind: StoreKind::Codex,
            mtime_ms: path_mtime_ms(&path).unwrap_or(0),
            path,
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    #[test]
    fn a_copy_past_the_cap_is_refused_once_and_leaves_nothing() {
        let store = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let decoded = run.path().join("decoded");
        let copies = DecodedCopies::with_cap(decoded.clone(), 10_000);
        let file = rollout(store.path(), 4096, 3);
        let refusal = copies.readable(&file).unwrap_err();
        assert_eq!(refusal.error.errno, libc::EFBIG);
        assert!(refusal.first);
        assert!(
            refusal.error.message.contains("10000 bytes"),
            "{}",
            refusal.error.message
        );
        assert!(names(&decoded).is_empty(), "{:?}", names(&decoded));
        // Not decoded again, nor reported again, until the rollout changes.
        let again = copies.readable(&file).unwrap_err();
        assert_eq!(again.error.errno, libc::EFBIG);
        assert!(!again.first);
        // Within the cap: a copy, and it is reused.
        let file = rollout(store.path(), 4096, 2);
        let file = StoreFile {
            mtime_ms: file.mtime_ms + 1,
            ..file
        };
        let copy = copies.readable(&file).unwrap();
        assert_eq!(std::fs::metadata(&copy).unwrap().len(), 8192);
        assert_eq!(names(&decoded), ["rollout-x.jsonl"]);
    }

    #[test]
    fn threads_decoding_one_rollout_do_not_share_a_temporary_file() {
        let store = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let copies = DecodedCopies::new(run.path().join("decoded"));
        let file = rollout(store.path(), 1 << 20, 8);
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..4).map(|_| s.spawn(|| copies.readable(&file))).collect();
            for w in workers {
                let copy = w.join().unwrap().unwrap();
                // Every copy renamed into place is whole.
                assert_eq!(std::fs::metadata(&copy).unwrap().len(), 8 << 20);
            }
        });
        assert_eq!(names(&run.path().join("decoded")), ["rollout-x.jsonl"]);
    }
}
