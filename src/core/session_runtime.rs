//! The in-memory side of a session that has been opened: its output ring,
//! VT mirror and connection state. Made on first use only, so a listed
//! conversation costs nothing here.
//!
//! The VT mirror is not fed as output arrives: the reader thread only
//! appends to the ring, and the mirror catches up from the ring when someone
//! asks for the screen. Output pays one copy into the ring, and a session
//! whose screen nobody reads holds no emulator grid (about 170 KiB at
//! 120×40).

use super::{Core, Flight};
use crate::clock::now_ms;
use crate::error::Error;
use crate::error::Result;
use crate::key::SessionKey;
use crate::runtime::dtach::Client;
use crate::runtime::record::{self, RunRecord};
use crate::runtime::Outcome;
use crate::sync::lock;
use crate::terminal::ring::Scrollback;
use crate::terminal::vt_mirror::{Screen, DEFAULT_COLS, DEFAULT_ROWS};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A live session's connection and what the last open found.
#[derive(Debug, Default)]
pub(super) struct RuntimeState {
    pub(super) client: Option<Arc<Client>>,
    /// Bumped on every connection, so a finished reader only clears its own.
    pub(super) generation: u64,
    pub(super) outcome: Option<Outcome>,
    pub(super) record: Option<RunRecord>,
    pub(super) error: Option<String>,
    pub(super) cols: u16,
    pub(super) rows: u16,
    pub(super) last_input_ms: u64,
    /// When this daemon last launched the session, and whether as a resume:
    /// the engine may name the conversation after that.
    pub(super) launched: Option<(u64, bool)>,
    /// When the store was last searched for a conversation to bind.
    pub(super) bind_checked: Option<std::time::Instant>,
    /// The engine's own id of the conversation found after a launch: the
    /// session's from then on, recorded in the sidecar or on its way there.
    pub(super) conversation: Option<String>,
    /// An open under way in this daemon: other openers wait for its result
    /// instead of starting a second master.
    pub(super) opening: Option<Arc<Flight>>,
    /// A stop under way: openers wait for it, then open afresh.
    pub(super) stopping: Option<Arc<Flight>>,
    /// Stops so far; an open that saw a stop begin meanwhile undoes itself.
    pub(super) stops: u64,
}

/// The in-memory side of one session: output ring, VT mirror, connection.
#[derive(Debug)]
pub struct SessionRuntime {
    pub(super) key: SessionKey,
    pub(super) scrollback: Arc<Scrollback>,
    screen: Mutex<Mirror>,
    pub(super) state: Mutex<RuntimeState>,
    /// What the program is doing (`state`, `events`).
    pub(super) agent: crate::core::agents::session_agent::Agent,
    activity: ActivityStamp,
    /// The last output that was activity, in ms (0: none).
    output_ms: AtomicU64,
    /// Until when output is the program repainting for this daemon (see
    /// [`SessionRuntime::expect_repaint`]), in ms.
    repaint_until_ms: AtomicU64,
    /// When to look whether the screen is blank, for a real repaint (ms,
    /// 0: no look due; see `repaint`).
    pub(super) blank_look_ms: AtomicU64,
    /// When to put the size back after a repaint's change (ms, 0: none).
    pub(super) restore_size_ms: AtomicU64,
    /// The look due repaints whatever the screen shows (it is stale).
    pub(super) repaint_any: AtomicBool,
    /// When the agent's own status file was last read (ms).
    pub(super) status_file_ms: AtomicU64,
}

/// How long after a join's redraw the program's output is taken as its
/// repaint, not as activity.
const REPAINT_MS: u64 = 1_000;

/// Keeps the session's last activity on its run record (see
/// [`crate::runtime::record::stamp_activity`]).
#[derive(Debug)]
struct ActivityStamp {
    record: PathBuf,
    /// The activity last written to the record, in ms.
    stamped_ms: AtomicU64,
}

impl ActivityStamp {
    /// Stamps `ms` when the last stamp is older than the stamping period, or
    /// always (`exact`, when the daemon stops). One thread wins each stamp.
    fn note(&self, ms: u64, exact: bool) {
        let stamped = self.stamped_ms.load(Ordering::Relaxed);
        let due = if exact {
            ms > stamped
        } else {
            ms >= stamped.saturating_add(record::ACTIVITY_STAMP_MS)
        };
        if !due
            || self
                .stamped_ms
                .compare_exchange(stamped, ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        if let Err(e) = record::stamp_activity(&self.record, ms) {
            // No record: the session is not live, or its master is gone.
            log::debug!("cannot stamp {}: {e}", self.record.display());
        }
    }
}

impl SessionRuntime {
    /// `record`: where the session's run record is (or will be); `ring`:
    /// where its scrollback is kept.
    pub(super) fn new(
        key: SessionKey,
        scrollback_bytes: u64,
        record: PathBuf,
        ring: PathBuf,
    ) -> Self {
        let stamped = record::stamped_activity_ms(&record).unwrap_or(0);
        let scrollback = Scrollback::kept(scrollback_bytes as usize, ring, key.as_str());
        SessionRuntime {
            key,
            scrollback: Arc::new(scrollback),
            screen: Mutex::new(Mirror::default()),
            state: Mutex::new(RuntimeState {
                cols: DEFAULT_COLS,
                rows: DEFAULT_ROWS,
                ..Default::default()
            }),
            agent: Default::default(),
            activity: ActivityStamp {
                record,
                stamped_ms: AtomicU64::new(stamped),
            },
            output_ms: AtomicU64::new(0),
            repaint_until_ms: AtomicU64::new(0),
            blank_look_ms: AtomicU64::new(0),
            restore_size_ms: AtomicU64::new(0),
            repaint_any: AtomicBool::new(false),
            status_file_ms: AtomicU64::new(0),
        }
    }

    /// Whether it holds nothing worth keeping: never joined, launched,
    /// stopped, resized or refused anything, and no output. Reading the
    /// `scrollback` of a session that never ran makes such a runtime.
    pub(super) fn unused(&self) -> bool {
        let state = lock(&self.state);
        state.client.is_none()
            && state.generation == 0
            && state.outcome.is_none()
            && state.record.is_none()
            && state.error.is_none()
            && (state.cols, state.rows) == (DEFAULT_COLS, DEFAULT_ROWS)
            && state.last_input_ms == 0
            && state.launched.is_none()
            && state.conversation.is_none()
            && state.opening.is_none()
            && state.stopping.is_none()
            && state.stops == 0
            && self.scrollback.total() == 0
            && self.agent.untouched()
    }

    /// Input went to the session now.
    pub(super) fn note_input(&self) {
        let now = now_ms();
        lock(&self.state).last_input_ms = now;
        self.activity.note(now, false);
    }

    /// The session's last input or output, in this daemon or stamped by
    /// one before it, in ms.
    pub(super) fn last_activity_ms(&self) -> u64 {
        // What a daemon before this one saw is on the run record.
        let stamped = self.activity.stamped_ms.load(Ordering::Relaxed);
        let input = lock(&self.state).last_input_ms.max(stamped);
        input.max(self.output_ms.load(Ordering::Relaxed))
    }

    /// This daemon joined a master it did not launch and asks the program
    /// to draw its screen again: what it draws in the next moment is that
    /// repaint, not the session's activity.
    pub(super) fn expect_repaint(&self) {
        self.repaint_until_ms
            .store(now_ms() + REPAINT_MS, Ordering::Relaxed);
    }

    /// Writes the exact last activity to the run record: the daemon stops.
    pub(super) fn stamp_activity_now(&self) {
        self.activity.note(self.last_activity_ms(), true);
    }

    pub(super) fn live_client(&self) -> Option<Arc<Client>> {
        lock(&self.state).client.clone()
    }

    pub fn scrollback(&self) -> &Arc<Scrollback> {
        &self.scrollback
    }

    /// One chunk of the master's output, into the ring.
    pub(super) fn take_output(&self, bytes: &[u8]) {
        crate::test_hooks::maybe_panic("output", bytes);
        self.scrollback.append(bytes);
        let now = now_ms();
        if now >= self.repaint_until_ms.load(Ordering::Relaxed) {
            self.output_ms.fetch_max(now, Ordering::Relaxed);
            self.activity.note(now, false);
        }
        crate::core::agents::session_agent::poke();
    }

    /// Runs `work` on the VT mirror brought up to date with the ring: made
    /// at the session's size on first use, then fed what arrived since. A
    /// mirror that fails resets itself; the reason goes to `status`.
    pub fn with_screen<T>(&self, work: impl FnOnce(&mut Screen) -> T) -> T {
        let (cols, rows) = {
            let state = lock(&self.state);
            (state.cols, state.rows)
        };
        let mut mirror = lock(&self.screen);
        let failed = mirror.catch_up(&self.scrollback, cols, rows);
        let out = work(mirror.screen.get_or_insert_with(|| Screen::new(cols, rows)));
        drop(mirror);
        if let Some(why) = failed {
            log::error!("{}: {why}", self.key);
            lock(&self.state).error = Some(why);
        }
        out
    }

    /// A program launched on a blank screen: the mirror is made anew and
    /// fed from stream position `from` (where the launch began), so what
    /// the program before left drawn is not read as this one's screen.
    pub(super) fn blank_screen_from(&self, from: u64) {
        let (cols, rows) = {
            let state = lock(&self.state);
            (state.cols, state.rows)
        };
        let mut mirror = lock(&self.screen);
        mirror.screen = Some(Screen::new(cols, rows));
        mirror.fed = from;
    }

    /// The screen's text now.
    pub fn screen_text(&self) -> String {
        self.with_screen(|s| s.text())
    }

    /// A new size for the mirror: what was shown at the old size is drawn
    /// first, as a terminal would have.
    pub(super) fn resize_screen(&self, cols: u16, rows: u16) {
        let mut mirror = lock(&self.screen);
        if mirror.screen.is_some() {
            if let Some(why) = mirror.catch_up(&self.scrollback, cols, rows) {
                log::error!("{}: {why}", self.key);
            }
        }
        if let Some(screen) = mirror.screen.as_mut() {
            screen.resize(cols, rows);
        }
    }

    /// Forgets the mirror (archive clears the ring too): the next reader
    /// starts blank from what the ring holds then.
    pub(super) fn clear_screen(&self) {
        let mut mirror = lock(&self.screen);
        mirror.screen = None;
        mirror.fed = self.scrollback.total();
    }
}

/// The VT mirror and how far into the output stream it has read.
#[derive(Debug, Default)]
struct Mirror {
    screen: Option<Screen>,
    /// Stream offset of the first byte the screen has not seen.
    fed: u64,
}

/// How much of the ring one step of catching up copies out.
const CATCH_UP_STEP: usize = 64 * 1024;

impl Mirror {
    /// Feeds the screen (made at `cols`×`rows` if there is none) everything
    /// the ring holds past `fed`. Bytes evicted before the mirror read them
    /// are skipped. Returns why the emulator failed, if it did.
    fn catch_up(&mut self, ring: &Scrollback, cols: u16, rows: u16) -> Option<String> {
        let screen = self.screen.get_or_insert_with(|| Screen::new(cols, rows));
        let mut failed = None;
        let mut buf = Vec::new();
        loop {
            let at = ring.read_stream(self.fed, CATCH_UP_STEP, &mut buf);
            if buf.is_empty() {
                self.fed = self.fed.max(at);
                return failed;
            }
            self.fed = at + buf.len() as u64;
            if let Err(why) = screen.feed(&buf) {
                failed = Some(why);
            }
        }
    }
}

impl Core {
    pub(super) fn runtime(&self, key: &SessionKey) -> Arc<SessionRuntime> {
        lock(&self.sessions.runtimes)
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(SessionRuntime::new(
                    key.clone(),
                    self.config.scrollback_bytes,
                    self.paths.record(key),
                    self.paths.ring(key),
                ))
            })
            .clone()
    }

    /// Writes every runtime's exact last activity to its run record, for
    /// the daemon that comes next: this one stops.
    pub fn stamp_activity(&self) {
        let runtimes: Vec<Arc<SessionRuntime>> =
            lock(&self.sessions.runtimes).values().cloned().collect();
        for rt in runtimes {
            rt.stamp_activity_now();
        }
    }

    /// Forgets `key`'s runtime when nothing uses it and it holds nothing
    /// (see [`SessionRuntime::unused`]): `grep -r` over the mount reads
    /// every session's `scrollback`, and must not leave a runtime for each.
    pub(super) fn forget_unused_runtime(&self, key: &SessionKey) {
        let mut sessions = lock(&self.sessions.runtimes);
        // No one else holds it or its ring: an open that took the runtime
        // took the ring before letting the runtime go.
        let alone = |rt: &Arc<SessionRuntime>| {
            Arc::strong_count(rt) == 1 && Arc::strong_count(&rt.scrollback) == 1
        };
        if sessions.get(key).is_some_and(|rt| alone(rt) && rt.unused()) {
            sessions.remove(key);
        }
    }

    /// Forgets every runtime that nothing uses and that holds nothing: one
    /// whose reader closed while another thread held it for a moment (a
    /// listing, a look) was kept then, and goes now.
    pub(super) fn forget_unused_runtimes(&self) {
        let mut sessions = lock(&self.sessions.runtimes);
        sessions.retain(|_, rt| {
            let alone = Arc::strong_count(rt) == 1 && Arc::strong_count(&rt.scrollback) == 1;
            !(alone && rt.unused())
        });
    }

    /// The runtime of a known session, created on first use.
    pub fn session_runtime(&self, key: &SessionKey) -> Result<Arc<SessionRuntime>> {
        self.require(key)?;
        Ok(self.runtime(key))
    }

    /// The runtime of a known session if it has one: looking (`stat`,
    /// `ls -l`) makes none.
    pub fn existing_runtime(&self, key: &SessionKey) -> Result<Option<Arc<SessionRuntime>>> {
        self.require(key)?;
        Ok(lock(&self.sessions.runtimes).get(key).cloned())
    }
}

/// The error of a write to a session's master that stopped early.
pub(in crate::core) fn send_error(key: &SessionKey, what: &str, e: &std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EAGAIN) => Error::new(
            libc::EAGAIN,
            format!(
                "{what} to {key} stalled: its master has stopped taking input (the program is not reading its terminal)"
            ),
        ),
        Some(libc::ETIMEDOUT) => Error::new(
            libc::ETIMEDOUT,
            format!(
                "{what} to {key} waited {} s for the writes before it",
                crate::core::INPUT_DEADLINE.as_secs()
            ),
        ),
        Some(libc::EPIPE) => Error::new(
            libc::EPIPE,
            format!("{what} to {key} ended: the session was stopped or its master exited"),
        ),
        _ => Error::io(&format!("{what} to {key} failed"), e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> SessionRuntime {
        SessionRuntime::new(
            SessionKey::parse("shell:t").unwrap(),
            64 * 1024,
            PathBuf::from("/nonexistent/shell:t.run.json"),
            PathBuf::from("/nonexistent/shell:t.ring"),
        )
    }

    #[test]
    fn output_makes_no_mirror_until_the_screen_is_read() {
        let rt = runtime();
        rt.take_output(b"hello\r\nworld");
        assert!(lock(&rt.screen).screen.is_none());
        assert_eq!(rt.screen_text(), "hello\nworld\n");
        rt.take_output(b"\r\nagain");
        assert_eq!(rt.screen_text(), "hello\nworld\nagain\n");
    }

    #[test]
    fn a_mirror_made_late_reads_what_the_ring_holds_and_a_clear_forgets_it() {
        let rt = runtime();
        for i in 0..5000 {
            rt.take_output(format!("line {i}\r\n").as_bytes());
        }
        let text = rt.screen_text();
        assert!(text.ends_with("line 4999\n"), "{text}");
        rt.scrollback.clear();
        rt.clear_screen();
        assert_eq!(rt.screen_text(), "");
        rt.take_output(b"fresh");
        assert_eq!(rt.screen_text(), "fresh\n");
    }

    #[test]
    fn a_resize_draws_what_came_before_at_the_old_size() {
        // What a mirror fed as the output came would show.
        let mut live = Screen::default();
        live.feed(b"abc").unwrap();
        live.feed(b"defgh").unwrap();
        live.resize(4, 3);
        live.feed(b"\r\nijklmn").unwrap();

        let rt = runtime();
        rt.take_output(b"abc");
        assert_eq!(rt.screen_text(), "abc\n");
        rt.take_output(b"defgh");
        lock(&rt.state).cols = 4;
        lock(&rt.state).rows = 3;
        rt.resize_screen(4, 3);
        rt.take_output(b"\r\nijklmn");
        assert_eq!(rt.screen_text(), live.text());
        assert_ne!(live.text(), "abcdefgh\nijklmn\n");
    }

    #[test]
    fn activity_is_stamped_on_the_record_once_a_period_and_exactly_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("shell:t.run.json");
        std::fs::write(&record, b"{}").unwrap();
        record::stamp_activity(&record, 1_000).unwrap();
        let stamp = ActivityStamp {
            record: record.clone(),
            stamped_ms: AtomicU64::new(1_000),
        };
        let on_disk = || record::stamped_activity_ms(&record).unwrap();
        stamp.note(1_000 + record::ACTIVITY_STAMP_MS - 1, false);
        assert_eq!(on_disk(), 1_000, "within the period: no write");
        stamp.note(1_000 + record::ACTIVITY_STAMP_MS, false);
        assert_eq!(on_disk(), 1_000 + record::ACTIVITY_STAMP_MS);
        stamp.note(7_777, true);
        assert_eq!(on_disk(), 7_777, "the end is exact");
        stamp.note(7_000, true);
        assert_eq!(on_disk(), 7_777, "never back in time");
    }
}
