//! How the core answers one kernel request: now, or later. The adapter
//! makes one call per request and translates the answer; which requests
//! wait on a session, a lock or an event is decided here, not there.

use crate::core::{Concern, Core};
use crate::error::{Error, Result};
use crate::terminal::ring::{Scrollback, View};
pub use crate::work::Reply;
use crate::work::{self, Answer};
use std::sync::Arc;

/// The core's answer to a request.
#[must_use = "a request's answer must reach its reply"]
pub enum Step<T> {
    /// Answered now.
    Done(Result<T>),
    /// Answered later: hand the reply to [`Later::reply_to`].
    Later(Later<T>),
}

/// Where a later answer comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waits {
    /// Work that may wait on a session or a lock, run in the pool: the
    /// answer comes when it ends or at its deadline.
    Pool,
    /// An event: the agent took a prompt, a session's state settled.
    Event,
}

/// A request answered later: takes the reply and keeps it until then.
pub struct Later<T> {
    waits: Waits,
    start: Box<dyn FnOnce(Box<dyn Reply<T>>) + Send>,
}

impl<T> Later<T> {
    /// Where the answer comes from.
    pub fn waits(&self) -> Waits {
        self.waits
    }

    /// Hands over the reply; it is answered exactly once.
    pub fn reply_to(self, reply: Box<dyn Reply<T>>) {
        (self.start)(reply)
    }

    /// Parked until an event: `park` keeps the reply.
    pub(in crate::core) fn event(park: impl FnOnce(Box<dyn Reply<T>>) + Send + 'static) -> Self {
        Later {
            waits: Waits::Event,
            start: Box::new(park),
        }
    }
}

impl<T: Send + 'static> Later<T> {
    /// `job` run in the pool, named `what` in its messages. When the pool
    /// gives up on it (full, or past the deadline) the reason goes where
    /// `concern` says, and to the reply. `urgent` work may take a place
    /// kept for it (a `stop` however many writes are stuck).
    pub(in crate::core) fn pool(
        core: Arc<Core>,
        what: String,
        concern: Concern,
        urgent: bool,
        job: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Self {
        Later {
            waits: Waits::Pool,
            start: Box::new(move |reply| {
                let answer = FromPool {
                    reply,
                    core: core.clone(),
                    concern,
                };
                let pool = core.work();
                if urgent {
                    pool.submit_urgent(what, work::DEADLINE, answer, job);
                } else {
                    pool.submit(what, work::DEADLINE, answer, job);
                }
            }),
        }
    }
}

impl<T: Send + 'static> Step<T> {
    /// Waits for the answer here: for callers that are not the kernel's
    /// request threads (tests that drive the core without a mount).
    pub fn wait(self) -> Result<T> {
        match self {
            Step::Done(result) => result,
            Step::Later(later) => {
                let (tx, rx) = std::sync::mpsc::channel();
                later.reply_to(Box::new(Sender(tx)));
                rx.recv()
                    .unwrap_or_else(|_| Err(Error::new(libc::EIO, "the answer was dropped")))
            }
        }
    }
}

struct Sender<T>(std::sync::mpsc::Sender<Result<T>>);

impl<T: Send + 'static> Reply<T> for Sender<T> {
    fn answer(self: Box<Self>, result: Result<T>) {
        let _ = self.0.send(result);
    }
}

/// The pool's answer to a reply.
struct FromPool<T> {
    reply: Box<dyn Reply<T>>,
    core: Arc<Core>,
    concern: Concern,
}

impl<T: Send + 'static> Answer<T> for FromPool<T> {
    fn done(self, result: Result<T>) {
        self.reply.answer(result);
    }

    fn abandon(self, err: Error) {
        let err = self.core.record(&self.concern, err);
        self.reply.answer(Err(err));
    }
}

/// `reply` as the pool answers it: a refusal of the pool's is recorded
/// where `concern` says.
pub(in crate::core) fn recording<T: Send + 'static>(
    core: Arc<Core>,
    concern: Concern,
    reply: Box<dyn Reply<T>>,
) -> impl Answer<T> {
    FromPool {
        reply,
        core,
        concern,
    }
}

/// An opened file: its handle, and whether its `flush` does anything (the
/// kernel may skip the round trip where it does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub fh: u64,
    pub flushes: bool,
}

/// The answer to a `read`.
pub enum ReadStep {
    /// The bytes are in the caller's buffer; none at the end of the file.
    Data,
    /// Nothing at the end of a `scrollback` whose reader follows the
    /// output: the read may be held until output comes.
    Follow(Arc<Scrollback>, View),
    /// A blocked `wait`, answered when the session settles.
    Later(Later<Vec<u8>>),
    Failed(Error),
}
