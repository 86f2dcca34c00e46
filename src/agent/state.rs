//! The state of one agent session, derived from signals: the process, the
//! agent's own hook events, Codex's turn-complete notification, and a
//! screen-based verdict as the fallback. Plain logic, time passed in.
//!
//! Precedence (most reliable first): the process (final until the next
//! launch); hooks, applied at once; the screen, applied only once the same
//! verdict has held for a while, so the state never flickers between two
//! reads.

use serde::{Deserialize, Serialize};

/// What a session is doing, as `state` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// No master: never opened, stopped, or killed.
    Stopped,
    /// Launched, not yet ready for a prompt.
    Starting,
    /// Ready for a prompt.
    Idle,
    /// Working on a turn.
    Busy,
    /// Needs the user: a permission dialog or a question.
    Waiting,
    /// The program ended by itself.
    Exited,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Stopped => "stopped",
            State::Starting => "starting",
            State::Idle => "idle",
            State::Busy => "busy",
            State::Waiting => "waiting",
            State::Exited => "exited",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        Some(match s {
            "stopped" => State::Stopped,
            "starting" => State::Starting,
            "idle" => State::Idle,
            "busy" => State::Busy,
            "waiting" => State::Waiting,
            "exited" => State::Exited,
            _ => return None,
        })
    }

    /// Whether a blocked `wait` returns in this state.
    pub fn is_settled(self) -> bool {
        !matches!(self, State::Starting | State::Busy)
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a state change came from, as the `events` log names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Process,
    Hook,
    Notify,
    Screen,
    /// The daemon saw its own `prompt` accepted (Codex announces no turn start).
    Prompt,
    /// Keys written to `input` answered a question.
    Input,
    /// The daemon's own `interrupt` (or a refusal) ended the turn.
    Interrupt,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Process => "process",
            Source::Hook => "hook",
            Source::Notify => "notify",
            Source::Screen => "screen",
            Source::Prompt => "prompt",
            Source::Input => "input",
            Source::Interrupt => "interrupt",
        }
    }
}

/// One event from the agent's hooks (Claude Code) or notify program (Codex),
/// as the hook file records it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookEvent {
    /// `hook_event_name` (Claude) or the notification `type` (Codex:
    /// `agent-turn-complete`).
    pub name: String,
    /// The agent's own session id (Claude `session_id`, Codex `thread-id`).
    pub session_id: Option<String>,
    pub notification_type: Option<String>,
    pub tool_name: Option<String>,
    /// SessionStart's `source` or SessionEnd's `reason`.
    pub reason: Option<String>,
    /// The agent process the hook ran for, when the line says.
    pub pid: Option<u32>,
    /// The hook's own process session, as it ran: a process of the agent's
    /// session, whether or not the hook's parent is still alive when the
    /// line is read.
    #[serde(default)]
    pub sid: Option<u32>,
    /// When the agent says the event happened (ms since the epoch), where
    /// that may be well before its line was written.
    #[serde(default)]
    pub at_ms: Option<u64>,
}

/// What the screen shows, as judged by a per-engine classifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The prompt box is shown and nothing is running.
    Ready,
    /// A turn is running (spinner, "esc to interrupt").
    Working,
    /// A permission dialog or a question is open.
    Dialog,
    /// Nothing to conclude (blank, redrawing, unknown screen).
    Unknown,
}

impl Verdict {
    fn state(self) -> Option<State> {
        match self {
            Verdict::Ready => Some(State::Idle),
            Verdict::Working => Some(State::Busy),
            Verdict::Dialog => Some(State::Waiting),
            Verdict::Unknown => None,
        }
    }
}

/// Everything that can move the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    /// A master was started (launch or resume).
    Launched,
    /// The master is gone (stopped, killed, or never there).
    MasterGone,
    /// The agent program ended by itself; `detail` is its outcome.
    Exited(String),
    /// A hook or notify event.
    Hook(HookEvent),
    /// The current screen's verdict.
    Screen(Verdict),
    /// A prompt written to `prompt` was taken: the turn has started.
    Submitted,
    /// Keys went to the program while it asked something: taken as its
    /// answer until the screen or a hook says otherwise (a dialog still
    /// drawn brings `waiting` back once the hooks are quiet).
    Answered,
    /// A question the program asks before it is ready (the workspace's
    /// trust, how to sign in) was answered: `starting` again, until the
    /// screen shows it ready or asks the next one.
    SetUpAnswered,
    /// The daemon ended the turn (`interrupt`, or a refused question) and
    /// saw it end: the agents fire no hook for it.
    Interrupted,
}

/// A state change, as one line of the `events` log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub state: State,
    pub source: Source,
    pub detail: String,
}

/// What the tracker did with a signal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The state changed.
    Changed(Change),
    /// Taken, the state stays as it is.
    Unchanged,
    /// Refused: the reason (another session's hook, a signal after the end).
    Rejected(String),
}

/// Which transitions an engine's hooks announce; the screen decides the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coverage {
    /// A turn starting (Claude UserPromptSubmit).
    pub turn_start: bool,
    /// A turn ending (Claude Stop, Codex turn complete).
    pub turn_end: bool,
    /// A dialog opening (Claude PermissionRequest, Notification).
    pub dialog: bool,
}

impl Coverage {
    /// Claude Code with the generated `--settings` hooks.
    pub const CLAUDE: Coverage = Coverage {
        turn_start: true,
        turn_end: true,
        // Its hooks announce a question before it takes keys: the screen
        // says when it does.
        dialog: false,
    };
    /// Codex with its `notify` program: turn complete only.
    pub const CODEX_NOTIFY: Coverage = Coverage {
        turn_start: false,
        turn_end: true,
        dialog: false,
    };
    /// No hooks at all (shells, unknown engines).
    pub const NONE: Coverage = Coverage {
        turn_start: false,
        turn_end: false,
        dialog: false,
    };
}

/// Timings of the screen fallback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// How long one screen verdict must hold before it moves the state.
    pub screen_hold_ms: u64,
    /// How long a question must be drawn before it is `waiting`: the TUIs
    /// drop keys typed while they set up a dialog, and on a loaded machine
    /// that takes longer than a frame.
    pub dialog_hold_ms: u64,
    /// How long after the last hook event the screen may overrule a state
    /// the hooks set (an interrupted turn or a refused permission fires no
    /// Stop).
    pub hook_quiet_ms: u64,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            screen_hold_ms: 800,
            dialog_hold_ms: 1500,
            hook_quiet_ms: 3000,
        }
    }
}

/// The state of one session and what it needs to judge the next signal.
#[derive(Clone, Debug)]
pub struct Tracker {
    state: State,
    since_ms: u64,
    coverage: Coverage,
    timing: Timing,
    /// The agent session ids whose hook events count; empty: the first
    /// SessionStart after a launch names it.
    own_ids: Vec<String>,
    /// When the last accepted hook event arrived.
    last_hook_ms: Option<u64>,
    /// A screen verdict seen but not yet held long enough: (verdict, first seen).
    pending: Option<(Verdict, u64)>,
    /// When a hook announced a question (a permission request): `waiting`
    /// comes once the screen shows it taking keys, or, drawn in a way the
    /// screen reader does not know, [`ANNOUNCED_WAIT_MS`] later.
    announced_ms: Option<u64>,
}

/// How long after a hook announced a question `waiting` comes without
/// the screen showing it.
pub const ANNOUNCED_WAIT_MS: u64 = 3_000;

/// The most session ids a tracker remembers (resumes may add new ones).
const MAX_IDS: usize = 16;

impl Tracker {
    pub fn new(state: State, now_ms: u64, coverage: Coverage) -> Tracker {
        Tracker {
            state,
            since_ms: now_ms,
            coverage,
            timing: Timing::default(),
            own_ids: vec![],
            last_hook_ms: None,
            pending: None,
            announced_ms: None,
        }
    }

    pub fn with_timing(mut self, timing: Timing) -> Tracker {
        self.timing = timing;
        self
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// When the current state began.
    pub fn since_ms(&self) -> u64 {
        self.since_ms
    }

    /// Hook events naming this agent session id count from now on (the id
    /// given with `--session-id`, or the one a resume announced).
    pub fn own_id(&mut self, id: &str) {
        if !self.own_ids.iter().any(|i| i == id) {
            if self.own_ids.len() == MAX_IDS {
                self.own_ids.remove(0);
            }
            self.own_ids.push(id.to_string());
        }
    }

    pub fn own_ids(&self) -> &[String] {
        &self.own_ids
    }

    fn set(&mut self, state: State, source: Source, detail: String, now_ms: u64) -> Outcome {
        self.pending = None;
        if state == self.state {
            return Outcome::Unchanged;
        }
        self.announced_ms = None;
        self.state = state;
        self.since_ms = now_ms;
        Outcome::Changed(Change {
            state,
            source,
            detail,
        })
    }

    /// Takes one signal at time `now_ms`.
    pub fn apply(&mut self, signal: &Signal, now_ms: u64) -> Outcome {
        match signal {
            Signal::Launched => {
                self.last_hook_ms = None;
                self.set(State::Starting, Source::Process, "launched".into(), now_ms)
            }
            Signal::MasterGone => self.set(
                State::Stopped,
                Source::Process,
                "master gone".into(),
                now_ms,
            ),
            Signal::Exited(detail) => {
                self.set(State::Exited, Source::Process, detail.clone(), now_ms)
            }
            _ if matches!(self.state, State::Stopped | State::Exited) => {
                Outcome::Rejected(format!("the session is {}", self.state))
            }
            Signal::Hook(event) => self.hook(event, now_ms),
            Signal::Screen(verdict) => self.screen(*verdict, now_ms),
            // Only out of `idle`: a hook may already have said more.
            Signal::Submitted if self.state == State::Idle => self.set(
                State::Busy,
                Source::Prompt,
                "prompt accepted".into(),
                now_ms,
            ),
            Signal::Submitted => Outcome::Unchanged,
            Signal::Answered if self.state == State::Waiting => {
                self.pending = None;
                self.set(
                    State::Busy,
                    Source::Input,
                    "answered through input".into(),
                    now_ms,
                )
            }
            Signal::Answered => Outcome::Unchanged,
            Signal::SetUpAnswered if self.state == State::Waiting => {
                self.pending = None;
                self.set(
                    State::Starting,
                    Source::Input,
                    "answered a question asked before it was ready".into(),
                    now_ms,
                )
            }
            Signal::SetUpAnswered => Outcome::Unchanged,
            Signal::Interrupted if matches!(self.state, State::Busy | State::Waiting) => {
                self.pending = None;
                self.set(State::Idle, Source::Interrupt, "interrupted".into(), now_ms)
            }
            Signal::Interrupted => Outcome::Unchanged,
        }
    }

    fn hook(&mut self, event: &HookEvent, now_ms: u64) -> Outcome {
        match &event.session_id {
            Some(id) if !self.own_ids.iter().any(|i| i == id) => {
                // A SessionStart right after a launch names the session (a
                // resume may continue under a new id); a child agent started
                // by a tool can only fire later.
                if event.name == "SessionStart" && self.state == State::Starting {
                    self.own_id(id);
                } else {
                    return Outcome::Rejected(format!(
                        "{} from another session ({id})",
                        event.name
                    ));
                }
            }
            Some(_) => {}
            None => return Outcome::Rejected(format!("{} without a session id", event.name)),
        }
        self.last_hook_ms = Some(now_ms);
        // Anything but another announcement means the question announced
        // before is behind the agent (a tool ran, the turn ended).
        if !matches!(
            event.name.as_str(),
            "PermissionRequest" | "Notification" | "permission.asked" | "permission.updated"
        ) {
            self.announced_ms = None;
        }
        let detail = hook_detail(event);
        let (state, source) = match event.name.as_str() {
            // Gemini CLI: BeforeAgent as a prompt is taken.
            "UserPromptSubmit" | "PreToolUse" | "PostToolUse" | "PostToolUseFailure"
            | "BeforeAgent" => (State::Busy, Source::Hook),
            // A question is coming: `waiting` once the screen shows it
            // taking keys (an answer typed before that is lost).
            "PermissionRequest" => return self.announce(now_ms),
            "Notification" => match event.notification_type.as_deref() {
                // Gemini CLI's tool permission.
                Some("permission_prompt" | "elicitation_dialog" | "ToolPermission") => {
                    return self.announce(now_ms)
                }
                _ => return Outcome::Unchanged,
            },
            // Gemini CLI: AfterAgent when the turn's answer is complete.
            "Stop" | "StopFailure" | "AfterAgent" => (State::Idle, Source::Hook),
            "agent-turn-complete" => (State::Idle, Source::Notify),
            // opencode's plugin: its session's status (`busy`, `retry`,
            // `idle`), its turn's end, a tool's permission asked (answered:
            // the status that follows says what came of it).
            "session.status" => match event.reason.as_deref() {
                Some("busy" | "retry") => (State::Busy, Source::Hook),
                _ => return Outcome::Unchanged,
            },
            "session.idle" => (State::Idle, Source::Hook),
            // The turn failed (an API error it does not retry, or an
            // interrupt): over, with the error's name as the reason.
            "session.error" => (State::Idle, Source::Hook),
            "permission.asked" | "permission.updated" => return self.announce(now_ms),
            // `/clear` and `/resume` end one conversation and go on with the
            // next in the same program; any other end means the program is
            // on its way out.
            "SessionEnd" if matches!(event.reason.as_deref(), Some("clear" | "resume")) => {
                return Outcome::Unchanged
            }
            "SessionEnd" => (State::Exited, Source::Hook),
            // SessionStart comes before the prompt box can take input: the
            // screen (or the first prompt's hooks) says when it is ready.
            _ => return Outcome::Unchanged,
        };
        self.set(state, source, detail, now_ms)
    }

    /// A hook said a question is coming (see `announced_ms`).
    fn announce(&mut self, now_ms: u64) -> Outcome {
        if self.state != State::Waiting {
            self.announced_ms.get_or_insert(now_ms);
        }
        Outcome::Unchanged
    }

    fn screen(&mut self, verdict: Verdict, now_ms: u64) -> Outcome {
        // Announced, and never shown as the screen reader knows questions.
        if let Some(at) = self.announced_ms {
            if self.state == State::Waiting {
                self.announced_ms = None;
            } else if now_ms.saturating_sub(at) >= ANNOUNCED_WAIT_MS
                // A screen still showing the turn run is not a question yet
                // (a loaded machine draws it late): only one the reader
                // cannot tell apart.
                && verdict == Verdict::Unknown
            {
                return self.set(
                    State::Waiting,
                    Source::Hook,
                    "a question a hook announced".into(),
                    now_ms,
                );
            }
        }
        let Some(target) = verdict.state() else {
            self.pending = None;
            return Outcome::Unchanged;
        };
        if target == self.state {
            self.pending = None;
            return Outcome::Unchanged;
        }
        let first_seen = match self.pending {
            Some((v, at)) if v == verdict => at,
            _ => {
                self.pending = Some((verdict, now_ms));
                now_ms
            }
        };
        let hold = match verdict {
            Verdict::Dialog => self.timing.dialog_hold_ms,
            _ => self.timing.screen_hold_ms,
        };
        if now_ms.saturating_sub(first_seen) < hold {
            return Outcome::Unchanged;
        }
        if !self.screen_may_set(target, now_ms) {
            return Outcome::Unchanged;
        }
        let detail = format!("screen shows {verdict:?}").to_lowercase();
        self.set(target, Source::Screen, detail, now_ms)
    }

    /// Whether a held screen verdict may move the state to `target`: always
    /// out of `starting`; otherwise where the hooks do not announce that
    /// transition, or the hooks have been quiet long enough that they missed
    /// one (an interrupt fires no Stop).
    fn screen_may_set(&self, target: State, now_ms: u64) -> bool {
        if self.state == State::Starting {
            return true;
        }
        let covered = match target {
            State::Busy => self.coverage.turn_start,
            State::Idle => self.coverage.turn_end,
            State::Waiting => self.coverage.dialog,
            _ => true,
        };
        if !covered {
            return true;
        }
        match self.last_hook_ms {
            // Hooks announce this and have never spoken: they may be broken.
            None => now_ms.saturating_sub(self.since_ms) >= self.timing.hook_quiet_ms,
            Some(at) => {
                now_ms.saturating_sub(at) >= self.timing.hook_quiet_ms
                    && now_ms.saturating_sub(self.since_ms) >= self.timing.hook_quiet_ms
            }
        }
    }
}

fn hook_detail(event: &HookEvent) -> String {
    let mut detail = event.name.clone();
    for extra in [&event.tool_name, &event.notification_type, &event.reason]
        .into_iter()
        .flatten()
    {
        detail.push(' ');
        detail.push_str(extra);
    }
    detail
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "11111111-2222-3333-4444-555555555555";

    fn hook(name: &str) -> Signal {
        Signal::Hook(HookEvent {
            name: name.into(),
            session_id: Some(ID.into()),
            ..Default::default()
        })
    }

    #[test]
    fn gemini_hooks_move_the_state() {
        let mut t = claude();
        t.apply(&Signal::Screen(Verdict::Ready), 0);
        t.apply(&Signal::Screen(Verdict::Ready), 1000);
        assert_eq!(changed(t.apply(&hook("BeforeAgent"), 2000)), State::Busy);
        assert_eq!(changed(t.apply(&hook("AfterAgent"), 3000)), State::Idle);
        let permission = Signal::Hook(HookEvent {
            name: "Notification".into(),
            session_id: Some(ID.into()),
            notification_type: Some("ToolPermission".into()),
            ..Default::default()
        });
        t.apply(&hook("BeforeAgent"), 4000);
        // Announced: waiting once the screen shows the question.
        t.apply(&permission, 4100);
        t.apply(&Signal::Screen(Verdict::Dialog), 4200);
        // A question holds 1.5 s, as Claude's.
        assert_eq!(
            changed(t.apply(&Signal::Screen(Verdict::Dialog), 5800)),
            State::Waiting
        );
    }

    fn claude() -> Tracker {
        let mut t = Tracker::new(State::Starting, 0, Coverage::CLAUDE);
        t.own_id(ID);
        t
    }

    fn changed(o: Outcome) -> State {
        match o {
            Outcome::Changed(c) => c.state,
            other => panic!("expected a change, got {other:?}"),
        }
    }

    #[test]
    fn a_prompt_with_a_tool_call_goes_busy_waiting_busy_idle() {
        let mut t = claude();
        assert_eq!(t.apply(&hook("SessionStart"), 10), Outcome::Unchanged);
        assert_eq!(
            t.apply(&Signal::Screen(Verdict::Ready), 20),
            Outcome::Unchanged
        );
        assert_eq!(
            changed(t.apply(&Signal::Screen(Verdict::Ready), 900)),
            State::Idle
        );
        assert_eq!(
            changed(t.apply(&hook("UserPromptSubmit"), 1000)),
            State::Busy
        );
        assert_eq!(t.apply(&hook("PreToolUse"), 1200), Outcome::Unchanged);
        // Announced, but waiting only once the dialog is drawn and held.
        assert_eq!(
            t.apply(&hook("PermissionRequest"), 1210),
            Outcome::Unchanged
        );
        assert_eq!(t.state(), State::Busy);
        assert_eq!(
            t.apply(&Signal::Screen(Verdict::Dialog), 1300),
            Outcome::Unchanged
        );
        // A question holds longer than other verdicts (1.5 s).
        assert_eq!(
            t.apply(&Signal::Screen(Verdict::Dialog), 2200),
            Outcome::Unchanged
        );
        assert_eq!(
            changed(t.apply(&Signal::Screen(Verdict::Dialog), 2800)),
            State::Waiting
        );
        let note = Signal::Hook(HookEvent {
            name: "Notification".into(),
            session_id: Some(ID.into()),
            notification_type: Some("permission_prompt".into()),
            ..Default::default()
        });
        assert_eq!(t.apply(&note, 6000), Outcome::Unchanged);
        assert_eq!(changed(t.apply(&hook("PostToolUse"), 7000)), State::Busy);
        match t.apply(&hook("Stop"), 7100) {
            Outcome::Changed(c) => {
                assert_eq!(c.state, State::Idle);
                assert_eq!(c.source, Source::Hook);
                assert_eq!(c.detail, "Stop");
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(t.since_ms(), 7100);
    }

    /// A question drawn before the program is ready (Gemini's trust and
    /// sign-in), answered: `starting` again, and ready once the screen says.
    #[test]
    fn a_question_before_it_was_ready_answered_is_starting_again() {
        let mut t = claude();
        let dialog = Signal::Screen(Verdict::Dialog);
        t.apply(&dialog, 0);
        assert_eq!(changed(t.apply(&dialog, 2000)), State::Waiting);
        assert_eq!(
            changed(t.apply(&Signal::SetUpAnswered, 2100)),
            State::Starting
        );
        assert_eq!(t.apply(&Signal::SetUpAnswered, 2200), Outcome::Unchanged);
        let ready = Signal::Screen(Verdict::Ready);
        t.apply(&ready, 2300);
        assert_eq!(changed(t.apply(&ready, 3200)), State::Idle);
    }

    #[test]
    fn a_question_announced_but_never_recognised_on_the_screen_is_waiting_later() {
        let mut t = claude();
        t.apply(&hook("UserPromptSubmit"), 0);
        t.apply(&hook("PermissionRequest"), 100);
        let unknown = Signal::Screen(Verdict::Unknown);
        assert_eq!(
            t.apply(&unknown, 100 + ANNOUNCED_WAIT_MS - 1),
            Outcome::Unchanged
        );
        assert_eq!(
            changed(t.apply(&unknown, 100 + ANNOUNCED_WAIT_MS)),
            State::Waiting
        );
        // Answered: busy again, and the announcement is spent.
        assert_eq!(changed(t.apply(&Signal::Answered, 5000)), State::Busy);

        assert_eq!(t.apply(&unknown, 9000), Outcome::Unchanged);
        assert_eq!(changed(t.apply(&Signal::Interrupted, 9100)), State::Idle);
    }

    /// A question announced and then left behind (its tool ran, the turn
    /// ended) never turns a later state into `waiting`.
    #[test]
    fn an_announcement_the_agent_moved_past_is_forgotten() {
        let mut t = claude();
        t.apply(&hook("UserPromptSubmit"), 10);
        t.apply(&hook("PermissionRequest"), 20);
        // The tool ran while busy: nothing changes, the question is behind.
        assert_eq!(t.apply(&hook("PostToolUse"), 30), Outcome::Unchanged);
        let unknown = Signal::Screen(Verdict::Unknown);
        assert_eq!(
            t.apply(&unknown, 20 + ANNOUNCED_WAIT_MS + 1),
            Outcome::Unchanged
        );
        assert_eq!(t.state(), State::Busy);
        assert_eq!(changed(t.apply(&hook("Stop"), 5000)), State::Idle);
        assert_eq!(t.apply(&unknown, 9000), Outcome::Unchanged);
        assert_eq!(t.state(), State::Idle);
    }

    #[test]
    fn readiness_needs_the_screen_verdict_to_hold() {
        let mut t = claude();
        // Out of `starting` the hold is still required: a frame is not enough.
        let mut t2 = claude().with_timing(Timing {
            screen_hold_ms: 500,
            dialog_hold_ms: 500,
            hook_quiet_ms: 3000,
        });
        assert_eq!(
            t2.apply(&Signal::Screen(Verdict::Ready), 0),
            Outcome::Unchanged
        );
        assert_eq!(
            t2.apply(&Signal::Screen(Verdict::Unknown), 300),
            Outcome::Unchanged
        );
        assert_eq!(
            t2.apply(&Signal::Screen(Verdict::Ready), 400),
            Outcome::Unchanged
        );
        assert_eq!(
            t2.apply(&Signal::Screen(Verdict::Ready), 800),
            Outcome::Unchanged
        );
        assert_eq!(
            changed(t2.apply(&Signal::Screen(Verdict::Ready), 900)),
            State::Idle
        );
        // The default hold.
        assert_eq!(
            t.apply(&Signal::Screen(Verdict::Ready), 0),
            Outcome::Unchanged
        );
        assert_eq!(
            changed(t.apply(&Signal::Screen(Verdict::Ready), 800)),
            State::Idle
        );
    }

    #[test]
    fn hook_events_of_another_session_are_rejected() {
        let mut t = claude();
        t.apply(&hook("UserPromptSubmit"), 10);
        let child = Signal::Hook(HookEvent {
            name: "Stop".into(),
            session_id: Some("99999999-0000-0000-0000-000000000000".into()),
            ..Default::default()
        });
        assert!(matches!(t.apply(&child, 20), Outcome::Rejected(_)));
        assert_eq!(t.state(), State::Busy);
        let anonymous = Signal::Hook(HookEvent {
            name: "Stop".into(),
            ..Default::default()
        });
        assert!(matches!(t.apply(&anonymous, 30), Outcome::Rejected(_)));
        assert_eq!(t.state(), State::Busy);
    }

    #[test]
    fn the_first_session_start_after_a_launch_names_the_session() {
        let mut t = Tracker::new(State::Stopped, 0, Coverage::CLAUDE);
        t.apply(&Signal::Launched, 1);
        let start = Signal::Hook(HookEvent {
            name: "SessionStart".into(),
            session_id: Some("new-id".into()),
            reason: Some("resume".into()),
            ..Default::default()
        });
        assert_eq!(t.apply(&start, 2), Outcome::Unchanged);
        assert_eq!(t.own_ids(), ["new-id"]);
        let submit = Signal::Hook(HookEvent {
            name: "UserPromptSubmit".into(),
            session_id: Some("new-id".into()),
            ..Default::default()
        });
        assert_eq!(changed(t.apply(&submit, 3)), State::Busy);
        // Once busy, another SessionStart (a child agent) is not adopted.
        let child = Signal::Hook(HookEvent {
            name: "SessionStart".into(),
            session_id: Some("child".into()),
            ..Default::default()
        });
        assert!(matches!(t.apply(&child, 4), Outcome::Rejected(_)));
    }

    #[test]
    fn the_process_is_final_until_the_next_launch() {
        let mut t = claude();
        t.apply(&hook("UserPromptSubmit"), 1);
        assert_eq!(
            changed(t.apply(&Signal::Exited("exit 0".into()), 2)),
            State::Exited
        );
        assert!(matches!(t.apply(&hook("Stop"), 3), Outcome::Rejected(_)));
        assert!(matches!(
            t.apply(&Signal::Screen(Verdict::Ready), 5000),
            Outcome::Rejected(_)
        ));
        assert_eq!(changed(t.apply(&Signal::MasterGone, 4)), State::Stopped);
        assert_eq!(changed(t.apply(&Signal::Launched, 5)), State::Starting);
        assert!(!State::Starting.is_settled());
        assert!(State::Waiting.is_settled());
    }

    #[test]
    fn session_end_exits_except_for_clear() {
        let mut t = claude();
        t.apply(&hook("Stop"), 1);
        let clear = Signal::Hook(HookEvent {
            name: "SessionEnd".into(),
            session_id: Some(ID.into()),
            reason: Some("clear".into()),
            ..Default::default()
        });
        assert_eq!(t.apply(&clear, 2), Outcome::Unchanged);
        assert_eq!(changed(t.apply(&hook("SessionEnd"), 3)), State::Exited);
    }

    #[test]
    fn other_notifications_change_nothing() {
        let mut t = claude();
        t.apply(&hook("Stop"), 1);
        let idle = Signal::Hook(HookEvent {
            name: "Notification".into(),
            session_id: Some(ID.into()),
            notification_type: Some("idle_prompt".into()),
            ..Default::default()
        });
        assert_eq!(t.apply(&idle, 2), Outcome::Unchanged);
        assert_eq!(t.state(), State::Idle);
    }

    #[test]
    fn with_hooks_the_screen_cannot_flicker_the_state() {
        let mut t = claude();
        t.apply(&hook("UserPromptSubmit"), 1000);
        // The screen has not redrawn yet and still shows the prompt box:
        // held for a second, but hooks spoke recently, so busy stays.
        for ms in (1000..2500).step_by(100) {
            assert_eq!(
                t.apply(&Signal::Screen(Verdict::Ready), ms),
                Outcome::Unchanged
            );
            assert_eq!(t.state(), State::Busy);
        }
    }

    #[test]
    fn an_interrupt_without_a_stop_hook_ends_by_the_screen_after_quiet() {
        let mut t = claude();
        t.apply(&hook("UserPromptSubmit"), 0);
        t.apply(&hook("PermissionRequest"), 100);
        // The user refused the permission: no hook fires, the prompt box is back.
        let mut ms = 200;
        while ms < 3000 {
            assert_eq!(
                t.apply(&Signal::Screen(Verdict::Ready), ms),
                Outcome::Unchanged
            );
            ms += 200;
        }
        match t.apply(&Signal::Screen(Verdict::Ready), 3200) {
            Outcome::Changed(c) => {
                assert_eq!(c.state, State::Idle);
                assert_eq!(c.source, Source::Screen);
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn codex_turn_start_comes_from_the_screen_and_its_end_from_notify() {
        let mut t = Tracker::new(State::Starting, 0, Coverage::CODEX_NOTIFY);
        t.own_id("thread-1");
        t.apply(&Signal::Screen(Verdict::Ready), 0);
        assert_eq!(
            changed(t.apply(&Signal::Screen(Verdict::Ready), 900)),
            State::Idle
        );
        t.apply(&Signal::Screen(Verdict::Working), 1000);
        assert_eq!(
            changed(t.apply(&Signal::Screen(Verdict::Working), 1800)),
            State::Busy
        );
        let done = Signal::Hook(HookEvent {
            name: "agent-turn-complete".into(),
            session_id: Some("thread-1".into()),
            ..Default::default()
        });
        match t.apply(&done, 2000) {
            Outcome::Changed(c) => {
                assert_eq!(c.state, State::Idle);
                assert_eq!(c.source, Source::Notify);
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn shells_follow_the_screen_verdict_alone() {
        let mut t = Tracker::new(State::Idle, 0, Coverage::NONE);
        t.apply(&Signal::Screen(Verdict::Working), 0);
        assert_eq!(
            changed(t.apply(&Signal::Screen(Verdict::Working), 800)),
            State::Busy
        );
        // A verdict that changes before it holds resets the hold.
        t.apply(&Signal::Screen(Verdict::Ready), 900);
        t.apply(&Signal::Screen(Verdict::Working), 1000);
        assert_eq!(
            t.apply(&Signal::Screen(Verdict::Ready), 1700),
            Outcome::Unchanged
        );
        assert_eq!(
            changed(t.apply(&Signal::Screen(Verdict::Ready), 2500)),
            State::Idle
        );
    }

    #[test]
    fn names_round_trip() {
        for s in [
            State::Stopped,
            State::Starting,
            State::Idle,
            State::Busy,
            State::Waiting,
            State::Exited,
        ] {
            assert_eq!(State::parse(s.as_str()), Some(s));
        }
        assert_eq!(State::parse("bogus"), None);
    }
}
