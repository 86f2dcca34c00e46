//! Checks every parser of user input shares: a bounded preview of what was
//! refused, for messages, and JSON that names one key twice refused.

use crate::error::{Error, Result};

/// At most a few dozen characters of `s`, quoted, for messages: a refused
/// 10 MiB write must not become a 10 MiB `status.error` or log line.
pub fn preview(s: &str) -> String {
    const MAX: usize = 40;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{:?}…", &s[..cut]),
        None => format!("{s:?}"),
    }
}

/// Refuses a JSON text in which an object holds one key twice: a parser
/// would keep one of them silently, and which one is up to the parser.
pub fn refuse_duplicate_keys(text: &str, what: &str) -> Result<()> {
    use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
    struct Checked;
    struct Walk;
    impl<'de> Visitor<'de> for Walk {
        type Value = Checked;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> std::result::Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_i64<E>(self, _: i64) -> std::result::Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_u64<E>(self, _: u64) -> std::result::Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_f64<E>(self, _: f64) -> std::result::Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_str<E>(self, _: &str) -> std::result::Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_unit<E>(self) -> std::result::Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_seq<A: SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> std::result::Result<Checked, A::Error> {
            while seq.next_element::<Checked>()?.is_some() {}
            Ok(Checked)
        }
        fn visit_map<A: MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<Checked, A::Error> {
            let mut keys = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !keys.insert(key.clone()) {
                    return Err(A::Error::custom(format!("duplicate key {}", preview(&key))));
                }
                map.next_value::<Checked>()?;
            }
            Ok(Checked)
        }
    }
    impl<'de> Deserialize<'de> for Checked {
        fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Checked, D::Error> {
            d.deserialize_any(Walk)
        }
    }
    serde_json::from_str::<Checked>(text)
        .map(drop)
        .map_err(|e| Error::invalid(format!("{what} is not valid JSON: {e}")).with_source(e))
}
