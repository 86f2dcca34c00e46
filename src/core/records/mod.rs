//! Records: the slot records of each world and the transcripts of hosted
//! runs, and the buffers their writes fill.

pub(in crate::core) mod buffers;
pub mod hosted;
pub mod slots;

use crate::core::records::hosted::EntryIndex;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What the records room keeps.
#[derive(Debug)]
pub(in crate::core) struct RecordsState {
    /// Slot records, read from disk each time.
    pub(in crate::core) slots: slots::SlotStore,
    /// Hosted transcripts' entry indexes, by session id.
    pub(in crate::core) hosted: Mutex<HashMap<String, Arc<EntryIndex>>>,
}

impl RecordsState {
    pub(in crate::core) fn open(state_dir: &Path) -> Self {
        RecordsState {
            slots: slots::SlotStore::open(state_dir),
            hosted: Mutex::new(HashMap::new()),
        }
    }
}
