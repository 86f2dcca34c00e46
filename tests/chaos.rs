//! Many hostile clients at once on a live mount: 6–10 threads, each making
//! random real system calls (reads, writes, truncates, renames, editor
//! saves, directory calls, extended attributes, `ctl` commands, handles
//! held open) on shell sessions, never-started ones, Claude and Codex
//! conversations, slot worlds and hosted transcripts, while a sentinel
//! reads the root `status` and lists the root every 100 ms.
//!
//! Checked during the storm: every errno is one docs/ERRORS.md allows for
//! that call (never EIO, never ENOSYS), no call takes past the slow
//! operations' deadline and none hangs (a watchdog names the call and path
//! stuck past 20 s and fails the test), whole reads of JSON files parse,
//! and the sentinel is always answered within 2 s. After it: the daemon's
//! log holds no internal error or panic, blocked waits and slow operations
//! drain, every session stops, a fresh session echoes a line, the daemon's
//! threads (outside the slow-operation pool, which shrinks on its own when
//! idle) are back to what they were and its memory is bounded, and SIGTERM
//! unmounts with exit code 0, leaving no master, shell or child behind.
//!
//! The clients and the sentinel are in `chaos/scenario.rs`, what they must
//! never break and the checks after the storm in `chaos/invariants.rs`,
//! the watchdog in `chaos/watchdog.rs`.
//!
//! `CHAOS_SEED` (printed), `CHAOS_SECS` (default 22) and `CHAOS_THREADS`
//! (default 8) change the storm: `CHAOS_SECS=300 cargo test --release
//! --test chaos -- --nocapture` is a long run.

mod common;
/// The storm's parts, in `tests/chaos/`.
mod chaos {
    pub mod invariants;
    pub mod scenario;
    pub mod watchdog;
}

use chaos::invariants;
use chaos::scenario::{self, Shared, CLAUDE_ID, CODEX_ID, HOSTED, IDLE, LIVE, NEVER, WORLDS};
use chaos::watchdog;
use common::*;
use sessionfs::transcript::testgen::{claude, codex, Shape};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| {
            let v = v.trim();
            v.strip_prefix("0x")
                .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
        })
        .unwrap_or(default)
}

fn stand_in(host: &Host, name: &str) -> String {
    let path = host.path(name);
    std::fs::write(&path, "#!/bin/sh\nexec cat\n").unwrap();
    sh_ok(&format!("chmod +x '{}'", path.display()));
    path.display().to_string()
}

fn write_rel(m: &Mount, rel: &str, data: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .append(rel.starts_with("agent-transcripts/"))
        .create(true)
        .truncate(!rel.starts_with("agent-transcripts/"))
        .open(m.path(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
    f.write_all(data.as_bytes()).unwrap();
}

#[test]
fn a_storm_of_hostile_clients_leaves_the_daemon_answering_and_whole() {
    let seed = env_num("CHAOS_SEED", 0x5e55_10f5);
    let secs = env_num("CHAOS_SECS", 22);
    let threads = env_num("CHAOS_THREADS", 8).clamp(1, 32) as usize;
    eprintln!(
        "chaos: seed {seed:#x} (CHAOS_SEED), {secs} s (CHAOS_SECS), {threads} clients (CHAOS_THREADS)"
    );

    let host = Host::new();
    // Stores with a Claude and a Codex conversation; the Claude one grows
    // during the storm.
    let claude_file = host.path(&format!("claude/projects/-work-chaos/{CLAUDE_ID}.jsonl"));
    std::fs::create_dir_all(claude_file.parent().unwrap()).unwrap();
    let mut shape = Shape::new(40, seed);
    shape.half_line = false;
    let text = claude(&shape);
    let lines: Vec<Vec<u8>> = text
        .split_inclusive(|b| *b == b'\n')
        .map(|l| l.to_vec())
        .collect();
    let keep = lines.len() * 6 / 10;
    std::fs::write(&claude_file, lines[..keep].concat()).unwrap();
    let mut rest: Vec<Vec<u8>> = lines[keep..].to_vec();
    rest.reverse();
    let codex_file = host.path(&format!(
        "codex/sessions/2026/01/01/rollout-2026-01-01T00-00-00-{CODEX_ID}.jsonl"
    ));
    std::fs::create_dir_all(codex_file.parent().unwrap()).unwrap();
    std::fs::write(&codex_file, codex(&Shape::new(12, seed ^ 1))).unwrap();
    let claude_root = host.path("claude");
    let codex_root = host.path("codex");
    let fake_claude = stand_in(&host, "fake-claude");
    let fake_codex = stand_in(&host, "fake-codex");
    let host = host
        .with_env("CLAUDE_CONFIG_DIR", claude_root.to_str().unwrap())
        .with_env("CODEX_HOME", codex_root.to_str().unwrap())
        .with_env("SESSIONFS_ENGINE_CLAUDE", &fake_claude)
        .with_env("SESSIONFS_ENGINE_CODEX", &fake_codex)
        .with_env("AGENT_SESSIONS_SCROLLBACK_BYTES", "262144")
        .with_env("AGENT_SESSIONS_PROMPT_TIMEOUT", "5")
        .with_env("AGENT_SESSIONS_HISTORY_PAGE_TURNS", "4")
        .with_env("EDITOR", "/bin/true")
        .with_env("VISUAL", "/bin/true")
        // The storm, then the checks after it (each waits 20 s at most).
        .with_deadline(Duration::from_secs(secs + 300));
    let mut m = host.mount("mnt");

    for key in LIVE {
        m.live_shell(key);
    }
    sh_ok(&format!("mkdir {}", m.q(NEVER)));
    for key in IDLE {
        sh_ok(&format!("mkdir {}", m.q(key)));
    }
    for (i, w) in WORLDS.iter().enumerate() {
        for slot in 1..=3 - i {
            write_rel(
                &m,
                &format!("slots/{w}/{slot}"),
                &format!("{{\"sessionId\":\"seed-{slot}\",\"name\":\"n{slot}\"}}"),
            );
        }
    }
    for h in &HOSTED[..2] {
        for i in 0..9 {
            write_rel(
                &m,
                &format!("agent-transcripts/{h}.jsonl"),
                &format!("{{\"type\":\"text\",\"text\":\"seed {i}\"}}\n"),
            );
        }
    }
    let mut keys: Vec<String> = LIVE.iter().map(|k| k.to_string()).collect();
    keys.push(NEVER.into());
    keys.extend(IDLE.iter().map(|k| k.to_string()));
    keys.push(format!("claude:{CLAUDE_ID}"));
    keys.push(format!("codex:{CODEX_ID}"));
    keys.extend(HOSTED.iter().map(|h| format!("hosted:{h}")));
    for k in &keys[..keys.len() - 1] {
        assert!(m.path(k).exists(), "{k} is not there before the storm");
    }

    let before = invariants::before(&m);

    let shared = Arc::new(Shared {
        mnt: m.mnt.clone(),
        claude_store: claude_file.clone(),
        started: Instant::now(),
        stop: AtomicBool::new(false),
        keys: Mutex::new(keys),
        slots: (0..=threads).map(|_| Mutex::new(None)).collect(),
        ops: (0..threads).map(|_| Mutex::new(None)).collect(),
        violations: Mutex::new(vec![]),
        children: Mutex::new(vec![]),
        store_rest: Mutex::new(rest),
        tally: Mutex::new(BTreeMap::new()),
        sentinel_worst: Mutex::new(Duration::ZERO),
    });

    let handles = scenario::start(&shared, seed, threads);
    let rss_samples = watchdog::watch(&shared, &mut m, secs, &handles, seed);
    for h in handles {
        h.join().expect("a client panicked");
    }
    scenario::end_children(&shared);

    invariants::report(&shared, &m);
    invariants::no_violations(&shared, &m, seed);
    invariants::settled(&m);
    invariants::everything_stops(&host, &m);
    invariants::a_fresh_session_works(&host, &m);
    invariants::threads_and_memory_bounded(&m, &before, &rss_samples);
    invariants::clean_exit(&host, &mut m);
}
