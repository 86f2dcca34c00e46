//! A catalogue of hostile inputs through the real mount: every writable
//! file, every directory operation, both `ctl` files. Each row is one call
//! (or a short sequence) made with raw syscalls, and asserts the exact
//! errno, the reason where docs/ERRORS.md promises one (the session's
//! `status.error`, or the root `status`'s `error`, and the log), that no
//! stored state changed (`meta.json`, the sidecar, slot records and hosted
//! transcripts, byte for byte), and that the daemon still answers
//! `cat MNT/status` within 100 ms.

mod common;
/// The catalogue's calls on the core in process, without a mount.
mod hostile {
    pub mod direct;
}

use common::*;
use hostile::direct::Direct;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const KEY: &str = "shell:hostile";
const WORLD: &str = "0b5e7e9a-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
const HOSTED: &str = "agent-transcripts/h1.jsonl";
const ARCHIVED: &str = "archived/shell:arch";

/// Where the reason of a refusal is promised.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scope {
    /// The session's `status.error` and the log.
    Session,
    /// Another session's (its directory): `status.error` and the log.
    Of(&'static str),
    /// The root `status`'s `error` and the log.
    Root,
    /// None: the kernel answers without asking the daemon (a path that
    /// does not resolve, a name too long), or a lookup that finds nothing.
    Kernel,
}

/// One call (or a short sequence) on paths relative to the mount.
#[derive(Debug, Clone)]
enum Op {
    /// open(flags), every byte written (a short count is followed by a
    /// write of the rest, as a careful writer does; `at`: pwrite from
    /// there), close. The first error counts.
    Write {
        path: String,
        flags: i32,
        data: Vec<u8>,
        at: Option<u64>,
    },
    /// open(flags), then close.
    Open(String, i32),
    /// open(O_RDONLY), read, close.
    Read(String),
    Truncate(String, i64),
    /// open(O_WRONLY), ftruncate, close.
    Ftruncate(String, i64),
    Mkdir(String),
    Rmdir(String),
    Unlink(String),
    Rename(String, String),
    Link(String, String),
    /// symlink(target, path).
    Symlink(String, String),
    /// mknod(path, mode, dev).
    Mknod(String, u32, u64),
    Chmod(String, u32),
    Chown(String),
    SetXattr(String),
    RemoveXattr(String),
    /// getxattr of `user.hostile`, then listxattr, on the same path: both
    /// must fail the same way.
    GetXattr(String),
    /// The first must succeed; the second is the row's call.
    Then(Box<Op>, Box<Op>),
}

struct Row {
    name: String,
    op: Op,
    errno: i32,
    scope: Scope,
    /// Words the reason must contain.
    needle: &'static str,
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// 0 or -1 from a syscall, as the errno.
fn check(r: i64) -> Result<(), i32> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// Runs `op` against the mount at `mnt`: Ok or the first errno.
fn run(mnt: &Path, op: &Op) -> Result<(), i32> {
    let p = |rel: &str| cpath(&mnt.join(rel));
    // SAFETY (every call below): plain syscalls on NUL-terminated paths
    // and on buffers that outlive the call; fds are closed here.
    unsafe {
        match op {
            Op::Write {
                path,
                flags,
                data,
                at,
            } => {
                let fd = libc::open(p(path).as_ptr(), *flags, 0o600);
                check(fd as i64)?;
                let mut result = Ok(());
                let mut done = 0usize;
                while done < data.len() {
                    let rest = &data[done..];
                    let n = match at {
                        Some(off) => libc::pwrite(
                            fd,
                            rest.as_ptr().cast(),
                            rest.len(),
                            (*off + done as u64) as libc::off_t,
                        ),
                        None => libc::write(fd, rest.as_ptr().cast(), rest.len()),
                    };
                    if n < 0 {
                        result = Err(errno());
                        break;
                    }
                    done += n as usize;
                }
                let closed = check(libc::close(fd) as i64);
                result.and(closed)
            }
            Op::Open(path, flags) => {
                let fd = libc::open(p(path).as_ptr(), *flags, 0o600);
                check(fd as i64)?;
                check(libc::close(fd) as i64)
            }
            Op::Read(path) => {
                let fd = libc::open(p(path).as_ptr(), libc::O_RDONLY);
                check(fd as i64)?;
                let mut buf = [0u8; 4096];
                let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                let result = check(n as i64);
                libc::close(fd);
                result
            }
            Op::Truncate(path, size) => check(libc::truncate(p(path).as_ptr(), *size) as i64),
            Op::Ftruncate(path, size) => {
                let fd = libc::open(p(path).as_ptr(), libc::O_WRONLY);
                check(fd as i64)?;
                let result = check(libc::ftruncate(fd, *size) as i64);
                libc::close(fd);
                result
            }
            Op::Mkdir(path) => check(libc::mkdir(p(path).as_ptr(), 0o755) as i64),
            Op::Rmdir(path) => check(libc::rmdir(p(path).as_ptr()) as i64),
            Op::Unlink(path) => check(libc::unlink(p(path).as_ptr()) as i64),
            Op::Rename(a, b) => check(libc::rename(p(a).as_ptr(), p(b).as_ptr()) as i64),
            Op::Link(a, b) => check(libc::link(p(a).as_ptr(), p(b).as_ptr()) as i64),
            Op::Symlink(target, path) => {
                let target = CString::new(target.as_str()).unwrap();
                check(libc::symlink(target.as_ptr(), p(path).as_ptr()) as i64)
            }
            Op::Mknod(path, mode, dev) => {
                check(libc::mknod(p(path).as_ptr(), *mode, *dev as libc::dev_t) as i64)
            }
            Op::Chmod(path, mode) => check(libc::chmod(p(path).as_ptr(), *mode) as i64),
            Op::Chown(path) => check(libc::chown(p(path).as_ptr(), 1, 1) as i64),
            Op::SetXattr(path) => {
                let name = CString::new("user.hostile").unwrap();
                check(
                    libc::setxattr(p(path).as_ptr(), name.as_ptr(), b"1".as_ptr().cast(), 1, 0)
                        as i64,
                )
            }
            Op::RemoveXattr(path) => {
                let name = CString::new("user.hostile").unwrap();
                check(libc::removexattr(p(path).as_ptr(), name.as_ptr()) as i64)
            }
            Op::GetXattr(path) => {
                let name = CString::new("user.hostile").unwrap();
                let mut buf = [0u8; 64];
                let got =
                    libc::getxattr(p(path).as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), 64);
                let first = check(got as i64);
                let listed =
                    check(libc::listxattr(p(path).as_ptr(), buf.as_mut_ptr().cast(), 64) as i64);
                assert_eq!(first, listed, "getxattr and listxattr of {path}");
                first
            }
            Op::Then(first, second) => {
                run(mnt, first).unwrap_or_else(|e| panic!("setup {first:?} failed: errno {e}"));
                run(mnt, second)
            }
        }
    }
}

/// `echo`-like: O_WRONLY|O_CREAT|O_TRUNC, one write.
fn put(path: &str, data: impl AsRef<[u8]>) -> Op {
    write_with(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, data)
}

fn write_with(path: &str, flags: i32, data: impl AsRef<[u8]>) -> Op {
    Op::Write {
        path: path.to_string(),
        flags,
        data: data.as_ref().to_vec(),
        at: None,
    }
}

/// `>>`: O_WRONLY|O_APPEND.
fn append(path: &str, data: impl AsRef<[u8]>) -> Op {
    write_with(path, libc::O_WRONLY | libc::O_APPEND, data)
}

fn pwrite_at(path: &str, at: u64, data: &[u8]) -> Op {
    Op::Write {
        path: path.to_string(),
        flags: libc::O_WRONLY,
        data: data.to_vec(),
        at: Some(at),
    }
}

fn s(rel: &str) -> String {
    format!("{KEY}/{rel}")
}

fn w(rel: &str) -> String {
    format!("slots/{WORLD}/{rel}")
}

fn row(name: impl Into<String>, op: Op, errno: i32, scope: Scope, needle: &'static str) -> Row {
    Row {
        name: name.into(),
        op,
        errno,
        scope,
        needle,
    }
}

/// Every hostile input, in the order they run: one row a line.
#[rustfmt::skip]
fn catalogue(mnt: &Path) -> Vec<Row> {
    use libc::*;
    use Scope::*;
    let big = |n: usize| "x".repeat(n);
    let two_mib = 2usize << 20;
    let mut rows = vec![
        // The session's `ctl`.
        row("ctl: unknown command", put(&s("ctl"), "bogus\n"), EINVAL, Session, "unknown ctl command"),
        row("ctl: a blank line", put(&s("ctl"), "\n"), EINVAL, Session, "empty ctl command"),
        row("ctl: blanks and tabs", put(&s("ctl"), "  \t\n \n"), EINVAL, Session, "empty ctl command"),
        row("ctl: not UTF-8", put(&s("ctl"), b"\xff\xfe\n"), EINVAL, Session, "UTF-8"),
        row("ctl: NUL in a command", put(&s("ctl"), "open\0\n"), EINVAL, Session, "unknown ctl command"),
        row("ctl: escape sequences", put(&s("ctl"), "\x1b[2J\x07\n"), EINVAL, Session, "unknown ctl command"),
        row("ctl: 100 KiB command", put(&s("ctl"), big(100_000)), EINVAL, Session, "unknown ctl command"),
        row("ctl: resize 1x1", put(&s("ctl"), "resize 1x1\n"), EINVAL, Session, "resize 1x1"),
        row("ctl: resize 100000x5", put(&s("ctl"), "resize 100000x5\n"), EINVAL, Session, "resize"),
        row("ctl: resize 600x600 (cells)", put(&s("ctl"), "resize 600x600\n"), EINVAL, Session, "resize 600x600"),
        row("ctl: resize -5x10", put(&s("ctl"), "resize -5x10\n"), EINVAL, Session, "COLSxROWS"),
        row("ctl: resize axb", put(&s("ctl"), "resize axb\n"), EINVAL, Session, "COLSxROWS"),
        row("ctl: resize without size", put(&s("ctl"), "resize\n"), EINVAL, Session, "unknown ctl command"),
        row("ctl: open with an argument", put(&s("ctl"), "open now\n"), EINVAL, Session, "unknown ctl command"),
        row("ctl: too many words", put(&s("ctl"), "stop stop stop\n"), EINVAL, Session, "too many words"),
        row("ctl: redraw while not live", put(&s("ctl"), "redraw\n"), ENOTCONN, Session, "not live"),
        // A plain read of a write-only file is refused by the kernel's mode
        // check; root, which passes it, reads nothing (tests/tree.rs).
        row("ctl: O_RDWR", Op::Open(s("ctl"), O_RDWR), EACCES, Session, "write-only"),
        row("ctl: truncate to 5", Op::Truncate(s("ctl"), 5), EFBIG, Session, "a stream"),
        // The session's `input` (a write would start the session: only refusals here).
        row("input: O_RDWR", Op::Open(s("input"), O_RDWR), EACCES, Session, "write-only"),
        row("input: truncate to 10", Op::Truncate(s("input"), 10), EFBIG, Session, "a stream"),
        row("input: ftruncate to 1 GiB", Op::Ftruncate(s("input"), 1 << 30), EFBIG, Session, "a stream"),
        // prompt (a prompt that is taken would start the session: only refusals here).
        row("prompt: not UTF-8", put(&s("prompt"), b"\xff\xfe\n"), EINVAL, Session, "UTF-8"),
        row("prompt: over 1 MiB", put(&s("prompt"), big(two_mib)), EINVAL, Session, "a prompt is at most"),
        row("prompt: O_RDWR", Op::Open(s("prompt"), O_RDWR), EACCES, Session, "write-only"),
        row("prompt: truncate to 5", Op::Truncate(s("prompt"), 5), EFBIG, Session, "a stream"),
        // An empty prompt is refused without a reason: a shell's redirection
        // flushes one before the text comes.
        row("prompt: empty", put(&s("prompt"), ""), EINVAL, Kernel, ""),
        row("prompt: rm", Op::Unlink(s("prompt")), EPERM, Session, "only files an editor made"),
        // state, events, wait: read-only.
        row("state: O_WRONLY", Op::Open(s("state"), O_WRONLY), EACCES, Session, "read-only"),
        row("state: rm", Op::Unlink(s("state")), EPERM, Session, "only files an editor made"),
        row("events: truncate", Op::Truncate(s("events"), 0), EACCES, Session, "read-only"),
        row("events: O_WRONLY|O_APPEND", Op::Open(s("events"), O_WRONLY | O_APPEND), EACCES, Session, "read-only"),
        row("wait: O_WRONLY", Op::Open(s("wait"), O_WRONLY), EACCES, Session, "read-only"),
        row("wait: chmod", Op::Chmod(s("wait"), 0o666), EPERM, Session, "chmod"),
        // meta.json.
        row("meta.json: not JSON", put(&s("meta.json"), "not json\n"), EINVAL, Session, "not valid JSON"),
        row("meta.json: trailing garbage", put(&s("meta.json"), "{}}"), EINVAL, Session, "not valid JSON"),
        row("meta.json: duplicate key", put(&s("meta.json"), r#"{"title":"a","title":"b"}"#), EINVAL, Session, "duplicate key \"title\""),
        row("meta.json: duplicate key, same value", put(&s("meta.json"), r#"{"favourite":false,"favourite":false}"#), EINVAL, Session, "duplicate key"),
        row("meta.json: duplicate read-only key", put(&s("meta.json"), r#"{"pid":null,"pid":null}"#), EINVAL, Session, "duplicate key"),
        row("meta.json: unknown key", put(&s("meta.json"), r#"{"colour":"red"}"#), EINVAL, Session, "unknown field `colour`"),
        row("meta.json: title a number", put(&s("meta.json"), r#"{"title":42}"#), EINVAL, Session, "must be a string or null"),
        row("meta.json: favourite a string", put(&s("meta.json"), r#"{"favourite":"yes"}"#), EINVAL, Session, "true or false"),
        row("meta.json: archived a number", put(&s("meta.json"), r#"{"archived":1}"#), EINVAL, Session, "true or false"),
        row("meta.json: project an array", put(&s("meta.json"), r#"{"project":["a"]}"#), EINVAL, Session, "must be a string or null"),
        row("meta.json: key changed", put(&s("meta.json"), r#"{"key":"shell:other"}"#), EINVAL, Session, "read-only"),
        row("meta.json: pid changed", put(&s("meta.json"), r#"{"pid":"x"}"#), EINVAL, Session, "read-only"),
        row("meta.json: title with ESC", put(&s("meta.json"), r#"{"title":"a\u001b[31mb"}"#), EINVAL, Session, "control characters"),
        row("meta.json: title of 2000 bytes", put(&s("meta.json"), format!(r#"{{"title":"{}"}}"#, big(2000))), EINVAL, Session, "at most 1024"),
        row("meta.json: project with /", put(&s("meta.json"), r#"{"project":"../etc"}"#), EINVAL, Session, "must not contain `/`"),
        row("meta.json: project ..", put(&s("meta.json"), r#"{"project":".."}"#), EINVAL, Session, "cannot be named"),
        row("meta.json: workspace missing", put(&s("meta.json"), r#"{"workspace":"/nonexistent/sessionfs"}"#), EINVAL, Session, "cannot be used"),
        row("meta.json: workspace relative", put(&s("meta.json"), r#"{"workspace":"rel/dir"}"#), EINVAL, Session, "absolute"),
        row("meta.json: workspace a file", put(&s("meta.json"), r#"{"workspace":"/dev/null"}"#), EINVAL, Session, "not a directory"),
        row("meta.json: workspace in the mount", put(&s("meta.json"), format!(r#"{{"workspace":"{}"}}"#, mnt.join(KEY).display())), EINVAL, Session, "inside the sessionfs mount"),
        row("meta.json: workspace a link into the mount", put(&s("meta.json"), format!(r#"{{"workspace":"{}"}}"#, mnt.with_file_name("into-mount").display())), EINVAL, Session, "inside the sessionfs mount"),
        row("root ctl: new, workspace a link into the mount", put("ctl", format!("new shell workspace={}\n", mnt.with_file_name("into-mount").display())), EINVAL, Root, "inside the sessionfs mount"),
        row("meta.json: an array", put(&s("meta.json"), "[1,2]"), EINVAL, Session, "one JSON object"),
        row("meta.json: not UTF-8", put(&s("meta.json"), b"{\"title\":\"\xff\"}"), EINVAL, Session, "meta.json"),
        row("meta.json: 100,000 brackets deep", put(&s("meta.json"), "[".repeat(60_000)), EINVAL, Session, "not valid JSON"),
        row("meta.json: one 2 MiB write", put(&s("meta.json"), big(two_mib)), EFBIG, Session, "over its limit"),
        row("meta.json: pwrite at 1 TiB", pwrite_at(&s("meta.json"), 1 << 40, b"{}"), EFBIG, Session, "over its limit"),
        row("meta.json: pwrite at 2^62", pwrite_at(&s("meta.json"), 1 << 62, b"x"), EFBIG, Session, "over its limit"),
        row("meta.json: truncate to 1 MiB", Op::Truncate(s("meta.json"), 1 << 20), EFBIG, Session, "over its limit"),
        row("meta.json: O_RDWR", Op::Open(s("meta.json"), O_RDWR), EINVAL, Session, "read or written whole"),
        row("meta.json: O_RDWR|O_TRUNC", Op::Open(s("meta.json"), O_RDWR | O_TRUNC), EINVAL, Session, "read or written whole"),
        row("meta.json: O_DIRECT, bad JSON", write_with(&s("meta.json"), O_WRONLY | O_TRUNC | O_DIRECT, "nope"), EINVAL, Session, "not valid JSON"),
        row("meta.json: O_APPEND, bad JSON", append(&s("meta.json"), "]"), EINVAL, Session, "written whole from offset 0"),
        row("meta.json: setxattr", Op::SetXattr(s("meta.json")), EOPNOTSUPP, Session, "extended attribute"),
        row("meta.json: removexattr", Op::RemoveXattr(s("meta.json")), EOPNOTSUPP, Session, "extended attribute"),
        row("meta.json: getxattr", Op::GetXattr(s("meta.json")), EOPNOTSUPP, Kernel, ""),
        row("scrollback: getxattr", Op::GetXattr(s("scrollback")), EOPNOTSUPP, Kernel, ""),
        row("meta.json: hard link", Op::Link(s("meta.json"), s("m2")), EPERM, Session, "hard links"),
        row("meta.json: open as a directory", Op::Open(s("meta.json"), O_RDONLY | O_DIRECTORY), ENOTDIR, Kernel, ""),
        // The one-line files.
        row("title: two lines", put(&s("title"), "a\nb\n"), EINVAL, Session, "one line"),
        row("title: truncate to 5", Op::Truncate(s("title"), 5), EINVAL, Session, "written whole"),
        row("meta.json: ftruncate to 5", Op::Ftruncate(s("meta.json"), 5), EINVAL, Session, "written whole"),
        row("title: ESC and BEL", put(&s("title"), "\x1b]0;pwn\x07\n"), EINVAL, Session, "control characters"),
        row("title: not UTF-8", put(&s("title"), b"\xff\xfe\n"), EINVAL, Session, "UTF-8"),
        row("title: 2000 bytes", put(&s("title"), big(2000)), EINVAL, Session, "at most 1024"),
        row("title: U+2028", put(&s("title"), "a\u{2028}b\n"), EINVAL, Session, "control characters"),
        row("title: NUL", put(&s("title"), "a\0b\n"), EINVAL, Session, "control characters"),
        row("title: 100 KiB", put(&s("title"), big(100_000)), EFBIG, Session, "over its limit"),
        row("title: one 2 MiB write", put(&s("title"), big(two_mib)), EFBIG, Session, "over its limit"),
        row("title: pwrite at 2^62", pwrite_at(&s("title"), 1 << 62, b"x"), EFBIG, Session, "over its limit"),
        row("title: truncate to 1 MiB", Op::Truncate(s("title"), 1 << 20), EFBIG, Session, "over its limit"),
        row("title: O_APPEND", append(&s("title"), "more\n"), EINVAL, Session, "written whole from offset 0"),
        row("favourite: pwrite at 10", pwrite_at(&s("favourite"), 10, b"1"), EINVAL, Session, "would leave a gap"),
        row("title: O_RDWR", Op::Open(s("title"), O_RDWR), EINVAL, Session, "read or written whole"),
        row("project: with /", put(&s("project"), "a/b\n"), EINVAL, Session, "must not contain `/`"),
        row("project: ..", put(&s("project"), "..\n"), EINVAL, Session, "cannot be named"),
        row("project: 300 bytes", put(&s("project"), big(300)), EINVAL, Session, "at most 255"),
        row("favourite: maybe", put(&s("favourite"), "maybe\n"), EINVAL, Session, "expected 1 or 0"),
        row("favourite: 2", put(&s("favourite"), "2\n"), EINVAL, Session, "expected 1 or 0"),
        row("favourite: not UTF-8", put(&s("favourite"), b"\xff"), EINVAL, Session, "non-UTF-8"),
        row("archive: yes please", put(&s("archive"), "yes please\n"), EINVAL, Session, "expected 1 or 0"),
        row("archive: ftruncate to 1 MiB", Op::Ftruncate(s("archive"), 1 << 20), EFBIG, Session, "over its limit"),
        // The read-only files of a session.
        row("status: O_WRONLY", Op::Open(s("status"), O_WRONLY), EACCES, Session, "read-only"),
        row("status: O_RDONLY|O_TRUNC", Op::Open(s("status"), O_RDONLY | O_TRUNC), EACCES, Session, "read-only"),
        row("status: O_WRONLY|O_APPEND", Op::Open(s("status"), O_WRONLY | O_APPEND), EACCES, Session, "read-only"),
        row("screen: truncate", Op::Truncate(s("screen"), 0), EACCES, Session, "read-only"),
        row("scrollback: O_RDWR", Op::Open(s("scrollback"), O_RDWR), EACCES, Session, "read-only"),
        row("scrollback: O_RDONLY|O_TRUNC", Op::Open(s("scrollback"), O_RDONLY | O_TRUNC), EACCES, Session, "read-only"),
        row("scrollback: chown", Op::Chown(s("scrollback")), EPERM, Session, "fixed"),
        row("scrollback: chmod", Op::Chmod(s("scrollback"), 0o777), EPERM, Session, "fixed"),
        row("scrollback: rm", Op::Unlink(s("scrollback")), EPERM, Session, "only files an editor made"),
        row("scrollback: setxattr", Op::SetXattr(s("scrollback")), EOPNOTSUPP, Session, "extended attribute"),
        row("status: rm", Op::Unlink(s("status")), EPERM, Session, "only files an editor made"),
        row("input: rm", Op::Unlink(s("input")), EPERM, Session, "only files an editor made"),
        row("ctl: rename away", Op::Rename(s("ctl"), s("ctl2")), EPERM, Session, "cannot be renamed"),
        row("scrollback: rename onto meta.json", Op::Rename(s("scrollback"), s("meta.json")), EPERM, Session, "cannot be renamed"),
        row("meta.json: rename out of the session", Op::Rename(s("meta.json"), "m.json".into()), EXDEV, Session, "cannot move between"),
        row("scratch: bad JSON renamed onto meta.json", Op::Then(Box::new(put(&s("bad.json"), "{oops")), Box::new(Op::Rename(s("bad.json"), s("meta.json")))), EINVAL, Session, "not valid JSON"),
        row("scratch: title with ESC renamed onto title", Op::Then(Box::new(put(&s("t.tmp"), "\x1b[1m\n")), Box::new(Op::Rename(s("t.tmp"), s("title")))), EINVAL, Session, "control characters"),
        row("session: mkdir inside", Op::Mkdir(s("sub")), EPERM, Session, "directories are made"),
        row("session: mknod FIFO", Op::Mknod(s("fifo"), S_IFIFO | 0o600, 0), EPERM, Session, "mknod"),
        row("session: mknod socket", Op::Mknod(s("sock"), S_IFSOCK | 0o600, 0), EPERM, Session, "mknod"),
        row("session: mknod regular file", Op::Mknod(s("reg"), S_IFREG | 0o600, 0), EPERM, Session, "mknod"),
        row("session: rmdir", Op::Rmdir(KEY.into()), EPERM, Session, "archive a session"),
        row("session: rename to another key", Op::Rename(KEY.into(), "shell:other".into()), EPERM, Session, "keep their key"),
        row("session: rename into favourites/", Op::Rename(KEY.into(), format!("favourites/{KEY}")), EXDEV, Session, "archived/"),
        row("session: rm a missing name", Op::Unlink(s("nothing")), ENOENT, Kernel, ""),
        row("session: a page of no transcript", Op::Read(s("transcript/page-0")), ENOENT, Kernel, ""),
        row("session: open the directory for writing", Op::Open(KEY.into(), O_WRONLY), EISDIR, Kernel, ""),
        row("session: name of 256 bytes", Op::Read(s(&big(256))), ENAMETOOLONG, Kernel, ""),
        row("session: ../README for writing", Op::Open(s("../README"), O_WRONLY), EACCES, Root, "read-only"),
        // The root's files.
        row("README: O_WRONLY", Op::Open("README".into(), O_WRONLY), EACCES, Root, "read-only"),
        row("sessions.json: O_RDWR", Op::Open("sessions.json".into(), O_RDWR), EACCES, Root, "read-only"),
        row("status: O_WRONLY|O_TRUNC", Op::Open("status".into(), O_WRONLY | O_TRUNC), EACCES, Root, "read-only"),
        row("README: rm", Op::Unlink("README".into()), EPERM, Root, "only files an editor made"),
        row("README: rename", Op::Rename("README".into(), "README2".into()), EPERM, Root, "only sessions move"),
        row("README: hard link", Op::Link("README".into(), "r2".into()), EPERM, Root, "hard links"),
        row("README: chmod", Op::Chmod("README".into(), 0o666), EPERM, Root, "fixed"),
        row("README: setxattr", Op::SetXattr("README".into()), EOPNOTSUPP, Root, "extended attribute"),
        row("root: create a file", put("notes.txt", "x"), EACCES, Root, "no files can be created"),
        row("root: symlink", Op::Symlink("/etc/passwd".into(), "lnk".into()), EPERM, Root, "symlinks can only be made"),
        row("root: mknod", Op::Mknod("dev".into(), S_IFCHR | 0o600, libc::makedev(1, 3)), EPERM, Root, "mknod"),
        row("root: mkdir without an engine", Op::Mkdir("nocolon".into()), EINVAL, Root, "mkdir \"nocolon\""),
        row("root: mkdir unknown engine", Op::Mkdir("nope:x".into()), EINVAL, Root, "unknown engine"),
        row("root: mkdir hosted:ID", Op::Mkdir("hosted:abc".into()), EPERM, Root, "hosted sessions are made"),
        row("root: mkdir claude: not a UUID", Op::Mkdir("claude:new1".into()), EINVAL, Root, "Claude's session ids are UUIDs"),
        row("root: mkdir path trick", Op::Mkdir(s("../nope:y")), EINVAL, Root, "unknown engine"),
        row("root: mkdir an existing session", Op::Mkdir(KEY.into()), EEXIST, Kernel, ""),
        row("root: rmdir archived/", Op::Rmdir("archived".into()), EPERM, Root, "own directories"),
        row("root: rmdir slots/", Op::Rmdir("slots".into()), EPERM, Root, "own directories"),
        row("archived/: create a file", put("archived/x", "x"), EACCES, Root, "no files can be created"),
        // The root `ctl`.
        row("root ctl: unknown command", put("ctl", "bogus\n"), EINVAL, Root, "unknown command"),
        row("root ctl: a blank line", put("ctl", "\n"), EINVAL, Root, "empty ctl command"),
        row("root ctl: not UTF-8", put("ctl", b"new \xff\n"), EINVAL, Root, "UTF-8"),
        row("root ctl: new without engine", put("ctl", "new\n"), EINVAL, Root, "new takes ENGINE"),
        row("root ctl: new unknown engine", put("ctl", "new nope\n"), EINVAL, Root, "unknown engine"),
        row("root ctl: new hosted", put("ctl", "new hosted\n"), EPERM, Root, "hosted sessions are made"),
        row("root ctl: new, missing workspace", put("ctl", "new shell workspace=/nonexistent/sessionfs\n"), EINVAL, Root, "cannot be used"),
        row("root ctl: new, relative workspace", put("ctl", "new shell workspace=rel\n"), EINVAL, Root, "unexpected"),
        row("root ctl: new, workspace a file", put("ctl", "new shell workspace=/dev/null\n"), EINVAL, Root, "not a directory"),
        row("root ctl: new, title with ESC", put("ctl", "new shell title=\x1b[31mred\x07\n"), EINVAL, Root, "control characters"),
        row("root ctl: new, title of 2000 bytes", put("ctl", format!("new shell title={}\n", big(2000))), EINVAL, Root, "at most 1024"),
        row("root ctl: new, unknown option", put("ctl", "new shell colour=red\n"), EINVAL, Root, "unexpected"),
        row("root ctl: new, path in the engine", put("ctl", "new shell:../../x\n"), EINVAL, Root, "ctl"),
        row("root ctl: archive-older without cutoff", put("ctl", "archive-older\n"), EINVAL, Root, "takes CUTOFF"),
        row("root ctl: archive-older yesterday", put("ctl", "archive-older yesterday\n"), EINVAL, Root, "yesterday"),
        row("root ctl: archive-older two cutoffs", put("ctl", "archive-older 3d 4d\n"), EINVAL, Root, "one CUTOFF"),
        row("root ctl: 1 MiB line", put("ctl", big(1 << 20)), EINVAL, Root, "unknown command"),
        row("root ctl: truncate to 7", Op::Truncate("ctl".into(), 7), EFBIG, Root, "a stream"),
        // Slots.
        row("slots: mkdir not a GUID", Op::Mkdir("slots/not-a-guid".into()), EINVAL, Root, "not a GUID"),
        row("slots: mkdir a world (every GUID exists)", Op::Mkdir(format!("slots/{WORLD}")), EEXIST, Kernel, ""),
        row("slots: mkdir in a world", Op::Mkdir(w("sub")), EPERM, Root, "directories are made"),
        row("slots: rmdir a world with records", Op::Rmdir(format!("slots/{WORLD}")), ENOTEMPTY, Root, "still holds"),
        row("slots: a file in slots/", put("slots/x.json", "{}"), EINVAL, Root, "world directories"),
        row("slots: slot 0", put(&w("0"), r#"{"sessionId":"a"}"#), EINVAL, Root, "slots start at 1"),
        row("slots: slot 01", put(&w("01"), r#"{"sessionId":"a"}"#), EINVAL, Root, "leading zeros"),
        row("slots: slot -1", put(&w("-1"), r#"{"sessionId":"a"}"#), EINVAL, Root, "positive decimal"),
        row("slots: slot 2^32", put(&w("4294967296"), r#"{"sessionId":"a"}"#), EINVAL, Root, "too large"),
        row("slots: sessionId ../../x", put(&w("1"), r#"{"sessionId":"../../x"}"#), EINVAL, Root, "sessionId"),
        row("slots: sessionId of 200 bytes", put(&w("1"), format!(r#"{{"sessionId":"{}"}}"#, big(200))), EINVAL, Root, "sessionId"),
        row("slots: sessionId with BEL", put(&w("1"), r#"{"sessionId":"a\u0007b"}"#), EINVAL, Root, "sessionId"),
        row("slots: sessionId a number", put(&w("1"), r#"{"sessionId":5}"#), EINVAL, Root, "must be a string"),
        row("slots: sessionId empty", put(&w("1"), r#"{"sessionId":""}"#), EINVAL, Root, "empty"),
        row("slots: no sessionId", put(&w("1"), r#"{"name":"n"}"#), EINVAL, Root, "needs a"),
        row("slots: duplicate sessionId", put(&w("1"), r#"{"sessionId":"a","sessionId":"b"}"#), EINVAL, Root, "duplicate key"),
        row("slots: name a number", put(&w("1"), r#"{"sessionId":"a","name":3}"#), EINVAL, Root, "must be a string"),
        row("slots: not JSON", put(&w("1"), "nope"), EINVAL, Root, "not JSON"),
        row("slots: an array", put(&w("1"), "[]"), EINVAL, Root, "JSON object"),
        row("slots: not UTF-8", put(&w("1"), b"\xff\xfe"), EINVAL, Root, "not JSON"),
        row("slots: incomplete at close", put(&w("1"), r#"{"sessionId":"#), EINVAL, Root, "incomplete"),
        row("slots: one 2 MiB write", put(&w("1"), format!(r#"{{"sessionId":"{}"}}"#, big(two_mib))), EFBIG, Root, "over its limit"),
        row("slots: pwrite at 1 TiB", pwrite_at(&w("1"), 1 << 40, b"{}"), EFBIG, Root, "over its limit"),
        row("slots: truncate to 2 MiB", Op::Truncate(w("1"), 2 << 20), EFBIG, Root, "over its limit"),
        row("slots: rename a record", Op::Rename(w("1"), w("2")), EXDEV, Root, "cannot move"),
        row("slots: symlink in a world", Op::Symlink("1".into(), w("3")), EPERM, Root, "symlinks can only be made"),
        row("slots: rm a missing record", Op::Unlink(w("99")), ENOENT, Kernel, ""),
        // Hosted transcripts and `run`.
        row("transcript: not JSON", append(HOSTED, "nope\n"), EINVAL, Root, "h1"),
        row("transcript: no type", append(HOSTED, "{}\n"), EINVAL, Root, "type"),
        row("transcript: type a number", append(HOSTED, "{\"type\":5}\n"), EINVAL, Root, "type"),
        row("transcript: an array", append(HOSTED, "[1]\n"), EINVAL, Root, "h1"),
        row("transcript: not UTF-8", append(HOSTED, b"\xff\xfe\n"), EINVAL, Root, "h1"),
        row("transcript: incomplete line at close", append(HOSTED, "{\"type\":\"te"), EINVAL, Root, "h1"),
        row("transcript: one 2 MiB line", append(HOSTED, format!("{{\"type\":\"text\",\"text\":\"{}\"}}\n", big(two_mib))), EFBIG, Root, "over its limit"),
        row("transcript: pwrite at 1 TiB", pwrite_at(HOSTED, 1 << 40, b"{\"type\":\"t\"}\n"), EFBIG, Root, "over its limit"),
        row("transcript: O_TRUNC", Op::Open(HOSTED.into(), O_WRONLY | O_TRUNC), EPERM, Root, "append-only"),
        row("transcript: truncate", Op::Truncate(HOSTED.into(), 0), EPERM, Root, "append-only"),
        row("transcript: O_RDWR", Op::Open(HOSTED.into(), O_RDWR), EINVAL, Root, "read or written whole"),
        row("transcript: rm", Op::Unlink(HOSTED.into()), EPERM, Root, "kept"),
        row("transcript: a name with ..", put("agent-transcripts/..x.jsonl", "{\"type\":\"t\"}\n"), EINVAL, Root, "session id"),
        row("transcript: a name of 200 bytes", put(&format!("agent-transcripts/{}.jsonl", big(200)), "{\"type\":\"t\"}\n"), EINVAL, Root, "session id"),
        row("transcript: not .jsonl", put("agent-transcripts/x.txt", "{\"type\":\"t\"}\n"), EINVAL, Root, "SESSION_ID.jsonl"),
        row("transcript: mknod", Op::Mknod("agent-transcripts/f.jsonl".into(), S_IFIFO | 0o600, 0), EPERM, Root, "mknod"),
        row("run: not JSON", put("agent-transcripts/run", "nope\n"), EINVAL, Root, "run"),
        // A hosted session and an archived one.
        row("hosted: a write to input", put("hosted:h1/input", "ls\n"), EPERM, Of("hosted:h1"), "takes no input"),
        row("hosted: open by ctl", put("hosted:h1/ctl", "open\n"), EPERM, Of("hosted:h1"), "takes no input"),
        row("hosted: meta.json duplicate key", put("hosted:h1/meta.json", r#"{"title":"a","title":"a"}"#), EINVAL, Of("hosted:h1"), "duplicate key"),
        row("hosted: mkdir it again", Op::Mkdir("hosted:h1".into()), EEXIST, Kernel, ""),
        row("archived: a write to input", put(&format!("{ARCHIVED}/input"), "ls\n"), EPERM, Of(ARCHIVED), "is archived"),
        row("archived: a prompt", put(&format!("{ARCHIVED}/prompt"), "hi\n"), EPERM, Of(ARCHIVED), "is archived"),
        row("hosted: a prompt", put("hosted:h1/prompt", "hi\n"), EPERM, Of("hosted:h1"), "takes no prompt"),
        row("archived: open by ctl", put(&format!("{ARCHIVED}/ctl"), "open\n"), EPERM, Of(ARCHIVED), "is archived"),
        row("archived: meta.json duplicate key", put(&format!("{ARCHIVED}/meta.json"), r#"{"archived":false,"archived":false}"#), EINVAL, Of(ARCHIVED), "duplicate key"),
        row("archived: title with BEL", put(&format!("{ARCHIVED}/title"), "\x07\n"), EINVAL, Of(ARCHIVED), "control characters"),
        row("archived: rmdir", Op::Rmdir(ARCHIVED.into()), EPERM, Of(ARCHIVED), "archive a session"),
        row("archived: unarchive under another key", Op::Rename(ARCHIVED.into(), "shell:arch2".into()), EPERM, Of(ARCHIVED), "keep their key"),
        row("slots: mkdir a GUID never used", Op::Mkdir("slots/f47ac10b-58cc-4372-a567-0e02b2c3d479".into()), EEXIST, Kernel, ""),
        row("run: truncate to 3", Op::Truncate("agent-transcripts/run".into(), 3), EFBIG, Root, "a stream"),
    ];
    // Every row's name is unique, so a failure names one row.
    let mut names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), rows.len(), "row names are unique");
    rows.shrink_to_fit();
    rows
}

/// Everything a refusal must leave as it was: `meta.json` as served, and
/// every stored file (sidecar, slot records, hosted transcripts), by bytes.
fn snapshot(m: &Mount, state: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = stored(state);
    files.insert(
        PathBuf::from("meta.json (served)"),
        std::fs::read(m.path(&s("meta.json"))).unwrap(),
    );
    files
}

/// Every stored file under the state directory `state`, by bytes.
fn stored(state: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![state.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                dirs.push(path);
            } else if name != "catalog.json" && !name.to_string_lossy().ends_with(".lock") {
                files.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    files
}

/// What is wrong when a row's call gave `got` and not the errno `want`.
fn wrong_errno(got: Result<(), i32>, want: i32) -> Option<String> {
    (got != Err(want)).then(|| {
        format!(
            "got {:?}, expected errno {want} ({})",
            got.map_err(|e| format!("{e} ({})", std::io::Error::from_raw_os_error(e))),
            std::io::Error::from_raw_os_error(want)
        )
    })
}

/// The stored files that changed or appeared from `before` to `after`.
fn changes(before: &BTreeMap<PathBuf, Vec<u8>>, after: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<String> {
    let mut wrong = vec![];
    for (path, bytes) in before {
        if after.get(path) != Some(bytes) {
            wrong.push(format!("{} changed", path.display()));
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        wrong.push(format!("{} appeared", path.display()));
    }
    wrong
}

/// Fails with every failed row (`failures`: "NAME: what was wrong").
fn all_rows_pass(rows: &[Row], failures: &[String], how: &str) {
    assert!(
        failures.is_empty(),
        "{} of {} rows failed {how}:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

fn error_of(m: &Mount, rel: &str) -> String {
    let v: Value = m.json(rel);
    v["error"].as_str().unwrap_or_default().to_string()
}

/// How long `cat MNT/status` takes, the best of three tries (one slow
/// try on a busy machine is the scheduler, three are the daemon).
fn status_latency(m: &Mount) -> Duration {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            let text = std::fs::read(m.path("status")).unwrap();
            assert!(!text.is_empty());
            t.elapsed()
        })
        .min()
        .unwrap()
}

#[test]
fn hostile_inputs_get_an_errno_a_reason_and_change_nothing() {
    let host = Host::new();
    let m = host.mount("mnt");
    let root = nix::unistd::Uid::effective().is_root();
    let state = host.path("state/sessionfs");
    std::fs::create_dir(m.path(KEY)).unwrap();
    // A workspace that leads into the mount by a link.
    std::os::unix::fs::symlink(m.path(KEY), m.mnt.with_file_name("into-mount")).unwrap();
    std::fs::create_dir(m.path("shell:arch")).unwrap();
    std::fs::write(m.path("shell:arch/archive"), "1\n").unwrap();
    assert!(m.path(ARCHIVED).is_dir());
    std::fs::write(m.path(&w("1")), r#"{"sessionId":"keep","name":"n"}"#).unwrap();
    sh_ok(&format!(
        "echo '{{\"type\":\"text\",\"text\":\"hi\"}}' >> {}",
        m.q(HOSTED)
    ));
    let sessions = m.json("status")["sessions"].clone();
    let rows = catalogue(&m.mnt);
    assert!(rows.len() >= 80, "{} rows", rows.len());
    let mut failures = vec![];
    for (i, r) in rows.iter().enumerate() {
        // A marker refusal in both places first, so each row's reason is
        // its own and not one left by an earlier row.
        let marker = format!("marker-{i}");
        let dir = match r.scope {
            Scope::Of(dir) => dir,
            _ => KEY,
        };
        assert!(run(&m.mnt, &put(&format!("{dir}/ctl"), format!("{marker}\n"))).is_err());
        assert!(run(&m.mnt, &put("ctl", format!("{marker}\n"))).is_err());
        let before = snapshot(&m, &state);
        let log_before = m.log_text().len();

        let got = run(&m.mnt, &r.op);

        let mut wrong = vec![];
        wrong.extend(wrong_errno(got, r.errno));
        // Without root the kernel checks the modes itself: EACCES comes
        // from it, without a reason.
        let kernel_checks_modes = !root && r.errno == libc::EACCES;
        let reason = match r.scope {
            Scope::Session | Scope::Of(_) => Some(error_of(&m, &format!("{dir}/status"))),
            Scope::Root => Some(error_of(&m, "status")),
            Scope::Kernel => None,
        };
        if let (Some(reason), false) = (&reason, kernel_checks_modes) {
            if reason.contains(&marker) || !reason.contains(r.needle) {
                wrong.push(format!(
                    "{:?} reason {reason:?} does not say {:?}",
                    r.scope, r.needle
                ));
            }
            if reason.len() > 400 {
                wrong.push(format!("a reason of {} bytes", reason.len()));
            }
            let log = m.log_text();
            let new_lines = log.get(log_before..).unwrap_or_default();
            // One refusal, one warning.
            match new_lines
                .lines()
                .filter(|l| l.contains("WARN") && l.contains(r.needle))
                .count()
            {
                0 => wrong.push(format!("no log line says {:?}", r.needle)),
                1 => {}
                n => wrong.push(format!("{n} log lines say {:?}", r.needle)),
            }
        }
        let after = snapshot(&m, &state);
        wrong.extend(changes(&before, &after));
        let latency = status_latency(&m);
        if latency > Duration::from_millis(100) {
            wrong.push(format!("cat status took {latency:?}"));
        }
        if !wrong.is_empty() {
            failures.push(format!("{}: {}", r.name, wrong.join("; ")));
        }
    }
    all_rows_pass(&rows, &failures, "through the mount");
    // The daemon is the one that started, with the sessions it had.
    assert!(m.path(KEY).is_dir());
    assert_eq!(m.json("status")["sessions"], sessions);
    assert_eq!(m.json("status")["pid"], m.pid());
}

/// One `write()` past a cap is split by the kernel: the part before the
/// cap is taken, the call returns a short count, and the writer hears of
/// the refusal at its next write and at close, never a clean close.
#[test]
fn one_write_past_a_cap_is_never_a_short_count_and_a_clean_close() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!(
        "echo '{{\"type\":\"text\",\"text\":\"hi\"}}' >> {}",
        m.q(HOSTED)
    ));
    let stored = std::fs::read(m.path(HOSTED)).unwrap();
    let line = format!(
        "{{\"type\":\"text\",\"text\":\"{}\"}}\n",
        "x".repeat(2 << 20)
    );
    let path = cpath(&m.path(HOSTED));
    // SAFETY: open, write and close on a NUL-terminated path and a live buffer.
    let (wrote, write_errno, close_errno) = unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_APPEND);
        assert!(fd >= 0, "open: {}", errno());
        let n = libc::write(fd, line.as_ptr().cast(), line.len());
        let write_errno = if n < 0 { errno() } else { 0 };
        let closed = libc::close(fd);
        let close_errno = if closed < 0 { errno() } else { 0 };
        (n, write_errno, close_errno)
    };
    match wrote {
        n if n < 0 => assert_eq!(write_errno, libc::EFBIG),
        n => assert!((n as usize) < line.len(), "all {n} bytes taken"),
    }
    assert_eq!(close_errno, libc::EFBIG, "close after a refused line");
    assert_eq!(std::fs::read(m.path(HOSTED)).unwrap(), stored);
    let root = m.json("status");
    assert!(
        root["error"]
            .as_str()
            .unwrap_or_default()
            .contains("over its limit"),
        "{root}"
    );
}

/// A workspace that exists when it is set but is removed before the first
/// launch: the program starts in the home directory and `status.error`
/// says so (a missing one is refused when it is set: see the catalogue).
#[test]
fn a_workspace_removed_before_launch_is_reported() {
    let host = Host::new();
    let m = host.mount("mnt");
    let ws = host.path("home/ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(m.path("shell:ws")).unwrap();
    std::fs::write(
        m.path("shell:ws/meta.json"),
        format!("{{\"workspace\":\"{}\"}}", ws.display()),
    )
    .unwrap();
    assert_eq!(
        m.json("shell:ws/meta.json")["workspace"],
        ws.to_str().unwrap()
    );
    std::fs::remove_dir(&ws).unwrap();
    std::fs::write(m.path("shell:ws/ctl"), "open\n").unwrap();
    let status = m.json("shell:ws/status");
    assert_eq!(status["outcome"], "LAUNCH", "{status}");
    let error = status["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("does not exist") && error.contains("home directory"),
        "{status}"
    );
    assert!(m.log_text().contains("started in the home directory"));
    std::fs::write(m.path("shell:ws/ctl"), "stop\n").unwrap();
}

/// The same catalogue on the core itself, without a mount
/// (`hostile/direct.rs`): every row gets the same errno from the daemon's
/// logic as through the kernel, and no refusal changes a stored file.
#[test]
fn the_catalogue_gets_the_same_errnos_from_the_core_without_a_mount() {
    let d = Direct::new();
    let setup = |op: Op| {
        d.run(&op)
            .unwrap_or_else(|e| panic!("setup {op:?}: errno {e}"))
    };
    setup(Op::Mkdir(KEY.into()));
    // A workspace that leads into the mount point by a link (the mount
    // point is a plain directory here, with the session's name in it).
    std::fs::create_dir(d.mnt.join(KEY)).unwrap();
    std::os::unix::fs::symlink(d.mnt.join(KEY), d.mnt.with_file_name("into-mount")).unwrap();
    setup(Op::Mkdir("shell:arch".into()));
    setup(put("shell:arch/archive", "1\n"));
    assert!(d.resolve(ARCHIVED).is_ok(), "{ARCHIVED} is not there");
    setup(put(&w("1"), r#"{"sessionId":"keep","name":"n"}"#));
    setup(write_with(
        HOSTED,
        libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT,
        "{\"type\":\"text\",\"text\":\"hi\"}\n",
    ));
    let state = d.state();
    let rows = catalogue(&d.mnt);
    let mut failures = vec![];
    for r in &rows {
        let before = stored(&state);
        let got = d.run(&r.op);
        let mut wrong = vec![];
        wrong.extend(wrong_errno(got, r.errno));
        let after = stored(&state);
        wrong.extend(changes(&before, &after));
        if !wrong.is_empty() {
            failures.push(format!("{}: {}", r.name, wrong.join("; ")));
        }
    }
    all_rows_pass(&rows, &failures, "on the core");
}
