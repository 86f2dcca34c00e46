//! A conversation's summary: what a listing shows of it, read from a
//! bounded head and tail of its file (or what was appended since the last
//! read), never from a turn index.

use crate::transcript::{self, read_up_to, Skim, StoreKind};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Bytes read at the start of a file: the first rows (time, cwd, prompt).
pub const HEAD: u64 = 64 << 10;
/// Bytes read at its end: the newest title rows.
pub const TAIL: u64 = 64 << 10;
/// Appended bytes read as such; a file that grew more is read as head and tail.
pub const GROWTH: u64 = 1 << 20;

/// The file's state when it was summarised, so a change is noticed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub size: u64,
    pub mtime_ms: u64,
    pub ino: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub skim: Skim,
    pub at: Stamp,
    /// Where the next appended bytes start (the end of the last complete
    /// line read).
    pub read_to: u64,
}

impl Summary {
    pub fn title(&self) -> Option<&str> {
        self.skim.title()
    }
}

/// Summarises the file at `path` as of `at`, going on from `prev` when the
/// file only grew since. Reads at most `HEAD + TAIL` bytes, or `GROWTH`.
pub fn read(kind: StoreKind, path: &Path, at: Stamp, prev: Option<&Summary>) -> Summary {
    match read_inner(kind, path, at, prev) {
        Ok(s) => s,
        Err(e) => {
            log::debug!("{}: cannot summarise: {e}", path.display());
            // Remembered as read: the next change of the file tries again.
            Summary {
                at,
                ..Summary::default()
            }
        }
    }
}

fn read_inner(
    kind: StoreKind,
    path: &Path,
    at: Stamp,
    prev: Option<&Summary>,
) -> io::Result<Summary> {
    if transcript::is_compressed(path) {
        // Finished rollouts: only the head, decoded (Codex titles come from
        // the first prompt).
        let mut head = Vec::new();
        transcript::open_store(path, 0)?
            .take(HEAD)
            .read_to_end(&mut head)?;
        let mut skim = Skim::default();
        skim.read(kind, &head);
        return Ok(Summary {
            skim,
            at,
            read_to: at.size,
        });
    }
    let f = File::open(path)?;
    let size = at.size;
    if let Some(prev) = prev.filter(|p| {
        p.at.ino == at.ino && size > p.at.size && p.read_to <= size && size - p.read_to <= GROWTH
    }) {
        let grown = read_up_to(&f, prev.read_to, (size - prev.read_to) as usize)?;
        let mut skim = prev.skim.clone();
        let used = skim.read(kind, &grown);
        return Ok(Summary {
            skim,
            at,
            read_to: prev.read_to + used as u64,
        });
    }
    let mut skim = Skim::default();
    let head = read_up_to(&f, 0, size.min(HEAD) as usize)?;
    let mut read_to = skim.read(kind, &head) as u64;
    if size > HEAD {
        let start = (size - TAIL).max(read_to);
        let tail = read_up_to(&f, start, (size - start) as usize)?;
        // The tail starts on a line unless it continues right after the head.
        let lines = if start == read_to {
            &tail[..]
        } else {
            transcript::from_next_line(&tail)
        };
        let skipped = (tail.len() - lines.len()) as u64;
        read_to = start + skipped + skim.read(kind, lines) as u64;
    }
    Ok(Summary { skim, at, read_to })
}
