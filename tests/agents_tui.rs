//! The real Claude Code and Codex TUIs under a plain `dtach -n` master,
//! offline against the model API stand-in, typed into as a person would.
//! Their hooks (Claude `--settings`, Codex `-c notify=`) run the real
//! `sessionfs hook` subcommand; the hook file is read with
//! `agent::events::Follower` and reduced by `agent::state::Tracker`, with
//! screen verdicts from `agent::screen` as the fallback. What these show is
//! recorded in docs/AGENTS.md.

mod common;

use common::agents::{agents_bin, AgentEnv};
use common::model_api::{Answer, ModelApi};
use common::tui::Tui;
use common::{wait_for, wait_until, wait_within};
use sessionfs::agent::events::Follower;
use sessionfs::agent::hooks::{codex_notify_arg, parse_hook_line, write_claude_settings};
use sessionfs::agent::screen_rules::{self, verdict};
use sessionfs::agent::state::{
    Change, Coverage, HookEvent, Outcome, Signal, Source, State, Tracker,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CLAUDE_ID: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

fn sessionfs_exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sessionfs"))
}

/// One agent TUI and the state derived from its hooks and screen.
struct Run {
    tui: Tui,
    which: screen_rules::Tui,
    follower: Follower,
    tracker: Tracker,
    /// Every hook event read, in order.
    hooks: Vec<HookEvent>,
    /// Every state change, with when it was seen.
    changes: Vec<(Instant, Change)>,
    rejected: Vec<String>,
    hook_file: PathBuf,
    // Dropped last: ends the agent's processes, then removes the directory.
    env: AgentEnv,
    _dir: tempfile::TempDir,
}

impl Run {
    fn claude(api: &ModelApi, bin: PathBuf) -> Run {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let env = AgentEnv::new(bin, dir.path(), &api.url());
        let hook_file = dir.path().join("hooks.jsonl");
        let settings = dir.path().join("hook-settings.json");
        let key = format!("claude:{CLAUDE_ID}");
        let locks = dir.path().join("locks");
        write_claude_settings(&settings, sessionfs_exe(), &hook_file, &key, &locks).unwrap();
        let mut cmd = env.command("claude");
        cmd.args(["--session-id", CLAUDE_ID, "--settings"])
            .arg(&settings);
        let tui = Tui::launch(&dir.path().join("claude.sock"), &cmd);
        let mut tracker = Tracker::new(State::Starting, 0, Coverage::CLAUDE);
        tracker.own_id(CLAUDE_ID);
        Run {
            tui,
            which: screen_rules::Tui::Claude,
            follower: Follower::new(&hook_file),
            tracker,
            hooks: vec![],
            changes: vec![],
            rejected: vec![],
            hook_file,
            env,
            _dir: dir,
        }
    }

    fn codex(api: &ModelApi, bin: PathBuf) -> Run {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let env = AgentEnv::new(bin, dir.path(), &api.url());
        let hook_file = dir.path().join("hooks.jsonl");
        let mut cmd = env.command("codex");
        cmd.arg("-c")
            .arg(codex_notify_arg(sessionfs_exe(), &hook_file, "codex:new"));
        let tui = Tui::launch(&dir.path().join("codex.sock"), &cmd);
        Run {
            tui,
            which: screen_rules::Tui::Codex,
            follower: Follower::new(&hook_file),
            tracker: Tracker::new(State::Starting, 0, Coverage::CODEX_NOTIFY),
            hooks: vec![],
            changes: vec![],
            rejected: vec![],
            hook_file,
            env,
            _dir: dir,
        }
    }

    fn now_ms(&self) -> u64 {
        self.tui.elapsed_ms() as u64
    }

    fn take(&mut self, signal: Signal) {
        let now = self.now_ms();
        match self.tracker.apply(&signal, now) {
            Outcome::Changed(c) => self.changes.push((Instant::now(), c)),
            Outcome::Rejected(why) => self.rejected.push(why),
            Outcome::Unchanged => {}
        }
    }

    /// Feeds the tracker what is new: hook lines first, then the screen.
    fn step(&mut self) {
        for line in self.follower.poll() {
            let (_, _, event) = parse_hook_line(&line).expect("a hook line parses");
            self.hooks.push(event.clone());
            self.take(Signal::Hook(event));
        }
        let v = verdict(&self.which, &self.tui.screen());
        self.take(Signal::Screen(v));
    }

    fn wait_state(&mut self, want: State, secs: u64) {
        let reached = wait_until(secs, || {
            self.step();
            self.tracker.state() == want
        });
        assert!(
            reached,
            "timed out waiting for {want}; state {}, hooks {:?}, changes {:?}\nscreen:\n{}",
            self.tracker.state(),
            self.hook_names(),
            self.change_list(),
            self.tui.screen()
        );
    }

    /// Types `text` as the agent takes a paste, waits until the prompt box
    /// shows it, then sends Enter as its own write.
    fn submit(&mut self, text: &str) -> Instant {
        assert!(
            self.tui.bracketed_paste(),
            "the TUI enabled bracketed paste"
        );
        let mut paste = b"\x1b[200~".to_vec();
        paste.extend_from_slice(text.as_bytes());
        paste.extend_from_slice(b"\x1b[201~");
        self.tui.push(&paste);
        let which = self.which.clone();
        self.tui
            .wait_screen(10, "the paste in the prompt box", |s| {
                let lines: Vec<&str> = s.lines().collect();
                match which {
                    screen_rules::Tui::Claude => screen_rules::claude_composer(&lines)
                        .is_some_and(|rows| rows.join(" ").contains(text)),
                    screen_rules::Tui::Codex => {
                        lines.iter().any(|l| l.trim_end() == format!("› {text}"))
                    }
                    screen_rules::Tui::Rules(_) => unreachable!("only Claude and Codex here"),
                }
            });
        self.tui.push(b"\r");
        Instant::now()
    }

    fn hook_names(&self) -> Vec<String> {
        self.hooks.iter().map(|h| h.name.clone()).collect()
    }

    fn change_list(&self) -> Vec<(State, Source, String)> {
        self.changes
            .iter()
            .map(|(_, c)| (c.state, c.source, c.detail.clone()))
            .collect()
    }

    fn changed_at(&self, state: State, source: Source) -> Instant {
        self.changes
            .iter()
            .rev()
            .find(|(_, c)| c.state == state && c.source == source)
            .map(|(at, _)| *at)
            .unwrap_or_else(|| panic!("no change to {state} by {source:?}"))
    }
}

#[test]
fn claude_prompt_goes_busy_then_idle_by_its_hooks() {
    let Some(bin) = agents_bin("claude_prompt_goes_busy_then_idle_by_its_hooks") else {
        return;
    };
    let api = ModelApi::start();
    // A slow turn: busy is there to be seen.
    api.push(
        Answer::Text("Hello from the stand-in.".into()),
        Duration::from_millis(1500),
    );
    let mut run = Run::claude(&api, bin);
    // Ready for a prompt: the screen verdict, held.
    run.wait_state(State::Idle, 30);
    assert_eq!(run.change_list()[0].1, Source::Screen);
    assert_eq!(run.hook_names(), ["SessionStart"]);

    let entered = run.submit("say hello please");
    run.wait_state(State::Busy, 10);
    let busy_at = run.changed_at(State::Busy, Source::Hook);
    run.wait_state(State::Idle, 20);
    let idle_at = run.changed_at(State::Idle, Source::Hook);
    api.wait_answered(1, 5);
    let last_byte = api.answered()[0];
    eprintln!(
        "claude: Enter -> busy {} ms; model's last byte -> idle {} ms",
        busy_at.duration_since(entered).as_millis(),
        idle_at.saturating_duration_since(last_byte).as_millis()
    );

    assert_eq!(
        run.hook_names(),
        ["SessionStart", "UserPromptSubmit", "Stop"],
        "{:?}",
        run.hooks
    );
    assert!(run
        .hooks
        .iter()
        .all(|h| h.session_id.as_deref() == Some(CLAUDE_ID)));
    // No flicker: exactly starting -> idle -> busy -> idle.
    let states: Vec<State> = run.changes.iter().map(|(_, c)| c.state).collect();
    assert_eq!(
        states,
        [State::Idle, State::Busy, State::Idle],
        "{:?}",
        run.change_list()
    );
    assert_eq!(run.change_list()[1].2, "UserPromptSubmit");
    assert_eq!(run.change_list()[2].2, "Stop");
    assert!(run.rejected.is_empty(), "{:?}", run.rejected);
    let turns = api.turns();
    assert_eq!(turns.len(), 1, "{}", api.log());
    assert_eq!(turns[0].user_words().as_deref(), Some("say hello please"));
    run.tui.wait_screen(5, "the answer on screen", |s| {
        s.contains("Hello from the stand-in.")
    });

    // A child `claude -p` inherits the environment: its events, recorded by
    // the same subcommand, name another session and are refused.
    let child = r#"{"session_id":"99999999-9999-4999-8999-999999999999","hook_event_name":"UserPromptSubmit"}"#;
    let status = std::process::Command::new(sessionfs_exe())
        .args(["hook", "--events"])
        .arg(&run.hook_file)
        .args(["--session", &format!("claude:{CLAUDE_ID}"), child])
        .status()
        .unwrap();
    assert!(status.success());
    run.step();
    assert_eq!(run.tracker.state(), State::Idle);
    assert_eq!(run.rejected.len(), 1, "{:?}", run.rejected);
}

#[test]
fn claude_tool_call_waits_for_permission_then_approval_makes_it_idle() {
    let Some(bin) = agents_bin("claude_tool_call_waits_for_permission_then_approval_makes_it_idle")
    else {
        return;
    };
    let api = ModelApi::start();
    let mut run = Run::claude(&api, bin);
    let marker = run.env.project.join("approved.txt");
    api.push_bash(&format!("echo approved > {}", marker.display()));
    api.push_text("The command ran.");
    run.wait_state(State::Idle, 30);
    run.submit("run the tool");
    run.wait_state(State::Waiting, 20);
    // PermissionRequest fires before the dialog is drawn: approve only
    // once it is on the screen.
    run.tui.wait_screen(10, "the permission dialog", |s| {
        verdict(&screen_rules::Tui::Claude, s) == sessionfs::agent::state::Verdict::Dialog
    });
    let drawn = Instant::now();
    assert!(!marker.exists(), "the command ran before approval");
    // The dialog refuses keys that come right after it opened (typed-ahead
    // protection): Enter again until it is taken, as a person would.
    let mut enters = 0;
    while run.tracker.state() == State::Waiting {
        assert!(enters < 20, "the dialog never took Enter");
        run.tui.push(b"\r");
        enters += 1;
        wait_within(Duration::from_millis(250), || {
            run.step();
            run.tracker.state() != State::Waiting
        });
    }
    eprintln!(
        "claude: dialog drawn -> approval taken after {} Enter(s), {} ms",
        enters,
        drawn.elapsed().as_millis()
    );
    run.wait_state(State::Idle, 20);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "approved\n");
    let names: Vec<String> = run
        .hook_names()
        .into_iter()
        .filter(|n| n != "Notification")
        .collect();
    assert_eq!(
        names,
        [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PermissionRequest",
            "PostToolUse",
            "Stop"
        ]
    );
    let states: Vec<(State, Source)> = run
        .changes
        .iter()
        .map(|(_, c)| (c.state, c.source))
        .collect();
    assert_eq!(
        states,
        [
            (State::Idle, Source::Screen),
            (State::Busy, Source::Hook),
            // The hook announces it; the screen shows it taking keys.
            (State::Waiting, Source::Screen),
            (State::Busy, Source::Hook),
            (State::Idle, Source::Hook),
        ],
        "{:?}",
        run.change_list()
    );
    // The tool's result went back to the model in the next request.
    let turns = api.turns();
    assert_eq!(turns.len(), 2, "{}", api.log());
    assert!(turns[1].body.contains("tool_result"));
    run.tui
        .wait_screen(5, "the final answer", |s| s.contains("The command ran."));
}

#[test]
fn codex_turn_complete_arrives_by_notify_for_its_own_thread_only() {
    let Some(bin) = agents_bin("codex_turn_complete_arrives_by_notify_for_its_own_thread_only")
    else {
        return;
    };
    let api = ModelApi::start();
    api.push(
        Answer::Text("Codex stand-in answer.".into()),
        Duration::from_millis(2500),
    );
    let mut run = Run::codex(&api, bin);
    run.wait_state(State::Idle, 30);
    let entered = run.submit("say hello codex");
    // Codex announces no turn start: busy comes from the screen.
    run.wait_state(State::Busy, 10);
    let busy_at = run.changed_at(State::Busy, Source::Screen);
    // Its own thread is the rollout's id, known once the rollout exists;
    // until then notify lines wait in the hook file.
    let mut rollout = None;
    wait_for(20, "a rollout to appear", || {
        rollout = run.env.codex_stores().first().cloned();
        rollout.is_some()
    });
    let rollout = rollout.unwrap();
    let name = rollout.file_stem().unwrap().to_string_lossy().into_owned();
    let thread = name[name.len() - 36..].to_string();
    run.tracker.own_id(&thread);
    run.wait_state(State::Idle, 20);
    let idle_at = run.changed_at(State::Idle, Source::Notify);
    api.wait_answered(1, 5);
    eprintln!(
        "codex: Enter -> busy (screen) {} ms; model's last byte -> idle {} ms",
        busy_at.duration_since(entered).as_millis(),
        idle_at
            .saturating_duration_since(api.answered()[0])
            .as_millis()
    );
    let turns = api.turns();
    assert_eq!(turns.len(), 1, "{}", api.log());
    assert_eq!(turns[0].user_words().as_deref(), Some("say hello codex"));
    // Codex also asks the model for a task title, in a thread of its own
    // whose turn-complete notification must not count.
    run.wait_until_hooks(2, 10);
    let own: Vec<&HookEvent> = run
        .hooks
        .iter()
        .filter(|h| h.session_id.as_deref() == Some(thread.as_str()))
        .collect();
    assert_eq!(own.len(), 1, "{:?}", run.hooks);
    assert!(run.hooks.iter().all(|h| h.name == "agent-turn-complete"));
    assert_eq!(
        run.rejected.len(),
        run.hooks.len() - 1,
        "{:?}",
        run.rejected
    );
    let states: Vec<(State, Source)> = run
        .changes
        .iter()
        .map(|(_, c)| (c.state, c.source))
        .collect();
    assert_eq!(
        states,
        [
            (State::Idle, Source::Screen),
            (State::Busy, Source::Screen),
            (State::Idle, Source::Notify),
        ]
    );
    // Nothing Codex started outlives the test.
    let marks = [run.env.codex_home.to_string_lossy().into_owned()];
    assert!(!common::agents::processes_with_env(&marks).is_empty());
    drop(run);
    common::wait_for(10, "Codex's processes to end", || {
        common::agents::processes_with_env(&marks)
            .into_iter()
            .all(common::is_zombie)
    });
}

impl Run {
    fn wait_until_hooks(&mut self, n: usize, secs: u64) {
        let enough = wait_until(secs, || {
            if self.hooks.len() < n {
                self.step();
            }
            self.hooks.len() >= n
        });
        assert!(enough, "only {:?}", self.hooks);
    }
}

#[test]
fn the_hook_subcommand_never_fails_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let exe = sessionfs_exe();
    // An events file that cannot be created, no payload, garbage: exit 0.
    for args in [
        vec!["hook", "--events", "/proc/no/such/file", "--session", "k"],
        vec!["hook"],
        vec!["hook", "--bogus"],
    ] {
        let out = std::process::Command::new(exe)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    // Claude's way: the JSON on stdin, big, cut to one short line.
    let file = dir.path().join("hooks.jsonl");
    let payload = format!(
        r#"{{"session_id":"s1","hook_event_name":"PostToolUse","tool_name":"Bash","tool_response":{{"stdout":"{}"}}}}"#,
        "x".repeat(3 << 20)
    );
    let mut child = std::process::Command::new(exe)
        .args(["hook", "--events"])
        .arg(&file)
        .args(["--session", "claude:s1"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), payload.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(text.len() < 1024, "{}", text.len());
    let (_, key, event) = parse_hook_line(text.trim_end()).unwrap();
    assert_eq!(key, "claude:s1");
    assert_eq!(event.name, "PostToolUse");
    assert_eq!(event.session_id.as_deref(), Some("s1"));
}
