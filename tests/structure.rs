//! The structure picture has no cycles: reads every module's `crate::`
//! paths (its `use` lines and the paths written in its code), maps each
//! module to its room, and fails on a cycle between rooms, naming the
//! paths that make it.
//!
//! A room is a folder of `src/core/` (`tree`, `sessions`, `agents`,
//! `organize`, `records`) or a top-level module of the crate (`fs`,
//! `runtime`, `catalog`, ...). `src/core/mod.rs` and the files beside it
//! are the house: the state every room's methods reach through `Core`. A
//! room inside the core naming the house is not an edge (every room does);
//! anything else naming it is. Unit tests (`#[cfg(test)] mod tests`) are
//! left out: a test may drive a room from above.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CORE_ROOMS: [&str; 5] = ["tree", "sessions", "agents", "organize", "records"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The room a source file belongs to; `None` for the crate's roots.
fn room_of_file(relative: &Path) -> Option<String> {
    let parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [only] if only == "main" || only == "lib" => None,
        [core, room, _, ..] if core == "core" && CORE_ROOMS.contains(&room.as_str()) => {
            Some(format!("core::{room}"))
        }
        [first, ..] => Some(first.clone()),
        [] => None,
    }
}

/// The room a `crate::` path names.
fn room_of_path(segments: &[&str]) -> String {
    match segments {
        ["core", room, ..] if CORE_ROOMS.contains(room) => format!("core::{room}"),
        [first, ..] => first.to_string(),
        [] => String::new(),
    }
}

/// The code of a file without its unit tests and comment lines.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Every path the code names from the crate's root, with a `use` group
/// (`crate::a::{b, c::d}`) opened one level.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest.find(|c: char| !is_path_char(c)).unwrap_or(rest.len());
        let path = rest[..end].trim_end_matches(':');
        if rest[end..].starts_with('{') && rest[..end].ends_with("::") {
            let close = rest[end..].find('}').map_or(rest.len(), |c| end + c);
            for item in rest[end + 1..close].split(',') {
                let item = item.trim();
                if item == "self" {
                    found.push(path.to_string());
                } else if !item.is_empty() {
                    found.push(format!("{path}::{item}"));
                }
            }
        } else if !path.is_empty() {
            found.push(path.to_string());
        }
    }
    found
}

type Edges = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn room_edges() -> Edges {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 50,
        "found only {} files under {}",
        files.len(),
        src.display()
    );
    let mut edges = Edges::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap().to_path_buf();
        let Some(from) = room_of_file(&relative) else {
            continue;
        };
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for path in crate_paths(&code) {
            let segments: Vec<&str> = path.split("::").collect();
            let to = room_of_path(&segments);
            let house_from_inside = from.starts_with("core::") && to == "core";
            if to.is_empty() || to == from || house_from_inside {
                continue;
            }
            edges
                .entry(from.clone())
                .or_default()
                .entry(to)
                .or_default()
                .insert(format!("{} names crate::{path}", relative.display()));
        }
    }
    edges
}

/// The rooms on a cycle through `start`, if any: a path back to it.
fn cycle_through(edges: &Edges, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_string(), vec![start.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((room, path)) = stack.pop() {
        for next in edges.get(&room).into_iter().flat_map(|m| m.keys()) {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(next.clone());
                return Some(cycle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push((next.clone(), longer));
            }
        }
    }
    None
}

#[test]
fn the_rooms_form_no_cycle() {
    let edges = room_edges();
    let mut report = String::new();
    let rooms: BTreeSet<&String> = edges.keys().collect();
    for room in rooms {
        if let Some(cycle) = cycle_through(&edges, room) {
            report.push_str(&format!("cycle: {}\n", cycle.join(" -> ")));
            for pair in cycle.windows(2) {
                for why in &edges[&pair[0]][&pair[1]] {
                    report.push_str(&format!("    {} -> {}: {why}\n", pair[0], pair[1]));
                }
            }
        }
    }
    assert!(
        report.is_empty(),
        "the structure picture has cycles:\n{report}"
    );
}

/// The core's rooms in their order: each may name a room to its right,
/// never one to its left (docs/ARCHITECTURE.md draws it).
const CORE_ORDER: [&str; 5] = [
    "core::tree",
    "core::sessions",
    "core::agents",
    "core::organize",
    "core::records",
];

#[test]
fn the_core_rooms_keep_their_order() {
    let edges = room_edges();
    let place = |room: &str| CORE_ORDER.iter().position(|r| *r == room);
    let mut report = String::new();
    for (from, targets) in &edges {
        for (to, why) in targets {
            if let (Some(a), Some(b)) = (place(from), place(to)) {
                if b < a {
                    for why in why {
                        report.push_str(&format!("{from} -> {to}: {why}\n"));
                    }
                }
            }
        }
    }
    assert!(report.is_empty(), "a room names one to its left:\n{report}");
}

#[test]
fn only_the_adapter_and_the_daemon_speak_fuse() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let speakers: Vec<String> = files
        .iter()
        .filter(|f| code_of(&std::fs::read_to_string(f).unwrap()).contains("fuser::"))
        .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
        .filter(|f| !f.starts_with("fs/") && f != "daemon.rs")
        .collect();
    assert!(
        speakers.is_empty(),
        "FUSE named outside the adapter: {speakers:?}"
    );
}

/// The checker itself: a cycle written into a picture is found, with the
/// path that makes it.
#[test]
fn a_cycle_is_found() {
    let mut edges = Edges::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        edges
            .entry(from.into())
            .or_default()
            .entry(to.into())
            .or_default()
            .insert(format!("{from}.rs names crate::{to}"));
    }
    assert_eq!(cycle_through(&edges, "a").unwrap(), ["a", "b", "c", "a"]);
    assert_eq!(cycle_through(&edges, "d"), None);
    assert_eq!(
        crate_paths(
            "use crate::core::{lock, tree::node::Kind};\nlet x = crate::work::Pool::new();"
        ),
        ["core::lock", "core::tree::node::Kind", "work::Pool::new"]
    );
    assert_eq!(room_of_path(&["core", "tree", "node"]), "core::tree");
    assert_eq!(room_of_path(&["core", "Core"]), "core");
    assert_eq!(
        room_of_file(Path::new("core/agents/waits.rs")).as_deref(),
        Some("core::agents")
    );
    assert_eq!(
        room_of_file(Path::new("core/mod.rs")).as_deref(),
        Some("core")
    );
}
