//! Asking the kernel to drop entries when it holds too many of the daemon's
//! numbers (see `core::tree::node::REFERENCED_MAX`). Every well-formed GUID under
//! `slots/` is a world, and the kernel keeps each entry it looked up until
//! memory runs short, so lookups alone would grow the daemon's table
//! without end. An entry dropped is forgotten at once unless something
//! uses it, and the daemon lets its number go.
//!
//! The kernel locks the parent directory to drop an entry, while a lookup
//! there may hold that lock waiting on a request thread: so the drops are
//! written by one thread of their own, and never waited for.

use super::notify::EntryNotices;
use crate::core::tree::node::Entry;
use crate::core::EvictHook;
use std::sync::mpsc::{sync_channel as bounded, Receiver, SyncSender, TrySendError};

/// Batches waiting to be written; more are dropped (the next batch asks again).
const QUEUE: usize = 2;

/// Starts the thread that tells the kernel to drop entries; the hook hands
/// it batches.
pub fn start(notices: impl EntryNotices) -> std::io::Result<EvictHook> {
    let (queue, batches): (SyncSender<Vec<Entry>>, _) = bounded(QUEUE);
    std::thread::Builder::new()
        .name("entry-eviction".into())
        .spawn(move || serve(notices, batches))?;
    Ok(EvictHook(Box::new(move |entries| {
        match queue.try_send(entries) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(entries)) => {
                log::debug!("{} entries to drop wait for the last batch", entries.len())
            }
        }
    })))
}

fn serve(mut notices: impl EntryNotices, batches: Receiver<Vec<Entry>>) {
    for batch in batches {
        log::debug!(
            "the kernel holds too many numbers: dropping {} entries",
            batch.len()
        );
        for (parent, name) in batch {
            notices.drop_entry(parent, &name);
        }
    }
}
