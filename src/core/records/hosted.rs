//! Transcripts of runs the host records itself (`hosted:SESSION_ID`): one
//! JSON entry per line, rendered one console line per entry, paged by
//! entries as agent transcripts are paged by turns.

use serde_json::Value;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// Byte offsets of a hosted transcript's entries, extended as it grows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EntryIndex {
    starts: Vec<u64>,
    scanned_to: u64,
    /// The file's length at the last refresh.
    seen_len: u64,
}

impl EntryIndex {
    /// Scans whatever complete lines were appended since the last call; a
    /// file shorter than what was scanned is scanned again from the start.
    pub fn refresh(&mut self, path: &Path) -> io::Result<()> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        if len < self.scanned_to {
            *self = EntryIndex::default();
        }
        self.seen_len = len;
        file.seek(SeekFrom::Start(self.scanned_to))?;
        let mut buf = vec![0u8; 1 << 16];
        let mut pos = self.scanned_to;
        let mut line_start = self.scanned_to;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            for (i, b) in buf[..n].iter().enumerate() {
                if *b == b'\n' {
                    self.starts.push(line_start);
                    line_start = pos + i as u64 + 1;
                }
            }
            pos += n as u64;
        }
        self.scanned_to = line_start;
        Ok(())
    }

    /// Whether a refresh would find nothing new in a file of length `len`.
    pub fn is_current(&self, len: u64) -> bool {
        len == self.seen_len && len > 0
    }

    pub fn entries(&self) -> usize {
        self.starts.len()
    }

    /// Pages of `per_page` entries; there is always a `page-0`.
    pub fn pages(&self, per_page: usize) -> usize {
        self.starts.len().div_ceil(per_page.max(1)).max(1)
    }

    /// Entries `[page·per_page, (page+1)·per_page)`, one console line each;
    /// `None` past the last page.
    pub fn render_page(
        &self,
        path: &Path,
        page: usize,
        per_page: usize,
    ) -> io::Result<Option<Vec<u8>>> {
        let per_page = per_page.max(1);
        if page >= self.pages(per_page) {
            return Ok(None);
        }
        let first = page * per_page;
        let last = ((page + 1) * per_page).min(self.starts.len());
        if first >= last {
            return Ok(Some(Vec::new()));
        }
        let start = self.starts[first];
        let end = self.starts.get(last).copied().unwrap_or(self.scanned_to);
        let mut file = File::open(path)?;
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::with_capacity((end - start) as usize);
        file.take(end - start).read_to_end(&mut bytes)?;
        let mut out = Vec::new();
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            out.extend_from_slice(render_entry(line).as_bytes());
            out.push(b'\n');
        }
        Ok(Some(out))
    }
}

/// `type: text`, or `type {json}` for an entry without a text.
pub fn render_entry(line: &[u8]) -> String {
    let Ok(Value::Object(mut entry)) = serde_json::from_slice::<Value>(line) else {
        return format!("? {}", String::from_utf8_lossy(line));
    };
    let kind = match entry.remove("type") {
        Some(Value::String(s)) => s,
        _ => "?".into(),
    };
    entry.remove("ts_ms");
    let text = ["text", "message", "content"]
        .iter()
        .find_map(|k| entry.get(*k).and_then(Value::as_str).map(str::to_string));
    match text {
        // One console line per entry: newlines inside the text are shown escaped.
        Some(text) => format!("{kind}: {}", text.replace('\n', "\\n")),
        None if entry.is_empty() => kind,
        None => format!("{kind} {}", Value::Object(entry)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_entries_and_renders_one_line_each() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut body = String::new();
        for i in 0..5 {
            body.push_str(&format!(
                "{{\"type\":\"step\",\"text\":\"n{i}\\nmore\",\"ts_ms\":1}}\n"
            ));
        }
        body.push_str("{\"type\":\"tool\",\"args\":[1]}\n{\"type\":\"half");
        std::fs::write(&path, &body).unwrap();
        let mut idx = EntryIndex::default();
        idx.refresh(&path).unwrap();
        assert_eq!(idx.entries(), 6);
        assert_eq!(idx.pages(4), 2);
        let p0 = String::from_utf8(idx.render_page(&path, 0, 4).unwrap().unwrap()).unwrap();
        assert_eq!(p0.lines().count(), 4);
        assert_eq!(p0.lines().next(), Some("step: n0\\nmore"));
        let p1 = String::from_utf8(idx.render_page(&path, 1, 4).unwrap().unwrap()).unwrap();
        assert_eq!(p1, "step: n4\\nmore\ntool {\"args\":[1]}\n");
        assert!(idx.render_page(&path, 2, 4).unwrap().is_none());
        std::fs::write(&path, "{\"type\":\"a\"}\n").unwrap();
        idx.refresh(&path).unwrap();
        assert_eq!(idx.entries(), 1);
    }
}
