//! `sessionfs service install|status|uninstall`: a systemd user unit that
//! mounts at login, for the installed binary that runs this command, with
//! the environment its agents need in a private file beside it.

use super::exit::{refused, usage, Failed};
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// The unit's name, as systemctl takes it.
pub const UNIT: &str = "sessionfs.service";

/// Where the unit, its environment file and its enable link live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME/systemd/user/sessionfs.service`.
    pub unit: PathBuf,
    /// `$XDG_CONFIG_HOME/sessionfs/service.env`: PATH and the `--env`
    /// variables, which may be secrets (mode 0600).
    pub env_file: PathBuf,
    /// The link `systemctl enable` makes.
    pub wants: PathBuf,
}

impl Paths {
    /// From HOME and XDG_CONFIG_HOME (used when absolute, as the XDG
    /// specification says; else `~/.config`).
    pub fn from_vars(
        home: Option<OsString>,
        config_home: Option<OsString>,
    ) -> Result<Paths, Failed> {
        let home = home
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .ok_or_else(|| refused("HOME is not set to an absolute path".into()))?;
        let config = config_home
            .map(PathBuf::from)
            .filter(|c| c.is_absolute())
            .unwrap_or_else(|| home.join(".config"));
        let units = config.join("systemd/user");
        Ok(Paths {
            unit: units.join(UNIT),
            wants: units.join("default.target.wants").join(UNIT),
            env_file: config.join("sessionfs/service.env"),
            home,
        })
    }

    fn from_env() -> Result<Paths, Failed> {
        Paths::from_vars(
            std::env::var_os("HOME"),
            std::env::var_os("XDG_CONFIG_HOME"),
        )
    }
}

/// The cargo target directory `exe` was built in, if it is in one: a
/// directory cargo marks as its own (`CACHEDIR.TAG` naming cargo, or
/// `.rustc_info.json`), whatever its name (CARGO_TARGET_DIR may call it
/// anything). `cargo clean` or the next build would take such a binary away.
pub fn cargo_build_dir(exe: &Path) -> Option<PathBuf> {
    exe.ancestors().skip(1).find_map(|dir| {
        let tag = std::fs::read_to_string(dir.join("CACHEDIR.TAG")).unwrap_or_default();
        (tag.contains("created by cargo") || dir.join(".rustc_info.json").is_file())
            .then(|| dir.to_path_buf())
    })
}

/// `path` as text a unit file can hold: UTF-8 with no control characters
/// (a line break would end the setting).
fn unit_path(what: &str, path: &Path) -> Result<String, Failed> {
    path.to_str()
        .filter(|t| !t.chars().any(char::is_control))
        .map(str::to_string)
        .ok_or_else(|| {
            refused(format!(
                "{what} {} cannot be written into a unit file (it must be UTF-8 text without \
                 control characters)",
                path.display()
            ))
        })
}

/// One word of an `Exec*=` command line, read back as `word` by systemd:
/// `%` (specifiers) and `$` (variables) doubled, and a word with anything
/// but plain path characters in double quotes, `\` and `"` escaped.
pub fn exec_word(word: &str) -> String {
    let escaped = word.replace('%', "%%").replace('$', "$$");
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@=%$".contains(c);
    if !escaped.is_empty() && escaped.chars().all(plain) {
        return escaped;
    }
    let mut quoted = String::from("\"");
    for c in escaped.chars() {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

/// The words of an `Exec*=` command line as [`exec_word`] writes them.
pub fn split_exec(line: &str) -> Vec<String> {
    let mut words = vec![];
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return words;
        }
        let mut word = String::new();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match c {
                '"' => quoted = !quoted,
                '\\' => word.extend(chars.next()),
                c if c.is_whitespace() && !quoted => break,
                c => word.push(c),
            }
        }
        words.push(word.replace("%%", "%").replace("$$", "$"));
    }
}

/// A path as a `file:` URI, for `Documentation=` (which splits on spaces
/// and expands `%`).
fn file_uri(path: &str) -> String {
    let mut uri = String::from("file://");
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/._~-".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%%{b:02X}"));
        }
    }
    uri
}

/// What the unit runs.
pub struct UnitSpec<'a> {
    pub exe: &'a str,
    pub mountpoint: &'a str,
    pub env_file: &'a str,
    pub mkdir: &'a str,
    pub fusermount: &'a str,
}

/// The unit's text: what `mount/sessionfs.service` has, with the
/// installed binary and the environment file.
pub fn unit_text(spec: &UnitSpec) -> String {
    let line = |words: &[&str]| {
        words
            .iter()
            .map(|w| exec_word(w))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "# Written by `sessionfs service install`; `sessionfs service uninstall` removes it.
# The agents the daemon starts get only this unit's environment: what the
# user manager gives every service (HOME, USER, XDG_RUNTIME_DIR, ...) and
# EnvironmentFile's PATH and the variables named by `--env`.
# Without lingering (`loginctl enable-linger $USER`), logging out ends the
# user's manager, and the sessions with it.
[Unit]
Description=sessionfs: agent and shell sessions mounted as files
Documentation={readme}

[Service]
Type=simple
EnvironmentFile={env_file}
ExecStartPre={mkdir}
ExecStart={start}
ExecStopPost=-{unmount}
# Stop the daemon only: the dtach masters it started are the sessions, and
# they must outlive it (a restart reattaches to them).
KillMode=process
Restart=on-failure
RestartSec=2

[Install]
WantedBy=default.target
",
        readme = file_uri(&format!("{}/README", spec.mountpoint)),
        env_file = spec.env_file.replace('%', "%%"),
        mkdir = line(&[spec.mkdir, "-p", spec.mountpoint]),
        start = line(&[spec.exe, "mount", spec.mountpoint]),
        unmount = line(&[spec.fusermount, "-u", "-z", spec.mountpoint]),
    )
}

/// The environment file's text: `NAME="VALUE"` a line, with `\`, `"`, `$`
/// and `` ` `` escaped, which is how systemd.exec's `EnvironmentFile=`
/// reads a value back exactly (line breaks included).
pub fn env_file_text(vars: &[(String, String)]) -> String {
    let mut text =
        String::from("# The service's environment, written by `sessionfs service install`.\n");
    for (name, value) in vars {
        text.push_str(name);
        text.push_str("=\"");
        for c in value.chars() {
            if matches!(c, '\\' | '"' | '$' | '`') {
                text.push('\\');
            }
            text.push(c);
        }
        text.push_str("\"\n");
    }
    text
}

/// Whether `name` is a variable name an environment file can set.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// PATH and each variable `names` names, from this environment.
fn service_env(names: &[String]) -> Result<Vec<(String, String)>, Failed> {
    let mut wanted = vec!["PATH".to_string()];
    for name in names {
        if !valid_name(name) {
            return Err(usage(format!(
                "--env {name:?}: a variable name (letters, digits and _)"
            )));
        }
        if !wanted.contains(name) {
            wanted.push(name.clone());
        }
    }
    wanted
        .into_iter()
        .map(|name| {
            let value = std::env::var_os(&name).ok_or_else(|| {
                refused(format!(
                    "{name} is not set here: the service takes it from this environment, so \
                     export it first"
                ))
            })?;
            let value = value.into_string().map_err(|_| {
                refused(format!(
                    "{name} is not UTF-8, which systemd's environment files need"
                ))
            })?;
            Ok((name, value))
        })
        .collect()
}

/// `program` as found on `path` (an executable file in an absolute
/// directory): the units name their programs in full.
fn find_program(program: &str, path: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Whether a systemd user manager answers for this user here:
/// `systemctl --user show-environment` succeeds only when it reaches one
/// (`is-system-running` also fails while one runs degraded).
pub fn manager_runs() -> bool {
    Command::new("systemctl")
        .args(["--user", "show-environment"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `systemctl --user ARGS`: its output, or a refusal with what it said.
fn systemctl(args: &[&str]) -> Result<String, Failed> {
    let out = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| refused(format!("cannot run systemctl: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(refused(format!(
            "`systemctl --user {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// What `systemctl --user is-active` says of the unit (it prints the
/// state whatever its exit code).
fn active_state() -> String {
    Command::new("systemctl")
        .args(["--user", "is-active", UNIT])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Whether this user's manager outlives their last logout.
fn lingering() -> bool {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .is_some_and(|u| Path::new("/var/lib/systemd/linger").join(u.name).exists())
}

/// Writes the environment file: created 0600 (never readable by anyone
/// else, not even while it is written), in a 0700 directory, then put in
/// place whole.
fn write_env_file(path: &Path, text: &str) -> Result<(), Failed> {
    let io = |e: std::io::Error| refused(format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io)?;
    }
    crate::atomic::write_with(path, 0o600, crate::atomic::Durability::Synced, |file| {
        // The umask may have taken bits away; 0600 exactly.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(text.as_bytes())
    })
    .map_err(io)
}

fn write_unit(path: &Path, text: &str) -> Result<(), Failed> {
    let io = |e: std::io::Error| refused(format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    crate::atomic::replace_with(
        path,
        text.as_bytes(),
        0o644,
        crate::atomic::Durability::Synced,
    )
    .map_err(io)
}

/// `sessionfs service install`: writes the unit and its environment file
/// and, where a user manager runs, enables and starts it. What it did, in
/// one line (and the commands to run when no manager answers).
pub fn install(mountpoint: Option<&Path>, env_names: &[String]) -> Result<String, Failed> {
    let paths = Paths::from_env()?;
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| refused(format!("cannot find this binary: {e}")))?;
    if let Some(dir) = cargo_build_dir(&exe) {
        return Err(refused(format!(
            "{} is a build in cargo's target directory {} (`cargo clean` or the next build \
             takes it away): install it with `cargo install --locked --path .` (or \
             scripts/install), then run `~/.cargo/bin/sessionfs service install`",
            exe.display(),
            dir.display()
        )));
    }
    let mountpoint = match mountpoint {
        Some(dir) => {
            std::path::absolute(dir).map_err(|e| usage(format!("{}: {e}", dir.display())))?
        }
        None => paths.home.join("sessions"),
    };
    let vars = service_env(env_names)?;
    let path = &vars[0].1;
    let program = |name: &str, package: &str| {
        find_program(name, path).ok_or_else(|| {
            refused(format!(
                "{name} is not on PATH (package {package}); the service runs it"
            ))
        })
    };
    let mkdir = program("mkdir", "coreutils")?;
    let fusermount = program("fusermount3", "fuse3")?;
    let exe_text = unit_path("the binary", &exe)?;
    let mnt_text = unit_path("the mount point", &mountpoint)?;
    let unit = unit_text(&UnitSpec {
        exe: &exe_text,
        mountpoint: &mnt_text,
        env_file: &unit_path("the environment file", &paths.env_file)?,
        mkdir: &unit_path("mkdir", &mkdir)?,
        fusermount: &unit_path("fusermount3", &fusermount)?,
    });
    write_env_file(&paths.env_file, &env_file_text(&vars))?;
    write_unit(&paths.unit, &unit)?;

    let names: Vec<&str> = vars.iter().map(|(n, _)| n.as_str()).collect();
    let wrote = format!(
        "wrote {} (runs {} mount {}) and {} ({})",
        paths.unit.display(),
        exe.display(),
        mountpoint.display(),
        paths.env_file.display(),
        names.join(", ")
    );
    if !manager_runs() {
        return Ok(format!(
            "sessionfs: {wrote}; no systemd user manager answers here (`systemctl --user \
             show-environment` fails), so where one does, run:\n  systemctl --user \
             daemon-reload\n  systemctl --user enable --now {UNIT}"
        ));
    }
    let was_active = active_state() == "active";
    systemctl(&["daemon-reload"])?;
    systemctl(&["enable", "--now", UNIT])?;
    if was_active {
        // The running daemon still has the old unit's binary and environment.
        systemctl(&["restart", UNIT])?;
    }
    let linger = if lingering() {
        ""
    } else {
        " (logging out ends it and the sessions: `loginctl enable-linger` keeps them)"
    };
    Ok(format!(
        "sessionfs: {wrote}, and started {UNIT}: try `ls {}`{linger}",
        mountpoint.display()
    ))
}

/// What `status` found.
#[derive(Debug, Default)]
pub struct Status {
    pub installed: bool,
    pub unit: PathBuf,
    pub env_file: Option<String>,
    pub binary: Option<String>,
    pub mountpoint: Option<String>,
    /// `systemctl --user is-active`, when a manager answers.
    pub active: Option<String>,
}

/// `sessionfs service status`.
pub fn status() -> Result<Status, Failed> {
    let paths = Paths::from_env()?;
    let mut status = Status {
        unit: paths.unit.clone(),
        active: manager_runs().then(active_state),
        ..Status::default()
    };
    let Ok(text) = std::fs::read_to_string(&paths.unit) else {
        return Ok(status);
    };
    status.installed = true;
    for line in text.lines() {
        if let Some(cmd) = line.strip_prefix("ExecStart=") {
            let words = split_exec(cmd);
            status.binary = words.first().cloned();
            if words.get(1).map(String::as_str) == Some("mount") {
                status.mountpoint = words.get(2).cloned();
            }
        } else if let Some(file) = line.strip_prefix("EnvironmentFile=") {
            status.env_file = Some(file.replace("%%", "%"));
        }
    }
    Ok(status)
}

/// The status as lines of text.
fn status_lines(status: &Status) -> String {
    let mut out = format!(
        "installed: {}\nunit: {}\n",
        if status.installed { "yes" } else { "no" },
        status.unit.display()
    );
    if let Some(binary) = &status.binary {
        let missing = if Path::new(binary).is_file() {
            ""
        } else {
            " (missing)"
        };
        out.push_str(&format!("binary: {binary}{missing}\n"));
    }
    if let Some(mnt) = &status.mountpoint {
        out.push_str(&format!("mount point: {mnt}\n"));
    }
    if let Some(env) = &status.env_file {
        out.push_str(&format!("environment file: {env}\n"));
    }
    match &status.active {
        Some(state) => out.push_str(&format!("active: {state}\n")),
        None => out.push_str("active: unknown (no systemd user manager answers here)\n"),
    }
    out
}

/// `sessionfs service uninstall`: stops and disables the unit where a
/// manager runs, and removes the unit, its link and its environment file.
/// The mount point and the sessions are left as they are.
pub fn uninstall() -> Result<String, Failed> {
    let paths = Paths::from_env()?;
    let installed = paths.unit.exists() || paths.env_file.exists();
    let manager = manager_runs();
    if manager && paths.unit.exists() {
        systemctl(&["disable", "--now", UNIT])?;
    }
    let mut removed = vec![];
    for path in [&paths.wants, &paths.unit, &paths.env_file] {
        match std::fs::remove_file(path) {
            Ok(()) => removed.push(path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(refused(format!("cannot remove {}: {e}", path.display()))),
        }
    }
    if manager {
        systemctl(&["daemon-reload"])?;
        // A unit that failed once stays listed until this.
        let _ = systemctl(&["reset-failed", UNIT]);
    }
    if !installed {
        return Ok(format!(
            "sessionfs: no {UNIT} is installed ({} does not exist)",
            paths.unit.display()
        ));
    }
    let stopped = if manager {
        "stopped and disabled it"
    } else {
        "no systemd user manager answers here, so nothing was stopped"
    };
    Ok(format!(
        "sessionfs: removed {}; {stopped} (the mount point and the sessions are left as they are)",
        removed.join(", ")
    ))
}

/// Prints what a verb said, or its failure on stderr with its code.
fn finish(done: Result<String, Failed>) -> ExitCode {
    match done {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(failed) => {
            eprintln!("sessionfs: {}", failed.message);
            ExitCode::from(failed.code)
        }
    }
}

pub fn run_install(mountpoint: Option<&Path>, env: &[String]) -> ExitCode {
    finish(install(mountpoint, env))
}

pub fn run_status(json: bool) -> ExitCode {
    finish(status().map(|s| {
        if json {
            serde_json::json!({
                "installed": s.installed,
                "unit": s.unit,
                "binary": s.binary,
                "mountpoint": s.mountpoint,
                "env_file": s.env_file,
                "active": s.active,
            })
            .to_string()
        } else {
            status_lines(&s).trim_end().to_string()
        }
    }))
}

pub fn run_uninstall() -> ExitCode {
    finish(uninstall())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_words_read_back_as_written() {
        for word in [
            "/usr/bin/sessionfs",
            "mount",
            "/home/a b/sessions",
            "/home/x/100%/$HOME/\"q\"/back\\slash/'s",
            "",
        ] {
            let line = format!("{} {} tail", exec_word("/bin/x"), exec_word(word));
            assert_eq!(split_exec(&line), ["/bin/x", word, "tail"], "{line}");
        }
        assert_eq!(exec_word("/usr/bin/mkdir"), "/usr/bin/mkdir");
        assert_eq!(exec_word("/a b"), "\"/a b\"");
        assert_eq!(exec_word("/a%b$c"), "/a%%b$$c");
    }

    #[test]
    fn the_environment_file_escapes_what_systemd_would_read_otherwise() {
        let text = env_file_text(&[
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("K".into(), "a \"b\" $c `d` \\e\nf".into()),
        ]);
        assert!(text.contains("PATH=\"/usr/bin:/bin\"\n"), "{text}");
        assert!(
            text.contains("K=\"a \\\"b\\\" \\$c \\`d\\` \\\\e\nf\"\n"),
            "{text}"
        );
    }

    #[test]
    fn paths_follow_xdg_config_home_when_it_is_absolute() {
        let p = Paths::from_vars(Some("/h".into()), Some("/c".into())).unwrap();
        assert_eq!(p.unit, Path::new("/c/systemd/user/sessionfs.service"));
        assert_eq!(p.env_file, Path::new("/c/sessionfs/service.env"));
        let p = Paths::from_vars(Some("/h".into()), Some("rel".into())).unwrap();
        assert_eq!(
            p.unit,
            Path::new("/h/.config/systemd/user/sessionfs.service")
        );
        assert!(Paths::from_vars(None, None).is_err());
    }

    #[test]
    fn variable_names_are_checked() {
        assert!(valid_name("ANTHROPIC_API_KEY") && valid_name("_x1"));
        assert!(!valid_name("1X") && !valid_name("A-B") && !valid_name(""));
    }

    #[test]
    fn a_binary_in_a_cargo_target_directory_is_found_out() {
        let dir = tempfile::tempdir().unwrap();
        let build = dir.path().join("out/debug");
        std::fs::create_dir_all(&build).unwrap();
        std::fs::write(
            dir.path().join("out/CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by cargo.\n",
        )
        .unwrap();
        assert_eq!(
            cargo_build_dir(&build.join("sessionfs")),
            Some(dir.path().join("out"))
        );
        assert_eq!(cargo_build_dir(&dir.path().join("sessionfs")), None);
    }
}
