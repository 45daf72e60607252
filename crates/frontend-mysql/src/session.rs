//! A client session: login, then the command loop.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use manifold_backend::io::{PacketIo, ReadError, Stream};
use manifold_backend::state::{is_carried, is_tracking_variable};
use manifold_backend::{ConnKey, Lease, Schema, SessionVars, TrackedChanges};
use manifold_engine::WorkerContext;
use manifold_mysql_proto::consts::{caps, status, MAX_PAYLOAD};
use manifold_mysql_proto::handshake::ChangeUser;
use manifold_mysql_proto::packets::{ErrPacket, OkPacket};
use manifold_mysql_proto::{codes, Command, ErrorCode, ProtoError, ResponseKind};
use manifold_sql_lex::Scan;
use tokio::net::TcpStream;

use crate::handshake::{self, send_err, AuthFailure};
use crate::metrics::FrontendMetrics;
use crate::pins::{PinReason, Pins};
use crate::relay::{self, RelayError, StateCapture};
use crate::users::User;
use crate::{Shared, WorkerFrontend};

/// Holds one slot of `mysql.max_connections` for the life of a connection.
struct ConnectionSlot(Arc<Shared>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(crate) async fn run(
    fe: Rc<WorkerFrontend>,
    tcp: TcpStream,
    peer: SocketAddr,
    ctx: Rc<WorkerContext>,
) {
    let shared = fe.shared.clone();
    FrontendMetrics::inc(&shared.metrics.connections_accepted);
    let id = fe.next_connection_id();
    let mut io = PacketIo::new(Stream::Tcp(tcp));
    let open = shared.connections.fetch_add(1, Ordering::Relaxed) + 1;
    let _slot = ConnectionSlot(shared.clone());
    if open > shared.config.max_connections {
        send_err(
            &mut io,
            0,
            &ErrPacket::new(codes::TOO_MANY_CONNECTIONS, "Too many connections"),
        )
        .await;
        tracing::info!(%peer, max_connections = shared.config.max_connections, "refused client: max_connections reached");
        return;
    }
    let login = match tokio::time::timeout(
        shared.config.connect_timeout,
        handshake::login(&fe, &ctx, io, id, peer),
    )
    .await
    {
        Ok(Ok(login)) => login,
        Ok(Err(reason)) if reason == handshake::CLOSED_BEFORE_LOGIN => {
            tracing::debug!(%peer, connection = id, "{reason}");
            return;
        }
        Ok(Err(reason)) => {
            tracing::info!(%peer, connection = id, %reason, "login failed");
            return;
        }
        Err(_) => {
            tracing::info!(%peer, connection = id, timeout = ?shared.config.connect_timeout, "client did not finish the handshake within connect_timeout; closing");
            return;
        }
    };
    let user = login.user.clone();
    let mut session = Session {
        fe: fe.clone(),
        ctx,
        io: login.io,
        id,
        peer,
        user: login.user,
        capabilities: login.capabilities,
        charset: login.charset,
        schema: login.database,
        schema_checked: false,
        lease: None,
        status: status::AUTOCOMMIT,
        scramble: login.scramble,
        vars: SessionVars::default(),
        last_insert_id: 0,
        pins: Pins::default(),
        state_data: Vec::new(),
        pending_collation: None,
        conn_key: None,
    };
    session.pin_if_not_multiplexing();
    let end = session.serve().await;
    match &end {
        End::Quit | End::ClientGone => {
            tracing::debug!(%peer, connection = id, "session ended: {end:?}");
        }
        _ => tracing::info!(%peer, connection = id, "session ended: {end:?}"),
    }
    shared.per_user.release(&session.user.name);
    drop(user);
}

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

/// Fields are read through `Debug` in the session-end log line.
#[derive(Debug)]
#[allow(dead_code)]
enum End {
    Quit,
    ClientGone,
    Shutdown,
    /// A protocol violation or limit; the client was sent an ERR saying which.
    Refused(String),
    BackendLost(String),
}

struct Session {
    fe: Rc<WorkerFrontend>,
    ctx: Rc<WorkerContext>,
    io: PacketIo,
    id: u32,
    peer: SocketAddr,
    user: Arc<User>,
    capabilities: u32,
    charset: u8,
    schema: Option<Vec<u8>>,
    /// The backend has confirmed `schema` exists (it was made current on the lease).
    schema_checked: bool,
    lease: Option<Lease>,
    /// Server status flags from the last answer, for the OK packets manifold sends itself.
    status: u16,
    scramble: [u8; 20],
    /// System variables the session changed, as the backends reported them.
    vars: SessionVars,
    /// What `LAST_INSERT_ID()` returns for this session.
    last_insert_id: u64,
    pins: Pins,
    /// Reused buffer for the session-state data of an answer.
    state_data: Vec<u8>,
    /// The collation a running `SET NAMES ... COLLATE` sets, which servers do not report.
    pending_collation: Option<Vec<u8>>,
    /// The key of the backend connections this session can use; built at the first borrow,
    /// dropped when the user, flags or character set change.
    conn_key: Option<ConnKey>,
}

/// What a forwarded command does besides running, decided from its first packet.
#[derive(Debug, Clone, Copy)]
enum Effect {
    None,
    /// `COM_QUERY`, with what the lexer saw in it.
    Query(Scan),
    StmtPrepare,
    StmtClose,
}

/// What the command loop does with a command, decided from its first packet.
enum Action {
    Quit,
    Ping,
    InitDb(Vec<u8>),
    ChangeUser(ChangeUser),
    ResetConnection,
    SetOption(u16),
    Forward(ResponseKind, Effect),
    Unknown(u8),
}

impl Session {
    fn max_packet(&self) -> usize {
        self.fe.shared.config.max_allowed_packet as usize
    }

    async fn refuse(&mut self, seq: u8, code: ErrorCode, message: String) -> End {
        send_err(&mut self.io, seq, &ErrPacket::new(code, message.clone())).await;
        FrontendMetrics::inc(&self.fe.shared.metrics.protocol_errors);
        End::Refused(message)
    }

    async fn serve(&mut self) -> End {
        // One drain waiter and one idle timer for the whole session, re-armed lazily: a timer
        // or waiter registered per command would cost the hot path a wheel insert and a lock.
        let ctx = self.ctx.clone();
        let drained = ctx.drain().notified();
        tokio::pin!(drained);
        let mut wait = self.idle_limit();
        let mut last_active = tokio::time::Instant::now();
        let idle = tokio::time::sleep_until(last_active + wait);
        tokio::pin!(idle);
        loop {
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
            let read = tokio::select! {
                r = self.io.read_packet(max) => r,
                () = &mut drained => return End::Shutdown,
                why = backend_gone(&mut self.lease) => {
                    // The server ended the session while the client was idle. Close the
                    // client too, as the server would have: a client checking its idle
                    // connection then sees EOF and reconnects, instead of getting ERR 7702 on
                    // its next statement with its session state silently gone.
                    if let Some(l) = self.lease.take() {
                        l.discard();
                    }
                    tracing::info!(connection = self.id, peer = %self.peer, %why, "backend ended an idle session; closing the client");
                    return End::BackendLost(why);
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
            let p = match read {
                Ok(p) => p,
                Err(ReadError::Closed) => return End::ClientGone,
                Err(ReadError::Io(e)) => {
                    tracing::debug!(connection = self.id, error = %e, "client read failed");
                    return End::ClientGone;
                }
                Err(ReadError::Timeout) => {
                    let msg = format!("Got timeout reading communication packets: idle for longer than wait_timeout ({wait:?})");
                    return self.refuse(0, codes::NET_READ_TIMEOUT, msg).await;
                }
                Err(ReadError::Proto(ProtoError::TooLarge { size, limit })) => {
                    let msg = format!(
                        "Got a packet bigger than 'max_allowed_packet' bytes ({size} > {limit})"
                    );
                    return self.refuse(1, codes::NET_PACKET_TOO_LARGE, msg).await;
                }
                Err(ReadError::Proto(ProtoError::Sequence { expected, got })) => {
                    let msg = format!(
                        "Got packets out of order (sequence id {got}, expected {expected})"
                    );
                    return self
                        .refuse(expected, codes::NET_PACKETS_OUT_OF_ORDER, msg)
                        .await;
                }
                Err(ReadError::Proto(e)) => {
                    return self
                        .refuse(
                            1,
                            codes::NET_READ_ERROR,
                            format!("Got an error reading communication packets: {e}"),
                        )
                        .await;
                }
            };
            if p.first_seq != 0 {
                let msg = format!(
                    "Got packets out of order (command with sequence id {}, expected 0)",
                    p.first_seq
                );
                self.io.consume(p.raw_len);
                return self.refuse(1, codes::NET_PACKETS_OUT_OF_ORDER, msg).await;
            }
            let reply_seq = p.last_seq.wrapping_add(1);
            // Classify from the first physical packet: only small commands need their whole body.
            let first_len = if p.frames > 1 {
                MAX_PAYLOAD
            } else {
                p.payload_len
            };
            let action = {
                let first = &self.io.rbuf[4..4 + first_len];
                match Command::decode(first) {
                    Err(e) => Err(e),
                    Ok(Command::Quit) => Ok(Action::Quit),
                    Ok(Command::Ping) => Ok(Action::Ping),
                    Ok(Command::InitDb(s)) => Ok(Action::InitDb(s.to_vec())),
                    Ok(Command::ChangeUser) => {
                        ChangeUser::decode(first, self.capabilities).map(Action::ChangeUser)
                    }
                    Ok(Command::ResetConnection) => Ok(Action::ResetConnection),
                    Ok(Command::SetOption(o)) => Ok(Action::SetOption(o)),
                    Ok(Command::Unsupported(c)) => Ok(Action::Unknown(c)),
                    Ok(Command::Query(sql)) => {
                        let scan = manifold_sql_lex::scan(sql);
                        if scan.has(Scan::SET_NAMES_COLLATE) {
                            self.pending_collation = manifold_sql_lex::set_names_collation(sql)
                                .map(<[u8]>::to_ascii_lowercase);
                        }
                        Ok(Action::Forward(
                            ResponseKind::ResultSets,
                            Effect::Query(scan),
                        ))
                    }
                    Ok(c @ Command::StmtPrepare(_)) => {
                        Ok(Action::Forward(c.response_kind(), Effect::StmtPrepare))
                    }
                    Ok(c @ Command::StmtClose { .. }) => {
                        Ok(Action::Forward(c.response_kind(), Effect::StmtClose))
                    }
                    Ok(c) => Ok(Action::Forward(c.response_kind(), Effect::None)),
                }
            };
            let action = match action {
                Ok(a) => a,
                Err(e) => {
                    self.io.consume(p.raw_len);
                    return self
                        .refuse(
                            reply_seq,
                            codes::NET_READ_ERROR,
                            format!("Malformed command packet: {e}"),
                        )
                        .await;
                }
            };
            let outcome = match action {
                Action::Quit => return End::Quit,
                Action::Unknown(c) => {
                    self.io.consume(p.raw_len);
                    return self
                        .refuse(
                            reply_seq,
                            codes::UNKNOWN_COMMAND,
                            format!("Unknown command 0x{c:02x}"),
                        )
                        .await;
                }
                Action::Ping => {
                    self.io.consume(p.raw_len);
                    if self.schema_checked || self.schema.is_none() {
                        self.send_ok(reply_seq).await
                    } else {
                        // An unchecked schema from the handshake: confirm it like a login would.
                        let checked = self.ensure_backend(false).await;
                        self.release_if_unpinned();
                        match checked {
                            Ok(()) => self.send_ok(reply_seq).await,
                            Err(e) => self.send_err_packet(reply_seq, &e).await,
                        }
                    }
                }
                Action::ChangeUser(cu) => {
                    self.io.consume(p.raw_len);
                    match self.change_user(cu, reply_seq).await {
                        Ok(()) => Ok(()),
                        Err(end) => return end,
                    }
                }
                Action::InitDb(schema) => {
                    self.forward(
                        p.raw_len,
                        reply_seq,
                        ResponseKind::Single,
                        Effect::None,
                        Some(schema),
                        None,
                    )
                    .await
                }
                Action::SetOption(o) => {
                    self.forward(
                        p.raw_len,
                        reply_seq,
                        ResponseKind::Single,
                        Effect::None,
                        None,
                        Some(o),
                    )
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

    async fn send_ok(&mut self, seq: u8) -> Result<(), End> {
        let ok = OkPacket {
            status: self.status,
            ..Default::default()
        };
        let mut out = Vec::with_capacity(16);
        ok.encode(&mut out, self.capabilities);
        self.io
            .send(seq, &out)
            .await
            .map(|_| ())
            .map_err(|_| End::ClientGone)
    }

    async fn send_err_packet(&mut self, seq: u8, err: &ErrPacket) -> Result<(), End> {
        let mut out = Vec::with_capacity(64);
        err.encode(&mut out);
        self.io
            .send(seq, &out)
            .await
            .map(|_| ())
            .map_err(|_| End::ClientGone)
    }

    /// Borrows a backend connection if the session holds none and brings it to the session's
    /// state: schema, changed variables, and (when the statement asks for it)
    /// `LAST_INSERT_ID()`. The ERR to send the client is returned on failure.
    async fn ensure_backend(&mut self, wants_last_insert_id: bool) -> Result<(), ErrPacket> {
        if self.lease.is_none() {
            let key = self.conn_key.get_or_insert_with(|| {
                ConnKey::new(
                    &self.user.backend_user,
                    &self.user.backend_password,
                    self.capabilities,
                    self.charset,
                    self.io.stream.is_tls(),
                )
            });
            match self
                .fe
                .pool
                .acquire(key, self.schema.as_deref(), self.vars.signature())
                .await
            {
                Ok(l) => self.lease = Some(l),
                Err(e) => {
                    FrontendMetrics::inc(&self.fe.shared.metrics.backend_errors);
                    tracing::warn!(connection = self.id, error = %e, "no backend connection");
                    return Err(e.to_err_packet());
                }
            }
        }
        let lease = self.lease.as_mut().expect("just ensured");
        let conn = lease.conn();
        let schema_differs = match (&conn.schema, &self.schema) {
            (Schema::Known(have), Some(want)) => have != want,
            (Schema::None, None) => false,
            _ => true,
        };
        if !self.schema_checked || schema_differs {
            match conn.use_schema(self.schema.as_deref()).await {
                Ok(Ok(())) => self.schema_checked = true,
                Ok(Err(e)) => {
                    // As a server would at login: the schema does not exist or is not allowed.
                    self.schema = None;
                    self.schema_checked = true;
                    return Err(e);
                }
                Err(e) => {
                    self.lease.take().expect("lease").discard();
                    return Err(e.to_err_packet());
                }
            }
        }
        let conn = self.lease.as_mut().expect("just ensured").conn();
        if !conn.tracking {
            // Changes made on this connection cannot be seen: the session stays on it.
            self.pins.pin(PinReason::NoTracking, &self.fe.pins, self.id);
        }
        let last_insert_id = (wants_last_insert_id && conn.last_insert_id != self.last_insert_id)
            .then_some(self.last_insert_id);
        if conn.vars != self.vars || last_insert_id.is_some() {
            match conn.sync_vars(&self.vars, last_insert_id).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    self.lease.take().expect("lease").discard();
                    // The backend's own code and SQLSTATE, with what manifold was doing.
                    let message = format!(
                        "manifold could not restore the session's variables on a backend connection: {}",
                        e.message_lossy()
                    );
                    return Err(ErrPacket {
                        message: message.into_bytes(),
                        ..e
                    });
                }
                Err(e) => {
                    self.lease.take().expect("lease").discard();
                    return Err(e.to_err_packet());
                }
            }
        }
        Ok(())
    }

    /// How long the client may stay idle: `mysql.wait_timeout`, or less if the session set
    /// its own `wait_timeout` (which the backend connection, back in the pool while the
    /// session idles, cannot enforce).
    fn idle_limit(&self) -> std::time::Duration {
        let configured = self.fe.shared.config.wait_timeout;
        self.vars
            .get(b"wait_timeout")
            .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
            .map_or(configured, |secs| {
                configured.min(std::time::Duration::from_secs(secs.max(1)))
            })
    }

    fn pin_if_not_multiplexing(&mut self) {
        if !self.fe.shared.config.multiplexing {
            self.pins.pin(PinReason::Disabled, &self.fe.pins, self.id);
        }
    }

    /// Gives the backend connection back when nothing pins the session to it. The pool keeps
    /// it as it is (no reset): its state is known, and a session wanting it is served first.
    fn release_if_unpinned(&mut self) {
        if self.pins.is_pinned() {
            return;
        }
        if let Some(mut lease) = self.lease.take() {
            lease.mark_clean();
        }
    }

    /// `COM_RESET_CONNECTION`: the session's state goes back to what it was after login,
    /// as MySQL resets it; the backend connection, if one is held, is reset too.
    async fn reset_connection(&mut self, seq: u8) -> Result<(), End> {
        self.vars.clear();
        self.last_insert_id = 0;
        self.pins.clear();
        self.pin_if_not_multiplexing();
        if let Some(lease) = self.lease.as_mut() {
            match lease.conn().reset().await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return self.send_err_packet(seq, &e).await,
                Err(e) => {
                    self.lease.take().expect("lease").discard();
                    return self.send_err_packet(seq, &e.to_err_packet()).await;
                }
            }
        }
        self.release_if_unpinned();
        self.send_ok(seq).await
    }

    /// Takes in what a statement's answer said about the session's state: tracked
    /// variables and schema, insert id, transaction status; and what the lexer saw.
    fn after_statement(&mut self, effect: Effect, r: &relay::Relayed) {
        let id = self.id;
        let fe = self.fe.clone();
        let counters = &*fe.pins;
        let mut explained = false;
        if !self.state_data.is_empty() {
            tracing::trace!(connection = id, data = ?String::from_utf8_lossy(&self.state_data), "session state changes");
            let changes = TrackedChanges::decode(&self.state_data);
            self.state_data.clear();
            let conn = self.lease.as_mut().map(Lease::conn);
            match changes {
                Some(t) => {
                    let mut conn = conn;
                    for (name, value) in &t.vars {
                        if is_tracking_variable(name) {
                            self.pins.pin(PinReason::SessionTracking, counters, id);
                            continue;
                        }
                        if !is_carried(name) {
                            explained = true;
                            continue;
                        }
                        if name == b"sql_log_bin" && (value == b"OFF" || value == b"0") {
                            self.pins.pin(PinReason::SqlLogBin, counters, id);
                        }
                        self.vars.set(name, value);
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
                    }
                    if t.state_changed && !explained {
                        let known = matches!(effect, Effect::Query(scan) if scan.has(Scan::UNREPORTED_STATE));
                        if !known {
                            self.pins.pin(PinReason::UntrackedState, counters, id);
                        }
                    }
                }
                None => self.pins.pin(PinReason::UntrackedState, counters, id),
            }
        }
        if let Some(collation) = self.pending_collation.take() {
            if !r.saw_error {
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
        let mut hold = r.leaves_info();
        match effect {
            Effect::Query(scan) => {
                self.pins
                    .after_query(&scan, !r.saw_error, in_transaction, counters, id);
                hold |= scan.has(Scan::CALC_FOUND_ROWS);
            }
            Effect::StmtPrepare if !r.saw_error => self.pins.prepared(1, counters, id),
            Effect::StmtClose => self.pins.prepared(-1, counters, id),
            _ => {}
        }
        self.pins.hold_for_next(hold, counters, id);
        self.release_if_unpinned();
    }

    async fn forward(
        &mut self,
        raw_len: usize,
        reply_seq: u8,
        kind: ResponseKind,
        effect: Effect,
        init_db: Option<Vec<u8>>,
        set_option: Option<u16>,
    ) -> Result<(), End> {
        let wants_last_insert_id =
            matches!(effect, Effect::Query(scan) if scan.has(Scan::LAST_INSERT_ID));
        let mut result;
        let mut retried = false;
        loop {
            // A session holding no connection has all its state in manifold: if a pooled
            // connection turns out dead before answering, the command can run on another.
            let movable = self.lease.is_none();
            if let Err(e) = self.ensure_backend(wants_last_insert_id).await {
                self.pending_collation = None;
                self.io.consume(raw_len);
                self.release_if_unpinned();
                return self.send_err_packet(reply_seq, &e).await;
            }
            result = self
                .relay_once(raw_len, reply_seq, kind, &mut retried, movable)
                .await;
            if result.is_some() {
                break;
            }
        }
        let result = result.expect("loop ends with a result");
        self.finish_forward(result, kind, effect, init_db, set_option)
            .await
    }

    /// One attempt at relaying a command; `None` when it must be retried on another
    /// connection (a reused pooled connection failed before answering, for the first time).
    async fn relay_once(
        &mut self,
        raw_len: usize,
        reply_seq: u8,
        kind: ResponseKind,
        retried: &mut bool,
        movable: bool,
    ) -> Option<Result<relay::Relayed, RelayError>> {
        let deprecate_eof = self.capabilities & caps::DEPRECATE_EOF != 0;
        let max = self.max_packet();
        let lease = self.lease.as_mut().expect("ensured");
        let reused = lease.reused();
        let result = relay::forward(
            &mut self.io,
            lease.conn(),
            raw_len,
            kind,
            deprecate_eof,
            reply_seq,
            max,
            StateCapture {
                data: &mut self.state_data,
                strip: self.capabilities & caps::SESSION_TRACK == 0,
            },
        )
        .await;
        if let Err(RelayError::Backend {
            message,
            unanswered: true,
            ..
        }) = &result
        {
            if movable && reused && !*retried {
                *retried = true;
                self.state_data.clear();
                self.lease.take().expect("lease").discard();
                tracing::info!(connection = self.id, %message, "pooled backend connection failed before answering; running the command on another");
                return None;
            }
            self.io.consume(raw_len);
        }
        Some(result)
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
                self.after_statement(effect, &r);
                Ok(())
            }
            Err(RelayError::Client(reason)) => {
                self.state_data.clear();
                tracing::debug!(connection = self.id, %reason, "client failed during a statement");
                // The backend's answer was cut short: its connection cannot be reused.
                if let Some(l) = self.lease.take() {
                    l.discard();
                }
                Err(End::ClientGone)
            }
            Err(RelayError::Backend {
                message, err_seq, ..
            }) => {
                self.state_data.clear();
                FrontendMetrics::inc(&self.fe.shared.metrics.backend_errors);
                if let Some(l) = self.lease.take() {
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

    async fn change_user(&mut self, cu: ChangeUser, seq: u8) -> Result<(), End> {
        let shared = self.fe.shared.clone();
        let old = self.user.clone();
        let auth = handshake::authenticate(
            &shared,
            &self.ctx,
            &mut self.io,
            seq,
            &cu.user,
            cu.auth_plugin.as_deref(),
            None,
            cu.auth_response.clone(),
            &self.scramble,
            self.peer,
        )
        .await;
        // Whatever the outcome, the session state is gone, as on a server: returning the lease
        // resets it.
        self.lease = None;
        self.schema_checked = false;
        self.status = status::AUTOCOMMIT;
        self.vars.clear();
        self.last_insert_id = 0;
        self.pins.clear();
        self.pin_if_not_multiplexing();
        self.conn_key = None;
        let (user, seq) = match auth {
            Ok(r) => r,
            Err(AuthFailure::Denied(reason)) => {
                // Like MariaDB: the client got ERR 1045 and stays logged in as before.
                tracing::info!(connection = self.id, %reason, "COM_CHANGE_USER refused");
                return Ok(());
            }
            Err(AuthFailure::Broken(reason)) => {
                return Err(End::Refused(format!("COM_CHANGE_USER failed: {reason}")))
            }
        };
        if !shared.per_user.acquire(&user.name, user.max_connections) {
            let msg = format!(
                "User '{}' has exceeded the 'max_connections' resource (current value: {})",
                user.name, user.max_connections
            );
            return Err(self.refuse(seq, codes::USER_LIMIT_REACHED, msg).await);
        }
        shared.per_user.release(&old.name);
        self.user = user;
        self.schema = (!cu.database.is_empty()).then_some(cu.database);
        if let Some(cs) = cu.charset {
            if cs != 0 {
                self.charset = cs as u8;
            }
        }
        self.send_ok(seq).await
    }
}
