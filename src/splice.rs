//! Denials of mixed turns, waiting for the request that returns the allowed
//! calls' results (design.md section 6).
//!
//! When one turn mixes allowed and denied calls, the client gets the allowed
//! ones; the denied calls and their denials are kept here, keyed by each
//! allowed call's id, and spliced back into the history whenever the client
//! sends that turn again, so the model learns of them and its view stays
//! consistent. Behind a trait so a shared store can serve several replicas.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::ttl_map::TtlMap;

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
pub struct MemorySpliceStore(TtlMap<Arc<Splice>>);

impl MemorySpliceStore {
    /// A store keeping at most `capacity` keys, each for `ttl`.
    pub fn new(ttl: Duration, capacity: usize) -> MemorySpliceStore {
        MemorySpliceStore(TtlMap::new(ttl, capacity))
    }
}

impl SpliceStore for MemorySpliceStore {
    fn put(&self, keys: &[String], splice: Arc<Splice>) {
        for key in keys {
            self.0.insert(key.clone(), splice.clone());
        }
    }

    fn get(&self, key: &str) -> Option<Arc<Splice>> {
        self.0.get(key)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
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
        assert!(s.0.len() <= 3);
    }
}
