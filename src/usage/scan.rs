//! Reads the requests an engine's store file records, from where the last
//! read stopped: a file that grows is read only for its new lines, one that
//! was replaced or cut is read again. Every buffer is capped: a line longer
//! than [`MAX_LINE`] is skipped.

use crate::transcript::StoreKind;
use serde::Deserialize;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

/// The longest line read; a longer one is skipped (no usage row is near it).
pub const MAX_LINE: usize = 16 << 20;
/// Bytes read at a time.
const CHUNK: usize = 256 << 10;

/// Tokens of each kind. `reasoning` is part of `output` (as the APIs bill
/// it) and shown apart where the agent records it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    /// The part of `cache_write` kept an hour (priced apart).
    pub cache_write_1h: u64,
    pub cache_read: u64,
    pub reasoning: u64,
}

impl Tokens {
    /// Every token billed: input, output and both cache kinds.
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_write)
            .saturating_add(self.cache_read)
    }

    pub fn add(&mut self, other: &Tokens) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.cache_write_1h = self.cache_write_1h.saturating_add(other.cache_write_1h);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.reasoning = self.reasoning.saturating_add(other.reasoning);
    }
}

/// One request to a model, as the store recorded it: 32 bytes, as a
/// hundred thousand conversations hold millions of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Days since the epoch (UTC) of the row that recorded it.
    pub day: u32,
    /// The model's number in [`Models`].
    pub model: u32,
    /// Input, output, cache write, its hour part, cache read, reasoning
    /// (a request's counts fit; larger ones are held at the most).
    counts: [u32; 6],
}

impl Request {
    pub fn new(day: u32, model: u32, t: &Tokens) -> Request {
        let c = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Request {
            day,
            model,
            counts: [
                c(t.input),
                c(t.output),
                c(t.cache_write),
                c(t.cache_write_1h),
                c(t.cache_read),
                c(t.reasoning),
            ],
        }
    }

    pub fn tokens(&self) -> Tokens {
        let [input, output, cache_write, cache_write_1h, cache_read, reasoning] =
            self.counts.map(u64::from);
        Tokens {
            input,
            output,
            cache_write,
            cache_write_1h,
            cache_read,
            reasoning,
        }
    }
}

/// Requests by id, sorted by id: an id names one request however many rows
/// (or files) repeat it.
pub type RequestList = Arc<[(u64, Request)]>;

/// The models' names, each numbered once: requests hold the number.
#[derive(Debug, Default)]
pub struct Models {
    index: HashMap<Box<str>, u32>,
    names: Vec<Arc<str>>,
}

/// More models than any store names: past it, a name is `unknown`.
const MAX_MODELS: usize = 65_536;

impl Models {
    /// The number of `name` (0 is the empty name: no model recorded).
    pub fn get(&mut self, name: &str) -> u32 {
        if self.names.is_empty() {
            self.names.push(Arc::from(""));
            self.index.insert("".into(), 0);
        }
        if let Some(n) = self.index.get(name) {
            return *n;
        }
        if self.names.len() >= MAX_MODELS {
            return 0;
        }
        let n = self.names.len() as u32;
        self.names.push(Arc::from(name));
        self.index.insert(name.into(), n);
        n
    }

    /// Every name, by number.
    pub fn names(&self) -> &[Arc<str>] {
        &self.names
    }
}

/// What a Codex rollout's earlier lines said that later ones need.
#[derive(Debug, Default, Clone)]
struct CodexCarry {
    model: Option<u32>,
    total: Option<CodexTokens>,
    count: u64,
}

/// One store file, read up to `offset`.
#[derive(Debug)]
pub struct FileScan {
    kind: StoreKind,
    /// The file read (device, inode): another one is read from its start.
    identity: (u64, u64),
    /// The end of the last whole line read.
    offset: u64,
    /// The size and mtime when last read: unchanged, nothing to read.
    seen: (u64, i64, i64),
    codex: Option<Box<CodexCarry>>,
    requests: RequestList,
}

impl FileScan {
    pub fn new(kind: StoreKind) -> FileScan {
        FileScan {
            kind,
            identity: (0, 0),
            offset: 0,
            seen: (u64::MAX, 0, 0),
            codex: None,
            requests: Arc::from(Vec::new()),
        }
    }

    pub fn requests(&self) -> &RequestList {
        &self.requests
    }

    /// Reads what was added since the last read. `Ok(true)` when the
    /// requests changed.
    pub fn read(&mut self, path: &Path, models: &mut Models) -> std::io::Result<bool> {
        let mut file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        let seen = (meta.len(), meta.mtime(), meta.mtime_nsec());
        if seen == self.seen && (meta.dev(), meta.ino()) == self.identity {
            return Ok(false);
        }
        let compressed = crate::transcript::is_compressed(path);
        let fallback_day = (meta.mtime().max(0) / 86_400) as u32;
        let again =
            (meta.dev(), meta.ino()) != self.identity || meta.len() < self.offset || compressed;
        if again {
            self.offset = 0;
            self.codex = None;
            self.requests = Arc::from(Vec::new());
        }
        let mut added: HashMap<u64, Request> = HashMap::new();
        let mut feed = Feed {
            kind: self.kind,
            models,
            old: &self.requests,
            added: &mut added,
            codex: self.codex.take().map(|b| *b).unwrap_or_default(),
            fallback_day,
        };
        if compressed {
            let decoder = zstd::stream::read::Decoder::new(file)?;
            // A finished rollout is capped as a decoded copy is.
            let limited = decoder.take(crate::catalog::MAX_DECODED_BYTES);
            read_lines(limited, u64::MAX, |line| feed.line(line))?;
        } else {
            file.seek(SeekFrom::Start(self.offset))?;
            let wanted = meta.len() - self.offset;
            self.offset += read_lines(file.take(wanted), wanted, |line| feed.line(line))?;
        }
        let codex = feed.codex;
        if self.kind == StoreKind::Codex {
            self.codex = Some(Box::new(codex));
        }
        self.identity = (meta.dev(), meta.ino());
        self.seen = seen;
        if added.is_empty() {
            // Read again from the start: it changed if it had requests before.
            return Ok(again && !self.requests.is_empty());
        }
        // The earlier requests no new row replaced, and the new ones.
        let mut merged: Vec<(u64, Request)> = self
            .requests
            .iter()
            .filter(|(id, _)| !added.contains_key(id))
            .cloned()
            .collect();
        merged.extend(added);
        merged.sort_unstable_by_key(|(id, _)| *id);
        self.requests = Arc::from(merged);
        Ok(true)
    }
}

/// Calls `line` with each whole line of `reader` (at most `limit` bytes);
/// returns how many bytes the whole lines took. Lines past [`MAX_LINE`]
/// are skipped, as is a last line without its newline (it may be half
/// written).
fn read_lines(
    mut reader: impl Read,
    limit: u64,
    mut line: impl FnMut(&[u8]),
) -> std::io::Result<u64> {
    let mut chunk = vec![0u8; CHUNK];
    // The line begun in an earlier chunk (empty while `skipping` it).
    let mut partial: Vec<u8> = Vec::new();
    let mut partial_len = 0u64;
    let mut skipping = false;
    let mut consumed = 0u64;
    let mut read_total = 0u64;
    while read_total < limit {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        read_total += n as u64;
        let mut rest = &chunk[..n];
        while let Some(at) = memchr::memchr(b'\n', rest) {
            if !skipping {
                if partial.is_empty() {
                    line(&rest[..at]);
                } else {
                    partial.extend_from_slice(&rest[..at]);
                    line(&partial);
                }
            }
            consumed += partial_len + at as u64 + 1;
            partial.clear();
            partial_len = 0;
            skipping = false;
            rest = &rest[at + 1..];
        }
        partial_len += rest.len() as u64;
        if !skipping {
            if partial.len() + rest.len() > MAX_LINE {
                skipping = true;
                partial = Vec::new();
            } else {
                partial.extend_from_slice(rest);
            }
        }
    }
    Ok(consumed)
}

/// Turns one file's lines into requests.
struct Feed<'a> {
    kind: StoreKind,
    models: &'a mut Models,
    /// What earlier reads found, sorted by id.
    old: &'a [(u64, Request)],
    /// What this read found that differs from them.
    added: &'a mut HashMap<u64, Request>,
    codex: CodexCarry,
    fallback_day: u32,
}

fn hash_of(parts: &[&str]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update(&[0]);
    }
    h.digest()
}

/// The UTC day of an RFC 3339 time.
fn day_of(time: Option<&str>) -> Option<u32> {
    let t: jiff::Timestamp = time?.parse().ok()?;
    u32::try_from(t.as_second().div_euclid(86_400)).ok()
}

#[derive(Deserialize)]
struct ClaudeRow {
    timestamp: Option<String>,
    #[serde(rename = "requestId")]
    request_id: Option<String>,
    uuid: Option<String>,
    message: Option<ClaudeMessage>,
}

#[derive(Deserialize)]
struct ClaudeMessage {
    id: Option<String>,
    model: Option<String>,
    usage: Option<ClaudeUsage>,
}

#[derive(Deserialize)]
struct ClaudeUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    cache_creation: Option<ClaudeCacheWrites>,
}

#[derive(Deserialize)]
struct ClaudeCacheWrites {
    #[serde(default)]
    ephemeral_1h_input_tokens: u64,
}

#[derive(Deserialize)]
struct CodexRow {
    #[serde(rename = "type")]
    kind: Option<String>,
    payload: Option<CodexPayload>,
}

#[derive(Deserialize)]
struct CodexPayload {
    #[serde(rename = "type")]
    kind: Option<String>,
    model: Option<String>,
    info: Option<CodexInfo>,
}

#[derive(Deserialize)]
struct CodexInfo {
    total_token_usage: Option<CodexTokens>,
    last_token_usage: Option<CodexTokens>,
}

#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
struct CodexTokens {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cached_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    reasoning_output_tokens: u64,
}

impl CodexTokens {
    fn minus(&self, earlier: &CodexTokens) -> CodexTokens {
        CodexTokens {
            input_tokens: self.input_tokens.saturating_sub(earlier.input_tokens),
            cached_input_tokens: self
                .cached_input_tokens
                .saturating_sub(earlier.cached_input_tokens),
            output_tokens: self.output_tokens.saturating_sub(earlier.output_tokens),
            reasoning_output_tokens: self
                .reasoning_output_tokens
                .saturating_sub(earlier.reasoning_output_tokens),
        }
    }
}

#[derive(Deserialize)]
struct GeminiRow {
    id: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    timestamp: Option<String>,
    model: Option<String>,
    tokens: Option<GeminiTokens>,
}

#[derive(Deserialize)]
struct GeminiTokens {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    cached: u64,
    #[serde(default)]
    thoughts: u64,
    #[serde(default)]
    tool: u64,
}

#[derive(Deserialize)]
struct OpencodeRow {
    id: Option<String>,
    timestamp: Option<String>,
    model: Option<String>,
    tokens: Option<OpencodeTokens>,
}

#[derive(Deserialize)]
struct OpencodeTokens {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    reasoning: u64,
    cache: Option<OpencodeCache>,
}

#[derive(Deserialize, Default)]
struct OpencodeCache {
    #[serde(default)]
    read: u64,
    #[serde(default)]
    write: u64,
}

impl Feed<'_> {
    fn line(&mut self, line: &[u8]) {
        match self.kind {
            StoreKind::Claude => self.claude(line),
            StoreKind::Codex => self.codex(line),
            StoreKind::Gemini => self.gemini(line),
            StoreKind::Opencode => self.opencode(line),
        }
    }

    /// An `assistant` line of sessionfs's mirror of opencode's store, with
    /// the message's `model` and `tokens` (`input` without the cache,
    /// `output` without `reasoning`, `cache {read, write}`): one request per
    /// message (opencode makes one per step of a turn).
    fn opencode(&mut self, line: &[u8]) {
        if !line.starts_with(b"{\"type\":\"assistant\"") {
            return;
        }
        let Ok(row) = serde_json::from_slice::<OpencodeRow>(line) else {
            return;
        };
        let (Some(id), Some(t)) = (row.id.as_deref(), row.tokens) else {
            return;
        };
        let cache = t.cache.unwrap_or_default();
        let tokens = Tokens {
            input: t.input,
            output: t.output.saturating_add(t.reasoning),
            cache_write: cache.write,
            cache_write_1h: 0,
            cache_read: cache.read,
            reasoning: t.reasoning,
        };
        if tokens.total() == 0 {
            return;
        }
        self.replace_reply(id, row.timestamp.as_deref(), row.model.as_deref(), &tokens);
    }

    /// A row with `message.usage`: one request per message id and request
    /// id (Claude writes a reply's rows with the usage so far, and resumed
    /// and forked files copy earlier rows): the larger count is kept.
    fn claude(&mut self, line: &[u8]) {
        if memchr::memmem::find(line, b"\"usage\"").is_none() {
            return;
        }
        let Ok(row) = serde_json::from_slice::<ClaudeRow>(line) else {
            return;
        };
        let Some(message) = row.message else { return };
        let Some(usage) = message.usage else { return };
        let model = message.model.as_deref().unwrap_or("");
        // Written by Claude Code itself (an error shown as a reply): no request.
        if model == "<synthetic>" {
            return;
        }
        // A reply's rows share its message id (and request id, where the
        // API gave one).
        let id = match (&message.id, &row.request_id, &row.uuid) {
            (Some(m), r, _) => hash_of(&[m, r.as_deref().unwrap_or("")]),
            (None, _, Some(u)) => hash_of(&["row", u]),
            (None, _, None) => hash_of(&["line", &String::from_utf8_lossy(line)]),
        };
        let tokens = Tokens {
            input: usage.input_tokens,
            output: usage.output_tokens,
            cache_write: usage.cache_creation_input_tokens,
            cache_write_1h: usage
                .cache_creation
                .map_or(0, |c| c.ephemeral_1h_input_tokens)
                .min(usage.cache_creation_input_tokens),
            cache_read: usage.cache_read_input_tokens,
            reasoning: 0,
        };
        let day = day_of(row.timestamp.as_deref()).unwrap_or(self.fallback_day);
        let request = Request::new(day, self.models.get(model), &tokens);
        if self
            .current(id)
            .is_none_or(|old| old.tokens().total() < tokens.total())
        {
            self.added.insert(id, request);
        }
    }

    /// The request `id` as read so far.
    fn current(&self, id: u64) -> Option<&Request> {
        self.added.get(&id).or_else(|| {
            self.old
                .binary_search_by_key(&id, |(i, _)| *i)
                .ok()
                .map(|at| &self.old[at].1)
        })
    }

    /// Keeps `request` as `id`'s, unless it is what was read already.
    fn keep(&mut self, id: u64, request: Request) {
        if self.current(id) != Some(&request) {
            self.added.insert(id, request);
        }
    }

    /// `turn_context` names the model; each `token_count` whose total
    /// moved is one request (`last_token_usage`, else the total's change).
    /// Its input includes the cached part, counted here as cache read.
    fn codex(&mut self, line: &[u8]) {
        let is_count = memchr::memmem::find(line, b"\"token_count\"").is_some();
        if !is_count && memchr::memmem::find(line, b"\"turn_context\"").is_none() {
            return;
        }
        let Ok(row) = serde_json::from_slice::<CodexRow>(line) else {
            return;
        };
        let Some(payload) = row.payload else { return };
        if row.kind.as_deref() == Some("turn_context") {
            if let Some(model) = payload.model.as_deref().filter(|m| !m.is_empty()) {
                self.codex.model = Some(self.models.get(model));
            }
            return;
        }
        if row.kind.as_deref() != Some("event_msg")
            || payload.kind.as_deref() != Some("token_count")
        {
            return;
        }
        let Some(info) = payload.info else { return };
        let total = info.total_token_usage;
        if total.is_some() && total == self.codex.total {
            // The same count again (Codex repeats it with new rate limits).
            return;
        }
        let last = match (info.last_token_usage, total) {
            (Some(last), _) => last,
            (None, Some(total)) => total.minus(&self.codex.total.unwrap_or_default()),
            (None, None) => return,
        };
        if total.is_some() {
            self.codex.total = total;
        }
        self.codex.count += 1;
        let day = day_of(
            serde_json::from_slice::<Timestamped>(line)
                .ok()
                .and_then(|t| t.timestamp)
                .as_deref(),
        )
        .unwrap_or(self.fallback_day);
        let cached = last.cached_input_tokens.min(last.input_tokens);
        let tokens = Tokens {
            input: last.input_tokens - cached,
            output: last.output_tokens,
            cache_write: 0,
            cache_write_1h: 0,
            cache_read: cached,
            reasoning: last.reasoning_output_tokens,
        };
        let model = match self.codex.model {
            Some(m) => m,
            None => self.models.get(""),
        };
        let request = Request::new(day, model, &tokens);
        self.keep(self.codex.count, request);
    }

    /// A reply recorded by its message id: one written again replaces it.
    fn replace_reply(
        &mut self,
        id: &str,
        time: Option<&str>,
        model: Option<&str>,
        tokens: &Tokens,
    ) {
        let day = day_of(time).unwrap_or(self.fallback_day);
        let model = self.models.get(model.unwrap_or(""));
        self.keep(hash_of(&[id]), Request::new(day, model, tokens));
    }

    /// A `gemini` row with `tokens`: one request per message id (a row
    /// written again later replaces the earlier). Thoughts are billed as
    /// output; the cached part of the input is read from the cache.
    fn gemini(&mut self, line: &[u8]) {
        if memchr::memmem::find(line, b"\"tokens\"").is_none() {
            return;
        }
        let Ok(row) = serde_json::from_slice::<GeminiRow>(line) else {
            return;
        };
        if row.kind.as_deref() != Some("gemini") {
            return;
        }
        let (Some(id), Some(t)) = (row.id.as_deref(), row.tokens) else {
            return;
        };
        let cached = t.cached.min(t.input);
        let tokens = Tokens {
            input: (t.input - cached).saturating_add(t.tool),
            output: t.output.saturating_add(t.thoughts),
            cache_write: 0,
            cache_write_1h: 0,
            cache_read: cached,
            reasoning: t.thoughts,
        };
        self.replace_reply(id, row.timestamp.as_deref(), row.model.as_deref(), &tokens);
    }
}

#[derive(Deserialize)]
struct Timestamped {
    timestamp: Option<String>,
}

/// Merges request lists: an id in several keeps its larger count.
pub fn merge(lists: &[&RequestList]) -> RequestList {
    match lists {
        [] => Arc::from(Vec::new()),
        [one] => (*one).clone(),
        _ => {
            let mut all: Vec<(u64, Request)> =
                lists.iter().flat_map(|l| l.iter().cloned()).collect();
            all.sort_by(|a, b| {
                a.0.cmp(&b.0)
                    .then(b.1.tokens().total().cmp(&a.1.tokens().total()))
            });
            all.dedup_by_key(|(id, _)| *id);
            Arc::from(all)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn scan(kind: StoreKind, text: &str) -> (tempfile::NamedTempFile, FileScan) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let mut scan = FileScan::new(kind);
        scan.read(file.path(), &mut Models::default()).unwrap();
        (file, scan)
    }

    fn totals(scan: &FileScan) -> (usize, Tokens) {
        let mut t = Tokens::default();
        for (_, r) in scan.requests().iter() {
            t.add(&r.tokens());
        }
        (scan.requests().len(), t)
    }

    const CLAUDE_ROW: &str = r#"{"type":"assistant","timestamp":"2026-01-02T03:04:05Z","requestId":"req_1","message":{"id":"msg_1","model":"claude-sonnet-4-5","usage":{"input_tokens":10,"output_tokens":OUT,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000}}}"#;

    #[test]
    fn claude_counts_a_request_written_in_several_rows_once_with_its_largest_count() {
        let rows = [
            CLAUDE_ROW.replace("OUT", "1"),
            CLAUDE_ROW.replace("OUT", "7"),
            CLAUDE_ROW.replace("OUT", "3"),
            CLAUDE_ROW.replace("OUT", "5").replace("req_1", "req_2"),
            r#"{"type":"assistant","message":{"model":"<synthetic>","usage":{"input_tokens":0,"output_tokens":0}}}"#.into(),
            "not json at all".into(),
        ];
        let (_f, scan) = scan(StoreKind::Claude, &(rows.join("\n") + "\n"));
        let (n, t) = totals(&scan);
        assert_eq!(n, 2);
        assert_eq!(t.output, 12);
        assert_eq!(t.input, 20);
        let day = scan.requests()[0].1.day;
        assert_eq!(day, 20455, "2026-01-02 is day 20455");
    }

    #[test]
    fn a_growing_file_is_read_from_where_it_stopped_and_a_half_line_waits() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let row = CLAUDE_ROW.replace("OUT", "1");
        let second = row.replace("req_1", "req_9");
        write!(file, "{row}\n{}", &second[..20]).unwrap();
        let mut scan = FileScan::new(StoreKind::Claude);
        let mut models = Models::default();
        assert!(scan.read(file.path(), &mut models).unwrap());
        assert_eq!(scan.requests().len(), 1);
        writeln!(file, "{}", &second[20..]).unwrap();
        assert!(scan.read(file.path(), &mut models).unwrap());
        assert_eq!(scan.requests().len(), 2);
        assert!(!scan.read(file.path(), &mut models).unwrap());
        // A later row of the first reply, with a larger count, replaces it;
        // the same row again changes nothing.
        let larger = CLAUDE_ROW.replace("OUT", "50");
        writeln!(file, "{larger}").unwrap();
        assert!(scan.read(file.path(), &mut models).unwrap());
        writeln!(file, "{larger}").unwrap();
        assert!(!scan.read(file.path(), &mut models).unwrap());
        assert_eq!(totals(&scan).0, 2);
        assert_eq!(totals(&scan).1.output, 51);
    }

    #[test]
    fn codex_counts_each_moved_total_once_with_its_cached_input_apart() {
        let count = |total_in: u64, last_in: u64, cached: u64, out: u64| {
            format!(
                r#"{{"timestamp":"2026-05-11T08:27:22.767Z","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{total_in},"cached_input_tokens":0,"output_tokens":0,"reasoning_output_tokens":0}},"last_token_usage":{{"input_tokens":{last_in},"cached_input_tokens":{cached},"output_tokens":{out},"reasoning_output_tokens":2}}}}}}}}"#
            )
        };
        let rows = [
            r#"{"type":"turn_context","payload":{"model":"gpt-5.5"}}"#.to_string(),
            r#"{"type":"event_msg","payload":{"type":"token_count","info":null}}"#.into(),
            count(100, 100, 40, 5),
            count(100, 100, 40, 5),
            count(250, 150, 100, 7),
        ];
        let (_f, scan) = scan(StoreKind::Codex, &(rows.join("\n") + "\n"));
        let (n, t) = totals(&scan);
        assert_eq!(n, 2);
        assert_eq!(t.input, 60 + 50);
        assert_eq!(t.cache_read, 140);
        assert_eq!(t.output, 12);
        assert_eq!(t.reasoning, 4);
        assert_eq!(
            scan.requests()[0].1.model,
            1,
            "gpt-5.5, the first model named"
        );
    }

    #[test]
    fn gemini_counts_a_reply_written_again_once_with_thoughts_as_output() {
        let row = |out: u64| {
            format!(
                r#"{{"id":"m1","timestamp":"2026-05-01T00:00:00Z","type":"gemini","content":"x","model":"gemini-2.5-pro","tokens":{{"input":100,"output":{out},"cached":30,"thoughts":4,"tool":2,"total":0}}}}"#
            )
        };
        let rows = [
            r#"{"sessionId":"s","kind":"main"}"#.to_string(),
            r#"{"id":"u1","type":"user","content":"hi"}"#.into(),
            row(5),
            row(9),
        ];
        let (_f, scan) = scan(StoreKind::Gemini, &(rows.join("\n") + "\n"));
        let (n, t) = totals(&scan);
        assert_eq!(n, 1);
        assert_eq!(t.input, 72);
        assert_eq!(t.cache_read, 30);
        assert_eq!(t.output, 13);
        assert_eq!(t.reasoning, 4);
    }

    #[test]
    fn opencode_counts_each_answer_of_the_recorded_store_once() {
        let tmp = tempfile::tempdir().unwrap();
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real/opencode");
        let mirror = tmp.path().join("mirror");
        crate::catalog::opencode_mirror::sync_once(&fixture, &mirror, &tmp.path().join("s"));
        // `opencode run` with a bash call: two requests (the call, the
        // answer) of 100 in and 10 out each, as the stand-in reported.
        let path = mirror.join("sessions/ses_dc657275effe6U6t0ZcxDq3HFk.jsonl");
        let mut scan = FileScan::new(StoreKind::Opencode);
        let mut models = Models::default();
        scan.read(&path, &mut models).unwrap();
        let (n, t) = totals(&scan);
        assert_eq!(n, 2);
        assert_eq!(
            (t.input, t.output, t.cache_read, t.cache_write),
            (200, 20, 0, 0)
        );
        // Reasoning is billed as output; the cache apart.
        let row = r#"{"type":"assistant","id":"msg_1","timestamp":"2026-05-01T00:00:00Z","model":"m","tokens":{"input":50,"output":7,"reasoning":3,"cache":{"read":40,"write":2}},"parts":[]}"#;
        let (_f, scan) = self::scan(StoreKind::Opencode, &format!("{row}\n{row}\n"));
        let (n, t) = totals(&scan);
        assert_eq!(n, 1);
        assert_eq!(
            (t.input, t.output, t.reasoning, t.cache_read, t.cache_write),
            (50, 10, 3, 40, 2)
        );
    }

    #[test]
    fn a_line_past_the_cap_is_skipped_and_the_next_is_read() {
        let mut text = "x".repeat(MAX_LINE + 10);
        text.push('\n');
        text.push_str(&CLAUDE_ROW.replace("OUT", "1"));
        text.push('\n');
        let (_f, scan) = scan(StoreKind::Claude, &text);
        assert_eq!(scan.requests().len(), 1);
    }

    #[test]
    fn merged_lists_keep_one_request_per_id_with_the_larger_count() {
        let req = |out| {
            Request::new(
                1,
                1,
                &Tokens {
                    output: out,
                    ..Tokens::default()
                },
            )
        };
        let a: RequestList = Arc::from(vec![(1, req(5)), (2, req(1))]);
        let b: RequestList = Arc::from(vec![(1, req(9)), (3, req(1))]);
        let merged = merge(&[&a, &b]);
        assert_eq!(merged.len(), 3);
        assert_eq!(merged[0].1.tokens().output, 9);
    }
}
