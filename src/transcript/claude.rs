//! Claude Code's store: `projects/<folder>/<sessionId>.jsonl`, one JSON object
//! per line.
//!
//! Rows that matter: `user` (typed prompts, tool results, injected context),
//! `assistant` (a reply split over rows sharing `message.id`), `system`
//! (`compact_boundary`, `local_command`), and the title rows `custom-title`,
//! `ai-title`, `summary`. Everything else is bookkeeping and skipped.
//! Subagents write rows with `isSidechain: true`, inline in the main file
//! (older versions) or in files of their own; only the rows of the file's own
//! side are shown (see [`Row`] and the index's sidechain mode).

use serde_json::Value;

use super::model::{Block, Message, ParseOptions, Role, ToolCall, ToolResult};
use super::scan::{unescape, Skim};

/// What the cheap look at a line's first keys concluded.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct SkimInfo {
    pub sidechain: Option<bool>,
    pub cwd: Option<String>,
}

#[derive(Debug, PartialEq)]
pub(crate) enum Pre {
    /// Certainly neither a turn start nor a title: no need to parse.
    Reject(SkimInfo),
    /// Might matter (or could not tell): parse the whole line.
    Parse,
}

/// Decides from the first keys of a line whether it could start a turn or
/// carry a title. Only says `Reject` where [`classify`] would never return a
/// prompt or a title for the same line, so the index and the pages agree.
pub(crate) fn prefilter(line: &[u8], mode: Option<bool>) -> Pre {
    let mut s = Skim::new(line);
    let mut info = SkimInfo::default();
    if s.begin_object().is_none() {
        return Pre::Parse;
    }
    loop {
        let Some(Some(key)) = s.next_key() else {
            return Pre::Parse;
        };
        match key {
            b"type" => {
                let Some(t) = s.string() else {
                    return Pre::Parse;
                };
                if !matches!(
                    t,
                    b"user" | b"system" | b"summary" | b"custom-title" | b"ai-title"
                ) {
                    return Pre::Reject(info);
                }
            }
            b"isSidechain" => {
                let Some(b) = s.boolean() else {
                    return Pre::Parse;
                };
                info.sidechain = Some(b);
                if b != mode.unwrap_or(b) {
                    return Pre::Reject(info);
                }
            }
            b"cwd" => {
                let Some(raw) = s.string() else {
                    return Pre::Parse;
                };
                info.cwd = unescape(raw);
            }
            b"message" => return prefilter_message(&mut s, info),
            _ => {
                if s.skip_value().is_none() {
                    return Pre::Parse;
                }
            }
        }
    }
}

fn prefilter_message(s: &mut Skim<'_>, info: SkimInfo) -> Pre {
    if s.begin_object().is_none() {
        return Pre::Parse;
    }
    loop {
        let Some(Some(key)) = s.next_key() else {
            return Pre::Parse;
        };
        match key {
            b"role" => match s.string() {
                Some(b"user") => {}
                Some(_) => return Pre::Reject(info),
                None => return Pre::Parse,
            },
            b"content" => {
                // A tool result row starts its content with a tool_result block.
                if s.peek() != Some(b'[') {
                    return Pre::Parse;
                }
                s.begin_array();
                if s.begin_object().is_none() {
                    return Pre::Parse;
                }
                loop {
                    let Some(Some(k)) = s.next_key() else {
                        return Pre::Parse;
                    };
                    if k == b"type" {
                        return match s.string() {
                            Some(b"tool_result") => Pre::Reject(info),
                            _ => Pre::Parse,
                        };
                    }
                    if s.skip_value().is_none() {
                        return Pre::Parse;
                    }
                }
            }
            _ => {
                if s.skip_value().is_none() {
                    return Pre::Parse;
                }
            }
        }
    }
}

/// Which title row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TitleKind {
    Custom,
    Ai,
    Summary,
}

/// One row, read.
#[derive(Debug, PartialEq)]
pub(crate) enum Row {
    /// Something the person typed: starts a turn.
    Prompt(Message),
    Message(Message),
    Compaction,
    Notice(String),
    Title(TitleKind, String),
    Skip,
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Reads one parsed row. `sidechain_mode` is the file's side: rows whose
/// `isSidechain` says otherwise belong to a subagent and are skipped.
pub(crate) fn classify(v: &Value, sidechain_mode: bool, opts: &ParseOptions) -> Row {
    let ty = str_of(v, "type").unwrap_or("");
    match ty {
        "summary" => return title(v, "summary", TitleKind::Summary),
        "custom-title" => return title(v, "customTitle", TitleKind::Custom),
        "ai-title" => return title(v, "aiTitle", TitleKind::Ai),
        "user" | "assistant" | "system" => {}
        _ => return Row::Skip,
    }
    if let Some(side) = v.get("isSidechain").and_then(Value::as_bool) {
        if side != sidechain_mode {
            return Row::Skip;
        }
    }
    match ty {
        "user" => user_row(v, opts),
        "assistant" => assistant_row(v, opts),
        _ => system_row(v, opts),
    }
}

fn title(v: &Value, key: &str, kind: TitleKind) -> Row {
    match str_of(v, key).map(str::trim) {
        Some(t) if !t.is_empty() => Row::Title(kind, t.to_string()),
        _ => Row::Skip,
    }
}

fn system_row(v: &Value, opts: &ParseOptions) -> Row {
    match str_of(v, "subtype") {
        Some("compact_boundary") => Row::Compaction,
        // Newer versions record local slash commands and their output here.
        Some("local_command") => match str_of(v, "content") {
            // Only a wrapped command is typed; bare text is what it printed.
            Some(text) => match user_text(text, opts) {
                Row::Prompt(_) if !text.trim_start().starts_with('<') => {
                    local_output(text.trim().to_string(), false, opts)
                }
                row => row,
            },
            None => Row::Skip,
        },
        _ => Row::Skip,
    }
}

fn user_row(v: &Value, opts: &ParseOptions) -> Row {
    if v.get("isCompactSummary").and_then(Value::as_bool) == Some(true) {
        return Row::Compaction;
    }
    if v.get("isMeta").and_then(Value::as_bool) == Some(true) {
        return Row::Skip;
    }
    let Some(msg) = v.get("message") else {
        return Row::Skip;
    };
    if str_of(msg, "role").is_some_and(|r| r != "user") {
        return Row::Skip;
    }
    match msg.get("content") {
        Some(Value::String(s)) => user_text(s, opts),
        Some(Value::Array(blocks)) => {
            let first_is_result = blocks
                .first()
                .is_some_and(|b| str_of(b, "type") == Some("tool_result"));
            if first_is_result {
                tool_results(blocks, opts)
            } else {
                user_blocks(blocks, opts)
            }
        }
        _ => Row::Skip,
    }
}

/// Text between `<tag>` and `</tag>`, if the tag is there.
fn tag<'a>(s: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = s.find(&open)? + open.len();
    let end = s[start..].find(&close).map_or(s.len(), |e| start + e);
    Some(&s[start..end])
}

/// Context the agent injects into a user message, never typed by the person.
fn is_injected(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<local-command-caveat>",
        "<system-reminder>",
        "<user-prompt-submit-hook>",
        "<command-message>",
    ]
    .iter()
    .any(|p| t.starts_with(p))
        && !t.contains("<command-name>")
}

fn local_output(text: String, is_error: bool, opts: &ParseOptions) -> Row {
    let (output, clipped_lines) = opts.clip(text);
    Row::Message(Message::new(
        Role::Local,
        vec![Block::ToolResult(ToolResult {
            call_id: None,
            output,
            is_error,
            clipped_lines,
        })],
    ))
}

fn join_out_err(out: &str, err: &str) -> String {
    match (out.is_empty(), err.is_empty()) {
        (_, true) => out.to_string(),
        (true, false) => err.to_string(),
        (false, false) => format!("{out}\n{err}"),
    }
}

/// A user message given as one string: a prompt, or one of the wrappers the
/// agent writes around slash commands and local output.
fn user_text(s: &str, opts: &ParseOptions) -> Row {
    let t = s.trim_start();
    let wrapped = ["<command-name>", "<command-message>", "<command-args>"]
        .iter()
        .any(|p| t.starts_with(p));
    if let Some(name) = tag(t, "command-name").filter(|_| wrapped) {
        let name = name.trim();
        let mut shown = if name.starts_with('/') {
            name.to_string()
        } else {
            format!("/{name}")
        };
        if let Some(args) = tag(t, "command-args").map(str::trim) {
            if !args.is_empty() {
                shown.push(' ');
                shown.push_str(args);
            }
        }
        return Row::Prompt(Message::new(Role::User, vec![Block::Text(shown)]));
    }
    if t.starts_with("<local-command-stdout>") || t.starts_with("<local-command-stderr>") {
        let out = tag(t, "local-command-stdout").unwrap_or("").trim_end();
        let err = tag(t, "local-command-stderr").unwrap_or("").trim_end();
        return local_output(join_out_err(out, err), !err.is_empty(), opts);
    }
    if t.starts_with("<bash-input>") {
        let cmd = tag(t, "bash-input").unwrap_or("").trim();
        return Row::Prompt(Message::new(
            Role::User,
            vec![Block::Text(format!("! {cmd}"))],
        ));
    }
    if t.starts_with("<bash-stdout>") || t.starts_with("<bash-stderr>") {
        let out = tag(t, "bash-stdout").unwrap_or("").trim_end();
        let err = tag(t, "bash-stderr").unwrap_or("").trim_end();
        return local_output(join_out_err(out, err), !err.is_empty(), opts);
    }
    if is_injected(t) {
        return Row::Skip;
    }
    if t.starts_with("[Request interrupted by user") {
        let inner = t.trim().trim_start_matches('[').trim_end_matches(']');
        return Row::Notice(inner.replace("Request interrupted", "Interrupted"));
    }
    if t.trim().is_empty() {
        return Row::Skip;
    }
    Row::Prompt(Message::new(
        Role::User,
        vec![Block::Text(s.trim().to_string())],
    ))
}

/// A user message given as blocks (text, images) but no tool results.
fn user_blocks(blocks: &[Value], opts: &ParseOptions) -> Row {
    let mut kept = Vec::new();
    for b in blocks {
        match str_of(b, "type") {
            Some("text") => {
                let text = str_of(b, "text").unwrap_or("");
                if !is_injected(text) && !text.trim().is_empty() {
                    kept.push(Block::Text(text.to_string()));
                }
            }
            Some("image") => kept.push(Block::Image),
            _ => {}
        }
    }
    // A single text block reads exactly like a string message (wrappers,
    // interruption notes).
    if let [Block::Text(t)] = kept.as_slice() {
        return user_text(t, opts);
    }
    if kept.is_empty() {
        return Row::Skip;
    }
    Row::Prompt(Message::new(Role::User, kept))
}

/// Text of a tool result's `content`: a string or a list of blocks.
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for it in items {
                match str_of(it, "type") {
                    Some("text") => out.push(str_of(it, "text").unwrap_or("").to_string()),
                    Some("image") => out.push("[image]".to_string()),
                    _ => {
                        if let (Some(t), Some(u)) = (str_of(it, "title"), str_of(it, "url")) {
                            out.push(format!("{t} — {u}"));
                        }
                    }
                }
            }
            out.join("\n")
        }
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn tool_results(blocks: &[Value], opts: &ParseOptions) -> Row {
    let mut out = Vec::new();
    for b in blocks {
        match str_of(b, "type") {
            Some("tool_result") => {
                let (output, clipped_lines) = opts.clip(result_text(b.get("content")));
                out.push(Block::ToolResult(ToolResult {
                    call_id: str_of(b, "tool_use_id").map(str::to_string),
                    output,
                    is_error: b.get("is_error").and_then(Value::as_bool) == Some(true),
                    clipped_lines,
                }));
            }
            Some("text") => {
                let text = str_of(b, "text").unwrap_or("");
                if !is_injected(text) && !text.trim().is_empty() {
                    out.push(Block::Text(text.to_string()));
                }
            }
            Some("image") => out.push(Block::Image),
            _ => {}
        }
    }
    Row::Message(Message::new(Role::Tool, out))
}

fn assistant_row(v: &Value, opts: &ParseOptions) -> Row {
    let Some(msg) = v.get("message") else {
        return Row::Skip;
    };
    let mut blocks = Vec::new();
    match msg.get("content") {
        Some(Value::String(s)) if !s.trim().is_empty() => blocks.push(Block::Text(s.clone())),
        Some(Value::Array(items)) => {
            for b in items {
                let ty = str_of(b, "type").unwrap_or("");
                match ty {
                    "text" => {
                        let t = str_of(b, "text").unwrap_or("");
                        if !t.trim().is_empty() {
                            blocks.push(Block::Text(t.to_string()));
                        }
                    }
                    "thinking" => blocks.push(Block::Thinking(
                        str_of(b, "thinking").unwrap_or("").to_string(),
                    )),
                    "redacted_thinking" => blocks.push(Block::Thinking(String::new())),
                    "tool_use" | "server_tool_use" => blocks.push(Block::ToolCall(ToolCall {
                        id: str_of(b, "id").map(str::to_string),
                        name: str_of(b, "name").unwrap_or("?").to_string(),
                        input: opts.clip_input(b.get("input").cloned().unwrap_or(Value::Null)),
                    })),
                    "image" => blocks.push(Block::Image),
                    // Server-side tools answer inside the reply itself.
                    t if t.ends_with("_tool_result") => {
                        let (output, clipped_lines) = opts.clip(result_text(b.get("content")));
                        blocks.push(Block::ToolResult(ToolResult {
                            call_id: str_of(b, "tool_use_id").map(str::to_string),
                            output,
                            is_error: false,
                            clipped_lines,
                        }));
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    Row::Message(Message {
        role: Role::Assistant,
        id: str_of(msg, "id").map(str::to_string),
        blocks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::scan::parse_line;

    fn row(line: &str) -> Row {
        classify(
            &parse_line(line.as_bytes()).unwrap(),
            false,
            &ParseOptions::default(),
        )
    }

    fn prompt_text(r: Row) -> String {
        match r {
            Row::Prompt(m) => m.text(),
            other => panic!("not a prompt: {other:?}"),
        }
    }

    #[test]
    fn prompts_and_wrappers() {
        assert_eq!(
            prompt_text(row(
                r#"{"type":"user","message":{"role":"user","content":"hello"}}"#
            )),
            "hello"
        );
        let cmd = r#"{"type":"user","message":{"role":"user","content":"<command-message>x is running…</command-message>\n<command-name>/orchestrator</command-name>\n<command-args>do it</command-args>"}}"#;
        assert_eq!(prompt_text(row(cmd)), "/orchestrator do it");
        let out = r#"{"type":"user","message":{"role":"user","content":"<local-command-stdout>done</local-command-stdout>"}}"#;
        assert!(matches!(row(out), Row::Message(m) if m.role == Role::Local));
        let meta =
            r#"{"type":"user","isMeta":true,"message":{"role":"user","content":"expanded"}}"#;
        assert_eq!(row(meta), Row::Skip);
        let caveat = r#"{"type":"user","message":{"role":"user","content":"<local-command-caveat>Caveat</local-command-caveat>"}}"#;
        assert_eq!(row(caveat), Row::Skip);
        let intr = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]}}"#;
        assert_eq!(
            row(intr),
            Row::Notice("Interrupted by user for tool use".into())
        );
        let summary = r#"{"type":"user","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued"}}"#;
        assert_eq!(row(summary), Row::Compaction);
        let side =
            r#"{"type":"user","isSidechain":true,"message":{"role":"user","content":"sub"}}"#;
        assert_eq!(row(side), Row::Skip);
        let bash =
            r#"{"type":"user","message":{"role":"user","content":"<bash-input>ls</bash-input>"}}"#;
        assert_eq!(prompt_text(row(bash)), "! ls");
        let local = r#"{"type":"system","subtype":"local_command","content":"<command-name>/model</command-name>\n<command-args>opus</command-args>"}"#;
        assert_eq!(prompt_text(row(local)), "/model opus");
        let said = r#"{"type":"system","subtype":"local_command","content":"Set model to opus"}"#;
        assert!(matches!(row(said), Row::Message(m) if m.role == Role::Local));
    }

    #[test]
    fn prefilter_never_rejects_what_classify_keeps() {
        let lines = [
            r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"hi"}}"#,
            r#"{"isSidechain":false,"type":"user","message":{"role":"user","content":[{"tool_use_id":"t","type":"tool_result","content":"x"}]}}"#,
            r#"{"isSidechain":false,"message":{"id":"m","role":"assistant","content":[]},"type":"assistant"}"#,
            r#"{"type":"file-history-snapshot","messageId":"x"}"#,
            r#"{"type":"custom-title","customTitle":"T"}"#,
            r#"{"type":"system","subtype":"local_command","content":"<command-name>/x</command-name>"}"#,
            r#"{"isSidechain":true,"type":"user","message":{"role":"user","content":"sub"}}"#,
        ];
        for l in lines {
            let c = classify(
                &parse_line(l.as_bytes()).unwrap(),
                false,
                &ParseOptions::default(),
            );
            let keeps = matches!(c, Row::Prompt(_) | Row::Title(..));
            if keeps {
                assert_eq!(prefilter(l.as_bytes(), Some(false)), Pre::Parse, "{l}");
            }
        }
        assert!(matches!(
            prefilter(lines[1].as_bytes(), None),
            Pre::Reject(_)
        ));
        assert!(matches!(
            prefilter(lines[2].as_bytes(), None),
            Pre::Reject(_)
        ));
        assert!(matches!(
            prefilter(lines[3].as_bytes(), None),
            Pre::Reject(_)
        ));
        assert!(matches!(
            prefilter(lines[6].as_bytes(), Some(false)),
            Pre::Reject(_)
        ));
    }
}
