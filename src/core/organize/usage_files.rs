//! The usage files (SPEC §14): a session's `usage` and the root's
//! `usage.json`, made from what the counter last published. A read asks
//! for a pass and never waits for one: what is not counted yet reads as
//! `null`.

use crate::core::organize::rows::SessionRow;
use crate::core::Core;
use crate::error::Result;
use crate::key::SessionKey;
use crate::sync::lock;
use crate::usage::{Account, AccountDoc, PRICES_DATED};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The last `usage.json`, with what it was made from.
#[derive(Debug, Default)]
pub(in crate::core) struct UsageJsonCache(Mutex<Option<(MadeFrom, Arc<Vec<u8>>)>>);

/// The listing's stamp and the counter's version.
type MadeFrom = (crate::core::organize::rows::Stamp, u64);

/// The root's `usage.json`, in key order.
#[derive(Serialize)]
struct UsageJson {
    /// By the UTC day its request was recorded on.
    by_day: BTreeMap<String, AccountDoc>,
    by_engine: BTreeMap<String, AccountDoc>,
    /// By the session's project; sessions without one under `""`.
    by_project: BTreeMap<String, AccountDoc>,
    prices_dated: &'static str,
    /// Sessions counted (any request recorded).
    sessions: u64,
    total: AccountDoc,
}

/// `YYYY-MM-DD` of a day since the epoch.
fn day_text(day: u32) -> String {
    let at = jiff::Timestamp::from_second(i64::from(day) * 86_400).unwrap_or_default();
    at.strftime("%Y-%m-%d").to_string()
}

impl Core {
    /// Every conversation a row's session has had: the one it writes now
    /// and those it wrote before.
    pub(in crate::core) fn conversations_of(&self, row: &SessionRow) -> Vec<SessionKey> {
        if self.catalog.kind_of(row.key.engine()).is_none() {
            return Vec::new();
        }
        let current = row
            .meta
            .conversation
            .as_deref()
            .and_then(|c| SessionKey::new(row.key.engine(), c).ok())
            .unwrap_or_else(|| row.key.clone());
        let mut all: Vec<SessionKey> = row
            .meta
            .conversations
            .iter()
            .filter_map(|c| SessionKey::new(row.key.engine(), c).ok())
            .filter(|c| *c != current)
            .collect();
        all.push(current);
        all
    }

    /// A row's tokens and cost, if counted.
    pub(in crate::core) fn account_of(&self, row: &SessionRow) -> Option<Account> {
        self.catalog.kind_of(row.key.engine())?;
        if row.meta.conversations.is_empty() && row.meta.conversation.is_none() {
            // Most rows: one conversation, no merge.
            let requests = self.usage.requests_of(&row.key)?;
            return Some(self.usage.account(&requests));
        }
        self.usage.totals_of(&self.conversations_of(row))
    }

    /// Asks the counter to follow the stores (from the first usage read on).
    pub(in crate::core) fn want_usage(&self) {
        self.usage.request();
    }

    /// Counts every store now, on this thread (`sessionfs ls --sort cost`
    /// without a daemon).
    pub fn count_usage_now(&self) {
        self.usage.count_now();
    }

    /// `KEY/usage`: the session's tokens by model and cost, or `null`.
    pub fn session_usage(&self, key: &SessionKey) -> Result<Vec<u8>> {
        self.require(key)?;
        self.want_usage();
        let row = self.row(key);
        let doc = self.usage.usage_doc(&self.conversations_of(&row));
        let mut text = serde_json::to_vec_pretty(&doc).expect("usage serialises");
        text.push(b'\n');
        Ok(text)
    }

    /// The root's `usage.json`: every session's requests (archived ones
    /// too: they were paid for) summed by day, project and engine. The same
    /// text while neither the listing nor a count changed.
    pub fn usage_json(&self) -> Arc<Vec<u8>> {
        self.want_usage();
        self.bind_launched();
        let version = self.usage.version();
        let stamp = self.listing_stamp();
        let made_from = (stamp, version);
        if let Some((from, text)) = lock(&self.organize.usage_json.0).clone() {
            if from == made_from {
                return text;
            }
        }
        let rows = self.rows_as_of(stamp, false);
        let mut by_day: BTreeMap<u32, Account> = BTreeMap::new();
        let mut by_engine: BTreeMap<String, Account> = BTreeMap::new();
        let mut by_project: BTreeMap<String, Account> = BTreeMap::new();
        let mut total = Account::default();
        let mut sessions = 0;
        let models = self.usage.models();
        for row in rows.iter() {
            let conversations = self.conversations_of(row);
            let Some(requests) = self.usage.requests_of_all(&conversations) else {
                continue;
            };
            if requests.is_empty() {
                continue;
            }
            sessions += 1;
            let project = row.meta.project.clone().unwrap_or_default();
            let mut session = Account::default();
            for (_, r) in requests.iter() {
                let price = crate::usage::price_in(&models, r.model);
                by_day.entry(r.day).or_default().add(r, price);
                session.add(r, price);
            }
            total.merge(&session);
            by_engine
                .entry(row.key.engine().to_string())
                .or_default()
                .merge(&session);
            by_project.entry(project).or_default().merge(&session);
        }
        let doc = UsageJson {
            by_day: by_day
                .into_iter()
                .map(|(d, a)| (day_text(d), a.doc()))
                .collect(),
            by_engine: by_engine.into_iter().map(|(k, a)| (k, a.doc())).collect(),
            by_project: by_project.into_iter().map(|(k, a)| (k, a.doc())).collect(),
            prices_dated: PRICES_DATED,
            sessions,
            total: total.doc(),
        };
        let mut text = serde_json::to_vec_pretty(&doc).expect("usage.json serialises");
        text.push(b'\n');
        let text = Arc::new(text);
        *lock(&self.organize.usage_json.0) = Some((made_from, text.clone()));
        text
    }
}
