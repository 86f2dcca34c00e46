//! What is written to a session: `input`, and the `ctl` commands (open,
//! stop, resize, redraw); stopping and reaping its processes.

use crate::agent::dialogs::Answer;
use crate::core::session_runtime::send_error;
use crate::core::{Concern, Core, Flight, OpenMode, SessionRuntime, INPUT_DEADLINE};
use crate::error::{Error, Result};
use crate::input_checks::preview;
use crate::key::SessionKey;
use crate::runtime::launch::terminate_known;
use crate::sync::lock;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long `stop` waits after TERM before KILL.
pub(in crate::core) const STOP_GRACE: Duration = Duration::from_secs(3);

/// A `resize` argument: `COLSxROWS` within the VT mirror's bounds
/// (`screen::check_size`).
pub(in crate::core) fn parse_size(arg: &str) -> Result<(u16, u16)> {
    let bad = || {
        Error::invalid(format!(
            "resize takes COLSxROWS (e.g. 120x40), not {}",
            preview(arg)
        ))
    };
    let (c, r) = arg.split_once(['x', 'X']).ok_or_else(bad)?;
    let cols: u16 = c.parse().map_err(|_| bad())?;
    let rows: u16 = r.parse().map_err(|_| bad())?;
    crate::terminal::vt_mirror::check_size(cols, rows)
        .map_err(|why| Error::invalid(format!("resize {arg}: {why}")))?;
    Ok((cols, rows))
}

impl Core {
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
                self.input_went(&self.runtime(key));
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
                    let mut err = err;
                    err.message = format!(
                        "{}; {went} of {} bytes went through",
                        err.message,
                        data.len()
                    );
                    self.record(&Concern::Session(key.clone()), err);
                    Ok(went)
                }
            }
        })();
        result.map_err(|e| self.record(&Concern::Session(key.clone()), e))
    }

    /// `input` sent on the caller's thread, when the session is attached
    /// and its master takes the bytes at once: the common case skips the
    /// hand-off to the pool. `None` when the write must go to the pool
    /// (it would open the session, or wait).
    pub fn write_input_now(&self, key: &SessionKey, data: &[u8]) -> Option<usize> {
        let rt = lock(&self.sessions.runtimes).get(key).cloned()?;
        let client = {
            let state = lock(&rt.state);
            if state.opening.is_some() || state.stopping.is_some() {
                return None;
            }
            state.client.clone()?
        };
        let went = client.try_push_now(data)?;
        self.input_went(&rt);
        Some(went)
    }

    /// Bytes of `input` reached the program: its last activity, and, while
    /// it asks something, its answer (see `Signal::Answered`).
    fn input_went(&self, rt: &crate::core::SessionRuntime) {
        rt.note_input();
        crate::core::agents::session_agent::process(
            rt,
            &self.agents.waits,
            crate::agent::state::Signal::Answered,
        );
        crate::core::agents::session_agent::poke();
    }

    /// One command written to a session's `ctl`.
    pub fn session_ctl(&self, key: &SessionKey, command: &str) -> Result<()> {
        self.require(key)?;
        let result = (|| {
            let mut words = command.split_whitespace();
            let verb = words.next().unwrap_or("");
            // `answer` takes the rest of the line: a number, or free text.
            if verb == "answer" {
                let rest = command.trim().strip_prefix("answer").unwrap_or("").trim();
                let answer = match rest.parse::<usize>() {
                    Ok(n) => Answer::Option(n),
                    Err(_) if !rest.is_empty() => Answer::Text(rest.to_string()),
                    Err(_) => return Err(Error::invalid("answer takes N or TEXT")),
                };
                return self.answer(key, answer);
            }
            let arg = words.next();
            if words.next().is_some() {
                return Err(Error::invalid(format!(
                    "too many words in ctl command {}",
                    preview(command)
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
                    rt.resize_screen(cols, rows);
                    match rt.live_client() {
                        Some(c) => c
                            .resize(cols, rows, Instant::now() + INPUT_DEADLINE)
                            .map_err(|e| send_error(key, "resize", &e.error)),
                        None => Ok(()),
                    }
                }
                ("prune", None) => self.prune(key),
                ("fork", given) => {
                    let id = match given.map(|w| w.split_once('=')) {
                        None => None,
                        Some(Some(("id", id))) if !id.is_empty() => Some(id),
                        Some(_) => return Err(Error::invalid("fork takes at most id=ID")),
                    };
                    let made = self.fork(key, id)?;
                    *lock(&self.last_new) = Some(made.to_string());
                    Ok(())
                }
                ("approve", None) => self.answer(key, Answer::Approve),
                ("deny", None) => self.answer(key, Answer::Deny),
                ("interrupt", None) => self.interrupt(key),
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
                    "unknown ctl command {}; expected open, stop, resize COLSxROWS, redraw, approve, deny, answer N|TEXT, interrupt, prune, fork [id=ID]",
                    preview(command)
                ))),
            }
        })();
        result.map_err(|e| self.record(&Concern::Session(key.clone()), e))
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
    pub(in crate::core) fn reap(&self, key: &SessionKey) -> Arc<SessionRuntime> {
        let (rt, end) = self.begin_reap(key);
        end.run();
        rt
    }

    /// [`Core::reap`] for an archive: the connection is closed at once,
    /// and ending the processes (TERM, the grace period, KILL) and
    /// unlinking the socket go on on a thread of their own. An archive
    /// never waits for a program that is slow to end: a rename into
    /// `archived/` holds the kernel's locks on the root and `archived/`
    /// until it is answered, and every lookup and listing there waits.
    /// Until the processes are gone the session is stopping: an open after
    /// an unarchive waits for that, as it waits for a `stop`.
    pub(in crate::core) fn reap_detached(&self, key: &SessionKey) -> Arc<SessionRuntime> {
        let (rt, end) = self.begin_reap(key);
        let end = Arc::new(Mutex::new(Some(end)));
        let on_thread = end.clone();
        let spawned = std::thread::Builder::new()
            .name("reap".into())
            .spawn(move || {
                if let Some(end) = lock(&on_thread).take() {
                    end.run();
                }
            });
        if let Err(e) = spawned {
            log::warn!("{key}: no thread to end the processes on ({e}); ending them here");
            if let Some(end) = lock(&end).take() {
                end.run();
            }
        }
        rt
    }

    /// The part of a reap that must happen now: the session is marked
    /// stopping and its connection closed. What it returns ends the
    /// processes and finishes the stop.
    fn begin_reap(&self, key: &SessionKey) -> (Arc<SessionRuntime>, EndProcesses) {
        let rt = self.runtime(key);
        let flight = Arc::new(Flight::default());
        let (client, known) = {
            let mut state = lock(&rt.state);
            state.stops += 1;
            state.generation += 1;
            state.stopping = Some(flight.clone());
            (state.client.take(), state.record.clone())
        };
        if let Some(client) = client {
            self.organize.members.connections.changed();
            client.detach();
        }
        // Stopped from now, for whoever reads `state` before the processes
        // are gone (an archive answers before that).
        crate::core::agents::session_agent::process(
            &rt,
            &self.agents.waits,
            crate::agent::state::Signal::MasterGone,
        );
        let end = EndProcesses {
            paths: self.paths.clone(),
            key: key.clone(),
            known,
            rt: rt.clone(),
            waits: self.agents.waits.clone(),
            flight,
        };
        (rt, end)
    }
}

/// Ends a session's processes and finishes its stop: what a reap may leave
/// to a thread of its own.
struct EndProcesses {
    paths: crate::runtime::paths::RuntimePaths,
    key: SessionKey,
    known: Option<crate::runtime::record::RunRecord>,
    rt: Arc<SessionRuntime>,
    waits: crate::core::agents::waits::Waits,
    flight: Arc<Flight>,
}

impl EndProcesses {
    fn run(self) {
        // Its exact last activity goes on the record, which stays, before
        // the socket goes: a listing that sees the socket gone reads it.
        self.rt.stamp_activity_now();
        terminate_known(&self.paths, &self.key, STOP_GRACE, self.known.as_ref());
        // Output read before the detach took effect.
        self.rt.stamp_activity_now();
        crate::core::agents::session_agent::process(
            &self.rt,
            &self.waits,
            crate::agent::state::Signal::MasterGone,
        );
        {
            let mut state = lock(&self.rt.state);
            if state
                .stopping
                .as_ref()
                .is_some_and(|f| Arc::ptr_eq(f, &self.flight))
            {
                state.stopping = None;
            }
        }
        self.flight.finish(Err(Error::new(
            libc::ECANCELED,
            format!("{} was stopped", self.key),
        )));
    }
}
