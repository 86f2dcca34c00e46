//! Sessions' git workspaces: the worktree `new ... worktree=BRANCH` makes,
//! `prune` (which removes it, never its branch), and the `diff` file. Git
//! runs in the slow-operation pool only, each call with its deadline
//! (`crate::git`).

use crate::core::organize::sidecar::Worktree;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::filelock::LOCK_WAIT;
use crate::git;
use crate::key::SessionKey;
use crate::runtime::dtach;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The most a `diff` holds; past it, a last line says it was cut.
pub(in crate::core) const DIFF_CAP: usize = 4 << 20;

/// How long a `diff` may take, under the pool's deadline.
const DIFF_DEADLINE: Duration = Duration::from_secs(10);

/// The most uncommitted files a refused `prune` names.
const DIRTY_NAMED: usize = 20;

/// A worktree made for a session that is not recorded yet: undone if the
/// session cannot be made.
#[derive(Debug)]
pub(in crate::core) struct MadeWorktree {
    pub(in crate::core) record: Worktree,
    /// Whether `new` made the branch (an undo deletes it then).
    branch_made: bool,
}

impl Core {
    /// Where branch `branch` of `repo` is checked out: under the
    /// repository (`worktrees` relative, `.worktrees` by default), or in
    /// the configured directory under the repository's name.
    fn worktree_path(&self, repo: &Path, branch: &str) -> PathBuf {
        let place = &self.config.worktrees;
        if place.is_absolute() {
            let name = repo.file_name().map(PathBuf::from).unwrap_or_default();
            place.join(name).join(branch)
        } else {
            repo.join(place).join(branch)
        }
    }

    /// The lock that makes one `worktree add` at a time per repository,
    /// in every daemon.
    fn worktree_lock(&self, repo: &Path) -> Result<File> {
        let dir = self.config.state_dir.join("worktree-locks");
        crate::config::make_private_dir(&dir)?;
        let path = dir.join(format!(
            "{:016x}.lock",
            crate::hashing::fnv1a(repo.as_os_str().as_encoded_bytes())
        ));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&format!("cannot open {}", path.display()), &e))?;
        let what = format!("the worktree lock of {}", repo.display());
        crate::filelock::lock_within(&file, &path, &what, LOCK_WAIT)?;
        Ok(file)
    }

    /// Checks, then `git worktree add`: branch `branch` of the repository
    /// `workspace` is in, new from `base` (default the repository's HEAD)
    /// or, when it exists, checked out as it is (then `base` is refused).
    /// Refusals: EINVAL (not a repository, a bad name, an unknown REF),
    /// EBUSY (the branch is checked out elsewhere), EEXIST (the path
    /// exists); nothing is made then.
    pub(in crate::core) fn add_worktree(
        &self,
        workspace: &Path,
        branch: &str,
        base: Option<&str>,
    ) -> Result<MadeWorktree> {
        let repo = git::top_level(workspace)?;
        git::check_branch_name(&repo, branch)?;
        let exists = git::branch_exists(&repo, branch)?;
        if exists && base.is_some() {
            return Err(Error::invalid(format!(
                "branch {branch} exists in {}: it is checked out as it is, so base= cannot be given",
                repo.display()
            )));
        }
        // An existing branch is compared with the repository's HEAD.
        let base_name = match base {
            Some(b) => b.to_string(),
            None => git::head_name(&repo)?.ok_or_else(|| {
                Error::invalid(format!(
                    "{} has no commit yet: nothing to branch from",
                    repo.display()
                ))
            })?,
        };
        let base_commit = git::commit_of(&repo, &base_name)?.ok_or_else(|| {
            Error::invalid(format!(
                "base={}: no such commit, branch or tag in {}",
                crate::input_checks::preview(&base_name),
                repo.display()
            ))
        })?;
        let path = self.worktree_path(&repo, branch);
        let _one_at_a_time = self.worktree_lock(&repo)?;
        if exists {
            if let Some(at) = git::checked_out_at(&repo, branch)? {
                return Err(Error::busy(format!(
                    "branch {branch} is checked out at {} already",
                    at.display()
                )));
            }
        }
        if path.symlink_metadata().is_ok() {
            return Err(Error::new(
                libc::EEXIST,
                format!("{} exists already: no worktree made there", path.display()),
            ));
        }
        // Kept out of `git status` by the repository's own exclude file,
        // never a tracked `.gitignore`.
        if let Ok(inside) = path.strip_prefix(&repo) {
            if let Some(std::path::Component::Normal(first)) = inside.components().next() {
                let common = git::common_dir(&repo)?;
                git::exclude(&common, &format!("/{}/", first.to_string_lossy()))?;
            }
        }
        git::worktree_add(&repo, &path, branch, (!exists).then_some(&base_commit))?;
        log::info!(
            "worktree {} made for branch {branch} of {}",
            path.display(),
            repo.display()
        );
        Ok(MadeWorktree {
            record: Worktree {
                repo: repo.to_string_lossy().into_owned(),
                path: path.to_string_lossy().into_owned(),
                branch: branch.to_string(),
                base: base_name,
                base_commit,
                pruned: false,
            },
            branch_made: !exists,
        })
    }

    /// Takes back a worktree whose session could not be made: nothing of
    /// the user's is in it yet.
    pub(in crate::core) fn undo_worktree(&self, made: &MadeWorktree) {
        let w = &made.record;
        let repo = Path::new(&w.repo);
        if let Err(e) = git::worktree_discard(repo, Path::new(&w.path)) {
            log::warn!("cannot take back worktree {}: {}", w.path, e.message);
        }
        if made.branch_made {
            if let Err(e) = git::delete_branch(repo, &w.branch) {
                log::warn!("cannot take back branch {}: {}", w.branch, e.message);
            }
        }
    }

    /// The directory a session's agent runs in: its worktree while it has
    /// one, else its workspace.
    pub(in crate::core) fn worktree_dir(&self, key: &SessionKey) -> Option<PathBuf> {
        self.meta(key)
            .worktree
            .filter(|w| !w.pruned)
            .map(|w| PathBuf::from(w.path))
    }

    /// Notes the commit HEAD is on in `dir` at a session's first launch,
    /// for a session without a worktree: what its `diff` is against.
    pub(in crate::core) fn note_base_commit(&self, key: &SessionKey, dir: &Path) {
        let meta = self.meta(key);
        if meta.worktree.is_some() || meta.base_commit.is_some() {
            return;
        }
        let commit = match git::commit_of(dir, "HEAD") {
            Ok(Some(commit)) => commit,
            Ok(None) => return,
            Err(e) => {
                log::debug!("{key}: no base commit: {}", e.message);
                return;
            }
        };
        let noted = self.organize.sidecar.update(|all| {
            if let Some(meta) = all.get_mut(key.as_str()) {
                if meta.base_commit.is_none() {
                    meta.base_commit = Some(commit.clone());
                }
            }
            Ok(())
        });
        if let Err(e) = noted {
            log::warn!("{key}: cannot record its base commit: {}", e.message);
        }
    }

    /// `KEY/diff`: what the session changed in its workspace since its
    /// base, at most [`DIFF_CAP`] bytes; empty without a git workspace.
    /// Runs in the pool.
    pub fn session_diff(&self, key: &SessionKey) -> Result<Vec<u8>> {
        self.require(key)?;
        let deadline = Instant::now() + DIFF_DEADLINE;
        let meta = self.meta(key);
        let (dir, base) = match (&meta.worktree, &meta.base_commit) {
            (Some(w), _) if !w.pruned => {
                let dir = PathBuf::from(&w.path);
                // The base as named (a branch moves on), else as it was.
                let base = match git::commit_of(&dir, &w.base)? {
                    Some(_) => w.base.clone(),
                    None => w.base_commit.clone(),
                };
                let base = git::merge_base(&dir, "HEAD", &base)?.unwrap_or(w.base_commit.clone());
                (dir, base)
            }
            (Some(_), _) => return Ok(Vec::new()),
            (None, Some(commit)) => (self.workspace(key), commit.clone()),
            (None, None) => return Ok(Vec::new()),
        };
        if !dir.is_dir() || git::top_level(&dir).is_err() {
            return Ok(Vec::new());
        }
        git::diff(&dir, &base, DIFF_CAP, deadline)
            .map_err(|e| e.with_context(format_args!("diff of {key}")))
    }

    /// `ctl` `prune`: removes the session's worktree (`git worktree
    /// remove`; its branch and commits stay) when the session is not live
    /// and the worktree holds nothing uncommitted; else EBUSY, naming the
    /// reason or the files.
    pub(in crate::core) fn prune(&self, key: &SessionKey) -> Result<()> {
        let Some(w) = self.meta(key).worktree else {
            return Err(Error::invalid(format!("{key} has no worktree to prune")));
        };
        if w.pruned {
            return Err(Error::invalid(format!(
                "{key}'s worktree {} was pruned already",
                w.path
            )));
        }
        let live = dtach::answers(&self.paths.socket(key))
            || self
                .existing_runtime(key)?
                .is_some_and(|rt| rt.live_client().is_some());
        if live {
            return Err(Error::busy(format!(
                "{key} is live: `echo stop > {key}/ctl` first; its worktree {} is kept",
                w.path
            )));
        }
        // A fork runs in the original's worktree: its directory stays
        // while any session running there is live.
        let runs_there = self
            .organize
            .sidecar
            .all()
            .into_iter()
            .filter(|(other, meta)| {
                other != key.as_str() && meta.workspace.as_ref() == Some(&w.path)
            })
            .filter_map(|(other, _)| SessionKey::parse(&other).ok())
            .find(|other| dtach::answers(&self.paths.socket(other)));
        if let Some(other) = runs_there {
            return Err(Error::busy(format!(
                "{other} is live in {key}'s worktree {}: stop it first",
                w.path
            )));
        }
        let path = PathBuf::from(&w.path);
        let repo = PathBuf::from(&w.repo);
        if path.is_dir() {
            let dirty = git::uncommitted(&path)?;
            if !dirty.is_empty() {
                let named: Vec<&str> = dirty.iter().take(DIRTY_NAMED).map(String::as_str).collect();
                let more = dirty.len().saturating_sub(DIRTY_NAMED);
                return Err(Error::busy(format!(
                    "{key}'s worktree {} has uncommitted changes: {}{}; commit or remove them first",
                    w.path,
                    named.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )));
            }
            git::worktree_remove(&repo, &path)?;
        } else {
            // Removed by hand: git forgets it.
            git::worktree_forget_missing(&repo)?;
        }
        self.organize.sidecar.update(|all| {
            if let Some(w) = all.get_mut(key.as_str()).and_then(|m| m.worktree.as_mut()) {
                w.pruned = true;
            }
            Ok(())
        })?;
        log::info!(
            "{key}: worktree {} removed; branch {} kept",
            w.path,
            w.branch
        );
        Ok(())
    }

    /// `ctl` `fork [id=ID]`: a new session (of the same engine, in the same
    /// directory, with the same model and mode) whose first launch starts
    /// a new conversation as a copy of this one's so far, titled "fork of
    /// TITLE". The original is only read: it may be live. ENOTSUP for an
    /// engine that cannot fork.
    pub(in crate::core) fn fork(&self, key: &SessionKey, id: Option<&str>) -> Result<SessionKey> {
        let engine = self.engine(key)?.clone();
        if engine.fork_args.is_empty() {
            return Err(Error::new(
                libc::ENOTSUP,
                format!(
                    "{key}: engine {} cannot fork a conversation (its config gives no \"fork\" arguments)",
                    engine.name
                ),
            ));
        }
        if !self.conversation_exists(key, &engine) {
            return Err(Error::invalid(format!(
                "{key} has no conversation in {}'s store yet: nothing to fork",
                engine.name
            )));
        }
        let from = self.conversation_id(key);
        let meta = self.meta(key);
        let row = self.row(key);
        let original = row.title().unwrap_or(key.as_str());
        let title =
            crate::core::organize::meta_edit::validate_title(&format!("fork of {original}"))
                .or_else(|_| {
                    crate::core::organize::meta_edit::validate_title(&format!("fork of {key}"))
                })?;
        let asked = crate::core::sessions::root_ctl::NewAsk {
            id: id.map(str::to_string),
            workspace: Some(self.workspace(key).to_string_lossy().into_owned()),
            title,
            model: meta.model.clone(),
            mode: meta.mode.clone(),
            fork_of: Some(from.clone()),
            ..Default::default()
        };
        let made = self.new_session(key.engine(), asked)?;
        log::info!("{key}: forked {from} as {made}");
        Ok(made)
    }
}
