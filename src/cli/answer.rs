//! `sessionfs approve`, `deny`, `interrupt` and `answer`: one `ctl` command
//! each, answering what the agent asks.

use super::exit::{refused, Failed};
use super::mounted::{client_verb, reason, session_dir, status, write_file};
use std::path::Path;
use std::process::ExitCode;

/// Writes one `ctl` command (`approve`, `deny`, `interrupt`, `answer
/// ...`) and waits for it to be done, as `echo CMD > KEY/ctl` does.
pub fn ctl(mnt: &Path, key: &str, command: &str) -> Result<(), Failed> {
    let dir = session_dir(mnt, key)?;
    write_file(&dir.join("ctl"), format!("{command}\n").as_bytes())
        .map_err(|e| refused(format!("{key}: {}", reason(&dir, &e))))
}

/// Writes an answering `ctl` command; with `json`, prints the session's
/// state after it.
pub fn run(key: &str, command: &str, json: bool) -> ExitCode {
    client_verb(|mnt| {
        ctl(mnt, key, command)?;
        if json {
            let status = status(mnt, key)?;
            println!(
                "{}",
                serde_json::json!({"key": key, "done": command, "state": status["agent_state"], "waiting_for": status["waiting_for"]})
            );
        }
        Ok(0)
    })
}
