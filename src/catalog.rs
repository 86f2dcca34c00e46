//! Conversations found in the engines' own stores (SPEC §2): every Claude
//! Code and Codex session already on the machine shows up without being
//! asked. Nothing is ever written into a store.

use crate::engine::{EngineTable, Store};
use crate::key::SessionKey;
use crate::transcript::StoreKind;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a scan of the stores is trusted before a listing rescans.
const RESCAN_AFTER: Duration = Duration::from_secs(1);

/// One conversation file of an engine's store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFile {
    pub kind: StoreKind,
    pub path: PathBuf,
    /// Modification time, milliseconds since the epoch.
    pub mtime_ms: u64,
}

/// A Claude session file: `projects/<folder>/<uuid>.jsonl`, the id its stem.
/// Subagent files live one level deeper and are not sessions.
pub fn scan_claude(root: &Path) -> Vec<(String, PathBuf)> {
    let Ok(folders) = std::fs::read_dir(root.join("projects")) else {
        return vec![];
    };
    let mut found = vec![];
    for folder in folders.flatten() {
        let Ok(files) = std::fs::read_dir(folder.path()) else {
            continue;
        };
        for file in files.flatten() {
            let path = file.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if let Some(id) = name.strip_suffix(".jsonl") {
                if path.is_file() {
                    found.push((id.to_string(), path.clone()));
                }
            }
        }
    }
    found
}

/// The id at the end of a rollout's name: `rollout-<time>-<uuid>.jsonl[.zst]`.
pub fn codex_rollout_id(name: &str) -> Option<&str> {
    let stem = name
        .strip_suffix(".jsonl")
        .or_else(|| name.strip_suffix(".jsonl.zst"))?;
    let rest = stem.strip_prefix("rollout-")?;
    // 36 characters of a uuid are its hyphenated form, the only one taken.
    let id = rest.get(rest.len().checked_sub(36)?..)?;
    uuid::Uuid::try_parse(id).is_ok().then_some(id)
}

/// Codex rollouts under `sessions/YYYY/MM/DD/`.
pub fn scan_codex(root: &Path) -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, depth: usize, found: &mut Vec<(String, PathBuf)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if depth < 3 {
                if path.is_dir() {
                    walk(&path, depth + 1, found);
                }
            } else if let Some(id) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(codex_rollout_id)
            {
                found.push((id.to_string(), path.clone()));
            }
        }
    }
    let mut found = vec![];
    walk(&root.join("sessions"), 0, &mut found);
    found
}

fn mtime_ms(path: &Path) -> u64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

/// The working directory a store's session ran in, from its first lines.
pub fn store_cwd(file: &StoreFile) -> Option<String> {
    let reader = crate::transcript::open_store(&file.path, 0).ok()?;
    for line in BufReader::new(reader).split(b'\n').take(64) {
        let line = line.ok()?;
        let Ok(row) = serde_json::from_slice::<serde_json::Value>(&line) else {
            continue;
        };
        let cwd = match file.kind {
            StoreKind::Claude => row.get("cwd"),
            StoreKind::Codex => row.get("payload").and_then(|p| p.get("cwd")),
        };
        if let Some(cwd) = cwd.and_then(|c| c.as_str()) {
            return Some(cwd.to_string());
        }
    }
    None
}

/// A plain file with the store's lines: the store itself, or for a
/// compressed rollout a decoded copy in `cache_dir`, made again when the
/// rollout is newer than the copy.
pub fn readable(file: &StoreFile, cache_dir: &Path) -> std::io::Result<PathBuf> {
    if !crate::transcript::is_compressed(&file.path) {
        return Ok(file.path.clone());
    }
    let name = file.path.file_name().unwrap_or_default().to_string_lossy();
    let copy = cache_dir.join(name.trim_end_matches(".zst"));
    if mtime_ms(&copy) >= file.mtime_ms && copy.exists() {
        return Ok(copy);
    }
    std::fs::create_dir_all(cache_dir)?;
    let tmp = copy.with_extension(format!("tmp{}", std::process::id()));
    let mut out = std::fs::File::create(&tmp)?;
    let mut decoder = crate::transcript::open_store(&file.path, 0)?;
    std::io::copy(&mut decoder, &mut out)?;
    std::fs::rename(&tmp, &copy)?;
    Ok(copy)
}

#[derive(Debug, Default)]
struct Scan {
    files: HashMap<SessionKey, StoreFile>,
    at: Option<Instant>,
}

/// The stores of every engine, scanned on demand and cached briefly.
#[derive(Debug)]
pub struct Catalog {
    roots: Vec<(String, StoreKind, PathBuf)>,
    scan: Mutex<Scan>,
}

impl Catalog {
    pub fn new(engines: &EngineTable) -> Catalog {
        let roots = engines
            .iter()
            .filter_map(|e| match &e.store {
                Store::Claude(root) => Some((e.name.clone(), StoreKind::Claude, root.clone())),
                Store::Codex(root) => Some((e.name.clone(), StoreKind::Codex, root.clone())),
                Store::None | Store::Hosted => None,
            })
            .collect();
        Catalog {
            roots,
            scan: Mutex::new(Scan::default()),
        }
    }

    fn rescan(&self) -> HashMap<SessionKey, StoreFile> {
        let mut files = HashMap::new();
        for (engine, kind, root) in &self.roots {
            let found = match kind {
                StoreKind::Claude => scan_claude(root),
                StoreKind::Codex => scan_codex(root),
            };
            for (id, path) in found {
                let Ok(key) = SessionKey::new(engine, &id) else {
                    log::debug!("{}: not a usable session id", path.display());
                    continue;
                };
                let file = StoreFile {
                    kind: *kind,
                    mtime_ms: mtime_ms(&path),
                    path,
                };
                // A rollout both plain and compressed: the plain one is newer.
                let keep = match files.get(&key) {
                    Some(StoreFile { path: old, .. }) => crate::transcript::is_compressed(old),
                    None => true,
                };
                if keep {
                    files.insert(key, file);
                }
            }
        }
        files
    }

    /// Every conversation in the stores; `fresh` forces a rescan.
    pub fn all(&self, fresh: bool) -> HashMap<SessionKey, StoreFile> {
        let mut scan = self.scan.lock().unwrap_or_else(|e| e.into_inner());
        let stale = scan.at.is_none_or(|at| at.elapsed() > RESCAN_AFTER);
        if fresh || stale {
            scan.files = self.rescan();
            scan.at = Some(Instant::now());
        }
        scan.files.clone()
    }

    /// The store file of one conversation, rescanning once if it is unknown.
    pub fn find(&self, key: &SessionKey) -> Option<StoreFile> {
        if let Some(f) = self.all(false).remove(key) {
            if f.path.exists() {
                return Some(f);
            }
            // Deleted since the last scan.
            return self.all(true).remove(key);
        }
        let stale_ok = {
            let scan = self.scan.lock().unwrap_or_else(|e| e.into_inner());
            scan.at
                .is_some_and(|at| at.elapsed() < Duration::from_millis(100))
        };
        if stale_ok {
            return None;
        }
        self.all(true).remove(key)
    }

    pub fn kind_of(&self, engine: &str) -> Option<StoreKind> {
        self.roots
            .iter()
            .find(|(name, _, _)| name == engine)
            .map(|(_, kind, _)| *kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap as Map;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real")
    }

    #[test]
    fn finds_every_real_store_and_no_subagent_file() {
        let env: Map<String, String> = [
            ("CLAUDE_CONFIG_DIR", fixtures().join("claude")),
            ("CODEX_HOME", fixtures().join("codex")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string_lossy().into_owned()))
        .collect();
        let engines = EngineTable::load(&env, Path::new("/nonexistent"), None).unwrap();
        let catalog = Catalog::new(&engines);
        let all = catalog.all(true);
        let claude = all.keys().filter(|k| k.engine() == "claude").count();
        let codex: Vec<_> = all.keys().filter(|k| k.engine() == "codex").collect();
        assert_eq!(claude, 7);
        assert_eq!(codex.len(), 1);
        assert_eq!(codex[0].id(), "019e1625-789d-76c0-80ab-3724b5ddb799");
        assert!(all.keys().all(|k| !k.id().starts_with("agent-")));
        let file = catalog
            .find(&SessionKey::parse("codex:019e1625-789d-76c0-80ab-3724b5ddb799").unwrap())
            .unwrap();
        assert!(store_cwd(&file).is_some());
    }

    #[test]
    fn rollout_ids_are_read_from_names() {
        assert_eq!(
            codex_rollout_id(
                "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl.zst"
            ),
            Some("019e1625-789d-76c0-80ab-3724b5ddb799")
        );
        assert_eq!(codex_rollout_id("rollout-x.jsonl"), None);
        assert_eq!(codex_rollout_id("notes.jsonl"), None);
    }
}
