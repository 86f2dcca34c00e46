//! The turn index of one store file: the byte offset where each turn starts,
//! built by one scan and extended as the file grows.
//!
//! The scan finds line ends eight bytes at a time and looks only at the first
//! keys of each line; a line is parsed only when it could be a typed prompt
//! or a title. A line without its newline yet is left for the next refresh.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use serde_json::Value;

use super::claude;
use super::codex;
use super::model::{Message, ParseOptions};
use super::scan::{find_newline, is_blank, last_timestamp, parse_line, title_from_text};
use super::store::{self, StoreKind};

const CHUNK: usize = 1 << 20;
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
    /// Claude: the file's stem; Codex: `session_meta.payload.id`.
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
        }
    }

    /// Scans a store file once.
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

    /// Byte offset where each turn starts.
    pub fn turn_offsets(&self) -> &[u64] {
        &self.starts
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
        *self = Self::new(self.kind);
    }

    /// Brings the index up to date with the file: scans what was appended,
    /// or everything again if the file was replaced (other inode), truncated
    /// (shorter than scanned) or rewritten (remembered bytes differ).
    pub fn refresh(&mut self, path: &Path) -> io::Result<Refresh> {
        let mut f = store::open_plain(path)?;
        let meta = f.metadata()?;
        let id = FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        };
        let len = meta.len();
        let mut rebuilt = false;
        if self.file.is_some()
            && (self.file != Some(id) || len < self.scanned_to || !self.fingerprint_matches(&f)?)
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
            return Ok(Refresh::Unchanged);
        }
        let turns_before = self.starts.len();
        let scanned_before = self.scanned_to;
        f.seek(SeekFrom::Start(self.scanned_to))?;
        if let Err(e) = self.scan(&mut f, path) {
            // Turns may have been recorded past `scanned_to`: start over next time.
            self.reset();
            return Err(e);
        }
        self.head = read_exact_at(&f, 0, len.min(FINGERPRINT as u64) as usize)?;
        let tail_len = self.scanned_to.min(FINGERPRINT as u64);
        self.tail = read_exact_at(&f, self.scanned_to - tail_len, tail_len as usize)?;
        self.info.last_timestamp = None;
        for w in TS_WINDOWS {
            let w = w.min(self.scanned_to);
            let bytes = read_exact_at(&f, self.scanned_to - w, w as usize)?;
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
        let head = read_exact_at(f, 0, self.head.len())?;
        let at = self.scanned_to - self.tail.len() as u64;
        let tail = read_exact_at(f, at, self.tail.len())?;
        Ok(head == self.head && tail == self.tail)
    }

    /// Reads from the current position to EOF, consuming complete lines.
    fn scan(&mut self, r: &mut dyn Read, path: &Path) -> io::Result<()> {
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + PREFIX);
        // File offset of buf[0].
        let mut buf_off = self.scanned_to;
        let mut line_start = self.scanned_to;
        // buf[..search_from] holds no newline of the current line.
        let mut search_from = 0usize;
        // The current line was judged from its start and is being skipped.
        let mut skipping = false;
        let mut prefix_checked = false;
        loop {
            while let Some(rel) = find_newline(&buf[search_from..]) {
                let nl = search_from + rel;
                self.lines_scanned += 1;
                if !skipping {
                    let ls = (line_start - buf_off) as usize;
                    self.line(&buf[ls..nl], line_start, path);
                }
                line_start = buf_off + nl as u64 + 1;
                search_from = nl + 1;
                skipping = false;
                prefix_checked = false;
            }
            if !skipping {
                let ls = (line_start - buf_off) as usize;
                buf.drain(..ls);
                buf_off = line_start;
                if !prefix_checked && buf.len() >= PREFIX {
                    prefix_checked = true;
                    skipping = self.reject_prefix(&buf);
                }
            }
            if skipping {
                buf_off += buf.len() as u64;
                buf.clear();
            }
            search_from = buf.len();
            let old = buf.len();
            buf.resize(old + CHUNK, 0);
            let n = loop {
                match r.read(&mut buf[old..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            buf.truncate(old + n);
            if n == 0 {
                break;
            }
        }
        self.scanned_to = line_start;
        Ok(())
    }

    /// Judges a long line from its first bytes; true if it cannot matter.
    fn reject_prefix(&mut self, prefix: &[u8]) -> bool {
        match self.kind {
            StoreKind::Claude => match claude::prefilter(prefix, self.sidechain_mode) {
                claude::Pre::Reject(info) => {
                    self.apply_claude_skim(info);
                    true
                }
                claude::Pre::Parse => false,
            },
            StoreKind::Codex => match codex::prefilter(prefix) {
                codex::Pre::Reject => true,
                codex::Pre::Parse => false,
            },
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
    fn line(&mut self, line: &[u8], offset: u64, path: &Path) {
        if is_blank(line) {
            return;
        }
        let rejected = match self.kind {
            StoreKind::Claude => match claude::prefilter(line, self.sidechain_mode) {
                claude::Pre::Reject(info) => {
                    self.apply_claude_skim(info);
                    true
                }
                claude::Pre::Parse => false,
            },
            StoreKind::Codex => match codex::prefilter(line) {
                codex::Pre::Reject => true,
                codex::Pre::Parse => false,
            },
        };
        if rejected {
            return;
        }
        let v = match parse_line(line) {
            Ok(v) => v,
            Err(e) => {
                log::warn!(
                    "{}:{}: unreadable line skipped: {e}",
                    path.display(),
                    self.lines_scanned
                );
                return;
            }
        };
        let opts = ParseOptions::default();
        match self.kind {
            StoreKind::Claude => {
                if self.sidechain_mode.is_none() {
                    self.sidechain_mode = v.get("isSidechain").and_then(Value::as_bool);
                }
                if self.info.cwd.is_none() {
                    self.info.cwd = v.get("cwd").and_then(Value::as_str).map(str::to_string);
                }
                match claude::classify(&v, self.sidechain_mode.unwrap_or(false), &opts) {
                    claude::Row::Prompt(m) => self.push_turn(offset, &m),
                    claude::Row::Title(kind, t) => {
                        let slot = match kind {
                            claude::TitleKind::Custom => &mut self.info.custom_title,
                            claude::TitleKind::Ai => &mut self.info.ai_title,
                            claude::TitleKind::Summary => &mut self.info.summary,
                        };
                        *slot = Some(t);
                    }
                    _ => {}
                }
            }
            StoreKind::Codex => match codex::classify(&v, &opts) {
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
            },
        }
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

/// Up to `len` bytes at `at`; fewer if the file ends first.
fn read_exact_at(f: &File, at: u64, len: usize) -> io::Result<Vec<u8>> {
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
