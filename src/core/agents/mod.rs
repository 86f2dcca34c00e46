//! Agents: each session's agent (state, prompts typed, ticks), the answers
//! to its dialogs, a prompt's close, blocked `wait` reads, a shell's
//! foreground job, and new conversations announced on the root `events`.

pub(in crate::core) mod answers;
pub(in crate::core) mod discoveries;
pub(in crate::core) mod prompt_close;
pub(in crate::core) mod session_agent;
pub(in crate::core) mod shell_line;
pub(in crate::core) mod waits;

use crate::agent::stream::EventStream;
use std::sync::Arc;

/// What the agents room keeps.
#[derive(Debug)]
pub(in crate::core) struct AgentsState {
    /// Blocked reads of `wait`.
    pub(in crate::core) waits: waits::Waits,
    /// The root `events`: every session's changes.
    pub(in crate::core) event_stream: Arc<EventStream>,
    /// Conversations seen in the stores, to announce new ones.
    pub(in crate::core) discoveries: discoveries::Discoveries,
}

impl AgentsState {
    pub(in crate::core) fn new(event_stream: Arc<EventStream>) -> Self {
        AgentsState {
            waits: Default::default(),
            event_stream,
            discoveries: Default::default(),
        }
    }
}
