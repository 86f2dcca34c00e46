//! Agent sessions as a state machine: what the agent is doing (`state`),
//! the hooks that tell it, and the `events` log of its changes.
//!
//! Plain logic with no FUSE and no session runtime: the daemon feeds it
//! signals (the process, hook lines from [`events::Follower`], screen
//! verdicts from [`screen_rules`]) and serves what [`state::Tracker`] decides.

pub mod claims;
pub mod dialogs;
pub mod events;
pub mod hooks;
pub mod screen_rules;
pub mod state;
pub mod stream;

use std::path::{Path, PathBuf};

/// Where one session's agent files live, under the state directory so that
/// they outlive the daemon: `<state>/agents/<KEY>/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentFiles {
    /// The file given to `claude --settings`.
    pub settings: PathBuf,
    /// What the hooks append to (and `hooks.jsonl.1`, moved aside when full).
    pub hooks: PathBuf,
    /// The `events` log.
    pub events: PathBuf,
}

impl AgentFiles {
    pub fn new(state_dir: &Path, key: &str) -> AgentFiles {
        let dir = state_dir.join("agents").join(key);
        AgentFiles {
            settings: dir.join("settings.json"),
            hooks: dir.join("hooks.jsonl"),
            events: dir.join("events.jsonl"),
        }
    }

    /// The session's directory (create it 0700 before the first launch).
    pub fn dir(&self) -> &Path {
        self.events.parent().expect("files live in a directory")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_s_files_share_one_directory_per_key() {
        let f = AgentFiles::new(Path::new("/state/sessionfs"), "claude:abc");
        assert_eq!(f.dir(), Path::new("/state/sessionfs/agents/claude:abc"));
        assert_eq!(f.hooks, f.dir().join("hooks.jsonl"));
        assert_eq!(f.settings.parent(), Some(f.dir()));
    }
}
