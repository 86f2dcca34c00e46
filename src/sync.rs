//! Taking a mutex, and waiting on a condition variable, whether or not the
//! mutex is poisoned.
//!
//! A thread that panics while it holds a guard poisons the mutex. A panic
//! in one request does not end the daemon (the pool and the adapter's
//! guard answer it EIO and go on), so giving up on a poisoned mutex would
//! turn that one failure into a panic in every later request that touches
//! the same state: a session, or the whole mount, would stop answering.
//! So the state is taken as the panicking thread left it.

use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError, WaitTimeoutResult};
use std::time::Duration;

/// Locks `m`, poisoned or not.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `cv` with `guard`'s mutex, poisoned or not.
pub fn wait<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `cv` with `guard`'s mutex for at most `timeout`, poisoned or not.
pub fn wait_timeout<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Duration,
) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
    cv.wait_timeout(guard, timeout)
        .unwrap_or_else(PoisonError::into_inner)
}

/// Frees `value` on a thread of its own, so that a request does not wait
/// while a big structure (every session's row, at 100,000 sessions) is
/// taken apart. At most two wait there; past that the caller frees it, so
/// what waits stays bounded.
pub fn drop_elsewhere<T: Send + 'static>(value: T) {
    type Freed = Box<dyn Send>;
    static QUEUE: OnceLock<Option<std::sync::mpsc::SyncSender<Freed>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Freed>(2);
        std::thread::Builder::new()
            .name("drop".into())
            .spawn(move || {
                for freed in rx.iter() {
                    drop(freed);
                    give_back_freed_memory();
                }
            })
            .ok()
            .map(|_| tx)
    });
    if let Some(tx) = queue {
        // Full or gone: the value comes back in the error, freed here.
        let _ = tx.try_send(Box::new(value));
    }
}

/// Hands the pages of freed memory back to the system: after a big
/// structure is freed (a listing, a count of every store), glibc keeps them
/// in the arena of the thread that freed them.
pub fn give_back_freed_memory() {
    // SAFETY: malloc_trim takes a byte count to keep and only rearranges
    // the allocator's free lists; it touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn poisoned(value: u32) -> Arc<Mutex<u32>> {
        let m = Arc::new(Mutex::new(value));
        let held = Arc::clone(&m);
        let panicked = std::thread::spawn(move || {
            let _guard = held.lock().unwrap();
            panic!("a request failed while holding the lock");
        })
        .join();
        assert!(panicked.is_err());
        assert!(m.is_poisoned());
        m
    }

    #[test]
    fn a_poisoned_mutex_is_taken_with_its_state() {
        let m = poisoned(7);
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 8);
    }

    #[test]
    fn a_poisoned_mutex_can_be_waited_on() {
        let m = poisoned(0);
        let cv = Condvar::new();
        let (guard, waited) = wait_timeout(&cv, lock(&m), Duration::from_millis(1));
        assert!(waited.timed_out());
        drop(guard);

        let m2 = Arc::clone(&m);
        let cv = Arc::new(cv);
        let cv2 = Arc::clone(&cv);
        let setter = std::thread::spawn(move || {
            *lock(&m2) = 1;
            cv2.notify_all();
        });
        let mut guard = lock(&m);
        while *guard == 0 {
            guard = wait(&cv, guard);
        }
        assert_eq!(*guard, 1);
        drop(guard);
        setter.join().unwrap();
    }
}
