//! Which master writes a conversation it was not launched for. An agent may
//! switch conversations inside its own process (Claude's `/clear` and
//! `/resume`, Codex's `/new` and `/resume`): the master of `claude:A` then
//! writes `claude:B`. The claim "B is written by A" is a file in the lock
//! directory, `claims/<ENGINE>:<B>.json`, made under B's lock by whatever
//! learns of the switch first (the agent's hook runs even when no daemon
//! does), and every daemon looks at it before it launches B: one writer per
//! conversation, across switches and across daemons. A claim lasts while
//! the claiming session's master lives and has not switched again.

use crate::atomic::{self, Durability};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a claim's writer waits for the conversation's lock: a LAUNCH
/// holds it for a moment; a live master of its own holds it for good.
const LOCK_WAIT: Duration = Duration::from_millis(300);
/// The largest claim file read back.
const MAX_CLAIM: u64 = 4096;

/// "`conversation` is written by the master of `by`".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The conversation's key, `ENGINE:ID`.
    pub conversation: String,
    /// The session whose master writes it, `ENGINE:ID`.
    pub by: String,
    /// The agent process that switched (0: not known).
    #[serde(default)]
    pub agent_pid: u32,
    /// When it was made, in ms since the epoch.
    #[serde(default)]
    pub ts_ms: u64,
}

/// Why a claim could not be made.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The conversation's lock is held: a master of its own writes it.
    Held,
    /// The claims directory or file could not be written.
    Io(String),
}

/// The claims directory of a lock directory.
pub fn dir(lock_dir: &Path) -> PathBuf {
    lock_dir.join("claims")
}

fn path(lock_dir: &Path, conversation: &str) -> PathBuf {
    dir(lock_dir).join(format!("{conversation}.json"))
}

/// The conversation's own lock file (the one its LAUNCH takes).
fn lock_path(lock_dir: &Path, conversation: &str) -> PathBuf {
    lock_dir.join(format!("{conversation}.lock"))
}

/// Takes `conversation`'s lock, waiting at most [`LOCK_WAIT`].
fn take_lock(lock_dir: &Path, conversation: &str) -> Result<File, Refused> {
    let path = lock_path(lock_dir, conversation);
    let until = Instant::now() + LOCK_WAIT;
    loop {
        match crate::filelock::try_lock(&path) {
            Ok(Some(file)) => return Ok(file),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => return Err(Refused::Held),
            Err(e) => return Err(Refused::Io(e.message)),
        }
    }
}

/// Records `claim` under its conversation's lock (written aside, then
/// renamed, so a reader sees a whole claim or none).
pub fn make(lock_dir: &Path, claim: &Claim) -> Result<(), Refused> {
    let io = |e: std::io::Error| Refused::Io(e.to_string());
    let claims = dir(lock_dir);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&claims)
        .map_err(io)?;
    let _lock = take_lock(lock_dir, &claim.conversation)?;
    let target = path(lock_dir, &claim.conversation);
    let body = serde_json::to_vec(claim).map_err(|e| Refused::Io(e.to_string()))?;
    // Not synced: a claim is made by a live master, which a crash of the
    // machine ends too.
    atomic::replace_with(&target, &body, 0o600, Durability::Unsynced).map_err(io)
}

/// The claim on `conversation`, if one was made (live or not).
pub fn read(lock_dir: &Path, conversation: &str) -> Option<Claim> {
    use std::io::Read;
    let mut text = Vec::new();
    File::open(path(lock_dir, conversation))
        .ok()?
        .take(MAX_CLAIM)
        .read_to_end(&mut text)
        .ok()?;
    let claim: Claim = serde_json::from_slice(&text).ok()?;
    (claim.conversation == conversation).then_some(claim)
}

/// Ends the claim on `conversation` if `by` made it: its master switched
/// again or ended.
pub fn end(lock_dir: &Path, conversation: &str, by: &str) {
    if read(lock_dir, conversation).is_some_and(|c| c.by == by) {
        let _ = std::fs::remove_file(path(lock_dir, conversation));
    }
}

/// What a Claude or Gemini hook payload says of a switch inside the
/// agent's own process: `SessionStart` with `source` `clear` or `resume`
/// names the conversation it writes from now on (`compact` keeps the same
/// one). Gemini 0.61 fires it so at `/clear` (`/new`) and at a resume,
/// including the first start of a session loaded from `--session-file`.
pub fn hook_switch(event: &str, source: Option<&str>, session_id: Option<&str>) -> Option<String> {
    let switched = event == "SessionStart" && matches!(source, Some("clear" | "resume"));
    session_id.filter(|_| switched).map(str::to_string)
}

/// The conversation Claude's process `pid` says it writes now: its own
/// status file, `CONFIG/sessions/<pid>.json` (`{"pid", "sessionId", ...}`,
/// rewritten in place on `/clear` and `/resume`, removed at exit).
pub fn claude_status_file(config_dir: &Path, pid: u32) -> Option<String> {
    use std::io::Read;
    let mut text = Vec::new();
    File::open(config_dir.join("sessions").join(format!("{pid}.json")))
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut text)
        .ok()?;
    let status: serde_json::Value = serde_json::from_slice(&text).ok()?;
    if status.get("pid")?.as_u64()? != u64::from(pid) {
        return None;
    }
    let id = status.get("sessionId")?.as_str()?;
    (!id.is_empty() && id.len() <= 128).then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(conversation: &str, by: &str) -> Claim {
        Claim {
            conversation: conversation.into(),
            by: by.into(),
            agent_pid: 7,
            ts_ms: 1,
        }
    }

    #[test]
    fn a_claim_is_made_read_and_ended_by_its_maker_only() {
        let dir = tempfile::tempdir().unwrap();
        let c = claim("claude:b", "claude:a");
        make(dir.path(), &c).unwrap();
        assert_eq!(read(dir.path(), "claude:b"), Some(c));
        end(dir.path(), "claude:b", "claude:x");
        assert!(read(dir.path(), "claude:b").is_some(), "not x's to end");
        end(dir.path(), "claude:b", "claude:a");
        assert!(read(dir.path(), "claude:b").is_none());
    }

    #[test]
    fn a_conversation_whose_lock_is_held_cannot_be_claimed() {
        let dir = tempfile::tempdir().unwrap();
        let held = take_lock(dir.path(), "claude:b").unwrap();
        assert_eq!(
            make(dir.path(), &claim("claude:b", "claude:a")),
            Err(Refused::Held)
        );
        drop(held);
        make(dir.path(), &claim("claude:b", "claude:a")).unwrap();
    }

    #[test]
    fn a_foreign_or_damaged_claim_file_is_no_claim() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(super::dir(dir.path())).unwrap();
        std::fs::write(path(dir.path(), "claude:b"), b"{not json").unwrap();
        assert!(read(dir.path(), "claude:b").is_none());
        make(dir.path(), &claim("claude:c", "claude:a")).unwrap();
        std::fs::rename(path(dir.path(), "claude:c"), path(dir.path(), "claude:b")).unwrap();
        assert!(read(dir.path(), "claude:b").is_none(), "it names another");
    }

    #[test]
    fn claudes_status_file_names_the_conversation_of_its_own_pid_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sessions")).unwrap();
        let write = |name: &str, body: &str| {
            std::fs::write(dir.path().join("sessions").join(name), body).unwrap()
        };
        write("41.json", r#"{"pid":41,"sessionId":"b","status":"idle"}"#);
        write("42.json", r#"{"pid":7,"sessionId":"c"}"#);
        write("43.json", r#"{"pid":43,"sessionId":"#);
        assert_eq!(claude_status_file(dir.path(), 41), Some("b".into()));
        assert_eq!(claude_status_file(dir.path(), 42), None, "another pid's");
        assert_eq!(claude_status_file(dir.path(), 43), None, "half written");
        assert_eq!(claude_status_file(dir.path(), 44), None, "none");
    }

    #[test]
    fn only_clear_and_resume_switch() {
        assert_eq!(
            hook_switch("SessionStart", Some("clear"), Some("b")),
            Some("b".into())
        );
        assert_eq!(
            hook_switch("SessionStart", Some("resume"), Some("b")),
            Some("b".into())
        );
        for source in [Some("startup"), Some("compact"), None] {
            assert_eq!(hook_switch("SessionStart", source, Some("b")), None);
        }
        assert_eq!(hook_switch("Stop", Some("clear"), Some("b")), None);
    }
}
