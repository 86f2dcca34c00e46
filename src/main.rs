//! The `sessionfs` command line: parse, then call the library.

use clap::{Parser, Subcommand};
use sessionfs::config::Config;
use sessionfs::daemon::{serve, MountOptions};
use sessionfs::runtime::wrapper::{self, WrapperArgs};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "sessionfs",
    version,
    about = "Agent and shell sessions under dtach, mounted as files"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Mount and serve in the foreground until unmounted, SIGINT or SIGTERM.
    Mount {
        mountpoint: PathBuf,
        /// Mount options; only `allow_other` is taken.
        #[arg(short = 'o', value_name = "OPTIONS")]
        options: Vec<String>,
        /// JSON file with more engines and program overrides.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Lists sessions from the same state, mounted or not (asking the
    /// daemon that serves that state, when one is mounted).
    Ls {
        /// Text to find in the key, title or project.
        #[arg(long)]
        q: Option<String>,
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        engine: Option<String>,
        /// List archived sessions instead of active ones.
        #[arg(long)]
        archived: bool,
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// One JSON object, as sessions.json.
        #[arg(long)]
        json: bool,
        /// JSON file with more engines and program overrides.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Writes a generated conversation store to stdout (tests and benchmarks).
    #[command(hide = true)]
    GenStore {
        /// `claude` or `codex`.
        #[arg(long)]
        kind: String,
        #[arg(long)]
        turns: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Put one line of this many bytes into turn 1.
        #[arg(long)]
        huge_line: Option<usize>,
        /// End with a line that has no newline yet.
        #[arg(long)]
        half_line: bool,
    },
    /// The program dtach runs: drops the lock descriptor, then becomes the agent.
    #[command(hide = true)]
    ExecWrapper {
        #[arg(long)]
        lock_fd: i32,
        #[arg(long)]
        record: PathBuf,
        #[arg(long)]
        key: String,
        #[arg(long)]
        socket: String,
        #[arg(long)]
        cwd: PathBuf,
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
}

/// Generic options that `mount(8)` hands every helper, taken and ignored.
const GENERIC_OPTIONS: &[&str] = &[
    "", "rw", "defaults", "user", "users", "nouser", "auto", "noauto", "_netdev", "nofail",
    "nosuid", "nodev", "suid", "dev", "exec", "noexec", "relatime", "noatime", "atime",
];

/// `-o` as `mount` passes it: `allow_other`, `background` (detach once
/// mounted, as the fstab form needs), and the generic options.
fn mount_options(raw: &[String]) -> Result<(MountOptions, bool), String> {
    let mut options = MountOptions::default();
    let mut background = false;
    for opt in raw.iter().flat_map(|o| o.split(',')) {
        match opt {
            "allow_other" => options.allow_other = true,
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
    sessionfs::config::make_private_dir(&config.state_dir).map_err(|e| e.message)?;
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Ls {
            q,
            project,
            engine,
            archived,
            limit,
            offset,
            json,
            config,
        } => {
            env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
                .init();
            let query = sessionfs::listing::Query {
                q,
                project,
                engine,
                archived,
                limit,
                offset,
            };
            let listing = Config::from_env(config.as_deref()).and_then(|config| {
                // A daemon on the same state knows its live sessions' activity.
                if let Some(listing) = sessionfs::core::listing_from_daemon(&config, &query) {
                    return Ok(listing);
                }
                sessionfs::core::Core::for_listing(config).map(|core| {
                    let listing = core.listing(&query);
                    // What it had to read is kept for the next listing.
                    core.save_catalog();
                    listing
                })
            });
            match listing {
                Ok(listing) => {
                    if json {
                        println!(
                            "{}",
                            serde_json::to_string_pretty(&listing).expect("listing serialises")
                        );
                    } else {
                        print!("{}", sessionfs::listing::render_table(&listing));
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sessionfs: {}", e.message);
                    ExitCode::FAILURE
                }
            }
        }
        Command::GenStore {
            kind,
            turns,
            seed,
            huge_line,
            half_line,
        } => {
            use sessionfs::transcript::testgen::{claude, codex, Shape};
            let mut shape = Shape::new(turns, seed);
            shape.huge_line = huge_line;
            shape.half_line = half_line;
            let bytes = match kind.as_str() {
                "claude" => claude(&shape),
                "codex" => codex(&shape),
                other => {
                    eprintln!("sessionfs: unknown store kind {other:?}");
                    return ExitCode::FAILURE;
                }
            };
            match std::io::Write::write_all(&mut std::io::stdout().lock(), &bytes) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("sessionfs: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::ExecWrapper {
            lock_fd,
            record,
            key,
            socket,
            cwd,
            argv,
        } => wrapper::run(WrapperArgs {
            lock_fd,
            record,
            key,
            socket,
            cwd,
            argv,
        }),
        Command::Mount {
            mountpoint,
            options,
            config,
        } => {
            env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
                .init();
            let result = mount_options(&options).and_then(|(opts, background)| {
                let config = Config::from_env(config.as_deref()).map_err(|e| e.message)?;
                if background {
                    detach(&config, &mountpoint)
                } else {
                    serve(config, &mountpoint, &opts).map_err(|e| e.message)
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
    }
}
