//! Validating edits to a session's metadata (SPEC §4): a whole `meta.json`
//! as an editor saved it, and the one-line `title`, `project`, `favourite`
//! and `archive` files. Nothing here touches the sidecar; callers apply the
//! returned change only when every check passed, so a refused save leaves the
//! old metadata untouched.

use crate::error::{Error, Result};
use crate::input_checks::{preview, refuse_duplicate_keys};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Longest title, in bytes.
pub const MAX_TITLE_BYTES: usize = 1024;
/// Longest project name, in bytes: it becomes a directory name under `projects/`.
pub const MAX_PROJECT_BYTES: usize = 255;
/// Longest workspace path, in bytes (Linux `PATH_MAX` less the NUL).
pub const MAX_WORKSPACE_BYTES: usize = 4095;

/// Fields a `meta.json` save may change.
const WRITABLE: [&str; 5] = ["title", "project", "favourite", "archived", "workspace"];

/// What a save changes. `None` leaves a field as it is; `Some(None)` clears it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaChange {
    pub title: Option<Option<String>>,
    pub project: Option<Option<String>>,
    pub favourite: Option<bool>,
    pub archived: Option<bool>,
    pub workspace: Option<Option<String>>,
}

impl MetaChange {
    /// True when the save changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == MetaChange::default()
    }
}

/// Unicode line and paragraph separators end a line too, so they are refused
/// with the control characters.
fn breaks_line(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

fn one_line(field: &str, s: &str, max: usize) -> Result<Option<String>> {
    if s.chars().any(breaks_line) {
        return Err(Error::invalid(format!(
            "{field} must be one line of text without control characters"
        )));
    }
    let s = s.trim();
    if s.len() > max {
        return Err(Error::invalid(format!(
            "{field} is {} bytes long; at most {max} are allowed",
            s.len()
        )));
    }
    Ok((!s.is_empty()).then(|| s.to_string()))
}

/// A title: one line, trimmed, at most [`MAX_TITLE_BYTES`]; empty clears it.
pub fn validate_title(s: &str) -> Result<Option<String>> {
    one_line("title", s, MAX_TITLE_BYTES)
}

/// A project name: like a title, and also usable as one directory name.
pub fn validate_project(s: &str) -> Result<Option<String>> {
    let name = one_line("project", s, MAX_PROJECT_BYTES)?;
    if let Some(name) = &name {
        if name.contains('/') {
            return Err(Error::invalid(format!(
                "project {} must not contain `/`",
                preview(name)
            )));
        }
        if name == "." || name == ".." {
            return Err(Error::invalid(format!("project cannot be named {name:?}")));
        }
    }
    Ok(name)
}

/// A workspace: an absolute path without NUL or line breaks; empty clears it.
/// Not trimmed, since spaces are legal at either end of a path.
pub fn validate_workspace(s: &str) -> Result<Option<String>> {
    if s.is_empty() {
        return Ok(None);
    }
    if s.contains(['\0', '\n', '\r']) {
        return Err(Error::invalid(
            "workspace must not contain NUL or line breaks",
        ));
    }
    if !s.starts_with('/') {
        return Err(Error::invalid(format!(
            "workspace {} must be an absolute path",
            preview(s)
        )));
    }
    if s.len() > MAX_WORKSPACE_BYTES {
        return Err(Error::invalid(format!(
            "workspace is {} bytes long; at most {MAX_WORKSPACE_BYTES} are allowed",
            s.len()
        )));
    }
    Ok(Some(s.to_string()))
}

/// The daemon's own mount point: a workspace inside it is refused without
/// being looked at, since a `stat` there would be a request to this daemon.
static OWN_MOUNT: OnceLock<PathBuf> = OnceLock::new();

/// Tells the checks where this daemon is mounted (once, at start).
pub fn set_own_mount(mountpoint: &Path) {
    let _ = OWN_MOUNT.set(mountpoint.to_path_buf());
}

/// A new workspace must be a directory that exists now: the session starts
/// there, and a launch must not fall back to `$HOME` behind the user's back.
///
/// The path is resolved here, link by link, so that no `stat` ever enters
/// this daemon's own mount: a request thread asking its own daemon would
/// wait on itself (a symlink into the mount, on every request thread at
/// once, would stop the daemon).
pub fn check_workspace_dir(dir: &str) -> Result<()> {
    let refuse = |why: String| Err(Error::invalid(format!("workspace {} {why}", preview(dir))));
    let own = OWN_MOUNT.get().filter(|m| !m.as_os_str().is_empty());
    let inside = |p: &Path| own.is_some_and(|m| p.starts_with(m));
    let mut resolved = PathBuf::from("/");
    let mut rest: Vec<PathBuf> = vec![PathBuf::from(dir)];
    let mut links = 0;
    while let Some(path) = rest.pop() {
        let mut parts = path.components();
        let Some(first) = parts.next() else { continue };
        rest.push(parts.as_path().to_path_buf());
        match first {
            std::path::Component::RootDir => resolved = PathBuf::from("/"),
            std::path::Component::ParentDir => {
                resolved.pop();
            }
            std::path::Component::Normal(name) => {
                let next = resolved.join(name);
                if inside(&next) {
                    return refuse("is inside the sessionfs mount".into());
                }
                let meta = match std::fs::symlink_metadata(&next) {
                    Ok(meta) => meta,
                    Err(e) => return refuse(format!("cannot be used: {e}")),
                };
                if meta.file_type().is_symlink() {
                    links += 1;
                    if links > 40 {
                        return refuse("has too many levels of symbolic links".into());
                    }
                    match std::fs::read_link(&next) {
                        Ok(target) => rest.push(target),
                        Err(e) => return refuse(format!("cannot be used: {e}")),
                    }
                } else if !meta.is_dir() && !rest.iter().all(|p| p.as_os_str().is_empty()) {
                    return refuse("cannot be used: a part of it is not a directory".into());
                } else {
                    resolved = next;
                }
            }
            _ => {}
        }
    }
    if inside(&resolved) {
        return refuse("is inside the sessionfs mount".into());
    }
    match std::fs::metadata(&resolved) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => refuse("is not a directory".into()),
        Err(e) => refuse(format!("cannot be used: {e}")),
    }
}

/// What `echo 1 > favourite` writes: `1`/`0`, `true`/`false` or `yes`/`no`,
/// any case, surrounding whitespace allowed.
pub fn parse_flag(bytes: &[u8]) -> Result<bool> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        Error::invalid("expected 1 or 0 (or true/false, yes/no), got non-UTF-8 bytes")
    })?;
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(Error::invalid(format!(
            "expected 1 or 0 (or true/false, yes/no), got {}",
            preview(text)
        ))),
    }
}

/// What `echo text > title` writes: one line of UTF-8, with at most one
/// trailing `\n` or `\r\n`. The result still needs [`validate_title`] or
/// [`validate_project`].
pub fn parse_line_file(bytes: &[u8]) -> Result<String> {
    let text = std::str::from_utf8(bytes).map_err(|_| Error::invalid("the text is not UTF-8"))?;
    let line = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(text);
    if line.contains(['\n', '\r']) {
        return Err(Error::invalid("the file holds one line of text"));
    }
    Ok(line.to_string())
}

/// JSON equality that also takes `1` and `1.0` as the same number, since
/// some tools rewrite numbers when they round-trip a document.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// A text field's new value: a string or null, checked by `validate`.
fn text_field(
    field: &str,
    value: &Value,
    validate: fn(&str) -> Result<Option<String>>,
) -> Result<Option<String>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => validate(s),
        _ => Err(Error::invalid(format!(
            "`{field}` must be a string or null"
        ))),
    }
}

fn flag_field(field: &str, value: &Value) -> Result<bool> {
    value
        .as_bool()
        .ok_or_else(|| Error::invalid(format!("`{field}` must be true or false")))
}

/// The value a text field holds in a served document, normalised the way a
/// new value is, so a save that only re-trims it changes nothing.
fn served_text(doc: &Map<String, Value>, field: &str) -> Option<String> {
    doc.get(field)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn as_object(doc: &Value) -> Map<String, Value> {
    doc.as_object().cloned().unwrap_or_default()
}

/// Parses a whole new `meta.json` against the document it replaces.
///
/// Only `title`, `project`, `favourite`, `archived` and, while the session
/// has never been launched, `workspace` may differ from `old`. A field the
/// save leaves out is left as it is.
pub fn parse_meta_document(old: &Value, new_bytes: &[u8], launched: bool) -> Result<MetaChange> {
    parse_meta_edit(old, old, new_bytes, launched)
}

/// Like [`parse_meta_document`], for an editor that read `seen` while the
/// session's metadata is now `current`.
///
/// `last_activity`, `state` and `pid` move on their own while an editor is
/// open, so a read-only field may hold either its `seen` or its `current`
/// value. A writable field the save leaves at its `seen` value is left as it
/// is, so the save does not undo a change made elsewhere in the meantime.
pub fn parse_meta_edit(
    seen: &Value,
    current: &Value,
    new_bytes: &[u8],
    launched: bool,
) -> Result<MetaChange> {
    let text = std::str::from_utf8(new_bytes)
        .map_err(|e| Error::invalid(format!("meta.json is not UTF-8: {e}")).with_source(e))?;
    // Some editors save a byte order mark; JSON parsers refuse it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let new: Value = serde_json::from_str(text)
        .map_err(|e| Error::invalid(format!("meta.json is not valid JSON: {e}")).with_source(e))?;
    refuse_duplicate_keys(text, "meta.json")?;
    let Value::Object(new) = new else {
        return Err(Error::invalid("meta.json must be one JSON object"));
    };
    let seen = as_object(seen);
    let current = as_object(current);
    let untouched = |field: &str, value: &Value| {
        [&seen, &current]
            .iter()
            .any(|doc| doc.get(field).is_some_and(|old| same(old, value)))
    };

    let mut change = MetaChange::default();
    for (field, value) in &new {
        if untouched(field, value) {
            continue;
        }
        if !WRITABLE.contains(&field.as_str()) {
            if seen.contains_key(field) || current.contains_key(field) {
                return Err(Error::invalid(format!("`{field}` is read-only")));
            }
            return Err(Error::invalid(format!(
                "unknown field `{field}`; only {} can be changed",
                WRITABLE.join(", ")
            )));
        }
        match field.as_str() {
            "title" => {
                let title = text_field(field, value, validate_title)?;
                if title != served_text(&current, field) && title != served_text(&seen, field) {
                    change.title = Some(title);
                }
            }
            "project" => {
                let project = text_field(field, value, validate_project)?;
                if project != served_text(&current, field) && project != served_text(&seen, field) {
                    change.project = Some(project);
                }
            }
            "favourite" => change.favourite = Some(flag_field(field, value)?),
            "archived" => change.archived = Some(flag_field(field, value)?),
            "workspace" => {
                if launched {
                    return Err(Error::invalid(
                        "`workspace` cannot change once the session has been launched",
                    ));
                }
                let workspace = text_field(field, value, validate_workspace)?;
                if let Some(dir) = &workspace {
                    check_workspace_dir(dir)?;
                }
                change.workspace = Some(workspace);
            }
            _ => unreachable!("every writable field is handled"),
        }
    }
    Ok(change)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn old() -> Value {
        json!({
            "key": "claude:abc",
            "engine": "claude",
            "id": "abc",
            "title": "Fix the build",
            "project": "sessionfs",
            "favourite": false,
            "archived": false,
            "workspace": "/home/me/src",
            "created": "2026-01-01T00:00:00.000Z",
            "last_activity": "2026-01-02T00:00:00.000Z",
            "state": "stopped",
            "pid": null,
        })
    }

    fn edit(f: impl FnOnce(&mut Map<String, Value>)) -> Vec<u8> {
        let mut doc = old();
        f(doc.as_object_mut().unwrap());
        serde_json::to_vec_pretty(&doc).unwrap()
    }

    fn refused(result: Result<impl std::fmt::Debug>, needle: &str) {
        let err = result.unwrap_err();
        assert_eq!(err.errno, libc::EINVAL, "{err}");
        assert!(
            err.message.contains(needle),
            "{:?} does not mention {needle:?}",
            err.message
        );
    }

    #[test]
    fn an_unchanged_document_changes_nothing() {
        let bytes = serde_json::to_vec_pretty(&old()).unwrap();
        let change = parse_meta_document(&old(), &bytes, true).unwrap();
        assert!(change.is_empty());
    }

    #[test]
    fn reordered_keys_and_whitespace_change_nothing() {
        // What `jq` or a reformatting editor writes back.
        let text = r#"
            {"pid": null, "state": "stopped", "last_activity": "2026-01-02T00:00:00.000Z",
             "created": "2026-01-01T00:00:00.000Z", "workspace": "/home/me/src",
             "archived": false, "favourite": false, "project": "sessionfs",
             "title": "Fix the build", "id": "abc", "engine": "claude", "key": "claude:abc"}

        "#;
        let change = parse_meta_document(&old(), text.as_bytes(), true).unwrap();
        assert!(change.is_empty());
        let with_bom = format!("\u{feff}{text}");
        assert!(parse_meta_document(&old(), with_bom.as_bytes(), true)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn writable_fields_change() {
        let bytes = edit(|d| {
            d.insert("title".into(), json!("  New title  "));
            d.insert("project".into(), json!("other"));
            d.insert("favourite".into(), json!(true));
            d.insert("archived".into(), json!(true));
            d.insert("workspace".into(), json!("/tmp"));
        });
        let change = parse_meta_document(&old(), &bytes, false).unwrap();
        assert_eq!(
            change,
            MetaChange {
                title: Some(Some("New title".into())),
                project: Some(Some("other".into())),
                favourite: Some(true),
                archived: Some(true),
                workspace: Some(Some("/tmp".into())),
            }
        );
    }

    #[test]
    fn null_and_empty_clear() {
        let bytes = edit(|d| {
            d.insert("title".into(), Value::Null);
            d.insert("project".into(), json!(""));
            d.insert("workspace".into(), json!(null));
        });
        let change = parse_meta_document(&old(), &bytes, false).unwrap();
        assert_eq!(change.title, Some(None));
        assert_eq!(change.project, Some(None));
        assert_eq!(change.workspace, Some(None));
        assert_eq!(change.favourite, None);
    }

    #[test]
    fn a_retrimmed_value_is_no_change() {
        let bytes = edit(|d| {
            d.insert("title".into(), json!(" Fix the build\t"));
        });
        // The tab is refused; plain spaces are only trimmed.
        refused(parse_meta_document(&old(), &bytes, true), "title");
        let bytes = edit(|d| {
            d.insert("title".into(), json!("  Fix the build "));
        });
        assert!(parse_meta_document(&old(), &bytes, true)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn missing_fields_are_left_alone() {
        let change = parse_meta_document(&old(), br#"{"title": "Only this"}"#, true).unwrap();
        assert_eq!(
            change,
            MetaChange {
                title: Some(Some("Only this".into())),
                ..MetaChange::default()
            }
        );
        assert!(parse_meta_document(&old(), b"{}", true).unwrap().is_empty());
    }

    #[test]
    fn read_only_fields_are_refused() {
        for (field, value) in [
            ("key", json!("claude:other")),
            ("engine", json!("codex")),
            ("id", json!("zzz")),
            ("created", json!("2020-01-01T00:00:00.000Z")),
            ("last_activity", json!("2030-01-01T00:00:00.000Z")),
            ("state", json!("live")),
            ("pid", json!(1)),
        ] {
            let bytes = edit(|d| {
                d.insert(field.into(), value);
            });
            refused(
                parse_meta_document(&old(), &bytes, false),
                &format!("`{field}` is read-only"),
            );
        }
    }

    #[test]
    fn unknown_fields_are_refused() {
        let bytes = edit(|d| {
            d.insert("colour".into(), json!("red"));
        });
        refused(
            parse_meta_document(&old(), &bytes, false),
            "unknown field `colour`",
        );
    }

    #[test]
    fn wrong_types_are_refused() {
        for (field, value, expected) in [
            (
                "favourite",
                json!("maybe"),
                "`favourite` must be true or false",
            ),
            ("favourite", json!(1), "`favourite` must be true or false"),
            ("archived", json!(null), "`archived` must be true or false"),
            ("title", json!(42), "`title` must be a string or null"),
            (
                "project",
                json!(["a"]),
                "`project` must be a string or null",
            ),
            (
                "workspace",
                json!({}),
                "`workspace` must be a string or null",
            ),
        ] {
            let bytes = edit(|d| {
                d.insert(field.into(), value);
            });
            refused(parse_meta_document(&old(), &bytes, false), expected);
        }
    }

    #[test]
    fn bad_values_are_refused() {
        for (field, value, needle) in [
            ("title", json!("two\nlines"), "title"),
            ("title", json!("x".repeat(10 << 20)), "title"),
            ("project", json!("a/b"), "project"),
            ("project", json!(".."), "project"),
            ("workspace", json!("relative/dir"), "absolute"),
        ] {
            let bytes = edit(|d| {
                d.insert(field.into(), value);
            });
            refused(parse_meta_document(&old(), &bytes, false), needle);
        }
    }

    #[test]
    fn workspace_is_fixed_after_launch() {
        let bytes = edit(|d| {
            d.insert("workspace".into(), json!("/"));
        });
        refused(parse_meta_document(&old(), &bytes, true), "`workspace`");
        assert!(parse_meta_document(&old(), &bytes, false).is_ok());
    }

    #[test]
    fn unchanged_fields_are_not_revalidated() {
        // A title taken from the engine's store may be anything; keeping it
        // as served is not an edit of it.
        let mut served = old();
        served["title"] = json!("first line\nsecond line");
        served["workspace"] = json!("relative");
        let bytes = serde_json::to_vec(&served).unwrap();
        assert!(parse_meta_document(&served, &bytes, true)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn not_json_is_refused() {
        refused(
            parse_meta_document(&old(), b"{\"title\": ", true),
            "not valid JSON",
        );
        refused(parse_meta_document(&old(), b"", true), "not valid JSON");
        refused(
            parse_meta_document(&old(), b"[1, 2]", true),
            "one JSON object",
        );
        refused(
            parse_meta_document(&old(), b"\"title\"", true),
            "one JSON object",
        );
        refused(
            parse_meta_document(&old(), b"{} {}", true),
            "not valid JSON",
        );
        refused(
            parse_meta_document(&old(), b"{\"title\": \"\xff\"}", true),
            "UTF-8",
        );
    }

    #[test]
    fn duplicate_keys_are_refused() {
        refused(
            parse_meta_document(&old(), br#"{"title": "a", "title": "b"}"#, true),
            "duplicate key \"title\"",
        );
        // Also inside a nested value, and when both copies agree.
        refused(
            parse_meta_document(&old(), br#"{"pid": null, "x": {"a": 1, "a": 1}}"#, true),
            "duplicate key",
        );
        refused(
            parse_meta_document(&old(), br#"{"favourite": false, "favourite": false}"#, true),
            "duplicate key",
        );
        assert!(refuse_duplicate_keys(r#"[{"a": 1}, {"a": 2}]"#, "x").is_ok());
    }

    #[test]
    fn a_workspace_must_exist() {
        for (dir, needle) in [
            ("/nonexistent/sessionfs-test", "cannot be used"),
            ("/dev/null", "not a directory"),
        ] {
            let bytes = edit(|d| {
                d.insert("workspace".into(), json!(dir));
            });
            refused(parse_meta_document(&old(), &bytes, false), needle);
        }
    }

    #[test]
    fn a_workspace_is_resolved_without_entering_the_own_mount() {
        // The only test that sets it; no daemon starts in unit tests.
        let mount = "/nonexistent-sessionfs-own-mount";
        set_own_mount(Path::new(mount));
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = |name: &str, target: &str| {
            let path = dir.path().join(name);
            std::os::unix::fs::symlink(target, &path).unwrap();
            path.to_str().unwrap().to_string()
        };
        let ok = [
            link("to-real", real.to_str().unwrap()),
            link("relative", "real"),
            link("chain", "relative"),
            format!("{}/../real/.", real.display()),
        ];
        for dir in &ok {
            assert_eq!(check_workspace_dir(dir), Ok(()), "{dir}");
        }
        // Not looked at: a stat there would be a request to this daemon.
        for dir in [
            format!("{mount}/shell:x"),
            link("into-mount", &format!("{mount}/x")),
            link(
                "up-into-mount",
                &format!("{}/../../..{mount}", dir.path().display()),
            ),
        ] {
            let err = check_workspace_dir(&dir).unwrap_err();
            assert!(
                err.message.contains("inside the sessionfs mount"),
                "{dir}: {err}"
            );
        }
        let looped = link("loop", "loop");
        assert!(check_workspace_dir(&looped)
            .unwrap_err()
            .message
            .contains("symbolic links"));
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        for dir in [
            file.display().to_string(),
            format!("{}/sub", file.display()),
        ] {
            assert_eq!(check_workspace_dir(&dir).unwrap_err().errno, libc::EINVAL);
        }
    }

    #[test]
    fn numbers_compare_by_value() {
        let mut served = old();
        served["pid"] = json!(4242);
        let bytes = br#"{"pid": 4242.0}"#;
        assert!(parse_meta_document(&served, bytes, true)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_stale_editor_buffer_is_not_an_edit_of_moving_fields() {
        let seen = old();
        let mut current = old();
        current["state"] = json!("live");
        current["pid"] = json!(99);
        current["last_activity"] = json!("2026-01-03T00:00:00.000Z");
        current["favourite"] = json!(true);
        let mut saved = seen.clone();
        saved["title"] = json!("Renamed");
        let bytes = serde_json::to_vec(&saved).unwrap();
        let change = parse_meta_edit(&seen, &current, &bytes, true).unwrap();
        // The favourite set elsewhere meanwhile is kept.
        assert_eq!(
            change,
            MetaChange {
                title: Some(Some("Renamed".into())),
                ..MetaChange::default()
            }
        );
        saved["state"] = json!("busy");
        let bytes = serde_json::to_vec(&saved).unwrap();
        refused(
            parse_meta_edit(&seen, &current, &bytes, true),
            "`state` is read-only",
        );
    }

    #[test]
    fn titles() {
        assert_eq!(validate_title("  hello  ").unwrap(), Some("hello".into()));
        assert_eq!(validate_title("").unwrap(), None);
        assert_eq!(validate_title("   ").unwrap(), None);
        assert_eq!(
            validate_title("ünïcødé ✓").unwrap(),
            Some("ünïcødé ✓".into())
        );
        assert!(validate_title(&"x".repeat(MAX_TITLE_BYTES)).is_ok());
        for bad in [
            "a\nb",
            "a\rb",
            "a\u{0}b",
            "a\tb",
            "\u{1b}[31m",
            "a\u{2028}b",
        ] {
            refused(validate_title(bad), "one line");
        }
        refused(validate_title(&"x".repeat(MAX_TITLE_BYTES + 1)), "1024");
        let huge = "x".repeat(10 << 20);
        let err = validate_title(&huge).unwrap_err();
        assert!(err.message.len() < 200);
    }

    #[test]
    fn projects() {
        assert_eq!(
            validate_project(" web app ").unwrap(),
            Some("web app".into())
        );
        assert_eq!(validate_project("").unwrap(), None);
        assert_eq!(validate_project("...").unwrap(), Some("...".into()));
        refused(validate_project("a/b"), "/");
        refused(validate_project("/"), "/");
        refused(validate_project("."), "\".\"");
        refused(validate_project(" .. "), "\"..\"");
        refused(validate_project("a\nb"), "one line");
        assert!(validate_project(&"p".repeat(MAX_PROJECT_BYTES)).is_ok());
        refused(validate_project(&"p".repeat(MAX_PROJECT_BYTES + 1)), "255");
    }

    #[test]
    fn workspaces() {
        assert_eq!(validate_workspace("/a b/c").unwrap(), Some("/a b/c".into()));
        assert_eq!(validate_workspace("").unwrap(), None);
        refused(validate_workspace("a/b"), "absolute");
        refused(validate_workspace("~/src"), "absolute");
        refused(validate_workspace("/a\nb"), "line breaks");
        refused(validate_workspace("/a\0b"), "NUL");
        refused(
            validate_workspace(&format!("/{}", "d".repeat(MAX_WORKSPACE_BYTES))),
            "4095",
        );
    }

    #[test]
    fn flags() {
        for (bytes, want) in [
            (&b"1"[..], true),
            (b"1\n", true),
            (b"0\n", false),
            (b"true", true),
            (b"TRUE\n", true),
            (b"False", false),
            (b"yes\r\n", true),
            (b" No ", false),
            (b"\t1\n", true),
        ] {
            assert_eq!(parse_flag(bytes).unwrap(), want, "{bytes:?}");
        }
        for bad in [
            &b""[..],
            b"\n",
            b"2",
            b"-1",
            b"maybe",
            b"1 1",
            b"on",
            b"\xff",
            b"10",
        ] {
            refused(parse_flag(bad), "expected 1 or 0");
        }
        let err = parse_flag(&vec![b'x'; 1 << 20]).unwrap_err();
        assert!(err.message.len() < 200);
    }

    #[test]
    fn line_files() {
        assert_eq!(parse_line_file(b"hello\n").unwrap(), "hello");
        assert_eq!(parse_line_file(b"hello\r\n").unwrap(), "hello");
        assert_eq!(parse_line_file(b"hello").unwrap(), "hello");
        assert_eq!(parse_line_file(b"\n").unwrap(), "");
        assert_eq!(parse_line_file(b"").unwrap(), "");
        assert_eq!(parse_line_file(b"  spaced  \n").unwrap(), "  spaced  ");
        refused(parse_line_file(b"one\ntwo\n"), "one line");
        refused(parse_line_file(b"one\n\n"), "one line");
        refused(parse_line_file(b"one\rtwo"), "one line");
        refused(parse_line_file(b"\xffbad\n"), "UTF-8");
    }
}
