//! The README's "Using it" recipes, run as written against a real mount:
//! every indented command block of that section, read from README.md at
//! test time, with `HOME` set so that `~/sessions` is the mount and the
//! built `sessionfs` first on `PATH`. Each block runs under `timeout` (its
//! own deadline, then a kill) inside the mount's watchdog, and the test
//! checks what the block promises. The agent recipes drive the real Claude
//! CLI offline against the model API stand-in.

mod common;

use common::agent_host::Agents;
use common::*;
use std::collections::VecDeque;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};

/// The tests that run the recipes; each runs its blocks in README order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Group {
    Shell,
    Agent,
    Cli,
    Events,
}

/// Every command block of "Using it", in order: the test that runs it and
/// how the block begins. A block added, dropped or moved fails every test
/// until it has a runner here.
const BLOCKS: [(Group, &str); 6] = [
    (Group::Shell, "mkdir ~/sessions/shell:build\n"),
    (
        Group::Agent,
        "echo 'fix the failing test' > ~/sessions/claude:$ID/prompt &&\n",
    ),
    (
        Group::Cli,
        "key=$(sessionfs new claude --title 'fix tests')",
    ),
    (
        Group::Agent,
        "jq .waiting_for ~/sessions/claude:$ID/status\n",
    ),
    (Group::Events, "tail -F -n 0 ~/sessions/events |\n"),
    (
        Group::Shell,
        "echo 'make test' > ~/sessions/shell:build/prompt && cat ~/sessions/shell:build/wait",
    ),
];

/// README.md's "## Using it" section, up to the next `## ` heading.
fn using_it() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md is readable");
    let start = readme
        .find("\n## Using it\n")
        .expect("README.md has a \"## Using it\" section");
    let body = &readme[start + "\n## Using it\n".len()..];
    let end = body.find("\n## ").unwrap_or(body.len());
    body[..end].to_string()
}

/// The indented (4-space) code blocks of a markdown text, in order, each
/// without its indent: a block begins after a blank line and runs while
/// lines are indented, blank lines inside it included.
fn indented_blocks(text: &str) -> Vec<String> {
    let mut blocks = vec![];
    let mut current: Option<Vec<&str>> = None;
    let mut after_blank = true;
    for line in text.lines() {
        let blank = line.trim().is_empty();
        let indented = line.starts_with("    ");
        match current.as_mut() {
            Some(lines) if blank => lines.push(""),
            Some(lines) if indented => lines.push(&line[4..]),
            Some(_) => {
                blocks.push(current.take().unwrap());
            }
            None if after_blank && indented => current = Some(vec![&line[4..]]),
            None => {}
        }
        after_blank = blank;
    }
    blocks.extend(current);
    blocks
        .into_iter()
        .map(|lines| lines.join("\n").trim_end().to_string())
        .collect()
}

/// The blocks of "Using it" a test runs: taken in order, each once.
struct Recipes {
    left: VecDeque<String>,
}

impl Recipes {
    /// `group`'s blocks, once the section is as [`BLOCKS`] says.
    fn of(group: Group) -> Recipes {
        let section = using_it();
        assert!(
            !section.contains("```"),
            "\"Using it\" has a fenced block: tests/readme.rs runs indented blocks only"
        );
        let blocks = indented_blocks(&section);
        assert_eq!(
            blocks.len(),
            BLOCKS.len(),
            "README.md's \"Using it\" has {} command blocks and tests/readme.rs runs {}: \
             give each a runner and a row in BLOCKS\n{blocks:#?}",
            blocks.len(),
            BLOCKS.len()
        );
        for (i, (block, (_, begins))) in blocks.iter().zip(BLOCKS).enumerate() {
            assert!(
                block.starts_with(begins),
                "block {i} of \"Using it\" should begin {begins:?}:\n{block}"
            );
        }
        let left = blocks
            .into_iter()
            .zip(BLOCKS)
            .filter(|(_, (g, _))| *g == group)
            .map(|(b, _)| b)
            .collect();
        Recipes { left }
    }

    fn next(&mut self) -> String {
        self.left.pop_front().expect("a block left for this test")
    }

    /// Every block of the group was run.
    fn finish(self) {
        assert!(self.left.is_empty(), "blocks never run: {:?}", self.left);
    }
}

/// A reader's shell on a host: `HOME` is the host's home, so `~/sessions`
/// is the mount at `home/sessions`; `PATH` starts with a directory holding
/// `sessionfs` (and any stand-in a test adds); it runs in `cwd`.
struct Reader {
    home: PathBuf,
    state: PathBuf,
    run: PathBuf,
    bin: PathBuf,
    cwd: PathBuf,
    vars: Vec<(String, String)>,
}

impl Reader {
    fn new(host: &Host) -> Reader {
        let bin = host.path("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sessionfs"), bin.join("sessionfs")).unwrap();
        Reader {
            home: host.path("home"),
            state: host.path("state"),
            run: host.path("run"),
            bin,
            cwd: host.path("home"),
            vars: vec![],
        }
    }

    /// A shell variable the reader has set (`ID=...`), replacing its value.
    fn set(&mut self, name: &str, value: &str) {
        self.vars.retain(|(k, _)| k != name);
        self.vars.push((name.into(), value.into()));
    }

    /// `ARGS` under `timeout -k 5 SECS`, in the reader's environment.
    fn command(&self, secs: u64, args: &[&str]) -> Command {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new("timeout");
        cmd.args(["-k", "5", &secs.to_string()])
            .args(args)
            .current_dir(&self.cwd)
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", &self.state)
            .env("XDG_RUNTIME_DIR", &self.run)
            .env("PATH", path)
            .env("SHELL", "/bin/bash")
            .env("TERM", "xterm")
            .envs(self.vars.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        cmd
    }

    /// `text` as a script (`bash -euo pipefail`), within `secs`; it must
    /// succeed. Its stdout.
    fn ok(&self, secs: u64, text: &str) -> String {
        let out = self
            .command(secs, &["bash", "-euo", "pipefail", "-c", text])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}:\n{text}\nstdout:\n{}\nstderr:\n{}",
            failure(out.status, secs),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `ARGS` started within `secs`, its stdout and stderr into `out` and
    /// `out.err`.
    fn spawn(&self, secs: u64, args: &[&str], out: &Path) -> Running {
        self.start(self.command(secs, args), secs, out)
    }

    /// As [`Reader::spawn`], with its standard input a pipe for
    /// [`Running::type_keys`].
    fn spawn_typing(&self, secs: u64, args: &[&str], out: &Path) -> Running {
        let mut cmd = self.command(secs, args);
        cmd.stdin(Stdio::piped());
        self.start(cmd, secs, out)
    }

    fn start(&self, mut cmd: Command, secs: u64, out: &Path) -> Running {
        let mut child = cmd
            .stdout(std::fs::File::create(out).unwrap())
            .stderr(std::fs::File::create(out.with_extension("err")).unwrap())
            .spawn()
            .unwrap();
        Running {
            keys: child.stdin.take(),
            child,
            out: out.to_path_buf(),
            secs,
        }
    }
}

/// How a block ended, in words.
fn failure(status: ExitStatus, secs: u64) -> String {
    if status.code() == Some(124) {
        format!("ran past its deadline of {secs} s")
    } else {
        format!("failed: {status}")
    }
}

/// A block running in the background under `timeout`; ended when dropped.
struct Running {
    child: Child,
    keys: Option<ChildStdin>,
    out: PathBuf,
    secs: u64,
}

impl Running {
    fn type_keys(&mut self, keys: &[u8]) {
        use std::io::Write;
        let stdin = self.keys.as_mut().expect("started with spawn_typing");
        stdin.write_all(keys).unwrap();
        stdin.flush().unwrap();
    }

    /// What it printed so far on stdout, and on stderr.
    fn printed(&self) -> (String, String) {
        (
            read_text(&self.out),
            read_text(&self.out.with_extension("err")),
        )
    }

    fn stdout(&self) -> String {
        self.printed().0
    }

    /// It is still running.
    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            let (out, err) = self.printed();
            panic!(
                "it ended ({}) and should still run\nstdout:\n{out}\nstderr:\n{err}",
                failure(status, self.secs)
            );
        }
    }

    /// Sends `signal` to `timeout`, which passes it to the block's process
    /// group, and waits for the end: how it ended.
    fn end_with(&mut self, signal: nix::sys::signal::Signal) -> ExitStatus {
        self.assert_running();
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal);
        self.wait(10)
    }

    /// Waits up to `secs` for it to end on its own.
    fn wait(&mut self, secs: u64) -> ExitStatus {
        let mut status = None;
        let ended = wait_until(secs, || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        let (out, err) = self.printed();
        assert!(
            ended,
            "still running after {secs} s\nstdout:\n{out}\nstderr:\n{err}"
        );
        status.unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // `timeout` leads a process group of its own: the block's processes
        // go with it, SIGTERM first (which `timeout` passes on), then SIGKILL.
        use nix::sys::signal::{kill, Signal};
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = kill(pid, Signal::SIGTERM);
            if !wait_until(5, || self.child.try_wait().ok().flatten().is_some()) {
                let _ = kill(nix::unistd::Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
                let _ = self.child.wait();
            }
        }
    }
}

/// Whether process `pid` has `path` open.
fn has_open(pid: u32, path: &Path) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == path))
        })
        .unwrap_or(false)
}

/// Whether the terminal on `pid`'s standard input is in raw mode (no
/// signal keys): dtach has taken it, so Ctrl+\ reaches dtach and does not
/// quit it with SIGQUIT.
fn raw_terminal(pid: u32) -> bool {
    let Ok(tty) = std::fs::read_link(format!("/proc/{pid}/fd/0")) else {
        return false;
    };
    if !tty.starts_with("/dev/pts/") {
        return false;
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(&tty)
    else {
        return false;
    };
    nix::sys::termios::tcgetattr(&file)
        .is_ok_and(|t| !t.local_flags.contains(nix::sys::termios::LocalFlags::ISIG))
}

fn read_text(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

/// The agents of `test` on a mount at `~/sessions`; `None` when skipped.
fn agents(test: &str) -> Option<Agents> {
    require_tool(test, "jq", "jq");
    Agents::start_at(test, "home/sessions", &[])
}

/// The shell block (`mkdir` ... `stop`), typed a line at a time as at a
/// prompt, and the shell's `prompt` + `wait` recipe.
#[test]
fn the_shell_recipes_run_as_written() {
    let mut recipes = Recipes::of(Group::Shell);
    let host = Host::new();
    let m = host.mount("home/sessions");
    let reader = Reader::new(&host);
    const KEY: &str = "shell:build";

    // Lines to type one at a time, not a script: `tail -f` follows until
    // Ctrl+C, and the lines after it are typed once it is stopped. Each
    // runs as a command line of its own.
    let block = recipes.next();
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(lines.len(), 7, "the shell block's lines changed:\n{block}");
    let line = |i: usize, begins: &str| {
        assert!(lines[i].starts_with(begins), "line {i}: {}", lines[i]);
        lines[i]
    };

    reader.ok(20, line(0, "mkdir "));
    assert!(m.path(KEY).join("status").is_file());

    // `make` may not be installed: the shell answers either way ("make:
    // *** No targets" or "bash: make: command not found").
    reader.ok(20, line(1, "echo 'make' > "));
    m.wait_output(KEY, "make:");

    let out = host.path("tail-f.out");
    let mut follower = reader.spawn(
        60,
        &["bash", "-euo", "pipefail", "-c", line(2, "tail -f ")],
        &out,
    );
    wait_for(20, "tail -f printing the shell's output", || {
        follower.stdout().contains("make:")
    });
    m.type_line(KEY, "echo followed-$((6*7))");
    wait_for(20, "tail -f printing what came after it started", || {
        follower.stdout().contains("followed-42")
    });
    // Ctrl+C: a SIGINT, not the deadline (124), ends it.
    let ended = follower.end_with(nix::sys::signal::Signal::SIGINT);
    assert!(
        ended.signal() == Some(libc::SIGINT) || ended.code() == Some(130),
        "{ended}"
    );

    let screen = reader.ok(20, line(3, "cat "));
    assert!(screen.contains("followed-42"), "{screen}");

    let status: serde_json::Value = serde_json::from_str(&reader.ok(20, line(4, "cat "))).unwrap();
    assert_eq!(status["state"], "live", "{status}");
    assert_eq!(status["outcome"], "LAUNCH", "{status}");
    let master = status["master_pid"].as_u64().expect("master_pid") as u32;
    assert!(status["agent_pid"].is_u64(), "{status}");
    assert!(status["error"].is_null(), "{status}");

    reader.ok(20, line(5, "echo 'resize 100x30' > "));
    assert_eq!(m.json(&format!("{KEY}/status"))["size"], "100x30");
    m.type_line(KEY, "stty size");
    m.wait_output_line(KEY, "30 100");

    reader.ok(20, line(6, "echo stop > "));
    assert_eq!(m.read(&format!("{KEY}/state")), "stopped\n");
    wait_for(10, "the master to end", || !alive(master));

    // One command line of its own: a script.
    let block = recipes.next();
    let said = reader.ok(60, &block);
    assert_eq!(said, "idle\n", "{block}");
    let ring = m.read(&format!("{KEY}/scrollback"));
    let typed = ring
        .rfind("make test")
        .expect("`make test` typed into the shell");
    assert!(ring[typed..].contains("make:"), "{}", &ring[typed..]);
    recipes.finish();
}

/// The prompt/wait/transcript script on one Claude session while another
/// waits for a permission, then the `jq .waiting_for` and `approve` lines
/// answering that one.
#[test]
fn the_agent_recipes_run_as_written() {
    let test = "the_agent_recipes_run_as_written";
    let mut recipes = Recipes::of(Group::Agent);
    let Some(a) = agents(test) else {
        return;
    };
    let mut reader = Reader::new(&a.host);
    const ANSWERED: &str = "c1a0de00-0000-4000-8000-00000000beef";
    const ASKS: &str = "c1a0de00-0000-4000-8000-00000000a5c5";

    // One session waits for a permission, for `sessionfs ls --state waiting`.
    let asks = a.session("claude", ASKS);
    let marker = a.host.path("approved");
    a.api
        .push_bash(&format!("echo approved > {}", marker.display()));
    a.prompt(&asks, "write the marker");
    assert_eq!(
        a.wait(&asks, 90),
        "waiting\n",
        "{}",
        a.read(&asks, "screen")
    );

    // A script: each step runs once the one before it succeeded.
    let answered = a.session("claude", ANSWERED);
    a.api.push_text("Stand-in: the test is fixed.");
    reader.set("ID", ANSWERED);
    let block = recipes.next();
    let said = reader.ok(150, &block);
    let (state, rest) = said.split_once('\n').unwrap();
    assert_eq!(state, "idle", "{said}");
    assert!(rest.contains("fix the failing test"), "{said}");
    assert!(rest.contains("Stand-in: the test is fixed."), "{said}");
    // Who waits: the one session's directory, nothing else.
    let waiting = format!("{}\n", a.m.path(&asks).display());
    assert!(said.ends_with(&waiting), "{said}");
    assert_eq!(
        said.matches(&a.m.path("").display().to_string()).count(),
        1,
        "{said}"
    );
    assert_eq!(a.read(&answered, "state"), "idle\n");

    // A script too, run while the dialog is shown.
    a.api.push_text("Stand-in: the marker is written.");
    reader.set("ID", ASKS);
    let block = recipes.next();
    let said = reader.ok(60, &block);
    let asked: serde_json::Value = serde_json::from_str(&said)
        .unwrap_or_else(|e| panic!("`jq .waiting_for` printed no JSON ({e}): {said}"));
    assert_eq!(asked["kind"], "permission", "{asked}");
    assert_eq!(asked["tool"], "Bash", "{asked}");
    assert!(
        asked["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&marker.display().to_string())),
        "{asked}"
    );
    assert_eq!(a.wait(&asks, 90), "idle\n", "{}", a.read(&asks, "screen"));
    assert!(marker.exists(), "the approved command ran");
    let last = a.read(&asks, "transcript/last");
    assert!(last.contains("Stand-in: the marker is written."), "{last}");
    recipes.finish();
}

/// The `sessionfs` block pasted into a terminal: `new` in the workspace,
/// `prompt --wait` ending with 4 when Claude asks a permission, `approve`,
/// and `attach`, left with Ctrl+\.
#[test]
fn the_cli_recipe_runs_as_written() {
    let test = "the_cli_recipe_runs_as_written";
    let mut recipes = Recipes::of(Group::Cli);
    require_tool(test, "script", "bsdutils");
    let Some(a) = agents(test) else {
        return;
    };
    let mut reader = Reader::new(&a.host);
    reader.cwd = a.env.project.clone();
    let marker = a.host.path("approved");
    a.api
        .push_bash(&format!("echo approved > {}", marker.display()));
    a.api.push_text("Stand-in: tests fixed.");

    // Pasted as a person does, not a script: no `-e`, since the block reads
    // `prompt --wait`'s exit code itself, and a terminal for `attach` (the
    // pty of `script`, given a size as a terminal has one).
    let block = recipes.next();
    reader.set("RECIPE", &block);
    let out = a.host.path("cli.out");
    let mut pasted = reader.spawn_typing(
        240,
        &[
            "script",
            "-qfec",
            "stty rows 40 cols 120 && bash -uo pipefail -c \"$RECIPE\"",
            "/dev/null",
        ],
        &out,
    );

    let run = a.host.runtime_dir().display().to_string();
    let attached = |args: &[String]| {
        args.first().is_some_and(|p| p.ends_with("dtach"))
            && args.get(1).is_some_and(|a| a == "-a")
            && args.get(2).is_some_and(|s| s.starts_with(&run))
    };
    let mut client = None;
    let ready = wait_until(200, || {
        client = processes(attached).into_iter().find(|p| raw_terminal(*p));
        client.is_some() || pasted.child.try_wait().unwrap().is_some()
    });
    let (said, err) = pasted.printed();
    assert!(
        ready && client.is_some(),
        "`sessionfs attach` never held the terminal\nterminal:\n{said}\nstderr:\n{err}\nstand-in:\n{}",
        a.api.log()
    );
    pasted.type_keys(b"\x1c");
    let ended = pasted.wait(20);
    let (said, err) = pasted.printed();
    assert_eq!(
        ended.code(),
        Some(0),
        "{ended}\nterminal:\n{said}\nstderr:\n{err}"
    );

    let listed = a.host.ls(&["--engine", "claude", "--keys"]);
    let key = listed.trim();
    assert!(
        key.starts_with("claude:") && !key.contains('\n'),
        "{listed}"
    );
    // `prompt --wait` said why it ended: the question (its exit code 4,
    // on which the block's `case` approved).
    assert!(said.contains(&format!("{key} waiting")), "{said}");
    assert!(said.contains("[detached]"), "{said}");
    let meta = a.m.json(&format!("{key}/meta.json"));
    assert_eq!(meta["title"], "fix tests", "{meta}");
    assert_eq!(meta["workspace"], a.env.project.to_str().unwrap(), "{meta}");
    let states: Vec<String> = a
        .events(key)
        .iter()
        .map(|e| e["state"].as_str().unwrap().to_string())
        .collect();
    let asked = states.iter().position(|s| s == "waiting");
    assert!(
        asked.is_some_and(|at| states[at..].contains(&"busy".to_string())),
        "{states:?}"
    );
    // Detached, the session runs on.
    assert_eq!(a.m.json(&format!("{key}/status"))["state"], "live");
    assert_eq!(a.wait(key, 60), "idle\n", "{}", a.read(key, "screen"));
    assert!(marker.exists(), "the approved command ran");
    let last = a.read(key, "transcript/last");
    assert!(last.contains("Stand-in: tests fixed."), "{last}");
    recipes.finish();
}

/// The notification pipeline, following the root `events`: one line (with
/// the terminal's bell) when a Claude session starts waiting for a
/// permission, naming it and its question, and none before.
#[test]
fn the_events_pipeline_runs_as_written() {
    let test = "the_events_pipeline_runs_as_written";
    let mut recipes = Recipes::of(Group::Events);
    let Some(a) = agents(test) else {
        return;
    };
    let reader = Reader::new(&a.host);

    // A follower: it runs until stopped, so in the background.
    let block = recipes.next();
    let out = a.host.path("pipeline.out");
    let mut pipeline = reader.spawn(240, &["bash", "-euo", "pipefail", "-c", &block], &out);
    // `-n 0`: what comes once tail has the file open.
    let events = a.m.path("events");
    let tail = |args: &[String]| {
        args.first().is_some_and(|p| p == "tail")
            && args.last().is_some_and(|p| Path::new(p) == events)
    };
    wait_for(20, "tail -F to open the events", || {
        processes(tail).into_iter().any(|p| has_open(p, &events))
    });

    let key = a.session("claude", "c1a0de00-0000-4000-8000-00000000e0e0");
    let marker = a.host.path("approved");
    a.api
        .push_bash(&format!("echo approved > {}", marker.display()));
    a.api.push_text("Stand-in: done.");
    a.prompt(&key, "write the marker");
    assert_eq!(a.wait(&key, 90), "waiting\n", "{}", a.read(&key, "screen"));
    let text = a.waiting_for(&key)["text"].as_str().unwrap().to_string();
    wait_for(30, "the word that it waits", || {
        pipeline.printed().0.contains("needs you")
    });
    // The session's earlier changes (made, starting, busy) came first in
    // the stream and printed nothing.
    assert_eq!(
        pipeline.printed().0,
        format!("\u{7}{key} needs you: {text}\n"),
        "pipeline: {:?}",
        pipeline.printed()
    );
    let (code, _, said) = a.cli(&["approve", &key]);
    assert_eq!(code, 0, "{said}");
    assert_eq!(a.wait(&key, 60), "idle\n");
    // Still following; stopped as a person stops it.
    let ended = pipeline.end_with(nix::sys::signal::Signal::SIGTERM);
    assert_ne!(ended.code(), Some(124), "{ended}");
    recipes.finish();
}

/// The section is read as the tests expect: indented blocks only, each
/// with its runner; and the reading itself keeps blank lines inside a
/// block and leaves out indented paragraph continuations.
#[test]
fn every_using_it_block_has_a_runner() {
    let text = "Some text:\n\n    one\n      two\n\n    three\n\nAfter\n    not code\n\n    four\n";
    assert_eq!(
        indented_blocks(text),
        ["one\n  two\n\nthree", "four"],
        "the reader of indented blocks"
    );
    for group in [Group::Shell, Group::Agent, Group::Cli, Group::Events] {
        assert!(
            !Recipes::of(group).left.is_empty(),
            "{group:?} runs nothing"
        );
    }
}

/// Each program the recipes run, and where a fresh Debian or Ubuntu gets it.
const TOOLS: [(&str, &str); 8] = [
    ("mkdir", "coreutils"),
    ("cat", "coreutils"),
    ("tail", "coreutils"),
    ("echo", "bash"),
    ("read", "bash"),
    ("sessionfs", "this repository"),
    ("jq", "the jq package, which scripts/setup installs"),
    ("printf", "bash"),
];

/// The programs a shell text runs: the first word of each command, past
/// assignments and keywords, with quotes and comments read as bash does
/// (near enough for the recipes: no here-documents, no arithmetic).
fn programs(text: &str) -> Vec<String> {
    let mut segments = vec![String::new()];
    let mut quote: Option<char> = None;
    let mut after_space = true;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        let segment = segments.last_mut().unwrap();
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                segment.push(c);
                segment.extend(chars.next());
            }
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if after_space => {
                chars.by_ref().take_while(|c| *c != '\n').for_each(drop);
                segments.push(String::new());
            }
            (None, '|' | '&' | ';' | '(' | ')' | '\n') => segments.push(String::new()),
            _ => segment.push(c),
        }
        after_space = c.is_whitespace();
    }
    const KEYWORDS: [&str; 11] = [
        "while", "until", "do", "done", "if", "then", "else", "fi", "for", "esac", "!",
    ];
    let assignment = |w: &str| {
        w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
        })
    };
    segments
        .iter()
        .filter(|s| s.split_whitespace().next() != Some("case"))
        .filter_map(|s| {
            s.split_whitespace()
                .find(|w| !KEYWORDS.contains(w) && !assignment(w))
                .map(str::to_string)
        })
        .collect()
}

/// The recipes run only what the set-up installs or every Debian has: a
/// new program in a recipe fails here, on any machine, until it is one.
#[test]
fn the_recipes_use_only_tools_a_fresh_machine_gets() {
    assert_eq!(
        programs("key=$(a 'x | y' \"z;\") && b # c | d\n  e | while read -r k; do f \"$k\"; done\ncase $? in 4) g ;; esac"),
        ["a", "b", "e", "read", "f", "g"],
        "the reader of command lines"
    );
    let blocks = indented_blocks(&using_it());
    let mut used = std::collections::BTreeSet::new();
    for (i, block) in blocks.iter().enumerate() {
        for program in programs(block) {
            assert!(
                TOOLS.iter().any(|(t, _)| *t == program),
                "block {i} of \"Using it\" runs `{program}`, which neither the set-up \
                 installs nor every Debian has (TOOLS):\n{block}"
            );
            used.insert(program);
        }
    }
    assert_eq!(
        used.len(),
        TOOLS.len(),
        "TOOLS names a program no recipe runs: {used:?}"
    );
}
