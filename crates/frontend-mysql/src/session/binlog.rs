//! The global binlog on the MySQL port: with it on, manifold is the one server for binlog
//! purposes. Dumps stream manifold's own files; binlog statements and variables are answered
//! from its state; the replication `@vars` a replica sets stay in the session for its dump.

use std::pin::Pin;
use std::sync::Arc;

use manifold_backend::ErrorKind;
use manifold_binlog::gtid::Dialect;
use manifold_binlog_serve::answer::{self, err};
use manifold_binlog_serve::dump::{self, Dump, DumpOutcome, DumpRequest};
use manifold_binlog_serve::{DumpGtidRequest, Statement};
use manifold_cdc::state::{ConsumerStatus, Request};
use manifold_cdc::BinlogShared;
use manifold_mysql_proto::codes;
use manifold_mysql_proto::packets::ErrPacket;
use manifold_mysql_proto::LogicalPacket;
use tokio::sync::futures::Notified;

use super::decode::BinlogCommand;
use super::{End, Session};
use crate::binlog_access::{parse_show_grants, register_denied, BinlogOp, Lookup, Privileges};

impl Session {
    /// Runs a binlog command or statement (the global binlog is on).
    pub(super) async fn binlog(
        &mut self,
        command: BinlogCommand,
        p: LogicalPacket,
        seq: u8,
        killed: Pin<&mut Notified<'_>>,
    ) -> Result<(), End> {
        let Some(shared) = self.fe.shared.binlog.clone() else {
            self.io.consume(p.raw_len);
            let e = err(codes::NO_BINARY_LOGGING, "You are not using binary logging");
            return self.send_err_packet(seq, &e).await;
        };
        match command {
            BinlogCommand::Dump => {
                let payload = p.payload(&self.io.rbuf).into_owned();
                self.io.consume(p.raw_len);
                self.binlog_dump(&shared, &payload, false, seq, killed)
                    .await
            }
            BinlogCommand::DumpGtid => {
                let payload = p.payload(&self.io.rbuf).into_owned();
                self.io.consume(p.raw_len);
                self.binlog_dump(&shared, &payload, true, seq, killed).await
            }
            BinlogCommand::RegisterSlave => {
                let payload = p.payload(&self.io.rbuf).into_owned();
                self.io.consume(p.raw_len);
                // The servers ask REPLICATION SLAVE for it, as for a dump, and refuse it with
                // their login's ERR 1045.
                if self
                    .binlog_permit(shared.dialect(), BinlogOp::RegisterReplica)
                    .await
                    .is_err()
                {
                    let e = register_denied(&self.user.name);
                    return self.send_err_packet(seq, &e).await;
                }
                // server_id u32 first; the rest (host, user, password, port...) is not used.
                if let Some(id) = payload.get(1..5) {
                    self.binlog.registered_server_id =
                        Some(u32::from_le_bytes([id[0], id[1], id[2], id[3]]));
                }
                self.send_ok(seq).await
            }
            BinlogCommand::Statement(s) => {
                self.io.consume(p.raw_len);
                self.binlog_statement(&shared, s, seq).await
            }
        }
    }

    /// `COM_BINLOG_DUMP`, or MySQL's `COM_BINLOG_DUMP_GTID` when `by_gtid`.
    async fn binlog_dump(
        &mut self,
        shared: &Arc<BinlogShared>,
        payload: &[u8],
        by_gtid: bool,
        seq: u8,
        killed: Pin<&mut Notified<'_>>,
    ) -> Result<(), End> {
        if let Err(e) = self.binlog_permit(shared.dialect(), BinlogOp::Dump).await {
            return self.send_err_packet(seq, &e).await;
        }
        let consumer = ConsumerStatus {
            id: u64::from(self.id),
            user: self.user.name.clone(),
            addr: self.peer.to_string(),
            ..ConsumerStatus::default()
        };
        let started = if by_gtid {
            match DumpGtidRequest::parse(payload) {
                Ok(request) => {
                    tracing::info!(connection = self.id, peer = %self.peer, file = %request.file, pos = request.pos, server_id = request.server_id, gtids = %request.gtids, "binlog GTID dump requested");
                    Dump::start_gtid(shared.clone(), &request, &self.binlog, consumer)
                }
                Err(m) => Err(err(codes::UNKNOWN_ERROR, m)),
            }
        } else {
            match DumpRequest::parse(payload) {
                Some(request) => {
                    tracing::info!(connection = self.id, peer = %self.peer, file = %request.file, pos = request.pos, server_id = request.server_id, "binlog dump requested");
                    Dump::start(shared.clone(), &request, &self.binlog, consumer)
                }
                None => Err(err(
                    codes::UNKNOWN_ERROR,
                    "Malformed COM_BINLOG_DUMP packet",
                )),
            }
        };
        let mut dump = match started {
            Ok(d) => d,
            Err(e) => return self.send_err_packet(seq, &e).await,
        };
        tracing::info!(connection = self.id, "binlog dump started");
        let ctx = self.ctx.clone();
        let stop = async move {
            tokio::select! {
                () = killed => {}
                () = ctx.drain().notified() => {}
            }
        };
        let outcome = dump::run(&mut self.io.stream, seq, &mut dump, stop, self.status).await;
        tracing::info!(connection = self.id, ?outcome, "binlog dump ended");
        match outcome {
            DumpOutcome::Finished | DumpOutcome::Failed(_) => Ok(()),
            DumpOutcome::ClientGone => Err(End::ClientGone),
            DumpOutcome::Stopped if self.ctx.drain().is_draining() => Err(End::Shutdown),
            DumpOutcome::Stopped => Err(End::Killed),
        }
    }

    async fn binlog_statement(
        &mut self,
        shared: &Arc<BinlogShared>,
        statement: Statement,
        seq: u8,
    ) -> Result<(), End> {
        let op = match &statement {
            Statement::ShowMasterStatus | Statement::ShowBinaryLogs => Some(BinlogOp::Monitor),
            Statement::ShowBinlogEvents(_) => Some(BinlogOp::ShowEvents),
            Statement::PurgeTo(_)
            | Statement::PurgeBefore(_)
            | Statement::PurgeBeforeExpression => Some(BinlogOp::Purge),
            Statement::FlushBinaryLogs => Some(BinlogOp::Flush),
            // Asked for as the server asks (and refused anyway).
            Statement::ResetMaster => Some(BinlogOp::Reset),
            // Variables: anyone may read them, as on the servers.
            Statement::Select(_)
            | Statement::ShowVariables(_)
            | Statement::ShowVariablesOfServer(_)
            | Statement::Set(_)
            | Statement::FirstOfSeveral => None,
        };
        if let Some(op) = op {
            if let Err(e) = self.binlog_permit(shared.dialect(), op).await {
                return self.send_err_packet(seq, &e).await;
            }
        }
        let (columns, rows) = match statement {
            Statement::ShowMasterStatus => answer::master_status(shared),
            Statement::ShowBinaryLogs => answer::binary_logs(shared),
            Statement::Select(items) => match answer::select(shared, &self.binlog, &items) {
                Ok(set) => set,
                Err(e) => return self.send_err_packet(seq, &e).await,
            },
            Statement::ShowVariables(names) => answer::show_variables(shared, &names),
            Statement::ShowVariablesOfServer(sql) => {
                return self.binlog_server_variables(shared, &sql, seq).await;
            }
            Statement::FirstOfSeveral => {
                let e = err(
                    codes::NOT_SUPPORTED_YET,
                    "This version of manifold doesn't yet support 'a statement of the global binlog followed by other statements in one query': send it alone",
                );
                return self.send_err_packet(seq, &e).await;
            }
            Statement::Set(vars) => {
                for (name, value) in vars {
                    self.binlog.set(name, value);
                }
                return self.send_ok(seq).await;
            }
            Statement::ShowBinlogEvents(q) => {
                // Reads a file: off the worker thread.
                let for_job = shared.clone();
                let read = self
                    .ctx
                    .blocking()
                    .spawn(move || answer::binlog_events(&for_job, &q))
                    .await;
                match read {
                    Ok(Ok(set)) => set,
                    Ok(Err(e)) => return self.send_err_packet(seq, &e).await,
                    Err(e) => {
                        let e = err(
                            codes::UNKNOWN_ERROR,
                            format!("SHOW BINLOG EVENTS failed: {e}"),
                        );
                        return self.send_err_packet(seq, &e).await;
                    }
                }
            }
            admin => return self.binlog_admin(shared, admin, seq).await,
        };
        self.send_result_set(seq, &columns, &rows).await
    }

    /// `PURGE`, `FLUSH BINARY LOGS`, `RESET MASTER`: answered by the binlog service thread.
    async fn binlog_admin(
        &mut self,
        shared: &Arc<BinlogShared>,
        statement: Statement,
        seq: u8,
    ) -> Result<(), End> {
        let stopped = || {
            err(
                codes::UNKNOWN_ERROR,
                "The global binlog service is not running",
            )
        };
        let purge_failed = |m: String| {
            let code = if m.contains("not found") || m.contains("unknown") {
                codes::UNKNOWN_TARGET_BINLOG
            } else {
                codes::BINLOG_PURGE_FATAL_ERR
            };
            err(code, m)
        };
        // A purge that stopped at a file a dump reads succeeds with a warning, as MariaDB's.
        let mut warning: Option<String> = None;
        let dialect = shared.dialect();
        let mut purged = |p: manifold_cdc::state::Purged| {
            warning = p
                .stopped_at
                .map(|stop| stop.message(p.removed.len(), dialect));
        };
        let result: Result<(), ErrPacket> = match statement {
            Statement::PurgeTo(file) => match shared.ask(|tx| Request::PurgeTo(file, tx)).await {
                Some(Ok(p)) => {
                    purged(p);
                    Ok(())
                }
                Some(Err(m)) => Err(purge_failed(m)),
                None => Err(stopped()),
            },
            Statement::PurgeBefore(text) => match answer::parse_datetime(&text) {
                None => Err(err(
                    codes::WRONG_VALUE,
                    format!("Incorrect DATETIME value: '{text}'"),
                )),
                Some(time) => match shared.ask(|tx| Request::PurgeBefore(time, tx)).await {
                    Some(Ok(p)) => {
                        purged(p);
                        Ok(())
                    }
                    Some(Err(m)) => Err(purge_failed(m)),
                    None => Err(stopped()),
                },
            },
            Statement::PurgeBeforeExpression => Err(err(
                codes::NOT_SUPPORTED_YET,
                "manifold's global binlog takes PURGE BINARY LOGS BEFORE 'YYYY-MM-DD hh:mm:ss' (a literal, UTC)",
            )),
            Statement::FlushBinaryLogs => match shared.ask(Request::Rotate).await {
                Some(Ok(())) => Ok(()),
                Some(Err(m)) => Err(err(codes::UNKNOWN_ERROR, m)),
                None => Err(stopped()),
            },
            _ => Err(err(
                codes::NOT_SUPPORTED_YET,
                "RESET MASTER is refused: replicas and CDC tools depend on the global binlog's positions; remove old files with PURGE BINARY LOGS",
            )),
        };
        match result {
            Ok(()) => {
                let p = &mut self.previous;
                p.row_count = 0;
                p.conditions.clear();
                p.warning_count = 0;
                if let Some(message) = warning {
                    p.warning_count = 1;
                    p.conditions.push([
                        b"Warning".to_vec(),
                        ER_WARN_PURGE_LOG_IN_USE.to_string().into_bytes(),
                        message.into_bytes(),
                    ]);
                }
                let warnings = u16::try_from(p.warning_count).unwrap_or(u16::MAX);
                self.send_ok_warnings(seq, warnings).await
            }
            Err(e) => self.send_err_packet(seq, &e).await,
        }
    }
}

impl Session {
    /// Whether this session's user may do `op` on the global binlog: listed by
    /// `binlog.users` when it is set, and its backend login holding what the server asks on
    /// every source primary ([`crate::binlog_access`]). The ERR is the server's 1227, also
    /// when the grants could not be learned (refused: fail closed; why is logged, not told
    /// the client: it would name the backend login, the cluster and a backend's error).
    /// Refusals and failures are remembered briefly, so a looping client does not make every
    /// statement ask (or fail to log in to) every primary.
    async fn binlog_permit(&mut self, dialect: Dialect, op: BinlogOp) -> Result<(), ErrPacket> {
        let fe = self.fe.clone();
        let access = &fe.shared.binlog_access;
        let (user, backend_user) = (&self.user.name, &self.user.backend_user);
        if !access.is_listed(user) {
            return Err(op.denied(dialect));
        }
        if let Some(answer) = access.answer(user, backend_user, op, dialect) {
            return answer;
        }
        // One lookup per user at a time; a session that waited takes the one just made.
        let turn = access.lookup_turn(user);
        let _turn = turn.lock().await;
        let (user, backend_user) = (self.user.name.clone(), self.user.backend_user.clone());
        if let Some(answer) = access.answer(&user, &backend_user, op, dialect) {
            return answer;
        }
        // Taken before asking: a reload while the lookup runs makes its result stale.
        let generation = access.generation();
        // A primary that never answers (nor refuses) must not hold the session, nor every
        // other session of the user waiting for this lookup: fail closed.
        let limit = fe.shared.config.connect_timeout;
        let lookup = tokio::time::timeout(limit, self.binlog_grants())
            .await
            .unwrap_or_else(|_| {
                tracing::warn!(connection = self.id, user = %user, backend_user = %backend_user, timeout = ?limit, "global binlog: the grants could not be learned within connect_timeout");
                Lookup::Unreachable(None)
            });
        let held = access.remember(&user, &backend_user, generation, lookup);
        if matches!(lookup, Lookup::Unreachable(_)) && held.is_some() {
            tracing::info!(connection = self.id, user = %user, backend_user = %backend_user, "a source primary is unreachable: the grants last learned for the global binlog still count");
        }
        match held {
            Some(held) if op.allowed(held, dialect) => Ok(()),
            Some(_) => {
                tracing::info!(connection = self.id, user = %user, backend_user = %backend_user, ?op, "global binlog refused: the backend login lacks the privilege on a source primary");
                Err(op.denied(dialect))
            }
            None => Err(op.denied(dialect)),
        }
    }

    /// The global privileges the user's backend login holds on every source primary (what
    /// all of them grant), from `SHOW GRANTS` on each through the login's own connection.
    /// A refusal by any of them wins over one being unreachable (both logged).
    async fn binlog_grants(&mut self) -> Lookup {
        let mut held: Option<Privileges> = None;
        let mut unreachable = false;
        for cluster in 0..self.fe.shared.clusters.len() {
            match self.binlog_grants_on(cluster).await {
                Lookup::Held(on) => held = Some(held.map_or(on, |h| h.intersection(on))),
                Lookup::Refused => return Lookup::Refused,
                Lookup::Unreachable(_) => unreachable = true,
            }
        }
        if unreachable {
            // What the others grant still narrows the grants last learned.
            return Lookup::Unreachable(held);
        }
        Lookup::Held(held.unwrap_or(Privileges::NONE))
    }

    async fn binlog_grants_on(&mut self, cluster: usize) -> Lookup {
        let failed = |session: &Session, why: &str, lookup: Lookup| {
            let name = &session.fe.shared.clusters[cluster].name;
            tracing::warn!(connection = session.id, user = %session.user.name, backend_user = %session.user.backend_user, cluster = %name, error = why, ?lookup, "global binlog: the grants could not be learned");
            lookup
        };
        let mut lease = match self.borrow_primary_of(cluster).await {
            Ok(lease) => lease,
            Err(e) => {
                // The server refused the login: believed. Not reached, or too busy to take
                // a connection: the grants last learned may still count.
                let lookup = match e.kind {
                    ErrorKind::Auth(_) | ErrorKind::Tls | ErrorKind::Protocol => Lookup::Refused,
                    ErrorKind::Connect
                    | ErrorKind::ConnectTimeout
                    | ErrorKind::Refused(_)
                    | ErrorKind::Lost
                    | ErrorKind::PoolTimeout => Lookup::Unreachable(None),
                };
                return failed(self, &e.message, lookup);
            }
        };
        match lease.conn().query_rows(b"SHOW GRANTS").await {
            Ok(Ok(rows)) => {
                // The query changed nothing on the connection.
                lease.mark_clean();
                Lookup::Held(parse_show_grants(
                    rows.rows.iter().filter_map(|r| r.first()?.as_deref()),
                ))
            }
            Ok(Err(e)) => {
                lease.mark_clean();
                // Only a refusal refuses; a server shutting down (1053), a statement killed
                // (1927) and the like say nothing of the grants.
                let lookup = if ACCESS_DENIED_CODES.contains(&e.code) {
                    Lookup::Refused
                } else {
                    Lookup::Unreachable(None)
                };
                failed(self, &String::from_utf8_lossy(&e.message), lookup)
            }
            Err(e) => {
                lease.discard();
                failed(self, &e.message, Lookup::Unreachable(None))
            }
        }
    }
}

/// The servers' access-denied errors: `ER_DBACCESS_DENIED_ERROR`, `ER_ACCESS_DENIED_ERROR`,
/// `ER_NONEXISTING_GRANT`, `ER_TABLEACCESS_DENIED_ERROR`, `ER_SPECIFIC_ACCESS_DENIED_ERROR`.
const ACCESS_DENIED_CODES: [u16; 5] = [1044, 1045, 1141, 1142, 1227];

/// MariaDB's `ER_WARN_PURGE_LOG_IN_USE`: a purge stopped at a file a dump reads.
const ER_WARN_PURGE_LOG_IN_USE: u16 = 1867;
