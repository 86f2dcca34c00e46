//! The adapter for `slots/` and `agent-transcripts/` (SPEC §9): names,
//! listings, and the write buffering that turns a stream of `write` calls
//! into whole records and whole entries.

use crate::core::records::buffers::{Document, JsonDocument, Lines};
use crate::core::records::slots::{
    parse_session_id, parse_slot, parse_world, MAX_ENTRY_BYTES, MAX_SLOT_RECORD_BYTES,
    MAX_TRANSCRIPT_BYTES,
};
use crate::core::tree::handles::Handle;
use crate::core::tree::node::{Kind, Node};
use crate::core::tree::requests::Files;
use crate::core::Concern;
use crate::error::{Error, Result};

/// What an open record file collects before it becomes a record or entries.
#[derive(Debug)]
pub(in crate::core) enum RecordWrite {
    /// `slots/W/N`: one JSON document, put as soon as it is complete.
    Slot {
        world: String,
        slot: u32,
        doc: JsonDocument,
        committed: bool,
        /// A cap refusal: every later write and the close fail with it.
        stuck: Option<Error>,
    },
    /// `agent-transcripts/ID.jsonl` or `run`: complete lines are entries.
    Append {
        session: Option<String>,
        lines: Lines,
        stuck: Option<Error>,
    },
}

impl RecordWrite {
    /// The memory what is collected takes.
    pub(in crate::core) fn memory_bytes(&self) -> u64 {
        match self {
            RecordWrite::Slot { doc, .. } => doc.memory_bytes(),
            RecordWrite::Append { lines, .. } => lines.memory_bytes(),
        }
    }
}

fn transcript_name(name: &str) -> Result<String> {
    let id = name.strip_suffix(".jsonl").ok_or_else(|| {
        Error::invalid(format!("{name:?}: transcripts are named SESSION_ID.jsonl"))
    })?;
    Ok(parse_session_id(id)?.to_string())
}

impl Files {
    pub(in crate::core) fn records_lookup(&self, parent: &Node, name: &str) -> Result<Node> {
        let store = self.core.slots();
        match parent {
            Node::SlotsDir => parse_world(name)
                .map(Node::World)
                .map_err(|_| Error::not_found(format!("{name:?} is not a world GUID"))),
            Node::World(world) => {
                let slot =
                    parse_slot(name).map_err(|_| Error::not_found(format!("no slot {name:?}")))?;
                match store.get(world, slot)? {
                    Some(_) => Ok(Node::Slot(world.clone(), slot)),
                    None => Err(Error::not_found(format!("no record for slot {slot}"))),
                }
            }
            Node::TranscriptsDir if name == "run" => Ok(Node::RunFile),
            Node::TranscriptsDir => {
                let id = transcript_name(name).map_err(|e| Error::not_found(e.message))?;
                if store.transcript_path(&id).is_file() {
                    Ok(Node::HostedFile(id))
                } else {
                    Err(Error::not_found(format!("no transcript {name}")))
                }
            }
            _ => Err(Error::new(libc::ENOTDIR, "not a directory")),
        }
    }

    /// The size of a records file (its kind and mode are its row in the
    /// node table).
    pub(in crate::core) fn records_size(&self, node: &Node) -> Result<u64> {
        let store = self.core.slots();
        Ok(match node {
            Node::Slot(world, slot) => match store.get(world, *slot)? {
                Some(record) => record.to_json_line().len() as u64,
                // Created and open for its first write: an empty file until then.
                None if self.slot_being_written(world, *slot) => 0,
                None => return Err(Error::not_found(format!("no record for slot {slot}"))),
            },
            Node::HostedFile(id) => store.transcript_len(id),
            _ => 0,
        })
    }

    fn slot_being_written(&self, world: &str, slot: u32) -> bool {
        self.handles.files().values().any(|h| {
            matches!(h, Handle::Record(r) if r.slot.as_ref().is_some_and(|(w, n)| w == world && *n == slot))
        })
    }

    pub(in crate::core) fn records_entries(
        &self,
        node: &Node,
    ) -> Result<Vec<(Node, Kind, String)>> {
        let store = self.core.slots();
        Ok(match node {
            Node::SlotsDir => store
                .worlds()
                .into_iter()
                .map(|w| (Node::World(w.clone()), Kind::Dir, w))
                .collect(),
            Node::World(world) => store
                .slots(world)
                .into_iter()
                .map(|n| (Node::Slot(world.clone(), n), Kind::File, n.to_string()))
                .collect(),
            Node::TranscriptsDir => std::iter::once((Node::RunFile, Kind::File, "run".to_string()))
                .chain(store.transcripts().into_iter().map(|id| {
                    let name = format!("{id}.jsonl");
                    (Node::HostedFile(id), Kind::File, name)
                }))
                .collect(),
            _ => return Err(Error::new(libc::ENOTDIR, "not a directory")),
        })
    }

    /// Opens an existing records file, the calls it takes checked
    /// against the node table already.
    pub(in crate::core) fn records_open(&self, node: &Node, writes: bool) -> Result<Handle> {
        match node {
            Node::Slot(world, slot) if writes => Ok(Handle::record(RecordWrite::Slot {
                world: world.clone(),
                slot: *slot,
                doc: JsonDocument::default(),
                committed: false,
                stuck: None,
            })),
            Node::Slot(world, slot) => {
                let record = self
                    .core
                    .slots()
                    .get(world, *slot)?
                    .ok_or_else(|| Error::not_found(format!("no record for slot {slot}")))?;
                Ok(Handle::Snapshot(std::sync::Arc::new(record.to_json_line())))
            }
            Node::HostedFile(id) if writes => Ok(Handle::record(RecordWrite::Append {
                session: Some(id.clone()),
                lines: Lines::default(),
                stuck: None,
            })),
            Node::HostedFile(id) => Ok(Handle::Hosted(id.clone())),
            Node::RunFile => Ok(Handle::record(RecordWrite::Append {
                session: None,
                lines: Lines::default(),
                stuck: None,
            })),
            _ => Err(Error::new(libc::EISDIR, "a directory")),
        }
    }

    /// `create` in `slots/W/` or `agent-transcripts/`.
    pub(in crate::core) fn records_create(
        &self,
        parent: &Node,
        name: &str,
    ) -> Result<(Node, Handle)> {
        match parent {
            Node::World(world) => {
                let slot = parse_slot(name)?;
                Ok((
                    Node::Slot(world.clone(), slot),
                    Handle::record(RecordWrite::Slot {
                        world: world.clone(),
                        slot,
                        doc: JsonDocument::default(),
                        committed: false,
                        stuck: None,
                    }),
                ))
            }
            Node::TranscriptsDir => {
                let id = transcript_name(name)?;
                Ok((
                    Node::HostedFile(id.clone()),
                    Handle::record(RecordWrite::Append {
                        session: Some(id),
                        lines: Lines::default(),
                        stuck: None,
                    }),
                ))
            }
            Node::SlotsDir => Err(Error::invalid(
                "slots/ holds world directories: mkdir slots/GUID",
            )),
            _ => Err(Error::access("no files can be created here")),
        }
    }

    pub(in crate::core) fn records_unlink(&self, parent: &Node, name: &str) -> Result<()> {
        match self.records_lookup(parent, name)? {
            Node::Slot(world, slot) => self.core.slots().forget(&world, slot).map(drop),
            Node::HostedFile(_) | Node::RunFile => {
                Err(Error::perm("transcripts are kept; they cannot be removed"))
            }
            _ => Err(Error::perm("not removable")),
        }
    }

    /// `rmdir slots/GUID`: the world, when it holds no record.
    pub(in crate::core) fn records_rmdir(&self, parent: &Node, name: &str) -> Result<Node> {
        match self.records_lookup(parent, name)? {
            Node::World(world) if self.core.slots().slots(&world).is_empty() => {
                Ok(Node::World(world))
            }
            Node::World(_) => Err(Error::new(
                libc::ENOTEMPTY,
                "the world still holds slot records",
            )),
            _ => Err(Error::new(libc::ENOTDIR, "not a directory")),
        }
    }
}

impl RecordWrite {
    /// Takes one `write` call's bytes: a slot record is put once it parses
    /// whole; transcript lines are appended one entry each, and a partial
    /// line waits for the rest. The caps are checked before anything grows.
    pub(in crate::core) fn write(
        &mut self,
        core: &crate::core::Core,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        if let Some(e) = self.stuck() {
            // Recorded when it was made: the status says it again, the log
            // does not.
            return Err(core.record(&Concern::Root, e.clone()));
        }
        let partial = match &*self {
            RecordWrite::Slot { doc, .. } => doc.len() > 0,
            RecordWrite::Append { lines, .. } => !lines.pending().is_empty(),
        };
        if let Err(e) = self.check_caps(offset, data) {
            let e = self.refused(core, e);
            // One write() past a cap arrives as several requests; the kernel
            // turns a refusal after the first into a short count. The writer
            // must still hear of it: at its next write and at close.
            if partial {
                let (RecordWrite::Slot { stuck, .. } | RecordWrite::Append { stuck, .. }) = self;
                *stuck = Some(e.clone());
            }
            return Err(e);
        }
        let taken = self.take(core, data);
        taken.map_err(|e| self.refused(core, e))
    }

    /// Puts a slot record once `data` completes it; appends the lines it
    /// completes.
    fn take(&mut self, core: &crate::core::Core, data: &[u8]) -> Result<()> {
        match self {
            RecordWrite::Slot {
                world,
                slot,
                doc,
                committed,
                ..
            } => {
                if *committed && data.iter().all(u8::is_ascii_whitespace) {
                    return Ok(());
                }
                match doc.push(data) {
                    Document::Complete => {
                        let put = core.slots().put(world, *slot, doc.bytes());
                        doc.clear();
                        *committed = put.is_ok();
                        put.map(drop)
                    }
                    Document::Incomplete => Ok(()),
                    Document::Invalid(e) => {
                        Err(Error::invalid(format!("slot record is not JSON: {e}")).with_source(e))
                    }
                }
            }
            RecordWrite::Append { session, lines, .. } => lines.push(data, |line| {
                if line.iter().all(u8::is_ascii_whitespace) {
                    return Ok(());
                }
                core.slots().append_entry(session.as_deref(), line)
            }),
        }
    }

    /// Records a refusal, with the file it concerns, in the root `status`:
    /// records are no session's.
    fn refused(&self, core: &crate::core::Core, e: Error) -> Error {
        core.record(&Concern::Root, e.with_context(self.label()))
    }

    /// The file written, for reasons.
    pub(in crate::core) fn label(&self) -> String {
        match self {
            RecordWrite::Slot { world, slot, .. } => format!("write slots/{world}/{slot}"),
            RecordWrite::Append {
                session: Some(id), ..
            } => format!("write agent-transcripts/{id}.jsonl"),
            RecordWrite::Append { session: None, .. } => "write agent-transcripts/run".into(),
        }
    }

    fn stuck(&self) -> Option<&Error> {
        let (RecordWrite::Slot { stuck, .. } | RecordWrite::Append { stuck, .. }) = self;
        stuck.as_ref()
    }

    /// EFBIG for a write that would take a file past its cap: a slot
    /// record past 1 MiB (by offset or by what is buffered), a transcript
    /// past its size cap, a partial line past the entry cap. What was
    /// buffered is dropped; nothing stored changes. `run` is a stream: its
    /// offsets mean nothing. (`write` records the refusal.)
    fn check_caps(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let end = offset.saturating_add(data.len() as u64);
        match self {
            RecordWrite::Slot {
                world, slot, doc, ..
            } => {
                let what = format!("slot record {world}/{slot}");
                let held = (doc.len() as u64).saturating_add(data.len() as u64);
                let end = end.max(held);
                if end > MAX_SLOT_RECORD_BYTES {
                    doc.clear();
                    return Err(Error::too_big(&what, end, MAX_SLOT_RECORD_BYTES));
                }
            }
            RecordWrite::Append { session, lines, .. } => {
                let name = session.as_deref().unwrap_or("run");
                let line = match memchr::memrchr(b'\n', data) {
                    Some(nl) => data.len() - nl - 1,
                    None => lines.pending().len() + data.len(),
                } as u64;
                let refused = if session.is_some() && end > MAX_TRANSCRIPT_BYTES {
                    let what = format!("transcript {name}.jsonl");
                    Some(Error::too_big(&what, end, MAX_TRANSCRIPT_BYTES))
                } else if line > MAX_ENTRY_BYTES {
                    let what = format!("an unfinished entry line to {name}");
                    Some(Error::too_big(&what, line, MAX_ENTRY_BYTES))
                } else {
                    None
                };
                if let Some(err) = refused {
                    lines.clear();
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// At close: what is still buffered must stand on its own.
    pub(in crate::core) fn finish(&mut self, core: &crate::core::Core) -> Result<()> {
        if let Some(e) = self.stuck() {
            return Err(core.record(&Concern::Root, e.clone()));
        }
        let finished = self.finish_unrecorded(core);
        finished.map_err(|e| self.refused(core, e))
    }

    /// [`RecordWrite::finish`] before its refusal is recorded.
    fn finish_unrecorded(&mut self, core: &crate::core::Core) -> Result<()> {
        match self {
            RecordWrite::Slot { doc, committed, .. } => {
                if doc.is_blank() {
                    return Ok(());
                }
                // Sent in pieces, text that is not JSON may not have been
                // parsed yet: the reason says which it is.
                let why = match serde_json::from_slice::<serde_json::Value>(doc.bytes()) {
                    Err(e) if !e.is_eof() => format!("slot record is not JSON: {e}"),
                    _ => format!("slot record is incomplete JSON ({} bytes)", doc.len()),
                };
                doc.clear();
                *committed = false;
                Err(Error::invalid(why))
            }
            RecordWrite::Append { session, lines, .. } => {
                let line = lines.take();
                if line.iter().all(u8::is_ascii_whitespace) {
                    return Ok(());
                }
                core.slots().append_entry(session.as_deref(), &line)
            }
        }
    }
}
