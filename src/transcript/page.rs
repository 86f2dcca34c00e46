//! Pages: page N is the console render of turns `[N·T, (N+1)·T)`, read from
//! that byte range of the store only. Caps bound what a page renders; they
//! cut the page's oldest output (with a marker line at the top) and never
//! change which turns the page holds.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use super::index::{page_count, TurnIndex};
use super::model::ParseOptions;
use super::parse::{read_segments, RowReader};
use super::render::{render_segment, Lines, OUTPUT_LINES};
use super::store;

/// Page size and the caps on one rendered page (SPEC §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Turns per page (`AGENT_SESSIONS_HISTORY_PAGE_TURNS`).
    pub page_turns: usize,
    /// Lines kept (`AGENT_SESSIONS_TRANSCRIPT_MAX_LINES`).
    pub max_lines: usize,
    /// Messages kept (`AGENT_SESSIONS_TRANSCRIPT_MAX_MESSAGES`).
    pub max_messages: usize,
    /// Bytes kept, from the end (`AGENT_SESSIONS_TRANSCRIPT_TAIL_BYTES`).
    pub tail_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            page_turns: 50,
            max_lines: 20_000,
            max_messages: 2_000,
            tail_bytes: 8 << 20,
        }
    }
}

/// Why a page cannot be rendered.
#[derive(Debug)]
pub enum PageError {
    /// No such page (`ENOENT`).
    NotFound {
        page: usize,
        pages: usize,
    },
    /// The file is no longer the one indexed (replaced or truncated): refresh
    /// the index and try again (`ESTALE`).
    Stale,
    Io(io::Error),
}

impl PageError {
    pub fn errno(&self) -> i32 {
        match self {
            PageError::NotFound { .. } => libc::ENOENT,
            PageError::Stale => libc::ESTALE,
            PageError::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageError::NotFound { page, pages } => {
                write!(f, "no transcript page {page} (there are {pages})")
            }
            PageError::Stale => write!(f, "the transcript changed while being read"),
            PageError::Io(e) => write!(f, "reading the transcript: {e}"),
        }
    }
}

impl std::error::Error for PageError {}

impl From<io::Error> for PageError {
    fn from(e: io::Error) -> Self {
        PageError::Io(e)
    }
}

impl From<PageError> for crate::error::Error {
    fn from(e: PageError) -> Self {
        let level = match &e {
            PageError::Io(_) if crate::error::is_fault(e.errno()) => log::Level::Error,
            _ => log::Level::Warn,
        };
        crate::error::Error::new(e.errno(), e.to_string())
            .at_level(level)
            .with_source(e)
    }
}

/// Renders page `page` of the store at `path`, using an index refreshed
/// from that file. Page 0 also shows whatever the store recorded before the
/// first prompt; a store with no turn has an empty (or preamble-only) page 0
/// rather than none, so a `latest` page always exists. A page past the last
/// is [`PageError::NotFound`]. The last page ends where the index scanned to.
pub fn render_page(
    path: &Path,
    index: &TurnIndex,
    page: usize,
    limits: &Limits,
) -> Result<Vec<u8>, PageError> {
    let per = limits.page_turns.max(1);
    let pages = page_count(index, per);
    if page >= pages {
        return Err(PageError::NotFound { page, pages });
    }
    let (start, end, first_line) = index.turn_range(page * per, per);
    let mut sink = TailSink::new(limits);
    if end > start {
        let rows = RowReader::new(
            index.kind(),
            index.sidechain_mode(),
            page_parse_options(),
            path,
            index.max_line(),
        );
        let each = |seg| render_segment(&seg, &mut sink);
        if store::is_compressed(path) {
            let reader = store::open_store(path, start)?.take(end - start);
            read_segments(reader, rows, first_line, each)?;
        } else {
            let f = open_indexed(path, index, end)?;
            let before = f.metadata()?;
            (&f).seek(SeekFrom::Start(start))?;
            let mut reader = Checked {
                inner: (&f).take(end - start),
                got: 0,
                nul: false,
            };
            read_segments(&mut reader, rows, first_line, each)?;
            // Cut short, or zeros read while the file changed: the bytes may
            // come from two states of the file.
            let after = f.metadata()?;
            if reader.got != end - start
                || after.len() < end
                || (reader.nul && changed(&before, &after))
            {
                return Err(PageError::Stale);
            }
        }
    }
    Ok(sink.finish())
}

/// What a page needs of each entry: a few lines of output, the start of
/// each argument.
pub(crate) fn page_parse_options() -> ParseOptions {
    ParseOptions {
        clip_tool_output: Some(OUTPUT_LINES),
        clip_tool_input: Some(4096),
        turns_only: false,
    }
}

/// The indexed plain file, if it still is the one indexed and reaches `end`.
fn open_indexed(path: &Path, index: &TurnIndex, end: u64) -> Result<File, PageError> {
    let f = store::open_plain(path)?;
    if !index.is_same_file(&f)? || f.metadata()?.len() < end {
        return Err(PageError::Stale);
    }
    Ok(f)
}

/// Whether a file was written between two `stat`s of it.
fn changed(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (
        a.len(),
        a.mtime(),
        a.mtime_nsec(),
        a.ctime(),
        a.ctime_nsec(),
    ) != (
        b.len(),
        b.mtime(),
        b.mtime_nsec(),
        b.ctime(),
        b.ctime_nsec(),
    )
}

/// Reads a range of a store, counting the bytes and noting NUL bytes: JSON
/// lines never hold one (a string escapes it), but a read racing a
/// truncation returns the dropped pages as zeros, followed by whatever the
/// file holds again by then. (A store can also hold zeros for good, left by
/// a crash: those are only unreadable lines.)
struct Checked<R> {
    inner: R,
    got: u64,
    nul: bool,
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.nul |= memchr::memchr(0, &buf[..n]).is_some();
        self.got += n as u64;
        super::index::after_read();
        Ok(n)
    }
}

/// Keeps the newest rendered lines within the caps, counting what it drops.
struct TailSink {
    limits: Limits,
    /// Lines with the number of the message they belong to.
    lines: VecDeque<(u64, String)>,
    /// Bytes held, newlines included.
    bytes: usize,
    message: u64,
    lines_cut: usize,
    bytes_cut: usize,
    message_lines_cut: bool,
    /// Whether a turn (or the preamble) was rendered into this page.
    segments: bool,
}

impl TailSink {
    fn new(limits: &Limits) -> Self {
        TailSink {
            limits: *limits,
            lines: VecDeque::new(),
            bytes: 0,
            message: 0,
            lines_cut: 0,
            bytes_cut: 0,
            message_lines_cut: false,
            segments: false,
        }
    }

    fn pop_front(&mut self) -> usize {
        let (_, l) = self.lines.pop_front().expect("a line to drop");
        self.bytes -= l.len() + 1;
        l.len() + 1
    }

    fn enforce(&mut self, byte_cap: usize) {
        let max_msgs = self.limits.max_messages.max(1) as u64;
        if self.message > max_msgs {
            let oldest_kept = self.message - max_msgs + 1;
            while self.lines.front().is_some_and(|(m, _)| *m < oldest_kept) {
                self.pop_front();
                self.message_lines_cut = true;
            }
        }
        while self.lines.len() > self.limits.max_lines.max(1) {
            self.pop_front();
            self.lines_cut += 1;
        }
        while self.bytes > byte_cap {
            let excess = self.bytes - byte_cap;
            let front_len = self.lines.front().map_or(0, |(_, l)| l.len() + 1);
            if front_len <= excess + 1 {
                self.bytes_cut += self.pop_front();
            } else {
                // One line longer than what is left: keep its end.
                let (_, l) = self.lines.front_mut().expect("a line");
                let mut k = excess.min(l.len());
                while !l.is_char_boundary(k) {
                    k += 1;
                }
                l.drain(..k);
                self.bytes -= k;
                self.bytes_cut += k;
            }
        }
    }

    fn markers(&self) -> Vec<String> {
        let mut m = Vec::new();
        let max_msgs = self.limits.max_messages.max(1) as u64;
        if self.message_lines_cut {
            m.push(format!(
                "[… {} messages cut: page over {} messages]",
                self.message - max_msgs,
                self.limits.max_messages
            ));
        }
        if self.lines_cut > 0 {
            m.push(format!(
                "[… {} lines cut: page over {} lines]",
                self.lines_cut, self.limits.max_lines
            ));
        }
        if self.bytes_cut > 0 {
            m.push(format!(
                "[… {} bytes cut: page over {} bytes, its end is shown]",
                self.bytes_cut, self.limits.tail_bytes
            ));
        }
        m
    }

    /// The page: marker lines for what was cut, then the kept lines.
    fn finish(mut self) -> Vec<u8> {
        // Markers count towards the byte cap too.
        loop {
            let marker_bytes: usize = self.markers().iter().map(|m| m.len() + 1).sum();
            let cap = self.limits.tail_bytes.saturating_sub(marker_bytes);
            if self.bytes <= cap || self.lines.is_empty() {
                break;
            }
            self.enforce(cap);
        }
        let mut out = Vec::with_capacity(self.bytes + 256);
        for m in self.markers() {
            out.extend_from_slice(m.as_bytes());
            out.push(b'\n');
        }
        for (_, l) in &self.lines {
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
        out
    }
}

impl Lines for TailSink {
    fn message(&mut self) {
        self.message += 1;
    }

    fn segment(&mut self) {
        if self.segments {
            self.line("");
        }
        self.segments = true;
    }

    fn line(&mut self, s: &str) {
        // Text with a line break in it is several lines on the page, and
        // each counts towards the line cap.
        for part in s.split('\n') {
            self.bytes += part.len() + 1;
            self.lines.push_back((self.message, part.to_string()));
            let cap = self.limits.tail_bytes;
            self.enforce(cap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_with_breaks_in_it_counts_as_its_lines() {
        let limits = Limits {
            page_turns: 1,
            max_lines: 3,
            max_messages: 2,
            tail_bytes: 4096,
        };
        let mut sink = TailSink::new(&limits);
        sink.message();
        sink.line("one\ntwo");
        sink.line("three\nfour\n");
        let page = String::from_utf8(sink.finish()).unwrap();
        assert_eq!(page, "[… 2 lines cut: page over 3 lines]\nthree\nfour\n\n");
    }

    fn sink(max_lines: usize, max_messages: usize, tail_bytes: usize) -> TailSink {
        TailSink::new(&Limits {
            page_turns: 50,
            max_lines,
            max_messages,
            tail_bytes,
        })
    }

    #[test]
    fn keeps_the_tail_with_markers() {
        let mut s = sink(3, 100, 1 << 20);
        for i in 0..10 {
            s.message();
            s.line(&format!("l{i}"));
        }
        let out = String::from_utf8(s.finish()).unwrap();
        assert_eq!(out, "[… 7 lines cut: page over 3 lines]\nl7\nl8\nl9\n");

        let mut s = sink(100, 2, 1 << 20);
        for i in 0..5 {
            s.message();
            s.line(&format!("m{i}a"));
            s.line(&format!("m{i}b"));
        }
        let out = String::from_utf8(s.finish()).unwrap();
        assert_eq!(
            out,
            "[… 3 messages cut: page over 2 messages]\nm3a\nm3b\nm4a\nm4b\n"
        );

        let mut s = sink(100, 100, 80);
        s.message();
        s.line(&"x".repeat(200));
        s.line("end");
        let out = String::from_utf8(s.finish()).unwrap();
        assert!(out.len() <= 80, "{}", out.len());
        assert!(out.starts_with("[… "));
        assert!(out.ends_with("xxx\nend\n"));
    }

    #[test]
    fn nothing_cut_nothing_marked() {
        let mut s = sink(10, 10, 100);
        s.message();
        s.line("a");
        assert_eq!(s.finish(), b"a\n");
    }
}
