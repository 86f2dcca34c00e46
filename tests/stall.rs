//! Stuck sessions: programs that never read their terminal, with writers
//! blocked on them, must not slow down anything else, and `stop` must work.

mod common;

use common::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What each probe must answer within (the bench measures the real latency).
const QUICK: Duration = Duration::from_secs(2);
/// A write to a master that takes nothing ends within this (STALL is 3 s).
const WRITER_DEADLINE: Duration = Duration::from_secs(6);

/// Runs a command line, killed if it hangs; returns (success, stdout, time).
fn timed(cmd: &str) -> (bool, String, Duration) {
    let t0 = Instant::now();
    let out = sh(&format!("timeout -s KILL 20 bash -c {}", shell_quote(cmd)));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        t0.elapsed(),
    )
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Asserts `cmd` succeeds within [`QUICK`]; returns its stdout.
fn quick(what: &str, cmd: &str) -> String {
    let (ok, out, took) = timed(cmd);
    assert!(ok, "{what}: `{cmd}` failed");
    assert!(took < QUICK, "{what} took {took:?}");
    out
}

/// A shell session whose program puts the terminal in raw mode and never
/// reads it again.
fn make_stuck(m: &Mount, key: &str) {
    sh_ok(&format!("mkdir {}", m.q(key)));
    m.type_line(key, "stty raw -echo; exec sleep 1000000");
    wait_for(20, &format!("{key} to run sleep"), || {
        let status = m.json(&format!("{key}/status"));
        status["agent_pid"].as_u64().is_some_and(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\0"))
        })
    });
}

/// A process writing 4 MiB to a session's input, 1 MiB per `write`: the
/// first one is already more than a master that stopped can take.
fn big_writer(m: &Mount, key: &str) -> (Child, Instant) {
    let child = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec dd if=/dev/zero of={} bs=1M count=4 conv=notrunc status=none",
            m.q(&format!("{key}/input"))
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, Instant::now())
}

/// Whether `pid` is inside a `write` to the mount, waiting for the daemon
/// (or for the file's lock, held by another write the daemon has not answered).
fn waits_on_fuse(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stack")).is_ok_and(|stack| {
        stack.contains("fuse_file_write_iter")
            && (stack.contains("request_wait_answer") || stack.contains("rwsem"))
    })
}

/// Whether a session's master is stuck writing to its PTY (the program
/// reads nothing, the PTY's buffer is full).
fn master_stuck(m: &Mount, key: &str) -> bool {
    let pid = m.json(&format!("{key}/status"))["master_pid"]
        .as_u64()
        .unwrap();
    std::fs::read_to_string(format!("/proc/{pid}/stack")).is_ok_and(|s| s.contains("tty_write"))
}

/// A writer is blocked for good once its master is stuck while it writes:
/// its first `write` alone is more than the socket and the PTY hold.
fn blocked(m: &Mount, key: &str, writer: &Child) -> bool {
    master_stuck(m, key) && waits_on_fuse(writer.id())
}

fn in_flight(m: &Mount) -> u64 {
    m.json("status")["slow_ops"]["in_flight"].as_u64().unwrap()
}

/// Waits for a writer to end; returns (success, stderr, time since start).
fn finish(child: Child, started: Instant) -> (bool, String, Duration) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn six_stuck_sessions_slow_down_nothing_and_stop_works_on_them() {
    let host = Host::new();
    let m = host.mount("m");
    let stuck: Vec<String> = (0..6).map(|i| format!("shell:stuck{i}")).collect();
    for key in &stuck {
        make_stuck(&m, key);
    }
    sh_ok(&format!("mkdir {}", m.q("shell:healthy")));
    m.type_line("shell:healthy", "echo ready");
    m.wait_output("shell:healthy", "ready");

    let writers: Vec<(Child, Instant)> = stuck.iter().map(|k| big_writer(&m, k)).collect();
    wait_for(10, "six writers blocked", || {
        stuck
            .iter()
            .zip(&writers)
            .all(|(key, (c, _))| blocked(&m, key, c))
    });
    // A writer seen waiting may still be in its first write (sent from the
    // request thread until the socket filled); its next one goes to the pool.
    wait_for(10, "six slow writes in flight", || in_flight(&m) >= 6);
    let status = m.json("status");
    assert_eq!(status["slow_ops"]["limit"], 64);

    // While they are blocked, everything else answers at once.
    let root = quick("cat status", &format!("cat {}", m.q("status")));
    let root: serde_json::Value = serde_json::from_str(&root).unwrap();
    assert!(root["slow_ops"]["in_flight"].as_u64().unwrap() >= 6);
    let listing = quick("ls", &format!("ls {}", m.q("")));
    for key in stuck.iter().chain([&"shell:healthy".to_string()]) {
        assert!(listing.lines().any(|l| l == key), "{key} not listed");
    }
    let scroll = quick(
        "another session's scrollback",
        &format!("cat {}", m.q("shell:healthy/scrollback")),
    );
    assert!(scroll.contains("ready"));
    quick(
        "input to a healthy session",
        &format!("echo 'echo al''ive' > {}", m.q("shell:healthy/input")),
    );
    quick("mkdir", &format!("mkdir {}", m.q("shell:fresh")));
    quick("stop", &format!("echo stop > {}", m.q("shell:stuck0/ctl")));
    m.wait_output("shell:healthy", "alive");
    assert_eq!(m.json("shell:stuck0/status")["state"], "stopped");

    // Every blocked writer ends with an error: the stopped one at once,
    // the others at the stall deadline.
    for (i, (child, started)) in writers.into_iter().enumerate() {
        let (ok, err, took) = finish(child, started);
        assert!(!ok, "writer {i} succeeded");
        assert!(took < WRITER_DEADLINE, "writer {i} ended after {took:?}");
        if i > 0 {
            assert!(
                err.contains("Resource temporarily unavailable"),
                "writer {i}: {err}"
            );
        }
    }
    let error = m.json("shell:stuck1/status")["error"].clone();
    assert!(
        error.as_str().is_some_and(|e| e.contains("stalled")),
        "status.error: {error}"
    );
    // Still stuck: a new write fails at once rather than waiting again.
    let (ok, _, took) = timed(&format!("echo more > {}", m.q("shell:stuck1/input")));
    assert!(!ok && took < QUICK, "{ok} {took:?}");
    // And stop ends it.
    quick("stop", &format!("echo stop > {}", m.q("shell:stuck1/ctl")));
    wait_for(10, "the pool to drain", || in_flight(&m) == 0);
    assert!(alive(m.pid()), "the daemon died");
}

#[test]
fn a_resize_queued_behind_a_stuck_write_does_not_hold_up_stop() {
    let host = Host::new();
    let m = host.mount("m");
    let key = "shell:wedged";
    make_stuck(&m, key);
    let master = m.json(&format!("{key}/status"))["master_pid"]
        .as_u64()
        .unwrap() as u32;
    let (writer, started) = big_writer(&m, key);
    wait_for(10, "the writer blocked", || blocked(&m, key, &writer));
    wait_for(10, "the write in flight", || in_flight(&m) >= 1);
    let ctl = m.q(&format!("{key}/ctl"));
    let mut resize = Command::new("bash")
        .arg("-c")
        .arg(format!("exec /bin/echo 'resize 100x30' > {ctl}"))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    // The stop comes after the resize has reached the daemon (or already
    // been answered): the kernel then queues it behind the resize.
    wait_for(10, "the resize to reach the daemon", || {
        waits_on_fuse(resize.id()) || resize.try_wait().unwrap().is_some()
    });
    quick("stop after a queued resize", &format!("echo stop > {ctl}"));
    let resize = finish(resize, t0);
    assert!(resize.2 < QUICK, "resize took {:?}", resize.2);
    let (ok, _, took) = finish(writer, started);
    assert!(!ok, "the blocked write succeeded");
    assert!(took < WRITER_DEADLINE, "the writer ended after {took:?}");
    wait_for(10, "the master to exit", || !alive(master));
    assert_eq!(m.json(&format!("{key}/status"))["state"], "stopped");
    // The session opens again.
    m.type_line(key, "echo back");
    m.wait_output(key, "back");
}

/// A `stop` while a launch waits for its master: the stop ends the master
/// it finds, and the launch, which would wait for it to answer, is undone
/// at once with ECANCELED; nothing is left running, and the next write
/// launches the session afresh. (A `dtach` that hands the master over a
/// second late holds the launch in that wait.)
#[test]
fn a_stop_during_a_launch_cancels_it_at_once_and_leaves_no_master() {
    let host = Host::new();
    let slow = host.path("slow-dtach");
    std::fs::write(&slow, "#!/bin/sh\n/usr/bin/dtach \"$@\" || exit\nsleep 1\n").unwrap();
    sh_ok(&format!("chmod +x '{}'", slow.display()));
    let host = host.with_env("SESSIONFS_DTACH", slow.to_str().unwrap());
    let m = host.mount("m");
    let key = "shell:late";
    sh_ok(&format!("mkdir {}", m.q(key)));
    let started = Instant::now();
    let writer = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "echo 'echo early' > {}",
            m.q(&format!("{key}/input"))
        ))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The program runs (its wrapper wrote the run record): a stop ends it.
    let record = host.runtime_dir().join(format!("{key}.run.json"));
    wait_for(5, "the launched master's record", || record.exists());
    quick(
        "stop during the launch",
        &format!("echo stop > {}", m.q(&format!("{key}/ctl"))),
    );
    let (ok, stderr, took) = finish(writer, started);
    assert!(!ok, "the write went through");
    assert!(stderr.contains("Operation canceled"), "{stderr}");
    assert!(
        took < Duration::from_secs(5),
        "the writer ended after {took:?}"
    );
    wait_for(10, "no master left", || host.masters().is_empty());
    assert!(
        m.json(&format!("{key}/status"))["error"]
            .as_str()
            .is_some_and(|e| e.contains("stopped while it was being opened")),
        "{}",
        m.json(&format!("{key}/status"))
    );
    m.type_line(key, "echo back-$((40+2))");
    m.wait_output_line(key, "back-42");
}
