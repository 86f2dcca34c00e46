//! opencode's conversations as files: one JSONL file per top-level session,
//! `MIRROR/sessions/<ses_id>.jsonl`, in sessionfs's own state directory,
//! so the catalog lists, skims, watches and pages them as it does every
//! other store's files. When a session changed in the database, what its
//! file lacks is appended if the file's lines are the start of the
//! session's (a reader following it sees it grow), else the file is
//! rewritten whole, atomically; a session gone from the database takes its
//! file with it. A file's mtime is the last time opencode wrote to its
//! session. The database is read again when its `-wal` or the database
//! file itself changed (size or mtime), looked at whenever the catalog is
//! consulted and on the catalog thread's ticks. A daemon's first read,
//! which writes a file per conversation, is its catalog thread's; each
//! read after it looks only at the sessions written since the last (and
//! at every title), and reads the whole list again only when the row
//! counts say a session or a row went.
//!
//! Lines: a header `{"type":"session","id","cwd","version","timestamp"}`,
//! `{"type":"title","title"}` (again whenever the title changes; the last
//! one counts), and one line per message (the newest only once it is
//! complete): `{"type":"user","id",
//! "timestamp","text":[…]}` or `{"type":"assistant","id","timestamp",
//! "model","provider","tokens","finish","completed","error","parts":[…]}`
//! where parts are `text`, `reasoning` and `tool` (`tool`, `call`,
//! `input`, `status`, `output`, `error`).

use super::opencode_db::{Db, DbMessage, DbSession, DB_NAME};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The directory under the mirror that holds the files.
pub const TOP: &str = "sessions";

/// A text part is cut to this many bytes; a tool's output to
/// [`OUTPUT_MAX`].
const TEXT_MAX: usize = 256 << 10;
const OUTPUT_MAX: usize = 64 << 10;

/// The database is read at most this often while it keeps changing.
const READ_EVERY: Duration = Duration::from_millis(100);

/// The size and mtime (ns) of the database and of its `-wal`.
type FilesStamp = [(u64, i64); 2];

#[derive(Debug, Default)]
struct State {
    /// What the database and its `-wal` were at the last read (none before
    /// the first).
    files: Option<FilesStamp>,
    /// Per session, what its file was made from.
    made: HashMap<String, SessionStamp>,
    /// The rows' stamps of the sessions without a file (a subagent's, one
    /// whose id names no file), and whether each is a top-level one.
    others: HashMap<String, ((i64, i64), bool)>,
    /// What the last read found in all: top-level sessions, message and
    /// part rows, and the latest `time_updated` of any of them. A read
    /// after the first looks only at the sessions with a row updated since
    /// that time, and reads the whole list again only when the counts then
    /// differ from the ones expected (a session or a row deleted, a row
    /// written with an older time).
    sessions: i64,
    rows: i64,
    newest: i64,
    /// How many reads were of the whole list.
    whole_reads: u64,
    read_at: Option<Instant>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SessionStamp {
    title: String,
    time_updated: i64,
    rows: (i64, i64),
}

/// One opencode data directory mirrored into a directory of sessionfs's.
#[derive(Debug)]
pub struct Mirror {
    data_dir: PathBuf,
    dir: PathBuf,
    scratch: PathBuf,
    state: Mutex<State>,
}

fn stamp_of(path: &Path) -> (u64, i64) {
    std::fs::metadata(path).map_or((0, 0), |m| {
        (m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec())
    })
}

impl Mirror {
    /// `dir` holds the mirror's files, `scratch` the private copies a read
    /// may need (both sessionfs's own).
    pub fn new(data_dir: PathBuf, dir: PathBuf, scratch: PathBuf) -> Mirror {
        Mirror {
            data_dir,
            dir,
            scratch,
            state: Mutex::new(State::default()),
        }
    }

    /// The directory the catalog walks (its files are under [`TOP`]).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn files_stamp(&self) -> FilesStamp {
        let db = self.data_dir.join(DB_NAME);
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        [stamp_of(&db), stamp_of(Path::new(&wal))]
    }

    /// Brings the mirror up to date if the database changed since the last
    /// read. A sync running on another thread is not waited for.
    pub fn sync(&self) {
        self.sync_if(true);
    }

    /// [`Mirror::sync`] once the mirror was made whole a first time; before
    /// that, nothing. The first read of a store writes a file per
    /// conversation: work for the catalog's thread, not for a request.
    pub fn sync_if_made(&self) {
        self.sync_if(false);
    }

    fn sync_if(&self, first: bool) {
        let Ok(mut state) = self.state.try_lock() else {
            return;
        };
        if !first && state.files.is_none() {
            return;
        }
        let now = self.files_stamp();
        if state.files == Some(now) {
            return;
        }
        if state.read_at.is_some_and(|t| t.elapsed() < READ_EVERY) {
            return;
        }
        state.read_at = Some(Instant::now());
        match self.sync_now(&mut state) {
            Ok(()) => state.files = Some(now),
            Err(e) => {
                log::warn!("opencode store {}: {e}", self.data_dir.display());
                // Read whole again, by the catalog's thread.
                state.files = None;
            }
        }
    }

    fn sync_now(&self, state: &mut State) -> Result<(), String> {
        let files = self.dir.join(TOP);
        crate::atomic::private_dir(&files)
            .map_err(|e| format!("cannot make {}: {e}", files.display()))?;
        let Some(db) = Db::open(&self.data_dir, &self.scratch)? else {
            self.remove_all_but(&files, &HashMap::new(), state);
            state.others.clear();
            (state.sessions, state.rows, state.newest) = (0, 0, 0);
            return Ok(());
        };
        if state.files.is_some() && self.sync_changed(&db, &files, state)? {
            return Ok(());
        }
        self.sync_all(&db, &files, state)
    }

    /// Reads every session's list and stamps, and brings each file up to
    /// date.
    fn sync_all(&self, db: &Db, files: &Path, state: &mut State) -> Result<(), String> {
        state.whole_reads += 1;
        let sessions = db.sessions()?;
        let mut stamps = db.stamps()?;
        let mut live = HashMap::new();
        let mut others = HashMap::new();
        state.newest = stamps.values().map(|s| s.0).max().unwrap_or(0);
        state.rows = stamps.values().map(|s| s.1).sum();
        state.sessions = sessions.len() as i64;
        for s in &sessions {
            state.newest = state.newest.max(s.time_updated);
            let rows = stamps.remove(&s.id).unwrap_or_default();
            live.insert(s.id.clone(), ());
            if !self.update(db, files, s, rows, state, true)? {
                others.insert(s.id.clone(), (rows, true));
            }
        }
        others.extend(stamps.into_iter().map(|(id, rows)| (id, (rows, false))));
        state.others = others;
        self.remove_all_but(files, &live, state);
        Ok(())
    }

    /// Brings the files of the sessions written since the last read up to
    /// date; `false` when the counts say more changed (the whole list is
    /// to be read).
    fn sync_changed(&self, db: &Db, files: &Path, state: &mut State) -> Result<bool, String> {
        // Rows written within the same millisecond as the newest one seen
        // may have come after the last read: that time is looked at again.
        let mut touched = db.touched_since(state.newest)?;
        db.each_title(|id, title| {
            if state.made.get(id).is_none_or(|m| m.title != title) && !touched.contains(id) {
                touched.insert(id.to_string());
            }
        })?;
        let (mut sessions, mut rows, mut newest) = (state.sessions, state.rows, state.newest);
        for id in &touched {
            let stamp = db.stamp(id)?;
            newest = newest.max(stamp.0);
            let (old_rows, known) = match (state.made.get(id), state.others.get(id)) {
                (Some(m), _) => (m.rows.1, true),
                (None, Some((r, top))) => (r.1, *top),
                (None, None) => (0, false),
            };
            rows += stamp.1 - old_rows;
            match db.session(id)? {
                Some(s) => {
                    newest = newest.max(s.time_updated);
                    if !known {
                        sessions += 1;
                    }
                    if self.update(db, files, &s, stamp, state, false)? {
                        state.others.remove(id);
                    } else {
                        state.others.insert(id.clone(), (stamp, true));
                    }
                }
                None => {
                    state.others.insert(id.clone(), (stamp, false));
                }
            }
        }
        if db.counts()? != (sessions, rows) {
            return Ok(false);
        }
        (state.sessions, state.rows, state.newest) = (sessions, rows, newest);
        Ok(true)
    }

    /// Brings the file of session `s` (`rows`: its stamp) up to date if it
    /// was made from anything else; `false` when it has none (an id that
    /// names no file, or its messages could not be read), an error when it
    /// could not be written. `check`: a file made from the same is looked
    /// for (it may have been removed).
    fn update(
        &self,
        db: &Db,
        files: &Path,
        s: &DbSession,
        rows: (i64, i64),
        state: &mut State,
        check: bool,
    ) -> Result<bool, String> {
        if !usable_id(&s.id) {
            return Ok(false);
        }
        let stamp = SessionStamp {
            title: s.title.clone(),
            time_updated: s.time_updated,
            rows,
        };
        let path = files.join(format!("{}.jsonl", s.id));
        if state.made.get(&s.id) == Some(&stamp) && (!check || path.exists()) {
            return Ok(true);
        }
        let messages = match db.messages(&s.id) {
            Ok(m) => m,
            Err(e) => {
                log::warn!("opencode session {}: {e}", s.id);
                state.made.remove(&s.id);
                return Ok(false);
            }
        };
        state.made.remove(&s.id);
        write_mirror(&path, s, &messages)
            .and_then(|()| set_mtime(&path, s.time_updated.max(rows.0)))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        state.made.insert(s.id.clone(), stamp);
        Ok(true)
    }

    /// Removes the files of sessions not in `live`.
    fn remove_all_but(&self, files: &Path, live: &HashMap<String, ()>, state: &mut State) {
        state.made.retain(|id, _| live.contains_key(id));
        let Ok(entries) = std::fs::read_dir(files) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
                continue;
            };
            if !live.contains_key(id) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// Gives a mirror file the time opencode last wrote to its session
/// (ms), so a conversation's last activity is its own, not the time its
/// file was made.
fn set_mtime(path: &Path, ms: i64) -> std::io::Result<()> {
    let Ok(ms) = u64::try_from(ms) else {
        return Ok(());
    };
    if ms == 0 {
        return Ok(());
    }
    std::fs::File::open(path)?.set_modified(std::time::UNIX_EPOCH + Duration::from_millis(ms))
}

/// An id that names a file and a session key: opencode's are `ses_`
/// followed by letters and digits.
fn usable_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| String::new(), |t| t.to_string())
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The start of a title line.
const TITLE_LINE: &[u8] = b"{\"type\":\"title\"";

/// The mirror's lines of one session but its title: the header, then a
/// line per message. The newest message is left out while it is being
/// written (an answer not complete yet, a prompt with no text yet), so the
/// lines of a session only grow while it runs.
pub fn mirror_body(session: &DbSession, messages: &[DbMessage]) -> Vec<u8> {
    let mut out = Vec::new();
    let header = json!({
        "type": "session",
        "id": session.id,
        "cwd": session.directory,
        "version": session.version,
        "timestamp": rfc3339(session.time_created),
    });
    out.extend_from_slice(&typed_line(header));
    for (i, m) in messages.iter().enumerate() {
        let newest = i + 1 == messages.len();
        if newest && !is_written(m) {
            break;
        }
        if let Some(line) = message_line(m) {
            out.extend_from_slice(&typed_line(line));
        }
    }
    out
}

/// Whether a message is all there: an answer that completed, a prompt
/// with its text.
fn is_written(m: &DbMessage) -> bool {
    match str_of(&m.data, "role") {
        Some("assistant") => m.data.pointer("/time/completed").is_some(),
        Some("user") => m.parts.iter().any(|p| str_of(p, "type") == Some("text")),
        _ => true,
    }
}

/// The title line of a session (none while opencode's placeholder stands).
fn title_line(session: &DbSession) -> Vec<u8> {
    typed_line(json!({"type": "title", "title": session.title}))
}

/// One line of JSON with its `type` first (a reader tells a line's kind
/// from its first bytes, without parsing it), and a newline.
fn typed_line(mut v: Value) -> Vec<u8> {
    let kind = v
        .as_object_mut()
        .and_then(|o| o.remove("type"))
        .unwrap_or(Value::Null);
    let rest = v.to_string();
    let mut out = format!("{{\"type\":{kind}").into_bytes();
    match rest.strip_prefix('{') {
        Some("}") | None => out.push(b'}'),
        Some(fields) => {
            out.push(b',');
            out.extend_from_slice(fields.as_bytes());
        }
    }
    out.push(b'\n');
    out
}

/// The whole mirror file of one session, made afresh: the header, the
/// title, the messages.
pub fn mirror_text(session: &DbSession, messages: &[DbMessage]) -> Vec<u8> {
    let body = mirror_body(session, messages);
    let header_end = memchr::memchr(b'\n', &body).map_or(body.len(), |i| i + 1);
    let mut out = body[..header_end].to_vec();
    out.extend_from_slice(&title_line(session));
    out.extend_from_slice(&body[header_end..]);
    out
}

/// A mirror file's lines but its titles, and its last title line.
fn split_titles(file: &[u8]) -> (Vec<u8>, Option<&[u8]>) {
    let mut body = Vec::with_capacity(file.len());
    let mut title = None;
    for line in file.split_inclusive(|b| *b == b'\n') {
        if line.starts_with(TITLE_LINE) {
            title = Some(line);
        } else {
            body.extend_from_slice(line);
        }
    }
    (body, title)
}

/// Brings one session's mirror file up to date: what it lacks is appended
/// when its lines are the start of the session's (new messages, a new
/// title), so a reader following the file sees it grow; anything else
/// replaces the file whole, atomically.
fn write_mirror(path: &Path, session: &DbSession, messages: &[DbMessage]) -> std::io::Result<()> {
    use std::io::Write;
    let body = mirror_body(session, messages);
    let title = title_line(session);
    if let Ok(old) = std::fs::read(path) {
        let (old_body, old_title) = split_titles(&old);
        let complete = old.ends_with(b"\n");
        if complete && body.starts_with(&old_body) {
            let mut add = body[old_body.len()..].to_vec();
            if old_title != Some(title.as_slice()) {
                add.extend_from_slice(&title);
            }
            if add.is_empty() {
                return Ok(());
            }
            let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
            // One write: a reader sees whole lines, or a last one unfinished.
            return f.write_all(&add);
        }
    }
    crate::atomic::replace_with(
        path,
        &mirror_text(session, messages),
        0o600,
        crate::atomic::Durability::Unsynced,
    )
}

/// One message's line, or `None` for a role it does not know.
fn message_line(m: &DbMessage) -> Option<Value> {
    let data = &m.data;
    let created = data
        .pointer("/time/created")
        .and_then(Value::as_i64)
        .unwrap_or(m.time_created);
    match str_of(data, "role")? {
        "user" => {
            let text: Vec<Value> = m
                .parts
                .iter()
                .filter(|p| str_of(p, "type") == Some("text"))
                .filter(|p| !p.get("synthetic").and_then(Value::as_bool).unwrap_or(false))
                .filter_map(|p| str_of(p, "text"))
                .map(|t| Value::String(cut(t, TEXT_MAX)))
                .collect();
            Some(json!({"type": "user", "id": m.id, "timestamp": rfc3339(created), "text": text}))
        }
        "assistant" => {
            let parts: Vec<Value> = m.parts.iter().filter_map(part_value).collect();
            let mut line = Map::new();
            line.insert("type".into(), json!("assistant"));
            line.insert("id".into(), json!(m.id));
            line.insert("timestamp".into(), json!(rfc3339(created)));
            line.insert(
                "model".into(),
                data.get("modelID").cloned().unwrap_or(Value::Null),
            );
            line.insert(
                "provider".into(),
                data.get("providerID").cloned().unwrap_or(Value::Null),
            );
            line.insert(
                "tokens".into(),
                data.get("tokens").cloned().unwrap_or(Value::Null),
            );
            line.insert(
                "finish".into(),
                data.get("finish").cloned().unwrap_or(Value::Null),
            );
            let completed = data.pointer("/time/completed").and_then(Value::as_i64);
            line.insert(
                "completed".into(),
                completed.map_or(Value::Null, |ms| json!(rfc3339(ms))),
            );
            if let Some(error) = data.get("error") {
                let text = error
                    .pointer("/data/message")
                    .and_then(Value::as_str)
                    .or_else(|| str_of(error, "name"))
                    .unwrap_or("error");
                line.insert("error".into(), json!(cut(text, TEXT_MAX)));
            }
            line.insert("parts".into(), Value::Array(parts));
            Some(Value::Object(line))
        }
        _ => None,
    }
}

/// A part as the mirror keeps it; `None` for parts that show nothing
/// (step marks, snapshots, patches).
fn part_value(p: &Value) -> Option<Value> {
    match str_of(p, "type")? {
        "text" if !p.get("synthetic").and_then(Value::as_bool).unwrap_or(false) => {
            Some(json!({"type": "text", "text": cut(str_of(p, "text")?, TEXT_MAX)}))
        }
        "reasoning" => {
            Some(json!({"type": "reasoning", "text": cut(str_of(p, "text")?, TEXT_MAX)}))
        }
        "tool" => {
            let state = p.get("state").cloned().unwrap_or(Value::Null);
            let mut input = state.get("input").cloned().unwrap_or(Value::Null);
            if input.to_string().len() > OUTPUT_MAX {
                input = json!(cut(&input.to_string(), OUTPUT_MAX));
            }
            Some(json!({
                "type": "tool",
                "tool": str_of(p, "tool").unwrap_or("?"),
                "call": str_of(p, "callID"),
                "input": input,
                "status": str_of(&state, "status"),
                "output": str_of(&state, "output").map(|o| cut(o, OUTPUT_MAX)),
                "error": str_of(&state, "error").map(|o| cut(o, OUTPUT_MAX)),
            }))
        }
        _ => None,
    }
}

/// Makes the mirror of `data_dir` in `dir` once, now (tests and one-shot
/// readers).
pub fn sync_once(data_dir: &Path, dir: &Path, scratch: &Path) -> Mirror {
    let m = Mirror::new(
        data_dir.to_path_buf(),
        dir.to_path_buf(),
        scratch.to_path_buf(),
    );
    m.sync();
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::lock;
    use crate::transcript::StoreKind;

    /// The sessions the mirror has a file of.
    fn made_ids(m: &Mirror) -> Vec<String> {
        let mut ids: Vec<String> = lock(&m.state).made.keys().cloned().collect();
        ids.sort();
        ids
    }

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real/opencode")
    }

    #[test]
    fn the_recorded_store_is_mirrored_one_file_per_session() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::copy(fixture().join(DB_NAME), data.join(DB_NAME)).unwrap();
        let state = tmp.path().join("state");
        let m = sync_once(&data, &state.join("mirror"), &state.join("scratch"));
        let ids = made_ids(&m);
        assert_eq!(ids.len(), 4, "{ids:?}");
        for id in &ids {
            let text =
                std::fs::read_to_string(state.join("mirror").join(TOP).join(format!("{id}.jsonl")))
                    .unwrap();
            let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
            assert_eq!(first["type"], "session");
            assert_eq!(first["id"], id.as_str());
            assert!(text.contains("\"model\":\"fake-model\""), "{text}");
            assert!(text.contains("\"tokens\":{"), "{text}");
        }
        // The scratch copy is gone once read.
        let left: Vec<_> = std::fs::read_dir(state.join("scratch")).unwrap().collect();
        assert!(left.is_empty());
    }

    /// Every file of `dir`: its name, size and a digest of its bytes.
    fn files_of(dir: &Path) -> Vec<(String, usize, u64)> {
        let mut out: Vec<(String, usize, u64)> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                let bytes = std::fs::read(e.path()).unwrap_or_default();
                let name = e.file_name().to_string_lossy().into_owned();
                (name, bytes.len(), xxhash_rust::xxh3::xxh3_64(&bytes))
            })
            .collect();
        out.sort();
        out
    }

    /// Names the store the helper below writes into, as opencode would.
    const WRITER_VAR: &str = "SESSIONFS_TEST_OPENCODE_WRITER";

    /// A helper run as a process of its own by the test below (SQLite
    /// shares one `-shm` mapping among a process's connections, so a
    /// writer in the test's own process would write for the reader): puts
    /// the store in WAL mode with rows whose data is not JSON, says
    /// `ready SESSION`, and keeps its connection open until stdin closes.
    /// Does nothing unless [`WRITER_VAR`] is set.
    #[test]
    fn opencode_writer_helper() {
        let Ok(dir) = std::env::var(WRITER_VAR) else {
            return;
        };
        let writer = rusqlite::Connection::open(Path::new(&dir).join(DB_NAME)).unwrap();
        writer
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        let session: String = writer
            .query_row(
                "SELECT id FROM session ORDER BY time_created LIMIT 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        writer
            .execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data) \
                 VALUES ('msg_zzbad', ?1, 9999999999999, 9999999999999, 'not json {')",
                [&session],
            )
            .unwrap();
        let good: String = writer
            .query_row(
                "SELECT id FROM message WHERE session_id = ?1 LIMIT 1",
                [&session],
                |r| r.get(0),
            )
            .unwrap();
        writer
            .execute(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) \
                 VALUES ('prt_zzbad', ?1, ?2, 1, 1, '{\"type\":\"text\",\"text\":')",
                [&good, &session],
            )
            .unwrap();
        println!("ready {session}");
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
        // Ended as a killed opencode would: `-wal` and `-shm` left.
        std::process::exit(0);
    }

    #[test]
    fn the_store_is_read_without_a_byte_of_it_changed_and_bad_rows_are_skipped() {
        use std::io::BufRead;
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::copy(fixture().join(DB_NAME), data.join(DB_NAME)).unwrap();
        // opencode running: another process holds the store open in WAL
        // mode (its `-wal` and `-shm` there).
        let mut writer = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "catalog::opencode_mirror::tests::opencode_writer_helper",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WRITER_VAR, &data)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(writer.stdout.take().unwrap());
        let session = loop {
            let mut line = String::new();
            assert!(out.read_line(&mut line).unwrap() > 0, "the writer ended");
            // After the harness's "test NAME ... " on the same line.
            if let Some((_, id)) = line.trim().split_once("ready ") {
                break id.to_string();
            }
        };
        assert!(data.join("opencode.db-wal").exists());
        assert!(data.join("opencode.db-shm").exists());
        // The same store with no `-shm` (no opencode running).
        let data2 = tmp.path().join("data2");
        std::fs::create_dir(&data2).unwrap();
        for name in [DB_NAME, "opencode.db-wal"] {
            std::fs::copy(data.join(name), data2.join(name)).unwrap();
        }
        for dir in [&data, &data2] {
            let before = files_of(dir);
            let state = tmp.path().join(format!(
                "state-{}",
                dir.file_name().unwrap().to_string_lossy()
            ));
            let m = sync_once(dir, &state.join("mirror"), &state.join("scratch"));
            assert_eq!(made_ids(&m).len(), 4, "{}", dir.display());
            let text = std::fs::read_to_string(
                state
                    .join("mirror")
                    .join(TOP)
                    .join(format!("{session}.jsonl")),
            )
            .unwrap();
            // The good rows are there, the bad ones are not.
            assert!(text.contains("\"type\":\"assistant\""), "{text}");
            assert!(!text.contains("msg_zzbad"), "{text}");
            assert_eq!(files_of(dir), before, "{} changed", dir.display());
            // Read again: still nothing written.
            lock(&m.state).files = None;
            lock(&m.state).made.clear();
            lock(&m.state).read_at = None;
            m.sync();
            assert_eq!(made_ids(&m).len(), 4, "{}", dir.display());
            assert_eq!(files_of(dir), before, "{} changed", dir.display());
        }
        drop(writer.stdin.take());
        writer.wait().unwrap();
    }

    #[test]
    fn new_messages_and_titles_are_appended_and_anything_else_rewrites() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::copy(fixture().join(DB_NAME), data.join(DB_NAME)).unwrap();
        let state = tmp.path().join("state");
        let m = sync_once(&data, &state.join("mirror"), &state.join("scratch"));
        let id = "ses_dc6575822ffeTWJ17WUcNZlj0I";
        let file = state.join("mirror").join(TOP).join(format!("{id}.jsonl"));
        let ino = || std::fs::metadata(&file).unwrap().ino();
        let first = std::fs::read(&file).unwrap();
        let first_ino = ino();
        // The file's time is the session's last write.
        let mtime = |f: &Path| crate::clock::path_mtime_ms(f).unwrap();
        assert_eq!(mtime(&file), 1796263686303);
        let db = rusqlite::Connection::open(data.join(DB_NAME)).unwrap();
        let resync = || {
            lock(&m.state).read_at = None;
            m.sync();
        };
        // A prompt, then its answer: appended, the file's inode kept.
        db.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES \
             ('msg_zz1', ?1, 1796263999000, 1796263999000, '{\"role\":\"user\",\"time\":{\"created\":1796263999000}}')",
            [id],
        )
        .unwrap();
        resync();
        // A prompt without its text yet is not there.
        assert_eq!(std::fs::read(&file).unwrap(), first);
        db.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES \
             ('prt_zz1', 'msg_zz1', ?1, 1796263999001, 1796263999001, '{\"type\":\"text\",\"text\":\"one more\"}')",
            [id],
        )
        .unwrap();
        resync();
        let grown = std::fs::read(&file).unwrap();
        assert!(
            grown.starts_with(&first) && grown.len() > first.len(),
            "{}\n---\n{}",
            String::from_utf8_lossy(&first),
            String::from_utf8_lossy(&grown)
        );
        assert!(String::from_utf8_lossy(&grown).contains("one more"));
        assert_eq!(ino(), first_ino);
        assert_eq!(mtime(&file), 1796263999001);
        // A new title: a title line appended.
        db.execute("UPDATE session SET title = 'Renamed' WHERE id = ?1", [id])
            .unwrap();
        resync();
        let titled = std::fs::read(&file).unwrap();
        assert!(titled.starts_with(&grown));
        assert!(titled.ends_with(b"{\"type\":\"title\",\"title\":\"Renamed\"}\n"));
        assert_eq!(ino(), first_ino);
        let idx = crate::transcript::TurnIndex::build(StoreKind::Opencode, &file).unwrap();
        assert_eq!(idx.title().as_deref(), Some("Renamed"));
        assert_eq!(idx.turn_count(), 2);
        // Each of those read only the sessions written since the last.
        assert_eq!(lock(&m.state).whole_reads, 1);
        // A message gone (an undo): the whole list read, the file made
        // afresh.
        db.execute("DELETE FROM message WHERE id = 'msg_zz1'", [])
            .unwrap();
        resync();
        assert_eq!(lock(&m.state).whole_reads, 2);
        assert_ne!(ino(), first_ino);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("one more"), "{text}");
        assert_eq!(
            crate::transcript::TurnIndex::build(StoreKind::Opencode, &file)
                .unwrap()
                .title()
                .as_deref(),
            Some("Renamed")
        );
    }
}
