//! Agent sessions as a state machine: what the agent is doing (`state`),
//! the hooks that tell it, and the `events` log of its changes.
//!
//! Plain logic with no FUSE and no session runtime: the daemon feeds it
//! signals (the process, hook lines from [`events::Follower`], screen
//! verdicts from [`screen`]) and serves what [`state::Tracker`] decides.

pub mod events;
pub mod hooks;
pub mod screen;
pub mod state;
