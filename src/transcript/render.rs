//! Console-style rendering of turns, close to what the agents print:
//!
//! ```text
//! > the prompt
//! ✻ thinking… first line of the reasoning
//! ● Bash(ls -la)
//!   ⎿  total 8
//!      drwxr-xr-x 2 me me 4096 .
//!      … +3 lines
//! ● The reply text
//! ──────── conversation compacted ────────
//! ```
//!
//! Lines are never broken to fit a width; only tool output and one-line
//! summaries are shortened, with a visible `…`.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::model::{Block, Divider, Entry, Message, Role, Segment, ToolCall, ToolResult};
use super::scan::{clean_terminal_text, cut_chars};

/// Lines of each tool output shown.
pub const OUTPUT_LINES: usize = 5;
/// Longest tool output line shown whole.
const OUTPUT_LINE_CHARS: usize = 500;
/// Longest one-line summary of a tool call's arguments.
const ARG_CHARS: usize = 200;
const THINKING_CHARS: usize = 100;

const RESULT_FIRST: &str = "  ⎿  ";
const RESULT_REST: &str = "     ";
pub(crate) const DIVIDER: &str = "──────── conversation compacted ────────";

/// Where rendered lines go.
pub(crate) trait Lines {
    /// A new message starts (the page caps count messages).
    fn message(&mut self);
    fn line(&mut self, s: &str);
    /// A turn (or the preamble) starts: an empty line, unless it is the first.
    fn segment(&mut self);
}

impl Lines for Vec<String> {
    fn message(&mut self) {}
    fn segment(&mut self) {
        if !self.is_empty() {
            self.push(String::new());
        }
    }
    fn line(&mut self, s: &str) {
        self.push(s.to_string());
    }
}

/// Renders a whole conversation, uncapped (for tests).
#[cfg(test)]
pub fn render_conversation(conv: &super::model::Conversation) -> String {
    let mut lines: Vec<String> = Vec::new();
    if !conv.preamble.is_empty() {
        render_segment(&Segment::Preamble(conv.preamble.clone()), &mut lines);
    }
    for t in &conv.turns {
        render_segment(&Segment::Turn(t.clone()), &mut lines);
    }
    let mut s = lines.join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

/// Renders one turn (or the preamble), after an empty line when it is not
/// the first on its page. Everything is shown in the order the store holds
/// it, so rows appended to the store only ever add lines at the end of the
/// render: a follower (`tail -f`) sees a turn grow row by row. A tool result
/// right after its call reads as that call's output; one that comes later
/// (calls made side by side) names its call.
pub(crate) fn render_segment(seg: &Segment, out: &mut dyn Lines) {
    let (prompt, entries) = match seg {
        Segment::Preamble(e) => (None, e.as_slice()),
        Segment::Turn(t) => (Some(&t.prompt), t.entries.as_slice()),
    };
    out.segment();
    let mut calls: HashMap<&str, &ToolCall> = HashMap::new();
    // The call whose output would read as its own: the last thing shown.
    let mut open_call: Option<&str> = None;
    if let Some(p) = prompt {
        out.message();
        render_prompt(p, out);
    }
    for e in entries {
        match e {
            Entry::Message(m) => {
                out.message();
                render_message(m, &mut calls, &mut open_call, out);
            }
            Entry::Divider(Divider::Compaction) => {
                open_call = None;
                out.line(DIVIDER);
            }
            Entry::Notice(n) => {
                open_call = None;
                out.line(&format!("{RESULT_FIRST}{n}"));
            }
        }
    }
}

/// `first` before the first line of `text`, `rest` before the others
/// (nothing before empty lines, so no trailing blanks).
fn text_lines(text: &str, first: &str, rest: &str, out: &mut dyn Lines) {
    for (i, l) in text.split('\n').enumerate() {
        let l = l.strip_suffix('\r').unwrap_or(l);
        let prefix = if i == 0 { first } else { rest };
        if l.is_empty() {
            out.line(prefix.trim_end());
        } else {
            out.line(&format!("{prefix}{l}"));
        }
    }
}

fn render_prompt(p: &Message, out: &mut dyn Lines) {
    let mut first = true;
    for b in &p.blocks {
        let lead = if first { "> " } else { "  " };
        match b {
            Block::Text(t) => text_lines(t.trim_end(), lead, "  ", out),
            Block::Image => out.line(&format!("{lead}[image]")),
            _ => continue,
        }
        first = false;
    }
    if first {
        out.line(">");
    }
}

fn render_message<'a>(
    m: &'a Message,
    calls: &mut HashMap<&'a str, &'a ToolCall>,
    open_call: &mut Option<&'a str>,
    out: &mut dyn Lines,
) {
    for b in &m.blocks {
        let mut opened = None;
        match b {
            Block::Text(t) => match m.role {
                Role::Assistant | Role::User => text_lines(t.trim(), "● ", "  ", out),
                Role::Tool | Role::Local => text_lines(t.trim(), RESULT_FIRST, RESULT_REST, out),
            },
            Block::Thinking(t) => {
                let first = t.lines().map(str::trim).find(|l| !l.is_empty());
                match first {
                    Some(l) => out.line(&format!("✻ thinking… {}", cut_chars(l, THINKING_CHARS))),
                    None => out.line("✻ thinking…"),
                }
            }
            Block::ToolCall(c) => {
                out.line(&format!("● {}", call_line(c)));
                if let Some(id) = c.id.as_deref() {
                    calls.insert(id, c);
                    opened = Some(id);
                }
            }
            Block::ToolResult(r) => {
                let id = r.call_id.as_deref();
                let under_its_call = id.is_some() && id == *open_call;
                let label = match id.and_then(|id| calls.get(id)) {
                    Some(c) if !under_its_call => Some(call_line(c)),
                    _ => None,
                };
                render_result(r, label.as_deref(), out);
            }
            Block::Image => out.line(&format!("{RESULT_FIRST}[image]")),
        }
        *open_call = opened;
    }
}

/// `Name(summary)`, as a call is shown.
fn call_line(c: &ToolCall) -> String {
    format!("{}({})", c.name, call_summary(&c.name, &c.input))
}

/// A tool's output; `label` names its call when it is not right under it.
fn render_result(r: &ToolResult, label: Option<&str>, out: &mut dyn Lines) {
    let cleaned = clean_terminal_text(&r.output);
    let mut text = cleaned
        .trim_end_matches(['\n', ' ', '\t'])
        .trim_start_matches('\n');
    // Claude wraps tool errors in a tag of its own.
    if let Some(inner) = text
        .strip_prefix("<tool_use_error>")
        .map(|t| t.strip_suffix("</tool_use_error>").unwrap_or(t))
    {
        text = inner;
    }
    let mark = match (label, r.is_error) {
        (Some(l), true) => format!("{l}: ✗ "),
        (Some(l), false) => format!("{l}: "),
        (None, true) => "✗ ".to_string(),
        (None, false) => String::new(),
    };
    if text.is_empty() {
        let what = if r.is_error { "failed" } else { "(no output)" };
        out.line(&format!("{RESULT_FIRST}{mark}{what}"));
        return;
    }
    let mut lines = text.split('\n');
    for (shown, l) in lines.by_ref().take(OUTPUT_LINES).enumerate() {
        let l = cut_chars(l.strip_suffix('\r').unwrap_or(l), OUTPUT_LINE_CHARS);
        if shown == 0 {
            out.line(&format!("{RESULT_FIRST}{mark}{l}"));
        } else if l.is_empty() {
            out.line("");
        } else {
            out.line(&format!("{RESULT_REST}{l}"));
        }
    }
    let more = lines.count() + r.clipped_lines;
    if more > 0 {
        out.line(&format!("{RESULT_REST}… +{more} lines"));
    }
}

/// A short, readable form of a tool call's arguments: the one argument that
/// says what the call does (a command, a path, a pattern, a URL…), else the
/// arguments as compact JSON.
pub fn call_summary(name: &str, input: &Value) -> String {
    let s = match input {
        Value::Object(o) => object_summary(name, o),
        Value::String(s) => string_summary(s),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let s = s.trim();
    let mut lines = s.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("");
    let marked = if lines.next().is_some() {
        format!("{first} …")
    } else {
        first.to_string()
    };
    cut_chars(&marked, ARG_CHARS)
}

/// The arguments of a shell invocation as typed: `["bash", "-lc", "ls"]` is `ls`.
fn command_line(parts: &[Value]) -> String {
    let words: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
    if let [shell, flag, script, ..] = words.as_slice() {
        let base = shell.rsplit('/').next().unwrap_or(shell);
        if matches!(base, "bash" | "sh" | "zsh") && matches!(*flag, "-c" | "-lc") {
            return script.to_string();
        }
    }
    words.join(" ")
}

fn object_summary(name: &str, o: &Map<String, Value>) -> String {
    let count = |key: &str, what: &str| {
        o.get(key)
            .and_then(Value::as_array)
            .map(|a| format!("{} {what}", a.len()))
    };
    let special = match name {
        "TodoWrite" => count("todos", "todos"),
        "update_plan" => count("plan", "steps"),
        "MultiEdit" => o.get("file_path").and_then(Value::as_str).map(|p| {
            let n = o.get("edits").and_then(Value::as_array).map_or(0, Vec::len);
            format!("{p}, {n} edits")
        }),
        "AskUserQuestion" => o
            .get("questions")
            .and_then(|q| q.get(0))
            .and_then(|q| q.get("question"))
            .and_then(Value::as_str)
            .map(str::to_string),
        "write_stdin" => o.get("session_id").map(|id| {
            let id = id.as_str().map_or_else(|| id.to_string(), str::to_string);
            match o.get("chars").and_then(Value::as_str) {
                Some(c) if !c.is_empty() => format!("{id}, {}", Value::String(c.to_string())),
                _ => id,
            }
        }),
        _ => None,
    };
    if let Some(s) = special {
        return s;
    }
    const KEYS: &[&str] = &[
        "command",
        "cmd",
        "file_path",
        "notebook_path",
        "path",
        "pattern",
        "url",
        "query",
        "skill",
        "description",
        "prompt",
        "plan",
        "bash_id",
        "shell_id",
        "task_id",
    ];
    for k in KEYS {
        match o.get(*k) {
            Some(Value::String(s)) if !s.trim().is_empty() => return s.clone(),
            Some(Value::Array(a)) if *k == "command" && !a.is_empty() => return command_line(a),
            _ => {}
        }
    }
    if o.is_empty() {
        String::new()
    } else {
        Value::Object(o.clone()).to_string()
    }
}

/// A free-form input; a patch is summarised by the files it touches.
fn string_summary(s: &str) -> String {
    if s.trim_start().starts_with("*** Begin Patch") {
        let files: Vec<&str> = s
            .lines()
            .filter_map(|l| {
                l.strip_prefix("*** Update File: ")
                    .or_else(|| l.strip_prefix("*** Add File: "))
                    .or_else(|| l.strip_prefix("*** Delete File: "))
            })
            .collect();
        if !files.is_empty() {
            return files.join(", ");
        }
    }
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::model::{Conversation, Message, ToolCall, Turn};
    use serde_json::json;

    #[test]
    fn summaries() {
        assert_eq!(
            call_summary("Bash", &json!({"command": "ls -la", "description": "x"})),
            "ls -la"
        );
        assert_eq!(
            call_summary("Read", &json!({"file_path": "/a/b.rs"})),
            "/a/b.rs"
        );
        assert_eq!(
            call_summary("shell", &json!({"command": ["bash", "-lc", "git status"]})),
            "git status"
        );
        assert_eq!(
            call_summary("TodoWrite", &json!({"todos": [1, 2, 3]})),
            "3 todos"
        );
        assert_eq!(call_summary("ExitPlanMode", &json!({})), "");
        assert_eq!(call_summary("X", &json!({"a": 1})), r#"{"a":1}"#);
        assert_eq!(call_summary("Bash", &json!({"command": "a\nb"})), "a …");
        assert_eq!(
            call_summary(
                "apply_patch",
                &json!("*** Begin Patch\n*** Update File: src/a.ts\n@@\n*** Add File: b\n")
            ),
            "src/a.ts, b"
        );
    }

    #[test]
    fn turn_shape() {
        let turn = Turn {
            prompt: Message::new(Role::User, vec![Block::Text("list files".into())]),
            entries: vec![
                Entry::Message(Message::new(
                    Role::Assistant,
                    vec![
                        Block::Thinking("Let me look.\nmore".into()),
                        Block::ToolCall(ToolCall {
                            id: Some("t1".into()),
                            name: "Bash".into(),
                            input: json!({"command": "ls"}),
                        }),
                    ],
                )),
                Entry::Message(Message::new(
                    Role::Tool,
                    vec![Block::ToolResult(ToolResult {
                        call_id: Some("t1".into()),
                        output: (1..=8)
                            .map(|i| format!("f{i}"))
                            .collect::<Vec<_>>()
                            .join("\n"),
                        is_error: false,
                        clipped_lines: 2,
                    })],
                )),
                Entry::Divider(Divider::Compaction),
                Entry::Message(Message::new(
                    Role::Assistant,
                    vec![Block::Text("Done.\n\nBye".into())],
                )),
            ],
        };
        let conv = Conversation {
            preamble: vec![],
            turns: vec![turn],
        };
        let out = render_conversation(&conv);
        let expect = "> list files\n✻ thinking… Let me look.\n● Bash(ls)\n  ⎿  f1\n     f2\n     f3\n     f4\n     f5\n     … +5 lines\n──────── conversation compacted ────────\n● Done.\n\n  Bye\n";
        assert_eq!(out, expect);
    }
}
