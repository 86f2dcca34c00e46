//! The `sessionfs` verbs for scripts: each a thin client of the mount that
//! serves this state (no second protocol), reading and writing the same
//! files a shell would, with exit codes a script can branch on.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Exit codes, as documented in the README.
pub mod code {
    /// Every session named is idle (or the command was taken).
    pub const IDLE: u8 = 0;
    /// Refused: the reason is on stderr, from the session's `status.error`.
    pub const REFUSED: u8 = 1;
    /// A usage error.
    pub const USAGE: u8 = 2;
    /// The agent waits for an answer.
    pub const WAITING: u8 = 4;
    /// Stopped, or exited.
    pub const STOPPED: u8 = 5;
    /// The timeout passed first.
    pub const TIMED_OUT: u8 = 124;
}

/// Why a verb failed: what to print and the exit code.
#[derive(Debug)]
pub struct Failed {
    pub message: String,
    pub code: u8,
}

fn refused(message: String) -> Failed {
    Failed {
        message,
        code: code::REFUSED,
    }
}

/// The mount that serves this state.
pub fn mount(config: &crate::config::Config) -> Result<PathBuf, Failed> {
    crate::core::daemon_mounts(config)
        .into_iter()
        .next()
        .ok_or_else(|| {
            refused(
                "no sessionfs is mounted on this state: start one with `sessionfs mount DIR`"
                    .into(),
            )
        })
}

/// A session's directory in the mount, for a key as typed.
fn session_dir(mnt: &Path, key: &str) -> Result<PathBuf, Failed> {
    crate::key::SessionKey::parse(key).map_err(|e| Failed {
        message: format!("{key}: {}", e.message),
        code: code::USAGE,
    })?;
    let dir = mnt.join(key);
    if dir.exists() {
        Ok(dir)
    } else if mnt.join("archived").join(key).exists() {
        Ok(mnt.join("archived").join(key))
    } else {
        Err(refused(format!("no session {key}")))
    }
}

/// The reason the session's `status` gives for its last refusal.
fn reason(dir: &Path, fallback: &std::io::Error) -> String {
    let said = std::fs::read(dir.join("status"))
        .ok()
        .and_then(|t| serde_json::from_slice::<serde_json::Value>(&t).ok())
        .and_then(|v| v["error"].as_str().map(str::to_string));
    said.unwrap_or_else(|| fallback.to_string())
}

/// Writes `bytes` to a file of the mount and closes it, reporting what the
/// `close` says too: a prompt's refusal comes at its close.
fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::fd::IntoRawFd;
    let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.write_all(bytes)?;
    nix::unistd::close(file.into_raw_fd()).map_err(std::io::Error::from)
}

/// Writes one `ctl` command (`approve`, `deny`, `interrupt`, `answer
/// ...`) and waits for it to be done, as `echo CMD > KEY/ctl` does.
pub fn ctl(mnt: &Path, key: &str, command: &str) -> Result<(), Failed> {
    let dir = session_dir(mnt, key)?;
    write_file(&dir.join("ctl"), format!("{command}\n").as_bytes())
        .map_err(|e| refused(format!("{key}: {}", reason(&dir, &e))))
}

/// A session's `status`, as JSON.
pub fn status(mnt: &Path, key: &str) -> Result<serde_json::Value, Failed> {
    let dir = session_dir(mnt, key)?;
    let text =
        std::fs::read(dir.join("status")).map_err(|e| refused(format!("{key}: status: {e}")))?;
    serde_json::from_slice(&text).map_err(|e| refused(format!("{key}: status: {e}")))
}

/// `sessionfs new ENGINE`: makes a session with an id chosen here, so the
/// key is known without asking which one the mount made last (five
/// scripts creating at once each get their own). The workspace must be an
/// absolute directory outside the mount; the title one line.
pub fn new_session(
    mnt: &Path,
    engine: &str,
    workspace: Option<&Path>,
    title: Option<&str>,
) -> Result<String, Failed> {
    let usage = |message: String| Failed {
        message,
        code: code::USAGE,
    };
    if engine.is_empty() || engine.contains(|c: char| c.is_whitespace() || c == ':') {
        return Err(usage(format!("{engine:?} is not an engine name")));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let mut command = format!("new {engine} id={id}");
    if let Some(dir) = workspace {
        let text = dir.to_str().filter(|t| !t.contains(char::is_whitespace));
        let Some(text) = text else {
            return Err(usage(format!(
                "--workspace {}: a directory whose path has no spaces or line breaks",
                dir.display()
            )));
        };
        command.push_str(&format!(" workspace={text}"));
    }
    if let Some(title) = title {
        if title.contains(['\n', '\r']) {
            return Err(usage("--title: one line".into()));
        }
        command.push_str(&format!(" title={title}"));
    }
    command.push('\n');
    write_file(&mnt.join("ctl"), command.as_bytes()).map_err(|e| {
        let said = std::fs::read(mnt.join("status"))
            .ok()
            .and_then(|t| serde_json::from_slice::<serde_json::Value>(&t).ok())
            .and_then(|v| v["error"].as_str().map(str::to_string));
        refused(said.unwrap_or_else(|| e.to_string()))
    })?;
    Ok(format!("{engine}:{id}"))
}

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

/// `sessionfs attach KEY`: opens the session (starting its program when
/// it is stopped, as `echo open > ctl` does) and gives the dtach command
/// that joins its master from this terminal.
pub fn attach_command(mnt: &Path, key: &str) -> Result<std::process::Command, Failed> {
    let dir = session_dir(mnt, key)?;
    if dir.parent() != Some(mnt) {
        return Err(refused(format!("{key} is archived: unarchive it first")));
    }
    write_file(&dir.join("ctl"), b"open\n")
        .map_err(|e| refused(format!("{key}: {}", reason(&dir, &e))))?;
    let status = status(mnt, key)?;
    let socket = status["socket"]
        .as_str()
        .filter(|_| status["master_pid"].is_u64())
        .ok_or_else(|| {
            refused(format!(
                "{key}: no master to join: {}",
                status["error"]
                    .as_str()
                    .unwrap_or("the session did not start")
            ))
        })?;
    let dtach = crate::core::find_dtach().map_err(|e| refused(e.message))?;
    let mut command = std::process::Command::new(dtach);
    // `-r winch`: the program draws its screen again for this terminal.
    command.args(["-a", socket, "-r", "winch"]);
    Ok(command)
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

/// `sessionfs events`: the root `events` as it is, and with `follow`, as
/// it grows. A rotation gives the name a new file (a new inode): what the
/// old one still held is printed, then the new one from its start, as
/// `tail -F` does.
pub fn events(mnt: &Path, follow: bool, out: &mut dyn Write) -> Result<(), Failed> {
    use std::os::unix::fs::MetadataExt;
    let path = mnt.join("events");
    let io = |e: std::io::Error| refused(format!("{}: {e}", path.display()));
    let open = || -> Result<(std::fs::File, u64), Failed> {
        let file = std::fs::File::open(&path).map_err(io)?;
        let ino = file.metadata().map_err(io)?.ino();
        Ok((file, ino))
    };
    let (mut file, mut ino) = open()?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n > 0 {
            out.write_all(&buf[..n]).map_err(io)?;
            continue;
        }
        if !follow {
            return Ok(());
        }
        out.flush().map_err(io)?;
        let now = std::fs::metadata(&path).map_err(io)?.ino();
        if now != ino {
            // Lines the old file took after the read above, before it was
            // moved aside, come first.
            loop {
                let n = file.read(&mut buf).map_err(io)?;
                if n == 0 {
                    break;
                }
                out.write_all(&buf[..n]).map_err(io)?;
            }
            (file, ino) = open()?;
            continue;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
