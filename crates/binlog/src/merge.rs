//! The global order: a k-way merge of the sources by key, released by watermark.
//!
//! OWNER: the codec helper.
//!
//! Each source's transactions arrive in its commit order. A transaction's key is
//! `max(its stamp, the key of the source's previous transaction or heartbeat)`: non-decreasing
//! per source. Keys tie-break by source index, so the order is total and deterministic. A
//! transaction `(k, i)` leaves once every other source `s` has shown `(last key of s, s) >
//! (k, i)` — nothing that source sends later can come before it. A silent source holds
//! everything back (and [`Merger::held_back_by`] says which); nothing is ever reordered.
//!
//! Sources are few (one per cluster), so `pop` scans them: O(sources), whatever the number of
//! items waiting.

use std::collections::VecDeque;

/// Items waiting for the watermark, in key order.
#[derive(Debug)]
pub struct Merger<T> {
    /// Per source, its items in arrival order with the key each got.
    queues: Vec<VecDeque<(u64, T)>>,
    /// Per source, the key of its latest transaction or heartbeat.
    last_keys: Vec<u64>,
    waiting: usize,
}

impl<T> Merger<T> {
    /// `last_keys`: each source's key to continue from (recovery), 0 for a new one.
    pub fn new(last_keys: Vec<u64>) -> Merger<T> {
        Merger {
            queues: last_keys.iter().map(|_| VecDeque::new()).collect(),
            last_keys,
            waiting: 0,
        }
    }

    /// Makes room for `source` if it is past the sources known so far (a new source starts at
    /// key 0, so it holds everything back until it speaks).
    fn ensure_source(&mut self, source: usize) {
        if source >= self.last_keys.len() {
            self.last_keys.resize(source + 1, 0);
            self.queues.resize_with(source + 1, VecDeque::new);
        }
    }

    /// Moves `source`'s key to `max(stamp, its last key)` and returns it.
    fn next_key(&mut self, source: usize, stamp: u64) -> u64 {
        self.ensure_source(source);
        let key = self.last_keys[source].max(stamp);
        self.last_keys[source] = key;
        key
    }

    /// Adds a source's next transaction; returns the key it got.
    pub fn push(&mut self, source: usize, stamp: Option<u64>, item: T) -> u64 {
        let key = self.next_key(source, stamp.unwrap_or(0));
        self.queues[source].push_back((key, item));
        self.waiting += 1;
        key
    }

    /// A heartbeat (or any transaction not written out) of `source` stamped `stamp`: its key
    /// moves to `max(stamp, its last key)`.
    pub fn advance(&mut self, source: usize, stamp: u64) {
        self.next_key(source, stamp);
    }

    /// The head with the smallest `(key, source)`, if any item waits.
    fn smallest_head(&self) -> Option<(u64, usize)> {
        self.queues
            .iter()
            .enumerate()
            .filter_map(|(source, queue)| queue.front().map(|(key, _)| (*key, source)))
            .min()
    }

    /// The source with the smallest `(last key, source)` below `(key, source)`, other than
    /// `source` itself: the one that may still send something that goes first.
    fn blocker(&self, key: u64, source: usize) -> Option<usize> {
        self.last_keys
            .iter()
            .enumerate()
            .filter(|&(s, &last)| s != source && (last, s) < (key, source))
            .min_by_key(|&(s, &last)| (last, s))
            .map(|(s, _)| s)
    }

    /// The next item the watermark releases: `(key, source, item)`.
    pub fn pop(&mut self) -> Option<(u64, usize, T)> {
        let (key, source) = self.smallest_head()?;
        if self.blocker(key, source).is_some() {
            return None;
        }
        let (key, item) = self.queues[source].pop_front()?;
        self.waiting -= 1;
        Some((key, source, item))
    }

    /// The source whose last key holds back the oldest waiting item, if any item waits (and
    /// none when that item may leave now).
    pub fn held_back_by(&self) -> Option<usize> {
        let (key, source) = self.smallest_head()?;
        self.blocker(key, source)
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.waiting
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each source's last key.
    pub fn last_keys(&self) -> &[u64] {
        &self.last_keys
    }
}

#[cfg(test)]
mod tests;
