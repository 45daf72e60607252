//! What an answer did to the session: the variables and schema the server reports changed,
//! the insert id, transaction status, pins, and the user variables a statement assigned (read
//! back so they follow the session to its next connection).

use manifold_backend::state::{is_carried, is_tracking_variable};
use manifold_backend::{Lease, Schema, TrackedChanges};
use manifold_mysql_proto::consts::status;
use manifold_router::Gtid;
use manifold_sql_lex::Scan;

use super::decode::Effect;
use super::{End, Session};
use crate::pins::PinReason;
use crate::relay;

impl Session {
    /// Takes in what a statement's answer said about the session's state: tracked
    /// variables and schema, insert id, transaction status; and what the lexer saw. True
    /// when the session's variables or schema changed.
    pub(super) fn after_statement(&mut self, effect: Effect, r: &relay::Relayed) -> bool {
        let mut changed = false;
        let id = self.id;
        let fe = self.fe.clone();
        let counters = &*fe.pins;
        let mut explained = false;
        if !self.state_data.is_empty() {
            tracing::trace!(connection = id, data = ?String::from_utf8_lossy(&self.state_data), "session state changes");
            let mut changes = TrackedChanges::decode(&self.state_data);
            self.state_data.clear();
            let mut last_gtid = None;
            let conn = self.lease.as_mut().map(Lease::conn);
            let own_gtids = changes.as_mut().and_then(|t| t.gtids.take());
            match changes {
                Some(t) => {
                    let mut conn = conn;
                    for (name, value) in &t.vars {
                        if is_tracking_variable(name) {
                            self.pins.pin(PinReason::SessionTracking, counters, id);
                            continue;
                        }
                        if !is_carried(name) {
                            if name == b"last_gtid" {
                                last_gtid = Gtid::parse(value);
                            }
                            explained = true;
                            continue;
                        }
                        if name == b"sql_log_bin" && (value == b"OFF" || value == b"0") {
                            self.pins.pin(PinReason::SqlLogBin, counters, id);
                        }
                        self.vars.set(name, value);
                        changed = true;
                        if let Some(c) = conn.as_deref_mut() {
                            c.vars.set(name, value);
                        }
                        explained = true;
                    }
                    if let Some(schema) = t.schema {
                        if let Some(c) = conn {
                            c.schema = Schema::Known(schema.clone());
                        }
                        self.schema = Some(schema);
                        self.schema_checked = true;
                        explained = true;
                        changed = true;
                    }
                    if t.state_changed && !explained {
                        let known = effect.scan().is_some_and(|s| s.has(Scan::UNREPORTED_STATE));
                        if !known {
                            self.pins.pin(PinReason::UntrackedState, counters, id);
                        }
                    }
                }
                None => self.pins.pin(PinReason::UntrackedState, counters, id),
            }
            if let Some(g) = own_gtids {
                last_gtid = Some(Gtid::parse(&g).unwrap_or(Gtid::Unreadable));
            }
            if let Some(g) = last_gtid {
                self.causal.note_write(g, self.cluster, self.lease_node);
            }
        }
        if let Some(collation) = self.pending_collation.take() {
            if !r.saw_error {
                changed = true;
                self.vars.set(b"collation_connection", &collation);
                if let Some(l) = self.lease.as_mut() {
                    l.conn().vars.set(b"collation_connection", &collation);
                }
            }
        }
        if r.last_insert_id != 0 {
            self.last_insert_id = r.last_insert_id;
            if let Some(l) = self.lease.as_mut() {
                l.conn().last_insert_id = r.last_insert_id;
            }
            self.pins.release(PinReason::LastInsertIdExpr, counters, id);
        }
        // Any command may start or end a transaction (a prepared COMMIT, for one).
        let in_transaction = self.status & status::IN_TRANS != 0;
        self.pins.transaction(in_transaction, counters, id);
        let mut hold = self.previous.asked_by_prepared && r.leaves_info();
        if let Some(scan) = effect.scan() {
            self.pins
                .after_query(&scan, !r.saw_error, in_transaction, counters, id);
            hold |= scan.has(Scan::CALC_FOUND_ROWS);
        }
        if let Some(stmt) = effect.statement() {
            self.after_statement_command(effect, stmt, r);
            self.pins.statements(
                self.stmts.any_cursor(),
                self.stmts.any_long_data(),
                counters,
                id,
            );
        }
        self.pins.hold_for_next(hold, counters, id);
        self.release_if_unpinned();
        changed
    }

    /// Lists in `assigned_user_vars` the user variables the command at the front of the
    /// client's buffer assigns, so their new values can be read back after it.
    pub(super) fn note_assigned_user_vars(&mut self, raw_len: usize, effect: Effect) {
        self.assigned_user_vars.clear();
        if !effect.scan().is_some_and(|s| s.has(Scan::USER_VARIABLE)) {
            return;
        }
        match effect {
            Effect::Query(_) => {
                let max = self.max_packet();
                if let Ok(Some(p)) =
                    manifold_mysql_proto::scan_logical(&self.io.rbuf[..raw_len], max)
                {
                    let payload = p.payload(&self.io.rbuf);
                    manifold_sql_lex::assigned_user_variables(
                        &payload[1..],
                        &mut self.assigned_user_vars,
                    );
                }
            }
            Effect::Execute { id, .. } => {
                if let Some(s) = self.stmts.get_mut(id) {
                    manifold_sql_lex::assigned_user_variables(
                        &s.meta.sql,
                        &mut self.assigned_user_vars,
                    );
                }
            }
            _ => {}
        }
    }

    /// Reads back the user variables the statement just answered assigned, so they follow
    /// the session to whatever connection it borrows next. If the server will not say, the
    /// session stays on this connection; if the connection is lost, so are the variables,
    /// and the session ends as a server's would.
    pub(super) async fn read_back_user_vars(&mut self) -> Result<(), End> {
        let names = std::mem::take(&mut self.assigned_user_vars);
        let conn = self.lease.as_mut().expect("held while answering").conn();
        let outcome = conn.capture_user_vars(&names).await;
        match outcome {
            Ok(Ok(values)) => {
                for (name, value) in names.iter().zip(values) {
                    self.user_vars.set(name, &value);
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(connection = self.id, error = %e.message_lossy(), "could not read back user variables; the session stays on its backend connection");
                self.pins
                    .pin(PinReason::UserVariable, &self.fe.pins, self.id);
            }
            Err(e) => {
                if let Some(l) = self.take_lease() {
                    l.discard();
                }
                tracing::warn!(connection = self.id, peer = %self.peer, error = %e, "backend connection lost reading back user variables");
                return Err(End::BackendLost(e.to_string()));
            }
        }
        self.assigned_user_vars = names;
        self.assigned_user_vars.clear();
        Ok(())
    }
}
