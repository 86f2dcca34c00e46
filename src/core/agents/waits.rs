//! Callers blocked in the kernel on a session: reads of `wait`, kept with
//! their kernel replies and answered later by one thread (so no request
//! thread ever waits on a session), and prompts' closes, answered by their
//! work in the pool, which the same thread watches for signals.
//!
//! fuser 0.18 answers the kernel's FUSE_INTERRUPT with ENOSYS, after which
//! the kernel sends none and a caller with a fatal signal stays in the
//! kernel until its request is answered (a `flush` is never interrupted at
//! all). So the thread looks for the callers' signals itself: every
//! [`POLL`] it reads `/proc/TID/status` of each waiting thread and answers
//! EINTR when a signal it does not block is pending (a fatal one also shows
//! as SIGKILL there), or the thread is gone.

use crate::core::Core;
use crate::error::Error;
use crate::key::SessionKey;
use crate::procinfo;
use crate::sync::{lock, wait, wait_timeout};
use crate::terminal::ring::Waker;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

/// How often waiting callers are checked for signals.
pub const POLL: Duration = Duration::from_millis(25);

/// The most reads that may wait at once; more get EAGAIN.
pub const MAX_WAITS: usize = 4096;

/// Where a blocked read's answer goes (a kernel reply, in the daemon).
pub type WaitReply = dyn crate::work::Reply<Vec<u8>>;

struct Pending {
    key: SessionKey,
    /// The calling thread (FUSE gives a thread id).
    tid: u32,
    reply: Box<WaitReply>,
}

/// A `close` whose answer comes from other work (a prompt's), watched for
/// signals by the waits thread until that work answers it.
pub(in crate::core) trait Watched: Send {
    /// The calling thread.
    fn tid(&self) -> u32;
    /// Its work has answered it: no longer watched.
    fn answered(&self) -> bool;
    /// Its caller got a signal or is gone: answers it now, if its work has
    /// not.
    fn interrupt(&self, core: &Core);
}

/// What the waits thread watches.
#[derive(Default)]
struct Blocked {
    reads: Vec<Pending>,
    others: Vec<Box<dyn Watched>>,
}

impl Blocked {
    fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.others.is_empty()
    }
}

#[derive(Default)]
struct Shared {
    pending: Mutex<Blocked>,
    wake: Condvar,
    started: OnceLock<()>,
    /// `poll` callers to tell at the next state change (of any session:
    /// the kernel then asks again).
    pollers: Mutex<Vec<Waker>>,
}

/// The reads waiting for a session to settle.
#[derive(Default, Clone)]
pub(in crate::core) struct Waits {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Waits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let blocked = lock(&self.shared.pending);
        write!(
            f,
            "Waits({}, {})",
            blocked.reads.len(),
            blocked.others.len()
        )
    }
}

impl Waits {
    /// A state changed: the thread looks now rather than at its next poll.
    pub(in crate::core) fn wake(&self) {
        self.shared.wake.notify_all();
        let pollers = std::mem::take(&mut *lock(&self.shared.pollers));
        for tell in pollers {
            tell();
        }
    }

    /// Keeps `waker` for the next state change; false when too many wait
    /// already (the caller then says "ready" and the read finds out).
    fn on_change(&self, waker: Waker) -> bool {
        let mut pollers = lock(&self.shared.pollers);
        if pollers.len() >= MAX_WAITS {
            return false;
        }
        pollers.push(waker);
        true
    }

    /// How many reads of `wait` are blocked.
    pub(in crate::core) fn len(&self) -> usize {
        lock(&self.shared.pending).reads.len()
    }

    /// Watches `caller` for signals until its work answers it.
    pub(in crate::core) fn watch(&self, core: &Arc<Core>, caller: Box<dyn Watched>) {
        lock(&self.shared.pending).others.push(caller);
        self.start(core);
        self.shared.wake.notify_all();
    }

    /// Starts the waits thread if it is not running.
    fn start(&self, core: &Arc<Core>) {
        let shared = &self.shared;
        shared.started.get_or_init(|| {
            let core = Arc::downgrade(core);
            let shared = shared.clone();
            if let Err(e) = std::thread::Builder::new()
                .name("waits".into())
                .spawn(move || watch(&core, &shared))
            {
                log::error!("cannot start the waits thread: {e}");
            }
        });
    }
}

/// Whether thread `tid` has a signal pending that it does not block, or is
/// gone: its blocked read must end now.
pub fn interrupted(tid: u32) -> bool {
    match procinfo::status(tid) {
        Some(status) => signalled(&status),
        None => true,
    }
}

/// Whether a thread whose `/proc/TID/status` this is has a signal pending
/// that it does not block, or is a zombie.
fn signalled(status: &str) -> bool {
    let mask = |name: &str| {
        procinfo::status_field(status, name)
            .and_then(|v| u64::from_str_radix(v, 16).ok())
            .unwrap_or(0)
    };
    procinfo::zombie(status) || (mask("SigPnd:") | mask("ShdPnd:")) & !mask("SigBlk:") != 0
}

/// Whether thread `tid`, exiting, does so because a signal killed it. A
/// file it still had open is closed (flushed) by its exit with no signal
/// pending: `cat > prompt` ended with Ctrl-C. Its exit code (the 52nd
/// field of `/proc/TID/stat`) holds the signal from the start of the exit.
/// Only read for a thread that is exiting: one in `execve` closing its
/// close-on-exec files (this flush among them) holds the lock a read of
/// its `stat` waits for (see [`procinfo::status`]).
fn killed(tid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{tid}/stat")) else {
        return false;
    };
    // The fields after the name start with the 3rd.
    stat.rsplit_once(')')
        .and_then(|(_, fields)| fields.split_whitespace().nth(52 - 3))
        .and_then(|code| code.parse::<i64>().ok())
        .is_some_and(|code| code & 0x7f != 0)
}

/// Whether thread `tid`, blocked in a `close`, must be answered now: it has
/// a signal pending, is gone, or is exiting because a signal killed it.
pub(in crate::core) fn close_interrupted(tid: u32) -> bool {
    let Some(status) = procinfo::status(tid) else {
        return true;
    };
    signalled(&status) || (procinfo::exiting(&status) && killed(tid))
}

impl Core {
    /// `poll` on `wait`: readable once the session is settled (a read then
    /// returns at once); otherwise `waker`, when given, is called at the
    /// next state change.
    pub(crate) fn wait_ready_or_wake(&self, key: &SessionKey, waker: Option<Waker>) -> bool {
        // Kept before looking, so that a change in between still wakes.
        if let Some(w) = waker {
            if !self.agents.waits.on_change(w) {
                return true;
            }
        }
        self.settled_for_wait(key).is_some()
    }

    /// A read of `wait` at offset 0 by thread `tid`: answered now when the
    /// session is settled (or with EAGAIN for `O_NONBLOCK`), else kept and
    /// answered when it settles or the caller gets a signal.
    pub fn wait(
        self: &Arc<Self>,
        key: &SessionKey,
        tid: u32,
        nonblock: bool,
        reply: Box<WaitReply>,
    ) {
        if let Err(e) = self.require(key) {
            return reply.answer(Err(e));
        }
        if let Some(state) = self.settled_for_wait(key) {
            return reply.answer(Ok(format!("{state}\n").into_bytes()));
        }
        if nonblock {
            return reply.answer(Err(Error::new(
                libc::EAGAIN,
                format!("{key} is {}", self.agent_state(key)),
            )));
        }
        let shared = &self.agents.waits.shared;
        {
            let mut pending = lock(&shared.pending);
            if pending.reads.len() >= MAX_WAITS {
                drop(pending);
                return reply.answer(Err(Error::new(
                    libc::EAGAIN,
                    format!("{MAX_WAITS} reads of wait are already blocked"),
                )));
            }
            pending.reads.push(Pending {
                key: key.clone(),
                tid,
                reply,
            });
        }
        self.agents.waits.start(self);
        shared.wake.notify_all();
    }
}

/// The one thread that answers blocked `wait` reads and watches the other
/// blocked callers for signals.
fn watch(core: &Weak<Core>, shared: &Shared) {
    loop {
        let blocked = {
            let pending = lock(&shared.pending);
            let pending = if pending.is_empty() {
                wait(&shared.wake, pending)
            } else {
                wait_timeout(&shared.wake, pending, POLL).0
            };
            drop(pending);
            std::mem::take(&mut *lock(&shared.pending))
        };
        let Some(core) = core.upgrade() else { return };
        let mut kept = Vec::with_capacity(blocked.reads.len());
        for p in blocked.reads {
            if let Some(state) = core.settled_for_wait(&p.key) {
                p.reply.answer(Ok(format!("{state}\n").into_bytes()));
            } else if interrupted(p.tid) {
                p.reply.answer(Err(Error::new(
                    libc::EINTR,
                    format!("wait on {} interrupted by a signal", p.key),
                )));
            } else {
                kept.push(p);
            }
        }
        let mut others = Vec::with_capacity(blocked.others.len());
        for caller in blocked.others {
            if caller.answered() {
                continue;
            }
            if close_interrupted(caller.tid()) {
                caller.interrupt(&core);
            } else {
                others.push(caller);
            }
        }
        let mut pending = lock(&shared.pending);
        pending.reads.extend(kept);
        pending.others.extend(others);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_thread_is_watched_on_and_a_gone_one_is_answered() {
        let me = nix::unistd::gettid().as_raw() as u32;
        assert!(!killed(me), "running, not exiting");
        assert!(!close_interrupted(me));
        // No such thread: gone.
        assert!(close_interrupted(u32::MAX));
    }
}
