//! The real Claude Code and Codex CLIs, installed from npm by
//! `scripts/agents`, run fully offline against the model API stand-in: their
//! stores appear, and sessionfs's transcript renderer shows the prompt and
//! the stand-in's answer through a real mount.

mod common;

use common::agents::{agents_bin, AgentEnv};
use common::model_api::ModelApi;
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` to completion or kills it after `secs`.
fn run_for(mut cmd: Command, secs: u64) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the CLI starts");
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        if wait_until(secs, || !alive(pid)) {
            return;
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    });
    let out = child.wait_with_output().unwrap();
    let _ = watchdog.join();
    out
}

fn show(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Reads every page of `key`'s transcript through the mount.
fn transcript(m: &Mount, key: &str) -> String {
    sh_ok(&format!("cat {}", m.q(&format!("{key}/transcript/latest"))))
}

#[test]
fn claude_print_mode_answers_from_the_stand_in_and_renders() {
    let Some(bin) = agents_bin("claude_print_mode_answers_from_the_stand_in_and_renders") else {
        return;
    };
    let api = ModelApi::start();
    api.push_text("Stand-in answer: the tests pass.");
    let host = Host::new();
    let env = AgentEnv::new(bin, host.root.path(), &api.url());
    let mut cmd = env.command("claude");
    cmd.args(["-p", "hello from the offline test"]);
    let out = run_for(cmd, 90);
    assert!(out.status.success(), "{}\n{}", show(&out), api.log());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Stand-in answer: the tests pass."),
        "{}",
        show(&out)
    );
    let turns = api.turns();
    assert!(
        turns
            .iter()
            .any(|r| r.user_words().as_deref() == Some("hello from the offline test")),
        "the prompt never reached the stand-in:\n{}",
        api.log()
    );
    let stores = env.claude_stores();
    assert_eq!(stores.len(), 1, "{stores:?}");
    let id = stores[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    let host = host.with_env("CLAUDE_CONFIG_DIR", env.claude_dir.to_str().unwrap());
    let m = host.mount("mnt");
    let key = format!("claude:{id}");
    let page = transcript(&m, &key);
    assert!(page.contains("hello from the offline test"), "{page}");
    assert!(page.contains("Stand-in answer: the tests pass."), "{page}");
}

#[test]
fn codex_exec_answers_from_the_stand_in_and_renders() {
    let Some(bin) = agents_bin("codex_exec_answers_from_the_stand_in_and_renders") else {
        return;
    };
    let api = ModelApi::start();
    api.push_text("Stand-in answer from codex land.");
    let host = Host::new();
    let env = AgentEnv::new(bin, host.root.path(), &api.url());
    let mut cmd = env.command("codex");
    cmd.args(["exec", "--skip-git-repo-check", "hello codex offline"]);
    let out = run_for(cmd, 90);
    assert!(out.status.success(), "{}\n{}", show(&out), api.log());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Stand-in answer from codex land."),
        "{}",
        show(&out)
    );
    assert!(
        api.turns()
            .iter()
            .any(|r| r.user_words().as_deref() == Some("hello codex offline")),
        "the prompt never reached the stand-in:\n{}",
        api.log()
    );
    let stores = env.codex_stores();
    assert_eq!(stores.len(), 1, "{stores:?}");
    let name = stores[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // rollout-YYYY-MM-DDTHH-MM-SS-<uuid>
    let id = &name[name.len() - 36..];
    env.end_leftovers();

    let host = host.with_env("CODEX_HOME", env.codex_home.to_str().unwrap());
    let m = host.mount("mnt");
    let key = format!("codex:{id}");
    let page = transcript(&m, &key);
    assert!(page.contains("hello codex offline"), "{page}");
    assert!(page.contains("Stand-in answer from codex land."), "{page}");
}

/// One request on a kept-alive connection; returns (status, body). Reads a
/// content-length body or a chunked one.
fn http(conn: &mut BufReader<TcpStream>, method: &str, path: &str, body: &str) -> (u16, String) {
    write!(
        conn.get_mut(),
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut status = String::new();
    conn.read_line(&mut status).unwrap();
    let code = status.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (mut length, mut chunked) = (0, false);
    loop {
        let mut line = String::new();
        conn.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        chunked |= lower.starts_with("transfer-encoding: chunked");
    }
    let mut out = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            conn.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            conn.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&chunk[..n]);
        }
    } else if method != "HEAD" {
        out.resize(length, 0);
        conn.read_exact(&mut out).unwrap();
    }
    (code, String::from_utf8(out).unwrap())
}

fn event_names(sse: &str) -> Vec<&str> {
    sse.lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect()
}

#[test]
fn the_stand_in_streams_both_apis_on_one_connection() {
    let api = ModelApi::start();
    api.push_text("hi there");
    api.push_bash("ls -la");
    api.push(
        common::model_api::Answer::Text("slow".into()),
        Duration::from_millis(300),
    );
    let mut conn = BufReader::new(TcpStream::connect(("127.0.0.1", api.port())).unwrap());
    let turn = r#"{"stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"the words"}]}]}"#;
    let (code, sse) = http(&mut conn, "POST", "/v1/messages?beta=true", turn);
    assert_eq!(code, 200);
    assert_eq!(
        event_names(&sse),
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert!(sse.contains("hi there") && sse.contains("end_turn"));
    let (_, sse) = http(&mut conn, "POST", "/v1/messages", turn);
    assert!(sse.contains(r#""name":"Bash""#) && sse.contains("tool_use") && sse.contains("ls -la"));
    // A side request (no tools) does not take a scripted answer.
    let (_, side) = http(
        &mut conn,
        "POST",
        "/v1/messages",
        r#"{"stream":false,"messages":[]}"#,
    );
    assert!(side.contains("Greeting"), "{side}");
    let (code, count) = http(&mut conn, "POST", "/v1/messages/count_tokens", "{}");
    assert_eq!((code, count.contains("input_tokens")), (200, true));
    assert_eq!(http(&mut conn, "HEAD", "/", "").0, 200);
    let (code, body) = http(&mut conn, "GET", "/nowhere", "");
    assert_eq!(code, 404);
    assert!(
        body.starts_with('{') && body.contains("not_found_error"),
        "{body}"
    );
    let codex = r#"{"stream":true,"tools":[{"type":"function","name":"exec_command"}],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"codex words"}]}]}"#;
    let started = Instant::now();
    let (_, sse) = http(&mut conn, "POST", "/v1/responses", codex);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the delay was skipped"
    );
    assert_eq!(
        event_names(&sse),
        [
            "response.created",
            "response.output_item.added",
            "response.output_text.delta",
            "response.output_item.done",
            "response.completed"
        ]
    );
    assert!(sse.contains("slow"));
    let turns = api.turns();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[0].user_words().as_deref(), Some("the words"));
    assert_eq!(turns[2].user_words().as_deref(), Some("codex words"));
    assert_eq!(api.answered().len(), 3);
    assert_eq!(api.requests().len(), 7);
}
