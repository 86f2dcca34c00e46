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
