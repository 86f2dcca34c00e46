//! `sessionfs new ENGINE`: makes a session through the root `ctl`.

use super::exit::{refused, usage, Failed};
use super::mounted::{client_verb, reason, write_file};
use std::path::Path;
use std::process::ExitCode;

/// `sessionfs new ENGINE`: makes a session with an id chosen here, so the
/// key is known without asking which one the mount made last (five
/// scripts creating at once each get their own). The workspace must be an
/// absolute directory outside the mount; the title one line.
pub fn new_session(
    mnt: &Path,
    engine: &str,
    workspace: Option<&Path>,
    title: Option<&str>,
    options: &NewOptions,
) -> Result<String, Failed> {
    if engine.is_empty() || engine.contains(|c: char| c.is_whitespace() || c == ':') {
        return Err(usage(format!("{engine:?} is not an engine name")));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let mut command = format!("new {engine} id={id}");
    if let Some(dir) = workspace {
        let text = dir.to_str().filter(|t| !t.contains(char::is_whitespace));
        let Some(text) = text else {
            return Err(usage(format!(
                "--workspace {}: a directory whose path has no spaces or line breaks",
                dir.display()
            )));
        };
        command.push_str(&format!(" workspace={text}"));
    }
    for (flag, word, value) in [
        ("--worktree", "worktree", &options.worktree),
        ("--base", "base", &options.base),
        ("--model", "model", &options.model),
        ("--mode", "mode", &options.mode),
    ] {
        if let Some(value) = value {
            if value.is_empty() || value.contains(char::is_whitespace) {
                return Err(usage(format!("{flag} {value:?}: one word")));
            }
            command.push_str(&format!(" {word}={value}"));
        }
    }
    if let Some(title) = title {
        if title.contains(['\n', '\r']) {
            return Err(usage("--title: one line".into()));
        }
        command.push_str(&format!(" title={title}"));
    }
    command.push('\n');
    write_file(&mnt.join("ctl"), command.as_bytes()).map_err(|e| refused(reason(mnt, &e)))?;
    Ok(format!("{engine}:{id}"))
}

/// What `sessionfs new` passes on besides the workspace and title.
#[derive(Debug, Default)]
pub struct NewOptions {
    /// A branch to check out in a new git worktree of the workspace.
    pub worktree: Option<String>,
    /// What a new branch starts from.
    pub base: Option<String>,
    pub model: Option<String>,
    /// The agent's permission mode.
    pub mode: Option<String>,
}

/// Makes the session and prints its key (with `json`, its key and path).
pub fn run(
    engine: &str,
    workspace: Option<&Path>,
    title: Option<&str>,
    options: &NewOptions,
    json: bool,
) -> ExitCode {
    client_verb(|mnt| {
        let workspace = match workspace {
            Some(dir) => {
                Some(std::path::absolute(dir).map_err(|e| usage(format!("--workspace: {e}")))?)
            }
            // Here, unless here is inside the mount (the daemon refuses that).
            None => std::env::current_dir().ok().filter(|d| !d.starts_with(mnt)),
        };
        let key = new_session(mnt, engine, workspace.as_deref(), title, options)?;
        if json {
            let path = mnt.join(&key);
            println!("{}", serde_json::json!({"key": key, "path": path}));
        } else {
            println!("{key}");
        }
        Ok(0)
    })
}
