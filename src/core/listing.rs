//! Every session as one row, gathered in one pass: the sidecar once, the
//! catalog's index once, the live runtimes once, the runtime directory's
//! sockets once. The root directory, the views, `sessions.json`,
//! `sessionfs ls` and `meta.json` all read rows, so they agree; listing N
//! sessions costs O(N log N) and creates nothing per session.

use super::{lock, Core, SessionRuntime, HOSTED};
use crate::catalog::Indexed;
use crate::error::Result;
use crate::key::SessionKey;
use crate::listing::{self, Entry, Listed, Listing, Query};
use crate::runtime::Outcome;
use crate::sidecar::SessionMeta;
use crate::timefmt::rfc3339_ms;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

/// One session as the listing and `meta.json` show it.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub key: SessionKey,
    pub meta: SessionMeta,
    /// Its conversation in the engine's store, if the catalog has one.
    pub store: Option<Arc<Indexed>>,
    pub last_activity_ms: u64,
    pub state: &'static str,
    pub pid: Option<u32>,
    /// The title shown: the sidecar's, else the store's.
    pub title: Option<String>,
}

impl Listed for Row {
    fn key(&self) -> &SessionKey {
        &self.key
    }
    fn favourite(&self) -> bool {
        self.meta.favourite
    }
    fn archived(&self) -> bool {
        self.meta.archived
    }
    fn project(&self) -> Option<&str> {
        self.meta.project.as_deref()
    }
    fn last_activity_ms(&self) -> u64 {
        self.last_activity_ms
    }
    fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }
}

/// What one session's row is made of.
struct Parts<'a> {
    meta: Option<SessionMeta>,
    store: Option<Arc<Indexed>>,
    runtime: Option<&'a Arc<SessionRuntime>>,
    /// Whether a socket file for the session is in the runtime directory.
    socket: bool,
    /// The mtime of a hosted run's transcript, or of a kept archived copy.
    other_mtime_ms: Option<u64>,
}

fn mtime_ms(path: &std::path::Path) -> Option<u64> {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64)
}

/// The state a session shows: `archived`, `live`, `busy` or `stopped`.
pub(super) fn state_of(
    archived: bool,
    runtime: Option<&Arc<SessionRuntime>>,
    answers: impl FnOnce() -> bool,
) -> &'static str {
    if archived {
        return "archived";
    }
    let (connected, busy) = runtime.map_or((false, false), |rt| {
        let state = lock(&rt.state);
        (state.client.is_some(), state.outcome == Some(Outcome::Busy))
    });
    if connected || answers() {
        // Served by a master this daemon has not joined (another daemon's).
        "live"
    } else if busy {
        "busy"
    } else {
        "stopped"
    }
}

impl Core {
    fn make_row(&self, key: SessionKey, parts: Parts<'_>) -> Row {
        let known = parts.meta.is_some();
        let mut meta = parts.meta.unwrap_or_default();
        let mut last = meta.created_ms;
        if let Some(store) = &parts.store {
            last = last.max(store.file.mtime_ms);
            // Created when its conversation began, whoever recorded it later.
            if let Some(created) = store.created_ms().or(Some(store.file.mtime_ms)) {
                if !known || meta.created_ms == 0 || created < meta.created_ms {
                    meta.created_ms = created;
                }
            }
        }
        if let Some(ms) = parts.other_mtime_ms {
            last = last.max(ms);
            if !known && meta.created_ms == 0 {
                meta.created_ms = ms;
            }
        }
        let mut pid = None;
        if let Some(rt) = parts.runtime {
            let state = lock(&rt.state);
            last = last.max(state.last_input_ms);
            if rt.scrollback.total() > 0 {
                let output = rt
                    .scrollback
                    .last_append()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                last = last.max(output);
            }
            pid = state
                .client
                .as_ref()
                .and(state.record.as_ref().map(|r| r.agent_pid));
        }
        let socket = parts.socket;
        let state = state_of(meta.archived, parts.runtime, || {
            socket && std::os::unix::net::UnixStream::connect(self.paths.socket(&key)).is_ok()
        });
        let title = meta
            .title
            .clone()
            .or_else(|| parts.store.as_ref().and_then(|s| s.title()));
        Row {
            key,
            meta,
            store: parts.store,
            last_activity_ms: last,
            state,
            pid,
            title,
        }
    }

    /// The sockets in the runtime directory, by file name.
    fn socket_names(&self) -> HashSet<OsString> {
        let Ok(dir) = std::fs::read_dir(&self.config.runtime_dir) else {
            return HashSet::new();
        };
        dir.flatten()
            .map(|e| e.file_name())
            .filter(|n| n.as_encoded_bytes().ends_with(b".sock"))
            .collect()
    }

    /// The conversation key a session's store is found under.
    fn conversation_key(key: &SessionKey, meta: Option<&SessionMeta>) -> SessionKey {
        meta.and_then(|m| m.conversation.as_deref())
            .and_then(|c| SessionKey::new(key.engine(), c).ok())
            .unwrap_or_else(|| key.clone())
    }

    /// For an archived session whose store file is gone: its kept copy's mtime.
    fn archived_copy_mtime(&self, key: &SessionKey, meta: Option<&SessionMeta>) -> Option<u64> {
        if !meta.is_some_and(|m| m.archived) {
            return None;
        }
        self.archived_store(key).map(|f| f.mtime_ms)
    }

    /// Every session, in listing order (favourites, newest activity, key).
    /// With `summaries`, store titles are current (changed files are read,
    /// a bounded part each); without, only what `readdir` needs is gathered.
    pub(crate) fn rows(&self, summaries: bool) -> Vec<Row> {
        // A session this daemon launched may since have got its engine's
        // own conversation id: bind it first, so it lists once.
        let launched: Vec<SessionKey> = lock(&self.sessions)
            .iter()
            .filter(|(_, rt)| lock(&rt.state).launched.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for key in &launched {
            self.store_file(key);
        }
        let sidecar = self.sidecar.all();
        let files = if summaries {
            self.catalog.summarised()
        } else {
            self.catalog.files()
        };
        let runtimes: HashMap<SessionKey, Arc<SessionRuntime>> = lock(&self.sessions).clone();
        let sockets = self.socket_names();
        let hosted: HashMap<String, Option<u64>> = self
            .slots
            .transcripts()
            .into_iter()
            .map(|id| {
                let at = mtime_ms(&self.slots.transcript_path(&id));
                (id, at)
            })
            .collect();

        let mut keys: HashSet<SessionKey> = HashSet::with_capacity(sidecar.len() + files.len());
        let mut claimed: HashSet<SessionKey> = HashSet::new();
        for (k, meta) in &sidecar {
            let Ok(key) = SessionKey::parse(k) else {
                continue;
            };
            if meta.conversation.is_some() {
                claimed.insert(Self::conversation_key(&key, Some(meta)));
            }
            keys.insert(key);
        }
        for (key, rt) in &runtimes {
            if rt.live_client().is_some() {
                keys.insert(key.clone());
            }
        }
        for id in hosted.keys() {
            if let Ok(key) = SessionKey::new(HOSTED, id) {
                keys.insert(key);
            }
        }
        // A conversation bound to a session shows as that session only.
        for key in files.keys() {
            if !claimed.contains(key) {
                keys.insert(key.clone());
            }
        }

        let mut rows: Vec<Row> = keys
            .into_iter()
            .map(|key| {
                let name = key.to_string();
                let meta = sidecar.get(&name).cloned();
                let store = if self.catalog.kind_of(key.engine()).is_some() {
                    files
                        .get(&Self::conversation_key(&key, meta.as_ref()))
                        .cloned()
                } else {
                    None
                };
                let other_mtime_ms = if key.engine() == HOSTED {
                    hosted.get(key.id()).copied().flatten()
                } else if store.is_none() && self.catalog.kind_of(key.engine()).is_some() {
                    self.archived_copy_mtime(&key, meta.as_ref())
                } else {
                    None
                };
                let socket = self
                    .paths
                    .socket(&key)
                    .file_name()
                    .is_some_and(|n| sockets.contains(n));
                let parts = Parts {
                    meta,
                    store,
                    runtime: runtimes.get(&key),
                    socket,
                    other_mtime_ms,
                };
                self.make_row(key, parts)
            })
            .collect();
        listing::order(&mut rows);
        rows
    }

    /// One session's row, read without gathering the others.
    pub(crate) fn row(&self, key: &SessionKey) -> Row {
        if lock(&self.sessions)
            .get(key)
            .is_some_and(|rt| lock(&rt.state).launched.is_some())
        {
            self.store_file(key);
        }
        let meta = self.sidecar.get(&key.to_string());
        let store = if self.catalog.kind_of(key.engine()).is_some() {
            self.catalog
                .summary_of(&Self::conversation_key(key, meta.as_ref()))
        } else {
            None
        };
        let other_mtime_ms = if key.engine() == HOSTED {
            mtime_ms(&self.slots.transcript_path(key.id()))
        } else if store.is_none() && self.catalog.kind_of(key.engine()).is_some() {
            self.archived_copy_mtime(key, meta.as_ref())
        } else {
            None
        };
        let runtime = lock(&self.sessions).get(key).cloned();
        let parts = Parts {
            meta,
            store,
            runtime: runtime.as_ref(),
            socket: self.paths.socket(key).exists(),
            other_mtime_ms,
        };
        self.make_row(key.clone(), parts)
    }

    /// The `meta.json` document of a row.
    pub(crate) fn meta_of(&self, row: &Row) -> Value {
        let workspace: PathBuf = row
            .meta
            .workspace
            .clone()
            .or_else(|| row.store.as_ref().and_then(|s| s.cwd().map(str::to_string)))
            .map(PathBuf::from)
            .unwrap_or_else(|| self.config.home.clone());
        json!({
            "key": row.key.to_string(),
            "engine": row.key.engine(),
            "id": row.key.id(),
            "title": row.title,
            "project": row.meta.project,
            "favourite": row.meta.favourite,
            "archived": row.meta.archived,
            "workspace": workspace,
            "created": rfc3339_ms(row.meta.created_ms),
            "last_activity": rfc3339_ms(row.last_activity_ms),
            "state": row.state,
            "pid": row.pid,
        })
    }

    /// The session's `meta.json` as a value.
    pub fn meta_value(&self, key: &SessionKey) -> Result<Value> {
        self.require(key)?;
        Ok(self.meta_of(&self.row(key)))
    }

    /// Every session this daemon knows (the sidecar's, the live ones, the
    /// hosted runs' and the stores' conversations), in listing order.
    pub fn keys(&self) -> Vec<SessionKey> {
        self.rows(false).into_iter().map(|r| r.key).collect()
    }

    /// The sessions of one scope (archived or active), in listing order.
    pub fn keys_in(&self, archived: bool) -> Vec<SessionKey> {
        self.rows(false)
            .into_iter()
            .filter(|r| r.meta.archived == archived)
            .map(|r| r.key)
            .collect()
    }

    /// Every session as the listing's entries (the views group them).
    pub fn entries(&self) -> Vec<Entry> {
        self.rows(false)
            .into_iter()
            .map(|r| Entry {
                key: r.key,
                meta: Value::Null,
                favourite: r.meta.favourite,
                archived: r.meta.archived,
                project: r.meta.project,
                last_activity_ms: r.last_activity_ms,
                title: r.title,
            })
            .collect()
    }

    /// `sessions.json` and `sessionfs ls`.
    pub fn listing(&self, query: &Query) -> Listing {
        listing::list_by(self.rows(true), query, |row| self.meta_of(&row))
    }

    /// Saves the catalog's index if this process read summaries (one-shot
    /// commands; a daemon saves from its catalog thread).
    pub fn save_catalog(&self) {
        self.catalog.save_if_new();
    }
}
