//! Agents' own conversations: parsers, turn index, console renderer (SPEC §7).
//!
//! A caller keeps one [`TurnIndex`] per store file, calls
//! [`TurnIndex::refresh`] before serving, then [`render_page`]:
//!
//! ```no_run
//! use sessionfs::transcript::{render_page, page_count, Limits, StoreKind, TurnIndex};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let path = std::path::Path::new("/home/me/.claude/projects/p/0000.jsonl");
//! let mut index = TurnIndex::new(StoreKind::Claude);
//! index.refresh(path)?;
//! let limits = Limits::default();
//! let last = page_count(&index, limits.page_turns) - 1;
//! let text = render_page(path, &index, last, &limits)?;
//! # Ok(()) }
//! ```
//!
//! - `model`: turns → messages → blocks, the same for every engine.
//! - `claude`, `codex`, `gemini`: what each store's rows mean (a Claude row is read
//!   once, into `claude::RawRow`, by the index and the pages alike).
//! - `scan`: line parsing, the first-keys skimmer, typed field readers.
//! - `index`: byte offsets of turns, extended as the file grows.
//! - `parse`: a byte range of a store into turns.
//! - `render`: turns as console text.
//! - `page`: pages of turns, with caps.
//! - `skim`: what a listing needs, from bounded windows of a store.
//! - `store`: opening store files (the seam for compressed ones).

mod claude;
mod codex;
mod gemini;
mod index;
pub mod model;
mod opencode;
mod page;
mod parse;
mod render;
mod scan;
mod skim;
mod store;

/// Generated stores for tests and benchmarks (not in the shipped binary).
#[cfg(any(test, feature = "testgen"))]
pub mod testgen;
#[cfg(test)]
mod tests;

pub use gemini::{header_session_id as gemini_session_id, row_cwd as gemini_row_cwd};
pub(crate) use index::read_up_to;
pub use index::{page_count, Refresh, SessionInfo, TurnIndex};
pub use model::{Block, Divider, Entry, Message, ParseOptions, Role, ToolCall, ToolResult, Turn};
pub use page::{render_page, Limits, PageError};
pub use render::call_summary;
pub use scan::MAX_LINE_BYTES;
pub(crate) use scan::{read_line_capped, NextLine};
pub use skim::{from_next_line, Skim};
pub use store::{is_compressed, open_store, StoreKind};
#[cfg(test)]
use {parse::parse_store, render::render_conversation};
