//! sessionfs: agent and shell sessions kept alive under dtach, mounted as files.
//!
//! The FUSE adapter (`fs`) is thin over the plain core (`core`), which can be
//! driven and tested without a mount.

pub mod agent;
pub mod atomic;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod config;
pub mod core;
pub mod daemon;
pub mod engine;
pub mod error;
pub mod filelock;
pub mod fs;
pub mod git;
pub mod hashing;
pub mod input_checks;
pub mod key;
pub mod mounting;
pub mod mounts;
pub mod pieced_text;
pub mod procinfo;
pub mod runtime;
pub mod sync;
pub mod terminal;
pub mod test_hooks;
pub mod transcript;
pub mod usage;
pub mod work;
