//! Writes a generated conversation store to stdout, for the benchmark and
//! for trying the index on stores of any size:
//!
//! ```sh
//! cargo run --release --features testgen --example gen_store -- --kind claude --turns 1000
//! ```

use clap::Parser;
use sessionfs::transcript::testgen::{claude, codex, Shape};
use std::io::Write;
use std::process::ExitCode;

#[derive(Parser, Debug)]
struct Args {
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
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut shape = Shape::new(args.turns, args.seed);
    shape.huge_line = args.huge_line;
    shape.half_line = args.half_line;
    let bytes = match args.kind.as_str() {
        "claude" => claude(&shape),
        "codex" => codex(&shape),
        other => {
            eprintln!("gen_store: unknown store kind {other:?}");
            return ExitCode::FAILURE;
        }
    };
    match std::io::stdout().lock().write_all(&bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen_store: {e}");
            ExitCode::FAILURE
        }
    }
}
