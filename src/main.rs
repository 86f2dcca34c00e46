//! The `sessionfs` command line: parse, then call the library.

use clap::Parser;
use sessionfs::cli::{self, Cli};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("hook") {
        return cli::hook::run(&args[2..]);
    }
    if let (Some(sessionfs::fs::moved_sessions::PROBE), [path, more @ ..]) = (
        args.get(1).map(String::as_str),
        args.get(2..).unwrap_or_default(),
    ) {
        if path == sessionfs::fs::moved_sessions::SERVE && more.is_empty() {
            sessionfs::fs::moved_sessions::serve_probes();
            return ExitCode::SUCCESS;
        }
        if more.is_empty() {
            let errno = sessionfs::fs::moved_sessions::probe(std::path::Path::new(path));
            return ExitCode::from(u8::try_from(errno).unwrap_or(255));
        }
        let paths: Vec<std::path::PathBuf> = args[2..].iter().map(Into::into).collect();
        sessionfs::fs::moved_sessions::probe_all(&paths);
        return ExitCode::SUCCESS;
    }
    cli::run(Cli::parse())
}
