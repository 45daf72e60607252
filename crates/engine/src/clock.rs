//! A cheap clock for timing the stages of requests: on x86_64 the CPU's time-stamp counter
//! (one instruction: ~15 ns here, against ~35 ns for `Instant::now` and its conversion to a
//! duration), elsewhere nanoseconds from `Instant`. A span between two readings converts to
//! nanoseconds with one multiply, by a factor [`calibrate`] measures once against `Instant`.
//!
//! Readings from different threads compare only as well as the cores' counters agree; Linux
//! checks that they do (`constant_tsc`, `nonstop_tsc`) before it uses the counter as its own
//! clock source. A span that comes out negative (a thread moved to a core slightly behind)
//! reads as zero.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Nanoseconds per tick, as a fixed-point fraction of 2^32; 0 until calibrated.
static NS_PER_TICK_FP32: AtomicU64 = AtomicU64::new(0);

/// Where `Instant`-based ticks count from, on targets without a counter.
#[cfg(not(target_arch = "x86_64"))]
static BASE: OnceLock<Instant> = OnceLock::new();

/// A reading of the clock, in ticks.
#[inline]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        #[allow(unsafe_code)]
        // SAFETY: RDTSC reads the time-stamp counter and has no preconditions; the process
        // never disables it for itself (`prctl(PR_SET_TSC)`), so it cannot fault.
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Nanoseconds from reading `from` to reading `to`; 0 when `to` is not later, or before
/// [`calibrate`] ran.
#[inline]
pub fn span_ns(from: u64, to: u64) -> u64 {
    ticks_to_ns(
        to.saturating_sub(from),
        NS_PER_TICK_FP32.load(Ordering::Relaxed),
    )
}

/// `ticks` in nanoseconds, at `per_tick_fp32` nanoseconds per tick (a fraction of 2^32).
#[inline]
fn ticks_to_ns(ticks: u64, per_tick_fp32: u64) -> u64 {
    ((u128::from(ticks) * u128::from(per_tick_fp32)) >> 32) as u64
}

/// Nanoseconds per tick as a fraction of 2^32, from `ns` nanoseconds measured over `ticks`
/// ticks; never 0, so a calibrated clock never reads every span as zero.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn ns_per_tick_fp32(ns: u128, ticks: u64) -> u64 {
    ((ns << 32) / u128::from(ticks.max(1))).clamp(1, u128::from(u64::MAX)) as u64
}

/// Measures how long a tick is against `Instant`, over `window`, once per process; later
/// calls return at once. The engine calls it before its workers start.
pub fn calibrate(window: Duration) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = window;
            BASE.get_or_init(Instant::now);
            NS_PER_TICK_FP32.store(1 << 32, Ordering::Relaxed);
        }
        #[cfg(target_arch = "x86_64")]
        {
            let (i0, t0) = paired();
            std::thread::sleep(window);
            let (i1, t1) = paired();
            let per = ns_per_tick_fp32(i1.duration_since(i0).as_nanos(), t1.saturating_sub(t0));
            NS_PER_TICK_FP32.store(per, Ordering::Relaxed);
        }
    });
}

/// An `Instant` and the ticks at the same moment: the tightest of a few tries, so that a
/// thread descheduled between the two readings does not skew the pair.
#[cfg(target_arch = "x86_64")]
fn paired() -> (Instant, u64) {
    let mut best = (Instant::now(), now(), u64::MAX);
    for _ in 0..16 {
        let before = now();
        let at = Instant::now();
        let after = now();
        let gap = after.saturating_sub(before);
        if gap < best.2 {
            best = (at, before + gap / 2, gap);
        }
    }
    (best.0, best.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_at_the_measured_rate() {
        // 4 GHz and 1 GHz are exact in the fraction; 3 GHz rounds down by under a tick.
        let at_4ghz = ns_per_tick_fp32(1_000_000_000, 4_000_000_000);
        assert_eq!(ticks_to_ns(4_000, at_4ghz), 1_000);
        let at_1ghz = ns_per_tick_fp32(1_000_000_000, 1_000_000_000);
        assert_eq!(at_1ghz, 1 << 32);
        assert_eq!(ticks_to_ns(u64::MAX, at_1ghz), u64::MAX, "no overflow");
        let at_3ghz = ns_per_tick_fp32(1_000_000_000, 3_000_000_000);
        assert!((999..=1_000).contains(&ticks_to_ns(3_000, at_3ghz)));
    }

    #[test]
    fn a_calibration_never_reads_every_span_as_zero() {
        assert_eq!(ns_per_tick_fp32(0, 5), 1, "no time measured");
        assert_eq!(ns_per_tick_fp32(10, 0), 10 << 32, "no ticks counted");
        assert_eq!(ns_per_tick_fp32(u128::MAX >> 32, 1), u64::MAX, "clamped");
    }

    #[test]
    fn calibrated_spans_grow_with_time_and_never_go_backwards() {
        calibrate(Duration::from_millis(20));
        let t0 = now();
        std::thread::sleep(Duration::from_millis(1));
        let t1 = now();
        std::thread::sleep(Duration::from_millis(1));
        let t2 = now();
        assert!(span_ns(t0, t1) > 0, "a millisecond reads as nothing");
        assert!(
            span_ns(t0, t2) > span_ns(t0, t1),
            "a longer span reads shorter"
        );
        assert_eq!(span_ns(t1, t0), 0, "a backwards span reads as zero");
    }
}
