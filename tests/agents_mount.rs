//! The real Claude Code and Codex TUIs driven through a real mount, offline
//! against the model API stand-in: `prompt`, `state`, `wait`, `events` and
//! `transcript/last` as a shell pipeline uses them.

mod common;

use common::agent_host::Agents;
use common::model_api::Answer;
use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CLAUDE_ID: &str = "c1a0de00-0000-4000-8000-000000000001";

#[test]
fn a_prompt_to_a_new_claude_session_is_answered_and_it_goes_idle() {
    let Some(a) = Agents::start("a_prompt_to_a_new_claude_session_is_answered_and_it_goes_idle")
    else {
        return;
    };
    a.api.push_text("Stand-in answer one.");
    let key = a.session("claude", CLAUDE_ID);
    assert_eq!(a.read(&key, "state"), "stopped\n");
    let took = a.prompt(&key, "fix the failing test");
    eprintln!("prompt to a new claude session accepted after {took:?}");
    // Accepted: the turn has started (or, fast, already ended).
    let state = a.read(&key, "state");
    assert!(["busy\n", "idle\n"].contains(&state.as_str()), "{state}");
    assert_eq!(a.wait(&key, 60), "idle\n");
    let last = a.read(&key, "transcript/last");
    assert!(
        last.contains("fix the failing test"),
        "{last}\nevents:\n{}\nlog:\n{}",
        a.read(&key, "events"),
        a.m.log_text()
    );
    assert!(
        last.contains("Stand-in answer one."),
        "{last}\nevents:\n{}\nlog:\n{}",
        a.read(&key, "events"),
        a.m.log_text()
    );
    let turns = a.api.turns();
    assert_eq!(turns.len(), 1, "{}", a.api.log());
    assert_eq!(
        turns[0].user_words().as_deref(),
        Some("fix the failing test")
    );
    let events = a.events(&key);
    let states: Vec<&str> = events
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(states.first(), Some(&"starting"), "{events:?}");
    assert!(states.contains(&"busy"), "{events:?}");
    assert_eq!(states.last(), Some(&"idle"), "{events:?}");
    let stop = events.last().unwrap();
    assert_eq!(stop["source"], "hook", "{events:?}");
    assert_eq!(stop["detail"], "Stop", "{events:?}");
    let status = a.m.json(&format!("{key}/status"));
    assert_eq!(status["agent_state"], "idle");
    assert!(status["error"].is_null(), "{status}");
}

/// `cat FILE` in the background.
fn cat(path: &std::path::Path) -> std::process::Child {
    Command::new("cat")
        .arg(path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_slow_turn_is_busy_and_six_waits_do_not_slow_the_mount() {
    let Some(a) = Agents::start("a_slow_turn_is_busy_and_six_waits_do_not_slow_the_mount") else {
        return;
    };
    a.api
        .push(Answer::Text("Slow answer.".into()), Duration::from_secs(5));
    let key = a.session("claude", "c1a0de00-0000-4000-8000-000000000002");
    a.prompt(&key, "take your time");
    assert_eq!(a.read(&key, "state"), "busy\n");
    let waits: Vec<_> = (0..6)
        .map(|_| cat(&a.m.path(&format!("{key}/wait"))))
        .collect();
    wait_for(10, "six blocked waits", || a.m.json("status")["waits"] == 6);
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let t0 = Instant::now();
        std::fs::read(a.m.path("status")).unwrap();
        slowest = slowest.max(t0.elapsed());
    }
    eprintln!("slowest `cat MNT/status` with six waits on a busy claude: {slowest:?}");
    // Not held behind the waits (which last as long as the turn).
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
    assert_eq!(a.read(&key, "state"), "busy\n", "still in the slow turn");
    for w in waits {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "idle\n");
    }
    assert!(a.read(&key, "transcript/last").contains("Slow answer."));
}

#[test]
fn a_tool_call_waits_for_permission_given_through_input() {
    let Some(a) = Agents::start("a_tool_call_waits_for_permission_given_through_input") else {
        return;
    };
    // A write: not one of the commands Claude runs without asking.
    let marker = a.host.path("tool-ran");
    a.api
        .push_bash(&format!("echo approved > {}", marker.display()));
    a.api.push_text("The tool ran.");
    let key = a.session("claude", "c1a0de00-0000-4000-8000-000000000003");
    a.prompt(&key, "run the tool please");
    assert_eq!(a.wait(&key, 60), "waiting\n");
    assert_eq!(a.m.json(&format!("{key}/status"))["agent_state"], "waiting");
    // Approve as a person would: once the dialog is drawn, Enter.
    wait_for(20, "the permission dialog", || {
        a.read(&key, "screen").contains("Do you want to proceed?")
    });
    let input = a.m.q(&format!("{key}/input"));
    wait_for(20, "the approval to be taken", || {
        sh_ok(&format!("printf '\\r' > {input}"));
        // Keys right after the dialog appears are dropped: again if the
        // state has not moved within a second.
        wait_until(1, || a.read(&key, "state") != "waiting\n");
        a.read(&key, "state") != "waiting\n"
    });
    assert_eq!(a.wait(&key, 60), "idle\n");
    assert!(marker.exists(), "the approved command ran");
    let last = a.read(&key, "transcript/last");
    assert!(last.contains("The tool ran."), "{last}");
    let states = a.states(&key);
    assert_eq!(
        a.last_states(&key, 3),
        ["waiting", "busy", "idle"],
        "{states:?}"
    );
}

/// A stop, then a prompt: the session resumes and the agent has the history.
fn stop_then_resume(a: &Agents, key: &str) {
    a.api.push_text("First: noted the zebra.");
    a.prompt(key, "remember the word zebra");
    assert_eq!(a.wait(key, 60), "idle\n");
    sh_ok(&format!("echo stop > {}", a.m.q(&format!("{key}/ctl"))));
    assert_eq!(a.read(key, "state"), "stopped\n");
    a.api.push_text("Second: it was zebra.");
    a.prompt(key, "which word was it");
    assert_eq!(a.wait(key, 60), "idle\n");
    assert_eq!(a.m.json(&format!("{key}/status"))["outcome"], "LAUNCH");
    let turns = a.api.turns();
    let last = turns
        .iter()
        .rfind(|r| r.user_words().as_deref() == Some("which word was it"))
        .unwrap_or_else(|| panic!("the second prompt never came:\n{}", a.api.log()));
    assert!(
        last.body.contains("remember the word zebra"),
        "the resumed agent sent no history:\n{}",
        last.body
    );
    let page = a.read(key, "transcript/last");
    assert!(
        page.contains("which word was it"),
        "{page}\nlatest:\n{}\nstore has it: {:?}",
        a.read(key, "transcript/latest"),
        a.env
            .claude_stores()
            .iter()
            .map(|p| std::fs::read_to_string(p)
                .unwrap()
                .contains("which word was it"))
            .collect::<Vec<_>>()
    );
    assert!(page.contains("Second: it was zebra."), "{page}");
    assert!(!page.contains("remember the word"), "{page}");
}

#[test]
fn a_stopped_claude_session_resumes_with_its_history_on_a_prompt() {
    let Some(a) = Agents::start("a_stopped_claude_session_resumes_with_its_history_on_a_prompt")
    else {
        return;
    };
    let key = a.session("claude", "c1a0de00-0000-4000-8000-000000000004");
    stop_then_resume(&a, &key);
}

#[test]
fn a_codex_session_takes_prompts_goes_idle_and_resumes() {
    let Some(a) = Agents::start("a_codex_session_takes_prompts_goes_idle_and_resumes") else {
        return;
    };
    let key = a.session("codex", "mine");
    a.api.push_text("Codex answer one.");
    let took = a.prompt(&key, "hello codex");
    eprintln!("prompt to a new codex session accepted after {took:?}");
    assert_eq!(a.wait(&key, 60), "idle\n");
    let last = a.read(&key, "transcript/last");
    assert!(last.contains("hello codex"), "{last}");
    assert!(last.contains("Codex answer one."), "{last}");
    let events = a.events(&key);
    let end = events.last().unwrap();
    assert_eq!(end["state"], "idle", "{events:?}");
    assert_eq!(end["source"], "notify", "{events:?}");
    stop_then_resume(&a, &key);
}

#[test]
fn the_state_and_events_of_a_live_claude_survive_a_daemon_restart() {
    let Some(mut a) =
        Agents::start("the_state_and_events_of_a_live_claude_survive_a_daemon_restart")
    else {
        return;
    };
    let key = a.session("claude", "c1a0de00-0000-4000-8000-000000000005");
    a.api.push_text("Before the restart.");
    a.prompt(&key, "first question");
    assert_eq!(a.wait(&key, 60), "idle\n");
    let before = a.read(&key, "events");
    let shown = std::fs::read(a.m.path(&format!("{key}/scrollback"))).unwrap();
    a.restart();
    assert!(
        a.read(&key, "events").starts_with(&before),
        "the events were kept"
    );
    // What the old daemon read of Claude's output is still there, and the
    // screen is rebuilt from it at once.
    let kept = std::fs::read(a.m.path(&format!("{key}/scrollback"))).unwrap();
    assert!(
        kept.starts_with(&shown),
        "{} bytes before, {} after",
        shown.len(),
        kept.len()
    );
    wait_for(2, "Claude's screen after the restart", || {
        !a.read(&key, "screen").trim().is_empty()
    });
    assert_eq!(
        a.read(&key, "state"),
        "idle\n",
        "{}",
        a.read(&key, "events")
    );
    a.api.push_text("After the restart.");
    a.prompt(&key, "second question");
    assert_eq!(a.wait(&key, 60), "idle\n");
    assert_eq!(a.m.json(&format!("{key}/status"))["outcome"], "ATTACH");
    let last = a.read(&key, "transcript/last");
    assert!(last.contains("second question"), "{last}");
    assert!(last.contains("After the restart."), "{last}");
    let after = a.read(&key, "events");
    assert!(
        after.len() > before.len() && after.starts_with(&before),
        "{after}"
    );
}

/// `scripts/bench agents`: for each agent, from a prompt's close to `busy`
/// (the `events` line's time) and from the model's last byte to `idle`
/// (`state` polled every 2 ms), over a few turns of an idle session.
#[test]
#[ignore = "a benchmark: scripts/bench agents"]
fn bench_prompt_to_busy_and_last_byte_to_idle() {
    let Some(a) = Agents::start("bench_prompt_to_busy_and_last_byte_to_idle") else {
        return;
    };
    for (engine, id) in [
        ("claude", "c1a0de00-0000-4000-8000-0000000000b1"),
        ("codex", "bench"),
        ("opencode", "bench"),
    ] {
        let key = a.session(engine, id);
        println!("{}", a.bench_turns(engine, &key, 5));
    }
}

/// The processes of a real Claude Code that the test's agents started.
/// For `scripts/bench agents`: how long a script waits for `approve` (the
/// write to `ctl` returns once the agent left its dialog) and for
/// `interrupt` (until the state is `idle`), with both real CLIs.
#[test]
#[ignore = "a benchmark: scripts/bench agents"]
fn bench_approve_and_interrupt() {
    const ROUNDS: usize = 5;
    let show = |v: &mut Vec<Duration>| {
        v.sort();
        format!("median {:?}, max {:?}", v[v.len() / 2], v[v.len() - 1])
    };
    for (engine, id) in [
        ("claude", "c1a0de00-0000-4000-8000-0000000000b2"),
        ("codex", "bench-answers"),
    ] {
        // A stand-in of its own: an interrupted turn may leave an answer queued.
        let Some(a) = Agents::start("bench_approve_and_interrupt") else {
            return;
        };
        a.env.codex_read_only();
        let key = a.session(engine, id);
        a.api.push_text("warm.");
        a.prompt(&key, "warm up");
        assert_eq!(a.wait(&key, 60), "idle\n");
        let (mut approve, mut interrupt) = (vec![], vec![]);
        for round in 0..ROUNDS {
            let marker = a.host.path(&format!("bench-{engine}-{round}"));
            let command = format!("echo ran > {}", marker.display());
            a.api.push(Answer::Escalated(command), Duration::ZERO);
            a.api.push_text("done.");
            a.prompt(&key, &format!("run it, round {round}"));
            assert_eq!(a.wait(&key, 60), "waiting\n", "{engine} round {round}");
            let t0 = Instant::now();
            ctl(&a, &key, "approve");
            approve.push(t0.elapsed());
            assert_eq!(a.wait(&key, 60), "idle\n");
        }
        for round in 0..ROUNDS {
            a.api.push(
                Answer::Text("a slow answer".into()),
                Duration::from_secs(30),
            );
            a.prompt(&key, &format!("answer slowly, round {round}"));
            wait_for(20, "the slow turn", || a.read(&key, "state") == "busy\n");
            let t0 = Instant::now();
            ctl(&a, &key, "interrupt");
            while a.read(&key, "state") != "idle\n" {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{engine}: never idle"
                );
                std::thread::sleep(Duration::from_millis(2));
            }
            interrupt.push(t0.elapsed());
        }
        println!(
            "{engine}: approve -> dialog gone {}; interrupt -> idle {} (goal: under 1 s each)",
            show(&mut approve),
            show(&mut interrupt)
        );
    }
}

fn claude_processes(a: &Agents) -> Vec<u32> {
    common::agents::processes_with_env(&[a.env.claude_dir.to_string_lossy().into_owned()])
        .into_iter()
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.to_string_lossy().ends_with("claude.exe"))
        })
        .collect()
}

/// A second daemon on the same host: `conversation` (the key of one the
/// session `key` switched to) is a link to the session there too, and a
/// prompt through it is answered by the session's one process. The mount.
fn through_a_second_daemon(a: &Agents, conversation: &str, key: &str, prompt: &str) -> Mount {
    let second = a.host.mount("second");
    let link = std::fs::read_link(second.path(conversation)).unwrap();
    assert_eq!(link.to_string_lossy(), key);
    sh_ok(&format!(
        "env printf '%s\\n' '{prompt}' > {}",
        second.q(&format!("{conversation}/prompt"))
    ));
    let state = sh_ok(&format!(
        "timeout 60 cat {}",
        second.q(&format!("{conversation}/wait"))
    ));
    assert_eq!(state, "idle\n");
    let last = second.read(&format!("{key}/transcript/last"));
    assert!(last.contains(prompt), "{last}");
    second
}

/// Claude's `/clear` starts a new conversation in the same process: the
/// session follows it. Prompts to the old key and to the new one (a link to
/// the session) reach the one process, and each answer is the session's
/// `transcript/last` in turn; a second daemon on the same host opening the
/// new key joins that process too.
#[test]
fn after_clear_the_session_follows_its_claude_and_the_new_key_is_a_link() {
    let Some(a) =
        Agents::start("after_clear_the_session_follows_its_claude_and_the_new_key_is_a_link")
    else {
        return;
    };
    let id = "c1a0de00-0000-4000-8000-0000000000c1";
    let key = a.session("claude", id);
    a.api.push_text("Answer before the clear.");
    a.prompt(&key, "first question");
    assert_eq!(a.wait(&key, 60), "idle\n");

    a.prompt(&key, "/clear");
    wait_for(30, "the session to follow /clear", || {
        a.conversation(&key) != id
    });
    let new_id = a.conversation(&key);
    let new_key = format!("claude:{new_id}");
    // The record is written in the background, at once.
    wait_for(5, "the earlier conversation recorded", || {
        a.m.json(&format!("{key}/status"))["conversations"] == serde_json::json!([id])
    });
    assert_eq!(
        a.m.json(&format!("{key}/meta.json"))["conversations"],
        serde_json::json!([id])
    );
    assert_eq!(
        a.m.json(&format!("{key}/meta.json"))["conversation"],
        new_id
    );
    // The new conversation is a link to the session, and not listed apart.
    let link = std::fs::read_link(a.m.path(&new_key)).unwrap();
    assert_eq!(link.to_string_lossy(), key);
    let listing = sh_ok(&format!("ls {}", a.m.q("")));
    assert!(!listing.lines().any(|l| l == new_key), "{listing}");
    assert!(listing.lines().any(|l| l == key), "{listing}");

    a.api.push_text("Answer two, to the old key.");
    a.prompt(&key, "second question");
    assert_eq!(a.wait(&key, 60), "idle\n");
    let last = a.read(&key, "transcript/last");
    assert!(last.contains("second question"), "{last}");
    assert!(last.contains("Answer two, to the old key."), "{last}");
    assert!(
        !last.contains("first question"),
        "the old conversation: {last}"
    );
    // The conversation before the clear stays readable.
    let listing = sh_ok(&format!("ls {}", a.m.q(&format!("{key}/transcript"))));
    assert!(listing.lines().any(|l| l == id), "{listing}");
    let earlier = a.read(&key, &format!("transcript/{id}/page-0"));
    assert!(earlier.contains("first question"), "{earlier}");
    assert!(earlier.contains("Answer before the clear."), "{earlier}");
    assert!(!a.read(&key, "transcript/page-0").contains("first question"));

    a.api.push_text("Answer three, to the new key.");
    a.prompt(&new_key, "third question");
    assert_eq!(a.wait(&new_key, 60), "idle\n");
    let last = a.read(&key, "transcript/last");
    assert!(last.contains("third question"), "{last}");
    assert!(last.contains("Answer three, to the new key."), "{last}");
    assert_eq!(claude_processes(&a).len(), 1, "one Claude process");
    assert_eq!(a.host.masters().len(), 1, "one master");

    // A second daemon on the same host: the new key is the same session.
    a.api.push_text("Answer four, through the second daemon.");
    let second = through_a_second_daemon(&a, &new_key, &key, "fourth question");
    assert_eq!(claude_processes(&a).len(), 1, "still one Claude process");
    assert_eq!(a.host.masters().len(), 1, "still one master");
    drop(second);

    // Stopped, the session's next open resumes the conversation it wrote last.
    sh_ok(&format!("echo stop > {}", a.m.q(&format!("{key}/ctl"))));
    a.api.push_text("Answer five, after a stop.");
    a.prompt(&key, "fifth question");
    assert_eq!(a.wait(&key, 60), "idle\n");
    let claude = claude_processes(&a);
    assert_eq!(claude.len(), 1);
    let argv = std::fs::read(format!("/proc/{}/cmdline", claude[0])).unwrap();
    let argv = String::from_utf8_lossy(&argv).replace('\0', " ");
    assert!(argv.contains(&format!("--resume {new_id}")), "{argv}");
    assert_eq!(a.conversation(&key), new_id);
}

/// Codex's `/new` starts a new thread in the same process: once a turn
/// ends in it, the session follows it (its notify names the thread, and the
/// agent's process holds the thread's rollout open), and both threads are
/// links to the session.
#[test]
fn after_new_the_session_follows_its_codex_thread() {
    let Some(a) = Agents::start("after_new_the_session_follows_its_codex_thread") else {
        return;
    };
    let key = a.session("codex", "switcher");
    a.api.push_text("Codex before new.");
    a.prompt(&key, "first codex question");
    assert_eq!(a.wait(&key, 60), "idle\n");
    wait_for(10, "the first thread bound", || {
        a.conversation(&key) != "switcher"
    });
    let first = a.conversation(&key);

    a.prompt(&key, "/new");
    a.api.push_text("Codex after new.");
    a.prompt(&key, "second codex question");
    assert_eq!(a.wait(&key, 60), "idle\n");
    wait_for(20, "the session to follow /new", || {
        a.conversation(&key) != first
    });
    let second = a.conversation(&key);
    wait_for(5, "the earlier thread recorded", || {
        a.m.json(&format!("{key}/status"))["conversations"] == serde_json::json!([first])
    });
    for thread in [&first, &second] {
        let link = std::fs::read_link(a.m.path(&format!("codex:{thread}"))).unwrap();
        assert_eq!(link.to_string_lossy(), key);
    }
    let last = a.read(&key, "transcript/last");
    assert!(last.contains("second codex question"), "{last}");
    assert!(last.contains("Codex after new."), "{last}");
    assert_eq!(a.host.masters().len(), 1, "one master");

    // A second daemon opening the new thread's key joins the same process.
    a.api.push_text("Codex through the second daemon.");
    let thread_key = format!("codex:{second}");
    through_a_second_daemon(&a, &thread_key, &key, "third codex question");
    assert_eq!(a.host.masters().len(), 1, "still one master");
    assert_eq!(a.conversation(&key), second, "the same thread");
}

/// `KEY/ctl` written as a script does, with coreutils' `printf`, which
/// reports a failed close.
fn ctl(a: &Agents, key: &str, command: &str) {
    sh_ok(&format!(
        "env printf '%s\\n' '{command}' > {}",
        a.m.q(&format!("{key}/ctl"))
    ));
}

/// A real Claude's permission dialog: `wait` returns `waiting` once it
/// takes keys, `waiting_for` names Bash and the command, and an answer
/// written the instant `wait` returns lands, whether `approve` through
/// `ctl` or `sessionfs approve`, or a raw Enter through `input`: 20 rounds
/// each, no answer dropped. `deny` runs nothing and the turn ends; `interrupt` of a
/// slow turn is `idle` within a second.
#[test]
fn a_real_claudes_questions_are_answered_from_a_script() {
    let Some(a) = Agents::start("a_real_claudes_questions_are_answered_from_a_script") else {
        return;
    };
    let key = a.session("claude", "c1a0de00-0000-4000-8000-00000000a5c1");
    for round in 0..40 {
        let marker = a.host.path(&format!("ran-{round}"));
        a.api
            .push_bash(&format!("echo approved > {}", marker.display()));
        a.api.push_text(&format!("Round {round} ran."));
        a.prompt(&key, &format!("run the tool, round {round}"));
        assert_eq!(a.wait(&key, 60), "waiting\n", "round {round}");
        // The answer goes the instant `wait` returned, before anything else.
        // Twenty approves (through `ctl`, or `sessionfs approve`) and
        // twenty raw Enters.
        match round % 4 {
            0 => ctl(&a, &key, "approve"),
            1 | 3 => {
                sh_ok(&format!(
                    "printf '\\r' > {}",
                    a.m.q(&format!("{key}/input"))
                ));
            }
            _ => {
                let (code, _, said) = a.cli(&["approve", &key]);
                assert_eq!(code, 0, "round {round}: {said}");
            }
        }
        let state = a.wait(&key, 60);
        assert_eq!(
            state,
            "idle\n",
            "round {round}: events {:?}\nscreen:\n{}",
            a.events(&key).iter().rev().take(6).collect::<Vec<_>>(),
            a.read(&key, "screen")
        );
        assert!(marker.exists(), "round {round}: the approved command ran");
        let events = a.events(&key);
        let asked = events
            .iter()
            .rev()
            .find(|e| e["state"] == "waiting")
            .unwrap_or_else(|| panic!("round {round}: no waiting event"));
        assert!(asked["detail"].as_str().is_some(), "{asked}");
    }
    // What it waited for, read while it waits.
    let marker = a.host.path("ran-named");
    a.api
        .push_bash(&format!("echo approved > {}", marker.display()));
    a.api.push_text("Named.");
    a.prompt(&key, "run the named tool");
    assert_eq!(a.wait(&key, 60), "waiting\n");
    let asked = a.m.json(&format!("{key}/status"))["waiting_for"].clone();
    assert_eq!(asked["kind"], "permission", "{asked}");
    assert_eq!(asked["tool"], "Bash", "{asked}\n{}", a.read(&key, "screen"));
    assert!(
        asked["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&marker.display().to_string())),
        "{asked}"
    );
    ctl(&a, &key, "approve");
    assert_eq!(a.wait(&key, 60), "idle\n");

    for round in 0..20 {
        let refused = a.host.path(&format!("refused-{round}"));
        a.api
            .push_bash(&format!("echo ran > {}", refused.display()));
        a.prompt(&key, &format!("run the refused tool, round {round}"));
        assert_eq!(a.wait(&key, 60), "waiting\n", "deny round {round}");
        ctl(&a, &key, "deny");
        assert_eq!(a.wait(&key, 10), "idle\n", "deny round {round}");
        assert!(
            !refused.exists(),
            "deny round {round}: the refused command ran"
        );
    }

    a.api.push(
        Answer::Text("A slow answer.".into()),
        Duration::from_secs(30),
    );
    a.prompt(&key, "answer slowly");
    wait_for(20, "the slow turn", || a.read(&key, "state") == "busy\n");
    let t0 = Instant::now();
    ctl(&a, &key, "interrupt");
    assert_eq!(a.read(&key, "state"), "idle\n");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let last = a.events(&key).last().cloned().unwrap();
    assert_eq!(last["source"], "interrupt", "{last}");
}
