//! A real kernel mount of the real binary, driven with real tools. Each
//! test binary declares `mod common;` and uses the parts it needs.
#![allow(dead_code)]

pub mod agent_host;
pub mod agents;
pub mod claude_stand_in;
pub mod model_api;
pub mod tui;
pub mod watchdog;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use watchdog::Deadline;

/// The metadata as stored under a state directory, byte for byte: its
/// base file and its journal. Equal before and after: nothing was written.
pub fn sidecar_bytes(state_dir: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(state_dir.join("sidecar.json")).unwrap_or_default();
    bytes.push(0);
    bytes.extend(std::fs::read(state_dir.join("sidecar.journal")).unwrap_or_default());
    bytes
}

/// The records stored under a state directory (base and journal), as a
/// daemon reads them; panics on a damaged store.
pub fn sidecar_records(state_dir: &Path) -> Value {
    let records = sessionfs::core::organize::sidecar::read_records(state_dir)
        .unwrap_or_else(|e| panic!("the metadata is damaged: {e}"));
    serde_json::to_value(records).unwrap()
}

/// Waits for `probe` to hold, polling, up to `secs` seconds; panics with `what`.
pub fn wait_for(secs: u64, what: &str, probe: impl FnMut() -> bool) {
    assert!(wait_until(secs, probe), "timed out waiting for {what}");
}

/// Waits for `probe` to hold, polling, up to `secs` seconds; whether it did.
pub fn wait_until(secs: u64, probe: impl FnMut() -> bool) -> bool {
    wait_within(Duration::from_secs(secs), probe)
}

/// [`wait_until`] for a span shorter than a second, or not whole seconds.
pub fn wait_within(span: Duration, mut probe: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + span;
    let mut pause = Duration::from_millis(5);
    while !probe() {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
    true
}

/// Whether `test` can go on: `available` says whether `what` it needs is
/// here. When it is not, the test fails naming it, unless `skip` names a
/// variable that is set to `1`: then it prints `skipped: TEST: WHY` and the
/// caller returns. A test never passes for lack of what it checks.
pub fn require(test: &str, what: &str, available: bool, skip: Option<&str>) -> bool {
    if available {
        return true;
    }
    match skip {
        Some(var) if std::env::var(var).as_deref() == Ok("1") => {
            eprintln!("skipped: {test}: it needs {what} and {var}=1");
            false
        }
        Some(var) => panic!("{test} needs {what} ({var}=1 skips it)"),
        None => panic!("{test} needs {what}"),
    }
}

/// The variable that skips the tests that need root, when not run as root.
pub const SKIP_ROOT: &str = "SESSIONFS_SKIP_ROOT";

/// Root, for tests that call mount(8) or act as another uid: without it
/// `test` fails, unless `SESSIONFS_SKIP_ROOT=1` (then it is skipped and
/// this is false).
pub fn require_root(test: &str, why: &str) -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    require(test, &format!("root ({why})"), root, Some(SKIP_ROOT))
}

/// A program `scripts/test` installs from the apt package `package`: on
/// `PATH`, or at `tool` when it is an absolute path. Without it `test`
/// fails, naming both.
pub fn require_tool(test: &str, tool: &str, package: &str) {
    let found = if tool.starts_with('/') {
        Path::new(tool).is_file()
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
    };
    require(
        test,
        &format!("`{tool}` (apt package {package}, which scripts/test installs)"),
        found,
        None,
    );
}

/// A daemon's configuration over scratch directories under `dir` (its
/// home, state and runtime directories), for tests that drive the core in
/// process, without a mount.
pub fn scratch_config(dir: &Path) -> sessionfs::config::Config {
    let env: std::collections::HashMap<String, String> = [
        ("HOME", "home"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_RUNTIME_DIR", "run"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), dir.join(v).to_string_lossy().into_owned()))
    .collect();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    sessionfs::config::Config::from_map(&env, None).unwrap()
}

/// Runs a shell command line; returns its output whatever the status.
pub fn sh(cmd: &str) -> Output {
    Command::new("bash")
        .args(["-c", cmd])
        .stdin(Stdio::null())
        .output()
        .expect("bash runs")
}

/// Runs a shell command line that must succeed; returns its stdout.
pub fn sh_ok(cmd: &str) -> String {
    let out = sh(cmd);
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The directories one host's daemons share: home, state, runtime, locks.
pub struct Host {
    pub root: tempfile::TempDir,
    pub extra_env: Vec<(String, String)>,
    /// How long each of its mounts may last before the test is failed.
    pub deadline: Duration,
}

impl Host {
    pub fn new() -> Host {
        let root = tempfile::Builder::new()
            .prefix("sfs")
            .tempdir_in("/tmp")
            .unwrap();
        for d in ["home", "state", "run"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        Host {
            root,
            extra_env: vec![],
            deadline: watchdog::default_deadline(),
        }
    }

    /// Mounts of this host may last `deadline` (the default is
    /// [`watchdog::default_deadline`]).
    pub fn with_deadline(mut self, deadline: Duration) -> Host {
        self.deadline = deadline;
        self
    }

    pub fn with_env(mut self, key: &str, value: &str) -> Host {
        self.extra_env.push((key.into(), value.into()));
        self
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    pub fn runtime_dir(&self) -> PathBuf {
        self.path("run/sessionfs")
    }

    /// Starts a daemon on a fresh mount point `name` and waits until it is ready.
    pub fn mount(&self, name: &str) -> Mount {
        self.mount_with(name, &[])
    }

    /// [`Host::mount`] with more arguments to `sessionfs mount` (`-o allow_other`).
    pub fn mount_with(&self, name: &str, args: &[&str]) -> Mount {
        let mnt = self.path(name);
        std::fs::create_dir_all(&mnt).unwrap();
        let log = self.path(&format!("{name}.log"));
        let out = self.path(&format!("{name}.out"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sessionfs"));
        cmd.arg("mount")
            .args(args)
            .arg(&mnt)
            .env("HOME", self.path("home"))
            .env("XDG_STATE_HOME", self.path("state"))
            .env("XDG_RUNTIME_DIR", self.path("run"))
            .env("SHELL", "/bin/bash")
            .env("TERM", "xterm")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&log).unwrap());
        without_ci_markers(&mut cmd);
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("sessionfs starts");
        let deadline = Deadline::arm(
            self.deadline,
            watchdog::Hang {
                mnt: mnt.clone(),
                log: log.clone(),
                daemon: child.id(),
                runtime: self.runtime_dir(),
            },
        );
        let mount = Mount {
            mnt,
            log,
            out,
            child: Some(child),
            _deadline: deadline,
        };
        let ready = wait_until(20, || mount.path("status").exists());
        assert!(
            ready,
            "timed out waiting for the mount to be ready; its log:\n{}",
            mount.log_text()
        );
        mount
    }

    /// `sessionfs ARGS` on this host's state, as a script runs it.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.state_env(Command::new(env!("CARGO_BIN_EXE_sessionfs")).args(args))
            .output()
            .unwrap()
    }

    /// `cmd` with this host's home, state and runtime directories, as a
    /// user's shell would give a `sessionfs` command.
    pub fn state_env<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("HOME", self.path("home"))
            .env("XDG_STATE_HOME", self.path("state"))
            .env("XDG_RUNTIME_DIR", self.path("run"))
    }

    /// `sessionfs ls ARGS` on this host's state; its stdout (it must succeed).
    pub fn ls(&self, args: &[&str]) -> String {
        let out = self.cli(&[&["ls"], args].concat());
        assert!(out.status.success(), "sessionfs ls {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// Every dtach master serving a socket of this host.
    pub fn masters(&self) -> Vec<u32> {
        masters_under(&self.runtime_dir())
    }
}

/// Every dtach master serving a socket under the runtime directory `run`.
pub fn masters_under(run: &Path) -> Vec<u32> {
    let run = run.to_string_lossy();
    processes(|args| {
        args.first().is_some_and(|a| a.ends_with("dtach"))
            && args
                .iter()
                .any(|a| a.starts_with(run.as_ref()) && a.ends_with(".sock"))
    })
}

/// The live processes (not zombies) whose command line `matches`.
pub fn processes(matches: impl Fn(&[String]) -> bool) -> Vec<u32> {
    let mut pids = vec![];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if matches(&args) && !is_zombie(pid) {
            pids.push(pid);
        }
    }
    pids
}

pub fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid)
}

impl Drop for Host {
    fn drop(&mut self) {
        // Sessions outlive daemons by design; a test's must not outlive the test.
        for pid in self.masters() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// One running daemon and its mount point. While it lives, its deadline
/// is armed: a test that runs past it is failed (see [`watchdog`]).
pub struct Mount {
    pub mnt: PathBuf,
    pub log: PathBuf,
    /// What the daemon printed for a person (the ready and unmounted lines).
    pub out: PathBuf,
    child: Option<Child>,
    _deadline: Deadline,
}

impl Mount {
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// `MNT/rel` as a shell-quoted string.
    pub fn q(&self, rel: &str) -> String {
        format!("'{}'", self.path(rel).display())
    }

    pub fn read(&self, rel: &str) -> String {
        String::from_utf8_lossy(&std::fs::read(self.path(rel)).unwrap()).into_owned()
    }

    pub fn json(&self, rel: &str) -> Value {
        serde_json::from_str(&self.read(rel)).unwrap()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What the daemon printed on stdout so far.
    pub fn out_text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Types a line into a session through the real shell's redirection.
    pub fn type_line(&self, key: &str, line: &str) {
        let escaped = line.replace('\'', r"'\''");
        sh_ok(&format!(
            "printf '%s\\n' '{escaped}' > {}",
            self.q(&format!("{key}/input"))
        ));
    }

    /// Makes a shell session and waits until it has run a first command.
    pub fn live_shell(&self, key: &str) {
        sh_ok(&format!("mkdir {}", self.q(key)));
        self.type_line(key, "echo rea''dy");
        self.wait_output(key, "ready");
    }

    /// Waits until a session's scrollback (read with `cat`) contains `needle`.
    pub fn wait_output(&self, key: &str, needle: &str) {
        let file = self.q(&format!("{key}/scrollback"));
        wait_for(20, &format!("{needle:?} in {key}/scrollback"), || {
            sh(&format!("cat {file}"))
                .stdout
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
        });
    }

    /// Waits until `line` shows as a line of output (at the start of a
    /// terminal line, so the echo of the command that printed it, which has
    /// the command before it, does not count).
    pub fn wait_output_line(&self, key: &str, line: &str) {
        let file = self.q(&format!("{key}/scrollback"));
        wait_for(20, &format!("output line {line:?} in {key}"), || {
            let out = sh(&format!("cat {file}")).stdout;
            let text = String::from_utf8_lossy(&out);
            text.split(['\r', '\n']).any(|l| l == line)
        });
    }

    /// Starts `sleep 300` in the background of a shell session and returns
    /// its pid, read back from the scrollback.
    pub fn start_child(&self, key: &str) -> u32 {
        self.type_line(key, "sleep 300 & echo chi\"\"ld=$!");
        self.wait_output(key, "child=");
        let scroll = self.read(&format!("{key}/scrollback"));
        scroll
            .rsplit("child=")
            .next()
            .and_then(|s| s.trim_start().split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .expect("the child's pid")
    }

    /// SIGKILL: the daemon dies without unmounting.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("fusermount3")
            .args(["-u", "-z"])
            .arg(&self.mnt)
            .status();
    }

    /// Ends the daemon as a crash (`crash`: SIGKILL) or a clean stop
    /// (SIGTERM, which must exit 0) would.
    pub fn end(&mut self, crash: bool) {
        if crash {
            self.kill9();
        } else {
            assert_eq!(self.terminate(), Some(0));
        }
    }

    /// SIGTERM, then waits for the daemon to exit; returns its exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let status = child.wait().ok()?;
        status.code()
    }

    /// Waits for the daemon to exit on its own (after `fusermount3 -u`).
    pub fn wait_exit(&mut self, secs: u64) -> Option<i32> {
        let mut child = self.child.take()?;
        // Set once the daemon exited (its status) or cannot be asked (None).
        let mut status = None;
        wait_for(secs, "the daemon to exit", || match child.try_wait() {
            Ok(Some(s)) => {
                status = Some(Some(s));
                true
            }
            Ok(None) => false,
            Err(_) => {
                status = Some(None);
                true
            }
        });
        status.flatten()?.code()
    }
}

/// Drops the variables that tell a program it runs in CI (`CI`,
/// `CONTINUOUS_INTEGRATION`, `CI_*`): the sessions a mount starts are a
/// person's terminals, and Gemini CLI, for one, refuses its interactive
/// screen when it sees them (its own troubleshooting guide says so).
pub fn without_ci_markers(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let ci = name
            .to_str()
            .is_some_and(|n| n == "CI" || n == "CONTINUOUS_INTEGRATION" || n.starts_with("CI_"));
        if ci {
            cmd.env_remove(&name);
        }
    }
}

pub fn is_mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(path.to_str().unwrap()))
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.terminate();
        }
        if is_mounted(&self.mnt) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.mnt)
                .status();
        }
    }
}

/// The arguments the engine stand-in was started with (it writes them to
/// `argv` in the host), without the hook settings sessionfs adds at the end.
pub fn stand_in_args(host: &Host) -> String {
    std::fs::read_to_string(host.path("argv"))
        .unwrap()
        .split(" --settings ")
        .next()
        .unwrap()
        .trim()
        .to_string()
}

/// A stand-in Codex: on a new start it writes a rollout named by an id of
/// its own in its working directory, as the real one does after a turn; on
/// `resume ID` it records the argv.
pub fn codex_stand_in(host: &Host, new_id: &str) -> PathBuf {
    let path = host.path("fake-codex");
    std::fs::write(
        &path,
        format!(
            r#"#!/bin/sh
echo "$@" >> '{argv}'
if [ "$1" != resume ]; then
  dir="$CODEX_HOME/sessions/2026/02/03"
  mkdir -p "$dir"
  f="$dir/rollout-2026-02-03T04-05-06-{new_id}.jsonl"
  printf '{{"timestamp":"2026-02-03T04:05:06.000Z","type":"session_meta","payload":{{"id":"{new_id}","cwd":"%s"}}}}\n' "$(pwd)" > "$f"
  printf '{{"timestamp":"2026-02-03T04:05:07.000Z","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"prompt from the stand-in"}}]}}}}\n' >> "$f"
fi
exec cat
"#,
            argv = host.path("codex-argv").display()
        ),
    )
    .unwrap();
    sh_ok(&format!("chmod +x '{}'", path.display()));
    path
}
