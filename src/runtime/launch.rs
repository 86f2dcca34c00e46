//! Opening a session: exactly one of ATTACH, LAUNCH or BUSY (SPEC §3).
//!
//! The decision goes through the socket and the per-key `flock` only, never
//! through in-process state, so it holds across daemons sharing a lock dir.

use super::dtach::{self, Client};
use super::paths::RuntimePaths;
use super::record::RunRecord;
use super::wrapper;
use crate::error::{Error, Result};
use crate::filelock::try_lock;
use crate::key::SessionKey;
use crate::procinfo;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The soft limit on open files the user had before the daemon raised its
/// own (0: not raised): the masters and programs started get it back.
static USER_NOFILE: AtomicU64 = AtomicU64::new(0);

/// Remembers the user's own soft limit on open files (see [`USER_NOFILE`]).
pub fn keep_user_open_files_limit(soft: u64) {
    USER_NOFILE.store(soft, Ordering::Relaxed);
}

/// How an open resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Outcome {
    Attach,
    Launch,
    Busy,
}

/// Asked while an open waits for a master: true once it is to be given
/// up (a `stop` of the session came meanwhile).
#[derive(Clone, Copy)]
pub struct Cancel<'a>(pub &'a dyn Fn() -> bool);

impl std::fmt::Debug for Cancel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cancel")
    }
}

impl Cancel<'_> {
    /// ECANCELED once the open is given up.
    fn check(&self, key: &SessionKey) -> Result<()> {
        if (self.0)() {
            return Err(cancelled(key));
        }
        Ok(())
    }
}

/// The error of an open that a `stop` undid.
pub fn cancelled(key: &SessionKey) -> Error {
    Error::new(
        libc::ECANCELED,
        format!("{key} was stopped while it was being opened"),
    )
}

/// Everything needed to open one session.
#[derive(Debug, Clone)]
pub struct OpenRequest<'a> {
    pub paths: &'a RuntimePaths,
    pub key: &'a SessionKey,
    /// The program to run on LAUNCH (new or resume, as the caller decided).
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub cols: u16,
    pub rows: u16,
    /// The sessionfs binary, run as the exec wrapper.
    pub wrapper: PathBuf,
    /// The dtach binary.
    pub dtach: PathBuf,
    /// Whether a stop came: every wait for a master ends at once then.
    pub cancel: Cancel<'a>,
}

/// An attached client and what is known of the master.
#[derive(Debug)]
pub struct Opened {
    pub outcome: Outcome,
    pub client: Client,
    /// The reading half, for the session's reader thread.
    pub reader: UnixStream,
    pub record: Option<RunRecord>,
}

/// How long a launch may take to show its socket and record.
const LAUNCH_DEADLINE: Duration = Duration::from_secs(10);
/// How long to wait for a master that another opener is starting.
const BUSY_GRACE: Duration = Duration::from_secs(3);

fn poll_until<T>(deadline: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let until = Instant::now() + deadline;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// The run record, if it still describes a live master on this socket.
pub fn live_record(paths: &RuntimePaths, key: &SessionKey) -> Option<RunRecord> {
    let record = RunRecord::read(&paths.record(key))?;
    procinfo::is_dtach_master(record.master_pid, &paths.socket(key)).then_some(record)
}

fn attach(req: &OpenRequest<'_>, outcome: Outcome) -> Result<Opened> {
    let socket = req.paths.socket(req.key);
    let (client, reader) = Client::connect(&socket)
        .map_err(|e| Error::io(&format!("cannot connect {}", socket.display()), &e))?;
    client
        .attach(req.cols, req.rows, Instant::now() + dtach::STALL)
        .map_err(|e| Error::io("cannot attach to the dtach master", &e.error))?;
    let record = if outcome == Outcome::Launch {
        started_record(req)?
    } else {
        live_record(req.paths, req.key)
    };
    Ok(Opened {
        outcome,
        client,
        reader,
        record,
    })
}

/// After a launch, once attached (the wrapper starts the program only
/// then): the run record once the program runs, or the reason it could not
/// start (`cannot run PROGRAM: …`, with its errno), so that no input is
/// sent to a master that is about to end. A program that ended at once
/// gives no live record, without waiting out the deadline.
fn started_record(req: &OpenRequest<'_>) -> Result<Option<RunRecord>> {
    let path = req.paths.record(req.key);
    let socket = req.paths.socket(req.key);
    let failed = |record: RunRecord| {
        let reason = record.exec_error?;
        Some(Error::new(record.exec_errno.unwrap_or(libc::EIO), reason))
    };
    let outcome = poll_until(LAUNCH_DEADLINE, || {
        if let Err(e) = req.cancel.check(req.key) {
            return Some(Err(e));
        }
        // The wrapper writes its record first, then waits for our attach.
        let record = RunRecord::read(&path)?;
        let wrapping = procinfo::cmdline(record.agent_pid)
            .is_some_and(|args| args.get(1).is_some_and(|a| a == wrapper::SUBCOMMAND));
        if wrapping && procinfo::is_dtach_master(record.master_pid, &socket) {
            return None;
        }
        // Started, failed or ended: a failure is on the record before the
        // wrapper exits, so read it once more.
        let record = RunRecord::read(&path).unwrap_or(record);
        if let Some(e) = failed(record.clone()) {
            return Some(Err(e));
        }
        Some(Ok(
            procinfo::is_dtach_master(record.master_pid, &socket).then_some(record)
        ))
    });
    outcome.unwrap_or(Ok(None))
}

/// Resolves an open to ATTACH, LAUNCH or BUSY (`EBUSY`).
pub fn open(req: &OpenRequest<'_>) -> Result<Opened> {
    let socket = req.paths.socket(req.key);
    if dtach::answers(&socket) {
        return attach(req, Outcome::Attach);
    }
    req.paths.ensure_dirs()?;
    match try_lock(&req.paths.lock(req.key))? {
        Some(lock) => {
            launch(req, &socket, lock)?;
            attach(req, Outcome::Launch)
        }
        None => {
            // Held but silent: either another opener is starting the master
            // right now, or something else holds the lock.
            let answered = poll_until(BUSY_GRACE, || match req.cancel.check(req.key) {
                Err(e) => Some(Err(e)),
                Ok(()) => dtach::answers(&socket).then_some(Ok(())),
            });
            if let Some(answered) = answered {
                answered?;
                return attach(req, Outcome::Attach);
            }
            Err(Error::busy(format!(
                "{} is locked by another process ({}) and no dtach master answers on {}",
                req.key,
                req.paths.lock(req.key).display(),
                socket.display()
            )))
        }
    }
}

/// Starts `dtach -n` with the locked descriptor inherited by the master alone;
/// our own copy is dropped when this returns.
fn launch(req: &OpenRequest<'_>, socket: &Path, lock: std::fs::File) -> Result<()> {
    let record = req.paths.record(req.key);
    for stale in [socket, record.as_path()] {
        match std::fs::remove_file(stale) {
            Ok(()) => log::info!("{}: removed stale {}", req.key, stale.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&format!("cannot remove {}", stale.display()), &e)),
        }
    }
    if req.argv.first().is_none_or(|p| p.is_empty()) {
        return Err(Error::invalid(format!(
            "{}: the engine has no program",
            req.key
        )));
    }
    let err_path = req.paths.runtime_dir.join(format!(
        "{}.err",
        socket.file_stem().unwrap_or_default().to_string_lossy()
    ));
    let err_file = std::fs::File::create(&err_path)
        .map_err(|e| Error::io(&format!("cannot create {}", err_path.display()), &e))?;
    let lock_fd = lock.as_raw_fd();
    let mut cmd = Command::new(&req.dtach);
    cmd.arg("-n")
        .arg(socket)
        .args(["-E", "-z", "-r", "winch"])
        .arg(&req.wrapper)
        .arg(wrapper::SUBCOMMAND)
        .arg("--lock-fd")
        .arg(lock_fd.to_string())
        .arg("--record")
        .arg(&record)
        .arg("--key")
        .arg(req.key.to_string())
        .arg("--socket")
        .arg(socket)
        .arg("--cwd")
        .arg(&req.cwd)
        .arg("--")
        .args(&req.argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file);
    // SAFETY: runs in the forked child before exec and only makes the
    // async-signal-safe calls fcntl, getrlimit, setrlimit and sigprocmask.
    // The user's own open files limit comes back here. Clearing close-on-exec
    // here, not in the parent, keeps the lock out of every other child this
    // process starts; the daemon blocks its shutdown signals, and the master
    // and agent must not inherit that.
    let user_nofile = USER_NOFILE.load(Ordering::Relaxed);
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(lock_fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if user_nofile != 0 {
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                    limit.rlim_cur = user_nofile.min(limit.rlim_max);
                    libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                }
            }
            nix::sys::signal::SigSet::empty().thread_set_mask()?;
            Ok(())
        });
    }
    let status = cmd
        .status()
        .map_err(|e| Error::io(&format!("cannot run {}", req.dtach.display()), &e))?;
    drop(lock);
    if !status.success() {
        let said = std::fs::read_to_string(&err_path).unwrap_or_default();
        return Err(Error::new(
            libc::EIO,
            format!(
                "dtach -n {} failed ({status}): {}",
                socket.display(),
                said.trim()
            ),
        ));
    }
    // A stop that came meanwhile may have ended the master already: then
    // it never answers.
    let answered = poll_until(LAUNCH_DEADLINE, || match req.cancel.check(req.key) {
        Err(e) => Some(Err(e)),
        Ok(()) => dtach::answers(socket).then_some(Ok(())),
    });
    match answered {
        Some(answered) => answered?,
        None => {
            return Err(Error::new(
                libc::EIO,
                format!("the dtach master never answered on {}", socket.display()),
            ))
        }
    }
    log::info!(
        "{}: LAUNCH {:?} in {}",
        req.key,
        req.argv,
        req.cwd.display()
    );
    Ok(())
}

/// Ends a session's processes: the agent's session (its group and
/// stragglers) gets a hangup, as when a terminal closes, and TERM; the
/// master TERM; whatever is left KILL after `grace`. Then the socket is
/// unlinked under the lock if no master is left to do it. Best-effort.
pub fn terminate(paths: &RuntimePaths, key: &SessionKey, grace: Duration) {
    terminate_known(paths, key, grace, None)
}

/// [`terminate`], also when the run record on disk is gone (the runtime
/// directory removed under the daemon): `known` is the record the caller
/// kept, used if its master is still that process.
pub fn terminate_known(
    paths: &RuntimePaths,
    key: &SessionKey,
    grace: Duration,
    known: Option<&RunRecord>,
) {
    use nix::sys::signal::Signal;
    let socket = paths.socket(key);
    let mut record = live_record(paths, key).or_else(|| {
        known
            .filter(|r| procinfo::is_dtach_master(r.master_pid, &socket))
            .cloned()
    });
    if record.is_none() {
        // A launch stopped before its wrapper wrote the record: its master
        // answers the socket and would start the program on its own. The
        // wrapper writes the record first thing; without one soon, the
        // master alone is ended (its program never ran).
        if let Some(master) = master_of(&socket) {
            record = poll_until(Duration::from_secs(1), || live_record(paths, key));
            if record.is_none() {
                log::info!("{key}: ending master {master}, whose program never started");
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(master as i32),
                    Signal::SIGKILL,
                );
                poll_until(grace, || (!procinfo::alive(master)).then_some(()));
            }
        }
    }
    if let Some(record) = record {
        let signal = |pids: &[u32], sig| {
            for pid in pids {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid as i32), sig);
            }
        };
        let members = || {
            let mut pids = procinfo::session_members(record.agent_pid);
            pids.push(record.master_pid);
            pids.retain(|p| procinfo::alive(*p));
            pids
        };
        let agents = procinfo::session_members(record.agent_pid);
        // Interactive shells ignore TERM but not a hangup.
        signal(&agents, Signal::SIGHUP);
        signal(&agents, Signal::SIGTERM);
        signal(&[record.master_pid], Signal::SIGTERM);
        if poll_until(grace, || members().is_empty().then_some(())).is_none() {
            log::warn!(
                "{key}: processes {:?} outlived TERM; sending KILL",
                members()
            );
            signal(&members(), Signal::SIGKILL);
            poll_until(grace, || members().is_empty().then_some(()));
        }
    }
    remove_stale_socket(paths, key);
}

/// The pid of the dtach master that serves `socket`, found among the
/// processes (the socket's own credentials name the process that made it,
/// which `dtach -n` leaves at once). Looked for only when a stop finds a
/// master that answers but no run record.
fn master_of(socket: &Path) -> Option<u32> {
    if !dtach::answers(socket) {
        return None;
    }
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|&pid| procinfo::is_dtach_master(pid, socket))
}

/// Unlinks a socket no master answers on, holding the lock so that no
/// launch is under way meanwhile. The run record stays, as when the master
/// unlinks its socket itself: its mtime is the session's last activity
/// (the next launch replaces it).
pub fn remove_stale_socket(paths: &RuntimePaths, key: &SessionKey) {
    let socket = paths.socket(key);
    if !socket.exists() || dtach::answers(&socket) {
        return;
    }
    if let Ok(Some(_lock)) = try_lock(&paths.lock(key)) {
        if !dtach::answers(&socket) {
            let _ = std::fs::remove_file(&socket);
        }
    }
}
