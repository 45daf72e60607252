#![forbid(unsafe_code)]
//! Integration tests against one real MariaDB topology per test binary, with manifold started
//! in process. Each test uses its own schema and its own manifold instance.

mod harness;

mod backend_auth;
mod binlog_stamps;
mod commands;
mod fleet;
mod large_packets;
mod multiplex;
mod pool;
mod shutdown;
