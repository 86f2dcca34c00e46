//! `sessionfs archive-older CUTOFF [--dry-run]`: the root `ctl`'s
//! `archive-older`, run by the daemon on the one path both the real run and
//! the dry run take; what it did (or would do) is read back from the root
//! `status`.

use super::exit::{refused, Failed};
use super::mounted::{client_verb, reason, write_file};
use std::path::Path;
use std::process::ExitCode;

/// Archives (or, with `dry_run`, lists) the sessions idle since before
/// `cutoff`; prints their keys one a line, and on stderr how many and
/// which were skipped (their agent busy or waiting).
pub fn archive_older(mnt: &Path, cutoff: &str, dry_run: bool) -> Result<serde_json::Value, Failed> {
    let command = if dry_run {
        format!("archive-older {cutoff} dry-run\n")
    } else {
        format!("archive-older {cutoff}\n")
    };
    write_file(&mnt.join("ctl"), command.as_bytes()).map_err(|e| refused(reason(mnt, &e)))?;
    let text = std::fs::read(mnt.join("status")).map_err(|e| refused(format!("status: {e}")))?;
    let status: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| refused(format!("status: {e}")))?;
    Ok(status["archive_older"].clone())
}

pub fn run(cutoff: &str, dry_run: bool, json: bool) -> ExitCode {
    client_verb(|mnt| {
        let report = archive_older(mnt, cutoff, dry_run)?;
        if json {
            println!("{report}");
            return Ok(0);
        }
        for key in report["keys"].as_array().into_iter().flatten() {
            println!("{}", key.as_str().unwrap_or_default());
        }
        let skipped = report["skipped"].as_array().cloned().unwrap_or_default();
        for s in &skipped {
            eprintln!(
                "sessionfs: skipped {} ({})",
                s["key"].as_str().unwrap_or_default(),
                s["state"].as_str().unwrap_or_default()
            );
        }
        let count = report["archived"].as_u64().unwrap_or(0);
        let left_out = report["left_out"].as_u64().unwrap_or(0);
        let did = if dry_run { "would archive" } else { "archived" };
        let mut line = format!("sessionfs: {did} {count}, skipped {}", skipped.len());
        if left_out > 0 {
            line.push_str(&format!(" ({left_out} keys not listed)"));
        }
        eprintln!("{line}");
        Ok(0)
    })
}
