//! Agents' own conversations: parsers, turn index, console renderer (SPEC §7).
