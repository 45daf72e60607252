//! Logging into a backend as a MySQL client: the TCP connect, the handshake, the TLS upgrade,
//! and the authentication exchange (`mysql_native_password`, `caching_sha2_password` with its
//! fast path, cleartext over TLS or RSA), shared by a new connection and `COM_CHANGE_USER`.

use std::time::Instant;

use manifold_io::{PacketIo, ReadError, Stream};
use manifold_mysql_proto::auth;
use manifold_mysql_proto::consts::caps;
use manifold_mysql_proto::handshake::{AuthSwitchRequest, HandshakeResponse, HandshakeV10};
use manifold_mysql_proto::packets::ErrPacket;
use tokio::net::TcpStream;

use super::{BackendConn, BackendTarget, ConnKey, Schema, MAX_LOGIN_PACKET};
use crate::config::TlsMode;
use crate::errors::{BackendError, ErrorKind};
use crate::state::{SessionVars, UserVars};
use crate::stmts::PreparedOnConn;

/// Capabilities manifold always asks backends for; the session-affecting ones are added from
/// the client session the connection serves (see [`ConnKey`]).
const BASE_CAPS: u32 = caps::LONG_PASSWORD
    | caps::LONG_FLAG
    | caps::PROTOCOL_41
    | caps::TRANSACTIONS
    | caps::SECURE_CONNECTION
    | caps::PLUGIN_AUTH
    | caps::PLUGIN_AUTH_LENENC_CLIENT_DATA
    | caps::CONNECT_ATTRS
    | caps::SESSION_TRACK;

pub(super) fn send_failed(addr: &str, e: &std::io::Error) -> BackendError {
    BackendError::new(ErrorKind::Connect, format!("backend {addr}: {e}"))
}

pub(super) fn login_err(addr: &str, e: &ReadError) -> BackendError {
    match e {
        ReadError::Timeout => BackendError::new(
            ErrorKind::ConnectTimeout,
            format!("backend {addr}: login timed out"),
        ),
        e => BackendError::new(
            ErrorKind::Connect,
            format!("backend {addr}: connection failed during login: {e}"),
        ),
    }
}

impl BackendConn {
    pub(super) async fn connect_inner(
        target: &BackendTarget,
        key: &ConnKey,
    ) -> Result<BackendConn, BackendError> {
        let addr = &target.addr;
        let tcp = TcpStream::connect(addr.as_str()).await.map_err(|e| {
            BackendError::new(
                ErrorKind::Connect,
                format!("backend {addr} unreachable: {e}"),
            )
        })?;
        let _ = tcp.set_nodelay(true);
        let mut io = PacketIo::new(Stream::Tcp(tcp));
        let (payload, mut seq) = io
            .read_owned(MAX_LOGIN_PACKET)
            .await
            .map_err(|e| login_err(addr, &e))?;
        if payload.first() == Some(&0xFF) {
            let e = ErrPacket::decode(&payload).map_err(|_| {
                BackendError::new(
                    ErrorKind::Protocol,
                    format!("backend {addr}: bad handshake"),
                )
            })?;
            let message = format!("backend {addr} refused the connection: {e}");
            return Err(BackendError::new(ErrorKind::Refused(e), message));
        }
        let hs = HandshakeV10::decode(&payload).map_err(|e| {
            BackendError::new(
                ErrorKind::Protocol,
                format!("backend {addr}: bad handshake: {e}"),
            )
        })?;
        if hs.capabilities & caps::PROTOCOL_41 == 0 {
            return Err(BackendError::new(
                ErrorKind::Protocol,
                format!("backend {addr} does not speak protocol 4.1"),
            ));
        }
        let wanted = BASE_CAPS | key.caps;
        let mut capabilities = wanted & hs.capabilities;

        let use_tls = match target.tls_mode {
            TlsMode::Disabled => false,
            TlsMode::Preferred => hs.capabilities & caps::SSL != 0,
            TlsMode::AsClient => key.client_tls && hs.capabilities & caps::SSL != 0,
            _ => {
                if hs.capabilities & caps::SSL == 0 {
                    return Err(BackendError::new(
                        ErrorKind::Tls,
                        format!(
                            "backend {addr} does not offer TLS, which backend.tls.mode requires"
                        ),
                    ));
                }
                true
            }
        };
        let mut response = HandshakeResponse {
            capabilities,
            max_packet: target.max_packet,
            charset: key.charset,
            user: key.user.as_bytes().to_vec(),
            attributes: vec![
                (b"_client_name".to_vec(), b"manifold".to_vec()),
                (b"program_name".to_vec(), b"manifold".to_vec()),
            ],
            ..Default::default()
        };
        if use_tls {
            let Some(tls) = target.tls.clone() else {
                return Err(BackendError::new(
                    ErrorKind::Tls,
                    "backend TLS requested but not configured",
                ));
            };
            capabilities |= caps::SSL;
            response.capabilities = capabilities;
            let mut ssl = Vec::new();
            response.encode_ssl_request(&mut ssl);
            seq = io
                .send(seq, &ssl)
                .await
                .map_err(|e| send_failed(addr, &e))?;
            let Stream::Tcp(tcp) = io.into_stream() else {
                unreachable!("fresh connection is plain TCP")
            };
            let host = addr
                .rsplit_once(':')
                .map_or(addr.as_str(), |(h, _)| h)
                .trim_matches(['[', ']']);
            let name = rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|e| {
                BackendError::new(
                    ErrorKind::Tls,
                    format!("backend {addr}: bad TLS server name: {e}"),
                )
            })?;
            let tls_stream = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await
                .map_err(|e| {
                    BackendError::new(
                        ErrorKind::Tls,
                        format!(
                            "backend {addr}: TLS handshake failed: {}",
                            crate::tls::handshake_error(&e)
                        ),
                    )
                })?;
            io = PacketIo::new(Stream::ClientTls(Box::new(tls_stream)));
        }

        let scramble = &hs.auth_data[..hs.auth_data.len().min(auth::SCRAMBLE_LEN)];
        let mut plugin = String::from_utf8_lossy(&hs.auth_plugin).into_owned();
        if plugin != auth::CACHING_SHA2_PASSWORD {
            auth::NATIVE_PASSWORD.clone_into(&mut plugin);
        }
        response.auth_response = plugin_response(&plugin, key.password.as_bytes(), scramble);
        response.auth_plugin = Some(plugin.as_bytes().to_vec());
        let mut out = Vec::new();
        response.encode(&mut out);
        io.send(seq, &out)
            .await
            .map_err(|e| send_failed(addr, &e))?;

        let scramble = scramble.to_vec();
        finish_auth(&mut io, addr, key, &plugin, &scramble).await?;
        let mut conn = BackendConn {
            io,
            key: key.clone(),
            server_version: hs.server_version,
            connection_id: hs.connection_id,
            capabilities,
            schema: Schema::None,
            vars: SessionVars::default(),
            user_vars: UserVars::default(),
            last_insert_id: 0,
            tracking: false,
            stmts: PreparedOnConn::default(),
            followers: std::collections::VecDeque::new(),
            last_used: Instant::now(),
            answer_pending: false,
            max_allowed_packet: None,
            scramble,
            plugin,
        };
        conn.enable_tracking().await?;
        Ok(conn)
    }
}

/// The rest of an authentication exchange once the response has been sent: auth switch,
/// `caching_sha2_password` fast path or full authentication (cleartext over TLS, RSA
/// otherwise), until the server's OK or ERR. Shared by login and `COM_CHANGE_USER`.
pub(super) async fn finish_auth(
    io: &mut PacketIo,
    addr: &str,
    key: &ConnKey,
    plugin: &str,
    scramble: &[u8],
) -> Result<(), BackendError> {
    let mut plugin = plugin.to_owned();
    let mut scramble = scramble.to_vec();
    loop {
        let (payload, seq) = io
            .read_owned(MAX_LOGIN_PACKET)
            .await
            .map_err(|e| login_err(addr, &e))?;
        match payload.first() {
            Some(0x00) => return Ok(()),
            Some(0xFF) => {
                let e = ErrPacket::decode(&payload).unwrap_or_else(|_| {
                    ErrPacket::new(manifold_mysql_proto::codes::ACCESS_DENIED, "login refused")
                });
                let msg = format!("backend {addr} refused login of user '{}': {e}", key.user);
                return Err(BackendError::new(ErrorKind::Auth(e), msg));
            }
            Some(0xFE) => {
                let sw = AuthSwitchRequest::decode(&payload).map_err(|e| {
                    BackendError::new(ErrorKind::Protocol, format!("backend {addr}: {e}"))
                })?;
                plugin = String::from_utf8_lossy(&sw.plugin).into_owned();
                scramble = sw.data[..sw.data.len().min(auth::SCRAMBLE_LEN)].to_vec();
                if plugin != auth::NATIVE_PASSWORD && plugin != auth::CACHING_SHA2_PASSWORD {
                    return Err(BackendError::new(
                        ErrorKind::Auth(ErrPacket::new(manifold_mysql_proto::codes::ACCESS_DENIED, "unsupported plugin")),
                        format!("backend {addr} asks for auth plugin '{plugin}', which manifold does not implement (use mysql_native_password or caching_sha2_password for user '{}')", key.user),
                    ));
                }
                let resp = plugin_response(&plugin, key.password.as_bytes(), &scramble);
                io.send(seq, &resp)
                    .await
                    .map_err(|e| send_failed(addr, &e))?;
            }
            Some(0x01) if plugin == auth::CACHING_SHA2_PASSWORD => match payload.get(1) {
                Some(&auth::SHA2_FAST_AUTH_SUCCESS) => {}
                Some(&auth::SHA2_PERFORM_FULL_AUTH) => {
                    if io.stream.is_tls() {
                        let mut pw = key.password.as_bytes().to_vec();
                        pw.push(0);
                        io.send(seq, &pw).await.map_err(|e| send_failed(addr, &e))?;
                    } else {
                        io.send(seq, &[auth::SHA2_REQUEST_PUBLIC_KEY])
                            .await
                            .map_err(|e| send_failed(addr, &e))?;
                        let (key_packet, key_seq) = io
                            .read_owned(MAX_LOGIN_PACKET)
                            .await
                            .map_err(|e| login_err(addr, &e))?;
                        let pem = key_packet.strip_prefix(&[0x01]).ok_or_else(|| {
                            BackendError::new(
                                ErrorKind::Protocol,
                                format!("backend {addr}: expected an RSA public key"),
                            )
                        })?;
                        let enc =
                            auth::encrypt_password_rsa(pem, key.password.as_bytes(), &scramble)
                                .map_err(|e| {
                                    BackendError::new(
                                        ErrorKind::Protocol,
                                        format!("backend {addr}: RSA: {e}"),
                                    )
                                })?;
                        io.send(key_seq, &enc)
                            .await
                            .map_err(|e| send_failed(addr, &e))?;
                    }
                }
                _ => {
                    return Err(BackendError::new(
                        ErrorKind::Protocol,
                        format!("backend {addr}: unexpected caching_sha2_password message"),
                    ))
                }
            },
            _ => {
                return Err(BackendError::new(
                    ErrorKind::Protocol,
                    format!("backend {addr}: unexpected packet during login"),
                ))
            }
        }
    }
}

pub(super) fn plugin_response(plugin: &str, password: &[u8], scramble: &[u8]) -> Vec<u8> {
    if plugin == auth::CACHING_SHA2_PASSWORD {
        auth::sha2_scramble(password, scramble)
    } else {
        auth::native_scramble(password, scramble)
    }
}
