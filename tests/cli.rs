//! The `sessionfs` verbs for scripts that make and drive sessions: `new`,
//! `prompt`, `attach`, `ls --paths` and `--json`, each a client of a real
//! mount, with shells as the sessions (the agents' verbs are in
//! `dialogs.rs`).

mod common;

use common::*;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `sessionfs ARGS` on this host's state, run in `dir`, with `stdin`.
fn cli_in(host: &Host, dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = host
        .state_env(Command::new(env!("CARGO_BIN_EXE_sessionfs")).args(args))
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn new_prints_its_own_key_even_when_five_run_at_once() {
    let host = Host::new();
    let m = host.mount("mnt");
    let project = host.path("project");
    std::fs::create_dir_all(project.join("sub")).unwrap();

    // Five creators at once, each told which key it made.
    let children: Vec<_> = (0..5)
        .map(|i| {
            host.state_env(Command::new(env!("CARGO_BIN_EXE_sessionfs")).args([
                "new",
                "shell",
                "--title",
                &format!("job {i}"),
            ]))
            .current_dir(&project)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let mut keys = Vec::new();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let key = text(&out.stdout).trim().to_string();
        assert!(key.starts_with("shell:"), "{key}");
        // Its own: the title it gave, the directory it ran in.
        let meta = m.json(&format!("{key}/meta.json"));
        assert_eq!(meta["title"], format!("job {i}"), "{meta}");
        assert_eq!(meta["workspace"], project.to_str().unwrap());
        keys.push(key);
    }
    let mut distinct = keys.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 5, "{keys:?}");

    // A relative --workspace is taken from here; --json gives the path.
    let out = cli_in(
        &host,
        &project,
        &["new", "claude", "--workspace", "sub", "--json"],
        b"",
    );
    assert!(out.status.success(), "{out:?}");
    let made: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = made["key"].as_str().unwrap();
    let id = key.strip_prefix("claude:").unwrap();
    assert!(uuid::Uuid::try_parse(id).is_ok(), "{key}");
    assert_eq!(made["path"], m.path(key).to_str().unwrap());
    let meta = m.json(&format!("{key}/meta.json"));
    assert_eq!(meta["workspace"], project.join("sub").to_str().unwrap());
    assert_eq!(
        meta["state"], "stopped",
        "nothing starts until it is opened"
    );

    // Refusals: the reason from the mount, exit 1; a usage error, exit 2.
    let out = cli_in(&host, &project, &["new", "nosuch"], b"");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("nosuch"), "{out:?}");
    let out = cli_in(
        &host,
        &project,
        &["new", "shell", "--workspace", "missing"],
        b"",
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("missing"), "{out:?}");
    let out = cli_in(&host, &project, &["new", "shell", "--title", "a\nb"], b"");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // Run inside the mount: the workspace is left to the default.
    let out = cli_in(&host, &m.path(""), &["new", "shell"], b"");
    assert!(out.status.success(), "{out:?}");
    let key = text(&out.stdout).trim().to_string();
    let meta = m.json(&format!("{key}/meta.json"));
    assert_eq!(meta["workspace"], host.path("home").to_str().unwrap());
}

#[test]
fn prompt_types_text_from_arguments_or_stdin_and_waits_when_asked() {
    let host = Host::new();
    let m = host.mount("mnt");
    let here = host.path("");
    let out = cli_in(&host, &here, &["new", "shell"], b"");
    let key = text(&out.stdout).trim().to_string();

    // Words from the command line, then the turn waited for.
    let out = cli_in(
        &host,
        &here,
        &["prompt", &key, "echo", "from-$((6*7))", "--wait"],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), format!("{key} idle\n"));
    m.wait_output_line(&key, "from-42");

    // Standard input with `-`, JSON out.
    let out = cli_in(
        &host,
        &here,
        &["prompt", &key, "-", "--wait", "--json"],
        b"echo piped-$((2+3))\n",
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let settled: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(settled, serde_json::json!([{"key": key, "state": "idle"}]));
    m.wait_output_line(&key, "piped-5");

    // Without --wait it returns once the line was taken: the job runs on.
    let out = cli_in(&host, &here, &["prompt", &key, "sleep 30"], b"");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(m.read(&format!("{key}/state")), "busy\n");
    // The next waits its turn behind the job: --timeout gives up on it,
    // and the daemon withdraws it, never typed.
    let out = cli_in(
        &host,
        &here,
        &[
            "prompt",
            &key,
            "echo never-$((1+1))",
            "--wait",
            "--timeout",
            "0.5",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    assert!(text(&out.stderr).contains("withdrawn"), "{out:?}");
    wait_for(10, "the prompt to be withdrawn", || {
        m.json(&format!("{key}/status"))["error"]
            .as_str()
            .is_some_and(|e| e.contains("withdrawn"))
    });
    // A shell has no answering verbs: refused with the reason.
    let out = cli_in(&host, &here, &["interrupt", &key], b"");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    sh_ok(&format!("echo stop > {}", m.q(&format!("{key}/ctl"))));
    assert!(!m.read(&format!("{key}/scrollback")).contains("never-2"));

    // An archived session refuses, with the reason; an empty prompt too.
    sh_ok(&format!("echo 1 > {}", m.q(&format!("{key}/archive"))));
    let out = cli_in(&host, &here, &["prompt", &key, "ls"], b"");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("archived"), "{out:?}");
    let out = cli_in(&host, &here, &["prompt", "shell:none", "ls"], b"");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains("no session shell:none"),
        "{out:?}"
    );
}

#[test]
fn ls_paths_prints_where_each_session_is_in_the_mount() {
    let host = Host::new();
    let m = host.mount("mnt");
    m.live_shell("shell:one");
    sh_ok(&format!("mkdir {}", m.q("shell:two")));
    sh_ok(&format!(
        "mkdir {} {}",
        m.q("shell:gone"),
        m.q("shell:kept")
    ));
    sh_ok(&format!("mv {} {}", m.q("shell:gone"), m.q("archived/")));
    let paths = host.ls(&["--paths", "--engine", "shell"]);
    let mut lines: Vec<&str> = paths.lines().collect();
    lines.sort();
    let want: Vec<String> = ["shell:kept", "shell:one", "shell:two"]
        .iter()
        .map(|k| m.path(k).display().to_string())
        .collect();
    assert_eq!(lines, want);
    // Every one is a directory a script can use as it is.
    for line in &lines {
        assert!(Path::new(line).join("status").is_file(), "{line}");
    }
    wait_for(10, "shell:one to be idle", || {
        m.read("shell:one/state") == "idle\n"
    });
    let idle = host.ls(&["--state", "idle", "--paths"]);
    assert_eq!(idle, format!("{}\n", m.path("shell:one").display()));
    let archived = host.ls(&["--archived", "--paths"]);
    assert_eq!(
        archived,
        format!("{}\n", m.path("archived/shell:gone").display())
    );
    sh_ok(&format!("echo stop > {}", m.q("shell:one/ctl")));
}

/// `sessionfs attach` runs under a real terminal (a pty), types into the
/// session, and detaches with dtach's key, leaving the session running.
#[test]
fn attach_joins_the_master_from_a_terminal_and_detaches_leaving_it_running() {
    let host = Host::new();
    let m = host.mount("mnt");
    let here = host.path("");
    let key = text(&cli_in(&host, &here, &["new", "shell"], b"").stdout)
        .trim()
        .to_string();
    assert_eq!(m.read(&format!("{key}/state")), "stopped\n");

    // A pty for `sessionfs attach`, driven from Python's pty module.
    let script = r#"
import os, pty, sys, time, select
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "attach", sys.argv[2]])
seen = b""
def read_until(needle, secs):
    global seen
    end = time.time() + secs
    while needle not in seen and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    return needle in seen
os.write(fd, b"echo attached-$((40+2))\r")
if not read_until(b"attached-42", 20):
    print("never saw the echo:", seen[-400:]); sys.exit(3)
os.write(fd, b"\x1c")
_, status = os.waitpid(pid, 0)
print("exit", os.waitstatus_to_exitcode(status))
"#;
    let out = host
        .state_env(Command::new("python3").args([
            "-c",
            script,
            env!("CARGO_BIN_EXE_sessionfs"),
            &key,
        ]))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(text(&out.stdout).contains("exit 0"), "{out:?}");
    // The line typed in the terminal ran in the session; it goes on.
    m.wait_output_line(&key, "attached-42");
    let status = m.json(&format!("{key}/status"));
    assert_eq!(status["state"], "live", "{status}");
    let mut ring = String::new();
    std::fs::File::open(m.path(&format!("{key}/scrollback")))
        .unwrap()
        .read_to_string(&mut ring)
        .unwrap();
    assert!(ring.contains("attached-42"));
    sh_ok(&format!("echo stop > {}", m.q(&format!("{key}/ctl"))));

    // Archived: refused with the reason.
    sh_ok(&format!("echo 1 > {}", m.q(&format!("{key}/archive"))));
    let out = cli_in(&host, &here, &["attach", &key], b"");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("archived"), "{out:?}");
}

/// `sessionfs lstat-probe --serve`, its stdin and stdout pipes.
fn prober() -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_sessionfs"))
        .args(["lstat-probe", "--serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The lookups the daemon makes in its own mount go through a child kept
/// running: each NUL-ended path on its stdin is answered with its errno on
/// a line, until its stdin ends.
#[test]
fn the_prober_answers_each_path_with_its_errno() {
    use std::io::{BufRead, BufReader};
    let mut child = prober();
    let mut paths = child.stdin.take().unwrap();
    let mut answers = BufReader::new(child.stdout.take().unwrap());
    for (path, errno) in [
        ("/", "0"),
        ("/no such dir/x", "2"),
        ("/etc/passwd/x", "20"),
        ("/tmp", "0"),
    ] {
        paths.write_all(path.as_bytes()).unwrap();
        paths.write_all(b"\0").unwrap();
        paths.flush().unwrap();
        let mut line = String::new();
        answers.read_line(&mut line).unwrap();
        assert_eq!(line, format!("{errno}\n"), "{path}");
    }
    // Idle, it ends on its own (the daemon starts another when it needs one).
    assert!(
        wait_until(10, || matches!(child.try_wait(), Ok(Some(_)))),
        "an idle prober ends"
    );
    assert!(child.wait().unwrap().success());
    drop(paths);
}

/// A prober ends when its stdin does.
#[test]
fn the_prober_ends_with_its_stdin() {
    let mut child = prober();
    drop(child.stdin.take());
    let t0 = std::time::Instant::now();
    assert!(child.wait().unwrap().success());
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        t0.elapsed()
    );
}
