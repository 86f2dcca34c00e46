//! The size caps of writable files, checked at `truncate` before anything
//! grows (the `write` paths check theirs where they buffer). Past a cap:
//! EFBIG, and nothing changes.

use super::inode::{Node, RootFile, SessionFile};
use super::SessionFs;
use crate::core::{scratch, META_FILE_MAX};
use crate::error::{Error, Result};
use crate::slots::{MAX_SLOT_RECORD_BYTES, MAX_TRANSCRIPT_BYTES};

impl SessionFs {
    /// Refuses `truncate -s size` past the node's cap. Streams (`input`,
    /// `ctl`, `agent-transcripts/run`) hold nothing: only 0 is a size.
    pub(super) fn check_size(&self, node: &Node, size: u64) -> Result<()> {
        let (cap, what) = match node {
            Node::Session(key, SessionFile::Meta) => (META_FILE_MAX, format!("{key}/meta.json")),
            Node::Session(key, SessionFile::Field(f)) => {
                (META_FILE_MAX, format!("{key}/{}", f.name()))
            }
            Node::Scratch(key, name) => (scratch::FILE_MAX, format!("scratch file {key}/{name}")),
            Node::Session(key, f @ (SessionFile::Input | SessionFile::Ctl)) => {
                (0, format!("{key}/{} (a stream)", f.name()))
            }
            Node::RootFile(RootFile::Ctl) => (0, "ctl (a stream)".to_string()),
            Node::RunFile => (0, "agent-transcripts/run (a stream)".to_string()),
            Node::Slot(world, slot) => {
                (MAX_SLOT_RECORD_BYTES, format!("slot record {world}/{slot}"))
            }
            Node::HostedFile(id) => (MAX_TRANSCRIPT_BYTES, format!("transcript {id}.jsonl")),
            // Not writable: refused as such by the caller.
            _ => return Ok(()),
        };
        if size <= cap {
            return Ok(());
        }
        let err = Error::too_big(&format!("truncate of {what}"), size, cap);
        Err(match node {
            Node::Session(key, _) | Node::Scratch(key, _) => self.core.record_refusal(key, err),
            _ => {
                log::warn!("{}", err.message);
                err
            }
        })
    }
}
