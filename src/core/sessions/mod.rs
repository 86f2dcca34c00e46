//! Sessions: opening one (attach or launch), `input`, `ctl` and stop,
//! repainting after a restart, which conversation a session writes and
//! its switches, its transcripts, its `status`, and the root `ctl`.

pub(in crate::core) mod control;
pub(in crate::core) mod conversations;
pub(in crate::core) mod opening;
pub(in crate::core) mod repaint;
pub(in crate::core) mod root_ctl;
pub(in crate::core) mod status;
pub(in crate::core) mod store_file;
pub(in crate::core) mod switches;
pub(in crate::core) mod transcripts;
pub(in crate::core) mod worktrees;

use crate::core::sessions::transcripts::TranscriptCache;
use crate::core::SessionRuntime;
use crate::key::SessionKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What the sessions room keeps.
#[derive(Debug, Default)]
pub(in crate::core) struct SessionsState {
    /// One runtime per opened key (the map only: each runtime has its own
    /// locks).
    pub(in crate::core) runtimes: Mutex<HashMap<SessionKey, Arc<SessionRuntime>>>,
    /// Turn indexes of the conversations sessions write now.
    pub(in crate::core) transcripts: Mutex<HashMap<SessionKey, Arc<Mutex<TranscriptCache>>>>,
    /// Turn indexes of conversations sessions wrote before their current
    /// one, by conversation.
    pub(in crate::core) earlier_transcripts:
        Mutex<HashMap<SessionKey, Arc<Mutex<TranscriptCache>>>>,
    /// Sessions launched here whose conversation may still be bound.
    pub(in crate::core) pending_binds: conversations::PendingBinds,
    /// Which session each conversation it switched to belongs to.
    pub(in crate::core) owners: switches::Owners,
    /// Every live session's output, read by a few threads.
    pub(in crate::core) output_readers: crate::runtime::readers::OutputReaders,
}
