//! The runtime directory as the listing reads it: which sessions have a
//! socket, and the last activity stamped on each run record (its mtime, see
//! [`crate::runtime::record::stamp_activity`]) for sessions that have no
//! runtime in this daemon: stopped before it started, or live under another
//! daemon, or listed with no daemon at all.
//!
//! A listing reads the directory once; a record's mtime is read when it is
//! first seen and again only when it may have moved: its file was replaced
//! (another inode), its socket came or went (a stop stamps the record
//! before the socket goes), or its master is live with no runtime here
//! (another daemon stamps it while it runs). So a listing of many stopped
//! sessions stats nothing again.

use crate::core::{Core, SessionRuntime};
use crate::key::SessionKey;
use crate::runtime::record::{stamped_activity_ms, RunRecord};
use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirEntryExt;
use std::sync::{Arc, Mutex};

const RECORD: &str = ".run.json";
pub(in crate::core) const SOCKET: &str = ".sock";

/// What was last read of one run record.
#[derive(Debug, Clone)]
struct Seen {
    ino: u64,
    socket: bool,
    /// Whose record it is (`None`: unreadable).
    key: Option<SessionKey>,
    /// Its mtime, in ms.
    ms: Option<u64>,
}

/// The records' stamps as last read, by file name.
#[derive(Debug, Default)]
pub(in crate::core) struct RecordStamps {
    seen: Mutex<HashMap<OsString, Seen>>,
}

/// One reading of the runtime directory.
#[derive(Debug, Default)]
pub(in crate::core) struct RuntimeDir {
    /// The sockets, by file name.
    pub sockets: HashSet<OsString>,
    /// The last activity on each session's run record, in ms.
    pub stamps: HashMap<SessionKey, u64>,
}

impl Core {
    /// Reads the runtime directory once; `here` are this daemon's runtimes,
    /// whose records need no fresh look (they know their activity).
    pub(in crate::core) fn read_runtime_dir(
        &self,
        here: &HashMap<SessionKey, Arc<SessionRuntime>>,
    ) -> RuntimeDir {
        let Ok(dir) = std::fs::read_dir(&self.config.runtime_dir) else {
            return RuntimeDir::default();
        };
        let mut sockets = HashSet::new();
        let mut records = Vec::new();
        for entry in dir.flatten() {
            let name = entry.file_name();
            let bytes = name.as_encoded_bytes();
            if bytes.ends_with(SOCKET.as_bytes()) {
                sockets.insert(name);
            } else if bytes.ends_with(RECORD.as_bytes()) {
                records.push((name, entry.ino()));
            }
        }
        // Taken out so that no lock is held while records are read; a
        // listing made meanwhile reads them afresh.
        let old = std::mem::take(&mut *lock(&self.organize.listings.records.seen));
        let mut seen = HashMap::with_capacity(records.len());
        let mut stamps = HashMap::with_capacity(records.len());
        for (name, ino) in records {
            let stem = &name.as_encoded_bytes()[..name.len() - RECORD.len()];
            let mut socket_name = OsStr::from_bytes(stem).to_os_string();
            socket_name.push(SOCKET);
            let socket = sockets.contains(&socket_name);
            let prev = old.get(&name).filter(|p| p.ino == ino);
            let fresh = prev.filter(|p| {
                p.socket == socket
                    && !(socket && p.key.as_ref().is_none_or(|k| !here.contains_key(k)))
            });
            let entry = match fresh {
                Some(p) => p.clone(),
                None => {
                    let path = self.config.runtime_dir.join(&name);
                    let key = match prev {
                        Some(p) => p.key.clone(),
                        // A stem is the key itself, or a hash for a long
                        // key (never a key: it has no colon).
                        None => std::str::from_utf8(stem)
                            .ok()
                            .and_then(|s| SessionKey::parse(s).ok())
                            .or_else(|| {
                                RunRecord::read(&path).and_then(|r| SessionKey::parse(&r.key).ok())
                            }),
                    };
                    Seen {
                        ino,
                        socket,
                        key,
                        ms: stamped_activity_ms(&path),
                    }
                }
            };
            if let (Some(key), Some(ms)) = (&entry.key, entry.ms) {
                stamps.insert(key.clone(), ms);
            }
            seen.insert(name, entry);
        }
        drop(old);
        *lock(&self.organize.listings.records.seen) = seen;
        RuntimeDir { sockets, stamps }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::record::stamp_activity;

    fn record(core: &Core, key: &SessionKey) -> std::path::PathBuf {
        let path = core.paths.record(key);
        RunRecord {
            key: key.to_string(),
            socket: core.paths.socket(key).display().to_string(),
            master_pid: 1,
            agent_pid: 1,
            started_ms: 1,
            exec_error: None,
            exec_errno: None,
        }
        .write(&path)
        .unwrap();
        path
    }

    #[test]
    fn a_record_is_read_again_only_when_it_may_have_moved() {
        let (core, _dir) = Core::for_tests(&[]);
        let key = SessionKey::parse("shell:a").unwrap();
        let path = record(&core, &key);
        let stamps = || core.read_runtime_dir(&HashMap::new()).stamps;
        stamp_activity(&path, 1_000).unwrap();
        assert_eq!(stamps().get(&key), Some(&1_000));
        // No socket, same file: what was read stands (nothing stamps a
        // stopped session's record but its stop, before its socket goes).
        stamp_activity(&path, 2_000).unwrap();
        assert_eq!(stamps().get(&key), Some(&1_000));
        // A socket came: read again, and on every listing while it is there
        // (another daemon stamps it).
        std::fs::write(core.paths.socket(&key), b"").unwrap();
        assert_eq!(stamps().get(&key), Some(&2_000));
        stamp_activity(&path, 3_000).unwrap();
        assert_eq!(stamps().get(&key), Some(&3_000));
        // Unless the session has a runtime here, which knows its activity.
        let here = HashMap::from([(key.clone(), core.runtime(&key))]);
        stamp_activity(&path, 4_000).unwrap();
        assert_eq!(core.read_runtime_dir(&here).stamps.get(&key), Some(&3_000));
        // The socket went: read again.
        std::fs::remove_file(core.paths.socket(&key)).unwrap();
        assert_eq!(stamps().get(&key), Some(&4_000));
        // A new record (a launch): read again.
        let path = record(&core, &key);
        stamp_activity(&path, 5_000).unwrap();
        assert_eq!(stamps().get(&key), Some(&5_000));
        std::fs::remove_file(&path).unwrap();
        assert!(stamps().is_empty());
    }

    #[test]
    fn a_long_keys_record_is_named_by_its_content() {
        let (core, _dir) = Core::for_tests(&[]);
        let key = SessionKey::parse(&format!("shell:{}", "a".repeat(120))).unwrap();
        let path = record(&core, &key);
        assert!(path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("h-"));
        stamp_activity(&path, 7_000).unwrap();
        let dir = core.read_runtime_dir(&HashMap::new());
        assert_eq!(dir.stamps, HashMap::from([(key, 7_000)]));
    }
}
