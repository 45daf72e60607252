#![forbid(unsafe_code)]
//! The global binlog's pipeline alone on recorded source binlogs: parse (split events, verify
//! CRC32), assemble each source's transactions, merge them, write them as the global binlog.
//! No network, no manifold: what one core does per event, to compare with `mariadb-binlog`
//! decoding the same files (`bench/binlog.sh pipeline` runs both).
//!
//! ```text
//! cargo run --release -p manifold-binlog --example replay -- --out DIR FILE...
//! cargo run --release -p manifold-binlog --example replay -- --out DIR \
//!     --source a/binlog.000001,a/binlog.000002 --source b/binlog.000001
//! ```
//!
//! Each `FILE` is one source; `--source` gives a source as its files in order, comma-separated.
//! Files are MariaDB or MySQL binlog files (all of one) as a server writes them, with CRC32
//! checksums; the global binlog is written in their dialect. `DIR` must be
//! empty or missing. Every file is read into memory before the clock starts (the disk is not
//! measured; `mariadb-binlog` reads from the page cache anyway). Prints one line of
//! `key=value`: counts, wall and CPU seconds of the pipeline, events/s and MB/s per CPU-second
//! (MB of source binlog read), and the same per stage (`read_verify`, `assemble`, `merge`,
//! `write`; summed `Instant` spans, the process being single-threaded).
//!
//! The order of feeding: the next batch of events comes from the source the merge waits on
//! (the smallest last key), as if the sources' transactions arrived in real time. Source
//! binlogs written without manifold in front carry no ordering stamps; such a transaction's
//! commit second (in nanoseconds, the stamps' unit) stands in for its stamp, else the merge
//! would hold every other source back until the end and measure a memory blow-up instead.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use manifold_binlog::event::{self, Header, CHECKSUM_LEN, HEADER_LEN, MAGIC};
use manifold_binlog::merge::Merger;
use manifold_binlog::spill::Budget;
use manifold_binlog::store::{StoreOptions, Writer};
use manifold_binlog::txn::{Assembler, SourceTxn};

/// The global binlog's default file size limit (`binlog.max_file_size`).
const MAX_FILE_SIZE: u64 = 512 << 20;
/// Memory for transactions the merge holds (past it they spill to `--out`).
const MEMORY_BUDGET: u64 = 1 << 30;
/// Events read and verified at a time from one source before they are assembled.
const BATCH_EVENTS: usize = 256;
/// manifold's default heartbeat table (`binlog.heartbeat_table`).
const HEARTBEAT_TABLE: (&str, &str) = ("manifold", "binlog_heartbeat");
/// The unit of `/proc/self/stat` times: `USER_HZ`, 100 on every Linux architecture's ABI.
const TICKS_PER_SECOND: f64 = 100.0;
const NANOS_PER_SECOND: u64 = 1_000_000_000;

const USAGE: &str = "usage: replay --out DIR (FILE | --source FILE[,FILE...])...";

fn main() -> ExitCode {
    match run(std::env::args().skip(1)) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("replay: {e}");
            ExitCode::FAILURE
        }
    }
}

struct Args {
    out: PathBuf,
    /// Per source, its files in order.
    sources: Vec<Vec<PathBuf>>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = None;
    let mut sources = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = Some(PathBuf::from(args.next().ok_or(USAGE)?)),
            "--source" => {
                let group = args.next().ok_or(USAGE)?;
                sources.push(group.split(',').map(PathBuf::from).collect());
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            flag if flag.starts_with("--") => return Err(format!("unknown flag {flag}; {USAGE}")),
            file => sources.push(vec![PathBuf::from(file)]),
        }
    }
    let out = out.ok_or(USAGE)?;
    if sources.is_empty() {
        return Err(USAGE.to_string());
    }
    Ok(Args { out, sources })
}

/// One source's files in memory and where reading is.
/// The sources' dialect, read off the first file's format description (MariaDB's names
/// itself in its server version); a mix is refused as manifold refuses it.
fn dialect_of(sources: &[SourceFiles]) -> Result<manifold_binlog::gtid::Dialect, String> {
    use manifold_binlog::gtid::Dialect;
    let mut dialect = None;
    for source in sources {
        let Some((path, bytes)) = source.files.first() else {
            continue;
        };
        let fde = bytes.get(MAGIC.len()..).unwrap_or_default();
        let this = if event::mysql::is_mysql_format_description(fde) {
            Dialect::MySql
        } else {
            Dialect::MariaDb
        };
        if dialect.is_some_and(|d| d != this) {
            return Err(format!(
                "{}: a mix of MariaDB and MySQL sources",
                path.display()
            ));
        }
        dialect = Some(this);
    }
    Ok(dialect.unwrap_or(Dialect::MariaDb))
}

struct SourceFiles {
    files: Vec<(PathBuf, Vec<u8>)>,
    file: usize,
    at: usize,
}

impl SourceFiles {
    fn load(paths: &[PathBuf]) -> Result<SourceFiles, String> {
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            if !bytes.starts_with(&MAGIC) {
                return Err(format!("{}: not a binlog file (no magic)", path.display()));
            }
            files.push((path.clone(), bytes));
        }
        Ok(SourceFiles {
            files,
            file: 0,
            at: MAGIC.len(),
        })
    }

    fn bytes(&self) -> u64 {
        self.files.iter().map(|(_, b)| b.len() as u64).sum()
    }

    /// Splits and verifies up to `max` events of the current file into `batch` (their byte
    /// ranges); returns that file's index, or `None` once every file is read.
    fn next_batch(
        &mut self,
        max: usize,
        batch: &mut Vec<(usize, usize)>,
    ) -> Result<Option<usize>, String> {
        batch.clear();
        while self
            .files
            .get(self.file)
            .is_some_and(|(_, bytes)| self.at >= bytes.len())
        {
            self.file += 1;
            self.at = MAGIC.len();
        }
        let Some((path, bytes)) = self.files.get(self.file) else {
            return Ok(None);
        };
        while batch.len() < max && self.at < bytes.len() {
            let rest = &bytes[self.at..];
            let header = Header::parse(rest).map_err(|e| at_offset(path, self.at, &e))?;
            let size = header.event_size as usize;
            if size < HEADER_LEN + CHECKSUM_LEN || size > rest.len() {
                return Err(at_offset(
                    path,
                    self.at,
                    &format!("event size {size} past the file's end or below a header"),
                ));
            }
            event::verify_checksum(&rest[..size]).map_err(|e| at_offset(path, self.at, &e))?;
            batch.push((self.at, self.at + size));
            self.at += size;
        }
        Ok(Some(self.file))
    }
}

fn at_offset(path: &Path, at: usize, what: &dyn std::fmt::Display) -> String {
    format!("{} at {at}: {what}", path.display())
}

/// Counts and time per stage.
#[derive(Default)]
struct Stats {
    events: u64,
    transactions: u64,
    heartbeats: u64,
    events_written: u64,
    bytes_written: u64,
    files_written: u64,
    read_verify: Duration,
    assemble: Duration,
    merge: Duration,
    write: Duration,
}

/// The merge and the writer, as manifold's binlog service drives them.
struct MergeAndWrite {
    merger: Merger<SourceTxn>,
    writer: Writer,
    stats: Stats,
}

impl MergeAndWrite {
    /// Takes a source's next transaction and writes what the merge releases.
    fn take(&mut self, source: usize, txn: SourceTxn) -> Result<(), String> {
        let started = Instant::now();
        let stamp = txn
            .stamp
            .unwrap_or(u64::from(txn.timestamp) * NANOS_PER_SECOND);
        if txn.heartbeat {
            self.stats.heartbeats += 1;
            self.merger.advance(source, stamp);
        } else {
            self.merger.push(source, Some(stamp), txn);
        }
        let writing = self.write_released()?;
        self.stats.merge += started.elapsed().saturating_sub(writing);
        self.stats.write += writing;
        Ok(())
    }

    /// Writes every transaction the merge releases now; returns the time writing took.
    fn write_released(&mut self) -> Result<Duration, String> {
        let mut writing = Duration::ZERO;
        while let Some((key, _, txn)) = self.merger.pop() {
            let started = Instant::now();
            let appended = self.writer.append(&txn, key).map_err(|e| {
                format!(
                    "writing transaction {} of source {}: {e}",
                    txn.gtid, txn.source
                )
            })?;
            drop(txn);
            writing += started.elapsed();
            self.stats.transactions += 1;
            self.stats.events_written += appended.events;
            self.stats.bytes_written += appended.bytes;
            self.stats.files_written += u64::from(appended.rotated);
        }
        Ok(writing)
    }

    /// Every source is done: the merge releases all it holds.
    fn finish(&mut self, sources: usize) -> Result<(), String> {
        let started = Instant::now();
        for source in 0..sources {
            self.merger.advance(source, u64::MAX);
        }
        let writing = self.write_released()?;
        let flushing = Instant::now();
        self.writer.flush().map_err(|e| e.to_string())?;
        let writing = writing + flushing.elapsed();
        self.stats.merge += started.elapsed().saturating_sub(writing);
        self.stats.write += writing;
        if !self.merger.is_empty() {
            return Err(format!(
                "{} transactions still held by the merge at the end",
                self.merger.len()
            ));
        }
        Ok(())
    }
}

/// CPU seconds of this (single-threaded) process so far: the scheduler's nanoseconds on CPU
/// (`/proc/self/schedstat`), else user and system ticks (`/proc/self/stat`), whose 10 ms
/// granularity is coarse for a run of a fraction of a second.
fn cpu_seconds() -> Result<f64, String> {
    let on_cpu_nanos = std::fs::read_to_string("/proc/self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
    if let Some(nanos) = on_cpu_nanos {
        #[allow(clippy::cast_precision_loss)] // exact below 2^52 ns (52 days)
        return Ok(nanos as f64 / 1e9);
    }
    let stat =
        std::fs::read_to_string("/proc/self/stat").map_err(|e| format!("/proc/self/stat: {e}"))?;
    // Fields after the command name (which may hold spaces, hence the last ')'): state is
    // field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| -> Result<u64, String> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| "/proc/self/stat: no utime/stime".to_string())
    };
    let total = ticks(11)? + ticks(12)?;
    #[allow(clippy::cast_precision_loss)] // ticks stay far below 2^52
    Ok(total as f64 / TICKS_PER_SECOND)
}

fn run(args: impl Iterator<Item = String>) -> Result<String, String> {
    let args = parse_args(args)?;
    let load_started = Instant::now();
    let mut sources = args
        .sources
        .iter()
        .map(|paths| SourceFiles::load(paths))
        .collect::<Result<Vec<_>, _>>()?;
    let load_seconds = load_started.elapsed().as_secs_f64();
    let bytes: u64 = sources.iter().map(SourceFiles::bytes).sum();
    let files: usize = sources.iter().map(|s| s.files.len()).sum();

    if std::fs::read_dir(&args.out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!("{} is not empty", args.out.display()));
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let budget = Budget::new(MEMORY_BUDGET, args.out.clone());
    let opts = StoreOptions {
        dir: args.out.clone(),
        base_name: "manifold-bin".to_string(),
        max_file_size: MAX_FILE_SIZE,
        server_id: 4_000_000_001,
        domain_id: 0,
        dialect: dialect_of(&sources)?,
        server_uuid: "6d616e69-666f-6c64-8000-0000ee6b2801"
            .parse()
            .map_err(|e: String| e)?,
        clusters: (0..sources.len()).map(|i| format!("source{i}")).collect(),
    };
    let (writer, _) = Writer::open(opts).map_err(|e| e.to_string())?;
    let mut assemblers: Vec<Assembler> = (0..sources.len())
        .map(|s| Assembler::new(s, HEARTBEAT_TABLE, &budget))
        .collect();
    let mut pipeline = MergeAndWrite {
        merger: Merger::new(vec![0; sources.len()]),
        writer,
        stats: Stats {
            files_written: 1,
            ..Stats::default()
        },
    };

    let cpu_started = cpu_seconds()?;
    let started = Instant::now();
    let mut exhausted = vec![false; sources.len()];
    let mut batch = Vec::with_capacity(BATCH_EVENTS);
    loop {
        // The source the merge waits on: the smallest last key among those with events left.
        let next = (0..sources.len())
            .filter(|&s| !exhausted[s])
            .min_by_key(|&s| (pipeline.merger.last_keys().get(s).copied(), s));
        let Some(s) = next else { break };
        let reading = Instant::now();
        let file = sources[s].next_batch(BATCH_EVENTS, &mut batch)?;
        let assembling = Instant::now();
        pipeline.stats.read_verify += assembling.duration_since(reading);
        let Some(file) = file else {
            exhausted[s] = true;
            if assemblers[s].in_transaction() {
                eprintln!("replay: source {s} ends inside a transaction; it is left out");
            }
            continue;
        };
        let (path, bytes) = &sources[s].files[file];
        let (merge_before, write_before) = (pipeline.stats.merge, pipeline.stats.write);
        for &(start, end) in &batch {
            let txn = assemblers[s]
                .push(&bytes[start..end])
                .map_err(|e| at_offset(path, start, &e))?;
            if let Some(txn) = txn {
                pipeline.take(s, txn)?;
            }
        }
        let inner = pipeline.stats.merge.saturating_sub(merge_before)
            + pipeline.stats.write.saturating_sub(write_before);
        pipeline.stats.assemble += assembling.elapsed().saturating_sub(inner);
        pipeline.stats.events += batch.len() as u64;
    }
    pipeline.finish(sources.len())?;
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds()? - cpu_started;
    Ok(report(
        &pipeline.stats,
        sources.len(),
        files,
        bytes,
        load_seconds,
        wall,
        cpu,
        budget.spilled(),
    ))
}

#[allow(clippy::too_many_arguments, clippy::cast_precision_loss)] // one report line; counts stay far below 2^52
fn report(
    stats: &Stats,
    sources: usize,
    files: usize,
    bytes: u64,
    load_seconds: f64,
    wall: f64,
    cpu: f64,
    spilled: u64,
) -> String {
    let events = stats.events as f64;
    let mb = bytes as f64 / 1e6;
    let rate = |amount: f64, seconds: f64| {
        if seconds > 0.0 {
            amount / seconds
        } else {
            0.0
        }
    };
    let mut line = format!(
        "sources={sources} files={files} events={} bytes={bytes} transactions={} heartbeats={} \
         events_written={} bytes_written={} files_written={} spilled_bytes={spilled} \
         load_s={load_seconds:.3} wall_s={wall:.3} cpu_s={cpu:.2} \
         events_per_cpu_s={:.0} mb_per_cpu_s={:.1} events_per_wall_s={:.0}",
        stats.events,
        stats.transactions,
        stats.heartbeats,
        stats.events_written,
        stats.bytes_written,
        stats.files_written,
        rate(events, cpu),
        rate(mb, cpu),
        rate(events, wall),
    );
    for (name, took) in [
        ("read_verify", stats.read_verify),
        ("assemble", stats.assemble),
        ("merge", stats.merge),
        ("write", stats.write),
    ] {
        let s = took.as_secs_f64();
        let _ = write!(
            line,
            " {name}_s={s:.3} {name}_events_per_s={:.0} {name}_mb_per_s={:.1}",
            rate(events, s),
            rate(mb, s)
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifold_binlog::event::{gtid_flags, types};
    use manifold_binlog::gtid::Gtid;
    use manifold_binlog::origin::Origin;
    use manifold_binlog::stamp;

    fn raw(type_code: u8, server_id: u32, body: &[u8]) -> Vec<u8> {
        let mut e = vec![0u8; HEADER_LEN + body.len() + CHECKSUM_LEN];
        Header {
            timestamp: 1_700_000_000,
            type_code,
            server_id,
            ..Header::default()
        }
        .write(&mut e);
        e[HEADER_LEN..HEADER_LEN + body.len()].copy_from_slice(body);
        event::finish(&mut e, None, 0);
        e
    }

    /// A stamped one-statement transaction; `heartbeat` writes manifold's heartbeat table.
    fn txn(server: u32, seq: u64, hlc: u64, heartbeat: bool) -> Vec<u8> {
        let gtid = Gtid {
            domain: 0,
            server,
            seq,
        };
        let mut text = Vec::new();
        stamp::write(&mut text, hlc);
        text.extend_from_slice(b"INSERT INTO t VALUES (1)");
        let (schema, table) = if heartbeat {
            HEARTBEAT_TABLE
        } else {
            ("db", "t")
        };
        let mut map = 70u64.to_le_bytes()[..6].to_vec();
        map.extend_from_slice(&[1, 0]);
        for name in [schema, table] {
            map.push(u8::try_from(name.len()).unwrap());
            map.extend_from_slice(name.as_bytes());
            map.push(0);
        }
        map.extend_from_slice(&[1, 3, 0, 0]);
        let mut rows = 70u64.to_le_bytes()[..6].to_vec();
        rows.extend_from_slice(&[1, 0, 1, 0xff, 0, 7, 0, 0, 0]);
        [
            event::mariadb_gtid(1, gtid, gtid_flags::TRANSACTIONAL),
            event::annotate(1, server, &text),
            raw(types::TABLE_MAP, server, &map),
            raw(types::WRITE_ROWS_V1, server, &rows),
            event::xid(1, server, seq),
        ]
        .concat()
    }

    fn binlog_file(dir: &Path, name: &str, server: u32, txns: &[Vec<u8>]) -> String {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&event::format_description(0, server, false));
        for t in txns {
            bytes.extend_from_slice(t);
        }
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    }

    /// `(cluster, source seq, key)` of every transaction in a written global binlog file.
    fn origins(path: &Path) -> Vec<(String, u64, u64)> {
        let bytes = std::fs::read(path).unwrap();
        let mut at = MAGIC.len();
        let mut out = Vec::new();
        while at < bytes.len() {
            let size = Header::parse(&bytes[at..]).unwrap().event_size as usize;
            let e = &bytes[at..at + size];
            event::verify_checksum(e).unwrap();
            if e[4] == types::ANNOTATE_ROWS {
                if let Some(o) = Origin::parse(event::annotate_text(e)) {
                    out.push((o.cluster, o.gtid.seq(), o.key));
                }
            }
            at += size;
        }
        out
    }

    fn args(v: &[&str]) -> impl Iterator<Item = String> {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn sources_are_merged_by_stamp_and_heartbeats_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let a1 = binlog_file(dir.path(), "a.000001", 1, &[txn(1, 1, 10, false)]);
        let a2 = binlog_file(dir.path(), "a.000002", 1, &[txn(1, 2, 30, false)]);
        let b = binlog_file(
            dir.path(),
            "b.000001",
            2,
            &[
                txn(2, 1, 20, false),
                txn(2, 2, 35, true),
                txn(2, 3, 40, false),
            ],
        );
        let out = dir.path().join("out");
        let source_a = format!("{a1},{a2}");
        let line = run(args(&[
            "--out",
            out.to_str().unwrap(),
            "--source",
            &source_a,
            &b,
        ]))
        .unwrap();
        for expected in [
            "sources=2 ",
            "files=3 ",
            "events=28 ",
            "transactions=4 ",
            "heartbeats=1 ",
        ] {
            assert!(line.contains(expected), "{expected} not in {line}");
        }
        assert_eq!(
            origins(&out.join("manifold-bin.000001")),
            [
                ("source0".to_string(), 1, 10),
                ("source1".to_string(), 1, 20),
                ("source0".to_string(), 2, 30),
                ("source1".to_string(), 3, 40),
            ]
        );
    }

    #[test]
    fn a_damaged_event_is_an_error_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = binlog_file(dir.path(), "a.000001", 1, &[txn(1, 1, 10, false)]);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 10;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let out = dir.path().join("out");
        let err = run(args(&["--out", out.to_str().unwrap(), &path])).unwrap_err();
        assert!(
            err.contains("a.000001 at ") && err.contains("CRC32"),
            "{err}"
        );

        std::fs::write(&path, &bytes[..last]).unwrap();
        let out2 = dir.path().join("out2");
        let err = run(args(&["--out", out2.to_str().unwrap(), &path])).unwrap_err();
        assert!(err.contains("past the file's end"), "{err}");
    }
}
