//! How a verb ends: the exit codes a script can branch on, and a failure's
//! message and code.

/// Exit codes, as documented in the README.
pub mod code {
    /// Every session named is idle (or the command was taken).
    pub const IDLE: u8 = 0;
    /// Refused: the reason is on stderr, from the session's `status.error`.
    pub const REFUSED: u8 = 1;
    /// A usage error.
    pub const USAGE: u8 = 2;
    /// The agent waits for an answer.
    pub const WAITING: u8 = 4;
    /// Stopped, or exited.
    pub const STOPPED: u8 = 5;
    /// The timeout passed first.
    pub const TIMED_OUT: u8 = 124;
}

/// Why a verb failed: what to print and the exit code.
#[derive(Debug)]
pub struct Failed {
    pub message: String,
    pub code: u8,
}

/// A refusal (exit 1).
pub(super) fn refused(message: String) -> Failed {
    Failed {
        message,
        code: code::REFUSED,
    }
}

/// A usage error (exit 2).
pub(super) fn usage(message: String) -> Failed {
    Failed {
        message,
        code: code::USAGE,
    }
}
