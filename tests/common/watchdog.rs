//! A deadline for every mount test: a test still running when its mount's
//! deadline passes is failed, with what a hang needs to be understood,
//! instead of hanging the run. And where a process's threads wait, for
//! that report and for tests that watch calls of their own (`tests/chaos`).

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The variable that changes the default deadline (seconds), for a slow
/// machine or a long run.
pub const DEADLINE_VAR: &str = "SESSIONFS_TEST_DEADLINE";

/// How long a mount may last unless its test says otherwise: 300 s, or
/// `SESSIONFS_TEST_DEADLINE` seconds.
pub fn default_deadline() -> Duration {
    let secs = std::env::var(DEADLINE_VAR)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{DEADLINE_VAR}={v:?} is not a number of seconds"))
        })
        .unwrap_or(300);
    Duration::from_secs(secs)
}

/// What a mount that outlived its deadline leaves to report and to end.
pub struct Hang {
    pub mnt: PathBuf,
    pub log: PathBuf,
    pub daemon: u32,
    /// The host's runtime directory: its dtach masters are ended too.
    pub runtime: PathBuf,
}

/// Armed while its owner (a [`super::Mount`]) lives; dropping it disarms.
/// When `limit` passes first, a thread of its own prints the test's name,
/// how long it ran, the daemon's threads and its log's tail, ends the
/// daemon, its mount and its masters, and exits the test process with
/// status 101, as a failed test does.
pub struct Deadline {
    _disarm: mpsc::Sender<()>,
}

impl Deadline {
    pub fn arm(limit: Duration, hang: Hang) -> Deadline {
        let test = std::thread::current()
            .name()
            .filter(|n| *n != "main")
            .unwrap_or("a test")
            .to_string();
        let started = Instant::now();
        let (disarm, armed) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name(format!("deadline of {test}"))
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = armed.recv_timeout(limit) {
                    fire(&test, started.elapsed(), limit, &hang);
                }
            })
            .expect("the deadline's thread starts");
        Deadline { _disarm: disarm }
    }
}

fn fire(test: &str, ran: Duration, limit: Duration, hang: &Hang) -> ! {
    let log = std::fs::read_to_string(&hang.log).unwrap_or_default();
    let report = format!(
        "watchdog: {test} still runs after {ran:.1?}, past its deadline of {limit:?} \
         (Host::with_deadline, {DEADLINE_VAR}); its mount {} (daemon {}) is ended.\n\
         Where the daemon's threads wait:\n{}\
         Where this test's threads wait:\n{}\
         The daemon's log ({}) ends:\n{}\n",
        hang.mnt.display(),
        hang.daemon,
        stacks(hang.daemon),
        stacks(std::process::id()),
        hang.log.display(),
        tail(&log, 40),
    );
    // Straight to the process's stderr: the test harness's capture of
    // `eprintln!` would be lost with the exit.
    let _ = std::io::stderr().lock().write_all(report.as_bytes());
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(hang.daemon as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(&hang.mnt)
        .status();
    for pid in super::masters_under(&hang.runtime) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    std::process::exit(101)
}

/// What each thread of `pid` waits in (its wait channel and the top of its
/// kernel stack), one line a thread, for a report of a hang.
pub fn stacks(pid: u32) -> String {
    let mut out = String::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let tid = t.file_name().to_string_lossy().into_owned();
        let comm =
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
        let wchan =
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/wchan")).unwrap_or_default();
        let stack =
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stack")).unwrap_or_default();
        let top: Vec<&str> = stack.lines().take(6).collect();
        out.push_str(&format!(
            "  {tid} {} wchan={wchan}: {}\n",
            comm.trim(),
            top.join(" | ")
        ));
    }
    out
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
