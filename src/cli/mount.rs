//! `sessionfs mount MOUNTPOINT`: serves the mount, in the foreground or,
//! with `-o background`, from a detached copy of this command.

use super::logging::init_logging;
use crate::config::Config;
use crate::daemon::{serve, MountOptions};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitCode;

/// Generic options that `mount(8)` hands every helper, taken and ignored.
const GENERIC_OPTIONS: &[&str] = &[
    "", "rw", "defaults", "user", "users", "nouser", "auto", "noauto", "_netdev", "nofail",
    "nosuid", "nodev", "suid", "dev", "exec", "noexec", "relatime", "noatime", "atime",
];

/// `-o` as `mount` passes it: `allow_other`, `nonempty`, `background`
/// (detach once mounted, as the fstab form needs), and the generic options.
fn mount_options(raw: &[String]) -> Result<(MountOptions, bool), String> {
    let mut options = MountOptions::default();
    let mut background = false;
    for opt in raw.iter().flat_map(|o| o.split(',')) {
        match opt {
            "allow_other" => options.allow_other = true,
            "nonempty" => options.nonempty = true,
            "share=read" => options.share_read = true,
            "share=none" => options.share_read = false,
            "background" => background = true,
            o if GENERIC_OPTIONS.contains(&o) || o.starts_with("x-") => {}
            other => return Err(format!("unsupported mount option {other:?}")),
        }
    }
    Ok((options, background))
}

/// Starts this same command without `background` in a new session, logging
/// to the state directory, and returns once the mount is ready.
fn detach(config: &Config, mountpoint: &Path) -> Result<(), String> {
    crate::config::make_private_dir(&config.state_dir).map_err(|e| e.message)?;
    let log_path = config.state_dir.join("sessionfs.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
    let args: Vec<String> = std::env::args()
        .skip(1)
        .map(|a| {
            a.split(',')
                .filter(|o| *o != "background")
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(exe)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the daemon: {e}"))?;
    let ready = mountpoint.join("status");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < until {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "the daemon exited ({status}); see {}",
                log_path.display()
            ));
        }
        if ready.exists() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(format!(
        "the mount was not ready in time; see {}",
        log_path.display()
    ))
}

/// Mounts at `mountpoint` and serves until unmounted (with `background`,
/// returns once the detached daemon's mount is ready).
pub fn run(mountpoint: &Path, options: &[String], config: Option<&Path>) -> ExitCode {
    // A person at a terminal reads the ready line and warnings; a log file
    // or a service's journal keeps what the daemon did too.
    use std::io::IsTerminal;
    init_logging(if std::io::stderr().is_terminal() {
        "warn"
    } else {
        "info"
    });
    let result = mount_options(options).and_then(|(opts, background)| {
        let config = Config::from_env(config).map_err(|e| e.message)?;
        if background {
            detach(&config, mountpoint)
        } else {
            serve(config, mountpoint, &opts).map_err(|e| e.message)
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sessionfs: {message}");
            ExitCode::FAILURE
        }
    }
}
