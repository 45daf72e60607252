//! Prepared statements manifold runs on its own behalf (the Redis door's SQL): prepared once
//! per connection under a caller-chosen id, executed with parameters bound in the binary
//! protocol, so values never appear in SQL text, and answered with binary rows.

use std::ops::ControlFlow;

use manifold_mysql_proto::codec::{put_lenenc_bytes, put_u16, put_u32, Reader};
use manifold_mysql_proto::consts::{caps, column_type as ty};
use manifold_mysql_proto::packets::{
    decode_binary_row, is_row_terminator, ColumnDefinition, EofPacket, ErrPacket, OkPacket, Value,
};
use manifold_mysql_proto::{Command, ProtoError};

use super::{lost, BackendConn, MAX_ROWS_PACKET};
use crate::errors::{BackendError, ErrorKind};

/// One parameter of a statement run with [`BackendConn::execute`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Param<'a> {
    Null,
    Int(i64),
    UInt(u64),
    Double(f64),
    /// Bytes, sent as a binary string (the connection's character set decides nothing).
    Bytes(&'a [u8]),
}

/// What a statement run with [`BackendConn::execute`] answered.
#[derive(Debug, Default)]
pub struct Executed {
    /// Rows of a result set (empty for a statement without one, and when each row was
    /// handed over as read: [`BackendConn::execute_each`]).
    pub rows: Vec<Vec<Value>>,
    /// Affected rows of a statement without a result set.
    pub affected: u64,
    pub last_insert_id: u64,
    /// The OK packet's session-state data (what the server tracks: `last_gtid` after a
    /// commit...); empty after a result set.
    pub session_state: Vec<u8>,
}

impl BackendConn {
    /// Runs the statement `sql` with `params`: prepared on this connection the first time,
    /// recorded in [`BackendConn::stmts`] under `global_id` (which the caller keeps apart from
    /// other users of the same connections), with at most `keep` statements kept prepared.
    pub async fn execute(
        &mut self,
        global_id: u64,
        sql: &[u8],
        params: &[Param<'_>],
        keep: usize,
    ) -> Result<Result<Executed, ErrPacket>, BackendError> {
        let mut rows = Vec::new();
        let answer = self
            .execute_each(global_id, sql, params, keep, |row| {
                rows.push(row);
                ControlFlow::Continue(())
            })
            .await;
        answer.map(|a| {
            a.map(|mut done| {
                done.rows = rows;
                done
            })
        })
    }

    /// [`BackendConn::execute`] handing each row of the result set to `on_row` as it is read
    /// (the answer's `rows` stay empty), so a large result set is never held whole. Once
    /// `on_row` says `Break`, the rest of the rows are read and dropped undecoded: the
    /// connection stays usable (its transaction may still commit) and memory stays one packet.
    pub async fn execute_each(
        &mut self,
        global_id: u64,
        sql: &[u8],
        params: &[Param<'_>],
        keep: usize,
        on_row: impl FnMut(Vec<Value>) -> ControlFlow<()>,
    ) -> Result<Result<Executed, ErrPacket>, BackendError> {
        self.answer_pending = true;
        let answer = match self.send_execute(global_id, sql, params, keep).await {
            Ok(Ok(())) => self.read_executed(on_row).await,
            other => other.map(|sent| sent.map(|()| Executed::default())),
        };
        // An error leaves the connection broken anyway; an answer read to the end does not.
        self.answer_pending = answer.is_err();
        answer
    }

    /// Prepares `sql` when this connection has not yet, and sends its `COM_STMT_EXECUTE`.
    async fn send_execute(
        &mut self,
        global_id: u64,
        sql: &[u8],
        params: &[Param<'_>],
        keep: usize,
    ) -> Result<Result<(), ErrPacket>, BackendError> {
        let backend_id = if let Some(s) = self.stmts.get(global_id) {
            s.backend_id
        } else {
            {
                let answer = match self.prepare_evicting(sql, keep).await? {
                    Ok(a) => a,
                    Err(e) => return Ok(Err(e)),
                };
                if usize::from(answer.params) != params.len() {
                    let _ = self.close_statement(answer.statement_id).await;
                    return Err(BackendError::new(
                        ErrorKind::Protocol,
                        format!(
                            "statement takes {} parameters, {} given",
                            answer.params,
                            params.len()
                        ),
                    ));
                }
                if let Some(old) = self
                    .stmts
                    .insert(global_id, answer.statement_id, answer.params)
                {
                    self.close_statement(old).await?;
                }
                answer.statement_id
            }
        };
        let mut rest = Vec::with_capacity(16 + params.len() * 12);
        encode_params(&mut rest, params);
        self.send_command(&Command::StmtExecute {
            statement_id: backend_id,
            flags: 0,
            rest: &rest,
        })
        .await?;
        Ok(Ok(()))
    }

    async fn read_executed(
        &mut self,
        on_row: impl FnMut(Vec<Value>) -> ControlFlow<()>,
    ) -> Result<Result<Executed, ErrPacket>, BackendError> {
        let bad = |what: &str| {
            BackendError::new(
                ErrorKind::Protocol,
                format!("backend answered manifold's statement with {what}"),
            )
        };
        let first = self.read_payload().await?;
        let mut out = Executed::default();
        match first.first() {
            Some(0xFF) => {
                return Ok(Err(
                    ErrPacket::decode(&first).map_err(|_| bad("a bad ERR packet"))?
                ))
            }
            Some(0x00) => {
                let ok = OkPacket::decode(&first, self.capabilities)
                    .map_err(|_| bad("a bad OK packet"))?;
                out.affected = ok.affected_rows;
                out.last_insert_id = ok.last_insert_id;
                self.last_insert_id = ok.last_insert_id;
                out.session_state = ok.session_state;
                return Ok(Ok(out));
            }
            _ => {}
        }
        if let Err(e) = self
            .read_result_set_each(&first, decode_binary_row, on_row)
            .await?
        {
            return Ok(Err(e));
        }
        Ok(Ok(out))
    }

    /// The rest of a result set whose first packet (the column count) is `first`: its
    /// column definitions, its rows, each decoded by `decode`, and the server status of its
    /// end (whether more results follow), or the server's ERR.
    #[allow(clippy::type_complexity)]
    pub(super) async fn read_result_set<R>(
        &mut self,
        first: &[u8],
        decode: impl Fn(&[u8], &[ColumnDefinition]) -> Result<R, ProtoError>,
    ) -> Result<Result<(Vec<ColumnDefinition>, Vec<R>, u16), ErrPacket>, BackendError> {
        let mut rows = Vec::new();
        let end = self
            .read_result_set_each(first, decode, |row| {
                rows.push(row);
                ControlFlow::Continue(())
            })
            .await?;
        Ok(end.map(|(defs, status)| (defs, rows, status)))
    }

    /// [`BackendConn::read_result_set`] handing each decoded row to `on_row` instead of
    /// collecting them; after it says `Break`, the remaining rows are read and dropped
    /// undecoded, up to the result set's end (or the server's ERR, still returned). Gives the
    /// column definitions and the end's status flags.
    async fn read_result_set_each<R>(
        &mut self,
        first: &[u8],
        decode: impl Fn(&[u8], &[ColumnDefinition]) -> Result<R, ProtoError>,
        mut on_row: impl FnMut(R) -> ControlFlow<()>,
    ) -> Result<Result<(Vec<ColumnDefinition>, u16), ErrPacket>, BackendError> {
        let bad = |what: &str| {
            BackendError::new(
                ErrorKind::Protocol,
                format!("backend answered manifold's statement with {what}"),
            )
        };
        let deprecate_eof = self.capabilities & caps::DEPRECATE_EOF != 0;
        let columns = Reader::new(first)
            .lenenc_int()
            .map_err(|_| bad("a bad column count"))?;
        let mut defs = Vec::with_capacity(usize::try_from(columns).unwrap_or(0).min(4096));
        for _ in 0..columns {
            let c = self.read_payload().await?;
            defs.push(ColumnDefinition::decode(&c).map_err(|_| bad("a bad column definition"))?);
        }
        if !deprecate_eof {
            self.read_payload().await?;
        }
        let mut wanted = true;
        let status = loop {
            let p = self.read_payload().await?;
            match p.first() {
                Some(0xFF) => {
                    return Ok(Err(
                        ErrPacket::decode(&p).map_err(|_| bad("a bad ERR packet"))?
                    ))
                }
                Some(&b) if is_row_terminator(b, p.len(), deprecate_eof) => {
                    break if deprecate_eof {
                        OkPacket::decode(&p, self.capabilities)
                            .map_err(|_| bad("a bad end of rows"))?
                            .status
                    } else {
                        EofPacket::decode(&p)
                            .map_err(|_| bad("a bad end of rows"))?
                            .status
                    };
                }
                _ if wanted => {
                    let row = decode(&p, &defs).map_err(|_| bad("a bad row"))?;
                    wanted = on_row(row).is_continue();
                }
                _ => {}
            }
        };
        self.last_used = std::time::Instant::now();
        Ok(Ok((defs, status)))
    }

    pub(super) async fn read_payload(&mut self) -> Result<Vec<u8>, BackendError> {
        self.io
            .read_owned(MAX_ROWS_PACKET)
            .await
            .map(|(p, _)| p)
            .map_err(|e| lost("waiting for backend", &e))
    }

    /// The server's `max_allowed_packet` (asked once per connection): a larger packet makes
    /// the server close the connection.
    pub async fn max_allowed_packet(&mut self) -> Result<u64, BackendError> {
        if let Some(max) = self.max_allowed_packet {
            return Ok(max);
        }
        let rows = match self.query_rows(b"SELECT @@max_allowed_packet").await? {
            Ok(rows) => rows,
            Err(e) => {
                return Err(BackendError::new(
                    ErrorKind::Protocol,
                    format!("reading max_allowed_packet: {e}"),
                ))
            }
        };
        let max = rows
            .rows
            .first()
            .and_then(|r| r.first()?.as_deref())
            .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
            .unwrap_or(16 << 20);
        self.max_allowed_packet = Some(max);
        Ok(max)
    }

    /// Runs a statement of manifold's own answered by one OK or ERR (`START TRANSACTION`,
    /// `COMMIT`, `ROLLBACK`, DDL).
    pub async fn run_ok(
        &mut self,
        sql: &[u8],
    ) -> Result<Result<OkPacket, ErrPacket>, BackendError> {
        self.answer_pending = true;
        let answer = self.simple_command(&Command::Query(sql)).await;
        self.answer_pending = answer.is_err();
        answer
    }

    /// Sends every statement of `sqls` (each answered by one OK or ERR) in one write, then
    /// reads their answers: the first ERR, if any (the statements after it still ran).
    pub async fn run_ok_many(
        &mut self,
        sqls: &[&[u8]],
    ) -> Result<Result<(), ErrPacket>, BackendError> {
        self.answer_pending = true;
        let answer = self.run_ok_many_inner(sqls).await;
        self.answer_pending = answer.is_err();
        answer
    }

    async fn run_ok_many_inner(
        &mut self,
        sqls: &[&[u8]],
    ) -> Result<Result<(), ErrPacket>, BackendError> {
        let mut payload = Vec::new();
        for sql in sqls {
            payload.clear();
            Command::Query(sql).encode(&mut payload);
            self.io.queue(0, &payload);
        }
        self.io.flush().await.map_err(|e| {
            BackendError::new(ErrorKind::Lost, format!("sending to backend: {e}"))
                .with_retry(crate::errors::RetryType::ReusedOnly)
        })?;
        let mut first_err = None;
        for _ in sqls {
            let p = self.read_payload().await?;
            match p.first() {
                Some(0xFF) if first_err.is_none() => {
                    first_err =
                        Some(ErrPacket::decode(&p).map_err(|_| {
                            BackendError::new(ErrorKind::Protocol, "bad ERR packet")
                        })?);
                }
                Some(0xFF | 0x00 | 0xFE) => {}
                _ => {
                    return Err(BackendError::new(
                        ErrorKind::Protocol,
                        "unexpected answer to a statement of manifold's",
                    ))
                }
            }
        }
        self.last_used = std::time::Instant::now();
        Ok(first_err.map_or(Ok(()), Err))
    }
}

/// The size of `COM_STMT_EXECUTE` for `params`, at most (a server refuses a packet larger
/// than its `max_allowed_packet` by closing the connection).
pub fn execute_packet_size(params: &[Param<'_>]) -> u64 {
    let values: u64 = params
        .iter()
        .map(|p| match p {
            Param::Bytes(b) => b.len() as u64 + 9,
            _ => 8,
        })
        .sum();
    16 + params.len() as u64 * 3 + values
}

/// `COM_STMT_EXECUTE` after the statement id and flags: iteration count, NULL bitmap, the
/// types (always sent) and the values.
fn encode_params(out: &mut Vec<u8>, params: &[Param<'_>]) {
    put_u32(out, 1);
    if params.is_empty() {
        return;
    }
    let bitmap_at = out.len();
    out.extend(std::iter::repeat_n(0, params.len().div_ceil(8)));
    for (i, p) in params.iter().enumerate() {
        if matches!(p, Param::Null) {
            out[bitmap_at + i / 8] |= 1 << (i % 8);
        }
    }
    out.push(1);
    for p in params {
        let (t, unsigned) = match p {
            Param::Null => (ty::NULL, false),
            Param::Int(_) => (ty::LONGLONG, false),
            Param::UInt(_) => (ty::LONGLONG, true),
            Param::Double(_) => (ty::DOUBLE, false),
            Param::Bytes(_) => (ty::LONG_BLOB, false),
        };
        put_u16(out, u16::from(t) | if unsigned { 0x8000 } else { 0 });
    }
    for p in params {
        match *p {
            Param::Null => {}
            Param::Int(i) => out.extend_from_slice(&i.to_le_bytes()),
            Param::UInt(u) => out.extend_from_slice(&u.to_le_bytes()),
            Param::Double(d) => out.extend_from_slice(&d.to_le_bytes()),
            Param::Bytes(b) => put_lenenc_bytes(out, b),
        }
    }
}
