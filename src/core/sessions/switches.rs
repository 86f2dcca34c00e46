//! The session follows its process. An agent may switch conversations
//! inside the process a session launched (Claude's `/clear` and `/resume`,
//! Codex's `/new` and `/resume`): the key stays, the conversation the
//! process writes now becomes the session's (`transcript/`, `last`,
//! `state`, `events` follow it), the earlier ones are kept in its record,
//! and the conversation switched to is claimed in the lock directory so no
//! daemon launches a second writer on it (see [`crate::agent::claims`]).
//! A conversation a session writes or wrote resolves to that session.

use crate::agent::claims::{self, Claim, Refused};
use crate::clock::now_ms;
use crate::core::organize::sidecar::SessionMeta;
use crate::core::session_runtime::SessionRuntime;
use crate::core::Core;
use crate::error::Result;
use crate::key::SessionKey;
use crate::runtime::launch::live_record;
use crate::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most earlier conversations a session's record keeps.
const EARLIER_MAX: usize = 64;

/// Which session each conversation belongs to, as this daemon saw the
/// switches (the sidecar keeps those it recorded).
#[derive(Debug, Default)]
pub(in crate::core) struct Owners {
    /// Switches this daemon saw, before (and while) the sidecar records them.
    seen: Mutex<HashMap<SessionKey, SessionKey>>,
}

impl Core {
    /// The session that writes or wrote conversation `conversation`, when
    /// that is another session: its record names it (current or earlier),
    /// this daemon saw the switch, or a live claim says so.
    pub(in crate::core) fn conversation_owner(
        &self,
        conversation: &SessionKey,
    ) -> Option<SessionKey> {
        if let Some(owner) = lock(&self.sessions.owners.seen).get(conversation) {
            return Some(owner.clone());
        }
        if let Some(owner) = self
            .organize
            .sidecar
            .owner_of(conversation)
            .and_then(|k| SessionKey::parse(&k).ok())
        {
            return Some(owner);
        }
        self.live_claim(conversation).map(|c| c.1)
    }

    /// Whether `conversation` is shown as a link to another session: one
    /// writes or wrote it, and no master of its own runs it.
    pub(in crate::core) fn written_by_other(&self, conversation: &SessionKey) -> bool {
        self.catalog.kind_of(conversation.engine()).is_some()
            && self.conversation_owner(conversation).is_some()
            && lock(&self.sessions.runtimes)
                .get(conversation)
                .is_none_or(|rt| rt.live_client().is_none())
    }

    /// The conversations this daemon saw sessions switch to, and those
    /// live claims name (made by a hook while no daemon ran, or by another
    /// daemon): listed as their sessions, not on their own.
    pub(in crate::core) fn switched_conversations(&self) -> Vec<SessionKey> {
        let mut keys: Vec<SessionKey> = lock(&self.sessions.owners.seen).keys().cloned().collect();
        let Ok(dir) = std::fs::read_dir(claims::dir(&self.config.lock_dir)) else {
            return keys;
        };
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if let Ok(conversation) = SessionKey::parse(stem) {
                if self.live_claim(&conversation).is_some() {
                    keys.push(conversation);
                }
            }
        }
        keys
    }

    /// A claim on `conversation` by a session whose master lives.
    pub(in crate::core) fn live_claim(
        &self,
        conversation: &SessionKey,
    ) -> Option<(Claim, SessionKey)> {
        let claim = claims::read(&self.config.lock_dir, conversation.as_str())?;
        let by = SessionKey::parse(&claim.by).ok()?;
        (by != *conversation && live_record(&self.paths, &by).is_some()).then_some((claim, by))
    }

    /// Who else writes `conversation` now: a master of its own, or another
    /// session's master that claimed it.
    fn other_writer(&self, key: &SessionKey, conversation: &SessionKey) -> Option<SessionKey> {
        if conversation != key && live_record(&self.paths, conversation).is_some() {
            return Some(conversation.clone());
        }
        self.live_claim(conversation)
            .map(|(_, by)| by)
            .filter(|by| by != key)
    }

    /// The agent of `key`'s master now writes conversation `to`: the
    /// session goes on as it. `why` says how it was learnt.
    pub(in crate::core) fn switch_conversation(
        &self,
        key: &SessionKey,
        rt: &Arc<SessionRuntime>,
        to: &str,
        why: &str,
    ) {
        let from = self.conversation_id(key);
        let Ok(to_key) = SessionKey::new(key.engine(), to) else {
            log::warn!("{key}: its agent switched to a conversation named {to:?}, not an id");
            return;
        };
        if from == to {
            return;
        }
        if let Some(other) = self.other_writer(key, &to_key) {
            let why = format!(
                "the agent of {key} switched to conversation {to_key}, which the master of {other} writes too: two processes write it; stop one of them"
            );
            log::error!("{why}");
            lock(&rt.state).error = Some(why.clone());
            lock(&self.runtime(&other).state).error = Some(why);
        }
        lock(&rt.state).conversation = Some(to.to_string());
        rt.agent.own_id(to);
        {
            let mut seen = lock(&self.sessions.owners.seen);
            seen.insert(to_key.clone(), key.clone());
            if let Ok(from_key) = SessionKey::new(key.engine(), &from) {
                if from_key != *key {
                    seen.insert(from_key, key.clone());
                }
            }
        }
        lock(&self.sessions.transcripts).remove(key);
        log::info!("{key}: its agent now writes {to_key} ({why}); before, {from}");
        // A conversation the store never had (the key's own id, before an
        // agent that names its conversations wrote its first) is no earlier
        // conversation of the session.
        let written = SessionKey::new(key.engine(), &from)
            .ok()
            .is_some_and(|from_key| self.catalog.find(&from_key).is_some());
        // The kernel may hold `to` as a directory of its own: it is a link now.
        self.moved(&to_key);
        self.record_switch(key, rt, from, written, to_key);
        self.record_changed(key);
    }

    /// Writes the switch into the sidecar and the claim into the lock
    /// directory, from the pool: neither waits on a request thread.
    fn record_switch(
        &self,
        key: &SessionKey,
        rt: &Arc<SessionRuntime>,
        from: String,
        written: bool,
        to: SessionKey,
    ) {
        let sidecar = self.organize.sidecar.clone();
        let lock_dir = self.config.lock_dir.clone();
        let agent_pid = lock(&rt.state).record.as_ref().map_or(0, |r| r.agent_pid);
        let created = self.row(key).created_ms;
        let what = format!("recording {key}'s switch to {to}");
        let key = key.clone();
        let rt = rt.clone();
        self.work.submit(what, crate::work::DEADLINE, SwitchRecorded, move || {
            let claim = Claim {
                conversation: to.to_string(),
                by: key.to_string(),
                agent_pid,
                ts_ms: now_ms(),
            };
            if let Err(Refused::Held) = claims::make(&lock_dir, &claim) {
                let why = format!(
                    "the agent of {key} switched to conversation {to}, whose own master holds its lock: two processes write it; stop one of them"
                );
                log::error!("{why}");
                lock(&rt.state).error = Some(why);
            }
            if let Ok(from_key) = SessionKey::new(key.engine(), &from) {
                claims::end(&lock_dir, from_key.as_str(), key.as_str());
            }
            sidecar.update(|all| {
                let meta = all.entry_or(key.as_str(), || SessionMeta {
                    created_ms: created,
                    ..Default::default()
                });
                note_switch(meta, key.id(), written.then_some(from.as_str()), to.id());
                Ok(())
            })
        });
    }
}

/// Puts a switch from `from` to `to` into a session's record: `to` is
/// current (none when it is the key's own id), `from`, when the store had
/// it, the newest earlier one, each conversation once.
fn note_switch(meta: &mut SessionMeta, own_id: &str, from: Option<&str>, to: &str) {
    meta.conversations
        .retain(|c| Some(c.as_str()) != from && c != to);
    meta.conversations.extend(from.map(str::to_string));
    if meta.conversations.len() > EARLIER_MAX {
        let extra = meta.conversations.len() - EARLIER_MAX;
        meta.conversations.drain(..extra);
    }
    meta.conversation = (to != own_id).then(|| to.to_string());
}

/// Hears how recording a switch went.
struct SwitchRecorded;

impl crate::work::Answer<()> for SwitchRecorded {
    fn done(self, result: Result<()>) {
        if let Err(e) = result {
            log::warn!("a conversation switch was not recorded: {}", e.message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_keeps_each_earlier_conversation_once_oldest_first() {
        let mut meta = SessionMeta::default();
        note_switch(&mut meta, "a", Some("a"), "b");
        assert_eq!(meta.conversation.as_deref(), Some("b"));
        assert_eq!(meta.conversations, ["a"]);
        note_switch(&mut meta, "a", Some("b"), "c");
        assert_eq!(meta.conversations, ["a", "b"]);
        // Back to the key's own conversation.
        note_switch(&mut meta, "a", Some("c"), "a");
        assert_eq!(meta.conversation, None);
        assert_eq!(meta.conversations, ["b", "c"]);
        for i in 0..100 {
            let from = format!("x{i}");
            note_switch(&mut meta, "a", Some(&from), &format!("x{}", i + 1));
        }
        assert_eq!(meta.conversations.len(), EARLIER_MAX);
        assert_eq!(meta.conversations.last().map(String::as_str), Some("x99"));
    }

    #[test]
    fn a_conversation_the_store_never_had_is_not_an_earlier_one() {
        let mut meta = SessionMeta::default();
        note_switch(&mut meta, "k", None, "ses_1");
        assert_eq!(meta.conversation.as_deref(), Some("ses_1"));
        assert!(meta.conversations.is_empty());
    }
}
