//! Per-digest statement statistics (`SHOW QUERY DIGESTS`): how often each statement shape
//! ran in each schema, how long it took, what it returned and where it went.
//!
//! Each worker keeps a table of its own, touched only by its thread: recording a statement
//! is a hash lookup and a few additions, with an allocation only the first time a shape is
//! seen. The admin port asks every worker for a copy ([`crate::Shared::ask_workers`]) and
//! merges them. A table holds at most `query_digests_max` shapes (each row about 1 KiB plus
//! its digest text, which the lexer caps at `MAX_DIGEST_TEXT`, 2 KiB); statements of further
//! shapes are counted together under one row, so a flood of distinct statements cannot
//! grow memory without bound.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::telemetry::{bucket, Histogram};

/// Keys are already hashes: mixing them once more is enough.
#[derive(Default)]
struct PassHasher(u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
}

/// One statement shape in one schema.
#[derive(Debug, Clone)]
pub struct DigestStats {
    pub digest: u64,
    /// The digest text (literals as `?`); empty for the row counting shapes past the limit.
    pub text: String,
    pub schema: String,
    pub count: u64,
    pub errors: u64,
    /// Rows returned, or affected.
    pub rows: u64,
    pub to_primary: u64,
    pub to_replica: u64,
    pub latency: Histogram,
}

impl DigestStats {
    fn new(digest: u64, text: &[u8], schema: &[u8]) -> DigestStats {
        DigestStats {
            digest,
            text: String::from_utf8_lossy(text).into_owned(),
            schema: String::from_utf8_lossy(schema).into_owned(),
            count: 0,
            errors: 0,
            rows: 0,
            to_primary: 0,
            to_replica: 0,
            latency: Histogram::default(),
        }
    }

    /// Adds another worker's figures for the same shape and schema.
    pub fn merge(&mut self, other: &DigestStats) {
        self.count += other.count;
        self.errors += other.errors;
        self.rows += other.rows;
        self.to_primary += other.to_primary;
        self.to_replica += other.to_replica;
        self.latency.add(&other.latency);
    }
}

/// What one statement did, for its digest's row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Executed {
    pub elapsed_ns: u64,
    pub rows: u64,
    pub error: bool,
    pub replica: bool,
}

/// One worker's table.
#[derive(Default)]
pub(crate) struct DigestTable {
    rows: HashMap<(u64, u64), DigestStats, BuildHasherDefault<PassHasher>>,
    /// Statements of shapes seen after the table was full.
    overflow: Option<DigestStats>,
}

impl DigestTable {
    pub fn record(
        &mut self,
        digest: u64,
        text: &[u8],
        schema: &[u8],
        schema_hash: u64,
        max: usize,
        e: Executed,
    ) {
        let len = self.rows.len();
        let row = match self.rows.entry((digest, schema_hash)) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) if len < max => {
                v.insert(DigestStats::new(digest, text, schema))
            }
            std::collections::hash_map::Entry::Vacant(_) => self
                .overflow
                .get_or_insert_with(|| DigestStats::new(0, b"", b"")),
        };
        row.count += 1;
        row.errors += u64::from(e.error);
        row.rows += e.rows;
        if e.replica {
            row.to_replica += 1;
        } else {
            row.to_primary += 1;
        }
        row.latency.buckets[bucket(e.elapsed_ns)] += 1;
        row.latency.sum_ns += e.elapsed_ns;
    }

    /// A copy of every row, the overflow row last.
    pub fn snapshot(&self) -> Vec<DigestStats> {
        let mut out: Vec<DigestStats> = self.rows.values().cloned().collect();
        out.extend(self.overflow.clone());
        out
    }

    pub fn clear(&mut self) {
        self.rows.clear();
        self.overflow = None;
    }
}

/// Merges workers' rows (same digest and schema) and sorts them by total time, longest
/// first; the overflow row (digest 0) stays last.
pub fn merge(parts: Vec<Vec<DigestStats>>) -> Vec<DigestStats> {
    let mut by_key: HashMap<(u64, String), DigestStats> = HashMap::new();
    for row in parts.into_iter().flatten() {
        match by_key.get_mut(&(row.digest, row.schema.clone())) {
            Some(r) => r.merge(&row),
            None => {
                by_key.insert((row.digest, row.schema.clone()), row);
            }
        }
    }
    let mut rows: Vec<DigestStats> = by_key.into_values().collect();
    rows.sort_by(|a, b| {
        (a.digest == 0)
            .cmp(&(b.digest == 0))
            .then(b.latency.sum_ns.cmp(&a.latency.sum_ns))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ms: u64, replica: bool) -> Executed {
        Executed {
            elapsed_ns: ms * 1_000_000,
            rows: 1,
            error: false,
            replica,
        }
    }

    #[test]
    fn rows_add_up_and_the_table_is_bounded() {
        let mut t = DigestTable::default();
        t.record(1, b"SELECT ?", b"a", 11, 2, run(1, true));
        t.record(1, b"SELECT ?", b"a", 11, 2, run(3, false));
        t.record(1, b"SELECT ?", b"b", 12, 2, run(1, true));
        t.record(2, b"UPDATE t SET x=?", b"a", 11, 2, run(1, false));
        t.record(3, b"DELETE FROM t", b"a", 11, 2, run(1, false));
        let rows = t.snapshot();
        assert_eq!(rows.len(), 3);
        let a = rows
            .iter()
            .find(|r| r.digest == 1 && r.schema == "a")
            .unwrap();
        assert_eq!((a.count, a.to_primary, a.to_replica, a.rows), (2, 1, 1, 2));
        let overflow = rows.last().unwrap();
        assert_eq!((overflow.digest, overflow.count), (0, 2));
        let merged = merge(vec![rows.clone(), rows]);
        assert_eq!(merged[0].digest, 1);
        assert_eq!(merged[0].schema, "a");
        assert_eq!(merged[0].count, 4);
        assert_eq!(merged.last().unwrap().digest, 0);
    }
}
