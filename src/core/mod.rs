//! The filesystem's logic as a plain Rust API: every operation a function
//! returning `Result<_, Error>`. The FUSE adapter only translates; tests can
//! drive this without a mount.

mod caps;
mod files;
mod handles;
#[cfg(test)]
mod lifecycle_tests;
mod listing;
pub mod node;
mod organize;
mod records;
mod save;
pub mod scratch;
mod views;

pub use files::{Access, Attr, Files, SetAttr, SlowWrite};
pub use handles::{DirEntry, DirSnapshot};
pub use listing::listing_from_daemon;
pub use node::Kind;
pub use organize::{MetaField, META_FILE_MAX};

use crate::binding;
use crate::catalog::{self, Catalog, StoreFile};
use crate::config::Config;
use crate::engine::{Engine, Store};
use crate::error::{Error, Result};
use crate::hosted::EntryIndex;
use crate::key::SessionKey;
use crate::runtime::dtach::{self, Client};
use crate::runtime::launch::{live_record, terminate};
use crate::runtime::record::{now_ms, RunRecord};
use crate::runtime::{OpenRequest, Outcome, RuntimePaths};
use crate::screen::{Screen, DEFAULT_COLS, DEFAULT_ROWS};
use crate::scrollback::Scrollback;
use crate::sidecar::{SessionMeta, Sidecar};
use crate::slots::SlotStore;
use crate::transcript::{self as transcript, Limits, StoreKind, TurnIndex};
use crate::work::Pool;
use jiff::Timestamp;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The engine of runs the host records itself.
pub const HOSTED: &str = "hosted";

/// How long `stop` waits after TERM before KILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// How long a write to `input` or `ctl` may wait for the session's earlier
/// writes and opens (a master that takes nothing ends it sooner, at
/// [`dtach::STALL`]).
const INPUT_DEADLINE: Duration = Duration::from_secs(10);

/// The error of a write to a session's master that stopped early.
fn send_error(key: &SessionKey, what: &str, e: &std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EAGAIN) => Error::new(
            libc::EAGAIN,
            format!(
                "{what} to {key} stalled: its master has stopped taking input (the program is not reading its terminal)"
            ),
        ),
        Some(libc::ETIMEDOUT) => Error::new(
            libc::ETIMEDOUT,
            format!(
                "{what} to {key} waited {} s for the writes before it",
                INPUT_DEADLINE.as_secs()
            ),
        ),
        Some(libc::EPIPE) => Error::new(
            libc::EPIPE,
            format!("{what} to {key} ended: the session was stopped or its master exited"),
        ),
        _ => Error::io(&format!("{what} to {key} failed"), e),
    }
}

/// A live session's connection and what the last open found.
#[derive(Debug, Default)]
struct RuntimeState {
    client: Option<Arc<Client>>,
    /// Bumped on every connection, so a finished reader only clears its own.
    generation: u64,
    outcome: Option<Outcome>,
    record: Option<RunRecord>,
    error: Option<String>,
    cols: u16,
    rows: u16,
    last_input_ms: u64,
    /// When this daemon last launched the session, and whether as a resume:
    /// the engine may name the conversation after that.
    launched: Option<(u64, bool)>,
    /// When the store was last searched for a conversation to bind.
    bind_checked: Option<std::time::Instant>,
    /// An open under way in this daemon: other openers wait for its result
    /// instead of starting a second master.
    opening: Option<Arc<Flight>>,
    /// A stop under way: openers wait for it, then open afresh.
    stopping: Option<Arc<Flight>>,
    /// Stops so far; an open that saw a stop begin meanwhile undoes itself.
    stops: u64,
}

/// One open or stop of a session, which others may wait for. Waiting holds
/// no lock: the waiter sleeps on the condition variable.
#[derive(Debug, Default)]
struct Flight {
    result: Mutex<Option<Result<Arc<Client>>>>,
    landed: Condvar,
}

impl Flight {
    fn finish(&self, result: Result<Arc<Client>>) {
        *lock(&self.result) = Some(result);
        self.landed.notify_all();
    }

    /// The result, or `None` if it has not come by `deadline`.
    fn wait(&self, deadline: Instant) -> Option<Result<Arc<Client>>> {
        let mut result = lock(&self.result);
        loop {
            if let Some(r) = result.as_ref() {
                return Some(r.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            result = self
                .landed
                .wait_timeout(result, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// The in-memory side of one session: output ring, VT mirror, connection.
#[derive(Debug)]
pub struct SessionRuntime {
    key: SessionKey,
    scrollback: Arc<Scrollback>,
    screen: Mutex<Screen>,
    state: Mutex<RuntimeState>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SessionRuntime {
    fn new(key: SessionKey, scrollback_bytes: u64) -> Self {
        SessionRuntime {
            key,
            scrollback: Arc::new(Scrollback::new(scrollback_bytes as usize)),
            screen: Mutex::new(Screen::default()),
            state: Mutex::new(RuntimeState {
                cols: DEFAULT_COLS,
                rows: DEFAULT_ROWS,
                ..Default::default()
            }),
        }
    }

    fn live_client(&self) -> Option<Arc<Client>> {
        lock(&self.state).client.clone()
    }

    pub fn scrollback(&self) -> &Arc<Scrollback> {
        &self.scrollback
    }

    /// One chunk of the master's output, into the ring and the VT mirror.
    /// A mirror that fails resets itself; the reason goes to `status`.
    fn take_output(&self, bytes: &[u8]) {
        crate::faults::maybe_panic("output", bytes);
        self.scrollback.append(bytes);
        let fed = lock(&self.screen).feed(bytes);
        if let Err(why) = fed {
            log::error!("{}: {why}", self.key);
            lock(&self.state).error = Some(why);
        }
    }
}

/// One store file's turn index and the page rendered last (a `stat` and
/// the `read` after it ask for the same page).
#[derive(Debug)]
struct TranscriptCache {
    path: PathBuf,
    index: TurnIndex,
    last_page: Option<(usize, u64, Arc<Vec<u8>>)>,
}

/// Whether an open may start a master, or only join one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpenMode {
    AttachOrLaunch,
    AttachOnly,
}

/// The whole filesystem's state, shared by every request thread.
#[derive(Debug)]
pub struct Core {
    config: Config,
    paths: RuntimePaths,
    sidecar: Sidecar,
    sessions: Mutex<HashMap<SessionKey, Arc<SessionRuntime>>>,
    catalog: Arc<Catalog>,
    transcripts: Mutex<HashMap<SessionKey, Arc<Mutex<TranscriptCache>>>>,
    slots: SlotStore,
    hosted: Mutex<HashMap<String, Arc<EntryIndex>>>,
    wrapper: PathBuf,
    dtach: PathBuf,
    mountpoint: PathBuf,
    started_ms: u64,
    /// Slow operations (input, ctl, launches, stops, archives) run here.
    work: Pool,
    listings: listing::ListingCache,
}

/// A `resize` argument: `COLSxROWS` within the VT mirror's bounds
/// (`screen::check_size`).
fn parse_size(arg: &str) -> Result<(u16, u16)> {
    let bad = || Error::invalid(format!("resize takes COLSxROWS (e.g. 120x40), not {arg:?}"));
    let (c, r) = arg.split_once(['x', 'X']).ok_or_else(bad)?;
    let cols: u16 = c.parse().map_err(|_| bad())?;
    let rows: u16 = r.parse().map_err(|_| bad())?;
    crate::screen::check_size(cols, rows)
        .map_err(|why| Error::invalid(format!("resize {arg}: {why}")))?;
    Ok((cols, rows))
}

fn to_json_text(v: &Value) -> Vec<u8> {
    let mut text = serde_json::to_vec_pretty(v).expect("json serialises");
    text.push(b'\n');
    text
}

/// Finds `dtach` on `PATH` (or `SESSIONFS_DTACH`).
fn find_dtach() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("SESSIONFS_DTACH").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    // mount(8) runs helpers with a bare environment: look in the usual places too.
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(std::env::split_paths(crate::runtime::wrapper::DEFAULT_PATH))
        .map(|d| d.join("dtach"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::not_found(
                "dtach is not installed (not found on PATH); install the dtach package",
            )
        })
}

impl Core {
    /// Prepares directories and finds the programs the runtime needs.
    pub fn new(config: Config, mountpoint: &Path) -> Result<Arc<Core>> {
        let dtach = find_dtach()?;
        let core = Self::build(config, mountpoint, dtach, true)?;
        core.catalog.start();
        listing::start_janitor(&core);
        Ok(core)
    }

    /// The same state for reading only (`sessionfs ls`): starts nothing, so
    /// it needs no dtach.
    pub fn for_listing(config: Config) -> Result<Arc<Core>> {
        Self::build(config, Path::new(""), PathBuf::from("dtach"), false)
    }

    /// `watch`: keep the catalog current with inotify (a daemon); else it
    /// is walked when consulted (a one-shot command).
    fn build(config: Config, mountpoint: &Path, dtach: PathBuf, watch: bool) -> Result<Arc<Core>> {
        config.prepare_dirs()?;
        let paths = RuntimePaths::new(&config.runtime_dir, &config.lock_dir);
        if !paths.socket_dir_usable() {
            return Err(Error::invalid(format!(
                "runtime directory {} is too long for unix socket paths",
                config.runtime_dir.display()
            )));
        }
        let wrapper = std::env::current_exe()
            .map_err(|e| Error::io("cannot find the sessionfs binary", &e))?;
        Ok(Arc::new(Core {
            sidecar: Sidecar::open(&config.state_dir),
            catalog: Arc::new(Catalog::open(&config.engines, &config.state_dir, watch)),
            transcripts: Mutex::new(HashMap::new()),
            slots: SlotStore::open(&config.state_dir),
            hosted: Mutex::new(HashMap::new()),
            paths,
            config,
            sessions: Mutex::new(HashMap::new()),
            wrapper,
            dtach,
            mountpoint: mountpoint.to_path_buf(),
            started_ms: now_ms(),
            work: Pool::default(),
            listings: listing::ListingCache::default(),
        }))
    }

    /// Where the adapter runs what may wait on a session.
    pub fn work(&self) -> &Pool {
        &self.work
    }

    fn engine(&self, key: &SessionKey) -> Result<&Engine> {
        self.config.engines.get(key.engine()).ok_or_else(|| {
            Error::invalid(format!(
                "unknown engine {:?}; known: {}",
                key.engine(),
                self.config.engines.names().collect::<Vec<_>>().join(", ")
            ))
        })
    }

    fn runtime(&self, key: &SessionKey) -> Arc<SessionRuntime> {
        lock(&self.sessions)
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(SessionRuntime::new(
                    key.clone(),
                    self.config.scrollback_bytes,
                ))
            })
            .clone()
    }

    /// The runtime of a known session, created on first use.
    pub fn session_runtime(&self, key: &SessionKey) -> Result<Arc<SessionRuntime>> {
        self.require(key)?;
        Ok(self.runtime(key))
    }

    /// Records a refusal where the user can read it (`status.error`) and in the log.
    fn refuse(&self, key: &SessionKey, err: Error) -> Error {
        log::warn!("{key}: {}", err.message);
        if self.exists(key) {
            lock(&self.runtime(key).state).error = Some(err.message.clone());
        }
        err
    }

    /// When metadata last changed: the mtime of `meta.json` and its kin,
    /// steady while nothing is edited (editors compare it before saving).
    pub fn meta_modified(&self) -> std::time::SystemTime {
        self.sidecar.modified()
    }

    /// Records a refusal made outside the core (the adapter's parsing).
    pub fn record_refusal(&self, key: &SessionKey, err: Error) -> Error {
        self.refuse(key, err)
    }

    pub fn exists(&self, key: &SessionKey) -> bool {
        if key.engine() == HOSTED {
            return self.slots.transcript_path(key.id()).is_file();
        }
        self.sidecar.get(&key.to_string()).is_some()
            || lock(&self.sessions)
                .get(key)
                .is_some_and(|rt| rt.live_client().is_some())
            || (self.catalog.kind_of(key.engine()).is_some() && self.catalog.find(key).is_some())
    }

    /// The engine's own id of a session's conversation.
    fn conversation_id(&self, key: &SessionKey) -> String {
        self.meta(key)
            .conversation
            .unwrap_or_else(|| key.id().to_string())
    }

    /// The engine's own store file for this session, if it has one yet.
    fn store_file(&self, key: &SessionKey) -> Option<StoreFile> {
        self.catalog.kind_of(key.engine())?;
        let conversation = SessionKey::new(key.engine(), &self.conversation_id(key)).ok()?;
        let found = self.catalog.find(&conversation);
        self.bind_conversation(key, &conversation, found.as_ref())
            .or(found)
            .or_else(|| self.archived_store(key))
    }

    /// Conversation ids already taken by a session record of `engine`.
    fn claimed_conversations(&self, engine: &str) -> HashSet<String> {
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
    fn bind_conversation(
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

    fn require(&self, key: &SessionKey) -> Result<()> {
        if self.exists(key) {
            Ok(())
        } else {
            Err(Error::not_found(format!("no session {key}")))
        }
    }

    fn meta(&self, key: &SessionKey) -> SessionMeta {
        self.sidecar.get(&key.to_string()).unwrap_or_default()
    }

    pub fn is_archived(&self, key: &SessionKey) -> bool {
        self.meta(key).archived
    }

    /// `mkdir ENGINE:ID`: a session record; nothing starts until it is opened.
    pub fn create(&self, name: &str) -> Result<SessionKey> {
        let key =
            SessionKey::parse(name).inspect_err(|e| log::warn!("mkdir {name:?}: {}", e.message))?;
        self.engine(&key)
            .inspect_err(|e| log::warn!("mkdir {name:?}: {}", e.message))?;
        if self.exists(&key) {
            return Err(Error::new(libc::EEXIST, format!("{key} already exists")));
        }
        self.sidecar.update(|all| {
            all.entry(key.to_string()).or_insert_with(|| SessionMeta {
                created_ms: now_ms(),
                ..Default::default()
            });
            Ok(())
        })?;
        log::info!("{key}: created");
        Ok(key)
    }

    /// Whether the engine's own store already holds this conversation, so a
    /// launch resumes it rather than starting a new one.
    fn conversation_exists(&self, key: &SessionKey, engine: &Engine) -> bool {
        match &engine.store {
            Store::Claude(_) | Store::Codex(_) => {
                self.catalog.refresh();
                self.store_file(key).is_some()
            }
            Store::None | Store::Hosted => false,
        }
    }

    /// Where the agent runs: the sidecar's workspace, else the store's `cwd`,
    /// else `$HOME`.
    fn workspace(&self, key: &SessionKey) -> PathBuf {
        let row = self.row(key);
        self.meta_of(&row)["workspace"]
            .as_str()
            .map_or_else(|| self.config.home.clone(), PathBuf::from)
    }

    /// Opens a session (ATTACH / LAUNCH / BUSY) unless it is already live
    /// here. One open per key runs at a time in this daemon (across daemons
    /// the flock decides); a second opener waits for the first one's result
    /// until `deadline`, holding no lock. Runs on a slow-operation thread.
    fn ensure_open(
        &self,
        key: &SessionKey,
        mode: OpenMode,
        deadline: Instant,
    ) -> Result<Arc<Client>> {
        let engine = self.engine(key)?.clone();
        if !engine.launchable() {
            return Err(Error::perm(format!(
                "{key} is a hosted run's transcript; it takes no input"
            )));
        }
        if self.is_archived(key) {
            return Err(Error::perm(format!(
                "{key} is archived; unarchive it first"
            )));
        }
        let rt = self.runtime(key);
        let (flight, stops) = loop {
            let (other, is_stop) = {
                let mut state = lock(&rt.state);
                if let Some(client) = state.client.as_ref().filter(|c| !c.is_closed()) {
                    return Ok(client.clone());
                }
                match (&state.stopping, &state.opening) {
                    (Some(f), _) => (f.clone(), true),
                    (None, Some(f)) => (f.clone(), false),
                    (None, None) => {
                        let flight = Arc::new(Flight::default());
                        state.opening = Some(flight.clone());
                        break (flight, state.stops);
                    }
                }
            };
            match other.wait(deadline) {
                None => {
                    return Err(Error::new(
                        libc::ETIMEDOUT,
                        format!(
                            "another {} of {key} was still under way",
                            if is_stop { "stop" } else { "open" }
                        ),
                    ))
                }
                Some(result) if !is_stop => return result,
                // A stop finished: open afresh.
                Some(_) => {}
            }
        };
        let result = self.open_now(key, &rt, &engine, mode, stops);
        {
            let mut state = lock(&rt.state);
            if state
                .opening
                .as_ref()
                .is_some_and(|f| Arc::ptr_eq(f, &flight))
            {
                state.opening = None;
            }
        }
        flight.finish(result.clone());
        result
    }

    /// The open itself: no lock is held while it connects or launches.
    fn open_now(
        &self,
        key: &SessionKey,
        rt: &Arc<SessionRuntime>,
        engine: &Engine,
        mode: OpenMode,
        stops: u64,
    ) -> Result<Arc<Client>> {
        if mode == OpenMode::AttachOnly && !dtach::answers(&self.paths.socket(key)) {
            return Err(Error::not_found(format!("{key} has no live master")));
        }
        let (cols, rows) = {
            let s = lock(&rt.state);
            (s.cols, s.rows)
        };
        if let Err(e) = self.restore_archived_store(key) {
            log::warn!("{key}: {}", e.message);
        }
        let resume = self.conversation_exists(key, engine);
        let request = OpenRequest {
            paths: &self.paths,
            key,
            argv: engine.argv(&self.conversation_id(key), resume),
            cwd: self.workspace(key),
            cols,
            rows,
            wrapper: self.wrapper.clone(),
            dtach: self.dtach.clone(),
        };
        let opened = match crate::runtime::open(&request) {
            Ok(opened) => opened,
            Err(err) => {
                if err.errno == libc::EBUSY {
                    lock(&rt.state).outcome = Some(Outcome::Busy);
                }
                return Err(err);
            }
        };
        let client = Arc::new(opened.client);
        let generation = {
            let mut state = lock(&rt.state);
            if state.stops != stops {
                None
            } else {
                state.generation += 1;
                state.client = Some(client.clone());
                state.outcome = Some(opened.outcome);
                if opened.outcome == Outcome::Launch {
                    state.launched = Some((now_ms(), resume));
                    state.bind_checked = None;
                }
                state.record = opened.record.clone();
                state.error = None;
                Some(state.generation)
            }
        };
        let Some(generation) = generation else {
            // `stop` came while this was opening: it wins.
            client.close();
            terminate(&self.paths, key, STOP_GRACE);
            return Err(Error::new(
                libc::ECANCELED,
                format!("{key} was stopped while it was being opened"),
            ));
        };
        log::info!(
            "{key}: {:?} (master pid {:?})",
            opened.outcome,
            opened.record.as_ref().map(|r| r.master_pid)
        );
        if self.sidecar.get(&key.to_string()).is_none() {
            // A live master found on disk becomes a known session.
            let _ = self.sidecar.update(|all| {
                all.entry(key.to_string()).or_insert_with(|| SessionMeta {
                    created_ms: opened.record.as_ref().map_or_else(now_ms, |r| r.started_ms),
                    ..Default::default()
                });
                Ok(())
            });
        }
        let reader_rt = rt.clone();
        let reader_client = client.clone();
        let reader = opened.reader;
        std::thread::Builder::new()
            .name(format!("pty-{key}"))
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    dtach::pump(reader, |bytes| reader_rt.take_output(bytes))
                }));
                // Writers still waiting on this master fail now, not at their deadline.
                reader_client.close();
                let mut state = lock(&reader_rt.state);
                if state.generation == generation {
                    state.client = None;
                }
                match result {
                    Ok(Ok(())) => log::info!("{}: master closed", reader_rt.key),
                    Ok(Err(e)) => log::warn!("{}: reading the master failed: {e}", reader_rt.key),
                    // The next open joins the master again with a new reader.
                    Err(panic) => {
                        let why = format!(
                            "the output reader stopped on an internal error: {}",
                            crate::screen::panic_message(panic.as_ref())
                        );
                        log::error!("{}: {why}", reader_rt.key);
                        state.error = Some(why);
                    }
                }
            })
            .map_err(|e| Error::io("cannot start a reader thread", &e))?;
        Ok(client)
    }

    /// `echo ... > input`: opens the session if needed, then pushes the
    /// bytes. Runs on a slow-operation thread. A master that takes nothing
    /// for [`dtach::STALL`] ends the write: with the count that went through
    /// if some did, else `EAGAIN`; the reason goes to `status.error`.
    pub fn write_input(&self, key: &SessionKey, data: &[u8]) -> Result<usize> {
        self.require(key)?;
        let deadline = Instant::now() + INPUT_DEADLINE;
        let result = (|| {
            let client = self.ensure_open(key, OpenMode::AttachOrLaunch, deadline)?;
            let sent = client.push(data, deadline);
            if !matches!(sent, Err((0, _))) {
                lock(&self.runtime(key).state).last_input_ms = now_ms();
            }
            match sent {
                Ok(()) => Ok(data.len()),
                Err((went, e)) => {
                    let err = send_error(key, "input", &e);
                    // A stop fails the whole write: a short count would
                    // have the writer retry and so launch the session again.
                    if went == 0 || err.errno != libc::EAGAIN {
                        return Err(err);
                    }
                    // Part went through: a short write, as a pipe gives.
                    let err = Error::new(
                        err.errno,
                        format!(
                            "{}; {went} of {} bytes went through",
                            err.message,
                            data.len()
                        ),
                    );
                    self.refuse(key, err);
                    Ok(went)
                }
            }
        })();
        result.map_err(|e| self.refuse(key, e))
    }

    /// One command written to a session's `ctl`.
    pub fn session_ctl(&self, key: &SessionKey, command: &str) -> Result<()> {
        self.require(key)?;
        let result = (|| {
            let mut words = command.split_whitespace();
            let verb = words.next().unwrap_or("");
            let arg = words.next();
            if words.next().is_some() {
                return Err(Error::invalid(format!(
                    "too many words in ctl command {command:?}"
                )));
            }
            match (verb, arg) {
                ("open", None) => self
                    .ensure_open(
                        key,
                        OpenMode::AttachOrLaunch,
                        Instant::now() + INPUT_DEADLINE,
                    )
                    .map(drop),
                ("stop", None) => {
                    self.stop(key);
                    Ok(())
                }
                ("resize", Some(size)) => {
                    let (cols, rows) = parse_size(size)?;
                    let rt = self.runtime(key);
                    {
                        let mut state = lock(&rt.state);
                        state.cols = cols;
                        state.rows = rows;
                    }
                    lock(&rt.screen).resize(cols, rows);
                    match rt.live_client() {
                        Some(c) => c
                            .resize(cols, rows, Instant::now() + INPUT_DEADLINE)
                            .map_err(|e| send_error(key, "resize", &e.error)),
                        None => Ok(()),
                    }
                }
                ("redraw", None) => {
                    let rt = self.runtime(key);
                    let (cols, rows) = {
                        let s = lock(&rt.state);
                        (s.cols, s.rows)
                    };
                    match rt.live_client() {
                        Some(c) => c
                            .redraw(cols, rows, Instant::now() + INPUT_DEADLINE)
                            .map_err(|e| send_error(key, "redraw", &e.error)),
                        None => Err(Error::new(
                            libc::ENOTCONN,
                            format!("{key} is not live; write `open` first"),
                        )),
                    }
                }
                _ => Err(Error::invalid(format!(
                    "unknown ctl command {command:?}; expected open, stop, resize COLSxROWS, redraw"
                ))),
            }
        })();
        result.map_err(|e| self.refuse(key, e))
    }

    /// Ends the session's processes and forgets the connection; the next
    /// open is a LAUNCH (a resume for agents).
    pub fn stop(&self, key: &SessionKey) {
        self.reap(key);
        log::info!("{key}: stopped");
    }

    /// Terminates the master and the agent's processes, unlinks the socket
    /// under the lock and drops this daemon's connection. Best-effort. Never
    /// waits for an open or a write: it closes the connection first, which
    /// ends every write waiting on the master, then kills. Runs on a
    /// slow-operation thread (the grace period).
    fn reap(&self, key: &SessionKey) -> Arc<SessionRuntime> {
        let rt = self.runtime(key);
        let flight = Arc::new(Flight::default());
        let client = {
            let mut state = lock(&rt.state);
            state.stops += 1;
            state.generation += 1;
            state.stopping = Some(flight.clone());
            state.client.take()
        };
        if let Some(client) = client {
            client.detach();
        }
        terminate(&self.paths, key, STOP_GRACE);
        {
            let mut state = lock(&rt.state);
            if state
                .stopping
                .as_ref()
                .is_some_and(|f| Arc::ptr_eq(f, &flight))
            {
                state.stopping = None;
            }
        }
        flight.finish(Err(Error::new(
            libc::ECANCELED,
            format!("{key} was stopped"),
        )));
        rt
    }

    /// Joins every master that answers on a socket in the runtime directory.
    pub fn attach_live(&self) {
        let Ok(dir) = std::fs::read_dir(&self.config.runtime_dir) else {
            return;
        };
        for entry in dir.filter_map(|e| e.ok()) {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "sock") {
                continue;
            }
            let stem = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            let key = RunRecord::read(&self.config.runtime_dir.join(format!("{stem}.run.json")))
                .and_then(|r| SessionKey::parse(&r.key).ok())
                .or_else(|| SessionKey::parse(&stem).ok());
            let Some(key) = key else { continue };
            match self.ensure_open(&key, OpenMode::AttachOnly, Instant::now() + INPUT_DEADLINE) {
                Ok(_) => {}
                Err(e) => log::info!("{key}: not attached at start: {}", e.message),
            }
        }
    }

    fn state_name(&self, key: &SessionKey) -> &'static str {
        let rt = lock(&self.sessions).get(key).cloned();
        // A master stuck with a full listen queue still answers: never waits.
        listing::state_of(self.is_archived(key), rt.as_ref(), || {
            dtach::answers(&self.paths.socket(key))
        })
    }

    /// The session's `status` file.
    pub fn status(&self, key: &SessionKey) -> Result<Vec<u8>> {
        self.require(key)?;
        // Read, not created: a session nobody opened has no runtime.
        let rt = lock(&self.sessions).get(key).cloned();
        let state_name = self.state_name(key);
        let live = state_name == "live";
        let (outcome, mut record, mut error, cols, rows) = match &rt {
            Some(rt) => {
                let s = lock(&rt.state);
                (s.outcome, s.record.clone(), s.error.clone(), s.cols, s.rows)
            }
            None => (None, None, None, DEFAULT_COLS, DEFAULT_ROWS),
        };
        if live && record.is_none() {
            // Joined a master whose wrapper had not written its record yet.
            // Read before taking the lock: no lock is held across I/O.
            record = live_record(&self.paths, key);
            if let (Some(rt), Some(_)) = (&rt, &record) {
                lock(&rt.state).record.clone_from(&record);
            }
        }
        if !live && error.is_none() {
            // A program that could not start leaves its reason in the run record.
            error = RunRecord::read(&self.paths.record(key)).and_then(|r| r.exec_error);
        }
        let record = if live { record } else { None };
        Ok(to_json_text(&json!({
            "key": key.to_string(),
            "state": state_name,
            "outcome": outcome,
            "master_pid": record.as_ref().map(|r| r.master_pid),
            "agent_pid": record.as_ref().map(|r| r.agent_pid),
            "socket": self.paths.socket(key),
            "lock": self.paths.lock(key),
            "size": format!("{cols}x{rows}"),
            "scrollback_bytes": rt.map_or(0, |rt| rt.scrollback.len()),
            "error": error,
        })))
    }

    /// The session's `screen`: the VT mirror's text.
    pub fn screen(&self, key: &SessionKey) -> Result<Vec<u8>> {
        self.require(key)?;
        // A session never opened shows a blank screen, without a mirror kept for it.
        let text = match lock(&self.sessions).get(key).cloned() {
            Some(rt) => lock(&rt.screen).text(),
            None => Screen::default().text(),
        };
        Ok(text.into_bytes())
    }

    /// The root `status`.
    pub fn root_status(&self) -> Vec<u8> {
        let live: Vec<String> = lock(&self.sessions)
            .iter()
            .filter(|(_, rt)| rt.live_client().is_some())
            .map(|(k, _)| k.to_string())
            .collect();
        let mut live = live;
        live.sort();
        to_json_text(&json!({
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "mounts": [self.mountpoint],
            "started": utc_text(self.started_ms),
            "sessions": self.keys().len(),
            "catalog": self.catalog.stats(),
            // Sessions holding a ring and a VT mirror here: only those opened.
            "runtimes": lock(&self.sessions).len(),
            "live": live,
            "state_dir": self.config.state_dir,
            "runtime_dir": self.config.runtime_dir,
            "lock_dir": self.config.lock_dir,
            "agent": {"run": self.slots.agent_run()},
            "slow_ops": self.work.stats(),
        }))
    }

    /// One command written to the root `ctl`.
    pub fn root_ctl(&self, command: &str) -> Result<()> {
        let mut words = command.split_whitespace();
        match words.next() {
            Some("new") => {
                let engine = words
                    .next()
                    .ok_or_else(|| Error::invalid("new takes ENGINE [workspace=DIR] [title=TEXT]"))?;
                let mut workspace = None;
                let mut title = None;
                let rest: Vec<&str> = words.collect();
                let rest = rest.join(" ");
                // `title=` takes the rest of the line, so titles may hold spaces.
                let (head, title_text) = match rest.find("title=") {
                    Some(i) => (&rest[..i], Some(rest[i + 6..].trim().to_string())),
                    None => (rest.as_str(), None),
                };
                for word in head.split_whitespace() {
                    match word.split_once('=') {
                        Some(("workspace", dir)) if Path::new(dir).is_absolute() => {
                            workspace = Some(dir.to_string())
                        }
                        _ => {
                            return Err(Error::invalid(format!(
                                "new: unexpected {word:?}; expected workspace=/ABSOLUTE/DIR or title=TEXT"
                            )))
                        }
                    }
                }
                if let Some(t) = title_text {
                    title = Some(t);
                }
                let id = new_session_id();
                let key = self.create(&format!("{engine}:{id}"))?;
                self.sidecar.update(|all| {
                    if let Some(meta) = all.get_mut(&key.to_string()) {
                        meta.workspace = workspace;
                        meta.title = title;
                    }
                    Ok(())
                })?;
                Ok(())
            }
            Some("archive-older") => {
                let cutoff = words
                    .next()
                    .ok_or_else(|| Error::invalid("archive-older takes CUTOFF (RFC 3339, or 30d, 12h)"))?;
                if words.next().is_some() {
                    return Err(Error::invalid("archive-older takes one CUTOFF"));
                }
                let cutoff_ms = organize::parse_cutoff(cutoff, now_ms())?;
                self.archive_older(cutoff_ms).map(drop)
            }
            Some(other) => Err(Error::invalid(format!(
                "unknown command {other:?}; expected `new ENGINE [workspace=DIR] [title=TEXT]` or `archive-older CUTOFF`"
            ))),
            None => Err(Error::invalid("empty command")),
        }
        .inspect_err(|e| log::warn!("ctl {command:?}: {}", e.message))
    }

    fn limits(&self) -> Limits {
        Limits {
            page_turns: self.config.history_page_turns as usize,
            max_lines: self.config.transcript_max_lines as usize,
            max_messages: self.config.transcript_max_messages as usize,
            tail_bytes: self.config.transcript_tail_bytes as usize,
        }
    }

    /// Whether the session's engine keeps a conversation store (and so the
    /// session has a `transcript/` directory).
    pub fn has_transcript(&self, key: &SessionKey) -> bool {
        key.engine() == HOSTED || self.catalog.kind_of(key.engine()).is_some()
    }

    /// The slot records and hosted-run transcripts (SPEC §9).
    pub fn slots(&self) -> &SlotStore {
        &self.slots
    }

    /// A hosted run's entry index, refreshed.
    /// The map's lock is held only to take or store an index, never while
    /// the file is read.
    fn hosted_index(&self, key: &SessionKey) -> Result<(PathBuf, Arc<EntryIndex>)> {
        let path = self.slots.transcript_path(key.id());
        let failed = |e: std::io::Error| Error::io(&format!("cannot read {}", path.display()), &e);
        let known = lock(&self.hosted)
            .get(key.id())
            .cloned()
            .unwrap_or_default();
        let len = std::fs::metadata(&path).map_err(failed)?.len();
        if known.is_current(len) {
            return Ok((path, known));
        }
        let mut index = (*known).clone();
        index.refresh(&path).map_err(failed)?;
        let index = Arc::new(index);
        lock(&self.hosted).insert(key.id().to_string(), index.clone());
        Ok((path, index))
    }

    /// The session's turn index, refreshed against its store file; `None`
    /// while the engine has not written one.
    fn transcript(&self, key: &SessionKey) -> Result<Option<Arc<Mutex<TranscriptCache>>>> {
        let kind = self
            .catalog
            .kind_of(key.engine())
            .ok_or_else(|| Error::not_found(format!("{key} has no transcript")))?;
        let Some(file) = self.store_file(key) else {
            return Ok(None);
        };
        let path = catalog::readable(&file, &self.config.runtime_dir.join("decoded"))
            .map_err(|e| Error::io(&format!("cannot read {}", file.path.display()), &e))?;
        let cache = lock(&self.transcripts)
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(Mutex::new(TranscriptCache {
                    path: path.clone(),
                    index: TurnIndex::new(kind),
                    last_page: None,
                }))
            })
            .clone();
        {
            let mut c = lock(&cache);
            if c.path != path {
                c.path = path.clone();
                c.index = TurnIndex::new(kind);
                c.last_page = None;
            }
            c.index
                .refresh(&path)
                .map_err(|e| Error::io(&format!("cannot index {}", path.display()), &e))?;
        }
        Ok(Some(cache))
    }

    /// How many transcript pages there are (at least one: `page-0`).
    pub fn transcript_pages(&self, key: &SessionKey) -> Result<usize> {
        self.require(key)?;
        if key.engine() == HOSTED {
            let (_, index) = self.hosted_index(key)?;
            return Ok(index.pages(self.limits().page_turns));
        }
        Ok(match self.transcript(key)? {
            Some(cache) => transcript::page_count(&lock(&cache).index, self.limits().page_turns),
            None => 1,
        }
        .max(1))
    }

    /// `transcript/page-N`, rendered.
    pub fn transcript_page(&self, key: &SessionKey, page: usize) -> Result<Arc<Vec<u8>>> {
        self.require(key)?;
        if key.engine() == HOSTED {
            let (path, index) = self.hosted_index(key)?;
            return index
                .render_page(&path, page, self.limits().page_turns)
                .map_err(|e| Error::io(&format!("cannot read {}", path.display()), &e))?
                .map(Arc::new)
                .ok_or_else(|| Error::not_found(format!("{key} has no page {page}")));
        }
        let Some(cache) = self.transcript(key)? else {
            return if page == 0 {
                Ok(Arc::new(Vec::new()))
            } else {
                Err(Error::not_found(format!("{key} has no page {page}")))
            };
        };
        let mut c = lock(&cache);
        let stamp = c.index.scanned_to();
        if let Some((p, s, text)) = &c.last_page {
            if *p == page && *s == stamp {
                return Ok(text.clone());
            }
        }
        let text = Arc::new(
            transcript::render_page(&c.path, &c.index, page, &self.limits()).map_err(|e| {
                let err: Error = e.into();
                if err.errno != libc::ENOENT {
                    log::warn!(
                        "{key}: page {page} of {}: {}",
                        c.path.display(),
                        err.message
                    );
                }
                err
            })?,
        );
        c.last_page = Some((page, stamp, text.clone()));
        Ok(text)
    }

    /// The root `README`.
    pub fn readme(&self) -> Vec<u8> {
        README.as_bytes().to_vec()
    }
}

/// `2026-11-29T18:53:10.123Z` for milliseconds since the epoch (the epoch
/// itself for a value no calendar holds).
fn utc_text(ms: u64) -> String {
    let at = i64::try_from(ms)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok());
    format!("{:.3}", at.unwrap_or_default())
}

/// A fresh random UUID (v4), as Claude's `--session-id` expects.
fn new_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

const README: &str = "\
sessionfs: agent and shell sessions as files

  mkdir ENGINE:ID            create a session (engines: shell, claude, codex, ...)
  echo 'make' > ENGINE:ID/input    type into it (starts it under dtach if needed)
  tail -f ENGINE:ID/scrollback     follow its raw terminal output
  cat ENGINE:ID/screen       what its terminal shows now
  cat ENGINE:ID/status       live/stopped/busy/archived, last open outcome, pids, last error
  echo stop > ENGINE:ID/ctl  end it; also: open, resize COLSxROWS, redraw
  cat status                 the daemon's own state
  echo 'new shell title=build' > ctl    create a session with a fresh id

Sessions outlive the daemon: each runs under its own dtach master, so
`dtach -a` on the socket named in its status works beside this mount.
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_with_milliseconds() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_text(1_795_978_390_120), "2026-11-29T18:53:10.120Z");
        assert_eq!(utc_text(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc_text(u64::MAX), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn new_ids_are_lowercase_random_uuids() {
        let (a, b) = (new_session_id(), new_session_id());
        assert_ne!(a, b);
        let id = uuid::Uuid::try_parse(&a).unwrap();
        assert_eq!(id.get_version_num(), 4);
        assert_eq!(id.to_string(), a);
    }
}
