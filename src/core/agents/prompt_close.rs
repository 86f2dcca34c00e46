//! A prompt's `close`: answered by the prompt's work in the pool, or with
//! EINTR as soon as the writer gets a signal or is gone (the waits thread
//! watches it as it watches blocked `wait` reads: a `flush` is never
//! interrupted by the kernel). A prompt not typed by then is withdrawn: it
//! leaves its session's queue and is never typed. One whose typing began
//! is finished, Enter included: a half-typed prompt left in the prompt box
//! would be typed over by the next one. A writer killed by a signal closes
//! at its exit: its prompt is withdrawn at once (Ctrl-C on `cat > prompt`).

use crate::core::agents::waits::{close_interrupted, Watched};
use crate::core::{Concern, Core};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::sync::lock;
use crate::work::Answer;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// How far a prompt got: waiting (for its turn in the queue, the session,
/// idle), being typed, or withdrawn before it was typed.
#[derive(Debug, Default)]
pub(in crate::core) struct PromptStage(AtomicU8);

const WAITING: u8 = 0;
const TYPING: u8 = 1;
const WITHDRAWN: u8 = 2;

impl PromptStage {
    /// From waiting to typing; false when the prompt was withdrawn first.
    pub(in crate::core) fn begin_typing(&self) -> bool {
        self.leave_waiting(TYPING)
    }

    /// From waiting to withdrawn; false when typing began first.
    pub(in crate::core) fn withdraw(&self) -> bool {
        self.leave_waiting(WITHDRAWN)
    }

    fn leave_waiting(&self, to: u8) -> bool {
        self.0
            .compare_exchange(WAITING, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub(in crate::core) fn is_withdrawn(&self) -> bool {
        self.0.load(Ordering::Acquire) == WITHDRAWN
    }
}

/// Why a prompt was not typed: its writer was interrupted first.
pub(in crate::core) fn withdrawn(key: &SessionKey) -> Error {
    Error::new(
        libc::EINTR,
        format!("prompt to {key} withdrawn: the writer was interrupted before it was typed"),
    )
}

/// A prompt's close and its kernel reply, answered once: by the prompt's
/// work or by the writer's signal, whichever comes first.
struct PromptClose<A> {
    key: SessionKey,
    /// The closing thread (FUSE gives a thread id).
    tid: u32,
    stage: Arc<PromptStage>,
    reply: Mutex<Option<A>>,
}

impl<A> PromptClose<A> {
    fn take(&self) -> Option<A> {
        lock(&self.reply).take()
    }
}

/// The pool's side of a [`PromptClose`]: the work's result, unless the
/// writer was answered already.
struct FromWork<A>(Arc<PromptClose<A>>);

impl<A: Answer<()>> Answer<()> for FromWork<A> {
    fn done(self, result: Result<()>) {
        if let Some(reply) = self.0.take() {
            reply.done(result);
        }
    }

    fn abandon(self, err: Error) {
        match self.0.take() {
            Some(reply) => reply.abandon(err),
            // The writer heard already; the log still hears of it.
            None => log::log!(err.level(), "{}", err.message),
        }
    }
}

impl<A: Answer<()>> Watched for Arc<PromptClose<A>> {
    fn tid(&self) -> u32 {
        self.tid
    }

    fn answered(&self) -> bool {
        lock(&self.reply).is_none()
    }

    fn interrupt(&self, core: &Core) {
        let Some(reply) = self.take() else { return };
        let err = if self.stage.withdraw() {
            withdrawn(&self.key)
        } else {
            Error::new(
                libc::EINTR,
                format!(
                    "prompt to {}: the writer was interrupted after typing began; it is finished (Enter) all the same",
                    self.key
                ),
            )
        };
        reply.done(Err(core.record(&Concern::Session(self.key.clone()), err)));
    }
}

impl Core {
    /// A `flush` of a `prompt` handle by thread `tid`: [`Core::prompt`] runs
    /// in the pool and its result goes to `reply`, unless the writer gets a
    /// signal first (then EINTR, at most a [`crate::core::agents::waits::POLL`] later).
    /// Thread 0 (a writer in a pid namespace the mount cannot see) cannot
    /// be watched: its close waits for the prompt.
    pub fn prompt_at_close<A: Answer<()>>(
        self: &Arc<Self>,
        key: SessionKey,
        text: String,
        tid: u32,
        reply: A,
    ) {
        let stage = Arc::new(PromptStage::default());
        let close = Arc::new(PromptClose {
            key: key.clone(),
            tid,
            stage: stage.clone(),
            reply: Mutex::new(Some(reply)),
        });
        let watched = tid != 0;
        if watched && close_interrupted(tid) {
            return close.interrupt(self);
        }
        let core = self.clone();
        self.work().submit(
            format!("prompt to {key}"),
            self.prompt_deadline(),
            FromWork(close.clone()),
            move || core.prompt(&key, &text, &stage),
        );
        if watched {
            self.agents.waits.watch(self, Box::new(close));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_is_either_typed_or_withdrawn() {
        let typed = PromptStage::default();
        assert!(typed.begin_typing());
        assert!(!typed.withdraw(), "typing began: not withdrawn");
        assert!(!typed.is_withdrawn());

        let gone = PromptStage::default();
        assert!(gone.withdraw());
        assert!(gone.is_withdrawn());
        assert!(!gone.begin_typing(), "withdrawn: never typed");
    }

    /// Sends what it is answered with.
    struct Sink(std::sync::mpsc::Sender<Result<()>>);

    impl Answer<()> for Sink {
        fn done(self, result: Result<()>) {
            let _ = self.0.send(result);
        }
    }

    #[test]
    fn a_close_answered_by_its_work_is_no_longer_watched() {
        let (tx, rx) = std::sync::mpsc::channel();
        let close = Arc::new(PromptClose {
            key: SessionKey::parse("shell:p").unwrap(),
            tid: 1,
            stage: Arc::default(),
            reply: Mutex::new(Some(Sink(tx))),
        });
        assert!(!close.answered());
        FromWork(close.clone()).done(Ok(()));
        assert_eq!(rx.try_recv().unwrap(), Ok(()));
        assert!(close.answered());
        // A later result finds the reply gone.
        FromWork(close.clone()).done(Err(Error::invalid("late")));
        assert!(rx.try_recv().is_err());
    }
}
