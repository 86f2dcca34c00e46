//! Sessions' git workspaces through a real mount, with real `git`: a
//! worktree per session made by the root `ctl`'s `new` (and `sessionfs
//! new`), each session's `diff`, `prune`, every refusal as a shell sees
//! it; and the real Claude editing a file in its worktree and forked.

mod common;

use common::agent_host::Agents;
use common::*;
use std::path::{Path, PathBuf};

fn git(dir: &Path, args: &str) -> String {
    sh_ok(&format!("git -C '{}' {args}", dir.display()))
}

/// A repository with one commit on `main`.
fn repo_at(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, "init -q -b main");
    git(dir, "config user.email t@example.com");
    git(dir, "config user.name T");
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    git(dir, "add a.txt");
    git(dir, "commit -q -m first");
    dir.to_path_buf()
}

/// `printf LINE > FILE` through the shell (coreutils' printf, which
/// reports a failed write or close): its exit status and stderr.
fn write_line(file: &str, line: &str) -> (bool, String) {
    let out = sh(&format!(
        "env printf '%s\\n' '{}' > {file}",
        line.replace('\'', r"'\''")
    ));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `line` written to the root `ctl` must fail with `errno_words` (as a
/// shell prints it), and the root `status` must say `why`.
fn refused(m: &Mount, line: &str, errno_words: &str, why: &str) {
    let (ok, stderr) = write_line(&m.q("ctl"), line);
    assert!(!ok, "{line} was taken");
    assert!(stderr.contains(errno_words), "{line}: {stderr}");
    let status = m.json("status");
    let error = status["error"].as_str().unwrap_or_default();
    assert!(error.contains(why), "{line}: status error {error:?}");
}

/// `line` written to KEY/ctl must fail with `errno_words`; the session's
/// `status.error` must say `why`.
fn session_refused(m: &Mount, key: &str, line: &str, errno_words: &str, why: &str) {
    let (ok, stderr) = write_line(&m.q(&format!("{key}/ctl")), line);
    assert!(!ok, "{key}: {line} was taken");
    assert!(stderr.contains(errno_words), "{key}: {line}: {stderr}");
    let status = m.json(&format!("{key}/status"));
    let error = status["error"].as_str().unwrap_or_default();
    assert!(error.contains(why), "{key}: {line}: status error {error:?}");
}

fn require_git(test: &str) {
    require_tool(test, "git", "git");
}

#[test]
fn five_worktree_sessions_on_one_repository_each_diff_only_their_own_edit() {
    let test = "five_worktree_sessions_on_one_repository_each_diff_only_their_own_edit";
    require_git(test);
    for (tool, package) in [("less", "less"), ("tail", "coreutils"), ("grep", "grep")] {
        require_tool(test, tool, package);
    }
    let host = Host::new();
    let m = host.mount("mnt");
    let repo = repo_at(&host.path("repo"));
    let keys: Vec<String> = (0..5).map(|i| format!("shell:w{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        let id = key.trim_start_matches("shell:");
        let (ok, said) = write_line(
            &m.q("ctl"),
            &format!(
                "new shell id={id} workspace={} worktree=feature/w{i}",
                repo.display()
            ),
        );
        assert!(ok, "{said}\n{}", m.log_text());
    }
    // Where each is, as meta.json shows it; the repository's own status
    // is clean (the worktrees are excluded in .git/info/exclude, not in a
    // tracked file).
    for (i, key) in keys.iter().enumerate() {
        let meta = m.json(&format!("{key}/meta.json"));
        let path = repo.join(format!(".worktrees/feature/w{i}"));
        assert_eq!(meta["workspace"], repo.display().to_string(), "{meta}");
        assert_eq!(meta["worktree"]["path"], path.display().to_string());
        assert_eq!(meta["worktree"]["branch"], format!("feature/w{i}"));
        assert_eq!(meta["worktree"]["base"], "main");
        assert_eq!(meta["worktree"]["pruned"], false);
        assert!(path.join("a.txt").is_file());
        let status = m.json(&format!("{key}/status"));
        assert_eq!(
            status["worktree"]["path"], meta["worktree"]["path"],
            "{status}"
        );
        assert_eq!(status["worktree"]["base"], "main", "{status}");
    }
    assert_eq!(git(&repo, "status --porcelain"), "");
    let exclude = std::fs::read_to_string(repo.join(".git/info/exclude")).unwrap();
    assert_eq!(exclude.matches("/.worktrees/").count(), 1, "{exclude}");
    assert!(!repo.join(".gitignore").exists());
    // Each shell runs in its worktree and edits a.txt there.
    for (i, key) in keys.iter().enumerate() {
        m.type_line(
            key,
            &format!("echo change-{i} >> a.txt; echo new-{i} > new-{i}.txt; echo do''ne-{i}"),
        );
        m.wait_output(key, &format!("done-{i}"));
    }
    for (i, key) in keys.iter().enumerate() {
        let diff = m.read(&format!("{key}/diff"));
        assert!(diff.contains(&format!("+change-{i}")), "{key}: {diff}");
        assert!(
            diff.contains(&format!("+++ b/new-{i}.txt")),
            "{key}: {diff}"
        );
        assert!(diff.contains("new file mode"), "{key}: {diff}");
        for j in (0..5).filter(|j| *j != i) {
            assert!(!diff.contains(&format!("change-{j}")), "{key}: {diff}");
            assert!(!diff.contains(&format!("new-{j}")), "{key}: {diff}");
        }
        // The tools a person reads it with.
        let file = m.q(&format!("{key}/diff"));
        assert_eq!(sh_ok(&format!("tail -n 1 {file}")), format!("+new-{i}\n"));
        assert_eq!(sh_ok(&format!("grep -c '^+change-{i}$' {file}")), "1\n");
        assert_eq!(sh_ok(&format!("less -F {file} | cat")), diff);
        assert_eq!(
            sh_ok(&format!("wc -c < {file}")).trim(),
            diff.len().to_string()
        );
    }
    // The repository itself is untouched.
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "one\n"
    );
}

#[test]
fn a_session_without_a_worktree_diffs_against_head_at_its_first_launch() {
    let test = "a_session_without_a_worktree_diffs_against_head_at_its_first_launch";
    require_git(test);
    let host = Host::new();
    let m = host.mount("mnt");
    let repo = repo_at(&host.path("repo"));
    let (ok, said) = write_line(
        &m.q("ctl"),
        &format!("new shell id=plain workspace={}", repo.display()),
    );
    assert!(ok, "{said}");
    // Not launched yet: nothing recorded, nothing to show.
    assert_eq!(m.read("shell:plain/diff"), "");
    m.type_line("shell:plain", "echo sta''rted");
    m.wait_output("shell:plain", "started");
    // A commit made after the launch is part of what the session changed.
    m.type_line(
        "shell:plain",
        "echo two >> a.txt && git commit -qam second && echo three >> a.txt && echo comm''itted",
    );
    m.wait_output("shell:plain", "committed");
    let diff = m.read("shell:plain/diff");
    assert!(diff.contains("+two\n+three"), "{diff}");
    // A directory that is no repository: an empty diff.
    let plain = host.path("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let (ok, said) = write_line(
        &m.q("ctl"),
        &format!("new shell id=nogit workspace={}", plain.display()),
    );
    assert!(ok, "{said}");
    m.type_line("shell:nogit", "echo x > f; echo sta''rted");
    m.wait_output("shell:nogit", "started");
    assert_eq!(m.read("shell:nogit/diff"), "");
}

#[test]
fn every_refusal_is_an_errno_a_shell_sees_and_nothing_is_half_made() {
    let test = "every_refusal_is_an_errno_a_shell_sees_and_nothing_is_half_made";
    require_git(test);
    let host = Host::new();
    let m = host.mount("mnt");
    let repo = repo_at(&host.path("repo"));
    let r = repo.display();
    let not_repo = host.path("not-a-repo");
    std::fs::create_dir_all(&not_repo).unwrap();
    let invalid = "Invalid argument";
    refused(
        &m,
        &format!(
            "new shell id=r1 workspace={} worktree=x",
            not_repo.display()
        ),
        invalid,
        "not in a git repository",
    );
    refused(
        &m,
        &format!("new shell id=r2 workspace={r} worktree=x base=no-such-ref"),
        invalid,
        "no such commit",
    );
    refused(
        &m,
        &format!("new shell id=r3 workspace={r} worktree=a..b"),
        invalid,
        "not a branch name",
    );
    refused(
        &m,
        "new shell id=r4 worktree=x",
        invalid,
        "needs workspace=",
    );
    git(&repo, "branch old");
    refused(
        &m,
        &format!("new shell id=r5 workspace={r} worktree=old base=main"),
        invalid,
        "base= cannot be given",
    );
    refused(
        &m,
        &format!("new shell id=r6 workspace={r} worktree=main"),
        "Device or resource busy",
        "is checked out at",
    );
    std::fs::create_dir_all(repo.join(".worktrees/taken")).unwrap();
    refused(
        &m,
        &format!("new shell id=r7 workspace={r} worktree=taken"),
        "File exists",
        "exists already",
    );
    refused(
        &m,
        "new claude model=bad;name",
        invalid,
        "a model name is letters",
    );
    refused(&m, "new claude mode=yolo", invalid, "the modes acceptEdits");
    refused(&m, "new codex mode=plan", invalid, "read-only");
    refused(&m, "new gemini mode=acceptEdits", invalid, "auto_edit");
    refused(
        &m,
        "new opencode mode=yolo",
        invalid,
        "the modes auto, build, plan",
    );
    refused(&m, "new shell model=x", invalid, "takes no model=");
    // Nothing half made: no session, no branch, no worktree.
    let names = sh_ok(&format!("ls {}", m.q("")));
    for id in ["r1", "r2", "r3", "r4", "r5", "r6", "r7"] {
        assert!(!names.contains(&format!("shell:{id}")), "{names}");
    }
    assert_eq!(git(&repo, "branch --list x taken 'a*'"), "");
    assert_eq!(
        git(&repo, "worktree list --porcelain")
            .matches("worktree ")
            .count(),
        1
    );
    // The CLI's flags say the same.
    let out = host.cli(&[
        "new",
        "shell",
        "--workspace",
        &repo.display().to_string(),
        "--worktree",
        "main",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("checked out at"),
        "{out:?}"
    );
    // A shell cannot fork.
    let out = host.cli(&[
        "new",
        "shell",
        "--workspace",
        &r.to_string(),
        "--worktree",
        "cli/made",
    ]);
    assert!(out.status.success(), "{out:?}");
    let key = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        m.json(&format!("{key}/meta.json"))["worktree"]["branch"],
        "cli/made"
    );
    session_refused(&m, &key, "fork", "Operation not supported", "cannot fork");
    // A Claude session with nothing in its store yet has nothing to fork.
    let (ok, said) = write_line(
        &m.q("ctl"),
        "new claude id=c1a0de00-0000-4000-8000-00000000f0f0",
    );
    assert!(ok, "{said}");
    session_refused(
        &m,
        "claude:c1a0de00-0000-4000-8000-00000000f0f0",
        "fork",
        "Invalid argument",
        "nothing to fork",
    );
    let out = host.cli(&["fork", &key]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot fork"),
        "{out:?}"
    );
}

#[test]
fn prune_refuses_a_live_or_dirty_worktree_and_removes_a_clean_one_keeping_its_branch() {
    let test = "prune_refuses_a_live_or_dirty_worktree_and_removes_a_clean_one_keeping_its_branch";
    require_git(test);
    let host = Host::new();
    let m = host.mount("mnt");
    let repo = repo_at(&host.path("repo"));
    let (ok, said) = write_line(
        &m.q("ctl"),
        &format!("new shell id=p workspace={} worktree=topic", repo.display()),
    );
    assert!(ok, "{said}");
    let key = "shell:p";
    let path = repo.join(".worktrees/topic");
    m.type_line(
        key,
        "echo edit >> a.txt; echo fresh > untracked.txt; echo ed''ited",
    );
    m.wait_output(key, "edited");
    session_refused(&m, key, "prune", "Device or resource busy", "is live");
    sh_ok(&format!("echo stop > {}", m.q(&format!("{key}/ctl"))));
    wait_for(20, "the shell to stop", || {
        m.read(&format!("{key}/state")) == "stopped\n"
    });
    session_refused(
        &m,
        key,
        "prune",
        "Device or resource busy",
        "a.txt, untracked.txt",
    );
    assert!(path.join("a.txt").is_file());
    // Archive never removes it either.
    sh_ok(&format!("echo 1 > {}", m.q(&format!("{key}/archive"))));
    assert!(path.join("untracked.txt").is_file());
    sh_ok(&format!(
        "echo 0 > {}",
        m.q(&format!("archived/{key}/archive"))
    ));
    // Committed: nothing uncommitted is left, and prune removes it.
    git(&path, "add -A");
    git(&path, "commit -q -m work");
    let (ok, said) = write_line(&m.q(&format!("{key}/ctl")), "prune");
    assert!(ok, "{said}\n{}", m.read(&format!("{key}/status")));
    assert!(!path.exists());
    assert_eq!(git(&repo, "log -1 --format=%s topic"), "work\n");
    assert_eq!(
        m.json(&format!("{key}/meta.json"))["worktree"]["pruned"],
        true
    );
    session_refused(&m, key, "prune", "Invalid argument", "pruned already");
    assert_eq!(m.read(&format!("{key}/diff")), "");
}

#[test]
fn a_claude_edits_its_worktree_and_a_fork_answers_with_the_history() {
    let test = "a_claude_edits_its_worktree_and_a_fork_answers_with_the_history";
    require_git(test);
    let Some(a) = Agents::start(test) else {
        return;
    };
    let repo = repo_at(&a.env.project);
    let id = "c1a0de00-0000-4000-8000-00000000a0a1";
    let key = format!("claude:{id}");
    let (ok, said) = write_line(
        &a.m.q("ctl"),
        &format!(
            "new claude id={id} workspace={} worktree=agent/edit model=claude-stand-in-1 mode=acceptEdits",
            repo.display()
        ),
    );
    assert!(ok, "{said}\n{}", a.m.log_text());
    // A neighbour in its own worktree, edited by a shell.
    let (ok, said) = write_line(
        &a.m.q("ctl"),
        &format!(
            "new shell id=nb workspace={} worktree=neighbour",
            repo.display()
        ),
    );
    assert!(ok, "{said}");
    a.m.type_line("shell:nb", "echo neighbour >> a.txt; echo ne''ighboured");
    a.m.wait_output("shell:nb", "neighboured");
    let meta = a.m.json(&format!("{key}/meta.json"));
    assert_eq!(meta["model"], "claude-stand-in-1", "{meta}");
    assert_eq!(meta["mode"], "acceptEdits", "{meta}");
    a.api.push_bash("echo from-claude >> a.txt");
    a.api.push_text("Edited a.txt.");
    a.prompt(&key, "append a line to a.txt");
    let mut approvals = 0;
    loop {
        let state = a.wait(&key, 90);
        if state == "idle\n" {
            break;
        }
        assert_eq!(state, "waiting\n", "{}", a.read(&key, "screen"));
        approvals += 1;
        assert!(
            approvals < 4,
            "asked again and again: {}",
            a.read(&key, "screen")
        );
        let (code, _, said) = a.cli(&["approve", &key]);
        assert_eq!(code, 0, "{said}\n{}", a.read(&key, "screen"));
    }
    // The model and mode reached the real CLI.
    let turns = a.api.turns();
    assert_eq!(
        turns[0].json()["model"],
        "claude-stand-in-1",
        "{}",
        a.api.log()
    );
    let worktree = repo.join(".worktrees/agent/edit");
    assert_eq!(
        std::fs::read_to_string(worktree.join("a.txt")).unwrap(),
        "one\nfrom-claude\n"
    );
    let diff = a.read(&key, "diff");
    assert!(diff.contains("+from-claude"), "{diff}");
    assert!(!diff.contains("neighbour"), "{diff}");
    let neighbour = a.read("shell:nb", "diff");
    assert!(neighbour.contains("+neighbour"), "{neighbour}");
    assert!(!neighbour.contains("from-claude"), "{neighbour}");
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "one\n"
    );

    // The fork: a new conversation that starts with this one's history;
    // the original's store is only read.
    let original = a
        .env
        .claude_stores()
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy() == format!("{id}.jsonl"))
        .expect("the original's conversation");
    let before = std::fs::read(&original).unwrap();
    let (code, out, said) = a.cli(&["fork", &key]);
    assert_eq!(code, 0, "{said}");
    let fork = out.trim().to_string();
    assert!(fork.starts_with("claude:"), "{out}");
    let fork_meta = a.m.json(&format!("{fork}/meta.json"));
    assert_eq!(fork_meta["forked_from"], id, "{fork_meta}");
    assert_eq!(fork_meta["model"], "claude-stand-in-1", "{fork_meta}");
    assert!(
        fork_meta["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("fork of ")),
        "{fork_meta}"
    );
    a.api.push_text("Forked answer.");
    a.prompt(&fork, "what did you change?");
    assert_eq!(a.wait(&fork, 90), "idle\n", "{}", a.read(&fork, "screen"));
    let last = a.api.turns().last().unwrap().body.clone();
    assert!(last.contains("append a line to a.txt"), "{last}");
    assert!(last.contains("what did you change?"), "{last}");
    let fork_id = fork.trim_start_matches("claude:");
    assert!(
        a.env
            .claude_stores()
            .iter()
            .any(|p| p.file_name().unwrap().to_string_lossy() == format!("{fork_id}.jsonl")),
        "the fork writes its own conversation: {:?}",
        a.env.claude_stores()
    );
    let transcript = a.read(&fork, "transcript/last");
    assert!(transcript.contains("Forked answer."), "{transcript}");
    assert_eq!(
        std::fs::read(&original).unwrap(),
        before,
        "the original was written"
    );
    // The fork runs in the original's worktree: it is not pruned under it.
    sh_ok(&format!("echo stop > {}", a.m.q(&format!("{key}/ctl"))));
    wait_for(20, "the original to stop", || {
        a.read(&key, "state") == "stopped\n"
    });
    let (ok, said) = write_line(&a.m.q(&format!("{key}/ctl")), "prune");
    assert!(!ok && said.contains("Device or resource busy"), "{said}");
    let error = a.m.json(&format!("{key}/status"))["error"].clone();
    assert!(
        error
            .as_str()
            .is_some_and(|e| e.contains(&format!("{fork} is live"))),
        "{error}"
    );
    assert!(worktree.is_dir());
    // Resumed, it asks for the same model and mode again.
    a.api.push_text("Resumed.");
    a.prompt(&key, "are you back?");
    assert_eq!(a.wait(&key, 90), "idle\n", "{}", a.read(&key, "screen"));
    let resumed = a.api.turns().last().unwrap().json();
    assert_eq!(resumed["model"], "claude-stand-in-1");
    let log = a.m.log_text();
    let relaunch = log
        .lines()
        .rfind(|l| l.contains(&format!("{key}: LAUNCH")))
        .unwrap_or_default();
    assert!(
        relaunch.contains("\"--resume\"")
            && relaunch.contains("\"--permission-mode\", \"acceptEdits\""),
        "{relaunch}"
    );
}

#[test]
fn a_codex_fork_starts_from_the_conversation_so_far() {
    let test = "a_codex_fork_starts_from_the_conversation_so_far";
    let Some(a) = Agents::start(test) else {
        return;
    };
    let key = a.session("codex", "orig");
    a.api.push_text("Codex answer one.");
    a.prompt(&key, "remember the word pelican");
    assert_eq!(a.wait(&key, 60), "idle\n");
    let (code, out, said) = a.cli(&["fork", &key]);
    assert_eq!(code, 0, "{said}");
    let fork = out.trim().to_string();
    assert!(fork.starts_with("codex:"), "{out}");
    a.api.push_text("Forked codex answer.");
    a.prompt(&fork, "which word was it?");
    assert_eq!(a.wait(&fork, 90), "idle\n", "{}", a.read(&fork, "screen"));
    let last = a.api.turns().last().unwrap().body.clone();
    assert!(last.contains("remember the word pelican"), "{last}");
    assert!(last.contains("which word was it?"), "{last}");
    wait_for(20, "the fork's own conversation", || {
        a.read(&fork, "transcript/last")
            .contains("Forked codex answer.")
    });
    let original = a.read(&key, "transcript/last");
    assert!(original.contains("Codex answer one."), "{original}");
    assert!(!original.contains("Forked codex answer."), "{original}");
    let fork_meta = a.m.json(&format!("{fork}/meta.json"));
    assert_ne!(
        fork_meta["conversation"],
        a.m.json(&format!("{key}/meta.json"))["conversation"]
    );
}

#[test]
fn a_base_an_existing_branch_and_a_diff_past_its_cap() {
    let test = "a_base_an_existing_branch_and_a_diff_past_its_cap";
    require_git(test);
    require_tool(test, "tail", "coreutils");
    let host = Host::new();
    let m = host.mount("mnt");
    let repo = repo_at(&host.path("repo"));
    git(&repo, "tag v1");
    std::fs::write(repo.join("a.txt"), "one\ntwo\n").unwrap();
    git(&repo, "commit -q -am second");
    git(&repo, "branch existing");
    let r = repo.display();
    // A new branch from a tag: it starts there, and its diff is its own.
    let (ok, said) = write_line(
        &m.q("ctl"),
        &format!("new shell id=tagged workspace={r} worktree=from-v1 base=v1"),
    );
    assert!(ok, "{said}");
    let meta = m.json("shell:tagged/meta.json");
    assert_eq!(meta["worktree"]["base"], "v1", "{meta}");
    let tagged = repo.join(".worktrees/from-v1");
    assert_eq!(
        std::fs::read_to_string(tagged.join("a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(m.read("shell:tagged/diff"), "");
    // An existing branch is checked out as it is, measured against HEAD.
    let (ok, said) = write_line(
        &m.q("ctl"),
        &format!("new shell id=existing workspace={r} worktree=existing"),
    );
    assert!(ok, "{said}");
    let meta = m.json("shell:existing/meta.json");
    assert_eq!(meta["worktree"]["base"], "main", "{meta}");
    assert_eq!(
        git(&repo, "rev-parse existing"),
        git(&repo, "rev-parse main")
    );
    // Past 4 MiB the diff is cut, and its last line says so.
    m.type_line(
        "shell:existing",
        "head -c 6000000 /dev/zero | tr '\\0' 'x' | fold -w 100 > big.txt; echo wro''te",
    );
    m.wait_output("shell:existing", "wrote");
    let diff = std::fs::read(m.path("shell:existing/diff")).unwrap();
    let note = "[sessionfs: diff cut at 4 MiB]\n";
    assert!(diff.len() <= (4 << 20) + note.len() + 1, "{}", diff.len());
    assert!(diff.ends_with(note.as_bytes()));
    assert_eq!(
        sh_ok(&format!("tail -n 1 {}", m.q("shell:existing/diff"))),
        note
    );
}

/// A prompt to a real agent that answers with one shell command, then
/// text; any permission it asks for is approved. Returns how many were.
fn agent_runs(a: &Agents, key: &str, command: &str, prompt: &str) -> usize {
    a.api.push_bash(command);
    a.api.push_text("Done.");
    a.prompt(key, prompt);
    let mut approvals = 0;
    loop {
        let state = a.wait(key, 90);
        if state == "idle\n" {
            return approvals;
        }
        assert_eq!(state, "waiting\n", "{key}: {}", a.read(key, "screen"));
        approvals += 1;
        assert!(
            approvals < 4,
            "{key} asks again and again: {}",
            a.read(key, "screen")
        );
        let (code, _, said) = a.cli(&["approve", key]);
        assert_eq!(code, 0, "{said}\n{}", a.read(key, "screen"));
    }
}

#[test]
fn five_real_agents_in_five_worktrees_each_diff_only_their_own_edit() {
    let test = "five_real_agents_in_five_worktrees_each_diff_only_their_own_edit";
    require_git(test);
    let Some(a) = Agents::start(test) else {
        return;
    };
    let repo = repo_at(&a.env.project);
    // Three Claudes and two Codexes, one branch each.
    let keys: Vec<String> = (0..5)
        .map(|i| {
            let (engine, id) = if i < 3 {
                ("claude", format!("c1a0de00-0000-4000-8000-0000000005a{i}"))
            } else {
                ("codex", format!("five{i}"))
            };
            let (ok, said) = write_line(
                &a.m.q("ctl"),
                &format!(
                    "new {engine} id={id} workspace={} worktree=agents/a{i}",
                    repo.display()
                ),
            );
            assert!(ok, "{said}\n{}", a.m.log_text());
            format!("{engine}:{id}")
        })
        .collect();
    // One at a time: the stand-in answers in the order it is asked.
    for (i, key) in keys.iter().enumerate() {
        agent_runs(
            &a,
            key,
            &format!("echo agent-{i} >> a.txt && echo made-{i} > made-{i}.txt"),
            &format!("edit the files, agent {i}"),
        );
        let worktree = repo.join(format!(".worktrees/agents/a{i}"));
        assert_eq!(
            std::fs::read_to_string(worktree.join("a.txt")).unwrap(),
            format!("one\nagent-{i}\n"),
            "{key}: {}",
            a.read(key, "screen")
        );
        sh_ok(&format!("echo stop > {}", a.m.q(&format!("{key}/ctl"))));
    }
    for (i, key) in keys.iter().enumerate() {
        let diff = a.read(key, "diff");
        assert!(diff.contains(&format!("+agent-{i}\n")), "{key}: {diff}");
        assert!(diff.contains(&format!("+made-{i}\n")), "{key}: {diff}");
        for j in (0..5).filter(|j| *j != i) {
            assert!(!diff.contains(&format!("agent-{j}")), "{key}: {diff}");
        }
        // Each still its own conversation: the Codexes found theirs in
        // their worktrees.
        let last = a.read(key, "transcript/last");
        assert!(
            last.contains(&format!("edit the files, agent {i}")),
            "{key}: {last}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(git(&repo, "status --porcelain"), "");
}
