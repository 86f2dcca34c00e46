//! dtach's socket protocol, spoken directly.
//!
//! Client → master: fixed 10-byte packets `type, len, 8 bytes`, one `write`
//! each (dtach 0.9 reads a packet with one `read` and acts on what it got).
//! Master → client: raw PTY output, only after ATTACH.

use crate::sync::{lock, wait_timeout};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

const MSG_PUSH: u8 = 0;
const MSG_ATTACH: u8 = 1;
const MSG_DETACH: u8 = 2;
const MSG_WINCH: u8 = 3;
const MSG_REDRAW: u8 = 4;

/// REDRAW methods, carried in the `len` byte.
pub const REDRAW_WINCH: u8 = 3;

/// Input bytes one PUSH packet can carry.
pub const PUSH_MAX: usize = 8;

/// One packet as it goes on the wire.
pub fn packet(kind: u8, len: u8, payload: [u8; 8]) -> [u8; 10] {
    let mut p = [0u8; 10];
    p[0] = kind;
    p[1] = len;
    p[2..].copy_from_slice(&payload);
    p
}

/// `struct winsize` in native byte order: rows, cols, xpixel, ypixel.
pub fn winsize(cols: u16, rows: u16) -> [u8; 8] {
    let mut w = [0u8; 8];
    w[0..2].copy_from_slice(&rows.to_ne_bytes());
    w[2..4].copy_from_slice(&cols.to_ne_bytes());
    w
}

/// The packets that push `input` to the PTY: up to [`PUSH_MAX`] bytes
/// each, never ending inside an escape sequence or a UTF-8 character that
/// fits in one. The master writes each packet to the PTY on its own, and a
/// program may read between two: Gemini CLI 0.61, given a bracketed
/// paste's end (`ESC [ 2 0 1 ~`) in two reads, stays in paste mode and
/// takes every Enter after it as a new line.
pub fn push_packets(input: &[u8]) -> impl Iterator<Item = [u8; 10]> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= input.len() {
            return None;
        }
        let end = chunk_end(input, start);
        let chunk = &input[start..end];
        start = end;
        let mut payload = [0u8; 8];
        payload[..chunk.len()].copy_from_slice(chunk);
        Some(packet(MSG_PUSH, chunk.len() as u8, payload))
    })
}

/// Where the packet of `input` that begins at `start` ends (see
/// [`push_packets`]); always past `start`.
fn chunk_end(input: &[u8], start: usize) -> usize {
    let full = (start + PUSH_MAX).min(input.len());
    if full == input.len() {
        return full;
    }
    let mut end = full;
    // Not inside a UTF-8 character: back to the byte that begins it.
    while end > start + 1 && input[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    if input[end] & 0xC0 == 0x80 {
        end = full;
    }
    // Not inside an escape sequence: before the ESC that begins it.
    if let Some(esc) = input[start..end].iter().rposition(|b| *b == 0x1B) {
        let esc = start + esc;
        if esc > start && esc + escape_len(&input[esc..]) > end {
            end = esc;
        }
    }
    end
}

/// The length of the escape sequence `bytes` begins with (ESC, then a CSI's
/// parameters up to its final byte, or one more byte); all of `bytes` when
/// it ends first.
fn escape_len(bytes: &[u8]) -> usize {
    match bytes.get(1) {
        Some(b'[') => bytes[2..]
            .iter()
            .position(|b| (0x40..=0x7E).contains(b))
            .map_or(bytes.len(), |i| i + 3),
        Some(_) => 2,
        None => 1,
    }
}

/// How many input bytes the packets laid end to end in `wire` carry.
fn carried(wire: &[u8]) -> usize {
    wire.chunks_exact(10).map(|p| usize::from(p[1])).sum()
}

/// How long a write may go without the master taking a byte before it gives
/// up with `EAGAIN` (a program that does not read its terminal fills the PTY,
/// then the master stops reading its clients).
pub const STALL: Duration = Duration::from_secs(3);

/// How long a resize or redraw waits on a master that takes nothing: they
/// are single packets that need not queue behind a stuck write for long.
pub const CONTROL_PATIENCE: Duration = Duration::from_millis(500);

/// Packets per `send` of an input write made on the caller's thread: 4 KB,
/// far below what a unix socket takes in one piece.
const BATCH_PACKETS: usize = 400;

/// How often a waiting writer looks again whether its client was closed.
const RECHECK: Duration = Duration::from_millis(50);

/// Why a send stopped early, and how much of it went through.
#[derive(Debug)]
pub struct SendError {
    /// Whole packets the master was given before it stopped.
    pub packets: usize,
    /// `WouldBlock` (no progress for a while), `TimedOut` (the deadline
    /// passed waiting for earlier writes), `BrokenPipe` (closed, or the
    /// master is gone), or what the socket said.
    pub error: io::Error,
}

impl SendError {
    fn new(packets: usize, errno: i32) -> Self {
        SendError {
            packets,
            error: io::Error::from_raw_os_error(errno),
        }
    }
}

/// Writers of one client, served one whole write at a time, in arrival order.
#[derive(Debug, Default)]
struct Line {
    waiting: VecDeque<u64>,
    next: u64,
}

/// The writing half of an attached client; the reading half goes to a
/// reader thread. Writes never block: each packet is one `send` with
/// `MSG_DONTWAIT`, and a full socket is waited on with `poll`, so no lock is
/// held while the master is slow and [`Client::close`] ends every wait.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    line: Mutex<Line>,
    turn: Condvar,
    closed: AtomicBool,
    born: Instant,
    /// Milliseconds after `born` (plus one) since which the master has taken
    /// nothing; 0 while it takes what it is sent.
    stalled_at: AtomicU64,
}

/// Connects without ever waiting: a master too busy to accept (its listen
/// queue full) gives `WouldBlock` rather than a connect that hangs.
fn connect_now(socket: &Path) -> io::Result<UnixStream> {
    use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, UnixAddr};
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let addr = UnixAddr::new(socket)?;
    socket::connect(fd.as_raw_fd(), &addr)?;
    let stream = UnixStream::from(fd);
    // The reader shares this file description and reads blocking; writes
    // ask for non-blocking behaviour per call instead.
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// Whether a master listens on `socket`. A master whose listen queue is full
/// (it is stuck) still counts: it exists, and the socket is not stale.
pub fn answers(socket: &Path) -> bool {
    match connect_now(socket) {
        Ok(_) => true,
        Err(e) => e.kind() == io::ErrorKind::WouldBlock,
    }
}

impl Client {
    /// Connects to a master's socket. `ECONNREFUSED` or `ENOENT` mean no
    /// master answers; `EAGAIN` that one is there but not accepting.
    pub fn connect(socket: &Path) -> io::Result<(Client, UnixStream)> {
        let stream = connect_now(socket)?;
        let reader = stream.try_clone()?;
        Ok((
            Client {
                stream,
                line: Mutex::new(Line::default()),
                turn: Condvar::new(),
                closed: AtomicBool::new(false),
                born: Instant::now(),
                stalled_at: AtomicU64::new(0),
            },
            reader,
        ))
    }

    /// Sends `packets` as one whole write after the writes before it, each
    /// packet with one `send` (dtach reads a packet with one `read`).
    /// Waiting for earlier writes ends at `deadline`; a master that has
    /// taken nothing for `patience` ends it at once.
    fn send(
        &self,
        packets: &[[u8; 10]],
        deadline: Instant,
        patience: Duration,
    ) -> Result<(), SendError> {
        let ticket = {
            let mut line = lock(&self.line);
            let ticket = line.next;
            line.next += 1;
            line.waiting.push_back(ticket);
            loop {
                if line.waiting.front() == Some(&ticket) {
                    break ticket;
                }
                let now = Instant::now();
                let gave_up = if self.is_closed() {
                    Some(libc::EPIPE)
                } else if self.stalled().is_some_and(|since| now >= since + patience) {
                    Some(libc::EAGAIN)
                } else if now >= deadline {
                    Some(libc::ETIMEDOUT)
                } else {
                    None
                };
                if let Some(errno) = gave_up {
                    line.waiting.retain(|t| *t != ticket);
                    return Err(SendError::new(0, errno));
                }
                line = wait_timeout(&self.turn, line, (deadline - now).min(RECHECK)).0;
            }
        };
        let result = self.write_packets(packets, patience);
        {
            let mut line = lock(&self.line);
            line.waiting.retain(|t| *t != ticket);
        }
        self.turn.notify_all();
        result
    }

    fn write_packets(&self, packets: &[[u8; 10]], patience: Duration) -> Result<(), SendError> {
        use nix::errno::Errno;
        use nix::poll::{PollFd, PollFlags, PollTimeout};
        use nix::sys::socket::{send, MsgFlags};
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        for (done, p) in packets.iter().enumerate() {
            let mut off = 0;
            while off < p.len() {
                if self.is_closed() {
                    return Err(self.cut(done, off, libc::EPIPE));
                }
                match send(self.stream.as_raw_fd(), &p[off..], flags) {
                    Ok(n) => {
                        off += n;
                        self.stalled_at.store(0, Ordering::Relaxed);
                    }
                    Err(Errno::EINTR) => {}
                    Err(Errno::EAGAIN) => {
                        let now = Instant::now();
                        let until = self.stalled_since(now) + patience;
                        if now >= until {
                            return Err(self.cut(done, off, libc::EAGAIN));
                        }
                        let wait = (until - now).min(RECHECK);
                        let mut fds = [PollFd::new(self.stream.as_fd(), PollFlags::POLLOUT)];
                        let ms = PollTimeout::try_from(wait).unwrap_or(PollTimeout::ZERO);
                        match nix::poll::poll(&mut fds, ms) {
                            Ok(_) | Err(Errno::EINTR) => {}
                            Err(e) => return Err(self.cut(done, off, e as i32)),
                        }
                    }
                    Err(e) => return Err(self.cut(done, off, e as i32)),
                }
            }
        }
        Ok(())
    }

    /// Since when the master has taken nothing, if it is not taking bytes.
    fn stalled(&self) -> Option<Instant> {
        match self.stalled_at.load(Ordering::Relaxed) {
            0 => None,
            // Kept in whole milliseconds past the start, rounded up: a
            // deadline counted from it never comes early.
            ms => Some(self.born + Duration::from_millis(ms)),
        }
    }

    /// When the master stopped taking bytes, noting `now` if it just did.
    fn stalled_since(&self, now: Instant) -> Instant {
        let ms = now.duration_since(self.born).as_millis() as u64 + 1;
        match self
            .stalled_at
            .compare_exchange(0, ms, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => now,
            Err(since) => self.born + Duration::from_millis(since),
        }
    }

    /// A write ends after `packets` whole packets. Half a packet on the wire
    /// would desynchronise the master's reads: such a client is closed.
    fn cut(&self, packets: usize, half: usize, errno: i32) -> SendError {
        if half > 0 {
            log::warn!("a packet to the dtach master went out in part; closing the connection");
            self.close();
        }
        SendError::new(packets, errno)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Ends the connection now, whatever is being written: every waiting
    /// write ends with `EPIPE`, the master sees the client go.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        let _line = lock(&self.line);
        self.turn.notify_all();
    }

    /// Asks for output, then sets the window size (a `dtach -n` PTY starts at 0×0).
    pub fn attach(&self, cols: u16, rows: u16, deadline: Instant) -> Result<(), SendError> {
        self.send(
            &[
                packet(MSG_ATTACH, 0, [0; 8]),
                packet(MSG_WINCH, 0, winsize(cols, rows)),
            ],
            deadline,
            STALL,
        )
    }

    /// Pushes `input` to the PTY; on failure, the error says how many input
    /// bytes went through (whole packets of up to [`PUSH_MAX`] bytes).
    pub fn push(&self, input: &[u8], deadline: Instant) -> Result<(), (usize, io::Error)> {
        let packets: Vec<[u8; 10]> = push_packets(input).collect();
        self.send(&packets, deadline, STALL).map_err(|e| {
            let sent = &packets[..e.packets.min(packets.len())];
            (carried(sent.as_flattened()), e.error)
        })
    }

    /// Pushes what the master takes at once, on the caller's thread,
    /// waiting for nothing. `None` when the write would have to wait:
    /// earlier writes are queued, the master is stalled, or it took not even
    /// the first packet. Otherwise the input bytes that went through, whole
    /// packets only (a short count, as a full pipe gives).
    pub fn try_push_now(&self, input: &[u8]) -> Option<usize> {
        use nix::errno::Errno;
        use nix::sys::socket::{send, MsgFlags};
        let ticket = {
            let mut line = lock(&self.line);
            if !line.waiting.is_empty() || self.is_closed() || self.stalled().is_some() {
                return None;
            }
            let ticket = line.next;
            line.next += 1;
            line.waiting.push_back(ticket);
            ticket
        };
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        // Packets go out in batches of one `send` each: a unix stream
        // socket takes a send this small whole or not at all, so the master
        // still reads whole packets, and it is woken once per batch rather
        // than once per eight bytes.
        let mut done = 0;
        let mut went = 0;
        let mut batch = Vec::with_capacity(input.len().div_ceil(PUSH_MAX).min(BATCH_PACKETS) * 10);
        let mut packets = push_packets(input).peekable();
        while packets.peek().is_some() {
            batch.clear();
            for p in packets.by_ref().take(BATCH_PACKETS) {
                batch.extend_from_slice(&p);
            }
            let sent = loop {
                match send(self.stream.as_raw_fd(), &batch, flags) {
                    Err(Errno::EINTR) => continue,
                    other => break other,
                }
            };
            match sent {
                Ok(n) if n == batch.len() => {
                    done += batch.len() / 10;
                    went += carried(&batch);
                }
                Ok(n) => {
                    done += n / 10;
                    went += carried(&batch[..n]);
                    self.cut(done, n % 10, libc::EAGAIN);
                    break;
                }
                Err(_) => break,
            }
        }
        {
            let mut line = lock(&self.line);
            line.waiting.retain(|t| *t != ticket);
        }
        self.turn.notify_all();
        (done > 0).then_some(went)
    }

    pub fn resize(&self, cols: u16, rows: u16, deadline: Instant) -> Result<(), SendError> {
        self.send(
            &[packet(MSG_WINCH, 0, winsize(cols, rows))],
            deadline,
            CONTROL_PATIENCE,
        )
    }

    /// Asks the program to repaint: a WINCH with the current size.
    pub fn redraw(&self, cols: u16, rows: u16, deadline: Instant) -> Result<(), SendError> {
        self.send(
            &[packet(MSG_REDRAW, REDRAW_WINCH, winsize(cols, rows))],
            deadline,
            CONTROL_PATIENCE,
        )
    }

    /// [`Client::redraw`] if it goes at once, on the caller's thread,
    /// waiting for nothing: `false` when earlier writes are queued, the
    /// master is stalled, or the packet did not go whole.
    pub fn try_redraw_now(&self, cols: u16, rows: u16) -> bool {
        use nix::sys::socket::{send, MsgFlags};
        let ticket = {
            let mut line = lock(&self.line);
            if !line.waiting.is_empty() || self.is_closed() || self.stalled().is_some() {
                return false;
            }
            let ticket = line.next;
            line.next += 1;
            line.waiting.push_back(ticket);
            ticket
        };
        let packet = packet(MSG_REDRAW, REDRAW_WINCH, winsize(cols, rows));
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        let sent = loop {
            match send(self.stream.as_raw_fd(), &packet, flags) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => break other,
            }
        };
        let whole = match sent {
            Ok(n) if n == packet.len() => true,
            Ok(n) => {
                self.cut(0, n, libc::EAGAIN);
                false
            }
            Err(_) => false,
        };
        {
            let mut line = lock(&self.line);
            line.waiting.retain(|t| *t != ticket);
        }
        self.turn.notify_all();
        whole
    }

    /// Says goodbye if the master takes it at once, then closes.
    pub fn detach(&self) {
        if lock(&self.line).waiting.is_empty() {
            let _ = nix::sys::socket::send(
                self.stream.as_raw_fd(),
                &packet(MSG_DETACH, 0, [0; 8]),
                nix::sys::socket::MsgFlags::MSG_DONTWAIT | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
            );
        }
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The bytes of each packet `push_packets` makes of `input`.
    fn chunks_of(input: &[u8]) -> Vec<Vec<u8>> {
        push_packets(input)
            .map(|p| p[2..2 + usize::from(p[1])].to_vec())
            .collect()
    }

    #[test]
    fn no_packet_ends_inside_an_escape_sequence_or_a_character() {
        let paste = b"\x1b[200~what came before\x1b[201~";
        assert_eq!(
            chunks_of(paste),
            [
                b"\x1b[200~wh".to_vec(),
                b"at came ".to_vec(),
                b"before".to_vec(),
                b"\x1b[201~".to_vec()
            ]
        );
        // An arrow key after seven bytes goes whole into the next packet.
        assert_eq!(
            chunks_of(b"1234567\x1b[B"),
            [b"1234567".to_vec(), b"\x1b[B".to_vec()]
        );
        // A UTF-8 character is not cut.
        let text = "1234567é".as_bytes();
        assert_eq!(
            chunks_of(text),
            [b"1234567".to_vec(), "é".as_bytes().to_vec()]
        );
        // Whatever the input, every byte goes, in order, at most 8 a packet.
        for input in [
            vec![0x1Bu8; 20],
            b"\x1b[1;2;3;4;5;6;7;8;9m".to_vec(),
            vec![0x80u8; 20],
            "ééééé日本語".as_bytes().to_vec(),
        ] {
            let chunks = chunks_of(&input);
            assert!(chunks.iter().all(|c| !c.is_empty() && c.len() <= PUSH_MAX));
            assert_eq!(chunks.concat(), input);
        }
    }

    #[test]
    fn push_splits_input_into_eight_byte_packets() {
        let packets: Vec<_> = push_packets(b"make all\n").collect();
        assert_eq!(packets.len(), 2);
        assert_eq!(&packets[0][..], b"\x00\x08make all");
        assert_eq!(&packets[1][..2], b"\x00\x01");
        assert_eq!(packets[1][2], b'\n');
    }

    /// A "master" that accepts and never reads, as dtach does once its
    /// program stops reading the terminal.
    fn deaf_master() -> (
        tempfile::TempDir,
        std::os::unix::net::UnixListener,
        Client,
        UnixStream,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let (client, reader) = Client::connect(&path).unwrap();
        (dir, listener, client, reader)
    }

    #[test]
    fn a_write_the_master_takes_at_once_goes_out_on_the_callers_thread() {
        let (_dir, listener, client, _reader) = deaf_master();
        let (mut master, _) = listener.accept().unwrap();
        assert_eq!(client.try_push_now(b"make all\n"), Some(9));
        let mut got = [0u8; 20];
        master.read_exact(&mut got).unwrap();
        assert_eq!(&got[..10], &packet(MSG_PUSH, 8, *b"make all"));
        assert_eq!(&got[10..12], b"\x00\x01");
        // A socket that takes nothing: the write is left to the waiting path,
        // and a full socket gives a short count of whole packets.
        let mut went = 0;
        let mut calls = 0;
        while let Some(n) = client.try_push_now(&[b'x'; 4096]) {
            assert!(n > 0 && n % PUSH_MAX == 0, "{n}");
            went += n;
            calls += 1;
            assert!(calls < 100_000, "the socket never filled");
        }
        assert!(went > 0);
        assert!(!client.is_closed(), "no packet went out in part");
    }

    #[test]
    fn a_redraw_goes_at_once_or_not_at_all() {
        let (_dir, listener, client, _reader) = deaf_master();
        let (mut master, _) = listener.accept().unwrap();
        assert!(client.try_redraw_now(80, 24));
        let mut got = [0u8; 10];
        master.read_exact(&mut got).unwrap();
        assert_eq!(got, packet(MSG_REDRAW, REDRAW_WINCH, winsize(80, 24)));
        // Behind a queued write, or to a socket that takes nothing: not sent.
        lock(&client.line).waiting.push_back(99);
        assert!(!client.try_redraw_now(80, 24));
        lock(&client.line).waiting.clear();
        while client.try_push_now(&[b'x'; 4096]).is_some() {}
        while client.try_push_now(b"x").is_some() {}
        assert!(!client.try_redraw_now(80, 24));
        assert!(!client.is_closed());
    }

    #[test]
    fn a_write_queued_behind_another_is_not_taken_at_once() {
        let (_dir, listener, client, _reader) = deaf_master();
        let _master = listener.accept().unwrap();
        lock(&client.line).waiting.push_back(99);
        assert_eq!(client.try_push_now(b"ls\n"), None);
        lock(&client.line).waiting.clear();
        assert_eq!(client.try_push_now(b"ls\n"), Some(3));
    }

    #[test]
    fn a_master_that_takes_nothing_ends_a_write_at_the_stall_deadline() {
        let (_dir, listener, client, _reader) = deaf_master();
        let _accepted = listener.accept().unwrap();
        let far = Instant::now() + Duration::from_secs(60);
        let t0 = Instant::now();
        let (went, err) = client.push(&vec![b'x'; 1 << 20], far).unwrap_err();
        let took = t0.elapsed();
        assert_eq!(err.raw_os_error(), Some(libc::EAGAIN));
        assert!(went > 0 && went < 1 << 20 && went % PUSH_MAX == 0, "{went}");
        assert!(
            took >= STALL && took < STALL + Duration::from_secs(2),
            "{took:?}"
        );
        // Still stalled: the next write fails at once, having sent nothing.
        let t0 = Instant::now();
        let (went, err) = client.push(b"more", far).unwrap_err();
        assert_eq!((went, err.raw_os_error()), (0, Some(libc::EAGAIN)));
        assert!(t0.elapsed() < Duration::from_millis(500));
    }

    #[test]
    fn close_ends_waiting_writers_at_once_and_packets_stay_whole() {
        let (_dir, listener, client, _reader) = deaf_master();
        let (mut master, _) = listener.accept().unwrap();
        let client = std::sync::Arc::new(client);
        let far = Instant::now() + Duration::from_secs(60);
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let c = client.clone();
                std::thread::spawn(move || {
                    let t0 = Instant::now();
                    let r = c.push(&vec![b'y'; 1 << 20], far);
                    (r.map_err(|(_, e)| e.raw_os_error()), t0.elapsed())
                })
            })
            .collect();
        // Let them fill the socket and wait, then stop the session.
        std::thread::sleep(Duration::from_millis(300));
        let t0 = Instant::now();
        client.close();
        for w in writers {
            let (result, _) = w.join().unwrap();
            assert_eq!(result, Err(Some(libc::EPIPE)));
        }
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
        // Everything that reached the master is whole PUSH packets.
        let mut got = Vec::new();
        master.read_to_end(&mut got).unwrap();
        assert!(!got.is_empty() && got.len() % 10 == 0, "{}", got.len());
        for p in got.chunks(10) {
            assert_eq!(&p[..2], b"\x00\x08");
            assert!(p[2..].iter().all(|b| *b == b'y'));
        }
        let (went, err) = client.push(b"late", far).unwrap_err();
        assert_eq!((went, err.raw_os_error()), (0, Some(libc::EPIPE)));
    }

    #[test]
    fn a_resize_behind_a_stuck_write_gives_up_at_once() {
        let (_dir, listener, client, _reader) = deaf_master();
        let _accepted = listener.accept().unwrap();
        let client = std::sync::Arc::new(client);
        let far = Instant::now() + Duration::from_secs(60);
        let writer = {
            let c = client.clone();
            std::thread::spawn(move || c.push(&vec![b'z'; 1 << 20], far))
        };
        let until = Instant::now() + Duration::from_secs(5);
        while client.stalled().is_none() {
            assert!(Instant::now() < until, "the write never filled the socket");
            std::thread::sleep(Duration::from_millis(5));
        }
        let t0 = Instant::now();
        let err = client.resize(80, 24, far).unwrap_err();
        assert_eq!(err.error.raw_os_error(), Some(libc::EAGAIN));
        assert!(t0.elapsed() < CONTROL_PATIENCE + Duration::from_millis(300));
        client.close();
        assert!(writer.join().unwrap().is_err());
    }

    #[test]
    fn a_busy_master_still_answers_and_a_missing_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.sock");
        assert!(!answers(&path));
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        // Never accepted: the listen queue fills, and connecting must not hang.
        for _ in 0..1000 {
            assert!(answers(&path));
        }
    }

    #[test]
    fn winsize_is_rows_then_cols() {
        let w = winsize(120, 40);
        assert_eq!(u16::from_ne_bytes([w[0], w[1]]), 40);
        assert_eq!(u16::from_ne_bytes([w[2], w[3]]), 120);
    }
}
