//! Property tests over everything that parses what a user or an agent wrote:
//! arbitrary bytes and structured mutations of valid inputs, through the
//! crate's public API. Each property asserts no panic, no hang (a watchdog
//! aborts a case that runs past `CASE_LIMIT`), and the invariants the code
//! promises.
//!
//! `SESSIONFS_FUZZ_CASES` sets the number of cases per property (10,000 by
//! default); a long run: `SESSIONFS_FUZZ_CASES=1000000 cargo test --release
//! --test fuzz`.

mod common;

use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{json, Value};
use sessionfs::core::organize::meta_edit;
use sessionfs::core::records::slots::{self, SlotStore};
use sessionfs::core::Core;
use sessionfs::key::SessionKey;
use sessionfs::runtime::dtach;
use sessionfs::transcript::testgen::{self, Shape};
use sessionfs::transcript::{page_count, render_page, Limits, PageError, StoreKind, TurnIndex};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Cases per property, unless `SESSIONFS_FUZZ_CASES` says otherwise.
const DEFAULT_CASES: u32 = 10_000;

/// No single case may take longer: a parser that loops forever is a hang,
/// and the watchdog ends the whole run with the case that hung.
const CASE_LIMIT: Duration = Duration::from_secs(20);

fn config() -> ProptestConfig {
    let cases = std::env::var("SESSIONFS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_CASES);
    ProptestConfig {
        cases,
        // Shrinking a failure should not take longer than finding it.
        max_shrink_time: 60_000,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// The watchdog.

type Running = Vec<(std::thread::ThreadId, &'static str, Instant, String)>;

fn running() -> &'static Mutex<Running> {
    static RUNNING: OnceLock<Mutex<Running>> = OnceLock::new();
    RUNNING.get_or_init(|| {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_millis(200));
            let list = running().lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, name, since, input)) =
                list.iter().find(|(_, _, since, _)| since.elapsed() > CASE_LIMIT)
            {
                eprintln!(
                    "fuzz: a case of {name} has run for {:?} (limit {CASE_LIMIT:?}): a hang. Input: {input}",
                    since.elapsed()
                );
                std::process::abort();
            }
        });
        Mutex::new(Vec::new())
    })
}

/// One running case; the watchdog forgets it when it is dropped.
struct Case;

impl Case {
    /// `input` is what the report shows if the case hangs (cut to 2,000 bytes).
    fn start(name: &'static str, input: impl FnOnce() -> String) -> Case {
        let mut text = input();
        if text.len() > 2000 {
            let mut cut = 2000;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        let me = std::thread::current().id();
        let mut list = running().lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|(t, ..)| *t != me);
        list.push((me, name, Instant::now(), text));
        Case
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        let me = std::thread::current().id();
        running()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(t, ..)| *t != me);
    }
}

/// Scratch space in memory: the stores and state the cases write are
/// rewritten thousands of times.
fn scratch() -> tempfile::TempDir {
    let base = Path::new("/dev/shm");
    let builder = {
        let mut b = tempfile::Builder::new();
        b.prefix("sfs-fuzz");
        b
    };
    if base.is_dir() {
        builder.tempdir_in(base).unwrap()
    } else {
        builder.tempdir().unwrap()
    }
}

// ---------------------------------------------------------------------------
// Generators shared by several properties.

/// Words the parsers give meaning to, so random input reaches deep paths.
const WORDS: &[&str] = &[
    "",
    "user",
    "assistant",
    "system",
    "summary",
    "custom-title",
    "ai-title",
    "file-history-snapshot",
    "compact_boundary",
    "local_command",
    "text",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "tool_result",
    "image",
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "web_search_call",
    "session_meta",
    "turn_context",
    "response_item",
    "event_msg",
    "user_message",
    "agent_message",
    "context_compacted",
    "turn_aborted",
    "compacted",
    "input_text",
    "output_text",
    "developer",
    "<environment_context>",
    "# AGENTS.md instructions for x",
    "<command-name>/x</command-name>",
    "<command-args>a b</command-args>",
    "<local-command-stdout>out</local-command-stdout>",
    "[Request interrupted by user]",
    "Bash",
    "toolu_1",
    "call_1",
    "2026-01-02T03:04:05.678Z",
    "/home/me/src",
    "\u{1b}[31mred\u{1b}[0m",
    "line one\nline two",
    "é",
    "\u{2028}",
];

/// Keys the parsers read, and a few they do not.
const KEYS: &[&str] = &[
    "type",
    "message",
    "role",
    "content",
    "text",
    "thinking",
    "id",
    "name",
    "input",
    "tool_use_id",
    "is_error",
    "isSidechain",
    "isMeta",
    "isCompactSummary",
    "subtype",
    "summary",
    "customTitle",
    "aiTitle",
    "cwd",
    "timestamp",
    "payload",
    "arguments",
    "call_id",
    "output",
    "action",
    "instructions",
    "metadata",
    "exit_code",
    "success",
    "uuid",
    "sessionId",
    "x",
];

/// Deterministic choices (xorshift): generating with proptest's own
/// combinators costs milliseconds a case in a debug build; a seed costs
/// nothing, and a failing seed replays exactly.
struct Gen(u64);

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn word(&mut self, words: &[&'static str]) -> &'static str {
        words[self.below(words.len())]
    }
}

/// Characters that trouble parsers and terminals alike.
const ODD_CHARS: &[char] = &[
    '\0',
    '\u{1}',
    '\u{7}',
    '\u{8}',
    '\t',
    '\n',
    '\r',
    '\u{b}',
    '\u{c}',
    '\u{1b}',
    '\u{7f}',
    '\u{85}',
    '\u{a0}',
    '\u{ad}',
    '\u{200b}',
    '\u{200f}',
    '\u{2028}',
    '\u{2029}',
    '\u{feff}',
    '\u{fffd}',
    '\u{ffff}',
    '\u{10ffff}',
    'é',
    'ß',
    '中',
    '😀',
    '"',
    '\\',
    '/',
    '<',
    '>',
    '[',
    '{',
    ' ',
    'a',
    'Z',
    '0',
    '9',
    ':',
    '-',
    '.',
    '_',
];

/// Text: mostly meaningful words, sometimes anything at all.
fn gen_text(g: &mut Gen) -> String {
    match g.below(8) {
        0..=3 => g.pick(WORDS).to_string(),
        4 | 5 => (0..g.below(24)).map(|_| *g.pick(ODD_CHARS)).collect(),
        6 => (0..g.below(16))
            .filter_map(|_| char::from_u32(g.next() as u32 % 0x11_0000))
            .collect(),
        _ => (0..1 + g.below(3)).map(|_| *g.pick(WORDS)).collect(),
    }
}

/// One JSON value as text, keys in the order chosen, duplicates allowed.
fn gen_json(g: &mut Gen, depth: usize, out: &mut String) {
    let kind = if depth == 0 { g.below(6) } else { g.below(9) };
    match kind {
        0 => out.push_str(g.word(&["null", "true", "false"])),
        1 => out.push_str(&(g.next() as i64 >> g.below(64)).to_string()),
        2 => out.push_str(g.word(&[
            "0",
            "-0",
            "1.5",
            "1e999",
            "-1e-999",
            "18446744073709551616",
            "1E2",
        ])),
        3..=5 => out.push_str(&Value::from(gen_text(g)).to_string()),
        6 => {
            out.push('[');
            for i in 0..g.below(4) {
                if i > 0 {
                    out.push(',');
                }
                gen_json(g, depth - 1, out);
            }
            out.push(']');
        }
        _ => gen_object(g, depth - 1, 6, out),
    }
}

fn gen_object(g: &mut Gen, depth: usize, keys: usize, out: &mut String) {
    out.push('{');
    for i in 0..g.below(keys + 1) {
        if i > 0 {
            out.push(',');
        }
        let key = if g.chance(95) {
            g.pick(KEYS).to_string()
        } else {
            gen_text(g)
        };
        out.push_str(&Value::from(key).to_string());
        out.push(':');
        gen_json(g, depth, out);
    }
    out.push('}');
}

/// One line of a store (without its end): mostly an object with the keys
/// rows have, sometimes anything.
fn gen_line(g: &mut Gen) -> Vec<u8> {
    match g.below(20) {
        0 => (0..g.below(64)).map(|_| g.next() as u8).collect(),
        1 => Vec::new(),
        2 => b"   \t".to_vec(),
        3 | 4 => {
            let mut s = String::new();
            gen_json(g, 4, &mut s);
            s.into_bytes()
        }
        _ => {
            let mut s = String::new();
            gen_object(g, 4, 7, &mut s);
            s.into_bytes()
        }
    }
}

/// A store of `lines` random lines, maybe with an unfinished last one.
fn gen_store(seed: u64, lines: usize, half: bool, crlf: bool) -> Vec<u8> {
    let mut g = Gen::new(seed);
    let mut out = Vec::new();
    for _ in 0..lines {
        out.extend_from_slice(&gen_line(&mut g));
        out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
    }
    if half && out.len() > 2 {
        out.pop();
    }
    out
}

/// A change to a store's bytes, the way a crash, a bad writer or a disk
/// would leave it, or a change of one JSON value to another type.
#[derive(Debug, Clone)]
enum Mutation {
    FlipBit { at: usize, bit: u8 },
    Insert { at: usize, bytes: Vec<u8> },
    Delete { at: usize, len: usize },
    CutLine { line: usize, keep: usize },
    DupLine { line: usize },
    SwapLines { a: usize, b: usize },
    JoinLines { line: usize },
    Value { line: usize, node: usize, seed: u64 },
    InsertLine { line: usize, seed: u64 },
    HugeLine { line: usize, len: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        2 => (at, 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        2 => (at, prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        2 => (at, 1usize..64).prop_map(|(at, len)| Mutation::Delete { at, len }),
        2 => (at, any::<usize>()).prop_map(|(line, keep)| Mutation::CutLine { line, keep }),
        1 => at.prop_map(|line| Mutation::DupLine { line }),
        1 => (at, any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
        1 => at.prop_map(|line| Mutation::JoinLines { line }),
        6 => (at, any::<usize>(), any::<u64>())
            .prop_map(|(line, node, seed)| Mutation::Value { line, node, seed }),
        2 => (at, any::<u64>()).prop_map(|(line, seed)| Mutation::InsertLine { line, seed }),
        1 => (at, 1usize..50_000).prop_map(|(line, len)| Mutation::HugeLine { line, len }),
    ]
}

fn split_lines(data: &[u8]) -> Vec<Vec<u8>> {
    data.split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// Replaces the `node`-th value (in pre-order) of a parsed line.
fn replace_node(v: &mut Value, node: &mut usize, with: &Value) -> bool {
    if *node == 0 {
        *v = with.clone();
        return true;
    }
    *node -= 1;
    match v {
        Value::Array(items) => items.iter_mut().any(|i| replace_node(i, node, with)),
        Value::Object(map) => map.values_mut().any(|i| replace_node(i, node, with)),
        _ => false,
    }
}

fn count_nodes(v: &Value) -> usize {
    1 + match v {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(map) => map.values().map(count_nodes).sum(),
        _ => 0,
    }
}

fn apply(data: &mut Vec<u8>, m: &Mutation) {
    let len = data.len();
    let mut lines = split_lines(data);
    let pick = |i: usize, n: usize| if n == 0 { 0 } else { i % n };
    match m {
        Mutation::FlipBit { at, bit } if len > 0 => data[at % len] ^= 1 << bit,
        Mutation::Insert { at, bytes } => {
            let at = pick(*at, len + 1);
            data.splice(at..at, bytes.iter().copied());
        }
        Mutation::Delete { at, len: n } if len > 0 => {
            let at = at % len;
            data.drain(at..(at + n).min(len));
        }
        Mutation::CutLine { line, keep } if !lines.is_empty() => {
            let i = pick(*line, lines.len());
            let l = &mut lines[i];
            let keep = keep % (l.len() + 1);
            l.truncate(keep);
            *data = lines.concat();
        }
        Mutation::DupLine { line } if !lines.is_empty() => {
            let i = pick(*line, lines.len());
            let copy = lines[i].clone();
            lines.insert(i, copy);
            *data = lines.concat();
        }
        Mutation::SwapLines { a, b } if !lines.is_empty() => {
            let (a, b) = (pick(*a, lines.len()), pick(*b, lines.len()));
            lines.swap(a, b);
            *data = lines.concat();
        }
        Mutation::JoinLines { line } if !lines.is_empty() => {
            let i = pick(*line, lines.len());
            if lines[i].last() == Some(&b'\n') {
                lines[i].pop();
            }
            *data = lines.concat();
        }
        Mutation::Value { line, node, seed } if !lines.is_empty() => {
            let i = pick(*line, lines.len());
            let body = lines[i].strip_suffix(b"\n").unwrap_or(&lines[i]);
            let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
                return;
            };
            let mut with = String::new();
            gen_json(&mut Gen::new(*seed), 3, &mut with);
            let Ok(with) = serde_json::from_str::<Value>(&with) else {
                return;
            };
            let mut n = node % count_nodes(&v);
            replace_node(&mut v, &mut n, &with);
            let mut text = serde_json::to_vec(&v).unwrap();
            text.push(b'\n');
            lines[i] = text;
            *data = lines.concat();
        }
        Mutation::InsertLine { line, seed } => {
            let i = pick(*line, lines.len() + 1);
            let mut t = gen_line(&mut Gen::new(*seed));
            t.push(b'\n');
            lines.insert(i, t);
            *data = lines.concat();
        }
        Mutation::HugeLine { line, len: n } => {
            let i = pick(*line, lines.len() + 1);
            let row =
                json!({"type": "user", "message": {"role": "user", "content": "x".repeat(*n)}});
            let mut t = serde_json::to_vec(&row).unwrap();
            t.push(b'\n');
            lines.insert(i, t);
            *data = lines.concat();
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------
// The transcript: row parsers, turn index, pages.

fn kind_of(codex: bool) -> StoreKind {
    if codex {
        StoreKind::Codex
    } else {
        StoreKind::Claude
    }
}

fn write_file(path: &Path, data: &[u8]) {
    std::fs::write(path, data).unwrap();
}

fn append(path: &Path, data: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(data)
        .unwrap();
}

fn index_of(kind: StoreKind, path: &Path) -> TurnIndex {
    let mut idx = TurnIndex::new(kind);
    idx.refresh(path).unwrap();
    idx
}

/// Every page of the store, each checked against the caps.
fn pages(path: &Path, idx: &TurnIndex, limits: &Limits) -> Vec<Vec<u8>> {
    let n = page_count(idx, limits.page_turns);
    assert!(n >= 1, "a store always has page 0");
    let mut out = Vec::new();
    for p in 0..n {
        let page =
            render_page(path, idx, p, limits).unwrap_or_else(|e| panic!("page {p} of {n}: {e}"));
        let text = std::str::from_utf8(&page).expect("a page is UTF-8");
        // Up to three marker lines may come on top of the caps.
        assert!(
            page.len() <= limits.tail_bytes + 300,
            "page {p} is {} bytes, over the cap of {}",
            page.len(),
            limits.tail_bytes
        );
        assert!(
            text.lines().count() <= limits.max_lines + 3,
            "page {p} has {} lines, over the cap of {}",
            text.lines().count(),
            limits.max_lines
        );
        out.push(page);
    }
    match render_page(path, idx, n, limits) {
        Err(PageError::NotFound { .. }) => {}
        other => panic!("page {n} past the end: {other:?}"),
    }
    out
}

/// What the index promises about its offsets.
fn check_index(idx: &TurnIndex, data: &[u8]) {
    let offsets = idx.turn_offsets();
    let scanned = idx.scanned_to();
    assert!(scanned as usize <= data.len(), "scanned past the end");
    assert!(
        scanned == 0 || data[scanned as usize - 1] == b'\n',
        "scanned_to {scanned} is not at a line end"
    );
    assert_eq!(offsets.len(), idx.turn_count());
    for w in offsets.windows(2) {
        assert!(w[0] < w[1], "turn offsets not increasing: {offsets:?}");
    }
    for &o in offsets {
        assert!(o < scanned, "turn at {o} is not below scanned_to {scanned}");
        assert!(
            o == 0 || data[o as usize - 1] == b'\n',
            "turn at {o} is not at a line start"
        );
    }
}

fn limits_strategy() -> impl Strategy<Value = Limits> {
    (1usize..5, 1usize..40, 1usize..12, 48usize..4096).prop_map(
        |(page_turns, max_lines, max_messages, tail_bytes)| Limits {
            page_turns,
            max_lines,
            max_messages,
            tail_bytes,
        },
    )
}

/// Generated stores to mutate, made once: generating one costs more than
/// checking it.
fn base_stores() -> &'static [(bool, Vec<u8>)] {
    static BASES: OnceLock<Vec<(bool, Vec<u8>)>> = OnceLock::new();
    BASES.get_or_init(|| {
        (0..256u64)
            .map(|i| {
                let codex = i % 2 == 1;
                let mut shape = Shape::new((i / 2 % 5) as usize, i);
                shape.half_line = i % 3 == 0;
                let data = if codex {
                    testgen::codex(&shape)
                } else {
                    testgen::claude(&shape)
                };
                let data = if i % 5 == 0 {
                    testgen::sort_keys(&data)
                } else {
                    data
                };
                (codex, data)
            })
            .collect()
    })
}

/// A generated store of either kind, changed by a few mutations.
fn mutated_store() -> impl Strategy<Value = (usize, Vec<Mutation>)> {
    (
        0..base_stores().len(),
        prop::collection::vec(mutation(), 0..4),
    )
}

/// The whole check of one store: index invariants, pages, then the same
/// bytes appended in pieces index and render exactly the same, then a
/// truncation and a replacement are noticed.
fn check_store(
    dir: &Path,
    kind: StoreKind,
    data: &[u8],
    pieces: &[usize],
    cut: usize,
    limits: &Limits,
) {
    // The same file name in two directories: a Claude session id is the stem.
    for sub in ["a", "b"] {
        let _ = std::fs::create_dir(dir.join(sub));
    }
    let whole = dir.join("a/s.jsonl");
    write_file(&whole, data);
    let fresh = index_of(kind, &whole);
    check_index(&fresh, data);
    let fresh_pages = pages(&whole, &fresh, limits);

    let grown_path = dir.join("b/s.jsonl");
    write_file(&grown_path, b"");
    let mut grown = index_of(kind, &grown_path);
    let mut at = 0;
    let mut i = 0;
    while at < data.len() {
        let n = pieces[i % pieces.len()].clamp(1, data.len() - at);
        append(&grown_path, &data[at..at + n]);
        at += n;
        i += 1;
        grown.refresh(&grown_path).unwrap();
        check_index(&grown, &data[..at]);
    }
    assert_eq!(grown.turn_offsets(), fresh.turn_offsets());
    assert_eq!(grown.scanned_to(), fresh.scanned_to());
    assert_eq!(grown.info(), fresh.info());
    assert_eq!(grown.title(), fresh.title());
    assert_eq!(pages(&grown_path, &grown, limits), fresh_pages);

    // Truncated to a prefix: indexed as that prefix.
    let cut = cut % (data.len() + 1);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&grown_path)
        .unwrap()
        .set_len(cut as u64)
        .unwrap();
    grown.refresh(&grown_path).unwrap();
    let prefix = dir.join("a/s.jsonl");
    write_file(&prefix, &data[..cut]);
    let short = index_of(kind, &prefix);
    check_index(&grown, &data[..cut]);
    assert_eq!(grown.turn_offsets(), short.turn_offsets());
    assert_eq!(grown.scanned_to(), short.scanned_to());

    // Replaced by another file (a rename over it): indexed afresh.
    std::fs::rename(&whole, &grown_path).unwrap();
    grown.refresh(&grown_path).unwrap();
    assert_eq!(grown.turn_offsets(), short.turn_offsets());
    assert_eq!(grown.scanned_to(), short.scanned_to());
}

/// Random rows of either store kind: the parsers neither panic nor hang,
/// the index keeps its promises and every page renders within its caps.
#[test]
fn stores_of_random_rows() {
    let dir = scratch();
    let shape = (any::<u64>(), 0usize..24, any::<bool>(), any::<bool>());
    let pieces = prop::collection::vec(1usize..4096, 1..6);
    run(
        "stores_of_random_rows",
        (
            any::<bool>(),
            shape,
            pieces,
            any::<usize>(),
            limits_strategy(),
        ),
        |(codex, (seed, lines, half, crlf), pieces, cut, limits)| {
            let data = gen_store(seed, lines, half, crlf);
            check_store(dir.path(), kind_of(codex), &data, &pieces, cut, &limits);
            Ok(())
        },
    );
}

/// Realistic stores with a few things broken in them.
#[test]
fn mutated_generated_stores() {
    let dir = scratch();
    let pieces = prop::collection::vec(1usize..8192, 1..6);
    run(
        "mutated_generated_stores",
        (mutated_store(), pieces, any::<usize>(), limits_strategy()),
        |((base, muts), pieces, cut, limits)| {
            let (codex, data) = &base_stores()[base];
            let mut data = data.clone();
            for m in &muts {
                apply(&mut data, m);
            }
            check_store(dir.path(), kind_of(*codex), &data, &pieces, cut, &limits);
            Ok(())
        },
    );
}

/// Arbitrary bytes, no structure at all.
#[test]
fn stores_of_arbitrary_bytes() {
    let dir = scratch();
    run(
        "stores_of_arbitrary_bytes",
        (any::<bool>(), any::<u64>(), 0usize..2048, limits_strategy()),
        |(codex, seed, len, limits)| {
            let mut g = Gen::new(seed);
            let data: Vec<u8> = (0..len).map(|_| g.next() as u8).collect();
            check_store(dir.path(), kind_of(codex), &data, &[977], len / 2, &limits);
            Ok(())
        },
    );
}

/// Runs `test` on `cases` from `strategy` with the file's config; for
/// properties that keep state (a store, a daemon core) across cases.
fn run<S: Strategy>(
    name: &'static str,
    strategy: S,
    mut test: impl FnMut(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    // No regression file: these inputs are seeds or small values, and the
    // failure message shows the one to replay.
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        failure_persistence: None,
        ..config()
    });
    let test = std::cell::RefCell::new(&mut test);
    if let Err(e) = runner.run(&strategy, |v| {
        let _case = Case::start(name, || format!("{v:?}"));
        (test.borrow_mut())(v)
    }) {
        panic!("{name}: {e}");
    }
}

// ---------------------------------------------------------------------------
// Names: session keys, worlds, slots, hosted session ids.

const NAME_CHARS: &[u8] = b"abcXYZ019._-";

/// A name near the edges of what is allowed: lengths around the limits,
/// odd first characters, a stray odd character somewhere.
fn gen_name(g: &mut Gen) -> String {
    let len = *g.pick(&[0usize, 1, 2, 8, 31, 32, 33, 36, 127, 128, 129, 255, 256]);
    let mut s: String = (0..len).map(|_| *g.pick(NAME_CHARS) as char).collect();
    if g.chance(50) && !s.is_empty() {
        s.replace_range(..1, "a");
    }
    if g.chance(30) {
        let at = (0..=s.len())
            .filter(|i| s.is_char_boundary(*i))
            .nth(g.below(s.len() + 1))
            .unwrap_or(0);
        s.insert(at, *g.pick(ODD_CHARS));
    }
    if g.chance(5) {
        s = g
            .pick(&[".", "..", "/", "a/b", "../x", "a:b", " a", "A"])
            .to_string();
    }
    s
}

fn gen_key_text(g: &mut Gen) -> String {
    match g.below(10) {
        0 => gen_text(g),
        1 => gen_name(g),
        2 => format!("{}:{}:{}", gen_name(g), gen_name(g), gen_name(g)),
        _ => format!("{}:{}", gen_name(g), gen_name(g)),
    }
}

fn text_input() -> impl Strategy<Value = (u64, bool)> {
    (any::<u64>(), any::<bool>())
}

/// `[A-Za-z0-9][A-Za-z0-9._-]{0,max-1}`, written out plainly.
fn plain_name(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c))
}

/// A name that is safe as one path component.
fn safe_component(s: &str) -> bool {
    !s.is_empty() && s.len() <= 255 && !s.contains(['/', '\0']) && s != "." && s != ".."
}

#[test]
fn session_keys() {
    run(
        "session_keys",
        (text_input(), any::<String>()),
        |((seed, structured), raw)| {
            let text = if structured {
                gen_key_text(&mut Gen::new(seed))
            } else {
                raw
            };
            let expected = text
                .split_once(':')
                .is_some_and(|(e, i)| plain_name(e, 32) && plain_name(i, 128));
            match SessionKey::parse(&text) {
                Ok(key) => {
                    prop_assert!(expected, "{text:?} was accepted");
                    prop_assert_eq!(key.to_string(), text.clone());
                    prop_assert_eq!(SessionKey::parse(&key.to_string()).unwrap(), key.clone());
                    prop_assert_eq!(
                        SessionKey::new(key.engine(), key.id()).unwrap(),
                        key.clone()
                    );
                    prop_assert!(safe_component(&key.to_string()));
                    prop_assert!(safe_component(key.id()) && safe_component(key.engine()));
                }
                Err(e) => {
                    prop_assert!(!expected, "{text:?} was refused: {e}");
                    prop_assert_eq!(e.errno, libc::EINVAL);
                    prop_assert!(!e.message.is_empty());
                }
            }
            Ok(())
        },
    );
}

fn gen_guid(g: &mut Gen) -> String {
    let mut s: String = (0..36)
        .map(|i| {
            if [8, 13, 18, 23].contains(&i) {
                '-'
            } else {
                *g.pick(&"0123456789abcdefABCDEF".chars().collect::<Vec<_>>())
            }
        })
        .collect();
    match g.below(8) {
        0 => {
            let at = g.below(36);
            s.replace_range(at..at + 1, &g.pick(ODD_CHARS).to_string());
        }
        1 => s = format!("{{{s}}}"),
        2 => s = s.replace('-', ""),
        3 => {
            s.pop();
        }
        4 => s.push(*g.pick(ODD_CHARS)),
        5 => s = format!("urn:uuid:{s}"),
        _ => {}
    }
    s
}

fn is_guid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

fn gen_slot(g: &mut Gen) -> String {
    match g.below(6) {
        0 => gen_text(g),
        1 => g
            .pick(&[
                "0",
                "1",
                "01",
                "-1",
                "+1",
                "4294967295",
                "4294967296",
                "99999999999999999999",
                " 1",
                "1 ",
                "١",
            ])
            .to_string(),
        _ => (g.next() >> g.below(64)).to_string(),
    }
}

#[test]
fn slot_and_world_names() {
    run(
        "slot_and_world_names",
        (text_input(), any::<String>()),
        |((seed, structured), raw)| {
            let mut g = Gen::new(seed);
            let (world, slot, id) = if structured {
                (gen_guid(&mut g), gen_slot(&mut g), gen_name(&mut g))
            } else {
                (raw.clone(), raw.clone(), raw)
            };
            match slots::parse_world(&world) {
                Ok(w) => {
                    prop_assert!(is_guid(&world), "{world:?} was accepted");
                    prop_assert_eq!(&w, &world.to_ascii_lowercase());
                    prop_assert_eq!(slots::parse_world(&w).unwrap(), w.clone());
                    prop_assert!(safe_component(&w));
                }
                Err(e) => {
                    prop_assert!(!is_guid(&world), "{world:?} was refused");
                    prop_assert_eq!(e.errno, libc::EINVAL);
                }
            }
            let expected_slot = !slot.is_empty()
                && slot.bytes().all(|b| b.is_ascii_digit())
                && !slot.starts_with('0')
                && slot.parse::<u32>().is_ok();
            match slots::parse_slot(&slot) {
                Ok(n) => {
                    prop_assert!(expected_slot, "{slot:?} was accepted");
                    prop_assert!(n >= 1);
                    prop_assert_eq!(n.to_string(), slot);
                }
                Err(e) => {
                    prop_assert!(!expected_slot, "{slot:?} was refused");
                    prop_assert_eq!(e.errno, libc::EINVAL);
                }
            }
            match slots::parse_session_id(&id) {
                Ok(got) => {
                    prop_assert!(plain_name(&id, 128), "{id:?} was accepted");
                    prop_assert_eq!(got, id.as_str());
                    let file = format!("{got}.jsonl");
                    prop_assert!(safe_component(&file));
                }
                Err(e) => {
                    prop_assert!(!plain_name(&id, 128), "{id:?} was refused");
                    prop_assert_eq!(e.errno, libc::EINVAL);
                }
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------
// Slot records and hosted-run entries.

const RECORD_KEYS: &[&str] = &[
    "sessionId",
    "name",
    "workspace",
    "harness",
    "lastSpawn",
    "x",
    "SessionId",
];

/// A JSON object mostly shaped like a record or an entry, as bytes.
fn gen_record(g: &mut Gen, keys: &[&str]) -> Vec<u8> {
    let mut s = String::new();
    match g.below(12) {
        0 => return (0..g.below(64)).map(|_| g.next() as u8).collect(),
        1 => gen_json(g, 3, &mut s),
        _ => {
            s.push('{');
            for i in 0..g.below(6) {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&Value::from(*g.pick(keys)).to_string());
                s.push(':');
                if g.chance(70) {
                    s.push_str(&Value::from(gen_text(g)).to_string());
                } else {
                    gen_json(g, 2, &mut s);
                }
            }
            s.push('}');
        }
    }
    let mut bytes = s.into_bytes();
    match g.below(16) {
        0 => bytes.extend_from_slice(b" trailing"),
        1 => bytes.splice(0..0, "\u{feff}".bytes()).for_each(drop),
        2 => bytes.extend_from_slice(b"\n"),
        3 if !bytes.is_empty() => {
            let at = g.below(bytes.len());
            bytes.truncate(at);
        }
        4 => bytes.push(0xff),
        _ => {}
    }
    bytes
}

#[test]
fn slot_records() {
    const W: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
    let dir = scratch();
    let store = SlotStore::open(dir.path());
    let world_file = dir.path().join(format!("slots/{W}.json"));
    run(
        "slot_records",
        (any::<u64>(), 1u32..4, any::<bool>()),
        |(seed, slot, big)| {
            let mut g = Gen::new(seed);
            let mut bytes = gen_record(&mut g, RECORD_KEYS);
            if big && g.chance(3) {
                // Over the 1 MiB cap.
                bytes = format!("{{\"sessionId\":\"{}\"}}", "x".repeat(1 << 20)).into_bytes();
            }
            let before = store.get(W, slot).unwrap();
            let file_before = std::fs::read(&world_file).ok();
            match store.put(W, slot, &bytes) {
                Ok(rec) => {
                    let v: Value =
                        serde_json::from_slice(&bytes).expect("an accepted record is JSON");
                    let field =
                        |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    prop_assert!(!rec.session_id.is_empty());
                    prop_assert_eq!(&rec.session_id, &field("sessionId"));
                    prop_assert_eq!(&rec.name, &field("name"));
                    prop_assert_eq!(&rec.workspace, &field("workspace"));
                    prop_assert_eq!(&rec.harness, &field("harness"));
                    prop_assert!(rec.last_spawn.parse::<jiff::Timestamp>().is_ok());
                    prop_assert_eq!(store.get(W, slot).unwrap(), Some(rec.clone()));
                    // What the slot file reads back parses as the same record.
                    let line = rec.to_json_line();
                    let again: sessionfs::core::records::slots::SlotRecord =
                        serde_json::from_slice(&line).unwrap();
                    prop_assert_eq!(again, rec);
                }
                Err(e) => {
                    prop_assert!(
                        [libc::EINVAL, libc::EFBIG].contains(&e.errno),
                        "unexpected errno: {e}"
                    );
                    prop_assert!(e.message.len() < 4096, "a {}-byte reason", e.message.len());
                    prop_assert_eq!(store.get(W, slot).unwrap(), before);
                    prop_assert_eq!(std::fs::read(&world_file).ok(), file_before);
                }
            }
            if g.chance(10) {
                store.forget(W, slot).unwrap();
                prop_assert_eq!(store.get(W, slot).unwrap(), None);
            }
            Ok(())
        },
    );
}

#[test]
fn hosted_entries() {
    let dir = scratch();
    // Small caps, so both are reached often.
    let store = SlotStore::with_limits(dir.path(), 2048, 64 << 10);
    let ids = ["run-a", "run-b", "run-c"];
    run(
        "hosted_entries",
        (any::<u64>(), 0usize..5),
        |(seed, which)| {
            let mut g = Gen::new(seed);
            let line = gen_record(&mut g, &["type", "text", "ts_ms", "x", "sessionId"]);
            let id = match which {
                0..=2 => Some(ids[which].to_string()),
                3 => Some(gen_name(&mut g)),
                _ => None,
            };
            let path = id
                .as_deref()
                .filter(|id| slots::parse_session_id(id).is_ok())
                .map(|id| store.transcript_path(id));
            let before = path
                .as_ref()
                .and_then(|p| std::fs::read(p).ok())
                .unwrap_or_default();
            let result = store.append_entry(id.as_deref(), &line);
            let after = path
                .as_ref()
                .and_then(|p| std::fs::read(p).ok())
                .unwrap_or_default();
            match result {
                Ok(()) => {
                    let mut want: Value =
                        serde_json::from_slice(&line).expect("an accepted entry is JSON");
                    prop_assert!(want.get("type").is_some_and(Value::is_string));
                    let run = store.agent_run().expect("the entry is the run's state");
                    want["ts_ms"] = run["ts_ms"].clone();
                    prop_assert!(run["ts_ms"].is_u64());
                    if let Some(p) = &path {
                        prop_assert!(after.starts_with(&before));
                        let added = &after[before.len()..];
                        prop_assert_eq!(added.iter().filter(|b| **b == b'\n').count(), 1);
                        prop_assert_eq!(added.last(), Some(&b'\n'));
                        prop_assert!(added.len() <= 2048);
                        let got: Value = serde_json::from_slice(added).unwrap();
                        prop_assert_eq!(&got, &want);
                        prop_assert_eq!(
                            store.transcript_len(id.as_deref().unwrap()),
                            after.len() as u64,
                            "{}",
                            p.display()
                        );
                    } else {
                        prop_assert!(id.is_none());
                        prop_assert_eq!(&run, &want);
                    }
                }
                Err(e) => {
                    prop_assert!(
                        [libc::EINVAL, libc::EFBIG].contains(&e.errno),
                        "unexpected errno: {e}"
                    );
                    prop_assert_eq!(after, before, "a refused entry changed the transcript");
                }
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------
// Metadata: the validators, and meta.json edits through a daemon's core.

#[test]
fn metadata_fields() {
    run(
        "metadata_fields",
        (text_input(), any::<String>()),
        |((seed, structured), raw)| {
            let mut g = Gen::new(seed);
            let text = if structured {
                let mut t = gen_text(&mut g);
                if g.chance(10) {
                    t = t.repeat(1 + g.below(600));
                }
                if g.chance(20) {
                    t = format!("  {t}\t");
                }
                t
            } else {
                raw
            };
            let one_line = |s: &str| {
                !s.chars()
                    .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
            };
            for (max, result) in [
                (meta_edit::MAX_TITLE_BYTES, meta_edit::validate_title(&text)),
                (
                    meta_edit::MAX_PROJECT_BYTES,
                    meta_edit::validate_project(&text),
                ),
            ] {
                match result {
                    Ok(Some(v)) => {
                        prop_assert!(
                            one_line(&v) && v.len() <= max && v == v.trim() && !v.is_empty()
                        );
                        prop_assert_eq!(v, text.trim());
                    }
                    Ok(None) => prop_assert!(text.trim().is_empty()),
                    Err(e) => prop_assert_eq!(e.errno, libc::EINVAL),
                }
            }
            if let Ok(Some(p)) = meta_edit::validate_project(&text) {
                prop_assert!(safe_component(&p));
                prop_assert_eq!(meta_edit::validate_project(&p).unwrap(), Some(p.clone()));
            }
            match meta_edit::validate_workspace(&text) {
                Ok(Some(w)) => {
                    prop_assert!(w.starts_with('/') && !w.contains(['\0', '\n', '\r']));
                    prop_assert!(w.len() <= meta_edit::MAX_WORKSPACE_BYTES);
                    prop_assert_eq!(w, text.clone());
                }
                Ok(None) => prop_assert!(text.is_empty()),
                Err(e) => prop_assert_eq!(e.errno, libc::EINVAL),
            }
            match meta_edit::parse_flag(text.as_bytes()) {
                Ok(f) => {
                    let t = text.trim().to_ascii_lowercase();
                    prop_assert_eq!(f, ["1", "true", "yes"].contains(&t.as_str()));
                    prop_assert!(["1", "true", "yes", "0", "false", "no"].contains(&t.as_str()));
                }
                Err(e) => prop_assert_eq!(e.errno, libc::EINVAL),
            }
            match meta_edit::parse_line_file(text.as_bytes()) {
                Ok(line) => {
                    prop_assert!(!line.contains(['\n', '\r']));
                    let endings = [line.clone(), format!("{line}\n"), format!("{line}\r\n")];
                    prop_assert!(endings.contains(&text));
                }
                Err(e) => prop_assert_eq!(e.errno, libc::EINVAL),
            }
            Ok(())
        },
    );
}

const META_FIELDS: &[&str] = &[
    "title",
    "project",
    "favourite",
    "archived",
    "workspace",
    "key",
    "engine",
    "id",
    "created",
    "last_activity",
    "state",
    "pid",
    "x",
    "Title",
];

/// A changed `meta.json`, the way an editor or a script might save it.
fn gen_meta_edit(g: &mut Gen, served: &Value) -> Vec<u8> {
    let mut doc = served.as_object().cloned().unwrap_or_default();
    for _ in 0..g.below(3) {
        let field = g.pick(META_FIELDS).to_string();
        match g.below(10) {
            0 => {
                doc.remove(&field);
            }
            1..=3 => {
                doc.insert(field, Value::from(gen_text(g)));
            }
            4 => {
                doc.insert(field, Value::from(g.chance(50)));
            }
            5 => {
                doc.insert(field, Value::Null);
            }
            6 => {
                doc.insert(field, Value::from(format!("/tmp/{}", gen_text(g))));
            }
            _ => {
                let mut s = String::new();
                gen_json(g, 2, &mut s);
                if let Ok(v) = serde_json::from_str(&s) {
                    doc.insert(field, v);
                }
            }
        }
    }
    let doc = Value::Object(doc);
    let mut bytes = if g.chance(50) {
        serde_json::to_vec_pretty(&doc).unwrap()
    } else {
        serde_json::to_vec(&doc).unwrap()
    };
    match g.below(24) {
        0 => bytes.splice(0..0, "\u{feff}".bytes()).for_each(drop),
        1 => bytes.push(b'x'),
        2 if !bytes.is_empty() => {
            let at = g.below(bytes.len());
            bytes.truncate(at);
        }
        3 => {
            // A key given twice.
            let dup = format!("{{\"title\":{},", Value::from(gen_text(g)));
            bytes.splice(0..1, dup.bytes()).for_each(drop);
        }
        4 => bytes.push(0xfe),
        5 => bytes = (0..g.below(64)).map(|_| g.next() as u8).collect(),
        _ => {}
    }
    bytes
}

/// A daemon's core over scratch directories, for calls that need no mount.
struct TestCore {
    dir: tempfile::TempDir,
    core: Arc<Core>,
}

impl TestCore {
    fn new() -> TestCore {
        let dir = scratch();
        let config = common::scratch_config(dir.path());
        let core = Core::new(config, &dir.path().join("mnt")).unwrap();
        TestCore { dir, core }
    }

    fn sidecar(&self) -> Vec<u8> {
        common::sidecar_bytes(&self.dir.path().join("state/sessionfs"))
    }

    fn status(&self, key: &SessionKey) -> Value {
        serde_json::from_slice(&self.core.status(key).unwrap()).unwrap()
    }
}

#[test]
fn meta_json_edits() {
    let t = TestCore::new();
    let key = t.core.create("shell:meta").unwrap();
    run("meta_json_edits", any::<u64>(), |seed| {
        let mut g = Gen::new(seed);
        let seen = t.core.meta_value(&key).unwrap();
        // What was served parses back as no change at all.
        let served = t.core.meta_json(&key).unwrap();
        prop_assert!(t
            .core
            .check_meta_edit(&key, &seen, &served)
            .unwrap()
            .is_empty());
        let bytes = gen_meta_edit(&mut g, &seen);
        let expected = meta_edit::parse_meta_edit(&seen, &seen, &bytes, false);
        let sidecar_before = t.sidecar();
        match t.core.edit_meta(&key, &seen, &bytes) {
            Ok(()) => {
                let change = expected.expect("the core accepted what the validator refuses");
                let now = t.core.meta_value(&key).unwrap();
                let text = |v: &Value, f: &str| v[f].as_str().map(str::to_string);
                if let Some(title) = change.title {
                    prop_assert_eq!(text(&now, "title"), title);
                }
                if let Some(project) = change.project {
                    prop_assert_eq!(text(&now, "project"), project);
                }
                if let Some(f) = change.favourite {
                    prop_assert_eq!(now["favourite"].as_bool(), Some(f));
                }
                if let Some(a) = change.archived {
                    prop_assert_eq!(now["archived"].as_bool(), Some(a));
                }
                if let Some(Some(w)) = change.workspace {
                    prop_assert_eq!(text(&now, "workspace"), Some(w));
                }
                for f in ["title", "project"] {
                    if let Some(v) = text(&now, f) {
                        prop_assert!(meta_edit::validate_title(&v).unwrap() == Some(v.clone()));
                    }
                }
                // The new document round-trips too.
                let again = t.core.meta_json(&key).unwrap();
                prop_assert!(t
                    .core
                    .check_meta_edit(&key, &now, &again)
                    .unwrap()
                    .is_empty());
            }
            Err(e) => {
                let why = expected.expect_err("the core refused what the validator accepts");
                prop_assert_eq!(e.errno, why.errno);
                prop_assert_eq!(
                    t.sidecar(),
                    sidecar_before,
                    "a refused edit changed the sidecar"
                );
                prop_assert_eq!(&t.status(&key)["error"], &json!(e.message));
            }
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------
// The `ctl` files.

const SIZES: &[&str] = &[
    "80x24", "2x2", "1x1", "1000x250", "1000x251", "250x1000", "65536x1", "x", "0x0", "-1x5",
    "+80x+24", "80X24", "80x", "80x24x1", "٨٠x24",
];

const CUTOFFS: &[&str] = &[
    "30d",
    "12h",
    "45m",
    "0d",
    "é",
    "1é",
    "d",
    "18446744073709551615d",
    "2026-01-01T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "-1d",
    "1.5h",
];

const CTL_WORDS: &[&str] = &[
    "open",
    "stop",
    "resize",
    "redraw",
    "new",
    "archive-older",
    "shell",
    "claude",
    "codex",
    "hosted",
    "nope",
    "workspace=/tmp",
    "workspace=rel",
    "workspace=",
    "workspace=/a\u{0}b",
    "title=",
    "title=hello world",
    "title=\u{1b}[31mred",
    "title=\u{7}bell",
    "80x24",
    "1x1",
    "30d",
    "é",
    "1é",
];

const SPACES: &[&str] = &[
    " ", "  ", "\t", "\u{a0}", "\u{3000}", "\r", "\u{b}", "\u{85}",
];

/// A command in the shape of a real one, with its parts chosen at random.
fn gen_command(g: &mut Gen) -> Vec<String> {
    let pick = |g: &mut Gen, from: &[&str]| -> String {
        if g.chance(85) {
            g.pick(from).to_string()
        } else {
            gen_text(g)
        }
    };
    let mut words = vec![pick(
        g,
        &["new", "archive-older", "resize", "open", "stop", "redraw"],
    )];
    match words[0].as_str() {
        "new" => {
            words.push(pick(
                g,
                &["shell", "claude", "codex", "hosted", "nope", "Shell"],
            ));
            if g.chance(50) {
                let dir = pick(
                    g,
                    &["/tmp", "/", "rel", "", "/a\u{0}b", "/nonexistent", "~/x"],
                );
                words.push(format!("workspace={dir}"));
            }
            if g.chance(60) {
                let mut title = gen_text(g);
                if g.chance(10) {
                    title = title.repeat(1 + g.below(1100));
                }
                words.push(format!("title={title}"));
            }
        }
        "archive-older" => words.push(pick(g, CUTOFFS)),
        "resize" => words.push(pick(g, SIZES)),
        _ => {}
    }
    if g.chance(10) {
        words.push(pick(g, CTL_WORDS));
    }
    words
}

fn gen_ctl(g: &mut Gen) -> String {
    if g.chance(10) {
        return gen_text(g);
    }
    if g.chance(60) {
        let mut s = String::new();
        for (i, w) in gen_command(g).iter().enumerate() {
            if i > 0 {
                s.push_str(g.word(SPACES));
            }
            s.push_str(w);
        }
        return s;
    }
    let mut s = String::new();
    if g.chance(10) {
        s.push_str(g.word(SPACES));
    }
    for i in 0..1 + g.below(4) {
        if i > 0 {
            s.push_str(g.word(SPACES));
        }
        if g.chance(85) {
            s.push_str(g.word(CTL_WORDS));
        } else {
            s.push_str(&gen_text(g));
        }
    }
    if g.chance(5) {
        s.push_str(&"é".repeat(g.below(1200)));
    }
    if g.chance(10) {
        s.push_str(g.word(SPACES));
    }
    s
}

/// What `resize` takes, written out plainly.
fn size_ok(arg: &str) -> Option<(u16, u16)> {
    let (c, r) = arg.split_once(['x', 'X'])?;
    let (c, r): (u16, u16) = (c.parse().ok()?, r.parse().ok()?);
    ((2..=1000).contains(&c) && (2..=1000).contains(&r) && u32::from(c) * u32::from(r) <= 250_000)
        .then_some((c, r))
}

#[test]
fn session_ctl_commands() {
    let t = TestCore::new();
    // Archived, so `open` is refused rather than starting a shell.
    let key = t.core.create("shell:ctl").unwrap();
    t.core.archive(&key).unwrap();
    run("session_ctl_commands", any::<u64>(), |seed| {
        let line = gen_ctl(&mut Gen::new(seed));
        let words: Vec<&str> = line.split_whitespace().collect();
        let size_before = t.status(&key)["size"].clone();
        match t.core.session_ctl(&key, &line) {
            Ok(()) => match words.as_slice() {
                ["stop"] => {}
                ["resize", arg] => {
                    let (c, r) = size_ok(arg).expect("a size outside the bounds was taken");
                    prop_assert_eq!(&t.status(&key)["size"], &json!(format!("{c}x{r}")));
                }
                _ => prop_assert!(false, "{line:?} was accepted"),
            },
            Err(e) => {
                prop_assert!(
                    [libc::EINVAL, libc::EPERM, libc::ENOTCONN].contains(&e.errno),
                    "{line:?}: {e}"
                );
                if let ["resize", arg] = words.as_slice() {
                    prop_assert!(size_ok(arg).is_none(), "{line:?}: {e}");
                }
                let status = t.status(&key);
                prop_assert_eq!(status["error"].as_str(), Some(e.message.as_str()));
                prop_assert_eq!(&status["size"], &size_before);
                prop_assert!(e.message.len() < 8192, "a {}-byte reason", e.message.len());
            }
        }
        Ok(())
    });
}

#[test]
fn root_ctl_commands() {
    let mut t = TestCore::new();
    run("root_ctl_commands", any::<u64>(), |seed| {
        // Sessions pile up: start afresh now and then, as each change
        // rewrites the whole sidecar.
        if t.core.keys().len() > 40 {
            t = TestCore::new();
        }
        let line = gen_ctl(&mut Gen::new(seed));
        let words: Vec<&str> = line.split_whitespace().collect();
        let keys_before = t.core.keys();
        let sidecar_before = t.sidecar();
        match t.core.root_ctl(&line) {
            Ok(()) => match words.first() {
                Some(&"new") => {
                    let keys = t.core.keys();
                    let added: Vec<_> = keys.iter().filter(|k| !keys_before.contains(k)).collect();
                    prop_assert_eq!(added.len(), 1, "{:?} made {:?}", line, added);
                    let key = added[0];
                    prop_assert_eq!(key.engine(), words[1]);
                    prop_assert!(
                        key.engine() != "hosted",
                        "a hosted session without a transcript"
                    );
                    let meta = t.core.meta_value(key).unwrap();
                    if let Some(title) = meta["title"].as_str() {
                        prop_assert_eq!(
                            meta_edit::validate_title(title).ok(),
                            Some(Some(title.to_string())),
                            "{:?} took a title a meta.json edit refuses",
                            line
                        );
                    }
                    let ws = meta["workspace"].as_str().unwrap_or_default();
                    prop_assert!(
                        meta_edit::validate_workspace(ws).is_ok(),
                        "{line:?} took workspace {ws:?}"
                    );
                }
                Some(&"archive-older") => {
                    prop_assert_eq!(words.len(), 2);
                    prop_assert_eq!(t.core.keys().len(), keys_before.len());
                }
                _ => prop_assert!(false, "{line:?} was accepted"),
            },
            Err(e) => {
                let hosted = words.first() == Some(&"new") && words.get(1) == Some(&"hosted");
                // A hosted session is refused with EPERM, unless something
                // else in the line is wrong first.
                prop_assert!(
                    e.errno == libc::EINVAL || (hosted && e.errno == libc::EPERM),
                    "{:?}: {}",
                    line,
                    e
                );
                prop_assert!(e.message.len() < 8192, "a {}-byte reason", e.message.len());
                prop_assert_eq!(t.core.keys(), keys_before);
                if words.first() != Some(&"archive-older") {
                    prop_assert_eq!(t.sidecar(), sidecar_before);
                }
            }
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------
// The dtach packet encoder, alone and through a client to a stand-in master.

#[test]
fn dtach_packets() {
    run(
        "dtach_packets",
        (
            prop::collection::vec(any::<u8>(), 0..300),
            any::<u8>(),
            any::<u8>(),
            any::<[u8; 8]>(),
            any::<u16>(),
            any::<u16>(),
        ),
        |(input, kind, len, payload, cols, rows)| {
            let p = dtach::packet(kind, len, payload);
            prop_assert_eq!(p.len(), 10);
            prop_assert_eq!((p[0], p[1]), (kind, len));
            prop_assert_eq!(&p[2..], &payload[..]);
            let w = dtach::winsize(cols, rows);
            prop_assert_eq!(u16::from_ne_bytes([w[0], w[1]]), rows);
            prop_assert_eq!(u16::from_ne_bytes([w[2], w[3]]), cols);
            prop_assert_eq!(&w[4..], &[0u8; 4][..]);
            let packets: Vec<[u8; 10]> = dtach::push_packets(&input).collect();
            // Full packets, but for ends moved so as not to cut an escape
            // sequence or a character.
            prop_assert!(packets.len() >= input.len().div_ceil(dtach::PUSH_MAX));
            prop_assert!(packets.len() <= input.len());
            let mut back = Vec::new();
            for p in &packets {
                let n = p[1] as usize;
                prop_assert_eq!(p[0], 0, "a PUSH");
                prop_assert!((1..=dtach::PUSH_MAX).contains(&n));
                prop_assert!(p[2 + n..].iter().all(|b| *b == 0), "padding is zero");
                back.extend_from_slice(&p[2..2 + n]);
            }
            prop_assert_eq!(&back, &input);
            // A CSI sequence (ESC [ ... final byte) that begins inside a
            // packet other than at its start ends in it.
            let mut at = 0;
            for p in &packets[..packets.len().saturating_sub(1)] {
                let n = p[1] as usize;
                for i in 1..n {
                    if input[at + i] == 0x1B && input.get(at + i + 1) == Some(&b'[') {
                        let end = input[at + i + 2..]
                            .iter()
                            .position(|b| (0x40..=0x7E).contains(b))
                            .map(|j| at + i + 2 + j + 1);
                        prop_assert!(end.is_none_or(|e| e <= at + n), "cut at {}", at + n);
                    }
                }
                at += n;
            }
            Ok(())
        },
    );
}

/// What a master would read from a client: whole 10-byte packets.
fn read_packets(from: &mut std::os::unix::net::UnixStream, n: usize) -> Vec<[u8; 10]> {
    let mut buf = vec![0u8; n * 10];
    from.read_exact(&mut buf)
        .expect("the client's packets arrive");
    buf.chunks(10).map(|c| c.try_into().unwrap()).collect()
}

#[derive(Debug, Clone)]
enum Send {
    Push(Vec<u8>),
    Resize(u16, u16),
    Redraw(u16, u16),
    Attach(u16, u16),
}

fn send_strategy() -> impl Strategy<Value = Send> {
    prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..2048).prop_map(Send::Push),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(c, r)| Send::Resize(c, r)),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(c, r)| Send::Redraw(c, r)),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(c, r)| Send::Attach(c, r)),
    ]
}

#[test]
fn dtach_client_sends_whole_packets() {
    let dir = scratch();
    let socket = dir.path().join("m.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let (client, _reader) = dtach::Client::connect(&socket).unwrap();
    let (mut master, _) = listener.accept().unwrap();
    master
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    run(
        "dtach_client_sends_whole_packets",
        send_strategy(),
        |send| {
            let deadline = Instant::now() + Duration::from_secs(10);
            match &send {
                Send::Push(input) => {
                    client
                        .push(input, deadline)
                        .map_err(|(n, e)| TestCaseError::fail(format!("{n}: {e}")))?;
                    let got = read_packets(&mut master, dtach::push_packets(input).count());
                    let mut back = Vec::new();
                    for p in &got {
                        prop_assert_eq!(p[0], 0);
                        prop_assert!((1..=8).contains(&p[1]));
                        back.extend_from_slice(&p[2..2 + p[1] as usize]);
                    }
                    prop_assert_eq!(&back, input);
                }
                Send::Resize(c, r) => {
                    client.resize(*c, *r, deadline).unwrap();
                    let got = read_packets(&mut master, 1);
                    prop_assert_eq!(got[0], dtach::packet(3, 0, dtach::winsize(*c, *r)));
                }
                Send::Redraw(c, r) => {
                    client.redraw(*c, *r, deadline).unwrap();
                    let got = read_packets(&mut master, 1);
                    prop_assert_eq!(
                        got[0],
                        dtach::packet(4, dtach::REDRAW_WINCH, dtach::winsize(*c, *r))
                    );
                }
                Send::Attach(c, r) => {
                    client.attach(*c, *r, deadline).unwrap();
                    let got = read_packets(&mut master, 2);
                    prop_assert_eq!(got[0], dtach::packet(1, 0, [0; 8]));
                    prop_assert_eq!(got[1], dtach::packet(3, 0, dtach::winsize(*c, *r)));
                }
            }
            Ok(())
        },
    );
    client.detach();
    let got = read_packets(&mut master, 1);
    assert_eq!(got[0], dtach::packet(2, 0, [0; 8]));
}
