//! Listing sessions (SPEC §10): the order of the root and `sessions.json`,
//! the `q`/`project`/`engine` filters, pagination and the facets, plus the
//! table `sessionfs ls` prints. Pure: callers gather the entries.

use crate::error::{Error, Result};
use crate::key::SessionKey;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// One session as the listing needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: SessionKey,
    /// The session's `meta.json`, served as is in `sessions`.
    pub meta: Value,
    pub favourite: bool,
    pub archived: bool,
    pub project: Option<String>,
    /// Milliseconds since the epoch.
    pub last_activity_ms: u64,
    pub title: Option<String>,
}

impl Entry {
    /// Reads the listing's fields from a session's `meta.json`.
    pub fn from_meta(meta: Value) -> Result<Entry> {
        let key = meta
            .get("key")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::invalid("meta.json has no `key`"))
            .and_then(SessionKey::parse)?;
        let text = |field: &str| {
            meta.get(field)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let flag = |field: &str| meta.get(field).and_then(Value::as_bool).unwrap_or(false);
        Ok(Entry {
            key,
            favourite: flag("favourite"),
            archived: flag("archived"),
            project: text("project"),
            last_activity_ms: meta
                .get("last_activity")
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<jiff::Timestamp>().ok())
                .and_then(|at| u64::try_from(at.as_millisecond()).ok())
                .unwrap_or(0),
            title: text("title"),
            meta,
        })
    }
}

/// What to list: the archived or the active scope, filters and a page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Case-insensitive substring of the key, title or project.
    pub q: Option<String>,
    pub project: Option<String>,
    pub engine: Option<String>,
    pub archived: bool,
    pub limit: Option<usize>,
    pub offset: usize,
}

/// Counts per option over the whole scope, for the dropdowns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facets {
    pub projects: BTreeMap<String, usize>,
    pub engines: BTreeMap<String, usize>,
}

/// One page of a listing, serialised as `sessions.json`; `T` is how each
/// session's `meta.json` is held. The sessions come last, so a reader that
/// wants the first page stops reading there.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// Sessions matching the filters, over all pages.
    pub total: usize,
    pub offset: usize,
    pub limit: Option<usize>,
    pub facets: Facets,
    /// Each session's `meta.json`.
    pub sessions: Vec<T>,
}

/// A page with each `meta.json` as a JSON value.
pub type Listing = Page<Value>;

/// What listing needs of a session; the core's rows and `meta.json`
/// documents ([`Entry`]) both have it.
pub trait Listed {
    fn key(&self) -> &SessionKey;
    fn favourite(&self) -> bool;
    fn archived(&self) -> bool;
    fn project(&self) -> Option<&str>;
    /// Milliseconds since the epoch.
    fn last_activity_ms(&self) -> u64;
    fn title(&self) -> Option<&str>;
}

impl<T: Listed> Listed for &T {
    fn key(&self) -> &SessionKey {
        (*self).key()
    }
    fn favourite(&self) -> bool {
        (*self).favourite()
    }
    fn archived(&self) -> bool {
        (*self).archived()
    }
    fn project(&self) -> Option<&str> {
        (*self).project()
    }
    fn last_activity_ms(&self) -> u64 {
        (*self).last_activity_ms()
    }
    fn title(&self) -> Option<&str> {
        (*self).title()
    }
}

impl Listed for Entry {
    fn key(&self) -> &SessionKey {
        &self.key
    }
    fn favourite(&self) -> bool {
        self.favourite
    }
    fn archived(&self) -> bool {
        self.archived
    }
    fn project(&self) -> Option<&str> {
        self.project.as_deref()
    }
    fn last_activity_ms(&self) -> u64 {
        self.last_activity_ms
    }
    fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }
}

/// The order of the root, the views and `sessions.json`: favourites first,
/// then newest activity first, then by key so equal entries keep one order
/// across reads.
pub fn compare<T: Listed>(a: &T, b: &T) -> std::cmp::Ordering {
    (
        Reverse(a.favourite()),
        Reverse(a.last_activity_ms()),
        a.key(),
    )
        .cmp(&(
            Reverse(b.favourite()),
            Reverse(b.last_activity_ms()),
            b.key(),
        ))
}

/// Sorts in listing order: O(N log N). The sort moves small keys, and each
/// entry (a row is a few hundred bytes) moves once.
pub fn order<T: Listed>(entries: &mut [T]) {
    if entries.len() > u32::MAX as usize {
        entries.sort_unstable_by(compare);
        return;
    }
    let mut ranks: Vec<(Reverse<bool>, Reverse<u64>, u32)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            (
                Reverse(e.favourite()),
                Reverse(e.last_activity_ms()),
                i as u32,
            )
        })
        .collect();
    ranks.sort_unstable_by(|a, b| {
        (a.0, a.1)
            .cmp(&(b.0, b.1))
            .then_with(|| entries[a.2 as usize].key().cmp(entries[b.2 as usize].key()))
    });
    // Each entry to its place by following the permutation's cycles.
    let mut from: Vec<u32> = ranks.into_iter().map(|r| r.2).collect();
    for start in 0..from.len() {
        let mut at = start;
        while from[at] as usize != at {
            let source = from[at] as usize;
            from[at] = at as u32;
            if source == start {
                break;
            }
            entries.swap(at, source);
            at = source;
        }
    }
}

fn nonempty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

fn matches<T: Listed>(entry: &T, query: &Query, needle: Option<&str>) -> bool {
    if let Some(engine) = nonempty(query.engine.as_deref()) {
        if entry.key().engine() != engine {
            return false;
        }
    }
    if let Some(project) = nonempty(query.project.as_deref()) {
        if entry.project() != Some(project) {
            return false;
        }
    }
    if let Some(needle) = needle {
        let found = |hay: &str| hay.to_lowercase().contains(needle);
        if !(found(&entry.key().to_string())
            || entry.title().is_some_and(found)
            || entry.project().is_some_and(found))
        {
            return false;
        }
    }
    true
}

/// Scopes, counts facets, filters, orders and pages `entries`.
///
/// Facets are counted over the whole scope before filtering so every option
/// stays offered however narrow the filter; `total` counts the filtered set
/// before paging so "more" describes the filtered result.
pub fn list(entries: Vec<Entry>, query: &Query) -> Listing {
    list_by(entries, query, |e| e.meta)
}

/// [`list`] over any listed items; `meta` makes the `meta.json` document
/// of each item on the page only.
pub fn list_by<T: Listed, U>(entries: Vec<T>, query: &Query, meta: impl FnMut(T) -> U) -> Page<U> {
    let scoped: Vec<T> = entries
        .into_iter()
        .filter(|e| e.archived() == query.archived)
        .collect();

    let facets = facets_of(&scoped);
    let needle = nonempty(query.q.as_deref()).map(str::to_lowercase);
    let mut filtered: Vec<T> = scoped
        .into_iter()
        .filter(|e| matches(e, query, needle.as_deref()))
        .collect();
    order(&mut filtered);

    let total = filtered.len();
    let sessions = filtered
        .into_iter()
        .skip(query.offset)
        .take(query.limit.unwrap_or(usize::MAX))
        .map(meta)
        .collect();
    Page {
        total,
        offset: query.offset,
        limit: query.limit,
        sessions,
        facets,
    }
}

/// The counts of each project and engine among `entries`.
pub fn facets_of<T: Listed>(entries: &[T]) -> Facets {
    // Counted by name first: a name is copied once, not once per entry.
    fn count(counts: &mut BTreeMap<String, usize>, name: &str) {
        match counts.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                counts.insert(name.to_string(), 1);
            }
        }
    }
    let mut facets = Facets::default();
    for entry in entries {
        if let Some(project) = nonempty(entry.project()) {
            count(&mut facets.projects, project);
        }
        count(&mut facets.engines, entry.key().engine());
    }
    facets
}

/// One table cell: control characters (a store title can span lines or
/// carry terminal escapes) become spaces so each session stays one line.
fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".to_string(),
        Some(Value::String(s)) if s.is_empty() => "-".to_string(),
        Some(Value::String(s)) => s
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect(),
        Some(other) => other.to_string(),
    }
}

/// `2026-11-29 18:53` (UTC) from the RFC 3339 `last_activity`.
fn activity_cell(value: Option<&Value>) -> String {
    match value.and_then(Value::as_str) {
        Some(s) => match s.parse::<jiff::Timestamp>() {
            Ok(at) => at.strftime("%Y-%m-%d %H:%M").to_string(),
            Err(_) => cell(value),
        },
        None => cell(value),
    }
}

/// What a session is doing: its agent state (`idle`, `busy`, `waiting`,
/// ...), and while it waits, what for (`waiting: permission Bash`).
fn state_cell(meta: &Value) -> String {
    let state = meta.get("agent_state").or_else(|| meta.get("state"));
    let asked = meta.get("waiting_for").filter(|w| !w.is_null());
    match asked {
        Some(w) => {
            let kind = w.get("kind").and_then(Value::as_str).unwrap_or("question");
            match w.get("tool").and_then(Value::as_str) {
                Some(tool) => format!("waiting: {kind} {tool}"),
                None => format!("waiting: {kind}"),
            }
        }
        None => cell(state),
    }
}

/// The table `sessionfs ls` prints: one line per session, the title last and
/// never cut, then how many of how many are shown.
/// A session's cost in dollars (`meta.json`'s `cost_usd`), if known.
pub fn cost_of(meta: &Value) -> Option<f64> {
    meta.get("cost_usd").and_then(Value::as_f64)
}

/// Sorts by cost, highest first, unknown costs last; equal costs keep
/// their order.
pub fn order_by_cost(sessions: &mut [Value]) {
    sessions.sort_by(|a, b| match (cost_of(a), cost_of(b)) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
}

/// A cost cell: dollars to the cent (a fraction of a cent shows as
/// `<$0.01`), `-` while unknown.
fn cost_cell(value: Option<&Value>) -> String {
    match value.and_then(Value::as_f64) {
        None => "-".to_string(),
        Some(c) if c > 0.0 && c < 0.005 => "<$0.01".to_string(),
        Some(c) => format!("${c:.2}"),
    }
}

pub fn render_table(listing: &Listing) -> String {
    const HEADER: [&str; 7] = [
        "KEY",
        "STATE",
        "FAV",
        "PROJECT",
        "LAST ACTIVITY",
        "COST",
        "TITLE",
    ];
    let rows: Vec<[String; 7]> = listing
        .sessions
        .iter()
        .map(|meta| {
            let fav = if meta.get("favourite").and_then(Value::as_bool) == Some(true) {
                "*".to_string()
            } else {
                String::new()
            };
            [
                cell(meta.get("key")),
                state_cell(meta),
                fav,
                cell(meta.get("project")),
                activity_cell(meta.get("last_activity")),
                cost_cell(meta.get("cost_usd")),
                cell(meta.get("title")),
            ]
        })
        .collect();

    let mut out = String::new();
    if !rows.is_empty() {
        let mut widths = HEADER.map(|h| h.chars().count());
        for row in &rows {
            for (width, text) in widths.iter_mut().zip(row) {
                *width = (*width).max(text.chars().count());
            }
        }
        let mut line = |row: [&str; 7]| {
            let mut text = String::new();
            for (i, value) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    text.push_str(value);
                } else {
                    let pad = widths[i] - value.chars().count();
                    text.push_str(value);
                    text.extend(std::iter::repeat_n(' ', pad + 2));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(HEADER);
        for row in &rows {
            line(row.each_ref().map(String::as_str));
        }
    }

    let shown = listing.sessions.len();
    let noun = if listing.total == 1 {
        "session"
    } else {
        "sessions"
    };
    if listing.total == 0 {
        out.push_str("no sessions\n");
    } else if listing.offset > 0 && shown > 0 {
        out.push_str(&format!(
            "{}–{} of {} {noun}",
            listing.offset + 1,
            listing.offset + shown,
            listing.total
        ));
    } else {
        out.push_str(&format!("{shown} of {} {noun}", listing.total));
    }
    let next = listing.offset + shown;
    if listing.total > 0 {
        // `--limit 0` counts without showing: there is no page to turn to.
        if next < listing.total && shown > 0 {
            out.push_str(&format!("; more: --offset {next}"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(key: &str, fav: bool, archived: bool, project: Option<&str>, at: u64) -> Entry {
        let meta = json!({
            "key": key,
            "title": format!("title of {key}"),
            "project": project,
            "favourite": fav,
            "archived": archived,
            "last_activity": format!("{:.3}", jiff::Timestamp::from_millisecond(at as i64).unwrap()),
            "state": if archived { "archived" } else { "stopped" },
        });
        Entry::from_meta(meta).unwrap()
    }

    fn keys(listing: &Listing) -> Vec<&str> {
        listing
            .sessions
            .iter()
            .map(|m| m["key"].as_str().unwrap())
            .collect()
    }

    fn sample() -> Vec<Entry> {
        vec![
            entry("shell:old", false, false, Some("web"), 1_000),
            entry("claude:fav", true, false, Some("web"), 500),
            entry("claude:new", false, false, Some("api"), 9_000),
            entry("codex:mid", false, false, None, 5_000),
            entry("claude:gone", false, true, Some("legacy"), 7_000),
            entry("shell:gone", true, true, None, 2_000),
        ]
    }

    #[test]
    fn favourites_then_newest_then_key() {
        let mut entries = vec![
            entry("shell:b", false, false, None, 10),
            entry("shell:a", false, false, None, 10),
            entry("shell:z", true, false, None, 1),
            entry("shell:n", false, false, None, 99),
            entry("shell:y", true, false, None, 5),
        ];
        order(&mut entries);
        let got: Vec<String> = entries.iter().map(|e| e.key.to_string()).collect();
        assert_eq!(got, ["shell:y", "shell:z", "shell:n", "shell:a", "shell:b"]);
    }

    #[test]
    fn the_active_scope_leaves_archived_out() {
        let listing = list(sample(), &Query::default());
        assert_eq!(
            keys(&listing),
            ["claude:fav", "claude:new", "codex:mid", "shell:old"]
        );
        assert_eq!(listing.total, 4);
    }

    #[test]
    fn the_archived_scope_holds_only_archived() {
        let query = Query {
            archived: true,
            ..Query::default()
        };
        let listing = list(sample(), &query);
        assert_eq!(keys(&listing), ["shell:gone", "claude:gone"]);
        assert_eq!(
            listing.facets.projects,
            BTreeMap::from([("legacy".into(), 1)])
        );
        assert_eq!(
            listing.facets.engines,
            BTreeMap::from([("claude".into(), 1), ("shell".into(), 1)])
        );
    }

    #[test]
    fn filter_by_engine() {
        let query = Query {
            engine: Some("claude".into()),
            ..Query::default()
        };
        let listing = list(sample(), &query);
        assert_eq!(keys(&listing), ["claude:fav", "claude:new"]);
        assert_eq!(listing.total, 2);
        // Exact, not a prefix.
        let query = Query {
            engine: Some("clau".into()),
            ..Query::default()
        };
        assert_eq!(list(sample(), &query).total, 0);
    }

    #[test]
    fn filter_by_project() {
        let query = Query {
            project: Some("web".into()),
            ..Query::default()
        };
        assert_eq!(keys(&list(sample(), &query)), ["claude:fav", "shell:old"]);
        let query = Query {
            project: Some("we".into()),
            ..Query::default()
        };
        assert_eq!(list(sample(), &query).total, 0);
    }

    #[test]
    fn filter_by_text() {
        let mut entries = sample();
        entries[3].title = Some("Refactor the PARSER".into());
        let q = |text: &str| Query {
            q: Some(text.into()),
            ..Query::default()
        };
        // Title, any case.
        assert_eq!(keys(&list(entries.clone(), &q("parser"))), ["codex:mid"]);
        // Key.
        assert_eq!(
            keys(&list(entries.clone(), &q("CLAUDE:"))),
            ["claude:fav", "claude:new"]
        );
        // Project.
        assert_eq!(keys(&list(entries.clone(), &q("Api"))), ["claude:new"]);
        assert_eq!(list(entries.clone(), &q("nothing like it")).total, 0);
        assert_eq!(list(entries, &q("")).total, 4);
    }

    #[test]
    fn filters_combine() {
        let query = Query {
            engine: Some("claude".into()),
            project: Some("web".into()),
            q: Some("fav".into()),
            ..Query::default()
        };
        assert_eq!(keys(&list(sample(), &query)), ["claude:fav"]);
    }

    #[test]
    fn facets_ignore_the_filters() {
        let unfiltered = list(sample(), &Query::default()).facets;
        assert_eq!(
            unfiltered.projects,
            BTreeMap::from([("api".into(), 1), ("web".into(), 2)])
        );
        assert_eq!(
            unfiltered.engines,
            BTreeMap::from([
                ("claude".into(), 2),
                ("codex".into(), 1),
                ("shell".into(), 1)
            ])
        );
        let query = Query {
            q: Some("zzz".into()),
            engine: Some("codex".into()),
            project: Some("web".into()),
            limit: Some(1),
            offset: 3,
            ..Query::default()
        };
        let listing = list(sample(), &query);
        assert_eq!(listing.total, 0);
        assert_eq!(listing.facets, unfiltered);
    }

    #[test]
    fn pages_count_the_filtered_set() {
        let entries: Vec<Entry> = (0..25)
            .map(|i| {
                let project = if i % 2 == 0 { "even" } else { "odd" };
                entry(&format!("shell:s{i:02}"), false, false, Some(project), i)
            })
            .collect();
        let page = |offset, limit| Query {
            project: Some("even".into()),
            offset,
            limit,
            ..Query::default()
        };
        let first = list(entries.clone(), &page(0, Some(5)));
        assert_eq!(first.total, 13);
        assert_eq!(
            keys(&first),
            [
                "shell:s24",
                "shell:s22",
                "shell:s20",
                "shell:s18",
                "shell:s16"
            ]
        );
        let last = list(entries.clone(), &page(10, Some(5)));
        assert_eq!(keys(&last), ["shell:s04", "shell:s02", "shell:s00"]);
        assert_eq!(last.total, 13);
        let past = list(entries.clone(), &page(50, Some(5)));
        assert!(past.sessions.is_empty());
        assert_eq!(past.total, 13);
        let all = list(entries.clone(), &page(2, None));
        assert_eq!(all.sessions.len(), 11);
        assert!(list(entries, &page(0, Some(0))).sessions.is_empty());
    }

    #[test]
    fn serialises_as_the_spec_says() {
        let query = Query {
            limit: Some(1),
            ..Query::default()
        };
        let listing = list(sample(), &query);
        let value = serde_json::to_value(&listing).unwrap();
        assert_eq!(
            value,
            json!({
                "total": 4,
                "offset": 0,
                "limit": 1,
                "sessions": [sample()[1].meta],
                "facets": {
                    "projects": {"api": 1, "web": 2},
                    "engines": {"claude": 2, "codex": 1, "shell": 1},
                },
            })
        );
        let text = serde_json::to_string(&list(sample(), &Query::default())).unwrap();
        // The sessions last, so a reader of the first page stops there.
        assert!(text.starts_with(r#"{"total":4,"offset":0,"limit":null,"facets":{"#));
        assert!(text.contains(r#"},"sessions":[{"#));
        let back: Listing = serde_json::from_str(&text).unwrap();
        assert_eq!(back.total, 4);
    }

    #[test]
    fn entries_come_from_meta_json() {
        let entry = Entry::from_meta(json!({
            "key": "codex:x1",
            "title": "",
            "project": null,
            "favourite": true,
            "last_activity": "2026-01-02T00:00:00.000Z",
        }))
        .unwrap();
        assert_eq!(entry.key.to_string(), "codex:x1");
        assert!(entry.favourite && !entry.archived);
        assert_eq!((entry.title, entry.project), (None, None));
        assert_eq!(entry.last_activity_ms, 1_767_312_000_000);
        assert!(Entry::from_meta(json!({"title": "no key"})).is_err());
        assert!(Entry::from_meta(json!({"key": "bad key"})).is_err());
    }

    #[test]
    fn renders_a_table() {
        let query = Query {
            limit: Some(3),
            ..Query::default()
        };
        let table = render_table(&list(sample(), &query));
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[0].starts_with("KEY"));
        assert!(lines[0].ends_with("TITLE"));
        // Every column starts where its header does.
        let at = lines[0].find("PROJECT").unwrap();
        for row in &lines[1..4] {
            assert_eq!(&row[at - 2..at], "  ", "{row}");
            assert_ne!(&row[at..at + 1], " ", "{row}");
        }
        assert!(lines[1].starts_with("claude:fav"));
        assert!(lines[1].contains("  *  "));
        assert!(lines[1].contains("1970-01-01 00:00"));
        assert!(lines[1].ends_with("title of claude:fav"));
        assert!(lines[3].contains("codex:mid"));

        let mut asking = sample();
        asking[1].meta["agent_state"] = json!("waiting");
        asking[1].meta["waiting_for"] = json!({"kind": "permission", "tool": "Bash"});
        let table = render_table(&list(asking, &query));
        assert!(table.contains("  waiting: permission Bash  "), "{table}");
        assert_eq!(lines[4], "3 of 4 sessions; more: --offset 3");

        let query = Query {
            limit: Some(3),
            offset: 3,
            ..Query::default()
        };
        let table = render_table(&list(sample(), &query));
        assert_eq!(table.lines().count(), 3, "{table}");
        assert!(table.lines().nth(1).unwrap().starts_with("shell:old"));
        assert!(table.ends_with("4–4 of 4 sessions\n"), "{table}");

        let count_only = Query {
            limit: Some(0),
            ..Query::default()
        };
        let table = render_table(&list(sample(), &count_only));
        assert!(table.ends_with("0 of 4 sessions\n"), "{table}");
    }

    #[test]
    fn a_multi_line_title_stays_on_one_line() {
        let mut entries = vec![entry("shell:a", false, false, None, 0)];
        entries[0].meta["title"] = json!("line one\nline two\u{1b}[2J");
        let table = render_table(&list(entries, &Query::default()));
        assert_eq!(table.lines().count(), 3, "{table}");
        assert!(table.contains("line one line two [2J"));
        assert!(table.ends_with("1 of 1 session\n"));
    }

    #[test]
    fn renders_an_empty_listing() {
        assert_eq!(
            render_table(&list(Vec::new(), &Query::default())),
            "no sessions\n"
        );
        let query = Query {
            offset: 10,
            ..Query::default()
        };
        assert_eq!(render_table(&list(sample(), &query)), "0 of 4 sessions\n");
    }
}
