//! Organising: metadata edits and archive (`changes`), the sidecar that
//! records them, the listing's rows, order and filters, the members index
//! of the root and the views, and an archived shell's scrollback.

pub(in crate::core) mod archived_scrollback;
pub(in crate::core) mod changes;
pub(in crate::core) mod hosted_times;
pub(in crate::core) mod members;
pub mod meta_edit;
pub mod query;
pub(in crate::core) mod rows;
pub(in crate::core) mod run_stamps;
pub mod sidecar;
pub mod views;
