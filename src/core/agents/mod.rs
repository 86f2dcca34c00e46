//! Agents: each session's agent (state, prompts typed, ticks), the answers
//! to its dialogs, a prompt's close, blocked `wait` reads, a shell's
//! foreground job, and new conversations announced on the root `events`.

pub(in crate::core) mod answers;
pub(in crate::core) mod discoveries;
pub(in crate::core) mod prompt_close;
pub(in crate::core) mod session_agent;
pub(in crate::core) mod shell_line;
pub(in crate::core) mod waits;
