//! Reads of `scrollback` held briefly at the end, for readers that follow.
//!
//! A reader that has found nothing at the end twice in a row is polling for
//! what comes next (an agent manager's loop, `less +F`); answering it "end
//! of file" again at once makes it spin against the daemon, taking a CPU
//! from the very processes that produce the output. Its read is instead
//! kept for up to [`HOLD`] and answered by the session's output reader as
//! soon as output arrives, or at the end of the hold with nothing, as
//! before. `cat`, `grep` and `tail -f` never read twice at the end, so they
//! never wait; `O_NONBLOCK` readers never do either.
//!
//! No request thread waits: the reply is kept here and sent from the output
//! reader (after the ring's append, outside its lock; past a few in a burst
//! it hands the rest on) or from this module's one timer thread. A hold is
//! short enough that a signal to the reader (which the kernel cannot pass
//! on while a read is out) waits no longer than that.

use crate::core::Files;
use crate::sync::{lock, wait, wait_timeout};
use crate::terminal::ring::{Scrollback, View};
use fuser::ReplyData;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a following reader's read is kept waiting for output.
pub const HOLD: Duration = Duration::from_millis(5);
/// Reads held at once; past this a read is answered at once.
const MAX_HELD: usize = 4096;
/// Held reads the output reader answers itself within [`BURST`]; the rest
/// go to the timer thread, so that many followers of one session cannot
/// hold up the reading of its output.
const INLINE_MAX: u32 = 8;
const BURST: Duration = Duration::from_millis(1);
/// How long the timer thread keeps waking every [`HOLD`] after its last
/// hold before it sleeps until the next: a follower that holds again within
/// that time does not have to wake it.
const LINGER: Duration = Duration::from_millis(200);

thread_local! {
    /// When this thread's current burst of inline answers began, and how
    /// many it has given.
    static INLINE: std::cell::Cell<Option<(Instant, u32)>> = const { std::cell::Cell::new(None) };
}

/// Whether the calling thread may answer one more held read itself.
fn inline_allowed() -> bool {
    INLINE.with(|cell| {
        let now = Instant::now();
        match cell.get() {
            Some((start, n)) if now.duration_since(start) < BURST => {
                cell.set(Some((start, n + 1)));
                n < INLINE_MAX
            }
            _ => {
                cell.set(Some((now, 1)));
                true
            }
        }
    })
}

/// A read waiting for output.
struct Pending {
    reply: ReplyData,
    offset: u64,
    size: u32,
    /// Which hold of the handle this is, so the timer never answers a
    /// later one early.
    serial: u64,
}

/// One `scrollback` handle that follows: at most one held read and one
/// waker on the ring at a time.
struct Follower {
    fh: u64,
    pending: Mutex<Option<Pending>>,
    /// A waker of this handle is registered on the ring (it stays there
    /// until the next append, even when the hold ended before).
    armed: AtomicBool,
}

impl Follower {
    /// Whether hold `serial` is still waiting for its answer.
    fn holds(&self, serial: u64) -> bool {
        lock(&self.pending)
            .as_ref()
            .is_some_and(|p| p.serial == serial)
    }

    /// Answers the held read, if one is still there, with what the ring
    /// holds at its offset now.
    fn answer(&self, files: &Files, serial: Option<u64>) {
        let pending = {
            let mut slot = lock(&self.pending);
            match (&*slot, serial) {
                (Some(p), Some(s)) if p.serial != s => return,
                (None, _) => return,
                _ => slot.take(),
            }
        };
        if let Some(p) = pending {
            answer_read(files, self.fh, p.offset, p.size, p.reply);
        }
    }
}

fn answer_read(files: &Files, fh: u64, offset: u64, size: u32, reply: ReplyData) {
    let mut buf = Vec::new();
    match files.read_into(fh, offset, size, &mut buf) {
        Ok(()) => reply.data(&buf),
        Err(e) => reply.error(fuser::Errno::from_i32(e.errno)),
    }
}

struct Timers {
    /// Every hold lasts [`HOLD`], so deadlines come in arrival order.
    queue: VecDeque<(Instant, Arc<Follower>, u64)>,
    /// The timer thread sleeps with no deadline: a new hold must wake it.
    /// Otherwise it wakes by itself at or before any new hold's deadline.
    parked: bool,
    /// Followers whose output came while their session's reader had
    /// answered enough others: answered by the timer thread.
    handed: Vec<Arc<Follower>>,
}

/// The held reads of one mount.
pub struct Follows {
    files: Arc<Files>,
    followers: Mutex<HashMap<u64, Arc<Follower>>>,
    timers: Mutex<Timers>,
    tick: Condvar,
    serial: std::sync::atomic::AtomicU64,
}

impl Follows {
    /// Starts the timer thread.
    pub fn start(files: Arc<Files>) -> std::io::Result<Arc<Follows>> {
        let follows = Arc::new(Follows {
            files,
            followers: Mutex::new(HashMap::new()),
            timers: Mutex::new(Timers {
                queue: VecDeque::new(),
                parked: false,
                handed: Vec::new(),
            }),
            tick: Condvar::new(),
            serial: std::sync::atomic::AtomicU64::new(0),
        });
        let timer = follows.clone();
        std::thread::Builder::new()
            .name("follow-timer".into())
            .spawn(move || timer.run_timers())?;
        Ok(follows)
    }

    /// Holds a read that found nothing at the end of `ring` for a reader
    /// that follows; gives the reply back when it cannot be held.
    pub fn hold(
        self: &Arc<Self>,
        fh: u64,
        offset: u64,
        size: u32,
        reply: ReplyData,
        ring: &Scrollback,
        view: View,
    ) -> Option<ReplyData> {
        if lock(&self.timers).queue.len() >= MAX_HELD {
            return Some(reply);
        }
        let follower = lock(&self.followers)
            .entry(fh)
            .or_insert_with(|| {
                Arc::new(Follower {
                    fh,
                    pending: Mutex::new(None),
                    armed: AtomicBool::new(false),
                })
            })
            .clone();
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        {
            let mut slot = lock(&follower.pending);
            if slot.is_some() {
                // Two reads of one handle at once: the second is not held.
                return Some(reply);
            }
            *slot = Some(Pending {
                reply,
                offset,
                size,
                serial,
            });
        }
        if !follower.armed.swap(true, Ordering::AcqRel) {
            let woken = follower.clone();
            let follows = self.clone();
            let waker = Box::new(move || {
                woken.armed.store(false, Ordering::Release);
                if inline_allowed() {
                    woken.answer(&follows.files, None);
                } else {
                    lock(&follows.timers).handed.push(woken);
                    follows.tick.notify_one();
                }
            });
            if ring.ready_or_wake(&view, Some(waker)) {
                // Output came in between (or the ring keeps too many
                // wakers): answer now.
                follower.armed.store(false, Ordering::Release);
                follower.answer(&self.files, Some(serial));
                return None;
            }
        }
        let deadline = Instant::now() + HOLD;
        let mut timers = lock(&self.timers);
        // Unless it is parked, the timer thread wakes by itself before this
        // deadline: it need not be woken (a wake-up here would take the CPU
        // the output is being made on).
        let parked = timers.parked;
        timers.queue.push_back((deadline, follower, serial));
        drop(timers);
        if parked {
            self.tick.notify_one();
        }
        None
    }

    /// The handle is closed: nothing of it is kept (a waker still on the
    /// ring finds nothing to answer).
    pub fn released(&self, fh: u64) {
        lock(&self.followers).remove(&fh);
    }

    fn run_timers(&self) {
        let mut timers = lock(&self.timers);
        let mut last_hold = Instant::now();
        loop {
            let now = Instant::now();
            let mut due: Vec<(Arc<Follower>, Option<u64>)> = timers
                .handed
                .drain(..)
                .map(|follower| (follower, None))
                .collect();
            while timers.queue.front().is_some_and(|(at, _, _)| *at <= now) {
                if let Some((_, follower, serial)) = timers.queue.pop_front() {
                    due.push((follower, Some(serial)));
                }
            }
            if !due.is_empty() {
                drop(timers);
                for (follower, serial) in due {
                    follower.answer(&self.files, serial);
                }
                timers = lock(&self.timers);
                continue;
            }
            if !timers.queue.is_empty() {
                last_hold = now;
            }
            // Holds the output already answered need no wake-up of their own.
            while timers
                .queue
                .front()
                .is_some_and(|(_, follower, serial)| !follower.holds(*serial))
            {
                timers.queue.pop_front();
            }
            let wake_at = match timers.queue.front() {
                Some((at, _, _)) => Some(*at),
                None if now.duration_since(last_hold) < LINGER => Some(now + HOLD),
                None => None,
            };
            timers = match wake_at {
                Some(at) => wait_timeout(&self.tick, timers, at.saturating_duration_since(now)).0,
                None => {
                    timers.parked = true;
                    let mut woken = wait(&self.tick, timers);
                    woken.parked = false;
                    last_hold = Instant::now();
                    woken
                }
            };
        }
    }
}
