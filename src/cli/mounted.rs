//! The mount that serves this state, and its files as the verbs for
//! scripts read and write them: each verb is a thin client of the mount
//! (no second protocol), using the same files a shell would.

use super::exit::{refused, usage, Failed};
use super::logging::init_logging;
use crate::config::Config;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The mount that serves this state.
pub fn mount(config: &Config) -> Result<PathBuf, Failed> {
    crate::core::daemon_mounts(config)
        .into_iter()
        .next()
        .ok_or_else(|| {
            refused(
                "no sessionfs is mounted on this state: start one with `sessionfs mount DIR`"
                    .into(),
            )
        })
}

/// Runs a verb against the mount that serves this state: its exit code,
/// or the reason on stderr and the code of the failure.
pub(super) fn client_verb(verb: impl FnOnce(&Path) -> Result<u8, Failed>) -> ExitCode {
    init_logging("warn");
    let done = Config::from_env(None)
        .map_err(|e| usage(e.message))
        .and_then(|config| mount(&config))
        .and_then(|mnt| verb(&mnt));
    match done {
        Ok(code) => ExitCode::from(code),
        Err(failed) => {
            eprintln!("sessionfs: {}", failed.message);
            ExitCode::from(failed.code)
        }
    }
}

/// A session's directory in the mount, for a key as typed.
pub(super) fn session_dir(mnt: &Path, key: &str) -> Result<PathBuf, Failed> {
    crate::key::SessionKey::parse(key).map_err(|e| usage(format!("{key}: {}", e.message)))?;
    let dir = mnt.join(key);
    if dir.exists() {
        Ok(dir)
    } else if mnt.join("archived").join(key).exists() {
        Ok(mnt.join("archived").join(key))
    } else {
        Err(refused(format!("no session {key}")))
    }
}

/// The reason `dir/status` gives for its last refusal.
pub(super) fn reason(dir: &Path, fallback: &std::io::Error) -> String {
    let said = std::fs::read(dir.join("status"))
        .ok()
        .and_then(|t| serde_json::from_slice::<serde_json::Value>(&t).ok())
        .and_then(|v| v["error"].as_str().map(str::to_string));
    said.unwrap_or_else(|| fallback.to_string())
}

/// Writes `bytes` to a file of the mount and closes it, reporting what the
/// `close` says too: a prompt's refusal comes at its close.
pub(super) fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::fd::IntoRawFd;
    let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.write_all(bytes)?;
    nix::unistd::close(file.into_raw_fd()).map_err(std::io::Error::from)
}

/// A session's `status`, as JSON.
pub fn status(mnt: &Path, key: &str) -> Result<serde_json::Value, Failed> {
    let dir = session_dir(mnt, key)?;
    let text =
        std::fs::read(dir.join("status")).map_err(|e| refused(format!("{key}: status: {e}")))?;
    serde_json::from_slice(&text).map_err(|e| refused(format!("{key}: status: {e}")))
}
