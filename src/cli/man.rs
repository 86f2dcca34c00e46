//! `sessionfs man`: the man page, as roff on standard output, made from the
//! same clap definition as `--help`, so the two never disagree.

use super::Cli;
use clap::CommandFactory;
use std::io::Write;
use std::process::ExitCode;

/// clap_mangen's rendering of one section of `cmd`, without its `.SH`
/// heading line, to go under a heading of this page.
fn section_body(
    cmd: &clap::Command,
    render: fn(&clap_mangen::Man, &mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<Vec<u8>> {
    let mut text = vec![];
    render(&clap_mangen::Man::new(cmd.clone()), &mut text)?;
    Ok(text
        .split_inclusive(|b| *b == b'\n')
        .filter(|line| !line.starts_with(b".SH "))
        .flatten()
        .copied()
        .collect())
}

/// A verb's synopsis line, each flag with its value's name (clap_mangen's
/// leaves the values out).
fn synopsis(cmd: &clap::Command) -> String {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name());
    let mut line = format!("\\fB{}\\fR", name.replace('-', "\\-"));
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let value = arg
            .get_value_names()
            .map(|v| v.join(" "))
            .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
        let flag = match (arg.get_long(), arg.get_short()) {
            (Some(long), _) => format!("\\-\\-{long}"),
            (None, Some(short)) => format!("\\-{short}"),
            (None, None) => String::new(),
        };
        let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
        let mut word = if arg.is_positional() {
            format!("\\fI{value}\\fR")
        } else if takes_value {
            format!("\\fB{flag}\\fR \\fI{value}\\fR")
        } else {
            format!("\\fB{flag}\\fR")
        };
        let many = matches!(arg.get_action(), clap::ArgAction::Append)
            || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
        if many {
            word.push_str("...");
        }
        if !arg.is_required_set() {
            word = format!("[{word}]");
        }
        line.push(' ');
        line.push_str(&word);
    }
    line
}

/// One verb under COMMANDS: its synopsis, what it does and its flags; a
/// verb with verbs of its own (`service`) gives each of them instead.
fn verb(out: &mut Vec<u8>, cmd: &clap::Command) -> std::io::Result<()> {
    // `--json` and `--help` are on every verb: the page names them once.
    let cmd = cmd.clone().mut_args(|a| match a.get_id().as_str() {
        "json" | "help" => a.hide(true),
        _ => a,
    });
    let subs: Vec<&clap::Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    if !subs.is_empty() {
        return subs.into_iter().try_for_each(|sub| verb(out, sub));
    }
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name());
    writeln!(out, ".SS \"{name}\"\n{}\n.PP", synopsis(&cmd))?;
    out.extend(section_body(
        &cmd,
        clap_mangen::Man::render_description_section,
    )?);
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        out.extend(section_body(
            &cmd,
            clap_mangen::Man::render_options_section,
        )?);
    }
    Ok(())
}

/// The whole page: clap_mangen's title, name, synopsis and options, every
/// verb in full under COMMANDS (one page, where clap_mangen would make one
/// per verb), the exit codes and the files the service verbs write.
pub fn page() -> std::io::Result<Vec<u8>> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = vec![];
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    writeln!(out, ".SH COMMANDS")?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        verb(&mut out, sub)?;
    }
    out.extend_from_slice(
        br#".SH "EXIT STATUS"
.TP
0
All sessions named are idle, or the command was taken.
.TP
1
Refused: the reason is on standard error.
.TP
2
A usage error.
.TP
4
The agent waits for an answer.
.TP
5
Stopped, or exited.
.TP
124
The timeout passed first.
.SH FILES
.TP
~/.config/systemd/user/sessionfs.service
The user unit \fBsessionfs service install\fR writes ($XDG_CONFIG_HOME/systemd/user when it is set).
.TP
~/.config/sessionfs/service.env
The unit's environment: PATH and the variables named by \fB\-\-env\fR (mode 0600).
"#,
    );
    man.render_version_section(&mut out)?;
    Ok(preamble_once(&out))
}

/// `text` with clap_mangen's two-line preamble (it defines the string
/// `Aq`, and each rendered part starts with it) once, right after the
/// `.TH` title, so the page starts with its title as man pages do.
fn preamble_once(text: &[u8]) -> Vec<u8> {
    const PREAMBLE: [&[u8]; 2] = [b".ie \\n(.g .ds Aq \\(aq\n", b".el .ds Aq '\n"];
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|b| *b == b'\n') {
        if PREAMBLE.contains(&line) {
            continue;
        }
        out.extend_from_slice(line);
        if line.starts_with(b".TH ") {
            PREAMBLE.iter().for_each(|p| out.extend_from_slice(p));
        }
    }
    out
}

/// Prints the page.
pub fn run() -> ExitCode {
    match page().and_then(|page| std::io::stdout().lock().write_all(&page)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sessionfs: cannot print the man page: {e}");
            ExitCode::FAILURE
        }
    }
}
