//! opencode's conversations, as sessionfs mirrors them from its SQLite
//! store (`catalog::opencode_mirror`): a `session` header line, then one
//! line per message. A turn is a `user` message and the `assistant`
//! messages after it; an assistant message's `tool` parts are its calls,
//! and their outputs the tool results that follow it.

use serde_json::Value;

use super::model::{Block, Message, ParseOptions, Role, ToolCall, ToolResult};

/// One line, read.
#[derive(Debug, PartialEq)]
pub(crate) enum Row {
    Prompt(Message),
    /// An answer, and the results of its tool calls (if any).
    Reply(Vec<Message>, Option<String>),
    Meta {
        id: Option<String>,
        cwd: Option<String>,
        title: Option<String>,
        created: Option<String>,
    },
    Skip,
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// opencode's title before the first answer names the conversation.
const PLACEHOLDER_TITLE: &str = "New session - ";

/// Reads one parsed line.
pub(crate) fn classify(v: &Value, opts: &ParseOptions) -> Row {
    let id = str_of(v, "id").map(str::to_string);
    match str_of(v, "type") {
        Some("session") => Row::Meta {
            id,
            cwd: str_of(v, "cwd").map(str::to_string),
            title: None,
            created: str_of(v, "timestamp").map(str::to_string),
        },
        // The title as it was when this line was written; a later one wins.
        Some("title") => Row::Meta {
            id: None,
            cwd: None,
            title: str_of(v, "title")
                .filter(|t| !t.is_empty() && !t.starts_with(PLACEHOLDER_TITLE))
                .map(str::to_string),
            created: None,
        },
        Some("user") => {
            let blocks: Vec<Block> = v
                .get("text")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
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
        Some("assistant") => {
            let mut blocks = Vec::new();
            let mut results = Vec::new();
            for p in v
                .get("parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match str_of(p, "type") {
                    Some("text") => {
                        if let Some(t) = str_of(p, "text").filter(|t| !t.trim().is_empty()) {
                            blocks.push(Block::Text(t.to_string()));
                        }
                    }
                    Some("reasoning") => {
                        if let Some(t) = str_of(p, "text").filter(|t| !t.trim().is_empty()) {
                            blocks.push(Block::Thinking(t.to_string()));
                        }
                    }
                    Some("tool") => {
                        let call = str_of(p, "call").map(str::to_string);
                        blocks.push(Block::ToolCall(ToolCall {
                            id: call.clone(),
                            name: str_of(p, "tool").unwrap_or("?").to_string(),
                            input: opts.clip_input(p.get("input").cloned().unwrap_or(Value::Null)),
                        }));
                        let (out, is_error) = match (str_of(p, "output"), str_of(p, "error")) {
                            (Some(o), _) => (o.to_string(), false),
                            (None, Some(e)) => (e.to_string(), true),
                            (None, None) => continue,
                        };
                        let (output, clipped_lines) = opts.clip(out);
                        results.push(Block::ToolResult(ToolResult {
                            call_id: call,
                            output,
                            is_error,
                            clipped_lines,
                        }));
                    }
                    _ => {}
                }
            }
            let mut messages = vec![Message {
                role: Role::Assistant,
                id: id.clone(),
                blocks,
            }];
            if !results.is_empty() {
                messages.push(Message {
                    role: Role::Tool,
                    id: id.map(|i| format!("{i}/results")),
                    blocks: results,
                });
            }
            // An interrupted turn, a failed request.
            let notice = str_of(v, "error").map(str::to_string);
            Row::Reply(messages, notice)
        }
        _ => Row::Skip,
    }
}

/// The time a turn's answer was complete: an assistant line that finished
/// for any reason but to run its tool calls.
pub(crate) fn turn_end(v: &Value) -> Option<&str> {
    if str_of(v, "type") != Some("assistant") || str_of(v, "finish") == Some("tool-calls") {
        return None;
    }
    str_of(v, "completed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{parse_store, render_conversation, StoreKind, TurnIndex};
    use serde_json::json;

    fn lines() -> Vec<Value> {
        vec![
            json!({"type": "session", "id": "ses_1", "cwd": "/w", "version": "1.18.33", "timestamp": "2026-12-03T02:08:04Z"}),
            json!({"type": "title", "title": "Greeting"}),
            json!({"type": "user", "id": "msg_1", "timestamp": "2026-12-03T02:08:04Z", "text": ["please RUN it"]}),
            json!({"type": "assistant", "id": "msg_2", "timestamp": "2026-12-03T02:08:05Z", "model": "fake-model", "tokens": {"input": 100, "output": 10}, "finish": "tool-calls", "completed": "2026-12-03T02:08:06Z",
                   "parts": [{"type": "tool", "tool": "bash", "call": "call_1", "input": {"command": "echo hi"}, "status": "completed", "output": "hi\n", "error": null}]}),
            json!({"type": "assistant", "id": "msg_3", "timestamp": "2026-12-03T02:08:06Z", "model": "fake-model", "tokens": {"input": 100, "output": 10}, "finish": "stop", "completed": "2026-12-03T02:08:07Z",
                   "parts": [{"type": "text", "text": "done: hi"}]}),
            json!({"type": "user", "id": "msg_4", "timestamp": "2026-12-03T02:09:00Z", "text": ["be SLOW"]}),
            json!({"type": "assistant", "id": "msg_5", "timestamp": "2026-12-03T02:09:01Z", "finish": null, "completed": "2026-12-03T02:09:02Z", "error": "Aborted", "parts": []}),
        ]
    }

    #[test]
    fn turns_are_prompts_and_their_replies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ses_1.jsonl");
        let text: String = lines().iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let idx = TurnIndex::build(StoreKind::Opencode, &path).unwrap();
        assert_eq!(idx.turn_count(), 2);
        assert_eq!(idx.info().session_id.as_deref(), Some("ses_1"));
        assert_eq!(idx.info().cwd.as_deref(), Some("/w"));
        let conv = parse_store(StoreKind::Opencode, &path, ParseOptions::default()).unwrap();
        let shown = format!("{conv:?}");
        assert!(shown.contains("echo hi"), "{shown}");
        assert!(shown.contains("done: hi"), "{shown}");
        assert!(shown.contains("Aborted"), "{shown}");
    }

    #[test]
    fn a_placeholder_title_is_no_title() {
        let v = json!({"type": "title", "title": "New session - 2026-12-03T02:09:07.860Z"});
        assert!(matches!(
            classify(&v, &ParseOptions::default()),
            Row::Meta { title: None, .. }
        ));
    }

    #[test]
    fn the_recorded_store_renders_its_turns() {
        let tmp = tempfile::tempdir().unwrap();
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real/opencode");
        let mirror = tmp.path().join("mirror");
        crate::catalog::opencode_mirror::sync_once(&fixture, &mirror, &tmp.path().join("s"));
        let file = |id: &str| mirror.join("sessions").join(format!("{id}.jsonl"));
        // `opencode run`: the prompt, the tool call with its output, the answer.
        let conv = parse_store(
            StoreKind::Opencode,
            &file("ses_dc657275effe6U6t0ZcxDq3HFk"),
            ParseOptions::default(),
        )
        .unwrap();
        assert_eq!(conv.turns.len(), 1);
        let text = render_conversation(&conv);
        assert!(text.contains("please RUN it"), "{text}");
        assert!(text.contains("echo hi > made.txt"), "{text}");
        assert!(text.contains("ANSWER to (no output)"), "{text}");
        // The TUI's: one call allowed, one rejected, a turn interrupted.
        let path = file("ses_dc65617ccffeU6hKtTLqxR8T0S");
        let idx = TurnIndex::build(StoreKind::Opencode, &path).unwrap();
        assert_eq!(idx.turn_count(), 3);
        let conv = parse_store(StoreKind::Opencode, &path, ParseOptions::default()).unwrap();
        let text = render_conversation(&conv);
        assert!(text.contains("rejected permission"), "{text}");
        assert!(text.contains("Aborted"), "{text}");
    }
}
