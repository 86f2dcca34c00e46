//! The `events` log (one JSON line per state change, kept in the state
//! directory so it survives a daemon restart, capped with the oldest
//! dropped) and the follower that reads the per-session hook file as the
//! hooks append to it.

use super::hooks::MAX_LINE;
use super::state::{Change, Source, State};
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One line of the `events` log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub ts_ms: u64,
    pub state: State,
    pub source: Source,
    pub detail: String,
}

/// Details are cut to this many bytes.
const MAX_DETAIL: usize = 200;

impl Event {
    pub fn from_change(change: &Change, ts_ms: u64) -> Event {
        let mut detail = change.detail.clone();
        if detail.len() > MAX_DETAIL {
            let mut end = MAX_DETAIL;
            while !detail.is_char_boundary(end) {
                end -= 1;
            }
            detail.truncate(end);
        }
        Event {
            ts_ms,
            state: change.state,
            source: change.source,
            detail,
        }
    }

    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("events serialise")
    }
}

/// The events of one session, in a file of JSON lines.
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
    cap: usize,
    lines: usize,
}

impl EventLog {
    /// Opens (or will create) the log at `path`, keeping at most `cap`
    /// events once it compacts.
    pub fn open(path: &Path, cap: usize) -> std::io::Result<EventLog> {
        let lines = match std::fs::read(path) {
            Ok(bytes) => bytes.iter().filter(|b| **b == b'\n').count(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(EventLog {
            path: path.to_path_buf(),
            cap: cap.max(1),
            lines,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event. Past a quarter over the cap, the file is rewritten
    /// with the newest `cap` events (so a rewrite happens once per cap/4
    /// appends, not on every one).
    pub fn append(&mut self, event: &Event) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)?;
        let mut line = event.to_line();
        line.push('\n');
        f.write_all(line.as_bytes())?;
        self.lines += 1;
        if self.lines > self.cap + self.cap / 4 {
            self.compact()?;
        }
        Ok(())
    }

    fn compact(&mut self) -> std::io::Result<()> {
        let text = std::fs::read_to_string(&self.path)?;
        let all: Vec<&str> = text.lines().collect();
        let keep = &all[all.len().saturating_sub(self.cap)..];
        let mut body = keep.join("\n");
        body.push('\n');
        // Not synced, as the appends are not: the log is kept across a
        // restart of the daemon, not across a crash of the machine.
        crate::atomic::replace_with(
            &self.path,
            body.as_bytes(),
            crate::atomic::CREATE_MODE,
            crate::atomic::Durability::Unsynced,
        )?;
        self.lines = keep.len();
        Ok(())
    }

    /// Every readable event in the log, oldest first; bad lines are skipped.
    pub fn read(path: &Path) -> Vec<Event> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The newest event: where a restarted daemon picks the state up.
    pub fn last(path: &Path) -> Option<Event> {
        Self::read(path).pop()
    }
}

/// Where a follower is in the hook file; saved so a restarted daemon goes on
/// from there instead of replaying old events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowPos {
    pub inode: u64,
    pub offset: u64,
}

/// Reads new complete lines from a file that others append to. A line not
/// yet ended by a newline is left for the next poll; a line longer than
/// [`MAX_LINE`] is skipped. When the writer has moved the file aside to
/// `FILE.1` (see [`super::hooks::append_line`]), the rest of it is read
/// before the new file.
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    pos: FollowPos,
    /// Inside an overlong line: drop bytes up to the next newline.
    skipping: bool,
}

/// The most bytes one poll reads.
const MAX_POLL: usize = 256 << 10;

impl Follower {
    pub fn new(path: &Path) -> Follower {
        Self::at(path, FollowPos::default())
    }

    /// Goes on from a saved position.
    pub fn at(path: &Path, pos: FollowPos) -> Follower {
        Follower {
            path: path.to_path_buf(),
            pos,
            skipping: false,
        }
    }

    pub fn pos(&self) -> FollowPos {
        self.pos
    }

    fn aside(&self) -> PathBuf {
        let mut p = self.path.as_os_str().to_owned();
        p.push(".1");
        PathBuf::from(p)
    }

    /// New complete lines since the last poll.
    pub fn poll(&mut self) -> Vec<String> {
        let mut out = vec![];
        let Ok(meta) = std::fs::metadata(&self.path) else {
            return out;
        };
        if self.pos.inode != 0 && self.pos.inode != meta.ino() {
            // Rotated: finish the old file if it is the one moved aside.
            let aside = self.aside();
            if std::fs::metadata(&aside).is_ok_and(|m| m.ino() == self.pos.inode) {
                // Read it to its end (bounded: a moved file is ~ROTATE_AT).
                for _ in 0..64 {
                    if self.read_from(&aside, &mut out) {
                        break;
                    }
                }
            }
            self.pos = FollowPos {
                inode: meta.ino(),
                offset: 0,
            };
            self.skipping = false;
        }
        if self.pos.inode == 0 {
            self.pos.inode = meta.ino();
        }
        if meta.len() < self.pos.offset {
            // Truncated in place: start over.
            self.pos.offset = 0;
            self.skipping = false;
        }
        let path = self.path.clone();
        self.read_from(&path, &mut out);
        out
    }

    /// Reads what follows the position in `path`; true when that reached
    /// the end of the file.
    fn read_from(&mut self, path: &Path, out: &mut Vec<String>) -> bool {
        let Ok(mut f) = std::fs::File::open(path) else {
            return true;
        };
        if f.seek(SeekFrom::Start(self.pos.offset)).is_err() {
            return true;
        }
        let mut buf = Vec::new();
        if (&mut f)
            .take(MAX_POLL as u64)
            .read_to_end(&mut buf)
            .is_err()
        {
            return true;
        }
        let at_end = buf.len() < MAX_POLL;
        let mut start = 0;
        while let Some(nl) = buf[start..].iter().position(|b| *b == b'\n') {
            let line = &buf[start..start + nl];
            if self.skipping {
                self.skipping = false;
            } else if line.len() <= MAX_LINE {
                out.push(String::from_utf8_lossy(line).into_owned());
            }
            start += nl + 1;
        }
        // What is left has no newline yet: wait for it, unless it is
        // already too long to be a line worth keeping.
        let rest = buf.len() - start;
        if rest > MAX_LINE || (self.skipping && rest > 0) {
            self.skipping = true;
            start = buf.len();
        }
        self.pos.offset += start as u64;
        at_end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::hooks::{append_line, ROTATE_AT};

    fn append(path: &Path, bytes: &[u8]) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(bytes).unwrap();
    }

    #[test]
    fn the_follower_reads_complete_lines_incrementally() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hooks.jsonl");
        let mut f = Follower::new(&file);
        assert!(f.poll().is_empty(), "no file yet");
        append(&file, b"one\ntw");
        assert_eq!(f.poll(), ["one"]);
        assert!(f.poll().is_empty(), "half a line waits");
        append(&file, b"o\nthree\n");
        assert_eq!(f.poll(), ["two", "three"]);
        // A restarted daemon goes on from the saved position.
        let pos = f.pos();
        append(&file, b"four\n");
        let mut again = Follower::at(&file, pos);
        assert_eq!(again.poll(), ["four"]);
    }

    #[test]
    fn overlong_lines_are_skipped_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hooks.jsonl");
        let mut f = Follower::new(&file);
        append(&file, b"a\n");
        append(&file, &vec![b'x'; MAX_LINE + 10]);
        assert_eq!(f.poll(), ["a"]);
        append(&file, &vec![b'y'; 3 * MAX_LINE]);
        assert!(f.poll().is_empty());
        append(&file, b"yyy\nb\n");
        assert_eq!(f.poll(), ["b"]);
        // A complete overlong line in one read is skipped too.
        append(&file, &vec![b'z'; MAX_LINE + 1]);
        append(&file, b"\nc\n");
        assert_eq!(f.poll(), ["c"]);
    }

    #[test]
    fn the_follower_finishes_a_rotated_file_then_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hooks.jsonl");
        let mut f = Follower::new(&file);
        append(&file, b"old-1\n");
        assert_eq!(f.poll(), ["old-1"]);
        // Fill to the rotation size; the next append moves it aside.
        let filler = format!("{}\n", "f".repeat(1000));
        let mut size = std::fs::metadata(&file).unwrap().len();
        while size < ROTATE_AT {
            append(&file, filler.as_bytes());
            size += filler.len() as u64;
        }
        append(&file, b"old-last\n");
        append_line(&file, "new-1").unwrap();
        // One poll finishes the old file (past MAX_POLL) and reads the new.
        let lines = f.poll();
        let fillers = lines.iter().filter(|l| l.starts_with('f')).count() as u64;
        assert_eq!(fillers, (size - 6) / filler.len() as u64);
        let tail: Vec<&str> = lines.iter().rev().take(2).map(String::as_str).collect();
        assert_eq!(tail, ["new-1", "old-last"]);
    }

    #[test]
    fn a_truncated_file_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hooks.jsonl");
        let mut f = Follower::new(&file);
        append(&file, b"first line\n");
        assert_eq!(f.poll().len(), 1);
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&file)
            .unwrap();
        append(&file, b"x\n");
        assert_eq!(f.poll(), ["x"]);
    }

    #[test]
    fn the_log_keeps_the_newest_events_across_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut log = EventLog::open(&path, 8).unwrap();
        for i in 0..30u64 {
            let state = if i % 2 == 0 { State::Busy } else { State::Idle };
            log.append(&Event {
                ts_ms: i,
                state,
                source: Source::Hook,
                detail: format!("n{i}"),
            })
            .unwrap();
        }
        let events = EventLog::read(&path);
        assert!(events.len() <= 10 && events.len() >= 8, "{}", events.len());
        assert_eq!(events.last().unwrap().ts_ms, 29);
        // Reopened (a daemon restart): the count is known, the cap holds.
        let mut log = EventLog::open(&path, 8).unwrap();
        for i in 30..40u64 {
            log.append(&Event {
                ts_ms: i,
                state: State::Idle,
                source: Source::Screen,
                detail: String::new(),
            })
            .unwrap();
        }
        let events = EventLog::read(&path);
        assert!(events.len() <= 10, "{}", events.len());
        assert_eq!(EventLog::last(&path).unwrap().ts_ms, 39);
        assert!(events.windows(2).all(|w| w[0].ts_ms < w[1].ts_ms));
    }

    #[test]
    fn an_event_line_has_the_documented_fields() {
        let change = Change {
            state: State::Waiting,
            source: Source::Hook,
            detail: "d".repeat(1000),
        };
        let line = Event::from_change(&change, 7).to_line();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ts_ms"], 7);
        assert_eq!(v["state"], "waiting");
        assert_eq!(v["source"], "hook");
        assert_eq!(v["detail"].as_str().unwrap().len(), MAX_DETAIL);
        assert_eq!(v.as_object().unwrap().len(), 4);
    }
}
