//! What a model's tokens cost: a dated table shipped with the program,
//! overridable per model in the config file (SPEC §14). A model found in
//! neither has no price, and its cost is unknown, never guessed.

use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// When the shipped table was last checked against the vendors' price lists.
pub const PRICES_DATED: &str = "2026-11-01";

/// US dollars per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_write: f64,
    #[serde(default)]
    pub cache_read: f64,
    /// A cache write kept an hour (Claude's `ephemeral_1h`); when not
    /// given, as a five-minute write.
    #[serde(default)]
    pub cache_write_1h: Option<f64>,
}

const fn price(input: f64, output: f64, cache_write: f64, cache_read: f64) -> ModelPrice {
    ModelPrice {
        input,
        output,
        cache_write,
        cache_read,
        cache_write_1h: None,
    }
}

/// Anthropic's: an hour's cache write costs twice the input.
const fn claude(input: f64, output: f64, cache_write: f64, cache_read: f64) -> ModelPrice {
    ModelPrice {
        input,
        output,
        cache_write,
        cache_read,
        cache_write_1h: Some(input * 2.0),
    }
}

/// The shipped table: a model name or the start of one (the longest start
/// that ends at a `-` or the name's end wins, so a dated name finds its
/// family).
const SHIPPED: &[(&str, ModelPrice)] = &[
    // Anthropic: cache write is the 5-minute write.
    ("claude-opus-4-5", claude(5.0, 25.0, 6.25, 0.5)),
    ("claude-opus-4-6", claude(5.0, 25.0, 6.25, 0.5)),
    ("claude-opus-4-7", claude(5.0, 25.0, 6.25, 0.5)),
    ("claude-opus-4-1", claude(15.0, 75.0, 18.75, 1.5)),
    ("claude-opus-4", claude(15.0, 75.0, 18.75, 1.5)),
    ("claude-sonnet-4-5", claude(3.0, 15.0, 3.75, 0.3)),
    ("claude-sonnet-4-6", claude(3.0, 15.0, 3.75, 0.3)),
    ("claude-sonnet-4", claude(3.0, 15.0, 3.75, 0.3)),
    ("claude-3-7-sonnet", claude(3.0, 15.0, 3.75, 0.3)),
    ("claude-3-5-sonnet", claude(3.0, 15.0, 3.75, 0.3)),
    ("claude-haiku-4-5", claude(1.0, 5.0, 1.25, 0.1)),
    ("claude-3-5-haiku", claude(0.8, 4.0, 1.0, 0.08)),
    ("claude-3-haiku", claude(0.25, 1.25, 0.3, 0.03)),
    // OpenAI: cached input is read at the cache price; no cache write.
    ("gpt-5", price(1.25, 10.0, 0.0, 0.125)),
    ("gpt-5-codex", price(1.25, 10.0, 0.0, 0.125)),
    ("gpt-5-mini", price(0.25, 2.0, 0.0, 0.025)),
    ("gpt-5-nano", price(0.05, 0.4, 0.0, 0.005)),
    ("gpt-5.1", price(1.25, 10.0, 0.0, 0.125)),
    ("gpt-5.1-codex", price(1.25, 10.0, 0.0, 0.125)),
    ("gpt-5.1-codex-mini", price(0.25, 2.0, 0.0, 0.025)),
    ("gpt-5.2", price(1.75, 14.0, 0.0, 0.175)),
    ("gpt-5.2-codex", price(1.75, 14.0, 0.0, 0.175)),
    ("gpt-5.5", price(5.0, 30.0, 0.0, 0.5)),
    ("gpt-4.1", price(2.0, 8.0, 0.0, 0.5)),
    ("gpt-4.1-mini", price(0.4, 1.6, 0.0, 0.1)),
    ("o3", price(2.0, 8.0, 0.0, 0.5)),
    ("o4-mini", price(1.1, 4.4, 0.0, 0.275)),
    // Google: prompts up to 200k tokens.
    ("gemini-2.5-pro", price(1.25, 10.0, 0.0, 0.31)),
    ("gemini-2.5-flash", price(0.3, 2.5, 0.0, 0.075)),
    ("gemini-2.5-flash-lite", price(0.1, 0.4, 0.0, 0.025)),
];

/// The prices in force: the config's, then the shipped table's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    configured: BTreeMap<String, ModelPrice>,
}

impl Prices {
    /// The shipped table with the config file's `prices` over it:
    /// `{"prices": {"MODEL": {"input": N, "output": N, "cache_write": N,
    /// "cache_read": N}}}`, dollars per million tokens.
    pub fn from_config(doc: Option<&serde_json::Value>) -> Result<Prices> {
        let Some(value) = doc.filter(|v| !v.is_null()) else {
            return Ok(Prices::default());
        };
        let configured: BTreeMap<String, ModelPrice> = serde_json::from_value(value.clone())
            .map_err(|e| {
                Error::invalid(format!(
                    "\"prices\" maps model names to {{\"input\", \"output\", \"cache_write\", \"cache_read\", \"cache_write_1h\"}} in dollars per million tokens: {e}"
                ))
            })?;
        for (model, p) in &configured {
            let all = [
                p.input,
                p.output,
                p.cache_write,
                p.cache_read,
                p.cache_write_1h.unwrap_or(0.0),
            ];
            if model.is_empty() || all.iter().any(|n| !n.is_finite() || *n < 0.0) {
                return Err(Error::invalid(format!(
                    "\"prices\": {model:?} needs a name and prices that are numbers of at least 0"
                )));
            }
        }
        Ok(Prices { configured })
    }

    /// The price of `model`, if it has one.
    pub fn of(&self, model: &str) -> Option<ModelPrice> {
        if let Some(p) = self.configured.get(model) {
            return Some(*p);
        }
        let configured = self.configured.iter().map(|(k, v)| (k.as_str(), *v));
        longest_family(configured, model).or_else(|| longest_family(SHIPPED.iter().copied(), model))
    }
}

/// The entry whose name is `model` or the longest start of it that ends
/// where a `-` follows.
fn longest_family<'a>(
    table: impl Iterator<Item = (&'a str, ModelPrice)>,
    model: &str,
) -> Option<ModelPrice> {
    table
        .filter(|(name, _)| {
            model == *name
                || (model.starts_with(name) && model.as_bytes().get(name.len()) == Some(&b'-'))
        })
        .max_by_key(|(name, _)| name.len())
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dated_name_finds_its_family_and_the_longest_one_wins() {
        let prices = Prices::default();
        assert_eq!(prices.of("claude-sonnet-4-5-20250929").unwrap().input, 3.0);
        assert_eq!(prices.of("claude-opus-4-6").unwrap().input, 5.0);
        assert_eq!(prices.of("claude-opus-4-20250514").unwrap().input, 15.0);
        assert_eq!(prices.of("gpt-5-mini").unwrap().input, 0.25);
        assert_eq!(prices.of("gpt-5").unwrap().input, 1.25);
        assert_eq!(prices.of("gemini-2.5-flash-lite").unwrap().input, 0.1);
        assert_eq!(prices.of("fake-model"), None);
        // A name that only starts the same, without a `-` after, is another model.
        assert_eq!(prices.of("gpt-50"), None);
    }

    #[test]
    fn the_config_goes_first_and_bad_prices_are_refused() {
        let doc = serde_json::json!({"fake-model": {"input": 1, "output": 2}, "gpt-5": {"input": 9, "output": 9}});
        let prices = Prices::from_config(Some(&doc)).unwrap();
        assert_eq!(prices.of("fake-model").unwrap().output, 2.0);
        assert_eq!(prices.of("gpt-5-codex").unwrap().input, 9.0);
        for bad in [
            serde_json::json!({"m": {"input": -1, "output": 0}}),
            serde_json::json!({"m": {"input": 1}}),
            serde_json::json!({"m": {"input": 1, "output": 1, "extra": 1}}),
            serde_json::json!([1]),
        ] {
            assert!(Prices::from_config(Some(&bad)).is_err(), "{bad}");
        }
    }
}
