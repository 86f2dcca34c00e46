//! Reading opencode's store, `DATA/opencode.db` (SQLite in WAL mode, with
//! `-wal` and `-shm` beside it), without ever writing into it.
//!
//! While the `-shm` file exists (opencode runs, or ran and left it), the
//! database is opened with the URI `file:…?mode=ro&readonly_shm=1`:
//! SQLite then opens neither the database, its `-wal` nor its `-shm` for
//! writing, and never checkpoints. Without a `-shm` (no opencode running),
//! a read-only open would have to make one: the database and its `-wal`
//! are copied into a private scratch directory of sessionfs's own and the
//! copy is read, then removed. A row whose `data` is not JSON is skipped.

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The database's file name in opencode's data directory.
pub const DB_NAME: &str = "opencode.db";

/// One top-level conversation (a subagent's own session has a parent and
/// is not listed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbSession {
    pub id: String,
    pub title: String,
    pub directory: String,
    pub version: String,
    pub time_created: i64,
    pub time_updated: i64,
}

impl DbSession {
    /// A row of `id, title, directory, version, time_created, time_updated`.
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DbSession> {
        Ok(DbSession {
            id: r.get(0)?,
            title: r.get(1)?,
            directory: r.get(2)?,
            version: r.get(3)?,
            time_created: r.get(4)?,
            time_updated: r.get(5)?,
        })
    }
}

/// One message with its parts, in the order opencode made them.
#[derive(Debug, Clone, PartialEq)]
pub struct DbMessage {
    pub id: String,
    pub time_created: i64,
    pub data: Value,
    pub parts: Vec<Value>,
}

/// An open read of the store.
pub struct Db {
    conn: Connection,
    /// The scratch copy read instead of the store, removed on drop.
    copy: Option<PathBuf>,
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Some(dir) = &self.copy {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// `path` as a `file:` URI path: the characters a URI gives a meaning to
/// are escaped.
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for b in path.as_os_str().as_encoded_bytes() {
        match b {
            b'%' | b'?' | b'#' | b'&' | b'=' | b' ' | 0..=0x1f | 0x7f..=0xff => {
                out.push_str(&format!("%{b:02X}"));
            }
            _ => out.push(*b as char),
        }
    }
    out
}

fn sibling(db: &Path, suffix: &str) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

impl Db {
    /// Opens the store in `data_dir` for reading; `scratch` is a private
    /// directory of sessionfs's own where a copy may be made. `Ok(None)`:
    /// there is no store.
    pub fn open(data_dir: &Path, scratch: &Path) -> Result<Option<Db>, String> {
        let db = data_dir.join(DB_NAME);
        if !db.is_file() {
            return Ok(None);
        }
        if sibling(&db, "-shm").exists() {
            let uri = format!("file:{}?mode=ro&readonly_shm=1", uri_path(&db));
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn = Connection::open_with_flags(&uri, flags)
                .map_err(|e| format!("cannot open {} read-only: {e}", db.display()))?;
            let _ = conn.busy_timeout(std::time::Duration::from_millis(500));
            return Ok(Some(Db { conn, copy: None }));
        }
        Self::open_copy(&db, scratch).map(Some)
    }

    /// Copies the database and its `-wal` into a fresh directory under
    /// `scratch` and opens the copy.
    fn open_copy(db: &Path, scratch: &Path) -> Result<Db, String> {
        crate::atomic::private_dir(scratch)
            .map_err(|e| format!("cannot make {}: {e}", scratch.display()))?;
        let dir = crate::atomic::temporary_beside(&scratch.join("read"));
        crate::atomic::private_dir(&dir)
            .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let opened = (|| {
            let copy = dir.join(DB_NAME);
            std::fs::copy(db, &copy).map_err(|e| format!("cannot copy {}: {e}", db.display()))?;
            let wal = sibling(db, "-wal");
            if wal.exists() {
                std::fs::copy(&wal, sibling(&copy, "-wal"))
                    .map_err(|e| format!("cannot copy {}: {e}", wal.display()))?;
            }
            Connection::open_with_flags(
                &copy,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|e| format!("cannot open the copy of {}: {e}", db.display()))
        })();
        match opened {
            Ok(conn) => Ok(Db {
                conn,
                copy: Some(dir),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// The top-level conversations.
    pub fn sessions(&self) -> Result<Vec<DbSession>, String> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, title, directory, version, time_created, time_updated \
                 FROM session WHERE parent_id IS NULL",
            )
            .map_err(|e| e.to_string())?;
        let rows = stmt
            .query_map([], DbSession::from_row)
            .map_err(|e| e.to_string())?;
        Ok(rows
            .filter_map(|r| {
                r.inspect_err(|e| log::debug!("opencode: session row: {e}"))
                    .ok()
            })
            .collect())
    }

    /// Per session: the latest `time_updated` of its messages and parts and
    /// how many there are, which change whenever opencode writes to it.
    pub fn stamps(&self) -> Result<HashMap<String, (i64, i64)>, String> {
        let mut out: HashMap<String, (i64, i64)> = HashMap::new();
        for table in ["message", "part"] {
            let sql = format!(
                "SELECT session_id, MAX(time_updated), COUNT(*) FROM {table} GROUP BY session_id"
            );
            let mut stmt = self.conn.prepare(&sql).map_err(|e| e.to_string())?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })
                .map_err(|e| e.to_string())?;
            for (id, ms, n) in rows.flatten() {
                let e = out.entry(id).or_default();
                e.0 = e.0.max(ms);
                e.1 += n;
            }
        }
        Ok(out)
    }

    /// How many top-level conversations there are, and how many message
    /// and part rows (counted from their indexes).
    pub fn counts(&self) -> Result<(i64, i64), String> {
        self.conn
            .query_row(
                "SELECT (SELECT COUNT(*) FROM session WHERE parent_id IS NULL), \
                 (SELECT COUNT(*) FROM message) + (SELECT COUNT(*) FROM part)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| e.to_string())
    }

    /// The sessions (of any level) with a session, message or part row
    /// updated at or after `since` (ms).
    pub fn touched_since(&self, since: i64) -> Result<BTreeSet<String>, String> {
        let mut out = BTreeSet::new();
        for sql in [
            "SELECT id FROM session WHERE time_updated >= ?1",
            "SELECT DISTINCT session_id FROM message WHERE time_updated >= ?1",
            "SELECT DISTINCT session_id FROM part WHERE time_updated >= ?1",
        ] {
            let mut stmt = self.conn.prepare_cached(sql).map_err(|e| e.to_string())?;
            let rows = stmt
                .query_map([since], |r| r.get::<_, String>(0))
                .map_err(|e| e.to_string())?;
            out.extend(rows.flatten());
        }
        Ok(out)
    }

    /// Calls `each` with the id and title of every top-level conversation
    /// (a title changes without its `time_updated`).
    pub fn each_title(&self, mut each: impl FnMut(&str, &str)) -> Result<(), String> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, title FROM session WHERE parent_id IS NULL")
            .map_err(|e| e.to_string())?;
        let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
        while let Some(r) = rows.next().map_err(|e| e.to_string())? {
            if let (Ok(id), Ok(title)) = (
                r.get_ref(0).and_then(|v| Ok(v.as_str()?)),
                r.get_ref(1).and_then(|v| Ok(v.as_str()?)),
            ) {
                each(id, title);
            }
        }
        Ok(())
    }

    /// Session `id` if it is a top-level conversation.
    pub fn session(&self, id: &str) -> Result<Option<DbSession>, String> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, title, directory, version, time_created, time_updated \
                 FROM session WHERE id = ?1 AND parent_id IS NULL",
            )
            .map_err(|e| e.to_string())?;
        let mut rows = stmt
            .query_map([id], DbSession::from_row)
            .map_err(|e| e.to_string())?;
        rows.next().transpose().map_err(|e| e.to_string())
    }

    /// [`Db::stamps`] of one session: the latest `time_updated` of its
    /// messages and parts and how many there are.
    pub fn stamp(&self, id: &str) -> Result<(i64, i64), String> {
        let mut out = (0, 0);
        for sql in [
            "SELECT MAX(time_updated), COUNT(*) FROM message WHERE session_id = ?1",
            "SELECT MAX(time_updated), COUNT(*) FROM part WHERE session_id = ?1",
        ] {
            let mut stmt = self.conn.prepare_cached(sql).map_err(|e| e.to_string())?;
            let (ms, n): (Option<i64>, i64) = stmt
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(|e| e.to_string())?;
            out.0 = out.0.max(ms.unwrap_or(0));
            out.1 += n;
        }
        Ok(out)
    }

    /// The messages of session `id` with their parts; a row whose `data`
    /// is not a JSON object is skipped.
    pub fn messages(&self, id: &str) -> Result<Vec<DbMessage>, String> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, time_created, data FROM message WHERE session_id = ?1 \
                 ORDER BY time_created, id",
            )
            .map_err(|e| e.to_string())?;
        let rows = stmt
            .query_map([id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(|e| e.to_string())?;
        let mut messages = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        for (mid, time_created, data) in rows.flatten() {
            let Some(data) = json_object(&data) else {
                log::debug!("opencode: message {mid} of {id}: data is not JSON; skipped");
                continue;
            };
            at.insert(mid.clone(), messages.len());
            messages.push(DbMessage {
                id: mid,
                time_created,
                data,
                parts: Vec::new(),
            });
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, message_id, data FROM part WHERE session_id = ?1 ORDER BY id",
            )
            .map_err(|e| e.to_string())?;
        let rows = stmt
            .query_map([id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(|e| e.to_string())?;
        for (pid, mid, data) in rows.flatten() {
            let Some(data) = json_object(&data) else {
                log::debug!("opencode: part {pid} of {id}: data is not JSON; skipped");
                continue;
            };
            if let Some(&i) = at.get(&mid) {
                messages[i].parts.push(data);
            }
        }
        Ok(messages)
    }
}

fn json_object(text: &str) -> Option<Value> {
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(Value::is_object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_paths_escape_what_a_uri_means() {
        assert_eq!(uri_path(Path::new("/a b/c?d#e%")), "/a%20b/c%3Fd%23e%25");
    }
}
