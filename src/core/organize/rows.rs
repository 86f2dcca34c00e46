//! Every session as one row, gathered in one pass: the sidecar once, the
//! catalog's index once, the live runtimes once, the runtime directory's
//! sockets once. The root directory, the views, `sessions.json`,
//! `sessionfs ls` and `meta.json` all read rows, so they agree; listing N
//! sessions costs O(N log N) and creates nothing per session.

use crate::catalog::Indexed;
use crate::clock::path_mtime_ms;
use crate::core::organize::hosted_times::HostedTimes;
use crate::core::organize::query::{self, Listed, Listing, Query};
use crate::core::organize::sidecar::SessionMeta;
use crate::core::{Core, SessionRuntime, HOSTED};
use crate::error::Result;
use crate::key::SessionKey;
use crate::pieced_text::PiecedText;
use crate::runtime::record::stamped_activity_ms;
use crate::runtime::Outcome;
use crate::sync::{drop_elsewhere, lock};
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a cached listing may be served while nothing it depends on
/// changed (a master of another daemon dying leaves no trace to see).
const CACHE_FOR: Duration = Duration::from_secs(1);

/// One session as the listing and `meta.json` show it.
#[derive(Debug, Clone)]
pub(crate) struct SessionRow {
    pub key: SessionKey,
    /// Its record; most conversations have none, and a row is moved and
    /// freed many times in a listing of 100,000, so it is held apart.
    pub meta: RowMeta,
    /// When it began: its record's time, or its store's first row.
    pub created_ms: u64,
    /// Its conversation in the engine's store, if the catalog has one.
    pub store: Option<Arc<Indexed>>,
    pub last_activity_ms: u64,
    pub state: &'static str,
    /// What the program is doing (`state`): `stopped` without a runtime.
    pub agent_state: &'static str,
    pub pid: Option<u32>,
    /// A conversation only its store speaks of (no record, runtime, socket
    /// or run record): its document is made from its catalog entry alone.
    pub plain: bool,
}

/// A row's record, or none (read as the default record).
#[derive(Debug, Clone, Default)]
pub(crate) struct RowMeta(Option<Box<SessionMeta>>);

/// What a session without a record shows.
static NO_RECORD: SessionMeta = SessionMeta::none();

impl std::ops::Deref for RowMeta {
    type Target = SessionMeta;
    fn deref(&self) -> &SessionMeta {
        self.0.as_deref().unwrap_or(&NO_RECORD)
    }
}

impl SessionRow {
    /// The title shown: the sidecar's, else the store's.
    pub fn title(&self) -> Option<&str> {
        self.meta
            .title
            .as_deref()
            .or_else(|| self.store.as_deref().and_then(Indexed::title))
    }
}

/// A session's `meta.json`, its fields in the order the file shows them.
/// Its hash covers everything the text shows, so a document whose hash is
/// unchanged need not be written again.
#[derive(Debug, Hash, Serialize)]
pub(crate) struct MetaDoc<'a> {
    // In key order, as a parsed document (`sessionfs ls`) prints them.
    agent_state: &'a str,
    archived: bool,
    /// The engine's id of the conversation its process writes now.
    conversation: &'a str,
    /// The ones it wrote before, oldest first.
    conversations: &'a [String],
    /// What its requests cost, in US dollars; null until counted, or
    /// while a model has no price.
    cost_usd: Option<crate::usage::Dollars>,
    created: UtcText,
    engine: &'a str,
    favourite: bool,
    /// The conversation a fork started from. This and the other fields
    /// `new` may set are left out unless set: `sessions.json` holds
    /// 100,000 documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    forked_from: Option<&'a str>,
    id: &'a str,
    key: &'a str,
    last_activity: UtcText,
    /// The permission mode and model asked for at `new`.
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    pid: Option<u32>,
    project: Option<&'a str>,
    state: &'a str,
    title: Option<&'a str>,
    /// Every token its requests used; null until counted.
    tokens: Option<u64>,
    /// The question the agent shows while `waiting`, else null.
    waiting_for: Option<crate::agent::dialogs::Dialog>,
    workspace: Cow<'a, str>,
    /// The git worktree `new` made.
    #[serde(skip_serializing_if = "Option::is_none")]
    worktree: Option<WorktreeDoc<'a>>,
}

/// A session's worktree in its `meta.json`, in key order.
#[derive(Debug, Hash, Serialize)]
pub(crate) struct WorktreeDoc<'a> {
    base: &'a str,
    base_commit: &'a str,
    branch: &'a str,
    path: &'a str,
    /// Removed by `prune` (its branch is kept).
    pruned: bool,
    repository: &'a str,
}

impl<'a> WorktreeDoc<'a> {
    fn of(w: &'a crate::core::organize::sidecar::Worktree) -> Self {
        WorktreeDoc {
            base: &w.base,
            base_commit: &w.base_commit,
            branch: &w.branch,
            path: &w.path,
            pruned: w.pruned,
            repository: &w.repo,
        }
    }
}

/// A time in milliseconds since the epoch, written as UTC text: kept as
/// the number so a document is cheap to make and to hash.
#[derive(Debug, Clone, Copy, Hash)]
struct UtcText(u64);

impl Serialize for UtcText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&crate::core::utc_text(self.0))
    }
}

/// `sessions.json` with no sessions: the frame each version's documents
/// are set in (the sessions come last, so a reader can stop after a page).
type Frame = query::Page<()>;

/// Where a `meta.json` text sits in `sessions.json`: inside the object's
/// `sessions` array, two levels down.
const DOC_INDENT: &[u8] = b"    ";

/// Each session's `meta.json` text as set in `sessions.json`, kept from
/// one version to the next by the hash of its key, with the hash of the
/// document it was made from.
#[derive(Debug, Default)]
pub(in crate::core) struct DocTexts(HashMap<u64, (u64, Arc<[u8]>)>);

/// What a listing depends on besides time; equal stamps, equal listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::core) struct Stamp {
    catalog: u64,
    /// The metadata's generation (exact; its mtime may not move between two writes).
    sidecar: u64,
    /// The runtime directory (sockets come and go) and every runtime's state.
    runtimes: u64,
    /// The hosted runs' transcripts.
    hosted: u64,
    /// The usage counter's publications.
    usage: u64,
}

/// One cached result: what it was made from, when, and it.
type Slot<T> = Mutex<Option<(Stamp, Instant, T)>>;

/// Listings made recently, served again while their stamp holds.
#[derive(Debug, Default)]
pub(in crate::core) struct ListingCache {
    rows: Slot<Arc<Vec<SessionRow>>>,
    sessions_json: Slot<Arc<PiecedText>>,
    /// The documents the last `sessions.json` was made of.
    doc_texts: Mutex<DocTexts>,
    /// The run records' stamps as last read.
    pub(in crate::core) records: crate::core::organize::run_stamps::RecordStamps,
    /// When each hosted transcript began.
    pub(in crate::core) hosted_created: crate::core::organize::hosted_times::HostedCreated,
    /// Every session's row gathered, so many times.
    #[cfg(test)]
    gathered: std::sync::atomic::AtomicU64,
}

impl ListingCache {
    /// How many times every session's row was gathered.
    #[cfg(test)]
    pub(in crate::core) fn gathered(&self) -> u64 {
        self.gathered.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drops what is too old to be served again.
    pub(in crate::core) fn expire(&self) {
        // Freed here, outside the slots' locks.
        drop(expired(&self.rows));
        drop(expired(&self.sessions_json));
    }
}

fn expired<T>(slot: &Slot<T>) -> Option<T> {
    let mut slot = lock(slot);
    if slot
        .as_ref()
        .is_some_and(|(_, at, _)| at.elapsed() >= CACHE_FOR)
    {
        return slot.take().map(|(_, _, v)| v);
    }
    None
}

fn cached<T: Clone>(slot: &Slot<T>, stamp: Stamp) -> Option<T> {
    match &*lock(slot) {
        Some((s, at, v)) if *s == stamp && at.elapsed() < CACHE_FOR => Some(v.clone()),
        _ => None,
    }
}

impl Listed for SessionRow {
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
        SessionRow::title(self)
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
    /// When a hosted run's transcript began (see [`Core::hosted_times`]).
    hosted_created_ms: Option<u64>,
    /// The last activity stamped on its run record, for a session with no
    /// runtime here (a runtime knows it).
    record_ms: Option<u64>,
}

/// The state a session shows: `archived`, `live`, `busy` or `stopped`.
pub(in crate::core) fn state_of(
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
    fn make_row(&self, key: SessionKey, parts: Parts<'_>) -> SessionRow {
        let known = parts.meta.is_some();
        let meta = RowMeta(parts.meta.map(Box::new));
        let mut created_ms = meta.created_ms;
        let mut last = created_ms;
        if let Some(store) = &parts.store {
            last = last.max(store.file.mtime_ms);
            // Created when its conversation began, whoever recorded it later.
            if let Some(created) = store.created_ms().or(Some(store.file.mtime_ms)) {
                if !known || created_ms == 0 || created < created_ms {
                    created_ms = created;
                }
            }
        }
        if let Some(created) = parts.hosted_created_ms {
            // As a store's conversation: when its transcript began, whoever
            // recorded it later.
            if created_ms == 0 || created < created_ms {
                created_ms = created;
            }
        }
        if let Some(ms) = parts.other_mtime_ms {
            last = last.max(ms);
            // Only when nothing above said when it began.
            if !known && created_ms == 0 {
                created_ms = ms;
            }
        }
        if parts.runtime.is_none() {
            last = last.max(parts.record_ms.unwrap_or(0));
        }
        let mut pid = None;
        if let Some(rt) = parts.runtime {
            last = last.max(rt.last_activity_ms());
            let state = lock(&rt.state);
            pid = state
                .client
                .as_ref()
                .and(state.record.as_ref().map(|r| r.agent_pid));
        }
        let socket = parts.socket;
        let state = state_of(meta.archived, parts.runtime, || {
            socket && crate::runtime::dtach::answers(&self.paths.socket(&key))
        });
        let agent_state = match parts.runtime {
            Some(rt) => rt.agent.state().as_str(),
            None if state == "live" => self.unjoined_state(&key).as_str(),
            None => "stopped",
        };
        SessionRow {
            key,
            meta,
            created_ms,
            store: parts.store,
            last_activity_ms: last,
            state,
            agent_state,
            pid,
            plain: false,
        }
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

    /// What the listing depends on, as of now.
    pub(in crate::core) fn listing_stamp(&self) -> Stamp {
        let mut runtimes = std::collections::hash_map::DefaultHasher::new();
        std::fs::metadata(&self.config.runtime_dir)
            .and_then(|m| m.modified())
            .ok()
            .hash(&mut runtimes);
        // A claim made or ended (a switch seen by a hook or another daemon).
        std::fs::metadata(crate::agent::claims::dir(&self.config.lock_dir))
            .and_then(|m| m.modified())
            .ok()
            .hash(&mut runtimes);
        for (key, rt) in lock(&self.sessions.runtimes).iter() {
            let state = lock(&rt.state);
            (
                key,
                state.client.is_some(),
                state.outcome.as_ref().map(std::mem::discriminant),
                state.last_input_ms,
                state.launched,
                &state.conversation,
            )
                .hash(&mut runtimes);
            (rt.scrollback.total(), rt.scrollback.last_append()).hash(&mut runtimes);
            rt.agent.version().hash(&mut runtimes);
        }
        let mut hosted = std::collections::hash_map::DefaultHasher::new();
        for id in self.records.slots.transcripts() {
            (path_mtime_ms(&self.records.slots.transcript_path(&id)), id).hash(&mut hosted);
        }
        Stamp {
            catalog: self.catalog.version(),
            sidecar: self.organize.sidecar.generation(),
            runtimes: runtimes.finish(),
            hosted: hosted.finish(),
            usage: self.usage.version(),
        }
    }

    /// Every session, in listing order (favourites, newest activity, key).
    /// With `summaries`, store titles are current (changed files are read,
    /// a bounded part each); without, only what `readdir` needs is gathered.
    pub(crate) fn rows(&self, summaries: bool) -> Arc<Vec<SessionRow>> {
        self.bind_launched();
        if summaries {
            // Reads what changed first, so the stamp covers it.
            self.catalog.summarised();
        }
        let stamp = self.listing_stamp();
        self.rows_as_of(stamp, summaries)
    }

    /// [`rows`](Self::rows) once the launched sessions are bound and, with
    /// `summaries`, the summaries read; `stamp` taken after that.
    pub(in crate::core) fn rows_as_of(
        &self,
        stamp: Stamp,
        summaries: bool,
    ) -> Arc<Vec<SessionRow>> {
        if !summaries {
            if let Some(rows) = cached(&self.organize.listings.rows, stamp) {
                return rows;
            }
        }
        let rows = Arc::new(self.gather_rows());
        // Kept only when complete: a change summarised since the gathering
        // has moved the stamp past it anyway.
        if !summaries || self.catalog.all_summarised() {
            let old =
                lock(&self.organize.listings.rows).replace((stamp, Instant::now(), rows.clone()));
            drop_elsewhere(old);
        }
        rows
    }

    pub(in crate::core) fn gather_rows(&self) -> Vec<SessionRow> {
        #[cfg(test)]
        self.organize
            .listings
            .gathered
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut sidecar = self.organize.sidecar.all();
        let files = self.catalog.files();
        let runtimes: HashMap<SessionKey, Arc<SessionRuntime>> =
            lock(&self.sessions.runtimes).clone();
        let crate::core::organize::run_stamps::RuntimeDir { sockets, stamps } =
            self.read_runtime_dir(&runtimes);
        let hosted: HashMap<String, HostedTimes> = self
            .records
            .slots
            .transcripts()
            .into_iter()
            .map(|id| {
                let times = self.hosted_times(&id);
                (id, times)
            })
            .collect();
        self.keep_hosted_times(&hosted.keys().map(String::as_str).collect());

        let mut metas: HashMap<SessionKey, SessionMeta> = HashMap::with_capacity(sidecar.len());
        let mut claimed: HashSet<SessionKey> = HashSet::new();
        for (k, mut meta) in std::mem::take(&mut sidecar) {
            let Ok(key) = SessionKey::parse(&k) else {
                continue;
            };
            // A conversation found since a launch, its record perhaps still
            // on its way to the sidecar.
            let found = (!runtimes.is_empty())
                .then(|| runtimes.get(&key))
                .flatten()
                .and_then(|rt| lock(&rt.state).conversation.clone());
            if found.is_some() {
                meta.conversation = found;
            }
            if meta.conversation.is_some() {
                claimed.insert(Self::conversation_key(&key, Some(&meta)));
            }
            // What its process wrote before a switch is the session too.
            for id in &meta.conversations {
                if let Ok(earlier) = SessionKey::new(key.engine(), id) {
                    if earlier != key {
                        claimed.insert(earlier);
                    }
                }
            }
            metas.insert(key, meta);
        }
        claimed.extend(self.switched_conversations());
        let live: HashSet<&SessionKey> = runtimes
            .iter()
            .filter(|(_, rt)| rt.live_client().is_some())
            .map(|(k, _)| k)
            .collect();
        // Most sessions are conversations nobody touched: the checks below
        // look in a map only when it has something in it.
        let taken = |key: &SessionKey| {
            (!metas.is_empty() && metas.contains_key(key))
                || (!live.is_empty() && live.contains(key))
        };
        let socket = |key: &SessionKey| {
            !sockets.is_empty()
                && self
                    .paths
                    .socket(key)
                    .file_name()
                    .is_some_and(|n| sockets.contains(n))
        };
        let runtime = |key: &SessionKey| {
            if runtimes.is_empty() {
                None
            } else {
                runtimes.get(key)
            }
        };
        let record_ms = |key: &SessionKey| {
            if stamps.is_empty() {
                None
            } else {
                stamps.get(key).copied()
            }
        };
        let mut rows: Vec<SessionRow> =
            Vec::with_capacity(metas.len() + files.len() + hosted.len());

        // Every key any of the checks below may say something of, so that
        // each of the (many) other conversations costs one look, not six.
        let mut hashed_sockets = false;
        let mut special: HashSet<&SessionKey> = metas.keys().chain(live.iter().copied()).collect();
        special.extend(claimed.iter());
        special.extend(runtimes.keys());
        special.extend(stamps.keys());
        let socket_keys: Vec<SessionKey> = sockets
            .iter()
            .filter_map(|name| {
                let stem = name
                    .to_str()?
                    .strip_suffix(crate::core::organize::run_stamps::SOCKET)?;
                let key = SessionKey::parse(stem).ok();
                // A hash of a long key: such keys take the long way.
                hashed_sockets |= key.is_none();
                key
            })
            .collect();
        special.extend(socket_keys.iter());
        let plain = |key: &SessionKey| {
            (special.is_empty() || !special.contains(key))
                && (!hashed_sockets || self.paths.stem_is_key(key))
        };

        // Each session once: conversations no record or live session is
        // (a conversation bound to a session shows as that session only)...
        let conversation_rows = |part: &[(&SessionKey, &Arc<Indexed>)]| {
            let mut rows = Vec::with_capacity(part.len());
            for &(key, entry) in part {
                let special = !plain(key);
                if special && (taken(key) || (!claimed.is_empty() && claimed.contains(key))) {
                    continue;
                }
                let parts = Parts {
                    meta: None,
                    store: Some(entry.clone()),
                    runtime: special.then(|| runtime(key)).flatten(),
                    socket: special && socket(key),
                    other_mtime_ms: None,
                    hosted_created_ms: None,
                    record_ms: special.then(|| record_ms(key)).flatten(),
                };
                let plain = parts.runtime.is_none() && !parts.socket && parts.record_ms.is_none();
                let mut row = self.make_row(key.clone(), parts);
                row.plain = plain;
                rows.push(row);
            }
            rows
        };
        let conversations: Vec<(&SessionKey, &Arc<Indexed>)> = files.iter().collect();
        rows.append(&mut in_halves(&conversations, conversation_rows));
        // ...hosted runs without a record...
        for (id, times) in &hosted {
            let Ok(key) = SessionKey::new(HOSTED, id) else {
                continue;
            };
            if taken(&key) {
                continue;
            }
            let parts = Parts {
                meta: None,
                store: None,
                runtime: runtime(&key),
                socket: socket(&key),
                other_mtime_ms: times.mtime_ms,
                hosted_created_ms: times.created_ms,
                record_ms: record_ms(&key),
            };
            rows.push(self.make_row(key, parts));
        }
        // ...live sessions without a record, and the records.
        let mut recorded: Vec<(SessionKey, Option<SessionMeta>)> = live
            .iter()
            .filter(|k| !metas.contains_key(**k))
            .map(|k| ((*k).clone(), None))
            .collect();
        recorded.extend(metas.into_iter().map(|(k, m)| (k, Some(m))));
        for (key, meta) in recorded {
            // A hosted session is its transcript: a record whose transcript
            // is gone is not a session.
            if key.engine() == HOSTED && !hosted.contains_key(key.id()) {
                continue;
            }
            let has_store = self.catalog.kind_of(key.engine()).is_some();
            let store = if has_store {
                files
                    .get(&Self::conversation_key(&key, meta.as_ref()))
                    .cloned()
            } else {
                None
            };
            let times = if key.engine() == HOSTED {
                hosted.get(key.id()).copied().unwrap_or_default()
            } else {
                HostedTimes::default()
            };
            let other_mtime_ms = if key.engine() == HOSTED {
                times.mtime_ms
            } else if store.is_none() && has_store {
                self.archived_copy_mtime(&key, meta.as_ref())
            } else {
                None
            };
            let parts = Parts {
                meta,
                store,
                runtime: runtime(&key),
                socket: socket(&key),
                other_mtime_ms,
                hosted_created_ms: times.created_ms,
                record_ms: record_ms(&key),
            };
            rows.push(self.make_row(key, parts));
        }
        query::order(&mut rows);
        // A pass over every session: the work a path walk must not repeat.
        log::debug!("listing: gathered {} sessions", rows.len());
        rows
    }

    /// One session's row, read without gathering the others.
    pub(crate) fn row(&self, key: &SessionKey) -> SessionRow {
        self.bind_if_pending(key);
        let mut meta = self.organize.sidecar.get(&key.to_string());
        // As in `gather_rows`: a conversation found, perhaps not recorded yet.
        if let (Some(meta), Some(found)) = (meta.as_mut(), self.found_conversation(key)) {
            meta.conversation = Some(found);
        }
        let store = if self.catalog.kind_of(key.engine()).is_some() {
            self.catalog
                .summary_of(&Self::conversation_key(key, meta.as_ref()))
        } else {
            None
        };
        let times = if key.engine() == HOSTED {
            self.hosted_times(key.id())
        } else {
            HostedTimes::default()
        };
        let other_mtime_ms = if key.engine() == HOSTED {
            times.mtime_ms
        } else if store.is_none() && self.catalog.kind_of(key.engine()).is_some() {
            self.archived_copy_mtime(key, meta.as_ref())
        } else {
            None
        };
        let runtime = lock(&self.sessions.runtimes).get(key).cloned();
        let record_ms = match runtime {
            None => stamped_activity_ms(&self.paths.record(key)),
            Some(_) => None,
        };
        let parts = Parts {
            meta,
            store,
            runtime: runtime.as_ref(),
            socket: self.paths.socket(key).exists(),
            other_mtime_ms,
            hosted_created_ms: times.created_ms,
            record_ms,
        };
        self.make_row(key.clone(), parts)
    }

    /// The `meta.json` document of a row.
    pub(crate) fn meta_doc<'a>(&'a self, row: &'a SessionRow) -> MetaDoc<'a> {
        let workspace = match (
            &row.meta.workspace,
            row.store.as_deref().and_then(Indexed::cwd),
        ) {
            (Some(w), _) => Cow::Borrowed(w.as_str()),
            (None, Some(cwd)) => Cow::Borrowed(cwd),
            // A home that is not UTF-8 still makes a document.
            (None, None) => self.config.home.to_string_lossy(),
        };
        let account = self.account_of(row);
        MetaDoc {
            agent_state: row.agent_state,
            archived: row.meta.archived,
            conversation: row.meta.conversation.as_deref().unwrap_or(row.key.id()),
            conversations: &row.meta.conversations,
            cost_usd: account.and_then(|a| a.cost()),
            created: UtcText(row.created_ms),
            engine: row.key.engine(),
            favourite: row.meta.favourite,
            forked_from: row.meta.fork_of.as_deref(),
            id: row.key.id(),
            key: row.key.as_str(),
            last_activity: UtcText(row.last_activity_ms),
            mode: row.meta.mode.as_deref(),
            model: row.meta.model.as_deref(),
            pid: row.pid,
            project: row.meta.project.as_deref(),
            state: row.state,
            title: row.title(),
            tokens: account.map(|a| a.tokens.total()),
            waiting_for: (row.agent_state == "waiting")
                .then(|| self.waiting_for(&row.key))
                .flatten(),
            workspace,
            worktree: row.meta.worktree.as_ref().map(WorktreeDoc::of),
        }
    }

    /// The `meta.json` document of a row, as a value.
    pub(crate) fn meta_of(&self, row: &SessionRow) -> Value {
        serde_json::to_value(self.meta_doc(row)).expect("meta.json serialises")
    }

    /// The session's `meta.json` as a value.
    pub fn meta_value(&self, key: &SessionKey) -> Result<Value> {
        self.require(key)?;
        Ok(self.meta_of(&self.row(key)))
    }

    /// The session's `meta.json`.
    pub fn meta_json(&self, key: &SessionKey) -> Result<Vec<u8>> {
        self.require(key)?;
        self.want_usage();
        let row = self.row(key);
        let mut text =
            serde_json::to_vec_pretty(&self.meta_doc(&row)).expect("meta.json serialises");
        text.push(b'\n');
        Ok(text)
    }

    /// `sessions.json`: every active session's `meta.json`, in listing
    /// order, with the facets. Made once while nothing changes, so a
    /// `stat` and the `open` after it cost one listing; a new version
    /// writes again only the documents that changed.
    pub fn sessions_json(&self) -> Arc<PiecedText> {
        self.want_usage();
        self.bind_launched();
        self.catalog.summarised();
        let stamp = self.listing_stamp();
        if let Some(text) = cached(&self.organize.listings.sessions_json, stamp) {
            return text;
        }
        let text = Arc::new(self.render_sessions_json(&self.rows_as_of(stamp, true)));
        let old = lock(&self.organize.listings.sessions_json).replace((
            stamp,
            Instant::now(),
            text.clone(),
        ));
        drop_elsewhere(old);
        text
    }

    /// `rows` (every session, in listing order) as `sessions.json`: the
    /// active ones, as `list_by` with no query would page them.
    fn render_sessions_json(&self, rows: &[SessionRow]) -> PiecedText {
        let active: Vec<&SessionRow> = rows.iter().filter(|r| !r.meta.archived).collect();
        let frame = Frame {
            total: active.len(),
            offset: 0,
            limit: None,
            facets: query::facets_of(&active),
            sessions: Vec::new(),
        };
        let mut frame_text = serde_json::to_vec_pretty(&frame).expect("listing serialises");
        frame_text.push(b'\n');
        // The frame ends `"sessions": []\n}\n`: the documents go between
        // the brackets.
        let open = frame_text.len() - b"]\n}\n".len();
        let mut digest = xxhash_rust::xxh3::Xxh3::new();
        digest.update(&frame_text);
        // Taken out while the documents are made, so no lock is held long.
        let old = std::mem::take(&mut *lock(&self.organize.listings.doc_texts));
        let mut kept = DocTexts::default();
        let mut pieces: Vec<Arc<[u8]>> = Vec::with_capacity(active.len() * 2 + 3);
        pieces.push(Arc::from(&frame_text[..open]));
        let first: Arc<[u8]> = Arc::from(&b"\n    "[..]);
        let next: Arc<[u8]> = Arc::from(&b",\n    "[..]);
        let docs = in_halves(&active, |part| {
            let mut scratch = Vec::with_capacity(512);
            part.iter()
                .map(|row| self.doc_text(row, &old, &mut scratch))
                .collect()
        });
        for (i, (text, version, name)) in docs.into_iter().enumerate() {
            if let Some(name) = name {
                kept.0.insert(name, (version, text.clone()));
            }
            digest.update(&version.to_le_bytes());
            pieces.push(if i == 0 { first.clone() } else { next.clone() });
            pieces.push(text);
        }
        if !active.is_empty() {
            pieces.push(Arc::from(&b"\n  "[..]));
        }
        pieces.push(Arc::from(&frame_text[open..]));
        drop_elsewhere(old);
        *lock(&self.organize.listings.doc_texts) = kept;
        PiecedText::new(pieces, digest.digest())
    }

    /// A row's text in `sessions.json` and the hash that dates it, and for
    /// a row whose text is not kept with its catalog entry, the hash of its
    /// key to keep it by (`old`: the texts kept from the last version).
    fn doc_text(
        &self,
        row: &SessionRow,
        old: &DocTexts,
        scratch: &mut Vec<u8>,
    ) -> (Arc<[u8]>, u64, Option<u64>) {
        match row.store.as_deref().filter(|_| row.plain) {
            // Most rows: a conversation only its store speaks of, whose
            // text is kept with its catalog entry.
            Some(store) => {
                let (text, version) = store.listing_text.get_or_make(|| {
                    let text = set_in_array(&self.meta_doc(row));
                    let version = xxhash_rust::xxh3::xxh3_64(&text);
                    (Arc::from(text), version)
                });
                (text, version, None)
            }
            None => {
                let doc = self.meta_doc(row);
                let version = doc_version(&doc, scratch);
                let name = xxhash_rust::xxh3::xxh3_64(row.key.as_str().as_bytes());
                let text = match old.0.get(&name) {
                    Some((v, text)) if *v == version => text.clone(),
                    _ => Arc::from(set_in_array(&doc)),
                };
                (text, version, Some(name))
            }
        }
    }

    /// Every session this daemon knows (the sidecar's, the live ones, the
    /// hosted runs' and the stores' conversations), in listing order.
    pub fn keys(&self) -> Vec<SessionKey> {
        self.rows(false).iter().map(|r| r.key.clone()).collect()
    }

    /// The sessions of one scope (archived or active), in listing order.
    pub fn keys_in(&self, archived: bool) -> Vec<SessionKey> {
        self.rows(false)
            .iter()
            .filter(|r| r.meta.archived == archived)
            .map(|r| r.key.clone())
            .collect()
    }

    /// What the views group one session by: archived, favourite, project.
    pub fn flags(&self, key: &SessionKey) -> (bool, bool, Option<String>) {
        let meta = self.organize.sidecar.get(key.as_str()).unwrap_or_default();
        (meta.archived, meta.favourite, meta.project)
    }

    /// Active sessions with what the views group them by (favourite,
    /// project), in listing order.
    pub fn active_groups(&self) -> Vec<(SessionKey, bool, Option<String>)> {
        self.rows(false)
            .iter()
            .filter(|r| !r.meta.archived)
            .map(|r| (r.key.clone(), r.meta.favourite, r.meta.project.clone()))
            .collect()
    }

    /// `sessionfs ls`: one page, as `sessions.json` would show it.
    pub fn listing(&self, query: &Query) -> Listing {
        let rows = self.rows(true);
        query::list_by(rows.iter().collect(), query, |row| self.meta_of(row))
    }

    /// Saves the catalog's index if this process read summaries (one-shot
    /// commands; a daemon saves from its catalog thread).
    pub fn save_catalog(&self) {
        self.catalog.save_if_new();
    }
}

/// Drops cached listings once they are too old to serve, so a big one made
/// for a single `stat` does not stay in memory, and runtimes nothing uses.
pub(in crate::core) fn start_janitor(core: &Arc<Core>) {
    let core = Arc::downgrade(core);
    let spawned = std::thread::Builder::new()
        .name("listings".into())
        .spawn(move || loop {
            std::thread::sleep(CACHE_FOR);
            let Some(core) = core.upgrade() else { return };
            core.organize.listings.expire();
            core.forget_unused_runtimes();
            core.organize.sidecar.compact_if_due();
        });
    if let Err(e) = spawned {
        log::warn!("cannot start the listing janitor: {e}");
    }
}

/// The mount points of the daemons that serve `config`'s state directory.
pub fn daemon_mounts(config: &crate::config::Config) -> Vec<std::path::PathBuf> {
    crate::mounts::serving(&config.state_dir)
}

/// How many items make a pass worth a second thread.
const HALVES_FROM: usize = 20_000;

/// `work` over `items`, the second half on a thread of its own when there
/// are many (a gathering at 100,000 sessions waits on memory, and the
/// machine has another CPU), the results joined in order.
fn in_halves<I: Sync, T: Send>(items: &[I], work: impl Fn(&[I]) -> Vec<T> + Sync) -> Vec<T> {
    if items.len() < HALVES_FROM {
        return work(items);
    }
    let (first, second) = items.split_at(items.len() / 2);
    std::thread::scope(|scope| {
        let later = scope.spawn(|| work(second));
        let mut done = work(first);
        match later.join() {
            Ok(mut rest) => done.append(&mut rest),
            Err(panic) => std::panic::resume_unwind(panic),
        }
        done
    })
}

/// The hash of everything a document shows: its fields' bytes gathered in
/// `scratch` (kept between calls), then hashed at once, as a streaming
/// hash fed field by field costs several times more.
fn doc_version(doc: &MetaDoc<'_>, scratch: &mut Vec<u8>) -> u64 {
    struct Gather<'a>(&'a mut Vec<u8>);
    impl Hasher for Gather<'_> {
        fn write(&mut self, bytes: &[u8]) {
            self.0.extend_from_slice(bytes);
        }
        fn finish(&self) -> u64 {
            xxhash_rust::xxh3::xxh3_64(self.0)
        }
    }
    scratch.clear();
    let mut gather = Gather(scratch);
    doc.hash(&mut gather);
    gather.finish()
}

/// A `meta.json` text as `sessions.json` shows it: indented two levels.
fn set_in_array(doc: &MetaDoc<'_>) -> Vec<u8> {
    let text = serde_json::to_vec_pretty(doc).expect("meta.json serialises");
    // A JSON text's newlines are all between tokens (strings escape theirs).
    let lines = memchr::memchr_iter(b'\n', &text).count();
    let mut out = Vec::with_capacity(text.len() + lines * DOC_INDENT.len());
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
            out.extend_from_slice(DOC_INDENT);
        }
        out.extend_from_slice(line);
    }
    out
}

/// `sessionfs ls` while a daemon serves the same state directory: the
/// active sessions as that daemon lists them (its live sessions' activity
/// is known only to it), so both agree. `None` when no such daemon is
/// mounted, or for the archived scope (nothing live there: the state on
/// disk says all).
pub fn listing_from_daemon(config: &crate::config::Config, query: &Query) -> Option<Listing> {
    if query.archived {
        return None;
    }
    let filtered = query.q.as_deref().is_some_and(|q| !q.is_empty())
        || query.project.as_deref().is_some_and(|p| !p.is_empty())
        || query.engine.as_deref().is_some_and(|e| !e.is_empty());
    for mnt in daemon_mounts(config) {
        let path = mnt.join("sessions.json");
        if let (false, Some(limit)) = (filtered, query.limit) {
            // The head of the listing is the page: read no further.
            let Ok(file) = std::fs::File::open(&path) else {
                continue;
            };
            match head_of(std::io::BufReader::new(file), query.offset, limit) {
                Ok(listing) => return Some(listing),
                Err(e) => log::warn!("{}: sessions.json did not parse: {e}", mnt.display()),
            }
            continue;
        }
        let Ok(text) = std::fs::read(&path) else {
            continue;
        };
        match page_of(&text, query) {
            Ok(listing) => return Some(listing),
            Err(e) => log::warn!("{}: sessions.json did not parse: {e}", mnt.display()),
        }
    }
    None
}

/// The sessions `offset..offset + limit` of a daemon's `sessions.json`,
/// unfiltered, read from `reader` only as far as the last of them (the
/// totals and facets come before the sessions).
fn head_of(reader: impl std::io::Read, offset: usize, limit: usize) -> serde_json::Result<Listing> {
    use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
    use std::fmt;
    /// Said to stop reading once the page is taken.
    const PAGE_TAKEN: &str = "the page is taken";

    struct Head<'a> {
        listing: &'a mut Listing,
        offset: usize,
        limit: usize,
    }
    impl<'de> Visitor<'de> for Head<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a listing")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
            while let Some(name) = map.next_key::<String>()? {
                match name.as_str() {
                    "total" => self.listing.total = map.next_value()?,
                    "facets" => self.listing.facets = map.next_value()?,
                    "sessions" => map.next_value_seed(Sessions {
                        sessions: &mut self.listing.sessions,
                        offset: self.offset,
                        limit: self.limit,
                    })?,
                    _ => {
                        map.next_value::<de::IgnoredAny>()?;
                    }
                }
            }
            Ok(())
        }
    }
    struct Sessions<'a> {
        sessions: &'a mut Vec<Value>,
        offset: usize,
        limit: usize,
    }
    impl<'de> DeserializeSeed<'de> for Sessions<'_> {
        type Value = ();
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }
    impl<'de> Visitor<'de> for Sessions<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("the sessions")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
            if self.limit == 0 {
                return Err(de::Error::custom(PAGE_TAKEN));
            }
            let mut skipped = 0;
            while skipped < self.offset {
                if seq.next_element::<de::IgnoredAny>()?.is_none() {
                    return Ok(());
                }
                skipped += 1;
            }
            while let Some(doc) = seq.next_element::<Value>()? {
                self.sessions.push(doc);
                if self.sessions.len() == self.limit {
                    return Err(de::Error::custom(PAGE_TAKEN));
                }
            }
            Ok(())
        }
    }

    let mut listing = Listing {
        offset,
        limit: Some(limit),
        ..Listing::default()
    };
    let mut de = serde_json::Deserializer::from_reader(reader);
    let head = Head {
        listing: &mut listing,
        offset,
        limit,
    };
    match de::Deserializer::deserialize_map(&mut de, head) {
        Ok(()) => de.end()?,
        // Stopped on purpose: what the page needs came first.
        Err(e) if e.to_string().starts_with(PAGE_TAKEN) => {}
        Err(e) => return Err(e),
    }
    Ok(listing)
}

/// One page of a daemon's `sessions.json` (the active scope, in listing
/// order, facets over that scope): filtered and paged without building a
/// value of every session.
fn page_of(text: &[u8], query: &Query) -> serde_json::Result<Listing> {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Doc<'a> {
        #[serde(borrow)]
        sessions: Vec<&'a RawValue>,
        facets: query::Facets,
    }
    /// What the filters look at.
    #[derive(serde::Deserialize)]
    struct Fields {
        key: String,
        title: Option<String>,
        project: Option<String>,
    }
    let doc: Doc = serde_json::from_slice(text)?;
    let filtered = query.q.as_deref().is_some_and(|q| !q.is_empty())
        || query.project.as_deref().is_some_and(|p| !p.is_empty())
        || query.engine.as_deref().is_some_and(|e| !e.is_empty());
    let needle = query
        .q
        .as_deref()
        .filter(|q| !q.is_empty())
        .map(str::to_lowercase);
    let mut matching: Vec<&RawValue> = Vec::new();
    for raw in doc.sessions {
        if filtered {
            let f: Fields = serde_json::from_str(raw.get())?;
            if let Some(engine) = query.engine.as_deref().filter(|e| !e.is_empty()) {
                if f.key.split_once(':').map(|(e, _)| e) != Some(engine) {
                    continue;
                }
            }
            if let Some(project) = query.project.as_deref().filter(|p| !p.is_empty()) {
                if f.project.as_deref() != Some(project) {
                    continue;
                }
            }
            if let Some(needle) = &needle {
                let found = |hay: &str| hay.to_lowercase().contains(needle.as_str());
                let title = f.title.as_deref().filter(|t| !t.is_empty());
                let project = f.project.as_deref().filter(|p| !p.is_empty());
                if !(found(&f.key) || title.is_some_and(found) || project.is_some_and(found)) {
                    continue;
                }
            }
        }
        matching.push(raw);
    }
    let sessions = matching
        .iter()
        .skip(query.offset)
        .take(query.limit.unwrap_or(usize::MAX))
        .map(|raw| serde_json::from_str(raw.get()))
        .collect::<serde_json::Result<Vec<Value>>>()?;
    Ok(Listing {
        total: matching.len(),
        offset: query.offset,
        limit: query.limit,
        sessions,
        facets: doc.facets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::organize::query::Entry;

    #[test]
    fn a_daemons_page_is_the_page_a_listing_gives() {
        let meta = |key: &str, title: &str, project: Option<&str>, at: u64| {
            serde_json::json!({
                "key": key, "title": title, "project": project, "favourite": false,
                "archived": false, "last_activity": crate::core::utc_text(at),
                "state": "stopped",
            })
        };
        let metas = [
            meta("shell:a", "Fix the PARSER", Some("web"), 9_000),
            meta("claude:b", "other", Some("api"), 8_000),
            meta("shell:c", "more", None, 7_000),
            meta("codex:d", "parser again", Some("web"), 6_000),
        ];
        let entries: Vec<Entry> = metas
            .iter()
            .map(|m| Entry::from_meta(m.clone()).unwrap())
            .collect();
        let whole = query::list(entries.clone(), &Query::default());
        let text = serde_json::to_vec_pretty(&whole).unwrap();
        let queries = [
            Query::default(),
            Query {
                limit: Some(2),
                offset: 1,
                ..Query::default()
            },
            Query {
                q: Some("parser".into()),
                ..Query::default()
            },
            Query {
                project: Some("web".into()),
                limit: Some(1),
                ..Query::default()
            },
            Query {
                engine: Some("shell".into()),
                ..Query::default()
            },
            Query {
                q: Some("API".into()),
                ..Query::default()
            },
        ];
        for query in queries {
            assert_eq!(
                page_of(&text, &query).unwrap(),
                query::list(entries.clone(), &query),
                "{query:?}"
            );
        }
        // Unfiltered pages are read from the head only, to the same result.
        for (offset, limit) in [(0, 2), (1, 2), (3, 5), (9, 1), (0, 0), (2, 0)] {
            let query = Query {
                limit: Some(limit),
                offset,
                ..Query::default()
            };
            assert_eq!(
                head_of(&text[..], offset, limit).unwrap(),
                query::list(entries.clone(), &query),
                "{query:?}"
            );
        }
        // A head that reaches the page reads no further: what follows may
        // be anything.
        let sessions = text
            .windows(13)
            .position(|w| w == b"\"sessions\": [")
            .unwrap();
        let cut = sessions
            + text[sessions..]
                .windows(7)
                .position(|w| w == b"\n    },")
                .unwrap()
            + 7;
        let mut torn = text[..cut].to_vec();
        torn.extend_from_slice(b" not JSON");
        let page = head_of(&torn[..], 0, 1).unwrap();
        assert_eq!(
            page,
            query::list(
                entries.clone(),
                &Query {
                    limit: Some(1),
                    ..Query::default()
                }
            )
        );
        assert!(head_of(&b"{\"total\": 1, \"sessions\": [1"[..], 0, 2).is_err());
    }

    /// Most conversations take the short way through a gathering; those a
    /// record, a live runtime or a socket says something of do not, sockets
    /// named by a hash of a long key included.
    #[test]
    fn conversations_with_sockets_show_live_whatever_their_socket_is_named() {
        let store = tempfile::tempdir().unwrap();
        let project = store.path().join("projects/-w");
        std::fs::create_dir_all(&project).unwrap();
        let long = format!("l{}", "o".repeat(100));
        for id in ["quiet", "plain", "recorded", long.as_str()] {
            let row = r#"{"type":"user","message":{"role":"user","content":"hi"}}"#;
            std::fs::write(project.join(format!("{id}.jsonl")), format!("{row}\n")).unwrap();
        }
        let claude = store.path().display().to_string();
        let (core, _dir) = Core::for_tests(&[("CLAUDE_CONFIG_DIR", &claude)]);
        let key = |id: &str| SessionKey::new("claude", id).unwrap();
        let state = |core: &Core, id: &str| {
            let rows = core.gather_rows();
            let row = rows.iter().find(|r| r.key == key(id));
            row.map(|r| r.state).unwrap_or("absent")
        };
        assert_eq!(state(&core, "quiet"), "stopped");

        // A master another daemon runs: its socket answers.
        assert!(core.paths.stem_is_key(&key("plain")));
        assert!(!core.paths.stem_is_key(&key(&long)));
        let _plain =
            std::os::unix::net::UnixListener::bind(core.paths.socket(&key("plain"))).unwrap();
        let _hashed =
            std::os::unix::net::UnixListener::bind(core.paths.socket(&key(&long))).unwrap();
        core.organize
            .sidecar
            .update(|all| {
                let meta = all.entry_or("claude:recorded", SessionMeta::default);
                meta.favourite = true;
                Ok(())
            })
            .unwrap();
        assert_eq!(state(&core, "plain"), "live");
        assert_eq!(state(&core, &long), "live");
        assert_eq!(state(&core, "quiet"), "stopped");
        let rows = core.gather_rows();
        let recorded = rows.iter().find(|r| r.key == key("recorded")).unwrap();
        assert!(recorded.meta.favourite);
        assert_eq!(rows.len(), 4, "each conversation once");
    }

    /// `sessions.json` is the listing's JSON text exactly, made again from
    /// the documents kept: the conversations' ones with their catalog
    /// entries, the others by what they show.
    #[test]
    fn sessions_json_is_the_listing_text_made_again_from_kept_documents() {
        let store = tempfile::tempdir().unwrap();
        let project = store.path().join("projects/-w");
        std::fs::create_dir_all(&project).unwrap();
        let claude = store.path().display().to_string();
        let (core, _dir) = Core::for_tests(&[("CLAUDE_CONFIG_DIR", &claude)]);
        let listing_text = |core: &Core| {
            let mut text = serde_json::to_vec_pretty(&core.listing(&Query::default())).unwrap();
            text.push(b'\n');
            String::from_utf8(text).unwrap()
        };
        let made = |core: &Core| {
            let text = core.sessions_json();
            (String::from_utf8(text.to_vec()).unwrap(), text.digest())
        };
        // None at all.
        let (empty, empty_digest) = made(&core);
        assert_eq!(empty, listing_text(&core));
        assert!(empty.contains("\"sessions\": []"), "{empty}");

        for id in ["one", "two", "three"] {
            let row = format!(
                r#"{{"type":"user","cwd":"/w/{id}","message":{{"role":"user","content":"ask {id}"}}}}"#
            );
            std::fs::write(project.join(format!("{id}.jsonl")), format!("{row}\n")).unwrap();
        }
        core.catalog.rescan();
        let (three, three_digest) = made(&core);
        assert_eq!(three, listing_text(&core));
        assert_ne!(three_digest, empty_digest);
        let kept = core.catalog.files();
        let kept_one = kept
            .get(&SessionKey::new("claude", "one").unwrap())
            .unwrap()
            .listing_text
            .get_or_make(|| unreachable!("made by the listing"))
            .0
            .clone();
        assert!(String::from_utf8_lossy(&kept_one).contains("\"title\": \"ask one\""));

        // A record for one of them: its document is made by what it shows.
        core.organize
            .sidecar
            .update(|all| {
                let meta = all.entry_or("claude:two", SessionMeta::default);
                meta.title = Some("Renamed \"two\"\nwith a line".into());
                meta.favourite = true;
                Ok(())
            })
            .unwrap();
        let (renamed, renamed_digest) = made(&core);
        assert_eq!(renamed, listing_text(&core));
        assert!(renamed.contains("Renamed"), "{renamed}");
        assert_ne!(renamed_digest, three_digest);
        // Nothing changed: the same text, the same digest.
        lock(&core.organize.listings.sessions_json).take();
        assert_eq!(made(&core), (renamed, renamed_digest));
    }
}
