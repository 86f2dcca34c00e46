//! Tokens and cost through a real mount (SPEC §14): `KEY/usage`, the root
//! `usage.json`, `tokens` and `cost_usd` in `meta.json` and
//! `sessions.json`, and `sessionfs ls --sort cost`. The recorded stores'
//! counts are checked against a count made here from their raw rows and
//! against `ccusage` 20 on the same stores; the real Claude and Codex
//! against what the model API stand-in reported.

mod common;

use common::agent_host::Agents;
use common::agents::agents_bin;
use common::model_api::{CLAUDE_USAGE, CODEX_USAGE};
use common::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Tokens of each kind: input, output, cache write, cache read.
type Kinds = [u64; 4];

fn kinds_of(usage: &Value) -> Kinds {
    let t = &usage["tokens"];
    [
        t["input"].as_u64().unwrap(),
        t["output"].as_u64().unwrap(),
        t["cache_write"].as_u64().unwrap(),
        t["cache_read"].as_u64().unwrap(),
    ]
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Claude's requests in `files`, counted from the raw rows: one per
/// message id and request id, the larger kept.
fn count_claude(files: &[PathBuf]) -> (usize, Kinds) {
    let mut requests: HashMap<String, Kinds> = HashMap::new();
    for file in files {
        for row in jsonl(file) {
            let u = &row["message"]["usage"];
            if !u.is_object() || row["message"]["model"] == "<synthetic>" {
                continue;
            }
            let n = |k: &str| u[k].as_u64().unwrap_or(0);
            let kinds = [
                n("input_tokens"),
                n("output_tokens"),
                n("cache_creation_input_tokens"),
                n("cache_read_input_tokens"),
            ];
            let id = format!(
                "{}/{}",
                row["message"]["id"].as_str().unwrap(),
                row["requestId"].as_str().unwrap_or("")
            );
            let old = requests.entry(id).or_default();
            if kinds.iter().sum::<u64>() > old.iter().sum::<u64>() {
                *old = kinds;
            }
        }
    }
    let mut total = [0; 4];
    for k in requests.values() {
        for i in 0..4 {
            total[i] += k[i];
        }
    }
    (requests.len(), total)
}

/// Codex's requests in a rollout: each `token_count` whose total moved.
fn count_codex(file: &Path) -> (usize, Kinds) {
    let (mut n, mut total, mut last_total) = (0, [0; 4], Value::Null);
    for row in jsonl(file) {
        let info = &row["payload"]["info"];
        if row["payload"]["type"] != "token_count" || !info.is_object() {
            continue;
        }
        if info["total_token_usage"] == last_total {
            continue;
        }
        last_total = info["total_token_usage"].clone();
        let l = &info["last_token_usage"];
        let get = |k: &str| l[k].as_u64().unwrap();
        n += 1;
        total[0] += get("input_tokens") - get("cached_input_tokens");
        total[1] += get("output_tokens");
        total[3] += get("cached_input_tokens");
    }
    (n, total)
}

/// A Claude conversation's files: its own and its subagents'.
fn claude_files(projects: &Path, id: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in std::fs::read_dir(projects).unwrap() {
        let dir = dir.unwrap().path();
        let own = dir.join(format!("{id}.jsonl"));
        if own.exists() {
            files.push(own);
            if let Ok(subs) = std::fs::read_dir(dir.join(id).join("subagents")) {
                files.extend(subs.map(|s| s.unwrap().path()));
            }
        }
    }
    files
}

/// `ccusage ARGS --offline --json` on the stores `env` names.
fn ccusage(bin: &Path, env: &[(&str, &Path)], args: &[&str]) -> Value {
    let mut cmd = std::process::Command::new(bin.join("ccusage"));
    cmd.args(args).args(["--offline", "--json"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "ccusage {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Waits until `KEY/usage` is counted and returns it.
fn usage_of(m: &Mount, key: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    wait_for(30, &format!("{key}/usage to be counted"), || {
        last = m.json(&format!("{key}/usage"));
        !last.is_null() && done(&last)
    });
    last
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn real_stores_usage_equals_an_independent_count_and_ccusage() {
    let Some(bin) = agents_bin("real_stores_usage_equals_an_independent_count_and_ccusage") else {
        return;
    };
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real");
    let host = Host::new()
        .with_env("CLAUDE_CONFIG_DIR", real.join("claude").to_str().unwrap())
        .with_env("CODEX_HOME", real.join("codex").to_str().unwrap());
    let m = host.mount("mnt");
    let by_claude = ccusage(
        &bin,
        &[("CLAUDE_CONFIG_DIR", &real.join("claude"))],
        &["claude", "session"],
    );
    let mut claude_sessions = 0;
    let mut total_cost = 0.0;
    for s in by_claude["sessions"].as_array().unwrap() {
        let id = s["sessionId"].as_str().unwrap();
        let key = format!("claude:{id}");
        let (requests, kinds) = count_claude(&claude_files(&real.join("claude/projects"), id));
        let usage = usage_of(&m, &key, |_| true);
        assert_eq!(usage["requests"], requests as u64, "{key}: {usage}");
        assert_eq!(
            kinds_of(&usage),
            kinds,
            "{key}: our count from the raw rows"
        );
        let theirs = [
            s["inputTokens"].as_u64().unwrap(),
            s["outputTokens"].as_u64().unwrap(),
            s["cacheCreationTokens"].as_u64().unwrap(),
            s["cacheReadTokens"].as_u64().unwrap(),
        ];
        assert_eq!(kinds_of(&usage), theirs, "{key}: ccusage's count");
        let cost = usage["cost_usd"].as_f64().unwrap();
        assert!(
            close(cost, s["totalCost"].as_f64().unwrap()),
            "{key}: {cost} against ccusage's {}",
            s["totalCost"]
        );
        // Every model ccusage saw, with the same cost.
        for b in s["modelBreakdowns"].as_array().unwrap() {
            let ours = &usage["by_model"][b["modelName"].as_str().unwrap()];
            assert!(
                close(
                    ours["cost_usd"].as_f64().unwrap(),
                    b["cost"].as_f64().unwrap()
                ),
                "{key}: {ours} against {b}"
            );
        }
        let meta = m.json(&format!("{key}/meta.json"));
        assert_eq!(meta["tokens"], usage["tokens"]["total"], "{key}");
        assert!(close(meta["cost_usd"].as_f64().unwrap(), cost));
        total_cost += cost;
        claude_sessions += 1;
    }
    assert_eq!(claude_sessions, 7, "{by_claude}");

    let by_codex = ccusage(
        &bin,
        &[("CODEX_HOME", &real.join("codex"))],
        &["codex", "session"],
    );
    let rollouts = sh_ok(&format!(
        "find {} -name '*.jsonl'",
        real.join("codex").display()
    ));
    let rollout = PathBuf::from(rollouts.trim());
    let key = "codex:019e1625-789d-76c0-80ab-3724b5ddb799";
    let (requests, kinds) = count_codex(&rollout);
    let usage = usage_of(&m, key, |_| true);
    assert_eq!(usage["requests"], requests as u64, "{usage}");
    assert_eq!(kinds_of(&usage), kinds, "our count from the raw rows");
    let theirs = &by_codex["totals"];
    assert_eq!(
        kinds_of(&usage),
        [
            theirs["inputTokens"].as_u64().unwrap(),
            theirs["outputTokens"].as_u64().unwrap(),
            theirs["cacheCreationTokens"].as_u64().unwrap(),
            theirs["cacheReadTokens"].as_u64().unwrap(),
        ],
        "ccusage's count"
    );
    assert_eq!(
        usage["tokens"]["reasoning"],
        theirs["reasoningOutputTokens"]
    );
    let cost = usage["cost_usd"].as_f64().unwrap();
    assert!(
        close(cost, theirs["costUSD"].as_f64().unwrap()),
        "{cost} against {theirs}"
    );
    total_cost += cost;

    // The root sums every session: by engine, by day, in all.
    let root = m.json("usage.json");
    assert_eq!(root["sessions"], 8, "{root}");
    assert!(
        close(root["total"]["cost_usd"].as_f64().unwrap(), total_cost),
        "{root}"
    );
    let engines: f64 = ["claude", "codex"]
        .iter()
        .map(|e| root["by_engine"][e]["cost_usd"].as_f64().unwrap())
        .sum();
    assert!(close(engines, total_cost), "{root}");
    let days: u64 = root["by_day"]
        .as_object()
        .unwrap()
        .values()
        .map(|d| d["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(days, root["total"]["requests"].as_u64().unwrap());
    // Read twice with nothing changed: the same bytes.
    assert_eq!(m.read("usage.json"), m.read("usage.json"));

    // A project's sessions are summed under it.
    let claude_top = "claude:ae4a77f8-aedd-4bc1-888f-c94edc91af04";
    sh_ok(&format!(
        "echo spotter > {}",
        m.q(&format!("{claude_top}/project"))
    ));
    let top_cost = m.json(&format!("{claude_top}/usage"))["cost_usd"]
        .as_f64()
        .unwrap();
    let mut root = Value::Null;
    wait_for(10, "usage.json to show the project", || {
        root = m.json("usage.json");
        root["by_project"]["spotter"].is_object()
    });
    assert!(
        close(
            root["by_project"]["spotter"]["cost_usd"].as_f64().unwrap(),
            top_cost
        ),
        "{root}"
    );
    assert!(
        close(
            root["by_project"][""]["cost_usd"].as_f64().unwrap(),
            total_cost - top_cost
        ),
        "{root}"
    );

    // `ls --sort cost`: the highest first, through the daemon; a session
    // whose cost is unknown (a shell has no store) last.
    sh_ok(&format!("mkdir {}", m.q("shell:nocost")));
    let out = host.cli(&["ls", "--sort", "cost", "--keys"]);
    let keys = String::from_utf8_lossy(&out.stdout);
    assert_eq!(keys.lines().next(), Some(key), "{keys}");
    assert_eq!(keys.lines().nth(1), Some(claude_top), "{keys}");
    assert_eq!(keys.lines().last(), Some("shell:nocost"), "{keys}");
    assert_eq!(keys.lines().count(), 9, "{keys}");
    let page = host.cli(&[
        "ls", "--sort", "cost", "--keys", "--limit", "1", "--offset", "1",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&page.stdout),
        format!("{claude_top}\n")
    );
    let table = String::from_utf8_lossy(&host.cli(&["ls", "--sort", "cost"]).stdout).to_string();
    assert!(table.lines().next().unwrap().contains("COST"), "{table}");
    assert!(table.contains("$8.37"), "{table}");
    let listing = m.json("sessions.json");
    let row = listing["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap();
    assert!(close(row["cost_usd"].as_f64().unwrap(), cost), "{row}");
    assert_eq!(row["tokens"], usage["tokens"]["total"]);
}

/// A Claude store of one conversation whose rows are written by the test.
fn claude_row(message: &str, request: &str, model: &str, output: u64) -> String {
    json!({"type": "assistant", "timestamp": "2026-03-04T05:06:07Z", "sessionId": "c0ffee00-0000-4000-8000-000000000001",
           "cwd": "/work", "requestId": request,
           "message": {"id": message, "model": model, "role": "assistant", "content": [{"type": "text", "text": "hi"}],
                       "usage": {"input_tokens": 3, "output_tokens": output, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
    .to_string()
}

#[test]
fn rows_repeated_as_claude_repeats_them_count_once_and_a_growing_store_is_followed() {
    let host = Host::new();
    let projects = host.path("claude/projects/-work");
    std::fs::create_dir_all(&projects).unwrap();
    let file = projects.join("c0ffee00-0000-4000-8000-000000000001.jsonl");
    let user = json!({"type": "user", "timestamp": "2026-03-04T05:06:00Z", "sessionId": "c0ffee00-0000-4000-8000-000000000001",
                      "cwd": "/work", "uuid": "u1", "message": {"role": "user", "content": "count me"}});
    // One reply in three rows, its output growing; and a second reply.
    let rows = [
        user.to_string(),
        claude_row("msg_1", "req_1", "claude-sonnet-4-5", 1),
        claude_row("msg_1", "req_1", "claude-sonnet-4-5", 40),
        claude_row("msg_1", "req_1", "claude-sonnet-4-5", 40),
        claude_row("msg_2", "req_2", "claude-sonnet-4-5", 7),
    ];
    std::fs::write(&file, rows.join("\n") + "\n").unwrap();
    // A conversation with no reply yet: known to have used nothing.
    let quiet = user.to_string().replace(
        "c0ffee00-0000-4000-8000-000000000001",
        "c0ffee00-0000-4000-8000-000000000002",
    );
    std::fs::write(
        projects.join("c0ffee00-0000-4000-8000-000000000002.jsonl"),
        quiet + "\n",
    )
    .unwrap();
    let claude = host.path("claude");
    let host = host.with_env("CLAUDE_CONFIG_DIR", claude.to_str().unwrap());
    let m = host.mount("mnt");
    let key = "claude:c0ffee00-0000-4000-8000-000000000001";
    let none = usage_of(&m, "claude:c0ffee00-0000-4000-8000-000000000002", |_| true);
    assert_eq!(none["requests"], 0, "{none}");
    assert_eq!(none["cost_usd"], 0.0, "{none}");
    let usage = usage_of(&m, key, |_| true);
    assert_eq!(usage["requests"], 2, "{usage}");
    assert_eq!(kinds_of(&usage), [6, 47, 0, 0]);
    // (6 × 3 + 47 × 15) / 10⁶ dollars.
    assert!(
        close(usage["cost_usd"].as_f64().unwrap(), 0.000723),
        "{usage}"
    );
    // A row appended while mounted (the same reply again, and a new one)
    // is counted without a restart, the repeated one still once.
    let more = [
        claude_row("msg_2", "req_2", "claude-sonnet-4-5", 7),
        claude_row("msg_3", "req_3", "claude-sonnet-4-5", 100),
    ];
    sh_ok(&format!(
        "printf '%s\\n' '{}' '{}' >> {}",
        more[0],
        more[1],
        file.display()
    ));
    let usage = usage_of(&m, key, |u| u["requests"] == 3);
    assert_eq!(kinds_of(&usage), [9, 147, 0, 0]);
    // A half-written row is not counted until its line ends.
    let half = claude_row("msg_4", "req_4", "claude-sonnet-4-5", 1000);
    sh_ok(&format!(
        "printf '%s' '{}' >> {}",
        &half[..half.len() / 2],
        file.display()
    ));
    sh_ok(&format!(
        "printf '%s\\n' '{}' >> {}",
        &half[half.len() / 2..],
        file.display()
    ));
    let usage = usage_of(&m, key, |u| u["requests"] == 4);
    assert_eq!(kinds_of(&usage), [12, 1147, 0, 0]);
    // The daemon killed and mounted again: counted again from the stores,
    // nothing lost and nothing counted twice.
    let mut m = m;
    m.kill9();
    let m = host.mount("mnt2");
    let again = usage_of(&m, key, |u| u["requests"] == 4);
    assert_eq!(again, usage);
}

#[test]
fn a_model_without_a_price_has_no_cost_and_a_config_price_is_used() {
    let host = Host::new();
    let projects = host.path("claude/projects/-work");
    std::fs::create_dir_all(&projects).unwrap();
    let file = projects.join("c0ffee00-0000-4000-8000-000000000001.jsonl");
    std::fs::write(
        &file,
        [
            claude_row("msg_1", "req_1", "fake-model", 10),
            claude_row("msg_2", "req_2", "claude-haiku-4-5", 10),
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    let claude = host.path("claude");
    let host = host.with_env("CLAUDE_CONFIG_DIR", claude.to_str().unwrap());
    let key = "claude:c0ffee00-0000-4000-8000-000000000001";
    {
        let m = host.mount("mnt");
        let usage = usage_of(&m, key, |_| true);
        assert_eq!(
            usage["by_model"]["fake-model"]["tokens"]["output"], 10,
            "{usage}"
        );
        assert!(
            usage["by_model"]["fake-model"]["cost_usd"].is_null(),
            "{usage}"
        );
        assert!(
            usage["by_model"]["claude-haiku-4-5"]["cost_usd"].is_f64(),
            "{usage}"
        );
        // A sum with an unpriced model in it is unknown, never a guess.
        assert!(usage["cost_usd"].is_null(), "{usage}");
        assert_eq!(usage["tokens"]["total"], 26);
        let meta = m.json(&format!("{key}/meta.json"));
        assert!(meta["cost_usd"].is_null() && meta["tokens"] == 26, "{meta}");
        let table = String::from_utf8_lossy(&host.cli(&["ls"]).stdout).to_string();
        let row = table.lines().find(|l| l.starts_with(key)).unwrap();
        assert!(row.contains("  -  "), "{table}");
    }
    // Without a daemon, `ls --sort cost` counts the stores itself.
    let out = host
        .state_env(&mut std::process::Command::new(env!(
            "CARGO_BIN_EXE_sessionfs"
        )))
        .env("CLAUDE_CONFIG_DIR", &claude)
        .args(["ls", "--sort", "cost", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listing["sessions"][0]["key"], key, "{listing}");
    assert_eq!(listing["sessions"][0]["tokens"], 26, "{listing}");
    let config = host.path("config.json");
    std::fs::write(
        &config,
        r#"{"prices": {"fake-model": {"input": 1000000, "output": 2000000}}}"#,
    )
    .unwrap();
    let m = host.mount_with("mnt2", &["--config", config.to_str().unwrap()]);
    let usage = usage_of(&m, key, |_| true);
    // 3 × $1 + 10 × $2 for fake-model, (3 × 1 + 10 × 5) / 10⁶ for haiku.
    assert!(
        close(
            usage["by_model"]["fake-model"]["cost_usd"]
                .as_f64()
                .unwrap(),
            23.0
        ),
        "{usage}"
    );
    assert!(
        close(usage["cost_usd"].as_f64().unwrap(), 23.000053),
        "{usage}"
    );
    // A bad price is refused at mount, with the reason.
    std::fs::write(
        &config,
        r#"{"prices": {"fake-model": {"input": -1, "output": 1}}}"#,
    )
    .unwrap();
    let out = host.cli(&["ls", "--config", config.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("prices"),
        "{out:?}"
    );
}

/// The requests of `key` the stand-in answered, as the agent's store
/// recorded them: every assistant message id in its Claude files.
fn claude_message_ids(a: &Agents, ids: &[&str]) -> usize {
    let mut files = Vec::new();
    for id in ids {
        files.extend(claude_files(&a.env.claude_dir.join("projects"), id));
    }
    count_claude(&files).0
}

#[test]
fn a_real_claudes_usage_is_what_the_api_reported_over_a_clear() {
    let Some(a) = Agents::start("a_real_claudes_usage_is_what_the_api_reported_over_a_clear")
    else {
        return;
    };
    let id = "c1a0de00-0000-4000-8000-0000000000d1";
    let key = a.session("claude", id);
    a.api.push_text("First answer.");
    a.prompt(&key, "first question");
    assert_eq!(a.wait(&key, 60), "idle\n");
    a.prompt(&key, "/clear");
    let mut new_id = String::new();
    wait_for(30, "the session to follow /clear", || {
        new_id = a.m.json(&format!("{key}/meta.json"))["conversation"]
            .as_str()
            .unwrap()
            .to_string();
        new_id != id
    });
    a.api.push_text("Second answer.");
    a.prompt(&key, "second question");
    assert_eq!(a.wait(&key, 60), "idle\n");
    a.api.push_text("Third answer.");
    a.prompt(&key, "third question");
    assert_eq!(a.wait(&key, 60), "idle\n");
    // Three turns answered, each one request with the stand-in's counts.
    let answered = claude_message_ids(&a, &[id, &new_id]);
    assert_eq!(answered, 3, "{}", a.api.log());
    let usage = usage_of(&a.m, &key, |u| u["requests"] == 3);
    let n = 3;
    let [input, output, write, read] = CLAUDE_USAGE;
    assert_eq!(
        kinds_of(&usage),
        [n * input, n * output, n * write, n * read],
        "{usage}"
    );
    assert_eq!(usage["conversations"], json!([id, new_id]));
    let price = (input * 3 + output * 15) as f64 + write as f64 * 3.75 + read as f64 * 0.3;
    assert!(
        close(usage["cost_usd"].as_f64().unwrap(), n as f64 * price / 1e6),
        "{usage}"
    );
    let meta = a.m.json(&format!("{key}/meta.json"));
    assert_eq!(meta["tokens"], usage["tokens"]["total"], "{meta}");
    // The root sums the session once.
    let root = a.m.json("usage.json");
    assert_eq!(root["total"]["requests"], 3, "{root}");
    assert_eq!(root["by_engine"]["claude"]["requests"], 3, "{root}");
}

#[test]
fn a_real_codexs_usage_is_what_the_api_reported() {
    let Some(a) = Agents::start("a_real_codexs_usage_is_what_the_api_reported") else {
        return;
    };
    let key = a.session("codex", "0c0dec00-0000-4000-8000-0000000000d2");
    a.api.push_text("First answer.");
    a.prompt(&key, "first question");
    assert_eq!(a.wait(&key, 90), "idle\n");
    a.api.push_text("Second answer.");
    a.prompt(&key, "second question");
    assert_eq!(a.wait(&key, 90), "idle\n");
    let turns = a.api.turns().len() as u64;
    assert!(turns >= 2, "{}", a.api.log());
    let usage = usage_of(&a.m, &key, |u| u["requests"] == turns);
    let [input, cached, output, reasoning] = CODEX_USAGE;
    assert_eq!(
        kinds_of(&usage),
        [turns * (input - cached), turns * output, 0, turns * cached],
        "{usage}\n{}",
        a.api.log()
    );
    assert_eq!(usage["tokens"]["reasoning"], turns * reasoning);
    let models: Vec<&String> = usage["by_model"].as_object().unwrap().keys().collect();
    assert_eq!(models.len(), 1, "{usage}");
}
