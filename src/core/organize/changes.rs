//! Keeping a long list of sessions in order (SPEC §4, §6, §8, §10): the
//! metadata files, archive and unarchive, and the listing.

use crate::agent::state::State;
use crate::atomic::{self, Durability, Pending};
use crate::catalog::StoreFile;
use crate::core::organize::meta_edit::{self, MetaChange};
use crate::core::organize::sidecar::{Records, SessionMeta};
use crate::core::{Concern, Core, HOSTED};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::sync::lock;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Largest `meta.json`, `title`, `project`, `favourite` or `archive` a
/// writer may send: a valid one is far smaller (a title is at most 1 KiB).
pub const META_FILE_MAX: u64 = 64 << 10;

/// The one-line metadata files of a session directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaField {
    Title,
    Project,
    Favourite,
    Archive,
}

impl MetaField {
    pub const ALL: [MetaField; 4] = [
        MetaField::Title,
        MetaField::Project,
        MetaField::Favourite,
        MetaField::Archive,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MetaField::Title => "title",
            MetaField::Project => "project",
            MetaField::Favourite => "favourite",
            MetaField::Archive => "archive",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// `archive-older` cutoffs: an RFC 3339 time, or an age such as `30d`, `12h`.
pub fn parse_cutoff(text: &str, now_ms: u64) -> Result<u64> {
    let at = text.parse::<jiff::Timestamp>().ok();
    if let Some(ms) = at.and_then(|at| u64::try_from(at.as_millisecond()).ok()) {
        return Ok(ms);
    }
    let unit_ms: u64 = match text.chars().last() {
        Some('w') => 7 * 86_400_000,
        Some('d') => 86_400_000,
        Some('h') => 3_600_000,
        Some('m') => 60_000,
        _ => 0,
    };
    // Digits only (`+5d`, ` 5d` and `5.5d` are no ages); `get`: the last
    // character may be several bytes long (`1é`).
    let count: Option<u64> = text
        .get(..text.len().saturating_sub(1))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok());
    match (unit_ms, count) {
        (u, Some(n)) if u > 0 => Ok(now_ms.saturating_sub(n.saturating_mul(u))),
        _ => Err(Error::invalid(format!(
            "{} is not a cutoff: use an RFC 3339 time or an age in minutes, hours, days or weeks (45m, 12h, 30d, 2w)",
            crate::input_checks::preview(text)
        ))),
    }
}

/// The most keys root `status` names in one `archive-older` report; the
/// counts are always whole.
pub(in crate::core) const REPORT_KEYS_MAX: usize = 10_000;

/// What the last `archive-older` did, or would do (a dry run): root
/// `status`'s `archive_older`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ArchiveOlderReport {
    /// The cutoff, as a UTC time.
    pub cutoff: String,
    pub dry_run: bool,
    /// How many were archived (would be, in a dry run).
    pub archived: usize,
    /// Their keys, at most [`REPORT_KEYS_MAX`].
    pub keys: Vec<String>,
    /// Sessions old enough but left alone: their agent was `busy` or
    /// `waiting` when their turn came.
    pub skipped: Vec<Skipped>,
    /// How many keys the lists above leave out past the cap.
    pub left_out: usize,
}

/// A session `archive-older` left alone, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Skipped {
    pub key: String,
    pub state: String,
}

impl ArchiveOlderReport {
    fn note(&mut self, key: &SessionKey) {
        self.archived += 1;
        if self.keys.len() < REPORT_KEYS_MAX {
            self.keys.push(key.to_string());
        } else {
            self.left_out += 1;
        }
    }

    fn skip(&mut self, key: &SessionKey, state: State) {
        if self.skipped.len() < REPORT_KEYS_MAX {
            self.skipped.push(Skipped {
                key: key.to_string(),
                state: state.as_str().to_string(),
            });
        } else {
            self.left_out += 1;
        }
    }
}

/// How many sessions `archive-older` archives with one change of the records.
const ARCHIVE_BATCH: usize = 1024;

/// A copy of a transcript made under temporary names; dropped before it
/// is installed, it is removed.
struct KeptCopy {
    copy: Pending,
    /// The file `origin`: where the engine kept the transcript.
    origin: Pending,
}

impl KeptCopy {
    fn install(self) -> std::io::Result<()> {
        self.copy.commit()?;
        self.origin.commit()
    }
}

impl Core {
    /// Where sessionfs keeps its own copy of a conversation at archive time.
    fn archived_copy(&self, key: &SessionKey) -> PathBuf {
        self.config
            .state_dir
            .join("archived-transcripts")
            .join(key.engine())
            .join(key.id())
    }

    /// The kept copy, when the engine's own file is gone.
    pub(in crate::core) fn archived_store(&self, key: &SessionKey) -> Option<StoreFile> {
        let dir = self.archived_copy(key);
        let origin = std::fs::read_to_string(dir.join("origin")).ok()?;
        let name = Path::new(origin.trim()).file_name()?;
        let path = dir.join(name);
        let meta = std::fs::metadata(&path).ok()?;
        Some(StoreFile {
            kind: self.catalog.kind_of(key.engine())?,
            mtime_ms: crate::clock::mtime_ms(&meta),
            path,
        })
    }

    /// Puts the engine's own bytes back where it keeps them, so it can
    /// resume a conversation it deleted after the archive.
    pub(in crate::core) fn restore_archived_store(&self, key: &SessionKey) -> Result<()> {
        let Some(copy) = self.archived_store(key) else {
            return Ok(());
        };
        let origin = std::fs::read_to_string(self.archived_copy(key).join("origin"))
            .map_err(|e| Error::io("cannot read the archived copy's origin", &e))?;
        let origin = PathBuf::from(origin.trim());
        if origin.exists() {
            return Ok(());
        }
        if let Some(dir) = origin.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(&format!("cannot create {}", dir.display()), &e))?;
        }
        std::fs::copy(&copy.path, &origin)
            .map_err(|e| Error::io(&format!("cannot restore {}", origin.display()), &e))?;
        log::info!(
            "{key}: restored {} from its archived copy",
            origin.display()
        );
        self.catalog.refresh();
        Ok(())
    }

    /// Copies the engine's transcript into the archived copy's directory
    /// under temporary names, with its origin: [`KeptCopy::install`] then
    /// puts it in place with renames. `None` when there is nothing to keep.
    fn prepare_copy(&self, key: &SessionKey) -> Result<Option<KeptCopy>> {
        let Some(file) = self.store_file(key) else {
            return Ok(None);
        };
        let dir = self.archived_copy(key);
        if file.path.starts_with(&dir) {
            return Ok(None);
        }
        crate::config::make_private_dir(&dir)?;
        // Not synced: the engine's own file is still in place, and the
        // disk's own writeback keeps the copy long before an engine
        // deletes its old conversations.
        let made = (|| {
            let name = dir.join(file.path.file_name().unwrap_or_default());
            let mut copy = Pending::new(&name, atomic::CREATE_MODE, Durability::Unsynced)?;
            match copy.copy_from(&file.path) {
                Ok(_) => {}
                // The engine deleted it meanwhile: nothing to keep.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            }
            let mut origin = Pending::new(
                &dir.join("origin"),
                atomic::CREATE_MODE,
                Durability::Unsynced,
            )?;
            origin
                .file()
                .write_all(file.path.to_string_lossy().as_bytes())?;
            Ok(Some(KeptCopy { copy, origin }))
        })();
        // Dropped on the way, a part made is removed.
        made.map_err(|e| {
            Error::io(
                &format!("cannot keep a copy of {}", file.path.display()),
                &e,
            )
        })
    }

    /// Archives one session: see [`Core::archive_all`].
    pub fn archive(&self, key: &SessionKey) -> Result<()> {
        self.require(key)?;
        self.archive_all(std::slice::from_ref(key))
            .map(drop)
            .map_err(|e| {
                self.record(
                    &Concern::Session(key.clone()),
                    e.with_context(format!("{key} is not archived")),
                )
            })
    }

    /// Archives `keys` in the order the contract gives, as one change of
    /// the records: what can fail is done before anything is stopped (each
    /// transcript's copy made, room for the records' change reserved),
    /// then the runtimes are reaped (best-effort, never blocking the
    /// archive), then the change is written. If the reservation fails, every
    /// session is exactly as it was. Of several keys, one whose transcript
    /// cannot be copied is left as it was, its reason in its `status`.
    /// Returns the keys archived.
    fn archive_all(&self, keys: &[SessionKey]) -> Result<Vec<SessionKey>> {
        let mut ready: Vec<(SessionKey, u64)> = Vec::with_capacity(keys.len());
        let mut copies: Vec<Option<KeptCopy>> = Vec::with_capacity(keys.len());
        for key in keys {
            let created = self.row(key).created_ms;
            let copy = if key.engine() != HOSTED {
                match self.prepare_copy(key) {
                    Ok(copy) => copy,
                    Err(e) if keys.len() > 1 => {
                        self.record(
                            &Concern::Session(key.clone()),
                            e.with_context(format!("{key} is not archived")),
                        );
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            } else {
                None
            };
            ready.push((key.clone(), created));
            copies.push(copy);
        }
        let mark = |all: &mut Records| {
            for (key, created) in &ready {
                all.entry_or(key.as_str(), || SessionMeta {
                    created_ms: *created,
                    ..Default::default()
                })
                .archived = true;
            }
            Ok(())
        };
        let record = self.organize.sidecar.prepare(mark)?;
        for ((key, _), copy) in ready.iter().zip(&mut copies) {
            if key.engine() == HOSTED {
                continue;
            }
            if let Some(copy) = copy.take() {
                if let Err(e) = copy.install() {
                    log::warn!("{key}: cannot put the transcript's copy in place: {e}");
                }
            }
            // Nothing runs it here or anywhere and no earlier daemon kept
            // its ring: nothing to reap or keep (most of what
            // `archive-older` archives).
            let idle = !lock(&self.sessions.runtimes).contains_key(key)
                && !self.paths.record(key).exists()
                && !self.paths.socket(key).exists()
                && !self.paths.ring(key).exists();
            if idle {
                continue;
            }
            let rt = self.reap_detached(key);
            {
                let mut state = lock(&rt.state);
                state.outcome = None;
                state.record = None;
            }
            // The reap closed the connection: the ring holds all the
            // output there will be.
            let kept = if self.ring_is_history(key) {
                self.keep_archived_scrollback(key, &rt.scrollback)
            } else {
                Ok(())
            };
            match kept {
                Ok(()) => rt.scrollback.discard(),
                // Not lost: still read from the ring until a restart.
                Err(e) => log::error!("{key}: {}", e.message),
            }
            rt.clear_screen();
        }
        self.organize.sidecar.commit(record, mark)?;
        let now = crate::clock::now_ms();
        let mut archived = Vec::with_capacity(ready.len());
        for (key, _) in ready {
            // An open that began before the commit (it found the session
            // not archived) and after the processes were ended would
            // leave an archived session running: ended too.
            let raced = key.engine() != HOSTED
                && lock(&self.sessions.runtimes).get(&key).is_some_and(|rt| {
                    let state = lock(&rt.state);
                    state.opening.is_some() || state.client.is_some()
                });
            if raced {
                self.reap_detached(&key);
            }
            self.record_changed(&key);
            log::info!("{key}: archived");
            self.agents
                .event_stream
                .append(now, key.as_str(), "archived", serde_json::json!({}));
            archived.push(key);
        }
        Ok(archived)
    }

    pub fn unarchive(&self, key: &SessionKey) -> Result<()> {
        self.require(key)?;
        self.set_meta(key, |m| m.archived = false).map_err(|e| {
            self.record(
                &Concern::Session(key.clone()),
                e.with_context(format!("{key} is not unarchived")),
            )
        })?;
        if let Err(e) = self.drop_archived_scrollback(key) {
            log::warn!("{key}: {}", e.message);
        }
        log::info!("{key}: unarchived");
        self.agents.event_stream.append(
            crate::clock::now_ms(),
            key.as_str(),
            "unarchived",
            serde_json::json!({}),
        );
        Ok(())
    }

    /// Archives every active session whose last activity is before the
    /// cutoff, as one change (see [`Core::archive_all`]), in batches so
    /// that the kernel hears of the moves as they are made.
    pub fn archive_older(&self, cutoff_ms: u64, dry_run: bool) -> Result<ArchiveOlderReport> {
        let old: Vec<SessionKey> = self
            .rows(false)
            .iter()
            .filter(|r| !r.meta.archived && r.last_activity_ms < cutoff_ms)
            .map(|r| r.key.clone())
            .collect();
        let mut report = ArchiveOlderReport {
            cutoff: crate::core::utc_text(cutoff_ms),
            dry_run,
            ..Default::default()
        };
        for batch in old.chunks(ARCHIVE_BATCH) {
            // Judged when the batch's turn comes: no agent is stopped in
            // the middle of a turn or of a question it asked.
            let mut go = Vec::with_capacity(batch.len());
            for key in batch {
                match self.agent_state(key) {
                    state @ (State::Busy | State::Waiting) => report.skip(key, state),
                    _ => go.push(key.clone()),
                }
            }
            let archived = if dry_run {
                go
            } else {
                let archived = self.archive_all(&go)?;
                self.moved_all(&archived);
                archived
            };
            archived.iter().for_each(|key| report.note(key));
        }
        if dry_run {
            log::info!(
                "archive-older (dry run): {} sessions would be archived, {} skipped",
                report.archived,
                report.skipped.len()
            );
        } else {
            log::info!(
                "archive-older: {} sessions archived, {} skipped",
                report.archived,
                report.skipped.len()
            );
        }
        Ok(report)
    }

    /// Changes the sidecar record, creating it for a discovered session.
    fn set_meta(&self, key: &SessionKey, change: impl FnOnce(&mut SessionMeta)) -> Result<()> {
        // A discovered conversation was created when its store began.
        let created = self.row(key).created_ms;
        self.organize.sidecar.update(|all| {
            let meta = all.entry_or(key.as_str(), || SessionMeta {
                created_ms: created,
                ..Default::default()
            });
            change(meta);
            Ok(())
        })?;
        self.record_changed(key);
        Ok(())
    }

    /// Whether the session has ever run (its workspace is then fixed).
    fn launched(&self, key: &SessionKey) -> bool {
        // Looked at, not created: a session never opened has no runtime.
        let here = lock(&self.sessions.runtimes).get(key).is_some_and(|rt| {
            let state = lock(&rt.state);
            state.client.is_some() || state.launched.is_some()
        });
        here || self.paths.record(key).exists() || self.store_file(key).is_some()
    }

    /// Applies a validated change: fields first, then archive or unarchive.
    pub fn apply_meta(&self, key: &SessionKey, change: MetaChange) -> Result<()> {
        if change.workspace.is_some() && self.launched(key) {
            return Err(Error::invalid(
                "`workspace` is fixed once the session has run",
            ));
        }
        let MetaChange {
            title,
            project,
            favourite,
            archived,
            workspace,
        } = change;
        if title.is_some() || project.is_some() || favourite.is_some() || workspace.is_some() {
            self.set_meta(key, |m| {
                if let Some(t) = title {
                    m.title = t;
                }
                if let Some(p) = project {
                    m.project = p;
                }
                if let Some(f) = favourite {
                    m.favourite = f;
                }
                if let Some(w) = workspace {
                    m.workspace = w;
                }
            })?;
        }
        log::debug!("{key}: metadata committed");
        match archived {
            Some(true) if !self.is_archived(key) => self.archive(key)?,
            Some(false) if self.is_archived(key) => self.unarchive(key)?,
            _ => return Ok(()),
        }
        self.moved(key);
        Ok(())
    }

    /// Lets the FUSE adapter know once: called after a session moved
    /// between the root and `archived/` by anything but a rename (a rename
    /// moves the kernel's entry itself).
    pub fn on_moved(&self, hook: crate::core::MovesHook) {
        self.organize.moved_hook.set(hook, "moved");
    }

    pub(in crate::core) fn moved(&self, key: &SessionKey) {
        self.moved_all(std::slice::from_ref(key));
    }

    pub(in crate::core) fn moved_all(&self, keys: &[SessionKey]) {
        if let Some(hook) = self.organize.moved_hook.get() {
            (hook.0)(keys);
        }
    }

    /// Lets the FUSE adapter know once: called after any change of a
    /// session's record (project, favourite, archive...), after which its
    /// links in the views may name nothing.
    pub fn on_members_changed(&self, hook: crate::core::SessionHook) {
        self.organize.members_hook.set(hook, "members");
    }

    pub(in crate::core) fn record_changed(&self, key: &SessionKey) {
        self.organize.members_hook.call(key);
    }

    /// Checks a whole new `meta.json` from an editor that read `seen`,
    /// without applying it.
    pub fn check_meta_edit(
        &self,
        key: &SessionKey,
        seen: &Value,
        bytes: &[u8],
    ) -> Result<MetaChange> {
        let result = self.meta_value(key).and_then(|current| {
            meta_edit::parse_meta_edit(seen, &current, bytes, self.launched(key))
        });
        result.map_err(|e| self.record(&Concern::Session(key.clone()), e))
    }

    /// Checks and applies a whole new `meta.json`.
    pub fn edit_meta(&self, key: &SessionKey, seen: &Value, bytes: &[u8]) -> Result<()> {
        let change = self.check_meta_edit(key, seen, bytes)?;
        self.apply_meta(key, change)
            .map_err(|e| self.record(&Concern::Session(key.clone()), e))
    }

    /// What `title`, `project`, `favourite`, `archive` read as.
    pub fn field_text(&self, key: &SessionKey, field: MetaField) -> Result<Vec<u8>> {
        let meta = self.meta_value(key)?;
        let text = match field {
            MetaField::Title => meta["title"].as_str().unwrap_or("").to_string(),
            MetaField::Project => meta["project"].as_str().unwrap_or("").to_string(),
            MetaField::Favourite => u8::from(meta["favourite"] == true).to_string(),
            MetaField::Archive => u8::from(meta["archived"] == true).to_string(),
        };
        Ok(format!("{text}\n").into_bytes())
    }

    /// Checks what was written to `title` and its kin, without applying it.
    pub fn check_field(
        &self,
        key: &SessionKey,
        field: MetaField,
        bytes: &[u8],
    ) -> Result<MetaChange> {
        let result = (|| {
            let mut change = MetaChange::default();
            match field {
                MetaField::Title => {
                    change.title = Some(meta_edit::validate_title(&meta_edit::parse_line_file(
                        bytes,
                    )?)?)
                }
                MetaField::Project => {
                    change.project = Some(meta_edit::validate_project(
                        &meta_edit::parse_line_file(bytes)?,
                    )?)
                }
                MetaField::Favourite => change.favourite = Some(meta_edit::parse_flag(bytes)?),
                MetaField::Archive => change.archived = Some(meta_edit::parse_flag(bytes)?),
            }
            Ok(change)
        })();
        result.map_err(|e| self.record(&Concern::Session(key.clone()), e))
    }

    /// `echo ... > title` and its kin: checked, then applied.
    pub fn write_field(&self, key: &SessionKey, field: MetaField, bytes: &[u8]) -> Result<()> {
        let change = self.check_field(key, field, bytes)?;
        self.apply_meta(key, change)
            .map_err(|e| self.record(&Concern::Session(key.clone()), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell stopped under an earlier daemon: no runtime here, no record,
    /// no socket, only the ring file it kept. `archive-older` keeps that
    /// ring as the archived scrollback and removes the file.
    #[test]
    fn archive_older_keeps_the_ring_a_stopped_shell_left() {
        let (core, _dir) = Core::for_tests(&[]);
        let key = core.create("shell:old").unwrap();
        let rt = core.session_runtime(&key).unwrap();
        rt.scrollback.append(b"history\n");
        drop(rt);
        lock(&core.sessions.runtimes).remove(&key);
        let ring = core.paths.ring(&key);
        assert!(ring.exists(), "the ring is kept in {}", ring.display());
        let archived = core
            .archive_older(crate::clock::now_ms() + 60_000, false)
            .unwrap();
        assert_eq!(archived.archived, 1);
        assert!(core.is_archived(&key));
        assert!(!ring.exists(), "the kept ring file goes with the archive");
        let kept = core
            .archived_scrollback(&key)
            .expect("an archived scrollback");
        assert_eq!(kept.snapshot(), b"history\n");
    }

    #[test]
    fn cutoffs_are_times_or_ages() {
        let now = 10 * 86_400_000;
        assert_eq!(parse_cutoff("2d", now).unwrap(), 8 * 86_400_000);
        assert_eq!(parse_cutoff("12h", now).unwrap(), now - 12 * 3_600_000);
        assert_eq!(parse_cutoff("45m", now).unwrap(), now - 45 * 60_000);
        assert_eq!(parse_cutoff("1w", now).unwrap(), 3 * 86_400_000);
        assert_eq!(parse_cutoff("0d", now).unwrap(), now);
        assert_eq!(
            parse_cutoff("1970-01-02T00:00:00Z", now).unwrap(),
            86_400_000
        );
        for bad in [
            "",
            "d",
            "x3d",
            "3y",
            "3s",
            "yesterday",
            "é",
            "1é",
            "3dé",
            "+3d",
            " 3d",
            "3.5d",
            "-1d",
        ] {
            assert_eq!(
                parse_cutoff(bad, now).unwrap_err().errno,
                libc::EINVAL,
                "{bad}"
            );
        }
    }
}
