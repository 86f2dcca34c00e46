//! One model for a conversation of any engine: turns → messages → blocks.
//!
//! A turn starts at a message the person typed and runs to the next one.
//! Whatever comes before the first typed message is kept as a preamble.

use serde_json::Value;

/// Who a message is from, as far as the console shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// What the person typed (only ever a turn's prompt).
    User,
    /// The agent: text, thinking, tool calls.
    Assistant,
    /// Results of tool calls, sent back to the agent.
    Tool,
    /// Output of a command run locally by the person (slash command, `!` shell).
    Local,
}

/// A tool call: its name and its arguments as the agent wrote them.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: Option<String>,
    pub name: String,
    /// Arguments as JSON (Codex's argument strings are parsed; free-form
    /// inputs such as `apply_patch` stay a JSON string).
    pub input: Value,
}

/// What a tool call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The call this answers, when the store says.
    pub call_id: Option<String>,
    pub output: String,
    pub is_error: bool,
    /// Lines dropped from `output` while parsing (see [`ParseOptions`]).
    pub clipped_lines: usize,
}

/// The smallest piece of a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    /// Reasoning; empty when the store keeps it encrypted or redacted.
    Thinking(String),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    Image,
}

/// One message: a prompt, a (merged) assistant reply, a batch of tool results.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    /// The store's message id, used to merge a reply split over several rows.
    pub id: Option<String>,
    pub blocks: Vec<Block>,
}

impl Message {
    pub fn new(role: Role, blocks: Vec<Block>) -> Self {
        Message {
            role,
            id: None,
            blocks,
        }
    }

    /// Text blocks joined by newlines.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for b in &self.blocks {
            if let Block::Text(t) = b {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(t);
            }
        }
        out
    }
}

/// A line across the conversation that is not a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Divider {
    /// The agent compacted its context: what came before was summarised.
    Compaction,
}

/// Something inside a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    Message(Message),
    Divider(Divider),
    /// A short remark of the agent's UI, e.g. that the person interrupted it.
    Notice(String),
}

/// From one typed message up to the next.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub prompt: Message,
    pub entries: Vec<Entry>,
}

/// A whole conversation, for tests (pages read one range of turns).
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conversation {
    /// Entries recorded before the first typed message.
    pub preamble: Vec<Entry>,
    pub turns: Vec<Turn>,
}

/// How much of each entry a parser keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParseOptions {
    /// Keep at most this many lines of each tool output (the rest is counted
    /// in [`ToolResult::clipped_lines`]), so a page of huge outputs stays small.
    pub clip_tool_output: Option<usize>,
    /// Cut every string inside tool call arguments to about this many bytes
    /// (a `Write` of a whole file need not stay in memory to be summarised).
    pub clip_tool_input: Option<usize>,
    /// Only tell where turns start (and titles): prompts come without their
    /// text, and what a string user message shows otherwise is skipped. For
    /// the index, once it has the first prompt's text.
    pub turns_only: bool,
}

impl ParseOptions {
    /// Cut `output` to the configured number of lines.
    pub(crate) fn clip(&self, output: String) -> (String, usize) {
        let Some(keep) = self.clip_tool_output else {
            return (output, 0);
        };
        let mut seen = 0usize;
        let mut cut_at = None;
        for (i, b) in output.bytes().enumerate() {
            if b == b'\n' {
                seen += 1;
                if seen == keep {
                    cut_at = Some(i);
                    break;
                }
            }
        }
        match cut_at {
            Some(i) if i + 1 < output.len() => {
                let rest = &output[i + 1..];
                let dropped = rest.bytes().filter(|&b| b == b'\n').count()
                    + usize::from(!rest.ends_with('\n'));
                let mut head = output;
                head.truncate(i);
                (head, dropped)
            }
            _ => (output, 0),
        }
    }
}

impl ParseOptions {
    /// Shortens long strings inside tool call arguments, if so configured.
    pub(crate) fn clip_input(&self, mut input: Value) -> Value {
        let Some(max) = self.clip_tool_input else {
            return input;
        };
        // A patch is summarised by its file headers, wherever they are.
        if let Value::String(s) = &input {
            if s.trim_start().starts_with("*** Begin Patch") {
                let heads: Vec<&str> = s.lines().filter(|l| l.starts_with("*** ")).collect();
                input = Value::String(heads.join("\n"));
            }
        }
        shorten_strings(&mut input, max);
        input
    }
}

fn shorten_strings(v: &mut Value, max: usize) {
    match v {
        Value::String(s) if s.len() > max => {
            let mut cut = max;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
        }
        Value::Array(items) => items.iter_mut().for_each(|i| shorten_strings(i, max)),
        Value::Object(map) => map.values_mut().for_each(|i| shorten_strings(i, max)),
        _ => {}
    }
}

/// A finished piece of the conversation handed out while parsing.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    Preamble(Vec<Entry>),
    Turn(Turn),
}

/// Assembles rows into turns, one turn at a time, so a caller can render and
/// drop each turn before the next is read.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    prompt: Option<Message>,
    entries: Vec<Entry>,
}

impl Builder {
    /// A typed message: closes the current turn (or the preamble).
    pub fn start_turn(&mut self, prompt: Message) -> Option<Segment> {
        let done = self.take();
        self.prompt = Some(prompt);
        done
    }

    /// Adds a message; an assistant row with the id of the message just
    /// before it is part of that message (replies are split over rows). A
    /// row after something else starts a message of its own, so what a
    /// turn holds only grows at its end as rows come.
    pub fn add_message(&mut self, msg: Message) {
        if msg.blocks.is_empty() {
            return;
        }
        if let (Role::Assistant, Some(id)) = (msg.role, &msg.id) {
            if let Some(Entry::Message(m)) = self.entries.last_mut() {
                if m.role == Role::Assistant && m.id.as_ref() == Some(id) {
                    m.blocks.extend(msg.blocks);
                    return;
                }
            }
        }
        self.entries.push(Entry::Message(msg));
    }

    /// A typed message from a store whose rows are updates by id (Gemini):
    /// the prompt of the current turn written again replaces it instead of
    /// starting a turn.
    pub fn start_or_update_turn(&mut self, prompt: Message) -> Option<Segment> {
        if let (Some(cur), Some(id)) = (&mut self.prompt, &prompt.id) {
            if cur.id.as_ref() == Some(id) {
                *cur = prompt;
                return None;
            }
        }
        self.start_turn(prompt)
    }

    /// A message from a store whose rows are updates by id (Gemini): one with
    /// the id of a message already in this turn replaces it.
    pub fn put_message(&mut self, msg: Message) {
        if let Some(id) = &msg.id {
            let same = self.entries.iter_mut().find_map(|e| match e {
                Entry::Message(m) if m.id.as_ref() == Some(id) => Some(m),
                _ => None,
            });
            if let Some(m) = same {
                *m = msg;
                return;
            }
        }
        self.add_message(msg);
    }

    /// A compaction; the store often marks one twice (boundary and summary).
    pub fn add_divider(&mut self, d: Divider) {
        if matches!(self.entries.last(), Some(Entry::Divider(x)) if *x == d) {
            return;
        }
        self.entries.push(Entry::Divider(d));
    }

    pub fn add_notice(&mut self, text: String) {
        self.entries.push(Entry::Notice(text));
    }

    /// Ends parsing: the last turn (or preamble), if any.
    pub fn finish(&mut self) -> Option<Segment> {
        self.take()
    }

    fn take(&mut self) -> Option<Segment> {
        let entries = std::mem::take(&mut self.entries);
        match self.prompt.take() {
            Some(prompt) => Some(Segment::Turn(Turn { prompt, entries })),
            None if entries.is_empty() => None,
            None => Some(Segment::Preamble(entries)),
        }
    }
}

#[cfg(test)]
impl Conversation {
    pub(crate) fn push(&mut self, seg: Segment) {
        match seg {
            Segment::Preamble(p) => self.preamble.extend(p),
            Segment::Turn(t) => self.turns.push(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asst(id: &str, text: &str) -> Message {
        Message {
            role: Role::Assistant,
            id: Some(id.into()),
            blocks: vec![Block::Text(text.into())],
        }
    }

    #[test]
    fn split_rows_merge_until_something_else_comes() {
        let mut b = Builder::default();
        assert!(b
            .start_turn(Message::new(Role::User, vec![Block::Text("hi".into())]))
            .is_none());
        b.add_message(asst("m1", "a"));
        b.add_message(asst("m1", "b"));
        b.add_message(Message::new(Role::Tool, vec![Block::Text("r".into())]));
        b.add_message(asst("m1", "c"));
        b.add_message(asst("m2", "d"));
        let Some(Segment::Turn(t)) = b.finish() else {
            panic!("no turn")
        };
        assert_eq!(t.entries.len(), 4);
        match &t.entries[0] {
            Entry::Message(m) => assert_eq!(m.blocks.len(), 2),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn clip_counts_dropped_lines() {
        let o = ParseOptions {
            clip_tool_output: Some(2),
            clip_tool_input: Some(3),
            turns_only: false,
        };
        assert_eq!(
            o.clip_input(serde_json::json!({"a": ["héllo"], "b": 1})),
            serde_json::json!({"a": ["hé"], "b": 1})
        );
        let patch = serde_json::json!("*** Begin Patch\n*** Update File: a\n+x\n*** Add File: b\n");
        let o = ParseOptions {
            clip_tool_input: Some(100),
            ..o
        };
        assert_eq!(
            o.clip_input(patch),
            serde_json::json!("*** Begin Patch\n*** Update File: a\n*** Add File: b")
        );
        assert_eq!(o.clip("a\nb\nc\nd".into()), ("a\nb".into(), 2));
        assert_eq!(o.clip("a\nb\nc\n".into()), ("a\nb".into(), 1));
        assert_eq!(o.clip("a\nb".into()), ("a\nb".into(), 0));
        assert_eq!(o.clip("a\nb\n".into()), ("a\nb\n".into(), 0));
    }
}
