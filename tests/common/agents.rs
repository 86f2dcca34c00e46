//! The real agent CLIs (Claude Code, Codex CLI) in tests: where they are
//! installed, the offline configuration that points them at the model API
//! stand-in and skips their first-run screens, and cleanup of what they leave.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The API key given to Claude Code; its last 20 characters are pre-approved.
pub const CLAUDE_KEY: &str = "sk-ant-api03-offline-test-key-0123456789abcdefghij";
/// The variable Codex's fake provider reads its key from.
pub const CODEX_KEY_VAR: &str = "SESSIONFS_TEST_MODEL_KEY";

/// The programs `scripts/agents` installs, pinned.
pub const AGENT_PROGRAMS: [&str; 6] = ["claude", "codex", "gemini", "qwen", "opencode", "ccusage"];

/// The model Qwen Code asks the stand-in for.
pub const QWEN_MODEL: &str = "fake-model";

/// `target/agents/node_modules/.bin`, installed by `scripts/agents` on first
/// use. `None` (with the reason printed) only when it is missing and
/// `SESSIONFS_SKIP_AGENTS=1` says to skip, so the caller skips; missing and
/// not installable otherwise, the test fails.
pub fn agents_bin(test: &str) -> Option<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = BIN.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let bin = root.join("target/agents/node_modules/.bin");
        let all = |bin: &Path| AGENT_PROGRAMS.iter().all(|p| bin.join(p).exists());
        if all(&bin) {
            return Ok(bin);
        }
        if std::env::var("SESSIONFS_SKIP_AGENTS").as_deref() == Ok("1") {
            return Err("target/agents is missing and SESSIONFS_SKIP_AGENTS=1".into());
        }
        let out = Command::new(root.join("scripts/agents"))
            .output()
            .map_err(|e| format!("cannot run scripts/agents: {e}"))?;
        if out.status.success() && all(&bin) {
            Ok(bin)
        } else {
            Err(format!(
                "target/agents is missing and scripts/agents could not install it: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    });
    match found {
        Ok(bin) => Some(bin.clone()),
        // The one way to skip them: a run that asks to.
        Err(why) => {
            let what = format!("the real agent CLIs ({why})");
            super::require(test, &what, false, Some("SESSIONFS_SKIP_AGENTS"));
            None
        }
    }
}

/// One offline agent environment in a directory: config dirs for both
/// CLIs, a home, and a project directory to run them in.
pub struct AgentEnv {
    pub bin: PathBuf,
    pub claude_dir: PathBuf,
    pub codex_home: PathBuf,
    /// Qwen Code's global directory (`QWEN_HOME`): settings, conversations.
    pub qwen_home: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
    pub api_url: String,
}

impl AgentEnv {
    /// Writes the configuration under `dir` for a stand-in at `api_url`
    /// (`http://127.0.0.1:PORT`).
    pub fn new(bin: PathBuf, dir: &Path, api_url: &str) -> AgentEnv {
        let env = AgentEnv {
            bin,
            claude_dir: dir.join("claude"),
            codex_home: dir.join("codex"),
            qwen_home: dir.join("qwen"),
            home: dir.join("home"),
            project: dir.join("project"),
            api_url: api_url.to_string(),
        };
        for d in [
            &env.claude_dir,
            &env.codex_home,
            &env.qwen_home,
            &env.home,
            &env.project,
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        env.write_claude_config();
        env.write_codex_config();
        env.write_qwen_config();
        env.write_gemini_config();
        env.write_opencode_config();
        env
    }

    /// opencode 1.18.33's user config (`~/.config/opencode/opencode.json`):
    /// a provider `fake` whose OpenAI-compatible API is the stand-in's, its
    /// model the default; no updates, no sharing.
    fn write_opencode_config(&self) {
        let dir = self.home.join(".config/opencode");
        std::fs::create_dir_all(&dir).unwrap();
        let config = serde_json::json!({
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": false,
            "share": "disabled",
            "model": "fake/fake-model",
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": format!("{}/v1", self.api_url), "apiKey": "offline-test-key"},
                "models": {"fake-model": {"name": "fake"}}
            }}
        });
        std::fs::write(dir.join("opencode.json"), config.to_string()).unwrap();
    }

    /// opencode's data directory (its SQLite store `opencode.db`).
    pub fn opencode_data(&self) -> PathBuf {
        self.home.join(".local/share/opencode")
    }

    /// Gemini CLI 0.61.0's user settings: the API key auth chosen, and no
    /// usage statistics or telemetry (without the privacy switch it waits
    /// on a Google host after answering).
    fn write_gemini_config(&self) {
        let dir = self.home.join(".gemini");
        std::fs::create_dir_all(&dir).unwrap();
        let settings = serde_json::json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false}
        });
        std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
    }

    /// Gemini's store: `~/.gemini/tmp/<project>/chats/session-*.jsonl`.
    pub fn gemini_stores(&self) -> Vec<PathBuf> {
        files_under(&self.home.join(".gemini/tmp"), ".jsonl")
    }

    /// Qwen Code 0.24.4 with what would cover its prompt box or call out
    /// switched off (its settings reference): follow-up suggestions (drawn
    /// in the prompt box), the feedback and welcome-back dialogs, the
    /// auto-mode notice, update checks, usage statistics, and the
    /// background memory agents (each a model request of its own).
    fn write_qwen_config(&self) {
        let settings = serde_json::json!({
            "ui": {
                "autoModeAcknowledged": true,
                "enableFollowupSuggestions": false,
                "enableUserFeedback": false,
                "enableWelcomeBack": false,
                "hideTips": true
            },
            "general": {"enableAutoUpdate": false},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "memory": {
                "enableManagedAutoMemory": false,
                "enableManagedAutoDream": false,
                "enableAutoSkill": false
            }
        });
        std::fs::write(self.qwen_home.join("settings.json"), settings.to_string()).unwrap();
    }

    /// Claude's own state as its first-run steps leave it: the onboarding
    /// done, the API key approved, the project trusted.
    fn stock_claude_state(&self) -> serde_json::Value {
        let key_tail = &CLAUDE_KEY[CLAUDE_KEY.len() - 20..];
        let project = self.project.to_str().unwrap();
        serde_json::json!({
            "hasCompletedOnboarding": true,
            "customApiKeyResponses": {"approved": [key_tail], "rejected": []},
            "projects": {project: {"hasTrustDialogAccepted": true}},
        })
    }

    fn write_claude_config(&self) {
        let mut state = self.stock_claude_state();
        // First-run offers that would otherwise cover the prompt box.
        state["hasSeenAutoDefaultNudge"] = true.into();
        state["hasSeenEffortMediumNudge"] = true.into();
        std::fs::write(self.claude_dir.join(".claude.json"), state.to_string()).unwrap();
        // The classic permission dialog, not "auto mode" (whose risk check
        // itself asks the model).
        let settings = serde_json::json!({"permissions": {"defaultMode": "default"}});
        std::fs::write(self.claude_dir.join("settings.json"), settings.to_string()).unwrap();
    }

    /// Claude as its own first-run steps leave it and nothing more: the
    /// onboarding done, the API key approved, the project trusted; no
    /// settings file (so 2.1.328 runs in auto mode) and no offer seen.
    pub fn stock_claude_config(&self) {
        let state = self.stock_claude_state();
        std::fs::write(self.claude_dir.join(".claude.json"), state.to_string()).unwrap();
        let _ = std::fs::remove_file(self.claude_dir.join("settings.json"));
    }

    /// The classic permission mode asked for in the user's settings, and
    /// the auto-mode offer not seen yet: Claude opens on that offer.
    pub fn claude_config_with_the_offer(&self) {
        self.stock_claude_config();
        let settings = serde_json::json!({"permissions": {"defaultMode": "default"}});
        std::fs::write(self.claude_dir.join("settings.json"), settings.to_string()).unwrap();
    }

    /// Claude's own state file, as JSON.
    pub fn claude_state(&self) -> serde_json::Value {
        let text = std::fs::read(self.claude_dir.join(".claude.json")).unwrap();
        serde_json::from_slice(&text).unwrap()
    }

    /// Codex in a read-only sandbox that asks before anything leaves it
    /// (`on-request`): a command that asks for more shows its approval.
    pub fn codex_read_only(&self) {
        let path = self.codex_home.join("config.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.replace(
            "sandbox_mode = \"danger-full-access\"",
            "sandbox_mode = \"read-only\"",
        );
        std::fs::write(&path, text).unwrap();
    }

    fn write_codex_config(&self) {
        let config = format!(
            r#"model = "gpt-5"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "fake"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "{CODEX_KEY_VAR}"
request_max_retries = 0
stream_max_retries = 0

[projects."{project}"]
trust_level = "trusted"
"#,
            url = self.api_url,
            project = self.project.display(),
        );
        std::fs::write(self.codex_home.join("config.toml"), config).unwrap();
    }

    /// The environment both CLIs run with: offline, private config dirs.
    pub fn vars(&self) -> Vec<(String, String)> {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        [
            ("PATH", path.as_str()),
            ("HOME", self.home.to_str().unwrap()),
            ("CLAUDE_CONFIG_DIR", self.claude_dir.to_str().unwrap()),
            ("CODEX_HOME", self.codex_home.to_str().unwrap()),
            ("QWEN_HOME", self.qwen_home.to_str().unwrap()),
            ("OPENAI_BASE_URL", &format!("{}/v1", self.api_url)),
            ("OPENAI_API_KEY", "offline-test-key"),
            ("OPENAI_MODEL", QWEN_MODEL),
            ("GEMINI_API_KEY", "offline-test-key"),
            ("GOOGLE_GEMINI_BASE_URL", &self.api_url),
            ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
            ("ANTHROPIC_BASE_URL", &self.api_url),
            ("ANTHROPIC_API_KEY", CLAUDE_KEY),
            (CODEX_KEY_VAR, "offline-test-key"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
            // opencode: its config and store under this home, whatever
            // the runner's own XDG directories are; no update checks and
            // no model catalog fetched.
            (
                "XDG_CONFIG_HOME",
                &format!("{}/.config", self.home.display()),
            ),
            (
                "XDG_DATA_HOME",
                &format!("{}/.local/share", self.home.display()),
            ),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
            ("TERM", "xterm-256color"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// A command for one of the CLIs, in the project directory, with the
    /// offline environment.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.current_dir(&self.project).envs(self.vars());
        super::without_ci_markers(&mut cmd);
        cmd
    }

    /// Conversation stores written so far (`*.jsonl` under each CLI's store).
    pub fn claude_stores(&self) -> Vec<PathBuf> {
        files_under(&self.claude_dir.join("projects"), ".jsonl")
    }

    pub fn codex_stores(&self) -> Vec<PathBuf> {
        files_under(&self.codex_home.join("sessions"), ".jsonl")
    }

    /// Ends every process started from this environment's config dirs that
    /// outlived its CLI (Codex's `app-server`, which runs in its own session).
    pub fn end_leftovers(&self) {
        let marks = [
            self.codex_home.to_string_lossy().into_owned(),
            self.claude_dir.to_string_lossy().into_owned(),
            self.qwen_home.to_string_lossy().into_owned(),
        ];
        for pid in processes_with_env(&marks) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for AgentEnv {
    fn drop(&mut self) {
        self.end_leftovers();
    }
}

fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Processes (other than this one) whose environment names one of `marks`
/// as CODEX_HOME or CLAUDE_CONFIG_DIR: everything a test's CLIs started.
pub fn processes_with_env(marks: &[String]) -> Vec<u32> {
    let me = std::process::id();
    let mut pids = vec![];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let hit = environ.split(|b| *b == 0).any(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let Some((k, v)) = kv.split_once('=') else {
                return false;
            };
            ["CODEX_HOME", "CLAUDE_CONFIG_DIR", "QWEN_HOME"].contains(&k)
                && marks.iter().any(|m| m == v)
        });
        if hit {
            pids.push(pid);
        }
    }
    pids
}
