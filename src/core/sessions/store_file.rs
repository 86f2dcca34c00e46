//! Which store file holds a session's conversation when the engine chose
//! the id: a new Codex session is known by its rollout only once the file
//! appears, and `claude --resume` may go on writing under a new session id.

use crate::catalog::{store_cwd, StoreFile};
use crate::key::SessionKey;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

/// Slack for clocks of different filesystems.
const MTIME_SLACK_MS: u64 = 2_000;

/// The newest rollout that started in `workspace` after `since_ms` and that
/// no other session has claimed.
pub fn codex_rollout_for(
    files: &HashMap<SessionKey, StoreFile>,
    engine: &str,
    workspace: &Path,
    since_ms: u64,
    claimed: &HashSet<String>,
) -> Option<String> {
    files
        .iter()
        .filter(|(key, file)| {
            key.engine() == engine
                && !claimed.contains(key.id())
                && file.mtime_ms + MTIME_SLACK_MS >= since_ms
        })
        .filter(|(_, file)| store_cwd(file).is_some_and(|cwd| Path::new(&cwd) == workspace))
        .max_by_key(|(_, file)| file.mtime_ms)
        .map(|(key, _)| key.id().to_string())
}

/// The last `"uuid"` written in a Claude store (the leaf a resume continues from).
fn last_uuid(path: &Path) -> Option<String> {
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let tail = len.min(1 << 20);
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(len - tail)).ok()?;
    let mut buf = Vec::with_capacity(tail as usize);
    file.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let at = text.rfind("\"uuid\":\"")? + 8;
    let end = text[at..].find('"')?;
    Some(text[at..at + end].to_string())
}

/// A Claude store in the same project folder, written after `since_ms`,
/// whose first rows refer to the old conversation (its id, or the leaf
/// uuid the resumed conversation hangs from).
pub fn claude_continuation(
    files: &HashMap<SessionKey, StoreFile>,
    old_key: &SessionKey,
    old: &StoreFile,
    since_ms: u64,
    claimed: &HashSet<String>,
) -> Option<String> {
    let folder = old.path.parent()?;
    let leaf = last_uuid(&old.path);
    files
        .iter()
        .filter(|(key, file)| {
            key.engine() == old_key.engine()
                && key.id() != old_key.id()
                && !claimed.contains(key.id())
                && file.path.parent() == Some(folder)
                && file.mtime_ms + MTIME_SLACK_MS >= since_ms
        })
        .filter(|(_, file)| {
            let mut head = Vec::new();
            let read = std::fs::File::open(&file.path)
                .and_then(|f| f.take(64 * 1024).read_to_end(&mut head));
            let head = String::from_utf8_lossy(&head);
            read.is_ok()
                && (head.contains(old_key.id())
                    || leaf.as_ref().is_some_and(|l| head.contains(l.as_str())))
        })
        .max_by_key(|(_, file)| file.mtime_ms)
        .map(|(key, _)| key.id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::StoreKind;

    fn store(dir: &Path, name: &str, body: &str, mtime_ms: u64) -> StoreFile {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        StoreFile {
            kind: StoreKind::Claude,
            path,
            mtime_ms,
        }
    }

    #[test]
    fn a_resumed_claude_conversation_is_found_under_its_new_id() {
        let dir = tempfile::tempdir().unwrap();
        let old_key = SessionKey::parse("claude:aaa").unwrap();
        let old = store(dir.path(), "aaa.jsonl", "{\"uuid\":\"leaf-1\"}\n", 100);
        let mut files = HashMap::new();
        files.insert(old_key.clone(), old.clone());
        files.insert(
            SessionKey::parse("claude:bbb").unwrap(),
            store(
                dir.path(),
                "bbb.jsonl",
                "{\"parentUuid\":\"leaf-1\"}\n",
                10_000,
            ),
        );
        files.insert(
            SessionKey::parse("claude:ccc").unwrap(),
            store(
                dir.path(),
                "ccc.jsonl",
                "{\"parentUuid\":\"other\"}\n",
                10_000,
            ),
        );
        let none = HashSet::new();
        assert_eq!(
            claude_continuation(&files, &old_key, &old, 9_000, &none).as_deref(),
            Some("bbb")
        );
        let claimed: HashSet<String> = ["bbb".to_string()].into();
        assert_eq!(
            claude_continuation(&files, &old_key, &old, 9_000, &claimed),
            None
        );
        assert_eq!(
            claude_continuation(&files, &old_key, &old, 20_000, &none),
            None
        );
    }

    #[test]
    fn a_new_codex_session_binds_to_the_rollout_in_its_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let meta = |cwd: &str| {
            format!(
                "{{\"type\":\"session_meta\",\"payload\":{{\"id\":\"x\",\"cwd\":\"{cwd}\"}}}}\n"
            )
        };
        let mut files = HashMap::new();
        for (id, cwd, mtime) in [
            ("r1", "/w/a", 5_000),
            ("r2", "/w/b", 6_000),
            ("r3", "/w/a", 100),
        ] {
            let mut f = store(dir.path(), &format!("{id}.jsonl"), &meta(cwd), mtime);
            f.kind = StoreKind::Codex;
            files.insert(SessionKey::new("codex", id).unwrap(), f);
        }
        let none = HashSet::new();
        assert_eq!(
            codex_rollout_for(&files, "codex", Path::new("/w/a"), 4_000, &none).as_deref(),
            Some("r1")
        );
        assert_eq!(
            codex_rollout_for(&files, "codex", Path::new("/w/c"), 0, &none),
            None
        );
    }
}
