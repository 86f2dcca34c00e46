//! FNV-1a (64 bits): a hash whose value never changes between builds, runs
//! or machines, unlike std's hashers. What it names outlives the process:
//! the socket and run record of a key too long for a socket path, the
//! inode numbers and generations a restarted daemon hands out again.

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a fed piece by piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv1a(u64);

impl Fnv1a {
    pub const fn new() -> Fnv1a {
        Fnv1a(OFFSET_BASIS)
    }

    /// Feeds `bytes` in.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(PRIME);
        }
    }

    /// The hash of everything fed in so far.
    pub const fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv1a {
    fn default() -> Fnv1a {
        Fnv1a::new()
    }
}

/// FNV-1a of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::new();
    h.write(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fed_in_pieces_it_is_the_hash_of_them_joined() {
        let mut h = Fnv1a::default();
        for part in [&b"ab"[..], b"\0", b"c", b"\0"] {
            h.write(part);
        }
        assert_eq!(h.finish(), fnv1a(b"ab\0c\0"));
        assert_eq!(h.finish(), 0xad22_872f_536e_4705);
    }
}
