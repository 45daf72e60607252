//! The Redis door's figures: commands by name (calls, failed calls, rejected calls, time),
//! batches and their sizes, stage latencies, connections, bytes, Pub/Sub traffic and the
//! expiry sweeper's work.
//!
//! Each worker records into its own [`WorkerMetrics`] (on its [`crate::worker::Worker`]); only
//! that worker's thread writes it, so a count goes up with a relaxed load and a relaxed
//! store ([`Counter`]: no locked instruction, no cache line written by two threads), as the
//! MySQL door's telemetry does. [`Metrics`] (on [`crate::RedisShared`]) lists every worker's,
//! and [`Metrics::snapshot`] sums them with relaxed loads: for the admin port, `/metrics` and
//! `INFO`. A figure may miss the request being recorded at that moment, never more.
//!
//! What counts, as Redis 7.0 counts it (`INFO commandstats`):
//! - a command that ran is a call; a call whose reply is an error is also a failed call;
//! - a command refused before running (wrong number of arguments, `NOAUTH`, not allowed
//!   while subscribed) is a rejected call, and no call; an unknown command or subcommand
//!   counts for no command (only in `total_error_replies`);
//! - a command queued by `MULTI` counts when `EXEC` runs it (the `QUEUED` reply is no call).
//!
//! Time (`usec`): a command answered alone is timed from its parse to its reply; the
//! commands of one batch share the batch's time equally; commands run by `EXEC` count no
//! time of their own (`EXEC` has it). Redis measures the command's own CPU time: manifold's
//! includes waiting for the database.
//!
//! Stages ([`Stage`]): `parse` one request's parsing, `batch` one batch from its first
//! statement to its replies, `sql` one backend statement (and `COMMIT`), `reply` one write of
//! replies to the client socket. Histogram buckets are the MySQL door's: one below 1 µs, then
//! four per power of two up to ~69 s.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use manifold_engine::clock;
use manifold_redis_proto::reply_len;

use crate::cmd::table;
use crate::store::sweeper;

/// A count written by one thread only and read by any: `add` is a relaxed load and store.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Sets the count (by its writer).
    #[inline]
    pub fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }

    #[inline]
    pub fn add(&self, n: u64) {
        self.set(self.get().wrapping_add(n));
    }
}

/// A step of the door's work (see the module note).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Parse,
    Batch,
    Sql,
    Reply,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Parse, Stage::Batch, Stage::Sql, Stage::Reply];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Parse => "parse",
            Stage::Batch => "batch",
            Stage::Sql => "sql",
            Stage::Reply => "reply",
        }
    }
}

pub use manifold_engine::histogram::{bucket, bucket_upper, Histogram, BUCKETS};

/// Batch size buckets: sizes up to 1, 2, 4... 256, and more.
pub const SIZE_BUCKETS: usize = 10;

/// The bucket of a batch of `n` commands (`n >= 1`).
pub fn size_bucket(n: usize) -> usize {
    let n = n.max(1);
    let log = usize::BITS - (n - 1).leading_zeros();
    (log as usize).min(SIZE_BUCKETS - 1)
}

/// The largest size bucket `i` holds (`None`: no bound).
pub fn size_upper(i: usize) -> Option<u64> {
    (i + 1 < SIZE_BUCKETS).then(|| 1u64 << i)
}

#[derive(Debug)]
struct WorkerHistogram {
    buckets: [Counter; BUCKETS],
    sum_ns: Counter,
}

impl Default for WorkerHistogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| Counter::default()),
            sum_ns: Counter::default(),
        }
    }
}

/// One command's counts on one worker.
#[derive(Debug, Default)]
pub struct CommandCounters {
    pub calls: Counter,
    pub failed: Counter,
    pub rejected: Counter,
    pub ns: Counter,
}

/// One worker's figures. Written by its worker only (see the module note).
#[derive(Debug)]
pub struct WorkerMetrics {
    commands: Box<[CommandCounters]>,
    stages: [WorkerHistogram; 4],
    batch_sizes: [Counter; SIZE_BUCKETS],
    /// Commands run in batches.
    batched: Counter,
    pub connections: Counter,
    pub rejected_connections: Counter,
    /// Clients closed past their output buffer limit, query buffer limit, or for not
    /// reading their replies within `write_timeout`.
    pub output_limit_closed: Counter,
    pub query_limit_closed: Counter,
    pub write_timeout_closed: Counter,
    net_in: Counter,
    net_out: Counter,
    reads: Counter,
    writes: Counter,
    error_replies: Counter,
    /// Error replies by their first word ([`ERROR_KINDS`]; `INFO errorstats`).
    error_kinds: [Counter; ERROR_KINDS.len()],
    /// `PUBLISH`es, and the subscribers' queues their messages went to.
    published: Counter,
    delivered: Counter,
    /// What the expiry sweeper did (on the worker that sweeps).
    pub sweep: sweeper::Stats,
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        Self {
            commands: table()
                .entries()
                .iter()
                .map(|_| CommandCounters::default())
                .collect(),
            stages: Default::default(),
            batch_sizes: Default::default(),
            batched: Counter::default(),
            connections: Counter::default(),
            rejected_connections: Counter::default(),
            output_limit_closed: Counter::default(),
            query_limit_closed: Counter::default(),
            write_timeout_closed: Counter::default(),
            net_in: Counter::default(),
            net_out: Counter::default(),
            reads: Counter::default(),
            writes: Counter::default(),
            error_replies: Counter::default(),
            error_kinds: Default::default(),
            published: Counter::default(),
            delivered: Counter::default(),
            sweep: sweeper::Stats::default(),
        }
    }
}

/// A clock reading for [`WorkerMetrics::record`].
#[inline]
pub fn now() -> u64 {
    clock::now()
}

/// The error codes `INFO errorstats` counts apart (an error reply's first word, as Redis
/// counts them); another code is counted in `total_error_replies` only.
pub const ERROR_KINDS: [&str; 20] = [
    "ERR",
    "WRONGTYPE",
    "NOAUTH",
    "WRONGPASS",
    "NOPROTO",
    "EXECABORT",
    "NOSCRIPT",
    "BUSY",
    "BUSYKEY",
    "NOTBUSY",
    "OOM",
    "LOADING",
    "READONLY",
    "NOREPLICAS",
    "MISCONF",
    "UNBLOCKED",
    "NOPERM",
    "NOGROUP",
    "BUSYGROUP",
    "UNKILLABLE",
];

/// The place in [`ERROR_KINDS`] of an error reply's code (`-CODE text`, or RESP3's blob
/// error `!len\r\nCODE text`).
fn error_kind(reply: &[u8]) -> Option<usize> {
    let text = if reply.first()? == &b'-' {
        &reply[1..]
    } else {
        let start = reply.iter().position(|&b| b == b'\n')? + 1;
        reply.get(start..)?
    };
    let end = text
        .iter()
        .position(|&b| b == b' ' || b == b'\r')
        .unwrap_or(text.len());
    ERROR_KINDS
        .iter()
        .position(|k| k.as_bytes() == &text[..end])
}

/// Whether a reply starts with an error (RESP2/RESP3 simple or blob error).
pub fn is_error(reply: &[u8]) -> bool {
    matches!(reply.first(), Some(b'-' | b'!'))
}

impl WorkerMetrics {
    /// Records the time from `from` (a [`now`] reading) to now in `stage`; the span's ns.
    #[inline]
    pub fn record(&self, stage: Stage, from: u64) -> u64 {
        let ns = clock::span_ns(from, clock::now());
        self.record_ns(stage, ns);
        ns
    }

    #[inline]
    pub fn record_ns(&self, stage: Stage, ns: u64) {
        let h = &self.stages[stage as usize];
        h.buckets[bucket(ns)].add(1);
        h.sum_ns.add(ns);
    }

    /// A call of the command at `slot` ([`crate::cmd::Entry::slot`]) that answered `reply`
    /// in `ns`.
    pub fn call(&self, slot: usize, reply: &[u8], ns: u64) {
        let failed = is_error(reply);
        if failed {
            self.error_replies.add(1);
            self.count_error_kind(reply);
        }
        if let Some(c) = self.commands.get(slot) {
            c.calls.add(1);
            c.ns.add(ns);
            if failed {
                c.failed.add(1);
            }
        }
    }

    /// A command (at `slot`) refused before it ran (`None`: an unknown command or
    /// subcommand).
    pub fn rejected(&self, slot: Option<usize>) {
        self.error_replies.add(1);
        // Unknown commands and subcommands, wrong arities.
        self.error_kinds[0].add(1);
        if let Some(c) = slot.and_then(|s| self.commands.get(s)) {
            c.rejected.add(1);
        }
    }

    /// A command (at `slot`) refused by an error other than `ERR` (`NOAUTH`) before it ran.
    pub fn rejected_with(&self, slot: usize, reply: &[u8]) {
        self.error_replies.add(1);
        self.count_error_kind(reply);
        if let Some(c) = self.commands.get(slot) {
            c.rejected.add(1);
        }
    }

    fn count_error_kind(&self, reply: &[u8]) {
        if let Some(k) = error_kind(reply) {
            self.error_kinds[k].add(1);
        }
    }

    /// A batch of data commands (at `slots`), whose replies are `replies` (one each, in
    /// order), that took from `from` to now.
    pub fn batch(&self, slots: impl ExactSizeIterator<Item = usize>, replies: &[u8], from: u64) {
        let n = slots.len();
        if n == 0 {
            return;
        }
        let ns = self.record(Stage::Batch, from);
        self.batch_sizes[size_bucket(n)].add(1);
        self.batched.add(n as u64);
        self.calls(slots, replies, ns / n as u64);
    }

    /// Calls of the commands at `slots`, whose replies are `replies` (one each, in order),
    /// `ns` each.
    pub fn calls(&self, slots: impl Iterator<Item = usize>, mut replies: &[u8], ns: u64) {
        for slot in slots {
            let len = reply_len(replies).unwrap_or(replies.len());
            self.call(slot, &replies[..len], ns);
            replies = &replies[len..];
        }
    }

    /// A `PUBLISH` whose message went to `receivers` subscribers' queues.
    pub fn published(&self, receivers: u64) {
        self.published.add(1);
        self.delivered.add(receivers);
    }

    /// Bytes read from a client.
    #[inline]
    pub fn read(&self, n: usize) {
        self.net_in.add(n as u64);
        self.reads.add(1);
    }

    /// Writes `bytes` bytes of replies with `write`: times it (`reply`) and counts it.
    pub async fn write<T>(&self, bytes: usize, write: impl Future<Output = T>) -> T {
        let from = now();
        let ok = write.await;
        self.record(Stage::Reply, from);
        self.net_out.add(bytes as u64);
        self.writes.add(1);
        ok
    }
}

/// Every worker's figures.
#[derive(Debug, Default)]
pub struct Metrics {
    workers: Mutex<Vec<Arc<WorkerMetrics>>>,
}

/// One command's figures over all workers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandStats {
    pub name: &'static str,
    /// Its family ([`crate::cmd::table::Group::name`]), as the admin port groups commands.
    pub family: &'static str,
    pub calls: u64,
    pub failed: u64,
    pub rejected: u64,
    pub usec: u64,
}

/// Every figure, summed over workers.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Commands with a call or a rejection, by name.
    pub commands: Vec<CommandStats>,
    pub stages: [Histogram; 4],
    pub batch_sizes: [u64; SIZE_BUCKETS],
    pub batched: u64,
    pub connections: u64,
    pub rejected_connections: u64,
    pub output_limit_closed: u64,
    pub query_limit_closed: u64,
    pub write_timeout_closed: u64,
    pub net_in: u64,
    pub net_out: u64,
    pub reads: u64,
    pub writes: u64,
    pub error_replies: u64,
    /// Error replies by code, as [`ERROR_KINDS`].
    pub error_kinds: [u64; ERROR_KINDS.len()],
    pub published: u64,
    pub delivered: u64,
    pub expired_keys: u64,
    pub swept_members: u64,
    pub sweep_errors: u64,
}

impl Snapshot {
    /// Calls of every command (`total_commands_processed`).
    pub fn calls(&self) -> u64 {
        self.commands.iter().map(|c| c.calls).sum()
    }

    pub fn failed(&self) -> u64 {
        self.commands.iter().map(|c| c.failed).sum()
    }

    pub fn rejected(&self) -> u64 {
        self.commands.iter().map(|c| c.rejected).sum()
    }

    pub fn batches(&self) -> u64 {
        self.batch_sizes.iter().sum()
    }

    pub fn stage(&self, stage: Stage) -> &Histogram {
        &self.stages[stage as usize]
    }
}

impl Metrics {
    /// Lists a worker's figures for reading.
    pub fn register(&self, worker: Arc<WorkerMetrics>) {
        self.workers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(worker);
    }

    /// Every worker's figures, summed.
    pub fn snapshot(&self) -> Snapshot {
        let workers = self
            .workers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut s = Snapshot::default();
        let mut commands: Vec<CommandStats> = table()
            .entries()
            .iter()
            .map(|e| CommandStats {
                name: e.name,
                family: e.group.name(),
                ..CommandStats::default()
            })
            .collect();
        for w in &workers {
            for (c, wc) in commands.iter_mut().zip(w.commands.iter()) {
                c.calls += wc.calls.get();
                c.failed += wc.failed.get();
                c.rejected += wc.rejected.get();
                c.usec += wc.ns.get() / 1000;
            }
            for (h, wh) in s.stages.iter_mut().zip(&w.stages) {
                for (b, wb) in h.buckets.iter_mut().zip(&wh.buckets) {
                    *b += wb.get();
                }
                h.sum_ns += wh.sum_ns.get();
            }
            for (b, wb) in s.batch_sizes.iter_mut().zip(&w.batch_sizes) {
                *b += wb.get();
            }
            s.batched += w.batched.get();
            s.connections += w.connections.get();
            s.rejected_connections += w.rejected_connections.get();
            s.output_limit_closed += w.output_limit_closed.get();
            s.query_limit_closed += w.query_limit_closed.get();
            s.write_timeout_closed += w.write_timeout_closed.get();
            s.net_in += w.net_in.get();
            s.net_out += w.net_out.get();
            s.reads += w.reads.get();
            s.writes += w.writes.get();
            s.error_replies += w.error_replies.get();
            for (k, wk) in s.error_kinds.iter_mut().zip(&w.error_kinds) {
                *k += wk.get();
            }
            s.published += w.published.get();
            s.delivered += w.delivered.get();
            s.expired_keys += w.sweep.keys.get();
            s.swept_members += w.sweep.members.get();
            s.sweep_errors += w.sweep.errors.get();
        }
        commands.retain(|c| c.calls > 0 || c.rejected > 0 || c.failed > 0);
        s.commands = commands;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered(n: usize) -> (Metrics, Vec<Arc<WorkerMetrics>>) {
        let m = Metrics::default();
        let workers: Vec<_> = (0..n).map(|_| Arc::new(WorkerMetrics::default())).collect();
        for w in &workers {
            m.register(w.clone());
        }
        (m, workers)
    }

    fn slot(name: &str) -> usize {
        table().get(name).unwrap().slot
    }

    #[test]
    fn commands_are_summed_over_workers() {
        let (m, w) = registered(2);
        w[0].call(slot("get"), b"$1\r\nx\r\n", 3000);
        w[1].call(slot("get"), b"-WRONGTYPE Operation\r\n", 1000);
        w[1].rejected(Some(slot("get")));
        w[0].rejected(None);
        w[0].call(slot("client|list"), b"$0\r\n\r\n", 0);
        w[0].call(usize::MAX, b"+OK\r\n", 0);
        let s = m.snapshot();
        let get = s.commands.iter().find(|c| c.name == "get").unwrap();
        assert_eq!(
            *get,
            CommandStats {
                name: "get",
                family: "strings",
                calls: 2,
                failed: 1,
                rejected: 1,
                usec: 4
            }
        );
        assert!(s
            .commands
            .iter()
            .any(|c| c.name == "client|list" && c.calls == 1));
        assert_eq!(s.commands.len(), 2, "commands never called are left out");
        assert_eq!(s.calls(), 3);
        assert_eq!(s.error_replies, 3);
        assert_eq!((s.failed(), s.rejected()), (1, 1));
    }

    #[test]
    fn batches_split_their_replies_and_time() {
        let (m, w) = registered(1);
        let replies =
            b"+OK\r\n$-1\r\n-WRONGTYPE x\r\n*2\r\n$1\r\na\r\n*1\r\n:1\r\n%1\r\n+k\r\n+v\r\n";
        let names = ["set", "get", "get", "lrange", "hgetall"];
        w[0].batch(names.iter().map(|n| slot(n)), replies, now());
        let s = m.snapshot();
        let of = |n: &str| s.commands.iter().find(|c| c.name == n).cloned().unwrap();
        assert_eq!((of("get").calls, of("get").failed), (2, 1));
        assert_eq!((of("set").calls, of("set").failed), (1, 0));
        assert_eq!((of("lrange").calls, of("hgetall").calls), (1, 1));
        assert_eq!(s.batches(), 1);
        assert_eq!(s.batched, 5);
        assert_eq!(s.batch_sizes[size_bucket(5)], 1);
        assert_eq!(s.stage(Stage::Batch).count(), 1);
    }

    #[test]
    fn size_buckets() {
        assert_eq!(size_bucket(1), 0);
        assert_eq!(size_bucket(2), 1);
        assert_eq!(size_bucket(3), 2);
        assert_eq!(size_bucket(4), 2);
        assert_eq!(size_bucket(5), 3);
        assert_eq!(size_bucket(256), 8);
        assert_eq!(size_bucket(257), 9);
        assert_eq!(size_bucket(usize::MAX), 9);
        for n in 1..300usize {
            let b = size_bucket(n);
            assert!(size_upper(b).is_none_or(|u| n as u64 <= u), "{n}");
            assert!(
                b == 0 || size_upper(b - 1).is_some_and(|u| n as u64 > u),
                "{n}"
            );
        }
    }

    #[test]
    fn stage_histograms_and_quantiles() {
        let (m, w) = registered(2);
        for _ in 0..90 {
            w[0].record_ns(Stage::Sql, 100_000);
        }
        for _ in 0..10 {
            w[1].record_ns(Stage::Sql, 10_000_000);
        }
        let s = m.snapshot();
        let h = s.stage(Stage::Sql);
        assert_eq!(h.count(), 100);
        assert!((100_000..=120_000).contains(&h.quantile(0.5)));
        assert!((10_000_000..=12_000_000).contains(&h.quantile(0.99)));
        assert_eq!(h.max(), h.quantile(0.99));
        assert_eq!(s.stage(Stage::Parse).count(), 0);
        assert_eq!(bucket(1023), 0);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        for ns in (1024..1_000_000u64).step_by(997) {
            assert!(ns < bucket_upper(bucket(ns)));
        }
    }

    #[test]
    fn sweeper_figures_are_summed() {
        let (m, w) = registered(2);
        w[0].sweep.keys.add(3);
        w[1].sweep.members.add(7);
        let s = m.snapshot();
        assert_eq!((s.expired_keys, s.swept_members), (3, 7));
    }

    #[test]
    fn every_command_of_the_table_has_counters() {
        let (m, w) = registered(1);
        for e in table().entries() {
            w[0].call(e.slot, b"+OK\r\n", 0);
        }
        let s = m.snapshot();
        assert_eq!(s.commands.len(), table().entries().len());
        let kill = s.commands.iter().find(|c| c.name == "client|kill").unwrap();
        assert_eq!((kill.calls, kill.family), (1, "connection"));
        let zadd = s.commands.iter().find(|c| c.name == "zadd").unwrap();
        assert_eq!(zadd.family, "zsets");
    }
}
