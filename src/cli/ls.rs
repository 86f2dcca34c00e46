//! `sessionfs ls`: lists sessions from the state, mounted or not.

use super::logging::init_logging;
use super::mounted::mount;
use crate::config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

/// What `ls` was asked for (the flags of `sessionfs ls`).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Text to find in the key, title or project.
    #[arg(long)]
    pub q: Option<String>,
    #[arg(long)]
    pub project: Option<String>,
    #[arg(long)]
    pub engine: Option<String>,
    /// List archived sessions instead of active ones.
    #[arg(long)]
    pub archived: bool,
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    /// Only sessions in this state (`state` file: stopped, starting,
    /// idle, busy, waiting, exited).
    #[arg(long, value_name = "STATE")]
    pub state: Option<String>,
    /// Order: `activity` (favourites first, then the newest activity; the
    /// default) or `cost` (the highest cost first, unknown costs last).
    #[arg(long, value_name = "ORDER", default_value = "activity", value_parser = ["activity", "cost"])]
    pub sort: String,
    /// Only the keys, one a line.
    #[arg(long)]
    pub keys: bool,
    /// Only the sessions' paths in the mount, one a line (a mount must
    /// serve this state).
    #[arg(long, conflicts_with = "keys")]
    pub paths: bool,
    /// JSON file with more engines and program overrides.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Prints the listing: a table, the keys, the paths in the mount, or
/// `sessions.json`'s form with `json`.
pub fn run(args: Args, json: bool) -> ExitCode {
    let Args {
        q,
        project,
        engine,
        archived,
        limit,
        offset,
        state,
        sort,
        keys,
        paths,
        config,
    } = args;
    let by_cost = sort == "cost";
    // Sorted here: the whole scope is listed, then filtered and paged.
    let whole = state.is_some() || by_cost;
    init_logging("warn");
    if let Some(s) = state.as_deref() {
        if crate::agent::state::State::parse(s).is_none() {
            eprintln!("sessionfs: unknown state {s:?}; one of stopped, starting, idle, busy, waiting, exited");
            return ExitCode::FAILURE;
        }
    }
    let query = crate::core::organize::query::Query {
        q,
        project,
        engine,
        archived,
        limit: if whole { None } else { limit },
        offset: if whole { 0 } else { offset },
    };
    let listing = Config::from_env(config.as_deref()).and_then(|config| {
        // A daemon on the same state knows its live sessions' activity.
        if let Some(listing) = crate::core::listing_from_daemon(&config, &query) {
            return Ok(listing);
        }
        crate::core::Core::for_listing(config).map(|core| {
            if by_cost {
                // No daemon has counted: every store is read now.
                core.count_usage_now();
            }
            let listing = core.listing(&query);
            // What it had to read is kept for the next listing.
            core.save_catalog();
            listing
        })
    });
    let listing = listing.map(|mut listing| {
        if let Some(s) = &state {
            listing
                .sessions
                .retain(|m| m["agent_state"].as_str() == Some(s.as_str()));
        }
        if by_cost {
            crate::core::organize::query::order_by_cost(&mut listing.sessions);
        }
        if whole {
            listing.total = listing.sessions.len();
            listing.sessions = std::mem::take(&mut listing.sessions)
                .into_iter()
                .skip(offset)
                .take(limit.unwrap_or(usize::MAX))
                .collect();
            listing.offset = offset;
            listing.limit = limit;
        }
        listing
    });
    match listing {
        Ok(listing) => {
            if paths {
                let mnt = Config::from_env(config.as_deref())
                    .map_err(|e| e.message)
                    .and_then(|c| mount(&c).map_err(|f| f.message));
                let mnt = match mnt {
                    Ok(mnt) => mnt,
                    Err(message) => {
                        eprintln!("sessionfs: --paths: {message}");
                        return ExitCode::FAILURE;
                    }
                };
                let under = if archived { mnt.join("archived") } else { mnt };
                for m in &listing.sessions {
                    if let Some(k) = m["key"].as_str() {
                        println!("{}", under.join(k).display());
                    }
                }
            } else if keys {
                for m in &listing.sessions {
                    if let Some(k) = m["key"].as_str() {
                        println!("{k}");
                    }
                }
            } else if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&listing).expect("listing serialises")
                );
            } else {
                print!("{}", crate::core::organize::query::render_table(&listing));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sessionfs: {}", e.message);
            ExitCode::FAILURE
        }
    }
}
