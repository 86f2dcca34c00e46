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
pub(in crate::core) mod usage_files;
pub mod views;

use crate::core::{HookSlot, MovesHook, SessionHook};
use std::path::Path;
use std::sync::Arc;

/// What the organising room keeps.
#[derive(Debug)]
pub(in crate::core) struct OrganizeState {
    /// The records sessionfs keeps: title, project, favourite, archived.
    pub(in crate::core) sidecar: Arc<sidecar::Sidecar>,
    /// Every session as one row, kept per stamp.
    pub(in crate::core) listings: rows::ListingCache,
    /// Who the root and the views hold, moved change by change.
    pub(in crate::core) members: members::Members,
    /// Told when a session leaves its directory other than by a rename
    /// (archived or unarchived through a file): the kernel may still hold
    /// the old entry. Set once by the FUSE adapter.
    pub(in crate::core) moved_hook: HookSlot<MovesHook>,
    /// Told when a session's metadata changed, so that it may have left a
    /// view: the kernel may hold its link there. Set once by the adapter.
    pub(in crate::core) members_hook: HookSlot<SessionHook>,
    /// What the last `archive-older` did or would do: root `status`'s
    /// `archive_older`.
    /// The last root `usage.json`.
    pub(in crate::core) usage_json: usage_files::UsageJsonCache,
    pub(in crate::core) last_archive_older: std::sync::Mutex<Option<changes::ArchiveOlderReport>>,
}

impl OrganizeState {
    pub(in crate::core) fn open(state_dir: &Path) -> Self {
        OrganizeState {
            sidecar: Arc::new(sidecar::Sidecar::open(state_dir)),
            listings: Default::default(),
            members: Default::default(),
            moved_hook: HookSlot::default(),
            members_hook: HookSlot::default(),
            usage_json: Default::default(),
            last_archive_older: Default::default(),
        }
    }
}
