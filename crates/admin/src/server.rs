//! The admin listeners: a thread of its own running a small tokio runtime, one task per
//! connection, admin port and HTTP alike. Admin logins use `mysql_native_password` against
//! `[admin]`'s credentials.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use manifold_frontend_mysql::Shared;
use manifold_io::{PacketIo, Stream};
use manifold_mysql_proto::consts::{caps, column_type, status, UTF8MB4_GENERAL_CI};
use manifold_mysql_proto::handshake::{AuthSwitchRequest, HandshakeResponse, HandshakeV10};
use manifold_mysql_proto::packets::{
    encode_text_result_set, ColumnDefinition, EofPacket, ErrPacket, OkPacket,
};
use manifold_mysql_proto::{auth, codes, Command};
use tokio::sync::Notify;

use crate::commands::{self, Reply};
use crate::config::{AdminConfig, AdminListen};
use crate::control::Control;
use crate::errors::AdminError;
use crate::history::{History, INTERVAL};

/// Admin commands are short statements; anything larger is refused.
const MAX_PACKET: usize = 1 << 20;
/// A login that has not completed within this is dropped.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);
const NATIVE: &[u8] = b"mysql_native_password";
const CAPABILITIES: u32 = caps::PROTOCOL_41
    | caps::SECURE_CONNECTION
    | caps::PLUGIN_AUTH
    | caps::CONNECT_WITH_DB
    | caps::DEPRECATE_EOF;

/// The running admin port and HTTP; stop (and wait for their thread) when dropped.
pub struct AdminServer {
    listen: AdminListen,
    stop: Arc<Notify>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AdminServer {
    /// Where the admin port and HTTP listen (port 0 in the configuration resolved).
    pub fn local_addrs(&self) -> AdminListen {
        self.listen
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.stop.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Admin {
    shared: Arc<Shared>,
    /// The Redis door, when it listens.
    redis: Option<Arc<manifold_frontend_redis::RedisShared>>,
    control: Arc<dyn Control>,
    history: std::sync::Mutex<History>,
    user: String,
    stored: [u8; auth::NATIVE_HASH_LEN],
    started: Instant,
}

impl Admin {
    fn server(&self) -> commands::Server<'_> {
        commands::Server {
            shared: &self.shared,
            redis: self.redis.as_deref(),
            started: self.started,
            control: &*self.control,
            history: &self.history,
            pools: tokio::sync::OnceCell::new(),
        }
    }
}

/// A `String` error: it is the message the operator reads when manifold does not start.
fn bind(addr: SocketAddr, key: &str) -> Result<std::net::TcpListener, String> {
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| format!("{key}: cannot listen on {addr}: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("{key}: {e}"))?;
    Ok(listener)
}

/// Binds the admin port and HTTP (errors name the key at fault) and serves them on a
/// thread of its own; `None` when both are off. `redis`: the Redis door, when it listens.
pub fn start(
    cfg: &AdminConfig,
    shared: Arc<Shared>,
    control: Arc<dyn Control>,
    redis: Option<Arc<manifold_frontend_redis::RedisShared>>,
) -> Result<Option<AdminServer>, String> {
    let wanted = cfg.validate()?;
    let sql = wanted.sql.map(|a| bind(a, "admin.listen")).transpose()?;
    let http = wanted
        .http
        .map(|a| bind(a, "admin.http_listen"))
        .transpose()?;
    let local = |l: &Option<std::net::TcpListener>| l.as_ref().and_then(|l| l.local_addr().ok());
    let listen = AdminListen {
        sql: local(&sql),
        http: local(&http),
    };
    if sql.is_none() && http.is_none() {
        return Ok(None);
    }
    let admin = Arc::new(Admin {
        shared,
        redis,
        control,
        history: std::sync::Mutex::default(),
        user: cfg.user.clone(),
        stored: auth::native_stored_hash(cfg.password.as_bytes()),
        started: Instant::now(),
    });
    let stop = Arc::new(Notify::new());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("admin: cannot start its runtime: {e}"))?;
    let stopped = stop.clone();
    let thread = std::thread::Builder::new()
        .name("manifold-admin".into())
        .spawn(move || runtime.block_on(serve(sql, http, admin, stopped)))
        .map_err(|e| format!("admin: cannot start its thread: {e}"))?;
    tracing::info!(admin = ?listen.sql, http = ?listen.http, "admin port and HTTP listening");
    Ok(Some(AdminServer {
        listen,
        stop,
        thread: Some(thread),
    }))
}

/// Accepts on `listener` (pending forever when off).
async fn accept(
    listener: Option<&tokio::net::TcpListener>,
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

async fn serve(
    sql: Option<std::net::TcpListener>,
    http: Option<std::net::TcpListener>,
    admin: Arc<Admin>,
    stop: Arc<Notify>,
) {
    let register =
        |l: Option<std::net::TcpListener>| l.map(tokio::net::TcpListener::from_std).transpose();
    let (sql, http) = match (register(sql), register(http)) {
        (Ok(sql), Ok(http)) => (sql, http),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "admin: cannot register its listeners");
            return;
        }
    };
    // Only /status shows the history.
    if http.is_some() {
        let sampled = admin.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(INTERVAL);
            loop {
                tick.tick().await;
                let t = &sampled.shared.telemetry;
                let (statements, errors) = (t.statements(), t.statement_errors());
                sampled
                    .history
                    .lock()
                    .expect("history")
                    .sample(statements, errors);
            }
        });
    }
    let mut next_id: u32 = 0;
    loop {
        let admin = admin.clone();
        tokio::select! {
            () = stop.notified() => return,
            accepted = accept(sql.as_ref()) => match accepted {
                Ok((stream, peer)) => {
                    next_id = next_id.wrapping_add(1);
                    tokio::spawn(async move {
                        if let Err(why) = connection(stream, peer, next_id, &admin).await {
                            tracing::info!(%peer, reason = %why, "admin connection ended");
                        }
                    });
                }
                Err(e) => accept_failed(&e).await,
            },
            accepted = accept(http.as_ref()) => match accepted {
                Ok((stream, peer)) => {
                    tokio::spawn(async move {
                        let server = admin.server();
                        if let Err(why) = crate::http::connection(stream, &server).await {
                            tracing::debug!(%peer, reason = %why, "HTTP connection ended");
                        }
                    });
                }
                Err(e) => accept_failed(&e).await,
            },
        }
    }
}

/// Out of file descriptors and the like: wait a little rather than spin.
async fn accept_failed(e: &std::io::Error) {
    tracing::warn!(error = %e, "admin: accept failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

async fn send(io: &mut PacketIo, seq: u8, payload: &[u8]) -> Result<u8, AdminError> {
    io.send(seq, payload).await.map_err(AdminError::Write)
}

async fn send_err(io: &mut PacketIo, seq: u8, err: &ErrPacket) -> Result<(), AdminError> {
    let mut payload = Vec::new();
    err.encode(&mut payload);
    send(io, seq, &payload).await.map(|_| ())
}

fn ok_payload() -> Vec<u8> {
    let mut payload = Vec::new();
    OkPacket {
        status: status::AUTOCOMMIT,
        ..Default::default()
    }
    .encode(&mut payload, CAPABILITIES);
    payload
}

/// Reads one packet: its sequence id and payload.
async fn read(io: &mut PacketIo) -> Result<(u8, Vec<u8>), AdminError> {
    let packet = io.read_packet(MAX_PACKET).await.map_err(AdminError::Read)?;
    let payload = io.payload(&packet).into_owned();
    io.consume(packet.raw_len);
    Ok((packet.last_seq, payload))
}

async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    id: u32,
    admin: &Admin,
) -> Result<(), AdminError> {
    let mut io = PacketIo::new(Stream::Tcp(stream));
    // A login delayed for guessing passwords still gets LOGIN_TIMEOUT for its exchange.
    let waited = manifold_engine::WaitClock::default();
    let capabilities = waited
        .timeout(LOGIN_TIMEOUT, login(&mut io, peer, id, admin, &waited))
        .await
        .ok_or(AdminError::LoginTimeout)??;
    loop {
        let (_, payload) = read(&mut io).await?;
        let command = match Command::decode(&payload) {
            Ok(c) => c,
            Err(e) => {
                let err = ErrPacket::new(codes::NET_READ_ERROR, format!("Malformed packet: {e}"));
                return send_err(&mut io, 1, &err).await;
            }
        };
        match command {
            Command::Quit => return Ok(()),
            Command::Ping | Command::InitDb(_) => {
                send(&mut io, 1, &ok_payload()).await?;
            }
            Command::Query(sql) => {
                let sql = String::from_utf8_lossy(sql);
                tracing::debug!(%peer, statement = %sql, "admin command");
                // Figures asked of the workers are fresh for each command.
                let server = admin.server();
                match commands::run(&sql, &server).await {
                    Reply::Rows { columns, rows } => {
                        let columns: Vec<ColumnDefinition> = columns
                            .iter()
                            .map(|c| ColumnDefinition::new(c, column_type::VAR_STRING))
                            .collect();
                        encode_text_result_set(
                            &mut io.wbuf,
                            1,
                            &columns,
                            rows.iter()
                                .map(|row| row.iter().map(|v| Some(v.as_bytes()))),
                            capabilities,
                            EofPacket {
                                warnings: 0,
                                status: status::AUTOCOMMIT,
                            },
                        );
                        io.flush().await.map_err(AdminError::Write)?;
                    }
                    Reply::Typed((columns, rows)) => {
                        encode_text_result_set(
                            &mut io.wbuf,
                            1,
                            &columns,
                            rows.iter().map(|row| row.iter().map(Option::as_deref)),
                            capabilities,
                            EofPacket {
                                warnings: 0,
                                status: status::AUTOCOMMIT,
                            },
                        );
                        io.flush().await.map_err(AdminError::Write)?;
                    }
                    Reply::Done => {
                        send(&mut io, 1, &ok_payload()).await?;
                    }
                    Reply::Error(code, message) => {
                        send_err(&mut io, 1, &ErrPacket::new(code, message)).await?;
                    }
                }
            }
            _ => {
                let err = ErrPacket::new(
                    codes::UNKNOWN_COMMAND,
                    "Unknown command: the admin port takes text statements (COM_QUERY) only",
                );
                send_err(&mut io, 1, &err).await?;
            }
        }
    }
}

/// The handshake and `mysql_native_password` check; returns the client's capabilities.
/// Guessing costs time as on the other doors: the answer is checked only after the delay
/// the client's address has earned (`waited` is told), and a wrong user name costs what a
/// wrong password does.
async fn login(
    io: &mut PacketIo,
    peer: SocketAddr,
    id: u32,
    admin: &Admin,
    waited: &manifold_engine::WaitClock,
) -> Result<u32, AdminError> {
    let scramble = auth::generate_scramble();
    let mut payload = Vec::new();
    HandshakeV10 {
        server_version: b"5.5.5-10.11.0-manifold-admin".to_vec(),
        connection_id: id,
        auth_data: scramble.to_vec(),
        capabilities: CAPABILITIES,
        charset: UTF8MB4_GENERAL_CI,
        status: status::AUTOCOMMIT,
        auth_plugin: NATIVE.to_vec(),
    }
    .encode(&mut payload);
    send(io, 0, &payload).await?;
    let (seq, payload) = read(io).await?;
    let response = match HandshakeResponse::decode(&payload) {
        Ok(r) if r.capabilities & caps::PROTOCOL_41 != 0 => r,
        _ => {
            let err = ErrPacket::new(codes::HANDSHAKE_ERROR, "Bad handshake");
            send_err(io, seq.wrapping_add(1), &err).await?;
            return Err(AdminError::BadHandshake);
        }
    };
    let mut seq = seq.wrapping_add(1);
    let mut answer = response.auth_response.clone();
    if response.auth_plugin.as_deref().is_some_and(|p| p != NATIVE) {
        // Another plugin's answer: ask again for the native one, on the same scramble.
        let mut payload = Vec::new();
        AuthSwitchRequest {
            plugin: NATIVE.to_vec(),
            data: scramble.to_vec(),
        }
        .encode(&mut payload);
        send(io, seq, &payload).await?;
        let (s, payload) = read(io).await?;
        answer = payload;
        seq = s.wrapping_add(1);
    }
    let user = String::from_utf8_lossy(&response.user);
    let logins = &admin.shared.logins;
    let ip = peer.ip();
    // Too many attempts of this address already waiting: refused without a check.
    let attempt = logins.admit(ip, &response.user, Some(waited)).await.ok();
    // Both checked whatever the first says: no faster answer for a wrong user name.
    let verified = attempt.is_some()
        && (user == admin.user) & auth::native_verify(Some(&admin.stored), &scramble, &answer);
    if verified {
        if let Some(attempt) = attempt {
            attempt.succeeded();
        }
    } else {
        if let Some(attempt) = attempt {
            attempt.failed(manifold_engine::Door::Admin);
        }
        tracing::warn!(%peer, user = %user, "admin login refused");
        let using = if answer.is_empty() { "NO" } else { "YES" };
        let err = ErrPacket::new(
            codes::ACCESS_DENIED,
            format!("Access denied for user '{user}'@'{ip}' (using password: {using})"),
        );
        send_err(io, seq, &err).await?;
        return Err(AdminError::AccessDenied);
    }
    send(io, seq, &ok_payload()).await?;
    tracing::info!(%peer, user = %user, "admin login");
    Ok(response.capabilities & CAPABILITIES)
}
