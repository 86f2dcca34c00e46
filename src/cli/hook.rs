//! `sessionfs hook`, run by the agents themselves.

use std::path::PathBuf;
use std::process::ExitCode;

/// `sessionfs hook --events FILE --session KEY [--locks DIR] [PAYLOAD]`, run by the agents
/// themselves (Claude Code hooks, Codex notify): records the event and exits
/// 0 whatever happens, so a hook can never fail or stall the agent. Parsed
/// by hand, before clap, for that reason: `args` are the words after `hook`.
pub fn run(args: &[String]) -> ExitCode {
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
        crate::agent::hooks::run_hook(&events, &session, payload.as_deref(), locks.as_deref());
    }
    ExitCode::SUCCESS
}
