//! Times as milliseconds since the Unix epoch, the form records, events
//! and listings keep them in.

use std::fs::Metadata;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// `t` in milliseconds since the epoch; `None` for a time before it.
pub fn epoch_ms(t: SystemTime) -> Option<u64> {
    t.duration_since(UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
}

/// Now, in milliseconds since the epoch (0 on a clock set before it).
pub fn now_ms() -> u64 {
    epoch_ms(SystemTime::now()).unwrap_or(0)
}

/// The modification time in `meta`, in milliseconds since the epoch (0
/// when the filesystem gives none, or one before the epoch).
pub fn mtime_ms(meta: &Metadata) -> u64 {
    meta.modified().ok().and_then(epoch_ms).unwrap_or(0)
}

/// The modification time of `path` (links followed), in milliseconds since
/// the epoch; `None` when it cannot be read or is before the epoch.
pub fn path_mtime_ms(path: &Path) -> Option<u64> {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(epoch_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_whole_milliseconds_since_the_epoch() {
        let t = UNIX_EPOCH + Duration::from_micros(1_500_999);
        assert_eq!(epoch_ms(t), Some(1_500));
        assert_eq!(epoch_ms(UNIX_EPOCH - Duration::from_secs(1)), None);
        assert!(now_ms() > 1_600_000_000_000);
    }

    #[test]
    fn a_file_s_mtime_in_milliseconds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = std::fs::File::create(&path).unwrap();
        file.set_modified(UNIX_EPOCH + Duration::from_millis(1_234_567))
            .unwrap();
        assert_eq!(mtime_ms(&file.metadata().unwrap()), 1_234_567);
        assert_eq!(path_mtime_ms(&path), Some(1_234_567));
        assert_eq!(path_mtime_ms(&dir.path().join("gone")), None);

        file.set_modified(UNIX_EPOCH - Duration::from_secs(10))
            .unwrap();
        assert_eq!(mtime_ms(&file.metadata().unwrap()), 0, "before the epoch");
        assert_eq!(path_mtime_ms(&path), None);
    }
}
