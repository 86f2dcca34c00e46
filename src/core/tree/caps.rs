//! The size caps of writable files, checked at `truncate` before anything
//! grows (the `write` paths check theirs where they buffer). Past a cap:
//! EFBIG, and nothing changes.

use crate::core::tree::node::{Cap, Node};
use crate::core::tree::requests::Files;
use crate::error::{Error, Result};

impl Files {
    /// Refuses `truncate -s size` past the node's cap (its row in the node
    /// table). Streams (`input`, `ctl`, `agent-transcripts/run`) hold
    /// nothing: only 0 is a size.
    pub(in crate::core) fn check_size(&self, node: &Node, size: u64) -> Result<()> {
        let (cap, what) = match node.row().cap {
            Cap::Bytes(cap) => (cap, node.label()),
            Cap::Stream => (0, format!("{} (a stream)", node.label())),
            // Not writable: refused as such by the caller.
            Cap::ReadOnly => return Ok(()),
        };
        if size <= cap {
            return Ok(());
        }
        // Recorded (status, log) once, by the caller.
        Err(Error::too_big(&what, size, cap))
    }
}
