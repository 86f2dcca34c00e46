//! The one-writer runtime (SPEC §3): paths, the per-key lock, the dtach
//! protocol, launching under dtach, the exec wrapper and teardown.

pub mod dtach;
pub mod launch;
pub mod paths;
pub mod readers;
pub mod record;
pub mod wrapper;

pub use launch::{open, OpenRequest, Opened, Outcome};
pub use paths::RuntimePaths;
