//! Times that mean something: each file's mtime is the time of the last
//! change of what it shows, steady while nothing changes, so `tar`, `rsync`
//! and editors can trust it.
//!
//! Where a source keeps its own time (a record's `changed_ms`, a store's
//! mtime, the ring's last append) that is used. Generated text with no
//! single source (`status`, `sessions.json`, the root's listing) is dated
//! by [`Stamps`]: the time its content was first seen to differ.

use crate::core::organize::members::Membership;
use crate::core::Core;
use crate::error::Result;
use crate::key::SessionKey;
use crate::pieced_text::PiecedText;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// At most this many nodes are remembered; past it the memory starts over
/// (each node is then dated by its source again).
const STAMPS_MAX: usize = 1 << 16;

pub(in crate::core) fn from_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// The time of what comes with the program (`README`, the root's `ctl`):
/// its binary's mtime, the same in every daemon of one build.
pub(in crate::core) fn program_time() -> Option<SystemTime> {
    std::env::current_exe()
        .and_then(std::fs::metadata)
        .and_then(|m| m.modified())
        .ok()
}

/// A digest of generated content (each part's length, then its bytes):
/// XXH3, as `sessions.json` is tens of MiB at 100,000 sessions and is
/// digested each time it changes.
pub(in crate::core) fn digest(parts: &[&[u8]]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for p in parts {
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.digest()
}

/// When each generated node's content last changed, as this daemon saw it.
#[derive(Debug, Default)]
pub(in crate::core) struct Stamps {
    seen: Mutex<HashMap<u64, (u64, SystemTime)>>,
    /// The `sessions.json` text last dated (weak: the listing cache owns
    /// it), so an unchanged listing is not hashed again.
    listing: Mutex<Option<(Weak<PiecedText>, SystemTime)>>,
}

impl Stamps {
    /// The time of node `ino` whose content now has `digest`: unchanged
    /// since last seen, its old time; changed, now; first seen, `first()`.
    pub(in crate::core) fn dated(
        &self,
        ino: u64,
        digest: u64,
        first: impl FnOnce() -> SystemTime,
    ) -> SystemTime {
        {
            let mut seen = crate::sync::lock(&self.seen);
            if let Some((d, at)) = seen.get(&ino).copied() {
                if d != digest {
                    let at = SystemTime::now().max(at);
                    seen.insert(ino, (digest, at));
                    return at;
                }
                return at;
            }
        }
        // The source is read with the map unlocked; a racing first sight
        // of the same node keeps the time stored first.
        let at = first();
        let mut seen = crate::sync::lock(&self.seen);
        if seen.len() >= STAMPS_MAX {
            seen.clear();
        }
        seen.entry(ino).or_insert((digest, at)).1
    }

    /// The time of `sessions.json` with text `text`.
    pub(in crate::core) fn listing(
        &self,
        ino: u64,
        text: &Arc<PiecedText>,
        first: impl FnOnce() -> SystemTime,
    ) -> SystemTime {
        self.by_version(&self.listing, ino, text, PiecedText::digest, first)
    }

    /// The time of the root's and the views' members.
    pub(in crate::core) fn members(
        &self,
        members: &Membership,
        first: impl FnOnce() -> SystemTime,
    ) -> SystemTime {
        self.dated(MEMBERS, members.digest(), first)
    }

    /// [`Stamps::dated`] for content kept in an `Arc` by a cache: the same
    /// version is not digested again.
    fn by_version<T>(
        &self,
        slot: &Mutex<Option<(Weak<T>, SystemTime)>>,
        ino: u64,
        version: &Arc<T>,
        digest_of: impl FnOnce(&T) -> u64,
        first: impl FnOnce() -> SystemTime,
    ) -> SystemTime {
        if let Some((weak, at)) = &*crate::sync::lock(slot) {
            if Weak::ptr_eq(weak, &Arc::downgrade(version)) {
                return *at;
            }
        }
        let at = self.dated(ino, digest_of(version), first);
        *crate::sync::lock(slot) = Some((Arc::downgrade(version), at));
        at
    }
}

/// Where [`Stamps`] keeps the members' time (no inode has this number).
const MEMBERS: u64 = u64::MAX;

impl Core {
    /// When this session's record last changed (its title, project,
    /// favourite, archive, workspace, conversation), else when it was made;
    /// a conversation found only in an engine's store: its last activity.
    pub fn meta_changed(&self, key: &SessionKey) -> SystemTime {
        let meta = self.meta(key);
        let ms = meta.changed_ms.max(meta.created_ms);
        if ms > 0 {
            return from_ms(ms);
        }
        from_ms(self.row(key).last_activity_ms)
    }

    /// When the session was made (its record's `created`), else its
    /// record's time: the time of `input` and `ctl`, which never change.
    pub fn created_at(&self, key: &SessionKey) -> SystemTime {
        match self.meta(key).created_ms {
            0 => self.meta_changed(key),
            ms => from_ms(ms),
        }
    }

    /// When the set of sessions (and what the views group them by) last
    /// changed: the time of the root and the views.
    pub(in crate::core) fn members_changed(&self, stamps: &Stamps) -> SystemTime {
        stamps.members(&self.membership(), || self.listing_changed())
    }

    /// The newest change of any session's record or of the record file:
    /// the first date given to `sessions.json`, the root and the views.
    /// With nothing recorded yet, the program's time (as `README`'s), not
    /// 1970.
    pub fn listing_changed(&self) -> SystemTime {
        let newest = self
            .rows(false)
            .iter()
            .map(|r| r.meta.changed_ms.max(r.created_ms).max(r.last_activity_ms))
            .max()
            .unwrap_or(0);
        let newest = from_ms(newest).max(self.meta_modified().min(SystemTime::now()));
        if newest > UNIX_EPOCH {
            return newest;
        }
        program_time().unwrap_or(UNIX_EPOCH)
    }

    /// The mtime of the session's conversation store (its transcript
    /// pages' time); the record's time while it has none.
    pub fn transcript_modified(&self, key: &SessionKey) -> Result<SystemTime> {
        let path = if key.engine() == crate::core::HOSTED {
            Some(self.records.slots.transcript_path(key.id()))
        } else {
            self.store_file(key).map(|f| f.path)
        };
        Ok(path
            .and_then(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
            .unwrap_or_else(|| self.meta_changed(key)))
    }

    /// When the session last wrote output (its `scrollback` and `screen`),
    /// else its record's time.
    pub fn output_changed(&self, key: &SessionKey) -> SystemTime {
        // A ring made by a `stat` or an `open` is no output.
        let rt = crate::sync::lock(&self.sessions.runtimes).get(key).cloned();
        match rt {
            Some(rt) if !rt.scrollback().is_empty() => rt.scrollback().last_append(),
            _ => self.meta_changed(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_keeps_its_time_until_its_content_differs() {
        let stamps = Stamps::default();
        let first = from_ms(1_000);
        assert_eq!(stamps.dated(7, digest(&[b"a"]), || first), first);
        assert_eq!(stamps.dated(7, digest(&[b"a"]), || from_ms(5)), first);
        let changed = stamps.dated(7, digest(&[b"b"]), || from_ms(5));
        assert!(changed > first);
        assert_eq!(stamps.dated(7, digest(&[b"b"]), || from_ms(5)), changed);
        // Another node is dated on its own.
        assert_eq!(stamps.dated(8, digest(&[b"a"]), || from_ms(9)), from_ms(9));
    }

    #[test]
    fn an_unchanged_listing_text_is_not_dated_again() {
        let stamps = Stamps::default();
        let text = |t: &[u8], digest| Arc::new(PiecedText::new(vec![Arc::from(t)], digest));
        let at = stamps.listing(1, &text(b"[]", 1), || from_ms(3));
        assert_eq!(at, from_ms(3));
        let same = text(b"[]", 1);
        assert_eq!(stamps.listing(1, &same, || from_ms(4)), at);
        let other = text(b"[1]", 2);
        assert!(stamps.listing(1, &other, || from_ms(4)) > at);
    }
}
