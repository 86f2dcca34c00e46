//! Opening a session (ATTACH / LAUNCH / BUSY) off the request threads:
//! one open per key at a time in this daemon, others wait for its result
//! holding no lock; joining live masters at start.

use crate::clock::now_ms;
use crate::core::agents::session_agent::ConversationOpened;
use crate::core::organize::sidecar::SessionMeta;
use crate::core::{Core, SessionRuntime, STOP_GRACE};
use crate::engine::{Engine, Store};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::runtime::dtach::{self, Client};
use crate::runtime::launch::{cancelled, terminate, Cancel};
use crate::runtime::readers::Ended;
use crate::runtime::record::RunRecord;
use crate::runtime::{OpenRequest, Outcome};
use crate::sync::{lock, wait_timeout};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a write to `input` or `ctl` may wait for the session's earlier
/// writes and opens (a master that takes nothing ends it sooner, at
/// [`dtach::STALL`]).
pub(in crate::core) const INPUT_DEADLINE: Duration = Duration::from_secs(10);

/// One open or stop of a session, which others may wait for. Waiting holds
/// no lock: the waiter sleeps on the condition variable.
#[derive(Debug, Default)]
pub(in crate::core) struct Flight {
    pub(in crate::core) result: Mutex<Option<Result<Arc<Client>>>>,
    pub(in crate::core) landed: Condvar,
}

impl Flight {
    pub(in crate::core) fn finish(&self, result: Result<Arc<Client>>) {
        *lock(&self.result) = Some(result);
        self.landed.notify_all();
    }

    /// The result, or `None` if it has not come by `deadline`.
    pub(in crate::core) fn wait(&self, deadline: Instant) -> Option<Result<Arc<Client>>> {
        let mut result = lock(&self.result);
        loop {
            if let Some(r) = result.as_ref() {
                return Some(r.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            result = wait_timeout(&self.landed, result, deadline - now).0;
        }
    }
}

/// Hears how a join's redraw went: nobody waits for it.
pub(in crate::core) struct Repainted;

impl crate::work::Answer<()> for Repainted {
    fn done(self, result: Result<()>) {
        if let Err(e) = result {
            log::info!("{}", e.message);
        }
    }
}

/// Whether an open may start a master, or only join one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::core) enum OpenMode {
    AttachOrLaunch,
    AttachOnly,
    /// As `AttachOrLaunch`, for the session that writes the conversation
    /// first asked for: opened as it is, never sent on again.
    Owner,
}

impl Core {
    /// Whether the engine's own store already holds this conversation, so a
    /// launch resumes it rather than starting a new one.
    pub(in crate::core) fn conversation_exists(&self, key: &SessionKey, engine: &Engine) -> bool {
        match &engine.store {
            Store::Claude(_) | Store::Codex(_) | Store::Gemini(_) | Store::Opencode(_) => {
                self.catalog.refresh();
                self.store_file(key).is_some()
            }
            // A configured agent keeps its conversations where sessionfs
            // does not look: once launched, it has one to resume.
            Store::None if engine.screen.is_some() => {
                let files = crate::agent::AgentFiles::new(&self.config.state_dir, key.as_str());
                crate::agent::events::EventLog::last(&files.events).is_some()
            }
            Store::None | Store::Hosted => false,
        }
    }

    /// Where the agent runs: its worktree while it has one, else the
    /// sidecar's workspace, else the store's `cwd`, else `$HOME`.
    pub(in crate::core) fn workspace(&self, key: &SessionKey) -> PathBuf {
        if let Some(dir) = self.worktree_dir(key) {
            return dir;
        }
        let row = self.row(key);
        self.meta_of(&row)["workspace"]
            .as_str()
            .map_or_else(|| self.config.home.clone(), PathBuf::from)
    }

    /// Opens a session (ATTACH / LAUNCH / BUSY) unless it is already live
    /// here. One open per key runs at a time in this daemon (across daemons
    /// the flock decides); a second opener waits for the first one's result
    /// until `deadline`, holding no lock. Runs on a slow-operation thread.
    pub(in crate::core) fn ensure_open(
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
        // A conversation another session's process writes is opened as that
        // session: never a second process on it.
        if mode == OpenMode::AttachOrLaunch && self.written_by_other(key) {
            if let Some(owner) = self.conversation_owner(key).filter(|o| o != key) {
                log::info!("{key}: written by the master of {owner}; opening that");
                return self.ensure_open(&owner, OpenMode::Owner, deadline);
            }
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
        // An archive whose record was committed after the check above but
        // before this open was registered is seen here; one committed
        // later sees the open and undoes it (`Core::archive`).
        let result = if self.is_archived(key) {
            Err(Error::perm(format!(
                "{key} is archived; unarchive it first"
            )))
        } else {
            self.open_now(key, &rt, &engine, mode, stops)
        };
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
    pub(in crate::core) fn open_now(
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
        let meta = self.meta(key);
        let fork_file = meta
            .fork_of
            .as_deref()
            .filter(|_| !resume)
            .and_then(|from| SessionKey::new(key.engine(), from).ok())
            .and_then(|from| self.catalog.find(&from))
            .map(|file| file.path.to_string_lossy().into_owned());
        let options = crate::engine::LaunchOptions {
            model: meta.model.as_deref(),
            mode: meta.mode.as_deref(),
            fork_from: meta.fork_of.as_deref(),
            fork_file: fork_file.as_deref(),
        };
        let mut argv = engine.argv_with(&self.conversation_id(key), resume, &options);
        let conversation_opened = match (resume, options.fork_from) {
            (true, _) => ConversationOpened::Resumed,
            (false, Some(_)) if !engine.fork_args.is_empty() => ConversationOpened::Forked,
            _ => ConversationOpened::New,
        };
        self.agent_argv(key, engine, &mut argv);
        let cwd = self.workspace(key);
        let launch_dir = cwd.clone();
        // Gone since it was set (edits refuse a missing one): the program
        // starts in the home directory, and the user is told so.
        let moved = (!cwd.is_dir()).then(|| {
            format!(
                "workspace {} does not exist; {key} started in the home directory",
                cwd.display()
            )
        });
        let stopped = || lock(&rt.state).stops != stops;
        let request = OpenRequest {
            paths: &self.paths,
            key,
            argv,
            cwd,
            cols,
            rows,
            wrapper: self.wrapper.clone(),
            dtach: self.dtach.clone(),
            cancel: Cancel(&stopped),
        };
        // Where this launch's output begins in the session's stream.
        let launch_from = rt.scrollback.total();
        let opened = match crate::runtime::open(&request) {
            Ok(opened) => opened,
            // `stop` came while this was opening: whatever failed, it wins,
            // and ends what the open may have started after it looked.
            Err(_) if stopped() => {
                terminate(&self.paths, key, STOP_GRACE);
                return Err(cancelled(key));
            }
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
                state.error = match opened.outcome {
                    Outcome::Launch => moved.inspect(|why| log::warn!("{why}")),
                    _ => None,
                };
                Some(state.generation)
            }
        };
        if generation.is_some() {
            self.organize.members.connections.changed();
        }
        let Some(generation) = generation else {
            // `stop` came while this was opening: it wins.
            client.close();
            terminate(&self.paths, key, STOP_GRACE);
            return Err(cancelled(key));
        };
        if opened.outcome == Outcome::Launch {
            // A configured agent is judged by its screen alone: the screen
            // its last run left must not read as this one's.
            if engine.screen.is_some() {
                rt.blank_screen_from(launch_from);
            }
            let launched = lock(&rt.state).launched;
            if let Some((at, resumed)) = launched {
                self.note_launch(key, at, resumed);
            }
            self.note_base_commit(key, &launch_dir);
        }
        self.agent_opened(
            key,
            rt,
            engine,
            opened.outcome,
            conversation_opened,
            opened.record.as_ref().map(|r| r.agent_pid),
        );
        log::info!(
            "{key}: {:?} (master pid {:?})",
            opened.outcome,
            opened.record.as_ref().map(|r| r.master_pid)
        );
        if self.organize.sidecar.get(&key.to_string()).is_none() {
            // A live master found on disk becomes a known session.
            let _ = self.organize.sidecar.update(|all| {
                all.entry_or(key.as_str(), || SessionMeta {
                    created_ms: opened.record.as_ref().map_or_else(now_ms, |r| r.started_ms),
                    ..Default::default()
                });
                Ok(())
            });
        }
        let reader_rt = rt.clone();
        let reader_waits = self.agents.waits.clone();
        let reader_client = client.clone();
        let sink_rt = rt.clone();
        let connections = self.organize.members.connections.clone();
        let on_end = move |ended: Ended| {
            // Writers still waiting on this master fail now, not at their deadline.
            reader_client.close();
            let mut state = lock(&reader_rt.state);
            let stopped_here = state.generation != generation;
            let ended_by_itself = !stopped_here && matches!(ended, Ended::Closed);
            if state.generation == generation {
                state.client = None;
                connections.changed();
            }
            match ended {
                Ended::Closed => log::info!("{}: master closed", reader_rt.key),
                // A master this daemon ended may reset the connection.
                Ended::Failed(e) if stopped_here => {
                    log::info!("{}: master closed ({e})", reader_rt.key)
                }
                Ended::Failed(e) => {
                    log::warn!("{}: reading the master failed: {e}", reader_rt.key)
                }
                // The next open joins the master again with a new reader.
                Ended::Panicked(message) => {
                    let why = format!("the output reader stopped on an internal error: {message}");
                    log::error!("{}: {why}", reader_rt.key);
                    state.error = Some(why);
                }
            }
            drop(state);
            // Not stopped by this daemon: the program ended (a stop
            // reports itself).
            if ended_by_itself {
                crate::core::agents::session_agent::process(
                    &reader_rt,
                    &reader_waits,
                    crate::agent::state::Signal::Exited("the program ended".into()),
                );
            }
        };
        self.sessions
            .output_readers
            .watch(
                opened.reader,
                Box::new(move |bytes| sink_rt.take_output(bytes)),
                Box::new(on_end),
            )
            .map_err(|e| Error::io("cannot read the session's output", &e))?;
        if opened.outcome == Outcome::Attach {
            self.repaint_joined(key, rt, &client);
        }
        Ok(client)
    }

    /// A master this daemon did not launch drew its screen before we came
    /// (dtach keeps no history): asks the program to draw it again, as the
    /// `redraw` command does and as `dtach -a` does when it attaches. Waits
    /// for nothing: on the fresh connection the packet goes at once;
    /// otherwise it is sent from the pool, bounded by
    /// [`dtach::CONTROL_PATIENCE`] for a master that takes nothing.
    fn repaint_joined(&self, key: &SessionKey, rt: &SessionRuntime, client: &Arc<Client>) {
        let (cols, rows) = {
            let s = lock(&rt.state);
            (s.cols, s.rows)
        };
        rt.expect_repaint();
        // Programs that ignore a redraw get a real repaint if their screen
        // is still blank a moment later.
        rt.look_for_blank_at(crate::clock::now_ms() + crate::core::sessions::repaint::JOIN_LOOK_MS);
        if client.try_redraw_now(cols, rows) {
            return;
        }
        let client = client.clone();
        let what = format!("the redraw of {key} after joining it");
        let key = key.clone();
        self.work
            .submit(what, crate::work::DEADLINE, Repainted, move || {
                client
                    .redraw(cols, rows, Instant::now() + dtach::CONTROL_PATIENCE)
                    .map_err(|e| crate::core::session_runtime::send_error(&key, "redraw", &e.error))
            });
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
        self.note_ended_masters();
    }

    /// The run records whose master is gone: those programs ended while no
    /// daemon was joined to them (or under the daemon before this one).
    fn note_ended_masters(&self) {
        let Ok(dir) = std::fs::read_dir(&self.config.runtime_dir) else {
            return;
        };
        for entry in dir.filter_map(|e| e.ok()) {
            let path = entry.path();
            if !path.to_string_lossy().ends_with(".run.json") {
                continue;
            }
            let Some(record) = RunRecord::read(&path) else {
                continue;
            };
            let Ok(key) = SessionKey::parse(&record.key) else {
                continue;
            };
            if lock(&self.sessions.runtimes)
                .get(&key)
                .is_some_and(|rt| lock(&rt.state).client.is_some())
                || crate::procinfo::is_dtach_master(record.master_pid, &self.paths.socket(&key))
                || !self.exists(&key)
            {
                continue;
            }
            let ended_ms = crate::runtime::record::stamped_activity_ms(&path)
                .unwrap_or_else(crate::clock::now_ms);
            self.ended_unjoined(&key, ended_ms);
        }
    }
}
