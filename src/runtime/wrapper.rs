//! The exec wrapper: the program dtach runs. It records the pids, drops the
//! lock descriptor (the agent and its children must not hold it), waits for
//! the daemon's window size, then becomes the agent.

use super::record::RunRecord;
use crate::clock::now_ms;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The search path an agent gets when the daemon was started without one
/// (as `mount(8)` starts helpers).
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

#[derive(Debug, Clone)]
pub struct WrapperArgs {
    pub lock_fd: i32,
    pub record: PathBuf,
    pub key: String,
    pub socket: String,
    pub cwd: PathBuf,
    pub argv: Vec<String>,
}

/// The PTY's size: dtach -n starts at 0×0 until the daemon's WINCH arrives.
fn pty_columns() -> u16 {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass.
    let rc = unsafe { libc::ioctl(0, libc::TIOCGWINSZ, &mut size) };
    if rc == 0 {
        size.ws_col
    } else {
        0
    }
}

/// The daemon's subcommand that runs as the master's program: the wrapper
/// shows it as its second argument until it becomes the program.
pub const SUBCOMMAND: &str = "exec-wrapper";

/// Never returns on success; on failure records why and exits 127.
pub fn run(args: WrapperArgs) -> ! {
    // SAFETY: closing a descriptor number we were handed; nothing else in
    // this process uses it.
    unsafe {
        libc::close(args.lock_fd);
    }
    let mut record = RunRecord {
        key: args.key.clone(),
        socket: args.socket.clone(),
        master_pid: std::os::unix::process::parent_id(),
        agent_pid: std::process::id(),
        started_ms: now_ms(),
        exec_error: None,
        exec_errno: None,
    };
    if let Err(e) = record.write(&args.record) {
        eprintln!("sessionfs: {e}");
    }
    // Output before the daemon attaches would be lost: start once it has.
    let until = Instant::now() + Duration::from_secs(5);
    while pty_columns() == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
    let Some((program, rest)) = args.argv.split_first() else {
        eprintln!("sessionfs: no program to run");
        std::process::exit(127);
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest).env("SESSIONFS_KEY", &args.key);
    if std::env::var_os("PATH").is_none_or(|p| p.is_empty()) {
        cmd.env("PATH", DEFAULT_PATH);
    }
    if std::env::var_os("TERM").is_none_or(|t| t.is_empty() || t == "dumb") {
        cmd.env("TERM", "xterm-256color");
    }
    if std::env::set_current_dir(&args.cwd).is_err() {
        eprintln!(
            "sessionfs: cannot enter {}; starting in the home directory",
            args.cwd.display()
        );
        if let Some(home) = std::env::var_os("HOME") {
            let _ = std::env::set_current_dir(home);
        }
    }
    let err = cmd.exec();
    let reason = format!("cannot run {program}: {err}");
    eprintln!("sessionfs: {reason}");
    record.exec_error = Some(reason);
    record.exec_errno = err.raw_os_error();
    let _ = record.write(&args.record);
    std::process::exit(127);
}
