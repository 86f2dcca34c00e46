//! Slot records and hosted-run transcripts (SPEC §9).
//!
//! Slot records say which conversation occupies each (world, dock slot) on
//! this host. Each world is one JSON file, `slots/<guid>.json`, mapping slot
//! number → record; every change is read-modify-write under an exclusive
//! `flock` on `slots/.lock`, written to a temporary file, fsynced and renamed,
//! so two daemons on one host never lose each other's writes and a crash
//! leaves the old or the new file. Reads go to disk each time, so another
//! daemon's change is seen at once.
//!
//! Hosted-run transcripts, `agent-transcripts/<id>.jsonl`, are append-only.
//! Each entry is appended whole or not at all: under an exclusive `flock` on
//! the transcript, with one `write` to an `O_APPEND` descriptor, truncated back
//! if that write fails or comes up short.
//!
//! Either lock is waited for a bounded time (see [`crate::filelock`]); past
//! it the change fails with ETIMEDOUT and nothing stored changes.

use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::filelock::{lock_within, SharedLock, DIR_LOCK_WAIT, LOCK_WAIT};
use crate::sync::lock;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Largest entry accepted, counting the line as written (with `ts_ms` and its newline).
pub const MAX_ENTRY_BYTES: u64 = 1 << 20;
/// Largest a transcript may grow.
pub const MAX_TRANSCRIPT_BYTES: u64 = 256 << 20;

/// Largest slot record a writer may send (a real one is a few hundred bytes).
pub const MAX_SLOT_RECORD_BYTES: u64 = 1 << 20;

/// Most records one world holds (a dock has a handful of slots).
pub const MAX_WORLD_SLOTS: usize = 1024;

/// Largest a world's file may be: every change reads and rewrites it whole.
pub const MAX_WORLD_BYTES: u64 = 4 << 20;

/// The longest a hosted session id may be.
const MAX_SESSION_ID: usize = 128;

/// The conversation recorded for one (world, slot).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlotRecord {
    pub session_id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub workspace: String,
    #[serde(default)]
    pub last_spawn: String,
    #[serde(default)]
    pub harness: String,
}

impl SlotRecord {
    /// The record as the slot file reads: one JSON object and a newline.
    pub fn to_json_line(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).expect("slot record serialises");
        out.push(b'\n');
        out
    }
}

/// A world GUID, `8-4-4-4-12` hex digits, returned in lowercase. Braces and
/// other spellings are refused so one world has exactly one name.
pub fn parse_world(name: &str) -> Result<String> {
    // 36 characters of a uuid are its hyphenated form, the only one taken.
    if name.len() == 36 && uuid::Uuid::try_parse(name).is_ok() {
        Ok(name.to_ascii_lowercase())
    } else {
        Err(Error::invalid(format!(
            "world {name:?} is not a GUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, hex digits)"
        )))
    }
}

/// A dock slot: a positive integer in plain decimal, without sign or leading zeros.
pub fn parse_slot(name: &str) -> Result<u32> {
    let bad = |why: &str| Error::invalid(format!("slot {name:?} {why}"));
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("is not a positive decimal integer"));
    }
    if name == "0" {
        return Err(bad("is not positive; slots start at 1"));
    }
    if name.starts_with('0') {
        return Err(bad("has leading zeros"));
    }
    name.parse::<u32>()
        .map_err(|_| bad("is too large (at most 4294967295)"))
}

/// A hosted session id, `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`. An address with
/// `/` (a DotBot `<agent>/<conversation>`) cannot be a file name and is refused.
pub fn parse_session_id(name: &str) -> Result<&str> {
    let bytes = name.as_bytes();
    let well_formed = !bytes.is_empty()
        && bytes.len() <= MAX_SESSION_ID
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if well_formed {
        Ok(name)
    } else {
        Err(Error::invalid(format!(
            "session id {} must match [A-Za-z0-9][A-Za-z0-9._-]{{0,127}}",
            crate::input_checks::preview(name)
        )))
    }
}

type World = BTreeMap<u32, SlotRecord>;

#[derive(Debug)]
pub struct SlotStore {
    slots_dir: PathBuf,
    transcripts_dir: PathBuf,
    max_entry: u64,
    max_transcript: u64,
    max_world_slots: usize,
    max_world_bytes: u64,
    /// The last accepted hosted-run entry; the daemon's own view, not shared.
    agent_run: Mutex<Option<Value>>,
    /// `slots/.lock`, which every writer of a world takes.
    lock: SharedLock,
}

fn private_dir(path: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| Error::io(&format!("cannot create {}", path.display()), &e))
}

/// The world in `path`, read only up to `max_bytes`: a larger file (which
/// this daemon never writes) is refused and left as it is.
fn load_world(path: &Path, max_bytes: u64) -> Result<World> {
    let failed = |e: std::io::Error| Error::io(&format!("cannot read {}", path.display()), &e);
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(World::new()),
        Err(e) => return Err(failed(e)),
    };
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > max_bytes {
        return Err(Error::new(
            libc::EFBIG,
            format!(
                "{} is over the {max_bytes} bytes a world may hold; it is left as it is",
                path.display()
            ),
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::new(libc::EIO, format!("{} is damaged: {e}", path.display())).with_source(e)
    })
}

/// What kind of JSON value this is, for error messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks a slot record as written by a caller and keeps only its four fields.
fn record_from_json(bytes: &[u8]) -> Result<SlotRecord> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        Error::invalid(format!("slot record is not valid JSON: {e}")).with_source(e)
    })?;
    let Value::Object(obj) = value else {
        return Err(Error::invalid(format!(
            "slot record must be a JSON object, got {}",
            kind(&value)
        )));
    };
    // Same text as parsed above, so only a duplicate key can fail here.
    crate::input_checks::refuse_duplicate_keys(
        std::str::from_utf8(bytes).unwrap_or_default(),
        "slot record",
    )?;
    let session_id = match obj.get("sessionId") {
        // A conversation id names files (a transcript, a resume): no path
        // tricks, control characters or unbounded length. Claude's and
        // Codex's ids are UUIDs.
        Some(Value::String(s)) if !s.is_empty() => parse_session_id(s)
            .map_err(|e| Error::invalid(format!("slot record's \"sessionId\": {}", e.message)))?
            .to_string(),
        Some(Value::String(_)) => {
            return Err(Error::invalid("slot record's \"sessionId\" is empty"))
        }
        Some(other) => {
            return Err(Error::invalid(format!(
                "slot record's \"sessionId\" must be a string, got {}",
                kind(other)
            )))
        }
        None => return Err(Error::invalid("slot record needs a \"sessionId\"")),
    };
    // JSON null stands for "not given", like a nil field from the scripting API.
    let optional = |field: &str| -> Result<String> {
        match obj.get(field) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(Error::invalid(format!(
                "slot record's {field:?} must be a string, got {}",
                kind(other)
            ))),
        }
    };
    Ok(SlotRecord {
        session_id,
        name: optional("name")?,
        workspace: optional("workspace")?,
        harness: optional("harness")?,
        last_spawn: String::new(),
    })
}

/// Checks one transcript entry and renders it as the line to append.
fn entry_from_json(line: &[u8], ts_ms: u64) -> Result<Map<String, Value>> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| Error::invalid(format!("entry is not valid JSON: {e}")).with_source(e))?;
    let Value::Object(mut obj) = value else {
        return Err(Error::invalid(format!(
            "entry must be a JSON object, got {}",
            kind(&value)
        )));
    };
    match obj.get("type") {
        Some(Value::String(_)) => {}
        Some(other) => {
            return Err(Error::invalid(format!(
                "entry's \"type\" must be a string, got {}",
                kind(other)
            )))
        }
        None => return Err(Error::invalid("entry needs a string \"type\"")),
    }
    obj.insert("ts_ms".into(), Value::from(ts_ms));
    Ok(obj)
}

/// Length of the file up to and including its last newline: what readers
/// may see, since anything after it is an entry still being written.
fn complete_len(file: &File, len: u64) -> std::io::Result<u64> {
    const CHUNK: u64 = 64 * 1024;
    let mut end = len;
    let mut buf = vec![0u8; CHUNK.min(len) as usize];
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(i) = memchr::memrchr(b'\n', chunk) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

impl SlotStore {
    /// A store under `state_dir` with the limits of SPEC §9 (1 MiB, 256 MiB)
    /// and of docs/SEMANTICS.md (1024 slots and 4 MiB a world).
    pub fn open(state_dir: &Path) -> SlotStore {
        Self::with_limits(state_dir, MAX_ENTRY_BYTES, MAX_TRANSCRIPT_BYTES)
    }

    /// A store with other entry and transcript limits, in bytes.
    pub fn with_limits(state_dir: &Path, max_entry: u64, max_transcript: u64) -> SlotStore {
        SlotStore {
            slots_dir: state_dir.join("slots"),
            lock: SharedLock::new(state_dir.join("slots/.lock"), "the slot records' lock"),
            transcripts_dir: state_dir.join("agent-transcripts"),
            max_entry,
            max_transcript,
            max_world_slots: MAX_WORLD_SLOTS,
            max_world_bytes: MAX_WORLD_BYTES,
            agent_run: Mutex::new(None),
        }
    }

    /// The same store with other world limits: records, and bytes of its file.
    pub fn with_world_limits(self, slots: usize, bytes: u64) -> SlotStore {
        SlotStore {
            max_world_slots: slots,
            max_world_bytes: bytes,
            ..self
        }
    }

    fn load_world(&self, path: &Path) -> Result<World> {
        load_world(path, self.max_world_bytes)
    }

    fn world_path(&self, world: &str) -> PathBuf {
        self.slots_dir.join(format!("{world}.json"))
    }

    fn check_slot(slot: u32) -> Result<()> {
        if slot == 0 {
            Err(Error::invalid("slot 0 is not positive; slots start at 1"))
        } else {
            Ok(())
        }
    }

    /// The record for (world, slot), `None` when there is none.
    pub fn get(&self, world: &str, slot: u32) -> Result<Option<SlotRecord>> {
        let world = parse_world(world)?;
        Self::check_slot(slot)?;
        Ok(self.load_world(&self.world_path(&world))?.remove(&slot))
    }

    /// Replaces the record for (world, slot) with the one in `json`, stamped now.
    pub fn put(&self, world: &str, slot: u32, json: &[u8]) -> Result<SlotRecord> {
        let world = parse_world(world)?;
        Self::check_slot(slot)?;
        if json.len() as u64 > MAX_SLOT_RECORD_BYTES {
            return Err(Error::too_big(
                &format!("slot record {world}/{slot}"),
                json.len() as u64,
                MAX_SLOT_RECORD_BYTES,
            ));
        }
        let mut record = record_from_json(json)?;
        record.last_spawn = format!("{:.3}", jiff::Timestamp::now());
        let most = self.max_world_slots;
        self.update(&world, LOCK_WAIT, |map| {
            if map.len() >= most && !map.contains_key(&slot) {
                return Err(Error::new(
                    libc::ENOSPC,
                    format!(
                        "world {world} holds {most} records, the most a world may hold; slot {slot} is not added"
                    ),
                ));
            }
            map.insert(slot, record.clone());
            Ok(())
        })??;
        Ok(record)
    }

    /// Drops the record for (world, slot); whether there was one. (`rm`
    /// keeps the world's directory locked in the kernel while it waits.)
    pub fn forget(&self, world: &str, slot: u32) -> Result<bool> {
        let world = parse_world(world)?;
        Self::check_slot(slot)?;
        self.update(&world, DIR_LOCK_WAIT, |map| map.remove(&slot).is_some())
    }

    /// Worlds that hold at least one record, sorted: those with a file,
    /// since a world's file goes with its last record. Names only: a
    /// listing reads no world's records (each may hold 4 MiB). A damaged
    /// file is listed too; reading it says what is wrong.
    pub fn worlds(&self) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(&self.slots_dir) else {
            return Vec::new();
        };
        let mut worlds: Vec<String> = dir
            .filter_map(|entry| {
                let name = entry.ok()?.file_name().into_string().ok()?;
                let stem = name.strip_suffix(".json")?;
                (parse_world(stem).ok()? == stem).then(|| stem.to_string())
            })
            .collect();
        worlds.sort();
        worlds
    }

    /// The slots holding a record in `world`, sorted; none for a bad name.
    pub fn slots(&self, world: &str) -> Vec<u32> {
        let Ok(world) = parse_world(world) else {
            return Vec::new();
        };
        match self.load_world(&self.world_path(&world)) {
            Ok(map) => map.into_keys().collect(),
            Err(e) => {
                log::error!("{}", e.message);
                Vec::new()
            }
        }
    }

    /// Applies `change` to the newest state of `world` on disk, under the
    /// lock (waited for at most `wait`), and writes it back atomically
    /// (removing the file once empty).
    fn update<T>(
        &self,
        world: &str,
        wait: Duration,
        change: impl FnOnce(&mut World) -> T,
    ) -> Result<T> {
        private_dir(&self.slots_dir)?;
        let _lock = self.lock.take(wait)?;
        let path = self.world_path(world);
        // A damaged file is refused rather than overwritten with less than it held.
        let mut map = self.load_world(&path)?;
        let before = map.clone();
        let result = change(&mut map);
        if map != before {
            self.write_world(&path, &map)?;
        }
        Ok(result)
    }

    fn write_world(&self, path: &Path, map: &World) -> Result<()> {
        let failed = |e: std::io::Error| Error::io(&format!("cannot write {}", path.display()), &e);
        if map.is_empty() {
            return std::fs::remove_file(path)
                .or_else(|e| match e.kind() {
                    ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })
                .and_then(|()| crate::atomic::sync_parent(path))
                .map_err(failed);
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("world");
        let mut body = serde_json::to_vec_pretty(map).expect("slot records serialise");
        body.push(b'\n');
        if body.len() as u64 > self.max_world_bytes {
            return Err(Error::new(
                libc::ENOSPC,
                format!(
                    "world {} would take {} bytes, over the {} bytes a world may hold; nothing changed",
                    name.trim_end_matches(".json"),
                    body.len(),
                    self.max_world_bytes
                ),
            ));
        }
        crate::atomic::replace(path, &body).map_err(failed)
    }

    /// Where the transcript of hosted session `id` lives.
    pub fn transcript_path(&self, id: &str) -> PathBuf {
        self.transcripts_dir.join(format!("{id}.jsonl"))
    }

    /// The mtime of the transcripts' directory: it moves when a transcript
    /// comes or goes (within the filesystem's time granularity).
    pub fn transcripts_changed(&self) -> Option<std::time::SystemTime> {
        std::fs::metadata(&self.transcripts_dir)
            .and_then(|m| m.modified())
            .ok()
    }

    /// Hosted session ids that have a transcript, sorted.
    pub fn transcripts(&self) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(&self.transcripts_dir) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = dir
            .filter_map(|entry| {
                let entry = entry.ok()?;
                if !entry.file_type().ok()?.is_file() {
                    return None;
                }
                let name = entry.file_name().into_string().ok()?;
                let id = parse_session_id(name.strip_suffix(".jsonl")?).ok()?;
                Some(id.to_string())
            })
            .collect();
        ids.sort();
        ids
    }

    /// Bytes of the transcript a reader may see: up to its last complete
    /// line, so the size agrees with what `read_transcript` returns. 0 when
    /// there is no transcript.
    pub fn transcript_len(&self, id: &str) -> u64 {
        if parse_session_id(id).is_err() {
            return 0;
        }
        let Ok(file) = File::open(self.transcript_path(id)) else {
            return 0;
        };
        file.metadata()
            .and_then(|m| complete_len(&file, m.len()))
            .unwrap_or(0)
    }

    /// Up to `size` bytes from `offset`, never past the last complete line.
    pub fn read_transcript(&self, id: &str, offset: u64, size: usize) -> Result<Vec<u8>> {
        let id = parse_session_id(id)?;
        let path = self.transcript_path(id);
        let failed = |e: std::io::Error| Error::io(&format!("cannot read {}", path.display()), &e);
        let file = File::open(&path).map_err(failed)?;
        let len = file.metadata().map_err(failed)?.len();
        let end = complete_len(&file, len).map_err(failed)?;
        if offset >= end {
            return Ok(Vec::new());
        }
        let want = (end - offset).min(size as u64) as usize;
        let mut buf = vec![0u8; want];
        file.read_exact_at(&mut buf, offset).map_err(failed)?;
        Ok(buf)
    }

    /// Records one hosted-run entry: `line` is one complete JSON object with a
    /// string `type`, without its newline. With a session it is appended to
    /// that session's transcript, stamped with `ts_ms`; without one it is kept
    /// only as the current run state.
    pub fn append_entry(&self, session: Option<&str>, line: &[u8]) -> Result<()> {
        let session = session.map(parse_session_id).transpose()?;
        let entry = entry_from_json(line, now_ms())?;
        let mut bytes = serde_json::to_vec(&entry).expect("entry serialises");
        bytes.push(b'\n');
        let len = bytes.len() as u64;
        if len > self.max_entry {
            return Err(Error::new(
                libc::EFBIG,
                format!(
                    "entry of {len} bytes is over the limit of {} bytes",
                    self.max_entry
                ),
            ));
        }
        let mut run = Value::Object(entry);
        let Some(id) = session else {
            *lock(&self.agent_run) = Some(run);
            return Ok(());
        };
        private_dir(&self.transcripts_dir)?;
        let path = self.transcript_path(id);
        let failed =
            |e: std::io::Error| Error::io(&format!("cannot append to {}", path.display()), &e);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(failed)?;
        // The lock is on the transcript itself: every appender, in any process, takes it.
        lock_within(&file, &path, "the transcript's lock", LOCK_WAIT)?;
        let mut before = file.metadata().map_err(failed)?.len();
        let complete = complete_len(&file, before).map_err(failed)?;
        if complete != before {
            // Only a crash mid-append leaves a partial line; it was never accepted.
            log::warn!(
                "{}: dropping {} bytes of an unfinished entry",
                path.display(),
                before - complete
            );
            file.set_len(complete).map_err(failed)?;
            before = complete;
        }
        if before + len > self.max_transcript {
            return Err(Error::new(
                libc::EFBIG,
                format!(
                    "{} holds {before} bytes; an entry of {len} would take it over the limit of {} bytes",
                    path.display(),
                    self.max_transcript
                ),
            ));
        }
        let written = (&file).write(&bytes);
        let outcome = match written {
            Ok(n) if n == bytes.len() => Ok(()),
            Ok(n) => Err(Error::new(
                libc::EIO,
                format!("short write to {}: {n} of {len} bytes", path.display()),
            )),
            Err(e) => Err(failed(e)),
        };
        if let Err(err) = outcome {
            if let Err(e) = file.set_len(before) {
                log::error!("{}: cannot undo a partial append: {e}", path.display());
            }
            return Err(err);
        }
        if let Value::Object(obj) = &mut run {
            obj.insert("sessionId".into(), Value::from(id));
        }
        // Still under the transcript lock, so the state follows the file's order.
        *lock(&self.agent_run) = Some(run);
        Ok(())
    }

    /// The last accepted entry, with `ts_ms` and, when it had one, `sessionId`.
    pub fn agent_run(&self) -> Option<Value> {
        lock(&self.agent_run).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    fn store() -> (tempfile::TempDir, SlotStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SlotStore::open(dir.path());
        (dir, s)
    }

    fn lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn worlds_are_guids_in_lowercase() {
        assert_eq!(parse_world(&W.to_uppercase()).unwrap(), W);
        for bad in [
            "",
            "x",
            "0f8fad5b-d9cb-469f-a165-70867728950",
            "0f8fad5b-d9cb-469f-a165-70867728950e0",
            "0f8fad5bd9cb-469f-a165-70867728950e-",
            "0f8fad5b-d9cb-469f-a165-70867728950g",
            "{0f8fad5b-d9cb-469f-a165-70867728950e}",
            "0f8fad5b_d9cb_469f_a165_70867728950e",
            "0f8fad5bd9cb469fa16570867728950e",
        ] {
            let err = parse_world(bad).unwrap_err();
            assert_eq!(err.errno, libc::EINVAL, "{bad}");
            assert!(err.message.contains("GUID"));
        }
    }

    #[test]
    fn slots_are_plain_positive_decimals() {
        assert_eq!(parse_slot("1").unwrap(), 1);
        assert_eq!(parse_slot("42").unwrap(), 42);
        assert_eq!(parse_slot("4294967295").unwrap(), u32::MAX);
        for bad in [
            "",
            "0",
            "-1",
            "+1",
            "x",
            "01",
            "00",
            "1.0",
            " 1",
            "1 ",
            "0x1",
            "4294967296",
        ] {
            assert_eq!(parse_slot(bad).unwrap_err().errno, libc::EINVAL, "{bad:?}");
        }
    }

    #[test]
    fn session_ids_are_file_names() {
        assert!(parse_session_id("a").is_ok());
        assert!(parse_session_id("Ab9._-x").is_ok());
        assert!(parse_session_id(&"a".repeat(128)).is_ok());
        for bad in [
            "",
            ".x",
            "-x",
            "..",
            "agent/conv",
            "a b",
            "a\n",
            &"a".repeat(129),
        ] {
            assert_eq!(parse_session_id(bad).unwrap_err().errno, libc::EINVAL);
        }
    }

    #[test]
    fn put_get_replace_forget() {
        let (_d, s) = store();
        assert_eq!(s.get(W, 1).unwrap(), None);
        let rec = s
            .put(
                W,
                1,
                br#"{"sessionId":"abc","name":"Bot","workspace":"/w","harness":"codex","lastSpawn":"x","extra":1}"#,
            )
            .unwrap();
        assert_eq!(rec.session_id, "abc");
        assert_eq!(rec.name, "Bot");
        assert_eq!(rec.workspace, "/w");
        assert_eq!(rec.harness, "codex");
        assert_ne!(rec.last_spawn, "x");
        assert!(rec.last_spawn.parse::<jiff::Timestamp>().is_ok());
        assert_eq!(s.get(W, 1).unwrap(), Some(rec.clone()));
        assert_eq!(s.get(&W.to_uppercase(), 1).unwrap(), Some(rec));

        let json: Value =
            serde_json::from_slice(&s.get(W, 1).unwrap().unwrap().to_json_line()).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 5);
        for k in ["sessionId", "name", "workspace", "lastSpawn", "harness"] {
            assert!(json.get(k).is_some(), "{k}");
        }

        let rec2 = s.put(W, 1, br#"{"sessionId":"def"}"#).unwrap();
        assert_eq!(rec2.name, "");
        assert_eq!(rec2.workspace, "");
        assert_eq!(rec2.harness, "");
        assert_eq!(s.get(W, 1).unwrap(), Some(rec2));
        s.put(W, 3, br#"{"sessionId":"ghi"}"#).unwrap();
        assert_eq!(s.slots(W), vec![1, 3]);
        assert_eq!(s.worlds(), vec![W.to_string()]);

        assert!(s.forget(W, 1).unwrap());
        assert!(!s.forget(W, 1).unwrap());
        assert_eq!(s.get(W, 1).unwrap(), None);
        assert_eq!(s.slots(W), vec![3]);
        assert!(s.forget(W, 3).unwrap());
        assert!(s.worlds().is_empty());
        assert!(s.slots(W).is_empty());
        let other = "11111111-2222-3333-4444-555555555555";
        assert!(!s.forget(other, 7).unwrap());
        assert!(s.worlds().is_empty());
    }

    #[test]
    fn records_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let rec = SlotStore::open(dir.path())
            .put(W, 2, br#"{"sessionId":"abc","name":"n"}"#)
            .unwrap();
        let again = SlotStore::open(dir.path());
        assert_eq!(again.get(W, 2).unwrap(), Some(rec));
        assert_eq!(again.worlds(), vec![W.to_string()]);
    }

    #[test]
    fn two_stores_see_each_others_writes() {
        let dir = tempfile::tempdir().unwrap();
        let a = SlotStore::open(dir.path());
        let b = SlotStore::open(dir.path());
        a.put(W, 1, br#"{"sessionId":"a"}"#).unwrap();
        b.put(W, 2, br#"{"sessionId":"b"}"#).unwrap();
        assert_eq!(a.slots(W), vec![1, 2]);
        assert_eq!(b.get(W, 1).unwrap().unwrap().session_id, "a");
        assert_eq!(a.get(W, 2).unwrap().unwrap().session_id, "b");
        assert!(b.forget(W, 1).unwrap());
        assert_eq!(a.get(W, 1).unwrap(), None);
    }

    #[test]
    fn concurrent_slot_writers_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let handles: Vec<_> = (0..4u32)
            .map(|t| {
                let path = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    let s = SlotStore::open(&path);
                    for i in 0..25u32 {
                        s.put(W, t * 100 + i + 1, br#"{"sessionId":"x"}"#).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(SlotStore::open(dir.path()).slots(W).len(), 100);
    }

    #[test]
    fn bad_inputs_change_nothing() {
        let (dir, s) = store();
        let good = s.put(W, 1, br#"{"sessionId":"keep"}"#).unwrap();
        let file = dir.path().join("slots").join(format!("{W}.json"));
        let before = std::fs::read(&file).unwrap();
        let bad_records: [(&[u8], &str); 8] = [
            (br#"{"name":"n"}"#, "sessionId"),
            (br#"{"sessionId":5}"#, "sessionId"),
            (br#"{"sessionId":null}"#, "sessionId"),
            (br#"{"sessionId":""}"#, "sessionId"),
            (br#"{"sessionId":"a","name":3}"#, "name"),
            (br#"["sessionId"]"#, "object"),
            (b"{not json", "JSON"),
            (b"", "JSON"),
        ];
        for (bytes, why) in bad_records {
            let err = s.put(W, 1, bytes).unwrap_err();
            assert_eq!(err.errno, libc::EINVAL);
            assert!(err.message.contains(why), "{}", err.message);
        }
        assert_eq!(
            s.put(W, 0, br#"{"sessionId":"x"}"#).unwrap_err().errno,
            libc::EINVAL
        );
        assert_eq!(
            s.put("nope", 1, br#"{"sessionId":"x"}"#).unwrap_err().errno,
            libc::EINVAL
        );
        assert_eq!(s.get("nope", 1).unwrap_err().errno, libc::EINVAL);
        assert_eq!(s.forget(W, 0).unwrap_err().errno, libc::EINVAL);
        assert_eq!(std::fs::read(&file).unwrap(), before);
        assert_eq!(s.get(W, 1).unwrap(), Some(good));
        assert_eq!(s.slots(W), vec![1]);
    }

    #[test]
    fn a_full_world_takes_no_new_slot_and_keeps_what_it_holds() {
        let (dir, s) = store();
        let s = s.with_world_limits(3, MAX_WORLD_BYTES);
        for slot in 1..=3 {
            s.put(W, slot, br#"{"sessionId":"a"}"#).unwrap();
        }
        let file = dir.path().join("slots").join(format!("{W}.json"));
        let before = std::fs::read(&file).unwrap();
        let err = s.put(W, 4, br#"{"sessionId":"b"}"#).unwrap_err();
        assert_eq!(err.errno, libc::ENOSPC);
        assert!(err.message.contains("3 records"), "{}", err.message);
        assert_eq!(std::fs::read(&file).unwrap(), before);
        assert_eq!(s.slots(W), vec![1, 2, 3]);
        // A slot it holds is replaced; one forgotten makes room.
        assert_eq!(
            s.put(W, 2, br#"{"sessionId":"c"}"#).unwrap().session_id,
            "c"
        );
        assert!(s.forget(W, 1).unwrap());
        s.put(W, 4, br#"{"sessionId":"d"}"#).unwrap();
        assert_eq!(s.slots(W), vec![2, 3, 4]);
        // Another world has room of its own.
        s.put(
            "11111111-2222-3333-4444-555555555555",
            9,
            br#"{"sessionId":"e"}"#,
        )
        .unwrap();
    }

    #[test]
    fn a_world_file_stays_under_its_size_cap() {
        let (dir, s) = store();
        let s = s.with_world_limits(MAX_WORLD_SLOTS, 2000);
        let big = |c: char| {
            format!(
                r#"{{"sessionId":"a","name":"{}"}}"#,
                c.to_string().repeat(600)
            )
        };
        s.put(W, 1, big('x').as_bytes()).unwrap();
        s.put(W, 2, big('y').as_bytes()).unwrap();
        let file = dir.path().join("slots").join(format!("{W}.json"));
        let before = std::fs::read(&file).unwrap();
        for (slot, c) in [(3, 'z'), (1, 'w')] {
            // A new record, or one grown in place, past the cap.
            let json = if slot == 1 {
                format!(r#"{{"sessionId":"a","name":"{}"}}"#, "w".repeat(1200))
            } else {
                big(c)
            };
            let err = s.put(W, slot, json.as_bytes()).unwrap_err();
            assert_eq!(err.errno, libc::ENOSPC, "{}", err.message);
            assert!(err.message.contains("2000 bytes"), "{}", err.message);
            assert_eq!(std::fs::read(&file).unwrap(), before);
        }
        assert_eq!(s.slots(W), vec![1, 2]);
        assert_eq!(s.get(W, 1).unwrap().unwrap().name, "x".repeat(600));
        // Smaller records still fit, and shrinking always does.
        s.put(W, 1, br#"{"sessionId":"small"}"#).unwrap();
        s.put(W, 3, br#"{"sessionId":"small"}"#).unwrap();
    }

    #[test]
    fn a_world_file_over_the_cap_is_refused_and_left_as_it_is() {
        let (dir, s) = store();
        s.put(W, 1, br#"{"sessionId":"a"}"#).unwrap();
        let file = dir.path().join("slots").join(format!("{W}.json"));
        let mut huge = std::fs::read(&file).unwrap();
        huge.extend(std::iter::repeat_n(b' ', MAX_WORLD_BYTES as usize));
        std::fs::write(&file, &huge).unwrap();
        let err = s.get(W, 1).unwrap_err();
        assert_eq!(err.errno, libc::EFBIG);
        assert!(err.message.contains("left as it is"), "{}", err.message);
        assert_eq!(
            s.put(W, 2, br#"{"sessionId":"b"}"#).unwrap_err().errno,
            libc::EFBIG
        );
        assert_eq!(s.forget(W, 1).unwrap_err().errno, libc::EFBIG);
        assert_eq!(std::fs::read(&file).unwrap(), huge);
    }

    #[test]
    fn a_damaged_world_file_is_not_overwritten() {
        let (dir, s) = store();
        s.put(W, 1, br#"{"sessionId":"a"}"#).unwrap();
        let file = dir.path().join("slots").join(format!("{W}.json"));
        std::fs::write(&file, b"{broken").unwrap();
        assert_eq!(s.get(W, 1).unwrap_err().errno, libc::EIO);
        assert_eq!(
            s.put(W, 2, br#"{"sessionId":"b"}"#).unwrap_err().errno,
            libc::EIO
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"{broken");
        // Still listed: what was there is not hidden.
        assert_eq!(s.worlds(), vec![W.to_string()]);
    }

    #[test]
    fn appends_are_lines_with_ts_ms() {
        let (_d, s) = store();
        s.append_entry(Some("run1"), br#"{"type":"start","ts_ms":1}"#)
            .unwrap();
        s.append_entry(Some("run1"), br#"  {"type":"text","text":"a\nb"}  "#)
            .unwrap();
        let got = lines(&s.transcript_path("run1"));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0]["type"], "start");
        assert_eq!(got[1]["text"], "a\nb");
        for e in &got {
            assert!(e["ts_ms"].as_u64().unwrap() > 1);
        }
        assert_eq!(s.transcripts(), vec!["run1".to_string()]);
        let len = std::fs::metadata(s.transcript_path("run1")).unwrap().len();
        assert_eq!(s.transcript_len("run1"), len);
        assert_eq!(
            s.read_transcript("run1", 0, 1 << 20).unwrap().len() as u64,
            len
        );
        assert_eq!(s.transcript_len("missing"), 0);
        assert_eq!(
            s.read_transcript("missing", 0, 10).unwrap_err().errno,
            libc::ENOENT
        );
    }

    #[test]
    fn bad_entries_are_refused_and_nothing_written() {
        let (_d, s) = store();
        s.append_entry(Some("r"), br#"{"type":"ok"}"#).unwrap();
        let path = s.transcript_path("r");
        let before = std::fs::read(&path).unwrap();
        let run = s.agent_run();
        for bad in [
            &br#"{"text":"no type"}"#[..],
            br#"{"type":3}"#,
            br#"{"type":null}"#,
            br#"["type"]"#,
            br#""type""#,
            b"not json",
            br#"{"type":"a"}{"type":"b"}"#,
            b"",
        ] {
            let err = s.append_entry(Some("r"), bad).unwrap_err();
            assert_eq!(err.errno, libc::EINVAL, "{}", String::from_utf8_lossy(bad));
            assert_eq!(s.append_entry(None, bad).unwrap_err().errno, libc::EINVAL);
        }
        assert_eq!(
            s.append_entry(Some("a/b"), br#"{"type":"x"}"#)
                .unwrap_err()
                .errno,
            libc::EINVAL
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert_eq!(s.agent_run(), run);
        assert_eq!(s.transcripts(), vec!["r".to_string()]);
    }

    #[test]
    fn oversized_entries_and_transcripts_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let s = SlotStore::with_limits(dir.path(), 200, 500);
        s.append_entry(Some("r"), br#"{"type":"a"}"#).unwrap();
        let path = s.transcript_path("r");
        let before = std::fs::read(&path).unwrap();

        let big = format!(r#"{{"type":"big","pad":"{}"}}"#, "x".repeat(200));
        let err = s.append_entry(Some("r"), big.as_bytes()).unwrap_err();
        assert_eq!(err.errno, libc::EFBIG);
        assert_eq!(
            s.append_entry(None, big.as_bytes()).unwrap_err().errno,
            libc::EFBIG
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);

        let mid = format!(r#"{{"type":"mid","pad":"{}"}}"#, "x".repeat(130));
        let mut accepted = 0;
        let err = loop {
            match s.append_entry(Some("r"), mid.as_bytes()) {
                Ok(()) => accepted += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(err.errno, libc::EFBIG);
        assert!(accepted >= 1);
        let full = std::fs::read(&path).unwrap();
        assert!(full.len() <= 500);
        assert_eq!(lines(&path).len(), accepted + 1);
        assert!(s.append_entry(Some("r"), mid.as_bytes()).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), full);
        // The limit is per transcript: another session still has room.
        s.append_entry(Some("other"), mid.as_bytes()).unwrap();
    }

    #[test]
    fn concurrent_appenders_never_interleave() {
        let dir = tempfile::tempdir().unwrap();
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let path = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    let s = SlotStore::open(&path);
                    let pad = "p".repeat(3000);
                    for i in 0..1000 {
                        let line = format!(r#"{{"type":"t{t}","i":{i},"pad":"{pad}"}}"#);
                        s.append_entry(Some("shared"), line.as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let s = SlotStore::open(dir.path());
        let got = lines(&s.transcript_path("shared"));
        assert_eq!(got.len(), 2000);
        for t in 0..2 {
            let mine: Vec<u64> = got
                .iter()
                .filter(|e| e["type"] == format!("t{t}"))
                .map(|e| e["i"].as_u64().unwrap())
                .collect();
            assert_eq!(mine, (0..1000).collect::<Vec<_>>());
        }
        assert!(got.iter().all(|e| e["ts_ms"].is_u64()));
    }

    #[test]
    fn readers_never_see_half_an_entry() {
        let (_d, s) = store();
        s.append_entry(Some("r"), br#"{"type":"a"}"#).unwrap();
        let path = s.transcript_path("r");
        let whole = std::fs::read(&path).unwrap();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"type":"ha"#).unwrap();
        assert_eq!(s.transcript_len("r"), whole.len() as u64);
        assert_eq!(s.read_transcript("r", 0, 1 << 20).unwrap(), whole);
        assert_eq!(s.read_transcript("r", 3, 4).unwrap(), whole[3..7].to_vec());
        assert!(s
            .read_transcript("r", whole.len() as u64, 100)
            .unwrap()
            .is_empty());
        // An unfinished tail left by a crash is dropped by the next append.
        s.append_entry(Some("r"), br#"{"type":"b"}"#).unwrap();
        let got = lines(&path);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1]["type"], "b");
    }

    #[test]
    fn agent_run_follows_the_last_entry() {
        let (_d, s) = store();
        assert_eq!(s.agent_run(), None);
        s.append_entry(None, br#"{"type":"refused","why":"no auth"}"#)
            .unwrap();
        let run = s.agent_run().unwrap();
        assert_eq!(run["type"], "refused");
        assert!(run["ts_ms"].is_u64());
        assert!(run.get("sessionId").is_none());
        assert!(s.transcripts().is_empty());

        s.append_entry(Some("conv1"), br#"{"type":"turn"}"#)
            .unwrap();
        let run = s.agent_run().unwrap();
        assert_eq!(run["type"], "turn");
        assert_eq!(run["sessionId"], "conv1");
        // The stored line carries no sessionId of its own.
        assert!(lines(&s.transcript_path("conv1"))[0]
            .get("sessionId")
            .is_none());

        s.append_entry(None, br#"{"type":"done"}"#).unwrap();
        assert_eq!(s.agent_run().unwrap()["type"], "done");
        assert!(s.agent_run().unwrap().get("sessionId").is_none());
    }
}
