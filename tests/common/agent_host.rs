//! A real mount whose daemon runs the real agent CLIs offline against the
//! model API stand-in, with the shell pipeline's ways to drive a session.
#![allow(dead_code)]

use super::agents::{agents_bin, AgentEnv};
use super::model_api::ModelApi;
use super::*;
use std::time::{Duration, Instant};

/// A host whose daemon runs the agents offline against `api`.
pub struct Agents {
    // Dropped in this order: the mount, the agents' leftovers, the host.
    pub m: Mount,
    pub env: AgentEnv,
    pub host: Host,
    pub api: ModelApi,
}

impl Agents {
    pub fn start(test: &str) -> Option<Agents> {
        Self::start_with(test, &[])
    }

    /// As [`Agents::start`], with more variables for the daemon and the
    /// agents it starts.
    pub fn start_with(test: &str, vars: &[(&str, &str)]) -> Option<Agents> {
        Self::start_at(test, "mnt", vars)
    }

    /// As [`Agents::start_with`], mounted at `name` under the host's root
    /// (`home/sessions`: the agents' and a reader's `~/sessions`).
    pub fn start_at(test: &str, name: &str, vars: &[(&str, &str)]) -> Option<Agents> {
        Self::start_mounted(test, name, vars, &[])
    }

    /// As [`Agents::start_at`], with more arguments to `sessionfs mount`
    /// (`--config FILE`).
    pub fn start_mounted(
        test: &str,
        name: &str,
        vars: &[(&str, &str)],
        mount_args: &[&str],
    ) -> Option<Agents> {
        let bin = agents_bin(test)?;
        let api = ModelApi::start();
        let mut host = Host::new();
        let env = AgentEnv::new(bin, host.root.path(), &api.url());
        for (k, v) in env.vars() {
            host = host.with_env(&k, &v);
        }
        for (k, v) in vars {
            host = host.with_env(k, v);
        }
        let m = host.mount_with(name, mount_args);
        Some(Agents { m, env, host, api })
    }

    /// `scripts/bench agents`: over `rounds` turns of an idle session `key`
    /// (after one turn that starts the agent, not measured), from a
    /// prompt's close to `busy` (the `events` line's time), how long the
    /// close took, and from the model's last byte to `idle` (`state` polled
    /// every 2 ms). One line, `ENGINE: ...`.
    pub fn bench_turns(&self, engine: &str, key: &str, rounds: usize) -> String {
        use super::model_api::Answer;
        self.api.push_text("warm.");
        self.prompt(key, "warm up");
        assert_eq!(self.wait(key, 90), "idle\n");
        let (mut to_busy, mut to_idle, mut close) = (vec![], vec![], vec![]);
        for round in 0..rounds {
            self.api.push(
                Answer::Text(format!("answer {round}")),
                Duration::from_millis(300),
            );
            let seen = self.events(key).len();
            let t0_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64;
            close.push(self.prompt(key, &format!("question {round}")));
            let deadline = Instant::now() + Duration::from_secs(90);
            let idle_at = loop {
                if self.read(key, "state") == "idle\n" {
                    break Instant::now();
                }
                assert!(Instant::now() < deadline, "{key} never went idle");
                std::thread::sleep(Duration::from_millis(2));
            };
            let last_byte = *self.api.answered().last().unwrap();
            to_idle.push(idle_at.saturating_duration_since(last_byte));
            let busy = self.events(key)[seen..]
                .iter()
                .find(|e| e["state"] == "busy")
                .map(|e| e["ts_ms"].as_u64().unwrap())
                .expect("a busy event");
            to_busy.push(Duration::from_millis(busy.saturating_sub(t0_ms)));
        }
        let show = |v: &mut Vec<Duration>| {
            v.sort();
            format!("median {:?}, max {:?}", v[v.len() / 2], v[v.len() - 1])
        };
        format!(
            "{engine}: prompt close -> busy {}; close returned after {}; model's last byte -> idle {}",
            show(&mut to_busy),
            show(&mut close),
            show(&mut to_idle)
        )
    }

    /// A new session of `engine` that runs in the trusted project directory.
    pub fn session(&self, engine: &str, id: &str) -> String {
        self.session_in(engine, id, &self.env.project)
    }

    /// A new session of `engine` that runs in `workspace`.
    pub fn session_in(&self, engine: &str, id: &str, workspace: &std::path::Path) -> String {
        let key = format!("{engine}:{id}");
        sh_ok(&format!("mkdir {}", self.m.q(&key)));
        let meta = self.m.q(&format!("{key}/meta.json"));
        sh_ok(&format!(
            "jq --arg w '{}' '.workspace = $w' {meta} > {tmp} && cat {tmp} > {meta}",
            workspace.display(),
            tmp = self.host.path("meta.tmp").display()
        ));
        key
    }

    /// `sessionfs ARGS` against this mount: exit code, stdout, stderr.
    pub fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.host.cli(args);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// What the agent waits for, from `status`.
    pub fn waiting_for(&self, key: &str) -> serde_json::Value {
        self.m.json(&format!("{key}/status"))["waiting_for"].clone()
    }

    /// The conversation a session writes now, from its `status`.
    pub fn conversation(&self, key: &str) -> String {
        self.m.json(&format!("{key}/status"))["conversation"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The argv of the program a session runs (its `status`'s `agent_pid`).
    pub fn agent_argv(&self, key: &str) -> String {
        let pid = self.m.json(&format!("{key}/status"))["agent_pid"]
            .as_u64()
            .unwrap_or(0);
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&argv).replace('\0', " ")
    }

    pub fn read(&self, key: &str, file: &str) -> String {
        self.m.read(&format!("{key}/{file}"))
    }

    /// `echo TEXT > KEY/prompt`: how long close() took. The `printf` is
    /// coreutils', which reports a failed close (bash's builtin would not).
    pub fn prompt(&self, key: &str, text: &str) -> Duration {
        let t0 = Instant::now();
        let out = sh(&format!(
            "env printf '%s\\n' '{}' > {}",
            text.replace('\'', r"'\''"),
            self.m.q(&format!("{key}/prompt"))
        ));
        assert!(
            out.status.success(),
            "prompt to {key} failed: {}\nstatus: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.read(key, "status"),
            self.diagnose(key)
        );
        t0.elapsed()
    }

    /// `cat KEY/wait`, bounded: its line.
    pub fn wait(&self, key: &str, secs: u64) -> String {
        let out = sh(&format!(
            "timeout {secs} cat {}",
            self.m.q(&format!("{key}/wait"))
        ));
        assert!(
            out.status.success(),
            "cat {key}/wait failed ({}); state {}\n{}",
            out.status,
            self.read(key, "state"),
            self.diagnose(key)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The daemon stops and a new one mounts the same state; the agents'
    /// masters go on.
    pub fn restart(&mut self) {
        self.m.terminate();
        self.m = self.host.mount("mnt2");
    }

    /// The daemon is killed (SIGKILL) and a new one mounts at `name`.
    pub fn crash_restart(&mut self, name: &str) {
        self.m.kill9();
        self.m = self.host.mount(name);
    }

    /// The live, idle session `key` outlives two daemons: one stopped
    /// (the next reads it `idle`), then one killed (SIGKILL) while a slow
    /// turn runs, whose end the next reads from what the agent's hooks wrote
    /// meanwhile: `idle`, with `answer` in `transcript/last`.
    pub fn outlives_a_restart_and_a_crash_in_a_turn(&mut self, key: &str, answer: &str) {
        self.restart();
        assert_eq!(self.read(key, "state"), "idle\n");
        self.api.push(
            super::model_api::Answer::Text(answer.into()),
            Duration::from_secs(3),
        );
        self.prompt(key, "still there");
        self.wait_on(key, 30, "busy before the crash", || {
            self.read(key, "state") == "busy\n"
        });
        self.crash_restart("mnt3");
        assert_eq!(self.wait(key, 90), "idle\n", "{}", self.diagnose(key));
        self.wait_on(key, 20, "the answer after the crash", || {
            self.read(key, "transcript/last").contains(answer)
        });
    }

    pub fn events(&self, key: &str) -> Vec<serde_json::Value> {
        self.read(key, "events")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The states of the session's events, oldest first.
    pub fn states(&self, key: &str) -> Vec<String> {
        self.events(key)
            .iter()
            .map(|e| e["state"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The session's last `n` states, oldest first.
    pub fn last_states(&self, key: &str, n: usize) -> Vec<String> {
        let states = self.states(key);
        states[states.len().saturating_sub(n)..].to_vec()
    }

    /// What a failed wait on `key` prints: its hook lines, events, screen,
    /// the daemon's log lines about it and the requests the stand-in got.
    pub fn diagnose(&self, key: &str) -> String {
        let hooks = self
            .host
            .path("state")
            .join("sessionfs/agents")
            .join(key)
            .join("hooks.jsonl");
        let log: Vec<String> = self
            .m
            .log_text()
            .lines()
            .filter(|l| l.contains(key))
            .map(str::to_string)
            .collect();
        format!(
            "hooks:\n{}\nevents:\n{}\nscreen:\n{}\nlog:\n{}\nrequests:\n{}",
            std::fs::read_to_string(&hooks).unwrap_or_default(),
            std::fs::read_to_string(self.m.path(&format!("{key}/events"))).unwrap_or_default(),
            std::fs::read_to_string(self.m.path(&format!("{key}/screen"))).unwrap_or_default(),
            log[log.len().saturating_sub(60)..].join("\n"),
            self.api.log()
        )
    }

    /// Waits for `probe` up to `secs`; panics with what `key` shows.
    pub fn wait_on(&self, key: &str, secs: u64, what: &str, probe: impl FnMut() -> bool) {
        if !super::wait_until(secs, probe) {
            panic!("timed out waiting for {what}\n{}", self.diagnose(key));
        }
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
