//! A line typed to a shell by `prompt`: when the shell has taken it. The
//! close of `prompt` returns then, so a `wait` read right after sees the
//! command running (`busy`) or the line done, never the moment before.
//!
//! Taken means one of:
//! - a job is the terminal's foreground group (the state is made `busy` at
//!   once, not at the next look of the `agents` thread);
//! - the line is done without one (a builtin, a command quicker than any
//!   look): the shell is asleep, not waiting for a child of its own
//!   (`/proc/PID/wchan`: a command substitution, the moment between a fork
//!   and the job taking the terminal), the terminal is its own, and its
//!   output has been quiet for [`QUIET`] since it echoed the line's end and
//!   a line feed after it (the Enter taken), or for [`SILENT`] when no such
//!   echo was seen (echo off, a line wrapped where the echo was looked for).

use crate::agent::state::State;
use crate::core::agents::session_agent::foreground_job_of;
use crate::core::{Core, SessionRuntime};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::terminal::ring::Scrollback;
use std::time::{Duration, Instant};

/// How quiet the output must be after the echo of the line and its Enter.
const QUIET: Duration = Duration::from_millis(100);

/// How quiet the output must be when that echo was never seen.
const SILENT: Duration = Duration::from_secs(1);

/// How often the shell is looked at: often at first (a builtin is done in
/// a few ms), then as often as the `agents` thread looks.
const LOOK_FIRST: Duration = Duration::from_millis(10);
const LOOK_LATER: Duration = Duration::from_millis(40);
const LOOK_FIRST_FOR: Duration = Duration::from_secs(1);

/// The most bytes of the line's end looked for in the echo.
const TAIL_MAX: usize = 16;

/// The most output read for the echo in one look: reads of this size.
const SCAN_MAX: usize = 64 << 10;
const SCAN_READS: usize = 16;

/// What one look at the shell's process shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::core) struct Look {
    /// A job is the terminal's foreground group.
    pub job: bool,
    /// Asleep, and not waiting for a child of its own.
    pub resting: bool,
}

impl Look {
    /// `None` when the process cannot be read (gone, not ours to see).
    pub(in crate::core) fn of(pid: u32) -> Option<Look> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (job, state) = foreground_job_of(&stat)?;
        let resting = state == 'S'
            && !std::fs::read_to_string(format!("/proc/{pid}/wchan"))
                .is_ok_and(|w| waits_for_child(w.trim()));
        Some(Look { job, resting })
    }
}

/// Whether the kernel function a process sleeps in (its `wchan`) is a wait
/// for a child: `wait`, the pipe of a command substitution, `sigsuspend`
/// (how zsh waits). Kernels that hide it show `0`: nothing is known.
fn waits_for_child(wchan: &str) -> bool {
    wchan == "do_wait" || wchan.contains("pipe_read") || wchan.contains("sigsuspend")
}

/// What a look concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::core) enum Taken {
    /// A job runs in the foreground.
    Job,
    /// The line is done; the shell is back at its prompt.
    Done,
}

/// One typed line, watched until taken.
#[derive(Debug)]
pub(in crate::core) struct LineWatch {
    /// The line's last bytes, as the shell echoes them; empty when they
    /// would not echo as typed (control characters).
    tail: Vec<u8>,
    /// The output total when the line was typed.
    before: u64,
    /// Output (stream offset) looked through for the echo.
    scanned: u64,
    /// The tail's echo was seen: a line feed after it is the Enter.
    tail_seen: bool,
    echoed: bool,
    /// The output total at the last look, and when it last changed (or
    /// when the line was typed).
    seen: u64,
    since: Instant,
}

impl LineWatch {
    /// A watch of `line`, typed when the output total was `before`.
    pub(in crate::core) fn new(line: &str, before: u64, now: Instant) -> LineWatch {
        let last = line.rsplit('\n').next().unwrap_or_default().as_bytes();
        let tail = &last[last.len().saturating_sub(TAIL_MAX)..];
        let plain = tail.iter().all(|b| *b >= b' ' && *b != 0x7f);
        LineWatch {
            tail: if plain { tail.to_vec() } else { vec![] },
            before,
            scanned: before,
            tail_seen: false,
            echoed: false,
            seen: before,
            since: now,
        }
    }

    /// One look: the session's output so far and the shell's process.
    /// `None` (no process look): judged by the output alone.
    pub(in crate::core) fn look(
        &mut self,
        output: &Scrollback,
        process: Option<Look>,
        now: Instant,
    ) -> Option<Taken> {
        let total = output.total();
        if total != self.seen {
            self.seen = total;
            self.since = now;
        }
        if process.is_some_and(|p| p.job) {
            return Some(Taken::Job);
        }
        self.scan(output, total);
        if process.is_some_and(|p| !p.resting) {
            return None;
        }
        let need = if self.echoed { QUIET } else { SILENT };
        (now.saturating_duration_since(self.since) >= need).then_some(Taken::Done)
    }

    /// Looks through new output for the echo of the line's end, then for a
    /// line feed after it.
    fn scan(&mut self, output: &Scrollback, total: u64) {
        let mut buf = Vec::new();
        let mut reads = 0;
        while !self.echoed && !self.tail.is_empty() && self.scanned < total && reads < SCAN_READS {
            // The tail may straddle two reads: look again at its length
            // less one, never before the Enter.
            let back = if self.tail_seen {
                0
            } else {
                self.tail.len() as u64 - 1
            };
            let from = self.scanned.saturating_sub(back).max(self.before);
            let start = output.read_stream(from, SCAN_MAX, &mut buf);
            if buf.is_empty() {
                return;
            }
            self.feed(start, &buf);
            reads += 1;
        }
    }

    /// Output bytes from stream offset `start`.
    fn feed(&mut self, start: u64, bytes: &[u8]) {
        let end = start + bytes.len() as u64;
        let mut from = 0;
        if !self.tail_seen {
            match bytes
                .windows(self.tail.len())
                .position(|w| w == self.tail.as_slice())
            {
                Some(at) => {
                    from = at + self.tail.len();
                    self.tail_seen = true;
                }
                None => {
                    // Keep what could begin the tail for the next read.
                    self.scanned = end;
                    return;
                }
            }
        }
        if bytes[from..].contains(&b'\n') {
            self.echoed = true;
        }
        self.scanned = end;
    }
}

impl Core {
    /// After a shell's line and Enter went out (the output total was
    /// `before`): waits until the shell has taken the line ([`LineWatch`]),
    /// making the state `busy` when a job is seen. Bounded by `deadline`.
    pub(in crate::core) fn shell_line_taken(
        &self,
        key: &SessionKey,
        rt: &SessionRuntime,
        line: &str,
        before: u64,
        deadline: Instant,
    ) -> Result<()> {
        let typed = Instant::now();
        let mut watch = LineWatch::new(line, before, typed);
        loop {
            let (state, known) = rt.agent.state_and_pid();
            // The `agents` thread saw the job, or the line ended the program.
            if state != State::Idle {
                return Ok(());
            }
            let process = self.program_pid(key, rt, known).and_then(Look::of);
            let now = Instant::now();
            match watch.look(&rt.scrollback, process, now) {
                Some(Taken::Job) => {
                    self.shell_job_seen(rt);
                    return Ok(());
                }
                Some(Taken::Done) => return Ok(()),
                None => {}
            }
            if now >= deadline {
                return Err(Error::new(
                    libc::ETIMEDOUT,
                    format!(
                        "prompt to {key}: typed, but the shell was neither back at its prompt nor running a job within {} s",
                        self.config.prompt_timeout.as_secs_f32()
                    ),
                ));
            }
            let every = if now - typed < LOOK_FIRST_FOR {
                LOOK_FIRST
            } else {
                LOOK_LATER
            };
            self.agent_wait(rt, (now + every).min(deadline), |s, _| s != State::Idle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT_PROMPT: Option<Look> = Some(Look {
        job: false,
        resting: true,
    });
    const RUNNING: Option<Look> = Some(Look {
        job: false,
        resting: false,
    });
    const JOB: Option<Look> = Some(Look {
        job: true,
        resting: false,
    });

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn a_job_in_the_foreground_is_taken_at_once() {
        let out = Scrollback::new(1 << 16);
        let t0 = Instant::now();
        let mut w = LineWatch::new("sleep 1", 0, t0);
        assert_eq!(w.look(&out, AT_PROMPT, t0), None);
        out.append(b"sleep 1\r\n");
        assert_eq!(w.look(&out, JOB, ms(t0, 5)), Some(Taken::Job));
    }

    #[test]
    fn a_builtin_is_done_once_echoed_and_quiet_at_the_prompt() {
        let out = Scrollback::new(1 << 16);
        out.append(b"old output $ ");
        let before = out.total();
        let t0 = Instant::now();
        let mut w = LineWatch::new("cd /tmp", before, t0);
        // Output came after the Enter, but not the echo: the prompt of
        // the command before, say. Quiet is not enough yet.
        out.append(b"\r\n$ ");
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 1)), None);
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 300)), None);
        // The echo in two pieces, then the Enter's line feed.
        out.append(b"cd /t");
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 310)), None);
        out.append(b"mp");
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 320)), None);
        assert!(!w.echoed, "no Enter yet");
        out.append(b"\r\n\x1b[?2004l\r\x1b[?2004h$ ");
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 330)), None);
        assert!(w.echoed);
        // Running, or waiting for a child, is not done however quiet.
        assert_eq!(w.look(&out, RUNNING, ms(t0, 500)), None);
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 500)), Some(Taken::Done));
    }

    #[test]
    fn without_an_echo_the_output_must_be_quiet_longer() {
        let out = Scrollback::new(1 << 16);
        let t0 = Instant::now();
        // Echo off: nothing at all comes.
        let mut w = LineWatch::new("true", 0, t0);
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 500)), None);
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 1000)), Some(Taken::Done));
        // A control character does not echo as typed: not looked for.
        let mut w = LineWatch::new("a\tb", 0, t0);
        out.append(b"a\tb\r\n");
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 1)), None);
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 200)), None);
        assert_eq!(w.look(&out, AT_PROMPT, ms(t0, 1001)), Some(Taken::Done));
        // No process to look at: the output alone.
        let mut w = LineWatch::new("x", out.total(), t0);
        out.append(b"x\r\n$ ");
        assert_eq!(w.look(&out, None, ms(t0, 1)), None);
        assert_eq!(w.look(&out, None, ms(t0, 101)), Some(Taken::Done));
    }

    #[test]
    fn the_echo_is_found_across_reads_and_of_the_last_line_only() {
        let t0 = Instant::now();
        let long = "echo ".to_string() + &"x".repeat(100) + "-end";
        let out = Scrollback::new(1 << 20);
        let mut w = LineWatch::new(&long, 0, t0);
        // The echo's end split across two looks.
        out.append(&long.as_bytes()[..long.len() - 3]);
        w.look(&out, AT_PROMPT, t0);
        out.append(&long.as_bytes()[long.len() - 3..]);
        out.append(b"\r\n");
        w.look(&out, AT_PROMPT, t0);
        assert!(w.echoed);
        let mut w = LineWatch::new("first\nsecond", out.total(), t0);
        out.append(b"first\r\n");
        w.look(&out, AT_PROMPT, t0);
        assert!(!w.echoed);
        out.append(b"second\r\n");
        w.look(&out, AT_PROMPT, t0);
        assert!(w.echoed);
    }

    #[test]
    fn a_wait_for_a_child_is_told_by_wchan() {
        assert!(waits_for_child("do_wait"));
        assert!(waits_for_child("anon_pipe_read"));
        assert!(waits_for_child("pipe_read"));
        assert!(!waits_for_child("poll_schedule_timeout.constprop.0"));
        assert!(!waits_for_child("wait_woken"));
        assert!(!waits_for_child("0"));
    }
}
