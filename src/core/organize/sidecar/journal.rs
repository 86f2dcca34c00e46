//! The sidecar on disk: a base file (`sidecar.json`, every record as of
//! its last compaction) and a journal beside it (`sidecar.journal`, one
//! JSON line per record changed since, the whole new record or `null` for
//! one removed). A change appends its lines and syncs them, so its cost
//! does not grow with the number of records; the journal is folded into
//! the base when it has grown past the base's size.
//!
//! Each line holds a whole record, so replaying a line twice changes
//! nothing: a crash between installing a new base and emptying the
//! journal leaves a journal whose lines the base already holds.

use super::SessionMeta;
use crate::atomic::sync_parent;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Identity and size of a file, to notice another process's writes.
pub(super) type Stamp = Option<FileStamp>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileStamp {
    pub ino: u64,
    pub mtime: i64,
    pub mtime_nsec: i64,
    pub size: u64,
}

pub(super) fn stamp(path: &Path) -> Stamp {
    std::fs::metadata(path).ok().map(|m| FileStamp {
        ino: m.ino(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
        size: m.size(),
    })
}

/// The base file's layout.
#[derive(Debug, Default, Serialize, Deserialize)]
struct BaseFile {
    #[serde(default)]
    sessions: BTreeMap<String, SessionMeta>,
}

/// One journal line: a record as it now is, `None` once removed.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Line {
    pub key: String,
    pub meta: Option<SessionMeta>,
}

/// Reads the base file; a missing one holds nothing.
pub(super) fn read_base(path: &Path) -> Result<BTreeMap<String, SessionMeta>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice::<BaseFile>(&bytes)
            .map(|f| f.sessions)
            .map_err(|e| format!("{} is damaged: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// What a read of the journal from an offset found.
#[derive(Debug, Default)]
pub(super) struct Tail {
    pub lines: Vec<Line>,
    /// Bytes of whole lines read: the next read starts after them. A last
    /// line without its newline is being written (or was torn by a crash)
    /// and is not counted.
    pub consumed: u64,
    /// The journal's inode, `None` when there is no journal.
    pub ino: Option<u64>,
}

/// Reads the journal's whole lines from `from`.
pub(super) fn read_tail(path: &Path, from: u64) -> Result<Tail, String> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Tail::default()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let failed = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let ino = file.metadata().map_err(failed)?.ino();
    file.seek(SeekFrom::Start(from)).map_err(failed)?;
    let mut bytes = Vec::new();
    // Bounded by the compaction, which folds the journal once it is bigger
    // than the base.
    file.read_to_end(&mut bytes).map_err(failed)?;
    let whole = memchr::memrchr(b'\n', &bytes).map_or(0, |at| at + 1);
    let mut lines = Vec::new();
    for (n, text) in bytes[..whole].split(|b| *b == b'\n').enumerate() {
        if text.is_empty() {
            continue;
        }
        let line = serde_json::from_slice::<Line>(text).map_err(|e| {
            format!(
                "{} is damaged (line {} after byte {from}): {e}",
                path.display(),
                n + 1
            )
        })?;
        lines.push(line);
    }
    Ok(Tail {
        lines,
        consumed: whole as u64,
        ino: Some(ino),
    })
}

/// The lines for `changes`, ready to append.
pub(super) fn encode(changes: &super::Written) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (key, meta) in changes {
        let line = Line {
            key: key.clone(),
            meta: meta.clone(),
        };
        serde_json::to_writer(&mut bytes, &line).expect("a journal line serialises");
        bytes.push(b'\n');
    }
    bytes
}

fn open_journal(path: &Path) -> std::io::Result<(File, bool)> {
    let existed = path.exists();
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    Ok((file, !existed))
}

/// Appends `bytes` at `at` (where the last whole line ends: anything after
/// it is a line a crash tore, cut first) and syncs them. Returns where the
/// journal now ends and its stamp. On failure the journal is cut back to
/// `at`, so no part of a line is left.
pub(super) fn append(path: &Path, at: u64, bytes: &[u8]) -> std::io::Result<(u64, Stamp)> {
    let (file, made) = open_journal(path)?;
    if file.metadata()?.len() != at {
        file.set_len(at)?;
    }
    let written = (&file)
        .write_all(bytes)
        .and_then(|()| file.sync_data())
        .and_then(|()| if made { sync_parent(path) } else { Ok(()) });
    if let Err(e) = written {
        let _ = file.set_len(at);
        return Err(e);
    }
    let end = at + bytes.len() as u64;
    Ok((end, stamp(path)))
}

/// Reserves room for `len` more bytes at the journal's end, so that an
/// append of that size cannot fail for want of space. A filesystem that
/// cannot reserve says so; the append is tried all the same.
pub(super) fn reserve(path: &Path, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (file, made) = open_journal(path)?;
    if made {
        sync_parent(path)?;
    }
    let end = file.metadata()?.len();
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(end), libc::off_t::try_from(len)) else {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    };
    // SAFETY: fallocate on a descriptor this function owns; KEEP_SIZE
    // leaves the file's length (and so its content) as it was.
    let done = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len.max(1),
        )
    };
    if done == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
        _ => Err(e),
    }
}

/// Writes `sessions` as the new base and empties the journal, each by a
/// synced temporary file renamed into place. Returns the new stamps.
pub(super) fn compact(
    base: &Path,
    journal: &Path,
    sessions: BTreeMap<String, SessionMeta>,
) -> std::io::Result<(Stamp, Stamp)> {
    let body = serde_json::to_vec_pretty(&BaseFile { sessions }).expect("the sidecar serialises");
    crate::atomic::replace(base, &body)?;
    // The base holds every line now: a crash before this leaves a journal
    // whose lines change nothing when replayed.
    crate::atomic::replace(journal, b"")?;
    Ok((stamp(base), stamp(journal)))
}
