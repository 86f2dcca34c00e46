//! The repository stands alone: every `SPEC §N` reference and every
//! relative link in the code and the docs resolves to something in the
//! repository, and nothing reads a path outside it.

use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file below `dir` whose name ends with one of `exts`.
fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && name != "fixtures" && !name.starts_with('.') {
                files(&path, exts, out);
            }
        } else if exts.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

/// The section numbers `N` of the `## N. Title` headings of docs/SPEC.md.
fn spec_sections() -> Vec<u32> {
    let spec = fs::read_to_string(repo().join("docs/SPEC.md")).expect("docs/SPEC.md exists");
    spec.lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter_map(|l| l.split('.').next()?.parse().ok())
        .collect()
}

/// The numbers cited as `SPEC §4`, `SPEC §4, §6` or `SPEC §4–§6` in `text`.
fn spec_citations(text: &str) -> Vec<u32> {
    let mut found = vec![];
    for (at, _) in text.match_indices("SPEC §") {
        let rest = &text[at + "SPEC ".len()..];
        // The citation runs over `§N` items joined by commas, spaces and dashes.
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || "§, –-".contains(c)))
            .unwrap_or(rest.len());
        for part in rest[..end].split('§').skip(1) {
            let digits: String = part.chars().take_while(|c| c.is_ascii_digit()).collect();
            // `SPEC §N` in prose about the notation is not a citation.
            if let Ok(n) = digits.parse() {
                found.push(n);
            }
        }
    }
    found
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
/// to dashes.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The relative targets of `[text](target)` links in a markdown text.
fn relative_links(text: &str) -> Vec<String> {
    let mut links = vec![];
    for (at, _) in text.match_indices("](") {
        let rest = &text[at + 2..];
        let Some(end) = rest.find(')') else { continue };
        let target = &rest[..end];
        if !target.contains("://") && !target.starts_with("mailto:") && !target.is_empty() {
            links.push(target.to_string());
        }
    }
    links
}

#[test]
fn every_spec_citation_names_a_section_that_exists() {
    let sections = spec_sections();
    assert_eq!(sections, (1..=sections.len() as u32).collect::<Vec<_>>());
    let mut sources = vec![repo().join("README.md")];
    files(&repo().join("src"), &[".rs"], &mut sources);
    files(&repo().join("tests"), &[".rs"], &mut sources);
    files(&repo().join("docs"), &[".md"], &mut sources);
    let mut cited = 0;
    for file in &sources {
        let text = fs::read_to_string(file).unwrap();
        for n in spec_citations(&text) {
            cited += 1;
            assert!(
                sections.contains(&n),
                "{} cites SPEC §{n}, which docs/SPEC.md lacks",
                file.display()
            );
        }
    }
    assert!(
        cited > 10,
        "only {cited} citations found: the scan is broken"
    );
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut docs = vec![repo().join("README.md")];
    files(&repo().join("docs"), &[".md"], &mut docs);
    files(&repo().join("tests/fixtures"), &[".md"], &mut docs);
    let mut checked = 0;
    for doc in &docs {
        let text = fs::read_to_string(doc).unwrap();
        for link in relative_links(&text) {
            let (path, anchor) = match link.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(path)
            };
            assert!(
                target.exists(),
                "{} links to {link}, which does not exist",
                doc.display()
            );
            if let Some(anchor) = anchor {
                let body = fs::read_to_string(&target).unwrap();
                let anchors: Vec<String> = body
                    .lines()
                    .filter(|l| l.starts_with('#'))
                    .filter_map(|l| l.trim_start_matches('#').strip_prefix(' '))
                    .map(anchor_of)
                    .collect();
                assert!(
                    anchors.iter().any(|a| a == anchor),
                    "{} links to {link}: no such heading",
                    doc.display()
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 2,
        "only {checked} links found: the scan is broken"
    );
}

#[test]
fn nothing_in_the_repository_reads_outside_it() {
    // Spelled in two pieces so that this file does not match itself.
    let outside = format!("{}/shared", "..");
    let mut sources = vec![
        repo().join("README.md"),
        repo().join("Cargo.toml"),
        repo().join(".ci/run"),
    ];
    files(&repo().join("src"), &[".rs"], &mut sources);
    files(&repo().join("tests"), &[".rs"], &mut sources);
    files(&repo().join("docs"), &[".md"], &mut sources);
    files(&repo().join("mount"), &[""], &mut sources);
    files(&repo().join("scripts"), &[""], &mut sources);
    for file in &sources {
        let text = fs::read_to_string(file).unwrap();
        assert!(
            !text.contains(&outside),
            "{} reaches outside the repository",
            file.display()
        );
    }
}

#[test]
fn citations_are_read_in_every_form() {
    assert_eq!(
        spec_citations("(SPEC §4, §6, §8, §10): x"),
        vec![4, 6, 8, 10]
    );
    assert_eq!(spec_citations("SPEC §9. Then §3"), vec![9]);
    assert_eq!(spec_citations("a `SPEC §N` reference"), Vec::<u32>::new());
    assert_eq!(
        anchor_of("The scrollback, for each reader"),
        "the-scrollback-for-each-reader"
    );
    assert_eq!(
        relative_links("[a](b.md) [c](https://x) [d](e#f)"),
        vec!["b.md", "e#f"]
    );
}
