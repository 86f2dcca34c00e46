//! The screen fallback: a verdict from the text of the VT mirror's screen,
//! per engine, from what Claude Code 2.1.328 and Codex CLI 0.169.0 draw
//! (see docs/AGENTS.md), or from the patterns a config file's engine entry
//! gives ([`ScreenRules`]). Conservative: `Ready` only when the prompt box
//! is drawn and nothing runs; anything unclear is `Unknown`, which moves
//! nothing.

use super::state::Verdict;
pub use crate::engine::{Paste, ScreenRules};
use regex::Regex;
use std::sync::Arc;

/// Which TUI drew the screen.
#[derive(Clone, Debug)]
pub enum Tui {
    Claude,
    Codex,
    /// Any other terminal agent, judged by its config entry's patterns.
    Rules(Arc<ScreenRules>),
}

impl PartialEq for Tui {
    fn eq(&self, other: &Tui) -> bool {
        match (self, other) {
            (Tui::Claude, Tui::Claude) | (Tui::Codex, Tui::Codex) => true,
            (Tui::Rules(a), Tui::Rules(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// The lowest row `patterns` match in, if any (the row where the match
/// starts): what a program drew last is lowest, below what an earlier run
/// of it may have left on the screen.
pub fn matched_row(patterns: &[Regex], screen: &str) -> Option<usize> {
    patterns
        .iter()
        .filter_map(|p| p.find_iter(screen).last())
        .map(|m| screen[..m.start()].matches('\n').count())
        .max()
}

/// A configured agent's verdict. Waiting before busy before idle: a
/// question drawn over a running turn is what needs the person.
fn rules_verdict(rules: &ScreenRules, screen: &str) -> Verdict {
    let any = |patterns: &[Regex]| patterns.iter().any(|p| p.is_match(screen));
    if any(&rules.waiting) {
        Verdict::Dialog
    } else if any(&rules.busy) {
        Verdict::Working
    } else if any(&rules.idle) {
        Verdict::Ready
    } else {
        Verdict::Unknown
    }
}

/// Both TUIs show this while a turn runs (Claude in its status line,
/// Codex after "Working (Ns").
const RUNNING: &str = "esc to interrupt";

/// As [`verdict`], for an agent that was started on an earlier
/// conversation and is not ready yet: the start screen its rules name as
/// `loading` is not `Ready`, though it takes input.
pub fn verdict_while_loading(tui: &Tui, screen: &str) -> Verdict {
    match (tui, verdict(tui, screen)) {
        (Tui::Rules(rules), Verdict::Ready) if matched_row(&rules.loading, screen).is_some() => {
            Verdict::Unknown
        }
        (_, v) => v,
    }
}

/// Judges one screen (rows joined by newlines, as `vt100` gives them).
pub fn verdict(tui: &Tui, screen: &str) -> Verdict {
    let lines: Vec<&str> = screen.lines().collect();
    match tui {
        Tui::Claude => claude(&lines),
        Tui::Codex => codex(&lines),
        Tui::Rules(rules) => rules_verdict(rules, screen),
    }
}

fn is_rule(line: &str) -> bool {
    let t = line.trim();
    t.chars().count() >= 10 && t.chars().all(|c| c == '─')
}

/// The rows of Claude's prompt box: from a `❯` row right under a rule to
/// the next rule (a long prompt wraps over several rows).
pub fn claude_composer<'a>(lines: &[&'a str]) -> Option<Vec<&'a str>> {
    let start = (1..lines.len())
        .rev()
        .find(|&i| is_rule(lines[i - 1]) && lines[i].trim_start().starts_with('❯'))?;
    let len = lines[start..].iter().position(|l| is_rule(l))?;
    Some(lines[start..start + len].to_vec())
}

fn claude(lines: &[&str]) -> Verdict {
    let composer = claude_composer(lines).is_some();
    let running = lines.iter().any(|l| l.contains(RUNNING));
    // Permission dialogs ("Do you want to proceed?  ❯ 1. Yes ...") and
    // questions hide the prompt box and offer a numbered or pointed choice.
    let choice = lines.iter().any(|l| {
        let t = l.trim_start();
        t.starts_with("❯ 1.") || t.starts_with("❯ Yes")
    });
    let asks = lines.iter().any(|l| {
        l.contains("Do you want to") || l.contains("Esc to cancel") || l.contains("Enter to select")
    });
    if !composer && (choice || asks) {
        Verdict::Dialog
    } else if running {
        Verdict::Working
    } else if composer {
        Verdict::Ready
    } else {
        Verdict::Unknown
    }
}

fn codex(lines: &[&str]) -> Verdict {
    // While loading its configuration Codex already draws the prompt box
    // under a header that says "loading": not ready yet.
    if lines.iter().take(6).any(|l| l.trim() == "loading") {
        return Verdict::Unknown;
    }
    let running = lines.iter().any(|l| l.contains(RUNNING));
    let asks = lines.iter().any(|l| {
        l.contains("Would you like to")
            || l.contains("Yes, proceed")
            || l.contains("Press enter to confirm")
    });
    // The prompt box is the last `›` line, with the key hints under it.
    let composer = lines
        .iter()
        .rposition(|l| l.starts_with('›'))
        .is_some_and(|at| {
            lines[at + 1..]
                .iter()
                .any(|l| l.contains("for shortcuts") || l.contains(" · "))
        });
    if asks && !running {
        Verdict::Dialog
    } else if running {
        Verdict::Working
    } else if composer {
        Verdict::Ready
    } else {
        Verdict::Unknown
    }
}

/// The text of the prompt box, rows joined by spaces with the `❯`/`›`
/// marker dropped; `None` when no prompt box is drawn (or, for a
/// configured agent, not known).
pub fn composer_text(tui: &Tui, screen: &str) -> Option<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let rows: Vec<&str> = match tui {
        Tui::Claude => claude_composer(&lines)?,
        Tui::Codex => {
            let at = lines.iter().rposition(|l| l.starts_with('›'))?;
            // The box ends at the first blank row or the key hints.
            let len = lines[at..]
                .iter()
                .skip(1)
                .position(|l| l.trim().is_empty() || l.contains(" · "))
                .map_or(lines.len() - at, |n| n + 1);
            lines[at..at + len].to_vec()
        }
        Tui::Rules(_) => return None,
    };
    let joined = rows.join(" ");
    let text = joined.trim_start().trim_start_matches(['❯', '›']);
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Whether the prompt box shows `typed` (its start), or the placeholder a
/// TUI shows for a long paste ("[Pasted text #1 +40 lines]", "[Pasted
/// Content 2000 chars]").
pub fn composer_shows(tui: &Tui, screen: &str, typed: &str) -> bool {
    let Some(shown) = composer_text(tui, screen) else {
        return false;
    };
    if shown.contains("[Pasted") {
        return true;
    }
    let words: String = typed
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let start: String = words.chars().take(24).collect();
    !start.is_empty() && shown.contains(&start)
}

/// How many times the start of `typed` (its first words, blanks
/// collapsed) shows on `screen`: a configured agent's prompt box is not
/// known, so a prompt is seen taken when this grows. 0 for blank text.
pub fn typed_count(screen: &str, typed: &str) -> usize {
    let start: String = typed
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(24)
        .collect();
    if start.is_empty() {
        return 0;
    }
    let flat = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.matches(start.as_str()).count()
}

/// Whether the prompt box is drawn and no longer shows `typed`: after an
/// Enter, the text was taken. No prompt box (a redraw, a dialog) is not
/// taken to mean anything.
pub fn composer_cleared(tui: &Tui, screen: &str, typed: &str) -> bool {
    composer_text(tui, screen).is_some() && !composer_shows(tui, screen, typed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: &str = "────────────────────────────────────────";

    fn claude_screen(body: &str, composer: &str, status: &str) -> String {
        format!(" ▐▛███▛█   Claude Code v2.1.328\n\n{body}\n{RULE}\n{composer}\n{RULE}\n{status}\n")
    }

    #[test]
    fn claude_ready_busy_and_dialog() {
        let ready = claude_screen("", "❯  ", "  ⏸ manual mode on · ? for shortcuts");
        assert_eq!(verdict(&Tui::Claude, &ready), Verdict::Ready);
        let typed = claude_screen("", "❯ say hello please ", "  ⏸ manual mode on");
        assert_eq!(verdict(&Tui::Claude, &typed), Verdict::Ready);
        let long = claude_screen(
            "",
            "❯ long words long\n  words long\n  words",
            "  ⏸ manual mode on",
        );
        assert_eq!(verdict(&Tui::Claude, &long), Verdict::Ready);
        let lines: Vec<&str> = long.lines().collect();
        assert_eq!(claude_composer(&lines).unwrap().len(), 3);
        let busy = claude_screen(
            "❯ say hello please\n✻ Ideating… ",
            "❯  ",
            "  ⏸ manual mode on · esc to interrupt · ← for agents",
        );
        assert_eq!(verdict(&Tui::Claude, &busy), Verdict::Working);
        let dialog = format!(
            "❯ run the tool\n● Running the command\n{RULE}\n Bash command\n echo hi\n Do you want to proceed?\n ❯ 1. Yes\n   2. No\n Esc to cancel · Tab to amend\n"
        );
        assert_eq!(verdict(&Tui::Claude, &dialog), Verdict::Dialog);
        let nudge = format!(
            "{RULE}\n  Make auto mode your default permission mode?\n\n  ❯ Yes, set auto mode as my default permission mode\n    No, keep manual mode\n"
        );
        assert_eq!(verdict(&Tui::Claude, &nudge), Verdict::Dialog);
        assert_eq!(verdict(&Tui::Claude, ""), Verdict::Unknown);
        assert_eq!(
            verdict(&Tui::Claude, " Claude Code v2.1.328\n"),
            Verdict::Unknown
        );
    }

    #[test]
    fn the_prompt_box_shows_what_was_typed() {
        let typed = claude_screen("", "❯ fix the failing test now", "  ⏸ manual mode on");
        assert!(composer_shows(
            &Tui::Claude,
            &typed,
            "fix the failing test now\n"
        ));
        assert!(!composer_shows(&Tui::Claude, &typed, "something else"));
        let empty = claude_screen("", "❯  ", "  ? for shortcuts");
        assert!(!composer_shows(&Tui::Claude, &empty, "fix"));
        let pasted = claude_screen("", "❯ [Pasted text #1 +40 lines]", "");
        assert!(composer_shows(&Tui::Claude, &pasted, "long"));
        let codex = "  >_ OpenAI Codex (v0.169.0)\n     /w\n\n› say hello\n  to me\n\n  gpt-5 default · /w\n";
        assert_eq!(
            composer_text(&Tui::Codex, codex).as_deref(),
            Some("say hello to me")
        );
        assert!(composer_shows(&Tui::Codex, codex, "say  hello"));
    }

    #[test]
    fn a_prompt_box_drawn_without_the_text_means_it_was_taken() {
        let typed =
            "  >_ OpenAI Codex (v0.169.0)\n     /w\n\n› say hello\n\n  gpt-5 default · /w\n";
        assert!(!composer_cleared(&Tui::Codex, typed, "say hello"));
        // Submitted: the text moved up into the history, the box is empty.
        let taken = "  >_ OpenAI Codex (v0.169.0)\n     /w\n\n› say hello\n\n• Hi.\n\n› Ask Codex to do anything\n\n  gpt-5 default · /w\n";
        assert!(composer_cleared(&Tui::Codex, taken, "say hello"));
        // No prompt box at all (a redraw, a dialog) says nothing.
        assert!(!composer_cleared(
            &Tui::Codex,
            "  >_ OpenAI Codex\n",
            "say hello"
        ));
        let claude_taken = claude_screen("> fix it\n", "❯  ", "  ? for shortcuts");
        assert!(composer_cleared(&Tui::Claude, &claude_taken, "fix it"));
        assert!(!composer_cleared(
            &Tui::Claude,
            "Do you want to proceed?\n❯ 1. Yes\n",
            "fix it"
        ));
    }

    /// Qwen Code 0.24.4 at 120 columns, as `docs/engines/qwen.json` reads it.
    fn qwen_rules() -> ScreenRules {
        let re = |p: &str| {
            regex::RegexBuilder::new(p)
                .multi_line(true)
                .build()
                .unwrap()
        };
        ScreenRules {
            busy: vec![re("esc to cancel")],
            waiting: vec![re("Waiting for user confirmation")],
            idle: vec![re("^─{20,}\n>\\s")],
            loading: vec![],
            debounce_ms: 600,
            paste: Paste::Bracketed,
            enter_delay_ms: 300,
            approve: None,
            deny: None,
        }
    }

    #[test]
    fn configured_rules_read_a_screen() {
        let tui = Tui::Rules(Arc::new(qwen_rules()));
        let bar = "─".repeat(40);
        let idle = format!("  > say hi\n\n  ◆︎ QWEN ANSWER OK\n\n{bar}\n>   Type your message or @path/to/file\n{bar}\n  ➜ proj · fake-model\n");
        assert_eq!(verdict(&tui, &idle), Verdict::Ready);
        // A start screen named as `loading` is not ready for a resumed one.
        let loads = Tui::Rules(Arc::new(ScreenRules {
            loading: vec![regex::Regex::new("Tips for getting started").unwrap()],
            ..qwen_rules()
        }));
        let start = format!("{idle}\nTips for getting started:\n");
        assert_eq!(verdict(&loads, &start), Verdict::Ready);
        assert_eq!(verdict_while_loading(&loads, &start), Verdict::Unknown);
        assert_eq!(verdict_while_loading(&loads, &idle), Verdict::Ready);
        let busy = format!("  > say hi\n\n  .  Herding digital cats... (1s · ↓ 4 tokens · esc to cancel)\n{bar}\n>   Type your message\n{bar}\n");
        assert_eq!(verdict(&tui, &busy), Verdict::Working);
        let asks = "  > run it\n  ? Shell touch x\n\n   Allow execution of: 'touch'?\n\n   › 1. Yes, allow once\n     2. Always allow run 'touch *' commands in this project\n     4. No, suggest changes (esc)\n\n  ⠏ Waiting for user confirmation...\n";
        assert_eq!(verdict(&tui, asks), Verdict::Dialog);
        let dialog = crate::agent::dialogs::read(&tui, asks).unwrap();
        assert_eq!(dialog.text, "Allow execution of: 'touch'?");
        assert_eq!(dialog.options.len(), 3);
        let keys = crate::agent::dialogs::keys(&dialog, &crate::agent::dialogs::Answer::Approve);
        assert_eq!(keys.unwrap(), vec![b"\r".to_vec()]);
        let keys = crate::agent::dialogs::keys(&dialog, &crate::agent::dialogs::Answer::Deny);
        assert_eq!(keys.unwrap(), vec![b"\x1b".to_vec()]);
        // Starting up (the banner only), or text in the prompt box: unclear.
        assert_eq!(
            verdict(&tui, "  >_ Qwen Code (v0.24.4)\n"),
            Verdict::Unknown
        );
        assert_eq!(composer_text(&tui, &idle), None);
        assert_eq!(typed_count(&idle, "say  hi\n"), 1);
        assert_eq!(typed_count(&idle, "  \n"), 0);
    }

    #[test]
    fn codex_ready_busy_and_loading() {
        let loading = "  >_ OpenAI Codex (v0.169.0)\n     loading\n\n› Ask Codex to do anything\n  ? for shortcuts\n";
        assert_eq!(verdict(&Tui::Codex, loading), Verdict::Unknown);
        let ready = "  >_ OpenAI Codex (v0.169.0)\n     /w/project\n\n› Ask Codex to do anything\n  gpt-5 default · /w/project\n  ← for agents · ? for shortcuts\n";
        assert_eq!(verdict(&Tui::Codex, ready), Verdict::Ready);
        let busy = "  >_ OpenAI Codex (v0.169.0)\n     /w\n› say hello\n• Working (0s • esc to interrupt)\n› Ask Codex to do anything\n  gpt-5 default · /w\n";
        assert_eq!(verdict(&Tui::Codex, busy), Verdict::Working);
        let done = "  >_ OpenAI Codex (v0.169.0)\n     /w\n› say hello\n• First codex answer.\n  Worked for 2s • 01:29\n› Ask Codex to do anything\n  gpt-5 default · /w\n";
        assert_eq!(verdict(&Tui::Codex, done), Verdict::Ready);
        let asks = "  >_ OpenAI Codex (v0.169.0)\n     /w\n  Would you like to run the following command?\n  $ rm x\n› 1. Yes, proceed (y)\n  Press enter to confirm or esc to cancel\n";
        assert_eq!(verdict(&Tui::Codex, asks), Verdict::Dialog);
    }
}
