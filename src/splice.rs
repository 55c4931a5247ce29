//! Denials of mixed turns, waiting for the request that returns the allowed
//! calls' results (design.md section 6).
//!
//! When one turn mixes allowed and denied calls, the client gets the allowed
//! ones; the denied calls and their denials are kept here, keyed by each
//! allowed call's id, and spliced back into the history whenever the client
//! sends that turn again, so the model learns of them and its view stays
//! consistent. Behind a trait so a shared store can serve several replicas.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What to splice into one assistant turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Splice {
    /// The denied tool-call objects, as the model emitted them.
    pub denied_calls: Vec<Value>,
    /// One `role: tool` message per denied call.
    pub denials: Vec<Value>,
}

/// Where mixed turns' denials wait.
pub trait SpliceStore: Send + Sync + 'static {
    /// Records `splice` under every id in `keys` (the allowed calls of the turn).
    fn put(&self, keys: &[String], splice: Arc<Splice>);
    /// The splice recorded under call id `key`, if it has not expired.
    fn get(&self, key: &str) -> Option<Arc<Splice>>;
    /// Whether nothing is stored, so requests can skip looking.
    fn is_empty(&self) -> bool;
}

/// An in-memory store: bounded, oldest evicted first, entries expire.
pub struct MemorySpliceStore {
    ttl: Duration,
    capacity: usize,
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    map: HashMap<String, (Instant, Arc<Splice>)>,
    order: VecDeque<(Instant, String)>,
}

impl MemorySpliceStore {
    /// A store keeping at most `capacity` keys, each for `ttl`.
    pub fn new(ttl: Duration, capacity: usize) -> MemorySpliceStore {
        MemorySpliceStore {
            ttl,
            capacity: capacity.max(1),
            inner: Mutex::new(Entries::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl SpliceStore for MemorySpliceStore {
    fn put(&self, keys: &[String], splice: Arc<Splice>) {
        let now = Instant::now();
        let mut e = self.lock();
        while let Some((at, _)) = e.order.front() {
            let expired = now.duration_since(*at) >= self.ttl;
            if !expired && e.order.len() < self.capacity {
                break;
            }
            if let Some((at, key)) = e.order.pop_front() {
                // Only drop the map entry if it was not refreshed since.
                if e.map.get(&key).is_some_and(|(t, _)| *t == at) {
                    e.map.remove(&key);
                }
            }
        }
        for key in keys {
            e.map.insert(key.clone(), (now, splice.clone()));
            e.order.push_back((now, key.clone()));
        }
    }

    fn get(&self, key: &str) -> Option<Arc<Splice>> {
        let e = self.lock();
        e.map
            .get(key)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, s)| s.clone())
    }

    fn is_empty(&self) -> bool {
        self.lock().map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splice() -> Arc<Splice> {
        Arc::new(Splice {
            denied_calls: vec![],
            denials: vec![],
        })
    }

    #[test]
    fn entries_expire() {
        let s = MemorySpliceStore::new(Duration::from_millis(20), 10);
        s.put(&["a".into()], splice());
        assert!(s.get("a").is_some());
        std::thread::sleep(Duration::from_millis(30));
        assert!(s.get("a").is_none());
    }

    #[test]
    fn the_store_is_bounded() {
        let s = MemorySpliceStore::new(Duration::from_secs(60), 3);
        for i in 0..10 {
            s.put(&[format!("k{i}")], splice());
        }
        assert!(s.get("k0").is_none());
        assert!(s.get("k9").is_some());
        assert!(s.lock().map.len() <= 3);
    }
}
