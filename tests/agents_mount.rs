//! The real Claude Code and Codex TUIs driven through a real mount, offline
//! against the model API stand-in: `prompt`, `state`, `wait`, `events` and
//! `transcript/last` as a shell pipeline uses them.

#[path = "common/agents.rs"]
mod agents;
mod common;
#[path = "common/model_api.rs"]
mod model_api;

use agents::{agents_bin, AgentEnv};
use common::*;
use model_api::{Answer, ModelApi};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A host whose daemon runs the agents offline against `api`.
struct Agents {
    // Dropped in this order: the mount, the agents' leftovers, the host.
    m: Mount,
    env: AgentEnv,
    host: Host,
    api: ModelApi,
}

impl Agents {
    fn start(test: &str) -> Option<Agents> {
        let bin = agents_bin(test)?;
        let api = ModelApi::start();
        let mut host = Host::new();
        let env = AgentEnv::new(bin, host.root.path(), &api.url());
        for (k, v) in env.vars() {
            host = host.with_env(&k, &v);
        }
        let m = host.mount("mnt");
        Some(Agents { m, env, host, api })
    }

    /// A new session of `engine` that runs in the trusted project directory.
    fn session(&self, engine: &str, id: &str) -> String {
        let key = format!("{engine}:{id}");
        sh_ok(&format!("mkdir {}", self.m.q(&key)));
        let meta = self.m.q(&format!("{key}/meta.json"));
        sh_ok(&format!(
            "jq --arg w '{}' '.workspace = $w' {meta} > {tmp} && cat {tmp} > {meta}",
            self.env.project.display(),
            tmp = self.host.path("meta.tmp").display()
        ));
        key
    }

    fn read(&self, key: &str, file: &str) -> String {
        self.m.read(&format!("{key}/{file}"))
    }

    /// `echo TEXT > KEY/prompt`: how long close() took.
    fn prompt(&self, key: &str, text: &str) -> Duration {
        let t0 = Instant::now();
        let out = sh(&format!(
            "printf '%s\\n' '{}' > {}",
            text.replace('\'', r"'\''"),
            self.m.q(&format!("{key}/prompt"))
        ));
        assert!(
            out.status.success(),
            "prompt to {key} failed: {}\nstatus: {}\nscreen:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.read(key, "status"),
            self.read(key, "screen")
        );
        t0.elapsed()
    }

    /// `cat KEY/wait`, bounded: its line.
    fn wait(&self, key: &str, secs: u64) -> String {
        let out = sh(&format!(
            "timeout {secs} cat {}",
            self.m.q(&format!("{key}/wait"))
        ));
        assert!(
            out.status.success(),
            "cat {key}/wait failed ({}); state {}; screen:\n{}",
            out.status,
            self.read(key, "state"),
            self.read(key, "screen")
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn events(&self, key: &str) -> Vec<serde_json::Value> {
        self.read(key, "events")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        // The agents' masters go with the host; what they started must too.
        for pid in self.host.masters() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        self.env.end_leftovers();
    }
}

const CLAUDE_ID: &str = "c1a0de00-0000-4000-8000-000000000001";

#[test]
fn a_prompt_to_a_new_claude_session_is_answered_and_it_goes_idle() {
    let Some(a) = Agents::start("a_prompt_to_a_new_claude_session_is_answered_and_it_goes_idle")
    else {
        return;
    };
    a.api.push_text("Stand-in answer one.");
    let key = a.session("claude", CLAUDE_ID);
    assert_eq!(a.read(&key, "state"), "stopped\n");
    let took = a.prompt(&key, "fix the failing test");
    eprintln!("prompt to a new claude session accepted after {took:?}");
    // Accepted: the turn has started (or, fast, already ended).
    let state = a.read(&key, "state");
    assert!(["busy\n", "idle\n"].contains(&state.as_str()), "{state}");
    assert_eq!(a.wait(&key, 60), "idle\n");
    let last = a.read(&key, "transcript/last");
    assert!(
        last.contains("fix the failing test"),
        "{last}\nevents:\n{}\nlog:\n{}",
        a.read(&key, "events"),
        a.m.log_text()
    );
    assert!(last.contains("Stand-in answer one."), "{last}");
    let turns = a.api.turns();
    assert_eq!(turns.len(), 1, "{}", a.api.log());
    assert_eq!(
        turns[0].user_words().as_deref(),
        Some("fix the failing test")
    );
    let events = a.events(&key);
    let states: Vec<&str> = events
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(states.first(), Some(&"starting"), "{events:?}");
    assert!(states.contains(&"busy"), "{events:?}");
    assert_eq!(states.last(), Some(&"idle"), "{events:?}");
    let stop = events.last().unwrap();
    assert_eq!(stop["source"], "hook", "{events:?}");
    assert_eq!(stop["detail"], "Stop", "{events:?}");
    let status = a.m.json(&format!("{key}/status"));
    assert_eq!(status["agent_state"], "idle");
    assert!(status["error"].is_null(), "{status}");
}
