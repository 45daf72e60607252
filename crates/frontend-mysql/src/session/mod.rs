//! A client session: login, then the command loop.
//!
//! Each file owns one job of the session:
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the session's state, login to first command, small helpers every job uses |
//! | `serve.rs` | the command loop: read a command, decode it, hand it to its handler |
//! | `decode.rs` | what a command's first packet asks for ([`decode::Action`]), a pure function |
//! | `lease.rs` | the session's backend connection: borrow, bring to the session's state, give back |
//! | `routing.rs` | which node a command runs on (class, hints, rules, balancing, causal waits) |
//! | `forward.rs` | sending a command to a backend, relaying its answer, retrying it |
//! | `tracking.rs` | what an answer did to the session: variables, schema, pins, user variables |
//! | `prepared.rs` | prepared statements |
//! | `previous.rs` | what the previous statement left (`ROW_COUNT()`, `SHOW WARNINGS`...) |
//! | `control.rs` | commands about the session itself: `KILL`, `COM_CHANGE_USER`, `COM_RESET_CONNECTION` |
//! | `binlog.rs` | the global binlog: dumps, `SHOW MASTER STATUS` and the other binlog statements |
//! | `replay.rs` | running a transaction again when its backend connection is lost |
//! | `visit.rs` | a statement naming a schema another cluster holds runs on that cluster |

mod binlog;
mod binlog_variables;
mod control;
mod decode;
mod forward;
mod lease;
mod prepared;
mod previous;
mod replay;
mod routing;
mod serve;
mod stamp;
mod tracking;
mod visit;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use manifold_backend::{ConnKey, Lease, SessionVars, UserVars};
use manifold_engine::{clock, WorkerContext};
use manifold_io::{PacketIo, Stream};
use manifold_mysql_proto::consts::status;
use manifold_mysql_proto::packets::{ErrPacket, OkPacket};
use manifold_mysql_proto::{codes, ErrorCode};
use manifold_router::NodeId;
use manifold_sql_lex::ScanMemo;
use tokio::net::TcpStream;

use crate::handshake::{self, send_err};
use crate::metrics::FrontendMetrics;
use crate::pins::{PinReason, Pins};
use crate::registry::SessionHandle;
use crate::statements::SessionStatements;
use crate::telemetry::Stage;
use crate::users::User;
use crate::{Shared, WorkerFrontend};

use manifold_router::causal::CausalState;
use previous::PreviousStatement;

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
    // A login delayed for guessing passwords still gets connect_timeout for its exchange.
    let waited = manifold_engine::WaitClock::default();
    let login = match waited
        .timeout(
            shared.config.connect_timeout,
            handshake::login(&fe, &ctx, io, id, peer, &waited),
        )
        .await
    {
        Some(Ok(login)) => login,
        Some(Err(reason @ handshake::LoginError::ClosedBeforeLogin)) => {
            tracing::debug!(%peer, connection = id, "{reason}");
            return;
        }
        Some(Err(reason)) => {
            shared.connection_log(|suppressed| {
                tracing::info!(target: "manifold::connections", %peer, connection = id, %reason, suppressed, "login failed");
            });
            return;
        }
        None => {
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
        lease_killable: false,
        cluster: 0,
        lease_node: 0,
        schema_follows_statement: false,
        visit: None,
        causal: CausalState::default(),
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
        binlog: manifold_binlog_serve::BinlogSession::default(),
        replay: replay::ReplayLog::default(),
    };
    session.pin_if_not_multiplexing();
    session.handle.publish_pins(session.pins.bits());
    let end = session.serve().await;
    // Returned (reset first) unless a KILL QUERY may still reach it.
    drop(session.take_lease());
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
    /// A `KILL QUERY` of one of the session's statements may still reach `lease`'s
    /// connection (it ran there and the session kept the connection): it closes when let go.
    lease_killable: bool,
    /// The cluster the session's statements go to (and `lease` belongs to while held).
    cluster: usize,
    /// The node `lease` is a connection to.
    lease_node: NodeId,
    /// The command about to run changes the schema on another cluster (`USE`, `COM_INIT_DB`).
    schema_follows_statement: bool,
    /// The session runs a statement (or holds the connection one left) on the cluster of the
    /// schema it named (see [`visit`]).
    visit: Option<visit::Visit>,
    /// What the session's reads must see: its last write (`routing.causal_reads`).
    causal: CausalState,
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
    /// The replication variables the session set, for its dump (global binlog on).
    binlog: manifold_binlog_serve::BinlogSession,
    /// The open transaction's statements, kept for a replay (`routing.transaction_replay`).
    replay: replay::ReplayLog,
}

impl Session {
    pub(super) fn max_packet(&self) -> usize {
        self.fe.shared.config.max_allowed_packet as usize
    }

    pub(super) async fn refuse(&mut self, seq: u8, code: ErrorCode, message: String) -> End {
        send_err(&mut self.io, seq, &ErrPacket::new(code, message.clone())).await;
        FrontendMetrics::inc(&self.fe.shared.metrics.protocol_errors);
        End::Refused(message)
    }

    pub(super) async fn send_ok(&mut self, seq: u8) -> Result<(), End> {
        self.send_ok_warnings(seq, 0).await
    }

    /// An OK packet counting `warnings` (which `SHOW WARNINGS` then lists from
    /// `self.previous`).
    pub(super) async fn send_ok_warnings(&mut self, seq: u8, warnings: u16) -> Result<(), End> {
        let ok = OkPacket {
            status: self.status,
            warnings,
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

    pub(super) async fn send_err_packet(&mut self, seq: u8, err: &ErrPacket) -> Result<(), End> {
        let mut out = Vec::with_capacity(64);
        err.encode(&mut out);
        self.io
            .send(seq, &out)
            .await
            .map(|_| ())
            .map_err(|_| End::ClientGone)
    }

    /// How long the client may stay idle: `mysql.wait_timeout`, or less if the session set
    /// its own `wait_timeout` (which the backend connection, back in the pool while the
    /// session idles, cannot enforce).
    pub(super) fn idle_limit(&self) -> std::time::Duration {
        let configured = self.fe.shared.config.wait_timeout;
        self.vars
            .get(b"wait_timeout")
            .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
            .map_or(configured, |secs| {
                configured.min(std::time::Duration::from_secs(secs.max(1)))
            })
    }

    pub(super) fn pin_if_not_multiplexing(&mut self) {
        if !self.fe.shared.config.multiplexing {
            self.pins.pin(PinReason::Disabled, &self.fe.pins, self.id);
        }
    }

    /// The topology of the session's cluster.
    pub(super) fn topology(&self) -> &Arc<manifold_router::Topology> {
        &self.fe.shared.clusters[self.cluster].topology
    }

    pub(super) fn primary(&self) -> NodeId {
        self.topology().primary()
    }
}
