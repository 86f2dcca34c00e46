//! The `sessionfs` command line: parse, then call the library.

use clap::{Parser, Subcommand};
use sessionfs::config::Config;
use sessionfs::daemon::{serve, MountOptions};
use sessionfs::runtime::wrapper::{self, WrapperArgs};
use std::path::PathBuf;
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

fn mount_options(raw: &[String]) -> Result<MountOptions, String> {
    let mut options = MountOptions::default();
    for opt in raw.iter().flat_map(|o| o.split(',')) {
        match opt {
            "allow_other" => options.allow_other = true,
            "" | "rw" | "defaults" => {}
            other => return Err(format!("unsupported mount option {other:?}")),
        }
    }
    Ok(options)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
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
            let result = mount_options(&options).and_then(|opts| {
                let config = Config::from_env(config.as_deref()).map_err(|e| e.message)?;
                serve(config, &mountpoint, &opts).map_err(|e| e.message)
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
