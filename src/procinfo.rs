//! Small facts about processes, read from `/proc`.

use std::path::Path;

/// The process (thread group) a thread belongs to: FUSE requests carry the
/// calling thread's id, while file handles belong to processes.
pub fn tgid_of(tid: u32) -> u32 {
    if is_process(tid) {
        return tid;
    }
    let status = match std::fs::read_to_string(format!("/proc/{tid}/status")) {
        Ok(s) => s,
        Err(_) => return tid,
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(tid)
}

/// Whether `tid` is a thread group's leader, i.e. a process id: the usual
/// caller (`cat`, `tail`, a shell) is single-threaded. `pidfd_open` refuses
/// any other thread with `EINVAL`; asking costs two system calls where
/// reading `/proc/TID/status` costs about 15 µs, paid on every open and
/// `stat` of `scrollback`.
fn is_process(tid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(tid) else {
        return false;
    };
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // or -1; it touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` was just returned to us and is closed exactly once.
    unsafe { libc::close(fd as libc::c_int) };
    true
}

/// The NUL-separated command line of `pid`, split into arguments.
pub fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Whether `pid` is still the dtach master serving `socket` (pids get reused).
pub fn is_dtach_master(pid: u32, socket: &Path) -> bool {
    let Some(args) = cmdline(pid) else {
        return false;
    };
    let socket = socket.to_string_lossy();
    args.first().is_some_and(|a| a.ends_with("dtach")) && args.iter().any(|a| *a == socket)
}

/// `/proc/PID/status`, the one file of a process that is safe to read
/// whatever the process is doing. `/proc/PID/stat` (and `wchan`, `stack`)
/// wait for the process's `exec_update_lock`, which an `execve` holds
/// while it closes the close-on-exec descriptors: when one of them is a
/// file of this mount whose `flush` the daemon is to answer, a read of
/// `stat` by the daemon waits for itself. A caller that launches programs
/// while it holds files open here (its children close them at `exec`)
/// then hangs in `exec`, and the daemon thread with it, for good.
pub fn status(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status")).ok()
}

/// The value of `field` (`"State:"`, `"NSsid:"`) in a `status` text.
pub fn status_field<'a>(status: &'a str, field: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .map(str::trim)
}

/// Whether a thread whose `status` this is has begun to exit: its memory
/// is gone (an exit releases it before it closes the files, and only an
/// exiting user thread has none), or it is a zombie. Such a thread holds
/// no `exec_update_lock`: its `stat` can be read.
pub fn exiting(status: &str) -> bool {
    status_field(status, "VmSize:").is_none() || zombie(status)
}

/// Whether a `status` text is a zombie's (or a dead thread's).
pub fn zombie(status: &str) -> bool {
    status_field(status, "State:").is_some_and(|s| s.starts_with(['Z', 'X']))
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    status(pid).is_some_and(|s| !zombie(&s))
}

/// The process session `pid` is in (`NSsid`); `None` for session 0 (see
/// [`session_members`]).
pub fn session_of(pid: u32) -> Option<u32> {
    status_field(&status(pid)?, "NSsid:")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
        .filter(|sid| *sid != 0)
}

/// The processes whose session id is `sid` (an agent's group and stragglers).
/// Read from each process's `status` (`NSsid:`, whose first value is the
/// id as this `/proc` sees it), never its `stat`: see [`status`]. Session
/// 0 is "a leader this `/proc` cannot see", shared by everything a
/// container's init started; it is never an agent's, so it has no members.
pub fn session_members(sid: u32) -> Vec<u32> {
    if sid == 0 {
        return vec![];
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            status(*pid).is_some_and(|s| {
                status_field(&s, "NSsid:")
                    .and_then(|v| v.split_whitespace().next()?.parse::<u32>().ok())
                    == Some(sid)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_facts() {
        let me = std::process::id();
        assert_eq!(tgid_of(me), me);
        assert!(alive(me));
        assert!(cmdline(me).is_some());
        assert!(!is_dtach_master(me, Path::new("/nowhere.sock")));
    }

    #[test]
    fn status_tells_the_session_and_an_exit() {
        let me = std::process::id();
        let sid = nix::unistd::getsid(None).unwrap().as_raw() as u32;
        // In a container whose session leader is outside it, getsid says 0.
        assert!(sid == 0 || session_members(sid).contains(&me));
        // A child in a session of its own is a member of that one only.
        let mut child = std::process::Command::new("sleep");
        child.arg("30");
        // SAFETY: between fork and exec the child only calls setsid, which
        // is async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut child, || {
                nix::unistd::setsid()
                    .map(drop)
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = child.spawn().unwrap();
        let pid = child.id();
        assert!(session_members(pid).contains(&pid));
        assert!(!session_members(sid).contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
        let s = status(me).unwrap();
        assert!(!exiting(&s) && !zombie(&s));
        assert!(!alive(u32::MAX));
        assert!(session_members(0).is_empty());
    }

    #[test]
    fn a_thread_maps_to_its_process() {
        let me = std::process::id();
        let tid = std::thread::spawn(|| nix::unistd::gettid().as_raw() as u32)
            .join()
            .unwrap();
        // The thread has exited: /proc no longer knows it, so its id comes back.
        assert_eq!(tgid_of(tid), tid);
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw() as u32).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        assert_ne!(tid, me);
        assert!(!is_process(tid));
        assert_eq!(tgid_of(tid), me);
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }
}
