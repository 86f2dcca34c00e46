//! Byte-level helpers shared by the parsers and the index: a fast newline
//! search, a forgiving JSON line parser, and a skimmer that reads only the
//! first keys of a JSON object so most lines are classified without parsing.

use serde_json::Value;

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;
const NL: u64 = LO * b'\n' as u64;

#[inline]
fn word(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(w)
}

#[inline]
fn zero_mask(w: u64) -> u64 {
    w.wrapping_sub(LO) & !w & HI
}

/// Position of the first `\n` in `hay`. Eight bytes at a time: the index
/// scan spends nearly all its time here, on lines it never parses.
pub(crate) fn find_newline(hay: &[u8]) -> Option<usize> {
    let n = hay.len();
    let mut i = 0;
    while i + 32 <= n {
        let a = zero_mask(word(hay, i) ^ NL);
        let b = zero_mask(word(hay, i + 8) ^ NL);
        let c = zero_mask(word(hay, i + 16) ^ NL);
        let d = zero_mask(word(hay, i + 24) ^ NL);
        if (a | b | c | d) != 0 {
            for (k, m) in [a, b, c, d].into_iter().enumerate() {
                if m != 0 {
                    // The lowest flagged byte is exact: borrows only run upwards.
                    return Some(i + 8 * k + (m.trailing_zeros() / 8) as usize);
                }
            }
        }
        i += 32;
    }
    while i + 8 <= n {
        let m = zero_mask(word(hay, i) ^ NL);
        if m != 0 {
            return Some(i + (m.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    hay[i..].iter().position(|&b| b == b'\n').map(|p| i + p)
}

const QUOTE: u64 = LO * b'"' as u64;
const BACKSLASH: u64 = LO * b'\\' as u64;

/// Position of the first `"` or `\\` in `hay`, eight bytes at a time: how a
/// long string value is skipped.
pub(crate) fn find_quote_or_backslash(hay: &[u8]) -> Option<usize> {
    let n = hay.len();
    let mut i = 0;
    while i + 8 <= n {
        let w = word(hay, i);
        let m = zero_mask(w ^ QUOTE) | zero_mask(w ^ BACKSLASH);
        if m != 0 {
            return Some(i + (m.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    hay[i..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\')
        .map(|p| i + p)
}

/// Index just past the string whose opening quote is at `b[start - 1]`.
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut j = start;
    loop {
        j += find_quote_or_backslash(b.get(j..)?)?;
        if b[j] == b'"' {
            return Some(j + 1);
        }
        j += 2;
    }
}

/// Parses one store line. Bytes that are not UTF-8 are replaced rather than
/// failing the line.
pub(crate) fn parse_line(line: &[u8]) -> Result<Value, serde_json::Error> {
    match serde_json::from_slice(line) {
        Ok(v) => Ok(v),
        Err(e) => {
            if std::str::from_utf8(line).is_ok() {
                return Err(e);
            }
            serde_json::from_str(&String::from_utf8_lossy(line))
        }
    }
}

/// True for a line with nothing but whitespace.
pub(crate) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

/// Walks a JSON text from the front without building anything. Every method
/// returns `None` when the bytes end (a prefix of a long line) or are not
/// JSON; callers then fall back to a full parse, never to a guess.
pub(crate) struct Skim<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Skim<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Skim { b, i: 0 }
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\r' | b'\n') {
            self.i += 1;
        }
    }

    /// The next significant byte, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        if self.peek()? == c {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    pub fn begin_object(&mut self) -> Option<()> {
        self.eat(b'{')
    }

    pub fn begin_array(&mut self) -> Option<()> {
        self.eat(b'[')
    }

    /// The next key of the object being walked (its raw bytes, escapes left
    /// as they are), or `Some(None)` at the closing brace.
    pub fn next_key(&mut self) -> Option<Option<&'a [u8]>> {
        match self.peek()? {
            b'}' => {
                self.i += 1;
                return Some(None);
            }
            b',' => self.i += 1,
            _ => {}
        }
        let k = self.string()?;
        self.eat(b':')?;
        Some(Some(k))
    }

    /// A string value's raw bytes (between the quotes, escapes untouched).
    pub fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        let end = string_end(self.b, start)?;
        self.i = end;
        Some(&self.b[start..end - 1])
    }

    /// `true` or `false`; anything else is `None`.
    pub fn boolean(&mut self) -> Option<bool> {
        self.ws();
        let rest = &self.b[self.i..];
        if rest.starts_with(b"true") {
            self.i += 4;
            Some(true)
        } else if rest.starts_with(b"false") {
            self.i += 5;
            Some(false)
        } else {
            None
        }
    }

    /// Skips one value of any kind.
    pub fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                let b = self.b;
                let mut depth = 0usize;
                let mut j = self.i;
                while j < b.len() {
                    match b[j] {
                        b'"' => j = string_end(b, j + 1)? - 1,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i = j + 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                None
            }
            _ => {
                let start = self.i;
                while self.i < self.b.len()
                    && !matches!(
                        self.b[self.i],
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'
                    )
                {
                    self.i += 1;
                }
                (self.i > start && self.i < self.b.len()).then_some(())
            }
        }
    }
}

/// Decodes a raw JSON string body taken from [`Skim`] (escapes included).
pub(crate) fn unescape(raw: &[u8]) -> Option<String> {
    if !raw.contains(&b'\\') {
        return Some(String::from_utf8_lossy(raw).into_owned());
    }
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    match parse_line(&quoted) {
        Ok(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// The value of the last `"timestamp":"…"` in `bytes` (escaped occurrences
/// inside strings do not match).
pub(crate) fn last_timestamp(bytes: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"timestamp\":\"";
    let pos = bytes.windows(KEY.len()).rposition(|w| w == KEY)?;
    let rest = &bytes[pos + KEY.len()..];
    let end = rest.iter().position(|&b| b == b'"')?;
    let ts = &rest[..end];
    (ts.len() <= 40 && ts.iter().all(|b| b.is_ascii_graphic()))
        .then(|| String::from_utf8_lossy(ts).into_owned())
}

/// Removes terminal escape sequences and other control characters (keeps
/// tabs and newlines); of a line redrawn with `\r`, keeps what was left.
pub(crate) fn clean_terminal_text(s: &str) -> String {
    if !s
        .bytes()
        .any(|b| b == 0x1b || b == b'\r' || (b < 0x20 && b != b'\n' && b != b'\t'))
    {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                Some('[') => {
                    chars.next();
                    // CSI: parameters and intermediates, then one final byte.
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    chars.next();
                    // OSC: up to BEL or ST.
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                Some(_) => {
                    chars.next();
                }
                None => {}
            },
            '\r' => {
                if chars.peek().is_some_and(|&n| n != '\n') {
                    // A redraw: what follows replaces the line so far.
                    let line_start = out.rfind('\n').map_or(0, |p| p + 1);
                    out.truncate(line_start);
                }
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The first `max` characters of `s`, with `…` when cut.
pub(crate) fn cut_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A title from a prompt: its first non-empty line, trimmed, at most 80 chars.
pub(crate) fn title_from_text(s: &str) -> Option<String> {
    let line = s.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(cut_chars(line, 80))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newline_search_matches_naive() {
        let mut data = vec![b'x'; 300];
        for p in [0usize, 1, 7, 8, 31, 32, 33, 63, 64, 100, 255, 299] {
            data.iter_mut().for_each(|b| *b = b'x');
            data[p] = b'\n';
            for start in [0usize, 1, 5] {
                let expect = data[start..].iter().position(|&b| b == b'\n');
                assert_eq!(find_newline(&data[start..]), expect, "p={p} start={start}");
            }
        }
        assert_eq!(find_newline(b""), None);
        assert_eq!(find_newline(&[0x8a, 0x0b, 0x0a]), Some(2));
        let hi: Vec<u8> = (0..=255u8).filter(|&b| b != b'\n').collect();
        assert_eq!(find_newline(&hi), None);
    }

    #[test]
    fn skim_walks_keys_and_values() {
        let line = br#" {"a" : [1,{"x":"}"}], "b":"q\"x", "c":true,"d":null,"e":{"f":1}}"#;
        let mut s = Skim::new(line);
        s.begin_object().unwrap();
        assert_eq!(s.next_key(), Some(Some(&b"a"[..])));
        s.skip_value().unwrap();
        assert_eq!(s.next_key(), Some(Some(&b"b"[..])));
        assert_eq!(s.string(), Some(&br#"q\"x"#[..]));
        assert_eq!(s.next_key(), Some(Some(&b"c"[..])));
        assert_eq!(s.boolean(), Some(true));
        assert_eq!(s.next_key(), Some(Some(&b"d"[..])));
        s.skip_value().unwrap();
        assert_eq!(s.next_key(), Some(Some(&b"e"[..])));
        s.skip_value().unwrap();
        assert_eq!(s.next_key(), Some(None));
        // A prefix ends in the middle: no answer rather than a wrong one.
        let mut s = Skim::new(br#"{"a":"unterminated"#);
        s.begin_object().unwrap();
        s.next_key().unwrap();
        assert_eq!(s.string(), None);
    }

    #[test]
    fn lossy_parse_and_cleaning() {
        let v = parse_line(b"{\"a\":\"x\xffy\"}").unwrap();
        assert_eq!(v["a"], "x\u{fffd}y");
        assert_eq!(
            clean_terminal_text("\u{1b}[2mdim\u{1b}[22m ok\r\n50%\r100%"),
            "dim ok\n100%"
        );
        assert_eq!(unescape(br#"a\"b\u00e9"#).as_deref(), Some("a\"bé"));
        assert_eq!(
            last_timestamp(br#"x","timestamp":"2026-01-01T00:00:00.000Z","uuid":"u"}"#).as_deref(),
            Some("2026-01-01T00:00:00.000Z")
        );
        assert_eq!(
            title_from_text("\n  hello world \nmore").as_deref(),
            Some("hello world")
        );
        assert_eq!(cut_chars("héllo", 2), "hé…");
    }
}
