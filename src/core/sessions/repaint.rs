//! A real repaint for a screen that stayed blank. Joining a master, the
//! daemon asks for a redraw (a resize to the same size), which Node TUIs
//! and bash ignore; output made while no daemon ran is lost. So a screen
//! still blank a moment after the join, or a `starting`/`busy` state the
//! screen has not backed for [`STALE_MS`](crate::core::agents::session_agent::STALE_MS), gets a size change and, a moment
//! later, the size back: every terminal program redraws on that. It is done
//! only while no other client (a person's `dtach -a`) is attached, who
//! would see their terminal jump.

use crate::clock::now_ms;
use crate::core::sessions::opening::Repainted;
use crate::core::{Core, SessionRuntime};
use crate::runtime::dtach;
use crate::sync::lock;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// How long after a join the screen is looked at for blankness.
pub(in crate::core) const JOIN_LOOK_MS: u64 = 1_000;
/// How long the changed size stays before it is put back: long enough for
/// the program to have drawn at it.
const STEP_MS: u64 = 250;

impl SessionRuntime {
    /// Asks for a look at the screen at `at_ms`: a real repaint follows if
    /// it is blank then.
    pub(in crate::core) fn look_for_blank_at(&self, at_ms: u64) {
        self.blank_look_ms.store(at_ms.max(1), Ordering::Relaxed);
    }

    /// Asks for a real repaint now, blank or not: what the screen shows is
    /// stale.
    pub(in crate::core) fn repaint_now(&self) {
        self.repaint_any.store(true, Ordering::Relaxed);
        self.look_for_blank_at(now_ms());
    }

    /// Whether a repaint is on its way (its size not put back yet, or a
    /// look pending): the `agents` thread keeps ticking meanwhile.
    pub(in crate::core) fn repaint_pending(&self) -> bool {
        self.blank_look_ms.load(Ordering::Relaxed) != 0
            || self.restore_size_ms.load(Ordering::Relaxed) != 0
    }
}

impl Core {
    /// One step of a session's repaint, if one is due; on the `agents`
    /// thread, which sends nothing itself (the pool does).
    pub(in crate::core) fn repaint_step(&self, rt: &SessionRuntime) {
        let now = now_ms();
        let restore = rt.restore_size_ms.load(Ordering::Relaxed);
        if restore != 0 && now >= restore {
            rt.restore_size_ms.store(0, Ordering::Relaxed);
            let (cols, rows) = size(rt);
            rt.expect_repaint();
            self.send_size(rt, cols, rows, "put back");
        }
        let look = rt.blank_look_ms.load(Ordering::Relaxed);
        if look == 0 || now < look {
            return;
        }
        rt.blank_look_ms.store(0, Ordering::Relaxed);
        let any = rt.repaint_any.swap(false, Ordering::Relaxed);
        if !any && !rt.screen_text().trim().is_empty() {
            return;
        }
        match self.other_clients(rt) {
            Some(0) => {}
            Some(n) => {
                log::info!(
                    "{}: blank screen not repainted: {n} other client(s) attached",
                    rt.key
                );
                return;
            }
            None => return,
        }
        let (cols, rows) = size(rt);
        // One row fewer (one more on the smallest screen), then back.
        let step = if rows > 2 { rows - 1 } else { rows + 1 };
        let why = if any { "stale" } else { "blank" };
        log::info!(
            "{}: its screen is {why}; repainting it by a resize and back",
            rt.key
        );
        rt.expect_repaint();
        self.send_size(rt, cols, step, "changed");
        rt.restore_size_ms.store(now + STEP_MS, Ordering::Relaxed);
    }

    /// How many clients other than this daemon the session's master has:
    /// its sockets but the one it listens on and ours. `None` when its
    /// master is not known or not readable.
    fn other_clients(&self, rt: &SessionRuntime) -> Option<usize> {
        let master = lock(&rt.state).record.as_ref().map(|r| r.master_pid)?;
        let sockets = std::fs::read_dir(format!("/proc/{master}/fd"))
            .ok()?
            .filter_map(|e| e.ok())
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
            })
            .count();
        Some(sockets.saturating_sub(2))
    }

    fn send_size(&self, rt: &SessionRuntime, cols: u16, rows: u16, what: &str) {
        let Some(client) = rt.live_client() else {
            return;
        };
        let key = rt.key.clone();
        let job = format!("the repaint of {key} (size {what})");
        self.work
            .submit(job, crate::work::DEADLINE, Repainted, move || {
                client
                    .resize(cols, rows, Instant::now() + dtach::CONTROL_PATIENCE)
                    .map_err(|e| crate::core::session_runtime::send_error(&key, "resize", &e.error))
            });
    }
}

fn size(rt: &SessionRuntime) -> (u16, u16) {
    let state = lock(&rt.state);
    (state.cols, state.rows)
}
