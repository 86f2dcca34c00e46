//! Text made of shared pieces, read as one file: a generated document tens
//! of megabytes long (`sessions.json` at 100,000 sessions) whose parts are
//! kept between versions, so a new version costs the parts that changed
//! and never a second copy of the whole.

use std::sync::Arc;

/// One version of a document: its pieces in order, where each ends, and a
/// digest that changes whenever the text does.
#[derive(Debug, Default)]
pub struct PiecedText {
    pieces: Vec<Arc<[u8]>>,
    /// `ends[i]`: the offset just past piece `i`.
    ends: Vec<u64>,
    digest: u64,
}

impl PiecedText {
    /// The text `pieces` joined; `digest` must differ for different texts
    /// (the builder knows what each piece was made from, so it need not
    /// read the bytes again).
    pub fn new(pieces: Vec<Arc<[u8]>>, digest: u64) -> PiecedText {
        let mut end = 0u64;
        let ends = pieces
            .iter()
            .map(|p| {
                end += p.len() as u64;
                end
            })
            .collect();
        PiecedText {
            pieces,
            ends,
            digest,
        }
    }

    pub fn len(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Appends to `out` up to `size` bytes from `offset` (none past the end).
    pub fn read_into(&self, offset: u64, size: usize, out: &mut Vec<u8>) {
        let end = offset.saturating_add(size as u64).min(self.len());
        if offset >= end {
            return;
        }
        out.reserve((end - offset) as usize);
        // The first piece that ends past `offset`.
        let mut i = self.ends.partition_point(|&e| e <= offset);
        let mut at = offset;
        while at < end && i < self.pieces.len() {
            let start = self.ends[i] - self.pieces[i].len() as u64;
            let from = (at - start) as usize;
            let to = (end.min(self.ends[i]) - start) as usize;
            out.extend_from_slice(&self.pieces[i][from..to]);
            at = start + to as u64;
            i += 1;
        }
    }

    /// The whole text in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.read_into(0, self.len() as usize, &mut out);
        out
    }

    /// Bytes the pieces take, counted once however many versions share them.
    pub fn bytes(&self) -> u64 {
        self.len() + (self.pieces.capacity() * 16 + self.ends.capacity() * 8) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(parts: &[&[u8]]) -> PiecedText {
        PiecedText::new(parts.iter().map(|p| Arc::from(*p)).collect(), 7)
    }

    #[test]
    fn an_empty_text_reads_nothing() {
        let t = text(&[]);
        let mut out = Vec::new();
        t.read_into(0, 10, &mut out);
        assert!(out.is_empty() && t.is_empty());
        let t = text(&[b"", b""]);
        t.read_into(0, 10, &mut out);
        assert!(out.is_empty());
    }

    proptest! {
        /// Any read of the pieces is the same read of the text joined.
        #[test]
        fn a_read_is_a_slice_of_the_joined_text(
            parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..9), 0..12),
            offset in 0u64..80,
            size in 0usize..80,
        ) {
            let joined: Vec<u8> = parts.concat();
            let t = PiecedText::new(parts.iter().map(|p| Arc::from(p.as_slice())).collect(), 0);
            prop_assert_eq!(t.len(), joined.len() as u64);
            let mut out = b"kept".to_vec();
            t.read_into(offset, size, &mut out);
            let start = (offset as usize).min(joined.len());
            let end = (start + size).min(joined.len());
            prop_assert_eq!(&out[..4], b"kept");
            prop_assert_eq!(&out[4..], &joined[start..end]);
        }
    }
}
