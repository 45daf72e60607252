//! One logged-in connection to a backend server: connect, TLS upgrade, authentication (as a
//! MySQL client), and the few commands manifold sends on its own behalf.

use std::sync::Arc;
use std::time::{Duration, Instant};

use manifold_mysql_proto::consts::{caps, status};
use manifold_mysql_proto::handshake::ChangeUser;
use manifold_mysql_proto::packets::{decode_text_row, ColumnDefinition, ErrPacket, OkPacket};
use manifold_mysql_proto::{Command, Progress, ResponseKind, ResponseTracker};

use crate::config::TlsMode;
use crate::errors::{BackendError, ErrorKind, RetryType};
use crate::state::{is_carried, user_variable_literal, SessionVars, TrackedChanges, UserVars};
use crate::stmts::PreparedOnConn;
use manifold_io::{PacketIo, ReadError};

mod execute;
mod login;
mod probe;
#[cfg(test)]
mod tests;

pub use execute::{execute_packet_size, Executed, Param};
use login::{finish_auth, plugin_response};
pub use probe::{probe_server_version, ProbeError};

/// ER_MAX_PREPARED_STMT_COUNT_REACHED: the server's `max_prepared_stmt_count` is used up.
const MAX_PREPARED_STMT_COUNT_REACHED: u16 = 1461;

/// Login packets are small; anything larger is a broken or hostile server.
const MAX_LOGIN_PACKET: usize = 64 * 1024;

/// Rows of manifold's own queries: user variable values, warnings. A user variable may hold
/// up to `max_allowed_packet` bytes, shown in hex twice over.
const MAX_ROWS_PACKET: usize = 1 << 30;

/// Run on every backend connection after login and after each reset: the server then reports
/// in its OK packets every system variable, schema and state change a statement makes, which
/// is how manifold learns a session's state instead of guessing it from SQL text.
const ENABLE_TRACKING: &[u8] = b"SET SESSION session_track_system_variables='*', \
session_track_schema=ON, session_track_state_change=ON, session_track_transaction_info='STATE'";

/// [`ENABLE_TRACKING`] on MySQL, which also reports the GTIDs a session commits (MariaDB
/// reports them as the `last_gtid` variable): what causal reads wait for on replicas.
const ENABLE_TRACKING_MYSQL: &[u8] = b"SET SESSION session_track_system_variables='*', \
session_track_schema=ON, session_track_state_change=ON, session_track_transaction_info='STATE', \
session_track_gtids='OWN_GTID'";

/// Which server a connection talks to, where their SQL differs (GTIDs, replication
/// status, waiting for a position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerFlavor {
    MariaDb,
    MySql,
}

impl ServerFlavor {
    /// From the handshake's server version: MariaDB's always says so (`11.4.2-MariaDB`,
    /// `5.5.5-10.11.6-MariaDB-0+deb12u1`).
    pub fn of_version(version: &[u8]) -> ServerFlavor {
        if version
            .windows(7)
            .any(|w| w.eq_ignore_ascii_case(b"mariadb"))
        {
            ServerFlavor::MariaDb
        } else {
            ServerFlavor::MySql
        }
    }
}

/// Where a backend is and how to reach it.
#[derive(Clone)]
pub struct BackendTarget {
    pub addr: String,
    pub tls_mode: TlsMode,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub max_packet: u32,
}

/// What makes two backend connections interchangeable for a client session: the backend
/// login, the client flags that change server behaviour, the connection character set, and
/// (for `TlsMode::AsClient`) whether the connection is encrypted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConnKey {
    pub user: String,
    pub password: String,
    pub caps: u32,
    pub charset: u8,
    /// Under `TlsMode::AsClient`, whether the connection is encrypted (when the backend
    /// offers TLS): the client's connection is, or the connection is manifold's own
    /// ([`ConnKey::own`]). The other modes decide alone.
    pub client_tls: bool,
}

impl ConnKey {
    pub fn new(
        user: &str,
        password: &str,
        client_caps: u32,
        charset: u8,
        client_tls: bool,
    ) -> Self {
        Self {
            user: user.to_owned(),
            password: password.to_owned(),
            caps: client_caps & caps::SESSION_AFFECTING,
            charset,
            client_tls,
        }
    }

    /// The key of a connection manifold opens for itself rather than for a client session
    /// (the Redis door's, the global binlog's readers and heartbeats, the router's monitor):
    /// under `TlsMode::AsClient` it is encrypted whenever the backend offers TLS, as the
    /// most careful client would ask, since what it carries may have come from TLS clients
    /// of any door. `required`, `verify_ca` and `verify_identity` insist on TLS for it as for
    /// every connection; `disabled` never uses it; `preferred` uses it when offered.
    pub fn own(user: &str, password: &str, charset: u8) -> Self {
        Self::new(user, password, 0, charset, true)
    }
}

pub struct BackendConn {
    pub io: PacketIo,
    pub key: ConnKey,
    pub server_version: Vec<u8>,
    pub connection_id: u32,
    /// Capabilities in force on this connection.
    pub capabilities: u32,
    pub schema: Schema,
    /// System variables changed since login or the last reset, as the server reported them.
    pub vars: SessionVars,
    /// User variables set on this connection for the session it serves (or served).
    pub user_vars: UserVars,
    /// What `LAST_INSERT_ID()` returns on this connection, as far as manifold saw.
    pub last_insert_id: u64,
    /// The server reports state changes on this connection (see [`ENABLE_TRACKING`]).
    pub tracking: bool,
    /// Prepared statements the server holds for manifold on this connection.
    pub stmts: PreparedOnConn,
    /// Borrowers whose commands were written after the current borrower's, in order: the
    /// connection goes to each in turn to read its answer (see [`crate::pool::Follower`]).
    pub(crate) followers: std::collections::VecDeque<std::rc::Rc<crate::pool::Follower>>,
    pub last_used: Instant,
    /// A statement of manifold's own ([`BackendConn::execute`], [`BackendConn::run_ok`]) was
    /// sent and its answer not read to the end (its borrower was cancelled): the connection
    /// is out of step and must be closed, not reset.
    pub(crate) answer_pending: bool,
    /// The server's `max_allowed_packet`, once a borrower asked for it
    /// ([`BackendConn::max_allowed_packet`]).
    max_allowed_packet: Option<u64>,
    /// The login's scramble and plugin: `COM_CHANGE_USER` answers with them.
    scramble: Vec<u8>,
    plugin: String,
}

/// A small text result set read whole: manifold's own queries only.
#[derive(Debug, Default)]
pub struct Rows {
    pub columns: Vec<ColumnDefinition>,
    pub rows: Vec<Vec<Option<Vec<u8>>>>,
}

/// A backend's answer to `COM_STMT_PREPARE`.
#[derive(Debug)]
pub struct PrepareAnswer {
    pub statement_id: u32,
    pub columns: u16,
    pub params: u16,
    /// The answer's packets as received, headers included.
    pub raw: Vec<u8>,
}

/// A backend connection's current schema as far as manifold knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schema {
    /// No schema selected (a fresh login without one, or after `COM_CHANGE_USER` without one).
    None,
    Known(Vec<u8>),
    /// A statement may have changed it (`USE` inside a `COM_QUERY`).
    Unknown,
}

fn lost(what: &str, e: &ReadError) -> BackendError {
    BackendError::new(ErrorKind::Lost, format!("{what}: {e}"))
}

impl BackendConn {
    /// Opens and logs in a new connection; the whole exchange is bounded by `timeout`.
    pub async fn connect(
        target: &BackendTarget,
        key: &ConnKey,
        timeout: Duration,
    ) -> Result<BackendConn, BackendError> {
        match tokio::time::timeout(timeout, Self::connect_inner(target, key)).await {
            // A new connection lost while being set up ran nothing of a client's: the request
            // may go to another (the server may be going down).
            Ok(Err(mut e)) if e.kind == ErrorKind::Lost => {
                e.set_retry(true);
                Err(e)
            }
            Ok(r) => r,
            Err(_) => Err(BackendError::new(
                ErrorKind::ConnectTimeout,
                format!(
                    "backend {}: no login within connect_timeout ({timeout:?})",
                    target.addr
                ),
            )),
        }
    }

    /// Which server this is (from its handshake).
    pub fn flavor(&self) -> ServerFlavor {
        ServerFlavor::of_version(&self.server_version)
    }

    async fn enable_tracking(&mut self) -> Result<(), BackendError> {
        self.tracking = false;
        if self.capabilities & caps::SESSION_TRACK == 0 {
            return Ok(());
        }
        if self.flavor() == ServerFlavor::MySql
            && self
                .simple_command(&Command::Query(ENABLE_TRACKING_MYSQL))
                .await?
                .is_ok()
        {
            self.tracking = true;
            return Ok(());
        }
        // A server that is neither MariaDB nor a MySQL with GTID tracking still tracks the
        // rest (its writes' GTIDs then go unseen: causal reads for them use the primary
        // only if the monitor finds no GTIDs on the replicas either).
        match self
            .simple_command(&Command::Query(ENABLE_TRACKING))
            .await?
        {
            Ok(_) => self.tracking = true,
            Err(e) => {
                tracing::debug!(error = %e, "backend refuses session tracking; sessions on it will not be multiplexed");
            }
        }
        Ok(())
    }

    /// `COM_RESET_CONNECTION`, then tracking on again: the connection is as after login,
    /// except that the schema stays.
    pub async fn reset(&mut self) -> Result<Result<(), ErrPacket>, BackendError> {
        if let Err(e) = self.simple_command(&Command::ResetConnection).await? {
            return Ok(Err(e));
        }
        self.vars.clear();
        self.user_vars.clear();
        self.last_insert_id = 0;
        self.stmts.clear();
        self.enable_tracking().await?;
        Ok(Ok(()))
    }

    /// Brings the connection's system and user variables to `want` and `want_user` (and
    /// `LAST_INSERT_ID()` to `last_insert_id` when given), with one `SET` when this connection
    /// changed no system variable `want` does not, else after a reset. The server's ERR is
    /// returned if it refuses, and the connection's state is then unknown.
    pub async fn sync_vars(
        &mut self,
        want: &SessionVars,
        want_user: &UserVars,
        last_insert_id: Option<u64>,
    ) -> Result<Result<(), ErrPacket>, BackendError> {
        if !self.vars.is_subset_of(want) {
            if let Err(e) = self.reset().await? {
                return Ok(Err(e));
            }
        }
        // Unqualified names are session variables; `SET SESSION @x=...` would not parse.
        let mut sql = b"SET ".to_vec();
        let mut n = want.write_assignments(&self.vars, &mut sql);
        n += want_user.write_assignments(&self.user_vars, &mut sql);
        if let Some(id) = last_insert_id.filter(|id| *id != self.last_insert_id) {
            if n > 0 {
                sql.extend_from_slice(b", ");
            }
            sql.extend_from_slice(format!("last_insert_id={id}").as_bytes());
            n += 1;
        }
        if n == 0 {
            return Ok(Ok(()));
        }
        match self.simple_command(&Command::Query(&sql)).await? {
            Ok(ok) => {
                if let Some(t) = TrackedChanges::decode(&ok.session_state) {
                    for (name, value) in &t.vars {
                        if is_carried(name) {
                            self.vars.set(name, value);
                        }
                    }
                }
                for (name, value) in want.iter() {
                    self.vars.set(name, value);
                }
                self.user_vars.clone_from(want_user);
                if let Some(id) = last_insert_id {
                    self.last_insert_id = id;
                }
                Ok(Ok(()))
            }
            Err(e) => Ok(Err(e)),
        }
    }

    /// Writes one command of manifold's own. A write that fails did not run the command: it
    /// may go to another connection if this one had waited in the pool (see [`RetryType`]).
    async fn send_command(&mut self, cmd: &Command<'_>) -> Result<(), BackendError> {
        let mut payload = Vec::new();
        cmd.encode(&mut payload);
        self.io.send(0, &payload).await.map_err(|e| {
            BackendError::new(ErrorKind::Lost, format!("sending to backend: {e}"))
                .with_retry(RetryType::ReusedOnly)
        })?;
        Ok(())
    }

    /// Sends a command answered by one OK or ERR packet (`COM_INIT_DB`, `COM_PING`,
    /// `COM_RESET_CONNECTION`, `COM_SET_OPTION`), returning the backend's verdict.
    pub async fn simple_command(
        &mut self,
        cmd: &Command<'_>,
    ) -> Result<Result<OkPacket, ErrPacket>, BackendError> {
        self.send_command(cmd).await?;
        let (payload, _) = self
            .io
            .read_owned(MAX_LOGIN_PACKET)
            .await
            .map_err(|e| lost("waiting for backend", &e))?;
        self.last_used = Instant::now();
        match payload.first() {
            Some(0xFF) => Ok(Err(ErrPacket::decode(&payload)
                .map_err(|_| BackendError::new(ErrorKind::Protocol, "bad ERR packet"))?)),
            Some(0x00 | 0xFE) => Ok(Ok(OkPacket::decode(&payload, self.capabilities)
                .map_err(|_| BackendError::new(ErrorKind::Protocol, "bad OK packet"))?)),
            _ => Err(BackendError::new(
                ErrorKind::Protocol,
                "unexpected answer to a simple command",
            )),
        }
    }

    /// Runs a query of manifold's own whose answer is one small text result set (or an OK):
    /// its columns and rows, or the server's ERR. Results after the first (a text of several
    /// statements on a connection with `CLIENT_MULTI_STATEMENTS`) are read and dropped, so
    /// that none is left on the wire for the connection's next borrower to take as its own.
    pub async fn query_rows(
        &mut self,
        sql: &[u8],
    ) -> Result<Result<Rows, ErrPacket>, BackendError> {
        self.send_command(&Command::Query(sql)).await?;
        let bad = |what: &str| {
            BackendError::new(
                ErrorKind::Protocol,
                format!("backend answered manifold's query with {what}"),
            )
        };
        let first = self.read_payload().await?;
        let mut out = Rows::default();
        let end_status = match first.first() {
            Some(0xFF) => {
                return Ok(Err(
                    ErrPacket::decode(&first).map_err(|_| bad("a bad ERR packet"))?
                ))
            }
            Some(0x00) => {
                OkPacket::decode(&first, self.capabilities)
                    .map_err(|_| bad("a bad OK packet"))?
                    .status
            }
            _ => match self
                .read_result_set(&first, |p, defs| decode_text_row(p, defs.len()))
                .await?
            {
                Ok((columns, rows, end_status)) => {
                    out.columns = columns;
                    out.rows = rows;
                    end_status
                }
                Err(e) => return Ok(Err(e)),
            },
        };
        if end_status & status::MORE_RESULTS_EXISTS != 0 {
            self.skip_results(None).await?;
        }
        Ok(Ok(out))
    }

    /// Reads the current values of user variables `names` (lowercase, as
    /// [`UserVars`] keys them) and records them in [`BackendConn::user_vars`]; returns the
    /// literals read in the order of `names`.
    pub async fn capture_user_vars(
        &mut self,
        names: &[Vec<u8>],
    ) -> Result<Result<Vec<Vec<u8>>, ErrPacket>, BackendError> {
        let mut sql = b"SELECT ".to_vec();
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                sql.extend_from_slice(b", ");
            }
            let mut quoted = b"@`".to_vec();
            for &b in name {
                if b == b'`' {
                    quoted.push(b'`');
                }
                quoted.push(b);
            }
            quoted.push(b'`');
            sql.extend_from_slice(&quoted);
            sql.extend_from_slice(b", COLLATION(");
            sql.extend_from_slice(&quoted);
            sql.extend_from_slice(b"), HEX(");
            sql.extend_from_slice(&quoted);
            sql.push(b')');
        }
        let rows = match self.query_rows(&sql).await? {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        let (Some(row), true) = (rows.rows.first(), rows.columns.len() == names.len() * 3) else {
            return Err(BackendError::new(
                ErrorKind::Protocol,
                "backend answered a user-variable read with an unexpected shape",
            ));
        };
        let mut out = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let c = &rows.columns[i * 3];
            let literal = user_variable_literal(
                c.column_type,
                c.flags,
                row[i * 3].as_deref(),
                row[i * 3 + 1].as_deref(),
                row[i * 3 + 2].as_deref(),
            );
            self.user_vars.set(name, &literal);
            out.push(literal);
        }
        Ok(Ok(out))
    }

    /// `COM_STMT_PREPARE`: the whole answer (all its packets, headers included, sequence ids
    /// as a client's first command would get them) and what its first packet says, or the
    /// server's ERR. The statement is not recorded in [`BackendConn::stmts`]: that is the
    /// caller's decision.
    pub async fn prepare(
        &mut self,
        sql: &[u8],
    ) -> Result<Result<PrepareAnswer, ErrPacket>, BackendError> {
        self.send_command(&Command::StmtPrepare(sql)).await?;
        let deprecate_eof = self.capabilities & caps::DEPRECATE_EOF != 0;
        let mut tracker = ResponseTracker::new(ResponseKind::Prepare, deprecate_eof, 1);
        let mut raw = Vec::new();
        loop {
            if self.io.rbuf.is_empty() {
                self.io
                    .fill()
                    .await
                    .map_err(|e| lost("waiting for backend", &e))?;
            }
            let (n, progress) = tracker.feed(&self.io.rbuf).map_err(|e| {
                BackendError::new(
                    ErrorKind::Protocol,
                    format!("backend answer to COM_STMT_PREPARE: {e}"),
                )
            })?;
            raw.extend_from_slice(&self.io.rbuf[..n]);
            self.io.consume(n);
            match progress {
                Progress::Done => break,
                Progress::More => {}
                _ => {
                    return Err(BackendError::new(
                        ErrorKind::Protocol,
                        "unexpected answer to COM_STMT_PREPARE",
                    ))
                }
            }
        }
        self.last_used = Instant::now();
        let bad = || BackendError::new(ErrorKind::Protocol, "bad COM_STMT_PREPARE answer");
        let first = raw.get(4..).ok_or_else(bad)?;
        if first.first() == Some(&0xFF) {
            return Ok(Err(ErrPacket::decode(first).map_err(|_| bad())?));
        }
        // 0x00, statement id (4), columns (2), params (2), filler, warnings (2).
        if first.len() < 9 || first[0] != 0 {
            return Err(bad());
        }
        Ok(Ok(PrepareAnswer {
            statement_id: u32::from_le_bytes(first[1..5].try_into().expect("4 bytes")),
            columns: u16::from_le_bytes([first[5], first[6]]),
            params: u16::from_le_bytes([first[7], first[8]]),
            raw,
        }))
    }

    /// [`BackendConn::prepare`], first closing least recently used statements so that at most
    /// `keep` remain with the new one. If the server still refuses for its global
    /// `max_prepared_stmt_count` (ERR 1461), half of this connection's statements are closed
    /// and the prepare is tried once more.
    pub async fn prepare_evicting(
        &mut self,
        sql: &[u8],
        keep: usize,
    ) -> Result<Result<PrepareAnswer, ErrPacket>, BackendError> {
        while self.stmts.len() >= keep.max(1) {
            self.evict_statement().await?;
        }
        match self.prepare(sql).await? {
            Err(e) if e.code == MAX_PREPARED_STMT_COUNT_REACHED && !self.stmts.is_empty() => {
                for _ in 0..self.stmts.len().div_ceil(2) {
                    self.evict_statement().await?;
                }
                self.prepare(sql).await
            }
            answer => Ok(answer),
        }
    }

    async fn evict_statement(&mut self) -> Result<(), BackendError> {
        match self.stmts.evict_least_recently_used() {
            Some(id) => self.close_statement(id).await,
            None => Ok(()),
        }
    }

    /// Ends the session politely: `COM_QUIT`, then waits (at most `timeout`) for the server to
    /// close its side. MariaDB stops counting the connection against `max_user_connections`
    /// before it closes the socket, so once this returns a connection opened in its place
    /// does not go over a limit this one was counted in.
    pub async fn quit(mut self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, async {
            if self.send_command(&Command::Quit).await.is_err() {
                return;
            }
            // Anything still to come (the answers of commands nobody reads any more) is
            // dropped until EOF or an error.
            while self.io.fill().await.is_ok() {
                self.io.rbuf.clear();
            }
        })
        .await;
    }

    /// `COM_STMT_CLOSE` (the server sends no answer).
    pub async fn close_statement(&mut self, backend_id: u32) -> Result<(), BackendError> {
        self.send_command(&Command::StmtClose(backend_id)).await?;
        Ok(())
    }

    /// Makes `schema` the connection's current schema, or leaves it with none selected when
    /// `schema` is `None`. Returns the backend's ERR if it refuses (e.g. unknown database),
    /// in which case the connection is left with no schema selected.
    pub async fn use_schema(
        &mut self,
        schema: Option<&[u8]>,
    ) -> Result<Result<(), ErrPacket>, BackendError> {
        let Some(schema) = schema else {
            if self.schema != Schema::None {
                // MySQL has no command to unselect a database; a change to the same user
                // without one does it (and resets the session, which is fresh anyway).
                self.change_user_reset().await?;
            }
            return Ok(Ok(()));
        };
        if self.schema == Schema::Known(schema.to_vec()) {
            return Ok(Ok(()));
        }
        match self.simple_command(&Command::InitDb(schema)).await? {
            Ok(_) => {
                self.schema = Schema::Known(schema.to_vec());
                Ok(Ok(()))
            }
            Err(e) => {
                // The server keeps its previous schema on a failed USE: leave none instead.
                if self.schema != Schema::None {
                    self.change_user_reset().await?;
                }
                Ok(Err(e))
            }
        }
    }

    /// `COM_CHANGE_USER` to the same backend user with no schema: resets the session like
    /// `COM_RESET_CONNECTION` and also unselects the schema.
    pub async fn change_user_reset(&mut self) -> Result<(), BackendError> {
        let cu = ChangeUser {
            user: self.key.user.as_bytes().to_vec(),
            auth_response: plugin_response(
                &self.plugin,
                self.key.password.as_bytes(),
                &self.scramble,
            ),
            database: Vec::new(),
            charset: Some(u16::from(self.key.charset)),
            auth_plugin: Some(self.plugin.as_bytes().to_vec()),
            attributes: Vec::new(),
        };
        let mut payload = Vec::with_capacity(64);
        cu.encode(&mut payload, self.capabilities);
        let addr = self.key_addr();
        self.io
            .send(0, &payload)
            .await
            .map_err(|e| BackendError::new(ErrorKind::Lost, format!("backend {addr}: {e}")))?;
        let (key, plugin, scramble) =
            (self.key.clone(), self.plugin.clone(), self.scramble.clone());
        finish_auth(&mut self.io, &addr, &key, &plugin, &scramble).await?;
        self.schema = Schema::None;
        self.vars.clear();
        self.user_vars.clear();
        self.last_insert_id = 0;
        self.stmts.clear();
        self.last_used = Instant::now();
        self.enable_tracking().await
    }

    fn key_addr(&self) -> String {
        self.io
            .stream
            .tcp()
            .peer_addr()
            .map_or_else(|_| "?".into(), |a| a.to_string())
    }

    /// Cheap liveness probe for an idle connection: a readable socket means EOF, an error or
    /// unsolicited bytes (e.g. the server's wait_timeout notice), all of which make it unusable.
    /// Answers of other borrowers' commands follow the current borrower's on the wire.
    pub fn has_followers(&self) -> bool {
        !self.followers.is_empty()
    }

    /// Reads and drops the followers' answers, then tells each to send its command again
    /// elsewhere: for a borrower that must keep the connection (it became pinned) while
    /// others' answers are still to come on it.
    pub async fn shed_followers(&mut self) -> Result<(), BackendError> {
        while let Some(f) = self.followers.pop_front() {
            let skipped = self.skip_answer().await;
            f.broken();
            if skipped.is_err() {
                crate::pool::Pool::break_followers(self);
            }
            skipped?;
        }
        Ok(())
    }

    /// Reads one answer to a `COM_QUERY` off the wire and drops it: a pipelined answer whose
    /// borrower no longer wants it, or a statement run again for its warnings.
    pub(crate) async fn skip_answer(&mut self) -> Result<(), BackendError> {
        self.skip_results(Some(1)).await
    }

    /// Reads results off the wire and drops them, up to the end of the answer: a whole answer
    /// (`first_seq` 1), or the results after one already read (`None`: the sequence id
    /// continues from that result's, so it is taken from the next packet).
    async fn skip_results(&mut self, first_seq: Option<u8>) -> Result<(), BackendError> {
        let deprecate_eof = self.capabilities & caps::DEPRECATE_EOF != 0;
        let first_seq = if let Some(seq) = first_seq {
            seq
        } else {
            while self.io.rbuf.len() < 4 {
                self.io
                    .fill()
                    .await
                    .map_err(|e| lost("reading a further result", &e))?;
            }
            self.io.rbuf[3]
        };
        let mut tracker = ResponseTracker::new(ResponseKind::ResultSets, deprecate_eof, first_seq);
        loop {
            if self.io.rbuf.is_empty() {
                self.io
                    .fill()
                    .await
                    .map_err(|e| lost("reading a pipelined answer", &e))?;
            }
            let (n, progress) = tracker.feed(&self.io.rbuf).map_err(|e| {
                BackendError::new(ErrorKind::Protocol, format!("pipelined answer: {e}"))
            })?;
            self.io.consume(n);
            match progress {
                Progress::Done => return Ok(()),
                Progress::LocalInfile => {
                    return Err(BackendError::new(
                        ErrorKind::Protocol,
                        "a pipelined SELECT asked for a local file",
                    ))
                }
                _ => {}
            }
        }
    }

    /// Runs `sql` and drops its answer: a pipelined `SELECT` run again so that its warnings
    /// can be read.
    pub async fn run_discarding(&mut self, sql: &[u8]) -> Result<(), BackendError> {
        self.send_command(&Command::Query(sql)).await?;
        self.skip_answer().await?;
        self.last_used = Instant::now();
        Ok(())
    }

    pub fn looks_alive(&self) -> bool {
        if !self.io.rbuf.is_empty() {
            return false;
        }
        // The reactor's readiness costs no syscall, and the last read of an answer normally
        // cleared it, so "readable" means EOF, an error or unsolicited bytes (or a last read
        // that filled the buffer exactly, which the probe below tells apart). A close the
        // reactor has not seen yet shows up as a reset when the statement is sent, and the
        // statement is then sent again elsewhere.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if self.io.stream.tcp().poll_read_ready(&mut cx).is_pending() {
            return true;
        }
        let mut probe = [0u8; 1];
        matches!(self.io.stream.tcp().try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}
