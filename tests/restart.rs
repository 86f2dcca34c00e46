//! A daemon restart loses nothing the old daemon held: every session's
//! scrollback, its screen rebuilt from it, its state settled. Through a real
//! mount, with real dtach masters and bash.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// The bytes of a session's `scrollback`, read with `cat`.
fn scrollback(m: &Mount, key: &str) -> Vec<u8> {
    sh(&format!("cat {}", m.q(&format!("{key}/scrollback")))).stdout
}

/// Twenty shells that printed and two that go on printing: after a crash of
/// the daemon and after a clean stop, the next daemon shows every byte the
/// old one had (what was printed while none ran is dtach's to drop), every
/// screen at once, and every `wait` settles.
#[test]
fn a_restart_keeps_every_scrollback_and_rebuilds_every_screen() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    let quiet: Vec<String> = (0..20).map(|i| format!("shell:q{i:02}")).collect();
    let busy = ["shell:printer-a", "shell:printer-b"];
    for key in &quiet {
        sh_ok(&format!("mkdir {}", m.q(key)));
        m.type_line(
            key,
            &format!("for i in $(seq 1 40); do echo {key}-line-$i; done"),
        );
    }
    for key in busy {
        sh_ok(&format!("mkdir {}", m.q(key)));
        m.type_line(
            key,
            &format!("i=0; while :; do i=$((i+1)); echo {key}-tick-$i; sleep 0.01; done"),
        );
    }
    for key in &quiet {
        m.wait_output_line(key, &format!("{key}-line-40"));
    }
    for key in busy {
        m.wait_output(key, &format!("{key}-tick-50"));
    }
    for crash in [true, false] {
        let before: Vec<(String, Vec<u8>)> = quiet
            .iter()
            .map(String::as_str)
            .chain(busy)
            .map(|key| (key.to_string(), scrollback(&m, key)))
            .collect();
        m.end(crash);
        drop(m);
        m = host.mount("mnt");
        let started = Instant::now();
        for (key, old) in &before {
            let new = scrollback(&m, key);
            assert!(
                new.starts_with(old),
                "{key} (crash: {crash}): {} bytes before, {} after, and they differ at {}",
                old.len(),
                new.len(),
                old.iter().zip(&new).take_while(|(a, b)| a == b).count()
            );
        }
        for (key, _) in &before {
            wait_for(2, &format!("{key}'s screen after the restart"), || {
                !m.read(&format!("{key}/screen")).trim().is_empty()
            });
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the screens took {:?}",
            started.elapsed()
        );
        for key in &quiet {
            let state = sh_ok(&format!("timeout 10 cat {}", m.q(&format!("{key}/wait"))));
            assert_eq!(state.trim(), "idle", "{key}");
            let screen = m.read(&format!("{key}/screen"));
            assert!(
                screen.contains(&format!("{key}-line-40")),
                "{key}: {screen}"
            );
        }
        for key in busy {
            let status = m.json(&format!("{key}/status"));
            assert_eq!(status["outcome"], "ATTACH", "{key}");
            // It went on printing, and the new daemon reads it.
            let ticks = scrollback(&m, key).len();
            wait_for(10, &format!("{key} printing again"), || {
                scrollback(&m, key).len() > ticks
            });
        }
    }
}

/// A shell has no transcript: its ring is its history. Archiving frees the
/// runtime and its kept ring, but keeps the bytes, compressed, so the
/// archived session's `scrollback` still reads them, also after a restart;
/// unarchiving starts a clean ring.
#[test]
fn an_archived_shell_keeps_what_it_showed() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    m.live_shell("shell:old");
    m.type_line("shell:old", "seq -f 'archived-%g' 1 3000");
    m.wait_output_line("shell:old", "archived-3000");
    let before = scrollback(&m, "shell:old");
    let ring = host.runtime_dir().join("shell:old.ring");
    assert!(
        ring.exists(),
        "the live ring is kept in the runtime directory"
    );
    sh_ok(&format!("mv {} {}", m.q("shell:old"), m.q("archived/")));
    assert!(!ring.exists(), "archive frees the runtime's ring");
    assert_eq!(scrollback(&m, "archived/shell:old"), before);
    let size = std::fs::metadata(m.path("archived/shell:old/scrollback"))
        .unwrap()
        .len();
    assert_eq!(size, before.len() as u64, "stat agrees with cat");
    let grep = sh_ok(&format!(
        "grep -c 'archived-[0-9]' {}",
        m.q("archived/shell:old/scrollback")
    ));
    assert_eq!(grep.trim(), "3000");

    m.end(true);
    drop(m);
    let m = host.mount("mnt");
    assert_eq!(
        scrollback(&m, "archived/shell:old"),
        before,
        "after a restart"
    );

    sh_ok(&format!("mv {} {}", m.q("archived/shell:old"), m.q("")));
    assert!(scrollback(&m, "shell:old").is_empty(), "a clean ring");
    m.type_line("shell:old", "echo back-again");
    m.wait_output("shell:old", "back-again");
    assert!(!String::from_utf8_lossy(&scrollback(&m, "shell:old")).contains("archived-1"));
}
