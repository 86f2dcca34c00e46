//! `sessionfs prompt KEY TEXT`: writes the session's `prompt` file, and
//! with `--wait` then waits as `sessionfs wait` does.

use super::exit::{code, refused, usage, Failed};
use super::mounted::{client_verb, reason, session_dir, write_file};
use super::wait::{print_settled, seconds, wait};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// `sessionfs prompt KEY TEXT`: types the prompt and returns once the agent
/// (or shell) took it, as `printf TEXT > KEY/prompt` does.
pub fn prompt(mnt: &Path, key: &str, text: &[u8]) -> Result<(), Failed> {
    let dir = session_dir(mnt, key)?;
    if dir.parent() != Some(mnt) {
        return Err(refused(format!("{key} is archived: unarchive it first")));
    }
    write_file(&dir.join("prompt"), text)
        .map_err(|e| refused(format!("{key}: {}", reason(&dir, &e))))
}

/// [`prompt`], given up after `timeout` (exit 124). The `close` still
/// under way ends with this process, and the daemon then withdraws a
/// prompt it had not begun to type (one it had begun, it finishes).
pub fn prompt_within(
    mnt: &Path,
    key: &str,
    text: Vec<u8>,
    timeout: Option<Duration>,
) -> Result<(), Failed> {
    let Some(timeout) = timeout else {
        return prompt(mnt, key, &text);
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let (mnt_owned, key_owned) = (mnt.to_path_buf(), key.to_string());
    std::thread::spawn(move || {
        let _ = tx.send(prompt(&mnt_owned, &key_owned, &text));
    });
    match rx.recv_timeout(timeout) {
        Ok(done) => done,
        Err(_) => Err(Failed {
            message: format!(
                "{key}: not taken within {:.1} s; a prompt not typed yet is withdrawn",
                timeout.as_secs_f64()
            ),
            code: code::TIMED_OUT,
        }),
    }
}

/// Types `text` (the words joined by spaces; with `-` or none, standard
/// input); with `wait`, then waits for the turn to end, all within
/// `timeout`.
pub fn run(
    key: &str,
    text: &[String],
    then_wait: bool,
    timeout: Option<f64>,
    json: bool,
) -> ExitCode {
    client_verb(|mnt| {
        let text = if text.is_empty() || text == ["-"] {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
                .map_err(|e| usage(format!("reading the prompt from standard input: {e}")))?;
            buf
        } else {
            text.join(" ").into_bytes()
        };
        let timeout = seconds(timeout)?;
        let until = timeout.map(|t| Instant::now() + t);
        prompt_within(mnt, key, text, timeout)?;
        if !then_wait {
            if json {
                println!("{}", serde_json::json!({"key": key, "taken": true}));
            }
            return Ok(0);
        }
        let left = until.map(|u| u.saturating_duration_since(Instant::now()));
        let (settled, code) = wait(mnt, &[key.to_string()], false, left)?;
        print_settled(&settled, json);
        Ok(code)
    })
}
