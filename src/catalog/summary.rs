//! A conversation's summary: what a listing shows of it, read from a
//! bounded head and tail of its file (or what was appended since the last
//! read), never from a turn index.

use crate::transcript::{self, read_up_to, Skim, StoreKind};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Bytes read at the start of a file: the first rows (time, cwd, prompt).
pub const HEAD: u64 = 64 << 10;
/// Bytes read at its end: the newest title rows.
pub const TAIL: u64 = 64 << 10;
/// Appended bytes read as such; a file that grew more is read as head and tail.
pub const GROWTH: u64 = 1 << 20;

/// The file's state when it was summarised, so a change is noticed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub size: u64,
    pub mtime_ms: u64,
    pub ino: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub skim: Skim,
    pub at: Stamp,
    /// Where the next appended bytes start (the end of the last complete
    /// line read).
    pub read_to: u64,
}

impl Summary {
    pub fn title(&self) -> Option<&str> {
        self.skim.title()
    }
}

/// Summarises the file at `path` as of `at`, going on from `prev` when the
/// file only grew since. Reads at most `HEAD + TAIL` bytes, or `GROWTH`.
pub fn read(kind: StoreKind, path: &Path, at: Stamp, prev: Option<&Summary>) -> Summary {
    match read_inner(kind, path, at, prev) {
        // A Gemini file without its context row: the project its folder is
        // named for, as `~/.gemini/projects.json` maps it (the workspace it
        // resumes in).
        Ok(mut s) if kind == StoreKind::Gemini && s.skim.cwd.is_none() => {
            s.skim.cwd = gemini_project_dir(path);
            s
        }
        Ok(s) => s,
        Err(e) => {
            log::debug!("{}: cannot summarise: {e}", path.display());
            // Remembered as read: the next change of the file tries again.
            Summary {
                at,
                ..Summary::default()
            }
        }
    }
}

fn read_inner(
    kind: StoreKind,
    path: &Path,
    at: Stamp,
    prev: Option<&Summary>,
) -> io::Result<Summary> {
    if transcript::is_compressed(path) {
        // Finished rollouts: only the head, decoded (Codex titles come from
        // the first prompt).
        let mut head = Vec::new();
        transcript::open_store(path, 0)?
            .take(HEAD)
            .read_to_end(&mut head)?;
        let mut skim = Skim::default();
        skim.read(kind, &head);
        return Ok(Summary {
            skim,
            at,
            read_to: at.size,
        });
    }
    let f = File::open(path)?;
    let size = at.size;
    if let Some(prev) = prev.filter(|p| {
        p.at.ino == at.ino && size > p.at.size && p.read_to <= size && size - p.read_to <= GROWTH
    }) {
        let grown = read_up_to(&f, prev.read_to, (size - prev.read_to) as usize)?;
        let mut skim = prev.skim.clone();
        let used = skim.read(kind, &grown);
        return Ok(Summary {
            skim,
            at,
            read_to: prev.read_to + used as u64,
        });
    }
    let mut skim = Skim::default();
    let head = read_up_to(&f, 0, size.min(HEAD) as usize)?;
    let mut read_to = skim.read(kind, &head) as u64;
    if size > HEAD {
        let start = (size - TAIL).max(read_to);
        let tail = read_up_to(&f, start, (size - start) as usize)?;
        // The tail starts on a line unless it continues right after the head.
        let lines = if start == read_to {
            &tail[..]
        } else {
            transcript::from_next_line(&tail)
        };
        let skipped = (tail.len() - lines.len()) as u64;
        read_to = start + skipped + skim.read(kind, lines) as u64;
    }
    Ok(Summary { skim, at, read_to })
}

/// The directory `~/.gemini/projects.json` (`{"projects": {"/dir":
/// "name"}}`, read up to 4 MiB) maps to the project folder a Gemini store
/// file `.gemini/tmp/NAME/chats/session-….jsonl` is in.
fn gemini_project_dir(path: &Path) -> Option<String> {
    const PROJECTS_MAX: u64 = 4 << 20;
    let project_dir = path.parent()?.parent()?;
    let name = project_dir.file_name()?.to_str()?;
    let gemini = project_dir.parent()?.parent()?;
    let mut text = Vec::new();
    File::open(gemini.join("projects.json"))
        .ok()?
        .take(PROJECTS_MAX)
        .read_to_end(&mut text)
        .ok()?;
    let doc: serde_json::Value = serde_json::from_slice(&text).ok()?;
    doc.get("projects")?
        .as_object()?
        .iter()
        .find(|(dir, named)| named.as_str() == Some(name) && dir.starts_with('/'))
        .map(|(dir, _)| dir.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gemini_file_without_its_context_row_is_in_the_directory_projects_json_names() {
        let tmp = tempfile::tempdir().unwrap();
        let chats = tmp.path().join(".gemini/tmp/other/chats");
        std::fs::create_dir_all(&chats).unwrap();
        let projects = tmp.path().join(".gemini/projects.json");
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real/gemini/projects.json"),
            &projects,
        )
        .unwrap();
        let path = chats.join("session-2026-12-02T17-12-aaaaaaaa.jsonl");
        std::fs::write(
            &path,
            "{\"sessionId\":\"aaaaaaaa-0000-4000-8000-000000000000\",\"projectHash\":\"x\"}\n",
        )
        .unwrap();
        let at = |p: &Path| Stamp {
            size: std::fs::metadata(p).unwrap().len(),
            ..Stamp::default()
        };
        let summary = read(StoreKind::Gemini, &path, at(&path), None);
        assert_eq!(summary.skim.cwd.as_deref(), Some("/tmp/gx/other"));
        std::fs::remove_file(&projects).unwrap();
        let summary = read(StoreKind::Gemini, &path, at(&path), None);
        assert_eq!(summary.skim.cwd, None);
    }
}
