//! Reading store lines into turns, for either agent.

use std::io::{self, BufReader};
use std::path::Path;

use super::claude;
use super::codex;
use super::gemini;
use super::model::{Builder, Divider, ParseOptions, Segment};
use super::opencode;
use super::scan::{is_blank, line_text, parse_line, read_line_capped, NextLine};
use super::store::StoreKind;

/// Feeds lines of one store, in order, into a [`Builder`].
pub(crate) struct RowReader<'a> {
    kind: StoreKind,
    /// See `TurnIndex::sidechain_mode`; decided by the first row that says
    /// if not known yet.
    sidechain_mode: Option<bool>,
    opts: ParseOptions,
    path: &'a Path,
    /// Longer lines are skipped, with a notice where they were.
    max_line: usize,
}

impl<'a> RowReader<'a> {
    pub fn new(
        kind: StoreKind,
        sidechain_mode: Option<bool>,
        opts: ParseOptions,
        path: &'a Path,
        max_line: usize,
    ) -> Self {
        RowReader {
            kind,
            sidechain_mode,
            opts,
            path,
            max_line,
        }
    }

    /// One line (without its newline). Returns the turn (or preamble) that a
    /// new prompt on this line closed.
    pub fn feed(&mut self, line: &[u8], line_no: u64, b: &mut Builder) -> Option<Segment> {
        if is_blank(line) {
            return None;
        }
        let warn = |e: serde_json::Error| {
            log::warn!(
                "{}:{line_no}: unreadable line skipped: {e}",
                self.path.display()
            );
        };
        match self.kind {
            StoreKind::Claude => {
                let text = line_text(line);
                let row = match claude::RawRow::parse(&text) {
                    Ok(row) => row,
                    Err(e) => {
                        warn(e);
                        return None;
                    }
                };
                if self.sidechain_mode.is_none() {
                    self.sidechain_mode = row.sidechain();
                }
                let mode = self.sidechain_mode.unwrap_or(false);
                match claude::classify(row, mode, &self.opts) {
                    claude::Row::Prompt(m) => return b.start_turn(m),
                    claude::Row::Message(m) => b.add_message(m),
                    claude::Row::Compaction => b.add_divider(Divider::Compaction),
                    claude::Row::Notice(n) => b.add_notice(n),
                    claude::Row::Title(..) | claude::Row::Skip => {}
                }
            }
            StoreKind::Codex => {
                let v = match parse_line(line) {
                    Ok(v) => v,
                    Err(e) => {
                        warn(e);
                        return None;
                    }
                };
                match codex::classify(&v, &self.opts) {
                    codex::Row::Prompt(m) => return b.start_turn(m),
                    codex::Row::Message(m) => b.add_message(m),
                    codex::Row::Compaction => b.add_divider(Divider::Compaction),
                    codex::Row::Notice(n) => b.add_notice(n),
                    codex::Row::Meta { .. } | codex::Row::Skip => {}
                }
            }
            StoreKind::Gemini => {
                let v = match parse_line(line) {
                    Ok(v) => v,
                    Err(e) => {
                        warn(e);
                        return None;
                    }
                };
                match gemini::classify(&v, &self.opts) {
                    gemini::Row::Prompt(m) => return b.start_or_update_turn(m),
                    gemini::Row::Message(m) => b.put_message(m),
                    gemini::Row::Notice(n) => b.add_notice(n),
                    gemini::Row::Meta { .. } | gemini::Row::Skip => {}
                }
            }
            StoreKind::Opencode => {
                let v = match parse_line(line) {
                    Ok(v) => v,
                    Err(e) => {
                        warn(e);
                        return None;
                    }
                };
                match opencode::classify(&v, &self.opts) {
                    opencode::Row::Prompt(m) => return b.start_turn(m),
                    opencode::Row::Reply(messages, notice) => {
                        for m in messages {
                            b.add_message(m);
                        }
                        if let Some(n) = notice {
                            b.add_notice(n);
                        }
                    }
                    opencode::Row::Meta { .. } | opencode::Row::Skip => {}
                }
            }
        }
        None
    }
}

/// Reads lines from `r` until it ends, calling `each` with every finished
/// turn (and the preamble). A last line without a newline is still being
/// written and is ignored; one over the cap is not read into memory, and
/// the turn it is in says it was skipped.
pub(crate) fn read_segments(
    r: impl io::Read,
    mut rows: RowReader<'_>,
    first_line: u64,
    mut each: impl FnMut(Segment),
) -> io::Result<()> {
    let mut r = BufReader::with_capacity(1 << 20, r);
    let mut b = Builder::default();
    let mut line = Vec::new();
    let mut line_no = first_line;
    loop {
        match read_line_capped(&mut r, &mut line, rows.max_line)? {
            NextLine::End => break,
            NextLine::TooLong(len) => b.add_notice(format!(
                "line {line_no} of the store skipped: {len} bytes, over the {} a line may have",
                rows.max_line
            )),
            NextLine::Line => {
                if let Some(seg) = rows.feed(&line, line_no, &mut b) {
                    each(seg);
                }
            }
        }
        line_no += 1;
    }
    if let Some(seg) = b.finish() {
        each(seg);
    }
    Ok(())
}

/// Parses a whole store file into the model (everything in memory: for
/// tests; pages use the index and read only their range).
#[cfg(test)]
pub fn parse_store(
    kind: StoreKind,
    path: &Path,
    opts: ParseOptions,
) -> io::Result<super::model::Conversation> {
    let r = super::store::open_store(path, 0)?;
    let mut conv = super::model::Conversation::default();
    let rows = RowReader::new(kind, None, opts, path, super::scan::MAX_LINE_BYTES);
    read_segments(r, rows, 1, |s| conv.push(s))?;
    Ok(conv)
}
