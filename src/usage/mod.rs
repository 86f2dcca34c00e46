//! Tokens and cost per conversation, counted from the engines' stores
//! (SPEC §14): every row read, in the background, a growing file only for
//! its new lines. Request threads read what the last pass published and
//! never wait on a pass.

pub mod prices;
pub mod scan;

pub use prices::{ModelPrice, Prices, PRICES_DATED};
pub use scan::{Request, RequestList, Tokens};

use crate::catalog::{Catalog, Stamp, StoreFiles};
use crate::key::SessionKey;
use crate::sync::lock;
use crate::transcript::StoreKind;
use scan::{FileScan, Models};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// How often a pass publishes what it has counted so far.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);
/// How often, once asked, the counter looks whether the stores changed.
const LOOK_EVERY: Duration = Duration::from_secs(2);
/// Claude's subagents' files counted with their conversation, at most.
const MAX_SUBAGENT_FILES: usize = 1_000;

/// One conversation's files as counted: its own (whose path the catalog
/// holds) and, for Claude, its subagents'.
struct Counted {
    stamp: Stamp,
    main: FileScan,
    subagents: Vec<(Box<Path>, FileScan)>,
}

/// Each model's name and price, by number.
pub type ModelTable = Arc<Vec<(Arc<str>, Option<ModelPrice>)>>;

/// What only the pass that holds it touches.
#[derive(Default)]
struct Counting {
    counted: HashMap<SessionKey, Counted>,
    models: Models,
    /// The catalog's version and keys' version the last pass began at.
    passed: Option<(u64, u64)>,
}

#[derive(Default)]
struct Asked {
    /// A pass is wanted.
    pass: bool,
    /// The counting thread runs.
    running: bool,
}

/// Called with the conversations a publication changed.
pub type OnPublish = Box<dyn Fn(&[SessionKey]) + Send + Sync>;

/// The counter: a thread started at the first ask, and what it published.
pub struct Tracker {
    prices: Prices,
    catalog: Arc<Catalog>,
    published: Mutex<Arc<HashMap<SessionKey, RequestList>>>,
    /// Grows before `published` names a new model.
    models: Mutex<ModelTable>,
    version: AtomicU64,
    counting: Mutex<Counting>,
    asked: Mutex<Asked>,
    wake: Condvar,
    on_publish: Option<OnPublish>,
    /// A pass runs now.
    passing: AtomicBool,
    /// Passes finished, and the catalog's version the last one began at
    /// (`u64::MAX`: none yet): read without the pass's lock.
    passes: AtomicU64,
    passed_version: AtomicU64,
}

/// How far the counter is, for the root `status`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct UsageStats {
    /// Conversations counted.
    pub conversations: usize,
    pub passes: u64,
    /// Every store is counted as it is now: no pass runs or is asked for.
    pub settled: bool,
    pub prices_dated: &'static str,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("version", &self.version.load(Ordering::Relaxed))
            .finish()
    }
}

impl Tracker {
    /// `on_publish` hears which conversations' counts changed (the listing
    /// drops the texts it kept for them).
    pub fn new(prices: Prices, catalog: Arc<Catalog>, on_publish: Option<OnPublish>) -> Tracker {
        Tracker {
            prices,
            catalog,
            published: Mutex::new(Arc::default()),
            models: Mutex::new(Arc::default()),
            version: AtomicU64::new(0),
            counting: Mutex::new(Counting::default()),
            asked: Mutex::new(Asked::default()),
            wake: Condvar::new(),
            on_publish,
            passing: AtomicBool::new(false),
            passes: AtomicU64::new(0),
            passed_version: AtomicU64::new(u64::MAX),
        }
    }

    /// How far the counter is; never waits for a pass.
    pub fn stats(&self) -> UsageStats {
        let asked = lock(&self.asked).pass;
        let passed = self.passed_version.load(Ordering::Acquire);
        UsageStats {
            conversations: lock(&self.published).len(),
            passes: self.passes.load(Ordering::Acquire),
            settled: !asked
                && !self.passing.load(Ordering::Acquire)
                && passed == self.catalog.version(),
            prices_dated: PRICES_DATED,
        }
    }

    /// Bumped by every publication that changed a count.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Starts counting in the background, once: a first pass over the
    /// stores, then one whenever they change. Never waits. A daemon starts
    /// it at its start; a read of a usage file, where nothing did.
    pub fn request(self: &Arc<Self>) {
        let mut asked = lock(&self.asked);
        if asked.running {
            // It follows the stores already: a read asks for nothing more.
            return;
        }
        asked.pass = true;
        asked.running = true;
        let weak = Arc::downgrade(self);
        let started = std::thread::Builder::new()
            .name("usage".into())
            .spawn(move || count_in_background(weak));
        if let Err(e) = started {
            log::warn!("usage: cannot start the counting thread: {e}");
            asked.running = false;
        }
    }

    /// Counts everything now, on this thread (the command line, which has
    /// no daemon to ask).
    pub fn count_now(&self) {
        self.pass();
    }

    /// The requests counted for one conversation, if it was counted.
    pub fn requests_of(&self, conversation: &SessionKey) -> Option<RequestList> {
        lock(&self.published).get(conversation).cloned()
    }

    /// The requests of a session's conversations, one per request id;
    /// `None` while none of them is counted.
    pub fn requests_of_all(&self, conversations: &[SessionKey]) -> Option<RequestList> {
        let published = lock(&self.published).clone();
        let lists: Vec<&RequestList> = conversations
            .iter()
            .filter_map(|c| published.get(c))
            .collect();
        if lists.is_empty() {
            return None;
        }
        Some(scan::merge(&lists))
    }

    /// Each model's name and price, by number.
    pub fn models(&self) -> ModelTable {
        lock(&self.models).clone()
    }

    /// The tokens and cost of some requests.
    pub fn account(&self, requests: &[(u64, Request)]) -> Account {
        let models = self.models();
        let mut account = Account::default();
        for (_, r) in requests {
            account.add(r, price_in(&models, r.model));
        }
        account
    }

    /// The total tokens and cost of a session's conversations.
    pub fn totals_of(&self, conversations: &[SessionKey]) -> Option<Account> {
        Some(self.account(&self.requests_of_all(conversations)?))
    }

    /// One pass: every conversation whose file changed since it was last
    /// counted is read (its new lines), and the result published.
    fn pass(&self) {
        let mut counting = lock(&self.counting);
        self.passing.store(true, Ordering::Release);
        let keys_version = self.catalog.keys_version();
        let version = self.catalog.version();
        let files: Arc<StoreFiles> = self.catalog.files();
        let mut changed: Vec<(SessionKey, Option<RequestList>)> = Vec::new();
        let mut last_publish = Instant::now();
        let Counting {
            counted,
            models,
            passed,
        } = &mut *counting;
        let before = *passed;
        for (key, indexed) in files.iter() {
            // Unchanged since the last pass began: counted then, no lookup.
            if before.is_some_and(|(v, _)| indexed.changed_at() <= v) {
                continue;
            }
            if counted.get(key).is_some_and(|c| c.stamp == indexed.stamp) {
                continue;
            }
            let kind = indexed.file.kind;
            // A conversation counted for the first time is published, even
            // with no request in it: known to have none.
            let mut moved = !counted.contains_key(key);
            let entry = counted.entry(key.clone()).or_insert_with(|| Counted {
                stamp: indexed.stamp,
                main: FileScan::new(kind),
                subagents: Vec::new(),
            });
            entry.stamp = indexed.stamp;
            moved |= read_logged(&mut entry.main, &indexed.file.path, models);
            let subagents = subagent_files(kind, &indexed.file.path);
            let before = entry.subagents.len();
            entry
                .subagents
                .retain(|(p, _)| subagents.iter().any(|s| **s == **p));
            moved |= entry.subagents.len() != before;
            for path in subagents {
                let at = match entry.subagents.iter().position(|(p, _)| **p == *path) {
                    Some(at) => at,
                    None => {
                        entry
                            .subagents
                            .push((path.into_boxed_path(), FileScan::new(kind)));
                        moved = true;
                        entry.subagents.len() - 1
                    }
                };
                let (path, scan) = &mut entry.subagents[at];
                moved |= read_logged(scan, path, models);
            }
            if moved {
                let mut lists: Vec<&RequestList> = vec![entry.main.requests()];
                lists.extend(entry.subagents.iter().map(|(_, f)| f.requests()));
                changed.push((key.clone(), Some(scan::merge(&lists))));
            }
            if last_publish.elapsed() >= PUBLISH_EVERY {
                self.publish_models(models);
                self.publish(std::mem::take(&mut changed));
                last_publish = Instant::now();
            }
        }
        // Conversations that left the stores, looked for when some did.
        let gone: Vec<SessionKey> = if before.is_some_and(|(_, k)| k == keys_version) {
            Vec::new()
        } else {
            counted
                .keys()
                .filter(|k| !files.contains_key(*k))
                .cloned()
                .collect()
        };
        for key in gone {
            counted.remove(&key);
            changed.push((key, None));
        }
        self.publish_models(models);
        let any = !changed.is_empty();
        self.publish(changed);
        drop(files);
        counting.passed = Some((version, keys_version));
        self.passed_version.store(version, Ordering::Release);
        self.passes.fetch_add(1, Ordering::AcqRel);
        self.passing.store(false, Ordering::Release);
        if any {
            crate::sync::give_back_freed_memory();
        }
    }

    /// Names and prices the models numbered since the last publication.
    fn publish_models(&self, models: &Models) {
        let mut table = lock(&self.models);
        if table.len() == models.names().len() {
            return;
        }
        let mut grown: Vec<(Arc<str>, Option<ModelPrice>)> = table.as_ref().clone();
        for name in &models.names()[grown.len()..] {
            grown.push((name.clone(), self.prices.of(name)));
        }
        *table = Arc::new(grown);
    }

    fn publish(&self, changed: Vec<(SessionKey, Option<RequestList>)>) {
        if changed.is_empty() {
            return;
        }
        {
            let mut published = lock(&self.published);
            let map = Arc::make_mut(&mut published);
            for (key, list) in &changed {
                match list {
                    Some(list) => {
                        map.insert(key.clone(), list.clone());
                    }
                    None => {
                        map.remove(key);
                    }
                }
            }
        }
        self.version.fetch_add(1, Ordering::AcqRel);
        if let Some(hook) = &self.on_publish {
            let keys: Vec<SessionKey> = changed.into_iter().map(|(k, _)| k).collect();
            hook(&keys);
        }
    }

    /// Whether the stores changed since the last pass began.
    fn stores_moved(&self) -> bool {
        self.passed_version.load(Ordering::Acquire) != self.catalog.version()
    }
}

/// Reads what a file added; true when its requests changed.
fn read_logged(scan: &mut FileScan, path: &Path, models: &mut Models) -> bool {
    match scan.read(path, models) {
        Ok(changed) => changed,
        Err(e) => {
            log::debug!("usage: cannot read {}: {e}", path.display());
            false
        }
    }
}

/// The price of model number `model` in `models`.
pub fn price_in(models: &[(Arc<str>, Option<ModelPrice>)], model: u32) -> Option<ModelPrice> {
    models.get(model as usize).and_then(|(_, p)| *p)
}

/// The files besides its own one conversation's usage is read from: for
/// Claude, its subagents' (`ID/subagents/*.jsonl`), whose requests it made.
fn subagent_files(kind: StoreKind, path: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if kind == StoreKind::Claude {
        let dir = path.with_extension("").join("subagents");
        if let Ok(entries) = std::fs::read_dir(dir) {
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .take(MAX_SUBAGENT_FILES)
                .collect();
            found.sort();
            paths.extend(found);
        }
    }
    paths
}

/// How much the counting thread yields to the rest of the daemon (a
/// thread's nice value on Linux).
const COUNTING_NICE: libc::c_int = 10;

/// The counting thread: a pass when asked, and one whenever the stores
/// changed; it ends with its tracker. It runs behind the request threads:
/// a first count of 100,000 conversations reads every store.
fn count_in_background(tracker: Weak<Tracker>) {
    // SAFETY: gettid and setpriority take and return plain integers; on
    // Linux PRIO_PROCESS with a thread id sets that thread's nice value.
    let niced = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, COUNTING_NICE)
    };
    if niced != 0 {
        log::debug!("usage: the counting thread keeps its priority");
    }
    loop {
        let Some(t) = tracker.upgrade() else { return };
        let wanted = {
            let asked = lock(&t.asked);
            let (mut asked, _) = t
                .wake
                .wait_timeout_while(asked, LOOK_EVERY, |a| !a.pass)
                .unwrap_or_else(|p| p.into_inner());
            let wanted = std::mem::take(&mut asked.pass);
            // Taken with the ask, so `stats` never sees neither.
            if wanted {
                t.passing.store(true, Ordering::Release);
            }
            wanted
        };
        if wanted || t.stores_moved() {
            t.pass();
        }
    }
}

/// Dollars, held as billionths so that equal costs hash equal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dollars(pub u64);

impl Dollars {
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl Serialize for Dollars {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.as_f64())
    }
}

/// What a price makes of some tokens.
pub fn cost_of(tokens: &Tokens, price: &ModelPrice) -> Dollars {
    // Per million tokens, in billionths of a dollar: a thousandth per token.
    let hour = tokens.cache_write_1h.min(tokens.cache_write);
    let nano = tokens.input as f64 * price.input * 1e3
        + tokens.output as f64 * price.output * 1e3
        + (tokens.cache_write - hour) as f64 * price.cache_write * 1e3
        + hour as f64 * price.cache_write_1h.unwrap_or(price.cache_write) * 1e3
        + tokens.cache_read as f64 * price.cache_read * 1e3;
    Dollars(nano.round() as u64)
}

/// Requests, tokens and cost summed; the cost is unknown once one
/// request's model has no price.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Account {
    pub requests: u64,
    pub tokens: Tokens,
    cost: Dollars,
    unpriced: bool,
}

impl Account {
    pub fn add(&mut self, request: &Request, price: Option<ModelPrice>) {
        let tokens = request.tokens();
        self.requests += 1;
        self.tokens.add(&tokens);
        match price {
            Some(p) => self.cost.0 = self.cost.0.saturating_add(cost_of(&tokens, &p).0),
            None => self.unpriced = true,
        }
    }

    pub fn merge(&mut self, other: &Account) {
        self.requests += other.requests;
        self.tokens.add(&other.tokens);
        self.cost.0 = self.cost.0.saturating_add(other.cost.0);
        self.unpriced |= other.unpriced;
    }

    /// The cost in dollars, `None` where a model has no price.
    pub fn cost(&self) -> Option<Dollars> {
        (!self.unpriced).then_some(self.cost)
    }

    pub fn doc(&self) -> AccountDoc {
        AccountDoc {
            cost_usd: self.cost(),
            requests: self.requests,
            tokens: TokensDoc::of(&self.tokens),
        }
    }
}

/// Tokens as the files show them, with their total.
#[derive(Debug, Serialize)]
pub struct TokensDoc {
    pub cache_read: u64,
    pub cache_write: u64,
    pub input: u64,
    pub output: u64,
    pub reasoning: u64,
    pub total: u64,
}

impl TokensDoc {
    fn of(t: &Tokens) -> TokensDoc {
        TokensDoc {
            cache_read: t.cache_read,
            cache_write: t.cache_write,
            input: t.input,
            output: t.output,
            reasoning: t.reasoning,
            total: t.total(),
        }
    }
}

/// An account as the files show it.
#[derive(Debug, Serialize)]
pub struct AccountDoc {
    pub cost_usd: Option<Dollars>,
    pub requests: u64,
    pub tokens: TokensDoc,
}

/// A session's `usage`.
#[derive(Debug, Serialize)]
pub struct UsageDoc {
    pub by_model: BTreeMap<String, AccountDoc>,
    pub conversations: Vec<String>,
    pub cost_usd: Option<Dollars>,
    pub prices_dated: &'static str,
    pub requests: u64,
    pub tokens: TokensDoc,
}

/// The name a request without a model is shown under.
pub const UNKNOWN_MODEL: &str = "unknown";

impl Tracker {
    /// The `usage` document of a session's conversations (`ids` as shown).
    pub fn usage_doc(&self, conversations: &[SessionKey]) -> Option<UsageDoc> {
        let requests = self.requests_of_all(conversations)?;
        let models = self.models();
        let mut by_model: BTreeMap<&str, Account> = BTreeMap::new();
        let mut all = Account::default();
        for (_, r) in requests.iter() {
            let price = price_in(&models, r.model);
            let name = match models.get(r.model as usize) {
                Some((name, _)) if !name.is_empty() => name,
                _ => UNKNOWN_MODEL,
            };
            by_model.entry(name).or_default().add(r, price);
            all.add(r, price);
        }
        Some(UsageDoc {
            by_model: by_model
                .into_iter()
                .map(|(m, a)| (m.to_string(), a.doc()))
                .collect(),
            conversations: conversations.iter().map(|k| k.id().to_string()).collect(),
            cost_usd: all.cost(),
            prices_dated: PRICES_DATED,
            requests: all.requests,
            tokens: TokensDoc::of(&all.tokens),
        })
    }
}
