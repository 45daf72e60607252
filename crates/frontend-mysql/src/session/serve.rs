//! The command loop: wait for a command (or the drain, a kill, the idle limit, the backend
//! ending the session), decode it, run its handler, and again.

use std::pin::Pin;
use std::sync::atomic::Ordering;

use manifold_backend::Lease;
use manifold_engine::clock;
use manifold_io::ReadError;
use manifold_mysql_proto::consts::MAX_PAYLOAD;
use manifold_mysql_proto::packets::ErrPacket;
use manifold_mysql_proto::{codes, LogicalPacket, ProtoError, ResponseKind};
use manifold_sql_lex::{Scan, Verb};
use tokio::sync::futures::Notified;

use super::decode::{self, Action, Effect, StmtCommand};
use super::visit::Destination;
use super::{CommandTimes, End, Session};
use crate::handshake::send_err;

/// Resolves when the session's backend connection, idle between commands, is closed or sends
/// something unasked (the server's wait_timeout, a KILL, a restart); pending forever while the
/// session holds no connection. Cancel-safe: bytes read stay in the connection's buffer. Costs
/// nothing per command: the socket's readiness was cleared by the last read of the answer.
async fn backend_gone(lease: &mut Option<Lease>) -> String {
    let Some(lease) = lease.as_mut() else {
        return std::future::pending().await;
    };
    let io = &mut lease.conn().io;
    if !io.rbuf.is_empty() {
        return "backend sent data while the session was idle".to_owned();
    }
    match io.fill().await {
        Ok(_) => "backend sent data while the session was idle".to_owned(),
        Err(ReadError::Closed) => {
            "backend closed the connection while the session was idle".to_owned()
        }
        Err(e) => format!("backend connection failed while the session was idle: {e}"),
    }
}

impl Session {
    pub(super) async fn serve(&mut self) -> End {
        // One drain waiter and one idle timer for the whole session, re-armed lazily: a timer
        // or waiter registered per command would cost the hot path a wheel insert and a lock.
        let ctx = self.ctx.clone();
        let drained = ctx.drain().notified();
        tokio::pin!(drained);
        let handle = self.handle.clone();
        let killed = handle.killed();
        tokio::pin!(killed);
        let mut wait = self.idle_limit();
        let mut last_active = tokio::time::Instant::now();
        let idle = tokio::time::sleep_until(last_active + wait);
        tokio::pin!(idle);
        loop {
            // The `db` of the process list, at login and after each command: a comparison,
            // a write only when it changed (processlist.rs).
            self.handle.publish_schema(self.schema.as_deref());
            if self.ctx.drain().is_draining() {
                // A command that already arrived is answered, not silently dropped.
                if matches!(
                    manifold_mysql_proto::scan_logical(&self.io.rbuf, self.max_packet()),
                    Ok(Some(_))
                ) {
                    send_err(
                        &mut self.io,
                        1,
                        &ErrPacket::new(codes::SERVER_SHUTDOWN, "Server shutdown in progress"),
                    )
                    .await;
                }
                return End::Shutdown;
            }
            let max = self.max_packet();
            let timed = self.times.clock;
            let read = tokio::select! {
                // A KILL answered before the client's next command arrived ends the session
                // before that command is read, whichever woke the task first.
                biased;
                () = &mut killed => return End::Killed,
                r = self.io.read_packet_timed(max, timed, &mut self.times.first_byte) => r,
                () = &mut drained => return End::Shutdown,
                why = backend_gone(&mut self.lease) => {
                    let killed = self
                        .lease
                        .as_mut()
                        .is_some_and(|l| super::replay::killed_on_server(&l.conn().io.rbuf));
                    // The server ended the session while the client was idle. Close the
                    // client too, as the server would have: a client checking its idle
                    // connection then sees EOF and reconnects, instead of getting ERR 7702 on
                    // its next statement with its session state silently gone.
                    if let Some(l) = self.take_lease() {
                        l.discard();
                    }
                    // An open transaction runs again on the primary, unnoticed.
                    let Some(end) = self.replay_idle(&why, killed).await else {
                        continue;
                    };
                    tracing::info!(connection = self.id, peer = %self.peer, %why, "backend ended an idle session; closing the client");
                    return end;
                }
                () = &mut idle => {
                    let deadline = last_active + wait;
                    if tokio::time::Instant::now() < deadline {
                        idle.as_mut().reset(deadline);
                        continue;
                    }
                    Err(ReadError::Timeout)
                }
            };
            let packet = match read {
                Ok(p) => p,
                Err(e) => return self.read_failed(e, wait).await,
            };
            let outcome = self.command(packet, killed.as_mut()).await;
            self.schema_follows_statement = false;
            if self.handle.statement_ended(self.lease.is_some()) {
                self.lease_killable = true;
            }
            self.handle.publish_pins(self.pins.bits());
            self.times = CommandTimes {
                clock: self.fe.shared.timing(),
                ..CommandTimes::default()
            };
            if let Err(end) = outcome {
                return end;
            }
            last_active = tokio::time::Instant::now();
            let limit = self.idle_limit();
            if limit != wait {
                wait = limit;
                idle.as_mut().reset(last_active + wait);
            }
        }
    }

    /// Reading the next command failed: the session ends, with the ERR a server sends for
    /// the reason when there is one. `wait`: the idle limit in force.
    async fn read_failed(&mut self, e: ReadError, wait: std::time::Duration) -> End {
        match e {
            ReadError::Closed => End::ClientGone,
            ReadError::Io(e) => {
                tracing::debug!(connection = self.id, error = %e, "client read failed");
                End::ClientGone
            }
            ReadError::Timeout => {
                let msg = format!("Got timeout reading communication packets: idle for longer than wait_timeout ({wait:?})");
                self.refuse(0, codes::NET_READ_TIMEOUT, msg).await
            }
            ReadError::Proto(ProtoError::TooLarge { size, limit }) => {
                let msg = format!(
                    "Got a packet bigger than 'max_allowed_packet' bytes ({size} > {limit})"
                );
                self.refuse(1, codes::NET_PACKET_TOO_LARGE, msg).await
            }
            ReadError::Proto(ProtoError::Sequence { expected, got }) => {
                let msg =
                    format!("Got packets out of order (sequence id {got}, expected {expected})");
                self.refuse(expected, codes::NET_PACKETS_OUT_OF_ORDER, msg)
                    .await
            }
            ReadError::Proto(e) => {
                self.refuse(
                    1,
                    codes::NET_READ_ERROR,
                    format!("Got an error reading communication packets: {e}"),
                )
                .await
            }
        }
    }

    /// Runs the command whose packet `p` is at the front of the client's buffer. `killed`:
    /// the session's kill notice, which a long command (a binlog dump) waits on too.
    async fn command(
        &mut self,
        p: LogicalPacket,
        killed: Pin<&mut Notified<'_>>,
    ) -> Result<(), End> {
        if p.first_seq != 0 {
            let msg = format!(
                "Got packets out of order (command with sequence id {}, expected 0)",
                p.first_seq
            );
            self.io.consume(p.raw_len);
            return Err(self.refuse(1, codes::NET_PACKETS_OUT_OF_ORDER, msg).await);
        }
        let reply_seq = p.last_seq.wrapping_add(1);
        self.times.read = self.times.clock.then(clock::now);
        self.digest_hash = None;
        // Classify from the first physical packet: only small commands need their whole body.
        let first_len = if p.frames > 1 {
            MAX_PAYLOAD
        } else {
            p.payload_len
        };
        let (action, use_cluster, visit) = match self.decode(first_len) {
            Ok(decoded) => decoded,
            Err(e) => {
                self.io.consume(p.raw_len);
                let msg = format!("Malformed command packet: {e}");
                return Err(self.refuse(reply_seq, codes::NET_READ_ERROR, msg).await);
            }
        };
        self.choose_cluster(&action, use_cluster, visit);
        if let Action::Binlog(command) = action {
            return self.binlog(command, p, reply_seq, killed).await;
        }
        self.dispatch(action, p, first_len, reply_seq).await
    }

    /// Decodes the command at the front of the client's buffer (its first `first_len` bytes of
    /// payload). A query is scanned (from the session's memo, with a digest when rules or
    /// statistics need one) and published for `SHOW SESSIONS`; also returned: the cluster a
    /// `USE` of a schema another cluster serves moves the session to, and the cluster (with
    /// the schema) a statement naming such a schema runs on (see [`super::visit`]).
    fn decode(
        &mut self,
        first_len: usize,
    ) -> Result<(Action, Option<usize>, Option<Destination>), ProtoError> {
        let first = &self.io.rbuf[4..4 + first_len];
        let shared = &self.fe.shared;
        let digests =
            shared.rules_need_digest || shared.settings.query_digests.load(Ordering::Relaxed);
        let read_at = self.times.read;
        let (handle, digest, digest_hash, memo) = (
            &self.handle,
            &mut self.digest,
            &mut self.digest_hash,
            &mut self.scan_memo,
        );
        let scan = |sql: &[u8]| {
            handle.statement_started(sql, read_at.unwrap_or_else(clock::now));
            digest.clear();
            if digests {
                let (scan, hash) = manifold_sql_lex::scan_with_digest_memo(sql, digest, memo);
                *digest_hash = Some(hash);
                scan
            } else {
                manifold_sql_lex::scan_memo(sql, memo)
            }
        };
        let binlog = shared.binlog.is_some();
        let action = decode::decode(first, self.capabilities, self.lease.is_none(), binlog, scan)?;
        let mut use_cluster = None;
        let mut visit = None;
        if let Action::Forward(ResponseKind::ResultSets, Effect::Query(scan)) = &action {
            let sql = &first[1..];
            visit = self.statement_cluster(scan, sql);
            if scan.verb == Verb::Use && shared.clusters.len() > 1 {
                use_cluster = manifold_sql_lex::parse_use(sql)
                    .map(|s| shared.cluster_for(Some(s), &self.user.name));
            }
            if scan.has(Scan::SET_NAMES_COLLATE) {
                self.pending_collation =
                    manifold_sql_lex::set_names_collation(sql).map(<[u8]>::to_ascii_lowercase);
            }
        }
        Ok((action, use_cluster, visit))
    }

    /// Before each command of a session holding no connection, with several clusters: the
    /// cluster serving its schema (or the one a `USE`/`COM_INIT_DB` names), else its user's;
    /// for this command only, `visit`'s (the cluster of the schema the statement names).
    fn choose_cluster(
        &mut self,
        action: &Action,
        use_cluster: Option<usize>,
        visit: Option<Destination>,
    ) {
        if self.lease.is_some() || self.fe.shared.clusters.len() <= 1 {
            return;
        }
        self.visit = None;
        let before = self.cluster;
        self.cluster = match action {
            Action::InitDb(schema) => self.fe.shared.cluster_for(Some(schema), &self.user.name),
            _ => use_cluster.unwrap_or_else(|| {
                self.fe
                    .shared
                    .cluster_for(self.schema.as_deref(), &self.user.name)
            }),
        };
        // The statement makes another schema current there: the session's current one (which
        // that cluster may not have) is not restored first.
        self.schema_follows_statement = self.cluster != before
            && (use_cluster.is_some() || matches!(action, Action::InitDb(_)));
        if let Some(to) = visit {
            self.visit(to);
        }
    }

    /// Hands the command to its handler. `p`: its packet, still at the front of the client's
    /// buffer (each handler consumes it when it is done with it).
    async fn dispatch(
        &mut self,
        action: Action,
        p: LogicalPacket,
        first_len: usize,
        reply_seq: u8,
    ) -> Result<(), End> {
        match action {
            Action::Quit => Err(End::Quit),
            Action::Unknown(c) => {
                self.io.consume(p.raw_len);
                let msg = format!("Unknown command 0x{c:02x}");
                Err(self.refuse(reply_seq, codes::UNKNOWN_COMMAND, msg).await)
            }
            Action::Ping => {
                self.io.consume(p.raw_len);
                self.ping(reply_seq).await
            }
            Action::ChangeUser(cu) => {
                self.io.consume(p.raw_len);
                self.change_user(cu, reply_seq).await
            }
            Action::InitDb(schema) => {
                let kind = ResponseKind::Single;
                self.forward(p.raw_len, reply_seq, kind, Effect::None, Some(schema), None)
                    .await
            }
            Action::SetOption(o) => {
                let kind = ResponseKind::Single;
                self.forward(p.raw_len, reply_seq, kind, Effect::None, None, Some(o))
                    .await
            }
            Action::ResetConnection => {
                self.io.consume(p.raw_len);
                self.reset_connection(reply_seq).await
            }
            Action::Forward(kind, effect) => {
                self.forward(p.raw_len, reply_seq, kind, effect, None, None)
                    .await
            }
            Action::Prepare => {
                let sql = Box::<[u8]>::from(&p.payload(&self.io.rbuf)[1..]);
                self.io.consume(p.raw_len);
                self.stmt_prepare(reply_seq, sql).await
            }
            Action::Stmt(c) => {
                if let StmtCommand::Execute(id) = c {
                    // What SHOW SESSIONS shows: the prepared statement's text.
                    if let Some(s) = self.stmts.get_mut(id) {
                        let started = self.times.read.unwrap_or_else(clock::now);
                        self.handle.execute_started(&s.meta.sql, started);
                    }
                }
                self.stmt_command(c, p.raw_len, first_len, reply_seq).await
            }
            Action::Kill(k) => {
                self.io.consume(p.raw_len);
                self.kill(k, reply_seq).await
            }
            Action::ShowDiagnostics(show) => {
                self.io.consume(p.raw_len);
                self.show_diagnostics(show, reply_seq).await
            }
            Action::GetDiagnostics => {
                self.io.consume(p.raw_len);
                self.refuse_get_diagnostics(reply_seq).await
            }
            Action::Binlog(command) => {
                // Handled in `command`, where the kill notice is at hand.
                self.io.consume(p.raw_len);
                let msg = format!("Unexpected binlog command {command:?}");
                Err(self.refuse(reply_seq, codes::UNKNOWN_COMMAND, msg).await)
            }
            Action::ShowProcesslist(full) => {
                self.io.consume(p.raw_len);
                // A user who may see every session sees the whole fleet's.
                let fleet = if self.user.process {
                    crate::fleet::remote_processes(&self.fe.shared, None).await
                } else {
                    Vec::new()
                };
                let (columns, rows) =
                    crate::processlist::show(&self.fe.shared, &self.user, full, fleet);
                self.send_result_set(reply_seq, &columns, &rows).await
            }
        }
    }
}
