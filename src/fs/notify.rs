//! What the daemon tells the kernel about the entries it holds. fuser's
//! notifier sends what it knows (an entry dropped); the one notice it
//! lacks (`FUSE_EXPIRE_ONLY`: an entry marked stale but kept) is written
//! to the FUSE device here. Both sit behind [`EntryNotices`].

/// `FUSE_NOTIFY_INVAL_ENTRY`.
const NOTIFY_INVAL_ENTRY: i32 = 3;
/// `FUSE_EXPIRE_ONLY`: mark the entry stale, keep it hashed.
const EXPIRE_ONLY: u32 = 1;

/// The notification that expires entry `name` of directory `parent`:
/// `fuse_out_header` (length, the notify code in place of an error, unique
/// 0), then `fuse_notify_inval_entry_out` (parent, name length, flags),
/// then the name and a NUL.
fn expire_entry(parent: u64, name: &[u8]) -> Vec<u8> {
    let len = 16 + 16 + name.len() + 1;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&NOTIFY_INVAL_ENTRY.to_ne_bytes());
    m.extend_from_slice(&0u64.to_ne_bytes());
    m.extend_from_slice(&parent.to_ne_bytes());
    m.extend_from_slice(&(name.len() as u32).to_ne_bytes());
    m.extend_from_slice(&EXPIRE_ONLY.to_ne_bytes());
    m.extend_from_slice(name);
    m.push(0);
    m
}

/// The notices about entries the kernel holds.
pub trait EntryNotices: Send + 'static {
    /// Drops entry `name` of `parent`, and with it the inode unless
    /// something uses it.
    fn drop_entry(&mut self, parent: u64, name: &str);
    /// Marks entry `name` of `parent` stale: the next path walk through it
    /// asks again, while a descriptor open below it keeps working.
    fn expire_entry(&mut self, parent: u64, name: &str);
}

/// The notices sent to the mount's kernel.
pub struct KernelNotices {
    notifier: fuser::Notifier,
    /// A duplicate of the mount's `/dev/fuse` descriptor.
    device: std::fs::File,
}

impl KernelNotices {
    pub fn new(notifier: fuser::Notifier, device: std::os::fd::OwnedFd) -> Self {
        KernelNotices {
            notifier,
            device: device.into(),
        }
    }

    /// A second sender of the same notices (another thread's).
    pub fn try_clone(&self) -> std::io::Result<Self> {
        Ok(KernelNotices {
            notifier: self.notifier.clone(),
            device: self.device.try_clone()?,
        })
    }
}

/// ENOENT means the kernel held no such entry, which is fine.
fn sent(what: &str, name: &str, result: std::io::Result<()>) {
    match result {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => log::debug!("{what} of entry {name}: {e}"),
    }
}

impl EntryNotices for KernelNotices {
    fn drop_entry(&mut self, parent: u64, name: &str) {
        let result = self
            .notifier
            .inval_entry(fuser::INodeNo(parent), std::ffi::OsStr::new(name));
        sent("invalidation", name, result);
    }

    fn expire_entry(&mut self, parent: u64, name: &str) {
        use std::io::Write;
        let message = expire_entry(parent, name.as_bytes());
        let result = match self.device.write(&message) {
            Ok(n) if n == message.len() => Ok(()),
            Ok(n) => Err(std::io::Error::other(format!("short write of {n} bytes"))),
            Err(e) => Err(e),
        };
        sent("expiry", name, result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_laid_out_as_the_kernel_reads_it() {
        let m = expire_entry(0x42, b"abc");
        assert_eq!(m.len(), 36);
        assert_eq!(&m[0..4], &36u32.to_ne_bytes());
        assert_eq!(&m[4..8], &3i32.to_ne_bytes());
        assert_eq!(&m[8..16], &[0; 8]);
        assert_eq!(&m[16..24], &0x42u64.to_ne_bytes());
        assert_eq!(&m[24..28], &3u32.to_ne_bytes());
        assert_eq!(&m[28..32], &1u32.to_ne_bytes());
        assert_eq!(&m[32..], b"abc\0");
    }
}
