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
    // Interrupted once its answer is on the way, so the scripted answer
    // is never left queued for the next prompt.
    common::wait_for(30, "the long turn's request", || {
        a.api
            .turns()
            .iter()
            .any(|r| r.user_words().as_deref() == Some("a long one"))
    });
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

    // A new daemon goes on with the live session, its plugin's events
    // followed; so does one after a daemon killed during a turn.
    a.outlives_a_restart_and_a_crash_in_a_turn(&key, "opencode: after the restart.");

    // Stopped, then a prompt: resumed with the history.
    ctl(&a, &key, "stop");
    a.api.push_text("Second: it was zebra.");
    a.prompt(&key, "which word was it");
    assert_eq!(a.wait(&key, 90), "idle\n");
    let turn = a.api.turn_with("which word was it");
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
    let turn = a.api.turn_with("which animal was it");
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

/// The user's own `OPENCODE_CONFIG_DIR` still applies (its plugin runs,
/// sessionfs writes nothing there); `/new` inside the TUI is followed (one
/// writer, the earlier conversation recorded); a fork starts from the
/// session's conversation; `mode=auto` runs a tool without asking.
#[test]
fn opencode_keeps_the_users_config_dir_follows_new_forks_and_takes_a_mode() {
    let test = "opencode_keeps_the_users_config_dir_follows_new_forks_and_takes_a_mode";
    let user = tempfile::tempdir().unwrap();
    let loaded = user.path().join("..").join(format!(
        "{}-plugin-loaded",
        user.path().file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir(user.path().join("plugin")).unwrap();
    std::fs::write(
        user.path().join("plugin/mark.js"),
        format!(
            "import {{ writeFileSync }} from \"node:fs\";\n\
             export const Mark = async () => {{ writeFileSync({:?}, \"loaded\"); return {{}}; }};\n",
            loaded.to_string_lossy()
        ),
    )
    .unwrap();
    // What opencode itself writes into each config directory with plugins
    // (its plugin SDK, installed with npm) is left out: sessionfs writes
    // nothing there.
    let listing = |dir: &std::path::Path| {
        let opencodes_own = [
            ".gitignore",
            "bun.lock",
            "node_modules",
            "package-lock.json",
            "package.json",
        ];
        let mut names: Vec<String> = walk(dir)
            .into_iter()
            .filter(|p| !opencodes_own.contains(&p.split('/').next().unwrap()))
            .collect();
        names.sort();
        names
    };
    let user_before = listing(user.path());
    let Some(a) = common::agent_host::Agents::start_with(
        test,
        &[("OPENCODE_CONFIG_DIR", user.path().to_str().unwrap())],
    ) else {
        return;
    };
    assert!(
        a.env.bin.join("opencode").exists(),
        "opencode is missing: run scripts/agents"
    );

    let key = a.session("opencode", "oc-new");
    a.api.push_text("opencode: the heron is noted.");
    a.prompt(&key, "remember the heron");
    assert_eq!(a.wait(&key, 90), "idle\n");
    let first = a.conversation(&key);
    assert!(first.starts_with("ses_"), "{first}");
    assert!(loaded.exists(), "the user's plugin did not run");

    // /new: the next prompt starts a new conversation in the same process,
    // and the session goes on as it.
    a.prompt(&key, "/new");
    a.api.push_text("opencode: after new.");
    a.prompt(&key, "second question");
    assert_eq!(a.wait(&key, 90), "idle\n");
    a.wait_on(&key, 20, "the session to follow /new", || {
        let now = a.conversation(&key);
        now.starts_with("ses_") && now != first
    });
    let second = a.conversation(&key);
    let turn = a.api.turn_with("second question");
    assert!(
        !turn.body.contains("remember the heron"),
        "history after /new"
    );
    // The key's own id, which opencode never wrote, is not one of them.
    common::wait_for(5, "the earlier conversation recorded", || {
        a.m.json(&format!("{key}/status"))["conversations"] == serde_json::json!([first])
    });
    common::wait_for(20, "the answer after /new", || {
        a.read(&key, "transcript/last")
            .contains("opencode: after new.")
    });
    let new_key = format!("opencode:{second}");
    common::wait_for(20, "the new conversation a link", || {
        std::fs::read_link(a.m.path(&new_key)).is_ok_and(|l| l.to_string_lossy() == key)
    });
    assert!(!listed_opencode(&a).contains(&new_key));
    let earlier = a.read(&key, &format!("transcript/{first}/page-0"));
    assert!(earlier.contains("remember the heron"), "{earlier}");

    // A fork of the session's conversation.
    common::sh_ok(&format!(
        "echo fork id=oc-fork > {}",
        a.m.q(&format!("{key}/ctl"))
    ));
    let fork = "opencode:oc-fork";
    a.api.push_text("opencode: forked.");
    a.prompt(fork, "what came before");
    assert_eq!(a.wait(fork, 90), "idle\n", "{}", a.read(fork, "screen"));
    assert!(a.agent_argv(fork).contains(&format!("-s {second} --fork")));
    let hooks = a
        .host
        .path("state")
        .join("sessionfs/agents")
        .join(fork)
        .join("hooks.jsonl");
    assert!(
        a.api
            .turns()
            .iter()
            .any(|r| r.user_words().as_deref() == Some("what came before")),
        "idle before the fork's turn was asked for:\n{:?}\n{}\n{}",
        a.events(fork),
        std::fs::read_to_string(&hooks).unwrap_or_default(),
        a.api.log()
    );
    let turn = a.api.turn_with("what came before");
    assert!(
        turn.body.contains("second question"),
        "no history forked\n{}",
        a.diagnose(fork)
    );
    common::wait_for(20, "the fork's own conversation", || {
        let c = a.conversation(fork);
        c.starts_with("ses_") && c != second
    });
    common::wait_for(20, "the fork's answer", || {
        a.read(fork, "transcript/last")
            .contains("opencode: forked.")
    });
    assert!(!a.read(&key, "transcript/last").contains("what came before"));

    // mode=auto: the tool runs without asking.
    let marker = a.env.project.join("opencode-auto-ran");
    common::sh_ok(&format!(
        "echo 'new opencode id=oc-auto workspace={} mode=auto' > {}",
        a.env.project.display(),
        a.m.q("ctl")
    ));
    let auto = "opencode:oc-auto";
    a.api.push_bash("touch opencode-auto-ran");
    a.api.push_text("opencode: ran without asking.");
    a.prompt(auto, "run the tool");
    assert_eq!(a.wait(auto, 90), "idle\n", "{}", a.read(auto, "screen"));
    assert!(marker.exists(), "the tool ran");
    assert!(
        !a.states(auto).iter().any(|s| s == "waiting"),
        "{:?}",
        a.states(auto)
    );
    assert!(a.agent_argv(auto).contains("--auto"));

    // An API error opencode does not retry: its plugin's session.error
    // ends the turn, with the error's name in the events.
    a.api.fail_with(Some(400));
    a.prompt(auto, "this one fails");
    let ended = || {
        a.events(auto).iter().any(|e| {
            e["state"] == "idle"
                && e["source"] == "hook"
                && e["detail"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("session.error"))
        })
    };
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !ended() {
        let hooks = a
            .host
            .path("state")
            .join("sessionfs/agents")
            .join(auto)
            .join("hooks.jsonl");
        assert!(
            std::time::Instant::now() < until,
            "no idle after session.error: {:?}\n{}\n{}\n{}",
            a.events(auto),
            std::fs::read_to_string(hooks).unwrap_or_default(),
            a.read(auto, "screen"),
            a.api.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    a.api.fail_with(None);
    assert_eq!(a.wait(auto, 30), "idle\n");
    assert_eq!(
        listing(user.path()),
        user_before,
        "the user's directory changed"
    );
}

/// Every path under `dir`, relative to it.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = vec![];
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        out.push(
            path.strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned(),
        );
        if path.is_dir() {
            out.extend(
                walk(&path)
                    .into_iter()
                    .map(|p| format!("{}/{p}", entry.file_name().to_string_lossy())),
            );
        }
    }
    out
}
