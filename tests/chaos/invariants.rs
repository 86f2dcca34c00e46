//! What the storm must never break: the errnos each call may give
//! (docs/ERRORS.md), how long an answer may take, and the checks after it
//! (no internal error, waits drained, every session stopped and nothing of
//! it left running, threads and memory back in bounds).

use super::scenario::{Shared, NEVER};
use crate::common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The slow operations' deadline is 15 s; a call answered later than this
/// broke it.
pub const TOO_LONG: Duration = Duration::from_secs(17);
/// The sentinel's reads must be answered within this.
pub const SENTINEL_LIMIT: Duration = Duration::from_secs(2);
use libc::{
    EACCES, EAGAIN, EBUSY, ECANCELED, EFBIG, EINVAL, ENOENT, ENOSPC, ENOTCONN, EPERM, EPIPE,
    ETIMEDOUT,
};

pub fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::EPIPE => "EPIPE",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ELOOP => "ELOOP",
        libc::ENODATA => "ENODATA",
        libc::ENOTCONN => "ENOTCONN",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ESTALE => "ESTALE",
        libc::ECANCELED => "ECANCELED",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENOTTY => "ENOTTY",
        libc::ENODEV => "ENODEV",
        libc::E2BIG => "E2BIG",
        libc::ERANGE => "ERANGE",
        0 => "ok",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}

// ---------------------------------------------------------------------------
// What each file allows, by its name.

pub fn is_oneline(name: &str) -> bool {
    matches!(name, "title" | "project" | "favourite" | "archive")
}

/// Editors' scratch names the clients use.
pub const SCRATCH: [&str; 8] = [
    ".meta.json.swp",
    "4913",
    "meta.json~",
    "#meta.json#",
    ".#meta.json",
    "sedAb12Cd",
    "title.tmp",
    "notes",
];

/// What opening `input` or `prompt` for writing may give (ERRORS.md): a
/// session that takes no input refuses at the open (EPERM: archived or
/// hosted; EBUSY: a prompt to an agent waiting for an answer).
pub fn open_to_write_errnos(name: &str) -> Vec<i32> {
    let mut allowed = vec![ENOENT, EPERM];
    if name == "prompt" {
        allowed.push(EBUSY);
    }
    allowed
}

/// Errnos of a `write` to a file of this name (in a session directory
/// unless `in_root`; slot records and transcripts by their own names).
pub fn write_errnos(rel: &str, name: &str) -> Vec<i32> {
    let mut v = vec![ENOENT];
    if rel.starts_with("slots/") {
        v.extend([EINVAL, EFBIG, ENOSPC, EAGAIN, ETIMEDOUT]);
    } else if rel.starts_with("agent-transcripts/") {
        v.extend([EINVAL, EFBIG, EAGAIN, ETIMEDOUT]);
    } else if rel == "ctl" {
        v.extend([EINVAL, EPERM, EAGAIN, ETIMEDOUT, ENOSPC]);
    } else {
        match name {
            "input" => v.extend([EPERM, EBUSY, EAGAIN, ETIMEDOUT, EPIPE, ECANCELED, EACCES]),
            "ctl" => v.extend([
                EINVAL, ENOTCONN, EAGAIN, ETIMEDOUT, EBUSY, ECANCELED, EPERM, EPIPE,
            ]),
            "prompt" => v.push(EINVAL),
            "meta.json" => v.extend([EINVAL, EFBIG]),
            n if is_oneline(n) => v.extend([EINVAL, EFBIG]),
            _ => v.extend([EFBIG, ENOSPC]),
        }
    }
    v
}

/// Errnos of the `close` (or `fsync`) of a handle that wrote.
pub fn close_errnos(rel: &str, name: &str) -> Vec<i32> {
    let mut v = vec![];
    if rel.starts_with("slots/") {
        v.extend([EINVAL, EAGAIN, ETIMEDOUT, ENOSPC, EFBIG, ENOENT]);
    } else if rel.starts_with("agent-transcripts/") {
        v.extend([EINVAL, EAGAIN, ETIMEDOUT, EFBIG]);
    } else {
        match name {
            "prompt" => v.extend([
                EINVAL, EPERM, EPIPE, ETIMEDOUT, ENOENT, EAGAIN, EBUSY, ECANCELED,
            ]),
            "meta.json" => v.extend([EINVAL, ETIMEDOUT, EAGAIN, ENOENT, EFBIG]),
            n if is_oneline(n) => v.extend([EINVAL, ETIMEDOUT, EAGAIN, ENOENT, EFBIG]),
            _ => {}
        }
    }
    v
}

/// Threads of `pid`, by name.
pub fn thread_names(pid: u32) -> BTreeMap<String, usize> {
    let mut names = BTreeMap::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            *names.entry(comm.trim().to_string()).or_insert(0) += 1;
        }
    }
    names
}

pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Reads a file of `/proc` on a thread of its own, for at most a second:
/// some of them wait for a process that is in `execve` (see
/// `procinfo::status` in the daemon).
pub fn read_bounded(path: String) -> Option<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::read(path).ok());
    });
    rx.recv_timeout(Duration::from_secs(1)).ok().flatten()
}

/// Processes whose environment names this host's home: every shell,
/// master and program the daemon started (and the daemon itself).
pub fn host_processes(home: &Path) -> Vec<(u32, String)> {
    let needle = format!("HOME={}", home.display());
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Some(env) = read_bounded(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let zombie = status
            .lines()
            .any(|l| l.starts_with("State:") && (l.contains('Z') || l.contains('X')));
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) && !zombie {
            let cmd = read_bounded(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            found.push((pid, cmd));
        }
    }
    found
}

/// What the storm did: the calls by errno and the slowest of each, the
/// sentinel's slowest answer, the daemon's counters after it.
pub fn report(shared: &Shared, m: &Mount) {
    // What the storm did.
    let tally = shared.tally.lock().unwrap().clone();
    let total: u64 = tally.values().map(|v| v.0).sum();
    eprintln!(
        "chaos: {total} calls in {:.1?}; sentinel's slowest answer {:.1?}",
        shared.started.elapsed(),
        *shared.sentinel_worst.lock().unwrap()
    );
    for ((op, errno), (n, worst)) in &tally {
        eprintln!("chaos:   {op:<16} {errno:<12} {n:>7}  slowest {worst:.1?}");
    }
    let status = m.json("status");
    eprintln!(
        "chaos: status after: slow_ops {} waits {} inodes {} runtimes {}",
        status["slow_ops"], status["waits"], status["inodes"], status["runtimes"]
    );
}

/// (1)–(3): every errno was one allowed, no call was answered too late,
/// the sentinel was always answered, and no handler failed inside the
/// daemon.
pub fn no_violations(shared: &Shared, m: &Mount, seed: u64) {
    // (1), (2): every errno allowed, nothing too slow, the sentinel answered.
    let violations = shared.violations.lock().unwrap().clone();
    let log = m.log_text();
    // (3): no handler failed inside the daemon.
    let internal: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("internal error") || l.contains("panicked"))
        .take(20)
        .collect();
    if !violations.is_empty() || !internal.is_empty() {
        let kept = format!("/tmp/chaos-{}-daemon.log", std::process::id());
        let _ = std::fs::copy(&m.log, &kept);
        eprintln!("chaos: the daemon's log is kept in {kept}");
    }
    assert!(
        violations.is_empty() && internal.is_empty(),
        "seed {seed:#x}: {} violations:\n{}\n\ninternal errors in the log:\n{}",
        violations.len(),
        violations
            .iter()
            .take(60)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n"),
        internal.join("\n")
    );
}

/// Blocked waits and slow operations drain, inode numbers stay bounded,
/// the session nobody wrote to never started, and no archived session runs.
pub fn settled(m: &Mount) {
    // Blocked waits and slow operations drain.
    wait_for(20, "blocked waits and slow operations to drain", || {
        let s = m.json("status");
        s["waits"] == 0 && s["slow_ops"]["in_flight"] == 0
    });
    let inodes = m.json("status")["inodes"].as_u64().unwrap();
    assert!(inodes <= 16_384 + 1024, "{inodes} inode numbers held");

    // The session nobody wrote to never started.
    let never = if m.path(NEVER).exists() {
        m.json(&format!("{NEVER}/status"))
    } else {
        m.json(&format!("archived/{NEVER}/status"))
    };
    assert!(
        never["outcome"].is_null() && never["master_pid"].is_null(),
        "{NEVER} was started: {never}"
    );

    // No archived session runs (an archive ends its processes, and no
    // open that raced with it starts them again).
    for entry in std::fs::read_dir(m.path("archived")).unwrap().flatten() {
        let key = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("archived/{key}/status");
        wait_for(10, &format!("{key}, archived, to have no master"), || {
            !m.path(&rel).exists() || m.json(&rel)["master_pid"].is_null()
        });
    }
    let log = m.log_text();
    let resets: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("screen mirror failed"))
        .collect();
    eprintln!(
        "chaos: screen mirror resets (vt100 panics it contained): {}",
        resets.len()
    );
    for line in resets.iter().take(5) {
        eprintln!("chaos:   {line}");
    }
}

/// (4) Every listed session stops, and no master, shell or program of the
/// test is left but the daemon.
pub fn everything_stops(host: &Host, m: &Mount) {
    let daemon = m.pid();
    // (4) Every session stops; no master, shell or program is left.
    let live_keys: Vec<String> = std::fs::read_dir(&m.mnt)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(':'))
        .collect();
    for key in &live_keys {
        if key.starts_with("hosted:") {
            continue;
        }
        let out = sh(&format!(
            "timeout 20 sh -c 'echo stop > {}'",
            m.q(&format!("{key}/ctl"))
        ));
        assert!(
            out.status.success(),
            "stop of {key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if !wait_until(20, || host.masters().is_empty()) {
        let left = host.masters();
        // What a failure needs to be understood: whose masters, and what
        // the daemon said of those sessions.
        let archived: Vec<String> = std::fs::read_dir(m.path("archived"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let log = m.log_text();
        for pid in &left {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            eprintln!("chaos: master {pid} left: {cmdline}");
            // Everything the daemon said of that session.
            let key = cmdline
                .split(" --key ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .unwrap_or("?");
            for line in log.lines().filter(|l| l.contains(key)) {
                eprintln!("chaos: of {key}: {line}");
            }
        }
        eprintln!("chaos: listed {live_keys:?}; archived {archived:?}");
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        for line in tail.iter().rev() {
            eprintln!("chaos: log: {line}");
        }
        panic!("masters {left:?} outlived the stop of every listed session");
    }
    let home = host.path("home");
    wait_for(20, "every shell and program of the test to end", || {
        host_processes(&home).iter().all(|(pid, _)| *pid == daemon)
    });
}

/// A fresh session works after the storm.
pub fn a_fresh_session_works(host: &Host, m: &Mount) {
    // A fresh session works.
    m.live_shell("shell:after");
    m.type_line("shell:after", "echo after-$((40+2))");
    m.wait_output_line("shell:after", "after-42");
    sh_ok(&format!("echo stop > {}", m.q("shell:after/ctl")));
    wait_for(20, "the fresh session's master to end", || {
        host.masters().is_empty()
    });
}

/// The daemon's threads and memory before the storm.
pub struct Before {
    pub threads: BTreeMap<String, usize>,
    /// Threads in the slow-operation pool.
    pub pool: u64,
    pub rss: u64,
}

/// Takes [`Before`] and prints it.
pub fn before(m: &Mount) -> Before {
    let daemon = m.pid();
    let threads_before = thread_names(daemon);
    let pool_before = m.json("status")["slow_ops"]["threads"]
        .as_u64()
        .unwrap_or(0);
    let rss_before = rss_kib(daemon);
    eprintln!(
        "chaos: daemon {daemon}: {} threads ({pool_before} in the pool), {rss_before} KiB before",
        threads_before.values().sum::<usize>()
    );
    Before {
        threads: threads_before,
        pool: pool_before,
        rss: rss_before,
    }
}

/// (5) Threads back to what they were and memory bounded; `rss_samples`
/// (MiB, every 5 s of the storm) shows the curve.
pub fn threads_and_memory_bounded(m: &Mount, before: &Before, rss_samples: &[u64]) {
    let threads_before = before.threads.clone();
    let (pool_before, rss_before) = (before.pool, before.rss);
    let daemon = m.pid();
    // (5) Threads back to what they were (the pool's own shrink when idle
    // for 30 s, and are capped at 72); memory bounded.
    let threads_after = thread_names(daemon);
    let pool_after = m.json("status")["slow_ops"]["threads"]
        .as_u64()
        .unwrap_or(0);
    let others =
        |t: &BTreeMap<String, usize>, pool: u64| t.values().sum::<usize>() as i64 - pool as i64;
    let (before, after) = (
        others(&threads_before, pool_before),
        others(&threads_after, pool_after),
    );
    eprintln!(
        "chaos: threads outside the pool: {before} before, {after} after ({pool_after} in the pool); {threads_before:?} -> {threads_after:?}"
    );
    assert!(pool_after <= 72, "{pool_after} pool threads");
    assert!(
        after <= before + 2,
        "threads grew: {threads_before:?} -> {threads_after:?}"
    );
    // Bounded memory. Per session the clients use (at most 40): a 256 KiB
    // ring and a VT mirror of two grids (main and alternate) of at most
    // 301×101 cells, the largest `resize` sent here, at about 40 bytes a
    // cell: 2.7 MiB. Then the editors' scratch files, 64 MiB at most,
    // slot worlds of a few KiB, the request threads' 2 MiB reply buffers
    // and the allocator's slack (64 MiB). Growth that does not level off
    // passes that in a long run (`rss_samples` shows the curve).
    let per_session = 256 * 1024 + 2 * 301 * 101 * 40;
    let cap_kib = (40 * per_session + (64 << 20) + (64 << 20)) / 1024;
    let rss_after = rss_kib(daemon);
    eprintln!(
        "chaos: RSS {rss_before} KiB before, {rss_after} KiB after (cap {cap_kib} KiB over the start); every 5 s (MiB): {rss_samples:?}"
    );
    assert!(
        rss_after < rss_before + cap_kib as u64,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
}

/// SIGTERM unmounts cleanly (exit code 0), leaving nothing running and no
/// internal error in the log.
pub fn clean_exit(host: &Host, m: &mut Mount) {
    let home = host.path("home");
    // SIGTERM unmounts cleanly.
    assert_eq!(m.terminate(), Some(0), "the daemon's exit code");
    assert!(!is_mounted(&m.mnt), "still mounted");
    let left = host_processes(&home);
    assert!(left.is_empty(), "left running: {left:?}");
    let log = m.log_text();
    let internal: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("internal error") || l.contains("panicked"))
        .collect();
    assert!(internal.is_empty(), "{internal:?}");
}
