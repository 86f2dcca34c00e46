//! The editor save protocol for metadata files: what an open `meta.json`
//! or one-line field collects (checked at each `write`, applied at `fsync`
//! or `close`), the scratch files editors make beside it, and `rename` onto
//! it as the commit of a save.

use crate::core::tree::node::{Node, SessionFile};
use crate::core::tree::requests::Files;
use crate::core::tree::scratch::{ScratchFile, ScratchInfo};
use crate::core::{Concern, MetaField, META_FILE_MAX};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use serde_json::Value;
/// What an open metadata file collects before it becomes a change.
#[derive(Debug)]
pub(in crate::core) enum MetaWrite {
    /// `meta.json`, with the document the writer could have read.
    Document {
        key: SessionKey,
        seen: Value,
        buf: Vec<u8>,
        /// Written to since the last commit.
        dirty: bool,
        /// A cap refusal: later writes and the close fail with it, until
        /// the file is truncated.
        stuck: Option<Error>,
    },
    /// `title`, `project`, `favourite`, `archive`.
    Field {
        key: SessionKey,
        field: MetaField,
        buf: Vec<u8>,
        dirty: bool,
        stuck: Option<Error>,
    },
}

/// Places `data` at `offset`, as a write to a regular file would; EFBIG
/// (and nothing written) when it would end past `cap`.
pub(in crate::core) fn write_at(
    buf: &mut Vec<u8>,
    offset: u64,
    data: &[u8],
    cap: u64,
    what: &str,
) -> Result<()> {
    let end = offset.saturating_add(data.len() as u64);
    if end > cap {
        return Err(Error::too_big(what, end, cap));
    }
    // Both fit in memory: `end` is within the cap.
    let (offset, end) = (offset as usize, end as usize);
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[offset..end].copy_from_slice(data);
    Ok(())
}

/// Places a write to a metadata file: EFBIG past the cap (so a huge
/// offset is EFBIG), else EINVAL for a write that begins past what this
/// handle has written (`>>`, a seek): the file is written whole, from
/// offset 0, and the gap would be NUL bytes.
fn place(buf: &mut Vec<u8>, offset: u64, data: &[u8], what: &str) -> Result<()> {
    let end = offset.saturating_add(data.len() as u64);
    if end <= META_FILE_MAX && offset > buf.len() as u64 {
        return Err(Error::invalid(format!(
            "{what} is written whole from offset 0; a write at offset {offset} would leave a gap (O_APPEND or a seek)"
        )));
    }
    write_at(buf, offset, data, META_FILE_MAX, what)
}

impl MetaWrite {
    /// The session whose metadata this writes.
    pub(in crate::core) fn key(&self) -> &SessionKey {
        let (MetaWrite::Field { key, .. } | MetaWrite::Document { key, .. }) = self;
        key
    }

    pub(in crate::core) fn new(
        core: &crate::core::Core,
        key: &SessionKey,
        file: SessionFile,
    ) -> Result<Self> {
        Ok(match file {
            SessionFile::Field(field) => MetaWrite::Field {
                key: key.clone(),
                field,
                buf: Vec::new(),
                dirty: false,
                stuck: None,
            },
            _ => MetaWrite::Document {
                key: key.clone(),
                seen: core.meta_value(key)?,
                buf: Vec::new(),
                dirty: false,
                stuck: None,
            },
        })
    }

    /// Each `write` checks what has arrived so far, so a refusal reaches
    /// the writer's `write`; a partial document waits for the rest. The
    /// change itself is applied at `fsync` or `close`.
    pub(in crate::core) fn write(
        &mut self,
        core: &crate::core::Core,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        match self {
            MetaWrite::Field {
                key,
                field,
                buf,
                dirty,
                stuck,
            } => {
                let what = format!("{key}/{}", field.name());
                // Recorded when it was made: the status says it again, the
                // log does not.
                if let Some(e) = stuck {
                    return Err(core.record(&Concern::Session(key.clone()), e.clone()));
                }
                if let Err(e) = place(buf, offset, data, &what) {
                    let e = core.record(&Concern::Session(key.clone()), e);
                    // Bytes taken before: perhaps the first part of this write.
                    if *dirty {
                        *stuck = Some(e.clone());
                    }
                    *dirty = false;
                    return Err(e);
                }
                *dirty = true;
                let checked = core.check_field(key, *field, buf).map(drop);
                if checked.is_err() {
                    // The writer was told; close has nothing left to apply.
                    *dirty = false;
                }
                checked
            }
            MetaWrite::Document {
                key,
                seen,
                buf,
                dirty,
                stuck,
            } => {
                let what = format!("{key}/meta.json");
                // Recorded when it was made: the status says it again, the
                // log does not.
                if let Some(e) = stuck {
                    return Err(core.record(&Concern::Session(key.clone()), e.clone()));
                }
                // One write() past the cap may arrive as several requests:
                // the writer hears of it at its next write and at close.
                if let Err(e) = place(buf, offset, data, &what) {
                    let e = core.record(&Concern::Session(key.clone()), e);
                    // Bytes taken before: perhaps the first part of this write.
                    if *dirty {
                        *stuck = Some(e.clone());
                    }
                    *dirty = false;
                    return Err(e);
                }
                *dirty = true;
                let checked = match serde_json::from_slice::<Value>(buf) {
                    Ok(_) => core.check_meta_edit(key, seen, buf).map(drop),
                    Err(e) if e.is_eof() => Ok(()),
                    Err(e) => Err(core.record(
                        &Concern::Session(key.clone()),
                        Error::invalid(format!("meta.json is not valid JSON: {e}")).with_source(e),
                    )),
                };
                if checked.is_err() {
                    *dirty = false;
                }
                checked
            }
        }
    }

    /// At `fsync` or `close`: applies what was written since the last
    /// commit. An empty document (truncated, nothing written yet) is never
    /// a commit.
    pub(in crate::core) fn finish(&mut self, core: &crate::core::Core) -> Result<()> {
        match self {
            MetaWrite::Field {
                key,
                stuck: Some(e),
                ..
            }
            | MetaWrite::Document {
                key,
                stuck: Some(e),
                ..
            } => Err(core.record(&Concern::Session(key.clone()), e.clone())),
            MetaWrite::Field {
                key,
                field,
                buf,
                dirty,
                ..
            } if *dirty => {
                *dirty = false;
                core.write_field(key, *field, buf)
            }
            MetaWrite::Document {
                key,
                seen,
                buf,
                dirty,
                ..
            } if *dirty && !buf.iter().all(u8::is_ascii_whitespace) => {
                *dirty = false;
                core.edit_meta(key, seen, buf)
            }
            _ => Ok(()),
        }
    }

    /// Bytes written so far.
    pub(in crate::core) fn len(&self) -> u64 {
        let (MetaWrite::Field { buf, .. } | MetaWrite::Document { buf, .. }) = self;
        buf.len() as u64
    }

    /// The memory what is written takes.
    pub(in crate::core) fn memory_bytes(&self) -> u64 {
        let (MetaWrite::Field { buf, .. } | MetaWrite::Document { buf, .. }) = self;
        buf.capacity() as u64
    }

    pub(in crate::core) fn truncate(&mut self, size: u64) {
        let (MetaWrite::Field { buf, stuck, .. } | MetaWrite::Document { buf, stuck, .. }) = self;
        buf.truncate(size as usize);
        *stuck = None;
    }
}

impl Files {
    /// A scratch file's length and link target, without copying its bytes.
    pub(in crate::core) fn scratch_get(&self, key: &SessionKey, name: &str) -> Option<ScratchInfo> {
        self.scratch.info(key, name)
    }

    pub(in crate::core) fn scratch_names(&self, key: &SessionKey) -> Vec<(String, bool)> {
        self.scratch.names(key)
    }

    /// Adds a scratch file; a refusal (the caps) is recorded in the session's status.
    pub(in crate::core) fn scratch_put(
        &self,
        key: &SessionKey,
        name: &str,
        file: ScratchFile,
    ) -> Result<()> {
        self.scratch
            .put(key, name, file)
            .map_err(|e| self.core.record(&Concern::Session(key.clone()), e))
    }

    /// A write to a scratch file, within its caps.
    pub(in crate::core) fn scratch_write(
        &self,
        key: &SessionKey,
        name: &str,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        self.scratch
            .write(key, name, offset, data)
            .map_err(|e| self.core.record(&Concern::Session(key.clone()), e))
    }

    /// `truncate` of a scratch file, within its caps.
    pub(in crate::core) fn scratch_resize(
        &self,
        key: &SessionKey,
        name: &str,
        size: u64,
    ) -> Result<()> {
        self.scratch
            .resize(key, name, size)
            .map_err(|e| self.core.record(&Concern::Session(key.clone()), e))
    }

    pub(in crate::core) fn scratch_remove(
        &self,
        key: &SessionKey,
        name: &str,
    ) -> Option<ScratchFile> {
        let removed = self.scratch.remove(key, name);
        self.inodes
            .renumber(&Node::Scratch(key.clone(), name.to_string()));
        removed
    }

    /// A name in a session directory that is not one of its own files.
    pub(in crate::core) fn is_scratch_name(name: &str) -> bool {
        SessionFile::from_name(name).is_none() && name != "transcript" && !name.is_empty()
    }

    /// The text of a session's file that an editor may copy away.
    fn current_text(&self, key: &SessionKey, file: SessionFile) -> Result<Vec<u8>> {
        match file {
            SessionFile::Meta => self.core.meta_json(key),
            SessionFile::Field(f) => self.core.field_text(key, f),
            _ => Err(Error::perm("only metadata files can be renamed")),
        }
    }

    /// `rename` inside one session directory. Onto `meta.json` or a field
    /// file it is the commit of an editor's save; away from one it leaves a
    /// copy under the new name (a backup), since the file itself stays.
    pub(in crate::core) fn rename_in_session(
        &self,
        key: &SessionKey,
        from: &str,
        to: &str,
    ) -> Result<()> {
        let target = SessionFile::from_name(to);
        match (SessionFile::from_name(from), target) {
            (None, Some(file @ (SessionFile::Meta | SessionFile::Field(_)))) => {
                let data = self
                    .scratch
                    .data(key, from)
                    .ok_or_else(|| Error::not_found(format!("no {from} in {key}")))?;
                match file {
                    SessionFile::Field(f) => self.core.write_field(key, f, &data)?,
                    _ => {
                        let seen = self.core.meta_value(key)?;
                        self.core.edit_meta(key, &seen, &data)?;
                    }
                }
                self.scratch_remove(key, from);
                Ok(())
            }
            (None, None) => self
                .scratch
                .rename(key, from, to)
                .map_err(|e| self.core.record(&Concern::Session(key.clone()), e)),
            (Some(file @ (SessionFile::Meta | SessionFile::Field(_))), None) => {
                let data = self.current_text(key, file)?;
                self.scratch_put(
                    key,
                    to,
                    ScratchFile {
                        data,
                        symlink: None,
                    },
                )
            }
            _ => Err(Error::perm(format!("{from} cannot be renamed to {to}"))),
        }
    }
}
