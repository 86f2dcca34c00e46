//! The filesystem's logic as a plain Rust API: every operation a function
//! returning `Result<_, Error>`. The FUSE adapter only translates; tests can
//! drive this without a mount.
//!
//! - The mounted tree and the request lifecycle: `files` (one method per
//!   kernel call), `node` (inode numbers and the node table), `handles`
//!   (open handles, directory snapshots), `save` (metadata writes and the
//!   editor save protocol), `scratch` (editors' files in memory), `records`
//!   (slot records, hosted transcripts), `views`, `caps`.
//! - Sessions: this file (the shared state, creating and finding
//!   sessions), `session_runtime` (ring, VT mirror, connection), `opening`
//!   (attach or launch), `control` (`input`, `ctl`, stop), `prompt_close`
//!   (a prompt's close and its writer's signals), `conversations`
//!   (which store file a session is), `transcripts`, `status`, `root_ctl`,
//!   `listing` (rows, `meta.json`, `sessions.json`), `members` (who the
//!   root and the views hold, without listing them) and `organize`
//!   (metadata changes, archive).

pub mod agents;
pub mod organize;
pub mod records;
mod session_runtime;
pub mod sessions;
pub mod tree;
mod warnings;

pub use agents::waits::WaitReply;
pub use organize::changes::{MetaField, META_FILE_MAX};
pub use organize::rows::{daemon_mounts, listing_from_daemon};
pub use session_runtime::SessionRuntime;
pub use tree::handles::{DirEntry, DirSnapshot};
pub use tree::node::Kind;
pub use tree::requests::{Access, Attr, EvictHook, Files, Fixed, ReadBy, SetAttr};
pub use tree::step::{Later, Opened, ReadStep, Reply, Step};

use sessions::control::STOP_GRACE;
use sessions::opening::{Flight, OpenMode, INPUT_DEADLINE};

use crate::catalog::Catalog;
use crate::clock::now_ms;
use crate::config::Config;
use crate::core::organize::sidecar::SessionMeta;
use crate::core::records::slots::SlotStore;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::filelock::DIR_LOCK_WAIT;
use crate::key::SessionKey;
use crate::runtime::RuntimePaths;
use crate::sync::lock;
use crate::work::Pool;
use jiff::Timestamp;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The engine of runs the host records itself.
pub const HOSTED: &str = "hosted";

/// The whole filesystem's state, shared by every request thread.
#[derive(Debug)]
pub struct Core {
    config: Config,
    paths: RuntimePaths,
    catalog: Arc<Catalog>,
    /// Tokens and cost counted from the stores, in the background.
    usage: Arc<crate::usage::Tracker>,
    /// Plain copies of compressed rollouts, for the index and the pages.
    decoded: crate::catalog::DecodedCopies,
    wrapper: PathBuf,
    dtach: PathBuf,
    mountpoint: PathBuf,
    started_ms: u64,
    /// Slow operations (input, ctl, launches, stops, archives, changes
    /// under a store's lock) run here.
    work: Pool,
    /// The last refusal that concerned no session: root `status`'s `error`.
    root_error: Mutex<Option<String>>,
    /// The key the root `ctl`'s last `new` made (root `status`'s `new`).
    last_new: Mutex<Option<String>>,
    warnings: warnings::Warnings,
    /// Each room's own state.
    sessions: sessions::SessionsState,
    agents: agents::AgentsState,
    organize: organize::OrganizeState,
    records: records::RecordsState,
}

/// Whose `status` `error` a refusal goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Concern {
    /// The session's.
    Session(SessionKey),
    /// The root's: the refusal concerns no session.
    Root,
}

/// What [`Core::on_members_changed`] calls with the session concerned.
pub struct SessionHook(pub Box<dyn Fn(&SessionKey) + Send + Sync>);

/// What [`Core::on_moved`] calls with the sessions that moved.
pub struct MovesHook(pub Box<MovedKeys>);

/// A function of the keys of sessions that moved.
pub type MovedKeys = dyn Fn(&[SessionKey]) + Send + Sync;

impl std::fmt::Debug for SessionHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionHook")
    }
}

impl std::fmt::Debug for MovesHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MovesHook")
    }
}

/// A hook the FUSE adapter sets once; called if set.
#[derive(Debug)]
struct HookSlot<H>(std::sync::OnceLock<H>);

impl<H> Default for HookSlot<H> {
    fn default() -> Self {
        HookSlot(std::sync::OnceLock::new())
    }
}

impl<H> HookSlot<H> {
    fn set(&self, hook: H, what: &str) {
        if self.0.set(hook).is_err() {
            log::debug!("a second {what} hook is ignored");
        }
    }

    fn get(&self) -> Option<&H> {
        self.0.get()
    }
}

impl HookSlot<SessionHook> {
    fn call(&self, key: &SessionKey) {
        if let Some(hook) = self.0.get() {
            (hook.0)(key);
        }
    }
}

fn to_json_text(v: &Value) -> Vec<u8> {
    let mut text = serde_json::to_vec_pretty(v).expect("json serialises");
    text.push(b'\n');
    text
}

/// Finds `dtach` on `PATH` (or `SESSIONFS_DTACH`).
pub fn find_dtach() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("SESSIONFS_DTACH").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    // mount(8) runs helpers with a bare environment: look in the usual places too.
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(std::env::split_paths(crate::runtime::wrapper::DEFAULT_PATH))
        .map(|d| d.join("dtach"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::not_found(
                "dtach is not installed (not found on PATH); install the dtach package",
            )
        })
}

impl Core {
    /// Prepares directories and finds the programs the runtime needs.
    pub fn new(config: Config, mountpoint: &Path) -> Result<Arc<Core>> {
        let dtach = find_dtach()?;
        crate::core::organize::meta_edit::set_own_mount(mountpoint);
        let core = Self::build(config, mountpoint, dtach, true)?;
        core.catalog.start();
        // Counted from the start, so the usage files hold still once it ends.
        core.usage.request();
        crate::core::organize::rows::start_janitor(&core);
        crate::core::agents::session_agent::start(&core);
        crate::core::agents::discoveries::start(&core);
        Ok(core)
    }

    /// The same state for reading only (`sessionfs ls`): starts nothing, so
    /// it needs no dtach.
    pub fn for_listing(config: Config) -> Result<Arc<Core>> {
        Self::build(config, Path::new(""), PathBuf::from("dtach"), false)
    }

    /// A core on a home, state and runtime directory of its own, for tests
    /// without a mount; `settings` add to its environment.
    #[cfg(test)]
    pub(crate) fn for_tests(settings: &[(&str, &str)]) -> (Arc<Core>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut env: std::collections::HashMap<String, String> = [
            ("HOME", home),
            ("XDG_STATE_HOME", dir.path().join("state")),
            ("XDG_RUNTIME_DIR", dir.path().join("run")),
            ("CODEX_HOME", dir.path().join("codex")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.display().to_string()))
        .collect();
        env.extend(settings.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let core = Core::for_listing(Config::from_map(&env, None).unwrap()).unwrap();
        (core, dir)
    }

    /// `watch`: keep the catalog current with inotify (a daemon); else it
    /// is walked when consulted (a one-shot command).
    fn build(config: Config, mountpoint: &Path, dtach: PathBuf, watch: bool) -> Result<Arc<Core>> {
        let event_stream = Arc::new(crate::agent::stream::EventStream::with_cap(
            &config.state_dir,
            config.events_bytes,
        ));
        config.prepare_dirs()?;
        let paths = RuntimePaths::new(&config.runtime_dir, &config.lock_dir);
        if !paths.socket_dir_usable() {
            return Err(Error::invalid(format!(
                "runtime directory {} is too long for unix socket paths",
                config.runtime_dir.display()
            )));
        }
        let wrapper = std::env::current_exe()
            .map_err(|e| Error::io("cannot find the sessionfs binary", &e))?;
        let catalog = Arc::new(Catalog::open(&config.engines, &config.state_dir, watch));
        let forget_in = Arc::downgrade(&catalog);
        // A count changes what a conversation's listing text shows.
        let on_publish: crate::usage::OnPublish = Box::new(move |keys| {
            if let Some(catalog) = forget_in.upgrade() {
                for key in keys {
                    catalog.forget_listing_text(key);
                }
            }
        });
        let usage = Arc::new(crate::usage::Tracker::new(
            config.prices.clone(),
            catalog.clone(),
            Some(on_publish),
        ));
        Ok(Arc::new(Core {
            catalog,
            usage,
            decoded: crate::catalog::DecodedCopies::new(config.runtime_dir.join("decoded")),
            sessions: sessions::SessionsState::default(),
            agents: agents::AgentsState::new(event_stream),
            organize: organize::OrganizeState::open(&config.state_dir),
            records: records::RecordsState::open(&config.state_dir),
            paths,
            config,
            wrapper,
            dtach,
            mountpoint: mountpoint.to_path_buf(),
            started_ms: now_ms(),
            work: Pool::default(),
            root_error: Mutex::new(None),
            last_new: Mutex::new(None),
            warnings: Default::default(),
        }))
    }

    /// Where the adapter runs what may wait on a session.
    pub fn work(&self) -> &Pool {
        &self.work
    }

    fn engine(&self, key: &SessionKey) -> Result<&Engine> {
        self.config.engines.get(key.engine()).ok_or_else(|| {
            Error::invalid(format!(
                "unknown engine {:?}; known: {}",
                key.engine(),
                self.config.engines.names().collect::<Vec<_>>().join(", ")
            ))
        })
    }

    /// When metadata last changed: the mtime of `meta.json` and its kin,
    /// steady while nothing is edited (editors compare it before saving).
    pub fn meta_modified(&self) -> std::time::SystemTime {
        self.organize.sidecar.modified()
    }

    /// The one place a failure is told: logged at its level (a warning for
    /// a refusal of what the user asked, an error for a fault) and, unless
    /// it is only for the log (below `Warn`), put where `concern` says the
    /// user reads it: the session's `status.error` or the root `status`'s
    /// `error`. An error recorded already and passed up with more context
    /// updates that text but is not logged again.
    pub fn record(&self, concern: &Concern, mut err: Error) -> Error {
        let again = err.mark_recorded();
        let scope = match concern {
            Concern::Session(key) => key.as_str(),
            Concern::Root => "",
        };
        let line = if scope.is_empty() {
            err.message.clone()
        } else {
            format!("{scope}: {}", err.message)
        };
        if again {
            log::debug!("(again) {line}");
        } else {
            self.warnings.log(scope, err.level(), &line);
        }
        if err.level() <= log::Level::Warn {
            let text = Some(err.message.clone());
            match concern {
                Concern::Session(key) => {
                    if self.exists(key) {
                        lock(&self.runtime(key).state).error = text;
                    }
                }
                Concern::Root => *lock(&self.root_error) = text,
            }
        }
        err
    }

    /// The last refusal recorded about no session.
    pub(super) fn root_error(&self) -> Option<String> {
        lock(&self.root_error).clone()
    }

    pub fn exists(&self, key: &SessionKey) -> bool {
        if key.engine() == HOSTED {
            return self.records.slots.transcript_path(key.id()).is_file();
        }
        self.organize.sidecar.get(&key.to_string()).is_some()
            || lock(&self.sessions.runtimes)
                .get(key)
                .is_some_and(|rt| rt.live_client().is_some())
            || (self.catalog.kind_of(key.engine()).is_some() && self.catalog.find(key).is_some())
    }

    fn require(&self, key: &SessionKey) -> Result<()> {
        if self.exists(key) {
            Ok(())
        } else {
            Err(Error::not_found(format!("no session {key}")))
        }
    }

    fn meta(&self, key: &SessionKey) -> SessionMeta {
        self.organize
            .sidecar
            .get(&key.to_string())
            .unwrap_or_default()
    }

    pub fn is_archived(&self, key: &SessionKey) -> bool {
        self.meta(key).archived
    }

    /// `mkdir ENGINE:ID`: a session record; nothing starts until it is opened.
    pub fn create(&self, name: &str) -> Result<SessionKey> {
        // Callers log a refusal where the user can read it (`mkdir`, `ctl`).
        let key = SessionKey::parse(name)?;
        let engine = self.engine(&key)?;
        if self.exists(&key) {
            return Err(Error::new(libc::EEXIST, format!("{key} already exists")));
        }
        // A hosted session is its transcript: a record alone would be listed
        // but could never be opened.
        if !engine.launchable() {
            return Err(Error::perm(format!(
                "{key}: hosted sessions are made by writing agent-transcripts/{}.jsonl",
                key.id()
            )));
        }
        engine.check_new_id(key.id())?;
        // `mkdir` keeps the root locked in the kernel while this waits.
        self.organize.sidecar.update_within(DIR_LOCK_WAIT, |all| {
            all.entry_or(key.as_str(), || SessionMeta {
                created_ms: now_ms(),
                ..Default::default()
            });
            Ok(())
        })?;
        log::info!("{key}: created");
        self.agents
            .event_stream
            .append(now_ms(), key.as_str(), "made", serde_json::json!({}));
        Ok(key)
    }

    /// The slot records and hosted-run transcripts (SPEC §9).
    pub fn slots(&self) -> &SlotStore {
        &self.records.slots
    }
}

/// `2026-11-29T18:53:10.123Z` for milliseconds since the epoch (the epoch
/// itself for a value no calendar holds).
fn utc_text(ms: u64) -> String {
    let at = i64::try_from(ms)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok());
    format!("{:.3}", at.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::warnings::capture_log;
    use log::Level;

    fn status_error(core: &Core, concern: &Concern) -> Option<String> {
        match concern {
            Concern::Session(key) => lock(&core.runtime(key).state).error.clone(),
            Concern::Root => core.root_error(),
        }
    }

    #[test]
    fn a_refusal_passed_up_twice_is_logged_once_and_read_with_its_context() {
        let (core, _dir) = Core::for_tests(&[]);
        let key = core.create("shell:a").unwrap();
        let session = Concern::Session(key.clone());
        let (err, lines) = capture_log(|| {
            let inner = core.record(&session, Error::invalid("title has a tab"));
            let outer = core.record(&session, inner.with_context("rename t -> title"));
            core.record(&session, outer.with_context("commit"))
        });
        let warnings: Vec<_> = lines.iter().filter(|(l, _)| *l <= Level::Warn).collect();
        assert_eq!(
            warnings,
            [&(Level::Warn, "shell:a: title has a tab".to_string())],
            "{lines:?}"
        );
        assert_eq!(err.errno, libc::EINVAL);
        assert_eq!(err.message, "commit: rename t -> title: title has a tab");
        assert_eq!(status_error(&core, &session).unwrap(), err.message);
        // A new refusal with the same words is a refusal of its own.
        let (_, lines) = capture_log(|| core.record(&session, Error::invalid("title has a tab")));
        assert_eq!(lines, [(Level::Warn, "shell:a: title has a tab".into())]);
        // The root's.
        let (_, lines) = capture_log(|| {
            let e = core.record(&Concern::Root, Error::invalid("empty ctl command"));
            core.record(&Concern::Root, e.with_context("ctl"))
        });
        assert_eq!(lines.iter().filter(|(l, _)| *l == Level::Warn).count(), 1);
        assert_eq!(
            status_error(&core, &Concern::Root).unwrap(),
            "ctl: empty ctl command"
        );
    }

    #[test]
    fn a_fault_is_an_error_in_the_log_and_a_quiet_failure_stays_out_of_status() {
        let (core, _dir) = Core::for_tests(&[]);
        let key = core.create("shell:f").unwrap();
        let session = Concern::Session(key);
        let disk = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let (_, lines) = capture_log(|| core.record(&session, Error::io("save", &disk)));
        assert_eq!(lines, [(Level::Error, format!("shell:f: save: {disk}"))]);
        assert_eq!(
            status_error(&core, &session).unwrap(),
            format!("save: {disk}")
        );
        let quiet = Error::invalid("an empty prompt").at_level(Level::Debug);
        let (_, lines) = capture_log(|| core.record(&session, quiet));
        assert_eq!(lines, [(Level::Debug, "shell:f: an empty prompt".into())]);
        assert_eq!(
            status_error(&core, &session).unwrap(),
            format!("save: {disk}")
        );
    }

    #[test]
    fn times_are_utc_with_milliseconds() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_text(1_795_978_390_120), "2026-11-29T18:53:10.120Z");
        assert_eq!(utc_text(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc_text(u64::MAX), "1970-01-01T00:00:00.000Z");
    }
}
