//! Byte-level helpers shared by the parsers and the index: a forgiving JSON
//! line parser, a skimmer that reads only the first keys of a JSON object so
//! most lines are classified without parsing, and pieces for reading a few fields of a line without building a `Value`
//! (yet refusing exactly the lines a `Value` parse refuses).

use std::borrow::Cow;
use std::fmt;
use std::io::{self, BufRead};

use memchr::{memchr, memchr2, memmem};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// Index just past the string whose opening quote is at `b[start - 1]`.
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut j = start;
    loop {
        j += quote_or_backslash(b.get(j..)?)?;
        if b[j] == b'"' {
            return Some(j + 1);
        }
        j += 2;
    }
}

/// Position of the first `"` or `\\`. Most strings skimmed are keys and
/// short values, ended within a few bytes: those are looked at directly,
/// which costs less than setting up a vector search.
#[inline]
fn quote_or_backslash(hay: &[u8]) -> Option<usize> {
    const SHORT: usize = 16;
    let near = &hay[..hay.len().min(SHORT)];
    match near.iter().position(|&c| c == b'"' || c == b'\\') {
        Some(i) => Some(i),
        None => Some(SHORT + memchr2(b'"', b'\\', hay.get(SHORT..)?)?),
    }
}

/// A store line as text: bytes that are not UTF-8 are replaced rather than
/// failing the line. (`String::from_utf8_lossy` alone checks a valid line
/// more slowly than `from_utf8` does.)
pub(crate) fn line_text(line: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(line) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(line),
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

/// Visitor methods for the scalars (booleans, numbers, strings, null), all
/// giving `$v`: for values whose kind alone settles what they are.
macro_rules! scalars_give {
    ($t:ty, $v:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<$t, E> {
            Ok($v)
        }
        fn visit_i64<E>(self, _: i64) -> Result<$t, E> {
            Ok($v)
        }
        fn visit_u64<E>(self, _: u64) -> Result<$t, E> {
            Ok($v)
        }
        fn visit_f64<E>(self, _: f64) -> Result<$t, E> {
            Ok($v)
        }
        fn visit_str<E>(self, _: &str) -> Result<$t, E> {
            Ok($v)
        }
        fn visit_unit<E>(self) -> Result<$t, E> {
            Ok($v)
        }
    };
}
pub(crate) use scalars_give;

/// Any JSON value, read as far as [`parse_line`] would read it (strings
/// decoded and checked, numbers converted) but kept nowhere: a line that
/// parses with it in place of the fields nobody needs parses as a `Value`.
/// (`serde::de::IgnoredAny` checks less, so it could accept a line that
/// `parse_line` refuses.)
pub(crate) struct Valid;

impl<'de> Deserialize<'de> for Valid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValidVisitor)
    }
}

pub(crate) struct ValidVisitor;

impl<'de> Visitor<'de> for ValidVisitor {
    type Value = Valid;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    scalars_give!(Valid, Valid);
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Valid, A::Error> {
        while a.next_element::<Valid>()?.is_some() {}
        Ok(Valid)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Valid, A::Error> {
        while a.next_key::<Valid>()?.is_some() {
            a.next_value::<Valid>()?;
        }
        Ok(Valid)
    }
}

/// A value whose kind matters: a string (borrowed from the line unless it
/// had escapes), a boolean, or anything else (checked like [`Valid`]).
#[derive(Debug)]
pub(crate) enum Field<'a> {
    Str(Cow<'a, str>),
    Bool(bool),
    Other,
}

impl Field<'_> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Field::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Field::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Field<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor)
    }
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Field<'de>, E> {
        Ok(Field::Bool(b))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Field<'de>, E> {
        Ok(Field::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Field<'de>, E> {
        Ok(Field::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Field<'de>, E> {
        Ok(Field::Other)
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Owned(s.to_string())))
    }
    fn visit_unit<E>(self) -> Result<Field<'de>, E> {
        Ok(Field::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Field<'de>, A::Error> {
        ValidVisitor.visit_seq(a).map(|_| Field::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Field<'de>, A::Error> {
        ValidVisitor.visit_map(a).map(|_| Field::Other)
    }
}

/// An object key, decoded the way `Value` decodes it; borrowed unless it
/// had escapes.
pub(crate) struct Key<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Field::deserialize(d)? {
            Field::Str(s) => Ok(Key(s)),
            _ => Err(de::Error::custom("object key is not a string")),
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

    #[inline]
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\r' | b'\n') {
            self.i += 1;
        }
    }

    /// Where the walk is.
    pub fn pos(&self) -> usize {
        self.i
    }

    /// Moves the walk to `i`, just after a value the caller knows about.
    pub fn set_pos(&mut self, i: usize) {
        self.i = i;
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
    if memchr(b'\\', raw).is_none() {
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

/// A store's RFC 3339 `timestamp` as ms since the epoch.
pub(crate) fn timestamp_ms(text: &str) -> Option<u64> {
    let at = text.parse::<jiff::Timestamp>().ok()?;
    u64::try_from(at.as_millisecond()).ok()
}

/// The value of the last `"timestamp":"…"` in `bytes` (escaped occurrences
/// inside strings do not match).
pub(crate) fn last_timestamp(bytes: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"timestamp\":\"";
    let pos = memmem::rfind(bytes, KEY)?;
    let rest = &bytes[pos + KEY.len()..];
    let end = memchr(b'"', rest)?;
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
    fn string_ends_are_found_on_both_sides_of_the_short_path() {
        for len in [0usize, 1, 15, 16, 17, 40, 100] {
            for at in 0..len {
                for c in [b'"', b'\\'] {
                    let mut hay = vec![b'x'; len];
                    hay[at] = c;
                    assert_eq!(quote_or_backslash(&hay), Some(at), "len={len} at={at}");
                }
            }
            assert_eq!(quote_or_backslash(&vec![b'x'; len]), None);
        }
        assert_eq!(string_end(br#""a\"b" "#, 1), Some(6));
        assert_eq!(string_end(br#""a\""#, 1), None);
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

/// Longest store line read whole; a longer one is skipped, and the page
/// that holds it says so. (A real line is at most tens of MiB: a tool's
/// whole output, a pasted image.)
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// What [`read_line_capped`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NextLine {
    /// A line, in the buffer without its newline.
    Line,
    /// A line of this many bytes (without its newline), longer than the
    /// cap: read past, not kept.
    TooLong(u64),
    /// The end, or a last line without its newline yet (still being written).
    End,
}

/// Reads the next line into `line`, keeping at most `max` bytes of it: a
/// longer one is read to its end without being kept.
pub(crate) fn read_line_capped(
    r: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> io::Result<NextLine> {
    line.clear();
    let mut len = 0u64;
    loop {
        let buf = match r.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(NextLine::End);
        }
        let (part, used) = match memchr(b'\n', buf) {
            Some(nl) => (&buf[..nl], Some(nl + 1)),
            None => (buf, None),
        };
        len += part.len() as u64;
        if len <= max as u64 {
            line.extend_from_slice(part);
        } else if !line.is_empty() {
            *line = Vec::new();
        }
        let consumed = used.unwrap_or(buf.len());
        r.consume(consumed);
        if used.is_some() {
            return Ok(if len > max as u64 {
                NextLine::TooLong(len)
            } else {
                NextLine::Line
            });
        }
    }
}
