//! The in-memory side of a session that has been opened: its output ring,
//! VT mirror and connection state. Made on first use only, so a listed
//! conversation costs nothing here.

use super::{lock, Core, Flight};
use crate::error::Result;
use crate::key::SessionKey;
use crate::runtime::dtach::Client;
use crate::runtime::record::RunRecord;
use crate::runtime::Outcome;
use crate::screen::{Screen, DEFAULT_COLS, DEFAULT_ROWS};
use crate::scrollback::Scrollback;
use std::sync::{Arc, Mutex};

/// A live session's connection and what the last open found.
#[derive(Debug, Default)]
pub(super) struct RuntimeState {
    pub(super) client: Option<Arc<Client>>,
    /// Bumped on every connection, so a finished reader only clears its own.
    pub(super) generation: u64,
    pub(super) outcome: Option<Outcome>,
    pub(super) record: Option<RunRecord>,
    pub(super) error: Option<String>,
    pub(super) cols: u16,
    pub(super) rows: u16,
    pub(super) last_input_ms: u64,
    /// When this daemon last launched the session, and whether as a resume:
    /// the engine may name the conversation after that.
    pub(super) launched: Option<(u64, bool)>,
    /// When the store was last searched for a conversation to bind.
    pub(super) bind_checked: Option<std::time::Instant>,
    /// An open under way in this daemon: other openers wait for its result
    /// instead of starting a second master.
    pub(super) opening: Option<Arc<Flight>>,
    /// A stop under way: openers wait for it, then open afresh.
    pub(super) stopping: Option<Arc<Flight>>,
    /// Stops so far; an open that saw a stop begin meanwhile undoes itself.
    pub(super) stops: u64,
}

/// The in-memory side of one session: output ring, VT mirror, connection.
#[derive(Debug)]
pub struct SessionRuntime {
    pub(super) key: SessionKey,
    pub(super) scrollback: Arc<Scrollback>,
    pub(super) screen: Mutex<Screen>,
    pub(super) state: Mutex<RuntimeState>,
    /// What the program is doing (`state`, `events`).
    pub(super) agent: super::agent_state::Agent,
}

impl SessionRuntime {
    pub(super) fn new(key: SessionKey, scrollback_bytes: u64) -> Self {
        SessionRuntime {
            key,
            scrollback: Arc::new(Scrollback::new(scrollback_bytes as usize)),
            screen: Mutex::new(Screen::default()),
            state: Mutex::new(RuntimeState {
                cols: DEFAULT_COLS,
                rows: DEFAULT_ROWS,
                ..Default::default()
            }),
            agent: Default::default(),
        }
    }

    pub(super) fn live_client(&self) -> Option<Arc<Client>> {
        lock(&self.state).client.clone()
    }

    pub fn scrollback(&self) -> &Arc<Scrollback> {
        &self.scrollback
    }

    /// One chunk of the master's output, into the ring and the VT mirror.
    /// A mirror that fails resets itself; the reason goes to `status`.
    pub(super) fn take_output(&self, bytes: &[u8]) {
        crate::faults::maybe_panic("output", bytes);
        self.scrollback.append(bytes);
        let fed = lock(&self.screen).feed(bytes);
        if let Err(why) = fed {
            log::error!("{}: {why}", self.key);
            lock(&self.state).error = Some(why);
        }
    }
}

impl Core {
    pub(super) fn runtime(&self, key: &SessionKey) -> Arc<SessionRuntime> {
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
}
