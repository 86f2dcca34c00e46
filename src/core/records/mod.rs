//! Records: the slot records of each world and the transcripts of hosted
//! runs, and the buffers their writes fill.

pub(in crate::core) mod buffers;
pub mod hosted;
pub mod slots;
