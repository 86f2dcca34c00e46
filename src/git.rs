//! Running `git` for sessions' worktrees and diffs: every call with
//! `--no-optional-locks`, no prompt, stdin closed, its own process group
//! (killed whole at the deadline), and its output capped. Callers run in
//! the slow-operation pool, never on a request thread.

use crate::error::{Error, Result};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one git call may run before it is killed.
pub const GIT_DEADLINE: Duration = Duration::from_secs(10);

/// What `git` prints on stderr that is kept for a message.
const STDERR_CAP: usize = 16 << 10;

/// The most a small query (a name, a commit, a list of paths) may print.
const SMALL_CAP: usize = 1 << 20;

/// A finished git call.
#[derive(Debug)]
pub struct Output {
    /// Its exit code; `None` when killed.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
    /// Stdout went past the cap: the call was ended there.
    pub cut: bool,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// Stdout as text, its last line end removed.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout)
            .trim_end_matches('\n')
            .to_string()
    }

    /// git's own reason, one line.
    pub fn reason(&self) -> String {
        let text = self.stderr.trim();
        let line = text
            .lines()
            .find(|l| l.starts_with("fatal:") || l.starts_with("error:"))
            .or_else(|| text.lines().next())
            .unwrap_or("git failed");
        line.to_string()
    }
}

fn read_capped(mut from: impl Read, cap: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 64 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return (out, false),
            Ok(n) => {
                let room = cap - out.len();
                if n > room {
                    out.extend_from_slice(&buf[..room]);
                    return (out, true);
                }
                out.extend_from_slice(&buf[..n]);
            }
        }
    }
}

fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Runs `git --no-optional-locks -C DIR ARGS` with `envs`, keeping at
/// most `cap` bytes of its stdout (past it the call is ended and `cut`
/// set), until `deadline` (past it the call is killed: ETIMEDOUT).
pub fn run_with(
    dir: &Path,
    args: &[&str],
    envs: &[(&str, &Path)],
    cap: usize,
    deadline: Instant,
) -> Result<Output> {
    let mut command = Command::new("git");
    command
        .arg("--no-optional-locks")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("LC_ALL", "C")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its hooks and helpers go with it when it is killed.
        .process_group(0);
    for (name, value) in envs {
        command.env(name, value);
    }
    let mut child = command.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::invalid("git is not installed (not found on PATH)")
        } else {
            Error::io("cannot run git", &e)
        }
    })?;
    let pid = child.id();
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        kill_group(pid);
        let _ = child.wait();
        return Err(Error::new(libc::EIO, "git's output pipes are missing"));
    };
    let errors = std::thread::spawn(move || read_capped(stderr, STDERR_CAP).0);
    let output = std::thread::spawn(move || {
        let (bytes, cut) = read_capped(stdout, cap);
        if cut {
            // Enough: the rest is not read, so git would block on it.
            kill_group(pid);
        }
        (bytes, cut)
    });
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => {
                kill_group(pid);
                let _ = child.wait();
                return Err(Error::io("waiting for git", &e));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            kill_group(pid);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    };
    let (stdout, cut) = output.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&errors.join().unwrap_or_default()).into_owned();
    let Some(status) = status else {
        return Err(Error::new(
            libc::ETIMEDOUT,
            format!(
                "git {} in {} did not finish within its deadline; it was stopped",
                args.first().unwrap_or(&""),
                dir.display()
            ),
        ));
    };
    Ok(Output {
        code: status.code(),
        stdout,
        stderr,
        cut,
    })
}

/// [`run_with`] for a small answer, within [`GIT_DEADLINE`].
pub fn run(dir: &Path, args: &[&str]) -> Result<Output> {
    run_with(dir, args, &[], SMALL_CAP, Instant::now() + GIT_DEADLINE)
}

/// A failed call as an error with git's reason.
fn failed(what: &str, out: &Output) -> Error {
    Error::new(libc::EIO, format!("{what}: {}", out.reason()))
}

/// The top of the work tree `dir` is in: EINVAL when it is in none.
pub fn top_level(dir: &Path) -> Result<PathBuf> {
    let out = run(dir, &["rev-parse", "--show-toplevel"])?;
    if !out.ok() || out.text().is_empty() {
        return Err(Error::invalid(format!(
            "{} is not in a git repository ({})",
            dir.display(),
            out.reason()
        )));
    }
    Ok(PathBuf::from(out.text()))
}

/// The directory every worktree of the repository shares (`.git` of the
/// main one), absolute.
pub fn common_dir(repo: &Path) -> Result<PathBuf> {
    let out = run(
        repo,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    if !out.ok() {
        return Err(failed("git rev-parse --git-common-dir", &out));
    }
    Ok(PathBuf::from(out.text()))
}

/// EINVAL unless git takes `name` as a branch name.
pub fn check_branch_name(repo: &Path, name: &str) -> Result<()> {
    let out = run(repo, &["check-ref-format", "--branch", name])?;
    // `--branch` also expands `@{-1}`: only a name that stays itself.
    if !out.ok() || out.text() != name || name.starts_with('-') {
        return Err(Error::invalid(format!(
            "{name:?} is not a branch name git accepts (git check-ref-format --branch)"
        )));
    }
    Ok(())
}

/// Whether branch `name` exists.
pub fn branch_exists(repo: &Path, name: &str) -> Result<bool> {
    let full = format!("refs/heads/{name}");
    let out = run(repo, &["show-ref", "--verify", "--quiet", &full])?;
    Ok(out.ok())
}

/// The commit `rev` names, or `None`.
pub fn commit_of(repo: &Path, rev: &str) -> Result<Option<String>> {
    if rev.starts_with('-') {
        return Ok(None);
    }
    let peeled = format!("{rev}^{{commit}}");
    let out = run(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &peeled,
        ],
    )?;
    Ok(out.ok().then(|| out.text()).filter(|t| !t.is_empty()))
}

/// What HEAD is on: its branch's short name, else its commit; `None` in a
/// repository without commits.
pub fn head_name(repo: &Path) -> Result<Option<String>> {
    let out = run(repo, &["symbolic-ref", "--quiet", "--short", "HEAD"])?;
    if out.ok() && !out.text().is_empty() {
        return Ok(Some(out.text()));
    }
    commit_of(repo, "HEAD")
}

/// Where branch `name` is checked out, if anywhere.
pub fn checked_out_at(repo: &Path, name: &str) -> Result<Option<PathBuf>> {
    let out = run(repo, &["worktree", "list", "--porcelain", "-z"])?;
    if !out.ok() {
        return Err(failed("git worktree list", &out));
    }
    let full = format!("branch refs/heads/{name}");
    let mut at = None;
    for field in out.stdout.split(|b| *b == 0) {
        let field = String::from_utf8_lossy(field);
        if let Some(path) = field.strip_prefix("worktree ") {
            at = Some(PathBuf::from(path));
        } else if field == full {
            return Ok(at);
        }
    }
    Ok(None)
}

/// `git worktree add`: a new branch `branch` from `new_from`, or the
/// existing `branch` checked out when `new_from` is `None`.
pub fn worktree_add(repo: &Path, path: &Path, branch: &str, new_from: Option<&str>) -> Result<()> {
    let path_text = path.to_string_lossy();
    let mut args = vec!["worktree", "add", "--quiet"];
    match new_from {
        Some(from) => args.extend(["-b", branch, "--end-of-options", &path_text, from]),
        None => args.extend(["--end-of-options", &path_text, branch]),
    }
    let deadline = Instant::now() + WORKTREE_DEADLINE;
    let out = run_with(repo, &args, &[], SMALL_CAP, deadline)?;
    if !out.ok() {
        // Another process got there between the checks and this.
        let reason = out.reason();
        let errno = if reason.contains("already checked out") || reason.contains("already used by")
        {
            libc::EBUSY
        } else if reason.contains("already exists") {
            libc::EEXIST
        } else {
            libc::EIO
        };
        return Err(Error::new(errno, format!("git worktree add: {reason}")));
    }
    Ok(())
}

/// Removes a worktree `new` just made, changes and all (nothing of the
/// user's is in it yet).
pub fn worktree_discard(repo: &Path, path: &Path) -> Result<()> {
    let path_text = path.to_string_lossy();
    let out = run(
        repo,
        &[
            "worktree",
            "remove",
            "--force",
            "--end-of-options",
            &path_text,
        ],
    )?;
    if !out.ok() {
        return Err(failed("git worktree remove --force", &out));
    }
    Ok(())
}

/// Deletes branch `name` that `new` just made.
pub fn delete_branch(repo: &Path, name: &str) -> Result<()> {
    let out = run(repo, &["branch", "-D", "--end-of-options", name])?;
    if !out.ok() {
        return Err(failed("git branch -D", &out));
    }
    Ok(())
}

/// `git worktree prune`: forgets worktrees whose directory is gone.
pub fn worktree_forget_missing(repo: &Path) -> Result<()> {
    let out = run(repo, &["worktree", "prune"])?;
    if !out.ok() {
        return Err(failed("git worktree prune", &out));
    }
    Ok(())
}

/// The best common ancestor of `a` and `b`, if they have one.
pub fn merge_base(dir: &Path, a: &str, b: &str) -> Result<Option<String>> {
    let out = run(dir, &["merge-base", "--end-of-options", a, b])?;
    Ok(out.ok().then(|| out.text()).filter(|t| !t.is_empty()))
}

/// A checkout may take longer than a query.
pub const WORKTREE_DEADLINE: Duration = Duration::from_secs(12);

/// `git worktree remove` (never `--force`: git itself refuses a worktree
/// with changes).
pub fn worktree_remove(repo: &Path, path: &Path) -> Result<()> {
    let path_text = path.to_string_lossy();
    let deadline = Instant::now() + WORKTREE_DEADLINE;
    let out = run_with(
        repo,
        &["worktree", "remove", "--end-of-options", &path_text],
        &[],
        SMALL_CAP,
        deadline,
    )?;
    if !out.ok() {
        return Err(Error::busy(format!(
            "git worktree remove {}: {}",
            path.display(),
            out.reason()
        )));
    }
    Ok(())
}

/// The files with anything uncommitted in the work tree at `dir` (changed,
/// staged, untracked, ignored files excluded), as `git status` names them.
pub fn uncommitted(dir: &Path) -> Result<Vec<String>> {
    let out = run(
        dir,
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
    )?;
    if !out.ok() && !out.cut {
        return Err(failed("git status", &out));
    }
    // Past the cap, the names read so far (the last one may be cut).
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|entry| entry.len() > 3)
        .map(|entry| String::from_utf8_lossy(&entry[3..]).into_owned())
        .collect())
}

/// The most of an `info/exclude` file read to add a line to it.
const EXCLUDE_CAP: usize = 1 << 20;

/// Adds `line` to the repository's `info/exclude` unless a line already
/// says it: never a tracked file.
pub fn exclude(common_dir: &Path, line: &str) -> Result<()> {
    let info = common_dir.join("info");
    let path = info.join("exclude");
    let old = match std::fs::File::open(&path) {
        Ok(file) => {
            let (bytes, cut) = read_capped(file, EXCLUDE_CAP);
            if cut {
                return Err(Error::too_big(
                    &format!("{} (add {line} to it yourself)", path.display()),
                    EXCLUDE_CAP as u64 + 1,
                    EXCLUDE_CAP as u64,
                ));
            }
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io(&format!("cannot read {}", path.display()), &e)),
    };
    if old.lines().any(|l| l.trim() == line) {
        return Ok(());
    }
    std::fs::create_dir_all(&info)
        .map_err(|e| Error::io(&format!("cannot make {}", info.display()), &e))?;
    let mut text = old;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(line);
    text.push('\n');
    // Git's own mode for the file.
    crate::atomic::replace_with(
        &path,
        text.as_bytes(),
        0o644,
        crate::atomic::Durability::Synced,
    )
    .map_err(|e| Error::io(&format!("cannot write {}", path.display()), &e))
}

/// The note that ends a diff cut at its cap.
pub fn cut_note(cap: usize) -> String {
    format!("\n[sessionfs: diff cut at {} MiB]\n", cap >> 20)
}

/// What the work tree at `dir` changed since commit `base`: `git diff`
/// against it, then each untracked file as a new file's diff, without
/// external diff tools, text conversions or colour; at most `cap` bytes,
/// with a last line saying so when cut. Ends by `deadline`.
pub fn diff(dir: &Path, base: &str, cap: usize, deadline: Instant) -> Result<Vec<u8>> {
    const FLAGS: [&str; 3] = ["--no-ext-diff", "--no-textconv", "--no-color"];
    let mut args = vec!["diff"];
    args.extend(FLAGS);
    args.extend(["--end-of-options", base, "--"]);
    let out = run_with(dir, &args, &[], cap + 1, deadline)?;
    if !out.ok() && !out.cut {
        return Err(failed("git diff", &out));
    }
    let mut text = out.stdout;
    let cut = |mut text: Vec<u8>| {
        text.truncate(cap);
        text.extend_from_slice(cut_note(cap).as_bytes());
        text
    };
    if text.len() > cap {
        return Ok(cut(text));
    }
    let others = run_with(
        dir,
        &["ls-files", "--others", "--exclude-standard", "-z"],
        &[],
        SMALL_CAP,
        deadline,
    )?;
    if !others.ok() && !others.cut {
        return Err(failed("git ls-files", &others));
    }
    let mut names: Vec<&[u8]> = others.stdout.split(|b| *b == 0).collect();
    if others.cut {
        // The last name may be cut short; the diff is cut anyway.
        names.pop();
    }
    for name in names.into_iter().filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let mut args = vec!["diff", "--no-index"];
        args.extend(FLAGS);
        args.extend(["--", "/dev/null", &name]);
        let out = run_with(dir, &args, &[], cap + 1 - text.len(), deadline)?;
        // `--no-index` exits 1 when the files differ.
        if out.code != Some(1) && !out.ok() && !out.cut {
            return Err(failed("git diff --no-index", &out));
        }
        text.extend_from_slice(&out.stdout);
        if text.len() > cap {
            return Ok(cut(text));
        }
    }
    if others.cut {
        // Not every untracked file was named: say it is not whole.
        text.extend_from_slice(cut_note(cap).as_bytes());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let out = run(dir, args).unwrap();
        assert!(out.ok(), "git {args:?}: {}", out.stderr);
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        git(p, &["init", "-q", "-b", "main"]);
        git(p, &["config", "user.email", "t@example.com"]);
        git(p, &["config", "user.name", "T"]);
        std::fs::write(p.join("a.txt"), "one\n").unwrap();
        git(p, &["add", "a.txt"]);
        git(p, &["commit", "-q", "-m", "first"]);
        dir
    }

    #[test]
    fn branch_names_are_checked_as_git_checks_them() {
        let r = repo();
        for good in ["feature/x", "fix-1", "a.b"] {
            check_branch_name(r.path(), good).unwrap();
        }
        for bad in ["-x", "a..b", "a b", "@{-1}", "x.lock", "", "a~1"] {
            let e = check_branch_name(r.path(), bad).unwrap_err();
            assert_eq!(e.errno, libc::EINVAL, "{bad}");
        }
    }

    #[test]
    fn a_worktree_is_made_and_its_changes_are_its_diff() {
        let r = repo();
        let p = r.path();
        assert_eq!(head_name(p).unwrap().as_deref(), Some("main"));
        assert!(commit_of(p, "nope").unwrap().is_none());
        let wt = p.join(".worktrees/feature/x");
        worktree_add(p, &wt, "feature/x", Some("main")).unwrap();
        assert_eq!(checked_out_at(p, "feature/x").unwrap(), Some(wt.clone()));
        assert!(branch_exists(p, "feature/x").unwrap());
        std::fs::write(wt.join("a.txt"), "two\n").unwrap();
        std::fs::write(wt.join("new.txt"), "fresh\n").unwrap();
        assert_eq!(uncommitted(&wt).unwrap(), ["a.txt", "new.txt"]);
        let base = commit_of(p, "main").unwrap().unwrap();
        let text = diff(&wt, &base, 1 << 20, Instant::now() + GIT_DEADLINE).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("+two"), "{text}");
        assert!(text.contains("new file mode"), "{text}");
        assert!(text.contains("+fresh"), "{text}");
        let small = diff(&wt, &base, 40, Instant::now() + GIT_DEADLINE).unwrap();
        assert!(String::from_utf8_lossy(&small).ends_with(&cut_note(40)));
        assert_eq!(worktree_remove(p, &wt).unwrap_err().errno, libc::EBUSY);
        let common = common_dir(&wt).unwrap();
        assert_eq!(common, p.join(".git").canonicalize().unwrap());
        exclude(&common, "/.worktrees/").unwrap();
        exclude(&common, "/.worktrees/").unwrap();
        let excluded = std::fs::read_to_string(common.join("info/exclude")).unwrap();
        assert_eq!(excluded.matches("/.worktrees/").count(), 1);
    }

    #[test]
    fn not_a_repository_is_einval() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(top_level(dir.path()).unwrap_err().errno, libc::EINVAL);
    }
}
