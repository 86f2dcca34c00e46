//! `sessionfs attach KEY`: joins the session's dtach master from this
//! terminal.

use super::exit::{code, refused, Failed};
use super::mounted::{client_verb, reason, session_dir, status, write_file};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitCode;

/// `sessionfs attach KEY`: opens the session (starting its program when
/// it is stopped, as `echo open > ctl` does) and gives the dtach command
/// that joins its master from this terminal.
pub fn attach_command(mnt: &Path, key: &str) -> Result<std::process::Command, Failed> {
    let dir = session_dir(mnt, key)?;
    if dir.parent() != Some(mnt) {
        return Err(refused(format!("{key} is archived: unarchive it first")));
    }
    write_file(&dir.join("ctl"), b"open\n")
        .map_err(|e| refused(format!("{key}: {}", reason(&dir, &e))))?;
    let status = status(mnt, key)?;
    let socket = status["socket"]
        .as_str()
        .filter(|_| status["master_pid"].is_u64())
        .ok_or_else(|| {
            refused(format!(
                "{key}: no master to join: {}",
                status["error"]
                    .as_str()
                    .unwrap_or("the session did not start")
            ))
        })?;
    let dtach = crate::core::find_dtach().map_err(|e| refused(e.message))?;
    let mut command = std::process::Command::new(dtach);
    // `-r winch`: the program draws its screen again for this terminal.
    command.args(["-a", socket, "-r", "winch"]);
    Ok(command)
}

/// Joins the session's master from this terminal.
pub fn run(key: &str) -> ExitCode {
    client_verb(|mnt| {
        let mut command = attach_command(mnt, key)?;
        // Becomes dtach: its exit status is this command's.
        let err = command.exec();
        Err(Failed {
            message: format!("cannot run dtach: {err}"),
            code: code::REFUSED,
        })
    })
}
