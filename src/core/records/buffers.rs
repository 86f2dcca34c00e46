//! What a records file collects between `write` calls, looked at once per
//! byte: a writer may send a record or a line a byte at a time, and each
//! call must not go over everything sent before it again.

use memchr::memchr;

/// A JSON document arriving in pieces. It is parsed when it may be
/// complete (its outermost value closed), and otherwise only once it has
/// doubled since the last parse, which still finds malformed text early:
/// the parses of one document together read at most about three times
/// its length.
#[derive(Debug, Default)]
pub(in crate::core) struct JsonDocument {
    buf: Vec<u8>,
    /// Brackets open outside strings (below zero for stray closing ones).
    depth: i64,
    in_string: bool,
    escaped: bool,
    /// A byte other than whitespace has arrived.
    started: bool,
    /// Parse again once the buffer is this long.
    next_parse: usize,
    /// Bytes handed to the parser so far.
    parsed: u64,
}

/// What the bytes sent so far are.
#[derive(Debug)]
pub(in crate::core) enum Document {
    /// Not a whole document yet.
    Incomplete,
    /// A whole document, in [`JsonDocument::bytes`].
    Complete,
    /// Not JSON: what was held is dropped.
    Invalid(serde_json::Error),
}

impl JsonDocument {
    pub(in crate::core) fn push(&mut self, data: &[u8]) -> Document {
        self.buf.extend_from_slice(data);
        for &b in data {
            self.track(b);
        }
        let closed = self.started && self.depth <= 0 && !self.in_string;
        if !closed && self.buf.len() < self.next_parse {
            return Document::Incomplete;
        }
        self.parsed += self.buf.len() as u64;
        match serde_json::from_slice::<serde_json::Value>(&self.buf) {
            Ok(_) => Document::Complete,
            Err(e) if e.is_eof() => {
                self.next_parse = self.buf.len() * 2;
                Document::Incomplete
            }
            Err(e) => {
                self.clear();
                Document::Invalid(e)
            }
        }
    }

    fn track(&mut self, b: u8) {
        if self.in_string {
            match b {
                _ if self.escaped => self.escaped = false,
                b'\\' => self.escaped = true,
                b'"' => self.in_string = false,
                _ => {}
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => self.depth -= 1,
            _ => {}
        }
        self.started |= !b.is_ascii_whitespace();
    }

    /// The document held.
    pub(in crate::core) fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub(in crate::core) fn len(&self) -> usize {
        self.buf.len()
    }

    /// The memory the document takes.
    pub(in crate::core) fn memory_bytes(&self) -> u64 {
        self.buf.capacity() as u64
    }

    /// Nothing but whitespace is held.
    pub(in crate::core) fn is_blank(&self) -> bool {
        !self.started
    }

    /// Drops what is held, and its memory.
    pub(in crate::core) fn clear(&mut self) {
        *self = JsonDocument {
            parsed: self.parsed,
            ..JsonDocument::default()
        };
    }

    /// Bytes handed to the parser so far (for tests: the work done).
    #[cfg(test)]
    pub(in crate::core) fn parsed(&self) -> u64 {
        self.parsed
    }
}

/// Lines arriving in pieces: each `write`'s bytes are searched for line
/// ends once, and the lines they end are taken whole.
#[derive(Debug, Default)]
pub(in crate::core) struct Lines {
    /// The unfinished last line.
    pending: Vec<u8>,
    /// Bytes searched for a line end so far.
    searched: u64,
}

impl Lines {
    /// Adds `data`, and hands `each` every line it completes (without its
    /// newline), in order. The first error stops it: the rest of `data`
    /// and what was pending are dropped.
    pub(in crate::core) fn push<E>(
        &mut self,
        data: &[u8],
        mut each: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut from = self.pending.len();
        self.pending.extend_from_slice(data);
        let mut start = 0;
        while let Some(rel) = memchr(b'\n', &self.pending[from..]) {
            self.searched += rel as u64 + 1;
            let end = from + rel;
            if let Err(e) = each(&self.pending[start..end]) {
                self.pending = Vec::new();
                return Err(e);
            }
            start = end + 1;
            from = start;
        }
        self.searched += (self.pending.len() - from) as u64;
        self.pending.drain(..start);
        Ok(())
    }

    /// The unfinished last line.
    pub(in crate::core) fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// The memory the unfinished line takes.
    pub(in crate::core) fn memory_bytes(&self) -> u64 {
        self.pending.capacity() as u64
    }

    /// Takes the unfinished last line.
    pub(in crate::core) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }

    /// Drops the unfinished last line, and its memory.
    pub(in crate::core) fn clear(&mut self) {
        self.pending = Vec::new();
    }

    /// Bytes searched for a line end so far (for tests: the work done).
    #[cfg(test)]
    pub(in crate::core) fn searched(&self) -> u64 {
        self.searched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_sent_a_byte_at_a_time_is_parsed_a_few_times_over() {
        let pad = "x".repeat(100_000);
        let json = format!(r#"{{"sessionId":"a","name":"{pad} {{[\"}}","n":[1,{{"b":2}}]}}"#);
        let mut doc = JsonDocument::default();
        let (last, head) = json.as_bytes().split_last().unwrap();
        for b in head {
            assert!(matches!(doc.push(&[*b]), Document::Incomplete));
        }
        assert!(matches!(doc.push(&[*last]), Document::Complete));
        assert_eq!(doc.bytes(), json.as_bytes());
        assert!(
            doc.parsed() <= 4 * json.len() as u64,
            "{} bytes parsed for {}",
            doc.parsed(),
            json.len()
        );
    }

    #[test]
    fn a_document_is_complete_at_the_write_that_closes_it_and_invalid_early() {
        let mut doc = JsonDocument::default();
        assert!(matches!(doc.push(b"  \n"), Document::Incomplete));
        assert!(doc.is_blank());
        assert!(matches!(doc.push(br#"{"a":"}"#), Document::Incomplete));
        assert!(matches!(doc.push(br#""}"#), Document::Complete));
        // Text that is not JSON is refused at once, whole or in pieces.
        let mut doc = JsonDocument::default();
        assert!(matches!(doc.push(b"{not json"), Document::Invalid(_)));
        assert_eq!(doc.len(), 0);
        let mut doc = JsonDocument::default();
        assert!(matches!(doc.push(b"{"), Document::Incomplete));
        assert!(matches!(doc.push(b"not json"), Document::Invalid(_)));
        // What follows a closed document is part of what is parsed.
        let mut doc = JsonDocument::default();
        assert!(matches!(doc.push(b"{}{"), Document::Invalid(_)));
        // Scalars close at once.
        let mut doc = JsonDocument::default();
        assert!(matches!(doc.push(b"\"text\""), Document::Complete));
        let mut doc = JsonDocument::default();
        assert!(matches!(doc.push(b"tr"), Document::Incomplete));
        assert!(matches!(doc.push(b"ue"), Document::Complete));
    }

    #[test]
    fn lines_sent_a_byte_at_a_time_are_searched_once() {
        let text = format!("{}\n\nb\n{}", "a".repeat(100_000), "c".repeat(10));
        let mut lines = Lines::default();
        let mut got: Vec<Vec<u8>> = Vec::new();
        for b in text.as_bytes() {
            lines
                .push(&[*b], |l| {
                    got.push(l.to_vec());
                    Ok::<(), ()>(())
                })
                .unwrap();
        }
        assert_eq!(got, [b"a".repeat(100_000), Vec::new(), b"b".to_vec()]);
        assert_eq!(lines.pending(), b"c".repeat(10).as_slice());
        assert_eq!(lines.searched(), text.len() as u64);
        // Many lines in one write: each is taken in order.
        let mut lines = Lines::default();
        let many = "x\n".repeat(10_000);
        let mut n = 0;
        lines
            .push(many.as_bytes(), |l| {
                assert_eq!(l, b"x");
                n += 1;
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!(n, 10_000);
        assert!(lines.pending().is_empty());
        // An error stops it, and drops the rest.
        let mut lines = Lines::default();
        let err = lines.push(b"1\n2\n3\n4", |l| if l == b"2" { Err(2) } else { Ok(()) });
        assert_eq!(err, Err(2));
        assert!(lines.pending().is_empty());
    }
}
