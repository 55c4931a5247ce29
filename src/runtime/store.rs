//! Where executions wait for the client's results.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moka::notification::RemovalCause;
use moka::sync::Cache;

use super::Execution;
use crate::cache::{cache_ttl, weight};
use crate::store_error::StoreFuture;
use crate::tenant::Tenant;

/// Executions by tenant and id: where programs wait for their client's
/// results. An execution is plain data, replayed from the start on every
/// run, so a store shared by replicas lets any of them continue any
/// program ([`MemoryExecutionStore`] is the default, one process's own).
pub trait ExecutionStore: Send + Sync + 'static {
    /// The execution `id` of `tenant`, if held. Another tenant's execution
    /// is not found, exactly as one never minted.
    fn get<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> StoreFuture<'a, Option<Arc<Execution>>>;
    /// The whole id of `tenant`'s call whose id begins, in letters and
    /// digits, with `short` (`alias_key`): how a call is found
    /// again after an agent shortened its id. Every call of a stored
    /// execution has its alias for as long as the execution is kept.
    fn alias<'a>(&'a self, tenant: &'a Tenant, short: &'a str) -> StoreFuture<'a, Option<String>>;
    /// Saves (or replaces) an execution under its tenant and id.
    fn put(&self, exec: Arc<Execution>) -> StoreFuture<'_, ()>;
    /// Saves `exec` only if the record held under its id is at revision
    /// `expected` (a compare-and-set): `false` when another request
    /// changed it first, and nothing is written.
    fn replace(&self, exec: Arc<Execution>, expected: u64) -> StoreFuture<'_, bool>;
    /// Whether the store can serve now (`/readyz`).
    fn ready(&self) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// The store itself, when it answers without waiting (in memory): a
    /// request then reads it directly instead of fetching ahead.
    fn local(&self) -> Option<&dyn ExecutionLookup> {
        None
    }
}

/// Executions as the code that reads a request's history sees them: a
/// lookup that never waits (the in-memory store, or a request's view of a
/// shared one, fetched ahead).
pub trait ExecutionLookup: Send + Sync {
    /// The execution `id` of `tenant`, if held.
    fn get(&self, tenant: &Tenant, id: &str) -> Option<Arc<Execution>>;
    /// The whole id of `tenant`'s call shortened to `short`, if held.
    fn alias(&self, tenant: &Tenant, short: &str) -> Option<String>;
    /// Saves a new state of an execution (an interrupted program closed).
    fn put(&self, exec: Arc<Execution>);
    /// Bytes held, as weighed against the store's budget (0 for a view
    /// that holds no records of its own).
    fn weighed_bytes(&self) -> u64 {
        0
    }
    /// Programs this store dropped while they waited on their client, so
    /// far: `[unanswered (outlived their lifetime), evicted (for room)]`
    /// (the in-memory store; a shared store's records expire on its side).
    fn dropped_waiting(&self) -> [u64; 2] {
        [0, 0]
    }
}

type Key = (Tenant, Box<str>);

/// In memory, bounded by bytes, entries expire.
///
/// Waiting executions (a client holds their calls) and ended ones (kept so
/// later requests can show the model their result) live in two caches
/// with half the budget each, so a flood of programs that end at once
/// can never push out one a client is working on.
pub struct MemoryExecutionStore {
    waiting: Cache<Key, Arc<Execution>>,
    /// Waiting programs dropped: `[outlived their lifetime, evicted]`.
    dropped: Arc<[AtomicU64; 2]>,
    ended: Cache<Key, Arc<Execution>>,
    aliases: Cache<Key, Arc<str>>,
    /// Held while a compare-and-set reads and writes, so two of them on
    /// one record cannot both win.
    replacing: Mutex<()>,
}

impl MemoryExecutionStore {
    /// A store of at most `budget_bytes` (about), keeping a waiting
    /// execution for `lifetime` and an ended one for `keep` after its last
    /// change.
    pub fn new(lifetime: Duration, keep: Duration, budget_bytes: u64) -> MemoryExecutionStore {
        let half = (budget_bytes / 2).max(1);
        let cache = |ttl: Duration| {
            Cache::builder()
                .max_capacity(half)
                .weigher(|k: &Key, e: &Arc<Execution>| weight(k.1.len() + execution_bytes(e)))
                .time_to_live(cache_ttl(ttl))
                .build()
        };
        let dropped: Arc<[AtomicU64; 2]> = Arc::default();
        let counted = dropped.clone();
        // A waiting program the cache drops ended without its results:
        // said, never silent (a replaced or closed one is not dropped).
        let waiting = Cache::builder()
            .max_capacity(half)
            .weigher(|k: &Key, e: &Arc<Execution>| weight(k.1.len() + execution_bytes(e)))
            .time_to_live(cache_ttl(lifetime))
            .eviction_listener(move |key: Arc<Key>, e: Arc<Execution>, cause| {
                let reason = match cause {
                    RemovalCause::Expired => 0,
                    RemovalCause::Size => 1,
                    RemovalCause::Explicit | RemovalCause::Replaced => return,
                };
                if e.outcome.is_none() {
                    counted[reason].fetch_add(1, Relaxed);
                    let reason = ["unanswered", "evicted"][reason];
                    tracing::info!(target: "codemode::program", program = %key.1, run_call = %e.run_call_id, calls = e.calls.len(), reason, "program abandoned: the store dropped it while it waited on tool results");
                }
            })
            .build();
        MemoryExecutionStore {
            waiting,
            dropped,
            ended: cache(keep),
            // Aliases are small (a key and an id); they live as long as the
            // longer-lived of the two kinds of records.
            aliases: Cache::builder()
                .max_capacity((budget_bytes / 8).max(1))
                .weigher(|k: &Key, id: &Arc<str>| weight(64 + k.1.len() + id.len()))
                .time_to_live(cache_ttl(lifetime.max(keep)))
                .build(),
            replacing: Mutex::new(()),
        }
    }
}

impl ExecutionLookup for MemoryExecutionStore {
    fn put(&self, exec: Arc<Execution>) {
        for n in 0..exec.calls.len() {
            let id = exec.call_id(n);
            let key: Key = (exec.tenant, super::alias_key(&id).into());
            if !self.aliases.contains_key(&key) {
                self.aliases.insert(key, id.into());
            }
        }
        // The last program saved with a batch keeps its key (`batch_key`).
        for (key, id) in exec.batch_keys() {
            self.aliases.insert((exec.tenant, key.into()), id.into());
        }
        let key: Key = (exec.tenant, exec.id.as_str().into());
        let large = execution_bytes(&exec) >= crate::cache::LARGE_BYTES;
        let cache = if exec.outcome.is_some() {
            self.waiting.invalidate(&key);
            &self.ended
        } else {
            &self.waiting
        };
        cache.insert(key, exec);
        // See LARGE_BYTES: no burst of large records over the budget.
        if large {
            cache.run_pending_tasks();
        }
    }

    fn weighed_bytes(&self) -> u64 {
        [&self.waiting, &self.ended]
            .map(|c| {
                c.run_pending_tasks();
                c.weighted_size()
            })
            .iter()
            .sum::<u64>()
            + {
                self.aliases.run_pending_tasks();
                self.aliases.weighted_size()
            }
    }

    fn get(&self, tenant: &Tenant, id: &str) -> Option<Arc<Execution>> {
        let key: Key = (*tenant, id.into());
        self.waiting.get(&key).or_else(|| self.ended.get(&key))
    }

    fn dropped_waiting(&self) -> [u64; 2] {
        self.waiting.run_pending_tasks();
        self.dropped.each_ref().map(|n| n.load(Relaxed))
    }

    fn alias(&self, tenant: &Tenant, short: &str) -> Option<String> {
        self.aliases
            .get(&(*tenant, short.into()))
            .map(|id| id.to_string())
    }
}

impl ExecutionStore for MemoryExecutionStore {
    fn get<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> StoreFuture<'a, Option<Arc<Execution>>> {
        Box::pin(std::future::ready(Ok(ExecutionLookup::get(
            self, tenant, id,
        ))))
    }

    fn alias<'a>(&'a self, tenant: &'a Tenant, short: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(std::future::ready(Ok(ExecutionLookup::alias(
            self, tenant, short,
        ))))
    }

    fn put(&self, exec: Arc<Execution>) -> StoreFuture<'_, ()> {
        ExecutionLookup::put(self, exec);
        Box::pin(std::future::ready(Ok(())))
    }

    fn replace(&self, exec: Arc<Execution>, expected: u64) -> StoreFuture<'_, bool> {
        let _held = self.replacing.lock().unwrap_or_else(|e| e.into_inner());
        let current = ExecutionLookup::get(self, &exec.tenant, &exec.id).map(|e| e.revision);
        let won = current.is_none_or(|r| r == expected);
        if won {
            ExecutionLookup::put(self, exec);
        }
        Box::pin(std::future::ready(Ok(won)))
    }

    fn local(&self) -> Option<&dyn ExecutionLookup> {
        Some(self)
    }
}

/// Bytes an execution holds, roughly: its texts and a fixed overhead.
fn execution_bytes(e: &Execution) -> usize {
    const OVERHEAD: usize = 256;
    let calls: usize = e
        .calls
        .iter()
        .map(|c| 64 + c.name.len() + c.args.len() + c.result.as_ref().map_or(0, String::len))
        .sum();
    let values: usize = e
        .denied_calls
        .iter()
        .chain(&e.denials)
        .map(|v| v.to_string().len())
        .sum();
    OVERHEAD
        + e.id.len()
        + e.run_call_id.len()
        + e.code.len()
        + e.assistant_content.as_ref().map_or(0, String::len)
        + e.model_turn.as_ref().map_or(0, String::len)
        + e.upstream_response.as_ref().map_or(0, String::len)
        + e.tools
            .iter()
            .chain(&e.freeform)
            .map(|t| 24 + t.len())
            .sum::<usize>()
        + calls
        + e.outcome.as_ref().map_or(0, String::len)
        + values
}

#[cfg(test)]
mod tests {
    use super::{Execution, ExecutionLookup, MemoryExecutionStore, Tenant};
    use std::sync::Arc;
    use std::time::Duration;

    fn exec(tenant: &Tenant, code: &str) -> Execution {
        Execution::new(*tenant, "call_1".into(), code.into(), None, vec![])
    }

    #[test]
    fn any_configured_lifetime_builds_a_store_that_keeps_its_records() {
        // moka refuses a lifetime over 1,000 years: the longest one a user
        // can configure must still build a store, and the store must work.
        let store = MemoryExecutionStore::new(Duration::MAX, Duration::MAX, 1 << 20);
        let t = Tenant::anonymous("s");
        let e = exec(&t, "return 1");
        ExecutionLookup::put(&store, Arc::new(e.clone()));
        let held = ExecutionLookup::get(&store, &t, &e.id).expect("kept");
        assert_eq!(held.code, "return 1");
        let splices = crate::splice::MemorySpliceStore::new(Duration::MAX, 1 << 20);
        let key = crate::splice::SpliceKey::of_turn(&t, &crate::conversation::Anchor::NONE, &["c"]);
        let splice = crate::splice::Splice {
            denied_calls: vec![],
            denials: vec![],
        };
        crate::splice::SpliceLookup::put(&splices, key, Arc::new(splice));
        assert!(crate::splice::SpliceLookup::get(&splices, &key).is_some());
    }

    #[tokio::test]
    async fn of_two_replaces_over_one_revision_only_the_first_is_saved() {
        use super::ExecutionStore;
        let store =
            MemoryExecutionStore::new(Duration::from_secs(60), Duration::from_secs(60), 1 << 20);
        let t = Tenant::anonymous("s");
        let read = exec(&t, "return 1");
        ExecutionLookup::put(&store, Arc::new(read.clone()));
        let mut a = read.clone();
        a.revision += 1;
        a.code = "a".into();
        let mut b = read.clone();
        b.revision += 1;
        b.code = "b".into();
        assert!(store.replace(Arc::new(a), read.revision).await.unwrap());
        assert!(!store.replace(Arc::new(b), read.revision).await.unwrap());
        let held = ExecutionLookup::get(&store, &t, &read.id).unwrap();
        assert_eq!((held.code.as_str(), held.revision), ("a", 1));
    }

    #[test]
    fn lookups_are_by_tenant_and_id() {
        let store =
            MemoryExecutionStore::new(Duration::from_secs(60), Duration::from_secs(60), 1 << 20);
        let a = Tenant::anonymous("a");
        let b = Tenant::anonymous("b");
        let e = Arc::new(exec(&a, "return 1"));
        store.put(e.clone());
        assert!(store.get(&a, &e.id).is_some());
        assert!(store.get(&b, &e.id).is_none());
    }

    #[test]
    fn storing_an_execution_again_evicts_nothing_else() {
        let store =
            MemoryExecutionStore::new(Duration::from_secs(60), Duration::from_secs(60), 1 << 20);
        let t = Tenant::anonymous("s");
        let others: Vec<Arc<Execution>> = (0..3).map(|_| Arc::new(exec(&t, "x"))).collect();
        for e in &others {
            store.put(e.clone());
        }
        let one = Arc::new(exec(&t, "y"));
        for _ in 0..10_000 {
            store.put(one.clone());
        }
        store.waiting.run_pending_tasks();
        for e in &others {
            assert!(store.get(&t, &e.id).is_some(), "a live key was evicted");
        }
    }

    #[test]
    fn programs_that_ended_never_evict_a_waiting_one() {
        let store =
            MemoryExecutionStore::new(Duration::from_secs(60), Duration::from_secs(60), 1 << 20);
        let t = Tenant::anonymous("s");
        let live = Arc::new(exec(&t, "await tools.read({})"));
        store.put(live.clone());
        // Ten thousand tool-less programs, several times the budget in all.
        let big = "x".repeat(1000);
        for _ in 0..10_000 {
            let mut e = exec(&t, &big);
            e.outcome = Some("Result: 1".into());
            store.put(Arc::new(e));
        }
        store.ended.run_pending_tasks();
        assert!(store.get(&t, &live.id).is_some());
        assert!(
            store.ended.weighted_size() <= 1 << 19,
            "the ended half keeps to its budget: {}",
            store.ended.weighted_size()
        );
    }
}
