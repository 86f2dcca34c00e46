//! The terminal pieces: the scrollback ring, the file it keeps its bytes
//! in, and the VT mirror behind `screen`.

pub mod ring;
pub mod ring_file;
pub mod vt_mirror;
