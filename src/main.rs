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
    /// Print JSON: one object (or, for `wait`, an array; for `events`,
    /// JSON lines as they are).
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Mount and serve in the foreground until unmounted, SIGINT or SIGTERM.
    /// Logs go to stderr (level from RUST_LOG); with `-o background`, to
    /// $XDG_STATE_HOME/sessionfs/sessionfs.log.
    Mount {
        mountpoint: PathBuf,
        /// Comma-separated: `allow_other` (let other users reach the mount;
        /// files stay readable by the mount's owner only, modes 0600/0700),
        /// `share=read` (with `allow_other`, others may also read and list,
        /// never write), `nonempty` (mount over a directory that has files), `background`
        /// (return once the mount is ready, as fstab needs), and mount(8)'s
        /// generic options (rw, nosuid, nodev, noauto, _netdev, x-*, ...),
        /// which are taken and ignored.
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
        /// Only sessions in this state (`state` file: stopped, starting,
        /// idle, busy, waiting, exited).
        #[arg(long, value_name = "STATE")]
        state: Option<String>,
        /// Only the keys, one a line.
        #[arg(long)]
        keys: bool,
        /// Only the sessions' paths in the mount, one a line (a mount must
        /// serve this state).
        #[arg(long, conflicts_with = "keys")]
        paths: bool,
        /// JSON file with more engines and program overrides.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Approves what the agent asks (its one-time yes), once it takes keys.
    /// Exit 0 once the agent left the question; 1 refused (the reason on
    /// stderr): nothing waits for an answer, or it did not take it.
    Approve { key: String },
    /// Refuses what the agent asks (its no, or cancel); exits as `approve`.
    Deny { key: String },
    /// Ends the agent's running turn; exits as `approve`.
    Interrupt { key: String },
    /// Picks option N of the agent's question, or answers it with TEXT.
    Answer {
        key: String,
        /// A number (option N, from 1), or the text.
        #[arg(required = true, num_args = 1..)]
        answer: Vec<String>,
    },
    /// Waits until each session is not starting or busy; prints `KEY
    /// STATE` a line. Exit 0 when all are idle, else the code of the first
    /// (in argument order) that is not: 4 waiting, 5 stopped or exited,
    /// 124 timed out; 1 refused, 2 a usage error.
    Wait {
        #[arg(required = true, num_args = 1..)]
        keys: Vec<String>,
        /// Return at the first that settles.
        #[arg(long)]
        any: bool,
        /// Give up after S seconds (exit 124).
        #[arg(long, value_name = "S")]
        timeout: Option<f64>,
    },
    /// Makes a session and prints its key (`ENGINE:ID`, the id chosen
    /// here, so creators running at once never mix theirs up). Nothing
    /// starts until it is opened (a prompt, `attach`).
    New {
        /// claude, codex, shell, or an engine of the config.
        engine: String,
        /// Where the agent runs: an existing directory outside the mount
        /// (default: this directory, unless it is in the mount; then $HOME).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// The session's title (one line).
        #[arg(long, value_name = "TEXT")]
        title: Option<String>,
    },
    /// Types a prompt (TEXT, or standard input with `-` or no TEXT) and
    /// returns once the agent took it. Exit 0; 1 refused (the reason on
    /// stderr). With `--wait`, then waits as `wait` does, with its codes.
    Prompt {
        key: String,
        /// The prompt; `-` or nothing reads it from standard input.
        text: Vec<String>,
        /// Wait for the turn to end; exit as `wait`.
        #[arg(long)]
        wait: bool,
        /// Give up after S seconds in all (exit 124); a prompt not typed
        /// by then is withdrawn.
        #[arg(long, value_name = "S")]
        timeout: Option<f64>,
    },
    /// Joins the session's dtach master from this terminal (starting it
    /// when stopped). Detach as with dtach (Ctrl+backslash); the session goes on.
    Attach { key: String },
    /// Prints the root `events` (every session's changes, JSON lines).
    Events {
        /// Keep printing as events come, across rotations, as `tail -F`.
        #[arg(long)]
        follow: bool,
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

/// Logs to stderr at `default` unless RUST_LOG says otherwise. fuser's
/// per-request lines and its unmount warnings, and the terminal emulator's
/// notes on each unknown escape, are left out unless RUST_LOG names
/// `fuser` or `vt100` itself.
fn init_logging(default: &str) {
    let mut builder = env_logger::Builder::new();
    builder.parse_filters(default);
    builder.filter_module("fuser", log::LevelFilter::Error);
    // The terminal emulator logs a line per escape it does not know: a
    // program printing binary would fill the log at debug level.
    builder.filter_module("vt100", log::LevelFilter::Warn);
    if let Ok(spec) = std::env::var("RUST_LOG") {
        builder.parse_filters(&spec);
    }
    builder.init();
}

/// Runs a verb against the mount that serves this state: its exit code,
/// or the reason on stderr and the code of the failure.
fn client_verb(
    verb: impl FnOnce(&std::path::Path) -> Result<u8, sessionfs::client::Failed>,
) -> ExitCode {
    init_logging("warn");
    let done = Config::from_env(None)
        .map_err(|e| sessionfs::client::Failed {
            message: e.message,
            code: sessionfs::client::code::USAGE,
        })
        .and_then(|config| sessionfs::client::mount(&config))
        .and_then(|mnt| verb(&mnt));
    match done {
        Ok(code) => ExitCode::from(code),
        Err(failed) => {
            eprintln!("sessionfs: {}", failed.message);
            ExitCode::from(failed.code)
        }
    }
}

/// `sessionfs hook --events FILE --session KEY [--locks DIR] [PAYLOAD]`, run by the agents
/// themselves (Claude Code hooks, Codex notify): records the event and exits
/// 0 whatever happens, so a hook can never fail or stall the agent. Parsed
/// by hand, before clap, for that reason.
fn hook_main(args: &[String]) -> ExitCode {
    let mut events = None;
    let mut session = None;
    let mut locks = None;
    let mut payload = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--events" => events = it.next().map(PathBuf::from),
            "--session" => session = it.next().cloned(),
            "--locks" => locks = it.next().map(PathBuf::from),
            other => payload = Some(other.to_string()),
        }
    }
    if let (Some(events), Some(session)) = (events, session) {
        sessionfs::agent::hooks::run_hook(&events, &session, payload.as_deref(), locks.as_deref());
    }
    ExitCode::SUCCESS
}

/// A usage error (exit 2).
fn usage(message: String) -> sessionfs::client::Failed {
    sessionfs::client::Failed {
        message,
        code: sessionfs::client::code::USAGE,
    }
}

/// `--timeout S` as a duration.
fn seconds(s: Option<f64>) -> Result<Option<std::time::Duration>, sessionfs::client::Failed> {
    match s {
        Some(s) if s.is_finite() && s >= 0.0 => Ok(Some(std::time::Duration::from_secs_f64(s))),
        Some(s) => Err(usage(format!("--timeout {s}: seconds, 0 or more"))),
        None => Ok(None),
    }
}

/// What `wait` found: `KEY STATE` lines, or one JSON array.
fn print_settled(settled: &[(String, String)], json: bool) {
    if json {
        let list: Vec<serde_json::Value> = settled
            .iter()
            .map(|(k, s)| serde_json::json!({"key": k, "state": s}))
            .collect();
        println!("{}", serde_json::Value::Array(list));
    } else {
        for (key, state) in settled {
            println!("{key} {state}");
        }
    }
}

/// Writes an answering `ctl` command; with `json`, prints the session's
/// state after it.
fn answered(
    mnt: &std::path::Path,
    key: &str,
    command: &str,
    json: bool,
) -> Result<u8, sessionfs::client::Failed> {
    sessionfs::client::ctl(mnt, key, command)?;
    if json {
        let status = sessionfs::client::status(mnt, key)?;
        println!(
            "{}",
            serde_json::json!({"key": key, "done": command, "state": status["agent_state"], "waiting_for": status["waiting_for"]})
        );
    }
    Ok(0)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("hook") {
        return hook_main(&args[2..]);
    }
    if let (Some(sessionfs::fs::moved_sessions::PROBE), [path, more @ ..]) = (
        args.get(1).map(String::as_str),
        args.get(2..).unwrap_or_default(),
    ) {
        if more.is_empty() {
            let errno = sessionfs::fs::moved_sessions::probe(std::path::Path::new(path));
            return ExitCode::from(u8::try_from(errno).unwrap_or(255));
        }
        let paths: Vec<std::path::PathBuf> = args[2..].iter().map(Into::into).collect();
        sessionfs::fs::moved_sessions::probe_all(&paths);
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse();
    let json = cli.json;
    match cli.command {
        Command::Approve { key } => client_verb(|mnt| answered(mnt, &key, "approve", json)),
        Command::Deny { key } => client_verb(|mnt| answered(mnt, &key, "deny", json)),
        Command::Interrupt { key } => client_verb(|mnt| answered(mnt, &key, "interrupt", json)),
        Command::Answer { key, answer } => {
            client_verb(|mnt| answered(mnt, &key, &format!("answer {}", answer.join(" ")), json))
        }
        Command::Wait { keys, any, timeout } => client_verb(|mnt| {
            let timeout = seconds(timeout)?;
            let (settled, code) = sessionfs::client::wait(mnt, &keys, any, timeout)?;
            print_settled(&settled, json);
            Ok(code)
        }),
        Command::New {
            engine,
            workspace,
            title,
        } => client_verb(|mnt| {
            let workspace = match workspace {
                Some(dir) => Some(
                    std::path::absolute(&dir).map_err(|e| usage(format!("--workspace: {e}")))?,
                ),
                // Here, unless here is inside the mount (the daemon refuses that).
                None => std::env::current_dir().ok().filter(|d| !d.starts_with(mnt)),
            };
            let key = sessionfs::client::new_session(
                mnt,
                &engine,
                workspace.as_deref(),
                title.as_deref(),
            )?;
            if json {
                let path = mnt.join(&key);
                println!("{}", serde_json::json!({"key": key, "path": path}));
            } else {
                println!("{key}");
            }
            Ok(0)
        }),
        Command::Prompt {
            key,
            text,
            wait,
            timeout,
        } => client_verb(|mnt| {
            let text = if text.is_empty() || text == ["-"] {
                let mut buf = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
                    .map_err(|e| usage(format!("reading the prompt from standard input: {e}")))?;
                buf
            } else {
                text.join(" ").into_bytes()
            };
            let timeout = seconds(timeout)?;
            let until = timeout.map(|t| std::time::Instant::now() + t);
            sessionfs::client::prompt_within(mnt, &key, text, timeout)?;
            if !wait {
                if json {
                    println!("{}", serde_json::json!({"key": key, "taken": true}));
                }
                return Ok(0);
            }
            let left = until.map(|u| u.saturating_duration_since(std::time::Instant::now()));
            let (settled, code) =
                sessionfs::client::wait(mnt, std::slice::from_ref(&key), false, left)?;
            print_settled(&settled, json);
            Ok(code)
        }),
        Command::Attach { key } => client_verb(|mnt| {
            let mut command = sessionfs::client::attach_command(mnt, &key)?;
            // Becomes dtach: its exit status is this command's.
            let err = command.exec();
            Err(sessionfs::client::Failed {
                message: format!("cannot run dtach: {err}"),
                code: sessionfs::client::code::REFUSED,
            })
        }),
        Command::Events { follow } => client_verb(|mnt| {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            sessionfs::client::events(mnt, follow, &mut out).map(|()| 0)
        }),
        Command::Ls {
            q,
            project,
            engine,
            archived,
            limit,
            offset,
            state,
            keys,
            paths,
            config,
        } => {
            init_logging("warn");
            if let Some(s) = state.as_deref() {
                if sessionfs::agent::state::State::parse(s).is_none() {
                    eprintln!("sessionfs: unknown state {s:?}; one of stopped, starting, idle, busy, waiting, exited");
                    return ExitCode::FAILURE;
                }
            }
            // With a state, the whole scope is listed, then filtered and paged here.
            let query = sessionfs::core::organize::query::Query {
                q,
                project,
                engine,
                archived,
                limit: if state.is_some() { None } else { limit },
                offset: if state.is_some() { 0 } else { offset },
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
            let listing = listing.map(|mut listing| {
                if let Some(s) = &state {
                    listing
                        .sessions
                        .retain(|m| m["agent_state"].as_str() == Some(s.as_str()));
                    listing.total = listing.sessions.len();
                    listing.sessions = std::mem::take(&mut listing.sessions)
                        .into_iter()
                        .skip(offset)
                        .take(limit.unwrap_or(usize::MAX))
                        .collect();
                    listing.offset = offset;
                    listing.limit = limit;
                }
                listing
            });
            match listing {
                Ok(listing) => {
                    if paths {
                        let mnt = Config::from_env(config.as_deref())
                            .map_err(|e| e.message)
                            .and_then(|c| sessionfs::client::mount(&c).map_err(|f| f.message));
                        let mnt = match mnt {
                            Ok(mnt) => mnt,
                            Err(message) => {
                                eprintln!("sessionfs: --paths: {message}");
                                return ExitCode::FAILURE;
                            }
                        };
                        let under = if archived { mnt.join("archived") } else { mnt };
                        for m in &listing.sessions {
                            if let Some(k) = m["key"].as_str() {
                                println!("{}", under.join(k).display());
                            }
                        }
                    } else if keys {
                        for m in &listing.sessions {
                            if let Some(k) = m["key"].as_str() {
                                println!("{k}");
                            }
                        }
                    } else if json {
                        println!(
                            "{}",
                            serde_json::to_string_pretty(&listing).expect("listing serialises")
                        );
                    } else {
                        print!(
                            "{}",
                            sessionfs::core::organize::query::render_table(&listing)
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sessionfs: {}", e.message);
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
            init_logging("info");
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
