//! `sessionfs completions SHELL`: the shell's completion script on
//! standard output, made from the clap definition.

use super::Cli;
use clap::CommandFactory;
use std::process::ExitCode;

/// The shells a completion script is made for.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// The command line without its hidden verbs, which clap_complete would
/// offer too (the program dtach runs is not for people to type).
fn shown(cmd: &clap::Command) -> clap::Command {
    clap::Command::new("sessionfs")
        .version(env!("CARGO_PKG_VERSION"))
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// Prints the completion script for `shell`.
pub fn run(shell: Shell) -> ExitCode {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut cmd = shown(&Cli::command());
    clap_complete::generate(shell, &mut cmd, "sessionfs", &mut std::io::stdout());
    ExitCode::SUCCESS
}
