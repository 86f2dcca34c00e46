//! sessionfs: agent and shell sessions kept alive under dtach, mounted as files.
//!
//! The FUSE adapter (`fs`) is thin over the plain core (`core`), which can be
//! driven and tested without a mount.

pub mod agent;
pub mod atomic;
pub mod binding;
pub mod catalog;
pub mod client;
pub mod clock;
pub mod config;
pub mod core;
pub mod daemon;
pub mod engine;
pub mod error;
pub mod faults;
pub mod filelock;
pub mod fs;
pub mod hashing;
pub mod hosted;
pub mod key;
pub mod listing;
pub mod metaedit;
pub mod mounting;
pub mod mounts;
pub mod procinfo;
pub mod ring_file;
pub mod runtime;
pub mod screen;
pub mod scrollback;
pub mod sidecar;
pub mod slots;
pub mod sync;
pub mod transcript;
pub mod work;
