//! `scripts/setup` on machines whose Rust is missing or too old: it either
//! leaves a fitting `cargo` on PATH or stops with one clear line, never
//! with a cargo error. The machine is simulated by a PATH that holds only
//! the ordinary tools the script uses and stand-ins for apt and cargo.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_version_needed() -> String {
    let toml = fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let line = toml
        .lines()
        .find(|l| l.starts_with("rust-version"))
        .unwrap();
    line.split('"').nth(1).unwrap().to_string()
}

/// A machine: a `bin` folder with the real tools the script needs, stand-ins
/// for `apt-get`/`apt-cache`/`sudo`, and an empty home.
struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    /// `rustc_candidate` is what the distribution would install.
    fn new(rustc_candidate: &str) -> Machine {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(dir.path().join("home")).unwrap();
        for tool in [
            "bash",
            "sed",
            "sort",
            "head",
            "id",
            "dirname",
            "env",
            "cat",
            "mkdir",
            "chmod",
            "fusermount3",
            "dtach",
            "cc",
            "less",
            "python3",
            "pgrep",
            "script",
            "vim",
            "jq",
            "git",
            "rsync",
            "sshfs",
            "ssh-keygen",
            "strace",
        ] {
            if let Some(real) = which(tool) {
                std::os::unix::fs::symlink(real, bin.join(tool)).unwrap();
            }
        }
        let m = Machine { dir };
        m.stub("sudo", "exec \"$@\"");
        m.stub(
            "apt-get",
            &format!("echo \"apt-get $*\" >> {}/apt.log", m.dir.path().display()),
        );
        m.stub(
            "apt-cache",
            &format!(
                "case \"$*\" in\n  'policy rustc') printf 'rustc:\\n  Installed: (none)\\n  Candidate: {rustc_candidate}\\n';;\n  *) printf '%s:\\n  Installed: (none)\\n  Candidate: (none)\\n' \"$2\";;\nesac"
            ),
        );
        m
    }

    fn stub(&self, name: &str, body: &str) {
        let path = self.dir.path().join("bin").join(name);
        fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn bin(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// Runs `script` (sourcing `scripts/setup` first) on this machine.
    fn run(&self, script: &str, home: &Path) -> Output {
        Command::new(self.bin().join("bash"))
            .arg("-c")
            .arg(script)
            .current_dir(repo())
            .env_clear()
            .env("PATH", self.bin())
            .env("HOME", home)
            .output()
            .unwrap()
    }

    /// This machine's own toolchain (the one `cargo` is), linked into the
    /// home's `.cargo/bin` as rustup leaves it: the home, and the
    /// RUSTUP_HOME its proxies find their toolchains through.
    fn home_toolchain(&self, cargo: &Path) -> (PathBuf, String) {
        let home = self.dir.path().join("home");
        let cargo_bin = home.join(".cargo/bin");
        fs::create_dir_all(&cargo_bin).unwrap();
        let real_dir = cargo
            .canonicalize()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf();
        for tool in ["cargo", "rustc", "rustup"] {
            if real_dir.join(tool).exists() {
                std::os::unix::fs::symlink(real_dir.join(tool), cargo_bin.join(tool)).unwrap();
            }
        }
        let rustup_home = std::env::var("RUSTUP_HOME")
            .unwrap_or_else(|_| format!("{}/.rustup", std::env::var("HOME").unwrap_or_default()));
        (home, rustup_home)
    }

    fn apt_log(&self) -> String {
        fs::read_to_string(self.dir.path().join("apt.log")).unwrap_or_default()
    }
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(tool))
            .find(|p| p.is_file())
    })
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The one line that says what is needed, and nothing from cargo.
fn assert_clear_refusal(out: &Output, found: &str) {
    let err = stderr(out);
    assert!(!out.status.success(), "setup passed: {err}");
    let needed = format!(
        "setup: sessionfs needs Rust {} or newer (found: {found}); install it with rustup",
        rust_version_needed()
    );
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&needed),
        "last line: {last:?}\nwhole: {err}"
    );
    assert!(!err.contains("lock file"), "{err}");
    assert!(!err.contains("error:"), "{err}");
}

#[test]
fn without_rust_and_with_a_too_old_distribution_rustc_run_stops_with_one_line() {
    let m = Machine::new("1.63.0+dfsg1-2");
    let home = m.dir.path().join("home");
    // scripts/run itself: it must stop before building, with the line.
    let out = m.run("scripts/run /nonexistent-mountpoint", &home);
    assert_clear_refusal(&out, "none");
    assert!(!m
        .apt_log()
        .contains("install -y -qq --no-install-recommends cargo"));
}

#[test]
fn an_old_cargo_on_path_is_not_used() {
    let m = Machine::new("1.63.0+dfsg1-2");
    m.stub("cargo", "echo 'cargo 1.65.0'");
    m.stub("rustc", "echo 'rustc 1.65.0 (897e37553 2022-11-02)'");
    let out = m.run(". scripts/setup", &m.dir.path().join("home"));
    assert_clear_refusal(&out, "1.65.0");
}

#[test]
fn a_new_enough_distribution_rustc_is_installed_from_its_packages() {
    let m = Machine::new("1.95.0+dfsg1-1");
    let out = m.run(". scripts/setup", &m.dir.path().join("home"));
    // The stand-in apt installs nothing, so the script still refuses, but
    // only after asking the distribution for cargo and rustc.
    assert!(
        m.apt_log()
            .contains("install -y -qq --no-install-recommends cargo rustc"),
        "{}",
        m.apt_log()
    );
    assert_clear_refusal(&out, "none");
}

#[test]
fn a_toolchain_in_the_home_cargo_folder_is_found_without_path() {
    // This machine's own toolchain, as rustup leaves it in ~/.cargo/bin.
    let cargo = which("cargo");
    common::require(
        "a_toolchain_in_the_home_cargo_folder_is_found_without_path",
        "`cargo` on PATH to stand as the home toolchain (scripts/setup leaves one there)",
        cargo.is_some(),
        None,
    );
    let cargo = cargo.unwrap();
    let m = Machine::new("1.63.0+dfsg1-2");
    let (home, rustup_home) = m.home_toolchain(&cargo);
    let out = m.run(
        &format!("export RUSTUP_HOME='{rustup_home}'; . scripts/setup && cargo --version"),
        &home,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("cargo "));
    assert_eq!(m.apt_log(), "", "nothing to install");
}

#[test]
fn rustup_where_present_installs_a_toolchain_that_fits() {
    let m = Machine::new("1.63.0+dfsg1-2");
    let home = m.dir.path().join("home");
    // A stand-in rustup whose `toolchain install` leaves new proxies behind.
    m.stub(
        "rustup",
        &format!(
            "echo \"rustup $*\" >> {log}\n[ \"$1 $2\" = 'toolchain install' ] || exit 0\nmkdir -p \"$HOME/.cargo/bin\"\nprintf '#!/bin/bash\\necho cargo 1.95.0\\n' > \"$HOME/.cargo/bin/cargo\"\nprintf '#!/bin/bash\\necho rustc 1.95.0\\n' > \"$HOME/.cargo/bin/rustc\"\nchmod +x \"$HOME/.cargo/bin/cargo\" \"$HOME/.cargo/bin/rustc\"",
            log = m.dir.path().join("rustup.log").display()
        ),
    );
    m.stub("cargo", "echo 'cargo 1.65.0'");
    m.stub("rustc", "echo 'rustc 1.65.0'");
    let out = m.run(". scripts/setup && rustc --version", &home);
    let log = fs::read_to_string(m.dir.path().join("rustup.log")).unwrap_or_default();
    assert!(log.contains("toolchain install stable"), "{log}");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "rustc 1.95.0\n");
}

/// Running needs fuse3 and dtach (and jq, for the README's recipes); what
/// only the tests drive (vim, sshfs, an SSH server...) is installed by
/// `scripts/test`, not here.
#[test]
fn setup_installs_what_running_needs_and_no_test_tool() {
    let cargo = which("cargo");
    common::require(
        "setup_installs_what_running_needs_and_no_test_tool",
        "`cargo` on PATH to stand as the home toolchain (scripts/setup leaves one there)",
        cargo.is_some(),
        None,
    );
    let m = Machine::new("1.63.0+dfsg1-2");
    for tool in [
        "fusermount3",
        "dtach",
        "jq",
        "git",
        "vim",
        "sshfs",
        "strace",
    ] {
        let _ = fs::remove_file(m.bin().join(tool));
    }
    let (home, rustup_home) = m.home_toolchain(&cargo.unwrap());
    let out = m.run(
        &format!("export RUSTUP_HOME='{rustup_home}'; . scripts/setup"),
        &home,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let installs: Vec<String> = m
        .apt_log()
        .lines()
        .filter(|l| l.contains(" install "))
        .map(str::to_string)
        .collect();
    assert_eq!(installs.len(), 1, "{installs:?}");
    let packages: Vec<&str> = installs[0]
        .split_whitespace()
        .skip_while(|w| *w != "install")
        .skip(1)
        .filter(|w| !w.starts_with('-'))
        .collect();
    assert_eq!(packages, ["fuse3", "dtach", "jq", "git"], "{installs:?}");
}
