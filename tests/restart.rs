//! A daemon restart loses nothing the old daemon held: every session's
//! scrollback, its screen rebuilt from it, its state settled. Through a real
//! mount, with real dtach masters and bash.

mod common;

use common::claude_stand_in::host_with_claude_stand_in;
use common::*;
use std::time::{Duration, Instant};

/// The bytes of a session's `scrollback`, read with `cat`.
fn scrollback(m: &Mount, key: &str) -> Vec<u8> {
    sh(&format!("cat {}", m.q(&format!("{key}/scrollback")))).stdout
}

/// Twenty shells that printed, two that go on printing and two agents that
/// answered a turn each: after a crash of the daemon and after a clean
/// stop, the next daemon shows every byte the old one had (what was
/// printed while none ran is dtach's to drop), every screen at once, and
/// every `wait` settles.
#[test]
fn a_restart_keeps_every_scrollback_and_rebuilds_every_screen() {
    let host = host_with_claude_stand_in();
    let mut m = host.mount("mnt");
    let agents = [
        "claude:11111111-2222-4333-8444-00000000a001",
        "claude:11111111-2222-4333-8444-00000000a002",
    ];
    for key in agents {
        sh_ok(&format!("mkdir {}", m.q(key)));
        sh_ok(&format!("echo open > {}", m.q(&format!("{key}/ctl"))));
        wait_for(20, "the stand-in's prompt box", || {
            m.read(&format!("{key}/state")) == "idle\n"
        });
        sh_ok(&format!(
            "echo 'a turn for {key}' > {}",
            m.q(&format!("{key}/prompt"))
        ));
        let state = sh_ok(&format!("timeout 20 cat {}", m.q(&format!("{key}/wait"))));
        assert_eq!(state, "idle\n", "{key}");
    }
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
            .chain(agents)
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
        for key in agents {
            let state = sh_ok(&format!("timeout 10 cat {}", m.q(&format!("{key}/wait"))));
            assert_eq!(state.trim(), "idle", "{key}");
            let screen = m.read(&format!("{key}/screen"));
            assert!(screen.contains('\u{276f}'), "{key}'s prompt box: {screen}");
            assert_eq!(m.json(&format!("{key}/status"))["outcome"], "ATTACH");
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

/// A terminal program as Node TUIs and bash are: it draws once at start and
/// again only when its size really changed (a resize to the same size,
/// which is all `redraw` and `dtach -a` send, it ignores). `first` is what
/// it draws at start, `later` what it draws after a change.
fn size_drawer(host: &Host, first: &str, later: &str) -> std::path::PathBuf {
    let path = host.path("drawer.py");
    std::fs::write(
        &path,
        format!(
            r#"import os, signal, sys, time
last = os.get_terminal_size()
def show(text, size):
    sys.stdout.write("\x1b[2J\x1b[H" + text + "\r\nsize %dx%d\r\n" % (size.columns, size.lines))
    sys.stdout.flush()
def changed(*_):
    global last
    size = os.get_terminal_size()
    if size != last:
        last = size
        show({later:?}, size)
signal.signal(signal.SIGWINCH, changed)
show({first:?}, last)
while True:
    time.sleep(1)
"#
        ),
    )
    .unwrap();
    path
}

/// The session's size as its `status` gives it: `COLSxROWS`.
fn size_of(m: &Mount, key: &str) -> String {
    m.json(&format!("{key}/status"))["size"]
        .as_str()
        .unwrap()
        .to_string()
}

/// What the program drew while no daemon was joined is lost, and it ignores
/// the join's redraw: a screen still blank a moment after the join gets a
/// real repaint (a size change and back), unless someone else is attached
/// to the master.
#[test]
fn a_blank_screen_after_a_restart_gets_a_real_repaint() {
    let host = Host::new();
    let drawer = size_drawer(&host, "FIRST", "REDRAWN");
    let mut m = host.mount("mnt");
    let key = "shell:tui";
    m.live_shell(key);
    m.type_line(key, &format!("exec python3 {}", drawer.display()));
    wait_for(20, "the first drawing", || {
        m.read(&format!("{key}/screen")).contains("FIRST")
    });
    let size = size_of(&m, key);
    let socket = m.json(&format!("{key}/status"))["socket"]
        .as_str()
        .unwrap()
        .to_string();

    // The drawing is lost: the ring is gone with the daemon.
    m.kill9();
    drop(m);
    std::fs::remove_file(host.runtime_dir().join(format!("{key}.ring"))).unwrap();
    let m = host.mount("mnt");
    wait_for(10, "a real repaint of the blank screen", || {
        m.read(&format!("{key}/screen")).contains("REDRAWN")
    });
    // The size went back: the program's last drawing is at the old size.
    wait_for(5, "the size put back", || {
        let screen = m.read(&format!("{key}/screen"));
        screen.contains("REDRAWN") && screen.lines().any(|l| l.trim() == format!("size {size}"))
    });
    assert_eq!(size_of(&m, key), size);

    // Someone is attached with dtach: their terminal is not made to jump.
    let mut person = std::process::Command::new("script")
        .args(["-qfc", &format!("dtach -a '{socket}' -r none"), "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for(10, "the person's client attached", || {
        let fds = std::fs::read_dir(format!(
            "/proc/{}/fd",
            m.json(&format!("{key}/status"))["master_pid"]
        ))
        .unwrap()
        .filter(|e| {
            std::fs::read_link(e.as_ref().unwrap().path())
                .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
        })
        .count();
        fds >= 3
    });
    let mut m = m;
    m.kill9();
    drop(m);
    std::fs::remove_file(host.runtime_dir().join(format!("{key}.ring"))).unwrap();
    let m = host.mount("mnt");
    wait_for(10, "the repaint declined", || {
        m.log_text().contains("other client(s) attached")
    });
    assert!(
        m.read(&format!("{key}/screen")).trim().is_empty(),
        "nothing was drawn for the daemon"
    );
    let _ = person.kill();
    let _ = person.wait();
}

/// A `busy` read from a screen that then stays still (drawn before a
/// restart, or the program drew nothing since) is judged again after 10 s
/// of no output, input or hook: the screen is repainted, and the state
/// follows what it shows.
#[test]
fn a_busy_state_the_screen_no_longer_backs_is_judged_again() {
    let host = Host::new();
    let drawer = size_drawer(
        &host,
        "✻ Working… (esc to interrupt)",
        "──────────────────────────────\r\n❯ \r\n──────────────────────────────",
    );
    let program = host.path("fake-claude");
    std::fs::write(
        &program,
        format!("#!/bin/sh\nexec python3 '{}'\n", drawer.display()),
    )
    .unwrap();
    sh_ok(&format!("chmod +x '{}'", program.display()));
    let host = host.with_env("SESSIONFS_ENGINE_CLAUDE", &program.display().to_string());
    let m = host.mount("mnt");
    let key = "claude:11111111-2222-4333-8444-666666666666";
    sh_ok(&format!("mkdir {}", m.q(key)));
    sh_ok(&format!("echo open > {}", m.q(&format!("{key}/ctl"))));
    wait_for(20, "busy from the screen", || {
        m.read(&format!("{key}/state")) == "busy\n"
    });
    let busy_at = Instant::now();
    let judged = wait_until(30, || m.read(&format!("{key}/state")) == "idle\n");
    assert!(
        judged,
        "still {} with the screen:\n{}\nevents:\n{}\nlog:\n{}",
        m.read(&format!("{key}/state")),
        m.read(&format!("{key}/screen")),
        m.read(&format!("{key}/events")),
        m.log_text()
    );
    assert!(
        busy_at.elapsed() >= Duration::from_secs(8),
        "judged again after {:?}, before the screen went stale",
        busy_at.elapsed()
    );
    assert!(m.log_text().contains("is stale; repainting"));
}

/// `kill -9` of the daemon in the middle of a launch, a prompt, an archive
/// or a `/clear`, 20 rounds: after each remount every session settles
/// (`timeout 10 cat wait` returns), no two masters write one conversation,
/// and the sidecar is whole.
#[test]
fn kill_9_at_any_moment_leaves_every_session_settled() {
    let host = host_with_claude_stand_in();
    let claude = "claude:11111111-2222-4333-8444-777777777777";
    {
        let m = host.mount("mnt");
        m.live_shell("shell:steady");
        sh_ok(&format!("mkdir {}", m.q(claude)));
        sh_ok(&format!("echo open > {}", m.q(&format!("{claude}/ctl"))));
        wait_for(20, "the stand-in's prompt box", || {
            m.read(&format!("{claude}/state")) == "idle\n"
        });
    }
    for round in 0..20u64 {
        // A mount point of its own each round: a client that outlives the
        // lazy unmount writes into the bare directory.
        let mut m = host.mount(&format!("mnt{round}"));
        let key = format!("shell:r{round}");
        let action = match round % 4 {
            0 => format!("mkdir {k} && echo open > {k}/ctl", k = m.q(&key)),
            1 => format!(
                "echo 'sleep 0.1; echo round-{round}' > {}",
                m.q("shell:steady/prompt")
            ),
            2 => {
                m.live_shell(&key);
                // By rename, or through a file: the daemon then tells the
                // kernel of the move itself, looking the new name up.
                if round % 8 == 2 {
                    format!("mv {} {}", m.q(&key), m.q("archived/"))
                } else {
                    format!("echo 1 > {}", m.q(&format!("{key}/archive")))
                }
            }
            _ => format!("printf '/clear\\r' > {}", m.q(&format!("{claude}/input"))),
        };
        let mut client = std::process::Command::new("bash")
            .args(["-c", &action])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Somewhere in the first 150 ms of it.
        std::thread::sleep(Duration::from_millis(round * 37 % 150));
        m.kill9();
        let _ = client.wait();
        drop(m);

        let m = host.mount(&format!("check{round}"));
        let root = sh_ok(&format!("ls {}", m.q("")));
        let archived = sh_ok(&format!("ls {}", m.q("archived")));
        let keys: Vec<String> = root
            .lines()
            .filter(|l| l.contains(':'))
            .map(str::to_string)
            .chain(archived.lines().map(|l| format!("archived/{l}")))
            .collect();
        for key in &keys {
            let waited = sh(&format!("timeout 10 cat {}", m.q(&format!("{key}/wait"))));
            assert!(
                waited.status.success(),
                "round {round}: {key}/wait did not settle ({}): state {}\nlog:\n{}",
                waited.status,
                m.read(&format!("{key}/state")),
                m.log_text()
            );
        }
        let masters = host.masters();
        let mut conversations: Vec<String> = keys
            .iter()
            .filter(|k| !k.starts_with("archived/"))
            .map(|k| m.json(&format!("{k}/status")))
            .filter(|s| s["state"] == "live")
            .map(|s| {
                let engine = s["key"]
                    .as_str()
                    .unwrap()
                    .split(':')
                    .next()
                    .unwrap()
                    .to_string();
                format!("{engine}:{}", s["conversation"].as_str().unwrap())
            })
            .collect();
        let live = conversations.len();
        conversations.sort();
        conversations.dedup();
        assert_eq!(
            conversations.len(),
            live,
            "round {round}: {conversations:?}"
        );
        assert!(
            masters.len() <= live,
            "round {round}: {masters:?} for {live} live sessions"
        );
        if let Err(e) =
            sessionfs::core::organize::sidecar::read_records(&host.path("state/sessionfs"))
        {
            panic!("round {round}: the metadata is torn: {e}");
        }
    }
    // The /clear rounds moved the stand-in's session on, each recorded.
    let m = host.mount("mnt");
    let status = m.json(&format!("{claude}/status"));
    let earlier = status["conversations"].as_array().unwrap().len();
    assert!(earlier >= 3, "{status}");
    let now = format!("claude:{}", status["conversation"].as_str().unwrap());
    assert_eq!(
        std::fs::read_link(m.path(&now)).unwrap().to_string_lossy(),
        claude
    );
}

/// The agent's own `/resume` may pick a conversation another master
/// writes: sessionfs cannot stop it, but says so in both sessions'
/// `status.error`, and claims nothing for the second writer.
#[test]
fn an_agent_resuming_a_conversation_another_master_writes_is_told_in_both() {
    let host = host_with_claude_stand_in();
    let m = host.mount("mnt");
    let a = "claude:11111111-2222-4333-8444-aaaaaaaaaaaa";
    let c_id = "11111111-2222-4333-8444-cccccccccccc";
    let c = format!("claude:{c_id}");
    for key in [a, c.as_str()] {
        sh_ok(&format!("mkdir {}", m.q(key)));
        sh_ok(&format!("echo open > {}", m.q(&format!("{key}/ctl"))));
        wait_for(20, "the prompt box", || {
            m.read(&format!("{key}/state")) == "idle\n"
        });
    }
    sh_ok(&format!(
        "printf '/resume {c_id}\\r' > {}",
        m.q(&format!("{a}/input"))
    ));
    for key in [a, c.as_str()] {
        wait_for(10, &format!("{key} told of the second writer"), || {
            m.json(&format!("{key}/status"))["error"]
                .as_str()
                .is_some_and(|e| e.contains("two processes write it"))
        });
    }
    assert!(
        !host
            .path("run/sessionfs/locks/claims")
            .join(format!("{c}.json"))
            .exists(),
        "no claim over a conversation its own master holds"
    );
    // It stays a session of its own: its master is live.
    assert!(std::fs::symlink_metadata(m.path(&c)).unwrap().is_dir());
}

/// Claude's hook claims the conversation a `/clear` switches to even
/// while no daemon runs: the next daemon finds the claim, and the new
/// conversation is a link to the session that writes it, never a session
/// a second process could be started on.
#[test]
fn a_clear_while_no_daemon_runs_is_claimed_by_the_hook() {
    let host = host_with_claude_stand_in();
    let key = "claude:11111111-2222-4333-8444-0000000c1ea2";
    let mut m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q(key)));
    sh_ok(&format!("echo open > {}", m.q(&format!("{key}/ctl"))));
    wait_for(20, "the prompt box", || {
        m.read(&format!("{key}/state")) == "idle\n"
    });
    let socket = m.json(&format!("{key}/status"))["socket"]
        .as_str()
        .unwrap()
        .to_string();
    m.end(false);
    drop(m);

    // Typed with dtach itself while no daemon runs.
    sh_ok(&format!("printf '/clear\\r' | dtach -p '{socket}'"));
    let claims = host.runtime_dir().join("locks/claims");
    wait_for(10, "the hook's claim", || {
        std::fs::read_dir(&claims).is_ok_and(|d| d.count() == 1)
    });
    let claim_file = std::fs::read_dir(&claims).unwrap().next().unwrap().unwrap();
    let claim: serde_json::Value =
        serde_json::from_slice(&std::fs::read(claim_file.path()).unwrap()).unwrap();
    assert_eq!(claim["by"], key, "{claim}");
    let new_key = claim["conversation"].as_str().unwrap().to_string();

    let m = host.mount("mnt");
    let link = std::fs::read_link(m.path(&new_key)).unwrap();
    assert_eq!(link.to_string_lossy(), key);
    let listing = sh_ok(&format!("ls {}", m.q("")));
    assert!(!listing.lines().any(|l| l == new_key), "{listing}");
    // Opening it opens the session's master: still one.
    sh_ok(&format!("echo open > {}", m.q(&format!("{new_key}/ctl"))));
    assert_eq!(host.masters().len(), 1);
    wait_for(10, "the session to follow its process", || {
        let status = m.json(&format!("{key}/status"));
        format!("claude:{}", status["conversation"].as_str().unwrap()) == new_key
    });
}
