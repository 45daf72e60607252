//! The dump in MySQL's dialect, as MySQL's `Binlog_sender` does it: `COM_BINLOG_DUMP_GTID`
//! starts at the newest file whose previous GTIDs the replica has, and every transaction
//! whose GTID is in the replica's set is left out (from its GTID event to the next one); a
//! heartbeat then tells the replica where the skipped events ended, before the next event
//! sent or at the end of what there is to read.

use std::time::{Duration, Instant};

use manifold_binlog::event::{self, mysql as mysql_event, types};
use manifold_binlog::gtid::{Dialect, GtidSet, GtidState, TxnGtid};
use manifold_binlog::store;
use manifold_mysql_proto::packets::ErrPacket;

use super::{start_position, Dump, FATAL};
use crate::answer::err;
use crate::mysql::{self, DumpGtidRequest};
use crate::packets;
use crate::BinlogSession;
use manifold_cdc::state::{BinlogShared, ConsumerStatus};
use std::sync::Arc;

impl Dump {
    /// Checks a `COM_BINLOG_DUMP_GTID` request and finds where to start, as MySQL's dump
    /// thread does. Refused when the global binlog is MariaDB's.
    pub fn start_gtid(
        shared: Arc<BinlogShared>,
        request: &DumpGtidRequest,
        session: &BinlogSession,
        consumer: ConsumerStatus,
    ) -> Result<Dump, ErrPacket> {
        if shared.dialect() != Dialect::MySql {
            return Err(err(FATAL, "manifold's global binlog is in MariaDB's dialect (its sources are MariaDB servers): MySQL's COM_BINLOG_DUMP_GTID is not served; connect with MariaDB GTID positioning (SET @slave_connect_state, then COM_BINLOG_DUMP), or by file and position"));
        }
        let (file, pos, clear_log_pos) = if request.file.is_empty() {
            let (file, first_skipped) = locate(&shared, &request.gtids)?;
            (file, 4, first_skipped)
        } else {
            // A file named: no GTID checks (MySQL makes them only to find the file), the
            // set still left out.
            let (file, pos) = start_position(&shared, &request.file, request.pos)?;
            (file, pos, pos > 4)
        };
        let mut dump = Dump::at(
            shared,
            (file, pos),
            (request.flags, request.server_id),
            session,
            consumer,
        );
        dump.clear_initial_log_pos = clear_log_pos;
        dump.exclude = Some(request.gtids.clone());
        Ok(dump)
    }

    /// Sends or leaves out the MySQL event in `self.buf`.
    pub(super) fn mysql_event(&mut self, out: &mut Vec<u8>, seq: &mut u8) -> Result<(), ErrPacket> {
        match self.buf.get(4).copied().unwrap_or(0) {
            types::PREVIOUS_GTIDS => {
                if let Ok(set) = mysql_event::parse_previous_gtids(&self.buf) {
                    self.state.fill_from(&GtidState::MySql(set));
                }
            }
            types::MYSQL_GTID => {
                let g = mysql_event::parse_mysql_gtid(&self.buf)
                    .map_err(|_| self.fatal("Failed to read Gtid_log_event: corrupt binlog"))?;
                self.state.update(&TxnGtid::MySql(g.gtid));
                self.last_txn_time = event::Header::parse(&self.buf).map_or(0, |h| h.timestamp);
                if let Some(exclude) = &self.exclude {
                    self.in_exclude = exclude.contains(g.gtid);
                }
            }
            types::ROTATE => self.in_exclude = false,
            _ => {}
        }
        if self.in_exclude {
            let end = self.pos();
            let period = Duration::from_nanos(self.heartbeat_ns);
            // A long skip: the replica hears from the source every heartbeat period anyway.
            if self.heartbeat_ns > 0 && self.last_sent.elapsed() >= period {
                self.heartbeat_at(end, out, seq);
                self.exclude_end = None;
                self.last_sent = Instant::now();
            } else {
                self.exclude_end = Some(end);
            }
            return Ok(());
        }
        self.tell_skipped(out, seq);
        *seq = packets::queue_event(out, *seq, &self.buf);
        self.consumer.events += 1;
        self.consumer.bytes += self.buf.len() as u64;
        self.last_sent = Instant::now();
        Ok(())
    }

    /// Sends the heartbeat that says where the skipped events ended, if any were skipped
    /// since the last event sent.
    pub(super) fn tell_skipped(&mut self, out: &mut Vec<u8>, seq: &mut u8) {
        if let Some(end) = self.exclude_end.take() {
            self.heartbeat_at(end, out, seq);
        }
    }
}

/// Where a replica holding `client` starts: MySQL's checks, then the newest file whose
/// previous GTIDs it has; with whether that file's first transaction is one it has (the
/// format description then goes with `log_pos` and `created` 0, as MySQL sends it).
fn locate(shared: &BinlogShared, client: &GtidSet) -> Result<(String, bool), ErrPacket> {
    let cfg = &shared.config;
    let end = shared.end();
    let limit = |name: &str| if name == end.file { end.pos } else { u64::MAX };
    let open_failed = |e: String| err(FATAL, format!("Could not open log file: {e}"));
    let executed = end.gtid.as_mysql().cloned().unwrap_or_default();
    let purged = match shared.files().first() {
        Some(f) => {
            mysql::file_start(&cfg.dir, &f.name, limit(&f.name))
                .map_err(open_failed)?
                .0
        }
        None => GtidSet::default(),
    };
    mysql::check_start(client, &executed, &purged, &cfg.uuid())?;
    let found = store::locate_gtid(&cfg.dir, &cfg.base_name, &GtidState::MySql(client.clone()))
        .map_err(|e| err(FATAL, e.to_string()))?;
    let Some((position, _)) = found else {
        return Err(mysql::purged_error(
            client,
            &mysql::subtract(&purged, client),
        ));
    };
    let (_, first) =
        mysql::file_start(&cfg.dir, &position.file, limit(&position.file)).map_err(open_failed)?;
    Ok((position.file, first.is_some_and(|g| client.contains(g))))
}
