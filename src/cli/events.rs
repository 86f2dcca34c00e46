//! `sessionfs events`: prints the root `events`.

use super::exit::{refused, Failed};
use super::mounted::client_verb;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// `sessionfs events`: the root `events` as it is, and with `follow`, as
/// it grows. A rotation gives the name a new file (a new inode): what the
/// old one still held is printed, then the new one from its start, as
/// `tail -F` does.
pub fn events(mnt: &Path, follow: bool, out: &mut dyn Write) -> Result<(), Failed> {
    use std::os::unix::fs::MetadataExt;
    let path = mnt.join("events");
    let io = |e: std::io::Error| refused(format!("{}: {e}", path.display()));
    let open = || -> Result<(std::fs::File, u64), Failed> {
        let file = std::fs::File::open(&path).map_err(io)?;
        let ino = file.metadata().map_err(io)?.ino();
        Ok((file, ino))
    };
    let (mut file, mut ino) = open()?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n > 0 {
            out.write_all(&buf[..n]).map_err(io)?;
            continue;
        }
        if !follow {
            return Ok(());
        }
        out.flush().map_err(io)?;
        let now = std::fs::metadata(&path).map_err(io)?.ino();
        if now != ino {
            // Lines the old file took after the read above, before it was
            // moved aside, come first.
            loop {
                let n = file.read(&mut buf).map_err(io)?;
                if n == 0 {
                    break;
                }
                out.write_all(&buf[..n]).map_err(io)?;
            }
            (file, ino) = open()?;
            continue;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Prints the events to standard output.
pub fn run(follow: bool) -> ExitCode {
    client_verb(|mnt| {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        events(mnt, follow, &mut out).map(|()| 0)
    })
}
