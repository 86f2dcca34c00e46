//! Slow operations off the request threads.
//!
//! fuser calls the filesystem from a few threads. Anything that can wait on
//! a session — a write to a master that is not reading, a launch and its
//! wait for the master, stop's grace period, an archive — is handed to this
//! pool together with its reply, so those threads only ever do quick work.
//! The pool answers when the work is done, or with `ETIMEDOUT` at the
//! operation's deadline while the work itself goes on; when [`LIMIT`]
//! operations are already in flight it refuses a new one with `EAGAIN` at
//! once. Nothing here knows FUSE: a reply is anything that implements
//! [`Answer`].

use crate::error::{Error, Result};
use crate::sync::{lock, wait, wait_timeout};
use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Slow operations that may be in flight at once (queued or running).
pub const LIMIT: usize = 64;

/// Places beyond [`LIMIT`] that only urgent operations (`stop`) may take,
/// so a pool full of stuck writes cannot keep a session from being stopped.
pub const RESERVED: usize = 8;

/// How long a slow operation may take before its caller gets `ETIMEDOUT`.
pub const DEADLINE: Duration = Duration::from_secs(15);

/// How long an idle pool thread waits for work before it exits.
const IDLE: Duration = Duration::from_secs(30);

/// A reply answered once, from wherever the answer comes: the pool, the
/// waits thread, a prompt taken.
pub trait Reply<T>: Send + 'static {
    fn answer(self: Box<Self>, result: Result<T>);
}

/// Where a slow operation's result goes: a kernel reply, in the daemon.
pub trait Answer<T>: Send + 'static {
    /// The operation finished in time.
    fn done(self, result: Result<T>);

    /// The pool refused the operation or its deadline passed; the work may
    /// still be running. Logged here unless the answer records it itself
    /// (a kernel reply records it where its user reads it).
    fn abandon(self, err: Error)
    where
        Self: Sized,
    {
        log::log!(err.level(), "{}", err.message);
        self.done(Err(err));
    }
}

type Task = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Queue {
    tasks: VecDeque<Task>,
    idle: usize,
    threads: usize,
}

/// Deadlines still to watch, keyed by (when, operation id).
type Timers = BTreeMap<(Instant, u64), Task>;

struct Inner {
    limit: usize,
    queue: Mutex<Queue>,
    work_ready: Condvar,
    timers: Mutex<Timers>,
    timers_changed: Condvar,
    watchdog: OnceLock<()>,
    in_flight: AtomicUsize,
    next_id: AtomicU64,
    refused: AtomicU64,
    timed_out: AtomicU64,
}

/// What root `status` shows of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    pub in_flight: usize,
    pub limit: usize,
    /// Extra places for `stop` alone.
    pub reserved: usize,
    pub threads: usize,
    /// Operations refused with `EAGAIN` since start because the pool was full.
    pub refused: u64,
    /// Operations answered with `ETIMEDOUT` since start.
    pub timed_out: u64,
}

/// A bounded pool of threads for slow operations, started on first use.
pub struct Pool {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Pool").field(&self.stats()).finish()
    }
}

/// Takes the answer out of its slot: whoever comes first (the work or the
/// deadline) answers, the other finds it gone.
fn take<A>(slot: &Mutex<Option<A>>) -> Option<A> {
    lock(slot).take()
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new(LIMIT)
    }
}

impl Pool {
    pub fn new(limit: usize) -> Pool {
        Pool {
            inner: Arc::new(Inner {
                limit: limit.max(1),
                queue: Mutex::new(Queue::default()),
                work_ready: Condvar::new(),
                timers: Mutex::new(BTreeMap::new()),
                timers_changed: Condvar::new(),
                watchdog: OnceLock::new(),
                in_flight: AtomicUsize::new(0),
                next_id: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                timed_out: AtomicU64::new(0),
            }),
        }
    }

    pub fn stats(&self) -> Stats {
        Stats {
            in_flight: self.inner.in_flight.load(Ordering::Relaxed),
            limit: self.inner.limit,
            reserved: RESERVED,
            threads: lock(&self.inner.queue).threads,
            refused: self.inner.refused.load(Ordering::Relaxed),
            timed_out: self.inner.timed_out.load(Ordering::Relaxed),
        }
    }

    /// Runs `work` on a pool thread and gives its result to `answer`, or
    /// `ETIMEDOUT` to `answer` once `deadline` has passed. When the pool is
    /// full, `answer` gets `EAGAIN` before this returns.
    pub fn submit<T, A>(
        &self,
        what: String,
        deadline: Duration,
        answer: A,
        work: impl FnOnce() -> Result<T> + Send + 'static,
    ) where
        T: Send + 'static,
        A: Answer<T>,
    {
        self.submit_within(self.inner.limit, what, deadline, answer, work);
    }

    /// [`Pool::submit`] for an urgent operation, which may also take one of
    /// the [`RESERVED`] places.
    pub fn submit_urgent<T, A>(
        &self,
        what: String,
        deadline: Duration,
        answer: A,
        work: impl FnOnce() -> Result<T> + Send + 'static,
    ) where
        T: Send + 'static,
        A: Answer<T>,
    {
        self.submit_within(self.inner.limit + RESERVED, what, deadline, answer, work);
    }

    fn submit_within<T, A>(
        &self,
        cap: usize,
        what: String,
        deadline: Duration,
        answer: A,
        work: impl FnOnce() -> Result<T> + Send + 'static,
    ) where
        T: Send + 'static,
        A: Answer<T>,
    {
        let inner = &self.inner;
        let reserved = inner
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            });
        if reserved.is_err() {
            inner.refused.fetch_add(1, Ordering::Relaxed);
            let err = Error::new(
                libc::EAGAIN,
                format!(
                    "{what}: refused, {} slow operations are already in flight; try again",
                    inner.limit
                ),
            );
            answer.abandon(err);
            return;
        }
        let slot = Arc::new(Mutex::new(Some(answer)));
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let due = (Instant::now() + deadline, id);
        {
            let slot = slot.clone();
            let what = what.clone();
            let timed_out = self.inner.clone();
            let expire: Task = Box::new(move || {
                if let Some(answer) = take(&slot) {
                    timed_out.timed_out.fetch_add(1, Ordering::Relaxed);
                    let err = Error::new(
                        libc::ETIMEDOUT,
                        format!(
                            "{what} did not finish within {} s; it goes on in the background",
                            deadline.as_secs_f32()
                        ),
                    );
                    answer.abandon(err);
                }
            });
            self.start_watchdog();
            lock(&inner.timers).insert(due, expire);
            inner.timers_changed.notify_one();
        }
        let pool = self.inner.clone();
        let task: Task = Box::new(move || {
            let result = catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| {
                Err(Error::new(libc::EIO, format!("{what} failed: it panicked"))
                    .at_level(log::Level::Error))
            });
            lock(&pool.timers).remove(&due);
            match take(&slot) {
                Some(answer) => answer.done(result),
                None => match result {
                    Ok(_) => log::info!("{what} finished after its deadline"),
                    Err(e) => log::warn!("{what} failed after its deadline: {}", e.message),
                },
            }
            pool.in_flight.fetch_sub(1, Ordering::AcqRel);
        });
        self.enqueue(task);
    }

    fn enqueue(&self, task: Task) {
        let mut queue = lock(&self.inner.queue);
        queue.tasks.push_back(task);
        // Each queued task needs a thread of its own: one waiting, or a new one.
        if queue.idle >= queue.tasks.len() {
            self.inner.work_ready.notify_one();
            return;
        }
        if queue.threads >= self.inner.limit + RESERVED {
            return;
        }
        let inner = self.inner.clone();
        let spawned = std::thread::Builder::new()
            .name("slow-op".into())
            .spawn(move || worker(&inner));
        match spawned {
            Ok(_) => queue.threads += 1,
            // The threads there are take the task when they are free.
            Err(e) => log::error!("cannot start a thread for slow operations: {e}"),
        }
    }

    fn start_watchdog(&self) {
        self.inner.watchdog.get_or_init(|| {
            let inner = self.inner.clone();
            if let Err(e) = std::thread::Builder::new()
                .name("deadlines".into())
                .spawn(move || watchdog(&inner))
            {
                log::error!("cannot start the deadline thread: {e}");
            }
        });
    }
}

fn worker(inner: &Inner) {
    let mut queue = lock(&inner.queue);
    loop {
        if let Some(task) = queue.tasks.pop_front() {
            drop(queue);
            task();
            queue = lock(&inner.queue);
            continue;
        }
        queue.idle += 1;
        let (q, waited) = wait_timeout(&inner.work_ready, queue, IDLE);
        queue = q;
        queue.idle -= 1;
        if waited.timed_out() && queue.tasks.is_empty() {
            queue.threads -= 1;
            return;
        }
    }
}

/// Answers every operation whose deadline passed before its work finished.
fn watchdog(inner: &Inner) {
    let mut timers = lock(&inner.timers);
    loop {
        let now = Instant::now();
        let next = timers.keys().next().copied();
        match next {
            Some(due) if due.0 <= now => {
                let expire = timers.remove(&due).expect("the key was just seen");
                drop(timers);
                expire();
                timers = lock(&inner.timers);
            }
            Some(due) => {
                timers = wait_timeout(&inner.timers_changed, timers, due.0 - now).0;
            }
            None => {
                timers = wait(&inner.timers_changed, timers);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// An answer that reports what it got on a channel.
    struct Sink(mpsc::Sender<Result<u32>>);

    impl Answer<u32> for Sink {
        fn done(self, result: Result<u32>) {
            let _ = self.0.send(result);
        }
    }

    #[test]
    fn answers_with_the_result_off_the_calling_thread() {
        let pool = Pool::new(4);
        let (tx, rx) = mpsc::channel();
        let caller = std::thread::current().id();
        pool.submit("add".into(), DEADLINE, Sink(tx), move || {
            assert_ne!(std::thread::current().id(), caller);
            Ok(2 + 2)
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Ok(4));
        let until = Instant::now() + Duration::from_secs(5);
        while pool.stats().in_flight != 0 {
            assert!(Instant::now() < until, "the operation is still counted");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_full_pool_refuses_at_once_and_a_late_one_times_out() {
        let pool = Pool::new(2);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let (tx, rx) = mpsc::channel();
        for _ in 0..2 {
            let release = release_rx.clone();
            pool.submit(
                "stuck".into(),
                Duration::from_millis(200),
                Sink(tx.clone()),
                move || {
                    let _ = lock(&release).recv();
                    Ok(1)
                },
            );
        }
        assert_eq!(pool.stats().in_flight, 2);
        let t0 = Instant::now();
        pool.submit("third".into(), DEADLINE, Sink(tx.clone()), || Ok(3));
        let refused = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(refused.unwrap_err().errno, libc::EAGAIN);
        assert!(t0.elapsed() < Duration::from_millis(150), "refused at once");
        for _ in 0..2 {
            let late = rx.recv_timeout(Duration::from_secs(5)).unwrap();
            assert_eq!(late.unwrap_err().errno, libc::ETIMEDOUT);
        }
        assert_eq!(pool.stats().refused, 1);
        // A stop still gets a place of its own.
        pool.submit_urgent("stop".into(), DEADLINE, Sink(tx.clone()), || Ok(4));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Ok(4));
        assert_eq!(pool.stats().timed_out, 2);
        // Still running past the deadline, so still counted; then freed.
        let until = Instant::now() + Duration::from_secs(5);
        while pool.stats().in_flight != 2 {
            assert!(Instant::now() < until, "the stop is still counted");
            std::thread::yield_now();
        }
        release_tx.send(()).unwrap();
        release_tx.send(()).unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while pool.stats().in_flight != 0 {
            assert!(Instant::now() < until, "finished work is still counted");
            std::thread::yield_now();
        }
        assert!(rx.try_recv().is_err(), "a timed-out operation answers once");
        pool.submit("after".into(), DEADLINE, Sink(tx), || Ok(5));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Ok(5));
    }

    #[test]
    fn a_panic_is_an_eio_answer_and_frees_its_place() {
        let pool = Pool::new(1);
        let (tx, rx) = mpsc::channel();
        pool.submit(
            "boom".into(),
            DEADLINE,
            Sink(tx.clone()),
            || -> Result<u32> { panic!("boom") },
        );
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5))
                .unwrap()
                .unwrap_err()
                .errno,
            libc::EIO
        );
        let until = Instant::now() + Duration::from_secs(5);
        while pool.stats().in_flight != 0 {
            assert!(Instant::now() < until);
            std::thread::yield_now();
        }
        pool.submit("next".into(), DEADLINE, Sink(tx), || Ok(7));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Ok(7));
    }
}
