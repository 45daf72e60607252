//! The last minutes of traffic, for the dashboard: statements and errors per second,
//! sampled by the admin thread from the workers' counters.

use std::collections::VecDeque;

/// Samples kept: five minutes at one a second.
pub(crate) const KEEP: usize = 300;
pub(crate) const INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug, Default)]
pub(crate) struct History {
    /// The counters at the last sample.
    last: Option<(u64, u64)>,
    pub queries: VecDeque<u64>,
    pub errors: VecDeque<u64>,
}

impl History {
    /// Records the counters' growth since the last sample.
    pub fn sample(&mut self, statements: u64, errors: u64) {
        if let Some((s, e)) = self.last {
            if self.queries.len() == KEEP {
                self.queries.pop_front();
                self.errors.pop_front();
            }
            self.queries.push_back(statements.saturating_sub(s));
            self.errors.push_back(errors.saturating_sub(e));
        }
        self.last = Some((statements, errors));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_deltas() {
        let mut h = History::default();
        h.sample(10, 0);
        assert!(h.queries.is_empty());
        h.sample(15, 1);
        h.sample(15, 1);
        assert_eq!(h.queries, [5, 0]);
        assert_eq!(h.errors, [1, 0]);
        for i in 0..KEEP as u64 + 10 {
            h.sample(100 + i * 2, 1);
        }
        assert_eq!(h.queries.len(), KEEP);
        assert_eq!(*h.queries.back().unwrap(), 2);
    }
}
