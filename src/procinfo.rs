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

/// The first value of field `name` of `/proc/PID/status`.
///
/// `status`, not `stat`: a read of `/proc/PID/stat` waits for as long as
/// that process is stuck in some kernel paths (a thread of it in a request
/// to a hung FUSE mount, say), and any process on the host may be such a
/// one; `status` answers at once.
fn status_field(pid: u32, name: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        let value = l.strip_prefix(name)?.strip_prefix(':')?;
        value.split_whitespace().next().map(str::to_string)
    })
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    status_field(pid, "State").is_some_and(|state| state != "Z" && state != "X")
}

/// The processes whose session id is `sid` (an agent's group and stragglers).
pub fn session_members(sid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let sid = sid.to_string();
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        // The session id in the PID namespace of the mount of /proc, ours.
        .filter(|pid| status_field(*pid, "NSsid").as_ref() == Some(&sid))
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
        let sid = nix::unistd::getsid(None).unwrap().as_raw() as u32;
        assert!(session_members(sid).contains(&me));
        assert!(!alive(u32::MAX - 1));
        assert!(cmdline(me).is_some());
        assert!(!is_dtach_master(me, Path::new("/nowhere.sock")));
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
