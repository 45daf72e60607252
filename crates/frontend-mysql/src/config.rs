//! Settings of the MySQL front door and of the users it accepts.

use std::path::PathBuf;
use std::time::Duration;

use manifold_mysql_proto::auth;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MysqlFrontConfig {
    /// Address clients connect to.
    pub listen: String,
    /// Version string in the handshake. Empty: the primary's own version with "-manifold"
    /// appended (client libraries switch behaviour on it).
    pub server_version: String,
    /// Client connections manifold accepts in all; the next one gets ERR 1040.
    pub max_connections: usize,
    /// Largest client packet (a command, or a split packet joined); larger ones get ERR 1153
    /// and the connection is closed.
    #[serde(deserialize_with = "crate::size_serde::deserialize")]
    pub max_allowed_packet: u64,
    /// Time a client has from TCP connect to finishing authentication.
    #[serde(with = "manifold_engine::duration_serde")]
    pub connect_timeout: Duration,
    /// A client idle this long between commands is disconnected.
    #[serde(with = "manifold_engine::duration_serde")]
    pub wait_timeout: Duration,
    /// Plugin named in the initial handshake: `mysql_native_password` or `caching_sha2_password`.
    pub default_auth_plugin: String,
    /// `caching_sha2_password`: like MySQL, a user's first login (per manifold process) goes
    /// through full authentication (cleartext over TLS, or RSA without TLS); later logins use
    /// the fast path. `false` skips full authentication whenever the fast path can verify.
    pub sha2_full_auth_first: bool,
    /// Give a session's backend connection back to the pool after each statement (or
    /// transaction) when nothing pins it there; `false` keeps one backend connection per
    /// client session for the session's life.
    pub multiplexing: bool,
    /// `[mysql.tls]`, or `tls = "auto"` / `tls = "off"` for its mode alone.
    #[serde(deserialize_with = "tls_table_or_mode")]
    pub tls: FrontTlsConfig,
    /// Stamp write statements with the global binlog's ordering clock (see
    /// `session/stamp.rs`). Not a configuration key: manifold sets it when `[binlog]` is on
    /// (stamps are also written whenever [`crate::Shared::binlog`] is set).
    #[serde(skip)]
    pub binlog_stamps: bool,
}

impl Default for MysqlFrontConfig {
    fn default() -> Self {
        Self {
            listen: "0.0.0.0:6033".into(),
            server_version: String::new(),
            max_connections: 10_000,
            max_allowed_packet: 64 << 20,
            connect_timeout: Duration::from_secs(10),
            wait_timeout: Duration::from_hours(8),
            default_auth_plugin: auth::NATIVE_PASSWORD.into(),
            sha2_full_auth_first: true,
            multiplexing: true,
            tls: FrontTlsConfig::default(),
            binlog_stamps: false,
        }
    }
}

/// Whether TLS is offered to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FrontTlsMode {
    /// Offered: with `cert` and `key` when they are set, else with a self-signed certificate
    /// generated on first start and kept in the data directory (as MySQL 8 and ProxySQL do),
    /// so that clients asking for TLS get it without any configuration.
    #[default]
    Auto,
    /// Not offered: a client that requires TLS fails as against a server without it.
    Off,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct FrontTlsConfig {
    pub mode: FrontTlsMode,
    /// PEM certificate chain offered to clients (with `key`); unset in `auto` mode: the data
    /// directory's generated one. The server fills both in before the front door is built,
    /// so the front door offers TLS exactly when they are set.
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert`.
    pub key: Option<PathBuf>,
    /// Refuse clients that do not use TLS.
    pub required: bool,
    /// PEM RSA private key for `caching_sha2_password` password exchange without TLS; unset:
    /// the data directory's `private_key.pem`, generated on first start.
    pub rsa_private_key: Option<PathBuf>,
}

/// `tls = "off"` (or `"auto"`) as the short form of `[mysql.tls] mode = ...`.
fn tls_table_or_mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<FrontTlsConfig, D::Error> {
    struct TableOrMode;
    impl<'de> serde::de::Visitor<'de> for TableOrMode {
        type Value = FrontTlsConfig;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("\"auto\", \"off\" or a [mysql.tls] table")
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FrontTlsConfig, E> {
            let mode = FrontTlsMode::deserialize(serde::de::value::StrDeserializer::<E>::new(v))?;
            Ok(FrontTlsConfig {
                mode,
                ..FrontTlsConfig::default()
            })
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            map: A,
        ) -> Result<FrontTlsConfig, A::Error> {
            FrontTlsConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_any(TableOrMode)
}

/// A user manifold authenticates. Only password hashes are stored for the client side;
/// the backend password is what manifold itself logs into the backends with.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    /// `mysql_native_password` hash, MySQL's text form "*" + 40 hex digits
    /// (`SELECT PASSWORD('...')`, or `manifold hash-password`).
    pub password_native: Option<String>,
    /// `caching_sha2_password` hash: "sha2:" + 64 hex digits of SHA256(SHA256(password)).
    pub password_sha2: Option<String>,
    /// Backend login; defaults to `name`.
    pub backend_user: Option<String>,
    /// Backend password (cleartext: manifold must be able to log in with it).
    pub backend_password: String,
    /// Connections this user may hold at once; 0 = no limit of its own.
    pub max_connections: usize,
    /// Sees every user's sessions in `SHOW PROCESSLIST` and `information_schema.PROCESSLIST`
    /// (the server's `PROCESS` privilege); without it, only its own user's. Killing
    /// another user's session is never allowed (that is the server's `CONNECTION ADMIN`).
    pub process: bool,
}

impl MysqlFrontConfig {
    pub fn validate(&self) -> Result<(), String> {
        self.listen.parse::<std::net::SocketAddr>().map_err(|e| {
            format!(
                "mysql.listen: '{}' is not an address (host:port): {e}",
                self.listen
            )
        })?;
        if self.max_connections == 0 {
            return Err("mysql.max_connections: must be at least 1".into());
        }
        if self.max_allowed_packet < 1024 || self.max_allowed_packet > 1 << 30 {
            return Err(format!(
                "mysql.max_allowed_packet: {} is outside 1K..1G",
                self.max_allowed_packet
            ));
        }
        if self.connect_timeout.is_zero() {
            return Err("mysql.connect_timeout: must be greater than 0".into());
        }
        if self.wait_timeout.is_zero() {
            return Err("mysql.wait_timeout: must be greater than 0".into());
        }
        if self.default_auth_plugin != auth::NATIVE_PASSWORD
            && self.default_auth_plugin != auth::CACHING_SHA2_PASSWORD
        {
            return Err(format!(
                "mysql.default_auth_plugin: '{}' is not supported (use mysql_native_password or caching_sha2_password)",
                self.default_auth_plugin
            ));
        }
        self.tls.validate()?;
        Ok(())
    }
}

impl FrontTlsConfig {
    fn validate(&self) -> Result<(), String> {
        match (&self.cert, &self.key) {
            (Some(_), None) => {
                return Err("mysql.tls.key: required when mysql.tls.cert is set".into())
            }
            (None, Some(_)) => {
                return Err("mysql.tls.cert: required when mysql.tls.key is set".into())
            }
            _ => {}
        }
        if self.mode == FrontTlsMode::Off {
            if self.cert.is_some() {
                return Err(
                    "mysql.tls.cert: set while mysql.tls.mode is off (remove it, or the mode)"
                        .into(),
                );
            }
            if self.required {
                return Err(
                    "mysql.tls.required: needs TLS, which mysql.tls.mode = off turns off".into(),
                );
            }
        }
        Ok(())
    }
}

impl UserConfig {
    pub fn validate(&self, index: usize) -> Result<(), String> {
        let at = format!("users[{index}]");
        if self.name.is_empty() {
            return Err(format!("{at}.name: must not be empty"));
        }
        if self.password_native.is_none() && self.password_sha2.is_none() {
            return Err(format!(
                "{at} ('{}'): set password_native and/or password_sha2",
                self.name
            ));
        }
        if let Some(h) = &self.password_native {
            auth::parse_native_hash(h).map_err(|e| format!("{at}.password_native: {e}"))?;
        }
        if let Some(h) = &self.password_sha2 {
            auth::parse_sha2_hash(h).map_err(|e| format!("{at}.password_sha2: {e}"))?;
        }
        Ok(())
    }
}
