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
use super::scan::{scalars_give, unescape, Field, Key, Skim, Valid, ValidVisitor};

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

/// What the index needs from a row the prefilter let through, read without
/// building a `Value`: [`RowFacts::read`] succeeds exactly on the lines
/// `parse_line` reads without error, and [`RowFacts::outcome`] agrees with
/// [`classify`] on whether the row is a prompt or a title.
#[derive(Debug, Default)]
pub(crate) struct RowFacts<'a> {
    ty: Option<Field<'a>>,
    sidechain: Option<Field<'a>>,
    is_meta: Option<Field<'a>>,
    is_compact_summary: Option<Field<'a>>,
    cwd: Option<Field<'a>>,
    subtype: Option<Field<'a>>,
    content: Option<Field<'a>>,
    summary: Option<Field<'a>>,
    custom_title: Option<Field<'a>>,
    ai_title: Option<Field<'a>>,
    message: Option<MessageFacts<'a>>,
}

/// What the index does with a row.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    Prompt,
    Title(TitleKind, String),
    Other,
}

fn field_str<'b>(f: &'b Option<Field<'_>>) -> Option<&'b str> {
    f.as_ref().and_then(Field::as_str)
}

fn field_bool(f: &Option<Field<'_>>) -> Option<bool> {
    f.as_ref().and_then(Field::as_bool)
}

impl<'a> RowFacts<'a> {
    /// Reads one line; `None` when `parse_line` would not read it as is
    /// (not JSON, or bytes that are not UTF-8).
    pub fn read(line: &'a [u8]) -> Option<Self> {
        // One check of the whole line instead of one per string.
        let text = std::str::from_utf8(line).ok()?;
        serde_json::from_str(text).ok()
    }

    /// The row's `isSidechain`, if a boolean.
    pub fn sidechain(&self) -> Option<bool> {
        field_bool(&self.sidechain)
    }

    /// The row's `cwd`, if a string.
    pub fn cwd(&self) -> Option<&str> {
        field_str(&self.cwd)
    }

    /// As [`classify`] with `sidechain_mode`, cut down to what the index keeps.
    pub fn outcome(&self, sidechain_mode: bool) -> Outcome {
        let ty = field_str(&self.ty).unwrap_or("");
        let title = |f: &Option<Field<'_>>, kind| match field_str(f).map(str::trim) {
            Some(t) if !t.is_empty() => Outcome::Title(kind, t.to_string()),
            _ => Outcome::Other,
        };
        match ty {
            "summary" => return title(&self.summary, TitleKind::Summary),
            "custom-title" => return title(&self.custom_title, TitleKind::Custom),
            "ai-title" => return title(&self.ai_title, TitleKind::Ai),
            "user" | "system" => {}
            _ => return Outcome::Other,
        }
        if self.sidechain().is_some_and(|side| side != sidechain_mode) {
            return Outcome::Other;
        }
        let prompt = if ty == "user" {
            self.user_is_prompt()
        } else {
            // A local command is typed when it is wrapped (see `system_row`).
            field_str(&self.subtype) == Some("local_command")
                && field_str(&self.content).is_some_and(|text| {
                    text_kind(text).is_prompt() && text.trim_start().starts_with('<')
                })
        };
        if prompt {
            Outcome::Prompt
        } else {
            Outcome::Other
        }
    }

    /// As [`user_row`]: whether it returns a prompt.
    fn user_is_prompt(&self) -> bool {
        if field_bool(&self.is_compact_summary) == Some(true)
            || field_bool(&self.is_meta) == Some(true)
        {
            return false;
        }
        let Some(MessageFacts::Object { role, content }) = &self.message else {
            return false;
        };
        if field_str(role).is_some_and(|r| r != "user") {
            return false;
        }
        match content {
            Some(Content::Str(s)) => text_kind(s).is_prompt(),
            Some(Content::Blocks(b)) => {
                if b.first_is_result {
                    return false;
                }
                // As `user_blocks`: one text block reads like a string.
                match (b.kept, &b.first_kept) {
                    (0, _) => false,
                    (1, Some(Kept::Text(t))) => text_kind(t).is_prompt(),
                    _ => true,
                }
            }
            Some(Content::Other) | None => false,
        }
    }
}

impl<'de> Deserialize<'de> for RowFacts<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RowVisitor)
    }
}

struct RowVisitor;

impl<'de> Visitor<'de> for RowVisitor {
    type Value = RowFacts<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<RowFacts<'de>, A::Error> {
        let mut r = RowFacts::default();
        // A repeated key: the last one counts, as in a `Value`.
        while let Some(Key(k)) = a.next_key()? {
            let slot = match &*k {
                "type" => &mut r.ty,
                "isSidechain" => &mut r.sidechain,
                "isMeta" => &mut r.is_meta,
                "isCompactSummary" => &mut r.is_compact_summary,
                "cwd" => &mut r.cwd,
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
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<RowFacts<'de>, A::Error> {
        while a.next_element::<Valid>()?.is_some() {}
        Ok(RowFacts::default())
    }
    scalars_give!(RowFacts<'de>, RowFacts::default());
}

/// A row's `message`.
#[derive(Debug)]
enum MessageFacts<'a> {
    Object {
        role: Option<Field<'a>>,
        content: Option<Content<'a>>,
    },
    NotObject,
}

impl<'de> Deserialize<'de> for MessageFacts<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MessageVisitor)
    }
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = MessageFacts<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<MessageFacts<'de>, A::Error> {
        let (mut role, mut content) = (None, None);
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "role" => role = Some(a.next_value()?),
                "content" => content = Some(a.next_value()?),
                _ => {
                    a.next_value::<Valid>()?;
                }
            }
        }
        Ok(MessageFacts::Object { role, content })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<MessageFacts<'de>, A::Error> {
        while a.next_element::<Valid>()?.is_some() {}
        Ok(MessageFacts::NotObject)
    }
    scalars_give!(MessageFacts<'de>, MessageFacts::NotObject);
}

/// A user message's `content`.
#[derive(Debug)]
enum Content<'a> {
    Str(Cow<'a, str>),
    Blocks(BlockSummary<'a>),
    Other,
}

/// What `user_row` and `user_blocks` look at in a list of blocks.
#[derive(Debug, Default)]
struct BlockSummary<'a> {
    first_is_result: bool,
    /// Blocks `user_blocks` keeps, and the first of them.
    kept: usize,
    first_kept: Option<Kept<'a>>,
}

#[derive(Debug)]
enum Kept<'a> {
    Text(Cow<'a, str>),
    Image,
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
        let mut sum = BlockSummary::default();
        let mut first = true;
        while let Some(b) = a.next_element::<BlockFacts>()? {
            let ty = field_str(&b.ty);
            if first {
                sum.first_is_result = ty == Some("tool_result");
                first = false;
            }
            let kept = match ty {
                Some("text") => {
                    let text = field_str(&b.text).unwrap_or("");
                    if is_injected(text) || text.trim().is_empty() {
                        continue;
                    }
                    match b.text {
                        Some(Field::Str(t)) => Kept::Text(t),
                        _ => Kept::Text(Cow::Borrowed("")),
                    }
                }
                Some("image") => Kept::Image,
                _ => continue,
            };
            sum.kept += 1;
            if sum.first_kept.is_none() {
                sum.first_kept = Some(kept);
            }
        }
        Ok(Content::Blocks(sum))
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

/// One block of a user message: its `type` and `text`.
#[derive(Debug, Default)]
struct BlockFacts<'a> {
    ty: Option<Field<'a>>,
    text: Option<Field<'a>>,
}

impl<'de> Deserialize<'de> for BlockFacts<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(BlockVisitor)
    }
}

struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = BlockFacts<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<BlockFacts<'de>, A::Error> {
        let mut b = BlockFacts::default();
        while let Some(Key(k)) = a.next_key()? {
            match &*k {
                "type" => b.ty = Some(a.next_value()?),
                "text" => b.text = Some(a.next_value()?),
                _ => {
                    a.next_value::<Valid>()?;
                }
            }
        }
        Ok(b)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<BlockFacts<'de>, A::Error> {
        while a.next_element::<Valid>()?.is_some() {}
        Ok(BlockFacts::default())
    }
    scalars_give!(BlockFacts<'de>, BlockFacts::default());
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
    match text_kind(s) {
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

    /// What the index keeps of `classify`.
    fn kept(r: Row) -> Outcome {
        match r {
            Row::Prompt(_) => Outcome::Prompt,
            Row::Title(k, t) => Outcome::Title(k, t),
            _ => Outcome::Other,
        }
    }

    #[test]
    fn row_facts_agree_with_classify() {
        let mut lines: Vec<String> = [
            r#"{"type":"user","message":{"role":"user","content":"hello"}}"#,
            r#"{"type":"user","message":{"role":"user","content":"  \n "}}"#,
            r#"{"type":"user","message":{"role":"user","content":"<command-message>m</command-message>"}}"#,
            r#"{"type":"user","message":{"role":"user","content":"<command-args>a</command-args><command-name>x</command-name>"}}"#,
            r#"{"type":"user","message":{"role":"user","content":"<bash-stdout>o</bash-stdout>"}}"#,
            r#"{"type":"user","message":{"role":"user","content":"<system-reminder>r</system-reminder>"}}"#,
            r#"{"type":"user","message":{"role":"user","content":"[Request interrupted by user]"}}"#,
            r#"{"type":"user","message":{"role":"assistant","content":"hi"}}"#,
            r#"{"type":"user","message":{"role":5,"content":"hi"}}"#,
            r#"{"type":"user","message":"hi"}"#,
            r#"{"type":"user","message":{"role":"user","content":[]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"image"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":" "},{"type":"text","text":"<command-name>x</command-name>"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"image"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":5},"x",1]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result"},{"type":"text","text":"a"}]}}"#,
            r#"{"type":"user","isMeta":"yes","message":{"role":"user","content":"hi"}}"#,
            r#"{"type":"user","isSidechain":true,"message":{"role":"user","content":"hi"},"isSidechain":false}"#,
            r#"{"type":"user","message":{"role":"user","content":"hi"},"type":"assistant"}"#,
            r#"{"ty\u0070e":"user","message":{"role":"user","content":"hi"}}"#,
            r#"{"type":"user","message":{"role":"user","content":"a\"b\u00e9"}}"#,
            r#"{"type":"system","subtype":"local_command","content":"Set model"}"#,
            r#"{"type":"system","subtype":"local_command","content":" <bash-input>ls</bash-input>"}"#,
            r#"{"type":"summary","summary":"  S  "}"#,
            r#"{"type":"summary","summary":"  "}"#,
            r#"{"type":"ai-title","aiTitle":"A","customTitle":"C"}"#,
            r#"{"type":"custom-title","customTitle":7}"#,
            r#"["type","user"]"#,
            r#""user""#,
        ]
        .map(String::from)
        .to_vec();
        let store =
            crate::transcript::testgen::claude(&crate::transcript::testgen::Shape::new(40, 3));
        lines.extend(String::from_utf8_lossy(&store).lines().map(String::from));
        for l in &lines {
            let facts = RowFacts::read(l.as_bytes());
            let Ok(v) = parse_line(l.as_bytes()) else {
                assert!(facts.is_none(), "{l}");
                continue;
            };
            let facts = facts.unwrap_or_else(|| panic!("not read: {l}"));
            assert_eq!(
                facts.sidechain(),
                v.get("isSidechain").and_then(Value::as_bool)
            );
            assert_eq!(facts.cwd(), v.get("cwd").and_then(Value::as_str));
            for mode in [false, true] {
                let want = kept(classify(&v, mode, &ParseOptions::default()));
                assert_eq!(facts.outcome(mode), want, "{l} (sidechain mode {mode})");
            }
        }
        // Not JSON as `Value` reads it: refused, never read otherwise.
        for bad in [
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e999}"#,
            r#"{"a":1}x"#,
            "{\"a\":\"\u{1}\"}",
        ] {
            assert!(parse_line(bad.as_bytes()).is_err(), "{bad}");
            assert!(RowFacts::read(bad.as_bytes()).is_none(), "{bad}");
        }
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
