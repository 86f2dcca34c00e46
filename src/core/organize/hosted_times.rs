//! A hosted session's times, from its transcript: its last activity is the
//! file's mtime; its creation stays put as entries are appended: the first
//! entry's `ts_ms` (the daemon stamps every entry it appends), else, for a
//! transcript written by another program without one, the file's birth
//! time, else (a filesystem that keeps none) the mtime this daemon first
//! saw. The first entry is read once per transcript file: again only for a
//! new file or one cut shorter.

use crate::core::records::slots::MAX_ENTRY_BYTES;
use crate::core::Core;
use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

/// What one look at a hosted transcript found, in ms.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::core) struct HostedTimes {
    pub mtime_ms: Option<u64>,
    pub created_ms: Option<u64>,
}

/// The creation found for each transcript, by hosted session id.
#[derive(Debug, Default)]
pub(in crate::core) struct HostedCreated {
    seen: Mutex<HashMap<String, Seen>>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    ino: u64,
    /// The file's length when last looked at: shorter means rewritten.
    len: u64,
    created_ms: u64,
}

fn ms(t: std::io::Result<SystemTime>) -> Option<u64> {
    t.ok().and_then(crate::clock::epoch_ms)
}

/// The first entry's `ts_ms`: `Some(None)` when the first line is whole but
/// carries none, `None` while there is no whole first line.
fn first_entry_ts(path: &Path) -> Option<Option<u64>> {
    let file = std::fs::File::open(path).ok()?;
    let mut line = Vec::new();
    // An entry is at most MAX_ENTRY_BYTES with its newline; read as far as
    // the first newline only.
    std::io::BufReader::new(file.take(MAX_ENTRY_BYTES))
        .read_until(b'\n', &mut line)
        .ok()?;
    let line = line.strip_suffix(b"\n")?;
    let entry: serde_json::Value = serde_json::from_slice(line).ok()?;
    Some(entry.get("ts_ms").and_then(serde_json::Value::as_u64))
}

impl Core {
    /// The times of hosted session `id`'s transcript (none without one).
    pub(in crate::core) fn hosted_times(&self, id: &str) -> HostedTimes {
        let path = self.records.slots.transcript_path(id);
        let Ok(meta) = std::fs::metadata(&path) else {
            return HostedTimes::default();
        };
        let mtime_ms = ms(meta.modified());
        let (ino, len) = (meta.ino(), meta.len());
        let known = {
            let mut seen = lock(&self.organize.listings.hosted_created.seen);
            seen.get_mut(id)
                .filter(|s| s.ino == ino && s.len <= len)
                .map(|s| {
                    s.len = len;
                    s.created_ms
                })
        };
        if let Some(created) = known {
            return HostedTimes {
                mtime_ms,
                created_ms: Some(created),
            };
        }
        let first = first_entry_ts(&path);
        let made = ms(meta.created()).or(mtime_ms);
        let created_ms = first.flatten().or(made);
        if let (Some(_), Some(created)) = (first, created_ms) {
            // The first entry is there: what it says holds.
            lock(&self.organize.listings.hosted_created.seen).insert(
                id.to_string(),
                Seen {
                    ino,
                    len,
                    created_ms: created,
                },
            );
        }
        HostedTimes {
            mtime_ms,
            created_ms,
        }
    }

    /// Forgets the transcripts that are gone.
    pub(in crate::core) fn keep_hosted_times(&self, ids: &HashSet<&str>) {
        lock(&self.organize.listings.hosted_created.seen).retain(|id, _| ids.contains(id.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_entry_dates_a_transcript_until_it_is_replaced() {
        let (core, _dir) = Core::for_tests(&[]);
        let path = core.records.slots.transcript_path("h");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        assert!(core.hosted_times("h").created_ms.is_none());
        // No whole line yet: the file's birth, not kept.
        std::fs::write(&path, b"{\"type\":\"text\",\"ts_ms\":5").unwrap();
        let born = core.hosted_times("h").created_ms.unwrap();
        assert!(born > 5);
        std::fs::write(&path, b"{\"type\":\"text\",\"ts_ms\":5}\n").unwrap();
        assert_eq!(core.hosted_times("h").created_ms, Some(5));
        // Kept: the file is not read again as it grows.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"{\"type\":\"text\",\"ts_ms\":9}\n").unwrap();
        assert_eq!(core.hosted_times("h").created_ms, Some(5));
        // Cut shorter and rewritten: read again.
        std::fs::write(&path, b"{\"type\":\"text\",\"ts_ms\":7}\n").unwrap();
        assert_eq!(core.hosted_times("h").created_ms, Some(7));
        // A first entry without `ts_ms`: the file's birth.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"{\"type\":\"text\"}\n").unwrap();
        let created = core.hosted_times("h").created_ms.unwrap();
        assert!(created > 7);
        core.keep_hosted_times(&HashSet::new());
        assert!(lock(&core.organize.listings.hosted_created.seen).is_empty());
    }
}
