//! What each session is doing (`state`, `events`, `transcript/last`) and
//! `prompt`: the agent foundation (`crate::agent`) wired to the runtime.
//!
//! One tracker per opened session. Its signals: the process (launch, the
//! master's end, `stop`), the hook file the agent's own hooks append to
//! (followed by the `agents` thread every [`TICK`]), the VT mirror's screen
//! (Claude, Codex) or the terminal's foreground process group (shells and
//! other programs). Every change goes to the `events` log in the state
//! directory, beside the follower's place, so a restarted daemon goes on
//! where the last one stopped; blocked `wait`s are woken.

use crate::agent::events::{Event, EventLog, FollowPos, Follower};
use crate::agent::hooks::{
    codex_notify_arg, gemini_reads_settings_under, opencode_config_content, opencode_permission,
    parse_hook_line, write_claude_settings, write_gemini_settings, write_opencode_plugin,
};
use crate::agent::screen_rules::{self, composer_cleared, composer_shows, Paste, ScreenRules, Tui};
use crate::agent::state::{
    Change, Coverage, HookEvent, Outcome, Signal, State, Timing, Tracker, Verdict,
};
use crate::agent::AgentFiles;
use crate::clock::now_ms;
use crate::core::agents::prompt_close::{withdrawn, PromptStage};
use crate::core::agents::waits::Waits;
use crate::core::{Concern, Core, OpenMode, SessionRuntime};
use crate::engine::{Engine, Store};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::runtime::Outcome as OpenOutcome;
use crate::sync::{lock, wait_timeout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// How often Claude's own status file is read for the conversation its
/// process writes.
const STATUS_FILE_EVERY_MS: u64 = 1_000;

/// How long a state read from the screen may go without fresh evidence
/// before the screen is repainted to judge it again.
pub(in crate::core) const STALE_MS: u64 = 10_000;

/// How often the hook files, screens and foreground groups are looked at.
pub(in crate::core) const TICK: Duration = Duration::from_millis(40);

/// Events kept per session (the oldest are dropped).
const EVENTS_CAP: usize = 1000;

/// Why a `prompt` flushed with nothing in it is refused; only in the debug
/// log, not in `status.error`: a shell's redirection flushes once before
/// the write.
pub const EMPTY_PROMPT: &str = "an empty prompt";

/// The refusal of a prompt flushed with nothing in it.
pub(in crate::core) fn empty_prompt() -> Error {
    Error::invalid(EMPTY_PROMPT).at_level(log::Level::Debug)
}

/// The longest prompt.
pub const PROMPT_MAX: usize = 1 << 20;

/// Codex turn-complete events whose thread is not known yet, kept until the
/// session's rollout names its thread.
const DEFERRED_MAX: usize = 8;

/// The longest a turn's end waits for the agent to record the turn (Claude
/// writes its store just after its Stop hook).
const RECORD_WAIT: Duration = Duration::from_secs(2);

fn is_turn_end(event: &HookEvent) -> bool {
    matches!(
        event.name.as_str(),
        "Stop" | "agent-turn-complete" | "AfterAgent" | "session.idle"
    )
}

/// How a session's state is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::core) enum AgentKind {
    /// Claude Code: hooks, then its screen.
    Claude,
    /// Codex: its notify program, then its screen.
    Codex,
    /// Gemini CLI: hooks from its per-session system settings, then its
    /// screen rules.
    Gemini,
    /// opencode: its per-session plugin's events, then its screen rules.
    Opencode,
    /// A terminal agent from the config file: its screen rules only.
    Screen,
    /// A shell or any other program: the terminal's foreground group.
    Shell,
}

impl AgentKind {
    /// `state_dir` is where the session's hook settings go: Gemini ignores
    /// them below a directory others may write, and is then judged by its
    /// screen alone.
    pub(in crate::core) fn of(engine: &Engine, state_dir: &std::path::Path) -> AgentKind {
        match engine.store {
            Store::Claude(_) => AgentKind::Claude,
            Store::Codex(_) => AgentKind::Codex,
            Store::Gemini(_) if gemini_reads_settings_under(state_dir) => AgentKind::Gemini,
            Store::Opencode(_) => AgentKind::Opencode,
            Store::Gemini(_) if engine.screen.is_some() => AgentKind::Screen,
            Store::None if engine.screen.is_some() => AgentKind::Screen,
            Store::None | Store::Gemini(_) | Store::Hosted => AgentKind::Shell,
        }
    }

    /// Whether it draws a TUI read by screen rules (and has no hooks file
    /// of its own: `Screen`).
    fn has_hooks(self) -> bool {
        matches!(
            self,
            AgentKind::Claude | AgentKind::Codex | AgentKind::Gemini | AgentKind::Opencode
        )
    }

    fn tracker(self, state: State, now: u64, rules: Option<&ScreenRules>) -> Tracker {
        match self {
            AgentKind::Claude => Tracker::new(state, now, Coverage::CLAUDE),
            // BeforeAgent and AfterAgent as Claude's prompt and Stop; its
            // Notification comes with the question drawn.
            AgentKind::Gemini => Tracker::new(state, now, Coverage::CLAUDE),
            // `session.status` busy and `session.idle` as Claude's prompt
            // and Stop; `permission.asked` comes with the question drawn.
            AgentKind::Opencode => Tracker::new(state, now, Coverage::CLAUDE),
            AgentKind::Codex => Tracker::new(state, now, Coverage::CODEX_NOTIFY),
            // Its screen is all there is: the config's debounce for every
            // verdict, and nothing for the screen to wait on.
            AgentKind::Screen => {
                let hold = rules.map_or(0, |r| r.debounce_ms);
                Tracker::new(state, now, Coverage::NONE).with_timing(Timing {
                    screen_hold_ms: hold,
                    dialog_hold_ms: hold,
                    hook_quiet_ms: 0,
                })
            }
            // The foreground group is a fact, not a drawing: no hold.
            AgentKind::Shell => Tracker::new(state, now, Coverage::NONE).with_timing(Timing {
                screen_hold_ms: 0,
                dialog_hold_ms: 0,
                hook_quiet_ms: 0,
            }),
        }
    }
}

/// The TUI a session of `engine` runs, read by screen rules; `None` for a
/// shell or a plain command.
pub(in crate::core) fn tui_of(engine: &Engine) -> Option<Tui> {
    match &engine.store {
        Store::Claude(_) => Some(Tui::Claude),
        Store::Codex(_) => Some(Tui::Codex),
        Store::None | Store::Gemini(_) | Store::Opencode(_) => {
            engine.screen.clone().map(Tui::Rules)
        }
        Store::Hosted => None,
    }
}

/// The tracker of one session and what feeds it.
#[derive(Debug)]
struct Inner {
    kind: Option<AgentKind>,
    /// What reads its screen (set with `kind`).
    tui: Option<Tui>,
    tracker: Tracker,
    follower: Option<Follower>,
    files: Option<AgentFiles>,
    /// Bumped by every open, so a poll that raced one is dropped.
    opens: u64,
    /// The output count at the last screen verdict, and that verdict.
    seen_output: u64,
    verdict: Verdict,
    agent_pid: Option<u32>,
    deferred: Vec<(u64, HookEvent)>,
    /// A turn's end (Stop, turn complete), held until the agent has
    /// recorded the turn in its store: (event, its time, when seen).
    ending: Option<(HookEvent, u64, Instant)>,
    /// A prompt's Enter is out and its turn not seen yet. A turn's end
    /// that comes first (a turn too quick for any screen look) starts the
    /// turn before it ends it, so `events` shows both.
    entered: bool,
    /// When that prompt's first Enter went out (ms since the epoch).
    entered_ms: u64,
    /// What was last saved for a daemon that joins after this one.
    saved: Saved,
    /// Launched on an earlier conversation (resumed or forked): until it
    /// is first ready, its start screen is not (see
    /// [`screen_rules::verdict_while_loading`]).
    loading: bool,
    /// Joined a running master whose hook lines since the last daemon are
    /// not read yet: `wait` holds its answer until the first look read them.
    catching_up: bool,
    /// The output count last seen by the tick, when it last changed, and
    /// when the session was last looked at (ms): a quiet session is looked
    /// at only every [`QUIET_LOOK_MS`].
    tick_output: u64,
    output_changed_ms: u64,
    looked_ms: u64,
    /// The last hook line, or the last repaint asked for because the state
    /// had no evidence (ms): with output and input, what backs a state.
    evidence_ms: u64,
    /// Changes made and not yet in the events log, in the order the tracker
    /// made them (queued under this lock, so two threads' changes never
    /// swap on their way to the log).
    pending: Vec<(Change, u64)>,
    /// The time given to the last queued change.
    queued_ms: u64,
    /// How many changes were ever queued; [`Agent::written`] counts those
    /// in the log.
    queued: u64,
}

impl Inner {
    /// Queues `changes` for the events log; [`changed`] writes them. Their
    /// times never go back: a thread that read the clock before another
    /// but took this lock after it is given the later time.
    fn queue(&mut self, changes: &mut Vec<Change>, now: u64) {
        if changes.is_empty() {
            return;
        }
        let at = now.max(self.queued_ms);
        self.queued_ms = at;
        self.queued += changes.len() as u64;
        self.pending.extend(changes.drain(..).map(|c| (c, at)));
    }
}

/// How long after its last output a session is looked at every tick: long
/// enough for a screen verdict's hold and for hooks to fall quiet.
const ACTIVE_MS: u64 = 4_000;

/// How often a quiet agent is looked at: a hook that comes without any
/// output is noticed within this. A quiet shell at its prompt is not looked
/// at: a job starts from typed input and ends with a prompt, both output;
/// a busy one is looked at this often, for a job that ends silently.
const QUIET_LOOK_MS: u64 = 10_000;

impl Inner {
    /// Whether this tick should look at the session: it had output or input
    /// lately, a turn's end is held, or it has been quiet for
    /// [`QUIET_LOOK_MS`]. Idle sessions then cost no file or /proc reads on
    /// most ticks.
    fn due(&mut self, total: u64, input_ms: u64, now: u64) -> bool {
        if total != self.tick_output {
            self.tick_output = total;
            self.output_changed_ms = now;
        }
        let lately = self.output_changed_ms.max(input_ms);
        let quiet_look = match self.kind {
            Some(AgentKind::Shell) => self.tracker.state() != State::Idle,
            _ => true,
        };
        let active = self.ending.is_some()
            || self.tracker.state() == State::Starting
            || now.saturating_sub(lately) < ACTIVE_MS;
        let due = active || (quiet_look && now.saturating_sub(self.looked_ms) >= QUIET_LOOK_MS);
        if due {
            self.looked_ms = now;
        }
        ACTIVITY.note(active);
        due
    }

    /// Whether a TUI's `starting` or `busy` has had no evidence (output,
    /// input, a hook) for [`STALE_MS`]: a live agent at
    /// work keeps drawing, so the screen it was read from is stale (drawn
    /// before a restart, or never drawn), and a repaint shows it anew.
    fn stale(&self, input_ms: u64, now: u64) -> bool {
        let judged = matches!(self.tracker.state(), State::Starting | State::Busy);
        let lately = self.output_changed_ms.max(input_ms).max(self.evidence_ms);
        self.tui.is_some() && judged && now.saturating_sub(lately) >= STALE_MS
    }

    fn hook(&mut self, key: &SessionKey, event: HookEvent, now: u64, changes: &mut Vec<Change>) {
        match self.tracker.apply(&Signal::Hook(event), now) {
            Outcome::Changed(c) => changes.push(c),
            Outcome::Rejected(why) => log::info!("{key}: hook event ignored: {why}"),
            Outcome::Unchanged => {}
        }
    }

    /// Applies a turn's end from the session's own agent; one that comes
    /// while a prompt's Enter waits to be seen taken starts that turn first.
    fn end_turn(&mut self, key: &SessionKey, end: HookEvent, now: u64, changes: &mut Vec<Change>) {
        self.start_entered(now, changes);
        self.hook(key, end, now, changes);
    }

    /// The turn of a prompt whose Enter is out has started: `busy` (source
    /// `prompt`) if still `idle`. Once only: the mark is taken.
    fn start_entered(&mut self, now: u64, changes: &mut Vec<Change>) {
        if std::mem::take(&mut self.entered) {
            if let Outcome::Changed(c) = self.tracker.apply(&Signal::Submitted, now) {
                changes.push(c);
            }
        }
    }

    /// Whether the turn of a prompt whose Enter is out has been seen
    /// starting: the state left `idle`, the screen shows work or a dialog,
    /// or a turn's end consumed the mark.
    fn turn_seen(&self) -> bool {
        !self.entered
            || self.tracker.state() != State::Idle
            || matches!(self.verdict, Verdict::Working | Verdict::Dialog)
    }

    /// New hook events (and those held before), in order. A Codex event
    /// whose thread is not known yet is held; a turn's end is held until
    /// the turn is recorded ([`Inner::end_if_recorded`]).
    fn take_hooks(
        &mut self,
        kind: AgentKind,
        key: &SessionKey,
        events: Vec<(u64, HookEvent)>,
        now: u64,
        changes: &mut Vec<Change>,
    ) {
        let mut pending = std::mem::take(&mut self.deferred);
        pending.extend(events);
        for (ts, event) in pending {
            let unknown = kind == AgentKind::Codex
                && self.tracker.own_ids().is_empty()
                && event.session_id.is_some();
            if unknown {
                if self.deferred.len() < DEFERRED_MAX {
                    self.deferred.push((ts, event));
                }
                continue;
            }
            // A later event: the held end came first.
            if let Some((end, _, _)) = self.ending.take() {
                self.end_turn(key, end, now, changes);
            }
            let own = event
                .session_id
                .as_ref()
                .is_some_and(|id| self.tracker.own_ids().contains(id));
            if is_turn_end(&event) && own {
                // The end of an earlier turn (or of the fork's making),
                // written after this prompt's Enter went out: not this
                // turn's.
                if self.entered && event.at_ms.is_some_and(|at| at < self.entered_ms) {
                    log::info!(
                        "{key}: {} from before the prompt's Enter ignored",
                        event.name
                    );
                    continue;
                }
                self.ending = Some((event, ts, Instant::now()));
                continue;
            }
            self.hook(key, event, now, changes);
        }
    }

    /// Applies a held turn's end once the store has the turn (or after
    /// [`RECORD_WAIT`]). `ending` is the held end's time when `store` was
    /// looked at (it is looked at only while an end is held).
    fn end_if_recorded(
        &mut self,
        kind: AgentKind,
        key: &SessionKey,
        ending: Option<u64>,
        store: StoreLook,
        now: u64,
        changes: &mut Vec<Change>,
    ) {
        // Recorded: the store's last turn-end row comes after its last
        // prompt. Claude writes the turn after its Stop hooks ran, in
        // pieces, that row last, so it must also have been made at or after
        // the end; Codex writes its rollout as it streams and notifies
        // after the row.
        let recorded = ending.is_some_and(|ts| {
            store.last_end.is_some_and(|(turns, ms)| {
                turns == store.turns && turns > 0 && (kind != AgentKind::Claude || ms >= ts)
            })
        });
        let due = self.ending.as_ref().is_some_and(|(_, ts, seen)| {
            (recorded && ending == Some(*ts)) || seen.elapsed() >= RECORD_WAIT
        });
        if due {
            if let Some((end, _, _)) = self.ending.take() {
                self.end_turn(key, end, now, changes);
            }
        }
    }
}

/// What a launch started the agent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::core) enum ConversationOpened {
    New,
    Resumed,
    /// A new conversation carrying an earlier one's turns.
    Forked,
}

/// Why a prompt is refused while the agent waits for an answer.
fn waiting_refusal(key: &SessionKey) -> Error {
    Error::new(
        libc::EBUSY,
        format!(
            "{key} is waiting for an answer to a question on its screen, not for a prompt; answer it through {key}/input (or stop the session), then prompt again"
        ),
    )
}

/// Whether a process of the agent's session (the agent is its leader)
/// holds open the Codex rollout of thread `thread`.
fn codex_writes(agent_pid: u32, thread: &str) -> bool {
    let suffix = format!("-{thread}.jsonl");
    crate::procinfo::session_members(agent_pid)
        .into_iter()
        .chain(std::iter::once(agent_pid))
        .any(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .any(|target| {
                    target.file_name().is_some_and(|n| {
                        let n = n.to_string_lossy();
                        n.starts_with("rollout-") && n.ends_with(&suffix)
                    })
                })
        })
}

/// What a look at a session's store found: nothing while there is none.
#[derive(Debug, Default, Clone, Copy)]
struct StoreLook {
    turns: usize,
    /// Its last turn-end row (`TurnIndex::last_turn_end`).
    last_end: Option<(usize, u64)>,
}

/// The agent side of a session runtime.
#[derive(Debug)]
pub(in crate::core) struct Agent {
    inner: Mutex<Inner>,
    /// Notified on every change of state or verdict.
    changed: Condvar,
    version: AtomicU64,
    /// How many changes are in the events log and the root stream.
    written: AtomicU64,
    /// The events log; taken only by the threads that move the state.
    log: Mutex<Option<EventLog>>,
    /// The root `events` every change also goes to.
    stream: Mutex<Option<Arc<crate::agent::stream::EventStream>>>,
    /// Prompts in order.
    queue: Mutex<Queue>,
    turn: Condvar,
}

impl Default for Agent {
    fn default() -> Self {
        Agent {
            inner: Mutex::new(Inner {
                kind: None,
                tui: None,
                tracker: Tracker::new(State::Stopped, 0, Coverage::NONE),
                follower: None,
                files: None,
                opens: 0,
                seen_output: u64::MAX,
                verdict: Verdict::Unknown,
                agent_pid: None,
                deferred: vec![],
                ending: None,
                entered: false,
                entered_ms: 0,
                saved: Saved::default(),
                loading: false,
                catching_up: false,
                tick_output: u64::MAX,
                output_changed_ms: 0,
                looked_ms: 0,
                evidence_ms: 0,
                pending: vec![],
                queued_ms: 0,
                queued: 0,
            }),
            changed: Condvar::new(),
            version: AtomicU64::new(0),
            written: AtomicU64::new(0),
            log: Mutex::new(None),
            stream: Mutex::new(None),
            queue: Mutex::new(Queue::default()),
            turn: Condvar::new(),
        }
    }
}

impl Agent {
    pub(in crate::core) fn state(&self) -> State {
        lock(&self.inner).tracker.state()
    }

    /// The state, once every change that led to it is in the events log
    /// (a script that reads `events` after `wait` returns finds it there);
    /// `None` while one is on its way.
    pub(in crate::core) fn written_state(&self) -> Option<State> {
        let inner = lock(&self.inner);
        let state = inner.tracker.state();
        // A process that ended is final, read or not.
        let read = !inner.catching_up || matches!(state, State::Stopped | State::Exited);
        (inner.queued == self.written.load(Ordering::Acquire) && read).then_some(state)
    }

    /// Changes so far: what a cached listing compares.
    pub(in crate::core) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The state and the program's pid, as the `agents` thread last saw it.
    pub(in crate::core) fn state_and_pid(&self) -> (State, Option<u32>) {
        let inner = lock(&self.inner);
        (inner.tracker.state(), inner.agent_pid)
    }

    fn tui(&self) -> Option<Tui> {
        lock(&self.inner).tui.clone()
    }

    /// Hook events naming conversation `id` are the session's own from now
    /// on: its process switched to it.
    pub(in crate::core) fn own_id(&self, id: &str) {
        lock(&self.inner).tracker.own_id(id);
    }

    /// Nothing has happened to it: never opened, never changed.
    pub(in crate::core) fn untouched(&self) -> bool {
        let inner = lock(&self.inner);
        self.version() == 0
            && inner.opens == 0
            && inner.follower.is_none()
            && inner.files.is_none()
            && inner.deferred.is_empty()
    }
}

/// The follower's place, the agent session ids and the events read but not
/// applied yet (a turn's end held for its record, a Codex event held for its
/// thread), saved beside the events: a daemon that joins goes on from there,
/// so an event read just before a stop or a crash is not lost.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Saved {
    pos: FollowPos,
    own_ids: Vec<String>,
    #[serde(default)]
    held: Vec<(u64, HookEvent)>,
}

fn saved_path(files: &AgentFiles) -> std::path::PathBuf {
    files.dir().join("follow.json")
}

fn read_saved(files: &AgentFiles) -> Saved {
    std::fs::read(saved_path(files))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn write_saved(files: &AgentFiles, saved: &Saved) {
    let path = saved_path(files);
    let text = serde_json::to_vec(saved).expect("a place serialises");
    // Not synced: written as the hooks are read, and read only by a daemon
    // that joins a running master, which a crash of the machine ends.
    let written = crate::atomic::replace_with(
        &path,
        &text,
        crate::atomic::CREATE_MODE,
        crate::atomic::Durability::Unsynced,
    );
    if let Err(e) = written {
        log::warn!("cannot save {}: {e}", path.display());
    }
}

/// The end of `path` now: where a follower of a fresh launch starts, so
/// the last run's events are not replayed.
fn end_of(path: &std::path::Path) -> FollowPos {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .map(|m| FollowPos {
            inode: m.ino(),
            offset: m.len(),
        })
        .unwrap_or_default()
}

/// Whether the terminal's foreground process group is another than the
/// program's own (a shell running a job). Read from `/proc/PID/stat`
/// (`pgrp`, `tpgid`): the daemon is a dtach client, not the terminal's owner.
pub(in crate::core) fn foreground_job(pid: u32) -> Option<bool> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    foreground_job_of(&stat).map(|(job, _)| job)
}

/// From the text of `/proc/PID/stat`: whether a job is the terminal's
/// foreground group, and the process's state letter (`S` asleep).
pub(in crate::core) fn foreground_job_of(stat: &str) -> Option<(bool, char)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state, ppid, pgrp, session, tty_nr, tpgid.
    let state = fields.first()?.chars().next()?;
    let pgrp: i64 = fields.get(2)?.parse().ok()?;
    let tpgid: i64 = fields.get(5)?.parse().ok()?;
    Some((tpgid > 0 && tpgid != pgrp, state))
}

/// A shell's change, told by the terminal's foreground group: the
/// process's, not a drawing's.
fn shell_change(mut c: Change) -> Change {
    c.source = crate::agent::state::Source::Process;
    c.detail = match c.state {
        State::Busy => "a job is in the foreground",
        _ => "the program has the terminal",
    }
    .into();
    c
}

/// The state a live master goes on in, by the last event logged for it:
/// an end logged before is over, since the master is there.
fn carried_on(last: Option<&Event>) -> State {
    last.map(|e| e.state)
        .filter(|s| !matches!(s, State::Stopped | State::Exited))
        .unwrap_or(State::Starting)
}

/// A `prompt` being written: the text so far.
#[derive(Debug)]
pub(in crate::core) struct PromptWrite {
    pub(in crate::core) key: SessionKey,
    buf: Vec<u8>,
    sent: bool,
    /// A write went past [`PROMPT_MAX`]: nothing of it is sent.
    too_long: bool,
}

impl PromptWrite {
    pub(in crate::core) fn new(key: SessionKey) -> Self {
        PromptWrite {
            key,
            buf: Vec::new(),
            sent: false,
            too_long: false,
        }
    }

    /// The memory the text so far takes.
    pub(in crate::core) fn memory_bytes(&self) -> u64 {
        self.buf.capacity() as u64
    }

    /// One `write`: appended whatever its offset (a stream), capped.
    pub(in crate::core) fn write(&mut self, data: &[u8]) -> Result<()> {
        if self.too_long || self.buf.len() + data.len() > PROMPT_MAX {
            self.too_long = true;
            self.buf = Vec::new();
            return Err(Error::invalid(format!(
                "{}: a prompt is at most {PROMPT_MAX} bytes",
                self.key
            )));
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// The text to send at `flush`: `None` when this handle already sent
    /// what it had. Trailing line ends are dropped (`echo` adds one).
    pub(in crate::core) fn take(&mut self) -> Option<Taken> {
        if self.too_long {
            return (!std::mem::replace(&mut self.sent, true))
                .then(|| Taken::Refused(Error::invalid("a prompt is at most 1 MiB")));
        }
        if self.buf.is_empty() {
            // A shell's `close` of the descriptor it duplicated onto stdout
            // flushes before anything is written: nothing is sent then.
            return (!self.sent).then_some(Taken::Empty);
        }
        self.sent = true;
        let bytes = std::mem::take(&mut self.buf);
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => return Some(Taken::Refused(Error::invalid("a prompt is UTF-8 text"))),
        };
        let text = text.trim_end_matches(['\n', '\r']).to_string();
        if text.trim().is_empty() {
            return Some(Taken::Empty);
        }
        Some(Taken::Text(text))
    }
}

/// What a `prompt` handle gives at `flush`.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::core) enum Taken {
    /// The text to send.
    Text(String),
    /// Refused: recorded where the user reads it.
    Refused(Error),
    /// Nothing but blanks: refused ([`EMPTY_PROMPT`]) but not recorded.
    Empty,
}

/// Bracketed paste: how both TUIs tell a paste from typing.
const PASTE_START: &[u8] = b"\x1b[200~";
const PASTE_END: &[u8] = b"\x1b[201~";

impl Core {
    /// The arguments that make the agent report to its hook file: Claude's
    /// `--settings FILE`, Codex's `-c notify=[...]`. Writes the settings.
    pub(in crate::core) fn agent_argv(
        &self,
        key: &SessionKey,
        engine: &Engine,
        argv: &mut Vec<String>,
    ) {
        let kind = AgentKind::of(engine, &self.config.state_dir);
        if !kind.has_hooks() {
            return;
        }
        let files = AgentFiles::new(&self.config.state_dir, key.as_str());
        if let Err(e) = crate::config::make_private_dir(files.dir()) {
            log::warn!("{key}: no hooks: {}", e.message);
            return;
        }
        match kind {
            AgentKind::Claude => {
                match write_claude_settings(
                    &files.settings,
                    &self.wrapper,
                    &files.hooks,
                    key.as_str(),
                    &self.config.lock_dir,
                ) {
                    Ok(()) => {
                        argv.push("--settings".into());
                        argv.push(files.settings.to_string_lossy().into_owned());
                    }
                    Err(e) => log::warn!("{key}: no hooks: {e}"),
                }
            }
            AgentKind::Codex => {
                argv.push("-c".into());
                argv.push(codex_notify_arg(&self.wrapper, &files.hooks, key.as_str()));
            }
            AgentKind::Gemini => {
                match write_gemini_settings(
                    &files.settings,
                    &self.wrapper,
                    &files.hooks,
                    key.as_str(),
                    &self.config.lock_dir,
                ) {
                    // Gemini takes its system settings only from the
                    // environment: `env` sets it and execs the program in
                    // place (the run record's pid stays the program's).
                    Ok(()) => {
                        let var = format!(
                            "GEMINI_CLI_SYSTEM_SETTINGS_PATH={}",
                            files.settings.display()
                        );
                        argv.splice(0..0, ["env".to_string(), var]);
                    }
                    Err(e) => log::warn!("{key}: no hooks: {e}"),
                }
            }
            AgentKind::Opencode => {
                // An earlier version's config directory (the plugin SDK
                // opencode installed in it, links to the user's files).
                let old = files.dir().join("opencode");
                if old.is_dir() {
                    let _ = std::fs::remove_dir_all(&old);
                }
                let plugin = files.dir().join("opencode-plugin.js");
                match write_opencode_plugin(
                    &plugin,
                    &self.wrapper,
                    &files.hooks,
                    key.as_str(),
                    &self.config.lock_dir,
                ) {
                    // Its plugin and permissions are given in the
                    // environment, merged by opencode over the user's own
                    // config files and directories, which it reads as ever.
                    Ok(()) => {
                        let content = format!(
                            "OPENCODE_CONFIG_CONTENT={}",
                            opencode_config_content(
                                self.config.opencode_config_content.as_deref(),
                                &plugin
                            )
                        );
                        let permission = format!(
                            "OPENCODE_PERMISSION={}",
                            opencode_permission(self.config.opencode_permission.as_deref())
                        );
                        argv.splice(0..0, ["env".to_string(), content, permission]);
                    }
                    Err(e) => log::warn!("{key}: no plugin: {e}"),
                }
            }
            AgentKind::Screen | AgentKind::Shell => {}
        }
    }

    /// The state of a session whose live master this daemon has not joined
    /// (another daemon's, or `sessionfs ls` with no daemon): as its events
    /// last said.
    pub(in crate::core) fn unjoined_state(&self, key: &SessionKey) -> State {
        let files = AgentFiles::new(&self.config.state_dir, key.as_str());
        carried_on(EventLog::last(&files.events).as_ref())
    }

    /// A session whose master is gone though its run record is left, found
    /// by a daemon starting: the program ended while no daemon was joined to
    /// it, or under the daemon before. It reads `exited`, final until the next
    /// open, as it did there; its `events` get that line if the daemon
    /// before did not write it (at `ended_ms`, the run record's last
    /// activity). A session whose last event is `stopped`, or that has no
    /// events, is left as it is.
    pub(in crate::core) fn ended_unjoined(&self, key: &SessionKey, ended_ms: u64) {
        let files = AgentFiles::new(&self.config.state_dir, key.as_str());
        let Some(last) = EventLog::last(&files.events) else {
            return;
        };
        if last.state == State::Stopped {
            return;
        }
        let Ok(engine) = self.engine(key).cloned() else {
            return;
        };
        let kind = AgentKind::of(&engine, &self.config.state_dir);
        let rt = self.runtime(key);
        let mut inner = lock(&rt.agent.inner);
        if inner.kind.is_some() {
            // Opened meanwhile: that open tells the state.
            return;
        }
        inner.kind = Some(kind);
        inner.tui = tui_of(&engine);
        inner.tracker = kind.tracker(State::Exited, now_ms(), engine.screen.as_deref());
        drop(inner);
        rt.agent.version.fetch_add(1, Ordering::AcqRel);
        if last.state == State::Exited {
            return;
        }
        let event = Event {
            ts_ms: ended_ms.max(last.ts_ms),
            state: State::Exited,
            source: crate::agent::state::Source::Process,
            detail: "ended while no daemon was joined to it".into(),
        };
        match EventLog::open(&files.events, EVENTS_CAP).and_then(|mut log| log.append(&event)) {
            Ok(()) => log::info!("{key}: exited (process: {})", event.detail),
            Err(e) => log::warn!("{key}: events: {e}"),
        }
    }

    /// A connection was made: starts (LAUNCH) or goes on with (ATTACH) the
    /// session's tracker.
    pub(in crate::core) fn agent_opened(
        &self,
        key: &SessionKey,
        rt: &SessionRuntime,
        engine: &Engine,
        outcome: OpenOutcome,
        conversation_opened: ConversationOpened,
        agent_pid: Option<u32>,
    ) {
        let resume = conversation_opened == ConversationOpened::Resumed;
        let kind = AgentKind::of(engine, &self.config.state_dir);
        let files = AgentFiles::new(&self.config.state_dir, key.as_str());
        let _ = crate::config::make_private_dir(files.dir());
        let saved = read_saved(&files);
        let last = EventLog::last(&files.events);
        let launched = outcome == OpenOutcome::Launch;
        let pos = if launched {
            end_of(&files.hooks)
        } else {
            saved.pos
        };
        let conversation = self.conversation_id(key);
        let now = now_ms();
        let mut changes = vec![];
        {
            let mut inner = lock(&rt.agent.inner);
            let mut tracker = if launched {
                let mut t = kind.tracker(inner.tracker.state(), now, engine.screen.as_deref());
                if let Outcome::Changed(c) = t.apply(&Signal::Launched, now) {
                    changes.push(c);
                }
                t
            } else {
                // Joined a running master: its state goes on from the log.
                let state = carried_on(last.as_ref());
                if last.as_ref().map(|e| e.state) != Some(state) {
                    changes.push(Change {
                        state,
                        source: crate::agent::state::Source::Process,
                        detail: "attached".into(),
                    });
                }
                kind.tracker(state, now, engine.screen.as_deref())
            };
            let codex_new = kind == AgentKind::Codex && !resume && conversation == key.id();
            if !codex_new && kind.has_hooks() {
                tracker.own_id(&conversation);
            }
            if !launched {
                for id in &saved.own_ids {
                    tracker.own_id(id);
                }
            }
            // What the last daemon had read and not applied comes first.
            let held = if launched { vec![] } else { saved.held.clone() };
            inner.kind = Some(kind);
            inner.tui = tui_of(engine);
            inner.tracker = tracker;
            inner.follower = kind.has_hooks().then(|| Follower::at(&files.hooks, pos));
            inner.files = Some(files.clone());
            inner.opens += 1;
            inner.seen_output = u64::MAX;
            inner.verdict = Verdict::Unknown;
            inner.agent_pid = agent_pid;
            inner.deferred = held;
            inner.ending = None;
            inner.entered = false;
            inner.saved = if launched {
                Saved {
                    pos,
                    ..Saved::default()
                }
            } else {
                saved
            };
            inner.catching_up = !launched && kind.has_hooks();
            inner.loading = launched && conversation_opened != ConversationOpened::New;
            // Looked at by the next tick, which reads what came meanwhile.
            inner.tick_output = u64::MAX;
            inner.evidence_ms = now;
            inner.queue(&mut changes, now);
        }
        *lock(&rt.agent.stream) = Some(self.agents.event_stream.clone());
        {
            let mut log_slot = lock(&rt.agent.log);
            if log_slot.as_ref().is_none_or(|l| l.path() != files.events) {
                *log_slot = EventLog::open(&files.events, EVENTS_CAP)
                    .inspect_err(|e| log::warn!("{key}: no events log: {e}"))
                    .ok();
            }
        }
        if launched {
            write_saved(
                &files,
                &Saved {
                    pos,
                    ..Saved::default()
                },
            );
        }
        self.agent_changed(rt);
    }

    /// Writes the queued changes and wakes whoever waits on them.
    fn agent_changed(&self, rt: &SessionRuntime) {
        changed(rt, &self.agents.waits);
    }

    /// One look at a live session: new hook lines, the screen or the
    /// foreground group. Runs on the `agents` thread.
    fn agent_tick(&self, key: &SessionKey, rt: &Arc<SessionRuntime>) {
        let output = rt.scrollback.total();
        let input_ms = lock(&rt.state).last_input_ms;
        let (kind, tui, follower, opens, seen, pid, ending, look, loading) = {
            let mut inner = lock(&rt.agent.inner);
            let Some(kind) = inner.kind else { return };
            if matches!(inner.tracker.state(), State::Stopped | State::Exited) {
                return;
            }
            if !inner.due(output, input_ms, now_ms()) {
                return;
            }
            (
                kind,
                inner.tui.clone(),
                inner.follower.take(),
                inner.opens,
                inner.seen_output,
                inner.agent_pid,
                inner.ending.as_ref().map(|(_, ts, _)| *ts),
                // The store is looked at while a turn's end is held.
                kind.has_hooks() && inner.ending.is_some(),
                inner.loading && inner.tracker.state() == State::Starting,
            )
        };
        let store = if look {
            self.store_look(key)
        } else {
            StoreLook::default()
        };
        // File and /proc reads happen with nothing locked.
        let mut follower = follower;
        let lines = follower.as_mut().map(Follower::poll).unwrap_or_default();
        let events: Vec<(u64, HookEvent)> = lines
            .iter()
            .filter_map(|l| parse_hook_line(l))
            .filter(|(_, k, _)| k == key.as_str())
            .map(|(ts, _, e)| (ts, e))
            .collect();
        let total = rt.scrollback.total();
        let verdict = match &tui {
            Some(tui) if total != seen => Some(if loading {
                screen_rules::verdict_while_loading(tui, &rt.screen_text())
            } else {
                screen_rules::verdict(tui, &rt.screen_text())
            }),
            Some(_) => None,
            None => pid.and_then(foreground_job).map(|job| {
                if job {
                    Verdict::Working
                } else {
                    Verdict::Ready
                }
            }),
        };
        let pid = self.program_pid(key, rt, pid);
        // The agent switched conversations in its own process: the session
        // goes on as the new one before its events are taken.
        let switched = self
            .switch_in(key, rt, kind, pid, &events)
            .or_else(|| self.claude_status_says(key, rt, kind, pid));
        if let Some((to, why)) = switched {
            self.switch_conversation(key, rt, &to, &why);
        }
        // A Codex session started afresh learns its thread from its rollout.
        let unbound = kind == AgentKind::Codex && {
            let inner = lock(&rt.agent.inner);
            inner.tracker.own_ids().is_empty() && !(events.is_empty() && inner.deferred.is_empty())
        };
        let bound = unbound
            .then(|| {
                self.store_file(key);
                self.conversation_id(key)
            })
            .filter(|id| id != key.id());
        let now = now_ms();
        let mut changes = vec![];
        let mut save = None;
        {
            let mut inner = lock(&rt.agent.inner);
            if inner.opens != opens {
                return;
            }
            inner.follower = follower;
            inner.agent_pid = pid;
            if let Some(id) = &bound {
                inner.tracker.own_id(id);
            }
            if !events.is_empty() {
                inner.evidence_ms = now;
            }
            if inner.stale(input_ms, now) {
                inner.evidence_ms = now;
                rt.repaint_now();
            }
            inner.take_hooks(kind, key, events, now, &mut changes);
            inner.end_if_recorded(kind, key, ending, store, now, &mut changes);
            let verdict = verdict.unwrap_or(inner.verdict);
            if tui.is_some() {
                if inner.verdict != verdict {
                    rt.agent.changed.notify_all();
                }
                inner.seen_output = total;
                inner.verdict = verdict;
            }
            if let Outcome::Changed(c) = inner.tracker.apply(&Signal::Screen(verdict), now) {
                changes.push(match kind {
                    AgentKind::Shell => shell_change(c),
                    _ => c,
                });
            }
            if let Some(pos) = inner.follower.as_ref().map(Follower::pos) {
                let held: Vec<(u64, HookEvent)> = (inner.ending.iter())
                    .map(|(e, ts, _)| (*ts, e.clone()))
                    .chain(inner.deferred.iter().cloned())
                    .collect();
                let own = inner.tracker.own_ids();
                if pos != inner.saved.pos || held != inner.saved.held || own != inner.saved.own_ids
                {
                    inner.saved = Saved {
                        pos,
                        own_ids: own.to_vec(),
                        held,
                    };
                    save = Some((inner.saved.clone(), inner.files.clone()));
                }
            }
            let caught_up = std::mem::take(&mut inner.catching_up);
            inner.queue(&mut changes, now);
            if caught_up {
                rt.agent.changed.notify_all();
                self.agents.waits.wake();
            }
        }
        // The changes reach the log before the place past their lines is
        // saved: a daemon gone between the two reads those lines again
        // (applying a hook twice changes nothing) rather than losing them.
        self.agent_changed(rt);
        if let Some((saved, Some(files))) = save {
            write_saved(&files, &saved);
        }
    }

    /// The conversation the agent's own process switched to, if these
    /// events say it did, and how that was learnt. Claude: a `SessionStart`
    /// of source `clear` or `resume` from the session's agent process itself
    /// (a `claude -p` a tool started is another process). Codex: a turn's
    /// end in a thread that is not the session's, whose rollout a process
    /// of the agent's holds open (its title thread has none).
    fn switch_in(
        &self,
        key: &SessionKey,
        rt: &SessionRuntime,
        kind: AgentKind,
        agent_pid: Option<u32>,
        events: &[(u64, HookEvent)],
    ) -> Option<(String, String)> {
        if events.is_empty() {
            return None;
        }
        let current = self.conversation_id(key);
        // A Codex session started afresh is bound to its first thread by
        // the catalog, not here.
        let unbound = lock(&rt.agent.inner).tracker.own_ids().is_empty();
        let mut found = None;
        for (_, event) in events {
            let to = match kind {
                AgentKind::Claude => crate::agent::claims::hook_switch(
                    &event.name,
                    event.reason.as_deref(),
                    event.session_id.as_deref(),
                )
                .filter(|_| event.pid.is_none() || event.pid == agent_pid)
                .map(|to| {
                    let how = event.reason.clone().unwrap_or_default();
                    (to, format!("its hook's SessionStart, source {how}"))
                }),
                AgentKind::Codex => event
                    .session_id
                    .clone()
                    .filter(|_| is_turn_end(event))
                    .filter(|to| *to != current && *to != key.id())
                    .filter(|_| !unbound)
                    .filter(|to| agent_pid.is_some_and(|pid| codex_writes(pid, to)))
                    .map(|to| {
                        (
                            to,
                            "a turn ended in a thread whose rollout it writes".into(),
                        )
                    }),
                // A top-level conversation the process made (at the first
                // prompt of a new session, or at `/new`): the plugin
                // reports its id; a hook line names the process it ran in.
                AgentKind::Opencode => event
                    .session_id
                    .clone()
                    .filter(|_| event.name == "session.created")
                    .filter(|_| {
                        event.pid.is_none() || agent_pid.is_none() || event.pid == agent_pid
                    })
                    .map(|to| (to, "its plugin's session.created".into())),
                // Gemini runs its hooks through `bash -c`, which execs the
                // hook: its parent is the agent or a process of its session,
                // and the hook ran in the agent's process session (recorded
                // as it ran; older lines: its parent, if still alive).
                AgentKind::Gemini => crate::agent::claims::hook_switch(
                    &event.name,
                    event.reason.as_deref(),
                    event.session_id.as_deref(),
                )
                .filter(|_| match (event.pid, agent_pid) {
                    (Some(pid), Some(agent)) if pid != agent => match event.sid {
                        Some(sid) => crate::procinfo::session_of(agent) == Some(sid),
                        None => crate::procinfo::session_members(agent).contains(&pid),
                    },
                    _ => true,
                })
                .map(|to| {
                    let how = event.reason.clone().unwrap_or_default();
                    (to, format!("its hook's SessionStart, source {how}"))
                }),
                AgentKind::Screen | AgentKind::Shell => None,
            };
            if let Some(to) = to {
                found = Some(to);
            }
        }
        found.filter(|(to, _)| *to != current)
    }

    /// What Claude's own status file, `CONFIG/sessions/<pid>.json`, says
    /// its process writes now, when that is not the session's conversation:
    /// the agent's own word, for a switch whose hook was lost. Read at most
    /// once every [`STATUS_FILE_EVERY_MS`] per session.
    fn claude_status_says(
        &self,
        key: &SessionKey,
        rt: &SessionRuntime,
        kind: AgentKind,
        pid: Option<u32>,
    ) -> Option<(String, String)> {
        let pid = pid.filter(|_| kind == AgentKind::Claude)?;
        let now = now_ms();
        let looked = rt.status_file_ms.load(Ordering::Relaxed);
        if now < looked.saturating_add(STATUS_FILE_EVERY_MS) {
            return None;
        }
        rt.status_file_ms.store(now, Ordering::Relaxed);
        let Store::Claude(root) = &self.engine(key).ok()?.store else {
            return None;
        };
        let says = crate::agent::claims::claude_status_file(root, pid)?;
        (says != self.conversation_id(key)).then(|| (says, format!("its sessions/{pid}.json")))
    }

    /// The program's pid: `known`, else from the run record (a launch may
    /// come back before the wrapper wrote it).
    pub(in crate::core) fn program_pid(
        &self,
        key: &SessionKey,
        rt: &SessionRuntime,
        known: Option<u32>,
    ) -> Option<u32> {
        known
            .or_else(|| lock(&rt.state).record.as_ref().map(|r| r.agent_pid))
            .or_else(|| crate::runtime::launch::live_record(&self.paths, key).map(|r| r.agent_pid))
    }

    /// A shell's prompt saw a job in the foreground: `busy` now, before the
    /// `agents` thread's next look, so a `wait` right after blocks.
    pub(in crate::core) fn shell_job_seen(&self, rt: &SessionRuntime) {
        let now = now_ms();
        {
            let mut inner = lock(&rt.agent.inner);
            if let Outcome::Changed(c) = inner.tracker.apply(&Signal::Screen(Verdict::Working), now)
            {
                inner.queue(&mut vec![shell_change(c)], now);
            }
        }
        self.agent_changed(rt);
    }

    /// How many turns the session's store holds and its last turn-end row.
    fn store_look(&self, key: &SessionKey) -> StoreLook {
        self.catalog.refresh();
        match self.transcript(key) {
            Ok(Some(cache)) => {
                let c = lock(&cache);
                StoreLook {
                    turns: c.index.turn_count(),
                    last_end: c.index.last_turn_end(),
                }
            }
            _ => StoreLook::default(),
        }
    }

    /// The state a session shows: its tracker's, `stopped` when it has none.
    pub(crate) fn agent_state(&self, key: &SessionKey) -> State {
        lock(&self.sessions.runtimes)
            .get(key)
            .map_or(State::Stopped, |rt| rt.agent.state())
    }

    /// The state a `wait` may return: settled, with its changes in the
    /// events log; `None` while a change is on its way there.
    pub(crate) fn settled_for_wait(&self, key: &SessionKey) -> Option<State> {
        let rt = lock(&self.sessions.runtimes).get(key).cloned();
        match rt {
            None => Some(State::Stopped),
            Some(rt) => rt.agent.written_state().filter(|s| s.is_settled()),
        }
    }

    /// The `state` file (and what `wait` returns): one line.
    pub fn state_line(&self, key: &SessionKey) -> Result<Vec<u8>> {
        self.require(key)?;
        Ok(format!("{}\n", self.agent_state(key)).into_bytes())
    }

    /// Where the session's `events` are kept.
    /// The root `events` file (see [`crate::agent::stream`]).
    pub fn event_stream_path(&self) -> std::path::PathBuf {
        self.agents.event_stream.path().to_path_buf()
    }

    /// The root `events` file's inode on disk now, its low bits (0 while
    /// there is none).
    pub fn event_stream_file(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(self.agents.event_stream.path())
            .map_or(0, |m| m.ino() & crate::agent::stream::FILE_ID_BITS)
    }

    /// The root `events` file with inode `file`: the current one, or the
    /// one a rotation moved aside. `Ok(None)`: the file that did not exist
    /// yet (empty). ESTALE for an older one.
    fn event_stream_at(&self, file: u64) -> Result<Option<std::path::PathBuf>> {
        use std::os::unix::fs::MetadataExt;
        if file == 0 {
            return Ok(None);
        }
        let now = self.agents.event_stream.path().to_path_buf();
        let before = crate::agent::stream::rotated_path(&now);
        for path in [now, before] {
            if std::fs::metadata(&path)
                .is_ok_and(|m| m.ino() & crate::agent::stream::FILE_ID_BITS == file)
            {
                return Ok(Some(path));
            }
        }
        Err(Error::new(
            libc::ESTALE,
            "that events file was rotated away: open events again",
        ))
    }

    /// The metadata of the root `events` file with inode `file`.
    pub fn event_stream_meta(&self, file: u64) -> Result<Option<std::fs::Metadata>> {
        Ok(self
            .event_stream_at(file)?
            .and_then(|p| std::fs::metadata(p).ok()))
    }

    /// Opens the root `events` file with inode `file`, as a handle keeps it.
    pub fn open_event_stream(&self, file: u64) -> Result<Option<Arc<std::fs::File>>> {
        let Some(path) = self.event_stream_at(file)? else {
            return Ok(None);
        };
        std::fs::File::open(&path)
            .map(|f| Some(Arc::new(f)))
            .map_err(|e| Error::io("cannot open the events file", &e))
    }

    pub fn events_path(&self, key: &SessionKey) -> Result<std::path::PathBuf> {
        self.require(key)?;
        Ok(AgentFiles::new(&self.config.state_dir, key.as_str()).events)
    }

    /// `transcript/last`: the last complete turn, rendered as in the pages
    /// (the one before a turn still running); empty before the first.
    pub fn transcript_last(&self, key: &SessionKey) -> Result<Vec<u8>> {
        self.require(key)?;
        let limits = crate::transcript::Limits {
            page_turns: 1,
            ..self.limits()
        };
        let running = matches!(self.agent_state(key), State::Busy | State::Waiting);
        if key.engine() == crate::core::HOSTED {
            let (path, index) = self.hosted_index(key)?;
            let turns = index.pages(1);
            let Some(n) = turns.checked_sub(1) else {
                return Ok(vec![]);
            };
            return Ok(index
                .render_page(&path, n, 1)
                .map_err(|e| Error::io(&format!("cannot read {}", path.display()), &e))?
                .unwrap_or_default());
        }
        // A store the agent made a moment ago may not be indexed yet.
        self.catalog.refresh();
        let Some(cache) = self.transcript(key)? else {
            return Ok(vec![]);
        };
        let c = lock(&cache);
        let turns = c.index.turn_count();
        let Some(n) = turns.checked_sub(if running { 2 } else { 1 }) else {
            return Ok(vec![]);
        };
        crate::transcript::render_page(&c.path, &c.index, n, &limits).map_err(Into::into)
    }

    /// Waits on the session's tracker until `done` holds (given the state
    /// and the screen's latest verdict) or `deadline` passes.
    pub(in crate::core) fn agent_wait(
        &self,
        rt: &SessionRuntime,
        deadline: Instant,
        done: impl Fn(State, Verdict) -> bool,
    ) -> (bool, State) {
        let mut inner = lock(&rt.agent.inner);
        loop {
            let state = inner.tracker.state();
            if done(state, inner.verdict) {
                return (true, state);
            }
            let now = Instant::now();
            if now >= deadline {
                return (false, state);
            }
            // A bounded wait: the screen is also polled by the caller.
            inner = wait_timeout(&rt.agent.changed, inner, (deadline - now).min(TICK)).0;
        }
    }

    /// How long the pool gives a prompt: its own deadline, then some.
    pub(in crate::core) fn prompt_deadline(&self) -> Duration {
        self.config.prompt_timeout + Duration::from_secs(10)
    }

    /// `prompt`: the text typed into the session as its TUI takes a prompt,
    /// returning once the turn has started. Runs on a slow-operation
    /// thread; prompts to one session go in order. A prompt withdrawn
    /// while it waits (`stage`) is never typed; its reason was recorded
    /// when it was withdrawn.
    pub(in crate::core) fn prompt(
        &self,
        key: &SessionKey,
        text: &str,
        stage: &PromptStage,
    ) -> Result<()> {
        self.require(key)?;
        let result = self.prompt_now(key, text, stage);
        result.map_err(|e| {
            if stage.is_withdrawn() {
                e
            } else {
                self.record(&Concern::Session(key.clone()), e)
            }
        })
    }

    /// Whether the session takes input now (`prompt`: a prompt), checked
    /// when `input` or `prompt` is opened for writing: a hosted run's
    /// transcript and an archived session take none (EPERM), a session
    /// waiting for an answer takes no prompt (EBUSY) though it takes input.
    pub(in crate::core) fn check_takes_input(&self, key: &SessionKey, prompt: bool) -> Result<()> {
        let what = if prompt { "prompt" } else { "input" };
        if !self.engine(key)?.launchable() {
            return Err(Error::perm(format!(
                "{key} is a hosted run's transcript; it takes no {what}"
            )));
        }
        if self.is_archived(key) {
            return Err(Error::perm(format!(
                "{key} is archived; unarchive it first"
            )));
        }
        if prompt && self.agent_state(key) == State::Waiting {
            return Err(waiting_refusal(key));
        }
        Ok(())
    }

    fn prompt_now(&self, key: &SessionKey, text: &str, stage: &PromptStage) -> Result<()> {
        self.check_takes_input(key, false)?;
        let timeout = self.config.prompt_timeout;
        let deadline = Instant::now() + timeout;
        let rt = self.runtime(key);
        // One prompt at a time per session, in the order they were closed.
        let turn = Turn::wait(&rt.agent, deadline, stage);
        if stage.is_withdrawn() {
            return Err(withdrawn(key));
        }
        let _turn = turn.ok_or_else(|| {
            Error::new(
                libc::ETIMEDOUT,
                format!(
                    "prompt to {key}: the prompts before it took more than {} s",
                    timeout.as_secs_f32()
                ),
            )
        })?;
        let client = self.ensure_open(key, OpenMode::AttachOrLaunch, deadline)?;
        let send = |bytes: &[u8]| {
            client
                .push(bytes, deadline)
                .map_err(|(_, e)| crate::core::session_runtime::send_error(key, "prompt", &e))
        };
        let (ready, state) = self.agent_wait(&rt, deadline, |s, _| {
            stage.is_withdrawn()
                || matches!(
                    s,
                    State::Idle | State::Stopped | State::Exited | State::Waiting
                )
        });
        if stage.is_withdrawn() {
            return Err(withdrawn(key));
        }
        match state {
            // A question is on the screen: the prompt would answer it.
            State::Waiting => return Err(waiting_refusal(key)),
            State::Stopped | State::Exited => {
                return Err(Error::new(
                    libc::EPIPE,
                    format!("prompt to {key}: the program ended ({state})"),
                ))
            }
            _ if !ready => {
                return Err(Error::new(
                    libc::ETIMEDOUT,
                    format!(
                    "prompt to {key}: it was never ready for a prompt within {} s (still {state})",
                    timeout.as_secs_f32()
                ),
                ))
            }
            _ => {}
        }
        // From here the prompt is typed to its end, whatever its writer does.
        if !stage.begin_typing() {
            return Err(withdrawn(key));
        }
        rt.note_input();
        let Some(tui) = rt.agent.tui() else {
            // A shell: the line, then Enter; done once the shell took it.
            let mut line = text.as_bytes().to_vec();
            line.push(b'\r');
            let before = rt.scrollback.total();
            send(&line)?;
            return self.shell_line_taken(key, &rt, text, before, deadline);
        };
        let rules = match &tui {
            Tui::Rules(rules) => Some(rules.clone()),
            _ => None,
        };
        let bracketed = match rules.as_ref().map(|r| r.paste) {
            Some(Paste::Bracketed) => true,
            Some(Paste::Plain) => false,
            Some(Paste::Auto) | None => rt.with_screen(|s| s.bracketed_paste()),
        };
        let mut paste = Vec::with_capacity(text.len() + 12);
        if bracketed {
            paste.extend_from_slice(PASTE_START);
        }
        paste.extend_from_slice(text.as_bytes());
        if bracketed {
            paste.extend_from_slice(PASTE_END);
        }
        let typed_before = screen_rules::typed_count(&rt.screen_text(), text);
        send(&paste)?;
        // Enter only once the paste is taken, as its own write: with the
        // text it would be part of the paste.
        let mut shown;
        if let Some(rules) = &rules {
            // Its prompt box is not known: the text is taken once it shows
            // once more on the screen than before. A TUI that redraws while
            // it loads (Qwen Code resuming) drops what came meanwhile: the
            // text is typed again, once, unless a paste placeholder shows.
            let taken = |screen: &str| {
                screen_rules::typed_count(screen, text) > typed_before || screen.contains("[Pasted")
            };
            for attempt in 0..2 {
                let shown_by = (Instant::now() + Duration::from_secs(3)).min(deadline);
                shown = taken(&rt.screen_text());
                while !shown && Instant::now() < shown_by {
                    self.agent_wait(&rt, Instant::now() + TICK, |_, _| false);
                    shown = taken(&rt.screen_text());
                }
                if shown || attempt == 1 {
                    break;
                }
                log::info!("{key}: the prompt's text did not show; typed again");
                send(&paste)?;
            }
            shown = false;
            let delay = Duration::from_millis(rules.enter_delay_ms);
            let until = (Instant::now() + delay).min(deadline);
            while Instant::now() < until {
                self.agent_wait(&rt, until, |_, _| false);
            }
        } else {
            let shown_by = (Instant::now() + Duration::from_secs(3)).min(deadline);
            shown = composer_shows(&tui, &rt.screen_text(), text);
            while !shown && Instant::now() < shown_by {
                self.agent_wait(&rt, Instant::now() + TICK, |_, _| false);
                shown = composer_shows(&tui, &rt.screen_text(), text);
            }
        }
        let mut enters = 0;
        loop {
            {
                let mut inner = lock(&rt.agent.inner);
                // The end of the turn before, still held for its store row,
                // ends that turn now: held on, it would end this one.
                if let Some((end, _, _)) = inner.ending.take() {
                    let (now, mut changes) = (now_ms(), vec![]);
                    inner.hook(&rt.key, end, now, &mut changes);
                    inner.queue(&mut changes, now);
                }
                inner.entered = true;
                if enters == 0 {
                    inner.entered_ms = now_ms();
                }
            }
            self.agent_changed(&rt);
            if enters > 0 {
                log::info!("{key}: the prompt's turn has not started; Enter again");
            }
            let sent = send(b"\r");
            enters += 1;
            // An Enter a busy or still-loading TUI drops is sent again: after
            // 1 s, then after 2, 4, 8, 16 s while its box still holds the
            // text (with screen rules, whose box is not known: while the
            // screen shows the text more often than before it was typed).
            // Once it no longer does, the turn is waited for until the
            // deadline.
            let still_typed = |screen: &str| match &rules {
                Some(_) => screen_rules::typed_count(screen, text) > typed_before,
                None => shown && composer_shows(&tui, screen, text),
            };
            let last = enters >= 2 && !still_typed(&rt.screen_text());
            let again = Duration::from_secs(1 << (enters - 1).min(4));
            let until = if last {
                deadline
            } else {
                (Instant::now() + again).min(deadline)
            };
            // Taken once its box no longer holds the text. With screen rules
            // the box is not known: a slash command (`/clear`, `/new`), which
            // starts no turn, is taken once the text shows no more often than
            // before it was typed.
            let cleared = |screen: &str| match &rules {
                Some(_) => {
                    text.starts_with('/') && screen_rules::typed_count(screen, text) <= typed_before
                }
                None => shown && composer_cleared(&tui, screen, text),
            };
            let taken = sent.is_ok() && self.turn_started(&rt, until, cleared);
            {
                let mut inner = lock(&rt.agent.inner);
                if taken {
                    // Unless a turn's end came first and started it already.
                    let (now, mut changes) = (now_ms(), vec![]);
                    inner.start_entered(now, &mut changes);
                    inner.queue(&mut changes, now);
                } else {
                    inner.entered = false;
                }
            }
            self.agent_changed(&rt);
            sent?;
            if taken {
                return Ok(());
            }
            if Instant::now() >= deadline || last {
                return Err(Error::new(
                    libc::ETIMEDOUT,
                    format!(
                        "prompt to {key}: typed, but the agent never started the turn within {} s",
                        timeout.as_secs_f32()
                    ),
                ));
            }
        }
    }

    /// Waits until the turn of a prompt whose Enter is out is seen
    /// starting ([`Inner::turn_seen`]), or until `cleared` says the screen
    /// shows the text taken.
    fn turn_started(
        &self,
        rt: &SessionRuntime,
        until: Instant,
        cleared: impl Fn(&str) -> bool,
    ) -> bool {
        loop {
            {
                let inner = lock(&rt.agent.inner);
                if inner.turn_seen() {
                    return true;
                }
                let now = Instant::now();
                if now >= until {
                    return false;
                }
                // Woken by every change of state or verdict; the screen is
                // looked at every tick.
                drop(wait_timeout(
                    &rt.agent.changed,
                    inner,
                    (until - now).min(TICK),
                ));
            }
            if cleared(&rt.screen_text()) {
                return true;
            }
        }
    }
}

/// The prompts of one session, in order.
#[derive(Debug, Default)]
pub(in crate::core) struct Queue {
    next: u64,
    serving: u64,
    /// Tickets that gave up before their turn came: passed when it does.
    gave_up: Vec<u64>,
}

impl Queue {
    fn advance(&mut self) {
        self.serving += 1;
        while let Some(i) = self.gave_up.iter().position(|t| *t == self.serving) {
            self.gave_up.swap_remove(i);
            self.serving += 1;
        }
    }
}

/// A prompt's turn in its session's queue; the next one goes when dropped.
struct Turn<'a> {
    agent: &'a Agent,
}

impl<'a> Turn<'a> {
    /// Waits for the prompt's turn; `None` at `deadline` or once the prompt
    /// is withdrawn (looked at every [`TICK`]).
    fn wait(agent: &'a Agent, deadline: Instant, stage: &PromptStage) -> Option<Turn<'a>> {
        let mut q = lock(&agent.queue);
        let ticket = q.next;
        q.next += 1;
        while q.serving != ticket {
            let now = Instant::now();
            if now >= deadline || stage.is_withdrawn() {
                q.gave_up.push(ticket);
                return None;
            }
            q = wait_timeout(&agent.turn, q, (deadline - now).min(TICK)).0;
        }
        Some(Turn { agent })
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        lock(&self.agent.queue).advance();
        self.agent.turn.notify_all();
    }
}

/// A process signal for one session's tracker (the reader thread has no
/// `Core`).
pub(in crate::core) fn process(rt: &SessionRuntime, waits: &Waits, signal: Signal) {
    let now = now_ms();
    {
        let mut inner = lock(&rt.agent.inner);
        if inner.kind.is_none() {
            return;
        }
        if let Outcome::Changed(c) = inner.tracker.apply(&signal, now) {
            inner.queue(&mut vec![c], now);
        }
    }
    changed(rt, waits);
}

/// Writes the queued changes to the session's events log and the root
/// stream, in the order they were made, and wakes whoever waits on them.
/// The log's lock is held from taking the queue to the last write, so a
/// thread that queued later never writes first.
fn changed(rt: &SessionRuntime, waits: &Waits) {
    let mut log = lock(&rt.agent.log);
    let (changes, tui) = {
        let mut inner = lock(&rt.agent.inner);
        (std::mem::take(&mut inner.pending), inner.tui.clone())
    };
    if changes.is_empty() {
        return;
    }
    if let Some(log) = log.as_mut() {
        for (change, now) in &changes {
            if let Err(e) = log.append(&Event::from_change(change, *now)) {
                log::warn!("{}: events: {e}", rt.key);
            }
        }
    }
    let stream = lock(&rt.agent.stream).clone();
    for (change, now) in &changes {
        log::info!(
            "{}: {} ({}: {})",
            rt.key,
            change.state,
            change.source.as_str(),
            change.detail
        );
        if let Some(stream) = &stream {
            // What the agent asks, as `waiting_for` names it.
            let asked = tui
                .as_ref()
                .filter(|_| change.state == State::Waiting)
                .and_then(|tui| crate::agent::dialogs::read(tui, &rt.screen_text()));
            stream.append(
                *now,
                rt.key.as_str(),
                "state",
                serde_json::json!({
                    "state": change.state.as_str(),
                    "source": change.source.as_str(),
                    "detail": change.detail,
                    "waiting_for": asked,
                }),
            );
        }
    }
    rt.agent
        .written
        .fetch_add(changes.len() as u64, Ordering::AcqRel);
    rt.agent.version.fetch_add(1, Ordering::AcqRel);
    rt.agent.changed.notify_all();
    waits.wake();
}

/// Whether any session wants looking at every tick, and a way to wake the
/// `agents` thread from its long sleep when output or input comes: with
/// every session quiet, the thread looks once a second, not 25 times.
struct Activity {
    /// Some session was active in this round of looks.
    active: AtomicBool,
    /// The thread sleeps long; a poke must wake it.
    sleeping: AtomicBool,
    poked: Mutex<bool>,
    wake: Condvar,
}

static ACTIVITY: Activity = Activity {
    active: AtomicBool::new(false),
    sleeping: AtomicBool::new(false),
    poked: Mutex::new(false),
    wake: Condvar::new(),
};

/// The longest the `agents` thread sleeps while every session is quiet.
const QUIET_TICK: Duration = Duration::from_secs(1);

impl Activity {
    fn note(&self, active: bool) {
        if active {
            self.active.store(true, Ordering::Relaxed);
        }
    }

    /// Output or input came: if the thread is in its long sleep, wake it.
    fn poke(&self) {
        if self.sleeping.load(Ordering::Acquire) {
            *lock(&self.poked) = true;
            self.wake.notify_all();
        }
    }

    /// Sleeps one tick after an active round, else until poked or
    /// [`QUIET_TICK`].
    fn pause(&self) {
        if self.active.swap(false, Ordering::Relaxed) {
            std::thread::sleep(TICK);
            return;
        }
        let mut poked = lock(&self.poked);
        self.sleeping.store(true, Ordering::Release);
        if !*poked {
            poked = wait_timeout(&self.wake, poked, QUIET_TICK).0;
        }
        *poked = false;
        self.sleeping.store(false, Ordering::Release);
        drop(poked);
        // A poke means output just came: let it settle for a tick.
        std::thread::sleep(TICK);
    }
}

/// Output or input reached a session: the `agents` thread looks at once.
pub(in crate::core) fn poke() {
    ACTIVITY.poke();
}

/// Starts the `agents` thread: every [`TICK`] while a session is active, at
/// least every [`QUIET_TICK`] otherwise, it looks at each live session.
pub(in crate::core) fn start(core: &Arc<Core>) {
    let core: Weak<Core> = Arc::downgrade(core);
    let spawned = std::thread::Builder::new()
        .name("agents".into())
        .spawn(move || loop {
            ACTIVITY.pause();
            let Some(core) = core.upgrade() else { return };
            let live: Vec<Arc<SessionRuntime>> = lock(&core.sessions.runtimes)
                .values()
                .filter(|rt| rt.live_client().is_some())
                .cloned()
                .collect();
            for rt in live {
                let looked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    if rt.repaint_pending() {
                        ACTIVITY.note(true);
                        core.repaint_step(&rt);
                    }
                    core.agent_tick(&rt.key, &rt)
                }));
                if looked.is_err() {
                    log::error!("{}: judging its state failed", rt.key);
                }
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot start the agents thread: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::state::Source;

    #[test]
    fn a_prompt_is_sent_once_and_refused_when_empty_bad_or_too_long() {
        let key = SessionKey::parse("shell:p").unwrap();
        let mut p = PromptWrite::new(key.clone());
        // A shell's early flush: refused, but the prompt can still come.
        assert_eq!(p.take().unwrap(), Taken::Empty);
        p.write(b"fix it\n").unwrap();
        assert_eq!(p.take().unwrap(), Taken::Text("fix it".into()));
        assert!(p.take().is_none(), "sent once");

        let mut bad = PromptWrite::new(key.clone());
        bad.write(b"\xff\xfe").unwrap();
        assert!(matches!(bad.take(), Some(Taken::Refused(e)) if e.errno == libc::EINVAL));

        let mut blank = PromptWrite::new(key.clone());
        blank.write(b"\n\r\n").unwrap();
        assert_eq!(blank.take().unwrap(), Taken::Empty);

        let mut long = PromptWrite::new(key);
        long.write(&vec![b'a'; PROMPT_MAX]).unwrap();
        assert_eq!(long.write(b"a").unwrap_err().errno, libc::EINVAL);
        // Nothing of a prompt that went past the cap is sent.
        assert!(matches!(long.take(), Some(Taken::Refused(e)) if e.errno == libc::EINVAL));
        assert!(long.take().is_none());
    }

    #[test]
    fn prompts_go_in_order_and_those_that_gave_up_are_passed() {
        let agent = Agent::default();
        let far = Instant::now() + Duration::from_secs(5);
        let waiting = PromptStage::default();
        let first = Turn::wait(&agent, far, &waiting).unwrap();
        // The second gives up at once; the third is withdrawn while it
        // waits; the fourth is served after the first.
        assert!(Turn::wait(&agent, Instant::now(), &waiting).is_none());
        let withdrawn = PromptStage::default();
        let agent = &agent;
        std::thread::scope(|s| {
            let third = s.spawn(|| Turn::wait(agent, far, &withdrawn).is_some());
            let fourth = s.spawn(|| Turn::wait(agent, far, &waiting).is_some());
            while lock(&agent.queue).next < 4 {
                std::thread::yield_now();
            }
            assert!(withdrawn.withdraw());
            assert!(!third.join().unwrap(), "a withdrawn prompt gets no turn");
            assert!(!fourth.is_finished(), "served before the first ended");
            drop(first);
            assert!(fourth.join().unwrap());
        });
        assert_eq!(lock(&agent.queue).serving, 4);
    }

    #[test]
    fn a_turn_too_quick_for_the_screen_is_started_by_its_end() {
        let key = SessionKey::parse("codex:quick").unwrap();
        let end = HookEvent {
            name: "agent-turn-complete".into(),
            session_id: Some("t-1".into()),
            ..HookEvent::default()
        };
        let agent = Agent::default();
        let mut inner = lock(&agent.inner);
        inner.kind = Some(AgentKind::Codex);
        inner.tracker = AgentKind::Codex.tracker(State::Idle, 0, None);
        inner.tracker.own_id("t-1");

        // No prompt out: an end while idle changes nothing.
        let mut changes = vec![];
        inner.end_turn(&key, end.clone(), 1, &mut changes);
        assert!(changes.is_empty(), "{changes:?}");

        // A prompt's Enter is out and the screen never showed the turn.
        inner.entered = true;
        assert!(!inner.turn_seen());
        inner.end_turn(&key, end, 2, &mut changes);
        let seen: Vec<_> = changes.iter().map(|c| (c.state, c.source)).collect();
        assert_eq!(
            seen,
            [(State::Busy, Source::Prompt), (State::Idle, Source::Notify)]
        );
        assert!(inner.turn_seen(), "the prompt sees its turn taken");
        assert!(!inner.entered);
    }

    /// opencode's plugin writes its events one after another, so the end
    /// of what came before a prompt (a fork's making) may be written after
    /// the prompt's Enter: by when the plugin says it happened, it is not
    /// the new turn's end.
    #[test]
    fn a_turn_end_sent_before_the_prompts_enter_is_not_its_turns() {
        let key = SessionKey::parse("opencode:fork").unwrap();
        let idle = |at_ms| HookEvent {
            name: "session.idle".into(),
            session_id: Some("ses_1".into()),
            at_ms: Some(at_ms),
            ..HookEvent::default()
        };
        let agent = Agent::default();
        let mut inner = lock(&agent.inner);
        inner.kind = Some(AgentKind::Opencode);
        inner.tracker = AgentKind::Opencode.tracker(State::Idle, 0, None);
        inner.tracker.own_id("ses_1");
        inner.entered = true;
        inner.entered_ms = 1_000;
        let mut changes = vec![];
        inner.take_hooks(
            AgentKind::Opencode,
            &key,
            vec![(1_200, idle(900))],
            1_200,
            &mut changes,
        );
        assert!(
            inner.ending.is_none(),
            "an end from before the Enter is held"
        );
        assert!(inner.entered, "the turn is still to be seen");
        inner.take_hooks(
            AgentKind::Opencode,
            &key,
            vec![(1_300, idle(1_100))],
            1_300,
            &mut changes,
        );
        assert!(
            inner.ending.is_some(),
            "the turn's own end is held for its record"
        );
        assert!(changes.is_empty(), "{changes:?}");
    }

    /// Two threads change one session's state at once (a prompt's Enter
    /// and the screen's look, say): its events log still reads as the
    /// chain of changes the tracker made, each from the state before it.
    #[test]
    fn events_from_threads_at_once_are_logged_in_the_order_they_were_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events");
        let rt = Arc::new(SessionRuntime::new(
            SessionKey::parse("shell:order").unwrap(),
            64 * 1024,
            dir.path().join("run.json"),
            dir.path().join("ring"),
        ));
        const ID: &str = "11111111-2222-3333-4444-555555555555";
        {
            let mut inner = lock(&rt.agent.inner);
            inner.kind = Some(AgentKind::Claude);
            inner.tracker = AgentKind::Claude.tracker(State::Idle, 0, None);
            inner.tracker.own_id(ID);
        }
        *lock(&rt.agent.log) = Some(EventLog::open(&path, 1 << 20).unwrap());
        let waits = Arc::new(Waits::default());
        // Both threads start and end turns, from the same moment: many
        // hooks are changes, made by one thread and the other in turn.
        let start = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = [["UserPromptSubmit", "Stop"], ["Stop", "UserPromptSubmit"]]
            .into_iter()
            .map(|names| {
                let (rt, waits, start) = (rt.clone(), waits.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..2000 {
                        let hook = crate::agent::state::HookEvent {
                            name: names[i % 2].into(),
                            session_id: Some(ID.into()),
                            ..Default::default()
                        };
                        process(&rt, &waits, Signal::Hook(hook));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let events = EventLog::read(&path);
        assert!(events.len() > 100, "{}", events.len());
        let mut before = State::Idle;
        for e in &events {
            assert_ne!(e.state, before, "a change logged out of order: {events:?}");
            before = e.state;
        }
        assert!(events.windows(2).all(|w| w[0].ts_ms <= w[1].ts_ms));
        assert_eq!(before, rt.agent.state());
    }

    #[test]
    fn the_foreground_group_is_read_from_proc() {
        // The test runner is not a terminal's foreground job here, or it
        // has no terminal: either way it is readable.
        assert!(foreground_job(std::process::id()).is_some());
        assert_eq!(foreground_job(u32::MAX), None);
    }
}
