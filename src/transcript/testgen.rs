//! Generated stores in the formats the real ones use, for the cases the
//! recorded fixtures lack: many turns, huge lines, corrupt and half-written
//! lines, unknown rows and blocks.
//!
//! Every prompt reads `prompt #K` and every visible reply `reply #K …`, so a
//! test can tell which turns a page holds. Text that must never be shown
//! contains `INJECTED` or `SIDECHAIN`.

use serde_json::{json, Value};

/// Deterministic choices (xorshift), so a failing case can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// What to put in a generated store.
#[derive(Clone, Debug)]
pub struct Shape {
    pub turns: usize,
    pub seed: u64,
    /// Put a line of this many bytes (a tool output) into turn 1.
    pub huge_line: Option<usize>,
    /// End with a line that has no newline yet.
    pub half_line: bool,
}

impl Shape {
    pub fn new(turns: usize, seed: u64) -> Self {
        Shape {
            turns,
            seed,
            huge_line: None,
            half_line: false,
        }
    }
}

/// A JSON object with its keys in the given order (the agents write keys in
/// a fixed order, which the index's fast path relies on).
struct Obj(Vec<(String, String)>);

impl Obj {
    fn new() -> Self {
        Obj(Vec::new())
    }
    /// Adds a key with a plain value.
    fn v(mut self, k: &str, v: impl Into<Value>) -> Self {
        self.0.push((k.to_string(), v.into().to_string()));
        self
    }
    /// Adds a key whose value keeps its own key order.
    fn o(mut self, k: &str, v: impl Into<Json>) -> Self {
        self.0.push((k.to_string(), v.into().0));
        self
    }
}

/// Serialized JSON text.
struct Json(String);

impl From<Obj> for Json {
    fn from(o: Obj) -> Json {
        let body: Vec<String> =
            o.0.into_iter()
                .map(|(k, v)| format!("{}:{v}", Value::from(k)))
                .collect();
        Json(format!("{{{}}}", body.join(",")))
    }
}

impl From<Vec<Obj>> for Json {
    fn from(items: Vec<Obj>) -> Json {
        let body: Vec<String> = items.into_iter().map(|o| Json::from(o).0).collect();
        Json(format!("[{}]", body.join(",")))
    }
}

impl From<Value> for Json {
    fn from(v: Value) -> Json {
        Json(v.to_string())
    }
}

fn push(out: &mut Vec<u8>, v: impl Into<Json>) {
    out.extend_from_slice(v.into().0.as_bytes());
    out.push(b'\n');
}

/// The same store with every object's keys sorted, as a writer that does not
/// keep the usual order would leave it (the index must not depend on order).
pub fn sort_keys(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut rest = data;
    while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
        let line = &rest[..nl];
        match serde_json::from_slice::<Value>(line) {
            Ok(v) => out.extend_from_slice(v.to_string().as_bytes()),
            Err(_) => out.extend_from_slice(line),
        }
        out.push(b'\n');
        rest = &rest[nl + 1..];
    }
    out.extend_from_slice(rest);
    out
}

fn ts(k: usize, i: usize) -> String {
    format!(
        "2026-01-{:02}T{:02}:{:02}:{:02}.000Z",
        1 + (k / 1440) % 28,
        (k / 60) % 24,
        k % 60,
        i % 60
    )
}

/// A Claude row, keys in Claude Code's order: the common ones, then `type`
/// (after `message` for assistant rows), then the row's own, then ids.
fn claude_row(ty: &str, k: usize, i: usize, side: bool, message: Option<Obj>, extra: Obj) -> Obj {
    let mut o = Obj::new()
        .v("parentUuid", format!("p-{k}-{i}"))
        .v("isSidechain", side)
        .v("userType", "external")
        .v("cwd", "/work/proj")
        .v("sessionId", "11111111-2222-3333-4444-555555555555")
        .v("version", "2.1.39")
        .v("gitBranch", "main");
    match message {
        Some(m) if ty == "assistant" => o = o.o("message", m).v("type", ty),
        Some(m) => o = o.v("type", ty).o("message", m),
        None => o = o.v("type", ty),
    }
    o.0.extend(extra.0);
    o.v("uuid", format!("u-{k}-{i}")).v("timestamp", ts(k, i))
}

fn user(k: usize, i: usize, content: impl Into<Json>, extra: Obj) -> Obj {
    let m = Obj::new().v("role", "user").o("content", content);
    claude_row("user", k, i, false, Some(m), extra)
}

fn text(t: impl Into<String>) -> Obj {
    Obj::new().v("type", "text").v("text", t.into())
}

fn assistant(k: usize, i: usize, id: &str, blocks: Vec<Obj>, side: bool) -> Obj {
    let m = Obj::new()
        .v("model", "claude-x")
        .v("id", id)
        .v("type", "message")
        .v("role", "assistant")
        .o("content", blocks)
        .v("stop_reason", Value::Null);
    claude_row(
        "assistant",
        k,
        i,
        side,
        Some(m),
        Obj::new().v("requestId", "req"),
    )
}

fn output_lines(k: usize, n: usize) -> String {
    (0..n)
        .map(|j| format!("out {k}.{j}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn huge_text(size: usize, word: &str) -> String {
    let mut s = String::with_capacity(size + 64);
    while s.len() < size {
        s.push_str(word);
        s.push('\n');
    }
    s
}

/// A Claude Code store.
pub fn claude(shape: &Shape) -> Vec<u8> {
    let mut rng = Rng::new(shape.seed);
    let mut out = Vec::new();
    push(
        &mut out,
        Obj::new()
            .v("type", "summary")
            .v("summary", "Generated session")
            .v("leafUuid", "x"),
    );
    push(
        &mut out,
        Obj::new()
            .v("type", "file-history-snapshot")
            .v("messageId", "m")
            .v("snapshot", json!({})),
    );
    for k in 0..shape.turns {
        let mut i = 0;
        let mut next = || {
            i += 1;
            i
        };
        let mid = format!("msg_{k}");
        // The prompt: typed, or a slash command with its hidden expansion.
        if k % 7 == 3 {
            let cmd = format!(
                "<command-message>run is running…</command-message>\n<command-name>/run</command-name>\n<command-args>prompt #{k}</command-args>"
            );
            push(&mut out, user(k, next(), json!(cmd), Obj::new()));
            push(
                &mut out,
                user(
                    k,
                    next(),
                    vec![text("INJECTED expansion of the command")],
                    Obj::new().v("isMeta", true),
                ),
            );
        } else if k % 11 == 5 {
            let blocks = vec![
                text(format!("prompt #{k}")),
                text("<system-reminder>INJECTED reminder</system-reminder>"),
            ];
            push(&mut out, user(k, next(), blocks, Obj::new()));
        } else {
            push(
                &mut out,
                user(k, next(), json!(format!("prompt #{k}")), Obj::new()),
            );
        }
        if rng.chance(30) {
            let data = json!({"type": "hook_progress", "message": {"type": "user", "message": {"role": "user", "content": "INJECTED progress"}}});
            push(
                &mut out,
                claude_row(
                    "progress",
                    k,
                    next(),
                    false,
                    None,
                    Obj::new().v("data", data),
                ),
            );
        }
        // A reply split over rows sharing its message id.
        let think = Obj::new()
            .v("type", "thinking")
            .v("thinking", format!("think {k}"))
            .v("signature", "s");
        push(&mut out, assistant(k, next(), &mid, vec![think], false));
        let unknown = Obj::new()
            .v("type", "hologram")
            .v("data", "INJECTED unknown block");
        push(
            &mut out,
            assistant(
                k,
                next(),
                &mid,
                vec![text(format!("reply #{k} start")), unknown],
                false,
            ),
        );
        let calls = rng.below(3) as usize;
        for c in 0..calls {
            let id = format!("toolu_{k}_{c}");
            let input = json!({"command": format!("echo {k} {c}"), "description": "d"});
            let call = Obj::new()
                .v("type", "tool_use")
                .v("id", id.clone())
                .v("name", "Bash")
                .v("input", input);
            push(&mut out, assistant(k, next(), &mid, vec![call], false));
            let content = match (shape.huge_line, k, c) {
                (Some(size), 1, 0) => huge_text(size, &format!("huge {k}")),
                _ => output_lines(k, 1 + rng.below(12) as usize),
            };
            let result = Obj::new()
                .v("tool_use_id", id)
                .v("type", "tool_result")
                .v("content", content)
                .v("is_error", c == 1);
            let extra = Obj::new().v(
                "toolUseResult",
                json!({"stdout": "INJECTED structured result"}),
            );
            push(&mut out, user(k, next(), vec![result], extra));
        }
        if rng.chance(20) {
            // A subagent's rows inline in the main file.
            let m = Obj::new()
                .v("role", "user")
                .v("content", "SIDECHAIN task prompt");
            push(
                &mut out,
                claude_row("user", k, next(), true, Some(m), Obj::new()),
            );
            push(
                &mut out,
                assistant(k, next(), "side", vec![text("SIDECHAIN answer")], true),
            );
        }
        push(
            &mut out,
            assistant(
                k,
                next(),
                &mid,
                vec![text(format!("reply #{k} done"))],
                false,
            ),
        );
        if rng.chance(15) {
            push(
                &mut out,
                Obj::new()
                    .v("type", "mystery-entry")
                    .v("payload", json!({"INJECTED": true})),
            );
        }
        if rng.chance(10) {
            push(
                &mut out,
                user(
                    k,
                    next(),
                    vec![text("[Request interrupted by user]")],
                    Obj::new(),
                ),
            );
        }
        if rng.chance(8) {
            let extra = Obj::new()
                .v("subtype", "compact_boundary")
                .v("content", "Conversation compacted");
            push(
                &mut out,
                claude_row("system", k, next(), false, None, extra),
            );
            let extra = Obj::new()
                .v("isVisibleInTranscriptOnly", true)
                .v("isCompactSummary", true);
            push(
                &mut out,
                user(
                    k,
                    next(),
                    json!("INJECTED summary: This session is being continued"),
                    extra,
                ),
            );
        }
        if rng.chance(5) {
            let caveat = json!("<local-command-caveat>INJECTED caveat</local-command-caveat>");
            push(
                &mut out,
                user(k, next(), caveat, Obj::new().v("isMeta", true)),
            );
            let stdout = json!("<local-command-stdout>local output</local-command-stdout>");
            push(&mut out, user(k, next(), stdout, Obj::new()));
        }
        if rng.chance(3) {
            out.extend_from_slice(b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"INJECTED corrupt\n");
        }
        if rng.chance(3) {
            // Not UTF-8 inside a string.
            out.extend_from_slice(b"{\"message\":{\"id\":\"x\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"bytes \xff\xfe\"}]},\"type\":\"assistant\"}\n");
        }
        // What newer versions write once a turn ended and its Stop hooks
        // ran (by turn number: the random stream stays as it was).
        if k % 3 != 2 {
            for subtype in ["stop_hook_summary", "turn_duration"] {
                let extra = Obj::new().v("subtype", subtype);
                push(
                    &mut out,
                    claude_row("system", k, next(), false, None, extra),
                );
            }
        }
    }
    push(
        &mut out,
        Obj::new()
            .v("type", "custom-title")
            .v("customTitle", "Renamed")
            .v("sessionId", "s"),
    );
    if shape.half_line {
        out.extend_from_slice(
            b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"prompt #HALF",
        );
    }
    out
}

fn codex_line(k: usize, i: usize, ty: &str, payload: impl Into<Json>) -> Obj {
    Obj::new()
        .v("timestamp", ts(k, i))
        .v("type", ty)
        .o("payload", payload)
}

fn item(ty: &str) -> Obj {
    Obj::new().v("type", ty)
}

fn input_text(t: impl Into<String>) -> Obj {
    Obj::new().v("type", "input_text").v("text", t.into())
}

/// A Codex CLI rollout.
pub fn codex(shape: &Shape) -> Vec<u8> {
    let mut rng = Rng::new(shape.seed);
    let mut out = Vec::new();
    let meta = Obj::new()
        .v("id", "019e0000-0000-7000-8000-000000000000")
        .v("timestamp", ts(0, 0))
        .v("cwd", "/work/codex")
        .v("originator", "codex_cli_rs")
        .v("cli_version", "0.125.0")
        .v("base_instructions", json!({"text": "INJECTED base"}));
    push(&mut out, codex_line(0, 0, "session_meta", meta));
    let dev = item("message").v("role", "developer").o(
        "content",
        vec![input_text("<permissions instructions>INJECTED")],
    );
    push(&mut out, codex_line(0, 0, "response_item", dev));
    let ctx = item("message").v("role", "user").o(
        "content",
        vec![
            input_text("# AGENTS.md instructions for /work/codex\n\n<INSTRUCTIONS>\nINJECTED agents\n</INSTRUCTIONS>"),
            input_text("<environment_context>\n  <cwd>/work/codex</cwd>\n</environment_context>"),
        ],
    );
    push(&mut out, codex_line(0, 0, "response_item", ctx));
    for k in 0..shape.turns {
        let mut i = 0;
        let mut next = || {
            i += 1;
            i
        };
        push(
            &mut out,
            codex_line(k, next(), "event_msg", item("task_started")),
        );
        push(
            &mut out,
            codex_line(
                k,
                next(),
                "turn_context",
                json!({"cwd": "/work/codex", "model": "gpt"}),
            ),
        );
        let prompt = format!("prompt #{k}");
        let user_item = codex_line(
            k,
            next(),
            "response_item",
            item("message")
                .v("role", "user")
                .o("content", vec![input_text(prompt.clone())]),
        );
        let user_event = codex_line(
            k,
            next(),
            "event_msg",
            item("user_message")
                .v("message", prompt)
                .v("images", json!([])),
        );
        // Versions differ in which of the two comes first.
        if rng.chance(50) {
            push(&mut out, user_item);
            push(&mut out, user_event);
        } else {
            push(&mut out, user_event);
            push(&mut out, user_item);
        }
        let reasoning = item("reasoning")
            .v("summary", json!([]))
            .v("content", Value::Null)
            .v("encrypted_content", "gAAAA");
        push(&mut out, codex_line(k, next(), "response_item", reasoning));
        let calls = rng.below(3) as usize;
        for c in 0..calls {
            let id = format!("call_{k}_{c}");
            let args =
                json!({"cmd": format!("echo {k} {c}"), "workdir": "/work/codex"}).to_string();
            let call = item("function_call")
                .v("name", "exec_command")
                .v("arguments", args)
                .v("call_id", id.clone());
            push(&mut out, codex_line(k, next(), "response_item", call));
            push(
                &mut out,
                codex_line(
                    k,
                    next(),
                    "event_msg",
                    item("token_count").v("info", Value::Null),
                ),
            );
            let body = match (shape.huge_line, k, c) {
                (Some(size), 1, 0) => huge_text(size, "huge"),
                _ => output_lines(k, 1 + rng.below(12) as usize),
            };
            let code = if c == 1 { 1 } else { 0 };
            let output = format!(
                "Chunk ID: ab\nWall time: 0.1 seconds\nProcess exited with code {code}\nOriginal token count: 3\nOutput:\n{body}"
            );
            let result = item("function_call_output")
                .v("call_id", id.clone())
                .v("output", output);
            push(&mut out, codex_line(k, next(), "response_item", result));
            let end = item("exec_command_end")
                .v("call_id", id)
                .v("aggregated_output", "INJECTED duplicate output");
            push(&mut out, codex_line(k, next(), "event_msg", end));
        }
        if rng.chance(30) {
            let id = format!("patch_{k}");
            let patch = format!(
                "*** Begin Patch\n*** Update File: src/f{k}.rs\n@@\n-a\n+b\n*** End Patch\n"
            );
            let call = item("custom_tool_call")
                .v("status", "completed")
                .v("call_id", id.clone())
                .v("name", "apply_patch")
                .v("input", patch);
            push(&mut out, codex_line(k, next(), "response_item", call));
            let output = json!({"output": "Success. Updated the following files:\nM src/f.rs\n", "metadata": {"exit_code": 0}});
            let result = item("custom_tool_call_output")
                .v("call_id", id)
                .v("output", output.to_string());
            push(&mut out, codex_line(k, next(), "response_item", result));
        }
        let reply = format!("reply #{k} text");
        push(
            &mut out,
            codex_line(
                k,
                next(),
                "event_msg",
                item("agent_message").v("message", reply.clone()),
            ),
        );
        let msg = item("message").v("role", "assistant").o(
            "content",
            vec![Obj::new().v("type", "output_text").v("text", reply)],
        );
        push(&mut out, codex_line(k, next(), "response_item", msg));
        push(
            &mut out,
            codex_line(
                k,
                next(),
                "event_msg",
                item("token_count").v("info", json!({"total": k})),
            ),
        );
        if rng.chance(10) {
            push(
                &mut out,
                codex_line(
                    k,
                    next(),
                    "event_msg",
                    item("hologram_event").v("x", "INJECTED"),
                ),
            );
            push(
                &mut out,
                codex_line(k, next(), "mystery_type", json!({"x": "INJECTED"})),
            );
        }
        if rng.chance(8) {
            let compacted = json!({"message": "INJECTED summary", "replacement_history": null});
            push(&mut out, codex_line(k, next(), "compacted", compacted));
            push(
                &mut out,
                codex_line(k, next(), "event_msg", item("context_compacted")),
            );
        }
        if rng.chance(3) {
            out.extend_from_slice(b"{\"timestamp\":\"x\",\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"user\n");
        }
        let done = item("task_complete").v("last_agent_message", "INJECTED last");
        push(&mut out, codex_line(k, next(), "event_msg", done));
    }
    if shape.half_line {
        out.extend_from_slice(b"{\"timestamp\":\"2026\",\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"prompt #HALF");
    }
    out
}
