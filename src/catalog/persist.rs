//! The index kept in the state directory, so a restart with many
//! conversations re-reads only the files that changed meanwhile.

use super::summary::{Stamp, Summary};
use super::walk::Root;
use super::{Indexed, StoreFile};
use crate::key::SessionKey;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bumped when the saved form changes; another version is ignored.
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Saved {
    version: u32,
    files: Vec<SavedFile>,
}

#[derive(Serialize, Deserialize)]
struct SavedFile {
    key: String,
    path: PathBuf,
    at: Stamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    let saved: Saved = match serde_json::from_slice(&bytes) {
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
                Indexed {
                    file: StoreFile {
                        kind: root.kind,
                        path: f.path,
                        mtime_ms: f.at.mtime_ms,
                    },
                    stamp: f.at,
                    summary: f.summary.map(Arc::new),
                    seq: 0,
                },
            ))
        })
        .collect()
}

/// Writes the index atomically (temporary file, then rename).
pub fn save(path: &Path, files: &HashMap<SessionKey, Arc<Indexed>>) -> std::io::Result<()> {
    let saved = Saved {
        version: VERSION,
        files: files
            .iter()
            // JSON holds only UTF-8 paths; another one is read again next time.
            .filter(|(_, e)| e.file.path.to_str().is_some())
            .map(|(key, e)| SavedFile {
                key: key.to_string(),
                path: e.file.path.clone(),
                at: e.stamp,
                summary: e.summary.as_deref().cloned(),
            })
            .collect(),
    };
    let body = serde_json::to_vec(&saved).map_err(std::io::Error::other)?;
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&body))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
