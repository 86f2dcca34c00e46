//! What an archived session without a transcript showed. A shell's ring is
//! its only history: archiving frees the ring with the runtime, but first
//! keeps its bytes, compressed, beside the archived record, where
//! `archived/KEY/scrollback` reads them. Unarchiving starts a clean ring
//! and drops the copy.

use crate::atomic::{self, Durability};
use crate::core::Core;
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::terminal::ring::Scrollback;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// How hard the copy is compressed: fast, as terminal output packs well.
const LEVEL: i32 = 3;

impl Core {
    /// Where an archived session's scrollback is kept.
    fn archived_scrollback_path(&self, key: &SessionKey) -> PathBuf {
        self.config
            .state_dir
            .join("archived-scrollback")
            .join(key.engine())
            .join(format!("{}.zst", key.id()))
    }

    /// Whether archiving `key` must keep its ring: its engine keeps no
    /// transcript of its own.
    pub(in crate::core) fn ring_is_history(&self, key: &SessionKey) -> bool {
        key.engine() != crate::core::HOSTED && self.catalog.kind_of(key.engine()).is_none()
    }

    /// Keeps what `ring` holds for the archived session `key`; the copy is
    /// whole or absent (written aside, then renamed).
    pub(in crate::core) fn keep_archived_scrollback(
        &self,
        key: &SessionKey,
        ring: &Scrollback,
    ) -> Result<()> {
        let path = self.archived_scrollback_path(key);
        let bytes = ring.snapshot();
        if bytes.is_empty() {
            return self.drop_archived_scrollback(key);
        }
        let dir = path.parent().unwrap_or(&path);
        crate::config::make_private_dir(dir)?;
        // Not synced, as the ring it copies is not (that outlives the
        // daemon, not the machine); the disk's writeback keeps it soon.
        let written =
            atomic::write_with(&path, atomic::CREATE_MODE, Durability::Unsynced, |file| {
                let mut encoder = zstd::stream::write::Encoder::new(file, LEVEL)?;
                encoder.set_pledged_src_size(Some(bytes.len() as u64))?;
                encoder.include_contentsize(true)?;
                encoder.write_all(&bytes)?;
                encoder.finish().map(drop)
            });
        written.map_err(|e| Error::io(&format!("cannot keep the scrollback of {key}"), &e))
    }

    /// Forgets the kept copy (unarchived: the session starts a clean ring).
    pub(in crate::core) fn drop_archived_scrollback(&self, key: &SessionKey) -> Result<()> {
        match std::fs::remove_file(self.archived_scrollback_path(key)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(
                &format!("cannot drop the kept scrollback of {key}"),
                &e,
            )),
            _ => Ok(()),
        }
    }

    /// The archived session's kept scrollback as a ring of its own, if it
    /// has one: at most the ring's cap is read back.
    pub(in crate::core) fn archived_scrollback(&self, key: &SessionKey) -> Option<Arc<Scrollback>> {
        if !self.is_archived(key) {
            return None;
        }
        let file = std::fs::File::open(self.archived_scrollback_path(key)).ok()?;
        let cap = self.config.scrollback_bytes as usize;
        let mut bytes = Vec::new();
        let read = zstd::stream::read::Decoder::new(file)
            .and_then(|d| d.take(cap as u64 + 1).read_to_end(&mut bytes));
        if let Err(e) = read {
            log::warn!("{key}: cannot read its kept scrollback: {e}");
            return None;
        }
        let ring = Scrollback::new(cap);
        ring.append(&bytes);
        Some(Arc::new(ring))
    }

    /// The kept scrollback's length, from the copy's own header.
    pub(in crate::core) fn archived_scrollback_len(&self, key: &SessionKey) -> Option<u64> {
        if !self.is_archived(key) {
            return None;
        }
        let mut head = [0u8; 18];
        let mut file = std::fs::File::open(self.archived_scrollback_path(key)).ok()?;
        let n = file.read(&mut head).ok()?;
        match zstd::zstd_safe::get_frame_content_size(&head[..n]) {
            Ok(Some(len)) => Some(len.min(self.config.scrollback_bytes)),
            _ => None,
        }
    }
}
