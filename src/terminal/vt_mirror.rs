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
        quiet_when_feeding();
        FEEDING.with(|f| f.set(true));
        let fed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.parser.process(bytes)));
        FEEDING.with(|f| f.set(false));
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
        let (old_cols, old_rows) = self.size();
        if cols < old_cols {
            self.clear_cut_wide(cols);
        }
        self.parser.set_size(rows, cols);
        if cols < old_cols || rows < old_rows {
            self.in_both_grids(Self::clamp_saved_cursor_shown);
        }
    }

    /// Runs `mend` on the grid shown, then on the other one (switching
    /// without clearing either), and puts the attributes back.
    fn in_both_grids(&mut self, mend: impl Fn(&mut Self)) {
        let attrs = self.parser.screen().attributes_formatted();
        let (other, back): (&[u8], &[u8]) = if self.parser.screen().alternate_screen() {
            (b"\x1b[?47l", b"\x1b[?47h")
        } else {
            (b"\x1b[?47h", b"\x1b[?47l")
        };
        mend(self);
        self.parser.process(other);
        mend(self);
        self.parser.process(back);
        self.parser.process(&attrs);
    }

    /// Where the cursor is, whether origin mode is on and the scroll
    /// region's top row: in origin mode a cursor move counts from the
    /// region's top and stays inside it, so where moves to the first and
    /// the last row land tell. Leaves the cursor moved.
    fn probe_cursor(&mut self) -> (u16, u16, bool, u16) {
        let (row, col) = self.parser.screen().cursor_position();
        let rows = self.parser.screen().size().0;
        self.parser.process(b"\x1b[1;1H");
        let top = self.parser.screen().cursor_position().0;
        self.parser.process(b"\x1b[999;1H");
        let bottom = self.parser.screen().cursor_position().0;
        (row, col, top != 0 || bottom != rows - 1, top)
    }

    /// The cursor move to absolute (`row`, `col`) under the origin mode
    /// `origin` with the region's top at `top`.
    fn cursor_to(row: u16, col: u16, origin: bool, top: u16) -> String {
        let row = if origin { row.saturating_sub(top) } else { row };
        format!("\x1b[{};{}H", row + 1, col + 1)
    }

    /// After the screen shrank, in the grid shown. vt100 keeps a saved
    /// cursor (`ESC 7`, `CSI s`, `?1049h`) where it was, past the new
    /// edge, and the next character after its restore panics: the saved
    /// position is brought inside, its origin mode and attributes kept.
    /// The cursor and origin mode are put back (the attributes by the
    /// caller: a restore changes them).
    fn clamp_saved_cursor_shown(&mut self) {
        let (rows, cols) = self.parser.screen().size();
        let (row, col, origin, top) = self.probe_cursor();
        self.parser.process(b"\x1b8");
        let (saved_row, saved_col) = self.parser.screen().cursor_position();
        if saved_row >= rows || saved_col >= cols {
            let (_, _, saved_origin, saved_top) = self.probe_cursor();
            let to = Self::cursor_to(
                saved_row.min(rows - 1),
                saved_col.min(cols - 1),
                saved_origin,
                saved_top,
            );
            self.parser.process(format!("{to}\x1b7").as_bytes());
        }
        let mode: &[u8] = if origin { b"\x1b[?6h" } else { b"\x1b[?6l" };
        self.parser.process(mode);
        self.parser
            .process(Self::cursor_to(row, col, origin, top).as_bytes());
    }

    /// Before the screen narrows to `cols`. vt100 0.15 cuts each row
    /// without clearing a wide character whose second half falls off the
    /// new edge, and the next character written over it panics (upstream
    /// doy/vt100-rust#28 and #37): a wide character in the column that
    /// becomes the last is blanked first, at the old size, in both grids
    /// (the main one and the alternate one; a program may switch between
    /// them without clearing either). The cursor, its attributes and
    /// origin mode are put back.
    fn clear_cut_wide(&mut self, cols: u16) {
        self.in_both_grids(|s| s.clear_cut_wide_shown(cols));
    }

    fn clear_cut_wide_shown(&mut self, cols: u16) {
        let screen = self.parser.screen();
        let (rows, _) = screen.size();
        let cut: Vec<u16> = (0..rows)
            .filter(|r| screen.cell(*r, cols - 1).is_some_and(|c| c.is_wide()))
            .collect();
        if cut.is_empty() {
            return;
        }
        let (row, col, origin, top) = self.probe_cursor();
        let mut fix = Vec::new();
        if origin {
            fix.extend_from_slice(b"\x1b[?6l");
        }
        fix.extend_from_slice(b"\x1b[m");
        for r in cut {
            // A blank over the first half clears the second as well.
            fix.extend_from_slice(format!("\x1b[{};{}H ", r + 1, cols).as_bytes());
        }
        if origin {
            fix.extend_from_slice(b"\x1b[?6h");
        }
        fix.extend_from_slice(Self::cursor_to(row, col, origin, top).as_bytes());
        self.parser.process(&fix);
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

thread_local! {
    /// Set while vt100 runs under [`Screen::feed`], which contains a panic
    /// and hands its reason to the caller (the log, `status.error`).
    static FEEDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Chains the process's panic hook once, so that a panic `feed` contains
/// is reported as the reason the mirror was reset, not also as a crash
/// with its backtrace on stderr.
fn quiet_when_feeding() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !FEEDING.with(|f| f.get()) {
                previous(info);
            }
        }));
    });
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

    /// Pieces of output both strategies draw from: wide and combining
    /// characters, controls, erases, cursor moves far off screen, scroll
    /// regions, insert/delete, origin mode.
    const COMMON: &[&[u8]] = &[
        b"a",
        "\u{4e2d}".as_bytes(),
        "\u{1f600}".as_bytes(),
        "\u{301}".as_bytes(),
        b"\r",
        b"\n",
        b"\t",
        b"\x08",
        b"\x1b[2J",
        b"\x1b[2K",
        b"\x1b[H",
        b"\x1b[5;5H",
        b"\x1b[999;999H",
        b"\x1b[1;2r",
        b"\x1b[r",
        b"\x1b[L",
        b"\x1b[M",
        b"\x1b[@",
        b"\x1b[P",
        b"\x1b[X",
        b"\x1b[10C",
        b"\x1b[10D",
        b"\x1b[?6h",
        b"\x1b[?6l",
    ];

    fn drawn_from(more: &[&'static [u8]], max: usize) -> impl Strategy<Value = Vec<u8>> {
        let pieces: Vec<&'static [u8]> = COMMON.iter().chain(more).copied().collect();
        prop::collection::vec(prop::sample::select(pieces), 0..max).prop_map(|p| p.concat())
    }

    /// Output that exercises the corners, the alternate screen and saved
    /// cursors included.
    fn output() -> impl Strategy<Value = Vec<u8>> {
        drawn_from(
            &[
                b"\x1b[J",
                b"\x1b[1J",
                b"\x1b[2;3r",
                b"\x1b[3;1r",
                b"\x1b[S",
                b"\x1b[T",
                b"\x1bM",
                b"\x1bD",
                b"\x1bE",
                b"\x1b7",
                b"\x1b8",
                b"\x1b[?7h",
                b"\x1b[?7l",
                b"\x1b[?1049h",
                b"\x1b[?1049l",
            ],
            300,
        )
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Narrowed or shortened by any amount at any point, the screen
        /// survives any output written after. vt100 alone panics when a
        /// wide character loses its second half at the new edge, and when
        /// a cursor saved past the new edge is restored and written at.
        #[test]
        fn a_shrunk_screen_survives_any_output(
            before in output(),
            after in output(),
            cols in MIN_COLS..60,
            rows in MIN_ROWS..12,
            narrower in 0u16..40,
            shorter in 0u16..10,
        ) {
            let mut s = Screen::new(cols, rows);
            s.feed(&before).unwrap();
            s.resize(cols.saturating_sub(narrower), rows.saturating_sub(shorter));
            let vt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                s.parser.process(&after);
                s.text()
            }));
            prop_assert!(
                vt.is_ok(),
                "vt100 panicked after {cols}x{rows} -> {:?}",
                s.size()
            );
        }
    }

    /// The smallest case: a wide character in the last two columns, the
    /// screen one column narrower, one more character. vt100 alone panics;
    /// the mirror blanks the cut character and keeps the rest, the cursor
    /// and the colours, in both grids.
    #[test]
    fn a_wide_character_cut_by_a_narrower_screen_is_blanked() {
        let raw = std::panic::catch_unwind(|| {
            let mut p = vt100::Parser::new(2, 6, 0);
            p.process("abcd\u{1f600}".as_bytes());
            p.set_size(2, 5);
            p.process(b"y");
        });
        assert!(
            raw.is_err(),
            "vt100 no longer panics here: the workaround may go"
        );

        let mut s = Screen::new(6, 3);
        s.feed("abcd\u{1f600}\r\n\x1b[31mzz".as_bytes()).unwrap();
        s.resize(5, 3);
        assert_eq!(s.parser.screen().cursor_position(), (1, 2));
        assert_eq!(s.parser.screen().fgcolor(), vt100::Color::Idx(1));
        s.feed(b"\x1b[1;5Hy").unwrap();
        assert_eq!(s.text(), "abcdy\nzz\n");

        // Under the alternate screen, the main one is mended too.
        let mut s = Screen::new(6, 3);
        s.feed("abcd\u{1f600}\x1b[?1049h\u{4e2d}\u{4e2d}\u{4e2d}".as_bytes())
            .unwrap();
        s.resize(5, 3);
        s.feed(b"\x1b[1;5Hy\x1b[?1049l\x1b[1;5Hy").unwrap();
        assert_eq!(s.text(), "abcdy\n");

        // Origin mode with a scroll region: rows outside it are reached too.
        let mut s = Screen::new(6, 4);
        s.feed("\x1b[4;1Habcd\u{1f600}\x1b[1;2r\x1b[?6h\x1b[2;3H".as_bytes())
            .unwrap();
        let cursor = s.parser.screen().cursor_position();
        s.resize(5, 4);
        assert_eq!(s.parser.screen().cursor_position(), cursor);
        s.feed(b"\x1b[?6l\x1b[4;5Hy").unwrap();
        assert_eq!(s.text().lines().last(), Some("abcdy"));
    }

    /// A cursor saved at the far edge, the screen made smaller, the cursor
    /// restored and written at: vt100 alone panics; the mirror brings the
    /// saved position inside and keeps its attributes, and the cursor
    /// shown stays as it was.
    #[test]
    fn a_cursor_saved_past_a_smaller_screen_is_brought_inside() {
        let raw = std::panic::catch_unwind(|| {
            let mut p = vt100::Parser::new(4, 10, 0);
            p.process(b"\x1b[4;10H\x1b7\x1b[1;1H");
            p.set_size(3, 6);
            p.process(b"\x1b8y");
        });
        assert!(
            raw.is_err(),
            "vt100 no longer panics here: the workaround may go"
        );

        let mut s = Screen::new(10, 4);
        s.feed(b"\x1b[4;10H\x1b[31m\x1b7\x1b[m\x1b[1;2H").unwrap();
        s.resize(6, 3);
        assert_eq!(s.parser.screen().cursor_position(), (0, 1));
        assert_eq!(s.parser.screen().fgcolor(), vt100::Color::Default);
        s.feed(b"\x1b8y").unwrap();
        assert_eq!(s.text(), "\n\n     y\n");
        assert_eq!(s.parser.screen().fgcolor(), vt100::Color::Idx(1));

        // The main grid's, saved by `?1049h`, restored by `?1049l`.
        let mut s = Screen::new(10, 4);
        s.feed(b"\x1b[2;10H\x1b[?1049hx").unwrap();
        s.resize(6, 4);
        s.feed(b"\x1b[?1049ly").unwrap();
        assert_eq!(s.text(), "\n     y\n");
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
