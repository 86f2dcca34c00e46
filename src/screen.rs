//! The VT mirror behind `screen`: the same bytes as the scrollback, fed to a
//! terminal emulator, read back as the text on screen now.

/// Sessions start at 120×40 (SPEC §4).
pub const DEFAULT_COLS: u16 = 120;
pub const DEFAULT_ROWS: u16 = 40;

/// The smallest screen vt100 0.15 survives: with one row or one column
/// some output (scroll regions, wide characters) panics inside it. Found by
/// the property test below.
pub const MIN_COLS: u16 = 2;
pub const MIN_ROWS: u16 = 2;
/// The largest: each of the two grids (main and alternate) costs about 36
/// bytes a cell, so 250,000 cells hold at most about 18 MB per session.
pub const MAX_COLS: u16 = 1000;
pub const MAX_ROWS: u16 = 1000;
pub const MAX_CELLS: u32 = 250_000;

/// Whether the mirror can take `cols`×`rows`; the reason when not.
pub fn check_size(cols: u16, rows: u16) -> Result<(), String> {
    if cols < MIN_COLS || rows < MIN_ROWS {
        return Err(format!(
            "{cols}x{rows} is below the smallest screen, {MIN_COLS}x{MIN_ROWS}"
        ));
    }
    if cols > MAX_COLS || rows > MAX_ROWS || u32::from(cols) * u32::from(rows) > MAX_CELLS {
        return Err(format!(
            "{cols}x{rows} is above the largest screen: at most {MAX_COLS} columns, \
             {MAX_ROWS} rows and {MAX_CELLS} cells"
        ));
    }
    Ok(())
}

/// `cols`×`rows` brought within the bounds (refusal is the caller's job;
/// this keeps the emulator safe whatever it is given).
fn clamp_size(cols: u16, rows: u16) -> (u16, u16) {
    let cols = cols.clamp(MIN_COLS, MAX_COLS);
    let rows = rows.clamp(MIN_ROWS, MAX_ROWS);
    let most_rows = (MAX_CELLS / u32::from(cols)).min(u32::from(MAX_ROWS)) as u16;
    (cols, rows.min(most_rows))
}

pub struct Screen {
    parser: vt100::Parser,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rows, cols) = self.parser.screen().size();
        write!(f, "Screen({cols}x{rows})")
    }
}

impl Default for Screen {
    fn default() -> Self {
        Self::new(DEFAULT_COLS, DEFAULT_ROWS)
    }
}

impl Screen {
    pub fn new(cols: u16, rows: u16) -> Self {
        let (cols, rows) = clamp_size(cols, rows);
        Screen {
            parser: vt100::Parser::new(rows, cols, 0),
        }
    }

    /// Feeds output to the emulator. Should it panic all the same, the
    /// mirror starts over blank at the same size and the reason is
    /// returned; the caller keeps reading.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), String> {
        let fed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.parser.process(bytes)));
        fed.map_err(|panic| {
            self.clear();
            format!(
                "the screen mirror failed on output and was reset: {}",
                panic_message(panic.as_ref())
            )
        })
    }

    /// Changes the size, brought within the bounds of [`check_size`].
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let (cols, rows) = clamp_size(cols, rows);
        self.parser.set_size(rows, cols);
    }

    pub fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.parser.screen().size();
        (cols, rows)
    }

    /// Forgets everything shown (archive clears the mirror).
    pub fn clear(&mut self) {
        let (cols, rows) = self.size();
        *self = Screen::new(cols, rows);
    }

    /// Whether the program asked for bracketed paste (`CSI ? 2004 h`).
    pub fn bracketed_paste(&self) -> bool {
        self.parser.screen().bracketed_paste()
    }

    /// Every row of the screen, trailing blanks trimmed, one line each;
    /// blank rows at the bottom are left out.
    pub fn text(&self) -> String {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        let mut lines: Vec<String> = screen
            .rows(0, cols)
            .map(|r| r.trim_end().to_string())
            .collect();
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        let mut text = lines.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        text
    }
}

/// The text of a panic's payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Output that exercises the corners: wide and combining characters,
    /// scroll regions, insert/delete, origin mode, the alternate screen,
    /// cursor moves far off screen.
    fn output() -> impl Strategy<Value = Vec<u8>> {
        let pieces: Vec<&'static [u8]> = vec![
            b"a",
            "\u{4e2d}".as_bytes(),
            "\u{1f600}".as_bytes(),
            "\u{301}".as_bytes(),
            b"\r",
            b"\n",
            b"\t",
            b"\x08",
            b"\x1b[2J",
            b"\x1b[J",
            b"\x1b[1J",
            b"\x1b[2K",
            b"\x1b[H",
            b"\x1b[5;5H",
            b"\x1b[999;999H",
            b"\x1b[1;2r",
            b"\x1b[2;3r",
            b"\x1b[3;1r",
            b"\x1b[r",
            b"\x1b[L",
            b"\x1b[M",
            b"\x1b[@",
            b"\x1b[P",
            b"\x1b[X",
            b"\x1b[S",
            b"\x1b[T",
            b"\x1b[10C",
            b"\x1b[10D",
            b"\x1bM",
            b"\x1bD",
            b"\x1bE",
            b"\x1b7",
            b"\x1b8",
            b"\x1b[?6h",
            b"\x1b[?6l",
            b"\x1b[?7h",
            b"\x1b[?7l",
            b"\x1b[?1049h",
            b"\x1b[?1049l",
        ];
        prop::collection::vec(prop::sample::select(pieces), 0..300).prop_map(|p| p.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// At the smallest size allowed, no output panics the emulator,
        /// fresh or shrunk from a used screen.
        #[test]
        fn the_smallest_screen_survives_any_output(bytes in output(), shrink in any::<bool>()) {
            let mut s = if shrink {
                let mut s = Screen::default();
                s.feed(b"x\r\n\x1b[?1049h\x1b[30;100Hy").unwrap();
                s.resize(MIN_COLS, MIN_ROWS);
                s
            } else {
                Screen::new(MIN_COLS, MIN_ROWS)
            };
            let vt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                s.parser.process(&bytes);
                s.text()
            }));
            prop_assert!(vt.is_ok(), "vt100 panicked at {MIN_COLS}x{MIN_ROWS}");
        }
    }

    /// Below the minimum vt100 does panic (one row: a wide character at
    /// the last column; one column: any wide character): the bound is
    /// real, and `feed` survives it.
    #[test]
    fn below_the_minimum_vt100_panics_and_feed_survives_it() {
        let cases: [(u16, u16, &str); 2] = [(4, 1, "\x1b[999;999H\u{4e2d}"), (1, 4, "a\u{4e2d}")];
        for (cols, rows, bytes) in cases {
            let raw = std::panic::catch_unwind(|| {
                vt100::Parser::new(rows, cols, 0).process(bytes.as_bytes())
            });
            assert!(
                raw.is_err(),
                "vt100 took {cols}x{rows}: the minimum may be lower"
            );
            let mut s = Screen::default();
            s.parser.set_size(rows, cols);
            let err = s.feed(bytes.as_bytes()).unwrap_err();
            assert!(err.contains("reset"), "{err}");
            assert!(
                check_size(s.size().0, s.size().1).is_ok(),
                "reset within bounds"
            );
            s.feed(b"ok").unwrap();
            assert_eq!(s.text(), "ok\n");
        }
    }

    #[test]
    fn sizes_outside_the_bounds_are_refused_and_clamped() {
        for (c, r) in [
            (1, 1),
            (1, 40),
            (120, 1),
            (0, 0),
            (1001, 10),
            (10, 1001),
            (1000, 1000),
            (600, 500),
        ] {
            assert!(check_size(c, r).is_err(), "{c}x{r}");
            let mut s = Screen::new(c, r);
            s.resize(c, r);
            let (cols, rows) = s.size();
            assert!(
                check_size(cols, rows).is_ok(),
                "{c}x{r} became {cols}x{rows}"
            );
        }
        for (c, r) in [(2, 2), (120, 40), (1000, 250), (500, 500), (2, 1000)] {
            assert!(check_size(c, r).is_ok(), "{c}x{r}");
        }
    }

    #[test]
    fn shows_what_the_terminal_would() {
        let mut s = Screen::default();
        s.feed(b"hello\r\nworld\x1b[2K\rthere\r\n").unwrap();
        assert_eq!(s.text(), "hello\nthere\n");
        s.feed(b"\x1b[2J\x1b[Hcleared").unwrap();
        assert_eq!(s.text(), "cleared\n");
        s.clear();
        assert_eq!(s.text(), "");
    }
}
