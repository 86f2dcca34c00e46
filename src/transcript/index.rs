//! The turn index of one store file: the byte offset where each turn starts,
//! built by one scan and extended as the file grows.
//!
//! The scan finds line ends with `memchr` and looks only at the first
//! keys of each line; only a line that could be a typed prompt or a title is
//! read (see `claude::prefilter` and `claude::RawRow`). A line without
//! its newline yet is left for the next refresh. A long stretch of new bytes
//! is scanned in two halves on two threads and the halves joined.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use memchr::memchr;
use serde_json::Value;

use super::claude;
use super::codex;
use super::gemini;
use super::model::{Message, ParseOptions};
use super::opencode;
use super::scan::{
    is_blank, last_timestamp, line_text, parse_line, title_from_text, MAX_LINE_BYTES,
};
use super::store::{self, StoreKind};

const CHUNK: usize = 1 << 20;
/// From this many new bytes on, a scan is split over two threads.
const SPLIT_MIN: u64 = 8 << 20;
/// How far a Claude scan reads on one thread to learn the file's side
/// before splitting.
const SIDE_PROBE: u64 = 1 << 20;
/// A partial line this long is classified from its start, and if it cannot
/// matter, skipped to its end without being kept in memory.
const PREFIX: usize = 64 << 10;
/// How far back from the scanned end the last timestamp is looked for.
const TS_WINDOWS: [u64; 2] = [64 << 10, 1 << 20];
/// Bytes remembered at the start of the file and before the scanned end, to
/// notice a file replaced or rewritten in place.
const FINGERPRINT: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

/// What a store says about its session, gathered during the scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// Claude: the file's stem; Codex: `session_meta.payload.id`; Gemini:
    /// the header's `sessionId`.
    pub session_id: Option<String>,
    /// The working directory the agent ran in.
    pub cwd: Option<String>,
    /// The last `timestamp` written in the store (as written, RFC 3339),
    /// looked for in its last MiB.
    pub last_timestamp: Option<String>,
    /// Claude's `custom-title` (a rename by the person); the last one wins.
    pub custom_title: Option<String>,
    /// Claude's `ai-title`; the last one wins.
    pub ai_title: Option<String>,
    /// Claude's `summary` rows; the last one wins.
    pub summary: Option<String>,
    /// First line of the first prompt, at most 80 characters.
    pub first_prompt: Option<String>,
}

impl SessionInfo {
    /// The store's own title, else the first prompt.
    pub fn title(&self) -> Option<String> {
        self.custom_title
            .clone()
            .or_else(|| self.ai_title.clone())
            .or_else(|| self.summary.clone())
            .or_else(|| self.first_prompt.clone())
    }
}

/// What a refresh did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Nothing new since the last scan.
    Unchanged,
    /// New complete lines were scanned; `new_turns` turns started in them.
    Grew { new_turns: usize },
    /// The file was replaced, truncated or rewritten: scanned again from 0.
    Rebuilt,
}

/// Byte offsets of the turns of one store file, plus what is needed to
/// extend them: a few hundred bytes whatever the store's size, and 16 bytes
/// per turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnIndex {
    kind: StoreKind,
    /// Offset of each turn's first line.
    starts: Vec<u64>,
    /// 1-based line number of each turn's first line (for log messages).
    start_lines: Vec<u64>,
    /// Everything before this offset is complete lines, all scanned.
    scanned_to: u64,
    lines_scanned: u64,
    /// Whether the file is a subagent's own (all its rows are sidechain
    /// rows); decided by the first row that says.
    sidechain_mode: Option<bool>,
    info: SessionInfo,
    file: Option<FileId>,
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Length and change times of the file when last scanned: a file as
    /// long as then but changed since was rewritten in place.
    seen: Option<Stamp>,
    /// The last row written at a turn's end (Claude's `stop_hook_summary`
    /// or `turn_duration`, Codex's `task_complete`): how many turns the
    /// store had then, and the row's time.
    last_end: Option<(usize, u64)>,
    /// Longer lines are skipped unread (`scan::MAX_LINE_BYTES`).
    max_line: usize,
    /// Gemini: the id of the last prompt row (a row written again under its
    /// id does not start a turn).
    last_prompt_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Self {
        Stamp {
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

impl TurnIndex {
    /// An empty index; the first [`refresh`](Self::refresh) scans the file.
    pub fn new(kind: StoreKind) -> Self {
        TurnIndex {
            kind,
            starts: Vec::new(),
            start_lines: Vec::new(),
            scanned_to: 0,
            lines_scanned: 0,
            sidechain_mode: None,
            info: SessionInfo::default(),
            file: None,
            head: Vec::new(),
            tail: Vec::new(),
            seen: None,
            last_end: None,
            max_line: MAX_LINE_BYTES,
            last_prompt_id: None,
        }
    }

    /// The same index with lines over `max` bytes skipped (tests).
    pub fn with_max_line(self, max: usize) -> Self {
        TurnIndex {
            max_line: max,
            ..self
        }
    }

    /// Lines over this many bytes are skipped, here and in pages.
    pub(crate) fn max_line(&self) -> usize {
        self.max_line
    }

    /// Scans a store file once.
    #[cfg(test)]
    pub fn build(kind: StoreKind, path: &Path) -> io::Result<Self> {
        let mut idx = Self::new(kind);
        idx.refresh(path)?;
        Ok(idx)
    }

    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// Number of turns in the scanned part.
    pub fn turn_count(&self) -> usize {
        self.starts.len()
    }

    /// Byte offset where each turn starts (for tests: the fuzz tests check
    /// them through the crate's API).
    #[cfg(any(test, feature = "testgen"))]
    pub fn turn_offsets(&self) -> &[u64] {
        &self.starts
    }

    /// The store's last turn-end row, as (turns before it, its time in ms):
    /// it ends the last turn when the first equals
    /// [`turn_count`](Self::turn_count).
    pub fn last_turn_end(&self) -> Option<(usize, u64)> {
        self.last_end
    }

    /// End of the scanned part: every page reads below it.
    pub fn scanned_to(&self) -> u64 {
        self.scanned_to
    }

    /// What the store says about its session.
    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    /// The store's own title (Claude: `custom-title`, then `ai-title`, then
    /// `summary`), else the first prompt's first line.
    pub fn title(&self) -> Option<String> {
        self.info.title()
    }

    pub(crate) fn sidechain_mode(&self) -> Option<bool> {
        self.sidechain_mode
    }

    /// Byte range and first line number of turns `[first, first + count)`;
    /// the range of turn 0 starts at offset 0, so anything recorded before
    /// the first prompt belongs to it.
    pub(crate) fn turn_range(&self, first: usize, count: usize) -> (u64, u64, u64) {
        let (start, line) = if first == 0 {
            (0, 1)
        } else {
            (self.starts[first], self.start_lines[first])
        };
        let end = first
            .checked_add(count)
            .and_then(|e| self.starts.get(e))
            .copied()
            .unwrap_or(self.scanned_to);
        (start, end, line)
    }

    /// True if `file` is the file this index was built from.
    pub(crate) fn is_same_file(&self, file: &File) -> io::Result<bool> {
        let m = file.metadata()?;
        Ok(self.file.is_none_or(|id| {
            id == FileId {
                dev: m.dev(),
                ino: m.ino(),
            }
        }))
    }

    fn reset(&mut self) {
        *self = Self::new(self.kind).with_max_line(self.max_line);
    }

    /// Brings the index up to date with the file: scans what was appended,
    /// or everything again if the file was replaced (other inode), truncated
    /// (shorter than scanned) or rewritten (remembered bytes differ).
    pub fn refresh(&mut self, path: &Path) -> io::Result<Refresh> {
        self.refresh_with(path, SPLIT_MIN)
    }

    /// [`refresh`](Self::refresh), splitting the scan over two threads when
    /// at least `split_min` bytes are new.
    pub(crate) fn refresh_with(&mut self, path: &Path, split_min: u64) -> io::Result<Refresh> {
        let f = store::open_plain(path)?;
        let meta = f.metadata()?;
        let id = FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        };
        let len = meta.len();
        let stamp = Stamp::of(&meta);
        // Rewritten in place to the same length: the fingerprint sees only
        // its ends, the change times see the write.
        let rewritten = self.seen.is_some_and(|s| s.len == len && s != stamp);
        let mut rebuilt = false;
        if self.file.is_some()
            && (self.file != Some(id)
                || len < self.scanned_to
                || rewritten
                || !self.fingerprint_matches(&f)?)
        {
            self.reset();
            rebuilt = true;
        }
        if self.file.is_none() {
            self.file = Some(id);
            if self.kind == StoreKind::Claude {
                // The file name is the session id, also when resumed elsewhere.
                let stem = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let stem = stem.strip_suffix(".zst").unwrap_or(stem);
                let stem = stem.strip_suffix(".jsonl").unwrap_or(stem);
                self.info.session_id = Some(stem.to_string()).filter(|s| !s.is_empty());
            }
        }
        if len == self.scanned_to && !rebuilt {
            self.seen = Some(stamp);
            return Ok(Refresh::Unchanged);
        }
        let turns_before = self.starts.len();
        let scanned_before = self.scanned_to;
        let scanned = self.scan(&f, len, path, split_min).and_then(|nul| {
            // Zeros read while the file changed: a read racing a truncation
            // sees the dropped pages as zeros, so the scan may mix two
            // states of the file.
            if nul && Stamp::of(&f.metadata()?) != stamp {
                return Err(io::Error::from_raw_os_error(libc::ESTALE));
            }
            Ok(())
        });
        if let Err(e) = scanned {
            // Turns may have been recorded past `scanned_to`: start over next time.
            self.reset();
            return Err(e);
        }
        self.seen = Some(stamp);
        self.head = read_up_to(&f, 0, len.min(FINGERPRINT as u64) as usize)?;
        let tail_len = self.scanned_to.min(FINGERPRINT as u64);
        self.tail = read_up_to(&f, self.scanned_to - tail_len, tail_len as usize)?;
        self.info.last_timestamp = None;
        for w in TS_WINDOWS {
            let w = w.min(self.scanned_to);
            let bytes = read_up_to(&f, self.scanned_to - w, w as usize)?;
            self.info.last_timestamp = last_timestamp(&bytes);
            if self.info.last_timestamp.is_some() || w == self.scanned_to {
                break;
            }
        }
        Ok(if rebuilt {
            Refresh::Rebuilt
        } else if self.scanned_to == scanned_before {
            Refresh::Unchanged
        } else {
            Refresh::Grew {
                new_turns: self.starts.len() - turns_before,
            }
        })
    }

    fn fingerprint_matches(&self, f: &File) -> io::Result<bool> {
        let head = read_up_to(f, 0, self.head.len())?;
        let at = self.scanned_to - self.tail.len() as u64;
        let tail = read_up_to(f, at, self.tail.len())?;
        Ok(head == self.head && tail == self.tail)
    }

    /// Scans from `scanned_to` to the end of the file (`len` bytes when the
    /// scan starts), on two threads when `split_min` bytes or more are new.
    /// True if it read a NUL byte.
    fn scan(&mut self, f: &File, len: u64, path: &Path, split_min: u64) -> io::Result<bool> {
        let mut ctx = Ctx::new(path);
        if len.saturating_sub(self.scanned_to) >= split_min
            && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
        {
            if self.kind == StoreKind::Claude && self.sidechain_mode.is_none() {
                // The second half is read as of the file's side: learn it first.
                self.scan_range(f, Some(self.scanned_to + SIDE_PROBE), &mut ctx)?;
            }
            if self.kind == StoreKind::Codex || self.sidechain_mode.is_some() {
                let mid = self.scanned_to + len.saturating_sub(self.scanned_to) / 2;
                if let Some(split) = line_boundary(f, mid, len)? {
                    if self.scan_split(f, split, &mut ctx)? {
                        return Ok(ctx.nul);
                    }
                }
            }
        }
        self.scan_range(f, None, &mut ctx)?;
        Ok(ctx.nul)
    }

    /// Scans up to `split` (a line boundary) here and from it to the end on
    /// another thread, then joins the two. False if that could not be done
    /// (no thread, or the file changed under the scan): what is left is then
    /// still to scan, from `scanned_to`.
    fn scan_split(&mut self, f: &File, split: u64, ctx: &mut Ctx<'_>) -> io::Result<bool> {
        // The second part starts with what the first cannot change for it:
        // the side, and the cwd if already known.
        let mut part = TurnIndex {
            scanned_to: split,
            sidechain_mode: self.sidechain_mode,
            info: SessionInfo {
                cwd: self.info.cwd.clone(),
                ..SessionInfo::default()
            },
            ..TurnIndex::new(self.kind).with_max_line(self.max_line)
        };
        let path = ctx.path;
        let (mine, theirs) = std::thread::scope(|s| {
            let part = &mut part;
            let worker = std::thread::Builder::new().spawn_scoped(s, move || {
                let mut ctx = Ctx::new(path);
                // Line numbers are known only once the first part is counted.
                ctx.deferred = Some(Vec::new());
                let r = part.scan_range(f, None, &mut ctx);
                (r, ctx.deferred.unwrap_or_default(), ctx.nul)
            });
            let Ok(worker) = worker else {
                return (Ok(()), None);
            };
            let mine = self.scan_range(f, Some(split), ctx);
            let theirs = worker
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
            (mine, Some(theirs))
        });
        mine?;
        let Some((theirs, warnings, nul)) = theirs else {
            return Ok(false);
        };
        theirs?;
        ctx.nul |= nul;
        if self.scanned_to != split {
            return Ok(false);
        }
        let before = self.lines_scanned;
        for (line, e) in warnings {
            log::warn!("{}:{}: {e}", path.display(), before + line);
        }
        if let Some((turns, ms)) = part.last_end {
            self.last_end = Some((self.starts.len() + turns, ms));
        }
        self.starts.extend_from_slice(&part.starts);
        self.start_lines
            .extend(part.start_lines.iter().map(|l| before + l));
        self.lines_scanned += part.lines_scanned;
        self.scanned_to = part.scanned_to;
        if self.sidechain_mode.is_none() {
            self.sidechain_mode = part.sidechain_mode;
        }
        // As if scanned in one go: the first value found, or the last one.
        let (a, b) = (&mut self.info, part.info);
        a.session_id = a.session_id.take().or(b.session_id);
        a.cwd = a.cwd.take().or(b.cwd);
        a.first_prompt = a.first_prompt.take().or(b.first_prompt);
        a.custom_title = b.custom_title.or(a.custom_title.take());
        a.ai_title = b.ai_title.or(a.ai_title.take());
        a.summary = b.summary.or(a.summary.take());
        Ok(true)
    }

    /// Consumes the complete lines from `scanned_to` up to `end` (else to
    /// the end of the file); a line that goes past it is left for later.
    fn scan_range(&mut self, f: &File, end: Option<u64>, ctx: &mut Ctx<'_>) -> io::Result<()> {
        let mut r = RangeReader {
            f,
            pos: self.scanned_to,
            end,
        };
        // buf[..filled] is data; the rest stays initialised between reads, so
        // no read pays for zeroing its space.
        let mut buf: Vec<u8> = vec![0; CHUNK + PREFIX];
        let mut filled = 0usize;
        // File offset of buf[0].
        let mut buf_off = self.scanned_to;
        let mut line_start = self.scanned_to;
        // buf[..search_from] holds no newline of the current line.
        let mut search_from = 0usize;
        // The current line was judged from its start and is being skipped.
        let mut skipping = false;
        let mut prefix_checked = false;
        loop {
            while let Some(rel) = memchr(b'\n', &buf[search_from..filled]) {
                let nl = search_from + rel;
                self.lines_scanned += 1;
                if !skipping {
                    let ls = (line_start - buf_off) as usize;
                    if nl - ls > self.max_line {
                        self.too_long(self.lines_scanned, ctx);
                    } else {
                        self.line(&buf[ls..nl], line_start, ctx);
                    }
                }
                line_start = buf_off + nl as u64 + 1;
                search_from = nl + 1;
                skipping = false;
                prefix_checked = false;
            }
            if !skipping {
                let ls = (line_start - buf_off) as usize;
                buf.copy_within(ls..filled, 0);
                filled -= ls;
                buf_off = line_start;
                if !prefix_checked && filled >= PREFIX {
                    prefix_checked = true;
                    skipping = self.reject_prefix(&buf[..filled], ctx);
                }
                // One that matters but is too long to hold: skipped, as
                // the page that holds it says.
                if !skipping && filled > self.max_line {
                    skipping = true;
                    self.too_long(self.lines_scanned + 1, ctx);
                }
            }
            if skipping {
                buf_off += filled as u64;
                filled = 0;
            }
            search_from = filled;
            if buf.len() < filled + CHUNK {
                buf.resize(filled + CHUNK, 0);
            }
            let n = loop {
                match r.read(&mut buf[filled..filled + CHUNK]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            if n == 0 {
                break;
            }
            ctx.nul |= memchr(0, &buf[filled..filled + n]).is_some();
            filled += n;
        }
        self.scanned_to = line_start;
        Ok(())
    }

    /// Judges a long line from its first bytes; true if it cannot matter.
    fn reject_prefix(&mut self, prefix: &[u8], ctx: &mut Ctx<'_>) -> bool {
        match self.kind {
            StoreKind::Claude => {
                match claude::prefilter(
                    prefix,
                    self.sidechain_mode,
                    self.info.cwd.is_none(),
                    &mut ctx.seen,
                ) {
                    claude::Pre::Reject(info) => {
                        self.apply_claude_skim(info);
                        true
                    }
                    claude::Pre::Parse => false,
                }
            }
            StoreKind::Codex => match codex::prefilter(prefix) {
                codex::Pre::Reject => true,
                codex::Pre::Parse => false,
            },
            // A long Gemini row is an answer or a tool's output, or the
            // `$set` copy of the messages a resume writes: never a prompt.
            // A long opencode line is an answer: never a prompt or its end.
            StoreKind::Opencode => {
                !prefix.starts_with(b"{\"type\":\"user\"")
                    && !prefix.starts_with(b"{\"type\":\"session\"")
            }
            StoreKind::Gemini => {
                !prefix.starts_with(b"{\"id\"")
                    || memchr::memmem::find(prefix, b"\"type\":\"user\"").is_none()
            }
        }
    }

    fn apply_claude_skim(&mut self, info: claude::SkimInfo) {
        if self.sidechain_mode.is_none() {
            self.sidechain_mode = info.sidechain;
        }
        if self.info.cwd.is_none() {
            self.info.cwd = info.cwd;
        }
    }

    /// One complete line (without its newline) starting at `offset`.
    fn line(&mut self, line: &[u8], offset: u64, ctx: &mut Ctx<'_>) {
        if is_blank(line) {
            return;
        }
        match self.kind {
            StoreKind::Claude => self.claude_line(line, offset, ctx),
            StoreKind::Gemini => self.gemini_line(line, offset, ctx),
            StoreKind::Opencode => self.opencode_line(line, offset, ctx),
            StoreKind::Codex => {
                if codex::prefilter(line) == codex::Pre::Reject {
                    return;
                }
                let Some(v) = self.parse(line, ctx) else {
                    return;
                };
                if let Some(ms) = codex::turn_end_ms(&v) {
                    self.last_end = Some((self.starts.len(), ms));
                    return;
                }
                match codex::classify(&v, &ParseOptions::default()) {
                    codex::Row::Prompt(m) => self.push_turn(offset, &m),
                    codex::Row::Meta { id, cwd } => {
                        if self.info.session_id.is_none() {
                            self.info.session_id = id;
                        }
                        if self.info.cwd.is_none() {
                            self.info.cwd = cwd;
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn gemini_line(&mut self, line: &[u8], offset: u64, ctx: &mut Ctx<'_>) {
        let Some(v) = self.parse(line, ctx) else {
            return;
        };
        match gemini::classify(&v, &ParseOptions::default()) {
            // The prompt row written again under its id is the same turn.
            gemini::Row::Prompt(m) if m.id.is_some() && m.id == self.last_prompt_id => {}
            gemini::Row::Prompt(m) => {
                self.last_prompt_id.clone_from(&m.id);
                self.push_turn(offset, &m);
            }
            // Gemini writes no row of its own at a turn's end: an answer row
            // after the prompt says the turn is recorded.
            gemini::Row::Message(m) if m.role == crate::transcript::Role::Assistant => {
                let ms = v
                    .get("timestamp")
                    .and_then(Value::as_str)
                    .and_then(super::scan::timestamp_ms)
                    .unwrap_or(0);
                self.last_end = Some((self.starts.len(), ms));
            }
            gemini::Row::Meta { id, cwd, .. } => {
                if self.info.session_id.is_none() {
                    self.info.session_id = id;
                }
                if self.info.cwd.is_none() {
                    self.info.cwd = cwd;
                }
            }
            _ => {}
        }
    }

    fn opencode_line(&mut self, line: &[u8], offset: u64, ctx: &mut Ctx<'_>) {
        let Some(v) = self.parse(line, ctx) else {
            return;
        };
        if let Some(done) = opencode::turn_end(&v) {
            let ms = super::scan::timestamp_ms(done).unwrap_or(0);
            self.last_end = Some((self.starts.len(), ms));
            return;
        }
        let opts = ParseOptions {
            turns_only: true,
            ..ParseOptions::default()
        };
        match opencode::classify(&v, &opts) {
            opencode::Row::Prompt(m) => self.push_turn(offset, &m),
            opencode::Row::Meta { id, cwd, title, .. } => {
                if self.info.session_id.is_none() {
                    self.info.session_id = id;
                }
                if self.info.cwd.is_none() {
                    self.info.cwd = cwd;
                }
                if title.is_some() {
                    self.info.ai_title = title;
                }
            }
            _ => {}
        }
    }

    fn claude_line(&mut self, line: &[u8], offset: u64, ctx: &mut Ctx<'_>) {
        let want_cwd = self.info.cwd.is_none();
        if let claude::Pre::Reject(info) =
            claude::prefilter(line, self.sidechain_mode, want_cwd, &mut ctx.seen)
        {
            self.apply_claude_skim(info);
            return;
        }
        // Most rows that get here are prompts and their wrappers.
        let text = line_text(line);
        let row = match claude::RawRow::parse(&text) {
            Ok(row) => row,
            Err(e) => return self.unreadable(&e, ctx),
        };
        if self.sidechain_mode.is_none() {
            self.sidechain_mode = row.sidechain();
        }
        if want_cwd {
            self.info.cwd = row.cwd().map(str::to_string);
        }
        let mode = self.sidechain_mode.unwrap_or(false);
        if row.sidechain().is_none_or(|side| side == mode) {
            if let Some(ms) = row.turn_end_ms() {
                self.last_end = Some((self.starts.len(), ms));
                return;
            }
        }
        let opts = ParseOptions {
            // Only the first prompt's text is kept (as the fallback title).
            turns_only: self.info.first_prompt.is_some(),
            ..ParseOptions::default()
        };
        match claude::classify(row, mode, &opts) {
            claude::Row::Prompt(m) => self.push_turn(offset, &m),
            claude::Row::Title(kind, t) => self.set_title(kind, t),
            _ => {}
        }
    }

    /// A line `parse_line` reads, else `None` with a warning.
    fn parse(&self, line: &[u8], ctx: &mut Ctx<'_>) -> Option<Value> {
        parse_line(line).map_err(|e| self.unreadable(&e, ctx)).ok()
    }

    /// Warns of line `line`, longer than the cap.
    fn too_long(&self, line: u64, ctx: &mut Ctx<'_>) {
        let why = format!("line skipped: longer than {} bytes", self.max_line);
        match &mut ctx.deferred {
            Some(w) => w.push((line, why)),
            None => log::warn!("{}:{line}: {why}", ctx.path.display()),
        }
    }

    /// Warns of a line that is not JSON (held back with its line number
    /// when scanning a part on another thread).
    fn unreadable(&self, e: &serde_json::Error, ctx: &mut Ctx<'_>) {
        match &mut ctx.deferred {
            Some(w) => w.push((self.lines_scanned, format!("unreadable line skipped: {e}"))),
            None => log::warn!(
                "{}:{}: unreadable line skipped: {e}",
                ctx.path.display(),
                self.lines_scanned
            ),
        }
    }

    fn set_title(&mut self, kind: claude::TitleKind, t: String) {
        let slot = match kind {
            claude::TitleKind::Custom => &mut self.info.custom_title,
            claude::TitleKind::Ai => &mut self.info.ai_title,
            claude::TitleKind::Summary => &mut self.info.summary,
        };
        *slot = Some(t);
    }

    fn push_turn(&mut self, offset: u64, prompt: &Message) {
        self.starts.push(offset);
        self.start_lines.push(self.lines_scanned);
        if self.info.first_prompt.is_none() {
            self.info.first_prompt =
                title_from_text(&prompt.text()).or_else(|| Some("[image]".to_string()));
        }
    }
}

/// What one scan carries from line to line besides the index itself.
struct Ctx<'p> {
    path: &'p Path,
    seen: claude::SeenRun,
    /// Warnings held back with their line numbers (counted from the start
    /// of a part scanned on another thread), else logged at once.
    deferred: Option<Vec<(u64, String)>>,
    /// A NUL byte was read (see `refresh_with`).
    nul: bool,
}

impl<'p> Ctx<'p> {
    fn new(path: &'p Path) -> Self {
        Ctx {
            path,
            seen: claude::SeenRun::default(),
            deferred: None,
            nul: false,
        }
    }
}

/// Reads a file from `pos`, up to `end` if set, else to its end; by offset,
/// so that two threads read one file.
struct RangeReader<'f> {
    f: &'f File,
    pos: u64,
    end: Option<u64>,
}

impl Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let room = self.end.map_or(buf.len(), |end| {
            usize::try_from(end.saturating_sub(self.pos)).map_or(buf.len(), |r| r.min(buf.len()))
        });
        if room == 0 {
            return Ok(0);
        }
        let n = self.f.read_at(&mut buf[..room], self.pos)?;
        self.pos += n as u64;
        after_read();
        Ok(n)
    }
}

/// The start of the first line that begins at or after `at`, if it begins
/// before `len`.
fn line_boundary(f: &File, at: u64, len: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; 64 << 10];
    // A line begins at `at` if the byte before it ends one.
    let mut pos = at.saturating_sub(1);
    while pos < len {
        let n = loop {
            match f.read_at(&mut buf, pos) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        if n == 0 {
            break;
        }
        if let Some(i) = memchr(b'\n', &buf[..n]) {
            let start = pos + i as u64 + 1;
            return Ok((start < len).then_some(start));
        }
        pos += n as u64;
    }
    Ok(None)
}

#[cfg(test)]
thread_local! {
    /// Run once after the next read of a store on this thread: lets a test
    /// change the file between two reads of one scan or page.
    pub(crate) static AFTER_READ: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        std::cell::RefCell::new(None);
}

/// Where a test changes the file under a read (see `AFTER_READ`).
#[inline]
pub(crate) fn after_read() {
    #[cfg(test)]
    if let Some(f) = AFTER_READ.with(|h| h.borrow_mut().take()) {
        f();
    }
}

/// Up to `len` bytes at `at`; fewer if the file ends first.
pub(crate) fn read_up_to(f: &File, at: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match f.read_at(&mut out[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.truncate(got);
    Ok(out)
}

/// Number of pages of `page_turns` turns. There is always at least one: a
/// store with no turn yet has an empty page 0.
pub fn page_count(index: &TurnIndex, page_turns: usize) -> usize {
    index.turn_count().div_ceil(page_turns.max(1)).max(1)
}
