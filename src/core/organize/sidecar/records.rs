//! The records in memory: every session's record, which session each
//! recorded conversation belongs to, and the last changes made, each kept
//! current change by change so that no question about one record costs a
//! pass over all of them.

use super::SessionMeta;
use crate::key::SessionKey;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// How many of the last changes are kept for [`Index::changes_since`].
const CHANGES_KEPT: usize = 4096;

/// Records as a change writes them: each key with its whole new record,
/// `None` for one removed.
pub type Written = Vec<(String, Option<SessionMeta>)>;

/// One record's change: what it was and what it is (`None`: no record).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub key: String,
    pub before: Option<SessionMeta>,
    pub after: Option<SessionMeta>,
}

/// The records as installed, and what is derived from them.
#[derive(Debug, Default)]
pub(super) struct Index {
    pub sessions: BTreeMap<String, SessionMeta>,
    /// Conversation → the sessions whose record names it (as current or
    /// earlier), when that is not the session's own id.
    owners: HashMap<SessionKey, BTreeSet<String>>,
    /// Changes in the order they were installed, with the generation each
    /// made: every change after generation `changes_from` is here.
    changes: VecDeque<(u64, Change)>,
    changes_from: u64,
    /// Bumped by every installed change and every reload.
    pub generation: u64,
}

/// The conversations a record names besides its own key.
fn named(key: &str, meta: &SessionMeta) -> Vec<SessionKey> {
    let Ok(own) = SessionKey::parse(key) else {
        return Vec::new();
    };
    meta.conversation
        .iter()
        .chain(&meta.conversations)
        .filter_map(|id| SessionKey::new(own.engine(), id).ok())
        .filter(|c| *c != own)
        .collect()
}

impl Index {
    /// Replaces everything (a reload): the change history starts again.
    pub fn reload(&mut self, sessions: BTreeMap<String, SessionMeta>) {
        self.owners.clear();
        for (key, meta) in &sessions {
            for c in named(key, meta) {
                self.owners.entry(c).or_default().insert(key.clone());
            }
        }
        self.sessions = sessions;
        self.generation += 1;
        self.changes.clear();
        self.changes_from = self.generation;
    }

    /// Installs one record (`None`: removes it). Returns whether anything changed.
    pub fn set(&mut self, key: String, meta: Option<SessionMeta>) -> bool {
        let before = match &meta {
            Some(m) => {
                if self.sessions.get(&key) == Some(m) {
                    return false;
                }
                self.sessions.insert(key.clone(), m.clone())
            }
            None => match self.sessions.remove(&key) {
                Some(old) => Some(old),
                None => return false,
            },
        };
        if let Some(old) = &before {
            for c in named(&key, old) {
                if let Some(set) = self.owners.get_mut(&c) {
                    set.remove(&key);
                    if set.is_empty() {
                        self.owners.remove(&c);
                    }
                }
            }
        }
        if let Some(new) = &meta {
            for c in named(&key, new) {
                self.owners.entry(c).or_default().insert(key.clone());
            }
        }
        self.generation += 1;
        if self.changes.len() == CHANGES_KEPT {
            if let Some((dropped, _)) = self.changes.pop_front() {
                self.changes_from = dropped;
            }
        }
        self.changes.push_back((
            self.generation,
            Change {
                key,
                before,
                after: meta,
            },
        ));
        true
    }

    /// The changes installed after generation `since`, oldest first; `None`
    /// when they are no longer all known (too many, or a reload since).
    pub fn changes_since(&self, since: u64) -> Option<Vec<Change>> {
        if since < self.changes_from {
            return None;
        }
        Some(
            self.changes
                .iter()
                .filter(|(g, _)| *g > since)
                .map(|(_, c)| c.clone())
                .collect(),
        )
    }

    /// The session whose record names `conversation` (the last in key
    /// order when several do).
    pub fn owner_of(&self, conversation: &SessionKey) -> Option<&String> {
        self.owners
            .get(conversation)
            .and_then(|s| s.iter().next_back())
    }

    /// Every session whose record names `conversation`.
    pub fn owners_of(&self, conversation: &SessionKey) -> impl Iterator<Item = &String> {
        self.owners.get(conversation).into_iter().flatten()
    }
}

/// The records a change is made to: reads see the installed records with
/// the change's own writes over them; the writes are kept apart until the
/// change is written to disk and installed.
#[derive(Debug)]
pub struct Records<'a> {
    installed: &'a Index,
    staged: BTreeMap<String, Option<SessionMeta>>,
}

impl<'a> Records<'a> {
    pub(super) fn new(installed: &'a Index) -> Records<'a> {
        Records {
            installed,
            staged: BTreeMap::new(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&SessionMeta> {
        match self.staged.get(key) {
            Some(staged) => staged.as_ref(),
            None => self.installed.sessions.get(key),
        }
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut SessionMeta> {
        let installed = self.installed;
        self.staged
            .entry(key.to_string())
            .or_insert_with(|| installed.sessions.get(key).cloned())
            .as_mut()
    }

    /// The record of `key`, made by `make` when there is none.
    pub fn entry_or(&mut self, key: &str, make: impl FnOnce() -> SessionMeta) -> &mut SessionMeta {
        let installed = self.installed;
        self.staged
            .entry(key.to_string())
            .or_insert_with(|| installed.sessions.get(key).cloned())
            .get_or_insert_with(make)
    }

    pub fn insert(&mut self, key: String, meta: SessionMeta) {
        self.staged.insert(key, Some(meta));
    }

    pub fn remove(&mut self, key: &str) {
        self.staged.insert(key.to_string(), None);
    }

    /// The sessions whose installed record names `conversation`.
    pub fn owners_of(&self, conversation: &SessionKey) -> Vec<String> {
        self.installed.owners_of(conversation).cloned().collect()
    }

    /// What the change writes: each record it touched whose value differs
    /// from the installed one.
    pub(super) fn into_changes(self) -> Written {
        let installed = self.installed;
        self.staged
            .into_iter()
            .filter(|(key, meta)| installed.sessions.get(key) != meta.as_ref())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(conversation: Option<&str>, earlier: &[&str]) -> SessionMeta {
        SessionMeta {
            conversation: conversation.map(str::to_string),
            conversations: earlier.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn key(s: &str) -> SessionKey {
        SessionKey::parse(s).unwrap()
    }

    #[test]
    fn owners_follow_each_change() {
        let mut index = Index::default();
        index.set("claude:a".into(), Some(meta(Some("b"), &["a"])));
        assert_eq!(index.owner_of(&key("claude:b")).unwrap(), "claude:a");
        assert!(index.owner_of(&key("claude:a")).is_none(), "its own id");
        index.set("claude:a".into(), Some(meta(Some("c"), &["a", "b"])));
        assert_eq!(index.owner_of(&key("claude:b")).unwrap(), "claude:a");
        assert_eq!(index.owner_of(&key("claude:c")).unwrap(), "claude:a");
        index.set("claude:a".into(), None);
        assert!(index.owner_of(&key("claude:b")).is_none());
        assert!(index.owner_of(&key("claude:c")).is_none());
    }

    #[test]
    fn changes_are_known_since_a_generation_until_too_many_or_a_reload() {
        let mut index = Index::default();
        let start = index.generation;
        for i in 0..3 {
            index.set(format!("shell:{i}"), Some(SessionMeta::default()));
        }
        assert!(
            !index.set("shell:0".into(), Some(SessionMeta::default())),
            "the same record is no change"
        );
        let changes = index.changes_since(start).unwrap();
        assert_eq!(changes.len(), 3);
        assert_eq!(changes[0].key, "shell:0");
        assert!(changes[0].before.is_none());
        let mid = index.generation;
        index.set("shell:1".into(), None);
        let later = index.changes_since(mid).unwrap();
        assert_eq!(later.len(), 1);
        assert!(later[0].after.is_none());
        for i in 0..CHANGES_KEPT {
            index.set(format!("shell:x{i}"), Some(SessionMeta::default()));
        }
        assert!(index.changes_since(mid).is_none(), "too many since");
        let now = index.generation;
        index.reload(BTreeMap::new());
        assert!(index.changes_since(now).is_none(), "reloaded since");
        assert_eq!(index.changes_since(index.generation).unwrap(), vec![]);
    }

    #[test]
    fn a_change_reads_its_own_writes_and_installs_only_what_differs() {
        let mut index = Index::default();
        index.set("shell:a".into(), Some(SessionMeta::default()));
        let mut records = Records::new(&index);
        records.entry_or("shell:a", SessionMeta::default);
        records.entry_or("shell:b", SessionMeta::default).favourite = true;
        assert!(records.get("shell:b").unwrap().favourite);
        records.remove("shell:c");
        let changes = records.into_changes();
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].0, "shell:b");
    }
}
