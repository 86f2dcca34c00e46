//! Keeping the kernel's entries true when the daemon moves a session's
//! directory: a session archived or unarchived through a file (`echo 1 >
//! KEY/archive`, a `meta.json` edit, `archive-older`) leaves its parent
//! without the kernel seeing a rename.
//!
//! Two things follow. The kernel may still hold the old entry (a session
//! directory's entry is kept for a moment, so a command's `open(KEY/input)`
//! costs no lookup of `KEY`): it is marked expired (`FUSE_EXPIRE_ONLY`), so
//! the next path walk asks again. And a file open inside the directory
//! keeps the old dentry alive; the kernel moves it to the new name at the
//! first lookup there, but refuses to when that lookup happens inside a
//! rename (`mv archived/KEY .` would fail with ESTALE). So the new name is
//! looked up at once, here, outside any rename.
//!
//! The kernel takes the parent directory's lock for both, and a rename in
//! the root holds that lock while it waits for the daemon: so they are done
//! by one thread of their own, and the caller waits for it only up to a
//! deadline.

use super::notify::EntryNotices;
use crate::core::tree::node::{Entry, ViewDir, ROOT};
use crate::key::SessionKey;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel as bounded, Receiver, SyncSender as Sender, TrySendError};
use std::time::Duration;

/// How long a moving call waits for the kernel to have been told.
const TOLD_WITHIN: Duration = Duration::from_millis(200);
/// Moves waiting to be told; more are dropped (their entries expire on
/// their own within a second).
const QUEUE: usize = 1024;

/// What the thread tells the kernel.
enum Told {
    /// Sessions' directories moved between the root and `archived/`: each
    /// name, and whether it is in `archived/` now.
    Moved(Vec<(String, bool)>),
    /// A session left views: its links there are dropped.
    LeftViews(Vec<Entry>),
}

struct Moved {
    told: Told,
    done: Sender<()>,
}

/// The sending side, for the core's hook.
pub struct MovedEntries {
    queue: Sender<Moved>,
}

impl MovedEntries {
    /// Starts the thread that tells the kernel of moved entries and looks
    /// names up under `mountpoint`.
    pub fn start(notices: impl EntryNotices, mountpoint: PathBuf) -> std::io::Result<MovedEntries> {
        let (queue, jobs) = bounded(QUEUE);
        std::thread::Builder::new()
            .name("moved-entries".into())
            .spawn(move || serve(notices, &mountpoint, jobs))?;
        Ok(MovedEntries { queue })
    }

    /// Sessions moved between the root and `archived/` (each with whether
    /// it is archived now): waits up to a deadline for the kernel to have
    /// been told.
    pub fn sessions_moved(&self, moves: Vec<(SessionKey, bool)>) {
        let Some((first, _)) = moves.first() else {
            return;
        };
        let first = first.clone();
        let names = moves
            .into_iter()
            .map(|(key, archived)| (key.to_string(), archived))
            .collect();
        self.tell(&first, Told::Moved(names));
    }

    /// `key`'s record changed, and the kernel holds `links` of it in the
    /// views: they are dropped (the next path walk asks again), waiting up
    /// to a deadline for the kernel to have been told.
    pub fn links_changed(&self, key: &SessionKey, links: Vec<Entry>) {
        if !links.is_empty() {
            self.tell(key, Told::LeftViews(links));
        }
    }

    fn tell(&self, key: &SessionKey, told: Told) {
        let (done, was_told) = bounded(1);
        let job = Moved { told, done };
        match self.queue.try_send(job) {
            Ok(()) => {
                if was_told.recv_timeout(TOLD_WITHIN).is_err() {
                    log::debug!("{key}: the kernel was not told of the move in time");
                }
            }
            Err(TrySendError::Full(_)) => {
                log::debug!("{key}: too many moves queued; its entry expires on its own")
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

fn serve(mut notices: impl EntryNotices, mountpoint: &std::path::Path, jobs: Receiver<Moved>) {
    let archived = mountpoint.join(ViewDir::Archived.name());
    // Taken now: a binary replaced on disk later still runs under this name.
    let exe = std::env::current_exe().unwrap_or_else(|_| "sessionfs".into());
    let mut prober = Prober::new(exe.clone());
    for job in jobs {
        match &job.told {
            Told::Moved(moves) => {
                for (name, _) in moves {
                    for parent in [ROOT, ViewDir::Archived.ino()] {
                        notices.expire_entry(parent, name);
                    }
                }
                // Only the new name exists: it is the one looked up.
                let new_path = |(name, now_archived): &(String, bool)| {
                    let dir = if *now_archived {
                        archived.as_path()
                    } else {
                        mountpoint
                    };
                    dir.join(name)
                };
                match moves.as_slice() {
                    [one] => look_up(&mut prober, &new_path(one), &job.done),
                    many => {
                        // Many at once (`archive-older`): the caller goes
                        // on once the entries are expired; one child looks
                        // every new name up.
                        let _ = job.done.try_send(());
                        let paths: Vec<PathBuf> = many.iter().map(new_path).collect();
                        if let Err(e) = probe_all_in_child(&exe, &paths) {
                            log::debug!("looking up {} moved sessions: {e}", paths.len());
                        }
                    }
                }
            }
            // A link is no directory: nothing is below it to keep.
            Told::LeftViews(links) => {
                for (parent, name) in links {
                    notices.drop_entry(*parent, name);
                }
            }
        }
        let _ = job.done.try_send(());
    }
}

/// How long a lookup the kernel answers with ESTALE is tried again.
const STALE_FOR: Duration = Duration::from_secs(2);

/// The longest one look in the mount may take: the daemon itself answers
/// it, unless it is going away.
const PROBE_WITHIN: Duration = Duration::from_secs(2);

/// The daemon's subcommand that `lstat`s one path and exits with the
/// errno (0: found), run as a child so that no thread of the daemon ever
/// waits on its own mount: a daemon killed while one of its threads waited
/// there could never finish dying, and its mount would hang every caller.
pub const PROBE: &str = "lstat-probe";

/// `sessionfs lstat-probe PATH`: the errno of `lstat(PATH)`, 0 when found.
pub fn probe(path: &std::path::Path) -> i32 {
    match std::fs::symlink_metadata(path) {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
    }
}

/// `sessionfs lstat-probe PATH PATH...`: looks each path up, again while
/// the kernel answers ESTALE (for at most [`STALE_FOR`] in all).
pub fn probe_all(paths: &[PathBuf]) {
    let until = std::time::Instant::now() + STALE_FOR;
    let mut pause = Duration::from_millis(2);
    let mut stale: Vec<&PathBuf> = paths.iter().collect();
    while !stale.is_empty() {
        stale.retain(|p| probe(p) == libc::ESTALE);
        if stale.is_empty() || std::time::Instant::now() >= until {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// [`probe_all`] in a child process; killed past [`PROBE_WITHIN`] and
/// [`STALE_FOR`] together.
fn probe_all_in_child(exe: &std::path::Path, paths: &[PathBuf]) -> std::io::Result<()> {
    wait_child(spawn_probe(exe, paths)?, PROBE_WITHIN + STALE_FOR).map(drop)
}

/// `sessionfs lstat-probe PATH...` started, with no standard streams.
fn spawn_probe<P: AsRef<std::ffi::OsStr>>(
    exe: &std::path::Path,
    paths: &[P],
) -> std::io::Result<std::process::Child> {
    std::process::Command::new(exe)
        .arg(PROBE)
        .args(paths)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
}

/// Waits for `child` up to `within`, then kills it (EIO).
fn wait_child(
    mut child: std::process::Child,
    within: Duration,
) -> std::io::Result<std::process::ExitStatus> {
    let until = std::time::Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if std::time::Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Looks paths up in the mount from a child process kept running (a
/// spawn per lookup would cost more than the lookup): `sessionfs
/// lstat-probe --serve` reads NUL-ended paths on its stdin and answers each
/// with its errno on a line. Still a child, not a thread: if the daemon
/// goes away while a lookup waits on it, the child's wait ends with the
/// connection, and the daemon's own threads never wait on its mount.
struct Prober {
    exe: PathBuf,
    child: Option<Serving>,
}

struct Serving {
    child: std::process::Child,
    paths: std::process::ChildStdin,
    answers: std::io::BufReader<std::process::ChildStdout>,
}

impl Prober {
    fn new(exe: PathBuf) -> Self {
        Prober { exe, child: None }
    }

    /// `lstat(path)` as [`probe`] gives it, answered within [`PROBE_WITHIN`]
    /// or EIO.
    fn look(&mut self, path: &std::path::Path) -> std::io::Result<()> {
        // A child that ended while idle is started again at once; one that
        // did not answer in time is not asked twice.
        let answer = self.ask(path).or_else(|e| {
            if e.kind() == std::io::ErrorKind::TimedOut {
                return Err(e);
            }
            log::debug!("the prober: {e}; starting another");
            self.stop();
            self.ask(path)
        });
        match answer {
            Ok(0) => Ok(()),
            Ok(errno) => Err(std::io::Error::from_raw_os_error(errno)),
            Err(e) => {
                log::debug!("the prober: {e}");
                self.stop();
                Err(std::io::Error::from_raw_os_error(libc::EIO))
            }
        }
    }

    /// The errno the child answers for `path`; an error is the child's
    /// own failure, not the path's.
    fn ask(&mut self, path: &std::path::Path) -> std::io::Result<i32> {
        use std::io::{BufRead, Write};
        use std::os::fd::AsFd;
        use std::os::unix::ffi::OsStrExt;
        if self.child.is_none() {
            let mut child = std::process::Command::new(&self.exe)
                .args([PROBE, SERVE])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()?;
            let (Some(paths), Some(answers)) = (child.stdin.take(), child.stdout.take()) else {
                let _ = child.kill();
                let _ = child.wait();
                return Err(std::io::Error::other("the prober has no pipes"));
            };
            let answers = std::io::BufReader::new(answers);
            self.child = Some(Serving {
                child,
                paths,
                answers,
            });
        }
        let Some(serving) = self.child.as_mut() else {
            return Err(std::io::Error::other("no prober"));
        };
        let mut line = path.as_os_str().as_bytes().to_vec();
        line.push(0);
        serving.paths.write_all(&line)?;
        serving.paths.flush()?;
        let mut ready = [nix::poll::PollFd::new(
            serving.answers.get_ref().as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let within =
            nix::poll::PollTimeout::try_from(PROBE_WITHIN).unwrap_or(nix::poll::PollTimeout::MAX);
        if nix::poll::poll(&mut ready, within).map_err(std::io::Error::from)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the prober did not answer in time",
            ));
        }
        let mut answer = String::new();
        if serving.answers.read_line(&mut answer)? == 0 {
            return Err(std::io::Error::other("the prober ended"));
        }
        answer
            .trim()
            .parse::<i32>()
            .map_err(|_| std::io::Error::other("the prober's answer is not an errno"))
    }

    fn stop(&mut self) {
        if let Some(mut serving) = self.child.take() {
            let _ = serving.child.kill();
            let _ = serving.child.wait();
        }
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The prober's argument after [`PROBE`]: serve paths from stdin.
pub const SERVE: &str = "--serve";

/// How long the prober waits for a path before it ends: a daemon that
/// moves no session keeps no child.
const PROBER_IDLE: Duration = Duration::from_secs(2);

/// `sessionfs lstat-probe --serve`: each NUL-ended path on stdin answered
/// with its errno (0: found) on a line of its own, until stdin ends or no
/// path comes for [`PROBER_IDLE`].
pub fn serve_probes() {
    use std::io::{BufRead, Write};
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;
    // Read straight from the descriptor: what poll says of it is then all
    // there is (no other buffer in between).
    let Ok(stdin) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return;
    };
    let mut paths = std::io::BufReader::new(std::fs::File::from(stdin));
    let mut answers = std::io::stdout().lock();
    let mut path = Vec::new();
    loop {
        if paths.buffer().is_empty() {
            let mut ready = [nix::poll::PollFd::new(
                paths.get_ref().as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            let idle = nix::poll::PollTimeout::try_from(PROBER_IDLE)
                .unwrap_or(nix::poll::PollTimeout::MAX);
            if !matches!(nix::poll::poll(&mut ready, idle), Ok(n) if n > 0) {
                return;
            }
        }
        path.clear();
        match paths.read_until(0, &mut path) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if path.last() == Some(&0) {
            path.pop();
        }
        let errno = probe(std::path::Path::new(std::ffi::OsStr::from_bytes(&path)));
        if writeln!(answers, "{errno}")
            .and_then(|()| answers.flush())
            .is_err()
        {
            return;
        }
    }
}

/// Looks `path` up. The kernel moves the directory's old entry to the new
/// name only when it can take the locks a rename takes at once; while a
/// rename or a `mkdir` elsewhere in the mount holds them, it answers
/// ESTALE and leaves the old entry where it was, so the lookup is tried
/// again until the way is free. The caller hears it was told once the
/// first try is made.
fn look_up(prober: &mut Prober, path: &std::path::Path, told: &Sender<()>) {
    let until = std::time::Instant::now() + STALE_FOR;
    let mut pause = Duration::from_millis(2);
    loop {
        match prober.look(path) {
            Err(e) if e.raw_os_error() == Some(libc::ESTALE) => {
                let _ = told.try_send(());
                if std::time::Instant::now() >= until {
                    log::debug!("looking up the moved {}: still {e}", path.display());
                    return;
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                log::debug!("looking up the moved {}: {e}", path.display());
                return;
            }
            _ => return,
        }
    }
}
