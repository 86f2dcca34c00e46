//! Which conversation in its engine's store a session is: the id the
//! sidecar records, or the one the engine started after a launch. A
//! conversation found is the session's at once; its record in the sidecar
//! is written from the pool, since the search runs inside `getattr` and
//! `readdir` and the sidecar's lock may be held elsewhere.

use crate::catalog::StoreFile;
use crate::core::organize::sidecar::SessionMeta;
use crate::core::session_runtime::SessionRuntime;
use crate::core::sessions::store_file;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::sync::lock;
use crate::transcript::StoreKind;
use crate::work;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
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

/// How often one session's stores may be searched (as
/// [`Core::bind_conversation`] does).
const SEARCH_EVERY: Duration = Duration::from_secs(1);

/// A session launched here whose engine may yet name its conversation.
#[derive(Debug, Clone)]
struct Unbound {
    /// Its launch (the time): a later one replaces this.
    launched_ms: u64,
    /// Its conversation at launch: another means it was bound.
    conversation: String,
    /// The catalog's version when the stores were last searched for it.
    searched: Option<u64>,
}

/// The sessions launched here that may still be bound: a listing looks at
/// these only, not at every session ever launched, and usually there is none.
#[derive(Debug, Default)]
pub(in crate::core) struct PendingBinds {
    pending: Mutex<HashMap<SessionKey, Unbound>>,
}

/// What a pending session needs now.
enum Next {
    /// Bound, or it never can be: forgotten.
    Done,
    /// Nothing new to find yet.
    Wait,
    /// A search of the stores; `last`: the session ended, none follows.
    Search { last: bool },
}

impl Core {
    /// The engine's own id of a session's conversation.
    pub(in crate::core) fn conversation_id(&self, key: &SessionKey) -> String {
        self.found_conversation(key)
            .or_else(|| self.meta(key).conversation)
            .unwrap_or_else(|| key.id().to_string())
    }

    /// The conversation this daemon found a launched session going on as,
    /// whether or not the sidecar records it yet.
    pub(in crate::core) fn found_conversation(&self, key: &SessionKey) -> Option<String> {
        let rt = lock(&self.sessions.runtimes).get(key).cloned()?;
        let found = lock(&rt.state).conversation.clone();
        found
    }

    /// The engine's own store file for this session, if it has one yet.
    pub(in crate::core) fn store_file(&self, key: &SessionKey) -> Option<StoreFile> {
        self.catalog.kind_of(key.engine())?;
        let conversation = SessionKey::new(key.engine(), &self.conversation_id(key)).ok()?;
        let found = self.catalog.find(&conversation);
        self.bind_conversation(key, &conversation, found.as_ref())
            .or(found)
            .or_else(|| self.archived_store(key))
    }

    /// Conversation ids already taken by a session of `engine`: recorded,
    /// or found by this daemon.
    pub(in crate::core) fn claimed_conversations(&self, engine: &str) -> HashSet<String> {
        let mut claimed: HashSet<String> = self
            .organize
            .sidecar
            .all()
            .into_iter()
            .filter_map(|(k, meta)| {
                let key = SessionKey::parse(&k).ok()?;
                (key.engine() == engine).then_some(meta.conversation)?
            })
            .collect();
        let runtimes: Vec<Arc<SessionRuntime>> = lock(&self.sessions.runtimes)
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

    /// After a launch: remembers the session if its engine may name the
    /// conversation later (a new Codex session's rollout, a resumed Claude
    /// conversation going on under a new id).
    pub(in crate::core) fn note_launch(&self, key: &SessionKey, launched_ms: u64, resumed: bool) {
        let may_bind = match self.catalog.kind_of(key.engine()) {
            Some(StoreKind::Codex) => true,
            Some(StoreKind::Claude) => resumed,
            _ => false,
        };
        if !may_bind {
            lock(&self.sessions.pending_binds.pending).remove(key);
            return;
        }
        let unbound = Unbound {
            launched_ms,
            conversation: self.conversation_id(key),
            searched: None,
        };
        lock(&self.sessions.pending_binds.pending).insert(key.clone(), unbound);
    }

    /// Binds the sessions launched here whose engine may since have named
    /// their conversation, so each lists once. A session's stores are
    /// searched only when they changed since its last search; it is
    /// forgotten once bound, once it has a store it keeps, or after a last
    /// search once it has ended.
    pub(in crate::core) fn bind_launched(&self) {
        let keys: Vec<SessionKey> = lock(&self.sessions.pending_binds.pending)
            .keys()
            .cloned()
            .collect();
        if keys.is_empty() {
            return;
        }
        let version = self.catalog.version();
        for key in &keys {
            self.bind_pending(key, version);
        }
    }

    /// [`Core::bind_launched`] for one session.
    pub(in crate::core) fn bind_if_pending(&self, key: &SessionKey) {
        if lock(&self.sessions.pending_binds.pending).contains_key(key) {
            self.bind_pending(key, self.catalog.version());
        }
    }

    /// `version`: the catalog's, taken before any search.
    fn bind_pending(&self, key: &SessionKey, version: u64) {
        let Some(unbound) = lock(&self.sessions.pending_binds.pending).get(key).cloned() else {
            return;
        };
        let last = match self.next_bind(key, &unbound, version) {
            Next::Done => true,
            Next::Wait => return,
            Next::Search { last } => {
                self.store_file(key);
                last
            }
        };
        let mut pending = lock(&self.sessions.pending_binds.pending);
        // Unless launched again meanwhile.
        if let Some(now) = pending
            .get_mut(key)
            .filter(|u| u.launched_ms == unbound.launched_ms)
        {
            if last {
                pending.remove(key);
            } else {
                now.searched = Some(version);
            }
        }
    }

    /// What a pending session needs, from cheap looks only: its state, its
    /// record, one store lookup.
    fn next_bind(&self, key: &SessionKey, unbound: &Unbound, version: u64) -> Next {
        let Some(rt) = lock(&self.sessions.runtimes).get(key).cloned() else {
            return Next::Done;
        };
        let (live, searched_lately) = {
            let state = lock(&rt.state);
            if state.launched.map(|(at, _)| at) != Some(unbound.launched_ms) {
                // Launched again; that launch notes itself.
                return Next::Wait;
            }
            (
                state.client.is_some() || state.opening.is_some(),
                state
                    .bind_checked
                    .is_some_and(|t| t.elapsed() < SEARCH_EVERY),
            )
        };
        let conversation = self.conversation_id(key);
        if conversation != unbound.conversation {
            return Next::Done;
        }
        // A Codex session is bound only while it has no store of its own.
        if self.catalog.kind_of(key.engine()) == Some(StoreKind::Codex)
            && SessionKey::new(key.engine(), &conversation)
                .ok()
                .and_then(|c| self.catalog.find(&c))
                .is_some()
        {
            return Next::Done;
        }
        if unbound.searched == Some(version) {
            // The stores are as they were at its last search.
            return if live { Next::Wait } else { Next::Done };
        }
        if searched_lately {
            return Next::Wait;
        }
        Next::Search { last: !live }
    }

    /// After a launch, looks for the store file the engine started under an
    /// id of its own: the session goes on as it from now, and the sidecar
    /// records it (see [`Core::record_conversation`]).
    pub(in crate::core) fn bind_conversation(
        &self,
        key: &SessionKey,
        conversation: &SessionKey,
        current: Option<&StoreFile>,
    ) -> Option<StoreFile> {
        let rt = lock(&self.sessions.runtimes).get(key).cloned()?;
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
                let workspace = self.worktree_dir(key).unwrap_or_else(|| {
                    self.meta(key)
                        .workspace
                        .map(PathBuf::from)
                        .unwrap_or_else(|| self.config.home.clone())
                });
                store_file::codex_rollout_for(&files, key.engine(), &workspace, since, &claimed)
            }
            (StoreKind::Claude, Some(old)) if resumed => {
                store_file::claude_continuation(&files, conversation, old, since, &claimed)
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
        let sidecar = self.organize.sidecar.clone();
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
                let taken = SessionKey::new(key.engine(), &found).ok().and_then(|c| {
                    all.owners_of(&c).into_iter().find(|other| {
                        *other != mine
                            && all
                                .get(other)
                                .is_some_and(|m| m.conversation.as_deref() == Some(found.as_str()))
                    })
                });
                if let Some(other) = taken {
                    return Err(Error::busy(format!("{other} goes on as it already")));
                }
                let meta = all.entry_or(&mine, || SessionMeta {
                    created_ms: since,
                    ..Default::default()
                });
                meta.conversation = Some(found);
                Ok(())
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::now_ms;
    use crate::core::{Flight, SessionRuntime};
    use std::path::Path;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Instant;

    struct Host {
        core: Arc<Core>,
        dir: tempfile::TempDir,
    }

    fn host() -> Host {
        let (core, dir) = Core::for_tests(&[]);
        Host { core, dir }
    }

    fn uuid(n: usize) -> String {
        format!("019e0000-0000-7000-8000-{n:012x}")
    }

    impl Host {
        /// A rollout Codex started in `cwd`, written now.
        fn rollout(&self, id: &str, cwd: &Path) {
            let folder = self.dir.path().join("codex/sessions/2026/01/02");
            std::fs::create_dir_all(&folder).unwrap();
            let meta = serde_json::json!({
                "timestamp": "2026-01-02T03:04:05.000Z", "type": "session_meta",
                "payload": {"id": id, "cwd": cwd},
            });
            let name = format!("rollout-2026-01-02T03-04-05-{id}.jsonl");
            std::fs::write(folder.join(name), format!("{meta}\n")).unwrap();
            // As a daemon's inotify would tell it.
            self.core.catalog.refresh();
        }

        fn home(&self) -> PathBuf {
            self.dir.path().join("home")
        }

        /// Marks `key` launched here now; `live`: its open is under way.
        fn launch(&self, key: &str, live: bool) -> Arc<SessionRuntime> {
            let key = SessionKey::parse(key).unwrap();
            let rt = self.core.runtime(&key);
            let at = now_ms();
            {
                let mut state = lock(&rt.state);
                state.launched = Some((at, false));
                state.bind_checked = None;
                state.opening = live.then(|| Arc::new(Flight::default()));
            }
            self.core.note_launch(&key, at, false);
            rt
        }

        /// Copies of the whole catalog made so far.
        fn copies(&self) -> usize {
            self.core.catalog.copies.load(Ordering::Relaxed)
        }

        fn pending(&self) -> usize {
            lock(&self.core.sessions.pending_binds.pending).len()
        }
    }

    #[test]
    fn a_listing_copies_no_store_for_launched_sessions_that_cannot_bind() {
        let h = host();
        // Codex sessions resumed from rollouts of their own, and shells:
        // launched here, and none can be bound to another conversation.
        for i in 0..30 {
            h.rollout(&uuid(i), &h.home());
            h.launch(&format!("codex:{}", uuid(i)), true);
            h.core.create(&format!("shell:s{i}")).unwrap();
            h.launch(&format!("shell:s{i}"), true);
        }
        let before = h.copies();
        for i in 0..3 {
            h.core.rows(false);
            h.core
                .row(&SessionKey::parse(&format!("codex:{}", uuid(i))).unwrap());
        }
        assert_eq!(h.copies() - before, 0, "whole-catalog copies");
        assert_eq!(h.pending(), 0, "none is looked at again");
    }

    #[test]
    fn a_new_codex_session_is_bound_to_the_rollout_it_started_and_lists_once() {
        let h = host();
        h.core.create("codex:mine").unwrap();
        h.launch("codex:mine", false);
        h.rollout(&uuid(7), &h.home());
        let rows = h.core.rows(false);
        let key = SessionKey::parse("codex:mine").unwrap();
        assert_eq!(h.core.conversation_id(&key), uuid(7));
        assert!(rows.iter().any(|r| r.key == key));
        assert!(rows.iter().all(|r| r.key.id() != uuid(7)), "listed once");
        assert_eq!(h.pending(), 0);
    }

    #[test]
    fn a_pending_session_is_searched_again_only_when_the_stores_changed() {
        let h = host();
        h.core.create("codex:mine").unwrap();
        let rt = h.launch("codex:mine", true);
        h.core.rows(false);
        let searched = h.copies();
        assert_eq!(searched, 1, "searched once: nothing yet");
        let age = |rt: &SessionRuntime| {
            lock(&rt.state).bind_checked = Instant::now().checked_sub(SEARCH_EVERY * 2);
        };
        age(&rt);
        h.core.rows(false);
        h.core.rows(false);
        assert_eq!(h.copies(), searched, "the stores did not change");
        // Another workspace's rollout: the stores changed.
        h.rollout(&uuid(8), Path::new("/elsewhere"));
        h.core.rows(false);
        assert_eq!(h.copies(), searched + 1);
        assert_eq!(h.pending(), 1, "still unbound while it runs");
        // Ended, with nothing new since its last search: forgotten.
        lock(&rt.state).opening = None;
        age(&rt);
        h.core.rows(false);
        assert_eq!(h.copies(), searched + 1);
        assert_eq!(h.pending(), 0);
    }
}
