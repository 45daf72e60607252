//! Transaction replay: an open transaction's statements are kept (as sent to the backend)
//! with a checksum of each answer as relayed; when the transaction's connection is lost
//! before a statement that may commit, the statements run again on the primary once one
//! answers, and the session goes on unnoticed when every answer sums as before.
//!
//! Recording costs nothing outside transactions (one branch per statement); inside, one copy
//! of each statement into a buffer the session reuses and a streaming hash of its answer.
//! What the client had received is what is compared, so a replay that read other rows, got
//! another insert id or another error is caught and never goes on silently.

use manifold_backend::{BackendConn, BackendError, ErrorKind, RetryType};
use manifold_io::ReadError;
use manifold_mysql_proto::codes;
use manifold_mysql_proto::consts::{caps, status};
use manifold_mysql_proto::packet::HEADER_LEN;
use manifold_mysql_proto::packets::{ErrPacket, OkPacket};
use manifold_mysql_proto::{Progress, ResponseKind, ResponseTracker};
use manifold_router::NodeId;
use manifold_sql_lex::Verb;
use tokio::io::AsyncWriteExt;

use super::decode::Effect;
use super::lease::Unready;
use super::{End, Session};
use crate::metrics::{FrontendMetrics, ReplayDecline};
use crate::relay::AnswerChecksum;

/// Buffers grown past these sizes by a transaction are freed when it ends: an idle session
/// keeps little.
const KEEP_BYTES: usize = 4 * 1024;
const KEEP_ENTRIES: usize = 64;

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Where the statement's bytes end in `ReplayLog::bytes` (at most
    /// `routing.transaction_replay_max_size`, 1 GiB).
    end: u32,
    /// The sequence id of its answer's first packet.
    reply_seq: u8,
    checksum: u64,
}

/// The statements of the session's open transaction, kept for a replay.
#[derive(Debug, Default)]
pub(super) struct ReplayLog {
    /// The statements back to back, as sent (the statement running now last, not yet in
    /// `entries`).
    bytes: Vec<u8>,
    entries: Vec<Entry>,
    /// The statement being forwarded is recorded (set for the length of one `forward`).
    pub(super) armed: bool,
    /// The session was in a transaction when the statement being forwarded was armed.
    pub(super) armed_in_transaction: bool,
    /// Where the statement running now begins in `bytes`, once its bytes went out.
    pending: Option<(usize, u8)>,
    /// The sum of the running statement's answer.
    pub(super) sum: AnswerChecksum,
    /// The open transaction will not be replayed, and why.
    declined: Option<ReplayDecline>,
    /// `LAST_INSERT_ID()` of the session when the transaction began.
    start_last_insert_id: u64,
    /// When the transaction's first statement was kept.
    started: Option<std::time::Instant>,
}

/// What one attempt at running the kept statements again found.
enum Rerun {
    Same,
    Differs,
    /// The server the transaction ran on never went away (see [`Session::replay_once`]).
    SameServer,
}

/// What became of a transaction whose connection was lost.
pub(super) enum Replay {
    /// Its statements ran again and answered the same: the session holds the new
    /// connection, and the interrupted command may be sent on it.
    Done,
    /// Not replayed: the loss goes on as a lost connection does.
    Declined,
    /// The client was answered (an error), and the session ends.
    Ended(End),
}

impl ReplayLog {
    fn statement_begins(&mut self, last_insert_id: u64) {
        if let Some((start, _)) = self.pending.take() {
            self.bytes.truncate(start);
        }
        if self.entries.is_empty() && self.declined.is_none() {
            self.start_last_insert_id = last_insert_id;
            self.started = Some(std::time::Instant::now());
        }
        self.sum = AnswerChecksum::default();
    }

    /// Keeps the bytes of the statement about to go out (up to `max` bytes in all).
    pub(super) fn record(&mut self, command: &[u8], reply_seq: u8, last_insert_id: u64, max: u64) {
        self.statement_begins(last_insert_id);
        if self.declined.is_some() {
            return;
        }
        let size = self.bytes.len()
            + command.len()
            + (self.entries.len() + 1) * std::mem::size_of::<Entry>();
        if size as u64 > max {
            self.decline(ReplayDecline::TooLarge);
            return;
        }
        self.pending = Some((self.bytes.len(), reply_seq));
        self.bytes.extend_from_slice(command);
    }

    /// The running statement's answer is being summed for the log.
    pub(super) fn recording(&self) -> bool {
        self.declined.is_none()
    }

    /// The open transaction will not be replayed (the first reason counts).
    pub(super) fn decline(&mut self, reason: ReplayDecline) {
        if self.declined.is_none() {
            self.declined = Some(reason);
            self.release();
        }
    }

    /// The statement ran; `in_transaction`: the server's status after it.
    pub(super) fn statement_ended(&mut self, in_transaction: bool) {
        if !in_transaction {
            // No transaction (any more): nothing to keep.
            self.release();
            self.declined = None;
            return;
        }
        if let Some((_, reply_seq)) = self.pending.take() {
            if self.sum.local_infile {
                self.decline(ReplayDecline::LocalInfile);
                return;
            }
            self.entries.push(Entry {
                end: self.bytes.len() as u32,
                reply_seq,
                checksum: self.sum.finish(),
            });
        }
    }

    /// The session was reset: no transaction any more.
    pub(super) fn forget(&mut self) {
        self.release();
        self.declined = None;
    }

    /// Forgets the statements, freeing the buffers a large transaction grew.
    fn release(&mut self) {
        self.pending = None;
        if self.bytes.capacity() > KEEP_BYTES {
            self.bytes = Vec::new();
        } else {
            self.bytes.clear();
        }
        if self.entries.capacity() > KEEP_ENTRIES {
            self.entries = Vec::new();
        } else {
            self.entries.clear();
        }
    }
}

/// ER_LOCK_DEADLOCK: the server rolled the transaction back.
const DEADLOCK: u16 = 1213;
/// ER_LOCK_WAIT_TIMEOUT: the transaction is rolled back with `innodb_rollback_on_timeout`.
const LOCK_WAIT_TIMEOUT: u16 = 1205;

/// The statement may commit the transaction (or ends it in a way whose outcome matters), so
/// it must not run again after its connection was lost: anything but one plain statement that
/// cannot commit. `ROLLBACK` may run again: the transaction was rolled back either way.
fn may_commit(effect: Effect) -> bool {
    let Some(scan) = effect.scan() else {
        return true;
    };
    scan.statements > 1
        || !matches!(
            scan.verb,
            Verb::Select
                | Verb::Insert
                | Verb::Update
                | Verb::Delete
                | Verb::Replace
                | Verb::With
                | Verb::Show
                | Verb::Describe
                | Verb::Explain
                | Verb::Help
                | Verb::Do
                | Verb::Rollback
        )
}

impl Session {
    /// Whether the command about to be forwarded is kept for a replay: replay is on and the
    /// session is in a transaction, or the command may begin one. Declines the transaction
    /// when the command is one that cannot be kept.
    pub(super) fn arm_replay(&mut self, effect: Effect, kind: ResponseKind) {
        let in_transaction = self.status & status::IN_TRANS != 0;
        self.replay.armed_in_transaction = in_transaction;
        let may_begin = self.status & status::AUTOCOMMIT == 0
            || effect
                .scan()
                .is_some_and(|s| matches!(s.verb, Verb::Begin | Verb::Start));
        if !in_transaction && !may_begin {
            self.replay.armed = false;
            return;
        }
        if !self.topology().config.transaction_replay {
            self.replay.decline(ReplayDecline::Disabled);
            self.replay.armed = false;
            return;
        }
        let text_query = matches!(effect, Effect::Query(_)) && kind == ResponseKind::ResultSets;
        // XA and procedures may commit inside, whatever the status says after them.
        let commits_inside = effect
            .scan()
            .is_some_and(|s| matches!(s.verb, Verb::Xa | Verb::Call));
        if !text_query || commits_inside {
            self.replay.decline(ReplayDecline::Command);
        } else if self.visit.is_some() {
            self.replay.decline(ReplayDecline::NotPrimary);
        }
        self.replay.armed = self.replay.declined.is_none();
    }

    /// After the command ran: keeps it (and its answer's sum) while the transaction is open,
    /// forgets the transaction once none is. A change of the session's state inside the
    /// transaction (variables, user variables, schema) declines it: the new connection is
    /// brought to the session's state as it is now, not as it was when the transaction began.
    pub(super) fn replay_statement_ended(
        &mut self,
        effect: Effect,
        state_changed: bool,
        error: Option<u16>,
    ) {
        let in_transaction = self.status & status::IN_TRANS != 0;
        let armed = std::mem::take(&mut self.replay.armed);
        if !armed
            && !in_transaction
            && self.replay.declined.is_none()
            && self.replay.entries.is_empty()
        {
            return;
        }
        if in_transaction && !armed {
            // A transaction begun by a statement that was not kept (`XA START`, a `CALL`)
            // cannot be begun again.
            self.replay.decline(ReplayDecline::Command);
        }
        if error == Some(codes::CONNECTION_KILLED.code) {
            // The statement's connection was killed on the server.
            self.replay.decline(ReplayDecline::Killed);
        }
        // `SET` commits only when it ends the transaction (`autocommit = 1`): then no
        // transaction is open after it, and the log is let go below.
        let set = effect
            .scan()
            .is_some_and(|s| s.verb == Verb::Set && s.statements == 1);
        if armed && self.replay.armed_in_transaction && in_transaction && may_commit(effect) && !set
        {
            // It may have committed what came before and left a transaction open (`BEGIN`
            // inside one, `COMMIT AND CHAIN`, `completion_type = 1`, several statements,
            // `SAVEPOINT`...), or failed to: the kept statements may be committed work.
            self.replay.decline(ReplayDecline::Command);
        }
        if armed && in_transaction && effect.scan().is_some_and(|s| s.statements > 1) {
            // Several statements in one query may have committed some and begun another
            // transaction (`INSERT ...; COMMIT; BEGIN; ...`), whatever the status was before.
            self.replay.decline(ReplayDecline::Command);
        }
        if matches!(error, Some(DEADLOCK | LOCK_WAIT_TIMEOUT)) {
            // The server may have rolled the transaction back (a deadlock always does) while
            // the status the session knows still says it is open: what follows may be
            // autocommitted statements, which must never run again.
            self.replay.decline(ReplayDecline::Command);
        }
        if in_transaction && state_changed {
            self.replay.decline(ReplayDecline::SessionState);
        }
        if in_transaction && self.lease.is_some() && self.lease_node != self.primary() {
            self.replay.decline(ReplayDecline::NotPrimary);
        }
        self.replay.statement_ended(in_transaction);
    }

    /// The session's connection, idle in a transaction, was lost (`why`): the transaction
    /// runs again at once, before the client's next command is read. `None`: it did, the
    /// session goes on. Else the session ends (the client's connection closes, as when no
    /// transaction was open), the reason counted. `killed`: the server said it killed the
    /// connection (`KILL`, ERR 1927) before closing it.
    pub(super) async fn replay_idle(&mut self, why: &str, killed: bool) -> Option<End> {
        if self.status & status::IN_TRANS == 0 {
            return Some(End::BackendLost(why.to_owned()));
        }
        if killed {
            self.replay.decline(ReplayDecline::Killed);
        }
        if !self.pins.replayable() {
            self.replay.decline(ReplayDecline::SessionState);
        }
        if let Some(reason) = self.replay.declined {
            FrontendMetrics::inc(&self.fe.shared.metrics.replay_declined[reason as usize]);
            tracing::info!(
                connection = self.id,
                reason = reason.name(),
                "transaction not replayed"
            );
            return Some(End::BackendLost(why.to_owned()));
        }
        tracing::info!(connection = self.id, %why, statements = self.replay.entries.len(), "backend connection lost while the session was idle in a transaction; replaying it");
        match self.run_replay(None).await {
            Replay::Done => None,
            Replay::Ended(end) => Some(end),
            Replay::Declined => Some(End::BackendLost(why.to_owned())),
        }
    }

    /// The session's transaction connection failed: under `effect` with `error`, or (`None`)
    /// while the session was idle. Decides whether its transaction runs again, and runs it.
    pub(super) async fn replay_transaction(
        &mut self,
        error: Option<&BackendError>,
        effect: Effect,
        raw_len: usize,
        reply_seq: u8,
    ) -> Replay {
        if self.status & status::IN_TRANS == 0
            || error.is_some_and(|e| !matches!(e.kind, ErrorKind::Lost))
        {
            return Replay::Declined;
        }
        let metrics = &self.fe.shared.metrics;
        if error.is_none() {
            // Nothing of the command was sent: even a COMMIT may follow the replay.
        } else if error.is_some_and(|e| matches!(e.retry, RetryType::Decided(false))) {
            // Part of the answer reached the client (or the client's file was being sent).
            self.replay.decline(ReplayDecline::MidResult);
        } else if may_commit(effect) {
            FrontendMetrics::inc(&metrics.commit_outcome_unknown);
            let error = error.map_or("", |e| e.message.as_str());
            tracing::warn!(connection = self.id, peer = %self.peer, %error, "backend connection lost during a statement that may commit; its outcome is unknown");
            let e = ErrPacket::new(
                codes::COMMIT_OUTCOME_UNKNOWN,
                format!("Lost connection to backend during a statement that may commit the transaction (COMMIT, or one committing implicitly); whether it committed is unknown, and it was not run again: {error}"),
            );
            return self.replay_ends(Some((raw_len, reply_seq)), e).await;
        }
        if !self.pins.replayable() {
            self.replay.decline(ReplayDecline::SessionState);
        }
        if let Some(reason) = self.replay.declined {
            FrontendMetrics::inc(&metrics.replay_declined[reason as usize]);
            tracing::info!(
                connection = self.id,
                reason = reason.name(),
                "transaction not replayed"
            );
            return Replay::Declined;
        }
        tracing::info!(
            connection = self.id,
            error = error.map_or("", |e| e.message.as_str()),
            statements = self.replay.entries.len(),
            "backend connection lost in a transaction; replaying it"
        );
        if let Some(l) = self.take_lease() {
            l.discard();
        }
        self.run_replay(Some((raw_len, reply_seq))).await
    }

    /// Waits for a primary and runs the transaction's statements there, until they ran or
    /// `routing.failover_timeout` is over.
    /// `answer`: the command waiting for an answer (its length and reply sequence id), if any.
    async fn run_replay(&mut self, answer: Option<(usize, u8)>) -> Replay {
        let mut deadline = None;
        let lost_node = self.lease_node;
        loop {
            if let Err(e) = self.wait_for_primary(&mut deadline).await {
                let reason = ReplayDecline::NoPrimary;
                FrontendMetrics::inc(&self.fe.shared.metrics.replay_declined[reason as usize]);
                tracing::warn!(connection = self.id, error = %e.message_lossy(), "transaction not replayed");
                return Replay::Declined;
            }
            match self.replay_once(lost_node).await {
                Ok(Rerun::SameServer) => {
                    if let Some(l) = self.take_lease() {
                        l.discard();
                    }
                    let reason = ReplayDecline::Killed;
                    FrontendMetrics::inc(&self.fe.shared.metrics.replay_declined[reason as usize]);
                    tracing::info!(connection = self.id, "the transaction's server is up since before it began: its connection was killed (or cut), so the transaction is not brought back");
                    return Replay::Declined;
                }
                Ok(Rerun::Same) => {
                    FrontendMetrics::inc(&self.fe.shared.metrics.replays);
                    tracing::info!(connection = self.id, node = %self.topology().nodes[self.lease_node].addr, "transaction replayed");
                    return Replay::Done;
                }
                Ok(Rerun::Differs) => {
                    FrontendMetrics::inc(&self.fe.shared.metrics.replay_mismatches);
                    tracing::warn!(
                        connection = self.id,
                        "transaction replay gave different results; rolled back"
                    );
                    let e = ErrPacket::new(
                        codes::TRANSACTION_REPLAY_MISMATCH,
                        "The backend connection was lost and the transaction was run again on the primary, but its results differed from those already returned; the transaction was rolled back",
                    );
                    return self.replay_ends(answer, e).await;
                }
                Err(e) => {
                    // Another broken connection (a pooled one to the old server, say), or
                    // the primary is not back yet: try again until failover_timeout.
                    tracing::debug!(connection = self.id, error = %e, "replay attempt failed");
                    if let Some(l) = self.take_lease() {
                        l.discard();
                    }
                    let until = deadline.expect("set by wait_for_primary");
                    if tokio::time::Instant::now() >= until {
                        let reason = ReplayDecline::NoPrimary;
                        FrontendMetrics::inc(
                            &self.fe.shared.metrics.replay_declined[reason as usize],
                        );
                        return Replay::Declined;
                    }
                    let step = tokio::time::Instant::now() + std::time::Duration::from_millis(50);
                    tokio::time::sleep_until(step.min(until)).await;
                }
            }
        }
    }

    /// One attempt: a connection to the primary in the session's state, then every kept
    /// statement, each answer summed. `Same` when all sums match (the connection is the
    /// session's); `Differs` at the first that differs (the connection is closed). When the
    /// primary is the node the transaction lost (`lost_node`) and has been up since before
    /// the transaction began, its connection was killed (`KILL`, which MariaDB answers with
    /// a silent close) or cut, not lost with its server: `SameServer`, nothing is run.
    async fn replay_once(&mut self, lost_node: NodeId) -> Result<Rerun, BackendError> {
        let primary = self.primary();
        match self.ensure_backend(primary, false).await {
            Ok(_) => {}
            Err(Unready::Failed(e)) => return Err(e),
            Err(Unready::Refused(e)) => {
                return Err(BackendError::new(
                    ErrorKind::Lost,
                    format!("restoring the session: {}", e.message_lossy()),
                ))
            }
        }
        let deprecate_eof = self.capabilities & caps::DEPRECATE_EOF != 0;
        let last_insert_id = self.replay.start_last_insert_id;
        let started = self.replay.started;
        let conn = self.lease.as_mut().expect("ensured").conn();
        if primary == lost_node {
            if let Some(started) = started {
                let uptime = match conn.query_rows(b"SHOW GLOBAL STATUS LIKE 'Uptime'").await? {
                    Ok(rows) => rows
                        .rows
                        .first()
                        .and_then(|r| r.get(1).cloned().flatten())
                        .and_then(|v| std::str::from_utf8(&v).ok()?.parse::<u64>().ok()),
                    Err(_) => None,
                };
                // Uptime counts whole seconds: a second of margin.
                if uptime.is_some_and(|u| u > started.elapsed().as_secs() + 1) {
                    return Ok(Rerun::SameServer);
                }
            }
        }
        if conn.last_insert_id != last_insert_id {
            match conn
                .sync_vars(&self.vars, &self.user_vars, Some(last_insert_id))
                .await
            {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    return Err(BackendError::new(
                        ErrorKind::Lost,
                        format!("restoring LAST_INSERT_ID(): {}", e.message_lossy()),
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        let mut start = 0;
        let mut same = true;
        for entry in &self.replay.entries {
            let command = &self.replay.bytes[start..entry.end as usize];
            start = entry.end as usize;
            let sum = rerun(conn, command, entry.reply_seq, deprecate_eof).await?;
            if sum != entry.checksum {
                same = false;
                break;
            }
        }
        if !same {
            if let Some(l) = self.take_lease() {
                l.discard();
            }
            return Ok(Rerun::Differs);
        }
        // The statements left the connection as the lost one was: its insert id too.
        conn.last_insert_id = self.last_insert_id;
        Ok(Rerun::Same)
    }

    /// The client gets `e` for the interrupted command (`answer`: its length and reply
    /// sequence id; none: the session was idle) and the session ends: its transaction is
    /// gone, which carrying on would hide.
    async fn replay_ends(&mut self, answer: Option<(usize, u8)>, e: ErrPacket) -> Replay {
        if let Some(l) = self.take_lease() {
            l.discard();
        }
        let message = e.message_lossy();
        if let Some((raw_len, reply_seq)) = answer {
            self.io.consume(raw_len);
            let _ = self.send_err_packet(reply_seq, &e).await;
        }
        Replay::Ended(End::BackendLost(message))
    }
}

/// Sends `command` on `conn` and reads its whole answer, summed as [`crate::relay::forward`]
/// sums what it relays.
async fn rerun(
    conn: &mut BackendConn,
    command: &[u8],
    first_seq: u8,
    deprecate_eof: bool,
) -> Result<u64, BackendError> {
    let lost = |m: String| BackendError::new(ErrorKind::Lost, m);
    conn.io
        .stream
        .write_all(command)
        .await
        .map_err(|e| lost(format!("sending to backend: {e}")))?;
    let mut tracker = ResponseTracker::new(ResponseKind::ResultSets, deprecate_eof, first_seq);
    if conn.tracking {
        tracker = tracker.capturing_session_state();
    }
    let mut sum = AnswerChecksum::default();
    let mut need_more = false;
    let mut report_pending = false;
    loop {
        if (conn.io.rbuf.is_empty() && !report_pending) || need_more {
            need_more = false;
            conn.io.fill().await.map_err(|e| match e {
                ReadError::Closed => lost("backend closed the connection".into()),
                e => lost(format!("reading from backend: {e}")),
            })?;
        }
        let (n, progress) = tracker.feed(&conn.io.rbuf).map_err(|e| {
            BackendError::new(
                ErrorKind::Protocol,
                format!("backend answer does not follow the protocol: {e}"),
            )
        })?;
        if progress == Progress::SessionState {
            let start = n - tracker.state_packet_len();
            let packet = &conn.io.rbuf[start..n];
            let ok = OkPacket::decode(&packet[HEADER_LEN..], caps::SESSION_TRACK).map_err(|e| {
                BackendError::new(
                    ErrorKind::Protocol,
                    format!("backend sent a malformed OK packet: {e}"),
                )
            })?;
            sum.bytes(&conn.io.rbuf[..start]);
            sum.state_ok(&packet[..HEADER_LEN], &ok);
            conn.io.consume(n);
            report_pending = true;
            continue;
        }
        report_pending = false;
        sum.bytes(&conn.io.rbuf[..n]);
        conn.io.consume(n);
        match progress {
            Progress::More | Progress::SessionState => {}
            Progress::NeedMore => need_more = true,
            Progress::Done => break,
            Progress::LocalInfile => {
                // Never kept (see `ReplayLog::statement_ended`).
                return Err(BackendError::new(
                    ErrorKind::Protocol,
                    "a replayed statement asked for a LOCAL INFILE file",
                ));
            }
        }
    }
    Ok(sum.finish())
}

/// The bytes a backend connection sent unasked begin with ERR 1927 (`KILL` of the
/// connection on the server).
pub(super) fn killed_on_server(unasked: &[u8]) -> bool {
    unasked.len() >= 7
        && unasked[4] == 0xff
        && u16::from_le_bytes([unasked[5], unasked[6]]) == codes::CONNECTION_KILLED.code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(sql: &str) -> Effect {
        Effect::Query(manifold_sql_lex::scan(sql.as_bytes()))
    }

    #[test]
    fn only_plain_statements_that_cannot_commit_run_again() {
        for sql in [
            "SELECT * FROM t",
            "INSERT INTO t VALUES (1)",
            "UPDATE t SET a = 1",
            "DELETE FROM t",
            "ROLLBACK",
        ] {
            assert!(!may_commit(query(sql)), "{sql}");
        }
        for sql in [
            "COMMIT",
            "commit work",
            "BEGIN",
            "CREATE TABLE u (a INT)",
            "SET autocommit = 1",
            "CALL p()",
            "INSERT INTO t VALUES (1); COMMIT",
        ] {
            assert!(may_commit(query(sql)), "{sql}");
        }
        assert!(may_commit(Effect::None));
    }

    #[test]
    fn the_log_keeps_a_transaction_and_forgets_it_when_it_ends() {
        let mut log = ReplayLog::default();
        log.record(b"BEGIN", 1, 7, 1 << 20);
        log.sum.bytes(b"ok");
        log.statement_ended(true);
        log.record(b"INSERT", 1, 7, 1 << 20);
        log.statement_ended(true);
        assert_eq!(log.entries.len(), 2);
        assert_eq!(log.start_last_insert_id, 7);
        assert_eq!(&log.bytes, b"BEGININSERT");
        // A statement sent again after a loss is kept once.
        log.record(b"UPDATE", 1, 9, 1 << 20);
        log.record(b"UPDATE", 1, 9, 1 << 20);
        log.statement_ended(true);
        assert_eq!(&log.bytes, b"BEGININSERTUPDATE");
        assert_eq!(log.start_last_insert_id, 7);
        log.record(b"COMMIT", 1, 9, 1 << 20);
        log.statement_ended(false);
        assert!(log.entries.is_empty() && log.bytes.is_empty() && log.declined.is_none());
    }

    #[test]
    fn a_kill_is_told_from_other_unasked_bytes() {
        assert!(killed_on_server(b"\x14\x00\x00\x00\xff\x87\x07#70100"));
        // 1053: the server shutting down (a restart, a promotion elsewhere).
        assert!(!killed_on_server(b"\x14\x00\x00\x00\xff\x1d\x04#08S01"));
        assert!(!killed_on_server(b""));
    }

    #[test]
    fn a_transaction_past_the_limit_is_declined_and_freed() {
        let mut log = ReplayLog::default();
        log.record(b"BEGIN", 1, 0, 64);
        log.statement_ended(true);
        log.record(&[b'x'; 100], 1, 0, 64);
        log.statement_ended(true);
        assert_eq!(log.declined, Some(ReplayDecline::TooLarge));
        assert!(log.entries.is_empty() && log.bytes.is_empty());
        log.statement_ended(false);
        assert_eq!(log.declined, None);
    }
}
