//! Session keys `ENGINE:ID` and their validation (SPEC §2).

use crate::error::{Error, Result};
use crate::input_checks::preview;
use std::fmt;
use std::sync::Arc;

/// Longest ID: one leading alphanumeric and up to 127 more.
pub const MAX_ID_LEN: usize = 128;

/// A validated `ENGINE:ID`, kept as one shared string: listing thousands
/// of sessions clones keys, and a clone is then a count, not two copies.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    text: Arc<str>,
    /// Where the `:` is.
    colon: usize,
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionKey")
            .field("engine", &self.engine())
            .field("id", &self.id())
            .finish()
    }
}

/// By engine, then id (not by the joined text: `a-b:x` sorts after `a:x`).
impl Ord for SessionKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.engine(), self.id()).cmp(&(other.engine(), other.id()))
    }
}

impl PartialOrd for SessionKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

fn valid_name(s: &str, max: usize) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= max
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl SessionKey {
    pub fn new(engine: &str, id: &str) -> Result<Self> {
        if !valid_name(engine, 32) {
            return Err(Error::invalid(format!(
                "engine name {} must match [A-Za-z0-9][A-Za-z0-9._-]{{0,31}}",
                preview(engine)
            )));
        }
        if !valid_name(id, MAX_ID_LEN) {
            return Err(Error::invalid(format!(
                "session id {} must match [A-Za-z0-9][A-Za-z0-9._-]{{0,127}}",
                preview(id)
            )));
        }
        Ok(SessionKey {
            text: format!("{engine}:{id}").into(),
            colon: engine.len(),
        })
    }

    /// Parses `ENGINE:ID`.
    pub fn parse(text: &str) -> Result<Self> {
        match text.split_once(':') {
            Some((engine, id)) => Self::new(engine, id),
            None => Err(Error::invalid(format!(
                "{} is not a session key: expected ENGINE:ID",
                preview(text)
            ))),
        }
    }

    pub fn engine(&self) -> &str {
        &self.text[..self.colon]
    }

    pub fn id(&self) -> &str {
        &self.text[self.colon + 1..]
    }

    /// `ENGINE:ID`, without making a new string.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_well_formed_keys() {
        let key = SessionKey::parse("shell:build").unwrap();
        assert_eq!((key.engine(), key.id()), ("shell", "build"));
        assert!(SessionKey::parse("claude:0b7c-11.x_y").is_ok());
        assert!(SessionKey::parse(&format!("shell:{}", "a".repeat(128))).is_ok());
    }

    #[test]
    fn order_is_by_engine_then_id() {
        let mut keys: Vec<SessionKey> = ["a-b:x", "a:y", "a:x", "b:a"]
            .into_iter()
            .map(|k| SessionKey::parse(k).unwrap())
            .collect();
        keys.sort();
        let names: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        assert_eq!(names, ["a:x", "a:y", "a-b:x", "b:a"]);
        assert_eq!(keys[2].as_str(), "a-b:x");
    }

    #[test]
    fn refuses_malformed_keys() {
        for bad in [
            "shell:a b",
            "shell:..",
            "shell:a/b",
            "shell:/",
            "shell:",
            "shell:-x",
            "shell:.x",
            "shell:a\u{1}",
            "nocolon",
            ":id",
            "she ll:id",
        ] {
            let err = SessionKey::parse(bad).unwrap_err();
            assert_eq!(err.errno, libc::EINVAL, "{bad:?}");
        }
        assert!(SessionKey::parse(&format!("shell:{}", "a".repeat(129))).is_err());
        assert!(SessionKey::parse(&format!("shell:{}", "a".repeat(200))).is_err());
    }
}
