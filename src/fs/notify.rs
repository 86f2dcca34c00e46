//! The kernel notifications the daemon writes to the FUSE device itself.

/// `FUSE_NOTIFY_INVAL_ENTRY`.
const NOTIFY_INVAL_ENTRY: i32 = 3;
/// `FUSE_EXPIRE_ONLY`: mark the entry stale, keep it hashed.
const EXPIRE_ONLY: u32 = 1;

/// What the kernel does with an entry it is told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Inval {
    /// Marks it stale: the next path walk through it asks again.
    ExpireOnly,
    /// Drops it, and with it the inode unless something uses it.
    Drop,
}

/// The notification about entry `name` of directory `parent`:
/// `fuse_out_header` (length, the notify code in place of an error, unique
/// 0), then `fuse_notify_inval_entry_out` (parent, name length, flags),
/// then the name and a NUL.
pub(super) fn inval_entry(parent: u64, name: &[u8], how: Inval) -> Vec<u8> {
    let len = 16 + 16 + name.len() + 1;
    let flags = match how {
        Inval::ExpireOnly => EXPIRE_ONLY,
        Inval::Drop => 0,
    };
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&NOTIFY_INVAL_ENTRY.to_ne_bytes());
    m.extend_from_slice(&0u64.to_ne_bytes());
    m.extend_from_slice(&parent.to_ne_bytes());
    m.extend_from_slice(&(name.len() as u32).to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(name);
    m.push(0);
    m
}

/// Tells the kernel through `device` (the mount's `/dev/fuse`) what to do
/// with entry `name` of `parent`. One write is one message; ENOENT means
/// the kernel held no such entry, which is fine.
pub(super) fn write_inval(device: &mut std::fs::File, parent: u64, name: &str, how: Inval) {
    use std::io::Write;
    let message = inval_entry(parent, name.as_bytes(), how);
    match device.write(&message) {
        Ok(n) if n == message.len() => {}
        Ok(n) => log::debug!("entry invalidation: short write of {n} bytes"),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => log::debug!("entry invalidation of {name}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_laid_out_as_the_kernel_reads_it() {
        let m = inval_entry(0x42, b"abc", Inval::ExpireOnly);
        assert_eq!(m.len(), 36);
        assert_eq!(&m[0..4], &36u32.to_ne_bytes());
        assert_eq!(&m[4..8], &3i32.to_ne_bytes());
        assert_eq!(&m[8..16], &[0; 8]);
        assert_eq!(&m[16..24], &0x42u64.to_ne_bytes());
        assert_eq!(&m[24..28], &3u32.to_ne_bytes());
        assert_eq!(&m[28..32], &1u32.to_ne_bytes());
        assert_eq!(&m[32..], b"abc\0");
        let m = inval_entry(0x42, b"abc", Inval::Drop);
        assert_eq!(&m[28..32], &0u32.to_ne_bytes());
    }
}
