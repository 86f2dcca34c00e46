//! Session keys `ENGINE:ID` and their validation (SPEC §2).

use crate::error::{Error, Result};
use crate::metaedit::preview;
use std::fmt;

/// Longest ID: one leading alphanumeric and up to 127 more.
pub const MAX_ID_LEN: usize = 128;

/// A validated `ENGINE:ID`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    engine: String,
    id: String,
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
            engine: engine.to_string(),
            id: id.to_string(),
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
        &self.engine
    }

    pub fn id(&self) -> &str {
        &self.id
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.engine, self.id)
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
