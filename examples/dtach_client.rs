//! The measuring client of `scripts/bench-terminal`: the same interactive
//! shell driven three ways, timed by one compiled loop so the ways compare.
//!
//! ```text
//! dtach_client echo raw  SOCKET   N     raw dtach client on a master's socket
//! dtach_client echo fs   DIR      N     open/write/close DIR/input, poll-read DIR/scrollback
//! dtach_client echo fspoll DIR    N     the same, waiting in poll(2) when caught up
//! dtach_client echo tmux SERVER:T N     tmux -C control mode (send-keys, %output)
//! dtach_client bulk raw  SOCKET   BYTES
//! dtach_client bulk fs   DIR      BYTES
//! ```
//!
//! The raw client speaks dtach's protocol directly: ATTACH and WINCH, then
//! PUSH packets of at most 8 bytes, one `write` each; the master's output
//! comes back raw. `echo` types `: tokNNNN` and Enter N times and prints the
//! microseconds from the first byte typed to the token's echo, one sample a
//! line (for `fs`, then the open, write and close of `input`), waiting for
//! the next prompt in between. `bulk` types
//! `yes … | head -c BYTES; echo BULK''DONE` and prints `BYTES_SEEN SECONDS`:
//! the output read live until the marker, and how long that took.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

const COLS: u16 = 120;
const ROWS: u16 = 40;
/// `PS1='\123\106\123\044 '` shows as `SFS$ `, which the typed line never contains.
const PROMPT: &[u8] = b"SFS$ ";
const SET_PROMPT: &[u8] = b" PS1='\\123\\106\\123\\044 '\n";
const LINE: &str = "The quick brown fox jumps over the lazy dog 0123456789";
const MARKER: &[u8] = b"BULKDONE";
const PATIENCE: Duration = Duration::from_secs(60);
/// How long tmux's control mode may say nothing before the run is given up.
const SILENCE: Duration = Duration::from_secs(20);

fn die(msg: String) -> ! {
    eprintln!("dtach_client: {msg}");
    std::process::exit(1)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One way of typing into the shell and reading what it prints.
trait Terminal {
    fn type_line(&mut self, line: &[u8]);
    /// Appends whatever output is there (waiting a little if none); false
    /// when there was none yet.
    fn read_some(&mut self, out: &mut Vec<u8>) -> bool;
    /// Microseconds the last `type_line` spent in its steps, if it has steps.
    fn steps(&self) -> Option<[f64; 3]> {
        None
    }
}

/// Reads until `needle` appears after `from` in `buf`; returns its end.
fn read_until(t: &mut dyn Terminal, buf: &mut Vec<u8>, from: usize, needle: &[u8]) -> usize {
    let until = Instant::now() + PATIENCE;
    let mut scan = from;
    loop {
        if let Some(i) = find(&buf[scan..], needle) {
            return scan + i + needle.len();
        }
        scan = buf.len().saturating_sub(needle.len()).max(from);
        if Instant::now() > until {
            let tail = String::from_utf8_lossy(&buf[buf.len().saturating_sub(200)..]).into_owned();
            die(format!(
                "no {:?} within {PATIENCE:?}; last output: {tail:?}",
                String::from_utf8_lossy(needle)
            ));
        }
        t.read_some(buf);
    }
}

// --- the raw dtach client ---------------------------------------------------

struct Raw {
    sock: UnixStream,
    buf: Vec<u8>,
}

impl Raw {
    fn connect(path: &str) -> Raw {
        let sock = UnixStream::connect(path).unwrap_or_else(|e| die(format!("{path}: {e}")));
        let mut raw = Raw {
            sock,
            buf: vec![0; 256 * 1024],
        };
        let mut ws = [0u8; 8];
        ws[0..2].copy_from_slice(&ROWS.to_ne_bytes());
        ws[2..4].copy_from_slice(&COLS.to_ne_bytes());
        raw.packet(1, 0, [0; 8]); // ATTACH
        raw.packet(3, 0, ws); // WINCH
        raw
    }

    fn packet(&mut self, kind: u8, len: u8, payload: [u8; 8]) {
        let mut p = [0u8; 10];
        p[0] = kind;
        p[1] = len;
        p[2..].copy_from_slice(&payload);
        self.sock
            .write_all(&p)
            .unwrap_or_else(|e| die(format!("write: {e}")));
    }
}

impl Terminal for Raw {
    fn type_line(&mut self, line: &[u8]) {
        for chunk in line.chunks(8) {
            let mut payload = [0u8; 8];
            payload[..chunk.len()].copy_from_slice(chunk);
            self.packet(0, chunk.len() as u8, payload); // PUSH
        }
    }

    fn read_some(&mut self, out: &mut Vec<u8>) -> bool {
        match self.sock.read(&mut self.buf) {
            Ok(0) => die("the master closed the connection".into()),
            Ok(n) => {
                out.extend_from_slice(&self.buf[..n]);
                true
            }
            Err(e) => die(format!("read: {e}")),
        }
    }
}

// --- the mount: input and scrollback ----------------------------------------

struct Fs {
    input: std::path::PathBuf,
    scrollback: std::fs::File,
    pos: u64,
    buf: Vec<u8>,
    /// Pause after an empty read (0: ask again at once).
    idle: Duration,
    /// Wait in poll(2) after an empty read instead.
    poll: bool,
    /// open, write, close of the last line typed.
    last: [f64; 3],
}

impl Fs {
    fn open(dir: &str, idle: Duration, read_size: usize, poll: bool) -> Fs {
        let dir = std::path::Path::new(dir);
        let input = dir.join("input");
        // Opening the session first makes the ring exist; then follow it from its end.
        std::fs::write(dir.join("ctl"), "open\n").unwrap_or_else(|e| die(format!("open: {e}")));
        let scrollback = std::fs::File::open(dir.join("scrollback"))
            .unwrap_or_else(|e| die(format!("scrollback: {e}")));
        let pos = scrollback.metadata().map(|m| m.len()).unwrap_or(0);
        Fs {
            input,
            scrollback,
            pos,
            buf: vec![0; read_size],
            idle,
            poll,
            last: [0.0; 3],
        }
    }
}

impl Terminal for Fs {
    fn type_line(&mut self, line: &[u8]) {
        let us = |t: Instant| t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.input)
            .unwrap_or_else(|e| die(format!("input: {e}")));
        self.last[0] = us(t);
        let t = Instant::now();
        f.write_all(line)
            .unwrap_or_else(|e| die(format!("write input: {e}")));
        self.last[1] = us(t);
        let t = Instant::now();
        drop(f);
        self.last[2] = us(t);
    }

    fn steps(&self) -> Option<[f64; 3]> {
        Some(self.last)
    }

    fn read_some(&mut self, out: &mut Vec<u8>) -> bool {
        match self.scrollback.read_at(&mut self.buf, self.pos) {
            Ok(0) => {
                if self.poll {
                    use std::os::fd::AsFd;
                    let mut fds = [nix::poll::PollFd::new(
                        self.scrollback.as_fd(),
                        nix::poll::PollFlags::POLLIN,
                    )];
                    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(1000u16));
                } else if !self.idle.is_zero() {
                    std::thread::sleep(self.idle);
                }
                false
            }
            Ok(n) => {
                self.pos += n as u64;
                out.extend_from_slice(&self.buf[..n]);
                true
            }
            Err(e) => die(format!("read scrollback: {e}")),
        }
    }
}

// --- tmux control mode ------------------------------------------------------

struct Tmux {
    child: Child,
    stdin: ChildStdin,
    lines: BufReader<std::process::ChildStdout>,
    target: String,
    line: Vec<u8>,
}

impl Tmux {
    fn attach(spec: &str) -> Tmux {
        let (server, target) = spec
            .split_once(':')
            .unwrap_or_else(|| die(format!("tmux target {spec:?} is not SERVER:SESSION")));
        let mut child = Command::new("tmux")
            .args(["-L", server, "-C", "attach-session", "-t", target])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| die(format!("tmux: {e}")));
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap());
        Tmux {
            child,
            stdin,
            lines,
            target: target.to_string(),
            line: Vec::new(),
        }
    }
}

/// The bytes of a `%output` value: octal escapes for `\` and control bytes.
fn unescape(v: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'\\' && i + 4 <= v.len() {
            let o = &v[i + 1..i + 4];
            if o.iter().all(|c| (b'0'..=b'7').contains(c)) {
                out.push((o[0] - b'0') * 64 + (o[1] - b'0') * 8 + (o[2] - b'0'));
                i += 4;
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
}

impl Terminal for Tmux {
    fn type_line(&mut self, line: &[u8]) {
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        // Literal keys as agent managers send them; hex when quoting would bite.
        let keys = if text
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b" :_-".contains(c))
        {
            format!("-l '{}'", String::from_utf8_lossy(text))
        } else {
            let hex: Vec<String> = text.iter().map(|c| format!("{c:02x}")).collect();
            format!("-H {}", hex.join(" "))
        };
        let cmd = format!(
            "send-keys -t {t} {keys} ; send-keys -t {t} Enter\n",
            t = self.target
        );
        self.stdin
            .write_all(cmd.as_bytes())
            .unwrap_or_else(|e| die(format!("tmux: {e}")));
    }

    fn read_some(&mut self, out: &mut Vec<u8>) -> bool {
        self.line.clear();
        // tmux may fall silent (a control client it stopped feeding): give
        // up after a while rather than block for ever.
        if self.lines.buffer().is_empty() {
            use std::os::fd::AsFd;
            let mut fds = [nix::poll::PollFd::new(
                self.lines.get_ref().as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            let ms =
                nix::poll::PollTimeout::try_from(SILENCE).unwrap_or(nix::poll::PollTimeout::MAX);
            if matches!(nix::poll::poll(&mut fds, ms), Ok(0)) {
                die(format!("tmux control mode sent nothing for {SILENCE:?}"));
            }
        }
        match self.lines.read_until(b'\n', &mut self.line) {
            Ok(0) => die("tmux control mode ended".into()),
            Ok(_) => {}
            Err(e) => die(format!("tmux: {e}")),
        }
        // `%output %PANE VALUE`
        if let Some(rest) = self.line.strip_prefix(b"%output ") {
            if let Some(sp) = rest.iter().position(|c| *c == b' ') {
                let v = &rest[sp + 1..];
                let v = v.strip_suffix(b"\n").unwrap_or(v);
                unescape(v, out);
                return true;
            }
        }
        false
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.stdin.write_all(b"detach-client\n");
        let _ = self.child.wait();
    }
}

// --- the measurements -------------------------------------------------------

fn set_prompt(t: &mut dyn Terminal, buf: &mut Vec<u8>) {
    t.type_line(SET_PROMPT);
    let from = buf.len();
    read_until(t, buf, from, PROMPT);
}

fn echo(t: &mut dyn Terminal, n: usize) {
    let mut buf = Vec::new();
    set_prompt(t, &mut buf);
    let mut out = std::io::stdout().lock();
    // A few unrecorded rounds first, so every path is warm.
    for i in 0..n + 5 {
        let token = format!("tok{i:05}");
        let line = format!(": {token}\n");
        let from = buf.len();
        let t0 = Instant::now();
        t.type_line(line.as_bytes());
        let at = read_until(t, &mut buf, from, token.as_bytes());
        let took = t0.elapsed();
        read_until(t, &mut buf, at, PROMPT);
        if i >= 5 {
            write!(out, "{:.1}", took.as_secs_f64() * 1e6).unwrap();
            if let Some([o, w, c]) = t.steps() {
                write!(out, " {o:.1} {w:.1} {c:.1}").unwrap();
            }
            writeln!(out).unwrap();
        }
        // Only the unread part matters from here on.
        if buf.len() > 1 << 20 {
            buf.clear();
        }
    }
}

fn bulk(t: &mut dyn Terminal, bytes: u64) {
    let mut buf = Vec::new();
    set_prompt(t, &mut buf);
    buf.clear();
    let line = format!("yes '{LINE}' | head -c {bytes}; echo BULK''DONE\n");
    let t0 = Instant::now();
    t.type_line(line.as_bytes());
    let mut seen = 0u64;
    let until = t0 + PATIENCE * 10;
    // Only a window is kept: the marker may straddle two reads.
    loop {
        let keep = buf.len().saturating_sub(MARKER.len());
        if keep > 0 {
            seen += keep as u64;
            buf.drain(..keep);
        }
        t.read_some(&mut buf);
        if find(&buf, MARKER).is_some() {
            break;
        }
        if Instant::now() > until {
            die("bulk output did not end".into());
        }
    }
    let took = t0.elapsed();
    seen += buf.len() as u64;
    let mut rest = buf;
    let at = find(&rest, MARKER).unwrap();
    rest.drain(..at);
    read_until(t, &mut rest, 0, PROMPT);
    println!("{seen} {:.6}", took.as_secs_f64());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [what, how, target, count] = &args[..] else {
        die("usage: dtach_client echo|bulk raw|fs|tmux TARGET COUNT".into());
    };
    let count: u64 = count
        .parse()
        .unwrap_or_else(|_| die(format!("{count} is not a count")));
    let idle = std::env::var("BENCH_IDLE_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_micros);
    let mut term: Box<dyn Terminal> = match how.as_str() {
        "raw" => Box::new(Raw::connect(target)),
        // Echo polls as a prompt-watcher would: small reads, asked again at
        // once; bulk reads big and pauses when it has caught up.
        "fs" if what == "echo" => Box::new(Fs::open(
            target,
            idle.unwrap_or(Duration::ZERO),
            64 * 1024,
            false,
        )),
        "fspoll" => Box::new(Fs::open(target, Duration::ZERO, 64 * 1024, true)),
        "fs" => Box::new(Fs::open(
            target,
            idle.unwrap_or(Duration::from_micros(100)),
            1 << 20,
            false,
        )),
        "tmux" => Box::new(Tmux::attach(target)),
        _ => die(format!("unknown client {how}")),
    };
    match what.as_str() {
        "echo" => echo(term.as_mut(), count as usize),
        "bulk" => bulk(term.as_mut(), count),
        _ => die(format!("unknown measurement {what}")),
    }
}
