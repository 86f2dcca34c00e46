//! What open handles hold in the daemon's memory, all together, and the
//! cap on it: the text a generated file, a transcript page or a directory
//! listing was fixed to at `open`, and what a written file buffers until it
//! is committed. Each handle is capped on its own; this caps their sum, so
//! that many opens cannot bloat the daemon where each alone is small.
//!
//! A text several handles share (one version of `sessions.json`) counts
//! once, while any of them holds it. Past the cap an `open` fails with
//! ENOMEM and a `write` that would buffer more with ENOSPC; closing frees.

use crate::error::{Error, Result};
use crate::sync::lock;
use std::collections::HashMap;
use std::sync::Mutex;

/// What every open handle costs besides the bytes it holds: its entry in
/// the table, so that a flood of empty handles is bounded too.
pub const HANDLE_OVERHEAD: u64 = 256;

/// The part of the cap only `status` files may use, so that the reason
/// for a refusal can still be read when the rest is taken.
pub const STATUS_RESERVE: u64 = 1 << 20;

/// A text pinned by handles: its address (its identity while pinned) and
/// its length.
pub(in crate::core) type Pinned = (usize, u64);

#[derive(Debug, Default)]
struct Inner {
    total: u64,
    /// What each handle was charged for itself and its own buffers.
    own: HashMap<u64, u64>,
    /// Texts handles hold, by address: how many handles, how many bytes.
    texts: HashMap<usize, (u32, u64)>,
}

/// The bytes open handles hold, against one cap.
#[derive(Debug)]
pub(in crate::core) struct HandleMemory {
    max: u64,
    inner: Mutex<Inner>,
}

impl HandleMemory {
    pub(in crate::core) fn new(max: u64) -> Self {
        HandleMemory {
            max,
            inner: Mutex::default(),
        }
    }

    fn over(&self, errno: i32, total: u64) -> Error {
        Error::new(
            errno,
            format!(
                "open files would hold {total} bytes of the daemon's memory, over the limit of {} bytes for all of them (AGENT_SESSIONS_OPEN_BYTES); close some",
                self.max
            ),
        )
    }

    /// Charges a new handle `fh`: its overhead, `own` bytes of its own and
    /// the text it pins (nothing more when another handle pins it
    /// already). ENOMEM past the cap (short of [`STATUS_RESERVE`] unless
    /// `status` says the handle reads a `status`), and nothing is charged.
    pub(in crate::core) fn open(
        &self,
        fh: u64,
        own: u64,
        text: Option<Pinned>,
        status: bool,
    ) -> Result<()> {
        let mut inner = lock(&self.inner);
        let own = own.saturating_add(HANDLE_OVERHEAD);
        let text_cost = match text {
            Some((addr, len)) if !inner.texts.contains_key(&addr) => len,
            _ => 0,
        };
        let total = inner.total.saturating_add(own).saturating_add(text_cost);
        let max = if status {
            self.max
        } else {
            self.max.saturating_sub(STATUS_RESERVE)
        };
        if total > max {
            return Err(self.over(libc::ENOMEM, total));
        }
        inner.total = total;
        inner.own.insert(fh, own);
        if let Some((addr, len)) = text {
            inner.texts.entry(addr).or_insert((0, len)).0 += 1;
        }
        Ok(())
    }

    /// Frees what handle `fh` was charged, and its text when no other
    /// handle pins it.
    pub(in crate::core) fn close(&self, fh: u64, text: Option<usize>) {
        let mut inner = lock(&self.inner);
        let own = inner.own.remove(&fh).unwrap_or(0);
        inner.total = inner.total.saturating_sub(own);
        if let Some(addr) = text {
            unpin(&mut inner, addr);
        }
    }

    /// Charges `more` bytes a write to `fh` may buffer, before it does:
    /// ENOSPC past the cap (as a full disk), and nothing is charged.
    pub(in crate::core) fn reserve(&self, fh: u64, more: u64) -> Result<()> {
        let mut inner = lock(&self.inner);
        let total = inner.total.saturating_add(more);
        if more > 0 && total > self.max.saturating_sub(STATUS_RESERVE) {
            return Err(self.over(libc::ENOSPC, total));
        }
        // A handle closed meanwhile has nothing to charge.
        if let Some(charged) = inner.own.get_mut(&fh) {
            *charged += more;
            inner.total = total;
        }
        Ok(())
    }

    /// After a write: `fh`'s own buffers now hold `own` bytes.
    pub(in crate::core) fn settle(&self, fh: u64, own: u64) {
        let mut inner = lock(&self.inner);
        let Some(charged) = inner.own.get_mut(&fh) else {
            return;
        };
        let now = own.saturating_add(HANDLE_OVERHEAD);
        let before = std::mem::replace(charged, now);
        inner.total = inner.total.saturating_sub(before).saturating_add(now);
    }

    /// A handle moves from text `old` to the longer `new` (a transcript
    /// page that grew): false, and nothing changes, past the cap.
    pub(in crate::core) fn repin(&self, old: usize, new: Pinned) -> bool {
        let mut inner = lock(&self.inner);
        let cost = if inner.texts.contains_key(&new.0) {
            0
        } else {
            new.1
        };
        if inner.total.saturating_add(cost) > self.max.saturating_sub(STATUS_RESERVE) {
            return false;
        }
        inner.total += cost;
        inner.texts.entry(new.0).or_insert((0, new.1)).0 += 1;
        unpin(&mut inner, old);
        true
    }

    /// Bytes held now (root `status`).
    pub(in crate::core) fn total(&self) -> u64 {
        lock(&self.inner).total
    }

    pub(in crate::core) fn max(&self) -> u64 {
        self.max
    }
}

fn unpin(inner: &mut Inner, addr: usize) {
    if let Some((count, len)) = inner.texts.get_mut(&addr) {
        *count -= 1;
        if *count == 0 {
            let len = *len;
            inner.texts.remove(&addr);
            inner.total = inner.total.saturating_sub(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_text_counts_once_and_is_freed_with_its_last_handle() {
        let held = HandleMemory::new(STATUS_RESERVE + 10_000);
        held.open(1, 0, Some((0x10, 4000)), false).unwrap();
        held.open(2, 0, Some((0x10, 4000)), false).unwrap();
        assert_eq!(held.total(), 4000 + 2 * HANDLE_OVERHEAD);
        let err = held.open(3, 0, Some((0x20, 6000)), false).unwrap_err();
        assert_eq!(err.errno, libc::ENOMEM, "{}", err.message);
        assert!(err.message.contains("AGENT_SESSIONS_OPEN_BYTES"));
        assert_eq!(held.total(), 4000 + 2 * HANDLE_OVERHEAD, "nothing charged");
        held.close(1, Some(0x10));
        assert_eq!(held.total(), 4000 + HANDLE_OVERHEAD, "still pinned by 2");
        held.close(2, Some(0x10));
        assert_eq!(held.total(), 0);
        held.open(4, 0, Some((0x30, 9000)), false).unwrap();
        let err = held.open(5, 2000, None, false).unwrap_err();
        assert_eq!(err.errno, libc::ENOMEM);
        held.open(5, 2000, None, true)
            .expect("a status may use the reserve");
        held.close(4, Some(0x30));
        held.close(5, None);
        held.open(3, 0, Some((0x20, 6000)), false).unwrap();
    }

    #[test]
    fn writes_reserve_before_they_buffer_and_settle_after() {
        let held = HandleMemory::new(STATUS_RESERVE + 3000);
        held.open(1, 0, None, false).unwrap();
        held.reserve(1, 2000).unwrap();
        held.settle(1, 1500);
        assert_eq!(held.total(), 1500 + HANDLE_OVERHEAD);
        let err = held.reserve(1, 2000).unwrap_err();
        assert_eq!(err.errno, libc::ENOSPC);
        assert_eq!(held.total(), 1500 + HANDLE_OVERHEAD);
        held.close(1, None);
        assert_eq!(held.total(), 0);
    }

    #[test]
    fn a_page_that_grows_moves_to_its_new_text_within_the_cap() {
        let held = HandleMemory::new(STATUS_RESERVE + 5000);
        held.open(1, 0, Some((0x10, 1000)), false).unwrap();
        assert!(held.repin(0x10, (0x20, 2000)));
        assert_eq!(held.total(), 2000 + HANDLE_OVERHEAD);
        assert!(!held.repin(0x20, (0x30, 4900)), "past the cap: kept");
        assert_eq!(held.total(), 2000 + HANDLE_OVERHEAD);
        held.close(1, Some(0x20));
        assert_eq!(held.total(), 0);
    }
}
