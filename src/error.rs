//! One error type for every operation: an errno for the kernel and a reason
//! in words for the user (a session's `status.error`) and the log.

use std::fmt;

/// An operation's failure: what errno the caller sees and why, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub errno: i32,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(errno: i32, message: impl Into<String>) -> Self {
        Error {
            errno,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(libc::EINVAL, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(libc::ENOENT, message)
    }
    pub fn access(message: impl Into<String>) -> Self {
        Self::new(libc::EACCES, message)
    }
    pub fn busy(message: impl Into<String>) -> Self {
        Self::new(libc::EBUSY, message)
    }
    pub fn perm(message: impl Into<String>) -> Self {
        Self::new(libc::EPERM, message)
    }
    /// EFBIG: `what` would reach `end` bytes, past its cap of `cap`.
    pub fn too_big(what: &str, end: u64, cap: u64) -> Self {
        Self::new(
            libc::EFBIG,
            format!("{what}: {end} bytes is over its limit of {cap} bytes"),
        )
    }
    pub fn io(context: &str, err: &std::io::Error) -> Self {
        Self::new(
            err.raw_os_error().unwrap_or(libc::EIO),
            format!("{context}: {err}"),
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (errno {})", self.message, self.errno)
    }
}

impl std::error::Error for Error {}
