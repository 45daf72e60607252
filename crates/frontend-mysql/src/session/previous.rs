//! What the previous statement left for the next to ask about (`ROW_COUNT()`,
//! `FOUND_ROWS()`, `@@warning_count`, `SHOW WARNINGS`...), kept by the session since it moves
//! between connections, and the answers manifold gives from it.

use manifold_mysql_proto::consts::{column_flag, column_type};
use manifold_mysql_proto::packets::{
    encode_text_result_set, ColumnDefinition, EofPacket, ErrPacket,
};
use manifold_mysql_proto::{codes, PacketBuilder};
use manifold_sql_lex::{Scan, SessionValues, ShowDiagnostics};
use tokio::io::AsyncWriteExt;

use super::{End, Session};
use crate::relay;

/// What a statement leaves for the next one to ask about (`ROW_COUNT()`, `FOUND_ROWS()`,
/// `SHOW WARNINGS`, `@@warning_count`). The server keeps these per connection; a session
/// that moves between connections keeps its own, so no connection is held for them.
#[derive(Debug)]
pub(super) struct PreviousStatement {
    pub(super) row_count: i64,
    pub(super) found_rows: u64,
    /// `@@warning_count`: every condition raised, including any past `max_error_count`.
    pub(super) warning_count: u64,
    /// The conditions as `SHOW WARNINGS` lists them: level, code, message.
    pub(super) conditions: Vec<[Vec<u8>; 3]>,
    /// The session prepared a statement asking about its previous statement: prepared text
    /// cannot be rewritten per execution, so the connection is held after statements that
    /// leave something to ask about, as ProxySQL does.
    pub(super) asked_by_prepared: bool,
}

impl Default for PreviousStatement {
    fn default() -> Self {
        // As a fresh server session reports them.
        Self {
            row_count: -1,
            found_rows: 0,
            warning_count: 0,
            conditions: Vec::new(),
            asked_by_prepared: false,
        }
    }
}

impl PreviousStatement {
    fn error_count(&self) -> u64 {
        self.conditions
            .iter()
            .filter(|c| c[0].as_slice() == b"Error")
            .count() as u64
    }
}

impl Session {
    /// Keeps what a statement's answer leaves for the next statement to ask about: its row
    /// count, the rows it returned and, when it raised any, its conditions, read at once
    /// with `SHOW WARNINGS` on the connection that ran it.
    pub(super) async fn remember_previous_statement(
        &mut self,
        scan: &Scan,
        r: &relay::Relayed,
    ) -> Result<(), End> {
        let p = &mut self.previous;
        p.row_count = if r.saw_error || r.result_set {
            -1
        } else {
            r.affected_rows as i64
        };
        if r.result_set && !r.saw_error {
            p.found_rows = r.rows;
        }
        if r.warnings == 0 && !r.saw_error {
            if !scan.keeps_diagnostics() {
                p.warning_count = 0;
                p.conditions.clear();
            }
            return Ok(());
        }
        let conn = self.lease.as_mut().expect("held while answering").conn();
        if conn.has_followers() {
            // Other sessions' answers come next on this connection: no room for a query.
            if r.saw_error {
                // The error is the condition, as the server lists it; running the statement
                // again could not tell more (a kill, a timeout or a lock wait would not
                // happen again).
                self.remember_error(r.error.as_ref());
                return Ok(());
            }
            return self.rerun_for_conditions(r.warnings).await;
        }
        self.read_conditions(r.warnings).await
    }

    /// The statement failed with `e` (if known): that is the condition `SHOW WARNINGS`
    /// lists, as after an error of the server's own (`ERR 1317` of a `KILL QUERY`, say).
    pub(super) fn remember_error(&mut self, e: Option<&ErrPacket>) {
        let p = &mut self.previous;
        p.row_count = -1;
        p.conditions.clear();
        p.warning_count = 1;
        if let Some(e) = e {
            p.conditions.push([
                b"Error".to_vec(),
                e.code.to_string().into_bytes(),
                e.message.clone(),
            ]);
        }
    }

    /// The conditions of the statement just answered on the held connection, read with
    /// `SHOW WARNINGS`.
    async fn read_conditions(&mut self, warnings: u16) -> Result<(), End> {
        let conn = self.lease.as_mut().expect("held while answering").conn();
        match conn.query_rows(b"SHOW WARNINGS").await {
            Ok(Ok(rows)) => {
                let p = &mut self.previous;
                p.conditions.clear();
                for row in rows.rows {
                    let mut it = row.into_iter().map(Option::unwrap_or_default);
                    let (Some(level), Some(code), Some(message)) =
                        (it.next(), it.next(), it.next())
                    else {
                        continue;
                    };
                    p.conditions.push([level, code, message]);
                }
                p.warning_count = u64::from(warnings).max(p.conditions.len() as u64);
                Ok(())
            }
            Ok(Err(e)) => {
                tracing::warn!(connection = self.id, error = %e.message_lossy(), "could not read the statement's warnings");
                self.previous.conditions.clear();
                self.previous.warning_count = u64::from(warnings);
                Ok(())
            }
            Err(e) => self.backend_failed(None, &e).await,
        }
    }

    /// A pipelined statement raised conditions, but other sessions' answers follow its own
    /// on the connection, so `SHOW WARNINGS` there would list the last of theirs. The
    /// connection goes on to them, and the statement (a lone `SELECT`, safe to run twice;
    /// its packet is at the front of `exec_buf`) runs again on a connection of its own, in
    /// the session's state, for its conditions.
    async fn rerun_for_conditions(&mut self, warnings: u16) -> Result<(), End> {
        if !self.state_data.is_empty() {
            // It changed the session's state (a stored function did): the connection stays
            // with the session to take that in, and the conditions are lost under the
            // answers queued behind (only their count is known).
            self.previous.conditions.clear();
            self.previous.warning_count = u64::from(warnings);
            return Ok(());
        }
        let b = &self.exec_buf;
        let sql = b
            .get(..3)
            .map(|h| usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16)
            .and_then(|len| b.get(5..4 + len))
            .map(<[u8]>::to_vec);
        let node = self.lease_node;
        self.give_back_lease();
        let Some(sql) = sql else {
            self.previous.conditions.clear();
            self.previous.warning_count = u64::from(warnings);
            return Ok(());
        };
        let ran = match self.ensure_backend(node, false).await {
            Ok(lease) => lease.conn().run_discarding(&sql).await,
            Err(e) => {
                tracing::warn!(connection = self.id, error = %e.to_err_packet().message_lossy(), "could not run a pipelined statement again for its warnings");
                self.release_if_unpinned();
                self.previous.conditions.clear();
                self.previous.warning_count = u64::from(warnings);
                return Ok(());
            }
        };
        if let Err(e) = ran {
            return self.backend_failed(None, &e).await;
        }
        let read = self.read_conditions(warnings).await;
        self.release_if_unpinned();
        read
    }

    /// `SHOW WARNINGS`, `SHOW ERRORS` and their `COUNT(*)` forms, answered from the
    /// conditions the session's previous statement raised. The column definitions come from
    /// the server (`SHOW WARNINGS LIMIT 0` on a borrowed connection in the session's
    /// state), so names, lengths and character set are the server's own.
    pub(super) async fn show_diagnostics(
        &mut self,
        show: ShowDiagnostics,
        seq: u8,
    ) -> Result<(), End> {
        let errors = self.previous.error_count();
        if show.count {
            let (name, n) = if show.errors_only {
                ("@@session.error_count", errors)
            } else {
                ("@@session.warning_count", self.previous.warning_count)
            };
            let mut column = ColumnDefinition::new(name, column_type::LONGLONG);
            column.flags = column_flag::UNSIGNED | column_flag::BINARY;
            let value = n.to_string();
            return self
                .send_result_set(seq, &[column], &[vec![Some(value.into_bytes())]])
                .await;
        }
        let lease = match self.ensure_backend(self.primary(), false).await {
            Ok(lease) => lease,
            Err(e) => {
                self.release_if_unpinned();
                return self.send_err_packet(seq, &e.to_err_packet()).await;
            }
        };
        let columns = match lease.conn().query_rows(b"SHOW WARNINGS LIMIT 0").await {
            Ok(Ok(rows)) => rows.columns,
            Ok(Err(e)) => {
                self.release_if_unpinned();
                return self.send_err_packet(seq, &e).await;
            }
            Err(e) => return self.backend_failed(Some(seq), &e).await,
        };
        self.release_if_unpinned();
        let limit = show.limit.unwrap_or(u64::MAX);
        let rows: Vec<Vec<Option<Vec<u8>>>> = self
            .previous
            .conditions
            .iter()
            .filter(|c| !show.errors_only || c[0].as_slice() == b"Error")
            .skip(usize::try_from(show.offset).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|c| c.iter().map(|v| Some(v.clone())).collect())
            .collect();
        self.send_result_set(seq, &columns, &rows).await
    }

    /// A text result set of manifold's own, in the client's EOF convention.
    pub(super) async fn send_result_set(
        &mut self,
        seq: u8,
        columns: &[ColumnDefinition],
        rows: &[Vec<Option<Vec<u8>>>],
    ) -> Result<(), End> {
        let warnings = u16::try_from(self.previous.warning_count).unwrap_or(u16::MAX);
        let mut out = Vec::with_capacity(256);
        let eof = EofPacket {
            warnings,
            status: self.status,
        };
        encode_text_result_set(
            &mut out,
            seq,
            columns,
            rows.iter().map(|row| row.iter().map(Option::as_deref)),
            self.capabilities,
            eof,
        );
        self.previous.row_count = -1;
        let sent = match self.io.stream.write_all(&out).await {
            Ok(()) => self.io.stream.flush().await,
            Err(e) => Err(e),
        };
        sent.map_err(|_| End::ClientGone)
    }

    /// What the session's statements are told in the server's place: manifold's connection
    /// id always, and what the previous statement left unless the session still holds the
    /// connection that ran it (which then answers exactly).
    fn session_values(&self) -> SessionValues {
        let p = &self.previous;
        let moved = self.lease.is_none();
        SessionValues {
            connection_id: Some(self.id),
            row_count: moved.then_some(p.row_count),
            found_rows: moved.then_some(p.found_rows),
            warning_count: moved.then_some(p.warning_count),
            error_count: moved.then(|| p.error_count()),
        }
    }

    /// Whether the `COM_QUERY` at the front of the client's buffer reads
    /// `information_schema.PROCESSLIST`.
    pub(super) fn reads_processlist_table(&self, raw_len: usize) -> bool {
        let max = self.max_packet();
        let Some(packet) = manifold_mysql_proto::scan_logical(&self.io.rbuf[..raw_len], max)
            .ok()
            .flatten()
        else {
            return false;
        };
        let payload = packet.payload(&self.io.rbuf);
        crate::processlist::reads_table(self.schema.as_deref(), &payload[1..])
    }

    /// Builds in `exec_buf` the `COM_QUERY` at the front of the client's buffer with the
    /// session's values in place (see [`Self::session_values`]), and, with `processlist`,
    /// `information_schema.PROCESSLIST` read from manifold's sessions (`processlist.rs`)
    /// and the ones other instances of the fleet reported; false when nothing changed, the
    /// error to answer when the process list makes the statement too large to send.
    pub(super) fn rewrite_session_values(
        &mut self,
        raw_len: usize,
        processlist: Option<Vec<manifold_fleet::ProcessRow>>,
    ) -> Result<bool, ErrPacket> {
        let max = self.max_packet();
        let Some(packet) = manifold_mysql_proto::scan_logical(&self.io.rbuf[..raw_len], max)
            .ok()
            .flatten()
        else {
            return Ok(false);
        };
        let values = self.session_values();
        let payload = packet.payload(&self.io.rbuf);
        self.exec_buf.clear();
        let builder = PacketBuilder::begin(&mut self.exec_buf);
        self.exec_buf.push(payload[0]);
        let mut replaced =
            manifold_sql_lex::replace_session_values(&payload[1..], &values, &mut self.exec_buf);
        if let Some(fleet) = processlist {
            // The header and command byte stay; the text is read again from a copy.
            let text = self.exec_buf.split_off(5);
            let (shared, user) = (&self.fe.shared, &self.user);
            let schema = self.schema.as_deref();
            let out = &mut self.exec_buf;
            replaced |= crate::processlist::rewrite(shared, user, schema, &text, max, fleet, out)?;
        }
        builder.finish(&mut self.exec_buf, 0);
        Ok(replaced)
    }

    /// `GET DIAGNOSTICS` of a session that moved: the conditions it asks about are manifold's,
    /// which it does not answer in that form.
    pub(super) async fn refuse_get_diagnostics(&mut self, seq: u8) -> Result<(), End> {
        let e = ErrPacket::new(
            codes::NOT_SUPPORTED_YET,
            "This version of manifold doesn't yet support 'GET DIAGNOSTICS outside a stored program': the session's conditions are answered by SHOW WARNINGS, SHOW ERRORS and @@warning_count",
        );
        self.send_err_packet(seq, &e).await
    }
}
