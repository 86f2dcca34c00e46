//! The real opencode 1.18.33 offline against the model API stand-in's
//! streamed `/v1/chat/completions`, through a real mount with the built-in
//! engine `opencode`: a conversation made by `opencode run` outside
//! sessionfs is found with its title and renders; a new session answers a
//! prompt into `transcript/last` and settles `idle` from its plugin's
//! events (the id it reports is the conversation's); a slow turn is busy;
//! a tool's permission is `waiting`, approved once and denied once; a
//! running turn is interrupted; a new daemon goes on with the live session;
//! after a stop a prompt resumes it with its
//! history, and its usage counts what the store records; the conversation
//! found resumes from its own directory, and archived, still reads.

mod common;

use common::model_api::Answer;
use serde_json::Value;
use std::time::Duration;

/// The `opencode:ses_…` keys listed at the mount's root.
fn listed_opencode(a: &common::agent_host::Agents) -> Vec<String> {
    common::sh_ok(&format!("ls {}", a.m.q("")))
        .lines()
        .filter(|l| l.starts_with("opencode:ses_"))
        .map(str::to_string)
        .collect()
}

/// The answers opencode's store records for `conversation` with tokens:
/// how many, their input and their output (reasoning included), read
/// from a copy of the store (the test's own connection never touches it).
fn recorded_usage(data: &std::path::Path, conversation: &str) -> (u64, u64, u64) {
    let copy = tempfile::tempdir().unwrap();
    for name in ["opencode.db", "opencode.db-wal"] {
        if data.join(name).exists() {
            std::fs::copy(data.join(name), copy.path().join(name)).unwrap();
        }
    }
    let db = rusqlite::Connection::open(copy.path().join("opencode.db")).unwrap();
    let mut stmt = db
        .prepare("SELECT data FROM message WHERE session_id = ?1")
        .unwrap();
    let rows: Vec<String> = stmt
        .query_map([conversation], |r| r.get(0))
        .unwrap()
        .flatten()
        .collect();
    let (mut n, mut input, mut output) = (0, 0, 0);
    for data in rows {
        let v: Value = serde_json::from_str(&data).unwrap();
        if v["role"] != "assistant" {
            continue;
        }
        let t = |k: &str| v["tokens"][k].as_u64().unwrap_or(0);
        if t("input") + t("output") == 0 {
            continue;
        }
        n += 1;
        input += t("input");
        output += t("output") + t("reasoning");
    }
    (n, input, output)
}

fn ctl(a: &common::agent_host::Agents, key: &str, what: &str) {
    common::sh_ok(&format!("echo {what} > {}", a.m.q(&format!("{key}/ctl"))));
}

#[test]
fn the_opencode_engine_finds_answers_asks_interrupts_and_resumes_through_the_mount() {
    let test = "the_opencode_engine_finds_answers_asks_interrupts_and_resumes_through_the_mount";
    let Some(mut a) = common::agent_host::Agents::start(test) else {
        return;
    };
    assert!(
        a.env.bin.join("opencode").exists(),
        "opencode is missing: run scripts/agents"
    );
    let user_config = a.env.home.join(".config/opencode/opencode.json");
    let config_before = std::fs::read(&user_config).unwrap();

    // Made outside sessionfs: discovered with the title opencode gave it
    // (the stand-in answers its title request "Greeting"), rendered.
    a.api.push_text("Outside: the otter is noted.");
    let out = a
        .env
        .command("opencode")
        .current_dir(&a.env.project)
        .args(["run", "remember the otter"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}\n{}", a.api.log());
    common::wait_for(30, "the outside conversation listed", || {
        listed_opencode(&a).len() == 1
    });
    let outside = listed_opencode(&a)[0].clone();
    common::wait_for(20, "its title", || {
        let meta: Value = serde_json::from_str(&a.read(&outside, "meta.json")).unwrap();
        meta["title"] == "Greeting"
    });
    let last = a.read(&outside, "transcript/last");
    assert!(last.contains("remember the otter"), "{last}");
    assert!(last.contains("Outside: the otter is noted."), "{last}");

    // A new session: the id opencode gives it reported by the plugin, a
    // slow turn busy, the answer in the transcript, idle.
    let key = a.session("opencode", "oc1");
    a.api.push(
        Answer::Text("opencode: the zebra is noted.".into()),
        Duration::from_secs(4),
    );
    a.prompt(&key, "remember the word zebra");
    common::wait_for(30, "busy during the slow turn", || {
        a.read(&key, "state") == "busy\n"
    });
    assert_eq!(a.wait(&key, 90), "idle\n");
    common::wait_for(20, "the answer in transcript/last", || {
        a.read(&key, "transcript/last")
            .contains("opencode: the zebra is noted.")
    });
    let hooks = a
        .host
        .path("state")
        .join("sessionfs/agents")
        .join(&key)
        .join("hooks.jsonl");
    let lines = std::fs::read_to_string(&hooks).unwrap_or_default();
    for event in ["session.created", "session.status", "session.idle"] {
        assert!(
            lines.contains(&format!("\"event\":\"{event}\"")),
            "{event}: {lines}"
        );
    }
    // The conversation it writes is the one the plugin named, listed as
    // the session (not on its own).
    let status: Value = serde_json::from_str(&a.read(&key, "status")).unwrap();
    let conversation = status["conversation"].as_str().unwrap().to_string();
    assert!(conversation.starts_with("ses_"), "{status}");
    assert!(lines.contains(&conversation), "{conversation}: {lines}");
    assert_eq!(listed_opencode(&a), std::slice::from_ref(&outside));

    // A tool's permission: waiting, approved once, the command run.
    // In the project: a path outside it asks for that first.
    let marker = a.env.project.join("opencode-tool-ran");
    a.api.push_bash("touch opencode-tool-ran");
    a.api.push_text("opencode: the tool ran.");
    a.prompt(&key, "run the tool please");
    assert_eq!(a.wait(&key, 90), "waiting\n");
    let asked = a.waiting_for(&key);
    assert_eq!(asked["text"], "Permission required", "{asked}");
    ctl(&a, &key, "approve");
    let state = a.wait(&key, 90);
    assert_eq!(
        state,
        "idle\n",
        "{:?}\n{}\n{}",
        a.events(&key),
        std::fs::read_to_string(&hooks).unwrap_or_default(),
        a.read(&key, "screen")
    );
    assert!(marker.exists(), "the approved command ran");
    common::wait_for(20, "the answer after the tool", || {
        a.read(&key, "transcript/last")
            .contains("opencode: the tool ran.")
    });

    // Denied: the command never runs, the turn ends.
    let refused = a.env.project.join("opencode-tool-refused");
    a.api.push_bash("touch opencode-tool-refused");
    a.prompt(&key, "run the other tool");
    assert_eq!(a.wait(&key, 90), "waiting\n");
    ctl(&a, &key, "deny");
    assert_eq!(a.wait(&key, 90), "idle\n");
    assert!(!refused.exists(), "the denied command ran");
    let lines = std::fs::read_to_string(&hooks).unwrap_or_default();
    assert!(lines.contains("\"event\":\"permission.asked\""), "{lines}");

    // A running turn interrupted.
    a.api.push(
        Answer::Text("opencode: never finished.".into()),
        Duration::from_secs(60),
    );
    a.prompt(&key, "a long one");
    common::wait_for(30, "busy", || a.read(&key, "state") == "busy\n");
    ctl(&a, &key, "interrupt");
    common::wait_for(20, "idle after the interrupt", || {
        a.read(&key, "state") == "idle\n"
    });
    // The turns' busy and idle came from the plugin, not the screen.
    let events = a.events(&key);
    let by_hook = |state: &str, detail: &str| {
        events
            .iter()
            .any(|e| e["state"] == state && e["source"] == "hook" && e["detail"] == detail)
    };
    assert!(by_hook("busy", "session.status busy"), "{events:?}");
    assert!(by_hook("idle", "session.idle"), "{events:?}");

    // A new daemon: the live session goes on, its plugin's events followed.
    a.restart();
    assert_eq!(a.read(&key, "state"), "idle\n");
    a.api.push_text("opencode: after the restart.");
    a.prompt(&key, "still there");
    assert_eq!(a.wait(&key, 90), "idle\n");
    common::wait_for(20, "the answer after the restart", || {
        a.read(&key, "transcript/last")
            .contains("opencode: after the restart.")
    });

    // Stopped, then a prompt: resumed with the history.
    ctl(&a, &key, "stop");
    a.api.push_text("Second: it was zebra.");
    a.prompt(&key, "which word was it");
    assert_eq!(a.wait(&key, 90), "idle\n");
    let turn = a
        .api
        .turns()
        .into_iter()
        .rfind(|r| r.user_words().as_deref() == Some("which word was it"))
        .unwrap_or_else(|| panic!("{}", a.api.log()));
    assert!(
        turn.body.contains("remember the word zebra"),
        "no history sent"
    );
    common::wait_for(20, "the second answer in transcript/last", || {
        a.read(&key, "transcript/last")
            .contains("Second: it was zebra.")
    });
    let page = a.read(&key, "transcript/page-0");
    assert!(page.contains("remember the word zebra"), "{page}");

    // Its usage: one request per answer opencode recorded, with the
    // tokens the stand-in reported (100 in, 10 out each).
    let (requests, input, output) = recorded_usage(&a.env.opencode_data(), &conversation);
    assert!(requests >= 5, "{requests}");
    assert_eq!(input, 100 * requests, "the stand-in's prompt count");
    let mut usage = Value::Null;
    common::wait_for(20, "the session's usage counted", || {
        usage = a.m.json(&format!("{key}/usage"));
        usage["requests"] == requests
    });
    assert_eq!(usage["tokens"]["input"], input, "{usage}");
    assert_eq!(usage["tokens"]["output"], output, "{usage}");

    // The conversation made outside resumes from its own directory with
    // its history.
    a.api.push_text("Outside again: it was the otter.");
    a.prompt(&outside, "which animal was it");
    assert_eq!(a.wait(&outside, 90), "idle\n");
    let turn = a
        .api
        .turns()
        .into_iter()
        .rfind(|r| r.user_words().as_deref() == Some("which animal was it"))
        .unwrap_or_else(|| panic!("{}", a.api.log()));
    assert!(turn.body.contains("remember the otter"), "no history sent");
    common::wait_for(20, "the resumed answer in transcript/last", || {
        a.read(&outside, "transcript/last")
            .contains("Outside again: it was the otter.")
    });
    // Archived: its process ended, its conversation still read.
    common::sh_ok(&format!("mv {} {}", a.m.q(&outside), a.m.q("archived/")));
    let archived = format!("archived/{outside}");
    common::wait_for(30, "the archived session stopped", || {
        a.read(&archived, "state") == "stopped\n"
    });
    let last = a.read(&archived, "transcript/last");
    assert!(last.contains("Outside again: it was the otter."), "{last}");
    assert_eq!(
        std::fs::read(&user_config).unwrap(),
        config_before,
        "the user's config changed"
    );
}
