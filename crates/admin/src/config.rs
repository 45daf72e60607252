//! `[admin]`: where the admin port and its HTTP side listen, and the credentials the admin
//! port accepts.

use std::net::SocketAddr;

use serde::Deserialize;

/// The password a fresh configuration has; accepted on a loopback address only.
pub const DEFAULT_PASSWORD: &str = "admin";

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// "host:port"; empty turns the admin port off.
    pub listen: String,
    pub user: String,
    pub password: String,
    /// "host:port" for `/metrics` and `/status` (no login: they show figures, not data);
    /// empty turns HTTP off.
    pub http_listen: String,
    /// Record per-stage latency histograms (`PERF HIST`).
    pub stage_histograms: bool,
    /// Keep per-digest statistics (`SHOW QUERY DIGESTS`).
    pub query_digests: bool,
    /// Most statement shapes each worker keeps statistics for; further shapes are counted
    /// together in one row.
    pub query_digests_max: usize,
}

/// Where the admin port and HTTP listen; `None` for what is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminListen {
    pub sql: Option<SocketAddr>,
    pub http: Option<SocketAddr>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:6032".into(),
            user: "admin".into(),
            password: DEFAULT_PASSWORD.into(),
            http_listen: "127.0.0.1:6070".into(),
            stage_histograms: true,
            query_digests: true,
            query_digests_max: 10_000,
        }
    }
}

impl AdminConfig {
    /// The addresses to listen on. Refuses the default password on an address other hosts
    /// can reach, and an empty user or password. The error is the message the operator reads
    /// when manifold does not start, hence a `String`.
    pub fn validate(&self) -> Result<AdminListen, String> {
        let http = match self.http_listen.as_str() {
            "" => None,
            text => Some(text.parse().map_err(|e| {
                format!("admin.http_listen: {e} (want host:port, e.g. 127.0.0.1:6070)")
            })?),
        };
        if self.listen.is_empty() {
            return Ok(AdminListen { sql: None, http });
        }
        let addr: SocketAddr = self
            .listen
            .parse()
            .map_err(|e| format!("admin.listen: {e} (want host:port, e.g. 127.0.0.1:6032)"))?;
        if self.user.is_empty() || self.password.is_empty() {
            return Err("admin.user and admin.password must not be empty".into());
        }
        if !addr.ip().is_loopback() && self.password == DEFAULT_PASSWORD {
            return Err(format!(
                "admin.password: the default password is accepted on a loopback admin.listen \
                 only, and {addr} is not one: set admin.password (or --admin-user NAME:PASS)"
            ));
        }
        Ok(AdminListen {
            sql: Some(addr),
            http,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin(listen: &str, password: &str) -> AdminConfig {
        AdminConfig {
            listen: listen.into(),
            password: password.into(),
            ..AdminConfig::default()
        }
    }

    #[test]
    fn the_default_password_is_for_loopback_only() {
        assert!(AdminConfig::default().validate().unwrap().sql.is_some());
        assert!(admin("[::1]:6032", "admin").validate().is_ok());
        let e = admin("0.0.0.0:6032", "admin").validate().unwrap_err();
        assert!(e.starts_with("admin.password"), "{e}");
        assert!(admin("0.0.0.0:6032", "s3cret").validate().is_ok());
    }

    #[test]
    fn off_bad_address_or_empty_credentials() {
        let off = admin("", "admin").validate().unwrap();
        assert_eq!(off.sql, None);
        assert_eq!(off.http, Some("127.0.0.1:6070".parse().unwrap()));
        assert!(admin("localhost", "admin")
            .validate()
            .unwrap_err()
            .starts_with("admin.listen"));
        assert!(admin("127.0.0.1:6032", "").validate().is_err());
        let bad_http = AdminConfig {
            http_listen: "6070".into(),
            ..AdminConfig::default()
        };
        assert!(bad_http
            .validate()
            .unwrap_err()
            .starts_with("admin.http_listen"));
    }
}
