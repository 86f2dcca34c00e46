//! Tests over the recorded real stores and over generated ones.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::testgen::{self, Shape};
use super::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real")
}

fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            jsonl_files(&p, out);
        } else if p.to_string_lossy().ends_with(".jsonl") {
            out.push(p);
        }
    }
}

fn kind_of(p: &Path) -> StoreKind {
    if p.to_string_lossy().contains("/codex/") {
        StoreKind::Codex
    } else {
        StoreKind::Claude
    }
}

fn clip() -> ParseOptions {
    page::page_parse_options()
}

fn limits(page_turns: usize) -> Limits {
    Limits {
        page_turns,
        ..Limits::default()
    }
}

fn page(path: &Path, idx: &TurnIndex, n: usize, l: &Limits) -> String {
    String::from_utf8(render_page(path, idx, n, l).expect("page renders")).expect("UTF-8")
}

fn all_pages(path: &Path, idx: &TurnIndex, l: &Limits) -> Vec<String> {
    (0..page_count(idx, l.page_turns))
        .map(|n| page(path, idx, n, l))
        .collect()
}

/// The numbers `K` of the prompts (`> … prompt #K`) on a page, in order.
fn prompts(text: &str) -> Vec<usize> {
    text.lines()
        .filter(|l| l.starts_with("> "))
        .filter_map(|l| l.split("prompt #").nth(1))
        .filter_map(|n| n.trim().parse().ok())
        .collect()
}

fn fixture(rel: &str) -> PathBuf {
    fixtures().join(rel)
}

fn whole(kind: StoreKind, path: &Path) -> String {
    let idx = TurnIndex::build(kind, path).unwrap();
    all_pages(path, &idx, &limits(50)).concat()
}

#[test]
fn every_fixture_parses_and_renders() {
    let mut files = Vec::new();
    jsonl_files(&fixtures(), &mut files);
    assert!(files.len() >= 11, "fixtures missing: {files:?}");
    for p in &files {
        let kind = kind_of(p);
        let idx = TurnIndex::build(kind, p).unwrap();
        let conv = parse_store(kind, p, clip()).unwrap();
        assert_eq!(idx.turn_count(), conv.turns.len(), "{}", p.display());
        assert_eq!(idx.scanned_to(), fs::metadata(p).unwrap().len());
        let full = render_conversation(&conv);
        for per in [1, 3, 50] {
            // Pages side by side, an empty line between, are exactly the
            // whole conversation.
            let pages = all_pages(p, &idx, &limits(per));
            assert_eq!(pages.join("\n"), full, "{} per={per}", p.display());
            for (n, text) in pages.iter().enumerate() {
                let shown = text.lines().filter(|l| l.starts_with('>')).count();
                let held = idx.turn_count().saturating_sub(n * per).min(per);
                assert_eq!(shown, held, "{} per={per} page={n}", p.display());
            }
            let err = render_page(p, &idx, pages.len(), &limits(per)).unwrap_err();
            assert_eq!(err.errno(), libc::ENOENT);
        }
    }
}

#[test]
fn claude_compaction_meta_and_slash_commands() {
    let p =
        fixture("claude/projects/-home-USER-spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl");
    let idx = TurnIndex::build(StoreKind::Claude, &p).unwrap();
    assert_eq!(idx.turn_count(), 3);
    let text = whole(StoreKind::Claude, &p);
    assert!(text.starts_with("> Work on bead spotter-4te. Run bd show spotter-4te"));
    assert!(text.contains("\n> /compact and continue with the reamining tasks\n"));
    assert!(text.contains("\n> continue implementation\n"));
    assert_eq!(text.matches(render::DIVIDER).count(), 1);
    // The divider comes before the /compact turn, as in the store.
    assert!(text.find(render::DIVIDER).unwrap() < text.find("> /compact").unwrap());
    // Injected context: a skill's expansion (isMeta), the compaction summary,
    // the local-command caveat.
    assert!(!text.contains("Base directory for this skill"));
    assert!(!text.contains("This session is being continued"));
    assert!(!text.contains("local-command-caveat"));
    assert!(text.contains("  ⎿  Compacted (ctrl+o to see full summary)"));
    assert!(text.contains("● Bash(bd show spotter-4te)"));
    assert!(text.contains("✻ thinking…"));
    assert!(text.contains("  ⎿  ✗ "), "tool errors are marked");
    assert!(text.contains(" lines\n"), "long outputs are cut");
    assert_eq!(
        idx.info().session_id.as_deref(),
        Some("ae4a77f8-aedd-4bc1-888f-c94edc91af04")
    );
    assert_eq!(
        idx.info().cwd.as_deref(),
        Some("/home/USER/projects/spotter-worktrees/spotter-4te")
    );
    assert!(idx
        .info()
        .last_timestamp
        .as_deref()
        .unwrap()
        .starts_with("2026-02-12T"));
    assert_eq!(
        idx.title().as_deref(),
        Some("Work on bead spotter-4te. Run bd show spotter-4te to see the issue details and b…")
    );
}

#[test]
fn claude_inline_sidechains_are_not_turns() {
    let p = fixture("claude/projects/-path-to-Demo/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl");
    let idx = TurnIndex::build(StoreKind::Claude, &p).unwrap();
    assert_eq!(idx.turn_count(), 2);
    let text = whole(StoreKind::Claude, &p);
    assert!(text.starts_with("> /orchestrator create TODO app by Next.js\n"));
    assert!(text.contains("\n> Thanks! Please update CLAUDE.md for current changes\n"));
    assert!(
        !text.contains("Split complex tasks into independent subtasks"),
        "isMeta shown"
    );
    assert_eq!(
        idx.title().as_deref(),
        Some("Empty Repo Setup: CLAUDE.md Foundation Created")
    );
    // The subagents' own prompts (inline sidechain rows) never show.
    let side_prompt = first_sidechain_prompt(&p);
    assert!(
        !text.contains(side_prompt.lines().next().unwrap()),
        "{side_prompt}"
    );

    let p = fixture("claude/projects/-path-to-Demo/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl");
    let text = whole(StoreKind::Claude, &p);
    assert_eq!(
        TurnIndex::build(StoreKind::Claude, &p)
            .unwrap()
            .turn_count(),
        1
    );
    assert!(text.starts_with("> /orchestrator @CLAUDE.md を最新の状態にアップデートしてください\n"));
}

fn first_sidechain_prompt(p: &Path) -> String {
    for l in fs::read_to_string(p).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v["isSidechain"] == true && v["type"] == "user" {
            if let Some(s) = v["message"]["content"].as_str() {
                return s.to_string();
            }
        }
    }
    panic!("no sidechain prompt")
}

#[test]
fn claude_other_fixtures() {
    let p = fixture("claude/projects/-codemie-project/9eda1058-9706-484a-b992-d03f9cfa2546.jsonl");
    let idx = TurnIndex::build(StoreKind::Claude, &p).unwrap();
    assert_eq!(idx.turn_count(), 3);
    let text = whole(StoreKind::Claude, &p);
    assert!(text.starts_with("> show tools and store response in file\n"));
    assert!(text.contains("  ⎿  Interrupted by user for tool use\n"));
    assert_eq!(idx.title().as_deref(), Some("Cleared conversation history"));

    let p =
        fixture("claude/projects/-home-marco-spotter/491e126e-1e71-469c-ade2-fcc8af567c74.jsonl");
    let idx = TurnIndex::build(StoreKind::Claude, &p).unwrap();
    assert_eq!(idx.turn_count(), 2);
    let text = whole(StoreKind::Claude, &p);
    assert!(text.starts_with("> /handgemacht:create-beads websearch"));
    assert!(text.contains("\n> create the beads\n"));
    assert!(!text.contains("Create beads (epic + tasks + dependencies) with a structured preview"));

    let p = fixture("claude/projects/-redacted-project/06090cb1-3e64-433a-bc7e-a621c0f596d2.jsonl");
    let idx = TurnIndex::build(StoreKind::Claude, &p).unwrap();
    assert_eq!(idx.turn_count(), 1);
    assert_eq!(
        whole(StoreKind::Claude, &p),
        "> [REDACTED_PROMPT]\n● [REDACTED_ASSISTANT_TEXT]\n"
    );
    assert_eq!(
        idx.info().cwd.as_deref(),
        Some("/tmp/agent-history-real-agent/claude/workspace")
    );
    assert_eq!(idx.title().as_deref(), Some("[REDACTED_PROMPT]"));

    // A subagent's own file: all its rows are sidechain rows, and shown.
    let p = fixture(
        "claude/projects/-codemie-project/e9fb405b-169f-40eb-9396-7e75076f045d/subagents/agent-a485154.jsonl",
    );
    let idx = TurnIndex::build(StoreKind::Claude, &p).unwrap();
    assert_eq!(idx.turn_count(), 1);
    assert!(whole(StoreKind::Claude, &p).contains("● "));
}

#[test]
fn codex_fixture() {
    let p = fixture(
        "codex/sessions/2026/05/11/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
    );
    let idx = TurnIndex::build(StoreKind::Codex, &p).unwrap();
    assert_eq!(idx.turn_count(), 2);
    assert_eq!(
        idx.info().session_id.as_deref(),
        Some("019e1625-789d-76c0-80ab-3724b5ddb799")
    );
    assert_eq!(
        idx.info().cwd.as_deref(),
        Some("/Users/Sample_User/repos/codemie-ai/codemie-code")
    );
    assert_eq!(idx.title().as_deref(), Some("show tools"));
    assert_eq!(
        idx.info().last_timestamp.as_deref(),
        Some("2026-05-11T08:44:58.544Z")
    );
    let text = whole(StoreKind::Codex, &p);
    assert!(text.starts_with("> show tools\n"));
    assert!(text.contains("\n> let's update the defailt context compart to 90 in env var\n"));
    assert_eq!(
        text.matches("Available tool groups in this session:")
            .count(),
        1
    );
    assert_eq!(
        text.matches("The RED check failed exactly because").count(),
        1
    );
    assert_eq!(text.matches("> show tools").count(), 1);
    assert!(!text.contains("AGENTS.md instructions"));
    assert!(!text.contains("environment_context"));
    assert!(!text.contains("permissions instructions"));
    assert!(text.contains("● exec_command(sed -n '1,180p' "));
    assert!(
        text.contains("● apply_patch(src/agents/plugins/__tests__/codemie-code-reasoning.test.ts)")
    );
    assert!(!text.contains("Chunk ID:"), "exec bookkeeping is dropped");
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, data).unwrap();
    p
}

fn gen(kind: StoreKind, shape: &Shape) -> Vec<u8> {
    match kind {
        StoreKind::Claude => testgen::claude(shape),
        StoreKind::Codex => testgen::codex(shape),
        // Gemini's store is tested over its own rows (`gemini.rs`).
        StoreKind::Gemini => unreachable!("no generated Gemini stores"),
        StoreKind::Opencode => unreachable!("no generated opencode stores"),
    }
}

const KINDS: [StoreKind; 2] = [StoreKind::Claude, StoreKind::Codex];

#[test]
fn pages_hold_exactly_their_turns() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let p = write(dir.path(), "s.jsonl", &gen(kind, &Shape::new(173, 7)));
        let idx = TurnIndex::build(kind, &p).unwrap();
        assert_eq!(idx.turn_count(), 173);
        for per in [50, 7, 1] {
            let l = limits(per);
            let pages = all_pages(&p, &idx, &l);
            assert_eq!(pages.len(), 173usize.div_ceil(per));
            for (n, text) in pages.iter().enumerate() {
                let want: Vec<usize> = (n * per..((n + 1) * per).min(173)).collect();
                assert_eq!(prompts(text), want, "{kind:?} per={per} page={n}");
            }
            let err = render_page(&p, &idx, pages.len(), &l).unwrap_err();
            assert!(matches!(err, PageError::NotFound { .. }));
            assert_eq!(err.errno(), libc::ENOENT);
        }
    }
}

#[test]
fn nothing_injected_is_shown_and_text_appears_once() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        for seed in 1..6 {
            let mut data = gen(kind, &Shape::new(60, seed));
            if seed % 2 == 0 {
                data = testgen::sort_keys(&data);
            }
            let p = write(dir.path(), "s.jsonl", &data);
            let text = whole(kind, &p);
            assert!(!text.contains("INJECTED"), "{kind:?} seed {seed}");
            assert!(!text.contains("SIDECHAIN"), "{kind:?} seed {seed}");
            for k in 0..60 {
                let reply = match kind {
                    StoreKind::Claude => format!("reply #{k} done"),
                    StoreKind::Codex => format!("reply #{k} text"),
                    StoreKind::Gemini | StoreKind::Opencode => unreachable!(),
                };
                assert_eq!(
                    text.matches(&format!("{reply}\n")).count(),
                    1,
                    "{kind:?} {reply}"
                );
                assert_eq!(text.matches(&format!("prompt #{k}\n")).count(), 1);
            }
        }
    }
    // The split reply is one message: its parts follow one another.
    let p = write(dir.path(), "c.jsonl", &testgen::claude(&Shape::new(3, 1)));
    let text = whole(StoreKind::Claude, &p);
    assert!(text.contains("✻ thinking… think 0\n● reply #0 start\n"));
    let idx = TurnIndex::build(StoreKind::Claude, &p).unwrap();
    assert_eq!(idx.title().as_deref(), Some("Renamed"));
}

#[test]
fn caps_cut_output_not_turns() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let p = write(dir.path(), "s.jsonl", &gen(kind, &Shape::new(120, 3)));
        let idx = TurnIndex::build(kind, &p).unwrap();
        let caps = [
            (
                Limits {
                    max_lines: 40,
                    ..limits(50)
                },
                "lines cut: page over 40 lines",
            ),
            (
                Limits {
                    max_messages: 25,
                    ..limits(50)
                },
                "messages cut: page over 25 messages",
            ),
            (
                Limits {
                    tail_bytes: 1500,
                    ..limits(50)
                },
                "bytes cut: page over 1500 bytes",
            ),
        ];
        for (l, marker) in caps {
            for n in 0..page_count(&idx, 50) {
                let text = page(&p, &idx, n, &l);
                let first = text.lines().next().unwrap();
                assert!(
                    first.starts_with("[… ") && first.contains(marker),
                    "{kind:?} {l:?} page {n}: {first}"
                );
                let want: Vec<usize> = (n * 50..((n + 1) * 50).min(120)).collect();
                let got = prompts(&text);
                // What is left is the end of this page's turns, nothing else.
                assert!(!got.is_empty() && want.ends_with(&got), "{kind:?} {got:?}");
                if l.tail_bytes == 1500 {
                    assert!(text.len() <= 1500);
                }
                if l.max_lines == 40 {
                    assert_eq!(text.lines().count(), 41);
                }
            }
        }
        // A page under the caps has no marker.
        let text = page(&p, &idx, 0, &limits(50));
        assert!(!text.starts_with("[…"));
    }
}

fn append(p: &Path, data: &[u8]) {
    OpenOptions::new()
        .append(true)
        .open(p)
        .unwrap()
        .write_all(data)
        .unwrap();
}

#[test]
fn appending_extends_like_a_fresh_index() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let data = gen(kind, &Shape::new(90, 11));
        let p = write(dir.path(), "s.jsonl", &data[..data.len() / 3]);
        let mut idx = TurnIndex::build(kind, &p).unwrap();
        let before = idx.turn_count();
        append(&p, &data[data.len() / 3..]);
        assert!(
            matches!(idx.refresh(&p).unwrap(), Refresh::Grew { new_turns } if new_turns == 90 - before)
        );
        assert_eq!(idx, TurnIndex::build(kind, &p).unwrap());
        assert_eq!(idx.refresh(&p).unwrap(), Refresh::Unchanged);
    }
}

#[test]
fn truncation_and_replacement_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let data = gen(kind, &Shape::new(40, 5));
        let p = write(dir.path(), "s.jsonl", &data);
        let mut idx = TurnIndex::build(kind, &p).unwrap();
        // Truncated.
        fs::write(&p, &data[..data.len() / 2]).unwrap();
        assert_eq!(idx.refresh(&p).unwrap(), Refresh::Rebuilt);
        assert_eq!(idx, TurnIndex::build(kind, &p).unwrap());
        // Replaced by another file (rename over it).
        let other = gen(kind, &Shape::new(45, 6));
        let tmp = write(dir.path(), "tmp", &other);
        fs::rename(&tmp, &p).unwrap();
        assert_eq!(idx.refresh(&p).unwrap(), Refresh::Rebuilt);
        assert_eq!(idx.turn_count(), 45);
        assert_eq!(idx, TurnIndex::build(kind, &p).unwrap());
        // Rewritten in place, same inode, longer, same first bytes.
        let longer = gen(kind, &Shape::new(50, 9));
        let f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        drop(f);
        fs::write(&p, &longer).unwrap();
        assert_eq!(idx.refresh(&p).unwrap(), Refresh::Rebuilt);
        assert_eq!(idx.turn_count(), 50);
        // A page of an index that missed the replacement is refused, not wrong.
        let stale = TurnIndex::build(kind, &p).unwrap();
        let tmp = write(dir.path(), "tmp", &gen(kind, &Shape::new(2, 1)));
        fs::rename(&tmp, &p).unwrap();
        let err = render_page(&p, &stale, 0, &limits(50)).unwrap_err();
        assert!(matches!(err, PageError::Stale), "{err}");
    }
}

#[test]
fn empty_and_turnless_stores_have_one_page() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let p = write(dir.path(), "s.jsonl", b"");
        let idx = TurnIndex::build(kind, &p).unwrap();
        assert_eq!(page_count(&idx, 50), 1);
        assert_eq!(page(&p, &idx, 0, &limits(50)), "");
        assert_eq!(
            render_page(&p, &idx, 1, &limits(50)).unwrap_err().errno(),
            libc::ENOENT
        );
        let p = write(dir.path(), "s.jsonl", &gen(kind, &Shape::new(0, 1)));
        let idx = TurnIndex::build(kind, &p).unwrap();
        assert_eq!(idx.turn_count(), 0);
        assert!(!page(&p, &idx, 0, &limits(50)).contains("INJECTED"));
    }
}

#[test]
fn half_written_last_line_waits_for_its_end() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let mut shape = Shape::new(12, 2);
        shape.half_line = true;
        let data = gen(kind, &shape);
        let p = write(dir.path(), "s.jsonl", &data);
        let mut idx = TurnIndex::build(kind, &p).unwrap();
        assert_eq!(idx.turn_count(), 12);
        assert!(idx.scanned_to() < data.len() as u64);
        let text = page(&p, &idx, 0, &limits(50));
        assert!(!text.contains("HALF"));
        let rest: &[u8] = match kind {
            StoreKind::Claude => b"\"}}\n",
            StoreKind::Codex => b"\"}]}}\n",
            StoreKind::Gemini | StoreKind::Opencode => unreachable!(),
        };
        append(&p, rest);
        assert_eq!(idx.refresh(&p).unwrap(), Refresh::Grew { new_turns: 1 });
        assert_eq!(idx, TurnIndex::build(kind, &p).unwrap());
        assert!(page(&p, &idx, 0, &limits(50)).contains("> prompt #HALF\n"));
    }
}

#[test]
fn a_line_of_40_mib() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let mut shape = Shape::new(4, 4);
        shape.huge_line = Some(40 << 20);
        let data = gen(kind, &shape);
        assert!(data.len() > 40 << 20);
        let p = write(dir.path(), "s.jsonl", &data);
        let idx = TurnIndex::build(kind, &p).unwrap();
        assert_eq!(idx.turn_count(), 4);
        // Appended in pieces smaller than the line: the same index.
        let p2 = write(dir.path(), "t.jsonl", b"");
        let mut grown = TurnIndex::build(kind, &p2).unwrap();
        for piece in data.chunks(3 << 20) {
            append(&p2, piece);
            grown.refresh(&p2).unwrap();
        }
        assert_eq!(grown.turn_offsets(), idx.turn_offsets());
        assert_eq!(grown.info().cwd, idx.info().cwd);
        assert_eq!(grown.info().last_timestamp, idx.info().last_timestamp);
        assert_eq!(grown.title(), idx.title());
        let text = page(&p, &idx, 0, &limits(50));
        assert_eq!(prompts(&text), vec![0, 1, 2, 3]);
        assert!(text.contains("  ⎿  huge"));
        assert!(text.len() < 64 << 10, "output is cut to a few lines");
    }
}

#[test]
fn lines_over_the_cap_are_read_past_not_kept() {
    use std::io::BufReader;
    let data = b"a\nxxxxxxxxxx\nb\nyyyyyy\npartial";
    // A reader smaller than the long line, so it spans reads.
    let mut r = BufReader::with_capacity(4, &data[..]);
    let mut line = Vec::new();
    let mut got = Vec::new();
    loop {
        let next = scan::read_line_capped(&mut r, &mut line, 5).unwrap();
        got.push((next, String::from_utf8(line.clone()).unwrap()));
        if next == NextLine::End {
            break;
        }
    }
    assert_eq!(
        got,
        vec![
            (NextLine::Line, "a".to_string()),
            (NextLine::TooLong(10), String::new()),
            (NextLine::Line, "b".to_string()),
            (NextLine::TooLong(6), String::new()),
            (NextLine::End, String::new()),
        ]
    );
}

#[test]
fn a_line_over_the_cap_is_skipped_and_its_page_says_so() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        // A tool's output over the cap, in turn 1.
        let mut shape = Shape::new(4, 4);
        shape.huge_line = Some(200_000);
        let p = write(dir.path(), "s.jsonl", &gen(kind, &shape));
        let mut idx = TurnIndex::new(kind).with_max_line(100_000);
        idx.refresh(&p).unwrap();
        assert_eq!(idx.turn_count(), 4);
        let text = page(&p, &idx, 0, &limits(50));
        assert_eq!(prompts(&text), vec![0, 1, 2, 3]);
        assert!(!text.contains("huge"), "{kind:?}");
        assert!(
            text.contains("skipped") && text.contains("over the 100000 a line may have"),
            "{kind:?}: {text}"
        );
        // A prompt over the cap: neither a turn nor read into memory, but
        // said where it was.
        let mut data = gen(kind, &Shape::new(3, 5));
        let (head, tail): (&[u8], &[u8]) = match kind {
            StoreKind::Claude => (
                b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"prompt #",
                b"\"}}\n",
            ),
            StoreKind::Codex => (
                b"{\"timestamp\":\"2026\",\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"prompt #",
                b"\"}]}}\n",
            ),
            StoreKind::Gemini | StoreKind::Opencode => unreachable!(),
        };
        data.extend_from_slice(head);
        data.extend_from_slice(b"7 ");
        data.extend(std::iter::repeat_n(b'x', 200_000));
        data.extend_from_slice(tail);
        let p = write(dir.path(), "s.jsonl", &data);
        assert_eq!(TurnIndex::build(kind, &p).unwrap().turn_count(), 4);
        let mut idx = TurnIndex::new(kind).with_max_line(100_000);
        idx.refresh(&p).unwrap();
        assert_eq!(idx.turn_count(), 3, "{kind:?}");
        assert_eq!(idx.scanned_to(), data.len() as u64);
        let text = page(&p, &idx, 0, &limits(50));
        assert_eq!(prompts(&text), vec![0, 1, 2]);
        assert!(text.contains("skipped"), "{kind:?}: {text}");
    }
}

#[test]
fn compressed_stores_are_refused_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "rollout.jsonl.zst", b"\x28\xb5\x2f\xfd");
    let err = TurnIndex::build(StoreKind::Codex, &p).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn index_built_in_pieces_equals_index_built_at_once(
        seed in any::<u64>(),
        turns in 0usize..30,
        codex in any::<bool>(),
        half in any::<bool>(),
        sorted in any::<bool>(),
        pieces in proptest::collection::vec(1usize..20_000, 1..16),
    ) {
        let kind = if codex { StoreKind::Codex } else { StoreKind::Claude };
        let mut shape = Shape::new(turns, seed);
        shape.half_line = half;
        let mut data = gen(kind, &shape);
        if sorted {
            data = testgen::sort_keys(&data);
        }
        let dir = tempfile::tempdir().unwrap();
        let whole = write(dir.path(), "whole.jsonl", &data);
        let fresh = TurnIndex::build(kind, &whole).unwrap();
        let p = write(dir.path(), "grown.jsonl", b"");
        let mut grown = TurnIndex::build(kind, &p).unwrap();
        let mut at = 0;
        let mut i = 0;
        while at < data.len() {
            let n = pieces[i % pieces.len()].min(data.len() - at);
            append(&p, &data[at..at + n]);
            at += n;
            i += 1;
            grown.refresh(&p).unwrap();
        }
        prop_assert_eq!(grown.turn_offsets(), fresh.turn_offsets());
        prop_assert_eq!(grown.scanned_to(), fresh.scanned_to());
        // Both name the same session ("grown" and "whole" differ only in the
        // Claude session id, which is the file name).
        let mut info = grown.info().clone();
        info.session_id = fresh.info().session_id.clone();
        prop_assert_eq!(&info, fresh.info());
        prop_assert_eq!(
            page(&p, &grown, page_count(&grown, 5) - 1, &limits(5)),
            page(&whole, &fresh, page_count(&fresh, 5) - 1, &limits(5))
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn index_scanned_in_two_parts_equals_one(
        seed in any::<u64>(),
        turns in 0usize..40,
        codex in any::<bool>(),
        half in any::<bool>(),
        sorted in any::<bool>(),
        huge in any::<bool>(),
        split_min in 1u64..8192,
        cut in 0.0f64..1.0,
    ) {
        let kind = if codex { StoreKind::Codex } else { StoreKind::Claude };
        let mut shape = Shape::new(turns, seed);
        shape.half_line = half;
        if huge {
            shape.huge_line = Some(100_000);
        }
        let mut data = gen(kind, &shape);
        if sorted {
            data = testgen::sort_keys(&data);
        }
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "s.jsonl", &data);
        let mut one = TurnIndex::new(kind);
        one.refresh_with(&p, u64::MAX).unwrap();
        let mut two = TurnIndex::new(kind);
        two.refresh_with(&p, split_min).unwrap();
        prop_assert_eq!(&two, &one);
        // Grown in two steps, each split.
        let dir2 = tempfile::tempdir().unwrap();
        let cut = (data.len() as f64 * cut) as usize;
        let q = write(dir2.path(), "s.jsonl", &data[..cut]);
        let mut grown = TurnIndex::new(kind);
        grown.refresh_with(&q, split_min).unwrap();
        append(&q, &data[cut..]);
        grown.refresh_with(&q, split_min).unwrap();
        prop_assert_eq!(grown.turn_offsets(), one.turn_offsets());
        prop_assert_eq!(grown.scanned_to(), one.scanned_to());
        prop_assert_eq!(grown.info(), one.info());
        prop_assert_eq!(grown.sidechain_mode(), one.sidechain_mode());
        prop_assert_eq!(grown.last_turn_end(), one.last_turn_end());
        for t in 0..one.turn_count() {
            prop_assert_eq!(grown.turn_range(t, 1), one.turn_range(t, 1));
        }
    }
}

/// Index throughput on a 256 MiB store: `cargo test --release --lib
/// transcript::tests::index_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn index_speed() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let unit = gen(kind, &Shape::new(400, 3));
        let p = dir.path().join("big.jsonl");
        let mut f = fs::File::create(&p).unwrap();
        let mut size = 0;
        while size < 256 << 20 {
            f.write_all(&unit).unwrap();
            size += unit.len();
        }
        drop(f);
        let _ = fs::read(&p).unwrap();
        let t = std::time::Instant::now();
        let idx = TurnIndex::build(kind, &p).unwrap();
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{kind:?}: {} MiB, {} turns, {:.2} GB/s",
            size >> 20,
            idx.turn_count(),
            size as f64 / secs / 1e9
        );
    }
}

/// Index throughput on a real store repeated to 256 MiB.
#[test]
#[ignore]
fn index_speed_real() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, rel) in [
        (StoreKind::Claude, "claude/projects/-home-USER-spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"),
        (StoreKind::Codex, "codex/sessions/2026/05/11/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"),
    ] {
        let unit = fs::read(fixture(rel)).unwrap();
        let p = dir.path().join("big.jsonl");
        let mut f = fs::File::create(&p).unwrap();
        let mut size = 0;
        while size < 256 << 20 {
            f.write_all(&unit).unwrap();
            size += unit.len();
        }
        drop(f);
        let _ = fs::read(&p).unwrap();
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let idx = TurnIndex::build(kind, &p).unwrap();
            let secs = t.elapsed().as_secs_f64();
            println!(
                "{kind:?} (real): {} MiB, {} turns, {:.2} GB/s",
                size >> 20,
                idx.turn_count(),
                size as f64 / secs / 1e9
            );
        }
    }
}

#[test]
fn a_turn_end_row_is_indexed_with_its_time() {
    let prompt = |t: &str| {
        format!(
            r#"{{"type":"user","message":{{"role":"user","content":"{t}"}},"timestamp":"2026-12-01T10:00:00.000Z"}}"#
        )
    };
    let answer = r#"{"type":"assistant","message":{"id":"m","role":"assistant","content":[{"type":"text","text":"done"}]}}"#;
    let end = |subtype: &str, side: bool, at: &str| {
        format!(
            r#"{{"type":"system","subtype":"{subtype}","isSidechain":{side},"timestamp":"{at}"}}"#
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "s.jsonl",
        format!("{}\n", prompt("one")).as_bytes(),
    );
    let mut idx = TurnIndex::new(StoreKind::Claude);
    idx.refresh(&p).unwrap();
    assert_eq!(idx.last_turn_end(), None);
    // The answer, then the rows written once the Stop hooks ran.
    append(
        &p,
        format!(
            "{answer}\n{}\n{}\n",
            end("stop_hook_summary", false, "2026-12-01T10:00:01.500Z"),
            end("turn_duration", false, "2026-12-01T10:00:01.505Z")
        )
        .as_bytes(),
    );
    idx.refresh(&p).unwrap();
    let ms = "2026-12-01T10:00:01.505Z"
        .parse::<jiff::Timestamp>()
        .unwrap()
        .as_millisecond() as u64;
    assert_eq!(idx.last_turn_end(), Some((1, ms)));
    // A subagent's end inline in the main file is not the turn's; a new
    // prompt leaves the end behind it.
    append(
        &p,
        format!(
            "{}\n{}\n",
            end("turn_duration", true, "2026-12-01T10:00:09.000Z"),
            prompt("two")
        )
        .as_bytes(),
    );
    idx.refresh(&p).unwrap();
    assert_eq!(idx.turn_count(), 2);
    assert_eq!(idx.last_turn_end(), Some((1, ms)));
    // A page shows nothing of these rows.
    let page = page(&p, &idx, 0, &limits(1));
    assert!(page.contains("done"), "{page}");
    // Codex: its `task_complete` event ends every generated turn.
    let q = write(
        dir.path(),
        "r.jsonl",
        &gen(StoreKind::Codex, &Shape::new(3, 1)),
    );
    let codex = TurnIndex::build(StoreKind::Codex, &q).unwrap();
    assert_eq!(codex.turn_count(), 3);
    assert_eq!(codex.last_turn_end().map(|(turns, _)| turns), Some(3));
    assert!(
        !page.contains("turn_duration") && !page.contains("stop_hook"),
        "{page}"
    );
}

#[test]
fn odd_bytes_and_a_huge_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = Vec::new();
    data.extend_from_slice(
        b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"caf\xe9 prompt #0\"}}\n",
    );
    data.extend_from_slice(b"\n   \n");
    data.extend_from_slice(
        b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"prompt #1 ",
    );
    data.extend_from_slice("x".repeat(12 << 20).as_bytes());
    data.extend_from_slice(b"\"}}\r\n");
    data.extend_from_slice(b"not json at all\n");
    data.extend_from_slice(b"{\"type\":\"assistant\",\"message\":{\"id\":\"a\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"reply #1\"}]}}\n");
    let p = write(dir.path(), "s.jsonl", &data);
    let idx = TurnIndex::build(StoreKind::Claude, &p).unwrap();
    assert_eq!(idx.turn_count(), 2);
    let l = Limits {
        tail_bytes: 1 << 20,
        ..limits(1)
    };
    let text = page(&p, &idx, 0, &l);
    assert_eq!(text, "> caf\u{fffd} prompt #0\n", "lossy, not dropped");
    let text = page(&p, &idx, 1, &l);
    assert!(
        text.starts_with("[… "),
        "the huge prompt is cut to its tail"
    );
    assert!(text.len() <= 1 << 20);
    assert!(text.ends_with("xxx\n● reply #1\n"));
}

/// A store of two lengths: `data` cut to a line end near `at` (a truncation
/// point), with what a read racing a truncation and regrowth returns there:
/// zeros where the dropped pages were.
fn hole_after_first_read(p: &Path, data: &[u8], at: usize) {
    let cut = data[..at].iter().rposition(|b| *b == b'\n').unwrap() as u64 + 1;
    let (p, len) = (p.to_path_buf(), data.len() as u64);
    index::AFTER_READ.with(|h| {
        *h.borrow_mut() = Some(Box::new(move || {
            let f = OpenOptions::new().write(true).open(&p).unwrap();
            f.set_len(cut).unwrap();
            f.set_len(len).unwrap();
        }))
    });
}

#[test]
fn a_page_read_across_a_truncation_is_stale_not_stitched() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        // Bigger than one read (1 MiB), so the file changes between reads.
        let data = gen(kind, &Shape::new(1000, 3));
        assert!(data.len() > 2 << 20, "{}", data.len());
        let p = write(dir.path(), "s.jsonl", &data);
        let idx = TurnIndex::build(kind, &p).unwrap();
        let l = limits(2000);
        let whole = page(&p, &idx, 0, &l);
        hole_after_first_read(&p, &data, 3 << 19);
        let err = render_page(&p, &idx, 0, &l).unwrap_err();
        assert!(matches!(err, PageError::Stale), "{err}");
        // Zeros that stay (a crash can leave them) are only unreadable lines.
        let mut idx = idx;
        assert_eq!(idx.refresh(&p).unwrap(), Refresh::Rebuilt);
        let holed = page(&p, &idx, 0, &l);
        assert!(holed.len() < whole.len());
        // Grown back as it was: the same page again.
        fs::write(&p, &data).unwrap();
        idx.refresh(&p).unwrap();
        assert_eq!(page(&p, &idx, 0, &l), whole);
    }
}

#[test]
fn a_scan_across_a_truncation_is_stale_not_stitched() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let data = gen(kind, &Shape::new(1000, 3));
        let p = write(dir.path(), "s.jsonl", &data);
        hole_after_first_read(&p, &data, 3 << 19);
        let err = TurnIndex::build(kind, &p).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESTALE), "{err}");
        fs::write(&p, &data).unwrap();
        assert_eq!(TurnIndex::build(kind, &p).unwrap().turn_count(), 1000);
    }
}

#[test]
fn a_rewrite_in_place_to_the_same_length_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let first = gen(kind, &Shape::new(120, 3));
        // A prompt changed in the middle: same length, same ends.
        let mut second = first.clone();
        for (at, _) in first
            .windows(11)
            .enumerate()
            .filter(|(_, w)| *w == b"prompt #60\"")
        {
            second[at] = b'P';
        }
        assert!(first != second);
        let p = write(dir.path(), "s.jsonl", &first);
        let mut idx = TurnIndex::build(kind, &p).unwrap();
        let l = limits(200);
        let before = page(&p, &idx, 0, &l);
        fs::write(&p, &second).unwrap();
        // Timestamps can be coarse: make the write visible whatever the clock.
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1))
            .unwrap();
        assert_eq!(idx.refresh(&p).unwrap(), Refresh::Rebuilt);
        let after = page(&p, &idx, 0, &l);
        assert!(before != after && after.contains("> Prompt #"));
        assert_eq!(idx.refresh(&p).unwrap(), Refresh::Unchanged);
    }
}

/// Grows a store from nothing in the given pieces and checks, after each,
/// that every page seen before is a start of the same page now: a reader
/// following a page (`tail -f`) only ever sees lines added at its end.
fn assert_pages_only_grow_at_their_end(kind: StoreKind, data: &[u8], pieces: &[usize], per: usize) {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "grown.jsonl", b"");
    let mut idx = TurnIndex::build(kind, &p).unwrap();
    let l = limits(per);
    let mut seen: Vec<String> = Vec::new();
    let (mut at, mut i) = (0, 0);
    while at < data.len() {
        let n = pieces[i % pieces.len()].clamp(1, data.len() - at);
        append(&p, &data[at..at + n]);
        at += n;
        i += 1;
        idx.refresh(&p).unwrap();
        let pages = page_count(&idx, per);
        // Pages before the one that was last are done; only those two can change.
        for n in seen.len().saturating_sub(1)..pages {
            let now = page(&p, &idx, n, &l);
            if let Some(before) = seen.get(n) {
                assert!(
                    now.starts_with(before.as_str()),
                    "page {n} changed before its end after {at} bytes:\nbefore:\n{before}\nnow:\n{now}"
                );
                seen[n] = now;
            } else {
                seen.push(now);
            }
        }
    }
}

/// Whole rows, as the agents append them.
fn rows(data: &[u8]) -> Vec<usize> {
    data.split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::len)
        .collect()
}

#[test]
fn real_stores_written_row_by_row_only_grow_at_the_end_of_a_page() {
    let mut files = Vec::new();
    jsonl_files(&fixtures(), &mut files);
    for p in &files {
        let mut data = fs::read(p).unwrap();
        // Each step renders the growing turn again: the first 300 KB of the
        // largest store keep the test quick and hold every kind of row.
        let mut rows = rows(&data);
        let mut kept = 0;
        rows.retain(|n| {
            kept += n;
            kept <= 300 << 10
        });
        data.truncate(rows.iter().sum());
        assert_pages_only_grow_at_their_end(kind_of(p), &data, &rows, 3);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn a_page_only_grows_at_its_end_while_its_store_grows(
        seed in any::<u64>(),
        turns in 1usize..12,
        codex in any::<bool>(),
        by_rows in any::<bool>(),
        pieces in proptest::collection::vec(1usize..3_000, 1..8),
    ) {
        let kind = if codex { StoreKind::Codex } else { StoreKind::Claude };
        let data = gen(kind, &Shape::new(turns, seed));
        let pieces = if by_rows { rows(&data) } else { pieces };
        assert_pages_only_grow_at_their_end(kind, &data, &pieces, 4);
    }
}
