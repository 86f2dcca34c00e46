//! Gemini CLI's store: `tmp/<project>/chats/session-<YYYY-MM-DD>T<HH-MM>-<first
//! 8 of id>.jsonl`. Line 1 is the header `{"sessionId", "projectHash",
//! "startTime", "lastUpdated", "kind"}`; then message rows `{"id",
//! "timestamp", "type": "user"|"gemini"|…, "content", …}` and `{"$set": {…}}`
//! rows that update the header.
//!
//! Rows are updates by `id`: a `gemini` row is written again under the same
//! id once its tool calls are known, so a later row replaces the earlier
//! one (`Builder::put_message`). The first `$set` puts the injected
//! `<session_context>` user row in `messages`: not a turn, but it names the
//! workspace. A resume writes `$set` of the whole `messages` list again;
//! those copies are not rows of their own and are not shown.

use serde_json::Value;

use super::model::{Block, Message, ParseOptions, Role, ToolCall, ToolResult};

/// One row, read.
#[derive(Debug, PartialEq)]
pub(crate) enum Row {
    Prompt(Message),
    Message(Message),
    Notice(String),
    Meta {
        id: Option<String>,
        cwd: Option<String>,
        created: Option<String>,
    },
    Skip,
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

const CONTEXT_MARKER: &str = "<session_context>";

/// The first workspace directory the injected context names.
fn workspace_of(context: &str) -> Option<String> {
    let after = context.split_once("Workspace Directories:")?.1;
    let line = after.lines().skip(1).map(str::trim).next()?;
    let dir = line.strip_prefix("- ")?.trim();
    dir.starts_with('/').then(|| dir.to_string())
}

/// The text parts of a row's `content` (a string or a list of parts).
fn texts(content: Option<&Value>) -> Vec<&str> {
    match content {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| str_of(p, "text")).collect(),
        _ => Vec::new(),
    }
}

/// Reads one parsed line.
pub(crate) fn classify(v: &Value, opts: &ParseOptions) -> Row {
    if let Some(set) = v.get("$set") {
        let cwd = set
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|ms| ms.first())
            .and_then(|m| texts(m.get("content")).into_iter().next())
            .filter(|t| t.trim_start().starts_with(CONTEXT_MARKER))
            .and_then(workspace_of);
        let id = str_of(set, "sessionId").map(str::to_string);
        if cwd.is_none() && id.is_none() {
            return Row::Skip;
        }
        return Row::Meta {
            id,
            cwd,
            created: None,
        };
    }
    if v.get("sessionId").is_some() && v.get("id").is_none() {
        return Row::Meta {
            id: str_of(v, "sessionId").map(str::to_string),
            cwd: None,
            created: str_of(v, "startTime").map(str::to_string),
        };
    }
    let id = str_of(v, "id").map(str::to_string);
    match str_of(v, "type") {
        Some("user") => user(v, id, opts),
        Some("gemini") => {
            let mut blocks = Vec::new();
            if let Some(Value::Array(thoughts)) = v.get("thoughts") {
                for t in thoughts {
                    let text = match (str_of(t, "subject"), str_of(t, "description")) {
                        (Some(s), Some(d)) => format!("{s}: {d}"),
                        (Some(x), None) | (None, Some(x)) => x.to_string(),
                        (None, None) => continue,
                    };
                    blocks.push(Block::Thinking(text));
                }
            }
            blocks.extend(
                texts(v.get("content"))
                    .into_iter()
                    .filter(|t| !t.trim().is_empty())
                    .map(|t| Block::Text(t.to_string())),
            );
            if let Some(Value::Array(calls)) = v.get("toolCalls") {
                for c in calls {
                    blocks.push(Block::ToolCall(ToolCall {
                        id: str_of(c, "id").map(str::to_string),
                        name: str_of(c, "name").unwrap_or("?").to_string(),
                        input: opts.clip_input(c.get("args").cloned().unwrap_or(Value::Null)),
                    }));
                }
            }
            Row::Message(Message {
                role: Role::Assistant,
                id,
                blocks,
            })
        }
        Some("error") => Row::Notice(texts(v.get("content")).join("\n")),
        _ => Row::Skip,
    }
}

/// A `user` row: the person's prompt, the injected context (not a turn) or
/// a tool's result (`functionResponse` parts).
fn user(v: &Value, id: Option<String>, opts: &ParseOptions) -> Row {
    let mut results = Vec::new();
    let mut text = Vec::new();
    match v.get("content") {
        Some(Value::Array(parts)) => {
            for p in parts {
                if let Some(r) = p.get("functionResponse") {
                    let resp = r.get("response");
                    let (out, is_error) = match resp.and_then(|r| r.get("output")) {
                        Some(Value::String(s)) => (s.clone(), false),
                        _ => match resp.and_then(|r| r.get("error")) {
                            Some(Value::String(s)) => (s.clone(), true),
                            _ => (resp.map(Value::to_string).unwrap_or_default(), false),
                        },
                    };
                    let (output, clipped_lines) = opts.clip(out);
                    results.push(Block::ToolResult(ToolResult {
                        call_id: str_of(r, "id").map(str::to_string),
                        output,
                        is_error,
                        clipped_lines,
                    }));
                } else if let Some(t) = str_of(p, "text") {
                    text.push(t);
                }
            }
        }
        Some(Value::String(s)) => text.push(s),
        _ => {}
    }
    if !results.is_empty() {
        return Row::Message(Message {
            role: Role::Tool,
            id,
            blocks: results,
        });
    }
    if text
        .iter()
        .any(|t| t.trim_start().starts_with(CONTEXT_MARKER))
    {
        return Row::Skip;
    }
    let blocks: Vec<Block> = text
        .into_iter()
        .filter(|t| !t.trim().is_empty())
        .map(|t| Block::Text(t.to_string()))
        .collect();
    if blocks.is_empty() {
        return Row::Skip;
    }
    Row::Prompt(Message {
        role: Role::User,
        id,
        blocks,
    })
}

/// The workspace a row names (the injected context of the first `$set`).
pub fn row_cwd(v: &Value) -> Option<String> {
    match classify(v, &ParseOptions::default()) {
        Row::Meta { cwd, .. } => cwd,
        _ => None,
    }
}

/// The `sessionId` of a store's first line (the header), if it is a uuid.
pub fn header_session_id(first_line: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(first_line).ok()?;
    let id = str_of(&v, "sessionId")?;
    uuid::Uuid::try_parse(id).ok()?;
    Some(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::scan::parse_line;

    fn row(line: &str) -> Row {
        classify(
            &parse_line(line.as_bytes()).unwrap(),
            &ParseOptions::default(),
        )
    }

    #[test]
    fn rows() {
        let head = r#"{"sessionId":"950dc958-6f78-402e-9c17-682235d87ebc","projectHash":"x","startTime":"2026-12-02T17:12:53.877Z","lastUpdated":"2026-12-02T17:12:53.877Z","kind":"main"}"#;
        assert!(matches!(row(head), Row::Meta { id: Some(i), .. } if i.starts_with("950dc958")));
        let ctx = r#"{"$set":{"messages":[{"id":"d0","type":"user","content":[{"text":"<session_context>\nx\n- **Workspace Directories:**\n  - /tmp/gx/proj\n- **Directory Structure:**\n</session_context>"}]}]}}"#;
        assert!(matches!(row(ctx), Row::Meta { cwd: Some(c), .. } if c == "/tmp/gx/proj"));
        assert_eq!(row(r#"{"$set":{"lastUpdated":"t"}}"#), Row::Skip);
        let p = r#"{"id":"u1","timestamp":"t","type":"user","content":[{"text":"hello there"}]}"#;
        assert!(
            matches!(row(p), Row::Prompt(m) if m.text() == "hello there" && m.id.as_deref() == Some("u1"))
        );
        let g = r#"{"id":"g1","type":"gemini","content":"","toolCalls":[{"id":"c1","name":"run_shell_command","args":{"command":"touch x"}}]}"#;
        assert!(
            matches!(row(g), Row::Message(m) if matches!(&m.blocks[..], [Block::ToolCall(c)] if c.name == "run_shell_command"))
        );
        let r = r#"{"id":"r1","type":"user","content":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"done"}}}]}"#;
        assert!(
            matches!(row(r), Row::Message(m) if m.role == Role::Tool && matches!(&m.blocks[..], [Block::ToolResult(t)] if t.output == "done"))
        );
        assert_eq!(
            header_session_id(head.as_bytes()).as_deref(),
            Some("950dc958-6f78-402e-9c17-682235d87ebc")
        );
        assert_eq!(header_session_id(br#"{"sessionId":"../x"}"#), None);
    }

    fn fixture_dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/real/gemini/tmp/proj/chats")
    }

    use crate::transcript::{parse_store, render_conversation, StoreKind, TurnIndex};

    #[test]
    fn the_recorded_store_renders_its_turns_once() {
        let path = fixture_dir().join("session-2026-12-02T17-12-950dc958.jsonl");
        let idx = TurnIndex::build(StoreKind::Gemini, &path).unwrap();
        assert_eq!(idx.turn_count(), 2);
        let info = idx.info();
        assert_eq!(
            info.session_id.as_deref(),
            Some("950dc958-6f78-402e-9c17-682235d87ebc")
        );
        assert_eq!(info.cwd.as_deref(), Some("/tmp/gx/proj"));
        assert_eq!(idx.title().as_deref(), Some("please runcmd now"));
        let conv = parse_store(StoreKind::Gemini, &path, ParseOptions::default()).unwrap();
        assert_eq!(conv.turns.len(), 2);
        let text = render_conversation(&conv);
        assert!(!text.contains("session_context"), "{text}");
        // The gemini row written again with its tool call is one message.
        assert_eq!(text.matches("run_shell_command").count(), 1, "{text}");
        assert!(text.contains("Output: (empty)"), "{text}");
        assert!(text.contains("second words"), "{text}");
        assert_eq!(text.matches("GEMINI ANSWER OK").count(), 2, "{text}");
        // The resume's stub has no turn.
        let stub = fixture_dir().join("session-2026-12-02T17-13-950dc958.jsonl");
        let idx = TurnIndex::build(StoreKind::Gemini, &stub).unwrap();
        assert_eq!(idx.turn_count(), 0);
        assert_eq!(
            idx.info().session_id.as_deref(),
            Some("950dc958-6f78-402e-9c17-682235d87ebc")
        );
    }

    #[test]
    fn repeated_ids_torn_and_corrupt_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session-2026-01-01T00-00-11111111.jsonl");
        let rows = [
            r#"{"sessionId":"11111111-2222-4333-8444-555555555555","projectHash":"h","startTime":"2026-01-01T00:00:00.000Z","lastUpdated":"t","kind":"main"}"#,
            r#"{"id":"u1","timestamp":"2026-01-01T00:00:01.000Z","type":"user","content":[{"text":"first ask"}]}"#,
            r#"{"id":"g1","type":"gemini","content":"draft answer"}"#,
            r#"{"id":"g1","type":"gemini","content":"final answer"}"#,
            r#"{"id":"u1","timestamp":"2026-01-01T00:00:01.000Z","type":"user","content":[{"text":"first ask"}]}"#,
            r#"{"id":"u2","type":"user","content":[{"te"#,
            r#"{"id":"u3","type":"user","content":[{"text":"second ask"}]}"#,
            r#"{"id":"g3","type":"gemini","content":"half"#,
        ];
        // The last row has no newline yet: still being written.
        std::fs::write(&path, rows.join("\n")).unwrap();
        let idx = TurnIndex::build(StoreKind::Gemini, &path).unwrap();
        assert_eq!(idx.turn_count(), 2);
        assert_eq!(idx.title().as_deref(), Some("first ask"));
        let conv = parse_store(StoreKind::Gemini, &path, ParseOptions::default()).unwrap();
        assert_eq!(conv.turns.len(), 2);
        let text = render_conversation(&conv);
        assert!(
            text.contains("final answer") && !text.contains("draft answer"),
            "{text}"
        );
        assert!(!text.contains("half"), "{text}");
        let mut skim = crate::transcript::Skim::default();
        skim.read(StoreKind::Gemini, rows.join("\n").as_bytes());
        assert_eq!(skim.first_prompt.as_deref(), Some("first ask"));
        assert_eq!(
            skim.session_id.as_deref(),
            Some("11111111-2222-4333-8444-555555555555")
        );
        assert_eq!(skim.created_ms, Some(1_767_225_600_000));
    }
}
