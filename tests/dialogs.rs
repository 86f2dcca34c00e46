//! Answering an agent from a script: what a prompt does while the agent
//! asks something, and refusals a shell's `echo` reports. Through a real
//! mount, with a Claude stand-in (the real CLIs are in `agents_mount.rs`).

mod common;

use common::claude_stand_in::host_with_claude_stand_in;
use common::*;
use std::time::{Duration, Instant};

const KEY: &str = "claude:11111111-2222-4333-8444-d1a10900d1a1";

/// `echo x > FILE` through bash: its exit status and what it printed.
fn echo_into(m: &Mount, rel: &str, text: &str) -> (bool, String) {
    let out = sh(&format!("echo '{text}' > {}", m.q(rel)));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Refusals known when the file is opened fail the `open`, so a shell's
/// `echo x > FILE` prints them and fails, where a refusal at `close` would
/// be ignored.
#[test]
fn a_prompt_or_input_an_archived_session_cannot_take_fails_at_open() {
    let host = Host::new();
    let m = host.mount("mnt");
    m.live_shell("shell:old");
    sh_ok(&format!("echo 1 > {}", m.q("shell:old/archive")));
    // Stopped at once, not idle until the processes are gone.
    assert_eq!(m.read("archived/shell:old/state"), "stopped\n");
    for file in ["prompt", "input"] {
        let (ok, said) = echo_into(&m, &format!("archived/shell:old/{file}"), "ls");
        assert!(!ok, "{file}");
        assert!(said.contains("Operation not permitted"), "{file}: {said}");
        let error = m.json("archived/shell:old/status")["error"].clone();
        assert!(
            error.as_str().is_some_and(|e| e.contains("archived")),
            "{error}"
        );
    }
    // The archive's master ends; nothing started it again.
    wait_for(10, "no master", || host.masters().is_empty());
    assert_eq!(m.json("archived/shell:old/status")["state"], "archived");
}

/// A prompt to an agent that waits for an answer fails at once (EBUSY, the
/// reason in `status.error`), at `open` when it already waits; the answer
/// goes through `input`, and then prompts are taken again.
#[test]
fn a_prompt_to_a_waiting_agent_fails_at_once() {
    let host = host_with_claude_stand_in();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q(KEY)));
    let made = host.path("made-by-the-tool");
    sh_ok(&format!(
        "env printf '%s\\n' '/ask touch {}' > {}",
        made.display(),
        m.q(&format!("{KEY}/prompt"))
    ));
    wait_for(10, "the agent waiting", || {
        m.read(&format!("{KEY}/state")) == "waiting\n"
    });
    let t0 = Instant::now();
    let (ok, said) = echo_into(&m, &format!("{KEY}/prompt"), "next question");
    assert!(!ok);
    assert!(said.contains("Device or resource busy"), "{said}");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let error = m.json(&format!("{KEY}/status"))["error"].clone();
    assert!(
        error
            .as_str()
            .is_some_and(|e| e.contains("waiting for an answer")),
        "{error}"
    );
    assert!(!made.exists());
    // The answer, raw: Enter grants it.
    sh_ok(&format!("printf '\\r' > {}", m.q(&format!("{KEY}/input"))));
    wait_for(10, "the tool run", || made.exists());
    // Raw input is not an answer the daemon knows of: the state leaves
    // `waiting` at its next look at the screen, then `wait` ends at idle.
    wait_for(10, "the dialog gone from the state", || {
        m.read(&format!("{KEY}/state")) != "waiting\n"
    });
    let state = sh_ok(&format!("timeout 10 cat {}", m.q(&format!("{KEY}/wait"))));
    assert_eq!(state, "idle\n");
    let (ok, said) = echo_into(&m, &format!("{KEY}/prompt"), "next question");
    assert!(ok, "{said}");
}

/// `KEY/ctl` as a script writes it: `printf` (coreutils', which reports a
/// failed close) of one command; its exit status and what it printed.
fn ctl(m: &Mount, command: &str) -> (bool, String) {
    let out = sh(&format!(
        "env printf '%s\\n' '{command}' > {}",
        m.q(&format!("{KEY}/ctl"))
    ));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A question the agent asks is `waiting` with `waiting_for` naming it once
/// it is drawn; `approve` written the instant `wait` returns runs the tool
/// and returns with the agent out of the dialog, 20 rounds without a
/// dropped answer; `deny` runs nothing; with nothing asked, ENOMSG.
#[test]
fn approve_and_deny_answer_the_question_on_the_screen() {
    let host = host_with_claude_stand_in();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q(KEY)));
    let (ok, said) = ctl(&m, "approve");
    assert!(!ok);
    assert!(said.contains("No message of desired type"), "{said}");
    for round in 0..20 {
        let made = host.path(&format!("made-{round}"));
        sh_ok(&format!(
            "env printf '%s\\n' '/ask touch {}' > {}",
            made.display(),
            m.q(&format!("{KEY}/prompt"))
        ));
        let state = sh_ok(&format!("timeout 10 cat {}", m.q(&format!("{KEY}/wait"))));
        let events = m.read(&format!("{KEY}/events"));
        let last: Vec<&str> = events.lines().rev().take(8).collect();
        assert_eq!(state, "waiting\n", "round {round}: {last:#?}");
        let asked = m.json(&format!("{KEY}/status"))["waiting_for"].clone();
        assert_eq!(asked["kind"], "permission", "{asked}");
        assert_eq!(asked["tool"], "Bash", "{asked}");
        assert_eq!(
            asked["detail"],
            format!("touch {}", made.display()),
            "{asked}"
        );
        assert_eq!(asked["options"][0], "Yes", "{asked}");
        let meta = m.json(&format!("{KEY}/meta.json"));
        assert_eq!(meta["waiting_for"], asked);
        let deny = round % 5 == 4;
        let (ok, said) = ctl(&m, if deny { "deny" } else { "approve" });
        assert!(ok, "round {round}: {said}");
        assert!(
            m.json(&format!("{KEY}/status"))["waiting_for"].is_null(),
            "round {round}: the agent left the dialog"
        );
        let state = sh_ok(&format!("timeout 10 cat {}", m.q(&format!("{KEY}/wait"))));
        assert_eq!(state, "idle\n", "round {round}");
        assert_eq!(made.exists(), !deny, "round {round}");
    }
}

/// The root `events`: one stream of every session's changes with its key,
/// followed with `tail -F` across a daemon restart: sessions made, their
/// states, what an agent waits for, an archive; no line twice.
#[test]
fn the_root_events_file_is_one_stream_of_every_sessions_changes() {
    let host = host_with_claude_stand_in();
    let mut m = host.mount("mnt");
    let follower = std::process::Command::new("tail")
        .args(["-n", "+1", "-F", "-s", "0.1"])
        .arg(host.path("state/sessionfs/events.jsonl"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // What `tail -F` printed so far.
    let followed = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut follower = follower;
    let reader = {
        let followed = followed.clone();
        let mut out = follower.stdout.take().unwrap();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                followed
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    m.live_shell("shell:one");
    sh_ok(&format!("echo 'sleep 0.2' > {}", m.q("shell:one/prompt")));
    sh_ok(&format!("mkdir {}", m.q(KEY)));
    sh_ok(&format!(
        "env printf '%s\\n' '/ask true' > {}",
        m.q(&format!("{KEY}/prompt"))
    ));
    let state = sh_ok(&format!("timeout 10 cat {}", m.q(&format!("{KEY}/wait"))));
    assert_eq!(state, "waiting\n");
    m.end(false);
    drop(m);
    let m = host.mount("mnt");
    let (ok, said) = ctl(&m, "deny");
    assert!(ok, "{said}");
    sh_ok(&format!("mv {} {}", m.q("shell:one"), m.q("archived/")));
    wait_for(10, "the archive followed", || {
        followed.lock().unwrap().contains("\"archived\"")
    });
    let _ = follower.kill();
    let _ = follower.wait();
    let _ = reader.join();
    let out = followed.lock().unwrap().clone();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let has = |key: &str, event: &str, state: Option<&str>| {
        lines.iter().any(|l| {
            l["key"] == key && l["event"] == event && state.is_none_or(|s| l["state"] == s)
        })
    };
    assert!(has("shell:one", "made", None), "{out}");
    assert!(has("shell:one", "state", Some("busy")), "{out}");
    assert!(has(KEY, "made", None), "{out}");
    assert!(has(KEY, "state", Some("waiting")), "{out}");
    assert!(has(KEY, "state", Some("idle")), "{out}");
    assert!(has("shell:one", "archived", None), "{out}");
    let waiting = lines
        .iter()
        .find(|l| l["key"] == KEY && l["state"] == "waiting")
        .unwrap();
    assert_eq!(waiting["waiting_for"]["tool"], "Bash", "{waiting}");
    let mut seen = std::collections::HashSet::new();
    for line in out.lines() {
        assert!(seen.insert(line), "a line twice: {line}");
    }
}

/// Starts `program ARGS` with this host's environment, its stdout going to
/// `out`.
fn follow_into(
    host: &Host,
    program: &str,
    args: &[&str],
    out: &std::path::Path,
) -> std::process::Child {
    host.state_env(std::process::Command::new(program).args(args))
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(std::fs::File::create(out.with_extension("err")).unwrap())
        .spawn()
        .unwrap()
}

/// The root `events` rotated again and again (at 4 KiB here) while two
/// agents and a shell change state: `tail -F` on the mount's `events` and
/// `sessionfs events --follow` each print every line once, the last two
/// files' lines all among them. A conversation that appears in Claude's
/// store, made by no session, is announced as `discovered`; the sessions'
/// own conversations are not.
#[test]
fn root_events_rotate_under_followers_without_a_line_twice_and_announce_discoveries() {
    let host = host_with_claude_stand_in().with_env("AGENT_SESSIONS_EVENTS_BYTES", "4096");
    let m = host.mount("mnt");
    let (tail_out, cli_out) = (host.path("tail.out"), host.path("cli.out"));
    let events = m.path("events");
    let mut followers = [
        follow_into(
            &host,
            "tail",
            &["-n", "+1", "-F", "-s", "0.1", events.to_str().unwrap()],
            &tail_out,
        ),
        follow_into(
            &host,
            env!("CARGO_BIN_EXE_sessionfs"),
            &["events", "--follow"],
            &cli_out,
        ),
    ];
    const OTHER: &str = "claude:11111111-2222-4333-8444-0e0e0e0e0e02";
    m.live_shell("shell:r");
    sh_ok(&format!("mkdir {} {}", m.q(KEY), m.q(OTHER)));
    let state_file = host.path("state/sessionfs/events.jsonl");
    let rotated = host.path("state/sessionfs/events.jsonl.1");
    let mut rotations = 0;
    let mut last_ino = None;
    for round in 0..40 {
        for key in [KEY, OTHER] {
            sh_ok(&format!(
                "echo 'hello {round}' > {}",
                m.q(&format!("{key}/prompt"))
            ));
        }
        sh_ok(&format!("echo 'sleep 0.1' > {}", m.q("shell:r/prompt")));
        for key in [KEY, OTHER, "shell:r"] {
            let state = sh_ok(&format!("timeout 20 cat {}", m.q(&format!("{key}/wait"))));
            assert_eq!(state, "idle\n", "{key} round {round}");
        }
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::metadata(&state_file).unwrap().ino();
        if last_ino.is_some_and(|i| i != ino) {
            rotations += 1;
        }
        last_ino = Some(ino);
        if rotations >= 3 {
            break;
        }
    }
    assert!(
        rotations >= 3,
        "the events file was rotated {rotations} times"
    );

    // A conversation written by an agent sessionfs did not start.
    const FOUND: &str = "41414141-4242-4343-8444-454545454545";
    let store = host.path(&format!("claude/projects/-work-found/{FOUND}.jsonl"));
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    std::fs::write(
        &store,
        sessionfs::transcript::testgen::claude(&sessionfs::transcript::testgen::Shape::new(1, 3)),
    )
    .unwrap();
    // Whether a JSON line of `text` has this key and event.
    let has = |text: &str, key: &str, event: &str| {
        text.lines().any(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .is_ok_and(|v| v["key"] == key && v["event"] == event)
        })
    };
    let found = format!("claude:{FOUND}");
    let shown = |p: &std::path::Path| {
        String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
    };
    wait_for(15, "the discovery in the stream", || {
        has(
            &std::fs::read_to_string(&state_file).unwrap(),
            &found,
            "discovered",
        )
    });
    // Both followers reach the end of the current file.
    let last = std::fs::read_to_string(&state_file)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_string();
    for out in [&tail_out, &cli_out] {
        let reached = wait_until(15, || shown(out).contains(&last));
        let text = shown(out);
        let end: Vec<&str> = text.lines().rev().take(3).collect();
        let said = std::fs::read_to_string(out.with_extension("err")).unwrap_or_default();
        assert!(
            reached,
            "{} never showed {last}; it ends with {end:?}; it said {said:?}",
            out.display()
        );
    }
    for f in &mut followers {
        let _ = f.kill();
        let _ = f.wait();
    }
    let kept: Vec<String> = [&rotated, &state_file]
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    for out in [&tail_out, &cli_out] {
        let text = shown(out);
        let mut seen = std::collections::HashSet::new();
        for line in text.lines() {
            assert!(seen.insert(line), "{}: a line twice: {line}", out.display());
            serde_json::from_str::<serde_json::Value>(line)
                .unwrap_or_else(|e| panic!("{}: not a whole line: {line}: {e}", out.display()));
        }
        for line in &kept {
            assert!(
                seen.contains(line.as_str()),
                "{}: missed {line}",
                out.display()
            );
        }
        for key in [KEY, OTHER, "shell:r"] {
            assert!(has(&text, key, "made"), "{key} made");
            // The sessions' own conversations were made, not discovered.
            assert!(!has(&text, key, "discovered"), "{key} discovered");
        }
        assert!(has(&text, &found, "discovered"), "{}", out.display());
    }
    sh_ok(&format!("echo stop > {}", m.q("shell:r/ctl")));
}

/// `sessionfs ARGS` on this host's state: exit code, stdout, stderr.
fn cli(host: &Host, args: &[&str]) -> (i32, String, String) {
    let out = host.cli(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The verbs for scripts, through the mount, with their exit codes: 0
/// idle, 4 waiting, 5 stopped, 124 timed out, 1 refused (the reason on
/// stderr), 2 a usage error.
#[test]
fn the_cli_verbs_answer_and_wait_with_their_exit_codes() {
    let host = host_with_claude_stand_in();
    let m = host.mount("mnt");
    m.live_shell("shell:a");
    sh_ok(&format!("mkdir {}", m.q("shell:never")));
    sh_ok(&format!("mkdir {}", m.q(KEY)));
    assert_eq!(
        cli(&host, &["wait", "shell:a"]),
        (0, "shell:a idle\n".into(), String::new())
    );
    let (code, out, _) = cli(&host, &["wait", "shell:a", "shell:never"]);
    assert_eq!(
        (code, out.as_str()),
        (5, "shell:a idle\nshell:never stopped\n")
    );
    let (code, _, said) = cli(&host, &["wait", "no/such"]);
    assert_eq!(code, 2, "{said}");
    let (code, _, said) = cli(&host, &["approve", KEY]);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("not waiting for an answer"), "{said}");

    sh_ok(&format!(
        "env printf '%s\\n' '/ask true' > {}",
        m.q(&format!("{KEY}/prompt"))
    ));
    let (code, out, _) = cli(&host, &["wait", KEY, "--timeout", "10"]);
    assert_eq!((code, out), (4, format!("{KEY} waiting\n")));
    let listed = host.ls(&[]);
    let row = listed.lines().find(|l| l.starts_with(KEY)).unwrap();
    assert!(row.contains("waiting: permission Bash"), "{listed}");
    let keys = host.ls(&["--state", "waiting", "--keys"]);
    assert_eq!(keys, format!("{KEY}\n"));
    assert_eq!(cli(&host, &["approve", KEY]).0, 0);
    let (code, out, _) = cli(&host, &["wait", KEY, "--json"]);
    assert_eq!(code, 0);
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed, serde_json::json!([{"key": KEY, "state": "idle"}]));

    sh_ok(&format!("echo 'sleep 30' > {}", m.q("shell:a/prompt")));
    let t0 = Instant::now();
    let (code, out, _) = cli(&host, &["wait", "shell:a", "--timeout", "0.5"]);
    assert_eq!((code, out.as_str()), (124, ""));
    assert!(t0.elapsed() < Duration::from_secs(5));
    let (code, out, _) = cli(&host, &["wait", "--any", "shell:a", KEY]);
    assert_eq!((code, out), (0, format!("{KEY} idle\n")));

    let (code, out, _) = cli(&host, &["events"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("\"key\":\"shell:a\"") && out.contains(KEY),
        "{out}"
    );
    sh_ok(&format!("echo stop > {}", m.q("shell:a/ctl")));
}
