//! The `sessionfs` command line: the verbs and their flags, and one
//! function per verb (a file each, or one for a family sharing all of it).
//! The verbs for scripts are thin clients of the mount that serves this
//! state, with exit codes a script can branch on ([`exit::code`]).

pub mod answer;
pub mod archive_older;
pub mod attach;
pub mod completions;
pub mod events;
pub mod exit;
pub mod fork;
pub mod hook;
mod logging;
pub mod ls;
pub mod man;
pub mod mount;
pub mod mounted;
pub mod new;
pub mod prompt;
pub mod service;
pub mod wait;

use crate::runtime::wrapper::{self, WrapperArgs};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "sessionfs",
    version,
    about = "Agent and shell sessions under dtach, mounted as files"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Print JSON: one object (or, for `wait`, an array; for `events`,
    /// JSON lines as they are).
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
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
    Ls(ls::Args),
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
        /// Runs the agent in a new git worktree of the workspace's
        /// repository with BRANCH checked out (made from --base, default
        /// the repository's HEAD, unless it exists).
        #[arg(long, value_name = "BRANCH")]
        worktree: Option<String>,
        /// What a new --worktree branch starts from (a commit, branch or tag).
        #[arg(long, value_name = "REF", requires = "worktree")]
        base: Option<String>,
        /// The model the agent uses (passed at every launch).
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        /// The agent's permission mode (Claude: acceptEdits, auto,
        /// bypassPermissions, dontAsk, manual, plan; Codex: read-only,
        /// workspace-write, danger-full-access).
        #[arg(long, value_name = "MODE")]
        mode: Option<String>,
    },
    /// Starts a new session with KEY's conversation so far (the original
    /// is only read) and prints its key; it runs where KEY runs.
    Fork { key: String },
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
    /// Archives every active session idle since before CUTOFF (RFC 3339,
    /// or an age: 45m, 12h, 30d, 2w), except those whose agent is busy or
    /// waiting when their turn comes. Prints the keys it archived, one a
    /// line; on stderr, those it skipped and the counts.
    ArchiveOlder {
        cutoff: String,
        /// Only list what would be archived (and skipped); change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Prints the root `events` (every session's changes, JSON lines).
    Events {
        /// Keep printing as events come, across rotations, as `tail -F`.
        #[arg(long)]
        follow: bool,
    },
    /// Installs, shows or removes the systemd user service that mounts at
    /// login (~/.config/systemd/user/sessionfs.service).
    Service {
        #[command(subcommand)]
        action: ServiceAction,
    },
    /// Prints the completion script for SHELL (bash, zsh or fish).
    Completions {
        #[arg(value_enum)]
        shell: completions::Shell,
    },
    /// Prints the man page (roff), e.g. to ~/.local/share/man/man1/sessionfs.1.
    Man,
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

/// What `sessionfs service` does.
#[derive(Subcommand, Debug)]
pub enum ServiceAction {
    /// Writes a systemd user unit that mounts MOUNTPOINT (default
    /// ~/sessions) with the binary running this command, and its
    /// environment file (PATH and each --env variable, mode 0600); then,
    /// where a user manager runs, enables and starts it (else prints the
    /// commands to run). Refuses a binary in a cargo target directory.
    Install {
        mountpoint: Option<PathBuf>,
        /// A variable of this environment the service's agents need (e.g.
        /// ANTHROPIC_API_KEY); may be given more than once. PATH is always
        /// kept.
        #[arg(long = "env", value_name = "NAME")]
        env: Vec<String>,
    },
    /// Prints whether the unit is installed, its path, the binary and mount
    /// point it runs, and whether it is active (where a user manager runs).
    Status,
    /// Stops and disables the unit (where a user manager runs) and removes
    /// it and its environment file; the mount point and the sessions stay.
    Uninstall,
}

/// Runs the verb the command line names; its exit code.
pub fn run(cli: Cli) -> ExitCode {
    let json = cli.json;
    match cli.command {
        Command::Mount {
            mountpoint,
            options,
            config,
        } => mount::run(&mountpoint, &options, config.as_deref()),
        Command::Ls(args) => ls::run(args, json),
        Command::Approve { key } => answer::run(&key, "approve", json),
        Command::Deny { key } => answer::run(&key, "deny", json),
        Command::Interrupt { key } => answer::run(&key, "interrupt", json),
        Command::Answer { key, answer } => {
            answer::run(&key, &format!("answer {}", answer.join(" ")), json)
        }
        Command::Wait { keys, any, timeout } => wait::run(&keys, any, timeout, json),
        Command::New {
            engine,
            workspace,
            title,
            worktree,
            base,
            model,
            mode,
        } => {
            let options = new::NewOptions {
                worktree,
                base,
                model,
                mode,
            };
            new::run(
                &engine,
                workspace.as_deref(),
                title.as_deref(),
                &options,
                json,
            )
        }
        Command::Fork { key } => fork::run(&key, json),
        Command::Prompt {
            key,
            text,
            wait,
            timeout,
        } => prompt::run(&key, &text, wait, timeout, json),
        Command::Attach { key } => attach::run(&key),
        Command::ArchiveOlder { cutoff, dry_run } => archive_older::run(&cutoff, dry_run, json),
        Command::Events { follow } => events::run(follow),
        Command::Service { action } => match action {
            ServiceAction::Install { mountpoint, env } => {
                service::run_install(mountpoint.as_deref(), &env)
            }
            ServiceAction::Status => service::run_status(json),
            ServiceAction::Uninstall => service::run_uninstall(),
        },
        Command::Completions { shell } => completions::run(shell),
        Command::Man => man::run(),
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
    }
}
