//! The index kept in the state directory, so a restart with many
//! conversations re-reads only the files that changed meanwhile.

use super::summary::{Stamp, Summary};
use super::walk::Root;
use super::{Indexed, StoreFile};
use crate::atomic::{self, Durability};
use crate::key::SessionKey;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bumped when the saved form changes; another version is ignored.
const VERSION: u32 = 1;

#[derive(Deserialize)]
struct Saved {
    version: u32,
    files: Vec<SavedFile>,
}

#[derive(Deserialize)]
struct SavedFile {
    key: String,
    path: PathBuf,
    at: Stamp,
    #[serde(default)]
    summary: Option<Summary>,
}

/// What was saved, for the roots configured now; nothing if the file is
/// missing or unreadable (it is only a cache).
pub fn load(path: &Path, roots: &[Root]) -> Vec<(SessionKey, Indexed)> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                log::warn!("cannot read {}: {e}", path.display());
            }
            return Vec::new();
        }
    };
    let parsed = serde_json::from_slice::<Saved>(&bytes);
    drop(bytes);
    let saved = match parsed {
        Ok(s) => s,
        Err(e) => {
            log::warn!(
                "{} is damaged ({e}); the stores are read again",
                path.display()
            );
            return Vec::new();
        }
    };
    if saved.version != VERSION {
        return Vec::new();
    }
    saved
        .files
        .into_iter()
        .filter_map(|f| {
            let key = SessionKey::parse(&f.key).ok()?;
            let root = roots
                .iter()
                .find(|r| r.engine == key.engine() && f.path.starts_with(&r.path))?;
            Some((
                key,
                Indexed::new(
                    StoreFile {
                        kind: root.kind,
                        path: f.path,
                        mtime_ms: f.at.mtime_ms,
                    },
                    f.at,
                    f.summary.map(Arc::new),
                    0,
                ),
            ))
        })
        .collect()
}

/// Writes the index atomically (temporary file, then rename), streamed
/// from the index itself: with 100,000 conversations a copy of every
/// summary and the whole JSON body in memory would double the daemon's size.
pub fn save(path: &Path, files: &HashMap<SessionKey, Arc<Indexed>>) -> std::io::Result<()> {
    let saving = Saving {
        version: VERSION,
        files: SavingFiles(files),
    };
    // Not synced: it is only a cache, and one lost in a crash costs a
    // rescan of the stores.
    atomic::write_with(path, atomic::CREATE_MODE, Durability::Unsynced, |f| {
        let mut out = std::io::BufWriter::with_capacity(64 << 10, f);
        serde_json::to_writer(&mut out, &saving).map_err(std::io::Error::other)?;
        out.flush()
    })
}

/// The saved form of `Saved`, borrowing from the index.
#[derive(Serialize)]
struct Saving<'a> {
    version: u32,
    files: SavingFiles<'a>,
}

struct SavingFiles<'a>(&'a HashMap<SessionKey, Arc<Indexed>>);

#[derive(Serialize)]
struct SavingFile<'a> {
    key: String,
    path: &'a Path,
    at: Stamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a Summary>,
}

impl Serialize for SavingFiles<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(
            self.0
                .iter()
                // JSON holds only UTF-8 paths; another one is read again next time.
                .filter(|(_, e)| e.file.path.to_str().is_some())
                .map(|(key, e)| SavingFile {
                    key: key.to_string(),
                    path: &e.file.path,
                    at: e.stamp,
                    summary: e.summary.as_deref(),
                }),
        )
    }
}
