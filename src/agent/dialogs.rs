//! What an agent asks, read from its screen, and the keys that answer it.
//! Claude Code and Codex draw their questions as a block of text with a
//! list of options, one marked as selected (`❯` or `›`): a permission to
//! run a tool, the workspace's trust, an offer to change a setting, a
//! question the model asks. The answer moves the mark with the arrow keys
//! to the option wanted and presses Enter; a refusal is Esc, which every
//! one of these dialogs takes as "no" or "cancel" and which changes no
//! setting. (Measured with Claude Code 2.1.328 and Codex 0.169.)

use super::screen_rules::{ScreenRules, Tui};
use serde::Serialize;

/// What kind of question it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Leave to run a tool (a command, an edit).
    Permission,
    /// Whether the workspace is trusted.
    Trust,
    /// How the agent signs in, before its first run (Gemini CLI's).
    #[serde(rename = "sign_in")]
    SignIn,
    /// The model's own question, with options (and free text).
    Question,
    /// An offer to change a setting.
    Offer,
}

/// A question on the screen (`waiting_for`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dialog {
    pub kind: Kind,
    /// The question, as drawn.
    pub text: String,
    /// For a permission: the tool.
    pub tool: Option<String>,
    /// For a permission: its command or path.
    pub detail: Option<String>,
    /// The agent's options, in order.
    pub options: Vec<String>,
    /// Which option is selected now (0-based).
    #[serde(skip)]
    pub selected: usize,
    /// For a dialog whose options are keys named in its footer rather than
    /// a list: the key of each option, in order (the first is its yes).
    #[serde(skip)]
    pub option_keys: Vec<Key>,
    /// The key that refuses, when not Esc (a configured agent's `deny`).
    #[serde(skip)]
    pub deny_key: Option<Key>,
}

/// What is shown of a question: the fields `waiting_for` serialises.
impl std::hash::Hash for Dialog {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (
            self.kind,
            &self.text,
            &self.tool,
            &self.detail,
            &self.options,
        )
            .hash(h);
    }
}

/// An answer a script gives (`ctl`'s `approve`, `deny`, `answer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The agent's one-time yes.
    Approve,
    /// The agent's no, or cancel.
    Deny,
    /// Option N (1-based).
    Option(usize),
    /// Free text, where the question takes it.
    Text(String),
}

/// One key press, written on its own: the TUIs take a burst as a paste.
pub type Key = Vec<u8>;

const ENTER: &[u8] = b"\r";
const ESC: &[u8] = b"\x1b";
const DOWN: &[u8] = b"\x1b[B";
const SHIFT_TAB: &[u8] = b"\x1b[Z";
/// Claude's auto mode when its safety check cannot reach the server: the
/// first option keeps auto mode and asks about each action (so `approve`),
/// the second leaves for accept-edits mode and ends the turn.
const AUTO_MODE_UNCHECKED: &str = "Auto mode can't check actions";
const UP: &[u8] = b"\x1b[A";

/// The question on `screen`, if the agent shows one.
pub fn read(tui: &Tui, screen: &str) -> Option<Dialog> {
    let lines: Vec<&str> = screen.lines().collect();
    if let Tui::Rules(rules) = tui {
        return read_configured(rules, screen, &lines);
    }
    if *tui == Tui::Claude {
        let footer = lines
            .iter()
            .any(|l| l.contains("Enter to stay in auto mode") && l.contains("Esc to cancel"));
        if let Some(l) = lines.iter().find(|l| l.contains(AUTO_MODE_UNCHECKED)) {
            if footer {
                return Some(Dialog {
                    kind: Kind::Permission,
                    text: l.trim().to_string(),
                    tool: None,
                    detail: None,
                    options: vec![
                        "Stay in auto mode and approve each action".into(),
                        "Leave for accept edits mode and stop".into(),
                    ],
                    selected: 0,
                    option_keys: vec![ENTER.to_vec(), SHIFT_TAB.to_vec()],
                    deny_key: None,
                });
            }
        }
    }
    let (kind, at) = find_question(tui, &lines)?;
    let (options, selected) = options_after(&lines, at);
    if options.is_empty() {
        return None;
    }
    let text = lines[at].trim().to_string();
    let (tool, detail) = match kind {
        Kind::Permission => tool_and_detail(tui, &lines, at),
        _ => (None, None),
    };
    Some(Dialog {
        kind,
        text,
        tool,
        detail,
        options,
        selected,
        option_keys: vec![],
        deny_key: None,
    })
}

/// A configured agent's question: drawn where a `waiting` pattern matches.
/// Its text is the row that asks (the last one ending in `?` from a few
/// rows above the match to it), its options the list under that row if
/// one is drawn; `approve` and `deny` press the configured keys.
fn read_configured(rules: &ScreenRules, screen: &str, lines: &[&str]) -> Option<Dialog> {
    let row = super::screen_rules::matched_row(&rules.waiting, screen)?;
    let row = row.min(lines.len().saturating_sub(1));
    let from = row.saturating_sub(QUESTION_ROWS_ABOVE);
    let at = lines
        .get(from..=row)
        .and_then(|rows| rows.iter().rposition(|l| l.trim_end().ends_with('?')))
        .map_or(row, |i| from + i);
    let (options, selected) = options_after(lines, at);
    let approve = rules.approve.clone().or_else(|| {
        // No options drawn: Enter takes what the agent offers first.
        options.is_empty().then(|| ENTER.to_vec())
    });
    let option_keys = match approve {
        Some(yes) => vec![yes, rules.deny.clone().unwrap_or_else(|| ESC.to_vec())],
        None => vec![],
    };
    // Drawn inside a box (Gemini) or beside a bar (opencode): its sides and
    // marks are not the question.
    let text = lines
        .get(at)
        .map_or("", |l| unboxed(l).trim_start_matches('△').trim())
        .to_string();
    // Whether to trust the workspace (Gemini's first run in a folder), how
    // to sign in (its first run on the machine), or else a permission.
    let lower = text.to_lowercase();
    let kind = if lower.contains("trust") {
        Kind::Trust
    } else if lower.contains("authenticate") || lower.contains("api key") {
        Kind::SignIn
    } else {
        Kind::Permission
    };
    Some(Dialog {
        kind,
        text,
        tool: None,
        detail: None,
        options,
        selected,
        option_keys,
        deny_key: rules.deny.clone(),
    })
}

/// How far above a configured `waiting` match the question is looked for.
const QUESTION_ROWS_ABOVE: usize = 12;

/// The line that asks, and what kind of question it is.
fn find_question(tui: &Tui, lines: &[&str]) -> Option<(Kind, usize)> {
    let has = |needle: &str| lines.iter().position(|l| l.contains(needle));
    match tui {
        Tui::Claude => {
            if let Some(at) = has("Do you want to") {
                return Some((Kind::Permission, at));
            }
            if let Some(at) = has("so this one needs your approval") {
                return Some((Kind::Permission, at));
            }
            if let Some(at) = has("a project you created or one you trust") {
                return Some((Kind::Trust, at));
            }
            if let Some(at) = lines
                .iter()
                .position(|l| l.contains("Make ") && l.trim_end().ends_with('?'))
            {
                return Some((Kind::Offer, at));
            }
            // The model's question: the footer names the keys; the question
            // is the last line ending in `?` above the options.
            let footer = has("Enter to select")?;
            let first_option = lines[..footer]
                .iter()
                .position(|l| option_line(l).is_some())?;
            let at = lines[..first_option]
                .iter()
                .rposition(|l| l.trim_end().ends_with('?'))
                .unwrap_or(first_option.saturating_sub(1));
            Some((Kind::Question, at))
        }
        Tui::Codex => has("Would you like to").map(|at| (Kind::Permission, at)),
        Tui::Rules(_) => None,
    }
}

/// An option row: its text, and whether it is the selected one.
fn option_line(line: &str) -> Option<(String, bool)> {
    let t = unboxed(line);
    let marked = t
        .strip_prefix('❯')
        .or_else(|| t.strip_prefix('›'))
        .or_else(|| t.strip_prefix('●'));
    let (selected, rest) = match marked {
        Some(rest) => (true, rest.trim_start()),
        None => (false, t),
    };
    // Numbered (`1. Yes`), or, marked, a bare option (`❯ No`).
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && rest[digits..].starts_with(". ") {
        return Some((rest[digits + 2..].trim().to_string(), selected));
    }
    (selected && !rest.is_empty()).then(|| (rest.trim().to_string(), true))
}

/// A row without the sides of a box drawn around it (Gemini's dialogs),
/// trimmed.
fn unboxed(line: &str) -> &str {
    line.trim().trim_matches(['│', '┃']).trim()
}

/// The options listed after line `at`, and which is selected. Unnumbered
/// options (Claude's trust and auto-mode questions) are the rows between
/// the marked one and the first blank or footer row.
fn options_after(lines: &[&str], at: usize) -> (Vec<String>, usize) {
    let mut options = Vec::new();
    let mut selected = 0;
    let mut numbered = false;
    let mut started = false;
    for line in &lines[at + 1..] {
        let t = unboxed(line);
        if let Some((text, marked)) = option_line(line) {
            numbered |= t
                .trim_start_matches(['❯', '›', '●', ' '])
                .starts_with(|c: char| c.is_ascii_digit());
            if marked {
                selected = options.len();
            }
            options.push(text);
            started = true;
            continue;
        }
        if !started {
            continue;
        }
        if t.is_empty() || is_footer(t) {
            break;
        }
        // An unnumbered list goes on with plain rows; a numbered one has
        // descriptions under its options, which are not options.
        if !numbered && !line.starts_with("     ") {
            options.push(t.to_string());
        }
    }
    (options, selected)
}

fn is_footer(line: &str) -> bool {
    ["Esc to", "Enter to", "esc to", "Press enter", "to navigate"]
        .iter()
        .any(|f| line.contains(f))
}

/// A permission's tool and what it would do: Claude draws the tool's title
/// (`Bash command`) and then the command; Codex the command after `$ `.
fn tool_and_detail(tui: &Tui, lines: &[&str], at: usize) -> (Option<String>, Option<String>) {
    match tui {
        Tui::Codex => {
            let detail = lines
                .iter()
                .find_map(|l| l.trim().strip_prefix("$ ").map(str::to_string));
            (Some("shell".into()), detail)
        }
        Tui::Claude => {
            let rule = |l: &str, c: char| {
                let t = l.trim();
                t.chars().count() >= 10 && t.chars().all(|x| x == c)
            };
            // The dialog's block: from the solid rule above the question.
            let top = lines[..at]
                .iter()
                .rposition(|l| rule(l, '─'))
                .map_or(0, |r| r + 1);
            let block = &lines[top..at];
            let title = block.iter().map(|l| l.trim()).find(|l| !l.is_empty());
            let tool = title
                .and_then(|t| t.split_whitespace().next())
                .map(str::to_string)
                .filter(|t| t.chars().all(|c| c.is_alphanumeric() || c == '_'));
            // What it would do: framed by dashed rules when Claude frames it,
            // else the rows under the title (tips left out).
            let dashed: Vec<usize> = (0..block.len()).filter(|&i| rule(block[i], '╌')).collect();
            let rows: Vec<&str> = match dashed.as_slice() {
                [first, .., last] => block[first + 1..*last].to_vec(),
                _ => block
                    .iter()
                    .skip_while(|l| l.trim().is_empty())
                    .skip(1)
                    .copied()
                    .collect(),
            };
            let rows: Vec<&str> = rows
                .iter()
                .map(|l| l.trim())
                .filter(|l| !l.is_empty() && !l.starts_with("Tip:"))
                .collect();
            let detail = (!rows.is_empty()).then(|| rows.join("\n"));
            (tool, detail)
        }
        Tui::Rules(_) => (None, None),
    }
}

/// Whether an option is a plain yes: one-time, changing no mode or rule.
fn plain_yes(option: &str) -> bool {
    let o = option.to_lowercase();
    (o.starts_with("yes") || o.starts_with("allow"))
        && ![
            "always",
            "don't ask",
            "auto mode",
            "default",
            "switch",
            "and tell",
        ]
        .iter()
        .any(|w| o.contains(w))
}

/// The keys that give `answer` to `dialog`, each written on its own, or
/// why it cannot be given.
pub fn keys(dialog: &Dialog, answer: &Answer) -> Result<Vec<Key>, String> {
    let pick = |target: usize| -> Vec<Key> {
        let step = if target >= dialog.selected { DOWN } else { UP };
        let mut keys: Vec<Key> =
            std::iter::repeat_n(step.to_vec(), target.abs_diff(dialog.selected)).collect();
        keys.push(ENTER.to_vec());
        keys
    };
    match answer {
        Answer::Deny => Ok(vec![dialog.deny_key.clone().unwrap_or_else(|| ESC.to_vec())]),
        Answer::Approve if !dialog.option_keys.is_empty() => Ok(vec![dialog.option_keys[0].clone()]),
        Answer::Option(n) if !dialog.option_keys.is_empty() => dialog
            .option_keys
            .get(n.wrapping_sub(1))
            .map(|k| vec![k.clone()])
            .ok_or_else(|| {
                format!(
                    "there is no option {n}: it offers {}",
                    dialog.option_keys.len()
                )
            }),
        Answer::Approve => match dialog.kind {
            Kind::Offer => Err(format!(
                "approve would take the offer \"{}\", which changes a setting; choose with answer N, or deny",
                dialog.text
            )),
            Kind::Question => Err("a question takes answer N or answer TEXT, not approve".into()),
            Kind::Permission | Kind::Trust | Kind::SignIn => dialog
                .options
                .iter()
                .position(|o| plain_yes(o))
                .map(pick)
                .ok_or_else(|| format!("no one-time yes among {:?}", dialog.options)),
        },
        Answer::Option(n) => {
            if *n == 0 || *n > dialog.options.len() {
                return Err(format!(
                    "there is no option {n}: it offers {}",
                    dialog.options.len()
                ));
            }
            Ok(pick(n - 1))
        }
        Answer::Text(text) => {
            let free = dialog
                .options
                .iter()
                .position(|o| o.starts_with("Type something"))
                .filter(|_| dialog.kind == Kind::Question)
                .ok_or("this question takes no free text; answer N")?;
            let mut keys = pick(free);
            keys.pop();
            keys.push(ENTER.to_vec());
            keys.push(text.as_bytes().to_vec());
            keys.push(ENTER.to_vec());
            Ok(keys)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERMISSION: &str = "\
────────────────────────────────────────
 Bash command

   touch /tmp/dialogs/out/x
   make a file

 Do you want to proceed?
 ❯ 1. Yes
   2. Yes, and always allow access to out/ from this project
   3. Yes, and switch to auto mode · auto mode handles these prompts for you
   4. No

 Esc to cancel · Tab to amend
";

    const AUTO_MODE: &str = "\
────────────────────────────────────────
  Auto mode can't check actions in this session

  Auto mode's safety check runs on the server. Your requests go through 127.0.0.1:34675, and the check isn't getting
  through.

  You can stay in auto mode and approve each action that needs the check yourself.

  Enter to stay in auto mode · shift+Tab to leave for accept edits mode and stop · Esc to cancel
";

    #[test]
    fn claudes_unchecked_auto_mode_is_approved_by_staying_in_it() {
        let d = read(&Tui::Claude, AUTO_MODE).unwrap();
        assert_eq!(d.kind, Kind::Permission);
        assert_eq!(d.text, "Auto mode can't check actions in this session");
        assert_eq!(d.options.len(), 2);
        assert_eq!(keys(&d, &Answer::Approve).unwrap(), vec![ENTER.to_vec()]);
        assert_eq!(keys(&d, &Answer::Deny).unwrap(), vec![ESC.to_vec()]);
        assert_eq!(
            keys(&d, &Answer::Option(2)).unwrap(),
            vec![SHIFT_TAB.to_vec()]
        );
        assert!(keys(&d, &Answer::Option(3)).is_err());
        assert!(keys(&d, &Answer::Option(0)).is_err());
    }

    #[test]
    fn claudes_permission_names_the_tool_its_command_and_the_options() {
        let d = read(&Tui::Claude, PERMISSION).unwrap();
        assert_eq!(d.kind, Kind::Permission);
        assert_eq!(d.text, "Do you want to proceed?");
        assert_eq!(d.tool.as_deref(), Some("Bash"));
        assert_eq!(
            d.detail.as_deref(),
            Some("touch /tmp/dialogs/out/x\nmake a file")
        );
        assert_eq!(d.options.len(), 4);
        assert_eq!(d.options[3], "No");
        assert_eq!(d.selected, 0);
        assert_eq!(keys(&d, &Answer::Approve).unwrap(), vec![ENTER.to_vec()]);
        assert_eq!(keys(&d, &Answer::Deny).unwrap(), vec![ESC.to_vec()]);
        assert_eq!(
            keys(&d, &Answer::Option(4)).unwrap(),
            vec![DOWN.to_vec(), DOWN.to_vec(), DOWN.to_vec(), ENTER.to_vec()]
        );
        assert!(keys(&d, &Answer::Option(5)).is_err());
        assert!(keys(&d, &Answer::Text("x".into())).is_err());
    }

    #[test]
    fn claudes_framed_command_is_the_detail() {
        let screen = "\
● Running the command
  ⎿  $ echo approved > /tmp/x

────────────────────────────────────────
 Bash command
 Tip: auto mode handles these prompts for you
 Run the command
╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌
 echo approved > /tmp/x
╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌
 Do you want to proceed?
 ❯ 1. Yes
   4. No

 Esc to cancel · Tab to amend
";
        let d = read(&Tui::Claude, screen).unwrap();
        assert_eq!(d.tool.as_deref(), Some("Bash"));
        assert_eq!(d.detail.as_deref(), Some("echo approved > /tmp/x"));
    }

    #[test]
    fn claudes_trust_and_auto_mode_questions_are_unnumbered() {
        let trust = "\
 Accessing workspace:

 /tmp/dialogs/untrusted

 Quick safety check: Is this a project you created or one you trust? (Like your own code)

 ❯ No, exit
   Yes, I trust this folder

 Enter to confirm · Esc to cancel
";
        let d = read(&Tui::Claude, trust).unwrap();
        assert_eq!(d.kind, Kind::Trust);
        assert_eq!(d.options, ["No, exit", "Yes, I trust this folder"]);
        assert_eq!(
            keys(&d, &Answer::Approve).unwrap(),
            vec![DOWN.to_vec(), ENTER.to_vec()]
        );
        let needs = "\
 Auto mode can't check actions in this session, so this one needs your approval
 ❯ No
   Yes
";
        let d = read(&Tui::Claude, needs).unwrap();
        assert_eq!(d.kind, Kind::Permission);
        assert_eq!(d.options, ["No", "Yes"]);
        assert_eq!(
            keys(&d, &Answer::Approve).unwrap(),
            vec![DOWN.to_vec(), ENTER.to_vec()]
        );
        let offer = "\
  Make auto mode your default permission mode?

 ❯ Yes, set auto mode as my default permission mode
   No, keep manual mode
";
        let d = read(&Tui::Claude, offer).unwrap();
        assert_eq!(d.kind, Kind::Offer);
        assert!(
            keys(&d, &Answer::Approve).is_err(),
            "approve changes no setting"
        );
        assert_eq!(keys(&d, &Answer::Deny).unwrap(), vec![ESC.to_vec()]);
    }

    #[test]
    fn claudes_question_takes_an_option_or_free_text() {
        let screen = "\
 ☐ Pick

Pick one?

❯ 1. Red
     r
  2. Blue
     b
  3. Type something.
  4. Chat about this

Enter to select · ↑/↓ to navigate · Esc to cancel
";
        let d = read(&Tui::Claude, screen).unwrap();
        assert_eq!(d.kind, Kind::Question);
        assert_eq!(d.text, "Pick one?");
        assert_eq!(
            d.options,
            ["Red", "Blue", "Type something.", "Chat about this"]
        );
        assert_eq!(
            keys(&d, &Answer::Option(2)).unwrap(),
            vec![DOWN.to_vec(), ENTER.to_vec()]
        );
        let text = keys(&d, &Answer::Text("green".into())).unwrap();
        assert_eq!(text.last().unwrap(), ENTER);
        assert!(text.contains(&b"green".to_vec()));
        assert!(keys(&d, &Answer::Approve).is_err());
    }

    #[test]
    fn codexs_approval_names_its_command() {
        let screen = "\
  Would you like to run the following command?

  Reason: it needs to write a file

  $ touch /tmp/x

› 1. Yes, proceed (y)
  2. Yes, and don't ask again for commands that start with `touch` (p)
  3. No, and tell Codex what to do differently (esc)

  Press enter to confirm or esc to cancel
";
        let d = read(&Tui::Codex, screen).unwrap();
        assert_eq!(d.kind, Kind::Permission);
        assert_eq!(d.detail.as_deref(), Some("touch /tmp/x"));
        assert_eq!(d.options.len(), 3);
        assert_eq!(keys(&d, &Answer::Approve).unwrap(), vec![ENTER.to_vec()]);
    }

    /// Gemini CLI 0.61's first run in a folder not trusted yet.
    #[test]
    fn geminis_trust_question_is_read_from_its_box() {
        let tui = Tui::Rules(crate::engine::gemini_screen().unwrap());
        let screen = " ╭──────────────────────────────╮
 │                              │
 │ Do you trust the files in this folder?  │
 │                              │
 │ Trusting a folder allows Gemini CLI to load its local configurations, │
 │                              │
 │ ● 1. Trust folder (proj)     │
 │   2. Trust parent folder (gx) │
 │   3. Don't trust             │
 │                              │
 ╰──────────────────────────────╯
";
        let d = read(&tui, screen).unwrap();
        assert_eq!(d.kind, Kind::Trust);
        assert_eq!(d.text, "Do you trust the files in this folder?");
        assert_eq!(
            d.options,
            [
                "Trust folder (proj)",
                "Trust parent folder (gx)",
                "Don't trust"
            ]
        );
        assert_eq!(d.selected, 0);
        assert_eq!(keys(&d, &Answer::Approve).unwrap(), vec![ENTER.to_vec()]);
        assert_eq!(keys(&d, &Answer::Deny).unwrap(), vec![ESC.to_vec()]);
        // Restarted trusting it, it draws the next question below what is
        // left of the first: the lower one is asked.
        let next = format!(
            "{screen} Gemini CLI is restarting to apply the trust changes...
│ ? Get started                         │
│   How would you like to authenticate for this project?   │
│     1. Sign in with Google            │
│   ● 2. Use Gemini API Key             │
│     3. Vertex AI                      │
"
        );
        let d = read(&tui, &next).unwrap();
        assert_eq!(d.kind, Kind::SignIn);
        assert_eq!(
            d.text,
            "How would you like to authenticate for this project?"
        );
        assert_eq!(d.selected, 1);
        assert_eq!(keys(&d, &Answer::Approve).unwrap(), vec![ENTER.to_vec()]);
    }

    #[test]
    fn a_screen_without_a_question_has_none() {
        let ready = "────────────\n❯ \n────────────\n";
        assert_eq!(read(&Tui::Claude, ready), None);
        assert_eq!(read(&Tui::Codex, "› Ask Codex to do anything\n"), None);
    }
}
