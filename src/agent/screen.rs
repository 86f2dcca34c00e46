//! The screen fallback: a verdict from the text of the VT mirror's screen.
