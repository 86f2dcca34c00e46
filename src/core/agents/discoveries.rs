//! Conversations that appear in the engines' stores while the daemon runs
//! (an agent started outside sessionfs) are announced once each in the root
//! `events` as `discovered`. Not announced: what the stores held when the
//! daemon started, sessions sessionfs made or recorded (they were `made`),
//! and a conversation another session goes on as (a `/clear`), which may
//! be noticed a moment after its file appears: a new conversation is
//! announced once it has been there [`SETTLE`].

use crate::core::Core;
use crate::key::SessionKey;
use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long a new conversation is held back before it is announced.
const SETTLE: Duration = Duration::from_secs(2);
/// How often the stores' keys are looked at (a look is one counter read
/// unless a conversation came or went).
const LOOK_EVERY: Duration = Duration::from_millis(500);

#[derive(Debug, Default)]
pub(in crate::core) struct Discoveries {
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    /// The catalog's keys version the set below was taken at.
    version: Option<u64>,
    known: HashSet<SessionKey>,
    /// New conversations and when they were first seen.
    held: HashMap<SessionKey, Instant>,
}

impl Core {
    /// One look: notes conversations that came since the last one, and
    /// announces those held long enough.
    pub(in crate::core) fn look_for_discoveries(&self) {
        let version = self.catalog.keys_version();
        let changed = lock(&self.agents.discoveries.seen).version != Some(version);
        if changed {
            // Taken without the lock: a summary of 100,000 files is a map.
            let files = self.catalog.files();
            let mut seen = lock(&self.agents.discoveries.seen);
            let first = seen.version.is_none();
            let now = Instant::now();
            for key in files.keys() {
                if seen.known.insert(key.clone()) && !first {
                    seen.held.insert(key.clone(), now);
                }
            }
            seen.known.retain(|k| files.contains_key(k));
            seen.held.retain(|k, _| files.contains_key(k));
            seen.version = Some(version);
        }
        let due: Vec<SessionKey> = {
            let mut seen = lock(&self.agents.discoveries.seen);
            let due: Vec<SessionKey> = seen
                .held
                .iter()
                .filter(|(_, at)| at.elapsed() >= SETTLE)
                .map(|(k, _)| k.clone())
                .collect();
            for k in &due {
                seen.held.remove(k);
            }
            due
        };
        for key in due {
            let recorded = self.organize.sidecar.get(key.as_str()).is_some();
            if recorded || self.conversation_owner(&key).is_some() {
                continue;
            }
            let Ok(meta) = self.meta_value(&key) else {
                continue;
            };
            self.agents.event_stream.append(
                crate::clock::now_ms(),
                key.as_str(),
                "discovered",
                serde_json::json!({
                    "title": meta["title"],
                    "workspace": meta["workspace"],
                    "created": meta["created"],
                }),
            );
        }
    }
}

/// Looks for new conversations from a thread of its own, while the core lives.
pub(in crate::core) fn start(core: &Arc<Core>) {
    let core: Weak<Core> = Arc::downgrade(core);
    let spawned = std::thread::Builder::new()
        .name("discoveries".into())
        .spawn(move || loop {
            let Some(c) = core.upgrade() else { return };
            c.look_for_discoveries();
            drop(c);
            std::thread::sleep(LOOK_EVERY);
        });
    if let Err(e) = spawned {
        log::warn!("cannot start the discoveries thread: {e}");
    }
}
