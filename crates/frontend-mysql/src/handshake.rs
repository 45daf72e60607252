//! The server side of the connection phase: handshake, optional TLS upgrade, and
//! authentication against manifold's user table (also used by `COM_CHANGE_USER`).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use manifold_engine::{BlockingError, Door, WaitClock, WorkerContext};
use manifold_io::{PacketIo, ReadError, Stream};
use manifold_mysql_proto::auth;
use manifold_mysql_proto::consts::{caps, status, UTF8MB4_GENERAL_CI};
use manifold_mysql_proto::handshake::{
    encode_auth_more_data, AuthSwitchRequest, HandshakeResponse, HandshakeV10,
};
use manifold_mysql_proto::packets::{ErrPacket, OkPacket};
use manifold_mysql_proto::{codes, LogicalPacket, ProtoError};

use crate::metrics::FrontendMetrics;
use crate::users::User;
use crate::{Shared, WorkerFrontend};

/// Login packets are small; a larger one is garbage or an attack.
const MAX_LOGIN_PACKET: usize = 64 * 1024;

pub(crate) struct Login {
    pub io: PacketIo,
    pub user: Arc<User>,
    pub capabilities: u32,
    pub charset: u8,
    pub database: Option<Vec<u8>>,
    pub scramble: [u8; 20],
    /// When the greeting was written ([`manifold_engine::clock`] ticks), if stage
    /// histograms are on.
    pub greeted_at: Option<u64>,
}

/// Why a login ended without a session. The client has been told (ERR) where it could be.
/// The messages are those the connection log shows.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    /// The client closed without answering the handshake: what TCP health checks do, logged
    /// apart from real failures.
    #[error("client closed the connection before answering the handshake")]
    ClosedBeforeLogin,
    /// Writing a packet of the exchange (`stage` says which) failed.
    #[error("{stage}: {source}")]
    Write {
        stage: &'static str,
        source: std::io::Error,
    },
    /// Reading a packet of the exchange (`stage` says which) failed.
    #[error("{stage}: {source}")]
    Read {
        stage: &'static str,
        source: ReadError,
    },
    #[error("client asked for TLS, which this server does not offer")]
    TlsNotOffered,
    #[error("TLS requested twice")]
    TlsRequestedTwice,
    #[error("TLS handshake with client failed: {0}")]
    Tls(std::io::Error),
    /// Refused because `mysql.tls.required` is on.
    #[error("client without TLS refused: mysql.tls.required")]
    TlsRequired,
    #[error("bad handshake response: {0}")]
    BadHandshakeResponse(ProtoError),
    #[error("handshake response has sequence id {got}, expected {expected}")]
    OutOfOrder { got: u8, expected: u8 },
    #[error(transparent)]
    Denied(#[from] AccessDenied),
    #[error("User '{user}' has exceeded the 'max_connections' resource (current value: {max})")]
    UserLimit { user: String, max: usize },
    /// The key for `caching_sha2_password` over an insecure channel could not be had.
    #[error("RSA key unavailable: {0}")]
    RsaKeyUnavailable(String),
    /// The blocking pool did not run the password decryption.
    #[error(transparent)]
    Blocking(#[from] BlockingError),
}

impl LoginError {
    fn write(stage: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| LoginError::Write { stage, source }
    }

    fn read(stage: &'static str) -> impl FnOnce(ReadError) -> Self {
        move |source| LoginError::Read { stage, source }
    }
}

/// Wrong credentials: the message of the ERR 1045 the client was sent.
#[derive(Debug, thiserror::Error)]
#[error("Access denied for user '{user}'@'{host}' (using password: {})", if *.used_password { "YES" } else { "NO" })]
pub(crate) struct AccessDenied {
    user: String,
    host: IpAddr,
    used_password: bool,
}

/// Why authentication failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthFailure {
    /// Wrong credentials; the client has been sent ERR 1045.
    #[error(transparent)]
    Denied(AccessDenied),
    /// The exchange itself broke (connection closed, bad packet).
    #[error(transparent)]
    Broken(LoginError),
}

impl From<LoginError> for AuthFailure {
    fn from(err: LoginError) -> Self {
        AuthFailure::Broken(err)
    }
}

impl From<AuthFailure> for LoginError {
    fn from(failure: AuthFailure) -> Self {
        match failure {
            AuthFailure::Denied(denied) => LoginError::Denied(denied),
            AuthFailure::Broken(err) => err,
        }
    }
}

pub(crate) async fn send_err(io: &mut PacketIo, seq: u8, err: &ErrPacket) {
    let mut payload = Vec::with_capacity(64 + err.message.len());
    err.encode(&mut payload);
    // The connection may already be gone; the caller is ending it either way.
    let _ = io.send(seq, &payload).await;
}

pub(crate) fn server_version(fe: &WorkerFrontend) -> Vec<u8> {
    let cfg = &fe.shared.config.server_version;
    if !cfg.is_empty() {
        return cfg.as_bytes().to_vec();
    }
    let mut v = fe.pools[0][fe.shared.topology().primary()]
        .server_version()
        .or_else(|| fe.shared.backend_version.load().as_deref().cloned())
        .unwrap_or_else(|| b"5.5.5-10.11.0-MariaDB".to_vec());
    v.extend_from_slice(b"-manifold");
    v
}

pub(crate) async fn login(
    fe: &WorkerFrontend,
    ctx: &WorkerContext,
    mut io: PacketIo,
    connection_id: u32,
    peer: SocketAddr,
    waited: &WaitClock,
) -> Result<Login, LoginError> {
    let shared = &fe.shared;
    let scramble = auth::generate_scramble();
    let mut server_caps = caps::SERVER_DEFAULT;
    if shared.tls.is_some() {
        server_caps |= caps::SSL;
    }
    let hs = HandshakeV10 {
        server_version: server_version(fe),
        connection_id,
        auth_data: scramble.to_vec(),
        capabilities: server_caps,
        charset: UTF8MB4_GENERAL_CI,
        status: status::AUTOCOMMIT,
        auth_plugin: shared.config.default_auth_plugin.as_bytes().to_vec(),
    };
    let mut out = Vec::with_capacity(128);
    hs.encode(&mut out);
    io.send(0, &out)
        .await
        .map_err(LoginError::write("sending handshake"))?;
    let greeted_at = shared
        .settings
        .stage_histograms
        .load(std::sync::atomic::Ordering::Relaxed)
        .then(manifold_engine::clock::now);

    // Exactly one packet: a TLS ClientHello may follow the SSL request in the same segment.
    let mut p = match io.read_packet_exact(MAX_LOGIN_PACKET).await {
        Ok(p) => p,
        Err(ReadError::Closed) => return Err(LoginError::ClosedBeforeLogin),
        Err(e) => {
            // Noise (HTTP, a ClientHello without an SSL request) announces a packet far
            // larger than a login: refuse it as a statement that large would be.
            if let ReadError::Proto(ProtoError::TooLarge { size, limit }) = e {
                let msg = format!(
                    "Got a packet bigger than 'max_allowed_packet' bytes ({size} > {limit})"
                );
                send_err(
                    &mut io,
                    2,
                    &ErrPacket::new(codes::NET_PACKET_TOO_LARGE, msg),
                )
                .await;
            }
            return Err(LoginError::read("reading handshake response")(e));
        }
    };
    let mut payload = io.payload(&p).into_owned();
    io.consume(p.raw_len);
    expect_seq(&mut io, &p, 1).await?;
    if HandshakeResponse::is_ssl_request(&payload) {
        let Some(tls) = shared.tls.clone() else {
            return Err(LoginError::TlsNotOffered);
        };
        let Stream::Tcp(tcp) = io.into_stream() else {
            return Err(LoginError::TlsRequestedTwice);
        };
        let tls_stream = tokio_rustls::TlsAcceptor::from(tls)
            .accept(tcp)
            .await
            .map_err(LoginError::Tls)?;
        io = PacketIo::new(Stream::ServerTls(Box::new(tls_stream)));
        p = io
            .read_packet(MAX_LOGIN_PACKET)
            .await
            .map_err(LoginError::read("reading handshake response over TLS"))?;
        payload = io.payload(&p).into_owned();
        io.consume(p.raw_len);
        expect_seq(&mut io, &p, 2).await?;
    }
    let seq = p.last_seq.wrapping_add(1);
    let resp = match HandshakeResponse::decode(&payload) {
        Ok(r) => r,
        Err(e) => {
            send_err(
                &mut io,
                seq,
                &ErrPacket::new(codes::HANDSHAKE_ERROR, format!("Bad handshake: {e}")),
            )
            .await;
            FrontendMetrics::inc(&shared.metrics.protocol_errors);
            return Err(LoginError::BadHandshakeResponse(e));
        }
    };
    if shared.config.tls.required && !io.stream.is_tls() {
        let msg = "Connections using insecure transport are prohibited (mysql.tls.required is on)";
        send_err(
            &mut io,
            seq,
            &ErrPacket::new(codes::SECURE_TRANSPORT_REQUIRED, msg),
        )
        .await;
        return Err(LoginError::TlsRequired);
    }
    let (user, seq) = authenticate(
        shared,
        ctx,
        &mut io,
        seq,
        &resp.user,
        resp.auth_plugin.as_deref(),
        Some(shared.config.default_auth_plugin.as_str()),
        resp.auth_response.clone(),
        &scramble,
        peer,
        Some(waited),
    )
    .await?;
    if !user.acquire_connection() {
        let err = LoginError::UserLimit {
            user: user.name.clone(),
            max: user.max_connections,
        };
        send_err(
            &mut io,
            seq,
            &ErrPacket::new(codes::USER_LIMIT_REACHED, err.to_string()),
        )
        .await;
        return Err(err);
    }
    let capabilities = resp.capabilities & server_caps;
    let ok = OkPacket {
        status: status::AUTOCOMMIT,
        ..Default::default()
    };
    let mut out = Vec::with_capacity(16);
    ok.encode(&mut out, capabilities);
    if let Err(e) = io.send(seq, &out).await {
        user.release_connection();
        return Err(LoginError::write("sending login OK")(e));
    }
    Ok(Login {
        greeted_at,
        io,
        user,
        capabilities,
        charset: if resp.charset == 0 {
            UTF8MB4_GENERAL_CI
        } else {
            resp.charset
        },
        database: resp.database.filter(|d| !d.is_empty()),
        scramble,
    })
}

/// Refuses a handshake response that does not carry the sequence id the exchange is at.
async fn expect_seq(io: &mut PacketIo, p: &LogicalPacket, expected: u8) -> Result<(), LoginError> {
    if p.first_seq == expected {
        return Ok(());
    }
    let err = ErrPacket::new(codes::NET_PACKETS_OUT_OF_ORDER, "Got packets out of order");
    send_err(io, p.last_seq.wrapping_add(1), &err).await;
    Err(LoginError::OutOfOrder {
        got: p.first_seq,
        expected,
    })
}

async fn read_auth_packet(io: &mut PacketIo) -> Result<(Vec<u8>, u8), LoginError> {
    io.read_owned(MAX_LOGIN_PACKET)
        .await
        .map_err(LoginError::read("reading auth data"))
}

/// Verifies the client's credentials, switching plugin and running the `caching_sha2_password`
/// exchanges as needed. Returns the user and the next sequence id; the caller sends the OK.
/// On failure the client has been sent ERR 1045.
///
/// Password guessing costs time ([`manifold_engine::login_throttle`]): each check of a
/// password the client sent is admitted as its address and user have earned (at once, or one
/// at a time after a delay) just before it is made, and counted against the user at the
/// address just after ([`PasswordChecks`]); no client round trip comes between, so a client
/// that stalls holds nothing. `waited` is told of the waits, for the login timeout. An unknown
/// user is checked against [`crate::users::Users::decoy_for`]: the same packets, waits and
/// hashing as a wrong password.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn authenticate(
    shared: &Shared,
    ctx: &WorkerContext,
    io: &mut PacketIo,
    mut seq: u8,
    user_name: &[u8],
    client_plugin: Option<&[u8]>,
    offered_plugin: Option<&str>,
    mut response: Vec<u8>,
    scramble: &[u8; 20],
    peer: SocketAddr,
    waited: Option<&WaitClock>,
) -> Result<(Arc<User>, u8), AuthFailure> {
    let users = shared.users.load();
    let user = users.get(user_name).cloned();
    let checked: &User = match &user {
        Some(u) => u,
        None => users.decoy_for(user_name),
    };
    let (plugin, switch) = plugin_for(
        checked,
        client_plugin,
        offered_plugin,
        &response,
        &shared.config.default_auth_plugin,
    );
    if switch {
        let mut out = Vec::with_capacity(64);
        AuthSwitchRequest {
            plugin: plugin.as_bytes().to_vec(),
            data: scramble.to_vec(),
        }
        .encode(&mut out);
        io.send(seq, &out)
            .await
            .map_err(LoginError::write("sending auth switch"))?;
        (response, seq) = read_auth_packet(io).await?;
    }
    let used_password = !response.is_empty();
    let login = PasswordChecks {
        shared,
        ip: peer.ip(),
        user_name,
        waited,
        known: user.is_some(),
    };
    let verified = if plugin == auth::CACHING_SHA2_PASSWORD {
        let fast_allowed = !shared.config.sha2_full_auth_first || shared.sha2_cached(&checked.name);
        let fast = |response: &[u8]| {
            auth::sha2_verify_fast(checked.sha2_hash.as_ref(), scramble, response)
        };
        let step = sha2_first_step(fast_allowed, &response);
        // A fast-path mismatch: the wait its check had, to be had again at the end.
        let mismatch_waited = match step {
            Sha2Step::Refuse => {
                login.check(|| false).await;
                None
            }
            Sha2Step::Fast => {
                let started = std::time::Instant::now();
                if login.check(|| fast(&response)).await {
                    FrontendMetrics::inc(&shared.metrics.sha2_fast_auths);
                    let mut out = Vec::new();
                    encode_auth_more_data(&mut out, &[auth::SHA2_FAST_AUTH_SUCCESS]);
                    seq = io
                        .send(seq, &out)
                        .await
                        .map_err(LoginError::write("sending fast auth success"))?;
                    if let Some(u) = user {
                        return Ok((u, seq));
                    }
                }
                Some(started.elapsed())
            }
            Sha2Step::Full => {
                // Waits as a fast check would and does its hashing, so that neither the
                // timing nor the packets tell a cached user from an uncached or unknown one;
                // nothing is checked, so nothing is counted.
                login.admit_unchecked().await;
                std::hint::black_box(fast(&response));
                None
            }
        };
        if step != Sha2Step::Refuse {
            let password;
            (password, seq) = sha2_full_auth(shared, ctx, io, seq, scramble).await?;
            if let Some(waited_before) = mismatch_waited {
                // The fast check was this login's check, counted: the scramble matched no
                // password of the user's, so whatever comes now is not checked (a real client
                // sends the same password; a guesser gets one guess per login). The exchange
                // above ran all the same, and the wait a full check has is had again, so that
                // the answer looks and takes what an uncached user's or an unknown one's does.
                if waited_before >= std::time::Duration::from_millis(1) {
                    manifold_engine::login_throttle::wait_as_delay(waited, waited_before).await;
                }
            } else {
                // A reload while the client answered: the password is checked against the
                // users of now (a user removed meanwhile is unknown).
                let users_now = shared.users.load();
                let user_now = users_now.get(user_name).cloned();
                let checked_now: &User = user_now
                    .as_deref()
                    .unwrap_or_else(|| users_now.decoy_for(user_name));
                let login = PasswordChecks {
                    known: user_now.is_some(),
                    ..login
                };
                let ok = login
                    .check(|| {
                        checked_now.sha2_hash.is_some()
                            && password.as_deref().is_some_and(|p| {
                                auth::sha2_verify_cleartext(checked_now.sha2_hash.as_ref(), p)
                            })
                    })
                    .await;
                if let (true, Some(u)) = (ok, user_now) {
                    FrontendMetrics::inc(&shared.metrics.sha2_full_auths);
                    shared.sha2_remember(&u.name);
                    return Ok((u, seq));
                }
            }
        }
        false
    } else {
        login
            .check(|| auth::native_verify(checked.native_hash.as_ref(), scramble, &response))
            .await
    };
    if let (true, Some(u)) = (verified, user) {
        return Ok((u, seq));
    }
    FrontendMetrics::inc(&shared.metrics.auth_failures);
    let denied = AccessDenied {
        user: String::from_utf8_lossy(user_name).into_owned(),
        host: peer.ip(),
        used_password,
    };
    send_err(
        io,
        seq,
        &ErrPacket::new(codes::ACCESS_DENIED, denied.to_string()),
    )
    .await;
    Err(AuthFailure::Denied(denied))
}

/// The plugin `user` authenticates with, and whether the client must be sent an
/// AuthSwitchRequest for it. Depends only on the kinds of hash `user` has (a decoy has those
/// of the user it stands for), never on whether the name exists.
fn plugin_for(
    user: &User,
    client_plugin: Option<&[u8]>,
    offered_plugin: Option<&str>,
    response: &[u8],
    default_plugin: &str,
) -> (&'static str, bool) {
    let proposed = match client_plugin {
        Some(p) if p == auth::CACHING_SHA2_PASSWORD.as_bytes() => auth::CACHING_SHA2_PASSWORD,
        Some(p) if p == auth::NATIVE_PASSWORD.as_bytes() || p.is_empty() => auth::NATIVE_PASSWORD,
        None => auth::NATIVE_PASSWORD,
        Some(_) => "",
    };
    let plugin = if user.supports(proposed) {
        proposed
    } else {
        user.preferred_plugin(default_plugin)
    };
    // As MySQL does, a response made for the plugin the user needs is used as it is, even if
    // the handshake offered another. But a client that chose a plugin other than the one
    // offered may send no response at all (libmariadb does): it expects a switch carrying
    // the scramble.
    let offered_other = offered_plugin.is_some_and(|o| o != proposed);
    (
        plugin,
        plugin != proposed || (offered_other && response.is_empty()),
    )
}

/// What the server does with a `caching_sha2_password` response, as `mysqld`'s
/// `caching_sha2_password_authenticate` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sha2Step {
    /// ERR at once (a check that fails): an empty response (no account here is without a
    /// password), or a response that is not a 32-byte scramble.
    Refuse,
    /// The fast path (the user logged in since start, or `sha2_full_auth_first` is off):
    /// 0x01 0x03 then OK when the scramble matches; else, as any mismatch, full
    /// authentication (the server cannot tell a wrong password from a stale cache entry),
    /// so a wrong password, an unknown user and a first login all look alike.
    Fast,
    /// 0x01 0x04, then the cleartext (TLS) or RSA-encrypted password decides.
    Full,
}

fn sha2_first_step(fast_allowed: bool, response: &[u8]) -> Sha2Step {
    if response.len() != auth::SHA2_HASH_LEN {
        Sha2Step::Refuse
    } else if fast_allowed {
        Sha2Step::Fast
    } else {
        Sha2Step::Full
    }
}

/// One login's password checks, each admitted by the failed-logins table
/// ([`manifold_engine::login_throttle`]) just before it is made and counted just after, with
/// no client round trip between: a client that stalls holds no turn of its address, and a
/// burst of connections cannot have many checks under way before the first failures count.
#[derive(Clone, Copy)]
struct PasswordChecks<'a> {
    shared: &'a Shared,
    ip: IpAddr,
    user_name: &'a [u8],
    waited: Option<&'a WaitClock>,
    /// The name is a configured user's: only then can a check succeed.
    known: bool,
}

impl PasswordChecks<'_> {
    /// Admits a check (waiting out what the address and user have earned), makes it and
    /// counts its result. Refused admission (too many of the address waiting): a failure,
    /// unchecked and not counted.
    async fn check(&self, verify: impl FnOnce() -> bool) -> bool {
        let Ok(attempt) = self
            .shared
            .logins
            .admit(self.ip, self.user_name, self.waited)
            .await
        else {
            return false;
        };
        if verify() && self.known {
            attempt.succeeded();
            true
        } else {
            attempt.failed(Door::Mysql);
            false
        }
    }

    /// Waits as a check would, checking nothing and counting nothing: a step that checks
    /// nothing answers as late as one that does.
    async fn admit_unchecked(&self) {
        let _ = self
            .shared
            .logins
            .admit(self.ip, self.user_name, self.waited)
            .await;
    }
}

/// `caching_sha2_password` full authentication: asks for the password, which the client
/// sends in cleartext over TLS, or RSA-encrypted (asking for the public key first) without
/// TLS. `None`: no password could be read from what it sent.
async fn sha2_full_auth(
    shared: &Shared,
    ctx: &WorkerContext,
    io: &mut PacketIo,
    seq: u8,
    scramble: &[u8; 20],
) -> Result<(Option<Vec<u8>>, u8), LoginError> {
    let mut out = Vec::new();
    encode_auth_more_data(&mut out, &[auth::SHA2_PERFORM_FULL_AUTH]);
    io.send(seq, &out)
        .await
        .map_err(LoginError::write("requesting full auth"))?;
    let (payload, mut seq) = read_auth_packet(io).await?;
    if io.stream.is_tls() {
        return Ok((Some(payload), seq));
    }
    let key = shared
        .rsa_key(ctx)
        .await
        .map_err(LoginError::RsaKeyUnavailable)?;
    let ciphertext = if payload == [auth::SHA2_REQUEST_PUBLIC_KEY] {
        let mut out = Vec::new();
        encode_auth_more_data(&mut out, key.public_key_pem().as_bytes());
        io.send(seq, &out)
            .await
            .map_err(LoginError::write("sending public key"))?;
        let (c, s) = read_auth_packet(io).await?;
        seq = s;
        c
    } else if payload.len() == key.ciphertext_len() {
        // The client already had the public key.
        payload
    } else {
        // A cleartext password over an insecure channel: refuse rather than read it.
        return Ok((None, seq));
    };
    let salt = *scramble;
    let decrypted = ctx
        .blocking()
        .spawn(move || key.decrypt_password(&ciphertext, &salt))
        .await?;
    Ok((decrypted.ok(), seq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::UserConfig;
    use crate::users::Users;

    fn users() -> Users {
        let config = |name: &str, native: bool, sha2: bool| UserConfig {
            name: name.into(),
            password_native: native
                .then(|| auth::format_native_hash(&auth::native_stored_hash(b"pw"))),
            password_sha2: sha2.then(|| auth::format_sha2_hash(&auth::sha2_stored_hash(b"pw"))),
            ..Default::default()
        };
        Users::from_config(&[
            config("both", true, true),
            config("native", true, false),
            config("sha2", false, true),
        ])
        .unwrap()
    }

    const SHA2: &str = auth::CACHING_SHA2_PASSWORD;
    const NATIVE: &str = auth::NATIVE_PASSWORD;

    /// A user's name, the plugin the client names, the plugin the handshake offered, the
    /// client's response, and the choice wanted.
    type Case<'a> = (
        &'a str,
        Option<&'a [u8]>,
        Option<&'a str>,
        &'a [u8],
        (&'a str, bool),
    );

    #[test]
    fn plugin_choice_depends_only_on_the_kinds_of_hash() {
        let users = users();
        let r = [1u8; 20];
        let cases: [Case; 8] = [
            // What the client proposed and answered for, when the user has it: used as it is.
            ("both", Some(SHA2.as_bytes()), Some(SHA2), &r, (SHA2, false)),
            (
                "both",
                Some(NATIVE.as_bytes()),
                Some(SHA2),
                &r,
                (NATIVE, false),
            ),
            // libmariadb: chose another plugin than offered and sent nothing: switched.
            (
                "both",
                Some(NATIVE.as_bytes()),
                Some(SHA2),
                b"",
                (NATIVE, true),
            ),
            (
                "native",
                Some(SHA2.as_bytes()),
                Some(SHA2),
                &r,
                (NATIVE, true),
            ),
            (
                "sha2",
                Some(NATIVE.as_bytes()),
                Some(NATIVE),
                &r,
                (SHA2, true),
            ),
            ("sha2", None, Some(NATIVE), &r, (SHA2, true)),
            // A plugin manifold cannot check: the user's preferred one.
            (
                "both",
                Some(b"client_ed25519"),
                Some(SHA2),
                &r,
                (SHA2, true),
            ),
            (
                "native",
                Some(b"client_ed25519"),
                Some(SHA2),
                &r,
                (NATIVE, true),
            ),
        ];
        for (name, client, offered, response, want) in cases {
            let u = users.get(name.as_bytes()).unwrap();
            let got = plugin_for(u, client, offered, response, SHA2);
            assert_eq!(got, want, "{name} {client:?} {offered:?}");
            // A decoy shaped like this user gets the same choice.
            for i in 0..300 {
                let decoy = users.decoy_for(format!("ghost{i}").as_bytes());
                if decoy.supports(NATIVE) == u.supports(NATIVE)
                    && decoy.supports(SHA2) == u.supports(SHA2)
                {
                    assert_eq!(plugin_for(decoy, client, offered, response, SHA2), want);
                }
            }
        }
    }

    #[test]
    fn sha2_first_step_depends_only_on_the_response_shape_and_the_cache() {
        let scramble = auth::generate_scramble();
        let response = auth::sha2_scramble(b"pw", &scramble);
        assert_eq!(sha2_first_step(true, &response), Sha2Step::Fast);
        // Not cached yet (or an unknown name, whose decoy never is): full authentication.
        assert_eq!(sha2_first_step(false, &response), Sha2Step::Full);
        // No password, or a response of the wrong size: refused at once, cached or not.
        for fast_allowed in [true, false] {
            assert_eq!(sha2_first_step(fast_allowed, b""), Sha2Step::Refuse);
            assert_eq!(sha2_first_step(fast_allowed, &[0]), Sha2Step::Refuse);
            assert_eq!(
                sha2_first_step(fast_allowed, &response[..20]),
                Sha2Step::Refuse
            );
        }
    }

    #[test]
    fn decoys_of_every_kind_are_reached_and_choose_like_their_user() {
        // The choice of plugin above is checked for every kind a decoy can have: names are
        // drawn until each kind was met.
        let users = users();
        let mut kinds = std::collections::HashSet::new();
        for i in 0.. {
            let decoy = users.decoy_for(format!("someone{i}").as_bytes());
            kinds.insert((decoy.supports(NATIVE), decoy.supports(SHA2)));
            if kinds.len() == 3 {
                break;
            }
            assert!(i < 10_000, "a kind of decoy is never picked: {kinds:?}");
        }
    }
}
