//! Keeps the log readable when a client repeats a refused call thousands
//! of times: each concern (a session, or the root) gives at most
//! [`PER_WINDOW`] warnings and errors per [`WINDOW`]; the rest go to the
//! debug log, and the next line about that concern after the window says
//! how many did.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a concern's count of warnings runs.
const WINDOW: Duration = Duration::from_secs(60);

/// Warnings and errors about one concern per window; well above what a
/// person or a script that reads its refusals causes.
const PER_WINDOW: u32 = 1000;

/// Concerns kept before those whose window ended are dropped.
const CONCERNS_KEPT: usize = 1024;

#[derive(Debug, Default)]
pub(super) struct Warnings {
    /// By concern: a session key, or empty for the root.
    windows: Mutex<HashMap<String, Window>>,
}

#[derive(Debug)]
struct Window {
    start: Instant,
    shown: u32,
    /// Lines that went to the debug log instead.
    held: u64,
}

/// What [`Warnings::admit`] decided about one line.
#[derive(Debug, PartialEq, Eq)]
struct Admitted {
    /// Whether it goes to the log at its own level.
    shown: bool,
    /// Lines held back in this window so far, this one included.
    held: u64,
    /// Lines held back in this concern's window that just ended.
    held_before: u64,
}

impl Warnings {
    /// Logs `line` about `scope` (a session key; empty for the root) at
    /// `level`, or at debug once `scope` had its share of warnings.
    pub(super) fn log(&self, scope: &str, level: log::Level, line: &str) {
        if level > log::Level::Warn {
            log::log!(level, "{line}");
            return;
        }
        let admitted = self.admit(scope, Instant::now());
        if admitted.held_before > 0 {
            let whose = if scope.is_empty() { "the root" } else { scope };
            log::warn!(
                "{} more refusals about {whose} in {} s went to the debug log only",
                admitted.held_before,
                WINDOW.as_secs()
            );
        }
        if admitted.shown {
            log::log!(level, "{line}");
        } else {
            log::debug!(
                "(held back: {} over {PER_WINDOW} in {} s) {line}",
                admitted.held,
                WINDOW.as_secs()
            );
        }
    }

    fn admit(&self, scope: &str, now: Instant) -> Admitted {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if windows.len() >= CONCERNS_KEPT && !windows.contains_key(scope) {
            windows.retain(|_, w| now.duration_since(w.start) < WINDOW || w.held > 0);
        }
        let w = windows.entry(scope.to_string()).or_insert(Window {
            start: now,
            shown: 0,
            held: 0,
        });
        let mut held_before = 0;
        if now.duration_since(w.start) >= WINDOW {
            held_before = w.held;
            *w = Window {
                start: now,
                shown: 0,
                held: 0,
            };
        }
        let shown = w.shown < PER_WINDOW;
        if shown {
            w.shown += 1;
        } else {
            w.held += 1;
        }
        Admitted {
            shown,
            held: w.held,
            held_before,
        }
    }
}

/// Runs `f` and returns what it logged on this thread, by level (other
/// threads' lines are dropped): for tests of what goes to the log.
#[cfg(test)]
pub(in crate::core) fn capture_log<R>(f: impl FnOnce() -> R) -> (R, Vec<(log::Level, String)>) {
    use std::cell::RefCell;

    thread_local! {
        static LINES: RefCell<Option<Vec<(log::Level, String)>>> = const { RefCell::new(None) };
    }
    struct Capture;
    impl log::Log for Capture {
        fn enabled(&self, _: &log::Metadata) -> bool {
            true
        }
        fn log(&self, record: &log::Record) {
            LINES.with(|lines| {
                if let Some(lines) = lines.borrow_mut().as_mut() {
                    lines.push((record.level(), record.args().to_string()));
                }
            });
        }
        fn flush(&self) {}
    }
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        if log::set_logger(&Capture).is_ok() {
            log::set_max_level(log::LevelFilter::Debug);
        }
    });
    LINES.with(|lines| *lines.borrow_mut() = Some(Vec::new()));
    let result = f();
    let lines = LINES.with(|lines| lines.borrow_mut().take().unwrap_or_default());
    (result, lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_concern_repeating_refusals_is_held_to_its_share_and_told_how_many() {
        let w = Warnings::default();
        let t0 = Instant::now();
        let shown = |scope: &str, at: Instant| {
            (0..3 * PER_WINDOW)
                .filter(|_| w.admit(scope, at).shown)
                .count() as u32
        };
        assert_eq!(shown("shell:a", t0), PER_WINDOW);
        // Another session, and the root, have their own share.
        assert_eq!(shown("shell:b", t0), PER_WINDOW);
        assert_eq!(shown("", t0), PER_WINDOW);
        // Still in the window: held back, and counted.
        let later = t0 + WINDOW / 2;
        assert_eq!(
            w.admit("shell:a", later),
            Admitted {
                shown: false,
                held: 2 * u64::from(PER_WINDOW) + 1,
                held_before: 0
            }
        );
        // The next window: shown again, with the count of the last one.
        let next = t0 + WINDOW;
        assert_eq!(
            w.admit("shell:a", next),
            Admitted {
                shown: true,
                held: 0,
                held_before: 2 * u64::from(PER_WINDOW) + 1
            }
        );
        assert_eq!(
            w.admit("shell:a", next),
            Admitted {
                shown: true,
                held: 0,
                held_before: 0
            }
        );
    }

    #[test]
    fn concerns_whose_window_ended_are_forgotten() {
        let w = Warnings::default();
        let t0 = Instant::now();
        for i in 0..CONCERNS_KEPT {
            assert!(w.admit(&format!("shell:{i}"), t0).shown);
        }
        assert!(w.admit("shell:new", t0 + WINDOW).shown);
        assert_eq!(w.windows.lock().unwrap().len(), 1);
    }
}
