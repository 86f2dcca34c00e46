//! `state`, `wait`, `events` and `prompt` through a real mount, with shells
//! and stand-in agents (fast; the real CLIs are in `agents_mount.rs`).

mod common;

use common::*;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ID: &str = "11111111-2222-4333-8444-555555555555";

fn state_dir(host: &Host) -> std::path::PathBuf {
    host.path("state/sessionfs")
}

/// A host whose Claude is a stand-in: it records its arguments, then
/// reads its terminal.
fn fake_claude(host: Host) -> Host {
    let path = host.path("fake-claude");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"$@\" > '{}'\nexec cat\n",
            host.path("argv").display()
        ),
    )
    .unwrap();
    sh_ok(&format!("chmod +x '{}'", path.display()));
    let program = path.display().to_string();
    host.with_env("SESSIONFS_ENGINE_CLAUDE", &program)
}

/// `cat FILE` started in the background.
fn cat(path: &std::path::Path) -> Child {
    Command::new("cat")
        .arg(path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The root status's count of blocked `wait` reads.
fn waits(m: &Mount) -> u64 {
    m.json("status")["waits"].as_u64().unwrap()
}

/// Waits for a child up to `secs`; its exit status and stdout.
fn finish(mut child: Child, secs: u64) -> (std::process::ExitStatus, String) {
    let mut status = None;
    wait_for(secs, "the child to end", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (status.unwrap(), out)
}

#[test]
fn a_shell_is_busy_while_a_job_runs_and_wait_returns_when_it_ends() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:job")));
    assert_eq!(m.read("shell:job/state"), "stopped\n");
    sh_ok(&format!("echo 'echo ready' > {}", m.q("shell:job/prompt")));
    m.wait_output_line("shell:job", "ready");
    wait_for(5, "the shell to be idle", || {
        m.read("shell:job/state") == "idle\n"
    });
    let t0 = Instant::now();
    sh_ok(&format!("echo 'sleep 3' > {}", m.q("shell:job/prompt")));
    wait_for(5, "the shell to be busy", || {
        m.read("shell:job/state") == "busy\n"
    });
    assert_eq!(m.json("shell:job/status")["agent_state"], "busy");
    assert_eq!(sh_ok(&format!("cat {}", m.q("shell:job/wait"))), "idle\n");
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(2800), "{waited:?}");
    let events: Vec<serde_json::Value> = m
        .read("shell:job/events")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let states: Vec<&str> = events
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(states.first(), Some(&"starting"), "{events:?}");
    assert!(states.ends_with(&["busy", "idle"]), "{events:?}");
    for e in &events {
        assert!(e["ts_ms"].as_u64().is_some(), "{e}");
        assert!(e["source"].is_string() && e["detail"].is_string(), "{e}");
    }
    let meta = m.json("shell:job/meta.json");
    assert_eq!(meta["agent_state"], "idle");
}

#[test]
fn poll_on_wait_is_readable_once_the_job_ends() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:pw")));
    sh_ok(&format!("echo 'echo ready' > {}", m.q("shell:pw/prompt")));
    m.wait_output_line("shell:pw", "ready");
    wait_for(5, "the shell to be idle", || {
        m.read("shell:pw/state") == "idle\n"
    });
    sh_ok(&format!("echo 'sleep 2' > {}", m.q("shell:pw/prompt")));
    wait_for(5, "the shell to be busy", || {
        m.read("shell:pw/state") == "busy\n"
    });
    // select(2) on `wait`: not readable while busy, readable when the job
    // ends, and then the read returns at once.
    let script = format!(
        r#"
import os, select, time
fd = os.open({wait:?}, os.O_RDONLY | os.O_NONBLOCK)
p = select.poll(); p.register(fd, select.POLLIN)
assert not p.poll(300), "readable while busy"
t = time.monotonic()
got = p.poll(10000)
assert got and got[0][1] & select.POLLIN, f"never readable: {{got}}"
line = os.read(fd, 64)
assert line == b"idle\n", line
print("readable after %.2f s" % (time.monotonic() - t))
"#,
        wait = m.path("shell:pw/wait").display().to_string(),
    );
    let out = sh_ok(&format!("python3 -c '{}'", script.replace('\'', "'\\''")));
    assert!(out.contains("readable after"), "{out}");
}

#[test]
fn ls_filters_by_state_and_prints_keys() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    for key in ["shell:busy1", "shell:idle1", "shell:never"] {
        sh_ok(&format!("mkdir {}", m.q(key)));
    }
    sh_ok(&format!("echo 'sleep 30' > {}", m.q("shell:busy1/prompt")));
    sh_ok(&format!("echo 'true' > {}", m.q("shell:idle1/prompt")));
    let ls = |state: &str| {
        let out = host.cli(&["ls", "--state", state, "--keys"]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    wait_for(10, "ls --state busy", || ls("busy") == "shell:busy1\n");
    wait_for(10, "ls --state idle", || ls("idle") == "shell:idle1\n");
    assert_eq!(ls("stopped"), "shell:never\n");
    // With no daemon mounted, the live sessions are as their events last
    // said, not stopped.
    assert_eq!(m.terminate(), Some(0));
    assert_eq!(ls("busy"), "shell:busy1\n");
    assert_eq!(ls("idle"), "shell:idle1\n");
    assert_eq!(ls("stopped"), "shell:never\n");
    let bad = Command::new(env!("CARGO_BIN_EXE_sessionfs"))
        .args(["ls", "--state", "sleepy"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

#[test]
fn sigint_ends_a_blocked_wait_at_once_and_many_waits_leave_the_mount_fast() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:w")));
    sh_ok(&format!("echo 'sleep 60' > {}", m.q("shell:w/prompt")));
    wait_for(5, "busy", || m.read("shell:w/state") == "busy\n");
    let wait_file = m.path("shell:w/wait");

    // O_NONBLOCK: EAGAIN while busy.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&wait_file)
        .unwrap();
    let err = f.read(&mut [0u8; 64]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EAGAIN), "{err}");

    // SIGINT to a blocked `cat wait`: it ends at once, not with the job.
    let child = cat(&wait_file);
    wait_for(5, "the wait to block", || waits(&m) == 1);
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let t0 = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let (status, out) = finish(child, 5);
    let took = t0.elapsed();
    eprintln!("SIGINT ended the blocked wait after {took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(!status.success() && out.is_empty(), "{status:?} {out:?}");
    wait_for(5, "the wait to be forgotten", || waits(&m) == 0);

    // `timeout 1 cat wait` ends at its deadline.
    let t0 = Instant::now();
    let out = sh(&format!("timeout 1 cat {}", m.q("shell:w/wait")));
    assert_eq!(out.status.code(), Some(124));
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());

    // A hundred blocked waits: other requests stay fast.
    let children: Vec<Child> = (0..100).map(|_| cat(&wait_file)).collect();
    wait_for(10, "a hundred blocked waits", || waits(&m) == 100);
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let t0 = Instant::now();
        std::fs::read(m.path("status")).unwrap();
        std::fs::read(m.path("shell:w/state")).unwrap();
        slowest = slowest.max(t0.elapsed());
    }
    eprintln!("slowest status+state read with 100 waits: {slowest:?}");
    // Not held behind the waits (which last as long as the job).
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
    // Ending the job answers them all with the new state.
    sh_ok(&format!("printf '\\003' > {}", m.q("shell:w/input")));
    for child in children {
        let (status, out) = finish(child, 10);
        assert!(status.success(), "{status:?}");
        assert_eq!(out, "idle\n");
    }
}

/// `bash -c CMD` started in the background.
fn bash(cmd: &str) -> Child {
    Command::new("bash")
        .args(["-c", cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn an_interrupted_writer_withdraws_its_prompt_and_later_prompts_are_typed() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:x")));
    sh_ok(&format!("echo 'sleep 30' > {}", m.q("shell:x/prompt")));
    wait_for(5, "busy", || m.read("shell:x/state") == "busy\n");
    let prompt = m.q("shell:x/prompt");

    // The writer's close waits for the shell to be idle; SIGINT after 1 s
    // ends it at once, and its prompt is withdrawn.
    let t0 = Instant::now();
    let writer = bash(&format!(
        "timeout -s INT 1 /usr/bin/printf 'echo withdrawn-$((40+2))\\n' > {prompt}"
    ));
    let (status, _) = finish(writer, 5);
    let took = t0.elapsed();
    eprintln!("the interrupted prompt's writer ended after {took:?}");
    assert!(!status.success(), "{status:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    let error = m.json("shell:x/status")["error"].to_string();
    assert!(
        error.contains("withdrawn") && error.contains("interrupted"),
        "{error}"
    );
    assert!(m.log_text().contains("withdrawn"), "{}", m.log_text());

    // SIGKILL to a writer stuck in close() (state D): it is gone within a
    // few polls, and its prompt is withdrawn too.
    let writer = bash(&format!(
        "exec /usr/bin/printf 'echo killed-$((40+2))\\n' > {prompt}"
    ));
    let pid = writer.id();
    // Blocked in the kernel's wait for the flush's answer: D once the
    // kernel stopped sending interrupts to this mount (the daemon answers
    // them ENOSYS), S before that, in the same wait.
    wait_for(5, "the writer to block in close()", || {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        let state = state
            .as_deref()
            .and_then(|s| s.rsplit_once(')'))
            .and_then(|(_, r)| r.trim_start().chars().next());
        let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
        state == Some('D') || (state == Some('S') && wchan.contains("request_wait_answer"))
    });
    let t0 = Instant::now();
    let pid = nix::unistd::Pid::from_raw(pid as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    let (status, _) = finish(writer, 5);
    let took = t0.elapsed();
    eprintln!("SIGKILL ended the prompt's writer after {took:?}");
    assert!(!status.success(), "{status:?}");
    // Long before the 30 s job ends, whatever the machine's load.
    assert!(took < Duration::from_secs(3), "{took:?}");

    // Ctrl-C (or Ctrl-\\, which leaves no signal pending) on `cat >
    // prompt`: cat's exit closes the file with the line it wrote, and that
    // prompt is withdrawn at once.
    use nix::sys::signal::Signal::{SIGINT, SIGQUIT};
    for signal in [SIGINT, SIGQUIT] {
        let mut writer = Command::new("bash")
            .args(["-c", &format!("ulimit -c 0; exec cat > {prompt}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let line = b"echo catted-$((40+2))\n";
        use std::io::Write;
        writer.stdin.as_mut().unwrap().write_all(line).unwrap();
        let pid = writer.id();
        wait_for(5, "cat to write the line", || {
            let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
            io.lines()
                .find_map(|l| l.strip_prefix("wchar: "))
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| n >= line.len())
        });
        let t0 = Instant::now();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
        let (status, _) = finish(writer, 5);
        let took = t0.elapsed();
        eprintln!("{signal} ended `cat > prompt` after {took:?}");
        assert!(!status.success(), "{status:?}");
        assert!(took < Duration::from_secs(3), "{signal}: {took:?}");
    }

    // A prompt written after it waits for the job too; when the job ends it
    // is typed, the withdrawn one never.
    let later = bash(&format!(
        "/usr/bin/printf 'echo kept-$((40+2))\\n' > {prompt}"
    ));
    sh_ok(&format!("printf '\\003' > {}", m.q("shell:x/input")));
    let (status, _) = finish(later, 10);
    assert!(status.success(), "{status:?}");
    m.wait_output_line("shell:x", "kept-42");
    sh_ok(&format!("echo 'echo done-$((40+2))' > {prompt}"));
    m.wait_output_line("shell:x", "done-42");
    let scrollback = m.read("shell:x/scrollback");
    assert!(!scrollback.contains("withdrawn"), "{scrollback}");
    assert!(!scrollback.contains("killed"), "{scrollback}");
    assert!(!scrollback.contains("catted"), "{scrollback}");
}

/// A program that holds `prompt` open close-on-exec and then runs another
/// program (what a tool that spawns while it has files open does) closes
/// it inside `execve`, which meanwhile holds the lock a read of its
/// `/proc/PID/stat` waits for. The daemon reads only its `status`: the
/// prompt is typed once the shell is idle and the `exec` goes on; a stop
/// of another session, a blocked `wait` and `status` answer meanwhile.
#[test]
fn a_prompt_closed_by_exec_is_typed_and_nothing_waits_on_the_exec() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:x")));
    sh_ok(&format!("echo 'sleep 60' > {}", m.q("shell:x/prompt")));
    wait_for(5, "busy", || m.read("shell:x/state") == "busy\n");
    m.live_shell("shell:y");

    let mut writer = Command::new("python3")
        .args([
            "-c",
            "import os,sys\nfd=os.open(sys.argv[1],os.O_WRONLY)\nos.write(fd,b'echo via-exec-$((40+2))\\n')\nos.execv('/bin/echo',['echo','execd'])",
        ])
        .arg(m.path("shell:x/prompt"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The writer closes the file only in its exec: the prompt's work in
    // the pool is its close, under way.
    wait_for(5, "the prompt's close to reach the pool", || {
        m.json("status")["slow_ops"]["in_flight"] == 1
    });

    // Stopping another session looks at every process's session id.
    let t0 = Instant::now();
    let out = sh(&format!(
        "timeout 20 sh -c 'echo stop > {}'",
        m.q("shell:y/ctl")
    ));
    let took = t0.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(5), "stop took {took:?}");
    wait_for(5, "shell:y's master to end", || host.masters().len() == 1);
    assert!(
        writer.try_wait().unwrap().is_none(),
        "the writer did not wait"
    );

    // A blocked wait still ends at a signal, and status answers.
    let child = cat(&m.path("shell:x/wait"));
    wait_for(5, "the wait to block", || waits(&m) == 1);
    let t0 = Instant::now();
    let cat_pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(cat_pid, nix::sys::signal::Signal::SIGINT).unwrap();
    finish(child, 5);
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());

    // The job ends: the prompt is typed, its close answered, the exec done.
    sh_ok(&format!("printf '\\003' > {}", m.q("shell:x/input")));
    let (status, out) = finish(writer, 15);
    assert!(status.success() && out == "execd\n", "{status:?} {out:?}");
    m.wait_output_line("shell:x", "via-exec-42");
}

/// A host whose Claude is a stand-in TUI that draws a prompt box, takes a
/// bracketed paste into it and ignores Enter: a prompt's turn never starts.
fn stuck_claude(host: Host) -> Host {
    let path = host.path("stuck-claude");
    let script = r#"#!/usr/bin/env python3
import os, tty
tty.setraw(0)
rule = "\u2500" * 40
def draw(text):
    os.write(1, ("\x1b[H\x1b[2J stuck stand-in\r\n" + rule + "\r\n\u276f " + text + "\r\n" + rule + "\r\n  ? for shortcuts\r\n").encode())
os.write(1, b"\x1b[?2004h")
draw("")
typed = b""
while True:
    data = os.read(0, 4096)
    if not data:
        break
    typed += data.replace(b"\x1b[200~", b"").replace(b"\x1b[201~", b"").replace(b"\r", b"")
    draw(typed.decode(errors="replace"))
"#;
    std::fs::write(&path, script).unwrap();
    sh_ok(&format!("chmod +x '{}'", path.display()));
    let program = path.display().to_string();
    host.with_env("SESSIONFS_ENGINE_CLAUDE", &program)
}

#[test]
fn a_writer_interrupted_after_typing_began_gets_eintr_and_the_prompt_is_finished() {
    let host = stuck_claude(Host::new()).with_env("AGENT_SESSIONS_PROMPT_TIMEOUT", "4");
    let m = host.mount("mnt");
    let key = format!("claude:{ID}");
    sh_ok(&format!("mkdir {}", m.q(&key)));
    sh_ok(&format!("echo open > {}", m.q(&format!("{key}/ctl"))));
    wait_for(10, "idle", || m.read(&format!("{key}/state")) == "idle\n");
    // Pasted and entered, but the turn never starts: the close waits for it
    // until SIGINT, which ends it at once.
    let t0 = Instant::now();
    let writer = bash(&format!(
        "timeout -s INT 1 /usr/bin/printf 'hello there\\n' > {}",
        m.q(&format!("{key}/prompt"))
    ));
    let (status, _) = finish(writer, 5);
    let took = t0.elapsed();
    assert!(!status.success(), "{status:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    let error = m.json(&format!("{key}/status"))["error"].to_string();
    assert!(error.contains("after typing began"), "{error}");
    assert!(m.read(&format!("{key}/screen")).contains("hello there"));
    // The daemon went on: its Enter again, then the prompt's own end.
    wait_for(10, "the prompt's end", || {
        m.json(&format!("{key}/status"))["error"]
            .to_string()
            .contains("never started the turn")
    });
}

#[test]
fn prompts_that_cannot_be_sent_are_refused() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:p")));
    let prompt = m.q("shell:p/prompt");
    // Empty, not UTF-8, too long: EINVAL at close (or at the write). A
    // shell ignores what close() says after a builtin: these are programs.
    let out = sh(&format!("/usr/bin/printf '' > {prompt}"));
    assert!(!out.status.success(), "{out:?}");
    let out = sh(&format!("/usr/bin/printf '\\n\\n' > {prompt}"));
    assert!(!out.status.success(), "{out:?}");
    let out = sh(&format!("/usr/bin/printf '\\377\\376' > {prompt}"));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Invalid argument"),
        "{out:?}"
    );
    let out = sh(&format!(
        "head -c 1100000 /dev/zero | tr '\\0' a > {prompt}"
    ));
    assert!(!out.status.success());
    assert_eq!(m.read("shell:p/state"), "stopped\n", "nothing was sent");
    // A hosted run's transcript takes no prompt: EPERM.
    sh_ok(&format!(
        "echo '{{\"type\":\"text\",\"text\":\"hi\"}}' >> {}",
        m.q("agent-transcripts/run-1.jsonl")
    ));
    let out = sh(&format!(
        "/usr/bin/printf 'hi\\n' > {}",
        m.q("hosted:run-1/prompt")
    ));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
        "{out:?}"
    );
    // Archived: EPERM.
    sh_ok(&format!("echo 1 > {}", m.q("shell:p/archive")));
    let out = sh(&format!(
        "/usr/bin/printf 'hi\\n' > {}",
        m.q("archived/shell:p/prompt")
    ));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
        "{out:?}"
    );
}

#[test]
fn an_agent_never_ready_times_out_with_the_reason_in_status() {
    let host = fake_claude(Host::new()).with_env("AGENT_SESSIONS_PROMPT_TIMEOUT", "1");
    let m = host.mount("mnt");
    let key = format!("claude:{ID}");
    sh_ok(&format!("mkdir {}", m.q(&key)));
    let t0 = Instant::now();
    let out = sh(&format!(
        "/usr/bin/printf 'hello\\n' > {}",
        m.q(&format!("{key}/prompt"))
    ));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("timed out"),
        "{out:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let status = m.json(&format!("{key}/status"));
    assert!(
        status["error"].as_str().unwrap().contains("never ready"),
        "{status}"
    );
    // The stand-in was started with the hook settings.
    let argv = std::fs::read_to_string(host.path("argv")).unwrap();
    let settings = state_dir(&host).join(format!("agents/{key}/settings.json"));
    assert_eq!(
        argv.trim(),
        format!("--session-id {ID} --settings {}", settings.display())
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    let cmd = doc["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(cmd.contains(" hook --events "), "{cmd}");
}

/// A host whose Claude is a stand-in TUI whose turns are too quick for any
/// screen look: it draws a prompt box, takes a bracketed paste into it, and
/// on Enter fires its Stop hook at once, never drawing a running turn.
/// `keeps_text`: the box goes on showing the text after the Enter.
fn instant_claude(host: Host, keeps_text: bool) -> Host {
    let path = host.path("instant-claude");
    let script = r#"#!/usr/bin/env python3
import json, os, subprocess, sys, tty
args = sys.argv[1:]
session = args[args.index("--session-id") + 1]
with open(args[args.index("--settings") + 1]) as f:
    stop = json.load(f)["hooks"]["Stop"][0]["hooks"][0]["command"]
keeps_text = KEEPS_TEXT
tty.setraw(0)
rule = "\u2500" * 40
def draw(text):
    screen = "\x1b[H\x1b[2J instant stand-in\r\n" + rule + "\r\n\u276f " + text + "\r\n" + rule + "\r\n  ? for shortcuts\r\n"
    os.write(1, screen.encode())
os.write(1, b"\x1b[?2004h")
draw("")
typed = b""
while True:
    data = os.read(0, 4096)
    if not data:
        break
    *lines, rest = data.replace(b"\x1b[200~", b"").replace(b"\x1b[201~", b"").split(b"\r")
    for line in lines:
        # Enter: the turn runs and ends at once.
        typed = typed + line if keeps_text else b""
        draw(typed.decode(errors="replace"))
        payload = json.dumps({"session_id": session, "hook_event_name": "Stop"})
        subprocess.run(stop, shell=True, input=payload.encode())
    typed += rest
    draw(typed.decode(errors="replace"))
"#;
    let keeps = if keeps_text { "True" } else { "False" };
    std::fs::write(&path, script.replace("KEEPS_TEXT", keeps)).unwrap();
    sh_ok(&format!("chmod +x '{}'", path.display()));
    let program = path.display().to_string();
    host.with_env("SESSIONFS_ENGINE_CLAUDE", &program)
}

#[test]
fn a_turn_too_quick_for_the_screen_is_still_seen_taken() {
    // Whether the prompt box empties after the Enter (seen taken at once)
    // or not (seen taken when the turn's end arrives).
    for keeps_text in [false, true] {
        let host =
            instant_claude(Host::new(), keeps_text).with_env("AGENT_SESSIONS_PROMPT_TIMEOUT", "15");
        let m = host.mount("mnt");
        let key = format!("claude:{ID}");
        sh_ok(&format!("mkdir {}", m.q(&key)));
        let t0 = Instant::now();
        let out = sh(&format!(
            "/usr/bin/printf 'quick one\\n' > {}",
            m.q(&format!("{key}/prompt"))
        ));
        assert!(
            out.status.success(),
            "keeps_text {keeps_text}: {out:?}\nstatus: {}\nscreen:\n{}",
            m.read(&format!("{key}/status")),
            m.read(&format!("{key}/screen"))
        );
        assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
        let (status, line) = finish(cat(&m.path(&format!("{key}/wait"))), 20);
        assert!(status.success());
        assert_eq!(line, "idle\n");
        // A turn's end is held until the agent records the turn (at most
        // 2 s): the turn's lines come then.
        let read_events = || -> Vec<serde_json::Value> {
            m.read(&format!("{key}/events"))
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        wait_until(5, || read_events().iter().any(|e| e["state"] == "busy"));
        let events = read_events();
        let turn: Vec<(&str, &str)> = events
            .iter()
            .skip_while(|e| e["state"] != "busy")
            .map(|e| (e["state"].as_str().unwrap(), e["source"].as_str().unwrap()))
            .collect();
        assert_eq!(
            turn,
            [("busy", "prompt"), ("idle", "hook")],
            "keeps_text {keeps_text}: {events:?}"
        );
    }
}

/// Appends one Claude hook event to the session's hook file the way the
/// agent's hook does: `sessionfs hook` with the payload on stdin.
fn hook(host: &Host, key: &str, event: &str, session_id: &str) {
    let file = state_dir(host).join(format!("agents/{key}/hooks.jsonl"));
    let payload = serde_json::json!({"session_id": session_id, "hook_event_name": event});
    let mut child = Command::new(env!("CARGO_BIN_EXE_sessionfs"))
        .args(["hook", "--events"])
        .arg(&file)
        .args(["--session", key])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
}

/// A new daemon at `name`, whose `events` of `key` still begin with
/// `before`.
fn remount_keeping(host: &Host, name: &str, key: &str, before: &str) -> Mount {
    let m = host.mount(name);
    assert!(
        m.read(&format!("{key}/events")).starts_with(before),
        "the events were kept"
    );
    m
}

/// What `wait` of `key` returns (at most 10 s).
fn wait_line(m: &Mount, key: &str) -> String {
    sh_ok(&format!("timeout 10 cat {}", m.q(&format!("{key}/wait"))))
}

#[test]
fn hook_events_move_the_state_others_are_ignored_and_a_restart_goes_on() {
    let host = fake_claude(Host::new());
    let mut m = host.mount("mnt");
    let key = format!("claude:{ID}");
    sh_ok(&format!("mkdir {}", m.q(&key)));
    sh_ok(&format!("echo open > {}", m.q(&format!("{key}/ctl"))));
    assert_eq!(m.read(&format!("{key}/state")), "starting\n");
    hook(&host, &key, "UserPromptSubmit", ID);
    wait_for(5, "busy", || m.read(&format!("{key}/state")) == "busy\n");
    // A child agent's events (another session id) change nothing.
    hook(&host, &key, "Stop", "99999999-0000-4000-8000-000000000000");
    hook(&host, &key, "PermissionRequest", ID);
    wait_for(5, "waiting", || {
        m.read(&format!("{key}/state")) == "waiting\n"
    });
    assert!(
        m.log_text().contains("from another session"),
        "{}",
        m.log_text()
    );
    assert_eq!(
        sh_ok(&format!("cat {}", m.q(&format!("{key}/wait")))),
        "waiting\n"
    );
    hook(&host, &key, "PostToolUse", ID);
    wait_for(5, "busy again", || {
        m.read(&format!("{key}/state")) == "busy\n"
    });
    let before = m.read(&format!("{key}/events"));

    // A turn's end is held until the agent records the turn (this store
    // never does: 2 s). The daemon goes while it holds the Stop; the next
    // one applies it.
    hook(&host, &key, "Stop", ID);
    let dir = state_dir(&host).join(format!("agents/{key}"));
    wait_for(5, "the Stop read", || {
        let saved: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("follow.json")).unwrap()).unwrap();
        let hooks = std::fs::metadata(dir.join("hooks.jsonl")).unwrap().len();
        saved["pos"]["offset"] == hooks
    });
    assert_eq!(
        m.read(&format!("{key}/state")),
        "busy\n",
        "the Stop is held"
    );
    m.terminate();
    let mut m = remount_keeping(&host, "mnt2", &key, &before);
    assert_eq!(wait_line(&m, &key), "idle\n");
    hook(&host, &key, "UserPromptSubmit", ID);
    wait_for(5, "busy after the restart", || {
        m.read(&format!("{key}/state")) == "busy\n"
    });
    let before = m.read(&format!("{key}/events"));

    // The daemon goes; the agent stays and its hooks go on writing.
    m.terminate();
    hook(&host, &key, "Stop", ID);
    let m = remount_keeping(&host, "mnt3", &key, &before);
    // The Stop written while no daemon ran is read (the store it waits
    // for does not exist: at most its wait for the record).
    assert_eq!(wait_line(&m, &key), "idle\n");
    let events = m.read(&format!("{key}/events"));
    let last: serde_json::Value = serde_json::from_str(events.lines().last().unwrap()).unwrap();
    assert_eq!(last["state"], "idle");
    assert_eq!(last["detail"], "Stop");
    // Stopped: `stopped`, and a stop is final until the next open.
    sh_ok(&format!("echo stop > {}", m.q(&format!("{key}/ctl"))));
    assert_eq!(m.read(&format!("{key}/state")), "stopped\n");
    hook(&host, &key, "UserPromptSubmit", ID);
    assert_eq!(m.read(&format!("{key}/state")), "stopped\n");
}

/// A program that ends while no daemon is joined to it reads `exited` to
/// the next daemon, with one `events` line for it; a stopped one stays
/// `stopped`.
#[test]
fn a_program_that_ends_while_no_daemon_runs_is_exited_to_the_next() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    for key in ["shell:gone", "shell:halted"] {
        sh_ok(&format!("mkdir {}", m.q(key)));
        sh_ok(&format!("echo true > {}", m.q(&format!("{key}/prompt"))));
        wait_for(10, "idle", || m.read(&format!("{key}/state")) == "idle\n");
    }
    sh_ok(&format!("echo stop > {}", m.q("shell:halted/ctl")));
    wait_for(10, "stopped", || {
        m.read("shell:halted/state") == "stopped\n"
    });
    let status = m.json("shell:gone/status");
    let (agent, master) = (
        status["agent_pid"].as_u64().unwrap() as i32,
        status["master_pid"].as_u64().unwrap() as u32,
    );
    assert_eq!(m.terminate(), Some(0));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    wait_for(10, "the master to end", || !alive(master));

    for round in 0..2 {
        let mut m = host.mount("mnt");
        assert_eq!(m.read("shell:gone/state"), "exited\n", "round {round}");
        assert_eq!(m.read("shell:halted/state"), "stopped\n", "round {round}");
        let events = m.read("shell:gone/events");
        let ended: Vec<&str> = events
            .lines()
            .filter(|l| l.contains("no daemon was joined"))
            .collect();
        assert_eq!(ended.len(), 1, "round {round}: {events}");
        assert!(ended[0].contains("\"exited\""), "{events}");
        assert!(events.trim_end().ends_with(ended[0]), "{events}");
        assert_eq!(m.terminate(), Some(0));
    }
}

/// The shell of a session: its pid, from `status`.
fn shell_pid(m: &Mount, key: &str) -> u32 {
    m.json(&format!("{key}/status"))["agent_pid"]
        .as_u64()
        .expect("a live shell's pid") as u32
}

#[test]
fn wait_right_after_a_shell_prompt_blocks_while_its_command_runs() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:s")));
    let prompt = m.q("shell:s/prompt");
    let wait = m.q("shell:s/wait");
    // The recipe: `prompt` returns once the shell took the line, so a
    // `wait` right after sees the command running, every time.
    for round in 0..10 {
        let t0 = Instant::now();
        sh_ok(&format!("/usr/bin/printf 'sleep 1\\n' > {prompt}"));
        let closed = t0.elapsed();
        let t1 = Instant::now();
        assert_eq!(sh_ok(&format!("cat {wait}")), "idle\n", "round {round}");
        let waited = t1.elapsed();
        eprintln!("round {round}: prompt closed after {closed:?}, wait after {waited:?}");
        assert!(
            waited >= Duration::from_millis(800),
            "round {round}: wait returned after {waited:?}, before the command ended"
        );
    }
}

#[test]
fn a_builtin_prompt_closes_once_the_shell_ran_it() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:b")));
    let prompt = m.q("shell:b/prompt");
    // The first prompt launches the shell.
    sh_ok(&format!("/usr/bin/printf 'true\\n' > {prompt}"));
    let pid = shell_pid(&m, "shell:b");
    let cwd = || std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    let mut slowest = Duration::ZERO;
    for (round, dir) in ["/tmp", "/", "/tmp", "/", "/tmp"].iter().enumerate() {
        let t0 = Instant::now();
        sh_ok(&format!("/usr/bin/printf 'cd {dir}\\n' > {prompt}"));
        let closed = t0.elapsed();
        slowest = slowest.max(closed);
        // The line was run when close returned.
        assert_eq!(cwd(), std::path::Path::new(dir), "round {round}");
        let t1 = Instant::now();
        assert_eq!(sh_ok(&format!("cat {}", m.q("shell:b/wait"))), "idle\n");
        assert!(
            t1.elapsed() < Duration::from_millis(500),
            "{:?}",
            t1.elapsed()
        );
        eprintln!("`cd {dir}`: prompt closed after {closed:?}");
    }
    // A builtin never makes the close wait long (it is well under this
    // even on a loaded machine).
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
}

#[test]
fn a_shell_prompt_written_while_a_command_runs_is_typed_after_it_in_order() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:q")));
    let prompt = m.q("shell:q/prompt");
    let out = host.path("order");
    let out_q = format!("'{}'", out.display());
    sh_ok(&format!("/usr/bin/printf 'true\\n' > {prompt}"));
    // The first command is running when its close returns...
    sh_ok(&format!(
        "/usr/bin/printf 'sleep 1; echo one >> {out_q}\\n' > {prompt}"
    ));
    let t0 = Instant::now();
    assert_eq!(m.read("shell:q/state"), "busy\n");
    // ...the next two wait for it, in the order they were closed.
    let second = bash(&format!(
        "/usr/bin/printf 'echo two >> {out_q}\\n' > {prompt}"
    ));
    let blocked = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('D'))
        })
    };
    let second_pid = second.id();
    wait_for(5, "the second writer to block in close()", || {
        blocked(second_pid) || !alive(second_pid)
    });
    let third = bash(&format!(
        "/usr/bin/printf 'echo three >> {out_q}\\n' > {prompt}"
    ));
    let (status, _) = finish(second, 10);
    assert!(status.success(), "{status:?}");
    let took = t0.elapsed();
    let (status, _) = finish(third, 10);
    assert!(status.success(), "{status:?}");
    eprintln!("the prompt after the running command closed after {took:?}");
    assert!(took >= Duration::from_millis(800), "{took:?}");
    // Both were run when their closes returned.
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "one\ntwo\nthree\n");
    assert_eq!(sh_ok(&format!("cat {}", m.q("shell:q/wait"))), "idle\n");
}

/// A terminal agent from a config entry that, resumed, first draws a start
/// screen that takes input (as opencode does) and then the conversation:
/// with that screen named as `loading`, the prompt is typed into the
/// conversation, never into the start screen.
#[test]
fn a_resumed_agent_is_not_ready_while_its_start_screen_shows() {
    let host = Host::new();
    let program = host.path("slow-loader");
    let typed = host.path("typed");
    let script = r#"#!/usr/bin/env python3
import os, sys, time, tty
tty.setraw(0)
resumed = "--resume" in sys.argv
def draw(view, text=""):
    os.write(1, ("\x1b[H\x1b[2J" + view + "\r\n> " + text).encode())
view = "START: Ask anything" if resumed else "NEW conversation"
draw(view)
shown_at = time.monotonic()
typed = b""
os.set_blocking(0, False)
while True:
    if resumed and view.startswith("START") and time.monotonic() - shown_at > 2.5:
        view = "CONVERSATION loaded"
        draw(view, typed.decode(errors="replace"))
    try:
        data = os.read(0, 4096)
    except BlockingIOError:
        time.sleep(0.02)
        continue
    if not data:
        break
    *lines, rest = data.replace(b"\x1b[200~", b"").replace(b"\x1b[201~", b"").split(b"\r")
    for line in lines:
        with open("TYPED", "a") as f:
            f.write(view.split(":")[0].split(" ")[0] + " " + (typed + line).decode() + "\n")
        typed = b""
        draw("WORKING " + view)
        time.sleep(0.3)
        draw(view)
    typed += rest
    draw(view, typed.decode(errors="replace"))
"#;
    std::fs::write(
        &program,
        script.replace("TYPED", &typed.display().to_string()),
    )
    .unwrap();
    sh_ok(&format!("chmod +x '{}'", program.display()));
    let config = host.path("config.json");
    let entry = serde_json::json!({"engines": {"loader": {
        "program": program.display().to_string(),
        "new": [],
        "resume": ["--resume", "{id}"],
        "prompt": {"paste": "bracketed", "enter_delay_ms": 20},
        "screen": {
            "busy": ["WORKING"],
            "idle": ["^>"],
            "loading": ["Ask anything"],
            "debounce_ms": 200
        }
    }}});
    std::fs::write(&config, entry.to_string()).unwrap();
    let m = host.mount_with("mnt", &["--config", config.to_str().unwrap()]);
    let key = "loader:first";
    sh_ok(&format!("mkdir {}", m.q(key)));
    let prompt = |text: &str| {
        sh_ok(&format!(
            "/usr/bin/printf '{text}\\n' > {}",
            m.q(&format!("{key}/prompt"))
        ))
    };
    prompt("one");
    wait_for(10, "the first prompt typed", || {
        std::fs::read_to_string(&typed).is_ok_and(|t| t == "NEW one\n")
    });
    sh_ok(&format!("echo stop > {}", m.q(&format!("{key}/ctl"))));
    // Launched again with `resume`: the prompt waits for the conversation.
    prompt("two");
    wait_for(10, "the second prompt typed", || {
        std::fs::read_to_string(&typed).is_ok_and(|t| t.lines().count() == 2)
    });
    assert_eq!(
        std::fs::read_to_string(&typed).unwrap(),
        "NEW one\nCONVERSATION two\n",
        "{}",
        m.log_text()
    );
}
