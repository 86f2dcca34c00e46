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

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::model::{Block, Message, ParseOptions, Role, ToolCall, ToolResult};
use super::scan::{scalars_give, timestamp_ms, unescape, Field, Key, Skim, Valid, ValidVisitor};

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

/// A run of keys [`prefilter`] found it had no use for, as bytes: rows of
/// one store repeat most of their first keys (`userType`, `cwd`, `sessionId`,
/// `version`, `gitBranch`) byte for byte, and a run met again is stepped over
/// with one comparison. Walking the same bytes would end where the step
/// does, with nothing learnt.
#[derive(Debug, Default)]
pub(crate) struct SeenRun {
    bytes: Vec<u8>,
    /// `want_cwd` when it was recorded (`cwd` is of no use only when false).
    want_cwd: bool,
}

/// Shorter runs are not worth a comparison.
const MIN_RUN: usize = 32;

/// Decides from the first keys of a line whether it could start a turn or
/// carry a title. Only says `Reject` where [`classify`] would never return a
/// prompt or a title for the same line, so the index and the pages agree.
/// `want_cwd`: whether to decode `cwd` (only until the index has one).
pub(crate) fn prefilter(
    line: &[u8],
    mode: Option<bool>,
    want_cwd: bool,
    seen: &mut SeenRun,
) -> Pre {
    let mut s = Skim::new(line);
    let mut info = SkimInfo::default();
    if s.begin_object().is_none() {
        return Pre::Parse;
    }
    // Where the current run of keys of no use started, and whether `seen`
    // was stepped over in this line.
    let mut run: Option<usize> = None;
    let mut stepped = false;
    loop {
        let at = s.pos();
        if run.is_none()
            && !stepped
            && seen.want_cwd == want_cwd
            && !seen.bytes.is_empty()
            && line[at..].starts_with(&seen.bytes)
        {
            s.set_pos(at + seen.bytes.len());
            stepped = true;
            run = Some(at);
            continue;
        }
        let Some(Some(key)) = s.next_key() else {
            return Pre::Parse;
        };
        let of_use = match key {
            b"type" | b"isSidechain" | b"message" => true,
            b"cwd" => want_cwd,
            _ => false,
        };
        if of_use {
            if let Some(start) = run.take() {
                if !stepped && at - start >= MIN_RUN {
                    seen.bytes.clear();
                    seen.bytes.extend_from_slice(&line[start..at]);
                    seen.want_cwd = want_cwd;
                }
            }
        } else if run.is_none() {
            run = Some(at);
        }
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
                if want_cwd {
                    info.cwd = unescape(raw);
                }
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

/// One row of the store, read from its line once: the fields any reader of
/// a row looks at, strings borrowed from the line unless they had escapes,
/// everything else checked and dropped. The turn index and the pages both
/// read rows through this, and [`classify`] says what a row is.
///
/// [`RawRow::parse`] fails exactly on the lines a `Value` parse refuses, and
/// each field reads as `Value` would (`as_str`, `as_bool`; the last of a
/// repeated key counts).
#[derive(Debug, Default)]
pub(crate) struct RawRow<'a> {
    ty: Option<Field<'a>>,
    // Flags are kept as `as_bool` reads them: `None` unless a boolean.
    sidechain: Option<bool>,
    is_meta: Option<bool>,
    is_compact_summary: Option<bool>,
    cwd: Option<Field<'a>>,
    timestamp: Option<Field<'a>>,
    subtype: Option<Field<'a>>,
    content: Option<Field<'a>>,
    summary: Option<Field<'a>>,
    custom_title: Option<Field<'a>>,
    ai_title: Option<Field<'a>>,
    message: Option<RawMessage<'a>>,
}

fn field_str<'b>(f: &'b Option<Field<'_>>) -> Option<&'b str> {
    f.as_ref().and_then(Field::as_str)
}

impl<'a> RawRow<'a> {
    /// Reads one line given as text (see `scan::line_text`: bytes that are
    /// not UTF-8 are replaced, as `parse_line` does).
    pub fn parse(text: &'a str) -> serde_json::Result<Self> {
        serde_json::from_str(text)
    }

    /// The row's `isSidechain`, if a boolean.
    pub fn sidechain(&self) -> Option<bool> {
        self.sidechain
    }

    /// The row's `cwd`, if a string.
    pub fn cwd(&self) -> Option<&str> {
        field_str(&self.cwd)
    }

    /// The row's `timestamp`, if a string.
    pub fn timestamp(&self) -> Option<&str> {
        field_str(&self.timestamp)
    }

    /// For a row Claude writes once a turn has ended and its Stop hooks
    /// have run (`system` `stop_hook_summary`, `turn_duration`): its time
    /// in ms (0 when it has none).
    pub fn turn_end_ms(&self) -> Option<u64> {
        if field_str(&self.ty) != Some("system") {
            return None;
        }
        match field_str(&self.subtype) {
            Some("stop_hook_summary" | "turn_duration") => {
                Some(self.timestamp().and_then(timestamp_ms).unwrap_or(0))
            }
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for RawRow<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RowVisitor)
    }
}

struct RowVisitor;

impl<'de> Visitor<'de> for RowVisitor {
    type Value = RawRow<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<RawRow<'de>, A::Error> {
        let mut r = RawRow::default();
        while let Some(Key(k)) = a.next_key()? {
            let slot = match &*k {
                "type" => &mut r.ty,
                "isSidechain" => {
                    r.sidechain = a.next_value::<Field>()?.as_bool();
                    continue;
                }
                "isMeta" => {
                    r.is_meta = a.next_value::<Field>()?.as_bool();
                    continue;
                }
                "isCompactSummary" => {
                    r.is_compact_summary = a.next_value::<Field>()?.as_bool();
                    continue;
                }
                "cwd" => &mut r.cwd,
                "timestamp" => &mut r.timestamp,
                "subtype" => &mut r.subtype,
                "content" => &mut r.content,
                "summary" => &mut r.summary,
                "customTitle" => &mut r.custom_title,
                "aiTitle" => &mut r.ai_title,
                "message" => {
                    r.message = Some(a.next_value()?);
                    continue;
                }
                _ => {
                    a.next_value::<Valid>()?;
                    continue;
                }
            };
            *slot = Some(a.next_value()?);
        }
        Ok(r)
    }

    // Not an object: valid, and nothing in it matters.
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<RawRow<'de>, A::Error> {
        while a.next_element::<Valid>()?.is_some() {}
        Ok(RawRow::default())
    }
    scalars_give!(RawRow<'de>, RawRow::default());
}

/// A row's `message`, when it has one.
#[derive(Debug)]
enum RawMessage<'a> {
    Object {
        role: Option<Field<'a>>,
        id: Option<Field<'a>>,
        content: Option<Content<'a>>,
    },
    NotObject,
}

impl<'de> Deserialize<'de> for RawMessage<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MessageVisitor)
    }
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = RawMessage<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<RawMessage<'de>, A::Error> {
        let (mut role, mut id, mut content) = (None, None, None);
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "role" => role = Some(a.next_value()?),
                "id" => id = Some(a.next_value()?),
                "content" => content = Some(a.next_value()?),
                _ => {
                    a.next_value::<Valid>()?;
                }
            }
        }
        Ok(RawMessage::Object { role, id, content })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<RawMessage<'de>, A::Error> {
        while a.next_element::<Valid>()?.is_some() {}
        Ok(RawMessage::NotObject)
    }
    scalars_give!(RawMessage<'de>, RawMessage::NotObject);
}

/// A message's `content`: one string, or a list of blocks.
#[derive(Debug)]
enum Content<'a> {
    Str(Cow<'a, str>),
    Blocks(Vec<RawBlock<'a>>),
    Other,
}

impl<'de> Deserialize<'de> for Content<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Content<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Content<'de>, E> {
        Ok(Content::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Content<'de>, E> {
        Ok(Content::Str(Cow::Owned(s.to_string())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Content<'de>, A::Error> {
        let mut blocks = Vec::new();
        while let Some(b) = a.next_element()? {
            blocks.push(b);
        }
        Ok(Content::Blocks(blocks))
    }
    fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Content<'de>, A::Error> {
        ValidVisitor.visit_map(a).map(|_| Content::Other)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Content<'de>, E> {
        Ok(Content::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Content<'de>, E> {
        Ok(Content::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Content<'de>, E> {
        Ok(Content::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Content<'de>, E> {
        Ok(Content::Other)
    }
    fn visit_unit<E>(self) -> Result<Content<'de>, E> {
        Ok(Content::Other)
    }
}

/// One block of a message (anything in the list that is not an object
/// reads as a block with no fields). A tool call's `input` and a tool
/// result's `content` are kept whole: they are shown; an image's data is not.
#[derive(Debug, Default)]
struct RawBlock<'a> {
    ty: Option<Field<'a>>,
    text: Option<Field<'a>>,
    thinking: Option<Field<'a>>,
    id: Option<Field<'a>>,
    name: Option<Field<'a>>,
    tool_use_id: Option<Field<'a>>,
    is_error: Option<bool>,
    input: Option<Value>,
    content: Option<Value>,
}

impl<'de> Deserialize<'de> for RawBlock<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(BlockVisitor)
    }
}

struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = RawBlock<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<RawBlock<'de>, A::Error> {
        let mut b = RawBlock::default();
        while let Some(Key(k)) = a.next_key()? {
            let slot = match &*k {
                "type" => &mut b.ty,
                "text" => &mut b.text,
                "thinking" => &mut b.thinking,
                "id" => &mut b.id,
                "name" => &mut b.name,
                "tool_use_id" => &mut b.tool_use_id,
                "is_error" => {
                    b.is_error = a.next_value::<Field>()?.as_bool();
                    continue;
                }
                "input" => {
                    b.input = Some(a.next_value()?);
                    continue;
                }
                "content" => {
                    b.content = Some(a.next_value()?);
                    continue;
                }
                _ => {
                    a.next_value::<Valid>()?;
                    continue;
                }
            };
            *slot = Some(a.next_value()?);
        }
        Ok(b)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<RawBlock<'de>, A::Error> {
        while a.next_element::<Valid>()?.is_some() {}
        Ok(RawBlock::default())
    }
    scalars_give!(RawBlock<'de>, RawBlock::default());
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

/// Reads one row. `sidechain_mode` is the file's side: rows whose
/// `isSidechain` says otherwise belong to a subagent and are skipped.
pub(crate) fn classify(mut row: RawRow<'_>, sidechain_mode: bool, opts: &ParseOptions) -> Row {
    let ty = field_str(&row.ty).unwrap_or("");
    match ty {
        "summary" => return title(&row.summary, TitleKind::Summary),
        "custom-title" => return title(&row.custom_title, TitleKind::Custom),
        "ai-title" => return title(&row.ai_title, TitleKind::Ai),
        "user" | "assistant" | "system" => {}
        _ => return Row::Skip,
    }
    if row.sidechain().is_some_and(|side| side != sidechain_mode) {
        return Row::Skip;
    }
    match ty {
        "user" => user_row(&mut row, opts),
        "assistant" => assistant_row(row.message.take(), opts),
        _ => system_row(&row, opts),
    }
}

fn title(f: &Option<Field<'_>>, kind: TitleKind) -> Row {
    match field_str(f).map(str::trim) {
        Some(t) if !t.is_empty() => Row::Title(kind, t.to_string()),
        _ => Row::Skip,
    }
}

fn system_row(row: &RawRow<'_>, opts: &ParseOptions) -> Row {
    match field_str(&row.subtype) {
        Some("compact_boundary") => Row::Compaction,
        // Newer versions record local slash commands and their output here.
        Some("local_command") => match field_str(&row.content) {
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

fn user_row(row: &mut RawRow<'_>, opts: &ParseOptions) -> Row {
    if row.is_compact_summary == Some(true) {
        return Row::Compaction;
    }
    if row.is_meta == Some(true) {
        return Row::Skip;
    }
    let Some(RawMessage::Object { role, content, .. }) = row.message.take() else {
        return Row::Skip;
    };
    if field_str(&role).is_some_and(|r| r != "user") {
        return Row::Skip;
    }
    match content {
        Some(Content::Str(s)) => user_text(&s, opts),
        Some(Content::Blocks(blocks)) => {
            let first_is_result = blocks
                .first()
                .is_some_and(|b| field_str(&b.ty) == Some("tool_result"));
            if first_is_result {
                tool_results(blocks, opts)
            } else {
                user_blocks(&blocks, opts)
            }
        }
        Some(Content::Other) | None => Row::Skip,
    }
}

/// Text between `open` and `close` (a tag's two ends), if `open` is there.
fn tag<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = s.find(open)? + open.len();
    let end = s[start..].find(close).map_or(s.len(), |e| start + e);
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

/// What a string user message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextKind {
    /// A wrapped slash command: typed.
    Command,
    LocalOutput,
    /// A `!` shell command: typed.
    Bash,
    BashOutput,
    Injected,
    Interrupted,
    Blank,
    /// Plain text: typed.
    Typed,
}

impl TextKind {
    fn is_prompt(self) -> bool {
        matches!(self, TextKind::Command | TextKind::Bash | TextKind::Typed)
    }
}

/// Sorts a string user message by its first bytes (and, for a wrapped
/// command, its tags), without building anything.
fn text_kind(s: &str) -> TextKind {
    let t = s.trim_start();
    let wrapped = ["<command-name>", "<command-message>", "<command-args>"]
        .iter()
        .any(|p| t.starts_with(p));
    if wrapped && tag(t, "<command-name>", "</command-name>").is_some() {
        return TextKind::Command;
    }
    if t.starts_with("<local-command-stdout>") || t.starts_with("<local-command-stderr>") {
        return TextKind::LocalOutput;
    }
    if t.starts_with("<bash-input>") {
        return TextKind::Bash;
    }
    if t.starts_with("<bash-stdout>") || t.starts_with("<bash-stderr>") {
        return TextKind::BashOutput;
    }
    if is_injected(t) {
        return TextKind::Injected;
    }
    if t.starts_with("[Request interrupted by user") {
        return TextKind::Interrupted;
    }
    if t.trim_end().is_empty() {
        return TextKind::Blank;
    }
    TextKind::Typed
}

/// A user message given as one string: a prompt, or one of the wrappers the
/// agent writes around slash commands and local output.
fn user_text(s: &str, opts: &ParseOptions) -> Row {
    let t = s.trim_start();
    let kind = text_kind(s);
    if opts.turns_only {
        return if kind.is_prompt() {
            Row::Prompt(Message::new(Role::User, Vec::new()))
        } else {
            Row::Skip
        };
    }
    match kind {
        TextKind::Command => {
            let name = tag(t, "<command-name>", "</command-name>")
                .unwrap_or("")
                .trim();
            let mut shown = if name.starts_with('/') {
                name.to_string()
            } else {
                format!("/{name}")
            };
            if let Some(args) = tag(t, "<command-args>", "</command-args>").map(str::trim) {
                if !args.is_empty() {
                    shown.push(' ');
                    shown.push_str(args);
                }
            }
            Row::Prompt(Message::new(Role::User, vec![Block::Text(shown)]))
        }
        TextKind::LocalOutput => {
            let out = tag(t, "<local-command-stdout>", "</local-command-stdout>")
                .unwrap_or("")
                .trim_end();
            let err = tag(t, "<local-command-stderr>", "</local-command-stderr>")
                .unwrap_or("")
                .trim_end();
            local_output(join_out_err(out, err), !err.is_empty(), opts)
        }
        TextKind::Bash => {
            let cmd = tag(t, "<bash-input>", "</bash-input>").unwrap_or("").trim();
            Row::Prompt(Message::new(
                Role::User,
                vec![Block::Text(format!("! {cmd}"))],
            ))
        }
        TextKind::BashOutput => {
            let out = tag(t, "<bash-stdout>", "</bash-stdout>")
                .unwrap_or("")
                .trim_end();
            let err = tag(t, "<bash-stderr>", "</bash-stderr>")
                .unwrap_or("")
                .trim_end();
            local_output(join_out_err(out, err), !err.is_empty(), opts)
        }
        TextKind::Injected | TextKind::Blank => Row::Skip,
        TextKind::Interrupted => {
            let inner = t.trim().trim_start_matches('[').trim_end_matches(']');
            Row::Notice(inner.replace("Request interrupted", "Interrupted"))
        }
        TextKind::Typed => Row::Prompt(Message::new(
            Role::User,
            vec![Block::Text(s.trim().to_string())],
        )),
    }
}

/// A user message given as blocks (text, images) but no tool results.
fn user_blocks(blocks: &[RawBlock<'_>], opts: &ParseOptions) -> Row {
    let mut kept = Vec::new();
    for b in blocks {
        match field_str(&b.ty) {
            Some("text") => {
                let text = field_str(&b.text).unwrap_or("");
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

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
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

fn tool_results(blocks: Vec<RawBlock<'_>>, opts: &ParseOptions) -> Row {
    let mut out = Vec::new();
    for b in blocks {
        match field_str(&b.ty) {
            Some("tool_result") => {
                let (output, clipped_lines) = opts.clip(result_text(b.content.as_ref()));
                out.push(Block::ToolResult(ToolResult {
                    call_id: field_str(&b.tool_use_id).map(str::to_string),
                    output,
                    is_error: b.is_error == Some(true),
                    clipped_lines,
                }));
            }
            Some("text") => {
                let text = field_str(&b.text).unwrap_or("");
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

fn assistant_row(message: Option<RawMessage<'_>>, opts: &ParseOptions) -> Row {
    let (id, content) = match message {
        None => return Row::Skip,
        Some(RawMessage::NotObject) => (None, None),
        Some(RawMessage::Object { id, content, .. }) => (id, content),
    };
    let mut blocks = Vec::new();
    match content {
        Some(Content::Str(s)) if !s.trim().is_empty() => blocks.push(Block::Text(s.into_owned())),
        Some(Content::Blocks(items)) => {
            for b in items {
                let ty = field_str(&b.ty).unwrap_or("");
                match ty {
                    "text" => {
                        let t = field_str(&b.text).unwrap_or("");
                        if !t.trim().is_empty() {
                            blocks.push(Block::Text(t.to_string()));
                        }
                    }
                    "thinking" => blocks.push(Block::Thinking(
                        field_str(&b.thinking).unwrap_or("").to_string(),
                    )),
                    "redacted_thinking" => blocks.push(Block::Thinking(String::new())),
                    "tool_use" | "server_tool_use" => blocks.push(Block::ToolCall(ToolCall {
                        id: field_str(&b.id).map(str::to_string),
                        name: field_str(&b.name).unwrap_or("?").to_string(),
                        input: opts.clip_input(b.input.unwrap_or(Value::Null)),
                    })),
                    "image" => blocks.push(Block::Image),
                    // Server-side tools answer inside the reply itself.
                    t if t.ends_with("_tool_result") => {
                        let (output, clipped_lines) = opts.clip(result_text(b.content.as_ref()));
                        blocks.push(Block::ToolResult(ToolResult {
                            call_id: field_str(&b.tool_use_id).map(str::to_string),
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
        id: field_str(&id).map(str::to_string),
        blocks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::scan::parse_line;

    fn row(line: &str) -> Row {
        classify(
            RawRow::parse(line).unwrap(),
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
    fn rows_read_as_value_reads_them() {
        let mut lines: Vec<String> = [
            r#"{"type":"user","message":{"role":"user","content":"hello"}}"#,
            r#"{"type":"user","message":{"role":5,"content":"hi"}}"#,
            r#"{"type":"user","message":"hi"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":5},"x",1]}}"#,
            r#"{"type":"user","isSidechain":true,"message":{"role":"user","content":"hi"},"isSidechain":false}"#,
            r#"{"type":"user","message":{"role":"user","content":"hi"},"type":"assistant"}"#,
            r#"{"ty\u0070e":"user","cwd":"/a\"b","message":{"role":"user","content":"hi"}}"#,
            r#"{"type":"user","cwd":7,"isSidechain":"yes"}"#,
            r#"["type","user"]"#,
            r#""user""#,
        ]
        .map(String::from)
        .to_vec();
        let store =
            crate::transcript::testgen::claude(&crate::transcript::testgen::Shape::new(40, 3));
        lines.extend(String::from_utf8_lossy(&store).lines().map(String::from));
        for l in &lines {
            let raw = RawRow::parse(l);
            let Ok(v) = parse_line(l.as_bytes()) else {
                assert!(raw.is_err(), "{l}");
                continue;
            };
            let raw = raw.unwrap_or_else(|e| panic!("not read: {l}: {e}"));
            assert_eq!(
                raw.sidechain(),
                v.get("isSidechain").and_then(Value::as_bool)
            );
            assert_eq!(raw.cwd(), v.get("cwd").and_then(Value::as_str), "{l}");
        }
        // Not JSON as `Value` reads it: refused, never read otherwise.
        for bad in [
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e999}"#,
            r#"{"a":1}x"#,
            "{\"a\":\"\u{1}\"}",
            r#"{"message":{"content":[{"input":{"a":1e999}}]}}"#,
        ] {
            assert!(parse_line(bad.as_bytes()).is_err(), "{bad}");
            assert!(RawRow::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn odd_rows_read_as_before() {
        // A message that is not an object: an empty reply, not a prompt.
        assert_eq!(
            row(r#"{"type":"assistant","message":null}"#),
            Row::Message(Message {
                role: Role::Assistant,
                id: None,
                blocks: vec![]
            })
        );
        assert_eq!(row(r#"{"type":"assistant"}"#), Row::Skip);
        assert_eq!(row(r#"{"type":"user","message":[1]}"#), Row::Skip);
        // Tool output that is neither text nor blocks is shown as JSON.
        let odd = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":{"b":1,"a":[2]}}]}}"#;
        let Row::Message(m) = row(odd) else {
            panic!("not a message")
        };
        assert_eq!(
            m.blocks,
            vec![Block::ToolResult(ToolResult {
                call_id: Some("t".into()),
                output: r#"{"a":[2],"b":1}"#.into(),
                is_error: true,
                clipped_lines: 0,
            })]
        );
        let call = r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","name":"Bash","input":{"command":"ls"},"id":"c"},{"type":"image","source":{"data":"AAAA"}},{"type":"web_search_tool_result","tool_use_id":"c","content":[{"title":"T","url":"u"}]}]}}"#;
        let Row::Message(m) = row(call) else {
            panic!("not a message")
        };
        assert_eq!(m.id.as_deref(), Some("m"));
        assert_eq!(
            m.blocks,
            vec![
                Block::ToolCall(ToolCall {
                    id: Some("c".into()),
                    name: "Bash".into(),
                    input: serde_json::json!({"command": "ls"}),
                }),
                Block::Image,
                Block::ToolResult(ToolResult {
                    call_id: Some("c".into()),
                    output: "T — u".into(),
                    is_error: false,
                    clipped_lines: 0,
                }),
            ]
        );
    }

    #[test]
    fn turns_only_keeps_what_starts_a_turn() {
        let opts = ParseOptions {
            turns_only: true,
            ..ParseOptions::default()
        };
        let read = |l: &str| classify(RawRow::parse(l).unwrap(), false, &opts);
        let empty = Row::Prompt(Message::new(Role::User, Vec::new()));
        for l in [
            r#"{"type":"user","message":{"role":"user","content":"hello"}}"#,
            r#"{"type":"user","message":{"role":"user","content":"<bash-input>ls</bash-input>"}}"#,
            r#"{"type":"system","subtype":"local_command","content":"<command-name>/model</command-name>"}"#,
        ] {
            assert!(
                matches!(row(l), Row::Prompt(m) if !m.blocks.is_empty()),
                "{l}"
            );
            assert_eq!(read(l), empty, "{l}");
        }
        let out = r#"{"type":"user","message":{"role":"user","content":"<local-command-stdout>done</local-command-stdout>"}}"#;
        assert!(matches!(row(out), Row::Message(_)));
        assert_eq!(read(out), Row::Skip);
        let t = r#"{"type":"custom-title","customTitle":"T"}"#;
        assert_eq!(read(t), Row::Title(TitleKind::Custom, "T".into()));
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
            let c = row(l);
            let keeps = matches!(c, Row::Prompt(_) | Row::Title(..));
            if keeps {
                assert_eq!(
                    prefilter(l.as_bytes(), Some(false), true, &mut SeenRun::default()),
                    Pre::Parse,
                    "{l}"
                );
            }
        }
        assert!(matches!(
            prefilter(lines[1].as_bytes(), None, true, &mut SeenRun::default()),
            Pre::Reject(_)
        ));
        assert!(matches!(
            prefilter(lines[2].as_bytes(), None, true, &mut SeenRun::default()),
            Pre::Reject(_)
        ));
        assert!(matches!(
            prefilter(lines[3].as_bytes(), None, true, &mut SeenRun::default()),
            Pre::Reject(_)
        ));
        assert!(matches!(
            prefilter(
                lines[6].as_bytes(),
                Some(false),
                true,
                &mut SeenRun::default()
            ),
            Pre::Reject(_)
        ));
    }
}
