//! The sessions the root and the views hold, and what the views group them
//! by, kept apart from the listing's rows. Output and activity reorder the
//! listing all the time but change no member, so a path walk through
//! `projects/NAME` or `engines/NAME`, and the attributes of the root and
//! the views, read this index: made again only when a member may have
//! changed (a conversation came or went, the metadata changed, a session
//! connected or disconnected, a hosted run's transcript came or went).

use crate::core::organize::rows::SessionRow;
use crate::core::organize::sidecar::{Change, SessionMeta};
use crate::core::organize::views::ViewDir;
use crate::core::{Core, HOSTED};
use crate::key::SessionKey;
use crate::sync::lock;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How long an index is trusted when the transcripts' directory changed
/// just before it was made: a second change within the filesystem's time
/// granularity would leave the directory's mtime as it was.
const SETTLE: Duration = Duration::from_secs(1);

/// What the members depend on, each read in O(1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MembersStamp {
    /// The conversations in the engines' stores (not their contents).
    conversations: u64,
    /// The metadata: records, archived, favourite, project.
    records: u64,
    /// Connections made and lost here: a live session without a record is listed.
    connections: u64,
    /// The hosted runs' transcripts.
    hosted: Option<SystemTime>,
}

/// The members as of one stamp.
#[derive(Debug, Default, Clone)]
pub(in crate::core) struct Membership {
    /// Active sessions by project, and by engine.
    projects: HashMap<String, usize>,
    engines: HashMap<String, usize>,
    /// Every session's key and the flags views group by, digested.
    digest: u64,
    /// How many sessions there are, archived ones too.
    sessions: usize,
}

impl Membership {
    /// One pass, no sort: at 100,000 sessions this is made again after
    /// every `mkdir`, archive or change of a project.
    fn of(rows: &[SessionRow]) -> Membership {
        let mut projects: HashMap<&str, usize> = HashMap::new();
        let mut engines: HashMap<&str, usize> = HashMap::new();
        let mut digest = 0u64;
        for row in rows {
            digest = digest.wrapping_add(member_hash(&row.key, &row.meta));
            if row.meta.archived {
                continue;
            }
            if let Some(project) = &row.meta.project {
                *projects.entry(project).or_default() += 1;
            }
            *engines.entry(row.key.engine()).or_default() += 1;
        }
        let owned = |by: HashMap<&str, usize>| {
            by.into_iter()
                .map(|(name, n)| (name.to_string(), n))
                .collect()
        };
        Membership {
            projects: owned(projects),
            engines: owned(engines),
            digest,
            sessions: rows.len(),
        }
    }

    /// Counts `key`, grouped by `meta`, in (`by` 1) or out (`by` -1).
    fn count(&mut self, key: &SessionKey, meta: &SessionMeta, by: isize) {
        let hash = member_hash(key, meta);
        self.digest = if by > 0 {
            self.digest.wrapping_add(hash)
        } else {
            self.digest.wrapping_sub(hash)
        };
        self.sessions = self.sessions.saturating_add_signed(by);
        if meta.archived {
            return;
        }
        let tally = |by_name: &mut HashMap<String, usize>, name: &str| {
            let n = by_name.entry(name.to_string()).or_default();
            *n = n.saturating_add_signed(by);
            if *n == 0 {
                by_name.remove(name);
            }
        };
        if let Some(project) = &meta.project {
            tally(&mut self.projects, project);
        }
        tally(&mut self.engines, key.engine());
    }

    /// Whether `projects/NAME` (or `engines/NAME`) exists: an active
    /// session has that project (or engine).
    pub(in crate::core) fn has_facet(&self, view: ViewDir, name: &str) -> bool {
        self.counts(view).get(name).is_some_and(|n| *n > 0)
    }

    /// Active sessions by project (`projects/`) or by engine (`engines/`).
    fn counts(&self, view: ViewDir) -> &HashMap<String, usize> {
        match view {
            ViewDir::Projects => &self.projects,
            _ => &self.engines,
        }
    }

    /// What `projects/` (or `engines/`) lists: every project (engine) an
    /// active session has, in name order, without a look at the sessions.
    pub(in crate::core) fn facet_names(&self, view: ViewDir) -> Vec<String> {
        let mut names: Vec<String> = self
            .counts(view)
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(name, _)| name.clone())
            .collect();
        names.sort_unstable();
        names
    }

    /// How many sessions there are (the root `status`'s `sessions`).
    pub(in crate::core) fn sessions(&self) -> usize {
        self.sessions
    }

    /// Changes when a session comes or goes or changes what views group it by.
    pub(in crate::core) fn digest(&self) -> u64 {
        self.digest
    }
}

/// One session's key and the flags views group by, hashed with this
/// process's random keys. The members' digest is the sum of these: it does
/// not depend on the listing's order, and no one can choose keys whose
/// changes cancel out.
fn member_hash(key: &SessionKey, meta: &SessionMeta) -> u64 {
    static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
    KEYS.get_or_init(std::hash::RandomState::new).hash_one((
        key.as_str(),
        meta.archived,
        meta.favourite,
        meta.project.as_deref(),
    ))
}

#[derive(Debug)]
struct Current {
    stamp: MembersStamp,
    made: Instant,
    /// The transcripts' directory had not changed for [`SETTLE`] when it was made.
    settled: bool,
    membership: Arc<Membership>,
}

/// Counts the connections made and lost; shared with the output readers,
/// which see a connection end.
#[derive(Debug, Clone, Default)]
pub(in crate::core) struct Connections(Arc<AtomicU64>);

impl Connections {
    /// A session connected or disconnected (call after the change).
    pub(in crate::core) fn changed(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    fn count(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// The index and what keeps it current.
#[derive(Debug, Default)]
pub(in crate::core) struct Members {
    pub(in crate::core) connections: Connections,
    current: Mutex<Option<Current>>,
}

impl Core {
    fn members_stamp(&self) -> MembersStamp {
        MembersStamp {
            conversations: self.catalog.keys_version(),
            records: self.organize.sidecar.generation(),
            connections: self.organize.members.connections.count(),
            hosted: self.records.slots.transcripts_changed(),
        }
    }

    /// How many active sessions the root lists now.
    pub fn session_count(&self) -> usize {
        self.membership().sessions()
    }

    /// The members now: the index made before while nothing they depend on
    /// changed; moved by the records' changes when only they changed (an
    /// edit costs the same whatever the number of sessions); else made
    /// again from the rows.
    pub(in crate::core) fn membership(&self) -> Arc<Membership> {
        // Taken before the rows, so a change in between makes it again.
        let mut stamp = self.members_stamp();
        let prior = lock(&self.organize.members.current)
            .as_ref()
            .map(|current| {
                (
                    current.stamp,
                    current.settled || current.made.elapsed() < SETTLE,
                    current.membership.clone(),
                )
            });
        if let Some((then, fresh, membership)) = prior {
            if then == stamp && fresh {
                return membership;
            }
            let only_records = MembersStamp {
                records: stamp.records,
                ..then
            } == stamp;
            if only_records && fresh {
                let moved = self.organize.sidecar.changes_since(then.records).and_then(
                    |(generation, changes)| {
                        stamp.records = generation;
                        self.moved_membership(&membership, &changes)
                    },
                );
                if let Some(moved) = moved {
                    let moved = Arc::new(moved);
                    let mut current = lock(&self.organize.members.current);
                    if let Some(current) = current.as_mut().filter(|c| c.stamp == then) {
                        current.stamp = stamp;
                        current.membership = moved.clone();
                    }
                    return moved;
                }
            }
        }
        let stamp = self.members_stamp();
        let membership = Arc::new(Membership::of(&self.rows(false)));
        let settled = stamp
            .hosted
            .is_none_or(|at| at + SETTLE <= SystemTime::now());
        *lock(&self.organize.members.current) = Some(Current {
            stamp,
            made: Instant::now(),
            settled,
            membership: membership.clone(),
        });
        membership
    }
}

impl Core {
    /// `membership` with the records' `changes` made to it; `None` when
    /// one of them may change more than its own session's membership (a
    /// conversation claimed or switched, a hosted run's record).
    fn moved_membership(&self, membership: &Membership, changes: &[Change]) -> Option<Membership> {
        let mut moved = membership.clone();
        let nothing = SessionMeta::default();
        for change in changes {
            let Ok(key) = SessionKey::parse(&change.key) else {
                // Never listed.
                continue;
            };
            let (before, after) = (change.before.as_ref(), change.after.as_ref());
            let conversations = |m: Option<&SessionMeta>| {
                m.map(|m| (m.conversation.clone(), m.conversations.clone()))
            };
            if key.engine() == HOSTED
                || conversations(before).unwrap_or_default()
                    != conversations(after).unwrap_or_default()
                || self.conversation_owner(&key).is_some()
            {
                return None;
            }
            // Listed without a record: a conversation in a store, or live here.
            let bare = (self.catalog.kind_of(key.engine()).is_some()
                && self.catalog.find(&key).is_some())
                || lock(&self.sessions.runtimes)
                    .get(&key)
                    .is_some_and(|rt| rt.live_client().is_some());
            if before.is_some() || bare {
                moved.count(&key, before.unwrap_or(&nothing), -1);
            }
            if after.is_some() || bare {
                moved.count(&key, after.unwrap_or(&nothing), 1);
            }
        }
        Some(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::organize::sidecar::SessionMeta;
    use crate::core::tree::node::ROOT;
    use crate::core::Files;
    use crate::key::SessionKey;
    use std::ffi::OsStr;

    fn core() -> (Arc<Core>, tempfile::TempDir) {
        Core::for_tests(&[])
    }

    /// `n` shell sessions; the even ones in project `web`.
    fn sessions(core: &Core, n: usize) {
        core.organize
            .sidecar
            .update(|all| {
                for i in 0..n {
                    let meta = SessionMeta {
                        created_ms: 1,
                        project: (i % 2 == 0).then(|| "web".to_string()),
                        ..Default::default()
                    };
                    all.insert(format!("shell:s{i}"), meta);
                }
                Ok(())
            })
            .unwrap();
    }

    fn set_project(core: &Core, key: &str, project: Option<&str>) {
        core.organize
            .sidecar
            .update(|all| {
                all.get_mut(key).unwrap().project = project.map(str::to_string);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn a_walk_through_a_facet_gathers_no_listing_while_a_session_writes() {
        let (core, _dir) = core();
        sessions(&core, 400);
        let files = Files::new(core.clone());
        let projects = files.lookup(ROOT, OsStr::new("projects"), 0).unwrap().ino;
        let engines = files.lookup(ROOT, OsStr::new("engines"), 0).unwrap().ino;
        let talker = core
            .session_runtime(&SessionKey::parse("shell:s1").unwrap())
            .unwrap();
        let before = core.organize.listings.gathered();
        // What `ls -l projects/web/` does per link while one session
        // prints: the path walk looks the facet up and asks its attributes.
        for i in 0..100 {
            talker.take_output(format!("line {i}\r\n").as_bytes());
            let web = files.lookup(projects, OsStr::new("web"), 0).unwrap();
            files.getattr(web.ino, None, 0).unwrap();
            files.lookup(engines, OsStr::new("shell"), 0).unwrap();
            files.getattr(ROOT, None, 0).unwrap();
            let missing = files.lookup(projects, OsStr::new("api"), 0).unwrap_err();
            assert_eq!(missing.errno, libc::ENOENT);
            // `ls projects/`: the facets' names, not every session's row.
            let fh = files.opendir(projects).unwrap();
            let listed = files.readdir(projects, fh).unwrap();
            assert!(listed.iter().any(|e| e.name == "web"));
            files.releasedir(fh);
        }
        let gathered = core.organize.listings.gathered() - before;
        assert!(
            gathered <= 1,
            "{gathered} listings gathered for 100 walks and listings"
        );
    }

    #[test]
    fn a_facet_comes_and_goes_with_its_last_session_at_once() {
        let (core, _dir) = core();
        sessions(&core, 4);
        let files = Files::new(core.clone());
        let projects = files.lookup(ROOT, OsStr::new("projects"), 0).unwrap().ino;
        let found = |name: &str| files.lookup(projects, OsStr::new(name), 0).is_ok();
        let listed = |dir: u64| {
            let fh = files.opendir(dir).unwrap();
            let names: Vec<String> = (files.readdir(dir, fh).unwrap().iter())
                .map(|e| e.name.clone())
                .filter(|n| n != "." && n != "..")
                .collect();
            files.releasedir(fh);
            names
        };
        assert!(found("web") && !found("api"));
        assert_eq!(listed(projects), ["web"]);
        let root_time = files.getattr(ROOT, None, 0).unwrap().mtime;

        set_project(&core, "shell:s1", Some("api"));
        assert!(found("web") && found("api"));
        assert_eq!(listed(projects), ["api", "web"]);
        set_project(&core, "shell:s0", None);
        set_project(&core, "shell:s2", Some("api"));
        assert!(!found("web"), "its last session left");
        assert!(found("api"));
        assert_eq!(listed(projects), ["api"]);
        assert!(files.getattr(ROOT, None, 0).unwrap().mtime >= root_time);

        // Archived sessions are in no facet; a new record is in its engine's.
        let recorded: Vec<String> = core.organize.sidecar.all().into_keys().collect();
        core.organize
            .sidecar
            .update(|all| {
                for key in &recorded {
                    if let Some(meta) = all.get_mut(key) {
                        meta.archived = true;
                    }
                }
                Ok(())
            })
            .unwrap();
        let engines = files.lookup(ROOT, OsStr::new("engines"), 0).unwrap().ino;
        assert!(!found("api"));
        assert!(listed(projects).is_empty());
        assert!(files.lookup(engines, OsStr::new("shell"), 0).is_err());
        assert!(listed(engines).is_empty());
        assert_eq!(core.membership().sessions(), 4, "archived ones count");
        core.create("shell:new").unwrap();
        assert!(files.lookup(engines, OsStr::new("shell"), 0).is_ok());
        assert_eq!(core.membership().sessions(), 5);
        assert_eq!(listed(engines), ["shell"]);
    }

    #[test]
    fn members_are_dated_by_what_they_are_not_by_activity() {
        let (core, _dir) = core();
        sessions(&core, 4);
        let first = core.membership();
        let talker = core
            .session_runtime(&SessionKey::parse("shell:s3").unwrap())
            .unwrap();
        talker.take_output(b"output\r\n");
        assert!(Arc::ptr_eq(&first, &core.membership()), "kept");
        set_project(&core, "shell:s3", Some("api"));
        let second = core.membership();
        assert_ne!(first.digest(), second.digest());
        assert!(second.has_facet(ViewDir::Projects, "api"));
        assert!(!first.has_facet(ViewDir::Projects, "api"));
    }

    /// The members moved change by change are the members made from the
    /// rows, through every kind of edit, and an edit gathers no listing.
    #[test]
    fn members_moved_by_edits_are_the_members_made_again() {
        let (core, _dir) = core();
        sessions(&core, 50);
        let mut rng = crate::transcript::testgen::Rng::new(7);
        core.membership();
        let gathered = core.organize.listings.gathered();
        for round in 0..300 {
            let key = format!("shell:s{}", rng.below(60));
            let pick = rng.below(6);
            core.organize
                .sidecar
                .update(|all| {
                    match pick {
                        0 => all.remove(&key),
                        1 => {
                            all.entry_or(&key, SessionMeta::default).archived = rng.below(2) == 0;
                        }
                        2 => all.entry_or(&key, SessionMeta::default).favourite ^= true,
                        3 => {
                            let project = ["web", "api", "x"][rng.below(3) as usize];
                            all.entry_or(&key, SessionMeta::default).project =
                                (rng.below(4) > 0).then(|| project.to_string());
                        }
                        4 => all.entry_or(&key, SessionMeta::default).title = Some("t".into()),
                        _ => {}
                    }
                    Ok(())
                })
                .unwrap();
            let moved = core.membership();
            let made = Membership::of(&core.gather_rows());
            assert_eq!(moved.digest(), made.digest(), "round {round}");
            assert_eq!(moved.sessions(), made.sessions(), "round {round}");
            for view in [ViewDir::Projects, ViewDir::Engines] {
                assert_eq!(
                    moved.facet_names(view),
                    made.facet_names(view),
                    "round {round}"
                );
            }
        }
        assert_eq!(
            core.organize.listings.gathered() - gathered,
            300,
            "only the checks gathered"
        );
    }
}
