//! The real Claude Code and Codex CLIs, installed from npm by
//! `scripts/agents`, run fully offline against the model API stand-in: their
//! stores appear, and sessionfs's transcript renderer shows the prompt and
//! the stand-in's answer through a real mount.

#[path = "common/agents.rs"]
mod agents;
mod common;
#[path = "common/model_api.rs"]
mod model_api;

use agents::{agents_bin, AgentEnv};
use common::*;
use model_api::ModelApi;
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
    let until = Instant::now() + Duration::from_secs(secs);
    let watchdog = std::thread::spawn(move || {
        while Instant::now() < until {
            if !alive(pid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
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
