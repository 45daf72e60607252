#![forbid(unsafe_code)]
//! The admin port: a MySQL-protocol listener (default `127.0.0.1:6032`) with its own
//! credentials, where an operator's `mariadb` client runs admin commands (`SHOW BACKENDS`,
//! `SHOW STATUS`...) against the running server, as ProxySQL's admin interface does; and
//! HTTP (default `127.0.0.1:6070`) with the same figures for Prometheus (`/metrics`) and
//! scripts (`/status`).
//! It owns the admin listener, its logins and the command set; it reads the server's shared
//! state and counters and must never sit on the request path: it runs on a thread of its
//! own, and nothing a client session does waits for it.

mod binlog;
mod commands;
mod config;
mod control;
mod errors;
mod fleet;
mod history;
mod http;
mod logins;
mod redis;
mod server;

pub use config::{AdminConfig, AdminListen};
pub use control::{Change, Control, SetError, Variable};
pub use server::{start, AdminServer};
