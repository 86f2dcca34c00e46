//! `sessionfs service`, `completions` and `man`: the unit `service install`
//! writes is one systemd accepts (`systemd-analyze --user verify`), its
//! environment file is private from its creation and holds exactly the
//! installing shell's values, its command line really mounts, and status
//! and uninstall round trip. No systemd user manager answers in these
//! tests (each has a runtime directory of its own, with no manager in it),
//! so install prints the commands to run instead of running them.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// A home, a config directory, a runtime directory with no user manager,
/// and the binary copied out of cargo's target directory, as an installed
/// one would be.
struct Place {
    dir: tempfile::TempDir,
}

/// A value with everything an environment file could misread: quotes,
/// `$`, a backquote, backslashes, a line break, a tab and spaces at the end.
const AWKWARD: &str = "a \"b\" 'c' $HOME ${X} `d` \\e \\\\f\nline 2\t ";

impl Place {
    fn new() -> Place {
        let dir = tempfile::Builder::new()
            .prefix("sfs-svc")
            .tempdir_in("/tmp")
            .unwrap();
        for d in ["bin", "home", "config", "run", "tools"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::set_permissions(
            dir.path().join("run"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        std::fs::copy(
            env!("CARGO_BIN_EXE_sessionfs"),
            dir.path().join("bin/sessionfs"),
        )
        .unwrap();
        Place { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The installed binary (the copy).
    fn exe(&self) -> PathBuf {
        std::fs::canonicalize(self.path("bin/sessionfs")).unwrap()
    }

    /// The PATH the installing shell has: one directory of its own first,
    /// so the file is seen to hold this PATH and not some default.
    fn path_var(&self) -> String {
        format!(
            "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            self.path("tools").display()
        )
    }

    fn unit(&self) -> PathBuf {
        self.path("config/systemd/user/sessionfs.service")
    }

    fn env_file(&self) -> PathBuf {
        self.path("config/sessionfs/service.env")
    }

    /// `cmd` with this place's environment and nothing else.
    fn env<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env_clear()
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("XDG_RUNTIME_DIR", self.path("run"))
            .env("PATH", self.path_var())
            .stdin(Stdio::null())
    }

    /// `EXE ARGS` in this place, with `vars` set too.
    fn run(&self, exe: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(exe);
        self.env(&mut cmd).args(args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        // The copy made in `new` may still be open for writing in a child
        // another test thread forked at that moment (its descriptor closes
        // at that child's exec): ETXTBSY until then.
        let mut output = None;
        wait_for(5, "the copied binary to be free to run", || {
            match cmd.output() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => false,
                other => {
                    output = Some(other.unwrap());
                    true
                }
            }
        });
        output.unwrap()
    }

    /// The installed binary's `sessionfs ARGS`.
    fn sessionfs(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        self.run(&self.exe(), args, vars)
    }
}

/// A program only these tests drive, which scripts/test installs from the
/// apt package `package`: without it `test` fails, naming both.
fn require_test_tool(test: &str, tool: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    require(
        test,
        &format!("`{tool}` (apt package {package}, which scripts/test installs)"),
        found,
        None,
    );
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The values of `KEY=` lines of a unit, in order.
fn settings<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

/// The words of an `Exec*=` line as systemd.service(5) reads them: words
/// split on blanks outside quotes, `"..."` and `'...'` quoting, backslash
/// escapes, then the expansions ([`literal`]).
fn exec_words(line: &str) -> Vec<String> {
    let mut words = vec![];
    let mut word: Option<String> = None;
    let mut quote = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (q, '\\') if q != Some('\'') => {
                let escaped = chars.next().expect("a backslash escapes something");
                word.get_or_insert_default().push(match escaped {
                    'n' => '\n',
                    't' => '\t',
                    other => other,
                });
            }
            (_, c) => word.get_or_insert_default().push(c),
        }
    }
    assert!(quote.is_none(), "an unterminated quote in {line:?}");
    words.extend(word);
    words.iter().map(|w| literal(w)).collect()
}

/// A word of an `Exec*=` line after systemd's expansions, which must leave
/// it as written: `%%` is `%` and `$$` is `$`; any other `%` (a specifier,
/// `%h` the home) or `$` (a variable) would be replaced, so it fails here.
fn literal(word: &str) -> String {
    let mut out = String::new();
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        if c == '%' || c == '$' {
            let next = chars.next();
            assert_eq!(next, Some(c), "{c} in {word:?} would be expanded");
        }
        out.push(c);
    }
    out
}

/// An environment file as systemd.exec(5) reads `EnvironmentFile=`:
/// `#`/`;` comment lines, `NAME=VALUE`; in double quotes a backslash makes
/// `"`, `\`, `` ` `` and `$` literal (before anything else it is kept) and
/// a line break is part of the value; in single quotes everything is;
/// blanks outside quotes at either end are dropped.
fn read_env_file(text: &str) -> Vec<(String, String)> {
    let mut vars = vec![];
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        match chars.peek() {
            None => return vars,
            Some('\n') => {
                chars.next();
                continue;
            }
            Some('#' | ';') => {
                while chars.next().is_some_and(|c| c != '\n') {}
                continue;
            }
            _ => {}
        }
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let mut value = String::new();
        // How much of the value quotes keep from the trimming at its end.
        let mut kept = 0;
        let mut quote = None;
        while let Some(c) = chars.next() {
            match (quote, c) {
                (None, '\n') => break,
                (None, ' ' | '\t') if value.is_empty() => {}
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => {
                    quote = None;
                    kept = value.len();
                }
                (Some('"'), '\\') => {
                    let next = chars.next().expect("a backslash escapes something");
                    if !"\"\\`$".contains(next) {
                        value.push('\\');
                    }
                    value.push(next);
                }
                (None, '\\') => value.extend(chars.next()),
                (_, c) => value.push(c),
            }
        }
        assert!(quote.is_none(), "an unterminated quote for {name}");
        let end = kept + value[kept..].trim_end().len();
        value.truncate(end);
        vars.push((name.trim().to_string(), value));
    }
}

/// Whether `path` is a mount point in /proc/self/mounts (whose fields
/// write a space, a tab, a line break and a backslash as octal escapes).
fn mounted(path: &Path) -> bool {
    let want = path.to_str().unwrap();
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .any(|field| {
            field
                .replace("\\040", " ")
                .replace("\\011", "\t")
                .replace("\\012", "\n")
                .replace("\\134", "\\")
                == want
        })
}

#[test]
fn the_test_readers_follow_systemds_rules() {
    assert_eq!(
        exec_words(r#"/a/b "c d" 'e "f"' g\"h "%%i $$j" -"#),
        ["/a/b", "c d", "e \"f\"", "g\"h", "%i $j", "-"]
    );
    assert_eq!(
        read_env_file("# c\nA=\"x \\\"y\\\" \\$z \\q\nw\" \nB='s $ \\'\nC= plain \n"),
        [
            ("A".to_string(), "x \"y\" $z \\q\nw".to_string()),
            ("B".to_string(), "s $ \\".to_string()),
            ("C".to_string(), "plain".to_string()),
        ]
    );
}

#[test]
fn install_writes_a_unit_systemd_accepts_and_an_environment_file_only_its_owner_reads() {
    let test = "install_writes_a_unit_systemd_accepts_and_an_environment_file_only_its_owner_reads";
    require_test_tool(test, "systemd-analyze", "systemd");
    require_tool(test, "strace", "strace");
    let place = Place::new();
    // Blanks, a specifier and a variable in the mount point: each must
    // reach the command line as it is.
    let mnt = place.path("my sessions %h $HOME");
    let log = place.path("strace.log");
    // umask 0: the modes below are the ones sessionfs asks for, not the
    // umask's doing.
    let out = place.run(
        Path::new("strace"),
        &[
            "-f",
            "-qq",
            "-e",
            "trace=open,openat,creat,chmod,fchmod,fchmodat,mkdir,mkdirat",
            "-o",
            log.to_str().unwrap(),
            "sh",
            "-c",
            "umask 0 && exec \"$0\" \"$@\"",
            place.exe().to_str().unwrap(),
            "service",
            "install",
            mnt.to_str().unwrap(),
            "--env",
            "SOME_VAR",
        ],
        &[("SOME_VAR", AWKWARD)],
    );
    assert!(out.status.success(), "{out:?}");

    // One line says what was written; with no user manager, the commands follow.
    let said = text(&out.stdout);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 3, "{said}");
    assert!(lines[0].contains(place.unit().to_str().unwrap()), "{said}");
    assert!(
        lines[0].contains(place.env_file().to_str().unwrap()),
        "{said}"
    );
    assert!(lines[0].contains("no systemd user manager"), "{said}");
    assert_eq!(lines[1].trim(), "systemctl --user daemon-reload");
    assert_eq!(
        lines[2].trim(),
        "systemctl --user enable --now sessionfs.service"
    );
    assert!(
        !place.path("home/.config").exists(),
        "XDG_CONFIG_HOME is where the files go"
    );

    // The unit: what mount/sessionfs.service has, for the installed binary.
    let unit = std::fs::read_to_string(place.unit()).unwrap();
    let one = |key: &str| -> String {
        let found = settings(&unit, key);
        assert_eq!(found.len(), 1, "{key} in\n{unit}");
        found[0].to_string()
    };
    let mnt_text = mnt.to_str().unwrap().to_string();
    let exe_text = place.exe().to_str().unwrap().to_string();
    assert_eq!(
        exec_words(&one("ExecStart")),
        [&exe_text, "mount", &mnt_text]
    );
    let pre = exec_words(&one("ExecStartPre"));
    assert!(
        pre[0].ends_with("/mkdir") && Path::new(&pre[0]).is_file(),
        "{pre:?}"
    );
    assert_eq!(pre[1..], ["-p", &mnt_text]);
    let post = one("ExecStopPost");
    let post = exec_words(
        post.strip_prefix('-')
            .expect("a failed unmount is not a failure"),
    );
    assert!(post[0].ends_with("/fusermount3"), "{post:?}");
    assert_eq!(post[1..], ["-u", "-z", &mnt_text]);
    assert_eq!(one("KillMode"), "process");
    assert_eq!(one("Restart"), "on-failure");
    assert_eq!(one("WantedBy"), "default.target");
    assert_eq!(one("EnvironmentFile"), place.env_file().to_str().unwrap());
    assert_eq!(
        std::fs::metadata(place.unit())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o644
    );

    // The environment file: 0600 in a 0700 directory, PATH and SOME_VAR
    // read back exactly as the installing shell had them.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&place.env_file()), 0o600);
    assert_eq!(mode(place.env_file().parent().unwrap()), 0o700);
    let env_text = std::fs::read_to_string(place.env_file()).unwrap();
    assert_eq!(
        read_env_file(&env_text),
        [
            ("PATH".to_string(), place.path_var()),
            ("SOME_VAR".to_string(), AWKWARD.to_string()),
        ],
        "{env_text}"
    );

    // It never had another mode: created 0600 (under umask 0), and any
    // chmod on it to 0600.
    let calls = std::fs::read_to_string(&log).unwrap();
    let creates: Vec<&str> = calls
        .lines()
        .filter(|l| l.contains("service.env") && l.contains("O_CREAT"))
        .collect();
    assert!(!creates.is_empty(), "no creation of the file in\n{calls}");
    for line in creates {
        assert!(line.contains(", 0600)"), "{line}");
    }
    for line in calls.lines().filter(|l| l.contains("chmod(")) {
        assert!(line.contains(", 0600)"), "{line}");
    }
    let made_dir = format!("{}\", 0700)", place.env_file().parent().unwrap().display());
    assert!(calls.contains(&made_dir), "{made_dir} in\n{calls}");

    // systemd reads the unit without a complaint (it would name each line
    // it ignores, and each program that is not there).
    let out = Command::new("systemd-analyze")
        .env_clear()
        .env("HOME", place.path("home"))
        .env("XDG_CONFIG_HOME", place.path("config"))
        .env("XDG_RUNTIME_DIR", place.path("run"))
        .env("PATH", place.path_var())
        .args(["--user", "verify"])
        .arg(place.unit())
        .output()
        .unwrap();
    assert!(out.status.success(), "systemd-analyze: {out:?}");
    assert_eq!(
        text(&out.stdout) + &text(&out.stderr),
        "",
        "systemd-analyze complains"
    );
}

#[test]
fn install_refuses_a_cargo_build_and_variables_it_cannot_take() {
    let place = Place::new();
    // The binary as cargo built it, in its target directory.
    let out = place.run(
        Path::new(env!("CARGO_BIN_EXE_sessionfs")),
        &["service", "install"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let why = text(&out.stderr);
    assert!(why.contains(env!("CARGO_BIN_EXE_sessionfs")), "{why}");
    assert!(why.contains("cargo's target directory"), "{why}");
    assert!(why.contains("cargo install --locked --path ."), "{why}");
    assert!(!place.unit().exists() && !place.env_file().exists());

    // A variable that is not set: refused, naming it; nothing written.
    let out = place.sessionfs(&["service", "install", "--env", "NOT_SET_HERE"], &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains("NOT_SET_HERE is not set"),
        "{out:?}"
    );
    assert!(!place.unit().exists() && !place.env_file().exists());
    // Not a variable name: a usage error.
    let out = place.sessionfs(&["service", "install", "--env", "A-B"], &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(!place.unit().exists() && !place.env_file().exists());
}

/// A daemon the test started: ended and its mount removed if the test
/// fails before it does so itself.
struct Started {
    child: Child,
    mnt: PathBuf,
}

impl Drop for Started {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if mounted(&self.mnt) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.mnt)
                .status();
        }
    }
}

#[test]
fn the_units_command_line_mounts_and_ends_on_fusermount() {
    let test = "the_units_command_line_mounts_and_ends_on_fusermount";
    require_tool(test, "fusermount3", "fuse3");
    require_tool(test, "dtach", "dtach");
    let place = Place::new();
    let mnt = place.path("where it mounts");
    let out = place.sessionfs(
        &[
            "service",
            "install",
            mnt.to_str().unwrap(),
            "--env",
            "SOME_VAR",
        ],
        &[("SOME_VAR", AWKWARD)],
    );
    assert!(out.status.success(), "{out:?}");
    let unit = std::fs::read_to_string(place.unit()).unwrap();
    let env = read_env_file(&std::fs::read_to_string(place.env_file()).unwrap());

    // As the user manager would: its own environment (HOME, the runtime
    // directory) and the environment file's, nothing else; the commands
    // as the unit says.
    let as_unit = |key: &str| {
        let words = exec_words(settings(&unit, key)[0]);
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..])
            .env_clear()
            .env("HOME", place.path("home"))
            .env("XDG_RUNTIME_DIR", place.path("run"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        cmd
    };
    assert!(!mnt.exists());
    let status = as_unit("ExecStartPre").status().unwrap();
    assert!(status.success() && mnt.is_dir(), "ExecStartPre: {status}");
    let log = place.path("daemon.log");
    let child = as_unit("ExecStart")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut daemon = Started {
        child,
        mnt: mnt.clone(),
    };
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        wait_until(30, || mounted(&mnt)),
        "not mounted; the log:\n{}",
        log_text()
    );
    let listed = Command::new("ls").arg(&mnt).output().unwrap();
    assert!(listed.status.success(), "{listed:?}");
    assert!(
        text(&listed.stdout).lines().any(|l| l == "README"),
        "{listed:?}"
    );
    let daemon_env = std::fs::read(format!("/proc/{}/environ", daemon.child.id())).unwrap();
    assert!(
        daemon_env
            .split(|b| *b == 0)
            .any(|kv| kv == format!("SOME_VAR={AWKWARD}").as_bytes()),
        "the daemon has SOME_VAR as it was"
    );

    let status = Command::new("fusermount3")
        .arg("-u")
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(status.success(), "fusermount3 -u: {status}");
    let mut code = None;
    wait_for(30, "the daemon to exit", || {
        code = daemon.child.try_wait().unwrap().map(|s| s.code());
        code.is_some()
    });
    assert_eq!(code, Some(Some(0)), "the log:\n{}", log_text());
    assert!(!mounted(&mnt));
}

#[test]
fn completions_and_the_man_page_come_from_the_command_line() {
    let test = "completions_and_the_man_page_come_from_the_command_line";
    require_test_tool(test, "groff", "groff-base");
    let place = Place::new();
    let verbs = [
        "mount",
        "ls",
        "prompt",
        "wait",
        "service",
        "completions",
        "man",
    ];
    for shell in ["bash", "zsh", "fish"] {
        let out = place.sessionfs(&["completions", shell], &[]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = text(&out.stdout);
        for verb in verbs.iter().chain(&["install", "uninstall", "status"]) {
            assert!(script.contains(verb), "{shell} completions lack {verb}");
        }
        assert!(
            !script.contains("exec-wrapper"),
            "{shell}: a hidden verb is offered"
        );
    }
    let script = place.path("sessionfs.bash");
    std::fs::write(
        &script,
        place.sessionfs(&["completions", "bash"], &[]).stdout,
    )
    .unwrap();
    let out = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(out.status.success(), "bash -n: {out:?}");
    // Loaded into bash, it completes the verbs of `service`.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            ". '{}'; COMP_WORDS=(sessionfs service ''); COMP_CWORD=2; _sessionfs sessionfs '' service; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let offered = text(&out.stdout);
    for verb in ["install", "status", "uninstall"] {
        assert!(offered.lines().any(|l| l == verb), "{offered}");
    }
    let bad = place.sessionfs(&["completions", "tcsh"], &[]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");

    let out = place.sessionfs(&["man"], &[]);
    assert!(out.status.success(), "{out:?}");
    let page = text(&out.stdout);
    assert!(
        page.starts_with(".TH sessionfs 1 "),
        "{}",
        &page[..80.min(page.len())]
    );
    for verb in verbs {
        assert!(
            page.contains(&format!(".SS \"sessionfs {verb}")),
            "the page lacks {verb}"
        );
    }
    for verb in ["install", "status", "uninstall"] {
        assert!(page.contains(&format!(".SS \"sessionfs service {verb}\"")));
    }
    assert!(!page.contains("exec"), "a hidden verb is on the page");
    // groff reads it without a warning.
    let file = place.path("sessionfs.1");
    std::fs::write(&file, &page).unwrap();
    let out = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stderr), "", "groff warns");
}

#[test]
fn status_and_uninstall_round_trip_without_a_user_manager() {
    let place = Place::new();
    let status = |json: bool| {
        let args: &[&str] = if json {
            &["service", "status", "--json"]
        } else {
            &["service", "status"]
        };
        let out = place.sessionfs(args, &[]);
        assert!(out.status.success(), "{out:?}");
        text(&out.stdout)
    };
    let before = status(false);
    assert!(before.contains("installed: no"), "{before}");
    assert!(before.contains(place.unit().to_str().unwrap()), "{before}");

    // The default mount point; a second install replaces the first.
    for var in ["FIRST", "SECOND"] {
        let out = place.sessionfs(&["service", "install", "--env", var], &[(var, "v")]);
        assert!(out.status.success(), "{out:?}");
    }
    let env = read_env_file(&std::fs::read_to_string(place.env_file()).unwrap());
    assert_eq!(
        env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["PATH", "SECOND"]
    );
    let sessions = place.path("home/sessions");
    let shown = status(false);
    for line in [
        "installed: yes".to_string(),
        format!("unit: {}", place.unit().display()),
        format!("binary: {}", place.exe().display()),
        format!("mount point: {}", sessions.display()),
        format!("environment file: {}", place.env_file().display()),
        "active: unknown (no systemd user manager answers here)".to_string(),
    ] {
        assert!(shown.lines().any(|l| l == line), "{line:?} in\n{shown}");
    }
    let json: serde_json::Value = serde_json::from_str(&status(true)).unwrap();
    assert_eq!(json["installed"], true);
    assert_eq!(json["binary"], place.exe().to_str().unwrap());
    assert_eq!(json["mountpoint"], sessions.to_str().unwrap());
    assert_eq!(json["active"], serde_json::Value::Null);

    // Enabled once where a manager ran: `systemctl enable`'s link.
    let wants = place.path("config/systemd/user/default.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(place.unit(), wants.join("sessionfs.service")).unwrap();
    // The mount point and what is in it are not the service's to remove.
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(sessions.join("kept"), "x").unwrap();

    let out = place.sessionfs(&["service", "uninstall"], &[]);
    assert!(out.status.success(), "{out:?}");
    let said = text(&out.stdout);
    assert!(said.contains("removed"), "{said}");
    assert!(said.contains("nothing was stopped"), "{said}");
    assert!(!place.unit().exists() && !place.env_file().exists());
    assert!(std::fs::symlink_metadata(wants.join("sessionfs.service")).is_err());
    assert!(sessions.join("kept").is_file());
    assert!(status(false).contains("installed: no"));

    // Again: nothing to do, and it says so.
    let out = place.sessionfs(&["service", "uninstall"], &[]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text(&out.stdout).contains("no sessionfs.service is installed"),
        "{out:?}"
    );
}
