//! A client session: login, then the command loop.

use manifold_engine::clock;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use manifold_backend::io::{PacketIo, ReadError, Stream};
use manifold_backend::state::{is_carried, is_tracking_variable, state_signature};
use manifold_backend::{
    Acquired, BackendError, ConnKey, ErrorKind, Lease, Schema, ServerFlavor, SessionVars,
    TrackedChanges, UserVars,
};
use manifold_engine::WorkerContext;
use manifold_mysql_proto::consts::{caps, column_flag, column_type, status, MAX_PAYLOAD};
use manifold_mysql_proto::handshake::ChangeUser;
use manifold_mysql_proto::packets::{
    encode_text_result_set, ColumnDefinition, EofPacket, ErrPacket, OkPacket,
};
use manifold_mysql_proto::{
    codes, renumber, Command, ErrorCode, PacketBuilder, ProtoError, ResponseKind,
};
use manifold_router::{CausalReads, Gtid, GtidPos, NodeId};
use manifold_sql_lex::{
    Class, Kill, RouteHint, Scan, ScanMemo, SessionValues, ShowDiagnostics, Verb,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::handshake::{self, send_err, AuthFailure};
use crate::metrics::FrontendMetrics;
use crate::pins::{PinReason, Pins};
use crate::registry::SessionHandle;
use crate::relay::{self, Outgoing, RelayError, StateCapture};
use crate::statements::{ExecuteLayout, SessionStatements, StatementMeta};
use crate::telemetry::Stage;
use crate::users::User;
use crate::{Shared, WorkerFrontend};

/// Holds one slot of `mysql.max_connections` for the life of a connection.
struct ConnectionSlot(Arc<Shared>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
        FrontendMetrics::inc(&self.0.metrics.connections_closed);
    }
}

pub(crate) async fn run(
    fe: Rc<WorkerFrontend>,
    tcp: TcpStream,
    peer: SocketAddr,
    ctx: Rc<WorkerContext>,
) {
    let shared = fe.shared.clone();
    let accepted = shared
        .settings
        .stage_histograms
        .load(Ordering::Relaxed)
        .then(clock::now);
    FrontendMetrics::inc(&shared.metrics.connections_accepted);
    let id = fe.next_connection_id();
    let mut io = PacketIo::new(Stream::Tcp(tcp));
    let open = shared.connections.fetch_add(1, Ordering::Relaxed) + 1;
    let _slot = ConnectionSlot(shared.clone());
    let max_connections = shared.settings.max_connections.load(Ordering::Relaxed);
    if open > max_connections {
        send_err(
            &mut io,
            0,
            &ErrPacket::new(codes::TOO_MANY_CONNECTIONS, "Too many connections"),
        )
        .await;
        shared.connection_log(|suppressed| {
            tracing::info!(target: "manifold::connections", %peer, max_connections, suppressed, "refused client: max_connections reached");
        });
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
            shared.connection_log(|suppressed| {
                tracing::info!(target: "manifold::connections", %peer, connection = id, %reason, suppressed, "login failed");
            });
            return;
        }
        Err(_) => {
            shared.connection_log(|suppressed| {
                tracing::info!(target: "manifold::connections", %peer, connection = id, timeout = ?shared.config.connect_timeout, suppressed, "client did not finish the handshake within connect_timeout; closing");
            });
            return;
        }
    };
    if let (Some(accepted), Some(greeted)) = (accepted, login.greeted_at) {
        fe.telemetry
            .record_span(Stage::Connect, Some(accepted), Some(greeted));
        fe.telemetry
            .record_span(Stage::Auth, Some(greeted), Some(clock::now()));
    }
    let user = login.user.clone();
    let registration = fe.sessions.register(id, &login.user.name, peer);
    let mut session = Session {
        handle: registration.handle.clone(),
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
        cluster: 0,
        lease_node: 0,
        schema_follows_statement: false,
        setup_lost: false,
        last_write: None,
        last_write_seen_on: 0,
        last_write_missing_on: 0,
        last_write_missing: None,
        last_write_cluster: 0,
        status: status::AUTOCOMMIT,
        scramble: login.scramble,
        vars: SessionVars::default(),
        user_vars: UserVars::default(),
        assigned_user_vars: Vec::new(),
        previous: PreviousStatement::default(),
        last_insert_id: 0,
        pins: Pins::default(),
        state_data: Vec::new(),
        pending_collation: None,
        conn_key: None,
        stmts: SessionStatements::default(),
        exec_buf: Vec::new(),
        digest: Vec::new(),
        digest_hash: None,
        times: CommandTimes {
            clock: shared.timing(),
            ..CommandTimes::default()
        },
        scan_memo: ScanMemo::new(),
    };
    session.pin_if_not_multiplexing();
    session.handle.publish_pins(session.pins.bits());
    let end = session.serve().await;
    match &end {
        End::Quit | End::ClientGone => {
            tracing::debug!(%peer, connection = id, "session ended: {end:?}");
        }
        _ => tracing::info!(%peer, connection = id, "session ended: {end:?}"),
    }
    session.user.release_connection();
    drop(registration);
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

/// Why a prepared statement could not be made ready on a backend connection.
enum BindError {
    /// The server (or manifold) refused: the client gets this ERR, the connection is fine.
    Refused(ErrPacket),
    Lost(BackendError),
}

impl From<BackendError> for BindError {
    fn from(e: BackendError) -> Self {
        BindError::Lost(e)
    }
}

fn unknown_statement(id: u32, function: &str) -> ErrPacket {
    ErrPacket::new(
        codes::UNKNOWN_STMT_HANDLER,
        format!("Unknown prepared statement handler ({id}) given to {function}"),
    )
}

/// Fields are read through `Debug` in the session-end log line.
#[derive(Debug)]
#[allow(dead_code)]
enum End {
    Quit,
    ClientGone,
    Shutdown,
    /// `KILL CONNECTION` from another session.
    Killed,
    /// A protocol violation or limit; the client was sent an ERR saying which.
    Refused(String),
    BackendLost(String),
}

/// What a statement leaves for the next one to ask about (`ROW_COUNT()`, `FOUND_ROWS()`,
/// `SHOW WARNINGS`, `@@warning_count`). The server keeps these per connection; a session
/// that moves between connections keeps its own, so no connection is held for them.
#[derive(Debug)]
struct PreviousStatement {
    row_count: i64,
    found_rows: u64,
    /// `@@warning_count`: every condition raised, including any past `max_error_count`.
    warning_count: u64,
    /// The conditions as `SHOW WARNINGS` lists them: level, code, message.
    conditions: Vec<[Vec<u8>; 3]>,
    /// The session prepared a statement asking about its previous statement: prepared text
    /// cannot be rewritten per execution, so the connection is held after statements that
    /// leave something to ask about, as ProxySQL does.
    asked_by_prepared: bool,
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

/// When the steps of a command happened; all `None` when nothing is timed.
#[derive(Debug, Default, Clone, Copy)]
struct CommandTimes {
    /// Timing is on for this command (stage histograms, digest statistics or the slow log).
    clock: bool,
    /// The command's first bytes arrived (unset when it was already buffered).
    first_byte: Option<u64>,
    /// Its last byte was read.
    read: Option<u64>,
    /// Its node was chosen.
    routed: Option<u64>,
    /// The session got its backend connection (only when it had none).
    acquired: Option<u64>,
}

struct Session {
    /// What other sessions (`KILL`) see of this one.
    handle: Arc<SessionHandle>,
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
    /// The cluster the session's statements go to (and `lease` belongs to while held).
    cluster: usize,
    /// The node `lease` is a connection to.
    lease_node: NodeId,
    /// The command about to run changes the schema on another cluster (`USE`, `COM_INIT_DB`).
    schema_follows_statement: bool,
    /// The connection just borrowed broke while being brought to the session's state:
    /// nothing of the command ran, so it may go to another connection.
    setup_lost: bool,
    /// The GTID of the session's last committed write (`last_gtid`, tracked by the server):
    /// what its reads must see (`routing.causal_reads = session`).
    last_write: Option<Gtid>,
    /// Nodes known to have applied `last_write` (a bit per node).
    last_write_seen_on: u64,
    /// Nodes that did not apply a write of the session (`last_write_missing`) within
    /// `routing.causal_read_timeout`: the session's reads avoid them until the monitor sees
    /// they have it, instead of waiting on them again after each write.
    last_write_missing_on: u64,
    last_write_missing: Option<Gtid>,
    /// The cluster `last_write` was made in: only its nodes can have it.
    last_write_cluster: usize,
    /// Server status flags from the last answer, for the OK packets manifold sends itself.
    status: u16,
    scramble: [u8; 20],
    /// System variables the session changed, as the backends reported them.
    vars: SessionVars,
    /// User variables the session set, read back after each statement assigning them.
    user_vars: UserVars,
    /// Names of the user variables the command being forwarded assigns (buffer reused).
    assigned_user_vars: Vec<Vec<u8>>,
    /// What the session's previous statement left for the next to ask about.
    previous: PreviousStatement,
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
    /// The session's prepared statements (see [`crate::statements`]).
    stmts: SessionStatements,
    /// Reused buffer for a prepared-statement command manifold had to rebuild.
    exec_buf: Vec<u8>,
    /// The digest text of the statement being routed, when routing rules match digests or
    /// digest statistics are kept.
    digest: Vec<u8>,
    /// The hash of `digest`, when the statement being forwarded has one.
    digest_hash: Option<u64>,
    /// When the steps of the command being handled happened (see [`crate::telemetry`]).
    times: CommandTimes,
    /// How the session's last statement with a value began: the next one that begins the
    /// same way is scanned from its first value.
    scan_memo: ScanMemo,
}

/// What a forwarded command does besides running, decided from its first packet.
#[derive(Debug, Clone, Copy)]
enum Effect {
    None,
    /// `COM_QUERY`, with what the lexer saw in it.
    Query(Scan),
    /// `COM_STMT_EXECUTE` of the session's statement `id` (resolved), with what the lexer saw
    /// in the statement's text and where the parts of the command are.
    Execute {
        id: u32,
        scan: Scan,
        layout: ExecuteLayout,
    },
    /// `COM_STMT_FETCH` from the statement's open cursor.
    Fetch(u32),
    /// `COM_STMT_SEND_LONG_DATA`.
    LongData(u32),
    /// `COM_STMT_RESET` of a statement with a cursor or long data on the pinned connection.
    Reset(u32),
}

impl Effect {
    /// The session's prepared statement the command names, which must be ready on the
    /// backend connection before the command goes there.
    fn statement(self) -> Option<u32> {
        match self {
            Effect::Execute { id, .. }
            | Effect::Fetch(id)
            | Effect::LongData(id)
            | Effect::Reset(id) => Some(id),
            Effect::None | Effect::Query(_) => None,
        }
    }

    fn scan(self) -> Option<Scan> {
        match self {
            Effect::Query(scan) | Effect::Execute { scan, .. } => Some(scan),
            _ => None,
        }
    }
}

/// How many connections that broke before a command went out it tries before failing.
const MAX_SETUP_ATTEMPTS: u32 = 4;

/// Whether a command whose backend connection fails before answering runs again on another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    Never,
    /// Once, if the connection came from the pool (the server may have closed it there).
    OnceIfReused,
    /// On another node, if no answer reached the client, even if the server may have run
    /// it, and another node can read: a read, whose node may have just died.
    Elsewhere,
}

/// Where a statement may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Primary,
    /// Any node that can read, by weight.
    Any,
    /// Any node but the primary that can read (the primary when none can).
    Replicas,
    Node(NodeId),
}

impl From<manifold_router::Target> for Target {
    fn from(t: manifold_router::Target) -> Self {
        match t {
            manifold_router::Target::Primary => Target::Primary,
            manifold_router::Target::Replicas => Target::Replicas,
            manifold_router::Target::Node(n) => Target::Node(n),
        }
    }
}

/// Where a statement may go by itself: a hint decides, then the first matching rule, then
/// the statement's class. Rules move reads (and `CALL`s, multi-statements...); writes,
/// locking reads, transaction control and `SET` stay on the primary whatever a rule says.
/// `SHOW` stays on the primary: it describes the server that answers.
fn statement_target(scan: &Scan, rule: Option<Target>) -> Target {
    match (scan.hint, rule) {
        (Some(RouteHint::Primary), _) => Target::Primary,
        (Some(RouteHint::Replica), _) => Target::Replicas,
        (None, Some(t))
            if matches!(
                scan.class(),
                Class::Read | Class::BeginReadOnly | Class::Unknown
            ) =>
        {
            t
        }
        (None, _) => match scan.class() {
            Class::Read if scan.verb != Verb::Show => Target::Any,
            Class::BeginReadOnly => Target::Any,
            _ => Target::Primary,
        },
    }
}

/// What a read routed to a replica must wait for there first (causal reads).
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// The session's last write.
    Write(Gtid),
    /// Everything the primary has committed as of now.
    Primary,
}

/// Prepared-statement commands other than `COM_STMT_PREPARE`, with the client's statement id.
#[derive(Debug, Clone, Copy)]
enum StmtCommand {
    Execute(u32),
    LongData(u32),
    Fetch(u32),
    Reset(u32),
    Close(u32),
}

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

/// What the command loop does with a command, decided from its first packet.
enum Action {
    Quit,
    Ping,
    InitDb(Vec<u8>),
    ChangeUser(ChangeUser),
    ResetConnection,
    SetOption(u16),
    Forward(ResponseKind, Effect),
    Prepare,
    Stmt(StmtCommand),
    Kill(Kill),
    /// `SHOW WARNINGS` / `SHOW ERRORS` answered from what the session kept.
    ShowDiagnostics(ShowDiagnostics),
    /// `GET DIAGNOSTICS` with no connection that ran the previous statement.
    GetDiagnostics,
    /// `SHOW [FULL] PROCESSLIST` (true: `FULL`), answered from manifold's sessions.
    ShowProcesslist(bool),
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
                r = self.io.read_packet_timed(max, timed, &mut self.times.first_byte) => r,
                () = &mut drained => return End::Shutdown,
                () = &mut killed => return End::Killed,
                why = backend_gone(&mut self.lease) => {
                    // The server ended the session while the client was idle. Close the
                    // client too, as the server would have: a client checking its idle
                    // connection then sees EOF and reconnects, instead of getting ERR 7702 on
                    // its next statement with its session state silently gone.
                    if let Some(l) = self.take_lease() {
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
            self.times.read = timed.then(clock::now);
            self.digest_hash = None;
            // Classify from the first physical packet: only small commands need their whole body.
            let first_len = if p.frames > 1 {
                MAX_PAYLOAD
            } else {
                p.payload_len
            };
            // A `USE` (or `COM_INIT_DB`) of a schema another cluster serves runs there.
            let mut use_cluster = None;
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
                    Ok(Command::ProcessKill(id)) => {
                        Ok(Action::Kill(Kill::Connection(u64::from(id))))
                    }
                    Ok(Command::Query(sql)) => {
                        self.handle
                            .statement_started(sql, self.times.read.unwrap_or_else(clock::now));
                        self.digest.clear();
                        let scan = if self.fe.shared.rules_need_digest
                            || self
                                .fe
                                .shared
                                .settings
                                .query_digests
                                .load(Ordering::Relaxed)
                        {
                            let (scan, hash) = manifold_sql_lex::scan_with_digest_memo(
                                sql,
                                &mut self.digest,
                                &mut self.scan_memo,
                            );
                            self.digest_hash = Some(hash);
                            scan
                        } else {
                            manifold_sql_lex::scan_memo(sql, &mut self.scan_memo)
                        };
                        // Held connection: it ran the previous statement and knows about it.
                        let moved = self.lease.is_none();
                        if scan.verb == Verb::Use && self.fe.shared.clusters.len() > 1 {
                            use_cluster = manifold_sql_lex::parse_use(sql)
                                .map(|s| self.fe.shared.cluster_for(Some(s), &self.user.name));
                        }
                        if scan.has(Scan::KILL) {
                            Ok(Action::Kill(
                                manifold_sql_lex::parse_kill(sql).unwrap_or(Kill::Unsupported),
                            ))
                        } else if let Some(show) =
                            (moved && scan.has(Scan::WARNINGS) && scan.verb == Verb::Show)
                                .then(|| manifold_sql_lex::parse_show_diagnostics(sql))
                                .flatten()
                        {
                            Ok(Action::ShowDiagnostics(show))
                        } else if moved && scan.has(Scan::GET_DIAGNOSTICS) {
                            Ok(Action::GetDiagnostics)
                        } else if let Some(full) = (scan.has(Scan::PROCESSLIST)
                            && scan.verb == Verb::Show)
                            .then(|| manifold_sql_lex::parse_show_processlist(sql))
                            .flatten()
                        {
                            Ok(Action::ShowProcesslist(full))
                        } else {
                            if scan.has(Scan::SET_NAMES_COLLATE) {
                                self.pending_collation = manifold_sql_lex::set_names_collation(sql)
                                    .map(<[u8]>::to_ascii_lowercase);
                            }
                            Ok(Action::Forward(
                                ResponseKind::ResultSets,
                                Effect::Query(scan),
                            ))
                        }
                    }
                    Ok(Command::StmtPrepare(_)) => Ok(Action::Prepare),
                    Ok(Command::StmtExecute { statement_id, .. }) => {
                        Ok(Action::Stmt(StmtCommand::Execute(statement_id)))
                    }
                    Ok(Command::StmtSendLongData { statement_id, .. }) => {
                        Ok(Action::Stmt(StmtCommand::LongData(statement_id)))
                    }
                    Ok(Command::StmtFetch { statement_id, .. }) => {
                        Ok(Action::Stmt(StmtCommand::Fetch(statement_id)))
                    }
                    Ok(Command::StmtReset(id)) => Ok(Action::Stmt(StmtCommand::Reset(id))),
                    Ok(Command::StmtClose(id)) => Ok(Action::Stmt(StmtCommand::Close(id))),
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
            if self.lease.is_none() && self.fe.shared.clusters.len() > 1 {
                let before = self.cluster;
                self.cluster = match &action {
                    Action::InitDb(schema) => {
                        self.fe.shared.cluster_for(Some(schema), &self.user.name)
                    }
                    _ => use_cluster.unwrap_or_else(|| {
                        self.fe
                            .shared
                            .cluster_for(self.schema.as_deref(), &self.user.name)
                    }),
                };
                // The statement makes another schema current there: the session's current one
                // (which that cluster may not have) is not restored first.
                self.schema_follows_statement = self.cluster != before
                    && (use_cluster.is_some() || matches!(action, Action::InitDb(_)));
            }
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
                        let checked = self.ensure_backend(self.primary(), false).await;
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
                Action::Prepare => {
                    let sql = Box::<[u8]>::from(&p.payload(&self.io.rbuf)[1..]);
                    self.io.consume(p.raw_len);
                    self.stmt_prepare(reply_seq, sql).await
                }
                Action::Stmt(c) => {
                    if let StmtCommand::Execute(id) = c {
                        // What SHOW SESSIONS shows: the prepared statement's text.
                        if let Some(s) = self.stmts.get_mut(id) {
                            self.handle.execute_started(
                                &s.meta.sql,
                                self.times.read.unwrap_or_else(clock::now),
                            );
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
                Action::ShowProcesslist(full) => {
                    self.io.consume(p.raw_len);
                    let (columns, rows) =
                        crate::processlist::show(&self.fe.shared, &self.user, full);
                    self.send_result_set(reply_seq, &columns, &rows).await
                }
                Action::GetDiagnostics => {
                    self.io.consume(p.raw_len);
                    let e = ErrPacket::new(
                        codes::NOT_SUPPORTED_YET,
                        "This version of manifold doesn't yet support 'GET DIAGNOSTICS outside a stored program': the session's conditions are answered by SHOW WARNINGS, SHOW ERRORS and @@warning_count",
                    );
                    self.send_err_packet(reply_seq, &e).await
                }
            };
            self.schema_follows_statement = false;
            self.handle.statement_ended();
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

    /// What the session's backend connections are pooled under: its backend login,
    /// capabilities, character set and whether it came over TLS.
    /// Set once per session (and after what changes it); borrowers read the field.
    fn ensure_conn_key(&mut self) {
        if self.conn_key.is_none() {
            self.conn_key = Some(ConnKey::new(
                &self.user.backend_user,
                &self.user.backend_password,
                self.capabilities,
                self.charset,
                self.io.stream.is_tls(),
            ));
        }
    }

    /// Borrows a backend connection if the session holds none and brings it to the session's
    /// state: schema, changed variables, and (when the statement asks for it)
    /// `LAST_INSERT_ID()`. The ERR to send the client is returned on failure.
    /// A session holding a connection keeps it, whatever `node` says.
    async fn ensure_backend(
        &mut self,
        node: NodeId,
        wants_last_insert_id: bool,
    ) -> Result<(), ErrPacket> {
        if self.lease.is_none() {
            self.ensure_conn_key();
            let key = self.conn_key.as_ref().expect("just ensured");
            match self.fe.pools[self.cluster][node]
                .acquire(
                    key,
                    self.schema.as_deref(),
                    state_signature(&self.vars, &self.user_vars),
                )
                .await
            {
                Ok(mut l) => {
                    self.handle
                        .publish_backend_thread(self.cluster, node, l.conn().connection_id);
                    self.lease = Some(l);
                    self.lease_node = node;
                }
                Err(e) => {
                    if matches!(e.kind, ErrorKind::Connect | ErrorKind::ConnectTimeout) {
                        // The next read goes elsewhere, and writes wait for a primary, at
                        // once rather than after the monitor's next checks; the monitor
                        // takes the node back when it answers.
                        self.topology().nodes[node].shun(&e.message);
                    }
                    // A new connection that broke during its login (the server going down):
                    // the command may try another.
                    self.setup_lost = e.kind == ErrorKind::Lost;
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
        if (!self.schema_checked || schema_differs) && !self.schema_follows_statement {
            match conn.use_schema(self.schema.as_deref()).await {
                Ok(Ok(())) => self.schema_checked = true,
                Ok(Err(e)) => {
                    // As a server would at login: the schema does not exist or is not allowed.
                    self.schema = None;
                    self.schema_checked = true;
                    return Err(e);
                }
                Err(e) => {
                    self.take_lease().expect("lease").discard();
                    self.setup_lost = true;
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
        if conn.vars != self.vars || conn.user_vars != self.user_vars || last_insert_id.is_some() {
            match conn
                .sync_vars(&self.vars, &self.user_vars, last_insert_id)
                .await
            {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    self.take_lease().expect("lease").discard();
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
                    self.take_lease().expect("lease").discard();
                    self.setup_lost = true;
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

    /// Lets go of the backend connection (the caller returns or discards it).
    fn take_lease(&mut self) -> Option<Lease> {
        let lease = self.lease.take();
        if lease.is_some() {
            self.handle.publish_backend_thread(0, 0, 0);
        }
        lease
    }

    /// `KILL [QUERY] id` and `COM_PROCESS_KILL`, with manifold's connection ids: the target
    /// session's statement is interrupted on its backend connection (`KILL QUERY` of that
    /// connection's server thread, sent on one of this session's), and for `KILL CONNECTION`
    /// its client connection is closed. Only the same manifold user may kill a session.
    async fn kill(&mut self, kill: Kill, seq: u8) -> Result<(), End> {
        let (target, query_only) = match kill {
            Kill::Connection(id) => (id, false),
            Kill::Query(id) => (id, true),
            Kill::Unsupported => {
                let e = ErrPacket::new(
                    codes::NOT_SUPPORTED_YET,
                    "This version of manifold doesn't yet support 'KILL in this form': use KILL [CONNECTION | QUERY] <connection id>, a single statement",
                );
                return self.send_err_packet(seq, &e).await;
            }
        };
        let unknown = ErrPacket::new(
            codes::NO_SUCH_THREAD,
            format!("Unknown thread id: {target}"),
        );
        let Some(target) = u32::try_from(target).ok() else {
            return self.send_err_packet(seq, &unknown).await;
        };
        if target == self.id {
            if query_only {
                let e = ErrPacket::new(codes::QUERY_INTERRUPTED, "Query execution was interrupted");
                return self.send_err_packet(seq, &e).await;
            }
            let e = ErrPacket::new(codes::CONNECTION_KILLED, "Connection was killed");
            self.send_err_packet(seq, &e).await?;
            return Err(End::Refused("killed by its own KILL".into()));
        }
        let Some(handle) = self.fe.shared.find_session(target) else {
            return self.send_err_packet(seq, &unknown).await;
        };
        if handle.user() != self.user.name {
            let e = ErrPacket::new(
                codes::KILL_DENIED,
                format!("You are not owner of thread {target}"),
            );
            return self.send_err_packet(seq, &e).await;
        }
        let (cluster, node, thread) = handle.backend_thread();
        if thread != 0 {
            if self.lease.is_some() && (self.cluster, self.lease_node) != (cluster, node) {
                // `KILL QUERY` must run on the target's node.
                self.pins.hold_for_next(false, &self.fe.pins, self.id);
                self.release_if_unpinned();
            }
            if self.lease.is_none() {
                self.cluster = cluster;
            }
            if let Err(e) = self.ensure_backend(node, false).await {
                self.release_if_unpinned();
                return self.send_err_packet(seq, &e).await;
            }
            // Checked again just before sending: the target may have given the connection
            // back (to be borrowed by another session) while this one borrowed its own.
            if handle.backend_thread() == (cluster, node, thread)
                && (self.cluster, self.lease_node) == (cluster, node)
            {
                let sql = format!("KILL QUERY {thread}");
                let conn = self.lease.as_mut().expect("ensured").conn();
                match conn.simple_command(&Command::Query(sql.as_bytes())).await {
                    // 1094: the statement ended and the connection closed meanwhile.
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) if e.code == codes::NO_SUCH_THREAD.code => {}
                    Ok(Err(e)) => {
                        self.release_if_unpinned();
                        return self.send_err_packet(seq, &e).await;
                    }
                    Err(e) => return self.backend_failed(Some(seq), &e).await,
                }
            }
            self.release_if_unpinned();
        }
        if !query_only {
            handle.disconnect();
        }
        tracing::info!(
            connection = self.id,
            target,
            query_only,
            backend_thread = thread,
            "KILL"
        );
        self.send_ok(seq).await
    }

    /// Gives the backend connection back when nothing pins the session to it. The pool keeps
    /// it as it is (no reset): its state is known, and a session wanting it is served first.
    fn release_if_unpinned(&mut self) {
        if self.pins.is_pinned() {
            return;
        }
        if let Some(mut lease) = self.take_lease() {
            lease.mark_clean();
        }
    }

    /// `COM_RESET_CONNECTION`: the session's state goes back to what it was after login,
    /// as MySQL resets it; the backend connection, if one is held, is reset too.
    async fn reset_connection(&mut self, seq: u8) -> Result<(), End> {
        self.vars.clear();
        self.user_vars.clear();
        self.previous = PreviousStatement::default();
        self.stmts.clear();
        self.last_insert_id = 0;
        self.pins.clear();
        self.pin_if_not_multiplexing();
        if let Some(lease) = self.lease.as_mut() {
            match lease.conn().reset().await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return self.send_err_packet(seq, &e).await,
                Err(e) => {
                    self.take_lease().expect("lease").discard();
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
                self.note_write(g);
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
    }

    /// What a prepared-statement command left on the backend connection: a cursor, long data,
    /// or parameter types the server may have dropped.
    fn after_statement_command(&mut self, effect: Effect, stmt: u32, r: &relay::Relayed) {
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

    async fn forward(
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
                self.rewrite_session_values(raw_len, s.has(Scan::PROCESSLIST))
            }
            _ => false,
        };
        // COM_STMT_SEND_LONG_DATA has no answer, so no way to report a failure.
        let answered = kind != ResponseKind::None;
        if let Some(e) = self.leave_replica_for(effect) {
            self.pending_collation = None;
            self.io.consume(raw_len);
            return self.send_err_packet(reply_seq, &e).await;
        }
        let pipelinable = self.pipelinable(effect, raw_len);
        let mut result;
        let mut retried = false;
        // Nodes this command has given up on (shunned by a failed connect, or too far behind
        // for a causal read).
        let mut skip = 0u64;
        let mut primary_deadline = None;
        let mut attempts = 0;
        loop {
            // A session holding no connection has all its state in manifold: if a pooled
            // connection turns out dead before answering, the command can run on another.
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
            if pipelinable && movable && wait.is_none() {
                let got = self.acquire_or_follow(node, raw_len).await;
                if self.times.clock {
                    self.times.acquired = Some(clock::now());
                }
                match got {
                    Ok(followed) => sent = followed,
                    Err(e) => {
                        self.io.consume(raw_len);
                        return self.send_err_packet(reply_seq, &e).await;
                    }
                }
            }
            if sent {
                // Riding behind another session's command: the answer is next on the wire.
                result = self
                    .relay_once(raw_len, reply_seq, kind, Retry::Never, Outgo::Sent)
                    .await;
                break;
            }
            let ensured = self.ensure_backend(node, wants_last_insert_id).await;
            if movable && self.times.clock {
                self.times.acquired = Some(clock::now());
            }
            if let Err(e) = ensured {
                let lost = std::mem::take(&mut self.setup_lost);
                if movable
                    && attempts < MAX_SETUP_ATTEMPTS
                    && (lost || !self.topology().nodes[node].in_service())
                {
                    // The node was just found down, or the pooled connection dead: a read
                    // goes to another node, a write waits for a primary or tries another
                    // connection.
                    attempts += 1;
                    skip |= 1 << node;
                    FrontendMetrics::inc(&self.fe.shared.metrics.retries);
                    continue;
                }
                self.pending_collation = None;
                self.io.consume(raw_len);
                self.release_if_unpinned();
                if !answered {
                    return Ok(());
                }
                return self.send_err_packet(reply_seq, &e).await;
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
                    Err(BindError::Refused(e)) => {
                        self.io.consume(raw_len);
                        self.release_if_unpinned();
                        if !answered {
                            tracing::warn!(connection = self.id, error = %e.message_lossy(), "parameter data dropped: the statement could not be prepared on the backend connection");
                            return Ok(());
                        }
                        return self.send_err_packet(reply_seq, &e).await;
                    }
                    Err(BindError::Lost(e)) => {
                        if movable && !retried {
                            retried = true;
                            tracing::info!(connection = self.id, error = %e, "pooled backend connection failed preparing a statement; trying another");
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
            // A read that a replica fails before answering runs on another node.
            let read = effect
                .scan()
                .is_some_and(|s| matches!(s.class(), Class::Read | Class::BeginReadOnly));
            let retry = if movable && read && skip & (1 << node) == 0 {
                Retry::Elsewhere
            } else if movable && !retried {
                Retry::OnceIfReused
            } else {
                Retry::Never
            };
            result = self
                .relay_once(raw_len, reply_seq, kind, retry, outgo)
                .await;
            if result.is_some() {
                break;
            }
            match retry {
                Retry::Elsewhere => skip |= 1 << node,
                Retry::OnceIfReused => retried = true,
                Retry::Never => {}
            }
        }
        let result = result.expect("loop ends with a result");
        self.finish_forward(result, kind, effect, init_db, set_option)
            .await
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

    /// Borrows a connection, or if none is free, waits for one with the command riding
    /// behind another session's (true: the command is sent and its answer is next).
    async fn acquire_or_follow(&mut self, node: NodeId, raw_len: usize) -> Result<bool, ErrPacket> {
        let pool = self.fe.pools[self.cluster][node].clone();
        self.ensure_conn_key();
        let key = self.conn_key.as_ref().expect("just ensured");
        let acquired = pool
            .acquire_or_follow(
                key,
                self.schema.as_deref(),
                state_signature(&self.vars, &self.user_vars),
                &self.io.rbuf[..raw_len],
            )
            .await;
        let (mut lease, followed) = match acquired {
            Ok(Acquired::Lease(l)) => (l, false),
            Ok(Acquired::Followed(l)) => (l, true),
            Err(e) => {
                FrontendMetrics::inc(&self.fe.shared.metrics.backend_errors);
                tracing::warn!(connection = self.id, error = %e, "no backend connection");
                return Err(e.to_err_packet());
            }
        };
        self.handle
            .publish_backend_thread(self.cluster, node, lease.conn().connection_id);
        self.lease = Some(lease);
        self.lease_node = node;
        Ok(followed)
    }

    /// The topology of the session's cluster.
    fn topology(&self) -> &Arc<manifold_router::Topology> {
        &self.fe.shared.clusters[self.cluster].topology
    }

    fn primary(&self) -> NodeId {
        self.topology().primary()
    }

    /// Some node other than `node` can take a read now (so retrying one elsewhere makes sense).
    fn another_reader(&self, node: NodeId) -> bool {
        let topology = self.topology();
        topology.splits_reads()
            && (0..topology.nodes.len()).any(|n| n != node && topology.can_read(n))
    }

    /// The primary is down: waits for it (or a promoted replica) to answer the monitor, up
    /// to `routing.failover_timeout` from the first call for this statement (`deadline`).
    async fn wait_for_primary(
        &mut self,
        deadline: &mut Option<tokio::time::Instant>,
    ) -> Result<(), ErrPacket> {
        let topology = self.topology().clone();
        let limit = topology.config.failover_timeout;
        let until = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + limit);
        loop {
            if topology.nodes[topology.primary()].in_service() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= until {
                FrontendMetrics::inc(&self.fe.shared.metrics.backend_errors);
                let primary = &topology.nodes[topology.primary()];
                let state = if primary.is_offline() {
                    "taken offline (BACKEND OFFLINE)"
                } else {
                    "down"
                };
                return Err(ErrPacket::new(
                    codes::BACKEND_UNAVAILABLE,
                    format!("No primary: {} is {state} and no other node became primary within routing.failover_timeout ({limit:?})", primary.addr),
                ));
            }
            let step = tokio::time::Instant::now() + std::time::Duration::from_millis(20);
            tokio::time::sleep_until(step.min(until)).await;
        }
    }

    /// The first routing rule matching the statement about to be routed (`digest` holds a
    /// query's digest text, computed with its scan; a prepared statement's is the one kept
    /// with the statement), counted in the worker's rule hits.
    fn match_rule(&mut self, effect: Effect) -> Option<Target> {
        let fe = self.fe.clone();
        let rules = &fe.shared.clusters[self.cluster].topology.rules;
        if rules.is_empty() {
            return None;
        }
        effect.scan()?;
        let meta = self.executed_statement(effect);
        let digest = meta.as_ref().map_or(self.digest.as_slice(), |m| &m.digest);
        let (rule, target) = rules.first_match(digest, self.schema.as_deref(), &self.user.name)?;
        fe.count_rule_hit(self.cluster, rule);
        Some(Target::from(target))
    }

    /// Forgets the nodes that missed the session's write once the monitor sees they have
    /// applied it.
    fn recheck_missing_writes(&mut self) {
        let Some(g) = self.last_write_missing else {
            return;
        };
        if self.last_write_cluster != self.cluster {
            return;
        }
        let topology = self.topology().clone();
        for n in 0..topology.nodes.len() {
            if self.last_write_missing_on & (1 << n) != 0 && topology.has_applied(n, g) {
                self.last_write_missing_on &= !(1 << n);
            }
        }
        if self.last_write_missing_on == 0 {
            self.last_write_missing = None;
        }
    }

    /// Where a command of a session holding no connection runs, and what a replica must
    /// have applied first. Reads (and read-only transactions) of an autocommit session go to
    /// any node that can read, by weight and load; everything else to the primary. `SHOW`
    /// stays on the primary: `SHOW MASTER STATUS`, `SHOW PROCESSLIST` and the like describe
    /// the server that answers. Hints override the class. `skip`: nodes not to use.
    fn route(&self, effect: Effect, skip: u64, rule: Option<Target>) -> (NodeId, Option<Wait>) {
        let topology = self.topology();
        let primary = topology.primary();
        if !topology.splits_reads() || self.pins.is_pinned() {
            return (primary, None);
        }
        let Some(scan) = effect.scan() else {
            return (primary, None);
        };
        let between_transactions =
            self.status & status::IN_TRANS == 0 && self.status & status::AUTOCOMMIT != 0;
        let target = statement_target(&scan, rule);
        if !between_transactions || target == Target::Primary {
            return (primary, None);
        }
        let pools = &self.fe.pools;
        let same_cluster = self.last_write_cluster == self.cluster;
        let skip = if same_cluster {
            skip | self.last_write_missing_on
        } else {
            skip
        };
        let pick = |skip: u64| {
            self.fe.balancers[self.cluster].pick(
                topology,
                |n| pools[self.cluster][n].in_use(),
                skip,
            )
        };
        let node = match target {
            Target::Node(n) if topology.nodes[n].in_service() && skip & (1 << n) == 0 => n,
            Target::Replicas | Target::Node(_) => pick(skip | 1 << primary),
            Target::Any | Target::Primary => pick(skip),
        };
        if node == primary {
            return (primary, None);
        }
        let wait = match topology.config.causal_reads {
            CausalReads::None => None,
            // No replica can be asked whether it has the write.
            CausalReads::Session if same_cluster && self.last_write == Some(Gtid::Unreadable) => {
                return (primary, None);
            }
            CausalReads::Session => self
                .last_write
                .filter(|_| same_cluster)
                .filter(|&g| {
                    self.last_write_seen_on & (1 << node) == 0 && !topology.has_applied(node, g)
                })
                .map(Wait::Write),
            CausalReads::Global => Some(Wait::Primary),
        };
        (node, wait)
    }

    /// A session held on a replica connection with a command that must run on the primary
    /// (outside a transaction: a read-only one is the server's to refuse writes in): a
    /// session held only so the next statement could ask about its previous one lets go of
    /// it (manifold answers those questions itself once it has moved); one held by
    /// server-side state cannot move, and the command is refused with the ERR returned.
    fn leave_replica_for(&mut self, effect: Effect) -> Option<ErrPacket> {
        if self.lease.is_none()
            || self.lease_node == self.primary()
            || self.status & status::IN_TRANS != 0
        {
            return None;
        }
        let scan = effect.scan()?;
        let rule = self.match_rule(effect);
        // `SET`, `COMMIT`... change only the session: they may run where it is held.
        if statement_target(&scan, rule) != Target::Primary
            || matches!(scan.class(), Class::Session | Class::End)
        {
            return None;
        }
        if !self.pins.holds_server_state() {
            self.pins.hold_for_next(false, &self.fe.pins, self.id);
            self.release_if_unpinned();
            return None;
        }
        Some(ErrPacket::new(
            codes::PRIMARY_NEEDED_ON_REPLICA,
            format!(
                "This statement must run on the primary, but the session is held on replica {} by state it made there ({}); end that state first, or start such work with /* manifold:primary */",
                self.topology().nodes[self.lease_node].addr,
                self.pins.describe(),
            ),
        ))
    }

    /// The session committed a write with GTID `gtid` (its `last_gtid`): its reads wait for
    /// it on replicas from now on.
    fn note_write(&mut self, gtid: Gtid) {
        if self.last_write_cluster != self.cluster {
            self.last_write_missing = None;
            self.last_write_missing_on = 0;
        }
        self.last_write_cluster = self.cluster;
        self.last_write = Some(gtid);
        self.last_write_seen_on = 1 << self.lease_node;
    }

    /// Waits (`MASTER_GTID_WAIT` on MariaDB, `WAIT_FOR_EXECUTED_GTID_SET` on MySQL, up to
    /// `routing.causal_read_timeout`) until the replica the session holds has applied what
    /// `wait` names; false when it has not, after giving the connection back: the read goes
    /// elsewhere.
    async fn wait_until_applied(&mut self, wait: Wait) -> bool {
        let topology = self.topology().clone();
        // MySQL waits forever for a timeout of 0.
        let timeout = topology.config.causal_read_timeout.as_secs_f64().max(0.001);
        let position = match wait {
            Wait::Write(g) => g.to_string(),
            Wait::Primary => match self.primary_position().await {
                Some(p) if p.is_empty() => return true,
                Some(p) => p.to_string(),
                None => {
                    self.give_back_lease();
                    return false;
                }
            },
        };
        let node = self.lease_node;
        let conn = self.lease.as_mut().expect("held").conn();
        // Both answer 0 once the position is applied (else -1 or 1 on timeout).
        let sql = match conn.flavor() {
            ServerFlavor::MariaDb => format!("SELECT MASTER_GTID_WAIT('{position}', {timeout:.3})"),
            ServerFlavor::MySql => {
                format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{position}', {timeout:.3})")
            }
        };
        let reached = match conn.query_rows(sql.as_bytes()).await {
            Ok(Ok(rows)) => {
                rows.rows.first().and_then(|r| r.first()).cloned().flatten() == Some(b"0".to_vec())
            }
            Ok(Err(e)) => {
                tracing::warn!(connection = self.id, node = %topology.nodes[node].addr, error = %e.message_lossy(), "waiting for a GTID refused; the read goes elsewhere");
                false
            }
            Err(e) => {
                tracing::info!(connection = self.id, node = %topology.nodes[node].addr, error = %e, "backend connection lost waiting for a GTID; the read goes elsewhere");
                self.take_lease().expect("held").discard();
                return false;
            }
        };
        if reached {
            if let Wait::Write(_) = wait {
                self.last_write_seen_on |= 1 << node;
            }
            return true;
        }
        tracing::debug!(connection = self.id, node = %topology.nodes[node].addr, %position, "replica has not applied the session's write in time; the read goes elsewhere");
        FrontendMetrics::inc(&self.fe.shared.metrics.causal_fallbacks);
        if let Wait::Write(g) = wait {
            self.last_write_missing.get_or_insert(g);
            self.last_write_missing_on |= 1 << node;
        }
        self.give_back_lease();
        false
    }

    /// The primary's position (`@@gtid_binlog_pos`, `@@gtid_executed` on MySQL), read on a
    /// connection borrowed for it.
    async fn primary_position(&mut self) -> Option<GtidPos> {
        self.ensure_conn_key();
        let key = self.conn_key.as_ref().expect("just ensured");
        let pool = self.fe.pools[self.cluster][self.primary()].clone();
        let mut lease = pool
            .acquire(key, None, state_signature(&self.vars, &self.user_vars))
            .await
            .ok()?;
        let sql: &[u8] = match lease.conn().flavor() {
            ServerFlavor::MariaDb => b"SELECT @@gtid_binlog_pos",
            ServerFlavor::MySql => b"SELECT @@gtid_executed",
        };
        let rows = lease.conn().query_rows(sql).await;
        match rows {
            Ok(Ok(rows)) => {
                // The query changed nothing on the connection.
                lease.mark_clean();
                let text = rows.rows.first()?.first()?.clone().unwrap_or_default();
                GtidPos::parse(&text)
            }
            Ok(Err(_)) => None,
            Err(_) => {
                lease.discard();
                None
            }
        }
    }

    /// Returns the held connection to the pool as it is (its state is the session's, known).
    fn give_back_lease(&mut self) {
        if let Some(mut lease) = self.take_lease() {
            lease.mark_clean();
        }
    }

    /// Keeps what a statement's answer leaves for the next statement to ask about: its row
    /// count, the rows it returned and, when it raised any, its conditions, read at once
    /// with `SHOW WARNINGS` on the connection that ran it.
    async fn remember_previous_statement(
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
            self.previous.conditions.clear();
            self.previous.warning_count = u64::from(r.warnings);
            return Ok(());
        }
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
                p.warning_count = u64::from(r.warnings).max(p.conditions.len() as u64);
                Ok(())
            }
            Ok(Err(e)) => {
                tracing::warn!(connection = self.id, error = %e.message_lossy(), "could not read the statement's warnings");
                self.previous.conditions.clear();
                self.previous.warning_count = u64::from(r.warnings);
                Ok(())
            }
            Err(e) => self.backend_failed(None, &e).await,
        }
    }

    /// `SHOW WARNINGS`, `SHOW ERRORS` and their `COUNT(*)` forms, answered from the
    /// conditions the session's previous statement raised. The column definitions come from
    /// the server (`SHOW WARNINGS LIMIT 0` on a borrowed connection in the session's
    /// state), so names, lengths and character set are the server's own.
    async fn show_diagnostics(&mut self, show: ShowDiagnostics, seq: u8) -> Result<(), End> {
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
        if let Err(e) = self.ensure_backend(self.primary(), false).await {
            self.release_if_unpinned();
            return self.send_err_packet(seq, &e).await;
        }
        let conn = self.lease.as_mut().expect("ensured").conn();
        let columns = match conn.query_rows(b"SHOW WARNINGS LIMIT 0").await {
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
    async fn send_result_set(
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

    /// Lists in `assigned_user_vars` the user variables the command at the front of the
    /// client's buffer assigns, so their new values can be read back after it.
    fn note_assigned_user_vars(&mut self, raw_len: usize, effect: Effect) {
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
    async fn read_back_user_vars(&mut self) -> Result<(), End> {
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

    /// One attempt at relaying a command; `None` when it must be retried on another
    /// connection (a reused pooled connection failed before answering, for the first time).
    async fn relay_once(
        &mut self,
        raw_len: usize,
        reply_seq: u8,
        kind: ResponseKind,
        retry: Retry,
        outgo: Outgo,
    ) -> Option<Result<relay::Relayed, RelayError>> {
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
        )
        .await;
        if let Err(RelayError::Backend {
            message,
            unanswered,
            nothing_relayed,
            ..
        }) = &result
        {
            let again = match retry {
                Retry::Elsewhere => *nothing_relayed && self.another_reader(self.lease_node),
                Retry::OnceIfReused => *unanswered && reused,
                Retry::Never => false,
            };
            if again {
                self.state_data.clear();
                self.take_lease().expect("lease").discard();
                tracing::info!(connection = self.id, %message, "backend connection failed before answering; running the command on another");
                FrontendMetrics::inc(&self.fe.shared.metrics.retries);
                return None;
            }
        }
        if let Err(RelayError::Backend {
            unanswered: true, ..
        }) = &result
        {
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
                if !self.assigned_user_vars.is_empty() {
                    self.read_back_user_vars().await?;
                }
                self.after_statement(effect, &r);
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
            Err(RelayError::Client(reason)) => {
                self.state_data.clear();
                tracing::debug!(connection = self.id, %reason, "client failed during a statement");
                // The backend's answer was cut short: its connection cannot be reused.
                if let Some(l) = self.take_lease() {
                    l.discard();
                }
                Err(End::ClientGone)
            }
            Err(RelayError::Backend {
                message, err_seq, ..
            }) => {
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

    /// The prepared statement a `COM_STMT_EXECUTE` runs (its text, scan and digest).
    fn executed_statement(&mut self, effect: Effect) -> Option<Rc<StatementMeta>> {
        match effect {
            Effect::Execute { id, .. } => self.stmts.get_mut(id).map(|s| s.meta.clone()),
            _ => None,
        }
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

    /// A backend connection failed under a command manifold sent on its own. The connection
    /// is closed. When it held the session's server-side state (a transaction, locks...),
    /// that state is gone: the client is told and disconnected, as when a statement's
    /// connection breaks; otherwise only this command fails.
    async fn backend_failed(&mut self, seq: Option<u8>, e: &BackendError) -> Result<(), End> {
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

    /// Builds in `exec_buf` the `COM_QUERY` at the front of the client's buffer with the
    /// session's values in place (see [`Self::session_values`]), and, with `processlist`,
    /// `information_schema.PROCESSLIST` read from manifold's sessions (`processlist.rs`);
    /// false when nothing changed.
    fn rewrite_session_values(&mut self, raw_len: usize, processlist: bool) -> bool {
        let max = self.max_packet();
        let Some(packet) = manifold_mysql_proto::scan_logical(&self.io.rbuf[..raw_len], max)
            .ok()
            .flatten()
        else {
            return false;
        };
        let values = self.session_values();
        let payload = packet.payload(&self.io.rbuf);
        self.exec_buf.clear();
        let builder = PacketBuilder::begin(&mut self.exec_buf);
        self.exec_buf.push(payload[0]);
        let mut replaced =
            manifold_sql_lex::replace_session_values(&payload[1..], &values, &mut self.exec_buf);
        if processlist {
            let text = self.exec_buf.split_off(5);
            let (shared, user) = (&self.fe.shared, &self.user);
            let schema = self.schema.as_deref();
            replaced |=
                crate::processlist::rewrite(shared, user, schema, &text, &mut self.exec_buf);
        }
        builder.finish(&mut self.exec_buf, 0);
        replaced
    }

    /// `COM_STMT_PREPARE`: prepared on a backend connection, registered as the worker's
    /// statement for its text, and answered with the session's own id for it.
    async fn stmt_prepare(&mut self, reply_seq: u8, mut sql: Box<[u8]>) -> Result<(), End> {
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
        if let Err(e) = self.ensure_backend(self.primary(), false).await {
            self.stmts.prepare_failed();
            self.release_if_unpinned();
            return self.send_err_packet(reply_seq, &e).await;
        }
        let keep = self.fe.shared.pool.max_prepared_statements;
        let conn = self.lease.as_mut().expect("ensured").conn();
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
        let meta = self.fe.statements.borrow_mut().register(
            self.schema.as_deref(),
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
    async fn stmt_command(
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
    async fn bind_statement(
        &mut self,
        stmt: u32,
        raw_len: usize,
        effect: Effect,
    ) -> Result<bool, BindError> {
        let keep = self.fe.shared.pool.max_prepared_statements;
        let max = self.max_packet();
        let meta = match self.stmts.get_mut(stmt) {
            Some(s) => s.meta.clone(),
            None => {
                return Err(BindError::Refused(unknown_statement(
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
                    .await?
                    .map_err(BindError::Refused)?;
            }
            let answer = conn.prepare_evicting(&meta.sql, keep).await?;
            self.fe
                .telemetry
                .count_stmt_cache(false, conn.stmts.evictions - evictions);
            if elsewhere.is_some() && self.schema.is_some() {
                // Back to the session's schema (a session without one keeps the
                // statement's: the next borrow brings the connection to the session's
                // state anyway).
                conn.use_schema(self.schema.as_deref())
                    .await?
                    .map_err(BindError::Refused)?;
            }
            let answer = answer.map_err(BindError::Refused)?;
            if answer.params != meta.params {
                conn.close_statement(answer.statement_id).await?;
                return Err(BindError::Refused(ErrPacket::new(
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
                BindError::Refused(ErrPacket::new(
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
        drop(self.take_lease());
        self.schema_checked = false;
        self.status = status::AUTOCOMMIT;
        self.vars.clear();
        self.user_vars.clear();
        self.previous = PreviousStatement::default();
        self.stmts.clear();
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
        if !user.acquire_connection() {
            let msg = format!(
                "User '{}' has exceeded the 'max_connections' resource (current value: {})",
                user.name, user.max_connections
            );
            return Err(self.refuse(seq, codes::USER_LIMIT_REACHED, msg).await);
        }
        old.release_connection();
        self.handle.set_user(&user.name);
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
