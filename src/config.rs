//! Configuration from the environment (SPEC §11) and the optional JSON
//! config file, validated once at start.

use crate::engine::EngineTable;
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Floor of the scrollback ring.
pub const MIN_SCROLLBACK_BYTES: u64 = 256 * 1024;

/// The size past which the root `events` file is moved aside.
pub const DEFAULT_EVENTS_BYTES: u64 = 1 << 20;

/// What open files may hold in the daemon's memory together, unless
/// `AGENT_SESSIONS_OPEN_BYTES` says otherwise.
pub const DEFAULT_OPEN_BYTES: u64 = 512 << 20;

/// Its floor: a prompt, a slot record and a page or two at once.
pub const MIN_OPEN_BYTES: u64 = 4 << 20;

/// Everything a daemon (or `sessionfs ls`) needs to know before it starts.
#[derive(Debug, Clone)]
pub struct Config {
    pub scrollback_bytes: u64,
    pub transcript_max_lines: u64,
    pub transcript_max_messages: u64,
    pub transcript_tail_bytes: u64,
    pub history_page_turns: u64,
    /// How long a `prompt` waits for its session and its turn.
    pub prompt_timeout: Duration,
    /// What open files may hold in memory together (see `core::tree::handle_memory`).
    pub open_bytes: u64,
    /// Size at which the root `events` file is moved aside to `events.1`.
    pub events_bytes: u64,
    /// Sidecar, slots, hosted transcripts, archived copies.
    pub state_dir: PathBuf,
    /// dtach sockets and run records.
    pub runtime_dir: PathBuf,
    /// One `flock` file per session key.
    pub lock_dir: PathBuf,
    pub home: PathBuf,
    pub engines: EngineTable,
    /// Where `new ... worktree=BRANCH` checks a branch out: relative, a
    /// directory inside the repository; absolute, a directory holding one
    /// directory per repository (named as the repository's).
    pub worktrees: PathBuf,
    /// The config file's `prices` over the shipped table.
    pub prices: crate::usage::Prices,
    /// The user's own `OPENCODE_CONFIG_CONTENT`, which a session's is
    /// merged into.
    pub opencode_config_content: Option<String>,
    /// The user's own `OPENCODE_PERMISSION`, which a session's is merged into.
    pub opencode_permission: Option<String>,
}

/// Sessions' worktrees, unless the config file's `worktrees` says otherwise.
pub const DEFAULT_WORKTREES: &str = ".worktrees";

/// The config file's `worktrees`, checked.
fn worktrees_of(config_file: Option<&Path>, doc: Option<&serde_json::Value>) -> Result<PathBuf> {
    let Some((path, doc)) = config_file.zip(doc) else {
        return Ok(PathBuf::from(DEFAULT_WORKTREES));
    };
    match doc.get("worktrees") {
        None | Some(serde_json::Value::Null) => Ok(PathBuf::from(DEFAULT_WORKTREES)),
        Some(serde_json::Value::String(dir))
            if !dir.is_empty()
                && !dir.contains(['\n', '\r'])
                && !Path::new(dir)
                    .components()
                    .any(|c| c == std::path::Component::ParentDir) =>
        {
            Ok(PathBuf::from(dir))
        }
        Some(other) => Err(Error::invalid(format!(
            "config {}: \"worktrees\" is a directory (relative: inside each repository; absolute: one directory per repository in it), without `..`, not {other}",
            path.display()
        ))),
    }
}

/// The config file's `prices`, checked.
fn prices_of(
    config_file: Option<&Path>,
    doc: Option<&serde_json::Value>,
) -> Result<crate::usage::Prices> {
    let Some((path, doc)) = config_file.zip(doc) else {
        return Ok(crate::usage::Prices::default());
    };
    crate::usage::Prices::from_config(doc.get("prices"))
        .map_err(|e| Error::invalid(format!("config {}: {}", path.display(), e.message)))
}

/// The config file as JSON, for the settings `Config` reads itself (the
/// engine table reads and checks it whole first).
fn config_doc(config_file: Option<&Path>) -> Result<Option<serde_json::Value>> {
    let Some(path) = config_file else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(&format!("cannot read config {}", path.display()), &e))?;
    serde_json::from_str(&text).map(Some).map_err(|e| {
        Error::invalid(format!("config {} is not valid: {e}", path.display())).with_source(e)
    })
}

/// Reads a variable as a positive number of seconds (fractions allowed).
fn seconds(env: &HashMap<String, String>, name: &str, default: Duration) -> Result<Duration> {
    let Some(raw) = env.get(name) else {
        return Ok(default);
    };
    raw.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= MAX_SECONDS)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{name}={raw:?} is not a number of seconds above 0 (at most {MAX_SECONDS})"
            ))
        })
}

/// A day: longer than anyone would wait on a `close`.
const MAX_SECONDS: f64 = 86_400.0;

/// Reads a variable as a positive integer with a default and a floor.
fn number(env: &HashMap<String, String>, name: &str, default: u64, floor: u64) -> Result<u64> {
    let Some(raw) = env.get(name) else {
        return Ok(default);
    };
    let value: u64 = raw.trim().parse().map_err(|_| {
        Error::invalid(format!(
            "{name}={raw:?} is not a whole number of {}",
            if name.ends_with("BYTES") {
                "bytes"
            } else {
                "units"
            }
        ))
    })?;
    if value == 0 {
        return Err(Error::invalid(format!("{name} must be greater than 0")));
    }
    Ok(value.max(floor))
}

fn absolute(env: &HashMap<String, String>, name: &str) -> Result<Option<PathBuf>> {
    match env.get(name) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => {
            let path = PathBuf::from(v);
            if path.is_absolute() {
                Ok(Some(path))
            } else {
                Err(Error::invalid(format!(
                    "{name}={v:?} must be an absolute path"
                )))
            }
        }
    }
}

impl Config {
    /// Builds the configuration from the process environment.
    pub fn from_env(config_file: Option<&Path>) -> Result<Config> {
        let env: HashMap<String, String> = std::env::vars().collect();
        Self::from_map(&env, config_file)
    }

    /// Builds the configuration from an explicit environment (tests).
    pub fn from_map(env: &HashMap<String, String>, config_file: Option<&Path>) -> Result<Config> {
        let home = absolute(env, "HOME")?
            .ok_or_else(|| Error::invalid("HOME is not set: cannot place state and stores"))?;
        let uid = nix::unistd::getuid().as_raw();
        let state_dir = absolute(env, "XDG_STATE_HOME")?
            .unwrap_or_else(|| home.join(".local/state"))
            .join("sessionfs");
        let runtime_dir = match absolute(env, "XDG_RUNTIME_DIR")? {
            Some(dir) => dir.join("sessionfs"),
            None => PathBuf::from(format!("/tmp/sessionfs-{uid}")),
        };
        let lock_dir =
            absolute(env, "AGENT_SESSIONS_LOCK_DIR")?.unwrap_or_else(|| runtime_dir.join("locks"));
        let engines = EngineTable::load(env, &home, config_file)?;
        let doc = config_doc(config_file)?;
        let worktrees = worktrees_of(config_file, doc.as_ref())?;
        let prices = prices_of(config_file, doc.as_ref())?;
        let config = Config {
            scrollback_bytes: number(
                env,
                "AGENT_SESSIONS_SCROLLBACK_BYTES",
                8 * 1024 * 1024,
                MIN_SCROLLBACK_BYTES,
            )?,
            transcript_max_lines: number(env, "AGENT_SESSIONS_TRANSCRIPT_MAX_LINES", 20_000, 1)?,
            transcript_max_messages: number(
                env,
                "AGENT_SESSIONS_TRANSCRIPT_MAX_MESSAGES",
                2_000,
                1,
            )?,
            transcript_tail_bytes: number(
                env,
                "AGENT_SESSIONS_TRANSCRIPT_TAIL_BYTES",
                8 * 1024 * 1024,
                1,
            )?,
            history_page_turns: number(env, "AGENT_SESSIONS_HISTORY_PAGE_TURNS", 50, 1)?,
            prompt_timeout: seconds(
                env,
                "AGENT_SESSIONS_PROMPT_TIMEOUT",
                Duration::from_secs(60),
            )?,
            open_bytes: number(
                env,
                "AGENT_SESSIONS_OPEN_BYTES",
                DEFAULT_OPEN_BYTES,
                MIN_OPEN_BYTES,
            )?,
            events_bytes: number(
                env,
                "AGENT_SESSIONS_EVENTS_BYTES",
                DEFAULT_EVENTS_BYTES,
                4096,
            )?,
            state_dir,
            runtime_dir,
            lock_dir,
            home,
            engines,
            worktrees,
            prices,
            opencode_config_content: env
                .get("OPENCODE_CONFIG_CONTENT")
                .filter(|v| !v.is_empty())
                .cloned(),
            opencode_permission: env
                .get("OPENCODE_PERMISSION")
                .filter(|v| !v.is_empty())
                .cloned(),
        };
        Ok(config)
    }

    /// Creates the private directories (0700) the daemon writes to.
    pub fn prepare_dirs(&self) -> Result<()> {
        for dir in [&self.state_dir, &self.runtime_dir, &self.lock_dir] {
            make_private_dir(dir)?;
        }
        Ok(())
    }
}

/// Creates `dir` (and parents) and makes sure only the owner can enter it.
pub fn make_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(&format!("cannot create {}", dir.display()), &e))?;
    let meta = std::fs::metadata(dir)
        .map_err(|e| Error::io(&format!("cannot stat {}", dir.display()), &e))?;
    if !meta.is_dir() {
        return Err(Error::invalid(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if meta.uid() != nix::unistd::getuid().as_raw() {
        return Err(Error::perm(format!(
            "{} belongs to uid {}, not to this user",
            dir.display(),
            meta.uid()
        )));
    }
    // Another user who can enter the directory could plant a socket or a
    // lock there before we look: refused, as tmux refuses such a socket
    // directory, rather than trusted after the fact.
    if meta.mode() & 0o077 != 0 {
        return Err(Error::perm(format!(
            "{} is open to other users (mode {:o}); sessionfs keeps its state, sockets and \
             locks only in private directories: `chmod 700` it, or choose another",
            dir.display(),
            meta.mode() & 0o777
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        let mut map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.entry("HOME".into()).or_insert_with(|| "/home/u".into());
        map
    }

    #[test]
    fn a_directory_open_to_others_is_refused_and_left_as_it_was() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let fresh = tmp.path().join("a/b");
        make_private_dir(&fresh).unwrap();
        assert_eq!(
            fresh.metadata().unwrap().permissions().mode() & 0o777,
            0o700
        );
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = make_private_dir(&open).unwrap_err();
        assert_eq!(e.errno, libc::EPERM);
        assert!(
            e.message.contains("open to other users (mode 755)"),
            "{}",
            e.message
        );
        assert_eq!(open.metadata().unwrap().permissions().mode() & 0o777, 0o755);
    }

    #[test]
    fn worktrees_go_where_the_config_file_says() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("config.json");
        let with = |text: &str| {
            std::fs::write(&file, text).unwrap();
            Config::from_map(&env(&[]), Some(&file)).map(|c| c.worktrees)
        };
        assert_eq!(
            Config::from_map(&env(&[]), None).unwrap().worktrees,
            PathBuf::from(".worktrees")
        );
        assert_eq!(with("{}").unwrap(), PathBuf::from(".worktrees"));
        assert_eq!(with(r#"{"worktrees": "wt"}"#).unwrap(), PathBuf::from("wt"));
        assert_eq!(
            with(r#"{"worktrees": "/srv/trees"}"#).unwrap(),
            PathBuf::from("/srv/trees")
        );
        for bad in [
            r#"{"worktrees": ""}"#,
            r#"{"worktrees": "../x"}"#,
            r#"{"worktrees": 1}"#,
        ] {
            assert_eq!(with(bad).unwrap_err().errno, libc::EINVAL, "{bad}");
        }
    }

    #[test]
    fn defaults_follow_the_spec() {
        let c = Config::from_map(&env(&[]), None).unwrap();
        assert_eq!(c.scrollback_bytes, 8 * 1024 * 1024);
        assert_eq!(c.transcript_max_lines, 20_000);
        assert_eq!(c.transcript_max_messages, 2_000);
        assert_eq!(c.transcript_tail_bytes, 8 * 1024 * 1024);
        assert_eq!(c.history_page_turns, 50);
        assert_eq!(c.prompt_timeout, Duration::from_secs(60));
        let c = Config::from_map(&env(&[("AGENT_SESSIONS_PROMPT_TIMEOUT", "2.5")]), None).unwrap();
        assert_eq!(c.prompt_timeout, Duration::from_millis(2500));
        assert_eq!(c.state_dir, PathBuf::from("/home/u/.local/state/sessionfs"));
        assert!(c.runtime_dir.starts_with("/tmp"));
        assert_eq!(c.lock_dir, c.runtime_dir.join("locks"));
    }

    #[test]
    fn xdg_and_lock_dir_are_honoured() {
        let c = Config::from_map(
            &env(&[
                ("XDG_STATE_HOME", "/s"),
                ("XDG_RUNTIME_DIR", "/r"),
                ("AGENT_SESSIONS_LOCK_DIR", "/l"),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(c.state_dir, PathBuf::from("/s/sessionfs"));
        assert_eq!(c.runtime_dir, PathBuf::from("/r/sessionfs"));
        assert_eq!(c.lock_dir, PathBuf::from("/l"));
    }

    #[test]
    fn scrollback_is_floored() {
        let c =
            Config::from_map(&env(&[("AGENT_SESSIONS_SCROLLBACK_BYTES", "1000")]), None).unwrap();
        assert_eq!(c.scrollback_bytes, MIN_SCROLLBACK_BYTES);
    }

    #[test]
    fn bad_values_are_errors_not_defaults() {
        for (k, v) in [
            ("AGENT_SESSIONS_SCROLLBACK_BYTES", "8M"),
            ("AGENT_SESSIONS_HISTORY_PAGE_TURNS", "0"),
            ("AGENT_SESSIONS_TRANSCRIPT_MAX_LINES", "-1"),
            ("AGENT_SESSIONS_LOCK_DIR", "relative/dir"),
            ("AGENT_SESSIONS_PROMPT_TIMEOUT", "abc"),
            ("AGENT_SESSIONS_PROMPT_TIMEOUT", "0"),
            ("AGENT_SESSIONS_PROMPT_TIMEOUT", "-1"),
            ("AGENT_SESSIONS_PROMPT_TIMEOUT", "inf"),
        ] {
            let err = Config::from_map(&env(&[(k, v)]), None).unwrap_err();
            assert_eq!(err.errno, libc::EINVAL);
            assert!(err.message.contains(k), "{}", err.message);
        }
    }
}
