//! Where a session's socket, run record and lock live.

use crate::hashing::fnv1a;
use crate::key::SessionKey;
use std::path::{Path, PathBuf};

/// A unix socket path must fit in `sockaddr_un.sun_path` (108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;

#[derive(Debug, Clone)]
pub struct RuntimePaths {
    pub runtime_dir: PathBuf,
    pub lock_dir: PathBuf,
}

impl RuntimePaths {
    pub fn new(runtime_dir: &Path, lock_dir: &Path) -> Self {
        RuntimePaths {
            runtime_dir: runtime_dir.to_path_buf(),
            lock_dir: lock_dir.to_path_buf(),
        }
    }

    /// The file stem used for a key's socket and run record: the key itself
    /// when the socket path fits, else a hash (the run record names the key).
    fn stem(&self, key: &SessionKey) -> String {
        if self.stem_is_key(key) {
            key.to_string()
        } else {
            // A stable hash: a later daemon finds the same socket.
            format!("h-{:016x}", fnv1a(key.as_str().as_bytes()))
        }
    }

    /// Whether the key's socket and run record are named by the key itself
    /// (not by a hash of it).
    pub fn stem_is_key(&self, key: &SessionKey) -> bool {
        self.runtime_dir.as_os_str().len() + 1 + key.as_str().len() + ".sock".len()
            <= MAX_SOCKET_PATH
    }

    pub fn socket(&self, key: &SessionKey) -> PathBuf {
        self.runtime_dir.join(format!("{}.sock", self.stem(key)))
    }

    pub fn record(&self, key: &SessionKey) -> PathBuf {
        self.runtime_dir
            .join(format!("{}.run.json", self.stem(key)))
    }

    /// Where the session's scrollback ring is kept for the next daemon.
    pub fn ring(&self, key: &SessionKey) -> PathBuf {
        self.runtime_dir.join(format!("{}.ring", self.stem(key)))
    }

    pub fn lock(&self, key: &SessionKey) -> PathBuf {
        self.lock_dir.join(format!("{key}.lock"))
    }

    /// Makes the runtime and lock directories again, private, if they are
    /// gone (a cleaner removed them under a running daemon).
    pub fn ensure_dirs(&self) -> crate::error::Result<()> {
        crate::config::make_private_dir(&self.runtime_dir)?;
        crate::config::make_private_dir(&self.lock_dir)
    }

    /// Whether the runtime directory is short enough for any socket at all.
    pub fn socket_dir_usable(&self) -> bool {
        self.runtime_dir.as_os_str().len() + 1 + "h-0123456789abcdef.sock".len() <= MAX_SOCKET_PATH
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_keys_get_short_socket_names() {
        let p = RuntimePaths::new(Path::new("/run/user/1000/sessionfs"), Path::new("/l"));
        let short = SessionKey::parse("shell:build").unwrap();
        assert_eq!(
            p.socket(&short),
            PathBuf::from("/run/user/1000/sessionfs/shell:build.sock")
        );
        let long = SessionKey::parse(&format!("shell:{}", "a".repeat(128))).unwrap();
        let sock = p.socket(&long);
        assert!(sock.as_os_str().len() <= MAX_SOCKET_PATH);
        assert_eq!(sock, p.socket(&long));
        // The name a daemon of any earlier build gave it.
        assert_eq!(
            sock,
            PathBuf::from("/run/user/1000/sessionfs/h-1e00aeec4d15c001.sock")
        );
        assert_ne!(
            sock,
            p.socket(&SessionKey::parse(&format!("shell:{}", "b".repeat(128))).unwrap())
        );
        assert_eq!(
            p.lock(&long),
            PathBuf::from(format!("/l/shell:{}.lock", "a".repeat(128)))
        );
    }
}
