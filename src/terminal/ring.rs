//! The scrollback ring (SPEC §5).
//!
//! Every byte a session's PTY ever produced has a stream offset; the ring
//! holds the newest of them, `[start, total)`, at most `cap` bytes. Readers
//! see it through a [`View`], which maps a file offset to a stream offset so
//! that one open file handle stays self-consistent while old bytes are
//! evicted under it.
//!
//! The bytes live in a [`RingFile`]: a session's is kept in the runtime
//! directory, so the next daemon shows what this one did. A byte is shown
//! to readers only once the file holds it.

use crate::sync::lock;
use crate::terminal::ring_file::{Bounds, Opened, RingFile};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

/// Eviction drops whole chunks of this size, so the header that says what
/// is held is rewritten once a chunk, not at every append.
pub const CHUNK_SIZE: usize = 16 * 1024;

/// One session's replay ring, shared as `Arc<Scrollback>` between the PTY
/// reader thread and the FUSE handlers.
pub struct Scrollback {
    cap: usize,
    chunk: usize,
    /// Where the ring is kept for the next daemon, and whose it is.
    keep: Option<Keep>,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Keep {
    path: PathBuf,
    key: String,
}

struct Inner {
    start: u64,
    total: u64,
    last_append: SystemTime,
    /// The bytes; `None` until the first is written (or the kept file was
    /// looked for, see `looked`).
    store: Option<RingFile>,
    /// The kept file has been looked for: a ring is opened on first use,
    /// not when its session's runtime is made.
    looked: bool,
    /// Why bytes could not be kept, said once in the log.
    failed: bool,
    /// Who asked to hear of the next output (`poll` on a caught-up handle).
    wakers: Vec<Waker>,
}

/// Called once, after the next append, outside the ring's lock.
pub type Waker = Box<dyn FnOnce() + Send>;

/// Pending wakers a ring keeps; past this, `poll` says "ready" at once and
/// the caller's read finds out.
const MAX_WAKERS: usize = 4096;

/// One file handle's window on the stream: file offset `x` is stream offset
/// `base + x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    base: u64,
    /// The file offset the handle's last read ended at: `poll` is ready
    /// when there is more than that.
    read_to: u64,
    /// Reads in a row that found nothing at `read_to`: a reader asking
    /// again at the end is following the output.
    dry: u8,
    /// The handle has followed the output before (two dry reads in a row):
    /// from then on its first read at the end counts as following too.
    follower: bool,
}

impl View {
    /// Moves to `later` if that is further on (two reads of one handle may
    /// race; the view never goes back).
    pub fn advance_to(&mut self, later: View) {
        self.base = self.base.max(later.base);
        self.read_to = later.read_to;
        self.dry = later.dry;
        self.follower |= later.follower;
    }

    /// Whether the last read found nothing at the end and the reader asks
    /// again and again for what comes next: this read and the one before
    /// found nothing at the same end, now or earlier in the handle's life.
    pub fn following(&self) -> bool {
        self.follower && self.dry >= 1
    }

    /// Stream offset of this handle's file offset 0.
    #[cfg(test)]
    pub fn base(&self) -> u64 {
        self.base
    }
}

impl Scrollback {
    /// A ring holding at most `cap_bytes`, in memory only.
    pub fn new(cap_bytes: usize) -> Self {
        Self::with_chunk_size(cap_bytes, CHUNK_SIZE)
    }

    /// A ring kept at `path` for the daemon that comes next, holding what
    /// the one before kept there for `key`.
    pub fn kept(cap_bytes: usize, path: PathBuf, key: &str) -> Self {
        let mut ring = Self::new(cap_bytes);
        ring.keep = Some(Keep {
            path,
            key: key.to_string(),
        });
        ring
    }

    /// A ring with a chosen chunk size. A chunk larger than the cap is
    /// shrunk to the cap, because evicting it whole would otherwise empty
    /// the ring on every append.
    pub fn with_chunk_size(cap_bytes: usize, chunk: usize) -> Self {
        Scrollback {
            cap: cap_bytes,
            chunk: chunk.min(cap_bytes).max(1),
            keep: None,
            inner: Mutex::new(Inner {
                start: 0,
                total: 0,
                last_append: SystemTime::now(),
                store: None,
                looked: false,
                failed: false,
                wakers: Vec::new(),
            }),
        }
    }

    // No step inside a critical section panics, so a poisoned lock still
    // guards a valid ring; ignoring poison keeps one panic from spreading to
    // every handler of the session. The kept file is looked for here, on
    // the ring's first use, under its own lock only.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        let mut inner = lock(&self.inner);
        if !inner.looked {
            inner.looked = true;
            if let Some(keep) = &self.keep {
                inner.find_kept(keep, self.cap);
            }
        }
        inner
    }

    /// Appends PTY output, evicting whole chunks from the front so that at
    /// most `cap` bytes stay held.
    pub fn append(&self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let now = SystemTime::now();
        let mut inner = self.lock();
        inner.last_append = now;
        inner.push(data, self.cap, self.chunk, self.keep.as_ref());
        let wakers = std::mem::take(&mut inner.wakers);
        drop(inner);
        for wake in wakers {
            wake();
        }
    }

    /// Whether `view` has bytes past its last read; if not, `waker` (when
    /// given) is called after the next append.
    pub fn ready_or_wake(&self, view: &View, waker: Option<Waker>) -> bool {
        let mut inner = self.lock();
        if inner.total > view.base.saturating_add(view.read_to) {
            return true;
        }
        match waker {
            Some(_) if inner.wakers.len() >= MAX_WAKERS => true,
            Some(w) => {
                inner.wakers.push(w);
                false
            }
            None => false,
        }
    }

    /// A view for a newly opened file handle, starting at the oldest byte
    /// held.
    pub fn open_view(&self) -> View {
        View {
            base: self.lock().start,
            read_to: 0,
            dry: 0,
            follower: false,
        }
    }

    /// The size of the file as seen through `view`.
    pub fn view_len(&self, view: &View) -> u64 {
        self.lock().total.saturating_sub(view.base)
    }

    /// Up to `size` bytes at file offset `offset` of `view`; empty at or past
    /// the end. A reader that fell behind eviction loses the evicted bytes
    /// once: the view shifts so that `offset` lands on the oldest byte held,
    /// and later reads continue from there without repeating anything.
    #[cfg(test)]
    pub fn read(&self, view: &mut View, offset: u64, size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        self.read_into(view, offset, size, &mut out);
        out
    }

    /// [`Scrollback::read`] into a buffer the caller keeps, which is cleared
    /// first: a reader that reuses one buffer allocates nothing per read.
    pub fn read_into(&self, view: &mut View, offset: u64, size: usize, out: &mut Vec<u8>) {
        out.clear();
        let mut inner = self.lock();
        let Some(mut pos) = view.base.checked_add(offset) else {
            return;
        };
        if pos < inner.start {
            // pos < start implies offset < start.
            view.base = inner.start - offset;
            pos = inner.start;
        }
        let again = view.read_to == offset;
        view.read_to = offset;
        if pos >= inner.total || size == 0 {
            view.dry = if again { view.dry.saturating_add(1) } else { 1 };
            view.follower |= view.dry >= 2;
            return;
        }
        let n = (inner.total - pos).min(size as u64) as usize;
        view.read_to = offset + n as u64;
        view.dry = 0;
        inner.copy_out(pos, n, out);
    }

    /// Up to `size` bytes from stream offset `pos` (or from the oldest byte
    /// held, if `pos` was evicted) into `out`, cleared first. Returns the
    /// stream offset the bytes start at.
    pub fn read_stream(&self, pos: u64, size: usize, out: &mut Vec<u8>) -> u64 {
        out.clear();
        let mut inner = self.lock();
        let pos = pos.max(inner.start);
        if pos < inner.total && size > 0 {
            let n = (inner.total - pos).min(size as u64) as usize;
            inner.copy_out(pos, n, out);
        }
        pos
    }

    /// Drops every held byte and gives their memory back (the stream
    /// offsets keep counting).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.start = inner.total;
        let total = inner.total;
        let key = self.keep.as_ref().map_or("", |k| k.key.as_str());
        if let Some(store) = &inner.store {
            if let Err(e) = store.reset(key, total) {
                log::warn!("cannot empty the scrollback ring of {key}: {e}");
                inner.store = None;
            }
        }
    }

    /// Drops every held byte and the kept file with them: the session's
    /// runtime is freed. A later byte makes the file again.
    pub fn discard(&self) {
        let mut inner = self.lock();
        inner.start = inner.total;
        if let Some(mut store) = inner.store.take() {
            if let Err(e) = store.unlink() {
                if e.kind() != std::io::ErrorKind::NotFound {
                    log::warn!("cannot remove a scrollback ring: {e}");
                }
            }
        }
    }

    /// Everything held, oldest first.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let start = self.lock().start;
        self.read_stream(start, self.cap, &mut out);
        out
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        let inner = self.lock();
        (inner.total - inner.start) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes ever appended.
    pub fn total(&self) -> u64 {
        self.lock().total
    }

    /// Memory (or disk) the held bytes take: the ring file's blocks.
    #[cfg(test)]
    pub fn resident_bytes(&self) -> u64 {
        self.lock()
            .store
            .as_ref()
            .map_or(0, RingFile::resident_bytes)
    }

    /// Whether the ring is kept in a file the next daemon finds.
    #[cfg(test)]
    pub fn is_kept(&self) -> bool {
        self.lock()
            .store
            .as_ref()
            .is_some_and(|s| s.kept().is_some())
    }

    /// Stream offset of the oldest byte held.
    #[cfg(test)]
    pub fn start(&self) -> u64 {
        self.lock().start
    }

    #[cfg(test)]
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The chunk size in effect (never larger than the cap, at least 1).
    #[cfg(test)]
    pub fn chunk_size(&self) -> usize {
        self.chunk
    }

    /// Time of the last append, or of creation if there was none.
    pub fn last_append(&self) -> SystemTime {
        self.lock().last_append
    }
}

impl Inner {
    /// Takes up what the kept file at `keep` holds, if there is one.
    fn find_kept(&mut self, keep: &Keep, cap: usize) {
        match RingFile::open(&keep.path, &keep.key, cap as u64) {
            Ok(Opened::Absent) => {}
            Ok(Opened::Kept(store, bounds)) | Ok(Opened::Copy(store, bounds)) => {
                if let Ok(modified) = std::fs::metadata(&keep.path).and_then(|m| m.modified()) {
                    self.last_append = modified;
                }
                self.start = bounds.start;
                self.total = bounds.total;
                self.store = Some(store);
            }
            Err(e) => log::warn!(
                "{}: cannot read its kept scrollback {}: {e}",
                keep.key,
                keep.path.display()
            ),
        }
    }

    /// Where bytes go: the kept file (made now if need be), else an
    /// anonymous one.
    fn store(&mut self, cap: usize, keep: Option<&Keep>) -> Option<&RingFile> {
        if self.store.is_none() {
            let made = keep
                .and_then(|k| {
                    RingFile::create(&k.path, &k.key, cap as u64, self.total)
                        .inspect_err(|e| log::warn!("{}: cannot keep its scrollback: {e}", k.key))
                        .ok()
                        .flatten()
                })
                .map(Ok)
                .unwrap_or_else(|| RingFile::anonymous(cap as u64));
            match made {
                Ok(store) => self.store = Some(store),
                Err(e) => {
                    if !self.failed {
                        log::error!("cannot hold scrollback: {e}");
                    }
                    self.failed = true;
                }
            }
        }
        self.store.as_ref()
    }

    fn push(&mut self, mut data: &[u8], cap: usize, chunk: usize, keep: Option<&Keep>) {
        let held_max = cap as u64;
        // What the file's header says now.
        let (said_start, said_total) = (self.start, self.total);
        if data.len() > cap {
            // Only the last `cap` bytes could survive; skip copying the rest.
            let skip = data.len() - cap;
            self.total += skip as u64;
            self.start = self.total;
            data = &data[skip..];
        }
        let end = self.total + data.len() as u64;
        // Whole chunks go from the front until the new bytes fit.
        let mut start = self.start;
        if end - start > held_max {
            let over = end - held_max - start;
            let chunks = over.div_ceil(chunk as u64);
            start = (start + chunks * chunk as u64).min(end);
        }
        if data.is_empty() || cap == 0 {
            self.start = end;
            self.total = end;
            return;
        }
        let total = self.total;
        let written = self.store(cap, keep).map(|store| {
            // The header gives up the evicted bytes before they are
            // overwritten, and claims the new ones after they are written.
            if start != said_start {
                store.save_bounds(Bounds {
                    start: start.min(said_total),
                    total: said_total,
                })?;
            }
            store.write_at(total, data)?;
            store.save_bounds(Bounds { start, total: end })
        });
        match written {
            Some(Ok(())) => {
                self.start = start;
                self.total = end;
            }
            failed => {
                if let Some(Err(e)) = failed {
                    log::error!("cannot write scrollback: {e}; its held bytes are dropped");
                }
                // What is held may be torn: hold nothing, and try a new file
                // at the next byte.
                self.store = None;
                self.start = end;
                self.total = end;
            }
        }
    }

    /// Appends `n` bytes from stream offset `pos`, which the caller has
    /// checked lie within `[start, total)`, to `out`.
    fn copy_out(&mut self, pos: u64, n: usize, out: &mut Vec<u8>) {
        let Some(store) = &self.store else {
            return;
        };
        if let Err(e) = store.read_at(pos, n, out) {
            log::error!("cannot read scrollback: {e}; its held bytes are dropped");
            self.store = None;
            self.start = self.total;
        }
    }
}

impl fmt::Debug for Scrollback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("Scrollback")
            .field("cap", &self.cap)
            .field("chunk", &self.chunk)
            .field("keep", &self.keep)
            .field("start", &inner.start)
            .field("total", &inner.total)
            .field("last_append", &inner.last_append)
            .field("wakers", &inner.wakers.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    /// The byte at stream offset `i` in patterned tests.
    fn pat(i: u64) -> u8 {
        (i % 251) as u8
    }

    fn pattern(from: u64, n: usize) -> Vec<u8> {
        (from..from + n as u64).map(pat).collect()
    }

    #[test]
    fn a_reader_asking_twice_at_the_end_is_following() {
        let ring = Scrollback::new(1024);
        ring.append(b"hello");
        let mut view = ring.open_view();
        assert_eq!(ring.read(&mut view, 0, 100), b"hello");
        assert!(!view.following());
        // `cat` reads once at the end and stops.
        assert!(ring.read(&mut view, 5, 100).is_empty());
        assert!(!view.following());
        assert!(ring.read(&mut view, 5, 100).is_empty());
        assert!(view.following());
        ring.append(b"!");
        assert_eq!(ring.read(&mut view, 5, 100), b"!");
        assert!(!view.following());
        // Having followed once, its first read at the next end follows.
        assert!(ring.read(&mut view, 6, 100).is_empty());
        assert!(view.following());
        // `cat`'s handle never follows.
        let mut cat = ring.open_view();
        assert_eq!(ring.read(&mut cat, 0, 100), b"hello!");
        assert!(ring.read(&mut cat, 6, 100).is_empty());
        assert!(!cat.following());
    }

    #[test]
    fn appends_accumulate() {
        let sb = Scrollback::with_chunk_size(100, 8);
        assert!(sb.is_empty());
        sb.append(b"hello ");
        sb.append(b"");
        sb.append(b"world");
        assert_eq!(sb.snapshot(), b"hello world");
        assert_eq!(sb.len(), 11);
        assert_eq!(sb.total(), 11);
        assert_eq!(sb.start(), 0);
        assert_eq!(sb.cap(), 100);
    }

    #[test]
    fn eviction_drops_whole_chunks() {
        let sb = Scrollback::with_chunk_size(32, 8);
        sb.append(&pattern(0, 32));
        assert_eq!((sb.start(), sb.len()), (0, 32));
        // One byte over: the first whole chunk goes.
        sb.append(&pattern(32, 1));
        assert_eq!((sb.start(), sb.len()), (8, 25));
        sb.append(&pattern(33, 7));
        assert_eq!((sb.start(), sb.len()), (8, 32));
        // Crossing two chunk boundaries at once evicts two chunks.
        sb.append(&pattern(40, 9));
        assert_eq!((sb.start(), sb.len()), (24, 25));
        assert_eq!(sb.snapshot(), pattern(24, 25));
    }

    #[test]
    fn len_stays_within_one_chunk_of_cap_once_full() {
        let sb = Scrollback::with_chunk_size(64, 16);
        let mut t = 0;
        for n in [1usize, 5, 17, 3, 40, 2, 9, 31, 64, 1, 11]
            .iter()
            .cycle()
            .take(200)
        {
            sb.append(&pattern(t, *n));
            t += *n as u64;
            if sb.start() > 0 {
                assert!(sb.len() > 64 - 16 && sb.len() <= 64, "len {}", sb.len());
            }
            assert_eq!(sb.snapshot(), pattern(sb.start(), sb.len()));
        }
    }

    #[test]
    fn append_larger_than_cap_keeps_the_tail() {
        let sb = Scrollback::with_chunk_size(20, 8);
        sb.append(&pattern(0, 5));
        sb.append(&pattern(5, 100));
        assert_eq!(sb.total(), 105);
        assert!(sb.len() <= 20);
        assert_eq!(sb.snapshot(), pattern(sb.start(), sb.len()));
        sb.append(&pattern(105, 3));
        assert_eq!(sb.snapshot(), pattern(sb.start(), sb.len()));
    }

    #[test]
    fn cap_smaller_than_chunk() {
        let sb = Scrollback::with_chunk_size(5, 1024);
        assert_eq!(sb.chunk_size(), 5);
        sb.append(b"abc");
        sb.append(b"defg");
        // Whole-chunk eviction: "abcde" goes as one.
        assert_eq!(sb.snapshot(), b"fg");
        sb.append(b"0123456789");
        assert_eq!(sb.snapshot(), b"56789");
    }

    #[test]
    fn zero_cap_holds_nothing() {
        let sb = Scrollback::with_chunk_size(0, 16);
        sb.append(b"abc");
        assert_eq!((sb.total(), sb.start(), sb.len()), (3, 3, 0));
        let mut v = sb.open_view();
        assert_eq!(sb.read(&mut v, 0, 10), b"");
    }

    #[test]
    fn reads_cross_chunk_boundaries() {
        let sb = Scrollback::with_chunk_size(1000, 7);
        sb.append(&pattern(0, 100));
        let mut v = sb.open_view();
        assert_eq!(sb.read(&mut v, 5, 30), pattern(5, 30));
        assert_eq!(sb.read(&mut v, 6, 1), pattern(6, 1));
        assert_eq!(sb.read(&mut v, 0, 100), pattern(0, 100));
        assert_eq!(sb.read(&mut v, 90, 1000), pattern(90, 10));
        assert_eq!(sb.read(&mut v, 13, 8), pattern(13, 8));
        assert_eq!(v.base(), 0);
    }

    #[test]
    fn reads_at_or_past_end_are_empty() {
        let sb = Scrollback::with_chunk_size(100, 8);
        let mut v = sb.open_view();
        assert!(sb.read(&mut v, 0, 10).is_empty());
        sb.append(b"abc");
        assert!(sb.read(&mut v, 3, 10).is_empty());
        assert!(sb.read(&mut v, 1000, 10).is_empty());
        assert!(sb.read(&mut v, u64::MAX, 10).is_empty());
        assert!(sb.read(&mut v, 0, 0).is_empty());
        assert_eq!(sb.read(&mut v, 2, 10), b"c");
        assert_eq!(v.base(), 0);
    }

    #[test]
    fn view_starts_at_open_and_grows() {
        let sb = Scrollback::with_chunk_size(16, 4);
        sb.append(&pattern(0, 30));
        let mut v = sb.open_view();
        assert_eq!(v.base(), sb.start());
        assert_eq!(sb.view_len(&v), 16);
        assert_eq!(sb.read(&mut v, 0, 4), pattern(sb.start(), 4));
        sb.append(&pattern(30, 2));
        assert_eq!(sb.view_len(&v), 18);
    }

    #[test]
    fn fallen_behind_reader_loses_the_gap_once() {
        let sb = Scrollback::with_chunk_size(16, 4);
        sb.append(&pattern(0, 16));
        let mut v = sb.open_view();
        assert_eq!(sb.read(&mut v, 0, 4), pattern(0, 4));
        sb.append(&pattern(16, 12));
        assert_eq!(sb.start(), 12);
        // File offset 4 was stream offset 4, now evicted up to 12.
        assert_eq!(sb.read(&mut v, 4, 4), pattern(12, 4));
        assert_eq!(v.base(), 8);
        assert_eq!(sb.view_len(&v), 20);
        assert_eq!(sb.read(&mut v, 8, 100), pattern(16, 12));
        assert_eq!(v.base(), 8);
    }

    #[test]
    fn clear_drops_everything_and_views_go_on() {
        let sb = Scrollback::with_chunk_size(64, 8);
        sb.append(&pattern(0, 20));
        let mut v = sb.open_view();
        assert_eq!(sb.read(&mut v, 0, 10), pattern(0, 10));
        sb.clear();
        assert_eq!((sb.start(), sb.total(), sb.len()), (20, 20, 0));
        assert!(sb.snapshot().is_empty());
        assert!(sb.read(&mut v, 10, 10).is_empty());
        assert_eq!(v.base(), 10);
        sb.append(&pattern(20, 5));
        assert_eq!(sb.read(&mut v, 10, 10), pattern(20, 5));
        assert_eq!(sb.open_view().base(), 20);
    }

    #[test]
    fn last_append_moves_forward() {
        let sb = Scrollback::new(256 * 1024);
        let created = sb.last_append();
        std::thread::sleep(std::time::Duration::from_millis(5));
        sb.append(b"x");
        assert!(sb.last_append() > created);
        let t = sb.last_append();
        sb.append(b"");
        assert_eq!(sb.last_append(), t);
    }

    #[test]
    fn debug_is_summary() {
        let sb = Scrollback::new(256 * 1024);
        sb.append(b"secret");
        let s = format!("{sb:?}");
        assert!(s.contains("total: 6"), "{s}");
        assert!(!s.contains("115, 101"), "{s}");
    }

    #[test]
    fn concurrent_readers_see_the_stream_in_order() {
        let sb = Arc::new(Scrollback::with_chunk_size(4096, 256));
        const TOTAL: u64 = 2_000_000;
        let writer = {
            let sb = Arc::clone(&sb);
            std::thread::spawn(move || {
                let mut t = 0;
                let mut n = 1;
                while t < TOTAL {
                    let k = n.min((TOTAL - t) as usize);
                    sb.append(&pattern(t, k));
                    t += k as u64;
                    n = n * 7 % 1999 + 1;
                }
            })
        };
        let readers: Vec<_> = (0..4)
            .map(|r| {
                let sb = Arc::clone(&sb);
                std::thread::spawn(move || {
                    let mut v = sb.open_view();
                    let mut x = 0u64;
                    let mut last = v.base();
                    loop {
                        let before = v.base();
                        let got = sb.read(&mut v, x, 100 + r * 300);
                        let at = v.base() + x;
                        // A gap shifts the view forward, never back.
                        assert!(v.base() >= before);
                        assert!(at >= last);
                        assert_eq!(got, pattern(at, got.len()));
                        x += got.len() as u64;
                        last = v.base() + x;
                        if got.is_empty() {
                            if sb.total() >= TOTAL && last >= TOTAL {
                                break;
                            }
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        writer.join().unwrap();
        for r in readers {
            r.join().unwrap();
        }
    }

    #[test]
    fn a_kept_ring_is_found_again_by_the_next_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shell:a.ring");
        let cap = 4 * CHUNK_SIZE;
        let first = Scrollback::kept(cap, path.clone(), "shell:a");
        assert!(!path.exists(), "made at the first byte, not before");
        let mut at = 0u64;
        for n in [1000usize, CHUNK_SIZE * 3, 5000, CHUNK_SIZE * 2 + 17] {
            first.append(&pattern(at, n));
            at += n as u64;
        }
        assert!(first.is_kept());
        let (start, held) = (first.start(), first.snapshot());
        drop(first);

        let next = Scrollback::kept(cap, path.clone(), "shell:a");
        assert_eq!((next.start(), next.total()), (start, at));
        assert_eq!(next.snapshot(), held);
        assert_eq!(next.snapshot(), pattern(start, (at - start) as usize));
        next.append(&pattern(at, 10));
        let mut view = next.open_view();
        let tail = next.read(&mut view, at - start, 100);
        assert_eq!(tail, pattern(at, 10));
    }

    #[test]
    fn a_second_daemon_reads_a_copy_and_the_first_keeps_writing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shell:a.ring");
        let owner = Scrollback::kept(1 << 16, path.clone(), "shell:a");
        owner.append(b"before ");
        let second = Scrollback::kept(1 << 16, path.clone(), "shell:a");
        assert_eq!(second.snapshot(), b"before ");
        assert!(!second.is_kept());
        second.append(b"seen by the second");
        owner.append(b"after");
        assert_eq!(owner.snapshot(), b"before after");
        drop(owner);
        let third = Scrollback::kept(1 << 16, path, "shell:a");
        assert_eq!(third.snapshot(), b"before after");
    }

    #[test]
    fn discard_removes_the_kept_file_and_a_later_byte_makes_it_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shell:a.ring");
        let ring = Scrollback::kept(1 << 16, path.clone(), "shell:a");
        ring.append(b"old");
        ring.discard();
        assert!(!path.exists());
        assert!(ring.is_empty());
        ring.append(b"new");
        assert!(path.exists());
        drop(ring);
        assert_eq!(
            Scrollback::kept(1 << 16, path, "shell:a").snapshot(),
            b"new"
        );
    }

    #[test]
    fn a_ring_costs_the_bytes_it_holds() {
        let ring = Scrollback::new(8 << 20);
        assert_eq!(ring.resident_bytes(), 0, "nothing before the first byte");
        ring.append(&[b'x'; 100_000]);
        let resident = ring.resident_bytes();
        assert!(
            (100_000..100_000 + 3 * 4096 + 4096).contains(&resident),
            "{resident}"
        );
        ring.clear();
        assert!(ring.resident_bytes() <= 4096);
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Scrollback>();
    }

    #[derive(Debug, Clone)]
    enum Op {
        Append(Vec<u8>),
        /// Random read by view `i` at a random offset.
        Read(usize, u64, usize),
        /// Next sequential read by view `i`.
        Follow(usize, usize),
        /// Replace view `i` by a fresh one.
        Reopen(usize),
        Clear,
    }

    const VIEWS: usize = 3;

    fn op(cap: usize) -> impl Strategy<Value = Op> {
        let big = cap * 2 + 3;
        prop_oneof![
            6 => prop::collection::vec(any::<u8>(), 0..=big).prop_map(Op::Append),
            3 => (0..VIEWS, 0..(cap as u64 * 3 + 5), 0..(cap + 5))
                .prop_map(|(i, o, s)| Op::Read(i, o, s)),
            4 => (0..VIEWS, 0..(cap + 5)).prop_map(|(i, s)| Op::Follow(i, s)),
            1 => (0..VIEWS).prop_map(Op::Reopen),
            1 => Just(Op::Clear),
        ]
    }

    fn case() -> impl Strategy<Value = (usize, usize, Vec<Op>)> {
        (0usize..120, 1usize..40).prop_flat_map(|(cap, chunk)| {
            (
                Just(cap),
                Just(chunk),
                prop::collection::vec(op(cap), 0..80),
            )
        })
    }

    /// A reader that always continues where it left off, like `cat`.
    struct Follower {
        view: View,
        x: u64,
        /// Stream offset just past the last byte it saw.
        next: u64,
    }

    /// A reader that drains the ring after every append.
    struct Keeper {
        view: View,
        x: u64,
        seen: Vec<u8>,
        /// Stream offset of `seen[0]`.
        from: u64,
    }

    fn check_ring(sb: &Scrollback, stream: &[u8], cleared_at: u64) -> Result<(), TestCaseError> {
        let (start, total, len) = (sb.start(), sb.total(), sb.len());
        prop_assert_eq!(total, stream.len() as u64);
        prop_assert!(start >= cleared_at && start <= total);
        prop_assert_eq!(len as u64, total - start);
        prop_assert!(len <= sb.cap());
        prop_assert_eq!(sb.snapshot(), &stream[start as usize..]);
        // Nothing is evicted beyond what the cap demands.
        if start > cleared_at {
            prop_assert!(len + sb.chunk_size() > sb.cap());
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn ring_matches_stream_model((cap, chunk, ops) in case()) {
            let sb = Scrollback::with_chunk_size(cap, chunk);
            let eff = sb.chunk_size();
            let mut stream: Vec<u8> = Vec::new();
            let mut cleared_at = 0u64;
            let mut views: Vec<View> = (0..VIEWS).map(|_| sb.open_view()).collect();
            let mut followers: Vec<Follower> = (0..VIEWS)
                .map(|_| {
                    let view = sb.open_view();
                    Follower { view, x: 0, next: view.base() }
                })
                .collect();
            let v = sb.open_view();
            let mut keeper = Keeper { view: v, x: 0, seen: Vec::new(), from: v.base() };

            for op in ops {
                match op {
                    Op::Append(data) => {
                        // The keeper is caught up here, so it can lose bytes
                        // only if this append alone overflows the ring.
                        let may_lose = data.len() + eff > cap;
                        sb.append(&data);
                        stream.extend_from_slice(&data);
                        let base_before = keeper.view.base();
                        loop {
                            let got = sb.read(&mut keeper.view, keeper.x, eff.max(3) / 3 + 1);
                            if got.is_empty() {
                                break;
                            }
                            keeper.x += got.len() as u64;
                            keeper.seen.extend_from_slice(&got);
                        }
                        if !may_lose {
                            prop_assert_eq!(keeper.view.base(), base_before);
                        }
                        if keeper.view.base() != base_before {
                            // Restart the no-gap record after an allowed loss.
                            keeper.seen.clear();
                            keeper.from = keeper.view.base() + keeper.x;
                        }
                        let from = keeper.from as usize;
                        prop_assert_eq!(&keeper.seen[..], &stream[from..]);
                        prop_assert_eq!(keeper.view.base() + keeper.x, sb.total());
                    }
                    Op::Read(i, offset, size) => {
                        let (start, total) = (sb.start(), sb.total());
                        let v = &mut views[i];
                        let base_before = v.base();
                        let got = sb.read(v, offset, size);
                        let pos = base_before + offset;
                        let expect_pos = if pos < start {
                            prop_assert_eq!(v.base(), start - offset);
                            start
                        } else {
                            prop_assert_eq!(v.base(), base_before);
                            pos
                        };
                        let end = (expect_pos + size as u64).min(total).max(expect_pos);
                        let want = if expect_pos >= total {
                            &[][..]
                        } else {
                            &stream[expect_pos as usize..end as usize]
                        };
                        prop_assert_eq!(&got[..], want);
                        prop_assert_eq!(sb.view_len(v), total - v.base());
                    }
                    Op::Follow(i, size) => {
                        let start = sb.start();
                        let f = &mut followers[i];
                        let got = sb.read(&mut f.view, f.x, size);
                        let at = f.view.base() + f.x;
                        // Never backwards (no duplicates), and a skip only
                        // over bytes that were evicted.
                        prop_assert!(at >= f.next);
                        if at > f.next {
                            prop_assert_eq!(at, start);
                        }
                        prop_assert_eq!(&got[..], &stream[at as usize..at as usize + got.len()]);
                        if size > 0 {
                            prop_assert_eq!(got.len() as u64, (sb.total() - at).min(size as u64));
                        }
                        f.x += got.len() as u64;
                        f.next = at + got.len() as u64;
                        prop_assert_eq!(sb.view_len(&f.view), sb.total() - f.view.base());
                    }
                    Op::Reopen(i) => {
                        views[i] = sb.open_view();
                        prop_assert_eq!(views[i].base(), sb.start());
                        prop_assert_eq!(sb.view_len(&views[i]) as usize, sb.len());
                        let view = sb.open_view();
                        followers[i] = Follower { view, x: 0, next: view.base() };
                    }
                    Op::Clear => {
                        sb.clear();
                        cleared_at = sb.total();
                    }
                }
                check_ring(&sb, &stream, cleared_at)?;
            }
        }
    }
}
