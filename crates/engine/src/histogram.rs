//! Latency histograms: four buckets per power of two of nanoseconds, from 1 µs to ~69 s,
//! shared by the MySQL door's stages and the Redis door's.

/// Buckets per histogram: one below 1 µs, four per power of two from 2^10 to 2^36 ns.
pub const BUCKETS: usize = 1 + 4 * 27;

/// The bucket of a duration of `ns` nanoseconds.
#[inline]
pub fn bucket(ns: u64) -> usize {
    if ns < 1024 {
        return 0;
    }
    let octave = 63 - ns.leading_zeros() as usize;
    let sub = (ns >> (octave - 2)) as usize & 3;
    (1 + (octave - 10) * 4 + sub).min(BUCKETS - 1)
}

/// The largest duration (ns, exclusive) bucket `i` holds.
pub fn bucket_upper(i: usize) -> u64 {
    if i == 0 {
        return 1024;
    }
    let octave = 10 + (i - 1) / 4;
    let sub = (i - 1) % 4;
    (4 + sub as u64 + 1) << (octave - 2)
}

/// A stage's histogram summed over workers.
#[derive(Debug, Clone)]
pub struct Histogram {
    pub buckets: [u64; BUCKETS],
    pub sum_ns: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: [0; BUCKETS],
            sum_ns: 0,
        }
    }
}

impl Histogram {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The upper bound (ns) of the bucket holding quantile `q` (0..=1); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let count = self.count();
        if count == 0 {
            return 0;
        }
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_upper(i);
            }
        }
        bucket_upper(BUCKETS - 1)
    }

    /// The upper bound (ns) of the highest bucket holding anything; 0 when empty.
    pub fn max(&self) -> u64 {
        self.buckets
            .iter()
            .rposition(|&n| n > 0)
            .map_or(0, bucket_upper)
    }

    pub fn add(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.sum_ns += other.sum_ns;
    }
}
