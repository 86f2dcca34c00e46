//! The storm's clients: each makes random real system calls (reads,
//! writes, truncates, renames, editor saves, directory calls, extended
//! attributes, `ctl` commands, handles held open) on the world below, tells
//! the watchdog which call it is in and checks each errno against the
//! invariants; and the sentinel, which reads the root `status` and lists
//! the root every 100 ms.

use super::invariants::{
    close_errnos, errno_name, is_oneline, open_to_write_errnos, write_errnos, SCRATCH,
    SENTINEL_LIMIT, TOO_LONG,
};
use super::watchdog::HANG;
use serde_json::Value;
use sessionfs::transcript::testgen::Rng;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Shells started before the storm.
pub const LIVE: [&str; 3] = ["shell:c1", "shell:c2", "shell:c3"];
/// Made, never written to by anyone: must never start.
pub const NEVER: &str = "shell:n1";
/// Made before the storm, not started; the storm may start them.
pub const IDLE: [&str; 2] = ["shell:n2", "shell:n3"];
/// Made (or not) by the storm's `mkdir`s.
pub const MADE: [&str; 5] = ["shell:r0", "shell:r1", "shell:r2", "shell:r3", "shell:r4"];
pub const CLAUDE_ID: &str = "c1a0de00-1111-4222-8333-444455556666";
pub const CODEX_ID: &str = "019e0000-0000-7000-8000-00000000c0de";
pub const WORLDS: [&str; 2] = [
    "0b5d4e6f-1a2b-4c3d-8e9f-001122334455",
    "7f000000-0000-4000-8000-0000000000aa",
];
pub const HOSTED: [&str; 3] = ["h1", "h2", "h3"];
pub const PROJECTS: [&str; 3] = ["alpha", "beta", "gamma"];

/// Held handles per client, at most.
const HELD: usize = 24;

use libc::{
    EACCES, EAGAIN, EEXIST, EFBIG, EINVAL, EISDIR, ELOOP, ENAMETOOLONG, ENOENT, ENOSPC, ENOTDIR,
    ENOTEMPTY, EOPNOTSUPP, EPERM, ESTALE, ETIMEDOUT, EXDEV,
};

// ---------------------------------------------------------------------------
// Raw system calls: Ok or the errno. Every descriptor is O_CLOEXEC, so the
// children some clients start hold none of them.

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn check(r: i64) -> Result<i64, i32> {
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(r)
    }
}

pub mod sys {
    use super::*;

    // SAFETY (every function here): plain system calls on NUL-terminated
    // paths and on buffers that outlive the call.
    pub fn open(p: &Path, flags: i32) -> Result<i32, i32> {
        let c = cstr(p);
        check(unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o600) } as i64)
            .map(|fd| fd as i32)
    }
    pub fn close(fd: i32) -> Result<(), i32> {
        check(unsafe { libc::close(fd) } as i64).map(drop)
    }
    pub fn read(fd: i32, n: usize) -> Result<Vec<u8>, i32> {
        let mut buf = vec![0u8; n];
        let got = check(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), n) } as i64)?;
        buf.truncate(got as usize);
        Ok(buf)
    }
    pub fn pread(fd: i32, at: u64, n: usize) -> Result<Vec<u8>, i32> {
        let mut buf = vec![0u8; n];
        let got = check(
            unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), n, at as libc::off_t) } as i64,
        )?;
        buf.truncate(got as usize);
        Ok(buf)
    }
    pub fn write(fd: i32, data: &[u8]) -> Result<usize, i32> {
        check(unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) } as i64)
            .map(|n| n as usize)
    }
    pub fn pwrite(fd: i32, data: &[u8], at: u64) -> Result<usize, i32> {
        check(
            unsafe { libc::pwrite(fd, data.as_ptr().cast(), data.len(), at as libc::off_t) } as i64,
        )
        .map(|n| n as usize)
    }
    pub fn fsync(fd: i32) -> Result<(), i32> {
        check(unsafe { libc::fsync(fd) } as i64).map(drop)
    }
    pub fn ftruncate(fd: i32, size: i64) -> Result<(), i32> {
        check(unsafe { libc::ftruncate(fd, size) } as i64).map(drop)
    }
    pub fn truncate(p: &Path, size: i64) -> Result<(), i32> {
        let c = cstr(p);
        check(unsafe { libc::truncate(c.as_ptr(), size) } as i64).map(drop)
    }
    pub fn fstat(fd: i32) -> Result<libc::stat, i32> {
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        check(unsafe { libc::fstat(fd, &mut st) } as i64).map(|_| st)
    }
    pub fn stat(p: &Path, follow: bool) -> Result<libc::stat, i32> {
        let c = cstr(p);
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let r = if follow {
            unsafe { libc::stat(c.as_ptr(), &mut st) }
        } else {
            unsafe { libc::lstat(c.as_ptr(), &mut st) }
        };
        check(r as i64).map(|_| st)
    }
    pub fn mkdir(p: &Path) -> Result<(), i32> {
        let c = cstr(p);
        check(unsafe { libc::mkdir(c.as_ptr(), 0o755) } as i64).map(drop)
    }
    pub fn rmdir(p: &Path) -> Result<(), i32> {
        let c = cstr(p);
        check(unsafe { libc::rmdir(c.as_ptr()) } as i64).map(drop)
    }
    pub fn unlink(p: &Path) -> Result<(), i32> {
        let c = cstr(p);
        check(unsafe { libc::unlink(c.as_ptr()) } as i64).map(drop)
    }
    pub fn rename(a: &Path, b: &Path) -> Result<(), i32> {
        let (a, b) = (cstr(a), cstr(b));
        check(unsafe { libc::rename(a.as_ptr(), b.as_ptr()) } as i64).map(drop)
    }
    pub fn symlink(target: &str, p: &Path) -> Result<(), i32> {
        let t = CString::new(target).unwrap();
        let c = cstr(p);
        check(unsafe { libc::symlink(t.as_ptr(), c.as_ptr()) } as i64).map(drop)
    }
    pub fn readlink(p: &Path) -> Result<Vec<u8>, i32> {
        let c = cstr(p);
        let mut buf = vec![0u8; 4096];
        let n = check(
            unsafe { libc::readlink(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) } as i64,
        )?;
        buf.truncate(n as usize);
        Ok(buf)
    }
    pub fn link(a: &Path, b: &Path) -> Result<(), i32> {
        let (a, b) = (cstr(a), cstr(b));
        check(unsafe { libc::link(a.as_ptr(), b.as_ptr()) } as i64).map(drop)
    }
    pub fn mknod(p: &Path) -> Result<(), i32> {
        let c = cstr(p);
        check(unsafe { libc::mknod(c.as_ptr(), libc::S_IFIFO | 0o600, 0) } as i64).map(drop)
    }
    pub fn chmod(p: &Path, mode: u32) -> Result<(), i32> {
        let c = cstr(p);
        check(unsafe { libc::chmod(c.as_ptr(), mode) } as i64).map(drop)
    }
    pub fn setxattr(p: &Path, name: &str) -> Result<(), i32> {
        let c = cstr(p);
        let n = CString::new(name).unwrap();
        check(unsafe { libc::setxattr(c.as_ptr(), n.as_ptr(), b"v".as_ptr().cast(), 1, 0) } as i64)
            .map(drop)
    }
    pub fn removexattr(p: &Path, name: &str) -> Result<(), i32> {
        let c = cstr(p);
        let n = CString::new(name).unwrap();
        check(unsafe { libc::removexattr(c.as_ptr(), n.as_ptr()) } as i64).map(drop)
    }
    pub fn getxattr(p: &Path, name: &str) -> Result<(), i32> {
        let c = cstr(p);
        let n = CString::new(name).unwrap();
        let mut buf = [0u8; 256];
        check(
            unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) }
                as i64,
        )
        .map(drop)
    }
    pub fn listxattr(p: &Path) -> Result<(), i32> {
        let c = cstr(p);
        let mut buf = [0u8; 1024];
        check(unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) } as i64)
            .map(drop)
    }
    pub fn poll(fd: i32, ms: i32) -> Result<i16, i32> {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLOUT,
            revents: 0,
        };
        check(unsafe { libc::poll(&mut p, 1, ms) } as i64).map(|_| p.revents)
    }
    pub fn lseek_end(fd: i32) -> Result<i64, i32> {
        check(unsafe { libc::lseek(fd, 0, libc::SEEK_END) } as i64)
    }
    pub fn readdir(p: &Path) -> Result<Vec<String>, i32> {
        let dir = std::fs::read_dir(p).map_err(|e| e.raw_os_error().unwrap_or(0))?;
        let mut names = vec![];
        for entry in dir {
            let entry = entry.map_err(|e| e.raw_os_error().unwrap_or(0))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }
}

// ---------------------------------------------------------------------------
// What every client shares.

/// The call a client (or the sentinel) is in, and since when.
pub type Slot = Mutex<Option<(String, Instant)>>;

pub struct Shared {
    pub mnt: PathBuf,
    pub claude_store: PathBuf,
    pub started: Instant,
    pub stop: AtomicBool,
    /// Session keys known to the clients (grows as listings find `new` ones).
    pub keys: Mutex<Vec<String>>,
    /// One per client, then the sentinel's.
    pub slots: Vec<Slot>,
    /// The step each client is in (a loop of quick calls shows here).
    pub ops: Vec<Slot>,
    pub violations: Mutex<Vec<String>>,
    /// Children started by clients (each leads its own process group).
    pub children: Mutex<Vec<u32>>,
    /// Lines of the Claude conversation not yet appended to its store.
    pub store_rest: Mutex<Vec<Vec<u8>>>,
    /// (call, errno) → (count, longest).
    pub tally: Mutex<BTreeMap<(String, String), (u64, Duration)>>,
    pub sentinel_worst: Mutex<Duration>,
}

impl Shared {
    fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.mnt.clone()
        } else {
            self.mnt.join(rel)
        }
    }

    fn violation(&self, who: &str, what: String) {
        let at = self.started.elapsed().as_secs_f64();
        let line = format!("[{at:7.2}s {who}] {what}");
        eprintln!("chaos: VIOLATION {line}");
        let mut v = self.violations.lock().unwrap();
        if v.len() < 500 {
            v.push(line);
        }
    }
}

/// A handle a client keeps open across calls.
pub struct Held {
    fd: i32,
    path: String,
    /// The file's name (the last component), which says what it allows.
    name: String,
    writes: bool,
    /// Bytes this handle wrote (meta.json and the one-line files refuse a
    /// write that does not carry on from there).
    written: u64,
}

/// A shell command that is safe to type (the session's `HOME` is the
/// test's), or bytes that are not one.
fn input_bytes(rng: &mut Rng) -> Vec<u8> {
    let n = rng.below(100_000);
    let text = match rng.below(24) {
        0 => format!("echo tok-{n}\n"),
        1 => "true\n".into(),
        2 => format!("sleep 0.{}\n", rng.below(9) + 1),
        3 => format!("seq 1 {}\n", rng.below(40_000)),
        4 => "sleep 2\n".into(),
        5 => "cat\n".into(),
        6 => "\x03".into(),
        7 => "\x04".into(),
        8 => "\x11".into(),
        9 => "printf '\\e[?1049h\\e[2J\\e[Hfull screen\\n'\n".into(),
        10 => "printf '\\e[?1049l'\n".into(),
        11 => "yes chaos | head -c 300000\n".into(),
        12 => "for i in $(seq 1 40); do echo line-$i; sleep 0.01; done\n".into(),
        13 => "exit\n".into(),
        14 => {
            // Random bytes for the VT mirror, as octal escapes bash does
            // not interpret.
            let mut s = String::from("printf '");
            for _ in 0..rng.below(300) {
                s.push_str(&format!("\\{:03o}", rng.below(256)));
            }
            s.push_str("'\n");
            s
        }
        15 => {
            // Escape sequences with random parameters.
            let mut s = String::from("printf '");
            for _ in 0..rng.below(40) {
                let finals = b"ABCDHJKLMPSTXZ@`dfhlmnrsu";
                let f = finals[rng.below(finals.len() as u64) as usize] as char;
                let private = if rng.chance(30) { "?" } else { "" };
                s.push_str(&format!(
                    "\\e[{private}{};{}{f}",
                    rng.below(3000),
                    rng.below(300)
                ));
                s.push_str("xy\\u4e2d\\U1F600");
            }
            s.push_str("'\n");
            s
        }
        16 => "stty -echo; stty echo\n".into(),
        17 => format!("printf '%*s\\n' {} x\n", rng.below(5000)),
        18..=20 => {
            // Bytes, none a line end: typed, never run.
            let len = if rng.chance(10) {
                60_000
            } else {
                rng.below(200) as usize + 1
            };
            let mut b: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            for x in b.iter_mut() {
                if matches!(*x, b'\n' | b'\r' | 0x0f | 0x16 | 0x18 | 0x1a) {
                    *x = b'x';
                }
            }
            b.push(0x15); // Ctrl-U: the line is dropped
            return b;
        }
        _ => format!("echo done-{n}\n"),
    };
    text.into_bytes()
}

/// Text for a one-line file: valid for it, or not.
fn oneline_bytes(rng: &mut Rng, name: &str) -> Vec<u8> {
    let valid = rng.chance(70);
    if valid {
        return match name {
            "title" => format!("title {}\n", rng.below(1000)).into_bytes(),
            "project" => {
                let p = PROJECTS[rng.below(PROJECTS.len() as u64) as usize];
                if rng.chance(20) {
                    b"\n".to_vec()
                } else {
                    format!("{p}\n").into_bytes()
                }
            }
            // Archiving is common enough from renames and meta.json.
            "archive" => [&b"0\n"[..], b"0\n", b"0\n", b"1\n", b"no\n", b"false\n"]
                [rng.below(6) as usize]
                .to_vec(),
            _ => [&b"1\n"[..], b"0\n", b"true\n", b"no\n"][rng.below(4) as usize].to_vec(),
        };
    }
    match rng.below(6) {
        0 => b"a\nb\nc\n".to_vec(),
        1 => vec![0xff, 0xfe, b'\n'],
        2 => b"\x1b[31mred\n".to_vec(),
        3 => "x".repeat(2000).into_bytes(),
        4 => b"../etc\n".to_vec(),
        _ => (0..rng.below(64)).map(|_| rng.below(256) as u8).collect(),
    }
}

fn pick<'a, T>(rng: &mut Rng, items: &'a [T]) -> &'a T {
    &items[rng.below(items.len() as u64) as usize]
}

// ---------------------------------------------------------------------------
// One client.

struct Client<'a> {
    id: usize,
    who: String,
    sh: &'a Shared,
    rng: Rng,
    held: Vec<Held>,
}

impl<'a> Client<'a> {
    /// Runs one system call with the watchdog told, tallies it and checks
    /// its errno against `allowed`.
    fn call<T>(
        &mut self,
        op: &str,
        rel: &str,
        allowed: &[i32],
        f: impl FnOnce() -> Result<T, i32>,
    ) -> Result<T, i32> {
        let t0 = Instant::now();
        *self.sh.slots[self.id].lock().unwrap() = Some((format!("{op} {rel}"), t0));
        let result = f();
        *self.sh.slots[self.id].lock().unwrap() = None;
        let took = t0.elapsed();
        let errno = *result.as_ref().err().unwrap_or(&0);
        {
            let mut tally = self.sh.tally.lock().unwrap();
            let e = tally
                .entry((op.to_string(), errno_name(errno)))
                .or_default();
            e.0 += 1;
            e.1 = e.1.max(took);
        }
        // ESTALE through a session directory: the kernel's, while a
        // rename elsewhere holds the locks it needs (docs/ERRORS.md).
        let stale = errno == ESTALE && rel.contains(':');
        if errno != 0 && !allowed.contains(&errno) && !stale {
            let names: Vec<String> = allowed.iter().map(|e| errno_name(*e)).collect();
            self.sh.violation(
                &self.who,
                format!(
                    "{op} {rel}: {} after {took:.2?} (allowed: {})",
                    errno_name(errno),
                    names.join(" ")
                ),
            );
        }
        if took > TOO_LONG {
            self.sh
                .violation(&self.who, format!("{op} {rel}: answered after {took:.2?}"));
        }
        result
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.sh.path(rel)
    }

    /// Starts `cmd` in a group of its own with no standard streams, known
    /// to the cleanup and named to the watchdog as `what`.
    fn child(&self, mut cmd: Command, what: String) -> Option<(std::process::Child, Instant)> {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .ok()?;
        self.sh.children.lock().unwrap().push(child.id());
        let t0 = Instant::now();
        *self.sh.slots[self.id].lock().unwrap() = Some((what, t0));
        Some((child, t0))
    }

    fn key(&mut self) -> String {
        let keys = self.sh.keys.lock().unwrap();
        keys[self.rng.below(keys.len() as u64) as usize].clone()
    }

    /// A session that may be started (every one but [`NEVER`]).
    fn startable_key(&mut self) -> String {
        loop {
            let k = self.key();
            if k != NEVER {
                return k;
            }
        }
    }

    /// Where a session's directory is reached: by its name, under
    /// `archived/`, or through a view's link.
    fn base(&mut self, key: &str) -> String {
        match self.rng.below(10) {
            0..=5 => key.to_string(),
            6 | 7 => format!("archived/{key}"),
            8 => format!("favourites/{key}"),
            _ => {
                if self.rng.chance(50) {
                    let engine = key.split(':').next().unwrap();
                    format!("engines/{engine}/{key}")
                } else {
                    let p = *pick(&mut self.rng, &PROJECTS);
                    format!("projects/{p}/{key}")
                }
            }
        }
    }

    fn session_file(&mut self) -> (String, String) {
        const FILES: [&str; 22] = [
            "scrollback",
            "scrollback",
            "scrollback",
            "screen",
            "screen",
            "status",
            "status",
            "meta.json",
            "title",
            "project",
            "favourite",
            "archive",
            "state",
            "events",
            "wait",
            "transcript/page-0",
            "transcript/page-1",
            "transcript/page-9",
            "transcript/latest",
            "transcript/last",
            "input",
            "prompt",
        ];
        let key = self.key();
        let base = self.base(&key);
        let name = if self.rng.chance(10) {
            pick(&mut self.rng, &SCRATCH).to_string()
        } else {
            pick(&mut self.rng, &FILES).to_string()
        };
        (format!("{base}/{name}"), name)
    }

    /// Any file to read: a session's, the root's, a slot record, a transcript.
    fn readable(&mut self) -> (String, String) {
        match self.rng.below(12) {
            0 => {
                let f = *pick(&mut self.rng, &["README", "status", "sessions.json", "ctl"]);
                (f.to_string(), f.to_string())
            }
            1 => {
                let w = *pick(&mut self.rng, &WORLDS);
                let slot = self.rng.below(7);
                (format!("slots/{w}/{slot}"), slot.to_string())
            }
            2 => {
                let h = *pick(&mut self.rng, &HOSTED);
                let name = format!("{h}.jsonl");
                (format!("agent-transcripts/{name}"), name)
            }
            _ => self.session_file(),
        }
    }

    fn run(&mut self) {
        // (weight, name, what): each call of one client picks one.
        type Step<'x> = (u64, &'static str, fn(&mut Client<'x>));
        let steps: [Step<'a>; 21] = [
            (20, "read a file", Client::read_file),
            (8, "list a directory", Client::readdir),
            (5, "stat", Client::stat),
            (7, "write input", Client::input),
            (4, "write ctl", Client::ctl),
            (1, "write prompt", Client::prompt),
            (6, "write a one-line file", Client::oneline),
            (4, "write meta.json", Client::meta),
            (5, "save as an editor", Client::editor),
            (3, "truncate", Client::truncate),
            (5, "rename", Client::rename),
            (5, "directory calls", Client::dirop),
            (2, "extended attributes", Client::xattr),
            (2, "root ctl", Client::root_ctl),
            (4, "hold a file open", Client::hold),
            (6, "use a held file", Client::use_held),
            (2, "close a held file", Client::close_held),
            (3, "read wait", Client::wait),
            (4, "slot records", Client::slots),
            (3, "hosted transcripts", Client::hosted),
            (1, "grow the store or map a file", Client::store_or_map),
        ];
        let total: u64 = steps.iter().map(|s| s.0).sum();
        while !self.sh.stop.load(Ordering::Relaxed) {
            let mut roll = self.rng.below(total);
            let (_, name, step) = steps
                .iter()
                .find(|s| {
                    if roll < s.0 {
                        true
                    } else {
                        roll -= s.0;
                        false
                    }
                })
                .unwrap();
            *self.sh.ops[self.id].lock().unwrap() = Some((name.to_string(), Instant::now()));
            step(self);
        }
        *self.sh.ops[self.id].lock().unwrap() = Some(("closing held files".into(), Instant::now()));
        while !self.held.is_empty() {
            self.close_one(0);
        }
        *self.sh.ops[self.id].lock().unwrap() = None;
    }

    /// Opens, reads to the end (or at random offsets), closes.
    fn read_file(&mut self) {
        let (rel, name) = self.readable();
        let nonblock = name == "wait" || self.rng.chance(20);
        let flags = libc::O_RDONLY | if nonblock { libc::O_NONBLOCK } else { 0 };
        let mut allowed = vec![ENOENT];
        if rel.contains("transcript/") {
            allowed.push(ESTALE);
        }
        if SCRATCH.contains(&name.as_str()) {
            allowed.push(ELOOP);
        }
        if rel.starts_with("slots/") {
            allowed.extend([EFBIG, EINVAL]);
        }
        let p = self.p(&rel);
        let Ok(fd) = self.call("open", &rel, &allowed, || sys::open(&p, flags)) else {
            return;
        };
        let read_allowed: &[i32] = if name == "wait" {
            &[ENOENT, EAGAIN]
        } else {
            &[ENOENT]
        };
        let mut whole = Vec::new();
        let mut complete = true;
        if self.rng.chance(30) {
            // Random offsets, as a pager or `tail -c` does.
            let size = self.call("fstat", &rel, &[ENOENT], || sys::fstat(fd));
            let size = size.map(|s| s.st_size as u64).unwrap_or(0);
            complete = false;
            for _ in 0..self.rng.below(6) + 1 {
                let at = self.rng.below(size + 4096);
                let n = self.rng.below(1 << 20) as usize + 1;
                if self
                    .call("pread", &rel, read_allowed, || sys::pread(fd, at, n))
                    .is_err()
                {
                    break;
                }
            }
        } else {
            loop {
                let n = *pick(&mut self.rng, &[1usize, 100, 4096, 65536, 1 << 20]);
                match self.call("read", &rel, read_allowed, || sys::read(fd, n)) {
                    Ok(b) if b.is_empty() => break,
                    Ok(b) => whole.extend_from_slice(&b),
                    Err(_) => {
                        complete = false;
                        break;
                    }
                }
                if whole.len() > 4 << 20 || name == "wait" {
                    complete = false;
                    break;
                }
            }
        }
        let _ = self.call("close", &rel, &[], || sys::close(fd));
        if complete {
            self.check_text(&rel, &name, &whole);
        }
    }

    /// Whole reads of JSON files must parse.
    fn check_text(&mut self, rel: &str, name: &str, text: &[u8]) {
        let json = matches!(name, "status" | "sessions.json" | "meta.json")
            || (rel.starts_with("slots/") && !text.is_empty());
        if json {
            if let Err(e) = serde_json::from_slice::<Value>(text) {
                let shown = String::from_utf8_lossy(&text[..text.len().min(200)]).into_owned();
                self.sh
                    .violation(&self.who, format!("{rel}: not JSON ({e}): {shown:?}"));
            }
        }
        if name == "events" {
            for line in text.split_inclusive(|b| *b == b'\n') {
                if line.ends_with(b"\n") && serde_json::from_slice::<Value>(line).is_err() {
                    let shown = String::from_utf8_lossy(line).into_owned();
                    self.sh.violation(
                        &self.who,
                        format!("{rel}: an events line is not JSON: {shown:?}"),
                    );
                }
            }
        }
    }

    fn readdir(&mut self) {
        let key = self.key();
        let base = self.base(&key);
        let p = *pick(&mut self.rng, &PROJECTS);
        let w = *pick(&mut self.rng, &WORLDS);
        let dirs = [
            String::new(),
            String::new(),
            "archived".into(),
            "favourites".into(),
            "projects".into(),
            format!("projects/{p}"),
            "engines".into(),
            "engines/shell".into(),
            "slots".into(),
            format!("slots/{w}"),
            "agent-transcripts".into(),
            base.clone(),
            format!("{base}/transcript"),
        ];
        let rel = pick(&mut self.rng, &dirs).clone();
        let p = self.p(&rel);
        let Ok(names) = self.call("readdir", &rel, &[ENOENT], || sys::readdir(&p)) else {
            return;
        };
        if rel.is_empty() {
            let mut keys = self.sh.keys.lock().unwrap();
            for n in names {
                if n.contains(':') && !keys.contains(&n) && keys.len() < 40 {
                    keys.push(n);
                }
            }
        }
    }

    fn stat(&mut self) {
        let (rel, name) = match self.rng.below(8) {
            0 => ("nosuch:thing".to_string(), String::new()),
            1 => (format!("{}/x", "y".repeat(300)), String::new()),
            2 => {
                let key = self.key();
                (format!("{key}/status/inside"), String::new())
            }
            3 => {
                // Any GUID is a world: a fresh number each time, up to the cap.
                let g = format!(
                    "{:08x}-0000-4000-8000-{:012x}",
                    self.rng.below(1 << 32),
                    self.rng.below(1 << 48)
                );
                (format!("slots/{g}"), String::new())
            }
            _ => self.readable(),
        };
        let follow = self.rng.chance(50);
        let p = self.p(&rel);
        let _ = name;
        self.call(
            if follow { "stat" } else { "lstat" },
            &rel,
            &[ENOENT, ENAMETOOLONG, ENOTDIR],
            || sys::stat(&p, follow),
        )
        .ok();
    }

    /// Opens `rel` for writing with `flags`, writes `data` (all of it, as a
    /// careful writer), maybe fsyncs, closes; each call checked.
    fn write_file(&mut self, rel: &str, name: &str, flags: i32, data: &[u8], open_allowed: &[i32]) {
        let p = self.p(rel);
        let Ok(fd) = self.call("open", rel, open_allowed, || sys::open(&p, flags)) else {
            return;
        };
        let wa = write_errnos(rel, name);
        let mut done = 0;
        while done < data.len() {
            let rest = &data[done..];
            match self.call("write", rel, &wa, || sys::write(fd, rest)) {
                Ok(0) | Err(_) => break,
                Ok(n) => done += n,
            }
        }
        let ca = close_errnos(rel, name);
        if self.rng.chance(20) {
            let _ = self.call("fsync", rel, &ca, || sys::fsync(fd));
        }
        let _ = self.call("close", rel, &ca, || sys::close(fd));
    }

    fn input(&mut self) {
        let key = self.startable_key();
        let base = self.base(&key);
        let rel = format!("{base}/input");
        let data = input_bytes(&mut self.rng);
        let flags = libc::O_WRONLY
            | if self.rng.chance(50) {
                libc::O_TRUNC
            } else {
                0
            };
        self.write_file(&rel, "input", flags, &data, &open_to_write_errnos("input"));
    }

    fn ctl(&mut self) {
        let key = self.key();
        let base = self.base(&key);
        let rel = format!("{base}/ctl");
        let never = key == NEVER;
        let cmd: Vec<u8> = match self.rng.below(12) {
            0 => b"stop\n".to_vec(),
            1 | 2 => format!(
                "resize {}x{}\n",
                self.rng.below(300) + 2,
                self.rng.below(100) + 2
            )
            .into_bytes(),
            3 => b"redraw\n".to_vec(),
            4 if !never => b"open\n".to_vec(),
            5 => format!("resize {}x{}\n", self.rng.below(2000), self.rng.below(2000)).into_bytes(),
            6 => b"bogus\n".to_vec(),
            7 => (0..self.rng.below(40))
                .map(|_| self.rng.below(256) as u8)
                .collect(),
            8 => b"redraw\nresize 80x24\n".to_vec(),
            _ => format!(
                "resize {}x{}\n",
                self.rng.below(200) + 20,
                self.rng.below(60) + 5
            )
            .into_bytes(),
        };
        self.write_file(&rel, "ctl", libc::O_WRONLY | libc::O_TRUNC, &cmd, &[ENOENT]);
    }

    fn prompt(&mut self) {
        let key = self.startable_key();
        let base = self.base(&key);
        let rel = format!("{base}/prompt");
        let data: Vec<u8> = match self.rng.below(5) {
            0 => vec![],
            1 => vec![0xff, 0xfe],
            2 => "x".repeat(1_100_000).into_bytes(),
            _ => format!("echo prompt-{}", self.rng.below(1000)).into_bytes(),
        };
        self.write_file(
            &rel,
            "prompt",
            libc::O_WRONLY | libc::O_TRUNC,
            &data,
            &open_to_write_errnos("prompt"),
        );
    }

    fn oneline(&mut self) {
        let key = self.key();
        let base = self.base(&key);
        let name = *pick(&mut self.rng, &["title", "project", "favourite", "archive"]);
        let rel = format!("{base}/{name}");
        let data = oneline_bytes(&mut self.rng, name);
        match self.rng.below(4) {
            // `echo 1 > favourite` without O_TRUNC: open, truncate, write.
            0 => {
                let p = self.p(&rel);
                let Ok(fd) = self.call("open", &rel, &[ENOENT], || sys::open(&p, libc::O_WRONLY))
                else {
                    return;
                };
                let _ = self.call("ftruncate", &rel, &[ENOENT], || sys::ftruncate(fd, 0));
                let wa = write_errnos(&rel, name);
                let _ = self.call("write", &rel, &wa, || sys::write(fd, &data));
                let ca = close_errnos(&rel, name);
                let _ = self.call("close", &rel, &ca, || sys::close(fd));
            }
            // `>>`: refused at the write.
            1 if self.rng.chance(30) => self.write_file(
                &rel,
                name,
                libc::O_WRONLY | libc::O_APPEND,
                &data,
                &[ENOENT],
            ),
            // O_RDWR: EINVAL.
            1 => self.write_file(&rel, name, libc::O_RDWR, &data, &[ENOENT, EINVAL]),
            _ => self.write_file(&rel, name, libc::O_WRONLY | libc::O_TRUNC, &data, &[ENOENT]),
        }
    }

    /// What an editor would save into `target`: an edited `meta.json`
    /// (none if it cannot be read) or a one-line field's bytes.
    fn contents_for(&mut self, base: &str, target: &str) -> Option<Vec<u8>> {
        if target == "meta.json" {
            self.edited_meta(base)
        } else {
            Some(oneline_bytes(&mut self.rng, target))
        }
    }

    /// meta.json as read, with its editable fields changed.
    fn edited_meta(&mut self, base: &str) -> Option<Vec<u8>> {
        let rel = format!("{base}/meta.json");
        let p = self.p(&rel);
        let fd = self
            .call("open", &rel, &[ENOENT], || sys::open(&p, libc::O_RDONLY))
            .ok()?;
        let mut text = vec![];
        while let Ok(b) = self.call("read", &rel, &[ENOENT], || sys::read(fd, 65536)) {
            if b.is_empty() {
                break;
            }
            text.extend(b);
        }
        let _ = self.call("close", &rel, &[], || sys::close(fd));
        let mut doc: Value = match serde_json::from_slice(&text) {
            Ok(v) => v,
            Err(e) => {
                self.sh
                    .violation(&self.who, format!("{rel}: not JSON ({e})"));
                return None;
            }
        };
        let obj = doc.as_object_mut()?;
        match self.rng.below(5) {
            0 => {
                obj.insert(
                    "title".into(),
                    format!("edited {}", self.rng.below(100)).into(),
                );
            }
            1 => {
                let p = *pick(&mut self.rng, &PROJECTS);
                obj.insert("project".into(), p.into());
            }
            2 => {
                let f = self.rng.chance(50);
                obj.insert("favourite".into(), f.into());
            }
            3 => {
                let a = self.rng.chance(20);
                obj.insert("archived".into(), a.into());
            }
            _ => {}
        }
        Some(serde_json::to_vec_pretty(&doc).unwrap())
    }

    fn meta(&mut self) {
        let key = self.key();
        let base = self.base(&key);
        let rel = format!("{base}/meta.json");
        let data = if self.rng.chance(60) {
            match self.edited_meta(&base) {
                Some(d) => d,
                None => return,
            }
        } else {
            match self.rng.below(6) {
                0 => b"{\"title\":\"a\",\"title\":\"b\"}".to_vec(),
                1 => b"{\"colour\":1}".to_vec(),
                2 => b"[1,2".to_vec(),
                3 => "[".repeat(70_000).into_bytes(),
                4 => format!("{{\"workspace\":\"{}\"}}", self.sh.mnt.display()).into_bytes(),
                _ => (0..self.rng.below(300))
                    .map(|_| self.rng.below(256) as u8)
                    .collect(),
            }
        };
        let flags = match self.rng.below(10) {
            0 => libc::O_RDWR,
            1 => libc::O_WRONLY | libc::O_APPEND,
            _ => libc::O_WRONLY | libc::O_TRUNC,
        };
        let open_allowed: &[i32] = if flags == libc::O_RDWR {
            &[ENOENT, EINVAL]
        } else {
            &[ENOENT]
        };
        self.write_file(&rel, "meta.json", flags, &data, open_allowed);
    }

    /// The ways editors save: a temporary renamed over, a backup by
    /// rename then a new file, swap files, a lock symlink.
    fn editor(&mut self) {
        let key = self.key();
        let base = self.base(&key);
        let dir = base.clone();
        match self.rng.below(5) {
            0 => {
                // sed -i / jq: write a temporary, rename it over.
                let target = *pick(
                    &mut self.rng,
                    &["meta.json", "meta.json", "title", "project"],
                );
                let Some(data) = self.contents_for(&base, target) else {
                    return;
                };
                let tmp = format!("{dir}/sed{}", self.rng.below(1000));
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
                self.write_file(&tmp, "sed", flags, &data, &[ENOENT, EEXIST]);
                let (a, b) = (self.p(&tmp), self.p(&format!("{dir}/{target}")));
                let to = format!("{tmp} -> {target}");
                let _ = self.call("rename", &to, &[ENOENT, EINVAL, EAGAIN, ETIMEDOUT], || {
                    sys::rename(&a, &b)
                });
                let _ = self.call("unlink", &tmp, &[ENOENT], || sys::unlink(&a));
            }
            1 => {
                // vim with backupcopy=no: meta.json -> meta.json~, a new
                // meta.json written, the backup removed.
                let data = match self.edited_meta(&base) {
                    Some(d) => d,
                    None => return,
                };
                let (m, b) = (
                    self.p(&format!("{dir}/meta.json")),
                    self.p(&format!("{dir}/meta.json~")),
                );
                let to = format!("{dir}/meta.json -> meta.json~");
                let _ = self.call("rename", &to, &[ENOENT, EAGAIN, ETIMEDOUT], || {
                    sys::rename(&m, &b)
                });
                let rel = format!("{dir}/meta.json");
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
                self.write_file(&rel, "meta.json", flags, &data, &[ENOENT]);
                let p = self.p(&rel);
                let _ = self.call("chmod", &rel, &[ENOENT], || sys::chmod(&p, 0o644));
                let _ = self.call("setxattr", &rel, &[ENOENT, EOPNOTSUPP, EINVAL], || {
                    sys::setxattr(&p, "system.posix_acl_access")
                });
                let bk = format!("{dir}/meta.json~");
                let _ = self.call("unlink", &bk, &[ENOENT], || sys::unlink(&b));
            }
            2 => {
                // Swap file: O_EXCL create, write, stat, unlink.
                let rel = format!("{dir}/.meta.json.swp");
                let p = self.p(&rel);
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
                let size = if self.rng.chance(5) { 17 << 20 } else { 4096 };
                let data = vec![b's'; size];
                self.write_file(&rel, "swap", flags, &data, &[ENOENT, EEXIST, ELOOP]);
                let _ = self.call("stat", &rel, &[ENOENT], || sys::stat(&p, false));
                let _ = self.call("unlink", &rel, &[ENOENT], || sys::unlink(&p));
            }
            3 => {
                // emacs: a lock symlink, read back, removed.
                let rel = format!("{dir}/.#meta.json");
                let p = self.p(&rel);
                let _ = self.call("symlink", &rel, &[ENOENT, EEXIST], || {
                    sys::symlink("root@chaos.1234:1700000000", &p)
                });
                let _ = self.call("readlink", &rel, &[ENOENT, EINVAL], || sys::readlink(&p));
                let _ = self.call("open", &rel, &[ENOENT, ELOOP], || {
                    sys::open(&p, libc::O_RDONLY | libc::O_NOFOLLOW).map(|fd| {
                        let _ = sys::close(fd);
                    })
                });
                if self.rng.chance(70) {
                    let _ = self.call("unlink", &rel, &[ENOENT], || sys::unlink(&p));
                }
            }
            _ => {
                // `mv /tmp/x meta.json` from another filesystem: rm, then
                // create and write.
                let target = *pick(&mut self.rng, &["meta.json", "favourite", "title"]);
                let Some(data) = self.contents_for(&base, target) else {
                    return;
                };
                let rel = format!("{dir}/{target}");
                let p = self.p(&rel);
                let _ = self.call("unlink", &rel, &[ENOENT], || sys::unlink(&p));
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
                self.write_file(&rel, target, flags, &data, &[ENOENT, EEXIST]);
            }
        }
    }

    fn truncate(&mut self) {
        let (rel, name) = self.readable();
        let size = *pick(&mut self.rng, &[0i64, 0, 1, 5, 70_000, 17 << 20, 1 << 40]);
        let mut allowed = vec![ENOENT];
        if rel.starts_with("slots/") {
            allowed.extend([EFBIG, EINVAL, EAGAIN, ETIMEDOUT, ENOSPC]);
        } else if rel.starts_with("agent-transcripts/") {
            allowed.extend([EPERM, EFBIG]);
        } else if matches!(name.as_str(), "README" | "status" | "sessions.json")
            && !rel.contains('/')
        {
            allowed.push(EACCES);
        } else if rel == "ctl" || matches!(name.as_str(), "input" | "ctl" | "prompt") {
            allowed.push(EFBIG);
        } else if name == "meta.json" || is_oneline(&name) {
            allowed.extend([EFBIG, EINVAL]);
        } else if SCRATCH.contains(&name.as_str()) {
            allowed.extend([EFBIG, ENOSPC, ELOOP]);
        } else if rel.contains("transcript/") {
            allowed.extend([EACCES, ESTALE]);
        } else {
            allowed.push(EACCES);
        }
        let p = self.p(&rel);
        if self.rng.chance(50) {
            let _ = self.call("truncate", &rel, &allowed, || sys::truncate(&p, size));
        } else {
            let mut open_allowed = allowed.clone();
            open_allowed.push(EACCES);
            open_allowed.push(EINVAL);
            if matches!(name.as_str(), "input" | "prompt") {
                open_allowed.extend(open_to_write_errnos(&name));
            }
            let Ok(fd) = self.call("open(w)", &rel, &open_allowed, || {
                sys::open(&p, libc::O_WRONLY)
            }) else {
                return;
            };
            let _ = self.call("ftruncate", &rel, &allowed, || sys::ftruncate(fd, size));
            let ca = close_errnos(&rel, &name);
            let _ = self.call("close", &rel, &ca, || sys::close(fd));
        }
    }

    fn rename(&mut self) {
        let key = self.key();
        let other = self.key();
        let (from, to, allowed): (String, String, Vec<i32>) = match self.rng.below(14) {
            0..=2 => (
                key.clone(),
                format!("archived/{key}"),
                vec![ENOENT, EAGAIN, ETIMEDOUT, ENOSPC],
            ),
            3..=5 => (
                format!("archived/{key}"),
                key.clone(),
                vec![ENOENT, EAGAIN, ETIMEDOUT, ENOSPC],
            ),
            6 => (key.clone(), "shell:renamed".into(), vec![ENOENT, EPERM]),
            7 => (key.clone(), "bad name!".into(), vec![ENOENT, EPERM, EINVAL]),
            // ENOTDIR: the view's link is there (the kernel's answer).
            8 => (
                key.clone(),
                format!("favourites/{key}"),
                vec![ENOENT, EXDEV, ENOTDIR],
            ),
            9 => (key.clone(), other.clone(), vec![ENOENT, EPERM]),
            10 => ("status".into(), "status2".into(), vec![EPERM]),
            11 => (
                format!("slots/{}/1", WORLDS[0]),
                format!("slots/{}/1", WORLDS[1]),
                vec![ENOENT, EXDEV],
            ),
            12 => (
                format!("{key}/scrollback"),
                format!("{key}/scrollback.old"),
                vec![ENOENT, EPERM],
            ),
            _ => {
                let a = *pick(&mut self.rng, &SCRATCH);
                let b = *pick(&mut self.rng, &["title", "notes", "meta.json~", "status"]);
                (
                    format!("{key}/{a}"),
                    format!("{key}/{b}"),
                    vec![ENOENT, EPERM, EINVAL, EAGAIN, ETIMEDOUT, EISDIR, ENOTDIR],
                )
            }
        };
        let (a, b) = (self.p(&from), self.p(&to));
        let what = format!("{from} -> {to}");
        let _ = self.call("rename", &what, &allowed, || sys::rename(&a, &b));
    }

    fn dirop(&mut self) {
        let key = self.key();
        let w = *pick(&mut self.rng, &WORLDS);
        match self.rng.below(16) {
            0..=2 => {
                let name = *pick(&mut self.rng, &MADE);
                let rel = name.to_string();
                let p = self.p(&rel);
                let made = self.call("mkdir", &rel, &[EEXIST, EAGAIN, ETIMEDOUT], || {
                    sys::mkdir(&p)
                });
                if made.is_ok() {
                    let mut keys = self.sh.keys.lock().unwrap();
                    if !keys.iter().any(|k| k == name) {
                        keys.push(name.to_string());
                    }
                }
            }
            3 => {
                let rel = *pick(
                    &mut self.rng,
                    &[
                        "bad name",
                        "nosuchengine:x",
                        "shell:",
                        ":x",
                        "shell:a/b",
                        "shell:.x",
                    ],
                );
                let p = self.p(rel);
                let _ = self.call("mkdir", rel, &[EINVAL, ENOENT, EAGAIN, ETIMEDOUT], || {
                    sys::mkdir(&p)
                });
            }
            4 => {
                let p = self.p("hosted:x");
                let _ = self.call("mkdir", "hosted:x", &[EPERM, EAGAIN, ETIMEDOUT], || {
                    sys::mkdir(&p)
                });
            }
            5 => {
                let name = format!("shell:{}", "x".repeat(300));
                let p = self.p(&name);
                let _ = self.call("mkdir", "shell:xxx…(300)", &[ENAMETOOLONG], || {
                    sys::mkdir(&p)
                });
            }
            6 => {
                let rel = *pick(
                    &mut self.rng,
                    &["archived/x", "projects/x", "favourites/x", "engines/x"],
                );
                let p = self.p(rel);
                let _ = self.call("mkdir", rel, &[EPERM], || sys::mkdir(&p));
            }
            7 => {
                let rel = format!("{key}/sub");
                let p = self.p(&rel);
                let _ = self.call("mkdir", &rel, &[EPERM, ENOENT], || sys::mkdir(&p));
            }
            8 => {
                let rel = *pick(
                    &mut self.rng,
                    &[
                        "archived",
                        "slots",
                        "favourites",
                        "projects",
                        "engines",
                        "agent-transcripts",
                    ],
                );
                let p = self.p(rel);
                let _ = self.call("rmdir", rel, &[EPERM], || sys::rmdir(&p));
            }
            9 => {
                let p = self.p(&key);
                let _ = self.call("rmdir", &key, &[EPERM, ENOENT], || sys::rmdir(&p));
            }
            10 => {
                let rel = format!("slots/{w}");
                let p = self.p(&rel);
                let _ = self.call("rmdir", &rel, &[ENOTEMPTY, EAGAIN, ETIMEDOUT], || {
                    sys::rmdir(&p)
                });
            }
            11 => {
                let f = *pick(
                    &mut self.rng,
                    &[
                        "status",
                        "scrollback",
                        "input",
                        "ctl",
                        "events",
                        "transcript",
                    ],
                );
                let rel = format!("{key}/{f}");
                let p = self.p(&rel);
                let _ = self.call("unlink", &rel, &[EPERM, ENOENT, EISDIR], || sys::unlink(&p));
            }
            12 => {
                let rel = *pick(&mut self.rng, &["README", "status", "ctl", "sessions.json"]);
                let p = self.p(rel);
                let _ = self.call("unlink", rel, &[EPERM], || sys::unlink(&p));
            }
            13 => {
                let rel = *pick(
                    &mut self.rng,
                    &["agent-transcripts/h1.jsonl", "agent-transcripts/run"],
                );
                let p = self.p(rel);
                let _ = self.call("unlink", rel, &[EPERM, ENOENT], || sys::unlink(&p));
            }
            14 => {
                let rel = *pick(&mut self.rng, &["link-here", "slots/link", "archived/link"]);
                let p = self.p(rel);
                let _ = self.call("symlink", rel, &[EPERM], || sys::symlink("status", &p));
                let n = self.p("nod");
                let _ = self.call("mknod", "nod", &[EPERM], || sys::mknod(&n));
                let kn = format!("{key}/fifo");
                let n = self.p(&kn);
                let _ = self.call("mknod", &kn, &[EPERM, ENOENT], || sys::mknod(&n));
            }
            _ => {
                let (a, b) = (format!("{key}/status"), format!("{key}/status.link"));
                let (pa, pb) = (self.p(&a), self.p(&b));
                let what = format!("{a} -> {b}");
                let _ = self.call("link", &what, &[EPERM, ENOENT], || sys::link(&pa, &pb));
                let s = format!("{key}/.meta.json.swp");
                let ps = self.p(&s);
                let pt = self.p(&format!("{key}/swp.link"));
                let _ = self.call("link", &s, &[EPERM, ENOENT], || sys::link(&ps, &pt));
                let rel = format!("{key}/meta.json");
                let p = self.p(&rel);
                let _ = self.call("chmod", &rel, &[ENOENT], || sys::chmod(&p, 0o600));
                let rel = format!("{key}/status");
                let p = self.p(&rel);
                let _ = self.call("chmod", &rel, &[ENOENT, EPERM], || sys::chmod(&p, 0o644));
            }
        }
    }

    fn xattr(&mut self) {
        let (rel, _) = self.readable();
        let rel = if self.rng.chance(20) { self.key() } else { rel };
        let p = self.p(&rel);
        let name = *pick(
            &mut self.rng,
            &[
                "user.chaos",
                "system.posix_acl_access",
                "security.selinux",
                "trusted.x",
            ],
        );
        match self.rng.below(4) {
            0 => {
                // The kernel checks an ACL's value itself (EINVAL).
                let _ = self.call(
                    "setxattr",
                    &rel,
                    &[ENOENT, EOPNOTSUPP, ELOOP, EINVAL],
                    || sys::setxattr(&p, name),
                );
            }
            1 => {
                let _ = self.call("removexattr", &rel, &[ENOENT, EOPNOTSUPP, ELOOP], || {
                    sys::removexattr(&p, name)
                });
            }
            2 => {
                // An ACL the file does not have: the kernel's ENODATA.
                let _ = self.call(
                    "getxattr",
                    &rel,
                    &[ENOENT, EOPNOTSUPP, ELOOP, libc::ENODATA],
                    || sys::getxattr(&p, name),
                );
            }
            _ => {
                let _ = self.call("listxattr", &rel, &[ENOENT, EOPNOTSUPP, ELOOP], || {
                    sys::listxattr(&p)
                });
            }
        }
    }

    fn root_ctl(&mut self) {
        let cmd: Vec<u8> = match self.rng.below(12) {
            0 => b"new shell\n".to_vec(),
            1 => format!("new shell title=made by chaos {}\n", self.rng.below(100)).into_bytes(),
            2 => b"new hosted\n".to_vec(),
            3 => b"new shell workspace=relative\n".to_vec(),
            4 => b"archive-older 1h\n".to_vec(),
            // Everything idle for 5 s: most sessions, now and then.
            5 if self.rng.chance(15) => b"archive-older 5s\n".to_vec(),
            6 => b"archive-older yesterday\n".to_vec(),
            7 => b"\n\n".to_vec(),
            8 => (0..self.rng.below(100))
                .map(|_| self.rng.below(256) as u8)
                .collect(),
            9 => b"new nosuchengine\n".to_vec(),
            _ => b"archive-older 30d\n".to_vec(),
        };
        self.write_file("ctl", "ctl", libc::O_WRONLY | libc::O_TRUNC, &cmd, &[]);
    }

    /// Opens a file and keeps it open.
    fn hold(&mut self) {
        if self.held.len() >= HELD {
            return self.close_held();
        }
        let (rel, name) = self.readable();
        let writable = matches!(
            name.as_str(),
            "input"
                | "ctl"
                | "prompt"
                | "meta.json"
                | "title"
                | "project"
                | "favourite"
                | "archive"
        ) || SCRATCH.contains(&name.as_str())
            || rel.starts_with("slots/")
            || rel.starts_with("agent-transcripts/");
        let never = rel.contains(NEVER);
        let writes = writable
            && !(never && matches!(name.as_str(), "input" | "prompt"))
            && self.rng.chance(50);
        let flags = if writes {
            if rel.starts_with("agent-transcripts/") {
                libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT
            } else if SCRATCH.contains(&name.as_str()) || rel.starts_with("slots/") {
                libc::O_WRONLY | libc::O_CREAT
            } else {
                libc::O_WRONLY
            }
        } else {
            // A held `wait` must never block a later read.
            libc::O_RDONLY | libc::O_NONBLOCK
        };
        let mut allowed = vec![ENOENT];
        if rel.contains("transcript/") {
            allowed.push(ESTALE);
        }
        if SCRATCH.contains(&name.as_str()) {
            allowed.extend([ELOOP, ENOSPC]);
        }
        if rel.starts_with("slots/") {
            allowed.extend([EFBIG, EINVAL]);
        }
        if writes && rel.starts_with("agent-transcripts/") {
            allowed.push(EINVAL);
        }
        if writes && matches!(name.as_str(), "input" | "prompt") {
            allowed = open_to_write_errnos(&name);
        }
        let p = self.p(&rel);
        if let Ok(fd) = self.call("open(hold)", &rel, &allowed, || sys::open(&p, flags)) {
            self.held.push(Held {
                fd,
                path: rel,
                name,
                writes,
                written: 0,
            });
        }
    }

    fn use_held(&mut self) {
        if self.held.is_empty() {
            return self.hold();
        }
        let i = self.rng.below(self.held.len() as u64) as usize;
        let (fd, rel, name, writes, written) = {
            let h = &self.held[i];
            (h.fd, h.path.clone(), h.name.clone(), h.writes, h.written)
        };
        let read_allowed: &[i32] = if name == "wait" {
            &[ENOENT, EAGAIN]
        } else {
            &[ENOENT]
        };
        match self.rng.below(5) {
            0 => {
                let _ = self.call("fstat(held)", &rel, &[ENOENT], || sys::fstat(fd));
                let _ = self.call("lseek(held)", &rel, &[ENOENT, EINVAL], || {
                    sys::lseek_end(fd)
                });
            }
            1 => {
                let ms = self.rng.below(50) as i32;
                if let Ok(revents) = self.call("poll(held)", &rel, &[], || sys::poll(fd, ms)) {
                    if revents & (libc::POLLNVAL | libc::POLLERR) != 0 {
                        self.sh
                            .violation(&self.who, format!("poll {rel}: revents {revents:#x}"));
                    }
                }
            }
            2 if !writes => {
                let _ = self.call("ftruncate(held)", &rel, &[EACCES, EINVAL, ENOENT], || {
                    sys::ftruncate(fd, 0)
                });
            }
            _ if writes => {
                let data = if name == "input" {
                    input_bytes(&mut self.rng)
                } else if name == "ctl" {
                    b"resize 100x30\n".to_vec()
                } else if is_oneline(&name) {
                    oneline_bytes(&mut self.rng, &name)
                } else if rel.starts_with("slots/") {
                    format!("{{\"sessionId\":\"held-{}\"}}", self.rng.below(100)).into_bytes()
                } else if rel.starts_with("agent-transcripts/") {
                    b"{\"type\":\"text\",\"text\":\"held\"}\n".to_vec()
                } else if name == "prompt" {
                    b"echo held-prompt".to_vec()
                } else {
                    vec![b'{'; self.rng.below(100) as usize]
                };
                let wa = write_errnos(&rel, &name);
                let at_end = self.rng.chance(80);
                let r = if at_end {
                    self.call("write(held)", &rel, &wa, || sys::write(fd, &data))
                } else {
                    let at = self.rng.below(1 << 21);
                    self.call("pwrite(held)", &rel, &wa, || sys::pwrite(fd, &data, at))
                };
                if let Ok(n) = r {
                    self.held[i].written = written + n as u64;
                }
            }
            _ => {
                let at = self.rng.below(1 << 18);
                let n = self.rng.below(1 << 16) as usize + 1;
                let _ = self.call("pread(held)", &rel, read_allowed, || sys::pread(fd, at, n));
                let _ = self.call("read(held)", &rel, read_allowed, || sys::read(fd, 4096));
            }
        }
    }

    fn close_held(&mut self) {
        if !self.held.is_empty() {
            let i = self.rng.below(self.held.len() as u64) as usize;
            self.close_one(i);
        }
    }

    fn close_one(&mut self, i: usize) {
        let h = self.held.swap_remove(i);
        let allowed = if h.writes {
            close_errnos(&h.path, &h.name)
        } else {
            vec![]
        };
        let _ = self.call("close(held)", &h.path, &allowed, || sys::close(h.fd));
    }

    /// `wait`: with O_NONBLOCK here, or a blocking `cat` in a child that
    /// `timeout` signals after a second.
    fn wait(&mut self) {
        let key = self.key();
        let base = self.base(&key);
        let rel = format!("{base}/wait");
        if self.rng.chance(60) {
            let p = self.p(&rel);
            let Ok(fd) = self.call("open", &rel, &[ENOENT], || {
                sys::open(&p, libc::O_RDONLY | libc::O_NONBLOCK)
            }) else {
                return;
            };
            let _ = self.call("read(nonblock)", &rel, &[EAGAIN, ENOENT], || {
                sys::read(fd, 64)
            });
            let _ = self.call("close", &rel, &[], || sys::close(fd));
            return;
        }
        let p = self.p(&rel);
        let mut cat = Command::new("timeout");
        cat.args(["-s", "TERM", "1", "cat"]).arg(&p);
        let Some((mut child, t0)) = self.child(cat, format!("child `timeout 1 cat {rel}`")) else {
            return;
        };
        let mut ended = false;
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = child.try_wait() {
                ended = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        *self.sh.slots[self.id].lock().unwrap() = None;
        if !ended {
            self.sh.violation(
                &self.who,
                format!("`timeout 1 cat {rel}` still running after 10 s"),
            );
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
        }
        let mut tally = self.sh.tally.lock().unwrap();
        let e = tally
            .entry((
                "child cat wait".into(),
                if ended { "ok" } else { "hung" }.into(),
            ))
            .or_default();
        e.0 += 1;
        e.1 = e.1.max(t0.elapsed());
    }

    fn slots(&mut self) {
        let w = *pick(&mut self.rng, &WORLDS);
        let slot = *pick(
            &mut self.rng,
            &["1", "2", "3", "4", "5", "0", "01", "x", "4294967296"],
        );
        let rel = format!("slots/{w}/{slot}");
        let bad_slot = matches!(slot, "0" | "01" | "x" | "4294967296");
        match self.rng.below(6) {
            0..=2 => {
                let data: Vec<u8> = match self.rng.below(6) {
                    0 => b"{\"sessionId\":\"\"}".to_vec(),
                    1 => b"{not json".to_vec(),
                    2 => format!("{{\"sessionId\":\"{}\"}}", "a".repeat(200)).into_bytes(),
                    3 if self.rng.chance(10) => {
                        format!("{{\"sessionId\":\"s\",\"name\":\"{}\"}}", "n".repeat(1_100_000))
                            .into_bytes()
                    }
                    _ => format!(
                        "{{\"sessionId\":\"s-{}\",\"name\":\"n\",\"workspace\":\"/w\",\"harness\":\"claude\"}}\n",
                        self.rng.below(1000)
                    )
                    .into_bytes(),
                };
                // A world is always there, but a create that meets an
                // `rmdir` of it in the kernel finds it removed (ENOENT).
                let open_allowed: &[i32] = if bad_slot {
                    &[EINVAL, ENOENT]
                } else {
                    &[ENOENT]
                };
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
                self.write_file(&rel, slot, flags, &data, open_allowed);
            }
            3 => {
                let p = self.p(&rel);
                let allowed: &[i32] = if bad_slot {
                    &[ENOENT, EINVAL]
                } else {
                    &[ENOENT, EAGAIN, ETIMEDOUT]
                };
                let _ = self.call("unlink", &rel, allowed, || sys::unlink(&p));
            }
            4 => {
                let rel = if self.rng.chance(50) {
                    format!("slots/{w}")
                } else {
                    "slots/not-a-guid".into()
                };
                let p = self.p(&rel);
                let _ = self.call("mkdir", &rel, &[EEXIST, EINVAL], || sys::mkdir(&p));
            }
            _ => {
                let rel = format!("slots/{w}");
                let p = self.p(&rel);
                let _ = self.call("readdir", &rel, &[], || sys::readdir(&p));
            }
        }
    }

    fn hosted(&mut self) {
        let h = *pick(&mut self.rng, &HOSTED);
        let rel = format!("agent-transcripts/{h}.jsonl");
        match self.rng.below(8) {
            0..=2 => {
                let data: Vec<u8> = match self.rng.below(5) {
                    0 => b"{\"text\":\"no type\"}\n".to_vec(),
                    1 => b"{\"type\":\"half".to_vec(),
                    _ => format!(
                        "{{\"type\":\"text\",\"text\":\"entry {}\"}}\n",
                        self.rng.below(1000)
                    )
                    .into_bytes(),
                };
                let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT;
                self.write_file(&rel, "jsonl", flags, &data, &[]);
            }
            3 => {
                let p = self.p(&rel);
                let _ = self.call("open(O_TRUNC)", &rel, &[EPERM, ENOENT], || {
                    sys::open(&p, libc::O_WRONLY | libc::O_TRUNC).map(|fd| {
                        let _ = sys::close(fd);
                    })
                });
                let _ = self.call("open(O_RDWR)", &rel, &[EINVAL, ENOENT], || {
                    sys::open(&p, libc::O_RDWR).map(|fd| {
                        let _ = sys::close(fd);
                    })
                });
            }
            4 => {
                let rel = *pick(
                    &mut self.rng,
                    &[
                        "agent-transcripts/bad name.jsonl",
                        "agent-transcripts/x.txt",
                    ],
                );
                let p = self.p(rel);
                let _ = self.call("create", rel, &[EINVAL], || {
                    sys::open(&p, libc::O_WRONLY | libc::O_CREAT).map(|fd| {
                        let _ = sys::close(fd);
                    })
                });
            }
            5 => {
                let data = format!(
                    "{{\"type\":\"run-state\",\"phase\":\"p{}\"}}\n",
                    self.rng.below(9)
                );
                self.write_file(
                    "agent-transcripts/run",
                    "run",
                    libc::O_WRONLY | libc::O_TRUNC,
                    data.as_bytes(),
                    &[],
                );
            }
            _ => {
                let page = self.rng.below(4);
                let rel = format!("hosted:{h}/transcript/page-{page}");
                let p = self.p(&rel);
                let Ok(fd) = self.call("open", &rel, &[ENOENT, ESTALE], || {
                    sys::open(&p, libc::O_RDONLY)
                }) else {
                    return;
                };
                while let Ok(b) = self.call("read", &rel, &[], || sys::read(fd, 65536)) {
                    if b.is_empty() {
                        break;
                    }
                }
                let _ = self.call("close", &rel, &[], || sys::close(fd));
            }
        }
    }

    /// The Claude conversation grows in its store, or a file is mapped.
    fn store_or_map(&mut self) {
        if self.rng.chance(60) {
            let line = self.sh.store_rest.lock().unwrap().pop();
            if let Some(line) = line {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&self.sh.claude_store)
                    .unwrap();
                f.write_all(&line).unwrap();
            }
            return;
        }
        // mmap in a child: a mapping that outruns the file gets SIGBUS,
        // which must end only that child.
        let (rel, _) = self.readable();
        let p = self.p(&rel);
        let mut map = Command::new("python3");
        map.args([
            "-c",
            "import mmap,os,sys\nf=os.open(sys.argv[1],os.O_RDONLY)\nn=os.fstat(f).st_size\nif n:\n m=mmap.mmap(f,n,mmap.MAP_PRIVATE,mmap.PROT_READ)\n m[:min(n,4096)]",
        ])
        .arg(&p);
        let Some((mut child, t0)) = self.child(map, format!("child mmap {rel}")) else {
            return;
        };
        while t0.elapsed() < HANG && !matches!(child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(20));
        }
        *self.sh.slots[self.id].lock().unwrap() = None;
        if t0.elapsed() >= HANG {
            self.sh
                .violation(&self.who, format!("mmap of {rel} in a child hung"));
        }
    }
}

/// Starts `threads` clients (client `id` seeded from `seed` and its id) and
/// the sentinel, which watches from the last slot.
pub fn start(shared: &Arc<Shared>, seed: u64, threads: usize) -> Vec<std::thread::JoinHandle<()>> {
    let mut handles = vec![];
    for id in 0..threads {
        let sh = shared.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("client-{id}"))
                .spawn(move || {
                    let mut c = Client {
                        id,
                        who: format!("client {id}"),
                        sh: &sh,
                        rng: Rng::new(seed.wrapping_add(id as u64 * 7919)),
                        held: vec![],
                    };
                    c.run();
                })
                .unwrap(),
        );
    }
    {
        let sh = shared.clone();
        handles.push(
            std::thread::Builder::new()
                .name("sentinel".into())
                .spawn(move || sentinel(&sh, threads))
                .unwrap(),
        );
    }
    handles
}

/// Ends every child a client started, with its process group.
pub fn end_children(shared: &Shared) {
    for pid in shared.children.lock().unwrap().iter() {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

// ---------------------------------------------------------------------------
// The sentinel.

fn sentinel(sh: &Shared, slot: usize) {
    while !sh.stop.load(Ordering::Relaxed) {
        for what in ["read status", "ls /"] {
            let t0 = Instant::now();
            *sh.slots[slot].lock().unwrap() = Some((format!("sentinel: {what}"), t0));
            let result = if what == "ls /" {
                sys::readdir(&sh.mnt).map(drop)
            } else {
                std::fs::read(sh.mnt.join("status"))
                    .map_err(|e| e.raw_os_error().unwrap_or(0))
                    .and_then(|b| {
                        serde_json::from_slice::<Value>(&b)
                            .map(drop)
                            .map_err(|_| -1)
                    })
            };
            *sh.slots[slot].lock().unwrap() = None;
            let took = t0.elapsed();
            {
                let mut worst = sh.sentinel_worst.lock().unwrap();
                *worst = (*worst).max(took);
            }
            if let Err(e) = result {
                sh.violation("sentinel", format!("{what}: {}", errno_name(e)));
            }
            if took > SENTINEL_LIMIT {
                sh.violation("sentinel", format!("{what} took {took:.2?}"));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
