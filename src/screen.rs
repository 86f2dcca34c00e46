//! The VT mirror behind `screen`: the same bytes as the scrollback, fed to a
//! terminal emulator, read back as the text on screen now.

/// Sessions start at 120×40 (SPEC §4).
pub const DEFAULT_COLS: u16 = 120;
pub const DEFAULT_ROWS: u16 = 40;

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
        Screen {
            parser: vt100::Parser::new(rows, cols, 0),
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }

    pub fn resize(&mut self, cols: u16, rows: u16) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_what_the_terminal_would() {
        let mut s = Screen::default();
        s.feed(b"hello\r\nworld\x1b[2K\rthere\r\n");
        assert_eq!(s.text(), "hello\nthere\n");
        s.feed(b"\x1b[2J\x1b[Hcleared");
        assert_eq!(s.text(), "cleared\n");
        s.clear();
        assert_eq!(s.text(), "");
    }
}
