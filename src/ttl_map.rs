//! A bounded map whose entries expire: the in-memory stores' one mechanism.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most `capacity` keys, each kept for `ttl`; oldest evicted first.
pub struct TtlMap<V> {
    ttl: Duration,
    capacity: usize,
    inner: Mutex<Entries<V>>,
}

struct Entries<V> {
    map: HashMap<String, (Instant, V)>,
    order: VecDeque<(Instant, String)>,
}

impl<V: Clone> TtlMap<V> {
    /// An empty map.
    pub fn new(ttl: Duration, capacity: usize) -> TtlMap<V> {
        TtlMap {
            ttl,
            capacity: capacity.max(1),
            inner: Mutex::new(Entries {
                map: HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<V>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Inserts (or refreshes) `key`.
    pub fn insert(&self, key: String, value: V) {
        let now = Instant::now();
        let mut e = self.lock();
        while let Some((at, _)) = e.order.front() {
            let expired = now.duration_since(*at) >= self.ttl;
            if !expired && e.order.len() < self.capacity {
                break;
            }
            if let Some((at, key)) = e.order.pop_front() {
                // Only drop the entry if it was not refreshed since.
                if e.map.get(&key).is_some_and(|(t, _)| *t == at) {
                    e.map.remove(&key);
                }
            }
        }
        e.map.insert(key.clone(), (now, value));
        e.order.push_back((now, key));
    }

    /// The value under `key`, if it has not expired.
    pub fn get(&self, key: &str) -> Option<V> {
        let e = self.lock();
        e.map
            .get(key)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, v)| v.clone())
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.lock().map.is_empty()
    }

    /// How many keys are held (expired ones included until evicted).
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire() {
        let m = TtlMap::new(Duration::from_millis(20), 10);
        m.insert("a".into(), 1);
        assert_eq!(m.get("a"), Some(1));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(m.get("a"), None);
    }

    #[test]
    fn the_map_is_bounded() {
        let m = TtlMap::new(Duration::from_secs(60), 3);
        for i in 0..10 {
            m.insert(format!("k{i}"), i);
        }
        assert_eq!(m.get("k0"), None);
        assert_eq!(m.get("k9"), Some(9));
        assert!(m.len() <= 3);
    }

    #[test]
    fn refreshing_a_key_keeps_it() {
        let m = TtlMap::new(Duration::from_secs(60), 2);
        m.insert("a".into(), 1);
        m.insert("b".into(), 2);
        m.insert("a".into(), 3);
        m.insert("c".into(), 4);
        assert_eq!(m.get("a"), Some(3));
    }
}
