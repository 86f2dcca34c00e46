//! Which conversation in its engine's store a session is: the id the
//! sidecar records, or the one the engine started after a launch.

use super::{lock, Core};
use crate::binding;
use crate::catalog::StoreFile;
use crate::key::SessionKey;
use crate::sidecar::SessionMeta;
use crate::transcript::StoreKind;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

impl Core {
    /// The engine's own id of a session's conversation.
    pub(super) fn conversation_id(&self, key: &SessionKey) -> String {
        self.meta(key)
            .conversation
            .unwrap_or_else(|| key.id().to_string())
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

    /// Conversation ids already taken by a session record of `engine`.
    pub(super) fn claimed_conversations(&self, engine: &str) -> HashSet<String> {
        self.sidecar
            .all()
            .into_iter()
            .filter_map(|(k, meta)| {
                let key = SessionKey::parse(&k).ok()?;
                (key.engine() == engine).then_some(meta.conversation)?
            })
            .collect()
    }

    /// After a launch, looks for the store file the engine started under an
    /// id of its own, and records it in the sidecar.
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
        let bound = self.sidecar.update(|all| {
            let meta = all.entry(key.to_string()).or_insert_with(|| SessionMeta {
                created_ms: since,
                ..Default::default()
            });
            meta.conversation = Some(found.clone());
            Ok(())
        });
        if let Err(e) = bound {
            log::warn!(
                "{key}: cannot record its conversation {found}: {}",
                e.message
            );
        }
        files
            .get(&SessionKey::new(key.engine(), &found).ok()?)
            .cloned()
    }
}
