//! Which conversation in its engine's store a session is: the id the
//! sidecar records, or the one the engine started after a launch. A
//! conversation found is the session's at once; its record in the sidecar
//! is written from the pool, since the search runs inside `getattr` and
//! `readdir` and the sidecar's lock may be held elsewhere.

use super::session_runtime::SessionRuntime;
use super::{lock, Core};
use crate::binding;
use crate::catalog::StoreFile;
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::sidecar::SessionMeta;
use crate::transcript::StoreKind;
use crate::work;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Hears how recording a found conversation went: on a failure (the
/// sidecar's lock held elsewhere, a full disk) the session forgets it, so
/// that the next look finds it again and records it then.
struct Recorded {
    key: SessionKey,
    rt: Arc<SessionRuntime>,
    found: String,
}

impl work::Answer<()> for Recorded {
    fn done(self, result: Result<()>) {
        if let Err(e) = result {
            log::warn!(
                "{}: cannot record its conversation {}: {}",
                self.key,
                self.found,
                e.message
            );
            let mut state = lock(&self.rt.state);
            if state.conversation.as_deref() == Some(self.found.as_str()) {
                state.conversation = None;
            }
        }
    }
}

impl Core {
    /// The engine's own id of a session's conversation.
    pub(super) fn conversation_id(&self, key: &SessionKey) -> String {
        self.found_conversation(key)
            .or_else(|| self.meta(key).conversation)
            .unwrap_or_else(|| key.id().to_string())
    }

    /// The conversation this daemon found a launched session going on as,
    /// whether or not the sidecar records it yet.
    pub(super) fn found_conversation(&self, key: &SessionKey) -> Option<String> {
        let rt = lock(&self.sessions).get(key).cloned()?;
        let found = lock(&rt.state).conversation.clone();
        found
    }

    /// The engine's own store file for this session, if it has one yet.
    pub(super) fn store_file(&self, key: &SessionKey) -> Option<StoreFile> {
        self.catalog.kind_of(key.engine())?;
        let conversation = SessionKey::new(key.engine(), &self.conversation_id(key)).ok()?;
        let found = self.catalog.find(&conversation);
        self.bind_conversation(key, &conversation, found.as_ref())
            .or(found)
            .or_else(|| self.archived_store(key))
    }

    /// Conversation ids already taken by a session of `engine`: recorded,
    /// or found by this daemon.
    pub(super) fn claimed_conversations(&self, engine: &str) -> HashSet<String> {
        let mut claimed: HashSet<String> = self
            .sidecar
            .all()
            .into_iter()
            .filter_map(|(k, meta)| {
                let key = SessionKey::parse(&k).ok()?;
                (key.engine() == engine).then_some(meta.conversation)?
            })
            .collect();
        let runtimes: Vec<Arc<SessionRuntime>> = lock(&self.sessions)
            .iter()
            .filter(|(k, _)| k.engine() == engine)
            .map(|(_, rt)| rt.clone())
            .collect();
        claimed.extend(
            runtimes
                .iter()
                .filter_map(|rt| lock(&rt.state).conversation.clone()),
        );
        claimed
    }

    /// After a launch, looks for the store file the engine started under an
    /// id of its own: the session goes on as it from now, and the sidecar
    /// records it (see [`Core::record_conversation`]).
    pub(super) fn bind_conversation(
        &self,
        key: &SessionKey,
        conversation: &SessionKey,
        current: Option<&StoreFile>,
    ) -> Option<StoreFile> {
        let rt = lock(&self.sessions).get(key).cloned()?;
        let (since, resumed) = {
            let mut state = lock(&rt.state);
            let launched = state.launched?;
            if state
                .bind_checked
                .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
            {
                return None;
            }
            state.bind_checked = Some(std::time::Instant::now());
            launched
        };
        let files = self.catalog.all(true);
        let mut claimed = self.claimed_conversations(key.engine());
        claimed.insert(key.id().to_string());
        let found = match (self.catalog.kind_of(key.engine())?, current) {
            (StoreKind::Codex, None) => {
                let workspace = self
                    .meta(key)
                    .workspace
                    .map(PathBuf::from)
                    .unwrap_or_else(|| self.config.home.clone());
                binding::codex_rollout_for(&files, key.engine(), &workspace, since, &claimed)
            }
            (StoreKind::Claude, Some(old)) if resumed => {
                binding::claude_continuation(&files, conversation, old, since, &claimed)
            }
            _ => None,
        }?;
        log::info!(
            "{key}: the conversation goes on as {}:{found}",
            key.engine()
        );
        lock(&rt.state).conversation = Some(found.clone());
        self.record_conversation(key, rt, found.clone(), since);
        files
            .get(&SessionKey::new(key.engine(), &found).ok()?)
            .cloned()
    }

    /// Writes a found conversation into the sidecar from the pool, so no
    /// caller waits for the sidecar's lock or its fsync. Refused when
    /// another session's record took the conversation meanwhile.
    fn record_conversation(
        &self,
        key: &SessionKey,
        rt: Arc<SessionRuntime>,
        found: String,
        since: u64,
    ) {
        let sidecar = self.sidecar.clone();
        let answer = Recorded {
            key: key.clone(),
            rt,
            found: found.clone(),
        };
        let what = format!("recording {key}'s conversation {found}");
        let key = key.clone();
        self.work.submit(what, work::DEADLINE, answer, move || {
            sidecar.update(|all| {
                let mine = key.to_string();
                let taken = all.iter().find(|(k, meta)| {
                    **k != mine
                        && meta.conversation.as_deref() == Some(found.as_str())
                        && SessionKey::parse(k).is_ok_and(|k| k.engine() == key.engine())
                });
                if let Some((other, _)) = taken {
                    return Err(Error::busy(format!("{other} goes on as it already")));
                }
                let meta = all.entry(mine).or_insert_with(|| SessionMeta {
                    created_ms: since,
                    ..Default::default()
                });
                meta.conversation = Some(found);
                Ok(())
            })
        });
    }
}
