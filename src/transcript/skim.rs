//! What a listing needs from a store, read from bounded windows of it (its
//! head, its tail, or what was appended since the last look) rather than
//! from a turn index: the first row's time, the working directory, the
//! store's own title and the first prompt.

use super::claude::{self, TitleKind};
use super::codex;
use super::gemini;
use super::model::ParseOptions;
use super::opencode;
use super::scan::{is_blank, line_text, parse_line, timestamp_ms, title_from_text};
use super::store::StoreKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the windows read so far say; later windows add to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skim {
    /// Time of the first row that has one, milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Codex: `session_meta.payload.id`; Gemini: the header's `sessionId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ai_title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_prompt: Option<String>,
    /// Claude: whether the file is a subagent's own (decided by its first row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidechain: Option<bool>,
}

impl Skim {
    /// The store's own title, else the first prompt (as the turn index says).
    pub fn title(&self) -> Option<&str> {
        self.custom_title
            .as_deref()
            .or(self.ai_title.as_deref())
            .or(self.summary.as_deref())
            .or(self.first_prompt.as_deref())
    }

    /// Reads the complete lines of `window` (a partial first line must be
    /// cut off by the caller; a partial last line is ignored). Returns how
    /// many bytes of complete lines were read.
    pub fn read(&mut self, kind: StoreKind, window: &[u8]) -> usize {
        let mut at = 0;
        while let Some(rel) = memchr::memchr(b'\n', &window[at..]) {
            let line = &window[at..at + rel];
            at += rel + 1;
            if is_blank(line) {
                continue;
            }
            match kind {
                StoreKind::Claude => self.claude_row(line),
                StoreKind::Codex => {
                    if let Ok(row) = parse_line(line) {
                        self.codex_row(&row);
                    }
                }
                StoreKind::Gemini => {
                    if let Ok(row) = parse_line(line) {
                        self.gemini_row(&row);
                    }
                }
                StoreKind::Opencode => {
                    if let Ok(row) = parse_line(line) {
                        self.opencode_row(&row);
                    }
                }
            }
        }
        at
    }

    fn created_from(&mut self, timestamp: Option<&str>) {
        if self.created_ms.is_none() {
            self.created_ms = timestamp.and_then(timestamp_ms);
        }
    }

    /// A Claude line, read once by the same row parser the index uses.
    fn claude_row(&mut self, line: &[u8]) {
        let text = line_text(line);
        let Ok(row) = claude::RawRow::parse(&text) else {
            return;
        };
        self.created_from(row.timestamp());
        if self.sidechain.is_none() {
            self.sidechain = row.sidechain();
        }
        if self.cwd.is_none() {
            self.cwd = row.cwd().map(str::to_string);
        }
        let opts = ParseOptions::default();
        match claude::classify(row, self.sidechain.unwrap_or(false), &opts) {
            claude::Row::Prompt(m) if self.first_prompt.is_none() => {
                self.first_prompt =
                    title_from_text(&m.text()).or_else(|| Some("[image]".to_string()));
            }
            claude::Row::Title(kind, text) => {
                let slot = match kind {
                    TitleKind::Custom => &mut self.custom_title,
                    TitleKind::Ai => &mut self.ai_title,
                    TitleKind::Summary => &mut self.summary,
                };
                *slot = Some(text);
            }
            _ => {}
        }
    }

    fn codex_row(&mut self, row: &Value) {
        self.created_from(row.get("timestamp").and_then(Value::as_str));
        match codex::classify(row, &ParseOptions::default()) {
            codex::Row::Prompt(m) if self.first_prompt.is_none() => {
                self.first_prompt =
                    title_from_text(&m.text()).or_else(|| Some("[image]".to_string()));
            }
            codex::Row::Meta { id, cwd } => {
                if self.session_id.is_none() {
                    self.session_id = id;
                }
                if self.cwd.is_none() {
                    self.cwd = cwd;
                }
            }
            _ => {}
        }
    }
}

impl Skim {
    fn opencode_row(&mut self, row: &Value) {
        let opts = ParseOptions {
            turns_only: true,
            ..ParseOptions::default()
        };
        match opencode::classify(row, &opts) {
            opencode::Row::Prompt(m) if self.first_prompt.is_none() => {
                self.first_prompt =
                    title_from_text(&m.text()).or_else(|| Some("[image]".to_string()));
            }
            opencode::Row::Meta {
                id,
                cwd,
                title,
                created,
            } => {
                self.created_from(created.as_deref());
                if self.session_id.is_none() {
                    self.session_id = id;
                }
                if self.cwd.is_none() {
                    self.cwd = cwd;
                }
                if title.is_some() {
                    self.ai_title = title;
                }
            }
            _ => {}
        }
    }

    fn gemini_row(&mut self, row: &Value) {
        self.created_from(row.get("timestamp").and_then(Value::as_str));
        match gemini::classify(row, &ParseOptions::default()) {
            gemini::Row::Prompt(m) if self.first_prompt.is_none() => {
                self.first_prompt =
                    title_from_text(&m.text()).or_else(|| Some("[image]".to_string()));
            }
            gemini::Row::Meta { id, cwd, created } => {
                self.created_from(created.as_deref());
                if self.session_id.is_none() {
                    self.session_id = id;
                }
                if self.cwd.is_none() {
                    self.cwd = cwd;
                }
            }
            _ => {}
        }
    }
}

/// The bytes of `window` after its first newline: a window that starts
/// inside a line begins at the next one.
pub fn from_next_line(window: &[u8]) -> &[u8] {
    match memchr::memchr(b'\n', window) {
        Some(i) => &window[i + 1..],
        None => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_titles_prompt_cwd_and_the_first_time() {
        let lines = concat!(
            r#"{"type":"file-history-snapshot","messageId":"x"}"#,
            "\n",
            r#"{"type":"user","isSidechain":false,"cwd":"/w","timestamp":"2026-01-02T00:00:00.000Z","message":{"role":"user","content":"fix the build\nplease"}}"#,
            "\n",
            r#"{"type":"ai-title","aiTitle":"Build fix"}"#,
            "\n",
            r#"{"type":"user","timestamp":"2026-01-03T00:00:00.000Z","message":{"role":"user","content":"second"}}"#,
            "\n",
            r#"{"type":"custom-title","customTitle":"half"#,
        );
        let mut skim = Skim::default();
        let read = skim.read(StoreKind::Claude, lines.as_bytes());
        assert_eq!(read, lines.rfind('\n').unwrap() + 1);
        assert_eq!(skim.created_ms, Some(1_767_312_000_000));
        assert_eq!(skim.cwd.as_deref(), Some("/w"));
        assert_eq!(skim.first_prompt.as_deref(), Some("fix the build"));
        assert_eq!(skim.title(), Some("Build fix"));
        // A later window's title rows win.
        skim.read(
            StoreKind::Claude,
            b"{\"type\":\"custom-title\",\"customTitle\":\"Mine\"}\n",
        );
        assert_eq!(skim.title(), Some("Mine"));
        assert_eq!(skim.first_prompt.as_deref(), Some("fix the build"));
    }

    #[test]
    fn a_window_inside_a_line_starts_at_the_next() {
        assert_eq!(from_next_line(b"tail of a line\n{}\n"), b"{}\n");
        assert_eq!(from_next_line(b"no newline"), b"");
    }
}
