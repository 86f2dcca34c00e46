//! The masters' output, read for every live session by a few threads, each
//! waiting in an epoll set of its own, rather than by a thread per session:
//! a live session costs its socket and an entry here, not a thread, its
//! stack and a buffer.
//!
//! A session belongs to one thread for its whole life, so its sink sees the
//! bytes in order and the scheduler finds the same thread woken for it each
//! time, as it did with a thread of its own. The sets are level-triggered: a
//! thread reads at most [`READS_PER_TURN`] buffers of one session, then
//! looks at its other sessions, and comes back to what is left, so a session
//! that floods its terminal cannot keep the others waiting. The masters
//! never find our sockets full for long: a sink only copies into a ring and
//! wakes readers.

use crate::sync::lock;
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::socket::{recv, MsgFlags};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// What one `recv` takes at most: the most a master sends at once.
const BUFFER: usize = 64 * 1024;
/// Buffers of one session a thread reads before it looks at the others.
const READS_PER_TURN: usize = 4;
/// Ready sessions one `epoll_wait` hands a thread.
const EVENTS: usize = 64;

/// Takes each chunk of a session's output, in order.
pub type Sink = Box<dyn FnMut(&[u8]) + Send>;
/// Told once how the reading of a session ended, on a thread of its own.
pub type OnEnd = Box<dyn FnOnce(Ended) + Send>;

/// How the reading of a session ended.
#[derive(Debug)]
pub enum Ended {
    /// The master closed its end: the program is gone or it was stopped.
    Closed,
    /// The socket failed.
    Failed(std::io::Error),
    /// The sink panicked; the message.
    Panicked(String),
}

struct Session {
    stream: UnixStream,
    sink: Sink,
    on_end: OnEnd,
}

/// One thread's sessions.
struct Shard {
    epoll: Epoll,
    /// By token. A session being read is out of the map, with the thread.
    sessions: Mutex<HashMap<u64, Session>>,
}

/// The output readers of one daemon. Their threads start with the first
/// session watched.
pub struct OutputReaders {
    threads: usize,
    shards: OnceLock<Vec<Arc<Shard>>>,
    starting: Mutex<()>,
    next_token: AtomicU64,
}

impl Default for OutputReaders {
    /// One thread per CPU, two to four.
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self::with_threads(cpus.clamp(2, 4))
    }
}

impl std::fmt::Debug for OutputReaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let watched: usize = self.shards.get().map_or(0, |shards| {
            shards.iter().map(|s| lock(&s.sessions).len()).sum()
        });
        f.debug_struct("OutputReaders")
            .field("threads", &self.threads)
            .field("sessions", &watched)
            .finish()
    }
}

impl OutputReaders {
    pub fn with_threads(threads: usize) -> Self {
        OutputReaders {
            threads: threads.max(1),
            shards: OnceLock::new(),
            starting: Mutex::new(()),
            next_token: AtomicU64::new(0),
        }
    }

    /// Reads `stream` until it closes, handing each chunk to `sink`; then
    /// `on_end`.
    pub fn watch(&self, stream: UnixStream, sink: Sink, on_end: OnEnd) -> std::io::Result<()> {
        let shards = self.start()?;
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let shard = &shards[(token % shards.len() as u64) as usize];
        // Level-triggered: output that comes before the session is in the
        // map is reported again once it is.
        shard
            .epoll
            .add(&stream, EpollEvent::new(EpollFlags::EPOLLIN, token))?;
        lock(&shard.sessions).insert(
            token,
            Session {
                stream,
                sink,
                on_end,
            },
        );
        Ok(())
    }

    /// The shards, with their threads started on first use.
    fn start(&self) -> std::io::Result<&Vec<Arc<Shard>>> {
        if let Some(shards) = self.shards.get() {
            return Ok(shards);
        }
        let _starting = lock(&self.starting);
        if let Some(shards) = self.shards.get() {
            return Ok(shards);
        }
        let mut shards = Vec::with_capacity(self.threads);
        for _ in 0..self.threads {
            shards.push(Arc::new(Shard {
                epoll: Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?,
                sessions: Mutex::new(HashMap::new()),
            }));
        }
        // Published only with all its threads running (a failed start is
        // tried again by the next session).
        for (i, shard) in shards.iter().enumerate() {
            let shard = shard.clone();
            std::thread::Builder::new()
                .name(format!("output-{i}"))
                .spawn(move || shard.run())?;
        }
        Ok(self.shards.get_or_init(|| shards))
    }
}

impl Shard {
    fn run(&self) {
        let mut buf = vec![0u8; BUFFER];
        let mut events = [EpollEvent::empty(); EVENTS];
        loop {
            let n = match self.epoll.wait(&mut events, EpollTimeout::NONE) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    log::error!("waiting for terminal output failed: {e}");
                    return;
                }
            };
            for event in &events[..n] {
                let token = event.data();
                let Some(session) = lock(&self.sessions).remove(&token) else {
                    continue;
                };
                self.take_turn(token, session, &mut buf);
            }
        }
    }

    /// Reads what `session` has, up to a turn's worth; then puts it back,
    /// or ends it.
    fn take_turn(&self, token: u64, mut session: Session, buf: &mut [u8]) {
        let mut ended = None;
        for _ in 0..READS_PER_TURN {
            match recv(session.stream.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT) {
                Ok(0) => {
                    ended = Some(Ended::Closed);
                    break;
                }
                Ok(n) => {
                    let sink = &mut session.sink;
                    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| sink(&buf[..n]))) {
                        ended = Some(Ended::Panicked(crate::terminal::vt_mirror::panic_message(
                            panic.as_ref(),
                        )));
                        break;
                    }
                    // A short read emptied the socket.
                    if n < buf.len() {
                        break;
                    }
                }
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    ended = Some(Ended::Failed(e.into()));
                    break;
                }
            }
        }
        let Some(ended) = ended else {
            lock(&self.sessions).insert(token, session);
            return;
        };
        let _ = self.epoll.delete(&session.stream);
        let Session { stream, on_end, .. } = session;
        drop(stream);
        // What follows an end may write files; the other sessions' output
        // does not wait for it. Done here only if no thread can be had.
        let job = Arc::new(Mutex::new(Some((on_end, ended))));
        let for_thread = job.clone();
        let handed = std::thread::Builder::new()
            .name("output-ended".into())
            .spawn(move || {
                if let Some((on_end, ended)) = lock(&for_thread).take() {
                    finish(on_end, ended);
                }
            });
        if let Err(e) = handed {
            log::warn!("cannot start a thread for an ended session ({e}); ending it here");
            if let Some((on_end, ended)) = lock(&job).take() {
                finish(on_end, ended);
            }
        }
    }
}

fn finish(on_end: OnEnd, ended: Ended) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| on_end(ended))) {
        log::error!(
            "internal error after a session's output ended: {}",
            crate::terminal::vt_mirror::panic_message(panic.as_ref())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    fn collect(
        readers: &OutputReaders,
        stream: UnixStream,
    ) -> mpsc::Receiver<Result<Vec<u8>, String>> {
        let (tx, rx) = mpsc::channel();
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink_got = got.clone();
        readers
            .watch(
                stream,
                Box::new(move |chunk| lock(&sink_got).extend_from_slice(chunk)),
                Box::new(move |ended| {
                    let bytes = std::mem::take(&mut *lock(&got));
                    let _ = tx.send(match ended {
                        Ended::Closed => Ok(bytes),
                        other => Err(format!("{other:?}")),
                    });
                }),
            )
            .unwrap();
        rx
    }

    #[test]
    fn every_session_gets_its_bytes_in_order_and_one_end() {
        let readers = OutputReaders::default();
        let mut sessions = Vec::new();
        for s in 0..20u32 {
            let (mut master, ours) = UnixStream::pair().unwrap();
            let rx = collect(&readers, ours);
            let data: Vec<u8> = (0..300_000u32)
                .map(|i| (i.wrapping_mul(7) ^ s) as u8)
                .collect();
            let sent = data.clone();
            let writer = std::thread::spawn(move || {
                for piece in sent.chunks(10_007) {
                    master.write_all(piece).unwrap();
                }
            });
            sessions.push((rx, data, writer));
        }
        for (rx, data, writer) in sessions {
            writer.join().unwrap();
            let got = rx.recv_timeout(Duration::from_secs(20)).unwrap().unwrap();
            assert!(
                got == data,
                "a session's bytes differ ({} of {})",
                got.len(),
                data.len()
            );
            assert!(
                rx.recv_timeout(Duration::from_millis(50)).is_err(),
                "ended twice"
            );
        }
    }

    #[test]
    fn a_sink_that_panics_ends_its_session_only() {
        let readers = OutputReaders::default();
        let (mut bad_master, bad) = UnixStream::pair().unwrap();
        let (tx, rx) = mpsc::channel();
        readers
            .watch(
                bad,
                Box::new(|_| panic!("sink broke")),
                Box::new(move |ended| {
                    let _ = tx.send(format!("{ended:?}"));
                }),
            )
            .unwrap();
        let (mut good_master, good) = UnixStream::pair().unwrap();
        let good_rx = collect(&readers, good);
        bad_master.write_all(b"boom").unwrap();
        let why = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(why.contains("sink broke"), "{why}");
        good_master.write_all(b"still read").unwrap();
        drop(good_master);
        assert_eq!(
            good_rx
                .recv_timeout(Duration::from_secs(10))
                .unwrap()
                .unwrap(),
            b"still read"
        );
    }

    #[test]
    fn a_flooding_session_does_not_keep_a_quiet_one_waiting() {
        // One thread: only taking turns lets the quiet session be read.
        let readers = OutputReaders::with_threads(1);
        let (mut flood_master, flood) = UnixStream::pair().unwrap();
        let flood_end = flood_master.try_clone().unwrap();
        // A slow sink and a master that never stops writing.
        readers
            .watch(
                flood,
                Box::new(|_| std::thread::sleep(Duration::from_millis(2))),
                Box::new(|_| {}),
            )
            .unwrap();
        let flooding = std::thread::spawn(move || {
            let chunk = vec![b'y'; 64 * 1024];
            while flood_master.write_all(&chunk).is_ok() {}
        });
        let (mut quiet_master, quiet) = UnixStream::pair().unwrap();
        let (tx, rx) = mpsc::channel();
        readers
            .watch(
                quiet,
                Box::new(move |chunk| {
                    let _ = tx.send(chunk.to_vec());
                }),
                Box::new(|_| {}),
            )
            .unwrap();
        for _ in 0..5 {
            let t = Instant::now();
            quiet_master.write_all(b"ping").unwrap();
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), b"ping");
            assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        }
        flood_end.shutdown(std::net::Shutdown::Both).unwrap();
        flooding.join().unwrap();
    }
}
