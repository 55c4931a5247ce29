//! Denials of mixed turns, waiting for the request that returns the allowed
//! calls' results (docs/modes.md).
//!
//! When one turn mixes allowed and denied calls, the client gets the allowed
//! ones; the denied calls and their denials are kept here and spliced back
//! into the history whenever the client sends that turn again, so the model
//! learns of them and its view stays consistent.
//!
//! A splice belongs to its tenant, its conversation and its turn: it is
//! keyed by a SHA-256 of the tenant, the conversation's anchor
//! ([`crate::conversation::Anchor`]) and the set of the turn's allowed call
//! ids, and found only by a turn of that tenant, in that conversation,
//! carrying exactly those ids. A call id reused by another conversation
//! (`call_1` is common) or named by another client finds nothing. Behind a
//! trait so a shared store can serve several replicas.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moka::sync::Cache;
use serde_json::Value;

use crate::cache::{cache_ttl, weight as store_weight};
use crate::conversation::Anchor;
use crate::store_error::{StoreError, StoreFuture};
use crate::tenant::{hash_parts, Tenant};

pub mod flat;

/// What to splice into one assistant turn.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Splice {
    /// The denied tool-call objects, as the model emitted them.
    pub denied_calls: Vec<Value>,
    /// One `role: tool` message per denied call.
    pub denials: Vec<Value>,
}

/// The key of one turn's splice: tenant, conversation and the turn's call ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpliceKey([u8; 32]);

impl SpliceKey {
    /// The key of `tenant`'s turn, in the conversation `anchor` names,
    /// whose (allowed) calls carry `ids`, in any order.
    pub fn of_turn<S: AsRef<str>>(tenant: &Tenant, anchor: &Anchor, ids: &[S]) -> SpliceKey {
        let mut sorted: Vec<&[u8]> = ids.iter().map(|s| s.as_ref().as_bytes()).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut parts: Vec<&[u8]> = Vec::with_capacity(sorted.len() + 2);
        parts.push(tenant.as_bytes());
        parts.push(anchor.as_bytes());
        parts.extend(sorted);
        SpliceKey(hash_parts("codemode-proxy splice v2", &parts))
    }
}

impl SpliceKey {
    /// The key's 32 bytes, for a shared store's keys.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// Where mixed turns' denials wait; a store shared by replicas does I/O.
pub trait SpliceStore: Send + Sync + 'static {
    /// Records `splice` under `key`.
    fn put(&self, key: SpliceKey, splice: Arc<Splice>) -> StoreFuture<'_, ()>;
    /// The splice recorded under `key`, if it has not expired.
    fn get<'a>(&'a self, key: &'a SpliceKey) -> StoreFuture<'a, Option<Arc<Splice>>>;
    /// The store itself, when it answers without waiting (in memory).
    fn local(&self) -> Option<&dyn SpliceLookup> {
        None
    }
}

/// Splices as the code that rewrites a request sees them: never waits.
pub trait SpliceLookup: Send + Sync {
    /// Records `splice` under `key`.
    fn put(&self, key: SpliceKey, splice: Arc<Splice>);
    /// The splice recorded under `key`, if it has not expired.
    fn get(&self, key: &SpliceKey) -> Option<Arc<Splice>>;
    /// Whether nothing was ever stored, so requests can skip looking.
    fn is_empty(&self) -> bool;
    /// Bytes held, as weighed against the store's budget.
    fn weighed_bytes(&self) -> u64;
}

/// An in-memory store: bounded by bytes, entries expire.
pub struct MemorySpliceStore {
    cache: Cache<SpliceKey, Arc<Splice>>,
    used: AtomicBool,
}

impl MemorySpliceStore {
    /// A store of about `budget_bytes`, keeping each splice for `ttl`.
    pub fn new(ttl: Duration, budget_bytes: u64) -> MemorySpliceStore {
        MemorySpliceStore {
            cache: Cache::builder()
                .max_capacity(budget_bytes.max(1))
                .weigher(|_: &SpliceKey, s: &Arc<Splice>| store_weight(splice_bytes(s)))
                .time_to_live(cache_ttl(ttl))
                .build(),
            used: AtomicBool::new(false),
        }
    }
}

impl SpliceStore for MemorySpliceStore {
    fn put(&self, key: SpliceKey, splice: Arc<Splice>) -> StoreFuture<'_, ()> {
        SpliceLookup::put(self, key, splice);
        Box::pin(std::future::ready(Ok(())))
    }

    fn get<'a>(&'a self, key: &'a SpliceKey) -> StoreFuture<'a, Option<Arc<Splice>>> {
        Box::pin(std::future::ready(Ok(SpliceLookup::get(self, key))))
    }

    fn local(&self) -> Option<&dyn SpliceLookup> {
        Some(self)
    }
}

impl SpliceLookup for MemorySpliceStore {
    fn put(&self, key: SpliceKey, splice: Arc<Splice>) {
        self.used.store(true, Ordering::Relaxed);
        self.cache.insert(key, splice);
    }

    fn get(&self, key: &SpliceKey) -> Option<Arc<Splice>> {
        self.cache.get(key)
    }

    fn is_empty(&self) -> bool {
        !self.used.load(Ordering::Relaxed)
    }

    fn weighed_bytes(&self) -> u64 {
        self.cache.run_pending_tasks();
        self.cache.weighted_size()
    }
}

fn splice_bytes(s: &Splice) -> usize {
    128 + s
        .denied_calls
        .iter()
        .chain(&s.denials)
        .map(|v| v.to_string().len())
        .sum::<usize>()
}

/// One tenant's view of a splice store: what a request reads and writes.
///
/// A store that answers at once (in memory) is read directly. One that
/// does I/O (shared by replicas) is read ahead: the request's rewrite runs
/// once on a copy, the keys it looked for are fetched together
/// ([`TenantSplices::fetch_missing`]), and the real rewrite finds them here.
#[derive(Clone)]
pub struct TenantSplices {
    store: Arc<dyn SpliceStore>,
    tenant: Tenant,
    fetched: Arc<Mutex<Fetched>>,
}

/// A remote store's splices as this request knows them.
#[derive(Default)]
struct Fetched {
    known: HashMap<SpliceKey, Option<Arc<Splice>>>,
    missing: Vec<SpliceKey>,
    writes: Vec<tokio::task::JoinHandle<Result<(), StoreError>>>,
}

impl TenantSplices {
    /// `tenant`'s view of `store`.
    pub fn new(store: Arc<dyn SpliceStore>, tenant: Tenant) -> TenantSplices {
        TenantSplices {
            store,
            tenant,
            fetched: Arc::default(),
        }
    }

    /// Whose view this is.
    pub fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    /// Whether the store does I/O, so lookups must be fetched ahead.
    pub fn is_remote(&self) -> bool {
        self.store.local().is_none()
    }

    fn fetched(&self) -> std::sync::MutexGuard<'_, Fetched> {
        self.fetched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the denials of a mixed turn, in the conversation `anchor`
    /// names, whose allowed calls carry `allowed_ids`. A remote store's
    /// write goes out at once, on its own task; [`TenantSplices::settle`]
    /// waits for it.
    pub fn put(&self, anchor: &Anchor, allowed_ids: &[String], splice: Arc<Splice>) {
        if allowed_ids.is_empty() {
            return;
        }
        let key = SpliceKey::of_turn(&self.tenant, anchor, allowed_ids);
        if let Some(local) = self.store.local() {
            local.put(key, splice);
            return;
        }
        let store = self.store.clone();
        let mut fetched = self.fetched();
        fetched.known.insert(key, Some(splice.clone()));
        let write = tokio::spawn(async move { store.put(key, splice).await });
        fetched.writes.push(write);
    }

    /// The splice of the assistant turn, in the conversation `anchor`
    /// names, whose calls carry exactly `ids`.
    pub fn get<S: AsRef<str>>(&self, anchor: &Anchor, ids: &[S]) -> Option<Arc<Splice>> {
        if ids.is_empty() {
            return None;
        }
        let key = SpliceKey::of_turn(&self.tenant, anchor, ids);
        if let Some(local) = self.store.local() {
            return local.get(&key);
        }
        let mut fetched = self.fetched();
        match fetched.known.get(&key) {
            Some(found) => found.clone(),
            None => {
                fetched.missing.push(key);
                None
            }
        }
    }

    /// Whether the store holds nothing to look for.
    pub fn is_empty(&self) -> bool {
        self.store.local().is_some_and(SpliceLookup::is_empty)
    }

    /// Fetches the splices looked for and not known yet; whether there were any.
    pub async fn fetch_missing(&self) -> Result<bool, StoreError> {
        let mut missing = std::mem::take(&mut self.fetched().missing);
        missing.sort_unstable_by_key(|k| k.0);
        missing.dedup();
        if missing.is_empty() {
            return Ok(false);
        }
        let found =
            futures_util::future::try_join_all(missing.iter().map(|k| self.store.get(k))).await?;
        let mut fetched = self.fetched();
        for (key, splice) in missing.into_iter().zip(found) {
            fetched.known.insert(key, splice);
        }
        Ok(true)
    }

    /// Waits for this request's writes to reach the store.
    pub async fn settle(&self) -> Result<(), StoreError> {
        let writes = std::mem::take(&mut self.fetched().writes);
        for w in writes {
            w.await.map_err(|e| {
                StoreError::Unavailable(format!("a store write did not finish: {e}"))
            })??;
        }
        Ok(())
    }
}

/// A fresh in-memory store's view for the default tenant: what every
/// dialect's tests splice into.
#[cfg(test)]
pub(crate) fn fresh_splices() -> TenantSplices {
    let store = Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20));
    TenantSplices::new(store, Tenant::anonymous("default"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn splice(tag: &str) -> Arc<Splice> {
        Arc::new(Splice {
            denied_calls: vec![json!({"id": tag})],
            denials: vec![],
        })
    }

    fn view(store: &Arc<MemorySpliceStore>, scope: &str) -> TenantSplices {
        TenantSplices::new(store.clone(), Tenant::anonymous(scope))
    }

    #[test]
    fn entries_expire() {
        // A lifetime no machine outruns between a put and the get after
        // it, and a sleep well past it.
        let s = Arc::new(MemorySpliceStore::new(Duration::from_secs(1), 1 << 20));
        let v = view(&s, "a");
        v.put(&Anchor::NONE, &["a".into()], splice("x"));
        assert!(v.get(&Anchor::NONE, &["a"]).is_some());
        std::thread::sleep(Duration::from_millis(1500));
        assert!(v.get(&Anchor::NONE, &["a"]).is_none());
    }

    #[test]
    fn a_splice_is_found_only_by_its_tenant_and_its_whole_turn() {
        let s = Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20));
        let (a, b) = (view(&s, "a"), view(&s, "b"));
        a.put(
            &Anchor::NONE,
            &["call_1".into(), "call_2".into()],
            splice("a"),
        );
        b.put(&Anchor::NONE, &["call_1".into()], splice("b"));
        assert_eq!(
            a.get(&Anchor::NONE, &["call_2", "call_1"]),
            Some(splice("a"))
        );
        assert_eq!(
            a.get(&Anchor::NONE, &["call_1"]),
            None,
            "a part of the turn is not the turn"
        );
        assert_eq!(a.get(&Anchor::NONE, &["call_1", "call_2", "call_3"]), None);
        assert_eq!(b.get(&Anchor::NONE, &["call_1"]), Some(splice("b")));
        assert_eq!(
            b.get(&Anchor::NONE, &["call_1", "call_2"]),
            None,
            "another tenant's turn"
        );
    }

    #[test]
    fn a_splice_is_found_only_in_its_conversation() {
        let s = Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20));
        let v = view(&s, "a");
        let (one, two) = (
            Anchor::of_content(&json!("first task")),
            Anchor::of_content(&json!("second task")),
        );
        v.put(&one, &["call_0".into()], splice("one"));
        v.put(&two, &["call_0".into()], splice("two"));
        assert_eq!(v.get(&one, &["call_0"]), Some(splice("one")));
        assert_eq!(v.get(&two, &["call_0"]), Some(splice("two")));
        assert_eq!(v.get(&Anchor::NONE, &["call_0"]), None);
    }

    #[test]
    fn the_store_is_bounded_by_bytes() {
        let s = Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 64 << 10));
        let v = view(&s, "a");
        let big = "x".repeat(1000);
        for i in 0..1000 {
            v.put(&Anchor::NONE, &[format!("k{i}")], splice(&big));
        }
        s.cache.run_pending_tasks();
        assert!(s.cache.weighted_size() <= 64 << 10);
        assert!(s.cache.entry_count() < 1000);
    }

    #[test]
    fn refreshing_a_key_evicts_no_live_key() {
        let s = Arc::new(MemorySpliceStore::new(Duration::from_secs(60), 1 << 20));
        let v = view(&s, "a");
        v.put(&Anchor::NONE, &["one".into()], splice("1"));
        v.put(&Anchor::NONE, &["two".into()], splice("2"));
        for _ in 0..10_000 {
            v.put(&Anchor::NONE, &["three".into()], splice("3"));
        }
        s.cache.run_pending_tasks();
        assert!(
            v.get(&Anchor::NONE, &["one"]).is_some() && v.get(&Anchor::NONE, &["two"]).is_some()
        );
    }
}
