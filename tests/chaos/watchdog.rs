//! The storm's watchdog: until every client has stopped, no call may be
//! stuck past [`HANG`] and no step past [`STEP_HANG`]; a hang writes down
//! where every thread waits and fails the test. (The harness's deadline,
//! `common::watchdog`, bounds the whole test.)

use super::invariants::rss_kib;
use super::scenario::{end_children, sys, Shared};
use crate::common::watchdog::{stacks, tail};
use crate::common::Mount;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A call past this is a hang: the watchdog fails the test.
pub const HANG: Duration = Duration::from_secs(20);
/// One step of a client (a few calls) past this is a hang too.
pub const STEP_HANG: Duration = Duration::from_secs(60);

/// Writes where every thread of the daemon and of this test waits (kernel
/// stacks, and the daemon's own with gdb when it is installed) to a file
/// that outlives the test; returns its path.
pub fn dump(daemon: u32, why: &str) -> PathBuf {
    let path = PathBuf::from(format!(
        "/tmp/chaos-dump-{}-{}.txt",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    ));
    let mut text = format!("{why}\n\ndaemon {daemon}:\n{}\n", stacks(daemon));
    text.push_str(&format!(
        "test {}:\n{}\n",
        std::process::id(),
        stacks(std::process::id())
    ));
    // gdb stops the daemon while it looks: only when asked.
    if std::env::var_os("CHAOS_GDB").is_none() {
        let _ = std::fs::write(&path, text);
        return path;
    }
    let gdb = Command::new("timeout")
        .args([
            "-s",
            "KILL",
            "60",
            "gdb",
            "-p",
            &daemon.to_string(),
            "-batch",
            "-ex",
            "thread apply all bt",
        ])
        .stdin(Stdio::null())
        .output();
    if let Ok(out) = gdb {
        text.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    let _ = std::fs::write(&path, text);
    path
}

/// Aborts the FUSE connection of the mount at `mnt` (its number is the
/// mount's device minor).
pub fn abort_connection(mnt: &Path) {
    if let Ok(st) = sys::stat(mnt, false) {
        let minor = libc::minor(st.st_dev);
        let _ = std::fs::write(format!("/sys/fs/fuse/connections/{minor}/abort"), "1");
    }
}

/// Watches the clients and the sentinel (the last slot) until every one of
/// `handles` has finished, telling them to stop once `secs` have passed;
/// returns the daemon's memory (MiB) every 5 s. A hang ends the clients'
/// children, the FUSE connection and the daemon, and fails the test.
pub fn watch(
    shared: &Shared,
    m: &mut Mount,
    secs: u64,
    handles: &[JoinHandle<()>],
    seed: u64,
) -> Vec<u64> {
    let daemon = m.pid();
    let threads = shared.ops.len();
    // The watchdog: until every client has stopped, nothing may be stuck.
    // A sentinel call slow past 1.5 s has the daemon's threads written down
    // once, while they are still where they wait.
    let until = Instant::now() + Duration::from_secs(secs);
    let mut hung: Vec<String> = vec![];
    let mut dumped = false;
    // The daemon's memory every 5 s: growth that does not level off shows.
    let mut rss_samples: Vec<u64> = vec![];
    let mut next_sample = Instant::now();
    loop {
        if Instant::now() >= next_sample {
            rss_samples.push(rss_kib(daemon) / 1024);
            next_sample += Duration::from_secs(5);
        }
        if Instant::now() >= until {
            shared.stop.store(true, Ordering::Relaxed);
        }
        for (i, slot) in shared.slots.iter().enumerate() {
            let Some((what, since)) = slot.lock().unwrap().clone() else {
                continue;
            };
            if since.elapsed() > HANG {
                hung.push(format!("thread {i}: {what} for {:.1?}", since.elapsed()));
            } else if i == threads && since.elapsed() > Duration::from_millis(1500) && !dumped {
                dumped = true;
                let file = dump(daemon, &format!("sentinel slow: {what}"));
                eprintln!(
                    "chaos: the sentinel waits: threads written to {}",
                    file.display()
                );
            }
        }
        for (i, op) in shared.ops.iter().enumerate() {
            if let Some((what, since)) = op.lock().unwrap().clone() {
                if since.elapsed() > STEP_HANG {
                    hung.push(format!(
                        "client {i}: step {what:?} for {:.1?}",
                        since.elapsed()
                    ));
                }
            }
        }
        if !hung.is_empty() || handles.iter().all(|h| h.is_finished()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if !hung.is_empty() {
        let report = format!("chaos: seed {seed:#x}: stuck calls:\n{}", hung.join("\n"));
        eprintln!("{report}");
        let file = dump(daemon, &report);
        eprintln!("chaos: threads written to {}", file.display());
        end_children(shared);
        // A daemon thread may wait in the kernel on its own mount: only
        // aborting the connection frees everyone.
        abort_connection(&m.mnt);
        m.kill9();
        panic!("{report}\nlog tail:\n{}", tail(&m.log_text(), 40));
    }
    rss_samples
}
