//! Commands written to the root `ctl`: `new`, `archive-older`.

use crate::clock::now_ms;
use crate::core::{organize, Concern, Core};
use crate::error::{Error, Result};
use crate::input_checks::preview;
use crate::key::SessionKey;
use crate::sync::lock;
use std::path::Path;

/// A fresh random UUID (v4), as Claude's `--session-id` expects.
pub(in crate::core) fn new_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The root `ctl`'s `new`, in words.
const NEW_USAGE: &str = "new ENGINE [id=ID] [workspace=DIR [worktree=BRANCH [base=REF]]] [model=NAME] [mode=MODE] [title=TEXT]";

/// What a `new` asks for.
#[derive(Debug, Default)]
pub(in crate::core) struct NewAsk {
    pub(in crate::core) id: Option<String>,
    pub(in crate::core) workspace: Option<String>,
    pub(in crate::core) worktree: Option<String>,
    pub(in crate::core) base: Option<String>,
    pub(in crate::core) model: Option<String>,
    pub(in crate::core) mode: Option<String>,
    pub(in crate::core) title: Option<String>,
    /// The conversation a fork starts from.
    pub(in crate::core) fork_of: Option<String>,
}

impl Core {
    /// Makes a session as `new` asks: everything is checked before
    /// anything is made, and a worktree made for a session that then
    /// cannot be recorded is taken back. Runs in the pool (git).
    pub(in crate::core) fn new_session(&self, engine: &str, asked: NewAsk) -> Result<SessionKey> {
        let id = asked.id.clone().unwrap_or_else(new_session_id);
        let key = SessionKey::parse(&format!("{engine}:{id}"))?;
        let definition = self.engine(&key)?;
        definition.check_options(asked.model.as_deref(), asked.mode.as_deref())?;
        definition.check_new_id(key.id())?;
        if self.exists(&key) {
            return Err(Error::new(libc::EEXIST, format!("{key} already exists")));
        }
        if asked.base.is_some() && asked.worktree.is_none() {
            return Err(Error::invalid("base=REF goes with worktree=BRANCH"));
        }
        let made = match (&asked.worktree, &asked.workspace) {
            (Some(branch), Some(repo)) => {
                Some(self.add_worktree(Path::new(repo), branch, asked.base.as_deref())?)
            }
            (Some(_), None) => {
                return Err(Error::invalid(
                    "worktree=BRANCH needs workspace=REPOSITORY: the repository it branches",
                ))
            }
            (None, _) => None,
        };
        let made_key = self.create(key.as_str()).and_then(|key| {
            self.organize.sidecar.update(|all| {
                if let Some(meta) = all.get_mut(&key.to_string()) {
                    meta.workspace = asked.workspace.clone();
                    meta.title = asked.title.clone();
                    meta.worktree = made.as_ref().map(|m| m.record.clone());
                    meta.model = asked.model.clone();
                    meta.mode = asked.mode.clone();
                    meta.fork_of = asked.fork_of.clone();
                }
                Ok(())
            })?;
            Ok(key)
        });
        if let (Err(_), Some(made)) = (&made_key, &made) {
            if !self.exists(&key) {
                self.undo_worktree(made);
            }
        }
        made_key
    }

    /// One command written to the root `ctl`.
    pub fn root_ctl(&self, command: &str) -> Result<()> {
        self.run_root_ctl(command).map_err(|e| {
            self.record(
                &Concern::Root,
                e.with_context(format_args!("ctl {}", preview(command))),
            )
        })
    }

    fn run_root_ctl(&self, command: &str) -> Result<()> {
        let mut words = command.split_whitespace();
        match words.next() {
            Some("new") => {
                let engine = words.next().ok_or_else(|| {
                    Error::invalid(format!(
                        "new takes {}",
                        NEW_USAGE.trim_start_matches("new ")
                    ))
                })?;
                let mut asked = NewAsk::default();
                let mut title_text = None;
                for word in words.by_ref() {
                    if word.starts_with("title=") {
                        // The title is the rest of the line as written, so
                        // it keeps its spaces and may hold any `=`.
                        let at = word.as_ptr() as usize - command.as_ptr() as usize;
                        title_text = Some(command[at + "title=".len()..].trim().to_string());
                        break;
                    }
                    match word.split_once('=') {
                        // The caller's own id, so it knows the key without
                        // asking (checked as `mkdir` checks it).
                        Some(("id", given)) if asked.id.is_none() && !given.is_empty() => {
                            asked.id = Some(given.to_string());
                        }
                        Some(("workspace", dir)) if Path::new(dir).is_absolute() => {
                            asked.workspace =
                                crate::core::organize::meta_edit::validate_workspace(dir)?;
                            crate::core::organize::meta_edit::check_workspace_dir(dir)?;
                        }
                        Some(("worktree", branch)) if asked.worktree.is_none() => {
                            asked.worktree = Some(branch.to_string());
                        }
                        Some(("base", rev)) if asked.base.is_none() && !rev.is_empty() => {
                            asked.base = Some(rev.to_string());
                        }
                        Some(("model", model)) if asked.model.is_none() => {
                            asked.model = Some(model.to_string());
                        }
                        Some(("mode", mode)) if asked.mode.is_none() => {
                            asked.mode = Some(mode.to_string());
                        }
                        _ => {
                            return Err(Error::invalid(format!(
                                "new: unexpected {}; expected {NEW_USAGE}",
                                preview(word)
                            )))
                        }
                    }
                }
                // Checked as a meta.json edit checks it, before anything is created.
                if let Some(t) = title_text {
                    asked.title = crate::core::organize::meta_edit::validate_title(&t)?;
                }
                let key = self.new_session(engine, asked)?;
                log::info!("ctl: new made {key}");
                *lock(&self.last_new) = Some(key.to_string());
                Ok(())
            }
            Some("archive-older") => {
                let cutoff = words.next().ok_or_else(|| {
                    Error::invalid("archive-older takes CUTOFF (RFC 3339, or an age: 45m, 12h, 30d, 2w), then `dry-run` to only list what would go")
                })?;
                let extra =
                    || Error::invalid("archive-older takes one CUTOFF, then at most `dry-run`");
                let dry_run = match words.next() {
                    None => false,
                    Some("dry-run") => true,
                    Some(_) => return Err(extra()),
                };
                if words.next().is_some() {
                    return Err(extra());
                }
                let cutoff_ms = organize::changes::parse_cutoff(cutoff, now_ms())?;
                let report = self.archive_older(cutoff_ms, dry_run)?;
                *lock(&self.organize.last_archive_older) = Some(report);
                Ok(())
            }
            Some(other) => Err(Error::invalid(format!(
                "unknown command {}; expected `{NEW_USAGE}` or `archive-older CUTOFF [dry-run]`",
                preview(other)
            ))),
            None => Err(Error::invalid("empty command")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_lowercase_random_uuids() {
        let (a, b) = (new_session_id(), new_session_id());
        assert_ne!(a, b);
        let id = uuid::Uuid::try_parse(&a).unwrap();
        assert_eq!(id.get_version_num(), 4);
        assert_eq!(id.to_string(), a);
    }
}
