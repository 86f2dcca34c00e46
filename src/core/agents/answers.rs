//! Answering the agent from a script: `ctl`'s `approve`, `deny`,
//! `answer N`, `answer TEXT` and `interrupt`. Each types what that agent
//! needs when its question (or its turn) is on the screen, returns once
//! the agent has left it (the keys are sent again once if they were
//! dropped), and fails with a reason otherwise. Runs on a slow-operation
//! thread.

use crate::agent::dialogs::{self, Answer, Dialog, Kind};
use crate::agent::screen_rules::Tui;
use crate::agent::state::{Signal, State};
use crate::core::{Core, SessionRuntime};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::sync::lock;
use std::time::{Duration, Instant};

/// The pause between two keys: the TUIs take a burst as a paste.
const KEY_GAP: Duration = Duration::from_millis(60);
/// How long the agent has to leave the question (or the turn) before the
/// keys are sent again, once.
const LEAVE_WITHIN: Duration = Duration::from_millis(1500);
/// How long it has after the keys went again: a loaded machine redraws
/// late, and a third sending could answer the next question.
const LEFT_BY: Duration = Duration::from_secs(10);
/// How long `interrupt` waits for the turn to show on an opencode screen
/// before its first Esc.
const TURN_SHOWS_WITHIN: Duration = Duration::from_millis(1500);
/// How often the screen is looked at meanwhile.
const LOOK_EVERY: Duration = Duration::from_millis(40);
const ESC: &[u8] = b"\x1b";

impl Core {
    /// The question `key`'s agent shows now, if it waits for an answer.
    pub fn waiting_for(&self, key: &SessionKey) -> Option<Dialog> {
        let rt = lock(&self.sessions.runtimes).get(key).cloned()?;
        if rt.agent.state() != State::Waiting {
            return None;
        }
        let tui = self.tui_of(key)?;
        dialogs::read(&tui, &rt.screen_text())
    }

    /// The TUI `key` runs, or ENOTSUP for a session that runs no agent.
    fn agent_tui(&self, key: &SessionKey) -> Result<Tui> {
        self.tui_of(key).ok_or_else(|| {
            Error::new(
                libc::ENOTSUP,
                format!("{key} runs no agent that asks or works in turns; type into its input"),
            )
        })
    }

    fn tui_of(&self, key: &SessionKey) -> Option<Tui> {
        crate::core::agents::session_agent::tui_of(self.engine(key).ok()?)
    }

    /// `approve`, `deny`, `answer N|TEXT`: the answer typed into the
    /// question on the screen.
    pub(in crate::core) fn answer(&self, key: &SessionKey, answer: Answer) -> Result<()> {
        let tui = self.agent_tui(key)?;
        let rt = self.runtime(key);
        let client = rt.live_client().ok_or_else(|| nothing_waits(key))?;
        let asked = (rt.agent.state() == State::Waiting)
            .then(|| dialogs::read(&tui, &rt.screen_text()))
            .flatten()
            .ok_or_else(|| nothing_waits(key))?;
        let keys = dialogs::keys(&asked, &answer).map_err(Error::invalid)?;
        let gone = |rt: &SessionRuntime| {
            dialogs::read(&tui, &rt.screen_text())
                .is_none_or(|now| now.text != asked.text || now.detail != asked.detail)
        };
        for within in [LEAVE_WITHIN, LEFT_BY] {
            for k in &keys {
                client
                    .push(k, Instant::now() + crate::core::INPUT_DEADLINE)
                    .map_err(|(_, e)| {
                        crate::core::session_runtime::send_error(key, "answer", &e)
                    })?;
                std::thread::sleep(KEY_GAP);
            }
            if self.screen_shows(&rt, within, &gone) {
                rt.note_input();
                // A refusal ends the turn (Claude and Codex say it was
                // interrupted, and fire no hook); any other answer goes on.
                // A question asked before the agent was ready leaves it
                // starting (a refused one makes it exit).
                let before_ready = matches!(asked.kind, Kind::Trust | Kind::SignIn);
                let signal = match (&answer, before_ready) {
                    (Answer::Deny, true) => None,
                    (Answer::Deny, false) => Some(Signal::Interrupted),
                    (_, true) => Some(Signal::SetUpAnswered),
                    (_, false) => Some(Signal::Answered),
                };
                if let Some(signal) = signal {
                    crate::core::agents::session_agent::process(&rt, &self.agents.waits, signal);
                }
                return Ok(());
            }
        }
        Err(Error::new(
            libc::ETIMEDOUT,
            format!(
                "{key} still shows \"{}\" after the answer was typed twice",
                asked.text
            ),
        ))
    }

    /// `interrupt`: ends the turn the agent is working on (Esc, as a
    /// person does), and the session is `idle` as soon as the screen no
    /// longer shows the turn running: the daemon's own interrupt is the
    /// evidence, as the agents fire no hook for it.
    pub(in crate::core) fn interrupt(&self, key: &SessionKey) -> Result<()> {
        let tui = self.agent_tui(key)?;
        let rt = self.runtime(key);
        let client = rt.live_client().ok_or_else(|| nothing_runs(key))?;
        if !matches!(rt.agent.state(), State::Busy | State::Waiting) {
            return Err(nothing_runs(key));
        }
        // opencode's plugin says `busy` before its TUI draws the turn, and
        // an Esc before that is not taken as an interrupt: the turn is
        // given a moment to show first.
        if matches!(self.engine(key)?.store, crate::engine::Store::Opencode(_)) {
            let working = |rt: &SessionRuntime| {
                crate::agent::screen_rules::verdict(&tui, &rt.screen_text())
                    == crate::agent::state::Verdict::Working
            };
            self.screen_shows(&rt, TURN_SHOWS_WITHIN, &working);
        }
        let stopped = |rt: &SessionRuntime| {
            let screen = rt.screen_text();
            crate::agent::screen_rules::verdict(&tui, &screen)
                != crate::agent::state::Verdict::Working
                && dialogs::read(&tui, &screen).is_none()
        };
        for within in [LEAVE_WITHIN, LEFT_BY] {
            client
                .push(ESC, Instant::now() + crate::core::INPUT_DEADLINE)
                .map_err(|(_, e)| crate::core::session_runtime::send_error(key, "interrupt", &e))?;
            if self.screen_shows(&rt, within, &stopped) {
                rt.note_input();
                crate::core::agents::session_agent::process(
                    &rt,
                    &self.agents.waits,
                    Signal::Interrupted,
                );
                return Ok(());
            }
        }
        Err(Error::new(
            libc::ETIMEDOUT,
            format!("{key} still shows its turn running after Esc was sent twice"),
        ))
    }

    /// Looks at the screen until `shows` holds, at most `within`.
    fn screen_shows(
        &self,
        rt: &SessionRuntime,
        within: Duration,
        shows: &dyn Fn(&SessionRuntime) -> bool,
    ) -> bool {
        let until = Instant::now() + within;
        loop {
            if shows(rt) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(LOOK_EVERY);
        }
    }
}

fn nothing_waits(key: &SessionKey) -> Error {
    Error::new(
        libc::ENOMSG,
        format!("{key} is not waiting for an answer: no question is on its screen"),
    )
}

fn nothing_runs(key: &SessionKey) -> Error {
    Error::new(
        libc::ENOMSG,
        format!("{key} has no turn running to interrupt"),
    )
}
