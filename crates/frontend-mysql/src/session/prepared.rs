//! Prepared statements: manifold's, not a backend connection's. Preparing registers the
//! worker's statement for the text and hands the client the session's own id; each command
//! naming a statement makes it ready on the connection that runs it first.

use std::rc::Rc;

use manifold_backend::Schema;
use manifold_mysql_proto::consts::status;
use manifold_mysql_proto::packets::ErrPacket;
use manifold_mysql_proto::{codes, renumber, Command, PacketBuilder, ResponseKind};
use manifold_sql_lex::{Scan, SessionValues};
use tokio::io::AsyncWriteExt;

use super::decode::{Effect, StmtCommand};
use super::lease::Unready;
use super::{End, Session};
use crate::relay;
use crate::statements::{ExecuteLayout, StatementMeta};

fn unknown_statement(id: u32, function: &str) -> ErrPacket {
    ErrPacket::new(
        codes::UNKNOWN_STMT_HANDLER,
        format!("Unknown prepared statement handler ({id}) given to {function}"),
    )
}

impl Session {
    /// `COM_STMT_PREPARE`: prepared on a backend connection, registered as the worker's
    /// statement for its text, and answered with the session's own id for it.
    pub(super) async fn stmt_prepare(
        &mut self,
        reply_seq: u8,
        mut sql: Box<[u8]>,
    ) -> Result<(), End> {
        let scan = manifold_sql_lex::scan(&sql);
        if scan.has(Scan::CONNECTION_ID) {
            let mut text = Vec::with_capacity(sql.len());
            let id_only = SessionValues {
                connection_id: Some(self.id),
                ..SessionValues::default()
            };
            manifold_sql_lex::replace_session_values(&sql, &id_only, &mut text);
            sql = text.into();
        }
        if scan.has(Scan::ROW_COUNT | Scan::FOUND_ROWS | Scan::WARNINGS) {
            self.previous.asked_by_prepared = true;
        }
        let keep = self.fe.shared.pool.max_prepared_statements;
        let fe = self.fe.clone();
        // The schema the statement is prepared in (the session's, unchanged by a borrow that
        // succeeds), registered with it while the connection is in use.
        let schema = self.schema.clone();
        let lease = match self.ensure_backend(self.primary(), false).await {
            Ok(lease) => lease,
            Err(e) => {
                self.stmts.prepare_failed();
                self.release_if_unpinned();
                return self.send_err_packet(reply_seq, &e.to_err_packet()).await;
            }
        };
        let conn = lease.conn();
        let mut answer = match conn.prepare_evicting(&sql, keep).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                self.stmts.prepare_failed();
                self.release_if_unpinned();
                return self.send_err_packet(reply_seq, &e).await;
            }
            Err(e) => {
                self.stmts.prepare_failed();
                return self.backend_failed(Some(reply_seq), &e).await;
            }
        };
        let meta = fe.statements.borrow_mut().register(
            schema.as_deref(),
            &sql,
            answer.params,
            answer.columns,
        );
        let replaced = conn
            .stmts
            .insert(meta.global_id, answer.statement_id, answer.params);
        if let Some(old) = replaced {
            if let Err(e) = conn.close_statement(old).await {
                self.stmts.prepare_failed();
                return self.backend_failed(Some(reply_seq), &e).await;
            }
        }
        let id = self.stmts.add(meta);
        answer.raw[5..9].copy_from_slice(&id.to_le_bytes());
        if reply_seq != 1 {
            renumber(&mut answer.raw, reply_seq);
        }
        let sent = match self.io.stream.write_all(&answer.raw).await {
            Ok(()) => self.io.stream.flush().await,
            Err(e) => Err(e),
        };
        self.release_if_unpinned();
        sent.map_err(|_| End::ClientGone)
    }

    /// The prepared-statement commands other than `COM_STMT_PREPARE`, named by the client's
    /// statement id.
    pub(super) async fn stmt_command(
        &mut self,
        command: StmtCommand,
        raw_len: usize,
        first_len: usize,
        reply_seq: u8,
    ) -> Result<(), End> {
        match command {
            StmtCommand::Execute(client_id) => {
                let id = self.stmts.resolve(client_id);
                let Some(s) = self.stmts.get_mut(id) else {
                    self.io.consume(raw_len);
                    let e = unknown_statement(client_id, "mysqld_stmt_execute");
                    return self.send_err_packet(reply_seq, &e).await;
                };
                let params = s.meta.params;
                let payload = &self.io.rbuf[4..4 + first_len];
                let Some(layout) = ExecuteLayout::parse(payload, params) else {
                    self.io.consume(raw_len);
                    let e = ErrPacket::new(
                        codes::WRONG_ARGUMENTS,
                        format!("Incorrect arguments to mysqld_stmt_execute: the command is too short for the statement's {params} parameters"),
                    );
                    return self.send_err_packet(reply_seq, &e).await;
                };
                if let Some(types) = layout.types(payload, params) {
                    if s.types != types {
                        s.types.clear();
                        s.types.extend_from_slice(types);
                    }
                }
                let scan = s.meta.scan;
                let effect = Effect::Execute { id, scan, layout };
                self.forward(
                    raw_len,
                    reply_seq,
                    ResponseKind::ResultSets,
                    effect,
                    None,
                    None,
                )
                .await
            }
            StmtCommand::LongData(client_id) => {
                let id = self.stmts.resolve(client_id);
                if self.stmts.get_mut(id).is_none() {
                    // No answer to give; the server too reports this only at the execute.
                    self.io.consume(raw_len);
                    return Ok(());
                }
                let effect = Effect::LongData(id);
                self.forward(raw_len, reply_seq, ResponseKind::None, effect, None, None)
                    .await
            }
            StmtCommand::Fetch(client_id) => {
                let id = self.stmts.resolve(client_id);
                let err = match self.stmts.get_mut(id) {
                    None => unknown_statement(client_id, "mysqld_stmt_fetch"),
                    Some(s) if !s.cursor => ErrPacket::new(
                        codes::STMT_HAS_NO_OPEN_CURSOR,
                        format!("The statement ({client_id}) has no open cursor"),
                    ),
                    Some(_) => {
                        let effect = Effect::Fetch(id);
                        return self
                            .forward(raw_len, reply_seq, ResponseKind::Rows, effect, None, None)
                            .await;
                    }
                };
                self.io.consume(raw_len);
                self.send_err_packet(reply_seq, &err).await
            }
            StmtCommand::Reset(client_id) => {
                let id = self.stmts.resolve(client_id);
                let held = self.lease.is_some();
                match self.stmts.get_mut(id) {
                    None => {
                        self.io.consume(raw_len);
                        let e = unknown_statement(client_id, "mysqld_stmt_reset");
                        self.send_err_packet(reply_seq, &e).await
                    }
                    Some(s) if held && (s.cursor || s.long_data) => {
                        let effect = Effect::Reset(id);
                        self.forward(raw_len, reply_seq, ResponseKind::Single, effect, None, None)
                            .await
                    }
                    Some(s) => {
                        // Nothing of it lives on a backend connection between commands.
                        s.cursor = false;
                        s.long_data = false;
                        self.io.consume(raw_len);
                        self.send_ok(reply_seq).await
                    }
                }
            }
            StmtCommand::Close(client_id) => {
                self.io.consume(raw_len);
                let id = self.stmts.resolve(client_id);
                let Some(s) = self.stmts.remove(id) else {
                    return Ok(());
                };
                // The backend statement stays for other sessions; what this one left on it goes.
                if let (true, Some(lease)) = (s.cursor || s.long_data, self.lease.as_mut()) {
                    let conn = lease.conn();
                    if let Some(c) = conn.stmts.get(s.meta.global_id) {
                        c.bound_types.clear();
                        let backend_id = c.backend_id;
                        if let Err(e) = conn.simple_command(&Command::StmtReset(backend_id)).await {
                            self.backend_failed(None, &e).await?;
                        }
                    }
                }
                self.pins.statements(
                    self.stmts.any_cursor(),
                    self.stmts.any_long_data(),
                    &self.fe.pins,
                    self.id,
                );
                self.release_if_unpinned();
                Ok(())
            }
        }
    }

    /// Makes the session's statement `stmt` ready on the borrowed connection for the command
    /// at the front of the client's buffer: prepared there if it is not yet (in the schema
    /// the client prepared it in), the client's statement id in the command replaced with
    /// the server's, and for an execute the parameter types added when the client left them
    /// out and this server statement has not seen them. Returns whether the command to send
    /// was rebuilt in `exec_buf`.
    pub(super) async fn bind_statement(
        &mut self,
        stmt: u32,
        raw_len: usize,
        effect: Effect,
    ) -> Result<bool, Unready> {
        let keep = self.fe.shared.pool.max_prepared_statements;
        let max = self.max_packet();
        let meta = match self.stmts.get_mut(stmt) {
            Some(s) => s.meta.clone(),
            None => {
                return Err(Unready::Refused(unknown_statement(
                    stmt,
                    "mysqld_stmt_execute",
                )))
            }
        };
        let conn = self.lease.as_mut().expect("ensured").conn();
        let backend_id = if let Some(c) = conn.stmts.get(meta.global_id) {
            self.fe.telemetry.count_stmt_cache(true, 0);
            c.backend_id
        } else {
            let evictions = conn.stmts.evictions;
            let elsewhere = meta.schema.as_deref().filter(
                |want| !matches!(&conn.schema, Schema::Known(have) if have.as_slice() == *want),
            );
            if let Some(schema) = elsewhere {
                conn.use_schema(Some(schema))
                    .await
                    .map_err(Unready::lost_before_sending)?
                    .map_err(Unready::Refused)?;
            }
            let answer = conn
                .prepare_evicting(&meta.sql, keep)
                .await
                .map_err(Unready::lost_before_sending)?;
            self.fe
                .telemetry
                .count_stmt_cache(false, conn.stmts.evictions - evictions);
            if elsewhere.is_some() && self.schema.is_some() {
                // Back to the session's schema (a session without one keeps the
                // statement's: the next borrow brings the connection to the session's
                // state anyway).
                conn.use_schema(self.schema.as_deref())
                    .await
                    .map_err(Unready::lost_before_sending)?
                    .map_err(Unready::Refused)?;
            }
            let answer = answer.map_err(Unready::Refused)?;
            if answer.params != meta.params {
                conn.close_statement(answer.statement_id)
                    .await
                    .map_err(Unready::lost_before_sending)?;
                return Err(Unready::Refused(ErrPacket::new(
                        codes::NEED_REPREPARE,
                        format!("Prepared statement needs to be re-prepared: it now takes {} parameters instead of {}", answer.params, meta.params),
                    )));
            }
            conn.stmts
                .insert(meta.global_id, answer.statement_id, answer.params);
            answer.statement_id
        };
        // Command byte, then the statement id, in every prepared-statement command.
        self.io.rbuf[5..9].copy_from_slice(&backend_id.to_le_bytes());
        let Effect::Execute { layout, .. } = effect else {
            return Ok(false);
        };
        let (Some(s), Some(c)) = (self.stmts.get_mut(stmt), conn.stmts.get(meta.global_id)) else {
            return Ok(false);
        };
        if layout.has_types || s.types.is_empty() {
            if c.bound_types != s.types {
                c.bound_types.clone_from(&s.types);
            }
            return Ok(false);
        }
        if c.bound_types == s.types {
            return Ok(false);
        }
        // The client relies on types this server statement has not seen: send them.
        let packet = manifold_mysql_proto::scan_logical(&self.io.rbuf[..raw_len], max)
            .ok()
            .flatten()
            .ok_or_else(|| {
                Unready::Refused(ErrPacket::new(
                    codes::NET_READ_ERROR,
                    "Malformed COM_STMT_EXECUTE",
                ))
            })?;
        let payload = packet.payload(&self.io.rbuf);
        self.exec_buf.clear();
        let builder = PacketBuilder::begin(&mut self.exec_buf);
        layout.with_types(&payload, &s.types, &mut self.exec_buf);
        builder.finish(&mut self.exec_buf, 0);
        c.bound_types.clone_from(&s.types);
        Ok(true)
    }

    /// The prepared statement a `COM_STMT_EXECUTE` runs (its text, scan and digest).
    pub(super) fn executed_statement(&mut self, effect: Effect) -> Option<Rc<StatementMeta>> {
        match effect {
            Effect::Execute { id, .. } => self.stmts.get_mut(id).map(|s| s.meta.clone()),
            _ => None,
        }
    }

    /// What a prepared-statement command left on the backend connection: a cursor, long data,
    /// or parameter types the server may have dropped.
    pub(super) fn after_statement_command(
        &mut self,
        effect: Effect,
        stmt: u32,
        r: &relay::Relayed,
    ) {
        let Some(s) = self.stmts.get_mut(stmt) else {
            return;
        };
        let forget_types = match effect {
            Effect::Execute { layout, .. } => {
                s.long_data = false;
                s.cursor = layout.cursor && r.last_status & status::CURSOR_EXISTS != 0;
                false
            }
            Effect::Fetch(_) => {
                if r.last_status & status::LAST_ROW_SENT != 0 {
                    // The server closed the cursor and reset the statement's parameters.
                    s.cursor = false;
                    true
                } else {
                    false
                }
            }
            Effect::LongData(_) => {
                s.long_data = true;
                false
            }
            Effect::Reset(_) => {
                s.cursor = false;
                s.long_data = false;
                true
            }
            Effect::None | Effect::Query(_) => false,
        };
        if forget_types {
            let global = s.meta.global_id;
            if let Some(c) = self.lease.as_mut().and_then(|l| l.conn().stmts.get(global)) {
                c.bound_types.clear();
            }
        }
    }
}
