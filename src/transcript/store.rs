//! Where a store's bytes come from. Plain `.jsonl` files are read in place;
//! offsets everywhere count bytes of the JSON lines, so a compressed store
//! (`.jsonl.zst`, written by Codex) plugs in here by decoding from the start.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// Which agent wrote a store, and so how to read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// Claude Code: `projects/<folder>/<sessionId>.jsonl`.
    Claude,
    /// Codex CLI: `sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`.
    Codex,
    /// Gemini CLI: `tmp/<project>/chats/session-<time>-<id8>.jsonl`.
    Gemini,
    /// opencode: sessionfs's own mirror of its SQLite store,
    /// `sessions/<ses_id>.jsonl` (`catalog::opencode_mirror`).
    Opencode,
}

/// True for a compressed store.
pub fn is_compressed(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

fn no_zstd() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "compressed stores (.jsonl.zst) are indexed through a decoded copy",
    )
}

/// Opens a store for reading from byte `offset` of its JSON lines.
///
/// A compressed store is decoded from its start with `offset` bytes
/// discarded (its files are finished rollouts that no longer grow). The
/// index reads plain files only: compressed ones are first decoded to a
/// plain copy (see `catalog::readable`).
pub fn open_store(path: &Path, offset: u64) -> io::Result<Box<dyn Read + Send>> {
    if is_compressed(path) {
        let mut decoder = zstd::stream::read::Decoder::new(File::open(path)?)?;
        io::copy(&mut (&mut decoder).take(offset), &mut io::sink())?;
        return Ok(Box::new(decoder));
    }
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    Ok(Box::new(f))
}

/// Opens a plain store for the index, which also checks its identity.
pub(crate) fn open_plain(path: &Path) -> io::Result<File> {
    if is_compressed(path) {
        return Err(no_zstd());
    }
    File::open(path)
}
