//! Running a command on a backend: the attempt loop (route, wait for a primary, borrow or
//! ride behind another session's command, make a prepared statement ready, relay the answer,
//! retry when that is safe), then taking in what the answer says and recording it.

use std::sync::atomic::Ordering;

use manifold_backend::{BackendError, Schema};
use manifold_engine::clock;
use manifold_mysql_proto::codes;
use manifold_mysql_proto::consts::{caps, status};
use manifold_mysql_proto::packets::ErrPacket;
use manifold_mysql_proto::ResponseKind;
use manifold_sql_lex::{Class, Scan, Verb};

use super::decode::Effect;
use super::lease::Unready;
use super::replay::Replay;
use super::{End, Session};
use crate::handshake::send_err;
use crate::metrics::{FrontendMetrics, ReplayDecline};
use crate::relay::{self, Outgoing, RelayError, StateCapture};
use crate::telemetry::Stage;

/// How many times a command whose connection failed is tried again (on another connection,
/// maybe another node) when the error allows it ([`BackendError::may_retry`], which may allow
/// fewer: a write whose connection was reset before answering is sent again only once).
const MAX_RETRIES: u32 = 4;

/// How a command goes to its backend connection (see [`relay::Outgoing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outgo {
    Client,
    /// As rewritten in `exec_buf`.
    Rewritten,
    /// The client's bytes, with other sessions' commands behind them if any wait.
    Lead,
    /// Already written behind another session's command.
    Sent,
}

impl Session {
    pub(super) async fn forward(
        &mut self,
        raw_len: usize,
        reply_seq: u8,
        kind: ResponseKind,
        effect: Effect,
        init_db: Option<Vec<u8>>,
        set_option: Option<u16>,
    ) -> Result<(), End> {
        let wants_last_insert_id = effect.scan().is_some_and(|s| s.has(Scan::LAST_INSERT_ID));
        self.note_assigned_user_vars(raw_len, effect);
        let query_rewritten = match effect {
            Effect::Query(s) if s.has(Scan::SESSION_VALUES) => {
                let processlist = s.has(Scan::PROCESSLIST).then(Vec::new);
                // A user who may see every session sees the whole fleet's, as in SHOW
                // PROCESSLIST.
                let processlist = match processlist {
                    Some(_) if self.user.process && self.reads_processlist_table(raw_len) => {
                        Some(crate::fleet::remote_processes(&self.fe.shared, None).await)
                    }
                    other => other,
                };
                match self.rewrite_session_values(raw_len, processlist) {
                    Ok(rewritten) => rewritten,
                    Err(e) => {
                        self.pending_collation = None;
                        self.io.consume(raw_len);
                        return self.send_err_packet(reply_seq, &e).await;
                    }
                }
            }
            _ => false,
        };
        let query_rewritten = self.stamp_write(raw_len, query_rewritten, effect);
        // COM_STMT_SEND_LONG_DATA has no answer, so no way to report a failure.
        let answered = kind != ResponseKind::None;
        if let Some(e) = self.leave_replica_for(effect) {
            self.pending_collation = None;
            self.io.consume(raw_len);
            return self.send_err_packet(reply_seq, &e).await;
        }
        let pipelinable = self.pipelinable(effect, raw_len);
        self.arm_replay(effect, kind);
        // A read may run again on another node when its own fails before answering, even if
        // the server may have run it.
        let read = effect
            .scan()
            .is_some_and(|s| matches!(s.class(), Class::Read | Class::BeginReadOnly));
        // Nodes this command has given up on (shunned by a failed connect, or too far behind
        // for a causal read).
        let mut skip = 0u64;
        let mut primary_deadline = None;
        let mut retries = 0;
        // Times the command was sent again after its connection failed under it.
        let mut resent = 0;
        let result = loop {
            // A session holding no connection has all its state in manifold: if a connection
            // fails before the command ran (or, for a read, before it answered), the command
            // can run on another. One holding a connection has state only that one knows.
            let movable = self.lease.is_none();
            let (node, wait) = if movable {
                self.recheck_missing_writes();
                let rule = self.match_rule(effect);
                self.route(effect, skip, rule)
            } else {
                (self.lease_node, None)
            };
            // The first choice ends `route`: waiting for a primary, and attempts that failed,
            // count as waiting for a connection.
            if self.times.clock && self.times.routed.is_none() {
                self.times.routed = Some(clock::now());
            }
            if movable && node == self.primary() && !self.topology().nodes[node].in_service() {
                if let Err(e) = self.wait_for_primary(&mut primary_deadline).await {
                    self.pending_collation = None;
                    self.io.consume(raw_len);
                    if !answered {
                        return Ok(());
                    }
                    return self.send_err_packet(reply_seq, &e).await;
                }
                continue;
            }
            let mut sent = false;
            let mut unready = None;
            if pipelinable && movable && wait.is_none() {
                let got = self.acquire_or_follow(node, raw_len).await;
                if self.times.clock {
                    self.times.acquired = Some(clock::now());
                }
                match got {
                    Ok(followed) => sent = followed,
                    Err(e) => unready = Some(e),
                }
            }
            if sent {
                if self.handle.query_killed() {
                    return self.answer_interrupted(raw_len, reply_seq, true).await;
                }
                // Riding behind another session's command, which wrote this one: the answer
                // is next on the wire, and the command is not this session's to send again.
                break self
                    .relay_once(raw_len, reply_seq, kind, Outgo::Sent)
                    .await
                    .0;
            }
            let ensured = match unready {
                Some(e) => Err(e),
                None => self
                    .ensure_backend(node, wants_last_insert_id)
                    .await
                    .map(|_| ()),
            };
            if movable && self.times.clock {
                self.times.acquired = Some(clock::now());
            }
            if let Err(e) = ensured {
                if let Unready::Failed(failed) = &e {
                    if movable && retries < MAX_RETRIES && failed.may_retry(false, false, resent) {
                        // The node was just found down, or the connection broke before the
                        // command went out: a read goes to another node, a write waits for
                        // a primary or tries another connection.
                        retries += 1;
                        skip |= 1 << node;
                        FrontendMetrics::inc(&self.fe.shared.metrics.retries);
                        continue;
                    }
                    if !movable && self.status & status::IN_TRANS != 0 {
                        // The transaction's connection broke while being made ready: nothing
                        // of the command went out.
                        let replayed = if retries < MAX_RETRIES {
                            self.replay_transaction(None, effect, raw_len, reply_seq)
                                .await
                        } else {
                            Replay::Declined
                        };
                        match replayed {
                            Replay::Done => {
                                retries += 1;
                                continue;
                            }
                            Replay::Ended(end) => return Err(end),
                            Replay::Declined => {
                                // The transaction died with its connection (or replays kept
                                // failing): the session ends as when a statement's
                                // connection is lost, never carrying on without it.
                                let failed = failed.clone();
                                self.pending_collation = None;
                                self.io.consume(raw_len);
                                let seq = answered.then_some(reply_seq);
                                self.backend_failed(seq, &failed).await?;
                                return Err(End::BackendLost(failed.message.clone()));
                            }
                        }
                    }
                }
                self.pending_collation = None;
                self.io.consume(raw_len);
                self.release_if_unpinned();
                if !answered {
                    return Ok(());
                }
                return self.send_err_packet(reply_seq, &e.to_err_packet()).await;
            }
            if let Some(wait) = wait {
                if !self.wait_until_applied(wait).await {
                    skip |= 1 << node;
                    continue;
                }
            }
            let rewritten = match effect.statement() {
                None => query_rewritten,
                Some(stmt) => match self.bind_statement(stmt, raw_len, effect).await {
                    Ok(rewritten) => rewritten,
                    Err(Unready::Refused(e)) => {
                        self.io.consume(raw_len);
                        self.release_if_unpinned();
                        if !answered {
                            tracing::warn!(connection = self.id, error = %e.message_lossy(), "parameter data dropped: the statement could not be prepared on the backend connection");
                            return Ok(());
                        }
                        return self.send_err_packet(reply_seq, &e).await;
                    }
                    Err(Unready::Failed(e)) => {
                        if movable && retries < MAX_RETRIES && e.may_retry(false, false, resent) {
                            retries += 1;
                            // The broken connection goes, or the next pass would take it
                            // again as the session's own and never move.
                            if let Some(l) = self.take_lease() {
                                l.discard();
                            }
                            tracing::info!(connection = self.id, error = %e, "backend connection failed preparing a statement; trying another");
                            FrontendMetrics::inc(&self.fe.shared.metrics.retries);
                            continue;
                        }
                        self.io.consume(raw_len);
                        return self.backend_failed(answered.then_some(reply_seq), &e).await;
                    }
                },
            };
            let outgo = if rewritten {
                Outgo::Rewritten
            } else if pipelinable {
                Outgo::Lead
            } else {
                Outgo::Client
            };
            if answered && self.handle.query_killed() {
                return self.answer_interrupted(raw_len, reply_seq, false).await;
            }
            let (result, reused) = self.relay_once(raw_len, reply_seq, kind, outgo).await;
            if let Err(RelayError::Backend { error, .. }) = &result {
                // Running it twice is harmless for a read with another node to go to.
                let elsewhere = read && skip & (1 << node) == 0 && self.another_reader(node);
                if movable && retries < MAX_RETRIES && error.may_retry(reused, elsewhere, resent) {
                    retries += 1;
                    resent += 1;
                    if elsewhere {
                        skip |= 1 << node;
                    }
                    self.state_data.clear();
                    if let Some(l) = self.take_lease() {
                        l.discard();
                    }
                    tracing::info!(connection = self.id, %error, "backend connection failed before answering; running the command on another");
                    FrontendMetrics::inc(&self.fe.shared.metrics.retries);
                    continue;
                }
                if !movable && retries < MAX_RETRIES {
                    let error = error.clone();
                    self.state_data.clear();
                    match self
                        .replay_transaction(Some(&error), effect, raw_len, reply_seq)
                        .await
                    {
                        Replay::Done => {
                            retries += 1;
                            continue;
                        }
                        Replay::Ended(end) => {
                            self.replay.armed = false;
                            return Err(end);
                        }
                        Replay::Declined => {}
                    }
                }
            }
            break result;
        };
        self.finish_forward(result, kind, effect, init_db, set_option)
            .await
    }

    /// A `KILL QUERY` interrupted the statement before its answer was read: the client gets
    /// the server's ERR 1317. With `sent`, the statement was written behind another
    /// session's and may be running: its connection closes (the sessions whose answers were
    /// to follow send their statements again) and is killed on the server.
    async fn answer_interrupted(
        &mut self,
        raw_len: usize,
        reply_seq: u8,
        sent: bool,
    ) -> Result<(), End> {
        self.pending_collation = None;
        self.io.consume(raw_len);
        if sent {
            if let Some(mut lease) = self.lease.take() {
                self.lease_killable = false;
                self.handle.release_backend_thread();
                let conn = lease.conn();
                let (key, thread) = (conn.key.clone(), conn.connection_id);
                lease.discard();
                self.fe.pools[self.cluster][self.lease_node].kill_connection_later(key, thread);
            }
        } else {
            self.release_if_unpinned();
        }
        tracing::info!(
            connection = self.id,
            "statement interrupted by KILL QUERY before its answer was read"
        );
        let e = ErrPacket::new(codes::QUERY_INTERRUPTED, "Query execution was interrupted");
        self.remember_error(Some(&e));
        self.send_err_packet(reply_seq, &e).await
    }

    /// The command may ride behind another session's on a busy connection (pipelining): a
    /// lone `SELECT` of an autocommit session holding no connection, asking nothing about
    /// the session or its previous statement and changing nothing, so it runs the same on
    /// any connection in the session's state, and could run again after a break.
    fn pipelinable(&self, effect: Effect, raw_len: usize) -> bool {
        const MAX_FOLLOWER_COMMAND: usize = 16 * 1024;
        let Effect::Query(scan) = effect else {
            return false;
        };
        self.fe.shared.pool.pipeline_depth > 0
            && self.lease.is_none()
            && !self.pins.is_pinned()
            && raw_len <= MAX_FOLLOWER_COMMAND
            && scan.verb == Verb::Select
            && scan.statements == 1
            && scan.flags & !Scan::FROM == 0
            && self.status & status::IN_TRANS == 0
            && self.status & status::AUTOCOMMIT != 0
            && (self.schema_checked || self.schema.is_none())
            && self.pending_collation.is_none()
            && !self.previous.asked_by_prepared
    }

    /// One attempt at relaying a command on the held connection; also says whether that
    /// connection had waited in the pool (for the retry decision).
    async fn relay_once(
        &mut self,
        raw_len: usize,
        reply_seq: u8,
        kind: ResponseKind,
        outgo: Outgo,
    ) -> (Result<relay::Relayed, RelayError>, bool) {
        let deprecate_eof = self.capabilities & caps::DEPRECATE_EOF != 0;
        let max = self.max_packet();
        let lease = self.lease.as_mut().expect("ensured");
        let reused = lease.reused();
        let outgoing = match outgo {
            Outgo::Client => Outgoing::Client,
            Outgo::Rewritten => Outgoing::Bytes(&self.exec_buf),
            Outgo::Sent => Outgoing::Sent,
            Outgo::Lead if !self.fe.pools[self.cluster][self.lease_node].has_followers() => {
                Outgoing::Client
            }
            Outgo::Lead => {
                // Sessions waiting for a connection in this one's state ride behind it.
                self.exec_buf.clear();
                self.exec_buf.extend_from_slice(&self.io.rbuf[..raw_len]);
                let depth = self.fe.shared.pool.pipeline_depth;
                let n = self.fe.pools[self.cluster][self.lease_node].claim_followers(
                    lease.conn(),
                    depth,
                    &mut self.exec_buf,
                );
                if n == 0 {
                    Outgoing::Client
                } else {
                    self.fe.pins.add_pipelined(n as u64);
                    Outgoing::Bytes(&self.exec_buf)
                }
            }
        };
        let checksum = if self.replay.armed {
            let max = self.fe.shared.clusters[self.cluster]
                .topology
                .config
                .transaction_replay_max_size;
            match outgoing {
                Outgoing::Client => self.replay.record(
                    &self.io.rbuf[..raw_len],
                    reply_seq,
                    self.last_insert_id,
                    max,
                ),
                Outgoing::Bytes(b) => self.replay.record(b, reply_seq, self.last_insert_id, max),
                Outgoing::Sent => self.replay.decline(ReplayDecline::Command),
            }
            self.replay.recording().then_some(&mut self.replay.sum)
        } else {
            None
        };
        let result = relay::forward(
            &mut self.io,
            lease.conn(),
            raw_len,
            outgoing,
            kind,
            deprecate_eof,
            reply_seq,
            max,
            StateCapture {
                data: &mut self.state_data,
                strip: self.capabilities & caps::SESSION_TRACK == 0,
            },
            self.times.clock,
            checksum,
        )
        .await;
        (result, reused)
    }

    async fn finish_forward(
        &mut self,
        result: Result<relay::Relayed, RelayError>,
        kind: ResponseKind,
        effect: Effect,
        init_db: Option<Vec<u8>>,
        set_option: Option<u16>,
    ) -> Result<(), End> {
        match result {
            Ok(r) => {
                if r.last_status != 0 {
                    self.status = r.last_status;
                }
                let conn = self.lease.as_mut().expect("ensured").conn();
                if kind == ResponseKind::ResultSets && !conn.tracking {
                    // A `USE` may have run: the connection's schema is no longer known for
                    // whoever borrows it next.
                    conn.schema = Schema::Unknown;
                }
                let init_db_ran = !r.saw_error && init_db.is_some();
                if !r.saw_error {
                    if let Some(schema) = init_db {
                        conn.schema = Schema::Known(schema.clone());
                        self.schema = Some(schema);
                    }
                    if let Some(o) = set_option {
                        // 0 = MYSQL_OPTION_MULTI_STATEMENTS_ON, 1 = OFF: the connection now
                        // carries the flag, so it must be pooled under the matching key.
                        if o == 0 {
                            self.capabilities |= caps::MULTI_STATEMENTS;
                        } else {
                            self.capabilities &= !caps::MULTI_STATEMENTS;
                        }
                        conn.key.caps = self.capabilities & caps::SESSION_AFFECTING;
                        self.conn_key = None;
                    }
                }
                if kind != ResponseKind::None {
                    // A prepared statement's digest was computed when it was prepared.
                    let meta = self.executed_statement(effect);
                    let digest = match &meta {
                        Some(m) => Some((m.digest_hash, &*m.digest)),
                        None => self.digest_hash.map(|h| (h, self.digest.as_slice())),
                    };
                    self.record_statement(&r, digest);
                }
                if let Some(scan) = effect.scan() {
                    self.remember_previous_statement(&scan, &r).await?;
                }
                let assigned_user_vars = !self.assigned_user_vars.is_empty();
                if assigned_user_vars {
                    self.read_back_user_vars().await?;
                }
                let state_changed = self.after_statement(effect, &r);
                self.replay_statement_ended(
                    effect,
                    state_changed || init_db_ran || assigned_user_vars,
                    r.error.as_ref().map(|e| e.code),
                );
                if let Some(l) = self.lease.as_mut() {
                    if l.conn().has_followers() {
                        // Pinned by what a pipelined SELECT did (a stored function, say):
                        // the sessions behind it run their statements again elsewhere.
                        tracing::info!(connection = self.id, "pinned with statements pipelined behind; they run again on another connection");
                        if let Err(e) = l.conn().shed_followers().await {
                            return self.backend_failed(None, &e).await;
                        }
                    }
                }
                Ok(())
            }
            Err(reason @ (RelayError::ClientWrite(_) | RelayError::ClientInfile(_))) => {
                self.state_data.clear();
                tracing::debug!(connection = self.id, %reason, "client failed during a statement");
                // The backend's answer was cut short: its connection cannot be reused.
                if let Some(l) = self.take_lease() {
                    l.discard();
                }
                Err(End::ClientGone)
            }
            Err(RelayError::Backend { error, err_seq }) => {
                let message = error.message;
                self.state_data.clear();
                FrontendMetrics::inc(&self.fe.shared.metrics.backend_errors);
                if let Some(l) = self.take_lease() {
                    l.discard();
                }
                tracing::warn!(connection = self.id, peer = %self.peer, %message, "backend connection lost");
                if let Some(seq) = err_seq {
                    send_err(
                        &mut self.io,
                        seq,
                        &ErrPacket::new(
                            codes::BACKEND_LOST,
                            format!("Lost connection to backend during query: {message}"),
                        ),
                    )
                    .await;
                }
                // The session's server-side state (transaction, variables) died with the
                // backend connection; ending the client connection says so unmistakably.
                Err(End::BackendLost(message))
            }
        }
    }

    /// A backend connection failed under a command manifold sent on its own. The connection
    /// is closed. When it held the session's server-side state (a transaction, locks...),
    /// that state is gone: the client is told and disconnected, as when a statement's
    /// connection breaks; otherwise only this command fails.
    pub(super) async fn backend_failed(
        &mut self,
        seq: Option<u8>,
        e: &BackendError,
    ) -> Result<(), End> {
        FrontendMetrics::inc(&self.fe.shared.metrics.backend_errors);
        if let Some(l) = self.take_lease() {
            l.discard();
        }
        tracing::warn!(connection = self.id, peer = %self.peer, error = %e, "backend connection lost");
        let fatal = self.pins.holds_server_state();
        if let Some(seq) = seq {
            self.send_err_packet(seq, &e.to_err_packet()).await?;
        }
        if fatal {
            return Err(End::BackendLost(e.message.clone()));
        }
        self.pins.hold_for_next(false, &self.fe.pins, self.id);
        Ok(())
    }

    /// Records an answered statement: its stages, its digest's row (`digest`: hash and
    /// text), the slow query log.
    fn record_statement(&self, r: &relay::Relayed, digest: Option<(u64, &[u8])>) {
        let fe = &self.fe;
        fe.telemetry.count_statement(r.saw_error);
        let t = self.times;
        if !t.clock {
            return;
        }
        let settings = &fe.shared.settings;
        let histograms = settings.stage_histograms.load(Ordering::Relaxed);
        let w = &fe.telemetry;
        if histograms {
            w.record_span(Stage::ClientRead, t.first_byte.or(t.read), t.read);
            w.record_span(Stage::Route, t.read, t.routed);
            w.record_span(Stage::PoolWait, t.routed, t.acquired);
            w.record_span(Stage::BackendFirstByte, r.sent_at, r.first_byte_at);
            w.record_span(Stage::BackendLastByte, r.sent_at, r.last_byte_at);
            w.record_span(Stage::ClientWrite, r.last_byte_at, r.flushed_at);
            w.record_span(Stage::Total, t.read, r.flushed_at);
        }
        let (Some(read), Some(done)) = (t.read, r.flushed_at) else {
            return;
        };
        let elapsed_ns = clock::span_ns(read, done);
        let replica = self.lease_node != self.primary();
        let rows = if r.result_set {
            r.rows
        } else {
            r.affected_rows
        };
        if let Some((hash, text)) = digest {
            if settings.query_digests.load(Ordering::Relaxed) {
                let schema = self.schema.as_deref().unwrap_or_default();
                fe.digests.borrow_mut().record(
                    hash,
                    text,
                    schema,
                    manifold_sql_lex::digest_hash(schema),
                    settings.query_digests_max.load(Ordering::Relaxed),
                    crate::digests::Executed {
                        elapsed_ns,
                        rows,
                        error: r.saw_error,
                        replica,
                    },
                );
            }
        }
        let slow_ns = settings.slow_query_threshold_ns.load(Ordering::Relaxed);
        if slow_ns > 0 && elapsed_ns >= slow_ns {
            w.count_slow();
            let statement = self.handle.info().statement.map(|(s, _)| s);
            tracing::warn!(
                target: "manifold::slow_query",
                connection = self.id,
                user = %self.user.name,
                schema = %String::from_utf8_lossy(self.schema.as_deref().unwrap_or_default()),
                node = %self.topology().nodes[self.lease_node].addr,
                duration_ms = elapsed_ns as f64 / 1e6,
                rows,
                error = r.saw_error,
                statement = statement.as_deref().unwrap_or(""),
                "slow query"
            );
        }
    }
}
