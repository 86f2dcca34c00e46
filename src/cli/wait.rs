//! `sessionfs wait KEY...`: blocks on the sessions' `wait` files.

use super::exit::{code, refused, usage, Failed};
use super::mounted::{client_verb, reason, session_dir};
use std::io::Read;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// `--timeout S` as a duration.
pub(super) fn seconds(s: Option<f64>) -> Result<Option<Duration>, Failed> {
    match s {
        Some(s) if s.is_finite() && s >= 0.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(usage(format!("--timeout {s}: seconds, 0 or more"))),
        None => Ok(None),
    }
}

/// The exit code of a settled state.
fn code_of(state: &str) -> u8 {
    match state {
        "idle" => code::IDLE,
        "waiting" => code::WAITING,
        _ => code::STOPPED,
    }
}

/// `sessionfs wait KEY...`: blocks until each session (or, with `any`,
/// the first) is not starting or busy, at most `timeout`. Each settled
/// session gives `(key, state)`; the code is 0 when all are idle, else the
/// first one's (in argument order) that is not.
pub fn wait(
    mnt: &Path,
    keys: &[String],
    any: bool,
    timeout: Option<Duration>,
) -> Result<(Vec<(String, String)>, u8), Failed> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut files = Vec::new();
    for key in keys {
        let dir = session_dir(mnt, key)?;
        let file = std::fs::File::open(dir.join("wait"))
            .map_err(|e| refused(format!("{key}: {}", reason(&dir, &e))))?;
        files.push((key.clone(), file));
    }
    let until = timeout.map(|t| Instant::now() + t);
    let mut settled: Vec<Option<String>> = vec![None; files.len()];
    loop {
        let open: Vec<usize> = (0..files.len()).filter(|&i| settled[i].is_none()).collect();
        if open.is_empty() || (any && settled.iter().any(Option::is_some)) {
            break;
        }
        let left = match until {
            Some(u) => {
                let now = Instant::now();
                if now >= u {
                    break;
                }
                PollTimeout::try_from((u - now).as_millis().min(60_000) as i32)
                    .unwrap_or(PollTimeout::MAX)
            }
            None => PollTimeout::try_from(60_000).unwrap_or(PollTimeout::MAX),
        };
        let mut fds: Vec<PollFd> = open
            .iter()
            .map(|&i| PollFd::new(files[i].1.as_fd(), PollFlags::POLLIN))
            .collect();
        match poll(&mut fds, left) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(refused(format!("poll: {e}"))),
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        for (n, &i) in open.iter().enumerate() {
            if ready[n] {
                let mut line = String::new();
                files[i]
                    .1
                    .read_to_string(&mut line)
                    .map_err(|e| refused(format!("{}: {e}", files[i].0)))?;
                settled[i] = Some(line.trim().to_string());
            }
        }
    }
    let mut out = Vec::new();
    let mut code = None;
    for ((key, _), state) in files.iter().zip(&settled) {
        match state {
            Some(state) => {
                if code.is_none() && state != "idle" {
                    code = Some(code_of(state));
                }
                out.push((key.clone(), state.clone()));
            }
            None if any => {}
            None => {
                code.get_or_insert(code::TIMED_OUT);
            }
        }
    }
    if any && out.is_empty() {
        code = Some(code::TIMED_OUT);
    }
    if any {
        // The first that settled decides.
        code = out.first().map(|(_, s)| code_of(s)).or(code);
    }
    Ok((out, code.unwrap_or(code::IDLE)))
}

/// What `wait` found: `KEY STATE` lines, or one JSON array.
pub(super) fn print_settled(settled: &[(String, String)], json: bool) {
    if json {
        let list: Vec<serde_json::Value> = settled
            .iter()
            .map(|(k, s)| serde_json::json!({"key": k, "state": s}))
            .collect();
        println!("{}", serde_json::Value::Array(list));
    } else {
        for (key, state) in settled {
            println!("{key} {state}");
        }
    }
}

/// Waits for `keys` and prints what each settled at; exits with the code
/// of [`wait`].
pub fn run(keys: &[String], any: bool, timeout: Option<f64>, json: bool) -> ExitCode {
    client_verb(|mnt| {
        let timeout = seconds(timeout)?;
        let (settled, code) = wait(mnt, keys, any, timeout)?;
        print_settled(&settled, json);
        Ok(code)
    })
}
