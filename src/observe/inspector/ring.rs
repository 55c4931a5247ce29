//! A ring of recent records bounded by bytes: the newest pushed at the
//! back, the oldest dropped from the front while the whole weighs more
//! than its budget.

use std::collections::VecDeque;

/// What a ring holds: numbered in the order pushed, with a weight.
pub trait Kept {
    /// Its number; rising from one push to the next.
    fn seq(&self) -> u64;
    /// Its weight as last weighed.
    fn weight(&self) -> usize;
}

/// Recent records, bounded by bytes.
#[derive(Debug)]
pub struct Ring<T> {
    items: VecDeque<T>,
    bytes: usize,
    budget: usize,
}

impl<T: Kept> Ring<T> {
    /// An empty ring that keeps at most `budget` bytes.
    pub fn new(budget: usize) -> Ring<T> {
        Ring {
            items: VecDeque::new(),
            bytes: 0,
            budget,
        }
    }

    /// Adds `item` as the newest; returns what had to go.
    pub fn push(&mut self, item: T) -> Vec<T> {
        self.bytes += item.weight();
        self.items.push_back(item);
        self.trim()
    }

    /// The record numbered `seq`.
    pub fn get(&self, seq: u64) -> Option<&T> {
        let at = self.items.binary_search_by_key(&seq, T::seq).ok()?;
        self.items.get(at)
    }

    /// The record numbered `seq`, to change; then [`Ring::reweighed`].
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut T> {
        let at = self.items.binary_search_by_key(&seq, T::seq).ok()?;
        self.items.get_mut(at)
    }

    /// A record went from weighing `before` to `after`; returns what had to go.
    pub fn reweighed(&mut self, before: usize, after: usize) -> Vec<T> {
        self.bytes = (self.bytes + after).saturating_sub(before);
        self.trim()
    }

    fn trim(&mut self) -> Vec<T> {
        let mut gone = Vec::new();
        while self.bytes > self.budget {
            let Some(old) = self.items.pop_front() else {
                self.bytes = 0;
                break;
            };
            self.bytes = self.bytes.saturating_sub(old.weight());
            gone.push(old);
        }
        gone
    }

    /// Newest first.
    pub fn newest_first(&self) -> impl Iterator<Item = &T> {
        self.items.iter().rev()
    }

    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Bytes it holds, as weighed.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Item(u64, usize);

    impl Kept for Item {
        fn seq(&self) -> u64 {
            self.0
        }
        fn weight(&self) -> usize {
            self.1
        }
    }

    #[test]
    fn the_oldest_go_first_when_the_bytes_run_out() {
        let mut ring = Ring::new(100);
        assert!(ring.push(Item(1, 40)).is_empty());
        assert!(ring.push(Item(2, 40)).is_empty());
        let gone = ring.push(Item(3, 40));
        assert_eq!(gone.iter().map(|i| i.0).collect::<Vec<_>>(), [1]);
        assert_eq!(ring.bytes(), 80);
        assert!(ring.get(1).is_none());
        assert_eq!(ring.get(3).map(|i| i.1), Some(40));
        let newest: Vec<u64> = ring.newest_first().map(|i| i.0).collect();
        assert_eq!(newest, [3, 2]);
    }

    #[test]
    fn a_record_that_grows_pushes_the_oldest_out() {
        let mut ring = Ring::new(100);
        ring.push(Item(1, 40));
        ring.push(Item(2, 40));
        ring.get_mut(2).unwrap().1 = 70;
        let gone = ring.reweighed(40, 70);
        assert_eq!(gone.len(), 1);
        assert_eq!(ring.len(), 1);
        assert_eq!(ring.bytes(), 70);
    }
}
