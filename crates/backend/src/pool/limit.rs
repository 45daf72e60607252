//! How many connections a pool may have busy at once: a concurrency limit that adapts as
//! TCP Vegas and Netflix's `VegasLimit` do.
//!
//! Every connection given back carries one sample: how long its borrower held it (the
//! statement's, or the transaction's, round trip to the server). Samples are averaged over
//! windows of at least [`WINDOW_NS`] and [`MIN_WINDOW_SAMPLES`]; the smallest window average
//! seen is the server's latency without queueing. A window in which the pool used its limit
//! (borrowers waited, or half the limit was busy) compares its average with that minimum:
//! `queue = limit × (1 − min / avg)` estimates how many of the limit's statements waited
//! inside the server instead of running. Almost none: the server keeps up, the limit grows
//! (fast while nothing queues); more than [`BETA`]: connections only queue in the server,
//! the limit shrinks. So the pool keeps a few statements queued at the server, which is what
//! its throughput needs, and no more; the sessions beyond wait in manifold, where waiting is
//! cheap (or ride behind another's statement, with pipelining on).
//!
//! The configured `pool.max_size` stays the ceiling, `pool.min_limit` the floor. All state is
//! one worker's: plain `Cell`s, no atomics, nothing allocated.

use std::cell::Cell;

/// A window closes once it is this long (100 ms) and holds [`MIN_WINDOW_SAMPLES`].
pub(crate) const WINDOW_NS: u64 = 100_000_000;
/// Fewer samples say too little: a window waits for this many.
pub(crate) const MIN_WINDOW_SAMPLES: u32 = 16;
/// Queued statements below which the limit grows by one.
const ALPHA: usize = 3;
/// Queued statements above which the limit shrinks; at or below [`QUEUE_NONE`] it grows by
/// this much.
const BETA: usize = 6;
const QUEUE_NONE: usize = 1;
/// Every this many windows the no-load latency is learnt again from the current window, so
/// a server that got slower for good (bigger data, another tenant) is not read as queueing
/// forever, nor one noisy fast window kept as the floor.
const RELEARN_WINDOWS: u32 = 100;
/// A sample counts at most this many times the no-load latency: a lease held across a long
/// transaction or a pinned session says little about the server's queue, and must not
/// outweigh a window's statements.
const CLIP: u64 = 16;

#[derive(Debug)]
pub(crate) struct ConcurrencyLimit {
    limit: Cell<usize>,
    floor: usize,
    window_start_ns: Cell<u64>,
    samples: Cell<u32>,
    sum_ns: Cell<u64>,
    /// The limit was used in this window: its figures say something about the limit.
    saturated: Cell<bool>,
    /// Smallest window average since the last re-learning; 0 until the first window.
    no_load_ns: Cell<u64>,
    windows: Cell<u32>,
    /// The last window's average.
    last_avg_ns: Cell<u64>,
    /// Most connections busy at once since the last [`ConcurrencyLimit::decay`].
    peak_busy: Cell<usize>,
    /// A borrower waited for the limit since the last [`ConcurrencyLimit::decay`].
    refused_since_decay: Cell<bool>,
}

impl ConcurrencyLimit {
    /// Starts at the floor (within `ceiling`): a pool grows to what its load needs.
    pub(crate) fn new(floor: usize, ceiling: usize) -> Self {
        let floor = floor.max(1);
        Self {
            limit: Cell::new(floor.min(ceiling.max(1))),
            floor,
            window_start_ns: Cell::new(0),
            samples: Cell::new(0),
            sum_ns: Cell::new(0),
            saturated: Cell::new(false),
            no_load_ns: Cell::new(0),
            windows: Cell::new(0),
            last_avg_ns: Cell::new(0),
            peak_busy: Cell::new(0),
            refused_since_decay: Cell::new(false),
        }
    }

    /// The limit now, within `ceiling` (which an operator may have lowered meanwhile).
    pub(crate) fn get(&self, ceiling: usize) -> usize {
        self.limit.get().min(ceiling).max(1)
    }

    /// The last window's average hold time, 0 before the first.
    pub(crate) fn last_avg_ns(&self) -> u64 {
        self.last_avg_ns.get()
    }

    /// A connection was just lent: `busy` are now busy (lent, opening or resetting).
    pub(crate) fn lent(&self, busy: usize) {
        if busy > self.peak_busy.get() {
            self.peak_busy.set(busy);
        }
        if busy * 2 >= self.limit.get() {
            self.saturated.set(true);
        }
    }

    /// A borrower has to wait: the limit's connections are all busy.
    pub(crate) fn refused(&self) {
        self.saturated.set(true);
        self.refused_since_decay.set(true);
    }

    /// A lease held `held_ns` came back at `now_ns` (on any clock that only moves forward).
    /// Returns the new limit when a window closed and changed it.
    pub(crate) fn sample(&self, held_ns: u64, now_ns: u64, ceiling: usize) -> Option<usize> {
        let no_load = self.no_load_ns.get();
        let held = if no_load == 0 {
            held_ns
        } else {
            held_ns.min(no_load.saturating_mul(CLIP))
        };
        if self.samples.get() == 0 {
            self.window_start_ns.set(now_ns);
        }
        self.samples.set(self.samples.get() + 1);
        self.sum_ns.set(self.sum_ns.get().saturating_add(held));
        if self.samples.get() < MIN_WINDOW_SAMPLES
            || now_ns.saturating_sub(self.window_start_ns.get()) < WINDOW_NS
        {
            return None;
        }
        let avg = (self.sum_ns.get() / u64::from(self.samples.get())).max(1);
        self.samples.set(0);
        self.sum_ns.set(0);
        let before = self.get(ceiling);
        let after = self.close_window(avg, ceiling);
        (after != before).then_some(after)
    }

    /// Vegas's rule on one window's average hold time.
    fn close_window(&self, avg_ns: u64, ceiling: usize) -> usize {
        self.last_avg_ns.set(avg_ns);
        let windows = self.windows.get() + 1;
        if windows >= RELEARN_WINDOWS || self.no_load_ns.get() == 0 {
            self.windows.set(0);
            self.no_load_ns.set(avg_ns);
        } else {
            self.windows.set(windows);
            if avg_ns < self.no_load_ns.get() {
                self.no_load_ns.set(avg_ns);
            }
        }
        let limit = self.get(ceiling);
        if !self.saturated.replace(false) {
            // The pool did not use its limit: no evidence either way.
            return limit;
        }
        let no_load = self.no_load_ns.get();
        // ceil(limit × (avg − no_load) / avg), in integers.
        let queue = usize::try_from(
            (u128::from(avg_ns - no_load) * limit as u128).div_ceil(u128::from(avg_ns)),
        )
        .unwrap_or(usize::MAX);
        let next = if queue <= QUEUE_NONE {
            limit + BETA
        } else if queue < ALPHA {
            limit + 1
        } else if queue > BETA {
            // Shed the excess over a few windows, not at once: one noisy window (the machine
            // busy elsewhere) costs a quarter of the limit at most.
            limit - (queue - BETA).div_ceil(2).min(limit / 4).max(1)
        } else {
            limit
        };
        // Kept at the floor even under a lower ceiling, which [`Self::get`] applies.
        self.limit.set(next.min(ceiling).max(self.floor));
        self.get(ceiling)
    }

    /// One more connection, when borrowers have waited a long while and no connection came
    /// back: those busy are held (by pinned sessions, long transactions or slow
    /// statements), not serving the queue, and only a larger limit lets the others run.
    pub(crate) fn stalled(&self, ceiling: usize) -> usize {
        let next = (self.get(ceiling) + 1).min(ceiling.max(1));
        self.limit.set(next);
        next
    }

    /// Called every maintenance tick: a limit no borrower waited for since the last tick
    /// comes down to what was busy at the peak (not below the floor), so that the
    /// connections above it close once idle, and the backend count follows the load down.
    pub(crate) fn decay(&self, ceiling: usize) -> usize {
        let peak = self.peak_busy.replace(0);
        if !self.refused_since_decay.replace(false) {
            // Not capped by the ceiling here: a ceiling lowered for a while and raised again
            // finds the limit where it was.
            let next = peak.max(self.floor).min(self.limit.get());
            self.limit.set(next);
        }
        self.get(ceiling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Feeds one full window of samples of `held` each, `saturated` or not; returns the limit.
    fn window(l: &ConcurrencyLimit, clock: &mut u64, held: u64, saturated: bool) -> usize {
        let step = WINDOW_NS.div_ceil(u64::from(MIN_WINDOW_SAMPLES - 1));
        for _ in 0..MIN_WINDOW_SAMPLES {
            if saturated {
                l.refused();
            }
            l.sample(held, *clock, 1000);
            *clock += step;
        }
        assert_eq!(l.samples.get(), 0, "the window closed");
        l.get(1000)
    }

    #[test]
    fn starts_at_the_floor_within_the_ceiling() {
        assert_eq!(ConcurrencyLimit::new(4, 256).get(256), 4);
        assert_eq!(ConcurrencyLimit::new(4, 2).get(2), 2);
        assert_eq!(ConcurrencyLimit::new(0, 10).get(10), 1, "never 0");
    }

    #[test]
    fn a_window_needs_both_its_time_and_its_samples() {
        let l = ConcurrencyLimit::new(4, 100);
        l.refused();
        // Many samples in less than a window's time: no decision.
        for i in 0..100 {
            assert_eq!(l.sample(MS, i * 1000, 100), None);
        }
        let l = ConcurrencyLimit::new(4, 100);
        l.refused();
        // A window's time with too few samples: none either.
        for i in 0..u64::from(MIN_WINDOW_SAMPLES - 1) {
            assert_eq!(l.sample(MS, i * WINDOW_NS, 100), None);
        }
        assert_eq!(l.sample(MS, 20 * WINDOW_NS, 100), Some(4 + BETA));
    }

    #[test]
    fn grows_while_latency_stays_at_its_minimum() {
        let l = ConcurrencyLimit::new(4, 1000);
        let mut clock = 0;
        let mut last = l.get(1000);
        for _ in 0..5 {
            let now = window(&l, &mut clock, MS, true);
            assert!(now > last, "{now} > {last}");
            last = now;
        }
        assert_eq!(last, 4 + 5 * BETA);
    }

    #[test]
    fn does_not_grow_when_the_limit_is_not_used() {
        let l = ConcurrencyLimit::new(4, 1000);
        let mut clock = 0;
        for _ in 0..5 {
            assert_eq!(window(&l, &mut clock, MS, false), 4);
        }
    }

    #[test]
    fn backs_off_when_latency_rises_over_its_minimum() {
        let l = ConcurrencyLimit::new(2, 1000);
        let mut clock = 0;
        for _ in 0..10 {
            window(&l, &mut clock, MS, true);
        }
        let grown = l.get(1000);
        assert_eq!(grown, 2 + 10 * BETA);
        // Twice the no-load latency: half the limit's statements wait in the server.
        let mut last = grown;
        for _ in 0..5 {
            let now = window(&l, &mut clock, 2 * MS, true);
            assert!(now < last, "{now} < {last}");
            last = now;
        }
        // It settles where ALPHA..=BETA statements queue: ⌈limit / 2⌉ within that.
        for _ in 0..50 {
            window(&l, &mut clock, 2 * MS, true);
        }
        let settled = l.get(1000);
        assert!(
            (2 * ALPHA - 1..=2 * BETA).contains(&settled),
            "settled at {settled}"
        );
        // And holds there.
        assert_eq!(window(&l, &mut clock, 2 * MS, true), settled);
    }

    #[test]
    fn grows_by_one_when_a_little_queues() {
        let l = ConcurrencyLimit::new(20, 1000);
        let mut clock = 0;
        window(&l, &mut clock, 100 * MS, false);
        // limit 20, avg 1.1 × no-load: 20 × (1 − 1/1.1) ≈ 1.8, rounded up 2 (< ALPHA).
        assert_eq!(window(&l, &mut clock, 110 * MS, true), 21);
    }

    #[test]
    fn one_noisy_window_costs_at_most_a_quarter() {
        let l = ConcurrencyLimit::new(2, 1000);
        let mut clock = 0;
        for _ in 0..8 {
            window(&l, &mut clock, MS, true);
        }
        let before = l.get(1000);
        let after = window(&l, &mut clock, 100 * MS, true);
        assert_eq!(after, before - before / 4);
    }

    #[test]
    fn stays_within_floor_and_ceiling() {
        let l = ConcurrencyLimit::new(8, 10);
        let mut clock = 0;
        let step = WINDOW_NS.div_ceil(u64::from(MIN_WINDOW_SAMPLES - 1));
        for _ in 0..20 {
            for _ in 0..MIN_WINDOW_SAMPLES {
                l.refused();
                l.sample(MS, clock, 10);
                clock += step;
            }
            assert!(l.get(10) <= 10);
        }
        assert_eq!(l.get(10), 10, "grew to the ceiling");
        // A lowered ceiling holds at once.
        assert_eq!(l.get(5), 5);
        for _ in 0..20 {
            for _ in 0..MIN_WINDOW_SAMPLES {
                l.refused();
                l.sample(50 * MS, clock, 10);
                clock += step;
            }
        }
        // Queueing (16 × the no-load latency) would take it lower: the floor holds.
        assert_eq!(l.get(10), 8, "backed off to the floor");
    }

    #[test]
    fn long_holds_are_clipped() {
        let l = ConcurrencyLimit::new(30, 1000);
        let mut clock = 0;
        window(&l, &mut clock, MS, false);
        // One lease held an hour among fifteen of a millisecond: clipped at CLIP ms, the
        // window's average is (15 + 16) / 16 ms, not four minutes.
        let step = WINDOW_NS.div_ceil(u64::from(MIN_WINDOW_SAMPLES - 1));
        for i in 0..MIN_WINDOW_SAMPLES {
            let held = if i == 0 { 3_600_000 * MS } else { MS };
            l.sample(held, clock, 1000);
            clock += step;
        }
        assert_eq!(l.last_avg_ns(), (15 + CLIP) * MS / 16);
    }

    #[test]
    fn relearns_the_no_load_latency() {
        let l = ConcurrencyLimit::new(2, 1000);
        let mut clock = 0;
        window(&l, &mut clock, MS, false);
        // The server became slower for good: at first that reads as queueing...
        for _ in 0..RELEARN_WINDOWS {
            window(&l, &mut clock, 3 * MS, false);
        }
        // ...until the minimum is learnt again: then the limit grows again.
        let before = l.get(1000);
        assert!(window(&l, &mut clock, 3 * MS, true) > before);
    }

    #[test]
    fn stalled_adds_one_within_the_ceiling() {
        let l = ConcurrencyLimit::new(4, 5);
        assert_eq!(l.stalled(5), 5);
        assert_eq!(l.stalled(5), 5);
    }

    #[test]
    fn decays_to_the_peak_when_nobody_waited() {
        let l = ConcurrencyLimit::new(4, 1000);
        let mut clock = 0;
        for _ in 0..5 {
            window(&l, &mut clock, MS, true);
        }
        assert_eq!(l.get(1000), 34);
        // Someone waited since the last tick: it stays.
        assert_eq!(l.decay(1000), 34);
        l.lent(7);
        l.lent(9);
        l.lent(3);
        assert_eq!(l.decay(1000), 9, "the peak busy");
        assert_eq!(l.decay(1000), 4, "nothing busy: the floor");
        // A ceiling below the floor for a while: the floor is back when it is raised.
        assert_eq!(l.decay(1), 1);
        assert_eq!(l.get(8), 4);
    }
}
