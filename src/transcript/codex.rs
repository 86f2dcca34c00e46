//! Codex CLI's store: `sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`, each
//! line `{"timestamp", "type", "payload"}`.
//!
//! Codex records visible text twice: as `response_item` messages (what the
//! model saw) and as `event_msg` `user_message`/`agent_message` (what the UI
//! showed). The response items are complete (tool calls, reasoning, outputs),
//! so they are what is shown and the two events are ignored: every text
//! appears once, and each turn has exactly one starting row. As in Codex
//! itself, a user message made of injected context (`AGENTS.md`
//! instructions, `<environment_context>`, …) is not a turn.
//! Rollouts from before the `payload` wrapper carry the item at top level.

use serde_json::Value;

use super::model::{Block, Message, ParseOptions, Role, ToolCall, ToolResult};
use super::scan::{timestamp_ms, Skim};

#[derive(Debug, PartialEq)]
pub(crate) enum Pre {
    /// Certainly not a user message: no need to parse.
    Reject,
    Parse,
}

/// Looks at the first keys only; `Reject` only where [`classify`] could not
/// find a prompt or session metadata.
pub(crate) fn prefilter(line: &[u8]) -> Pre {
    let mut s = Skim::new(line);
    if s.begin_object().is_none() {
        return Pre::Parse;
    }
    // An `event_msg` is looked into only for a turn's end.
    let mut event = false;
    loop {
        let Some(Some(key)) = s.next_key() else {
            return Pre::Parse;
        };
        match key {
            b"type" => match s.string() {
                Some(b"response_item") => {}
                Some(b"event_msg") => event = true,
                Some(b"session_meta" | b"message") | None => return Pre::Parse,
                Some(_) => return Pre::Reject,
            },
            b"payload" => {
                if s.begin_object().is_none() {
                    return Pre::Parse;
                }
                loop {
                    let Some(Some(k)) = s.next_key() else {
                        return Pre::Parse;
                    };
                    match k {
                        b"type" => match s.string() {
                            Some(b"message") if !event => {}
                            Some(b"task_complete") => return Pre::Parse,
                            Some(_) => return Pre::Reject,
                            None => return Pre::Parse,
                        },
                        b"role" => match s.string() {
                            Some(b"user") => return Pre::Parse,
                            Some(_) => return Pre::Reject,
                            None => return Pre::Parse,
                        },
                        _ => {
                            if s.skip_value().is_none() {
                                return Pre::Parse;
                            }
                        }
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

/// For the row Codex writes when a turn has ended (`event_msg`
/// `task_complete`): its time in ms (0 when it has none).
pub(crate) fn turn_end_ms(v: &Value) -> Option<u64> {
    if v.get("type")?.as_str()? != "event_msg"
        || v.get("payload")?.get("type")?.as_str()? != "task_complete"
    {
        return None;
    }
    Some(
        v.get("timestamp")
            .and_then(Value::as_str)
            .and_then(timestamp_ms)
            .unwrap_or(0),
    )
}

/// One row, read.
#[derive(Debug, PartialEq)]
pub(crate) enum Row {
    Prompt(Message),
    Message(Message),
    Compaction,
    Notice(String),
    Meta {
        id: Option<String>,
        cwd: Option<String>,
    },
    Skip,
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Markers of context Codex injects as user messages (as Codex itself
/// recognises them: a message with any such part is not the person's).
const CONTEXT_MARKERS: &[&str] = &[
    "# agents.md instructions for ",
    "<user_instructions>",
    "<environment_context>",
    "<skill>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagent_notification>",
    "<subagents>",
    "<plugins>",
    "<hook_prompt",
    "<collaboration_mode>",
    "<permissions instructions>",
];

fn is_context(text: &str) -> bool {
    let t = text.trim_start();
    CONTEXT_MARKERS.iter().any(|m| {
        t.get(..m.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(m))
    })
}

/// Reads one parsed line.
pub(crate) fn classify(v: &Value, opts: &ParseOptions) -> Row {
    let ty = str_of(v, "type");
    match (ty, v.get("payload")) {
        (Some("session_meta"), Some(p)) => Row::Meta {
            id: str_of(p, "id").map(str::to_string),
            cwd: str_of(p, "cwd").map(str::to_string),
        },
        (Some("response_item"), Some(p)) => item(p, opts),
        (Some("compacted"), _) => Row::Compaction,
        (Some("event_msg"), Some(p)) => match str_of(p, "type") {
            Some("context_compacted") => Row::Compaction,
            Some("turn_aborted") => Row::Notice("Interrupted".to_string()),
            _ => Row::Skip,
        },
        // The first line of an old rollout: the session itself.
        (None, None) if v.get("id").is_some() && v.get("instructions").is_some() => Row::Meta {
            id: str_of(v, "id").map(str::to_string),
            cwd: None,
        },
        (Some(_), None) => item(v, opts),
        _ => Row::Skip,
    }
}

fn item(p: &Value, opts: &ParseOptions) -> Row {
    match str_of(p, "type").unwrap_or("") {
        "message" => message(p),
        "reasoning" => {
            let mut parts = Vec::new();
            for key in ["summary", "content"] {
                if let Some(Value::Array(items)) = p.get(key) {
                    parts.extend(items.iter().filter_map(|i| str_of(i, "text")));
                }
                if !parts.is_empty() {
                    break;
                }
            }
            Row::Message(Message::new(
                Role::Assistant,
                vec![Block::Thinking(parts.join("\n"))],
            ))
        }
        "function_call" => {
            let args = str_of(p, "arguments").unwrap_or("");
            let input = serde_json::from_str(args).unwrap_or_else(|_| Value::String(args.into()));
            call(p, str_of(p, "name").unwrap_or("?"), opts.clip_input(input))
        }
        "custom_tool_call" => call(
            p,
            str_of(p, "name").unwrap_or("?"),
            opts.clip_input(p.get("input").cloned().unwrap_or(Value::Null)),
        ),
        "local_shell_call" => call(p, "shell", p.get("action").cloned().unwrap_or(Value::Null)),
        "web_search_call" => call(
            p,
            "web_search",
            p.get("action").cloned().unwrap_or(Value::Null),
        ),
        "function_call_output" | "custom_tool_call_output" => {
            let (text, is_error) = tool_output(p.get("output"));
            let (output, clipped_lines) = opts.clip(text);
            Row::Message(Message::new(
                Role::Tool,
                vec![Block::ToolResult(ToolResult {
                    call_id: str_of(p, "call_id").map(str::to_string),
                    output,
                    is_error,
                    clipped_lines,
                })],
            ))
        }
        _ => Row::Skip,
    }
}

fn call(p: &Value, name: &str, input: Value) -> Row {
    Row::Message(Message::new(
        Role::Assistant,
        vec![Block::ToolCall(ToolCall {
            id: str_of(p, "call_id")
                .or_else(|| str_of(p, "id"))
                .map(str::to_string),
            name: name.to_string(),
            input,
        })],
    ))
}

fn message(p: &Value) -> Row {
    let items: &[Value] = match p.get("content") {
        Some(Value::Array(a)) => a,
        _ => &[],
    };
    match str_of(p, "role") {
        Some("user") => {
            let mut blocks = Vec::new();
            for it in items {
                match str_of(it, "type") {
                    Some("input_text" | "output_text" | "text") => {
                        let t = str_of(it, "text").unwrap_or("");
                        if is_context(t) {
                            return Row::Skip;
                        }
                        // The tags Codex wraps around an attached image.
                        let bare = t.trim();
                        if bare.starts_with("<image") || bare == "</image>" {
                            continue;
                        }
                        if !bare.is_empty() {
                            blocks.push(Block::Text(t.to_string()));
                        }
                    }
                    Some("input_image") => blocks.push(Block::Image),
                    _ => {}
                }
            }
            if blocks.is_empty() {
                Row::Skip
            } else {
                Row::Prompt(Message::new(Role::User, blocks))
            }
        }
        Some("assistant") => {
            let blocks = items
                .iter()
                .filter_map(|it| str_of(it, "text"))
                .filter(|t| !t.trim().is_empty())
                .map(|t| Block::Text(t.to_string()))
                .collect();
            Row::Message(Message {
                role: Role::Assistant,
                id: str_of(p, "id").map(str::to_string),
                blocks,
            })
        }
        _ => Row::Skip,
    }
}

/// The text of a tool's output, without the bookkeeping Codex puts around
/// it, and whether it failed (non-zero exit code, `success: false`).
fn tool_output(out: Option<&Value>) -> (String, bool) {
    match out {
        Some(Value::String(s)) => {
            if s.starts_with('{') {
                if let Ok(v) = serde_json::from_str::<Value>(s) {
                    if let Some(text) = str_of(&v, "output") {
                        let code = v
                            .get("metadata")
                            .and_then(|m| m.get("exit_code"))
                            .and_then(Value::as_i64);
                        return (text.to_string(), code.is_some_and(|c| c != 0));
                    }
                }
            }
            exec_output(s)
        }
        Some(Value::Object(o)) => {
            let text = o
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let failed = o.get("success").and_then(Value::as_bool) == Some(false);
            (text, failed)
        }
        Some(Value::Array(items)) => {
            let text: Vec<&str> = items.iter().filter_map(|i| str_of(i, "text")).collect();
            (text.join("\n"), false)
        }
        _ => (String::new(), false),
    }
}

/// A command's output comes after a header of `Key: value` lines ending in
/// `Output:`; the header holds the exit code.
fn exec_output(s: &str) -> (String, bool) {
    let Some(pos) = s.find("\nOutput:\n") else {
        return (s.to_string(), false);
    };
    let header = &s[..pos];
    if header.len() > 1000
        || !header
            .lines()
            .all(|l| l.contains(": ") || l.starts_with("Process "))
    {
        return (s.to_string(), false);
    }
    let mut failed = false;
    let mut running = None;
    for l in header.lines() {
        let code = l
            .strip_prefix("Process exited with code ")
            .or_else(|| l.strip_prefix("Exit code: "));
        if let Some(c) = code.and_then(|c| c.trim().parse::<i64>().ok()) {
            failed = c != 0;
        }
        running = running.or_else(|| l.strip_prefix("Process running with session ID "));
    }
    let body = &s[pos + "\nOutput:\n".len()..];
    match running {
        // Nothing yet from a command still running: say so, not "no output".
        Some(id) if body.trim().is_empty() => {
            (format!("(running as session {})", id.trim()), false)
        }
        _ => (body.to_string(), failed),
    }
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
    fn user_messages() {
        let p = r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"show tools"}]}}"#;
        assert!(matches!(row(p), Row::Prompt(m) if m.text() == "show tools"));
        let ctx = r##"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions for /x\n<INSTRUCTIONS>"},{"type":"input_text","text":"<environment_context>"}]}}"##;
        assert_eq!(row(ctx), Row::Skip);
        let ev = r#"{"type":"event_msg","payload":{"type":"user_message","message":"show tools"}}"#;
        assert_eq!(row(ev), Row::Skip);
        assert_eq!(prefilter(p.as_bytes()), Pre::Parse);
        assert!(prefilter(ev.as_bytes()) == Pre::Reject);
        let legacy =
            r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"old"}]}"#;
        assert!(matches!(row(legacy), Row::Prompt(_)));
        assert_eq!(prefilter(legacy.as_bytes()), Pre::Parse);
    }

    #[test]
    fn outputs() {
        let (t, e) = exec_output("Chunk ID: 1\nWall time: 1 seconds\nProcess exited with code 2\nOriginal token count: 3\nOutput:\nboom");
        assert_eq!((t.as_str(), e), ("boom", true));
        let (t, e) = tool_output(Some(&Value::String(
            r#"{"output":"ok\n","metadata":{"exit_code":0}}"#.into(),
        )));
        assert_eq!((t.as_str(), e), ("ok\n", false));
        assert_eq!(exec_output("plain").0, "plain");
        let (t, _) = exec_output("Chunk ID: 1\nWall time: 1.0 seconds\nProcess running with session ID 48230\nOriginal token count: 0\nOutput:\n");
        assert_eq!(t, "(running as session 48230)");
    }
}
