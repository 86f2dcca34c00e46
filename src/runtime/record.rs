//! The run record: written by the exec wrapper when a master starts, so any
//! daemon knows the master's and the agent's pids.

use crate::atomic::{self, Durability};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunRecord {
    pub key: String,
    pub socket: String,
    pub master_pid: u32,
    pub agent_pid: u32,
    /// Milliseconds since the epoch.
    pub started_ms: u64,
    /// Set when the agent's program could not be started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_error: Option<String>,
    /// The errno of that failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_errno: Option<i32>,
}

/// A live session's input and output times live in the daemon's memory;
/// the record's mtime keeps the last of them on disk, so a daemon started
/// later (after a restart or a crash) still knows when the session was last
/// used. Set at most every [`ACTIVITY_STAMP_MS`] while the session is busy,
/// and exactly when the daemon stops.
pub const ACTIVITY_STAMP_MS: u64 = 5_000;

/// Sets the record's mtime to `ms`; a session without a record has no stamp.
pub fn stamp_activity(path: &Path, ms: u64) -> std::io::Result<()> {
    use nix::sys::stat::{utimensat, UtimensatFlags};
    use nix::sys::time::TimeSpec;
    let mtime = TimeSpec::new((ms / 1000) as i64, ((ms % 1000) * 1_000_000) as i64);
    utimensat(
        None,
        path,
        &TimeSpec::UTIME_OMIT,
        &mtime,
        UtimensatFlags::NoFollowSymlink,
    )
    .map_err(std::io::Error::from)
}

/// The last activity stamped on the record (its mtime), in ms.
pub fn stamped_activity_ms(path: &Path) -> Option<u64> {
    crate::clock::path_mtime_ms(path)
}

impl RunRecord {
    pub fn read(path: &Path) -> Option<RunRecord> {
        let text = std::fs::read(path).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Written to a temporary name and renamed, so a reader never sees half of it.
    pub fn write(&self, path: &Path) -> Result<()> {
        let body = serde_json::to_vec(self).expect("record serialises");
        // Not synced: it names a master, which a crash of the machine ends
        // too (and the runtime directory is usually a tmpfs).
        atomic::replace_with(path, &body, atomic::CREATE_MODE, Durability::Unsynced)
            .map_err(|e| Error::io(&format!("cannot write {}", path.display()), &e))
    }
}
