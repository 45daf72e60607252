//! `COM_BINLOG_DUMP` from the global binlog, as MariaDB's dump thread does it: a fake rotate
//! naming the file, its format description, then its events up to the published end, waiting
//! for more (with heartbeats) or ending with EOF for a non-blocking dump; at a file's end the
//! next file. GTID mode (`@slave_connect_state`) starts at the file the store locates and
//! skips the transactions the replica already has.
//!
//! [`Dump`] is the synchronous part (files, positions, skipping, capabilities) and reads in
//! bounded steps; [`run`] drives it on a socket, yielding between steps.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use manifold_binlog::event::{self, types, CHECKSUM_ALG_OFF, HEADER_LEN};
use manifold_binlog::gtid::{Dialect, Gtid, GtidPos, GtidSet, GtidState, TxnGtid};
use manifold_binlog::store::{self, FileInfo, Reader};
use manifold_mysql_proto::packets::{EofPacket, ErrPacket};
use manifold_mysql_proto::{codes, ErrorCode};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::answer::err;
use crate::mysql;
use crate::packets::{self, dump_flags, Adapted};
use crate::BinlogSession;
use manifold_cdc::state::{BinlogShared, ConsumerStatus};

/// `ER_MASTER_FATAL_ERROR_READING_BINLOG`: a replica does not retry it.
const FATAL: ErrorCode = codes::MASTER_FATAL_READING_BINLOG;
/// `ER_UNKNOWN_ERROR`.
const UNKNOWN: ErrorCode = codes::UNKNOWN_ERROR;
/// Bytes queued per step before the socket gets them and other sessions get the thread.
const STEP_BYTES: usize = 256 << 10;

/// `COM_BINLOG_DUMP`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpRequest {
    pub pos: u32,
    pub flags: u16,
    pub server_id: u32,
    pub file: String,
}

impl DumpRequest {
    /// From the command's payload (command byte first).
    pub fn parse(payload: &[u8]) -> Option<DumpRequest> {
        let b = payload.get(1..)?;
        if b.len() < 10 {
            return None;
        }
        Some(DumpRequest {
            pos: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            flags: u16::from_le_bytes([b[4], b[5]]),
            server_id: u32::from_le_bytes([b[6], b[7], b[8], b[9]]),
            file: String::from_utf8_lossy(&b[10..])
                .trim_end_matches('\0')
                .to_owned(),
        })
    }
}

/// What is skipped of the current transaction (GTID mode, before the replica's position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    Not,
    /// A DDL: up to its first event that is not part of a group.
    Standalone,
    /// Up to its XID or `COMMIT`/`ROLLBACK`.
    Transaction,
}

/// The result of one [`Dump::fill`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Events were queued; call again after writing them.
    More,
    /// At the published end: wait for it to move (heartbeats meanwhile).
    Wait,
    /// A non-blocking dump reached the end: EOF ends the command.
    Done,
}

/// Checks the replica's GTID position against the global binlog's as MariaDB does: in
/// manifold's domain, the replica must not be ahead of the binlog or on another history.
pub fn check_start(
    client: &GtidPos,
    binlog: &GtidPos,
    domain: u32,
    ignore_duplicates: bool,
) -> Result<(), ErrPacket> {
    for g in client.iter().filter(|g| g.domain == domain) {
        let Some(m) = binlog.get(domain) else {
            // Nothing written in the domain yet: the replica gets whatever comes.
            continue;
        };
        if m.server == g.server && m.seq >= g.seq {
            continue;
        }
        if ignore_duplicates && m.seq < g.seq {
            continue;
        }
        let message = if m.seq >= g.seq {
            format!("Error: connecting slave requested to start from GTID {g}, which is not in the master's binlog. Since the master's binlog contains GTIDs with higher sequence numbers, it probably means that the slave has diverged due to executing extra erroneous transactions")
        } else {
            format!("Error: connecting slave requested to start from GTID {g}, which is not in the master's binlog")
        };
        return Err(err(FATAL, message));
    }
    Ok(())
}

/// Events that belong with the event after them in a standalone group.
fn part_of_group(t: u8) -> bool {
    matches!(
        t,
        types::INTVAR | types::RAND | types::USER_VAR | types::TABLE_MAP | types::ANNOTATE_ROWS
    )
}

/// The last event of a transaction's group: XID, `COMMIT`/`ROLLBACK`, an XA transaction's
/// prepare (MariaDB logs it as `XA_PREPARE_LOG_EVENT`, and its commit later as a group of its
/// own), or that later `XA COMMIT`/`XA ROLLBACK`.
fn ends_transaction(e: &[u8]) -> bool {
    // The rule the assembler and recovery use (a skipped standalone group ends otherwise).
    event::ends_group(e, false)
}

/// The number of a file named `{base}.NNNNNN`.
fn file_number(name: &str) -> Option<u64> {
    let (_, digits) = name.rsplit_once('.')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The file after `current`: the first listed with a higher number. By number, not by
/// `current`'s place in the list: a purge may have removed `current` from the list while a
/// dump still reads it.
fn next_file(files: &[FileInfo], current: &str) -> Option<String> {
    let number = file_number(current)?;
    files
        .iter()
        .find(|f| file_number(&f.name).is_some_and(|n| n > number))
        .map(|f| f.name.clone())
}

/// The file and position a dump by position starts at: `file` (empty: the first file) at
/// `pos`, checked as MariaDB and MySQL check them.
fn start_position(shared: &BinlogShared, file: &str, pos: u64) -> Result<(String, u64), ErrPacket> {
    let files = shared.files();
    let end = shared.end();
    let info = if file.is_empty() {
        files.first()
    } else {
        files.iter().find(|f| f.name == file)
    };
    let Some(info) = info else {
        return Err(err(
            FATAL,
            "Could not find first log file name in binary log index file",
        ));
    };
    let size = if info.name == end.file {
        end.pos
    } else {
        info.size
    };
    if pos < 4 || pos > size {
        let f = &info.name;
        return Err(err(FATAL, format!("Client requested master to start replication from impossible position; the first event '{f}' at {pos}, the last event read from '{f}' at 4, the last byte read from '{f}' at 4.")));
    }
    Ok((info.name.clone(), pos))
}

/// One dump in progress.
#[derive(Debug)]
pub struct Dump {
    shared: Arc<BinlogShared>,
    dir: PathBuf,
    flags: u16,
    capability: i64,
    /// Stop at the end instead of waiting (the flag, or server id 0 as MariaDB).
    non_block: bool,
    aware: bool,
    start_file: String,
    start_pos: u64,
    file: String,
    reader: Option<Reader>,
    /// The next step opens `file` at this position (fake rotate, format description).
    open_at: Option<u64>,
    /// The format description goes with `log_pos` 0 (the first file, started past 4).
    clear_initial_log_pos: bool,
    /// Start of the last event read, for error texts.
    last_pos: u64,
    /// The checksum algorithm in force for the events made up: the replica's declared one
    /// until the first format description, CRC32 (the files') after.
    crc: bool,
    /// GTID mode: the replica's GTID in manifold's domain not reached yet.
    skip_until: Option<Gtid>,
    strict: bool,
    skipping: Skip,
    send_fake_list: bool,
    /// The global binlog's position at the reader (the file's GTID list and GTIDs since).
    state: GtidState,
    /// The files are in MySQL's dialect: no MariaDB capability downgrades, MySQL's skipping
    /// and heartbeats.
    mysql: bool,
    /// MySQL GTID dump: the replica's transactions, never sent to it.
    exclude: Option<GtidSet>,
    /// Inside a transaction of `exclude` (from its GTID event to the next GTID event).
    in_exclude: bool,
    /// Where the last skipped group ended, not yet told to the replica: a heartbeat says it
    /// before the next event sent (MySQL's `exclude_group_end_pos`).
    exclude_end: Option<u64>,
    /// When the last event went to the replica (a long skip sends heartbeats meanwhile).
    last_sent: Instant,
    buf: Vec<u8>,
    consumer: ConsumerStatus,
    /// Source time (header timestamp) of the last transaction sent.
    last_txn_time: u32,
    heartbeat_ns: u64,
}

impl Dump {
    /// Checks the request and finds where to start. `consumer`: id, user, addr (the rest is
    /// filled as the dump goes).
    pub fn start(
        shared: Arc<BinlogShared>,
        request: &DumpRequest,
        session: &BinlogSession,
        consumer: ConsumerStatus,
    ) -> Result<Dump, ErrPacket> {
        let cfg = &shared.config;
        let end = shared.end();
        let mut skip_until = None;
        if shared.dialect() == Dialect::MySql && session.connect_state().is_some() {
            return Err(err(FATAL, "manifold's global binlog is in MySQL's dialect (its sources are MySQL servers): MariaDB's GTID positioning (@slave_connect_state) is not served; connect with MySQL's GTID auto-positioning (COM_BINLOG_DUMP_GTID, SOURCE_AUTO_POSITION=1) or by file and position"));
        }
        let (file, pos) = if let Some(state) = session.connect_state() {
            let client: GtidPos = state.parse().map_err(|_| {
                err(
                    UNKNOWN,
                    "Out of memory or malformed slave request when obtaining start position from GTID state",
                )
            })?;
            let binlog = end.gtid.as_mariadb().cloned().unwrap_or_default();
            check_start(
                &client,
                &binlog,
                cfg.domain_id,
                session.gtid_ignore_duplicates(),
            )?;
            let found = store::locate_gtid(&cfg.dir, &cfg.base_name, &client.clone().into())
                .map_err(|e| err(FATAL, e.to_string()))?;
            let Some((position, list)) = found else {
                return Err(err(FATAL, "Could not find GTID state requested by slave in any binlog files. Probably the slave state is too old and required binlog files have been purged."));
            };
            // Exactly the file's starting point: nothing of it to skip.
            skip_until = client
                .get(cfg.domain_id)
                .filter(|g| list.as_mariadb().and_then(|l| l.get(cfg.domain_id)) != Some(*g));
            (position.file, 4)
        } else {
            start_position(&shared, &request.file, u64::from(request.pos))?
        };
        let mut dump = Dump::at(
            shared,
            (file, pos),
            (request.flags, request.server_id),
            session,
            consumer,
        );
        dump.skip_until = skip_until;
        Ok(dump)
    }

    /// A dump of `file` from `pos`, for `(flags, server id)` of the request.
    fn at(
        shared: Arc<BinlogShared>,
        (file, pos): (String, u64),
        (flags, server_id): (u16, u32),
        session: &BinlogSession,
        mut consumer: ConsumerStatus,
    ) -> Dump {
        consumer.server_id = session.registered_server_id.unwrap_or(server_id);
        consumer.file.clone_from(&file);
        consumer.pos = pos;
        Dump {
            dir: shared.config.dir.clone(),
            flags,
            capability: session.capability(),
            non_block: flags & dump_flags::NON_BLOCK != 0 || server_id == 0,
            aware: session.checksum_aware(),
            start_file: file.clone(),
            start_pos: pos,
            file,
            reader: None,
            open_at: Some(pos),
            clear_initial_log_pos: pos > 4,
            last_pos: pos,
            crc: session.declared_crc32(),
            skip_until: None,
            strict: session.gtid_strict_mode(),
            skipping: Skip::Not,
            send_fake_list: false,
            state: GtidState::empty(shared.dialect()),
            mysql: shared.dialect() == Dialect::MySql,
            exclude: None,
            in_exclude: false,
            exclude_end: None,
            last_sent: Instant::now(),
            buf: Vec::with_capacity(16 << 10),
            consumer,
            last_txn_time: 0,
            heartbeat_ns: session.heartbeat_period_ns(),
            shared,
        }
    }

    /// `@master_heartbeat_period`, when the replica asked for heartbeats.
    pub fn heartbeat_period(&self) -> Option<Duration> {
        (self.heartbeat_ns > 0).then(|| Duration::from_nanos(self.heartbeat_ns))
    }

    fn pos(&self) -> u64 {
        self.reader.as_ref().map_or(self.last_pos, Reader::pos)
    }

    /// ERR 1236 with MariaDB's coordinates after the reason.
    fn fatal(&self, why: &str) -> ErrPacket {
        err(
            FATAL,
            format!(
                "{why}; the first event '{}' at {}, the last event read from '{}' at {}, the last byte read from '{}' at {}.",
                self.start_file, self.start_pos, self.file, self.last_pos, self.file, self.pos()
            ),
        )
    }

    /// Queues events on `out` (sequence ids from `seq`) up to a bounded amount.
    pub fn fill(&mut self, out: &mut Vec<u8>, seq: &mut u8) -> Result<Step, ErrPacket> {
        let budget = out.len() + STEP_BYTES;
        // Skipped events count too: a long skip yields like a long send.
        let mut scanned = 0usize;
        loop {
            if let Some(pos) = self.open_at {
                if !self.open(pos, out, seq)? {
                    return Ok(if self.non_block {
                        Step::Done
                    } else {
                        Step::Wait
                    });
                }
                self.open_at = None;
            }
            if out.len() >= budget || scanned >= 4 * STEP_BYTES {
                return Ok(Step::More);
            }
            let end = self.shared.end();
            let limit = if end.file == self.file {
                end.pos
            } else {
                u64::MAX
            };
            let Some(reader) = self.reader.as_mut() else {
                return Err(self.fatal("I/O error reading log event"));
            };
            let at = reader.pos();
            self.buf.clear();
            match reader.next_event(&mut self.buf, limit) {
                Err(e) => {
                    tracing::warn!(file = %self.file, error = %e, "global binlog dump: read failed");
                    return Err(self.fatal("bogus data in log event"));
                }
                Ok(true) => {
                    self.last_pos = at;
                    scanned += self.buf.len();
                    self.event(out, seq)?;
                }
                Ok(false) if end.file == self.file => {
                    self.tell_skipped(out, seq);
                    self.publish();
                    return Ok(if self.non_block {
                        Step::Done
                    } else {
                        Step::Wait
                    });
                }
                Ok(false) => {
                    self.tell_skipped(out, seq);
                    // This file is complete: the next one in the index.
                    let Some(next) = next_file(&self.shared.files(), &self.file) else {
                        return Err(self.fatal("could not find next log"));
                    };
                    self.file = next;
                    self.reader = None;
                    self.open_at = Some(4);
                }
            }
        }
    }

    /// Opens the current file: fake rotate, format description, then positions the reader
    /// at `pos`. False when the file has no format description readable yet.
    fn open(&mut self, pos: u64, out: &mut Vec<u8>, seq: &mut u8) -> Result<bool, ErrPacket> {
        let server_id = self.shared.config.server_id;
        let end = self.shared.end();
        let limit = if end.file == self.file {
            end.pos
        } else {
            u64::MAX
        };
        let mut reader = Reader::open(&self.dir, &self.file, 4).map_err(|e| {
            tracing::warn!(file = %self.file, error = %e, "global binlog dump: open failed");
            err(FATAL, format!("Could not open log file: {e}"))
        })?;
        self.buf.clear();
        self.last_pos = 4;
        match reader.next_event(&mut self.buf, limit) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(_) => return Err(self.fatal("bogus data in log event")),
        }
        let rotate = packets::fake_rotate(server_id, &self.file, pos, self.crc);
        *seq = packets::queue_event(out, *seq, &rotate);
        let fde = &mut self.buf;
        if fde.get(4) != Some(&types::FORMAT_DESCRIPTION) || fde.len() < HEADER_LEN + 57 + 5 {
            self.reader = Some(reader);
            return Err(self.fatal("Failed to find format descriptor event in start of binlog"));
        }
        // The algorithm byte precedes the CRC32 (manifold's files always have one).
        let alg = fde[fde.len() - 5];
        if alg != CHECKSUM_ALG_OFF && !self.aware {
            self.reader = Some(reader);
            return Err(self.fatal(
                "Slave can not handle replication events with the checksum that master is configured to log",
            ));
        }
        self.crc = alg != CHECKSUM_ALG_OFF;
        fde[17] &= !(event::flags::BINLOG_IN_USE as u8);
        // A file started empty has a format description of time 0 (its bytes depend on its
        // input only). A server's always has its file's creation time, and readers take
        // their clock from it: Debezium reads the event time of a first transaction from
        // the events before it and fails on a 0 (NullPointerException). The time it is sent.
        if fde[..4] == [0; 4] {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX));
            fde[..4].copy_from_slice(&now.to_le_bytes());
        }
        let created = HEADER_LEN + 2 + 50;
        if self.clear_initial_log_pos {
            self.clear_initial_log_pos = false;
            // log_pos 0: the replica does not advance its position past the requested one;
            // created 0: its temporary tables survive the reconnect.
            fde[13..17].fill(0);
            fde[created..created + 4].fill(0);
        } else if self.skip_until.is_some() {
            fde[created..created + 4].fill(0);
        }
        if self.crc {
            let n = fde.len() - event::CHECKSUM_LEN;
            let crc = event::crc32(&fde[..n]);
            fde[n..].copy_from_slice(&crc.to_le_bytes());
        }
        *seq = packets::queue_event(out, *seq, fde);
        self.reader = Some(if pos > 4 {
            Reader::open(&self.dir, &self.file, pos)
                .map_err(|e| err(FATAL, format!("Could not open log file: {e}")))?
        } else {
            reader
        });
        Ok(true)
    }

    /// Sends (or skips, or adapts) the event in `self.buf`.
    fn event(&mut self, out: &mut Vec<u8>, seq: &mut u8) -> Result<(), ErrPacket> {
        if self.mysql {
            return self.mysql_event(out, seq);
        }
        let t = self.buf.get(4).copied().unwrap_or(0);
        match t {
            types::GTID_LIST => {
                if let Ok(list) = event::parse_mariadb_gtid_list(&self.buf) {
                    for g in list.iter() {
                        self.state.update(&TxnGtid::MariaDb(g));
                    }
                }
            }
            types::GTID => {
                let (g, flags2) = event::parse_mariadb_gtid(&self.buf)
                    .map_err(|_| self.fatal("Failed to read Gtid_log_event: corrupt binlog"))?;
                self.state.update(&TxnGtid::MariaDb(g));
                self.last_txn_time = event::Header::parse(&self.buf).map_or(0, |h| h.timestamp);
                if let Some(until) = self.skip_until.filter(|u| u.domain == g.domain) {
                    let applied = g.server != until.server || g.seq <= until.seq;
                    if g.server == until.server && g.seq >= until.seq {
                        if self.strict && g.seq > until.seq {
                            return Err(err(FATAL, format!("The binlog on the master is missing the GTID {until} requested by the slave (even though both a prior and a subsequent sequence number does exist), and GTID strict mode is enabled")));
                        }
                        self.send_fake_list = true;
                        self.skip_until = None;
                    }
                    if applied {
                        // The GTID itself is the group's first skipped event: the skip's end
                        // test below is for the events after it (a DDL's GTID is not part of
                        // a group, so testing it would end the skip at once).
                        self.skipping = if flags2 & event::gtid_flags::STANDALONE != 0 {
                            Skip::Standalone
                        } else {
                            Skip::Transaction
                        };
                        return Ok(());
                    }
                }
            }
            _ => {}
        }
        let skipped = match self.skipping {
            Skip::Not => false,
            Skip::Standalone => {
                if !part_of_group(t) {
                    self.skipping = Skip::Not;
                }
                true
            }
            Skip::Transaction => {
                if ends_transaction(&self.buf) {
                    self.skipping = Skip::Not;
                }
                true
            }
        };
        if !skipped {
            match packets::adapt(&mut self.buf, self.capability, self.flags, self.crc) {
                Ok(Adapted::Send) => {
                    *seq = packets::queue_event(out, *seq, &self.buf);
                    self.consumer.events += 1;
                    self.consumer.bytes += self.buf.len() as u64;
                }
                Ok(Adapted::Drop) => {}
                Err(e) => return Err(self.fatal(e.0)),
            }
        }
        if self.send_fake_list && self.skipping == Skip::Not {
            self.send_fake_list = false;
            let pos = u32::try_from(self.pos()).unwrap_or(0);
            let state = self.state.as_mariadb().cloned().unwrap_or_default();
            let list = packets::fake_gtid_list(self.shared.config.server_id, &state, pos, self.crc);
            *seq = packets::queue_event(out, *seq, &list);
        }
        Ok(())
    }

    /// Queues a heartbeat naming the current file and position.
    pub fn heartbeat(&self, out: &mut Vec<u8>, seq: &mut u8) {
        self.heartbeat_at(self.pos(), out, seq);
    }

    /// Queues a heartbeat naming the current file and `pos`: MySQL's second version when
    /// the replica asked for it in its dump flags, else the first (both dialects').
    fn heartbeat_at(&self, pos: u64, out: &mut Vec<u8>, seq: &mut u8) {
        let server_id = self.shared.config.server_id;
        let hb = if self.mysql && self.flags & mysql::gtid_dump_flags::USE_HEARTBEAT_EVENT_V2 != 0 {
            packets::heartbeat_v2(server_id, &self.file, pos, self.crc)
        } else {
            packets::heartbeat(server_id, &self.file, pos, self.crc)
        };
        *seq = packets::queue_event(out, *seq, &hb);
    }

    /// Where the dump is, for `SHOW BINLOG CONSUMERS`.
    pub fn status(&self) -> ConsumerStatus {
        let mut s = self.consumer.clone();
        s.file.clone_from(&self.file);
        s.pos = self.pos();
        s.gtid = self.state.to_string();
        if self.last_txn_time > 0 {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            let sent = u128::from(self.last_txn_time) * 1000;
            s.delay_ms = u64::try_from(now.saturating_sub(sent)).unwrap_or(u64::MAX);
        }
        s
    }

    /// Records where the dump is in the shared consumer list.
    pub fn publish(&self) {
        self.shared.update_consumer(self.status());
    }

    pub fn consumer_id(&self) -> u64 {
        self.consumer.id
    }

    pub fn shared(&self) -> &Arc<BinlogShared> {
        &self.shared
    }
}

/// How a dump ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpOutcome {
    /// A non-blocking dump reached the end; EOF was sent.
    Finished,
    /// An error was sent (the command is over, the session may go on).
    Failed(String),
    ClientGone,
    /// `stop` resolved (KILL, shutdown).
    Stopped,
}

/// How a write to the consumer went.
enum Sent {
    Done,
    ClientGone,
    Stopped,
}

/// Writes `bytes` (and flushes when `flush`) unless `stop` resolves first: a consumer that
/// stopped reading must not keep the session from KILL or shutdown (nor its reader from
/// releasing purged files).
async fn send<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
    flush: bool,
    stop: &mut (impl Future<Output = ()> + Unpin),
) -> Sent {
    let write =
        async { stream.write_all(bytes).await.is_ok() && (!flush || stream.flush().await.is_ok()) };
    tokio::select! {
        biased;
        () = stop => Sent::Stopped,
        ok = write => if ok { Sent::Done } else { Sent::ClientGone },
    }
}

/// Streams `dump` to `stream` from sequence id `seq` until it ends, the client goes, or
/// `stop` resolves. `status`: the server status flags of the final EOF. The consumer is
/// recorded while it runs and removed at the end.
pub async fn run<S: AsyncWrite + Unpin>(
    stream: &mut S,
    mut seq: u8,
    dump: &mut Dump,
    stop: impl Future<Output = ()>,
    status: u16,
) -> DumpOutcome {
    let outcome = drive(stream, &mut seq, dump, stop, status).await;
    dump.shared.remove_consumer(dump.consumer_id());
    outcome
}

async fn drive<S: AsyncWrite + Unpin>(
    stream: &mut S,
    seq: &mut u8,
    dump: &mut Dump,
    stop: impl Future<Output = ()>,
    status: u16,
) -> DumpOutcome {
    tokio::pin!(stop);
    let mut end = dump.shared.watch_end();
    let mut out = Vec::with_capacity(STEP_BYTES + (64 << 10));
    dump.publish();
    loop {
        out.clear();
        end.borrow_and_update();
        let step = dump.fill(&mut out, seq);
        let flush = !matches!(step, Ok(Step::More));
        if !out.is_empty() {
            match send(stream, &out, flush, &mut stop).await {
                Sent::Done => {}
                Sent::ClientGone => return DumpOutcome::ClientGone,
                Sent::Stopped => return DumpOutcome::Stopped,
            }
        }
        match step {
            Err(e) => {
                out.clear();
                let mut payload = Vec::with_capacity(64 + e.message.len());
                e.encode(&mut payload);
                manifold_mysql_proto::write_packet(&mut out, *seq, &payload);
                return match send(stream, &out, true, &mut stop).await {
                    Sent::Stopped => DumpOutcome::Stopped,
                    Sent::Done | Sent::ClientGone => {
                        DumpOutcome::Failed(String::from_utf8_lossy(&e.message).into_owned())
                    }
                };
            }
            Ok(Step::More) => {
                dump.publish();
                tokio::task::yield_now().await;
            }
            Ok(Step::Done) => {
                out.clear();
                let mut payload = Vec::with_capacity(8);
                EofPacket {
                    warnings: 0,
                    status,
                }
                .encode(&mut payload);
                manifold_mysql_proto::write_packet(&mut out, *seq, &payload);
                return match send(stream, &out, true, &mut stop).await {
                    Sent::Done => DumpOutcome::Finished,
                    Sent::ClientGone => DumpOutcome::ClientGone,
                    Sent::Stopped => DumpOutcome::Stopped,
                };
            }
            Ok(Step::Wait) => loop {
                let period = dump.heartbeat_period();
                let beat = async {
                    match period {
                        Some(p) => tokio::time::sleep(p).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    () = &mut stop => return DumpOutcome::Stopped,
                    changed = end.changed() => {
                        if changed.is_err() {
                            return DumpOutcome::Stopped;
                        }
                        break;
                    }
                    () = beat => {
                        out.clear();
                        dump.heartbeat(&mut out, seq);
                        match send(stream, &out, true, &mut stop).await {
                            Sent::Done => {}
                            Sent::ClientGone => return DumpOutcome::ClientGone,
                            Sent::Stopped => return DumpOutcome::Stopped,
                        }
                    }
                }
            },
        }
    }
}

mod for_mysql;
#[cfg(test)]
mod mysql_tests;
#[cfg(test)]
mod tests;
