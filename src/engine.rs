//! Engines described as data: how to start a new conversation, how to resume
//! one, and where the engine keeps its own store (SPEC §2).

use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where an engine keeps its own conversations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    /// No transcript (plain commands).
    None,
    /// Claude Code: `ROOT/projects/*/<uuid>.jsonl`.
    Claude(PathBuf),
    /// Codex CLI: `ROOT/sessions/YYYY/MM/DD/rollout-*-<uuid>.jsonl[.zst]`.
    Codex(PathBuf),
    /// Gemini CLI: `ROOT/tmp/<project>/chats/session-<time>-<id8>.jsonl`
    /// (ROOT is `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`).
    Gemini(PathBuf),
    /// opencode: its data directory, holding the SQLite store
    /// `opencode.db` (`$XDG_DATA_HOME/opencode`, else
    /// `~/.local/share/opencode`); read into a mirror of files (SPEC §2).
    Opencode(PathBuf),
    /// Runs the host records itself; never launched.
    Hosted,
}

/// How a prompt is written into a configured agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paste {
    /// Bracketed when the program turned bracketed paste on, else plain.
    Auto,
    /// Always inside `ESC [200~ ... ESC [201~`.
    Bracketed,
    /// The text as it is, in one write.
    Plain,
}

/// A configured agent's screen: patterns over the VT mirror's text for
/// each verdict, how long one must hold, how a prompt is typed and the
/// keys that answer its questions.
#[derive(Debug)]
pub struct ScreenRules {
    pub busy: Vec<regex::Regex>,
    pub waiting: Vec<regex::Regex>,
    pub idle: Vec<regex::Regex>,
    /// Drawn while a resumed or forked conversation is not on the screen
    /// yet (a start screen that already takes input): no `idle` then, so
    /// a prompt never goes into a new conversation instead.
    pub loading: Vec<regex::Regex>,
    /// How long a verdict must hold before it moves the state.
    pub debounce_ms: u64,
    pub paste: Paste,
    /// The pause between the prompt's text and its Enter.
    pub enter_delay_ms: u64,
    /// The keys of `approve` and `deny`; `None`: the one-time yes among
    /// the options drawn (else Enter), and Esc.
    pub approve: Option<Vec<u8>>,
    pub deny: Option<Vec<u8>>,
}

/// One engine: a program plus argument templates where `{id}` is the session id.
#[derive(Debug, Clone)]
pub struct Engine {
    pub name: String,
    pub program: String,
    pub new_args: Vec<String>,
    pub resume_args: Vec<String>,
    pub store: Store,
    /// Added after the start or resume arguments when a model was asked
    /// for at `new`: `{model}` is its name. Empty: no model can be chosen.
    pub model_args: Vec<String>,
    /// The permission modes `new ... mode=NAME` takes, each with the
    /// arguments that ask for it.
    pub modes: BTreeMap<String, Vec<String>>,
    /// The mode whose arguments are given when `new` asked for none.
    pub default_mode: Option<String>,
    /// Starts conversation `{id}` as a copy of conversation `{from}`
    /// (`ctl` `fork`); empty: the engine cannot fork.
    pub fork_args: Vec<String>,
    /// A terminal agent described in the config file: how its screen reads
    /// and how a prompt is typed into it. `None` for the built-ins and for
    /// plain commands (judged by the terminal's foreground group).
    pub screen: Option<Arc<ScreenRules>>,
}

/// What a session asked for at `new`, passed at every launch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchOptions<'a> {
    pub model: Option<&'a str>,
    pub mode: Option<&'a str>,
    /// The conversation a new session forks (its first launch only).
    pub fork_from: Option<&'a str>,
    /// That conversation's store file (`{from_file}`), where the catalog
    /// has it.
    pub fork_file: Option<&'a str>,
}

impl Engine {
    pub fn launchable(&self) -> bool {
        self.store != Store::Hosted
    }

    /// Whether `id` may name a new session of this engine (made by `mkdir`;
    /// conversations found in a store come with the engine's own ids).
    /// Claude starts one with `--session-id ID` and refuses any ID that is
    /// not a UUID in its 8-4-4-4-12 form.
    pub fn check_new_id(&self, id: &str) -> Result<()> {
        let uuid = id.len() == 36 && uuid::Uuid::try_parse(id).is_ok();
        let agent = match self.store {
            Store::Claude(_) => "Claude",
            // `--session-id` takes a UUID too (0.61 refuses anything else).
            Store::Gemini(_) => "Gemini",
            _ => return Ok(()),
        };
        if !uuid {
            return Err(Error::invalid(format!(
                "{}:{id}: {agent}'s session ids are UUIDs (8-4-4-4-12 hex digits, as \
                 `uuidgen` prints); `echo new {} > ctl` in the root makes one",
                self.name, self.name
            )));
        }
        Ok(())
    }

    /// The argv that starts (or, with `resume`, resumes) conversation `id`.
    pub fn argv(&self, id: &str, resume: bool) -> Vec<String> {
        self.argv_with(id, resume, &LaunchOptions::default())
    }

    /// As [`Engine::argv`], with what the session asked for at `new`: a
    /// fork's first launch forks (`fork_from`), and the model and mode
    /// arguments follow. Options are checked at `new` ([`Engine::check_options`]).
    pub fn argv_with(&self, id: &str, resume: bool, options: &LaunchOptions) -> Vec<String> {
        let (args, from) = match options.fork_from {
            Some(from) if !resume && !self.fork_args.is_empty() => (&self.fork_args, from),
            _ if resume => (&self.resume_args, ""),
            _ => (&self.new_args, ""),
        };
        let mut argv: Vec<String> = std::iter::once(self.program.clone())
            .chain(args.iter().map(|a| {
                a.replace("{id}", id)
                    .replace("{from_file}", options.fork_file.unwrap_or(""))
                    .replace("{from}", from)
            }))
            .collect();
        if let Some(model) = options.model {
            argv.extend(self.model_args.iter().map(|a| a.replace("{model}", model)));
        }
        let mode = options.mode.or(self.default_mode.as_deref());
        if let Some(args) = mode.and_then(|m| self.modes.get(m)) {
            argv.extend(args.iter().cloned());
        }
        argv
    }

    /// EINVAL, before anything starts, for a model name with other
    /// characters than `[A-Za-z0-9._:/-]` (or an engine that takes none),
    /// or a mode the agent does not have.
    pub fn check_options(&self, model: Option<&str>, mode: Option<&str>) -> Result<()> {
        if let Some(model) = model {
            let allowed = |c: char| c.is_ascii_alphanumeric() || "._:/-".contains(c);
            if model.is_empty()
                || model.len() > 200
                || model.starts_with('-')
                || !model.chars().all(allowed)
            {
                return Err(Error::invalid(format!(
                    "model={}: a model name is letters, digits and . _ : / - (not first), at most 200",
                    crate::input_checks::preview(model)
                )));
            }
            if self.model_args.is_empty() {
                return Err(Error::invalid(format!(
                    "engine {} takes no model= (its config gives no \"model\" arguments)",
                    self.name
                )));
            }
        }
        if let Some(mode) = mode {
            if !self.modes.contains_key(mode) {
                let known: Vec<&str> = self.modes.keys().map(String::as_str).collect();
                return Err(Error::invalid(format!(
                    "mode={}: {} has {}",
                    crate::input_checks::preview(mode),
                    self.name,
                    if known.is_empty() {
                        "no modes".to_string()
                    } else {
                        format!("the modes {}", known.join(", "))
                    }
                )));
            }
        }
        Ok(())
    }
}

/// An engine as the config file describes it; missing parts keep the built-in's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EngineEntry {
    program: Option<String>,
    new: Option<Vec<String>>,
    resume: Option<Vec<String>>,
    model: Option<Vec<String>>,
    modes: Option<BTreeMap<String, Vec<String>>>,
    fork: Option<Vec<String>>,
    /// How a prompt is typed (a configured terminal agent).
    prompt: Option<PromptEntry>,
    /// The patterns that tell its state from its screen.
    screen: Option<ScreenEntry>,
    /// The keys that answer its questions.
    answers: Option<AnswersEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptEntry {
    /// `auto` (bracketed when the program asked for it), `bracketed`, `plain`.
    paste: Option<String>,
    enter_delay_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScreenEntry {
    #[serde(default)]
    busy: Vec<String>,
    #[serde(default)]
    waiting: Vec<String>,
    #[serde(default)]
    idle: Vec<String>,
    #[serde(default)]
    loading: Vec<String>,
    debounce_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswersEntry {
    approve: Option<String>,
    deny: Option<String>,
}

/// Limits on a configured agent's rules: patterns are compiled once and
/// run over every changed screen.
const PATTERNS_MAX: usize = 32;
const PATTERN_LEN_MAX: usize = 1000;
/// The compiled size one pattern may take (the regex crate's own cap).
const PATTERN_SIZE_MAX: usize = 1 << 20;
const DEBOUNCE_MAX_MS: u64 = 60_000;
const ENTER_DELAY_MAX_MS: u64 = 10_000;
const ANSWER_KEY_MAX: usize = 64;
/// A verdict holds this long by default before it moves the state.
const DEBOUNCE_DEFAULT_MS: u64 = 800;
/// The default pause between a prompt's text and its Enter: TUIs take text
/// and Enter in one burst as a paste.
const ENTER_DELAY_DEFAULT_MS: u64 = 300;

/// The placeholders argument templates may use.
const PLACEHOLDERS: [&str; 4] = ["{id}", "{from}", "{from_file}", "{model}"];

/// EINVAL naming the entry when a template has a `{word}` that is not one
/// of [`PLACEHOLDERS`] (a misspelt `{id}` would start the agent with it).
fn check_template(entry: &str, part: &str, args: &[String]) -> Result<()> {
    for arg in args {
        let mut rest = arg.as_str();
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            let word = &rest[open..open + close + 1];
            if !PLACEHOLDERS.contains(&word) {
                return Err(Error::invalid(format!(
                    "engine {entry:?}: \"{part}\" argument {arg:?} has {word}, which is not one of {}",
                    PLACEHOLDERS.join(", ")
                )));
            }
            rest = &rest[open + close + 1..];
        }
    }
    Ok(())
}

fn compile_patterns(entry: &str, verdict: &str, patterns: &[String]) -> Result<Vec<regex::Regex>> {
    if patterns.len() > PATTERNS_MAX {
        return Err(Error::invalid(format!(
            "engine {entry:?}: screen.{verdict} has {} patterns, at most {PATTERNS_MAX}",
            patterns.len()
        )));
    }
    patterns
        .iter()
        .map(|p| {
            if p.is_empty() || p.len() > PATTERN_LEN_MAX {
                return Err(Error::invalid(format!(
                    "engine {entry:?}: screen.{verdict} pattern {:?} must be 1 to {PATTERN_LEN_MAX} bytes",
                    crate::input_checks::preview(p)
                )));
            }
            // Rows are joined by newlines: `^` and `$` mean a row's ends.
            regex::RegexBuilder::new(p)
                .multi_line(true)
                .size_limit(PATTERN_SIZE_MAX)
                .build()
                .map_err(|e| {
                    Error::invalid(format!(
                        "engine {entry:?}: screen.{verdict} pattern {p:?} is not a valid regex: {e}"
                    ))
                })
        })
        .collect()
}

fn answer_key(entry: &str, which: &str, key: Option<String>) -> Result<Option<Vec<u8>>> {
    match key {
        Some(k) if k.is_empty() || k.len() > ANSWER_KEY_MAX => Err(Error::invalid(format!(
            "engine {entry:?}: answers.{which} must be 1 to {ANSWER_KEY_MAX} bytes"
        ))),
        Some(k) => Ok(Some(k.into_bytes())),
        None => Ok(None),
    }
}

/// The screen rules of a config entry; EINVAL naming the entry for a bad
/// pattern, a paste style it does not know, or a delay out of range.
fn screen_rules(
    entry: &str,
    screen: ScreenEntry,
    prompt: Option<PromptEntry>,
    answers: Option<AnswersEntry>,
) -> Result<ScreenRules> {
    let busy = compile_patterns(entry, "busy", &screen.busy)?;
    let waiting = compile_patterns(entry, "waiting", &screen.waiting)?;
    let idle = compile_patterns(entry, "idle", &screen.idle)?;
    let loading = compile_patterns(entry, "loading", &screen.loading)?;
    if idle.is_empty() {
        return Err(Error::invalid(format!(
            "engine {entry:?}: screen.idle needs a pattern (a prompt is typed only once the agent is idle)"
        )));
    }
    let debounce_ms = screen.debounce_ms.unwrap_or(DEBOUNCE_DEFAULT_MS);
    if debounce_ms > DEBOUNCE_MAX_MS {
        return Err(Error::invalid(format!(
            "engine {entry:?}: screen.debounce_ms is at most {DEBOUNCE_MAX_MS}"
        )));
    }
    let (paste, enter_delay_ms) = match prompt {
        Some(p) => (p.paste, p.enter_delay_ms),
        None => (None, None),
    };
    let paste = match paste.as_deref() {
        None | Some("auto") => Paste::Auto,
        Some("bracketed") => Paste::Bracketed,
        Some("plain") => Paste::Plain,
        Some(other) => {
            return Err(Error::invalid(format!(
                "engine {entry:?}: prompt.paste {:?} is not auto, bracketed or plain",
                crate::input_checks::preview(other)
            )))
        }
    };
    let enter_delay_ms = enter_delay_ms.unwrap_or(ENTER_DELAY_DEFAULT_MS);
    if enter_delay_ms > ENTER_DELAY_MAX_MS {
        return Err(Error::invalid(format!(
            "engine {entry:?}: prompt.enter_delay_ms is at most {ENTER_DELAY_MAX_MS}"
        )));
    }
    let (approve, deny) = match answers {
        Some(a) => (
            answer_key(entry, "approve", a.approve)?,
            answer_key(entry, "deny", a.deny)?,
        ),
        None => (None, None),
    };
    Ok(ScreenRules {
        busy,
        waiting,
        idle,
        loading,
        debounce_ms,
        paste,
        enter_delay_ms,
        approve,
        deny,
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    engines: BTreeMap<String, EngineEntry>,
    /// Where sessions' worktrees go (read by `Config`).
    #[serde(default)]
    #[allow(dead_code)]
    worktrees: Option<String>,
    /// Prices per model (read by `Config`).
    #[serde(default)]
    #[allow(dead_code)]
    prices: Option<serde_json::Value>,
}

/// All engines by name.
#[derive(Debug, Clone)]
pub struct EngineTable {
    engines: BTreeMap<String, Engine>,
}

fn builtins(env: &HashMap<String, String>, home: &Path) -> Vec<Engine> {
    let dir = |var: &str, default: &str| {
        env.get(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(default))
    };
    let shell = env
        .get("SHELL")
        .filter(|v| !v.is_empty())
        .cloned()
        .unwrap_or_else(|| "/bin/sh".into());
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // Claude Code 2.1's `--permission-mode` choices.
    let claude_modes = CLAUDE_MODES
        .iter()
        .map(|m| (m.to_string(), strings(&["--permission-mode", m])))
        .collect();
    // Codex 0.169's sandbox policies, each with the approval policy that
    // goes with it (`-a` takes `on-request` or `never`).
    let codex_modes = CODEX_MODES
        .iter()
        .map(|(mode, approval)| {
            (
                mode.to_string(),
                strings(&["--sandbox", mode, "--ask-for-approval", approval]),
            )
        })
        .collect();
    vec![
        Engine {
            name: "shell".into(),
            program: shell,
            new_args: vec![],
            resume_args: vec![],
            store: Store::None,
            model_args: vec![],
            modes: BTreeMap::new(),
            default_mode: None,
            fork_args: vec![],
            screen: None,
        },
        Engine {
            name: "claude".into(),
            program: "claude".into(),
            new_args: strings(&["--session-id", "{id}"]),
            resume_args: strings(&["--resume", "{id}"]),
            store: Store::Claude(dir("CLAUDE_CONFIG_DIR", ".claude")),
            model_args: strings(&["--model", "{model}"]),
            modes: claude_modes,
            default_mode: None,
            // A new conversation under the id given, the old one only read.
            fork_args: strings(&[
                "--session-id",
                "{id}",
                "--resume",
                "{from}",
                "--fork-session",
            ]),
            screen: None,
        },
        Engine {
            name: "codex".into(),
            program: "codex".into(),
            new_args: vec![],
            resume_args: strings(&["resume", "{id}"]),
            store: Store::Codex(dir("CODEX_HOME", ".codex")),
            model_args: strings(&["--model", "{model}"]),
            modes: codex_modes,
            default_mode: None,
            // Its new rollout is found as a new session's is.
            fork_args: strings(&["fork", "{from}"]),
            screen: None,
        },
        Engine {
            name: "gemini".into(),
            program: "gemini".into(),
            new_args: strings(&["--session-id", "{id}"]),
            resume_args: strings(&["--resume", "{id}"]),
            store: Store::Gemini(gemini_root(env, home)),
            model_args: strings(&["--model", "{model}"]),
            modes: GEMINI_MODES
                .iter()
                .map(|m| (m.to_string(), strings(&["--approval-mode", m])))
                .collect(),
            // In default approval mode a tool call asks (`waiting`), whatever
            // the user's settings say.
            default_mode: Some("default".into()),
            // A new conversation (an id Gemini picks, reported by its
            // SessionStart hook) loaded with the other's turns.
            fork_args: strings(&["--session-file", "{from_file}"]),
            screen: gemini_screen(),
        },
        Engine {
            name: "opencode".into(),
            program: "opencode".into(),
            // opencode names a new conversation itself: its plugin reports
            // the id (`session.created`), and the session goes on as it.
            new_args: vec![],
            resume_args: strings(&["-s", "{id}"]),
            store: Store::Opencode(opencode_data_dir(env, home)),
            model_args: strings(&["-m", "{model}"]),
            modes: OPENCODE_MODES
                .iter()
                .map(|(mode, args)| (mode.to_string(), strings(args)))
                .collect(),
            default_mode: None,
            // A copy under a new id, reported by its plugin's
            // `session.created` as a new conversation's is.
            fork_args: strings(&["-s", "{from}", "--fork"]),
            screen: opencode_screen(),
        },
        Engine {
            name: "hosted".into(),
            program: String::new(),
            new_args: vec![],
            resume_args: vec![],
            store: Store::Hosted,
            model_args: vec![],
            modes: BTreeMap::new(),
            default_mode: None,
            fork_args: vec![],
            screen: None,
        },
    ]
}

/// Where Gemini CLI keeps `.gemini`: `GEMINI_CLI_HOME` replaces the home
/// directory it is looked for in (0.61 has no variable for `.gemini` alone).
fn gemini_root(env: &HashMap<String, String>, home: &Path) -> PathBuf {
    env.get("GEMINI_CLI_HOME")
        .filter(|v| !v.is_empty())
        .map_or_else(|| home.to_path_buf(), PathBuf::from)
        .join(".gemini")
}

/// opencode's data directory: `$XDG_DATA_HOME/opencode` (an absolute
/// path), else `~/.local/share/opencode`.
fn opencode_data_dir(env: &HashMap<String, String>, home: &Path) -> PathBuf {
    match env.get("XDG_DATA_HOME").filter(|v| v.starts_with('/')) {
        Some(dir) => Path::new(dir).join("opencode"),
        None => home.join(".local/share/opencode"),
    }
}

/// opencode 1.18's screen (verified in `tests/agents_opencode.rs`): "esc
/// interrupt" (then "esc again to interrupt") in the footer while a turn
/// runs, "△ Permission required" over "Allow once / Allow always /
/// Reject" for a permission, "ctrl+p commands" in the footer otherwise.
/// Enter takes the selected "Allow once"; Esc rejects. Started with `-s`,
/// it draws its start screen ("Ask anything…", which takes input and makes
/// a new conversation of it) before the conversation, for seconds on a
/// loaded machine.
fn opencode_screen() -> Option<Arc<ScreenRules>> {
    builtin_screen(
        "opencode",
        &["esc (again to )?interrupt"],
        &["Permission required"],
        &["ctrl\\+p commands"],
        &["Ask anything"],
        800,
        20,
    )
}

/// Gemini CLI 0.61's screen at 120 columns (verified in
/// `tests/agents_gemini.rs`): "Thinking... (esc to cancel, 2s)" while a turn
/// runs, the placeholder "Type your message or @path/to/file" when idle,
/// "Allow execution of [Shell]?" for a permission, "Do you trust the files
/// in this folder?" at its first run in a folder (Enter trusts it, Esc
/// makes it exit), then, where it never signed in, "How would you like to
/// authenticate for this project?" and "Enter Gemini API Key" (Enter takes
/// what it offers: the key in `GEMINI_API_KEY`).
pub(crate) fn gemini_screen() -> Option<Arc<ScreenRules>> {
    builtin_screen(
        "gemini",
        &["esc to cancel"],
        &[
            "Allow execution of",
            "Apply this change\\?",
            "Do you want to proceed\\?",
            // Its first run in a folder not trusted yet, and on a machine
            // where it never signed in.
            "Do you trust the files in this folder\\?",
            "How would you like to authenticate for this project\\?",
            "Enter Gemini API Key",
        ],
        &["Type your message or @path/to/file"],
        &[],
        1000,
        // An Enter within 40 ms of a paste is taken as a new line in it.
        50,
    )
}

/// A built-in agent's screen rules: its patterns, a bracketed paste whose
/// text is watched for on the screen, then Enter `enter_delay_ms` after it
/// shows, Enter to approve (the first option is selected) and Esc to deny.
fn builtin_screen(
    name: &str,
    busy: &[&str],
    waiting: &[&str],
    idle: &[&str],
    loading: &[&str],
    debounce_ms: u64,
    enter_delay_ms: u64,
) -> Option<Arc<ScreenRules>> {
    let list = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let screen = ScreenEntry {
        busy: list(busy),
        waiting: list(waiting),
        idle: list(idle),
        loading: list(loading),
        debounce_ms: Some(debounce_ms),
    };
    let prompt = PromptEntry {
        paste: Some("bracketed".into()),
        enter_delay_ms: Some(enter_delay_ms),
    };
    let answers = AnswersEntry {
        approve: Some("\r".into()),
        deny: Some("\u{1b}".into()),
    };
    screen_rules(name, screen, Some(prompt), Some(answers))
        .inspect_err(|e| log::error!("{name}'s built-in screen rules: {}", e.message))
        .ok()
        .map(Arc::new)
}

/// Claude Code's permission modes (`claude --help`, 2.1.328).
pub const CLAUDE_MODES: [&str; 6] = [
    "acceptEdits",
    "auto",
    "bypassPermissions",
    "dontAsk",
    "manual",
    "plan",
];

/// Gemini CLI 0.61's `--approval-mode` choices.
pub const GEMINI_MODES: [&str; 4] = ["auto_edit", "default", "plan", "yolo"];

/// opencode 1.18's primary agents (`--agent`), and `auto`: the build agent
/// approving every permission that is not denied outright (`--auto`).
pub const OPENCODE_MODES: [(&str, &[&str]); 3] = [
    ("auto", &["--agent", "build", "--auto"]),
    ("build", &["--agent", "build"]),
    ("plan", &["--agent", "plan"]),
];

/// Codex's sandbox policies (`codex --help`, 0.169) and the approval
/// policy each is paired with.
pub const CODEX_MODES: [(&str, &str); 3] = [
    ("read-only", "on-request"),
    ("workspace-write", "on-request"),
    ("danger-full-access", "never"),
];

/// `SESSIONFS_ENGINE_<NAME>` names the program of engine `name` (tests use stand-ins).
pub fn program_override_var(name: &str) -> String {
    format!(
        "SESSIONFS_ENGINE_{}",
        name.to_ascii_uppercase().replace(['-', '.'], "_")
    )
}

impl EngineTable {
    /// Built-ins, then the config file's engines, then per-engine program overrides
    /// from the environment.
    pub fn load(
        env: &HashMap<String, String>,
        home: &Path,
        config_file: Option<&Path>,
    ) -> Result<Self> {
        let mut engines: BTreeMap<String, Engine> = builtins(env, home)
            .into_iter()
            .map(|e| (e.name.clone(), e))
            .collect();
        if let Some(path) = config_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::io(&format!("cannot read config {}", path.display()), &e))?;
            let file: ConfigFile = serde_json::from_str(&text).map_err(|e| {
                Error::invalid(format!("config {} is not valid: {e}", path.display()))
                    .with_source(e)
            })?;
            for (name, entry) in file.engines {
                crate::key::SessionKey::new(&name, "x").map_err(|_| {
                    Error::invalid(format!(
                        "config {}: bad engine name {name:?}",
                        path.display()
                    ))
                })?;
                let engine = engines.entry(name.clone()).or_insert_with(|| Engine {
                    name: name.clone(),
                    program: String::new(),
                    new_args: vec![],
                    resume_args: vec![],
                    store: Store::None,
                    model_args: vec![],
                    modes: BTreeMap::new(),
                    default_mode: None,
                    fork_args: vec![],
                    screen: None,
                });
                if engine.store == Store::Hosted {
                    return Err(Error::invalid(format!(
                        "config {}: engine {name:?} is not launchable and cannot be changed",
                        path.display()
                    )));
                }
                if let Some(program) = entry.program {
                    engine.program = program;
                }
                if let Some(new) = entry.new {
                    engine.new_args = new;
                }
                if let Some(resume) = entry.resume {
                    engine.resume_args = resume;
                }
                if let Some(model) = entry.model {
                    engine.model_args = model;
                }
                if let Some(modes) = entry.modes {
                    engine.modes = modes;
                }
                if let Some(fork) = entry.fork {
                    engine.fork_args = fork;
                }
                let named =
                    |e: Error| Error::invalid(format!("config {}: {}", path.display(), e.message));
                for (part, args) in [
                    ("new", &engine.new_args),
                    ("resume", &engine.resume_args),
                    ("model", &engine.model_args),
                    ("fork", &engine.fork_args),
                ] {
                    check_template(&name, part, args).map_err(named)?;
                }
                match entry.screen {
                    Some(screen) => {
                        if engine.store != Store::None {
                            return Err(Error::invalid(format!(
                                "config {}: engine {name:?} has its own signals; \"screen\" is for other terminal agents",
                                path.display()
                            )));
                        }
                        let rules = screen_rules(&name, screen, entry.prompt, entry.answers)
                            .map_err(named)?;
                        engine.screen = Some(Arc::new(rules));
                    }
                    None if entry.prompt.is_some() || entry.answers.is_some() => {
                        return Err(Error::invalid(format!(
                            "config {}: engine {name:?}: \"prompt\" and \"answers\" go with \"screen\" rules",
                            path.display()
                        )));
                    }
                    None => {}
                }
                if engine.program.is_empty() {
                    return Err(Error::invalid(format!(
                        "config {}: engine {name:?} needs a \"program\"",
                        path.display()
                    )));
                }
            }
        }
        for engine in engines.values_mut() {
            if let Some(program) = env.get(&program_override_var(&engine.name)) {
                if !program.is_empty() && engine.launchable() {
                    engine.program = program.clone();
                }
            }
        }
        Ok(EngineTable { engines })
    }

    pub fn get(&self, name: &str) -> Option<&Engine> {
        self.engines.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.engines.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Engine> {
        self.engines.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(env: &[(&str, &str)], file: Option<&str>) -> Result<EngineTable> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        if let Some(text) = file {
            std::fs::write(&path, text).unwrap();
        }
        EngineTable::load(&env, Path::new("/home/u"), file.map(|_| path.as_path()))
    }

    #[test]
    fn builtins_start_and_resume() {
        let t = table(&[("SHELL", "/bin/bash")], None).unwrap();
        assert_eq!(t.get("shell").unwrap().argv("x", false), vec!["/bin/bash"]);
        let claude = t.get("claude").unwrap();
        assert_eq!(
            claude.argv("u1", false),
            vec!["claude", "--session-id", "u1"]
        );
        assert_eq!(claude.argv("u1", true), vec!["claude", "--resume", "u1"]);
        assert_eq!(claude.store, Store::Claude("/home/u/.claude".into()));
        assert_eq!(
            t.get("codex").unwrap().argv("t", true),
            vec!["codex", "resume", "t"]
        );
        assert!(!t.get("hosted").unwrap().launchable());
    }

    #[test]
    fn gemini_is_built_in_with_its_store_and_screen() {
        let t = table(&[], None).unwrap();
        let gemini = t.get("gemini").unwrap();
        assert_eq!(
            gemini.argv("u1", false),
            vec!["gemini", "--session-id", "u1", "--approval-mode", "default"]
        );
        assert_eq!(gemini.argv("u1", true)[..3], ["gemini", "--resume", "u1"]);
        assert_eq!(gemini.store, Store::Gemini("/home/u/.gemini".into()));
        assert!(gemini.screen.is_some());
        assert!(gemini.check_new_id("not-a-uuid").is_err());
        let t = table(&[("GEMINI_CLI_HOME", "/g")], None).unwrap();
        assert_eq!(
            t.get("gemini").unwrap().store,
            Store::Gemini("/g/.gemini".into())
        );
    }

    #[test]
    fn opencode_is_built_in_with_its_store_and_screen() {
        let t = table(&[], None).unwrap();
        let opencode = t.get("opencode").unwrap();
        assert_eq!(opencode.argv("x", false), vec!["opencode"]);
        assert_eq!(
            opencode.argv("ses_1", true),
            vec!["opencode", "-s", "ses_1"]
        );
        assert_eq!(
            opencode.store,
            Store::Opencode("/home/u/.local/share/opencode".into())
        );
        assert!(opencode.screen.is_some());
        let t = table(&[("XDG_DATA_HOME", "/d")], None).unwrap();
        assert_eq!(
            t.get("opencode").unwrap().store,
            Store::Opencode("/d/opencode".into())
        );
    }

    #[test]
    fn a_new_claude_session_is_named_by_a_uuid() {
        let t = table(&[], None).unwrap();
        let claude = t.get("claude").unwrap();
        assert!(claude
            .check_new_id("aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee")
            .is_ok());
        for bad in [
            "new1",
            "aaaaaaaabbbb4ccc8dddeeeeeeeeeeee",
            "{aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee}",
        ] {
            let err = claude.check_new_id(bad).unwrap_err();
            assert_eq!(err.errno, libc::EINVAL);
            assert!(err.message.contains("UUID"), "{}", err.message);
        }
        assert!(t.get("codex").unwrap().check_new_id("new1").is_ok());
        assert!(t.get("shell").unwrap().check_new_id("new1").is_ok());
    }

    #[test]
    fn model_mode_and_fork_go_through_the_templates() {
        let t = table(&[], None).unwrap();
        let claude = t.get("claude").unwrap();
        let asked = LaunchOptions {
            model: Some("claude-opus-4-1"),
            mode: Some("plan"),
            fork_from: Some("old"),
            fork_file: None,
        };
        assert_eq!(
            claude.argv_with("new", false, &asked),
            [
                "claude",
                "--session-id",
                "new",
                "--resume",
                "old",
                "--fork-session",
                "--model",
                "claude-opus-4-1",
                "--permission-mode",
                "plan"
            ]
        );
        // Once its conversation exists, a fork resumes its own.
        assert_eq!(
            claude.argv_with("new", true, &asked)[..3],
            ["claude", "--resume", "new"]
        );
        let codex = t.get("codex").unwrap();
        let asked = LaunchOptions {
            model: Some("gpt-5"),
            mode: Some("read-only"),
            fork_from: Some("t0"),
            fork_file: None,
        };
        assert_eq!(
            codex.argv_with("x", false, &asked),
            [
                "codex",
                "fork",
                "t0",
                "--model",
                "gpt-5",
                "--sandbox",
                "read-only",
                "--ask-for-approval",
                "on-request"
            ]
        );
        assert!(t.get("shell").unwrap().fork_args.is_empty());
        // Gemini forks from the store file; with no mode asked its default
        // approval mode is given, so a tool call asks.
        let gemini = t.get("gemini").unwrap();
        let asked = LaunchOptions {
            fork_from: Some("g0"),
            fork_file: Some("/s/session-g0.jsonl"),
            ..Default::default()
        };
        assert_eq!(
            gemini.argv_with("x", false, &asked),
            [
                "gemini",
                "--session-file",
                "/s/session-g0.jsonl",
                "--approval-mode",
                "default"
            ]
        );
        let yolo = LaunchOptions {
            mode: Some("yolo"),
            ..Default::default()
        };
        assert_eq!(
            gemini.argv_with("x", true, &yolo),
            ["gemini", "--resume", "x", "--approval-mode", "yolo"]
        );
        let opencode = t.get("opencode").unwrap();
        let asked = LaunchOptions {
            mode: Some("plan"),
            fork_from: Some("ses_0"),
            ..Default::default()
        };
        assert_eq!(
            opencode.argv_with("x", false, &asked),
            ["opencode", "-s", "ses_0", "--fork", "--agent", "plan"]
        );
    }

    #[test]
    fn a_malformed_model_or_an_unknown_mode_is_refused() {
        let t = table(&[], None).unwrap();
        let claude = t.get("claude").unwrap();
        claude
            .check_options(Some("us.anthropic/claude-3:1_a-b"), Some("acceptEdits"))
            .unwrap();
        for bad in ["", "a b", "a;b", "-x", "é", &"m".repeat(201)] {
            let e = claude.check_options(Some(bad), None).unwrap_err();
            assert_eq!(e.errno, libc::EINVAL, "{bad}");
        }
        for mode in ["default", "read-only", "PLAN"] {
            let e = claude.check_options(None, Some(mode)).unwrap_err();
            assert_eq!(e.errno, libc::EINVAL, "{mode}");
        }
        let codex = t.get("codex").unwrap();
        codex.check_options(None, Some("workspace-write")).unwrap();
        assert!(codex.check_options(None, Some("plan")).is_err());
        let shell = t.get("shell").unwrap();
        assert!(shell.check_options(Some("x"), None).is_err());
        assert!(shell.check_options(None, Some("x")).is_err());
    }

    #[test]
    fn programs_can_be_overridden() {
        let t = table(
            &[
                ("SESSIONFS_ENGINE_CLAUDE", "/opt/fake-claude"),
                ("CLAUDE_CONFIG_DIR", "/c"),
            ],
            Some(r#"{"engines": {"make-loop": {"program": "make", "new": ["-C", "{id}"]}}}"#),
        )
        .unwrap();
        assert_eq!(t.get("claude").unwrap().program, "/opt/fake-claude");
        assert_eq!(t.get("claude").unwrap().store, Store::Claude("/c".into()));
        assert_eq!(
            t.get("make-loop").unwrap().argv("d", false),
            vec!["make", "-C", "d"]
        );
    }

    #[test]
    fn a_terminal_agent_is_described_by_its_entry() {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/engines/qwen.json"),
        )
        .unwrap();
        let t = table(&[], Some(&text)).unwrap();
        let qwen = t.get("qwen").unwrap();
        assert_eq!(qwen.store, Store::None);
        assert_eq!(
            qwen.argv("u1", true),
            ["qwen", "--resume", "u1", "--approval-mode", "default"]
        );
        let rules = qwen.screen.as_ref().unwrap();
        assert_eq!(rules.paste, Paste::Bracketed);
        assert_eq!(rules.debounce_ms, 1000);
        assert_eq!(rules.approve.as_deref(), Some(&b"\r"[..]));
        assert_eq!(rules.deny.as_deref(), Some(&b"\x1b"[..]));
        let gemini = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/engines/gemini.json"),
        )
        .unwrap();
        let t2 = table(&[], Some(&gemini)).unwrap();
        assert!(t2.get("gemini-tui").unwrap().screen.is_some());
        // Plain commands and the built-ins have none.
        assert!(t.get("shell").unwrap().screen.is_none());
        assert!(t.get("claude").unwrap().screen.is_none());
    }

    #[test]
    fn a_bad_pattern_or_template_names_its_entry() {
        for (bad, says) in [
            (
                r#"{"engines": {"agent-x": {"program": "x", "screen": {"idle": ["(unclosed"]}}}}"#,
                "screen.idle pattern",
            ),
            (
                r#"{"engines": {"agent-x": {"program": "x", "new": ["--id", "{session}"]}}}"#,
                "{session}",
            ),
            (
                r#"{"engines": {"agent-x": {"program": "x", "screen": {"busy": ["x"]}}}}"#,
                "screen.idle needs a pattern",
            ),
            (
                r#"{"engines": {"agent-x": {"program": "x", "screen": {"idle": ["x"]}, "prompt": {"paste": "typed"}}}}"#,
                "prompt.paste",
            ),
            (
                r#"{"engines": {"agent-x": {"program": "x", "screen": {"idle": ["x"]}, "answers": {"approve": ""}}}}"#,
                "answers.approve",
            ),
            (
                r#"{"engines": {"agent-x": {"program": "x", "prompt": {"paste": "plain"}}}}"#,
                "go with",
            ),
            (
                r#"{"engines": {"agent-x": {"program": "x", "screen": {"idle": ["x"], "debounce_ms": 999999}}}}"#,
                "debounce_ms",
            ),
        ] {
            let err = table(&[], Some(bad)).unwrap_err();
            assert_eq!(err.errno, libc::EINVAL, "{bad}");
            assert!(err.message.contains("agent-x"), "{}", err.message);
            assert!(err.message.contains(says), "{}", err.message);
        }
        // The built-ins have their own signals.
        let err = table(
            &[],
            Some(r#"{"engines": {"claude": {"screen": {"idle": ["x"]}}}}"#),
        )
        .unwrap_err();
        assert!(err.message.contains("own signals"), "{}", err.message);
    }

    #[test]
    fn bad_config_is_a_clear_error() {
        for bad in [
            "{",
            r#"{"engines": {"x": {"new": []}}}"#,
            r#"{"engines": {"a b": {"program": "x"}}}"#,
            r#"{"engines": {"hosted": {"program": "x"}}}"#,
            r#"{"unknown": 1}"#,
        ] {
            let err = table(&[], Some(bad)).unwrap_err();
            assert_eq!(err.errno, libc::EINVAL, "{bad}");
        }
    }
}
