//! The writers' locks other processes share with the daemon (the sidecar's,
//! the slot records', a hosted transcript's): while another process holds
//! one, what needs it waits off the request threads and fails at a
//! deadline with ETIMEDOUT and a reason; everything else answers at once,
//! and nothing stored is lost.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What each probe must answer within while a lock is held.
const QUICK: Duration = Duration::from_secs(2);
/// An operation waiting for a held lock ends within this (the wait is 5 s
/// for a write, 1 s for `mkdir` and `rm`).
const GIVEN_UP: Duration = Duration::from_secs(10);
/// What a held lock's reason names.
const HELD: &str = "held by another process";
/// ETIMEDOUT, as tools print it.
const TIMED_OUT: &str = "Connection timed out";

const WORLD: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

/// A lock taken with the real `flock`, held until released or dropped.
struct HeldLock(Child);

impl HeldLock {
    fn take(path: &Path) -> HeldLock {
        // `-F`: flock runs the command itself, so ending it frees the lock.
        let child = Command::new("flock")
            .arg("-F")
            .arg(path)
            .args(["sleep", "60"])
            .stdin(Stdio::null())
            .spawn()
            .expect("flock runs");
        let probe = format!("flock -n '{}' true", path.display());
        wait_for(10, "the lock to be held", || !sh(&probe).status.success());
        HeldLock(child)
    }

    fn release(self) {}
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs a command line, killed if it hangs; returns (success, stdout, time).
fn timed(cmd: &str) -> (bool, String, Duration) {
    let t0 = Instant::now();
    let out = sh(&format!(
        "timeout -s KILL 20 bash -c '{}'",
        cmd.replace('\'', r"'\''")
    ));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        t0.elapsed(),
    )
}

/// Asserts `cmd` succeeds within [`QUICK`]; returns its stdout.
fn quick(what: &str, cmd: &str) -> String {
    let (ok, out, took) = timed(cmd);
    assert!(ok, "{what}: `{cmd}` failed");
    assert!(took < QUICK, "{what} took {took:?}");
    out
}

/// The root `status`, if it answers within [`QUICK`].
fn status_now(m: &Mount) -> Option<serde_json::Value> {
    let out = sh(&format!(
        "timeout -s KILL {} cat {}",
        QUICK.as_secs(),
        m.q("status")
    ));
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// Waits until `n` slow operations are in flight, reading `status` with
/// [`QUICK`] as the bound of each read.
fn wait_in_flight(m: &Mount, n: u64, what: &str) {
    wait_for(10, what, || {
        status_now(m).is_some_and(|s| s["slow_ops"]["in_flight"].as_u64() >= Some(n))
    });
}

/// Starts a command line in the background; its stderr is kept.
fn start(cmd: &str) -> Child {
    Command::new("bash")
        .args(["-c", cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a command started with [`start`]: (success, stderr).
fn outcome(child: Child) -> (bool, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts each command failed with ETIMEDOUT, within [`GIVEN_UP`] of `t0`.
fn all_timed_out(children: Vec<Child>, t0: Instant) {
    for (i, child) in children.into_iter().enumerate() {
        let (ok, err) = outcome(child);
        assert!(!ok, "operation {i} succeeded");
        assert!(err.contains(TIMED_OUT), "operation {i}: {err}");
    }
    let took = t0.elapsed();
    assert!(took < GIVEN_UP, "they ended after {took:?}");
}

fn root_error(m: &Mount) -> String {
    m.json("status")["error"].as_str().unwrap_or("").to_string()
}

fn state(host: &Host, rel: &str) -> PathBuf {
    host.path(&format!("state/sessionfs/{rel}"))
}

#[test]
fn mkdirs_waiting_for_a_held_metadata_lock_stop_nothing_else() {
    let host = Host::new();
    let m = host.mount("m");
    sh_ok(&format!("mkdir {}", m.q("shell:before")));
    sh_ok(&format!("echo kept > {}", m.q("shell:before/title")));

    let lock = HeldLock::take(&state(&host, "sidecar.lock"));
    let t0 = Instant::now();
    // As many as the daemon has request threads. The kernel sends one
    // `mkdir` in a directory at a time and holds the directory meanwhile.
    let mut mkdirs: Vec<Child> = (0..4)
        .map(|i| start(&format!("exec mkdir {}", m.q(&format!("shell:x{i}")))))
        .collect();

    // While they wait, everything else answers within a moment.
    let mut rounds = 0;
    while mkdirs.iter_mut().any(|c| c.try_wait().unwrap().is_none()) {
        assert!(t0.elapsed() < GIVEN_UP, "the mkdirs still wait");
        let readme = quick("cat README", &format!("cat {}", m.q("README")));
        assert!(!readme.is_empty());
        quick("cat status", &format!("cat {}", m.q("status")));
        let listing = quick("ls", &format!("ls {}", m.q("")));
        assert!(listing.lines().any(|l| l == "shell:before"), "{listing}");
        quick(
            "another session's status",
            &format!("cat {}", m.q("shell:before/status")),
        );
        rounds += 1;
    }
    assert!(rounds > 0, "the mkdirs ended before anything was tried");
    all_timed_out(mkdirs, t0);
    let error = root_error(&m);
    assert!(
        error.contains("mkdir \"shell:x")
            && error.contains("metadata lock")
            && error.contains(HELD),
        "root status error: {error}"
    );
    assert!(m.log_text().contains("metadata lock"), "not in the log");

    // Released: mkdir works, and nothing was lost or half-made.
    lock.release();
    quick("mkdir", &format!("mkdir {}", m.q("shell:after")));
    let listing = sh_ok(&format!("ls {}", m.q("")));
    assert!(listing.lines().any(|l| l == "shell:after"), "{listing}");
    assert!(!listing.contains("shell:x"), "{listing}");
    assert_eq!(m.read("shell:before/title"), "kept\n");
    let sidecar = sidecar_records(&host.path("state/sessionfs"));
    assert!(!sidecar["shell:before"].is_null() && !sidecar["shell:after"].is_null());
    assert!(sidecar["shell:x"].is_null(), "{sidecar}");
}

#[test]
fn slot_and_transcript_writes_waiting_for_held_locks_stop_nothing_else() {
    let host = Host::new();
    let m = host.mount("m");
    let slot = |n: u32| m.q(&format!("slots/{WORLD}/{n}"));
    let transcript = m.q("agent-transcripts/held.jsonl");
    sh_ok(&format!("echo '{{\"sessionId\":\"first\"}}' > {}", slot(1)));
    sh_ok(&format!("echo '{{\"type\":\"start\"}}' >> {transcript}"));

    let slots_lock = HeldLock::take(&state(&host, "slots/.lock"));
    let transcript_lock = HeldLock::take(&state(&host, "agent-transcripts/held.jsonl"));
    let t0 = Instant::now();
    let waiting = vec![
        start(&format!(
            "echo '{{\"sessionId\":\"second\"}}' > {}",
            slot(2)
        )),
        start(&format!("echo '{{\"sessionId\":\"third\"}}' > {}", slot(3))),
        start(&format!("exec rm {}", slot(1))),
        start(&format!("echo '{{\"type\":\"more\"}}' >> {transcript}")),
    ];
    // The writes wait 5 s, the `rm` 1 s.
    wait_in_flight(&m, 3, "three writes waiting for the locks");

    quick("cat README", &format!("cat {}", m.q("README")));
    let slots = quick(
        "ls a world",
        &format!("ls {}", m.q(&format!("slots/{WORLD}"))),
    );
    assert_eq!(slots.trim(), "1");
    let kept = quick("read a transcript", &format!("cat {transcript}"));
    assert_eq!(kept.lines().count(), 1, "{kept}");
    quick("ls", &format!("ls {}", m.q("")));

    all_timed_out(waiting, t0);
    let error = root_error(&m);
    assert!(error.contains(HELD), "root status error: {error}");
    let log = m.log_text();
    assert!(
        log.contains("slot records' lock") && log.contains("held.jsonl"),
        "not in the log"
    );

    // Released: the record and the entry that were there are intact, and
    // the same writes now go through.
    slots_lock.release();
    transcript_lock.release();
    assert!(m.read(&format!("slots/{WORLD}/1")).contains("\"first\""));
    assert!(!m.path(&format!("slots/{WORLD}/2")).exists());
    quick(
        "a slot write",
        &format!("echo '{{\"sessionId\":\"second\"}}' > {}", slot(2)),
    );
    quick("rm of a slot", &format!("rm {}", slot(1)));
    quick(
        "an append",
        &format!("echo '{{\"type\":\"more\"}}' >> {transcript}"),
    );
    let slots = sh_ok(&format!("ls {}", m.q(&format!("slots/{WORLD}"))));
    assert_eq!(slots.trim(), "2");
    let entries = m.read("agent-transcripts/held.jsonl");
    assert_eq!(entries.lines().count(), 2, "{entries}");
    assert!(entries.contains("\"start\"") && entries.contains("\"more\""));
}

#[test]
fn a_held_metadata_lock_never_stalls_a_listing_that_binds_a_conversation() {
    let host = Host::new();
    let rollout_id = "019eaaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee";
    let agent = codex_stand_in(&host, rollout_id);
    let codex_home = host.path("codex");
    let host = host
        .with_env("CODEX_HOME", codex_home.to_str().unwrap())
        .with_env("SESSIONFS_ENGINE_CODEX", agent.to_str().unwrap());
    let m = host.mount("m");
    sh_ok(&format!("mkdir {}", m.q("codex:mine")));

    let lock = HeldLock::take(&state(&host, "sidecar.lock"));
    sh_ok(&format!("echo open > {}", m.q("codex:mine/ctl")));
    let rollout = codex_home.join(format!(
        "sessions/2026/02/03/rollout-2026-02-03T04-05-06-{rollout_id}.jsonl"
    ));
    wait_for(20, "the stand-in's rollout", || {
        std::fs::read(&rollout).is_ok_and(|r| r.ends_with(b"\n") && r.len() > 200)
    });
    // The session is bound to its rollout while the record of it waits
    // for the lock: what shows it answers at once.
    let latest = m.q("codex:mine/transcript/latest");
    wait_for(10, "the transcript to show the rollout", || {
        let (ok, out, took) = timed(&format!("cat {latest}"));
        assert!(took < QUICK, "cat transcript/latest took {took:?}");
        ok && out.contains("prompt from the stand-in")
    });
    let listing = quick("ls", &format!("ls {}", m.q("")));
    assert!(listing.lines().any(|l| l == "codex:mine"), "{listing}");
    assert!(!listing.contains(rollout_id), "{listing}");
    quick("ls a session", &format!("ls -l {}", m.q("codex:mine")));
    quick("cat status", &format!("cat {}", m.q("status")));

    // Released: the binding is recorded.
    lock.release();
    wait_for(20, "the binding in the sidecar", || {
        quick("ls", &format!("ls {}", m.q("")));
        sidecar_records(&host.path("state/sessionfs"))
            .to_string()
            .contains(rollout_id)
    });
    let listing = sh_ok(&format!("ls {}", m.q("")));
    assert!(!listing.contains(rollout_id), "{listing}");
}

/// Two calls on one open file meet: a `close` of a duplicate of the
/// descriptor (as a child that inherited it closes it) commits what was
/// written so far, waiting for the held metadata lock, while a `write`
/// through the original comes. The write waits for the commit instead of
/// finding the file gone (EBADF), and the last close commits it all.
#[test]
fn a_write_while_a_close_of_the_same_file_commits_waits_for_it() {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::fs::OpenOptionsExt;
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:one")));
    let lock = HeldLock::take(&state(&host, "sidecar.lock"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TRUNC)
        .open(m.path("shell:one/title"))
        .unwrap();
    use std::io::Write;
    file.write_all(b"first").unwrap();
    // SAFETY: dup of a descriptor this test owns; the copy is owned by
    // the File made from it and closed once.
    let copy = unsafe { libc::dup(file.as_raw_fd()) };
    assert!(copy >= 0);
    let copy = unsafe { std::fs::File::from_raw_fd(copy) };
    let closer = std::thread::spawn(move || drop(copy));
    // Read here, not by a child: a child would close its inherited copy of
    // the file at its exec, which waits for the commit too (a child of
    // another test may, and adds its own).
    wait_for(10, "the close's commit", || {
        m.json("status")["slow_ops"]["in_flight"].as_u64() >= Some(1)
    });
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        tid_tx.send(nix::unistd::gettid().as_raw()).unwrap();
        let written = file.write_all(b"second\n");
        (written, file)
    });
    let tid = tid_rx.recv().unwrap();
    let me = std::process::id();
    wait_for(10, "the write to reach the daemon or end", || {
        std::fs::read_to_string(format!("/proc/{me}/task/{tid}/stack"))
            .map_or(true, |s| s.contains("fuse_"))
    });
    lock.release();
    closer.join().unwrap();
    let (written, file) = writer.join().unwrap();
    assert!(written.is_ok(), "the write: {written:?}");
    drop(file);
    assert_eq!(m.read("shell:one/title"), "firstsecond\n");
}

/// A stop that comes while a launch has a master but its wrapper has not
/// yet written the run record (a loaded machine): the master is found
/// through its socket and ended, so nothing starts the program later for
/// a session that was stopped (or archived). Seen as a master that
/// outlived the storm's stops.
#[test]
fn a_stop_ends_a_master_whose_run_record_is_not_written_yet() {
    use sessionfs::key::SessionKey;
    use sessionfs::runtime::RuntimePaths;
    let host = Host::new();
    let run = host.path("run/sessionfs");
    std::fs::create_dir_all(run.join("locks")).unwrap();
    let paths = RuntimePaths::new(&run, &run.join("locks"));
    let key = SessionKey::parse("shell:early").unwrap();
    let socket = paths.socket(&key);
    // A master as `dtach -n` leaves it, its program not started, no record.
    let status = std::process::Command::new("dtach")
        .arg("-n")
        .arg(&socket)
        .args(["-E", "-z", "sleep", "1000"])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(!paths.record(&key).exists());
    wait_for(5, "the master to answer", || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    assert_eq!(host.masters().len(), 1);
    sessionfs::runtime::launch::terminate(&paths, &key, std::time::Duration::from_secs(3));
    wait_for(5, "the master to be gone", || host.masters().is_empty());
    assert!(!socket.exists(), "its socket is removed");
}
