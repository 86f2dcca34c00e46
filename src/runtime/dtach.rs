//! dtach's socket protocol, spoken directly.
//!
//! Client → master: fixed 10-byte packets `type, len, 8 bytes`, one `write`
//! each (dtach 0.9 reads a packet with one `read` and acts on what it got).
//! Master → client: raw PTY output, only after ATTACH.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Mutex;

const MSG_PUSH: u8 = 0;
const MSG_ATTACH: u8 = 1;
const MSG_DETACH: u8 = 2;
const MSG_WINCH: u8 = 3;
const MSG_REDRAW: u8 = 4;

/// REDRAW methods, carried in the `len` byte.
pub const REDRAW_WINCH: u8 = 3;

/// Input bytes one PUSH packet can carry.
pub const PUSH_MAX: usize = 8;

/// One packet as it goes on the wire.
pub fn packet(kind: u8, len: u8, payload: [u8; 8]) -> [u8; 10] {
    let mut p = [0u8; 10];
    p[0] = kind;
    p[1] = len;
    p[2..].copy_from_slice(&payload);
    p
}

/// `struct winsize` in native byte order: rows, cols, xpixel, ypixel.
pub fn winsize(cols: u16, rows: u16) -> [u8; 8] {
    let mut w = [0u8; 8];
    w[0..2].copy_from_slice(&rows.to_ne_bytes());
    w[2..4].copy_from_slice(&cols.to_ne_bytes());
    w
}

/// The packets that push `input` to the PTY.
pub fn push_packets(input: &[u8]) -> impl Iterator<Item = [u8; 10]> + '_ {
    input.chunks(PUSH_MAX).map(|chunk| {
        let mut payload = [0u8; 8];
        payload[..chunk.len()].copy_from_slice(chunk);
        packet(MSG_PUSH, chunk.len() as u8, payload)
    })
}

/// The writing half of an attached client; the reading half goes to a reader thread.
#[derive(Debug)]
pub struct Client {
    writer: Mutex<UnixStream>,
}

impl Client {
    /// Connects to a master's socket. `ECONNREFUSED` or `ENOENT` mean no master answers.
    pub fn connect(socket: &Path) -> io::Result<(Client, UnixStream)> {
        let stream = UnixStream::connect(socket)?;
        let reader = stream.try_clone()?;
        Ok((
            Client {
                writer: Mutex::new(stream),
            },
            reader,
        ))
    }

    fn send(&self, packets: impl Iterator<Item = [u8; 10]>) -> io::Result<()> {
        let mut stream = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        for p in packets {
            // One packet per write: a 10-byte write to a unix stream arrives whole.
            stream.write_all(&p)?;
        }
        Ok(())
    }

    /// Asks for output, then sets the window size (a `dtach -n` PTY starts at 0×0).
    pub fn attach(&self, cols: u16, rows: u16) -> io::Result<()> {
        self.send(
            [
                packet(MSG_ATTACH, 0, [0; 8]),
                packet(MSG_WINCH, 0, winsize(cols, rows)),
            ]
            .into_iter(),
        )
    }

    pub fn push(&self, input: &[u8]) -> io::Result<()> {
        self.send(push_packets(input))
    }

    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        self.send(std::iter::once(packet(MSG_WINCH, 0, winsize(cols, rows))))
    }

    /// Asks the program to repaint: a WINCH with the current size.
    pub fn redraw(&self, cols: u16, rows: u16) -> io::Result<()> {
        self.send(std::iter::once(packet(
            MSG_REDRAW,
            REDRAW_WINCH,
            winsize(cols, rows),
        )))
    }

    pub fn detach(&self) -> io::Result<()> {
        self.send(std::iter::once(packet(MSG_DETACH, 0, [0; 8])))?;
        let stream = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        stream.shutdown(std::net::Shutdown::Both)
    }
}

/// Reads the master's output until it closes, handing each chunk to `sink`.
/// Runs on a thread of its own so the master never finds our socket full.
pub fn pump(mut reader: UnixStream, mut sink: impl FnMut(&[u8])) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => sink(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_splits_input_into_eight_byte_packets() {
        let packets: Vec<_> = push_packets(b"make all\n").collect();
        assert_eq!(packets.len(), 2);
        assert_eq!(&packets[0][..], b"\x00\x08make all");
        assert_eq!(&packets[1][..2], b"\x00\x01");
        assert_eq!(packets[1][2], b'\n');
    }

    #[test]
    fn winsize_is_rows_then_cols() {
        let w = winsize(120, 40);
        assert_eq!(u16::from_ne_bytes([w[0], w[1]]), 40);
        assert_eq!(u16::from_ne_bytes([w[2], w[3]]), 120);
    }
}
