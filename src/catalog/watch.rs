//! inotify on the stores' directories: which conversation files appeared,
//! changed or went, read without blocking whenever the index is consulted.

use super::walk::Root;
use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// What the events say to look at again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A conversation file was created, written, moved or removed.
    File { root: usize, path: PathBuf },
    /// A directory on the way to conversations appeared: walk it.
    NewDir {
        root: usize,
        path: PathBuf,
        depth: u8,
    },
    /// A directory went away (moved out, removed): forget what was under it.
    GoneDir { path: PathBuf },
    /// The kernel dropped events: only a full walk is sure.
    Overflow,
}

#[derive(Debug)]
pub struct Watcher {
    inotify: Inotify,
    dirs: HashMap<WatchDescriptor, (usize, PathBuf, u8)>,
    /// A failed watch is logged once.
    warned: bool,
    /// When each root not watched was last walked to watch it.
    root_tries: HashMap<usize, std::time::Instant>,
}

/// Bounded: one read takes what fits, the rest stays queued in the kernel.
const BUFFER: usize = 64 << 10;

impl Watcher {
    pub fn new() -> std::io::Result<Watcher> {
        Ok(Watcher {
            inotify: Inotify::init()?,
            dirs: HashMap::new(),
            warned: false,
            root_tries: HashMap::new(),
        })
    }

    /// Watches a directory `depth` levels below root `root`.
    pub fn watch(&mut self, roots: &[Root], root: usize, dir: &Path, depth: u8) {
        let files = depth == roots[root].file_depth();
        let mask = if files {
            WatchMask::CREATE
                | WatchMask::MODIFY
                | WatchMask::ATTRIB
                | WatchMask::CLOSE_WRITE
                | WatchMask::MOVED_TO
                | WatchMask::MOVED_FROM
                | WatchMask::DELETE
        } else {
            WatchMask::CREATE | WatchMask::MOVED_TO | WatchMask::MOVED_FROM | WatchMask::DELETE
        } | WatchMask::ONLYDIR;
        match self.inotify.watches().add(dir, mask) {
            Ok(wd) => {
                self.dirs.insert(wd, (root, dir.to_path_buf(), depth));
            }
            // A store that does not exist yet (no Claude on this machine) is
            // normal; the rescan finds it once the engine makes it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                log::debug!("{} does not exist yet; not watched", dir.display());
            }
            Err(e) => {
                if !self.warned {
                    self.warned = true;
                    log::warn!(
                        "cannot watch {} ({e}); new conversations show up at the next rescan",
                        dir.display()
                    );
                }
            }
        }
    }

    /// The events queued so far, without waiting.
    pub fn drain(&mut self, roots: &[Root]) -> Vec<Change> {
        let mut buf = vec![0u8; BUFFER];
        let mut out = Vec::new();
        // A store that did not exist when last looked at: one `stat` each,
        // walked (and so watched) once it appears.
        for (i, r) in roots.iter().enumerate() {
            let watched = self.dirs.values().any(|(root, _, d)| *root == i && *d == 0);
            let tried = self
                .root_tries
                .get(&i)
                .is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1));
            if !watched && !tried && r.path.is_dir() {
                // At most once a second, should watching it keep failing.
                self.root_tries.insert(i, std::time::Instant::now());
                out.push(Change::NewDir {
                    root: i,
                    path: r.path.clone(),
                    depth: 0,
                });
            }
        }
        // A few buffers at most per call; what is left is read next time.
        for _ in 0..16 {
            let events = match self.inotify.read_events(&mut buf) {
                Ok(events) => events,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    log::warn!("reading inotify events failed: {e}");
                    out.push(Change::Overflow);
                    break;
                }
            };
            let mut any = false;
            for event in events {
                any = true;
                if event.mask.contains(EventMask::Q_OVERFLOW) {
                    out.push(Change::Overflow);
                    continue;
                }
                if event.mask.contains(EventMask::IGNORED) {
                    self.dirs.remove(&event.wd);
                    continue;
                }
                let Some((root, dir, depth)) = self.dirs.get(&event.wd) else {
                    continue;
                };
                let Some(name) = event.name.and_then(OsStr::to_str) else {
                    continue;
                };
                let path = dir.join(name);
                let r = &roots[*root];
                let is_dir = event.mask.contains(EventMask::ISDIR);
                if *depth == r.file_depth() {
                    if !is_dir && r.is_conversation_name(name) {
                        out.push(Change::File { root: *root, path });
                    }
                } else if is_dir && r.wants_dir(depth + 1, name) {
                    if event
                        .mask
                        .intersects(EventMask::CREATE | EventMask::MOVED_TO)
                    {
                        out.push(Change::NewDir {
                            root: *root,
                            path,
                            depth: depth + 1,
                        });
                    } else {
                        out.push(Change::GoneDir { path });
                    }
                }
            }
            if !any {
                break;
            }
        }
        out.dedup();
        out
    }
}
