//! The file tree: inode numbers and the node table, open handles and
//! directory snapshots, attributes and mtimes, editors' scratch files, the
//! save protocol, and one method per kernel call (`requests`). The views'
//! and the slot records' files are shown from here; what they mean lives in
//! `organize` and `records`.

pub(in crate::core) mod caps;
pub(in crate::core) mod handle_memory;
pub(in crate::core) mod handles;
#[cfg(test)]
mod lifecycle_tests;
pub(in crate::core) mod mtimes;
pub mod node;
pub(in crate::core) mod requests;
pub(in crate::core) mod save;
pub mod scratch;
pub(in crate::core) mod slot_files;
pub mod step;
pub(in crate::core) mod view_files;
