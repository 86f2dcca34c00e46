//! The real Gemini CLI 0.61.0 offline against the model API stand-in's
//! `generateContent` (its routing call) and `streamGenerateContent`: what a
//! Gemini engine stands on, verified: one session's hooks given through a
//! system settings file of its own (the user's settings untouched), the
//! session id the hooks report, the store each run writes, and `--resume`
//! from the project's directory.

mod common;

use common::agents::{agents_bin, AgentEnv};
use common::model_api::ModelApi;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A directory for the per-session settings whose every ancestor is
/// writable by its owner alone: Gemini skips a system settings file under
/// `/tmp` ("Parent directory '/tmp' is insecure"). Under the build's
/// `target/` when that is so, else under `$HOME/.cache` (a clone under
/// `/tmp` is not).
fn private_dir() -> tempfile::TempDir {
    let candidates = [
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/sessionfs-tests"),
    ];
    let base = candidates
        .iter()
        .find(|base| {
            std::fs::create_dir_all(base).is_ok()
                && base.ancestors().all(|dir| {
                    std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o022 == 0)
                })
        })
        .unwrap_or_else(|| panic!("no directory writable by its owner alone among {candidates:?}"));
    let dir = tempfile::tempdir_in(base).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// A mount for the built-in `gemini` engine: its state directory (where
/// each session's system settings are written) private, since Gemini skips
/// a settings file under a world-writable directory. The directory goes
/// with the mount (bound first, so it is removed after the mount ends).
fn gemini_mount(test: &str) -> Option<(tempfile::TempDir, common::agent_host::Agents)> {
    let state = private_dir();
    let a = common::agent_host::Agents::start_mounted(
        test,
        "mnt",
        &[("XDG_STATE_HOME", state.path().to_str().unwrap())],
        &[],
    )?;
    assert!(
        a.env.bin.join("gemini").exists(),
        "gemini is missing: run scripts/agents"
    );
    Some((state, a))
}

/// A settings file holding only hooks that append each event's JSON to `log`.
fn hook_settings(dir: &Path, log: &Path) -> PathBuf {
    let command = format!("sh -c 'cat >> {0}; echo >> {0}'", log.display());
    let hook =
        serde_json::json!([{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]);
    let settings = serde_json::json!({"hooks": {
        "SessionStart": hook, "BeforeAgent": hook, "AfterAgent": hook, "Notification": hook
    }});
    let path = dir.join("settings.json");
    std::fs::write(&path, settings.to_string()).unwrap();
    path
}

fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run_json(env: &AgentEnv, dir: &Path, settings: &Path, args: &[&str]) -> (bool, Value, String) {
    let out = env
        .command("gemini")
        .current_dir(dir)
        .env("GEMINI_CLI_SYSTEM_SETTINGS_PATH", settings)
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        out.status.success(),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        format!("{stdout}\n{stderr}"),
    )
}

#[test]
fn gemini_answers_offline_reports_its_session_to_per_session_hooks_and_resumes() {
    let test = "gemini_answers_offline_reports_its_session_to_per_session_hooks_and_resumes";
    let Some(bin) = agents_bin(test) else {
        return;
    };
    assert!(
        bin.join("gemini").exists(),
        "gemini is missing: run scripts/agents"
    );
    let api = ModelApi::start();
    let root = tempfile::tempdir().unwrap();
    let env = AgentEnv::new(bin, root.path(), &api.url());
    let private = private_dir();
    let log = private.path().join("hooks.jsonl");
    let settings = hook_settings(private.path(), &log);
    let user_settings = env.home.join(".gemini/settings.json");
    let before = std::fs::read(&user_settings).unwrap();

    api.push_text("Gemini stand-in: the zebra is noted.");
    let (ok, first, out) = run_json(
        &env,
        &env.project,
        &settings,
        &["-p", "remember the word zebra"],
    );
    assert!(ok, "{out}\n{}", api.log());
    assert_eq!(
        first["response"], "Gemini stand-in: the zebra is noted.",
        "{out}"
    );
    let id = first["session_id"].as_str().unwrap().to_string();
    // Two calls per prompt: the routing call, then the streamed turn.
    let paths: Vec<String> = api.requests().iter().map(|r| r.path.clone()).collect();
    assert!(
        paths.iter().any(|p| p.ends_with(":generateContent")),
        "{paths:?}"
    );
    assert!(
        paths
            .iter()
            .any(|p| p.contains(":streamGenerateContent?alt=sse")),
        "{paths:?}"
    );

    // The hooks of this run alone, each naming the session.
    let seen = events(&log);
    let names: Vec<&str> = seen
        .iter()
        .map(|e| e["hook_event_name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        ["SessionStart", "BeforeAgent", "AfterAgent"],
        "{seen:?}"
    );
    for e in &seen {
        assert_eq!(e["session_id"], id.as_str(), "{e}");
    }
    assert_eq!(seen[0]["source"], "startup");
    assert_eq!(seen[1]["prompt"], "remember the word zebra");
    assert_eq!(
        seen[2]["prompt_response"],
        "Gemini stand-in: the zebra is noted."
    );
    assert_eq!(
        std::fs::read(&user_settings).unwrap(),
        before,
        "user settings changed"
    );

    // The store: one file named by the id's first 8, the project's name
    // from projects.json.
    let projects: Value =
        serde_json::from_slice(&std::fs::read(env.home.join(".gemini/projects.json")).unwrap())
            .unwrap();
    let name = projects["projects"][env.project.to_str().unwrap()]
        .as_str()
        .unwrap_or_else(|| panic!("{projects}"))
        .to_string();
    let stores = env.gemini_stores();
    assert_eq!(stores.len(), 1, "{stores:?}");
    let store = stores[0].clone();
    assert!(store.starts_with(env.home.join(".gemini/tmp").join(&name).join("chats")));
    assert!(store
        .to_string_lossy()
        .ends_with(&format!("-{}.jsonl", &id[..8])));
    let text = std::fs::read_to_string(&store).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["sessionId"], id.as_str());
    assert!(text.contains("the zebra is noted"));
    assert!(text.contains("<session_context>"));

    // Resumed from the project's directory: the same session, the history
    // sent, the turn appended to the same file.
    api.push_text("Second: it was zebra.");
    let (ok, second, out) = run_json(
        &env,
        &env.project,
        &settings,
        &["--resume", &id, "-p", "which word was it"],
    );
    assert!(ok, "{out}");
    assert_eq!(second["session_id"], id.as_str());
    let turn = api.turn_with("which word was it");
    assert!(
        turn.body.contains("remember the word zebra"),
        "no history sent"
    );
    assert!(std::fs::read_to_string(&store)
        .unwrap()
        .contains("Second: it was zebra."));
    let resumed = events(&log);
    assert!(
        resumed[3..].iter().all(|e| e["session_id"] == id.as_str()),
        "{resumed:?}"
    );
    assert_eq!(resumed[3]["source"], "resume", "{resumed:?}");

    // From another directory the session is not found: a resume must run
    // where the conversation was made.
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let (ok, _, out) = run_json(&env, &elsewhere, &settings, &["--resume", &id, "-p", "x"]);
    assert!(!ok, "{out}");
    assert!(out.contains("No previous sessions found"), "{out}");
}

/// The real Gemini TUI through a real mount, driven by the config entry
/// `docs/engines/gemini.json` alone (screen rules, `--session-id` and
/// `--resume`): prompt, busy, idle, a permission approved, and a resume
/// after a stop that sends the history.
#[test]
fn the_gemini_tui_from_a_config_entry_answers_asks_and_resumes_through_the_mount() {
    let test = "the_gemini_tui_from_a_config_entry_answers_asks_and_resumes_through_the_mount";
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/engines/gemini.json");
    let Some(a) = common::agent_host::Agents::start_mounted(
        test,
        "mnt",
        &[],
        &["--config", config.to_str().unwrap()],
    ) else {
        return;
    };
    assert!(
        a.env.bin.join("gemini").exists(),
        "gemini is missing: run scripts/agents"
    );
    let key = a.session("gemini-tui", "6e000000-0000-4000-8000-000000000001");
    a.api.push(
        common::model_api::Answer::Text("Gemini: the zebra is noted.".into()),
        std::time::Duration::from_secs(6),
    );
    a.prompt(&key, "remember the word zebra");
    common::wait_for(20, "busy during the slow turn", || {
        a.read(&key, "state") == "busy\n"
    });
    assert_eq!(a.wait(&key, 90), "idle\n");
    common::wait_for(20, "the answer on the screen", || {
        a.read(&key, "screen").contains("the zebra is noted")
    });

    let marker = a.host.path("gemini-tool-ran");
    a.api.push_bash(&format!("touch {}", marker.display()));
    a.api.push_text("Gemini: the tool ran.");
    a.prompt(&key, "run the tool please");
    assert_eq!(a.wait(&key, 90), "waiting\n");
    let asked = a.waiting_for(&key);
    assert!(
        asked["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Allow execution of"),
        "{asked}"
    );
    common::sh_ok(&format!("echo approve > {}", a.m.q(&format!("{key}/ctl"))));
    assert_eq!(a.wait(&key, 90), "idle\n");
    assert!(marker.exists(), "the approved command ran");

    common::sh_ok(&format!("echo stop > {}", a.m.q(&format!("{key}/ctl"))));
    a.api.push_text("Second: it was zebra.");
    a.prompt(&key, "which word was it");
    assert_eq!(a.wait(&key, 90), "idle\n");
    let turn = a.api.turn_with("which word was it");
    assert!(
        turn.body.contains("remember the word zebra"),
        "no history sent"
    );
    // Its own store has the whole conversation under the session's id.
    let stores = a.env.gemini_stores();
    let with_turns: Vec<&PathBuf> = stores
        .iter()
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("Second: it was zebra.")))
        .collect();
    assert_eq!(with_turns.len(), 1, "{stores:?}");
    let text = std::fs::read_to_string(with_turns[0]).unwrap();
    assert!(text.contains("\"sessionId\":\"6e000000-0000-4000-8000-000000000001\""));
    assert!(text.contains("remember the word zebra"));
}

/// The built-in engine `gemini` through a real mount: a conversation made
/// by `gemini -p` outside sessionfs is listed with its title and renders;
/// a new session answers a prompt into `transcript/last` and settles
/// `idle` (its hooks say busy and idle); a tool's permission is `waiting`
/// and approved; after a stop a prompt resumes it with the history sent.
#[test]
fn the_gemini_engine_finds_answers_renders_and_resumes_through_the_mount() {
    let test = "the_gemini_engine_finds_answers_renders_and_resumes_through_the_mount";
    let Some((state, a)) = gemini_mount(test) else {
        return;
    };

    // Made outside sessionfs: discovered, titled by its first prompt.
    a.api.push_text("Outside: the otter is noted.");
    let out = a
        .env
        .command("gemini")
        .current_dir(&a.env.project)
        .args(["-p", "remember the otter", "-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let outside = format!("gemini:{}", made["session_id"].as_str().unwrap());
    common::wait_for(20, "the outside conversation listed", || {
        common::sh_ok(&format!("ls {}", a.m.q(""))).contains(&outside)
    });
    let meta: Value = serde_json::from_str(&a.read(&outside, "meta.json")).unwrap();
    assert_eq!(meta["title"], "remember the otter", "{meta}");
    let last = a.read(&outside, "transcript/last");
    assert!(last.contains("remember the otter"), "{last}");
    assert!(last.contains("Outside: the otter is noted."), "{last}");
    assert!(!last.contains("session_context"), "{last}");

    // A new session: a slow turn busy, the answer in the transcript, idle.
    let key = a.session("gemini", "6e000000-0000-4000-8000-0000000000e1");
    a.api.push(
        common::model_api::Answer::Text("Gemini: the zebra is noted.".into()),
        std::time::Duration::from_secs(3),
    );
    a.prompt(&key, "remember the word zebra");
    common::wait_for(20, "busy during the slow turn", || {
        a.read(&key, "state") == "busy\n"
    });
    assert_eq!(a.wait(&key, 90), "idle\n");
    common::wait_for(20, "the answer in transcript/last", || {
        a.read(&key, "transcript/last")
            .contains("Gemini: the zebra is noted.")
    });
    let meta: Value = serde_json::from_str(&a.read(&key, "meta.json")).unwrap();
    assert_eq!(meta["title"], "remember the word zebra", "{meta}");
    // Its hooks reported the turn, under the session's own id.
    let hooks = state
        .path()
        .join("sessionfs/agents")
        .join(&key)
        .join("hooks.jsonl");
    let lines = std::fs::read_to_string(&hooks).unwrap_or_default();
    for event in ["SessionStart", "BeforeAgent", "AfterAgent"] {
        assert!(
            lines.contains(&format!("\"event\":\"{event}\"")),
            "{event}: {lines}"
        );
    }
    assert!(
        lines.contains("6e000000-0000-4000-8000-0000000000e1"),
        "{lines}"
    );
    let settings = std::fs::read(a.env.home.join(".gemini/settings.json")).unwrap();
    assert!(!String::from_utf8_lossy(&settings).contains("hook"));

    // A tool's permission: waiting, approved, the command run.
    let marker = a.host.path("gemini-engine-tool-ran");
    a.api.push_bash(&format!("touch {}", marker.display()));
    a.api.push_text("Gemini: the tool ran.");
    a.prompt(&key, "run the tool please");
    assert_eq!(a.wait(&key, 90), "waiting\n");
    common::sh_ok(&format!("echo approve > {}", a.m.q(&format!("{key}/ctl"))));
    assert_eq!(a.wait(&key, 90), "idle\n");
    assert!(marker.exists(), "the approved command ran");
    let lines = std::fs::read_to_string(&hooks).unwrap_or_default();
    assert!(lines.contains("ToolPermission"), "{lines}");
    // The turns' busy and idle came from the hooks, not the screen.
    let events = a.events(&key);
    let by_hook = |state: &str, detail: &str| {
        events
            .iter()
            .any(|e| e["state"] == state && e["source"] == "hook" && e["detail"] == detail)
    };
    assert!(by_hook("busy", "BeforeAgent"), "{events:?}");
    assert!(by_hook("idle", "AfterAgent"), "{events:?}");

    // Stopped, then a prompt: resumed with the history.
    common::sh_ok(&format!("echo stop > {}", a.m.q(&format!("{key}/ctl"))));
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
    // The resume's stub file is not a conversation of its own.
    let listed = common::sh_ok(&format!("ls {}", a.m.q("")));
    assert_eq!(
        listed
            .matches("6e000000-0000-4000-8000-0000000000e1")
            .count(),
        1,
        "{listed}"
    );
    let page = a.read(&key, "transcript/page-0");
    assert!(page.contains("remember the word zebra"), "{page}");

    // Its usage: each reply the store recorded, once (a row written again
    // is the same reply), with the tokens the stand-in reported.
    let mut replies: std::collections::HashMap<String, (u64, u64)> = Default::default();
    for file in a.env.gemini_stores() {
        let text = std::fs::read_to_string(&file).unwrap();
        if !text.contains("6e000000-0000-4000-8000-0000000000e1") {
            continue;
        }
        for row in text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            let t = &row["tokens"];
            if row["type"] == "gemini" && t.is_object() {
                let n = |k: &str| t[k].as_u64().unwrap_or(0);
                replies.insert(
                    row["id"].as_str().unwrap().to_string(),
                    (
                        n("input") - n("cached") + n("tool"),
                        n("output") + n("thoughts"),
                    ),
                );
            }
        }
    }
    assert!(replies.len() >= 3, "{replies:?}");
    let input: u64 = replies.values().map(|r| r.0).sum();
    let output: u64 = replies.values().map(|r| r.1).sum();
    assert_eq!(
        input,
        100 * replies.len() as u64,
        "the stand-in's prompt count"
    );
    let mut usage = Value::Null;
    common::wait_for(20, "the session's usage counted", || {
        usage = a.m.json(&format!("{key}/usage"));
        usage["requests"] == replies.len() as u64
    });
    assert_eq!(usage["tokens"]["input"], input, "{usage}");
    assert_eq!(usage["tokens"]["output"], output, "{usage}");

    // The conversation made outside resumes from its own directory (the
    // workspace its store names) with its history.
    a.api.push_text("Outside again: it was the otter.");
    a.prompt(&outside, "which animal was it");
    assert_eq!(a.wait(&outside, 90), "idle\n");
    let turn = a.api.turn_with("which animal was it");
    assert!(turn.body.contains("remember the otter"), "no history sent");
    common::wait_for(20, "the resumed answer in transcript/last", || {
        a.read(&outside, "transcript/last")
            .contains("Outside again: it was the otter.")
    });
}

/// Gemini's `/clear` starts a new conversation in the same process: the
/// session follows it (one writer, the new key a link to the session, the
/// earlier conversation still read); a fork starts from the session's
/// conversation under an id Gemini picks; `mode=yolo` runs a tool without
/// asking.
#[test]
fn a_gemini_session_follows_clear_forks_and_takes_a_mode() {
    let test = "a_gemini_session_follows_clear_forks_and_takes_a_mode";
    let Some((_state, a)) = gemini_mount(test) else {
        return;
    };
    let id = "6e000000-0000-4000-8000-0000000000c1";
    let key = a.session("gemini", id);
    a.api.push_text("Gemini: before the clear.");
    a.prompt(&key, "first question");
    assert_eq!(a.wait(&key, 90), "idle\n");
    assert!(
        a.agent_argv(&key).contains("--approval-mode default"),
        "{}",
        a.agent_argv(&key)
    );

    // /clear: the session goes on as the new conversation.
    a.prompt(&key, "/clear");
    a.wait_on(&key, 30, "the session to follow /clear", || {
        let now = a.conversation(&key);
        !now.is_empty() && now != id
    });
    let new_id = a.conversation(&key);
    let new_key = format!("gemini:{new_id}");
    common::wait_for(5, "the earlier conversation recorded", || {
        a.m.json(&format!("{key}/status"))["conversations"] == serde_json::json!([id])
    });
    a.api.push_text("Gemini: after the clear.");
    a.prompt(&key, "second question");
    assert_eq!(a.wait(&key, 90), "idle\n");
    common::wait_for(20, "the answer after the clear", || {
        a.read(&key, "transcript/last")
            .contains("Gemini: after the clear.")
    });
    let last = a.read(&key, "transcript/last");
    assert!(!last.contains("first question"), "{last}");
    let turn = a.api.turn_with("second question");
    assert!(
        !turn.body.contains("first question"),
        "history after /clear"
    );
    // The new conversation is a link to the session, not listed apart.
    common::wait_for(20, "the new conversation's store found", || {
        std::fs::read_link(a.m.path(&new_key)).is_ok()
    });
    assert_eq!(
        std::fs::read_link(a.m.path(&new_key))
            .unwrap()
            .to_string_lossy(),
        key
    );
    let listing = common::sh_ok(&format!("ls {}", a.m.q("")));
    assert!(!listing.lines().any(|l| l == new_key), "{listing}");
    let earlier = a.read(&key, &format!("transcript/{id}/page-0"));
    assert!(earlier.contains("first question"), "{earlier}");

    // A fork of the session's conversation: a new one with its turns.
    let fork = "gemini:6e000000-0000-4000-8000-0000000000c2";
    common::sh_ok(&format!(
        "echo fork id=6e000000-0000-4000-8000-0000000000c2 > {}",
        a.m.q(&format!("{key}/ctl"))
    ));
    let meta: Value = serde_json::from_str(&a.read(fork, "meta.json")).unwrap();
    assert_eq!(meta["forked_from"], new_id, "{meta}");
    a.api.push_text("Gemini: forked.");
    a.prompt(fork, "what came before");
    assert_eq!(a.wait(fork, 90), "idle\n", "{}", a.read(fork, "screen"));
    let turn = a.api.turn_with("what came before");
    assert!(turn.body.contains("second question"), "no history forked");
    assert!(
        a.agent_argv(fork).contains("--session-file"),
        "{}",
        a.agent_argv(fork)
    );
    let forked = a.conversation(fork);
    assert!(
        !forked.is_empty() && forked != new_id && !fork.ends_with(&forked),
        "the fork writes a conversation Gemini named: {forked}"
    );
    common::wait_for(20, "the fork's answer", || {
        a.read(fork, "transcript/last").contains("Gemini: forked.")
    });
    // The original is only read.
    let original = a.read(&key, "transcript/last");
    assert!(!original.contains("what came before"), "{original}");

    // mode=yolo: the tool runs without asking.
    let marker = a.host.path("gemini-yolo-ran");
    let (ok, said) = {
        let out = common::sh(&format!(
            "echo 'new gemini id=6e000000-0000-4000-8000-0000000000c3 workspace={} mode=yolo' > {}",
            a.env.project.display(),
            a.m.q("ctl")
        ));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert!(ok, "{said}");
    let yolo = "gemini:6e000000-0000-4000-8000-0000000000c3";
    a.api.push_bash(&format!("touch {}", marker.display()));
    a.api.push_text("Gemini: ran without asking.");
    a.prompt(yolo, "run the tool");
    assert_eq!(a.wait(yolo, 90), "idle\n", "{}", a.read(yolo, "screen"));
    assert!(marker.exists(), "the tool ran");
    assert!(
        !a.states(yolo).iter().any(|s| s == "waiting"),
        "{:?}",
        a.states(yolo)
    );
    assert!(a.agent_argv(yolo).contains("--approval-mode yolo"));
}

/// The built-in engine's answers and its life: a tool's question read in
/// `waiting_for` and denied (the command never runs), a running turn
/// interrupted, a new daemon going on with the live session, the
/// `transcript/latest` link, and an archived session still read.
#[test]
fn a_gemini_question_is_denied_a_turn_interrupted_and_the_session_outlives_a_restart() {
    let test = "a_gemini_question_is_denied_a_turn_interrupted_and_the_session_outlives_a_restart";
    let Some((_state, mut a)) = gemini_mount(test) else {
        return;
    };
    let key = a.session("gemini", "6e000000-0000-4000-8000-0000000000d1");
    let ctl = |a: &common::agent_host::Agents, what: &str| {
        common::sh_ok(&format!("echo {what} > {}", a.m.q(&format!("{key}/ctl"))));
    };

    // Denied: waiting_for says what it asks; the command never runs.
    let refused = a.host.path("gemini-tool-refused");
    // Gemini asks the model nothing more after a refusal.
    a.api.push_bash(&format!("touch {}", refused.display()));
    a.prompt(&key, "run the tool");
    assert_eq!(a.wait(&key, 90), "waiting\n");
    let asked = a.waiting_for(&key);
    assert!(
        asked["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Allow execution of")),
        "{asked}"
    );
    ctl(&a, "deny");
    assert_eq!(a.wait(&key, 90), "idle\n", "{}", a.read(&key, "screen"));
    assert!(!refused.exists(), "the denied command ran");

    // A running turn interrupted.
    a.api.push(
        common::model_api::Answer::Text("Gemini: never finished.".into()),
        std::time::Duration::from_secs(60),
    );
    a.prompt(&key, "a long one");
    common::wait_for(30, "busy", || a.read(&key, "state") == "busy\n");
    // Interrupted once its answer is on the way (an interrupt during the
    // routing call before it would leave the scripted answer queued).
    common::wait_for(30, "the long turn's request", || {
        a.api
            .turns()
            .iter()
            .any(|r| r.user_words().as_deref() == Some("a long one"))
    });
    ctl(&a, "interrupt");
    common::wait_for(20, "idle after the interrupt", || {
        a.read(&key, "state") == "idle\n"
    });
    assert!(
        !a.read(&key, "screen").contains("never finished"),
        "{}",
        a.read(&key, "screen")
    );

    // A new daemon goes on with the live session; so does one after a
    // daemon killed during a turn.
    a.outlives_a_restart_and_a_crash_in_a_turn(&key, "Gemini: after the restart.");
    let latest = std::fs::read_link(a.m.path(&format!("{key}/transcript/latest"))).unwrap();
    assert_eq!(latest.to_string_lossy(), "page-0");
    let page = a.read(&key, "transcript/latest");
    assert!(page.contains("run the tool"), "{page}");
    assert!(page.contains("Gemini: after the restart."), "{page}");

    // Archived: its process ended, its conversation still read.
    common::sh_ok(&format!("mv {} {}", a.m.q(&key), a.m.q("archived/")));
    let archived = format!("archived/{key}");
    common::wait_for(30, "the archived session stopped", || {
        a.read(&archived, "state") == "stopped\n"
    });
    let last = a.read(&archived, "transcript/last");
    assert!(last.contains("Gemini: after the restart."), "{last}");
}

/// `scripts/bench agents`: the built-in Gemini engine, its state from its
/// hooks.
#[test]
#[ignore = "a benchmark: scripts/bench agents"]
fn bench_gemini_prompt_to_busy_and_last_byte_to_idle() {
    let test = "bench_gemini_prompt_to_busy_and_last_byte_to_idle";
    let Some((_state, a)) = gemini_mount(test) else {
        return;
    };
    let key = a.session("gemini", "6e000000-0000-4000-8000-0000000000b1");
    println!("{}", a.bench_turns("gemini", &key, 5));
}

/// Gemini's first run on a machine where it never signed in, in a folder
/// it was never told to trust: the session is `waiting` on each question
/// (`waiting_for` says trust, then sign-in twice), a prompt meanwhile is
/// refused, `approve` answers each as offered (the folder trusted, the key
/// in `GEMINI_API_KEY` used), and the prompt then goes in.
#[test]
fn a_first_run_asks_trust_and_sign_in_and_approve_answers_them() {
    let test = "a_first_run_asks_trust_and_sign_in_and_approve_answers_them";
    let state = private_dir();
    let Some(a) = common::agent_host::Agents::start_mounted(
        test,
        "mnt",
        &[
            ("XDG_STATE_HOME", state.path().to_str().unwrap()),
            // As on a machine where it was never set.
            ("GEMINI_CLI_TRUST_WORKSPACE", ""),
        ],
        &[],
    ) else {
        return;
    };
    // No way to sign in chosen yet (the rest keeps it offline).
    let settings = a.env.home.join(".gemini/settings.json");
    std::fs::write(
        &settings,
        r#"{"privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false}}"#,
    )
    .unwrap();
    let key = a.session("gemini", "6e000000-0000-4000-8000-0000000000e1");
    common::sh_ok(&format!("echo open > {}", a.m.q(&format!("{key}/ctl"))));
    assert_eq!(a.wait(&key, 90), "waiting\n", "{}", a.diagnose(&key));
    let asked = a.waiting_for(&key);
    assert_eq!(asked["kind"], "trust", "{asked}");
    assert_eq!(asked["text"], "Do you trust the files in this folder?");
    assert_eq!(asked["options"][0], "Trust folder (project)", "{asked}");
    // A prompt meanwhile is refused: the question comes first.
    let refused = common::sh(&format!(
        "env printf 'too early\\n' > {}",
        a.m.q(&format!("{key}/prompt"))
    ));
    assert!(!refused.status.success());
    let approve = || {
        common::sh_ok(&format!("echo approve > {}", a.m.q(&format!("{key}/ctl"))));
    };
    approve();
    let trusted = std::fs::read_to_string(a.env.home.join(".gemini/trustedFolders.json")).unwrap();
    assert!(
        trusted.contains(a.env.project.to_str().unwrap()),
        "{trusted}"
    );
    // Restarted trusting it, it asks how to sign in, then for the key.
    for question in [
        "How would you like to authenticate for this project?",
        "Enter Gemini API Key",
    ] {
        assert_eq!(a.wait(&key, 90), "waiting\n", "{}", a.diagnose(&key));
        let asked = a.waiting_for(&key);
        assert_eq!(asked["kind"], "sign_in", "{asked}");
        assert_eq!(asked["text"], question, "{asked}");
        approve();
    }
    let chosen: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(chosen["security"]["auth"]["selectedType"], "gemini-api-key");
    a.api.push_text("Gemini: trusted and answering.");
    a.prompt(&key, "first question");
    assert_eq!(a.wait(&key, 90), "idle\n");
    a.wait_on(&key, 20, "the answer in transcript/last", || {
        a.read(&key, "transcript/last")
            .contains("Gemini: trusted and answering.")
    });
}
