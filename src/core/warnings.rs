//! Each refusal is one warning in the log. A refusal can be recorded more
//! than once on its way out (a rename that commits a document recorded
//! by the commit, a write refused again at close), and a writer may
//! repeat the same refused call at once; those repeats go to the debug log.

use crate::sync::lock;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a warning counts as just given.
const REPEAT_WINDOW: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
pub(super) struct Warnings {
    /// The last warning: where (a session key, or none for the root), what, when.
    last: Mutex<Option<(String, String, Instant)>>,
}

impl Warnings {
    /// Logs `message` about `scope` (a session key; empty for the root) as
    /// a warning, unless it repeats the one just given there (the same
    /// words, or those words with the call's context before them).
    /// Whether it was a warning.
    pub(super) fn warn(&self, scope: &str, message: &str) -> bool {
        let now = Instant::now();
        let mut last = lock(&self.last);
        let repeat = last.as_ref().is_some_and(|(place, text, at)| {
            place == scope
                && now.duration_since(*at) < REPEAT_WINDOW
                && (message.ends_with(text.as_str()) || text.ends_with(message))
        });
        let shown = if scope.is_empty() {
            message.to_string()
        } else {
            format!("{scope}: {message}")
        };
        if repeat {
            log::debug!("(again) {shown}");
        } else {
            log::warn!("{shown}");
        }
        *last = Some((scope.to_string(), message.to_string(), now));
        !repeat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_recorded_again_with_its_context_is_one_warning() {
        let w = Warnings::default();
        let repeats = |scope: &str, message: &str| !w.warn(scope, message);
        assert!(!repeats("shell:a", "meta.json is not valid JSON"));
        assert!(repeats(
            "shell:a",
            "rename x -> meta.json: meta.json is not valid JSON"
        ));
        assert!(repeats(
            "shell:a",
            "rename x -> meta.json: meta.json is not valid JSON"
        ));
        // Elsewhere, or other words: a warning of its own.
        assert!(!repeats("shell:b", "meta.json is not valid JSON"));
        assert!(!repeats("shell:b", "title has control characters"));
        assert!(!repeats("", "title has control characters"));
    }
}
