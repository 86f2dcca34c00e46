//! Commands written to the root `ctl`: `new`, `archive-older`.

use crate::clock::now_ms;
use crate::core::{organize, Concern, Core};
use crate::error::{Error, Result};
use crate::input_checks::preview;
use crate::sync::lock;
use std::path::Path;

/// A fresh random UUID (v4), as Claude's `--session-id` expects.
pub(in crate::core) fn new_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl Core {
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
                let engine = words
                    .next()
                    .ok_or_else(|| Error::invalid("new takes ENGINE [id=ID] [workspace=DIR] [title=TEXT]"))?;
                let mut id = None;
                let mut workspace = None;
                let mut title = None;
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
                        Some(("id", given)) if id.is_none() && !given.is_empty() => {
                            id = Some(given.to_string());
                        }
                        Some(("workspace", dir)) if Path::new(dir).is_absolute() => {
                            workspace = crate::core::organize::meta_edit::validate_workspace(dir)?;
                            crate::core::organize::meta_edit::check_workspace_dir(dir)?;
                        }
                        _ => {
                            return Err(Error::invalid(format!(
                                "new: unexpected {}; expected id=ID, workspace=/ABSOLUTE/DIR or title=TEXT",
                                preview(word)
                            )))
                        }
                    }
                }
                // Checked as a meta.json edit checks it, before anything is created.
                if let Some(t) = title_text {
                    title = crate::core::organize::meta_edit::validate_title(&t)?;
                }
                let id = id.unwrap_or_else(new_session_id);
                let key = self.create(&format!("{engine}:{id}"))?;
                self.organize.sidecar.update(|all| {
                    if let Some(meta) = all.get_mut(&key.to_string()) {
                        meta.workspace = workspace;
                        meta.title = title;
                    }
                    Ok(())
                })?;
                log::info!("ctl: new made {key}");
                *lock(&self.last_new) = Some(key.to_string());
                Ok(())
            }
            Some("archive-older") => {
                let cutoff = words.next().ok_or_else(|| {
                    Error::invalid("archive-older takes CUTOFF (RFC 3339, or an age: 45m, 12h, 30d, 2w), then `dry-run` to only list what would go")
                })?;
                let extra = || Error::invalid("archive-older takes one CUTOFF, then at most `dry-run`");
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
                "unknown command {}; expected `new ENGINE [id=ID] [workspace=DIR] [title=TEXT]` or `archive-older CUTOFF [dry-run]`",
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
