//! One error type for every operation: an errno for the kernel, a reason
//! in words for the user (a session's `status.error`) and the log, the
//! error from below it wraps, and how loud it is in the log.
//!
//! A refusal is recorded once, by `Core::record`, which logs it at its
//! level and puts it where its user reads it; the error remembers that, so
//! a caller that adds its context and records again updates the text the
//! user reads without a second line in the log.

use std::fmt;
use std::sync::Arc;

/// What an [`Error`] wraps: the failure from below it.
pub type Source = Arc<dyn std::error::Error + Send + Sync>;

/// An operation's failure: what errno the caller sees and why, in words.
#[derive(Debug, Clone)]
pub struct Error {
    pub errno: i32,
    pub message: String,
    source: Option<Source>,
    level: log::Level,
    /// Logged and put in a status already (see `Core::record`).
    recorded: bool,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A refusal of what the user asked: a warning when recorded.
    pub fn new(errno: i32, message: impl Into<String>) -> Self {
        Error {
            errno,
            message: message.into(),
            source: None,
            level: log::Level::Warn,
            recorded: false,
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
    /// A system call failed: its errno (EIO when it has none), `context`
    /// and its reason, and `err` as the source. A fault of the disk or of
    /// the daemon itself (see [`is_fault`]) is an error in the log, not a
    /// warning.
    pub fn io(context: &str, err: &std::io::Error) -> Self {
        let errno = err.raw_os_error().unwrap_or(libc::EIO);
        // An OS error is its code; another is copied in kind and words.
        let copy = match err.raw_os_error() {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => std::io::Error::new(err.kind(), err.to_string()),
        };
        let level = if is_fault(errno) {
            log::Level::Error
        } else {
            log::Level::Warn
        };
        Self::new(errno, format!("{context}: {err}"))
            .with_source(copy)
            .at_level(level)
    }

    /// The same failure as seen by a caller: `what: ` before the reason.
    pub fn with_context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// How loud it is in the log when recorded: `Warn` (the default) for a
    /// refusal of what the user asked, `Error` for a fault of the daemon or
    /// the disk, `Debug` for a failure that tells the user nothing (it is
    /// then only logged, never put in a status).
    pub fn at_level(mut self, level: log::Level) -> Self {
        self.level = level;
        self
    }

    /// Keeps `source` as the failure this one wraps.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    pub fn level(&self) -> log::Level {
        self.level
    }

    /// Marks it recorded; whether it was already.
    pub(crate) fn mark_recorded(&mut self) -> bool {
        std::mem::replace(&mut self.recorded, true)
    }
}

/// Whether `errno` from a system call is a fault of the disk or of the
/// daemon rather than a refusal of what was asked.
pub fn is_fault(errno: i32) -> bool {
    matches!(
        errno,
        libc::EIO
            | libc::ENOSPC
            | libc::EDQUOT
            | libc::EROFS
            | libc::ENOMEM
            | libc::EMFILE
            | libc::ENFILE
            | libc::EBADF
            | libc::EFAULT
            | libc::EUCLEAN
            | libc::ESTALE
            | libc::ENODEV
            | libc::ENXIO
    )
}

/// Errors are the same failure when they have the same errno and reason,
/// whatever they wrap and however they were logged.
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.errno == other.errno && self.message == other.message
    }
}

impl Eq for Error {}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (errno {})", self.message, self.errno)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn an_io_error_is_kept_as_the_source() {
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let e = Error::io("open meta.json", &io);
        assert_eq!(e.errno, libc::ENOENT);
        let source = e.source().expect("a source");
        let source = source.downcast_ref::<std::io::Error>().unwrap();
        assert_eq!(source.raw_os_error(), Some(libc::ENOENT));
        // Context added above keeps it.
        let e = e.with_context("rename x -> meta.json");
        assert!(e.source().is_some());
        assert_eq!(
            e.message,
            format!("rename x -> meta.json: open meta.json: {io}")
        );

        let custom = std::io::Error::new(std::io::ErrorKind::InvalidData, "bad bytes");
        let e = Error::io("read", &custom);
        assert_eq!(e.errno, libc::EIO);
        assert_eq!(e.source().unwrap().to_string(), "bad bytes");

        let json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let e = Error::invalid(format!("not JSON: {json}")).with_source(json);
        assert!(e.source().unwrap().is::<serde_json::Error>());
        assert!(Error::invalid("x").source().is_none());
    }

    #[test]
    fn faults_of_the_disk_are_errors_and_refusals_warnings() {
        let level = |errno| Error::io("write", &std::io::Error::from_raw_os_error(errno)).level();
        for errno in [libc::EIO, libc::ENOSPC, libc::EDQUOT, libc::EROFS] {
            assert_eq!(level(errno), log::Level::Error, "errno {errno}");
        }
        for errno in [libc::ENOENT, libc::EACCES, libc::EEXIST, libc::ENOTDIR] {
            assert_eq!(level(errno), log::Level::Warn, "errno {errno}");
        }
        let custom = std::io::Error::other("no code");
        assert_eq!(Error::io("read", &custom).level(), log::Level::Error);
        assert_eq!(Error::invalid("x").level(), log::Level::Warn);
        assert_eq!(
            Error::invalid("x").at_level(log::Level::Debug).level(),
            log::Level::Debug
        );
    }

    #[test]
    fn equal_by_errno_and_reason_only() {
        let io = std::io::Error::from_raw_os_error(libc::EIO);
        let mut a = Error::io("x", &io);
        let b = Error::new(libc::EIO, format!("x: {io}"));
        assert!(!a.mark_recorded());
        assert!(a.mark_recorded());
        assert_eq!(a, b);
        assert_ne!(a, Error::new(libc::EINVAL, b.message.clone()));
        assert_eq!(a.clone().with_context("c").level(), log::Level::Error);
        assert_eq!(format!("{b}"), format!("x: {io} (errno {})", libc::EIO));
    }
}
