//! `sessionfs fork KEY`: a new session with KEY's conversation so far.

use super::answer::ctl;
use super::exit::usage;
use super::mounted::client_verb;
use std::process::ExitCode;

/// Writes `fork id=ID` to KEY's `ctl`, the id chosen here so the new key
/// is known without asking, and prints that key (with `json`, its key,
/// path and what it forked).
pub fn run(key: &str, json: bool) -> ExitCode {
    client_verb(|mnt| {
        let Some((engine, _)) = key.split_once(':') else {
            return Err(usage(format!("{key:?} is not a session key (ENGINE:ID)")));
        };
        let id = uuid::Uuid::new_v4().to_string();
        ctl(mnt, key, &format!("fork id={id}"))?;
        let made = format!("{engine}:{id}");
        if json {
            let path = mnt.join(&made);
            println!(
                "{}",
                serde_json::json!({"key": made, "path": path, "forked": key})
            );
        } else {
            println!("{made}");
        }
        Ok(0)
    })
}
