//! `transcript/`: turn indexes of the engines' stores and of hosted runs,
//! refreshed against their files, and the pages rendered from them.

use crate::core::records::hosted::EntryIndex;
use crate::core::{Concern, Core, HOSTED};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::sync::lock;
use crate::transcript::{self, Limits, TurnIndex};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// One store file's turn index and the page rendered last (a `stat` and
/// the `read` after it ask for the same page).
#[derive(Debug)]
pub(in crate::core) struct TranscriptCache {
    pub(in crate::core) path: PathBuf,
    pub(in crate::core) index: TurnIndex,
    pub(in crate::core) last_page: Option<(usize, u64, Arc<Vec<u8>>)>,
}

/// The cached turn index of `key` in `map`, made for `path` or made again
/// when the store moved to another path, refreshed against the file. The
/// map's lock is held only to take or store an entry.
fn cached_index(
    map: &Mutex<HashMap<SessionKey, Arc<Mutex<TranscriptCache>>>>,
    key: &SessionKey,
    path: PathBuf,
    kind: transcript::StoreKind,
) -> Result<Arc<Mutex<TranscriptCache>>> {
    let cache = lock(map)
        .entry(key.clone())
        .or_insert_with(|| {
            Arc::new(Mutex::new(TranscriptCache {
                path: path.clone(),
                index: TurnIndex::new(kind),
                last_page: None,
            }))
        })
        .clone();
    {
        let mut c = lock(&cache);
        if c.path != path {
            c.path = path.clone();
            c.index = TurnIndex::new(kind);
            c.last_page = None;
        }
        let refresh = c
            .index
            .refresh(&path)
            .map_err(|e| Error::io(&format!("cannot index {}", path.display()), &e))?;
        // A replaced store can be as long as the old one: the rendered
        // page is keyed by length, so it goes with the old index.
        if refresh == transcript::Refresh::Rebuilt {
            c.last_page = None;
        }
    }
    Ok(cache)
}

impl Core {
    pub(in crate::core) fn limits(&self) -> Limits {
        Limits {
            page_turns: self.config.history_page_turns as usize,
            max_lines: self.config.transcript_max_lines as usize,
            max_messages: self.config.transcript_max_messages as usize,
            tail_bytes: self.config.transcript_tail_bytes as usize,
        }
    }

    /// Whether the session's engine keeps a conversation store (and so the
    /// session has a `transcript/` directory).
    pub fn has_transcript(&self, key: &SessionKey) -> bool {
        key.engine() == HOSTED || self.catalog.kind_of(key.engine()).is_some()
    }

    /// A hosted run's entry index, refreshed.
    /// The map's lock is held only to take or store an index, never while
    /// the file is read.
    pub(in crate::core) fn hosted_index(
        &self,
        key: &SessionKey,
    ) -> Result<(PathBuf, Arc<EntryIndex>)> {
        let path = self.records.slots.transcript_path(key.id());
        let failed = |e: std::io::Error| Error::io(&format!("cannot read {}", path.display()), &e);
        let known = lock(&self.records.hosted)
            .get(key.id())
            .cloned()
            .unwrap_or_default();
        let len = std::fs::metadata(&path).map_err(failed)?.len();
        if known.is_current(len) {
            return Ok((path, known));
        }
        let mut index = (*known).clone();
        index.refresh(&path).map_err(failed)?;
        let index = Arc::new(index);
        lock(&self.records.hosted).insert(key.id().to_string(), index.clone());
        Ok((path, index))
    }

    /// The session's turn index, refreshed against its store file; `None`
    /// while the engine has not written one.
    pub(in crate::core) fn transcript(
        &self,
        key: &SessionKey,
    ) -> Result<Option<Arc<Mutex<TranscriptCache>>>> {
        let kind = self
            .catalog
            .kind_of(key.engine())
            .ok_or_else(|| Error::not_found(format!("{key} has no transcript")))?;
        let Some(file) = self.store_file(key) else {
            return Ok(None);
        };
        // A refusal is the session's to hear of once; after that it is only
        // the errno, until the rollout changes.
        let path = self.decoded.readable(&file).map_err(|refusal| {
            if refusal.first {
                self.record(&Concern::Session(key.clone()), refusal.error)
            } else {
                refusal.error
            }
        })?;
        cached_index(&self.sessions.transcripts, key, path, kind).map(Some)
    }

    /// How many transcript pages there are (at least one: `page-0`).
    pub fn transcript_pages(&self, key: &SessionKey) -> Result<usize> {
        self.require(key)?;
        if key.engine() == HOSTED {
            let (_, index) = self.hosted_index(key)?;
            return Ok(index.pages(self.limits().page_turns));
        }
        Ok(match self.transcript(key)? {
            Some(cache) => transcript::page_count(&lock(&cache).index, self.limits().page_turns),
            None => 1,
        }
        .max(1))
    }

    /// `transcript/page-N`, rendered.
    pub fn transcript_page(&self, key: &SessionKey, page: usize) -> Result<Arc<Vec<u8>>> {
        self.require(key)?;
        if key.engine() == HOSTED {
            let (path, index) = self.hosted_index(key)?;
            return index
                .render_page(&path, page, self.limits().page_turns)
                .map_err(|e| Error::io(&format!("cannot read {}", path.display()), &e))?
                .map(Arc::new)
                .ok_or_else(|| Error::not_found(format!("{key} has no page {page}")));
        }
        let Some(cache) = self.transcript(key)? else {
            return if page == 0 {
                Ok(Arc::new(Vec::new()))
            } else {
                Err(Error::not_found(format!("{key} has no page {page}")))
            };
        };
        let mut c = lock(&cache);
        let stamp = c.index.scanned_to();
        if let Some((p, s, text)) = &c.last_page {
            if *p == page && *s == stamp {
                return Ok(text.clone());
            }
        }
        let text = Arc::new(
            transcript::render_page(&c.path, &c.index, page, &self.limits()).map_err(|e| {
                let err: Error = e.into();
                if err.errno != libc::ENOENT {
                    log::warn!(
                        "{key}: page {page} of {}: {}",
                        c.path.display(),
                        err.message
                    );
                }
                err
            })?,
        );
        c.last_page = Some((page, stamp, text.clone()));
        Ok(text)
    }
}

/// The transcripts of the conversations a session's process wrote before
/// its current one: `KEY/transcript/ID/page-N`.
impl Core {
    /// The ids of `key`'s earlier conversations, oldest first.
    pub fn earlier_conversations(&self, key: &SessionKey) -> Vec<String> {
        self.meta(key).conversations
    }

    /// Whether `id` is one of `key`'s earlier conversations.
    pub fn is_earlier(&self, key: &SessionKey, id: &str) -> bool {
        self.earlier_conversations(key).iter().any(|c| c == id)
    }

    /// The turn index of `key`'s earlier conversation `id`, refreshed.
    fn earlier_index(&self, key: &SessionKey, id: &str) -> Result<Arc<Mutex<TranscriptCache>>> {
        if !self.is_earlier(key, id) {
            return Err(Error::not_found(format!(
                "{key} wrote no conversation {id}"
            )));
        }
        let kind = self
            .catalog
            .kind_of(key.engine())
            .ok_or_else(|| Error::not_found(format!("{key} has no transcript")))?;
        let conversation = SessionKey::new(key.engine(), id)?;
        let file = self
            .catalog
            .find(&conversation)
            .ok_or_else(|| Error::not_found(format!("{conversation} has no store file")))?;
        let path = self.decoded.readable(&file).map_err(|r| r.error)?;
        cached_index(
            &self.sessions.earlier_transcripts,
            &conversation,
            path,
            kind,
        )
    }

    /// How many pages an earlier conversation has (at least one).
    pub fn earlier_pages(&self, key: &SessionKey, id: &str) -> Result<usize> {
        let cache = self.earlier_index(key, id)?;
        let pages = transcript::page_count(&lock(&cache).index, self.limits().page_turns);
        Ok(pages.max(1))
    }

    /// Page `page` of an earlier conversation, rendered.
    pub fn earlier_page(&self, key: &SessionKey, id: &str, page: usize) -> Result<Vec<u8>> {
        let cache = self.earlier_index(key, id)?;
        let c = lock(&cache);
        Ok(transcript::render_page(
            &c.path,
            &c.index,
            page,
            &self.limits(),
        )?)
    }

    /// When an earlier conversation's store last changed.
    pub fn earlier_modified(&self, key: &SessionKey, id: &str) -> std::time::SystemTime {
        SessionKey::new(key.engine(), id)
            .ok()
            .and_then(|c| self.catalog.find(&c))
            .and_then(|f| std::fs::metadata(f.path).and_then(|m| m.modified()).ok())
            .unwrap_or_else(|| self.meta_changed(key))
    }
}
