//! A terminal program under a plain `dtach -n` master, driven the way a
//! person at a terminal would: attached with the dtach socket protocol,
//! its screen kept in a VT emulator, input pushed as dtach packets.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

const PUSH: u8 = 0;
const ATTACH: u8 = 1;
const WINCH: u8 = 3;

pub const COLS: u16 = 120;
pub const ROWS: u16 = 40;

fn packet(kind: u8, len: u8, payload: [u8; 8]) -> [u8; 10] {
    let mut p = [0u8; 10];
    p[0] = kind;
    p[1] = len;
    p[2..].copy_from_slice(&payload);
    p
}

fn winsize(cols: u16, rows: u16) -> [u8; 8] {
    let mut w = [0u8; 8];
    w[0..2].copy_from_slice(&rows.to_ne_bytes());
    w[2..4].copy_from_slice(&cols.to_ne_bytes());
    w
}

/// One program under dtach, attached.
pub struct Tui {
    pub socket: PathBuf,
    stream: UnixStream,
    parser: Arc<Mutex<vt100::Parser>>,
    /// Every byte of output, for failure messages.
    raw: Arc<Mutex<Vec<u8>>>,
    started: Instant,
}

impl Tui {
    /// Starts `cmd` (a prepared Command: program, args, env, cwd) under
    /// `dtach -n SOCKET` and attaches at once (dtach keeps no history).
    pub fn launch(socket: &Path, cmd: &Command) -> Tui {
        let mut dtach = Command::new("dtach");
        dtach.arg("-n").arg(socket).arg(cmd.get_program());
        dtach.args(cmd.get_args());
        if let Some(dir) = cmd.get_current_dir() {
            dtach.current_dir(dir);
        }
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => dtach.env(k, v),
                None => dtach.env_remove(k),
            };
        }
        let status = dtach.status().expect("dtach runs");
        assert!(status.success(), "dtach -n failed: {status}");
        let stream = UnixStream::connect(socket).expect("the dtach socket takes a client");
        let tui = Tui {
            socket: socket.to_path_buf(),
            stream,
            parser: Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 0))),
            raw: Arc::new(Mutex::new(Vec::new())),
            started: Instant::now(),
        };
        tui.send(packet(ATTACH, 0, [0; 8]));
        // `dtach -n` starts the terminal at 0x0.
        tui.send(packet(WINCH, 0, winsize(COLS, ROWS)));
        let mut reader = tui.stream.try_clone().unwrap();
        let parser = tui.parser.clone();
        let raw = tui.raw.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                parser.lock().unwrap().process(&buf[..n]);
                let mut raw = raw.lock().unwrap();
                if raw.len() < 16 << 20 {
                    raw.extend_from_slice(&buf[..n]);
                }
            }
        });
        tui
    }

    fn send(&self, p: [u8; 10]) {
        // One packet per write: dtach reads each with one 10-byte read.
        (&self.stream)
            .write_all(&p)
            .expect("dtach takes the packet");
    }

    /// Pushes bytes as they would come from a keyboard or a paste.
    pub fn push(&self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut payload = [0u8; 8];
            payload[..chunk.len()].copy_from_slice(chunk);
            self.send(packet(PUSH, chunk.len() as u8, payload));
        }
    }

    /// The screen's text, rows joined by newlines.
    pub fn screen(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    /// Whether the program switched on bracketed paste (`CSI ? 2004 h`) last.
    pub fn bracketed_paste(&self) -> bool {
        let raw = self.raw.lock().unwrap();
        let on = find_last(&raw, b"\x1b[?2004h");
        let off = find_last(&raw, b"\x1b[?2004l");
        on.is_some() && on > off
    }

    pub fn elapsed_ms(&self) -> u128 {
        self.started.elapsed().as_millis()
    }

    /// Waits until the screen satisfies `probe`, up to `secs`.
    pub fn wait_screen(&self, secs: u64, what: &str, probe: impl Fn(&str) -> bool) {
        let mut screen = String::new();
        let shown = super::wait_until(secs, || {
            screen = self.screen();
            probe(&screen)
        });
        assert!(shown, "timed out waiting for {what}; the screen:\n{screen}");
    }
}

fn find_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}
