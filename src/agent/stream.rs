//! The root `events` file: every session's changes as JSON lines with the
//! session's key, so one `tail -F` hears when any session needs its user.
//! The file is only ever appended to; past its cap it is moved aside to
//! `events.jsonl.1` (the one before is dropped) and a new one begun, so a
//! follower by name never sees a line twice. Kept in the state directory,
//! across restarts.

use crate::sync::lock;
use serde_json::{json, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The size past which the file is moved aside, unless configured.
pub const ROTATE_AT: u64 = crate::config::DEFAULT_EVENTS_BYTES;

/// The low bits of the file's inode on disk that tell one file it was from
/// the next (the mount numbers each file it was by them).
pub const FILE_ID_BITS: u64 = (1 << 40) - 1;

/// The writer of one state directory's root events.
#[derive(Debug)]
pub struct EventStream {
    path: PathBuf,
    cap: u64,
    file: Mutex<Option<File>>,
}

impl EventStream {
    /// The stream of `state_dir`, opened at the first line.
    pub fn new(state_dir: &Path) -> EventStream {
        Self::with_cap(state_dir, ROTATE_AT)
    }

    pub fn with_cap(state_dir: &Path, cap: u64) -> EventStream {
        EventStream {
            path: state_dir.join("events.jsonl"),
            cap,
            file: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event of session `key`: `what` happened (`state`,
    /// `made`, `archived`, `unarchived`), with `fields` merged in. A line
    /// that cannot be written is dropped with a line in the log: the
    /// stream never holds up the change it reports.
    pub fn append(&self, ts_ms: u64, key: &str, what: &str, fields: Value) {
        let mut line = json!({"ts_ms": ts_ms, "key": key, "event": what});
        if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields) {
            line.extend(fields);
        }
        let mut text = line.to_string();
        text.push('\n');
        let mut file = lock(&self.file);
        if let Err(e) = self.write(&mut file, text.as_bytes()) {
            log::warn!("cannot write {}: {e}", self.path.display());
            *file = None;
        }
    }

    fn write(&self, file: &mut Option<File>, bytes: &[u8]) -> std::io::Result<()> {
        // Another daemon on the same state moved the file aside: append to
        // the new one.
        let moved = file.as_ref().is_some_and(|f| {
            use std::os::unix::fs::MetadataExt;
            let held = f.metadata().map(|m| m.ino()).ok();
            std::fs::metadata(&self.path).map(|m| m.ino()).ok() != held
        });
        if moved {
            *file = None;
        }
        let full = match file.as_ref() {
            Some(f) => f.metadata()?.len() + bytes.len() as u64 > self.cap,
            None => {
                std::fs::metadata(&self.path).is_ok_and(|m| m.len() + bytes.len() as u64 > self.cap)
            }
        };
        if full {
            std::fs::rename(&self.path, rotated_path(&self.path))?;
            *file = None;
        }
        if file.is_none() {
            *file = Some(
                OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o600)
                    .open(&self.path)?,
            );
        }
        match file.as_mut() {
            Some(f) => f.write_all(bytes),
            None => Ok(()),
        }
    }
}

/// Where a rotation moves the file: `events.jsonl.1`.
pub fn rotated_path(path: &Path) -> std::path::PathBuf {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".1");
    aside.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn lines_carry_the_key_and_rotation_moves_the_file_aside_whole() {
        let dir = tempfile::tempdir().unwrap();
        let stream = EventStream::with_cap(dir.path(), 400);
        for i in 0..20u64 {
            stream.append(i, "shell:a", "state", json!({"state": "idle", "n": i}));
        }
        let now = lines(stream.path());
        let mut aside = stream.path().as_os_str().to_owned();
        aside.push(".1");
        let before = lines(Path::new(&aside));
        assert!(!before.is_empty() && !now.is_empty());
        assert!(std::fs::metadata(stream.path()).unwrap().len() <= 400);
        // Every line once, in order, across the two files (older ones dropped).
        let seen: Vec<u64> = before
            .iter()
            .chain(&now)
            .map(|l| l["n"].as_u64().unwrap())
            .collect();
        assert!(seen.windows(2).all(|w| w[1] == w[0] + 1), "{seen:?}");
        assert_eq!(*seen.last().unwrap(), 19);
        assert_eq!(now[0]["key"], "shell:a");
        assert_eq!(now[0]["event"], "state");
    }
}
