#![forbid(unsafe_code)]
//! The Redis client/server wire protocol (RESP2 and RESP3), without I/O.
//!
//! This crate is the protocol layer of manifold's Redis door: it turns bytes a client sent
//! into requests and replies into bytes, and nothing else. A request is parsed first
//! ([`Request::parse`]) and applied by the caller second. Everything here is fed bytes from
//! the network, so nothing may panic on any input, and parsing a request allocates nothing
//! per argument: arguments are ranges into the caller's buffer.
//!
//! - [`request`]: one client request from the front of a buffer, multibulk
//!   (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or inline (`GET k\r\n`, split as Redis splits it), with
//!   Redis's limits ([`Limits`]) and its exact protocol error texts ([`ProtocolError`]).
//! - [`reply`]: appending replies for protocol 2 or 3 ([`Reply`]), byte for byte as Redis
//!   writes them (nulls, maps, doubles, booleans, verbatim strings, pushes...).
//! - [`frame`]: a value for any RESP2/RESP3 reply ([`Frame`]) and a parser of server replies,
//!   for tests and differential checks against `redis-server`.
//! - [`errors`]: the protocol errors and the reply Redis sends for each.
//!
//! The Redis version whose bytes are matched is 7.0 (Debian's `redis-server`): see each
//! module for where later versions differ.

pub mod errors;
pub mod frame;
pub mod reply;
pub mod request;

pub use errors::ProtocolError;
pub use frame::{Frame, FrameError};
pub use reply::{reply_len, Protocol, Reply};
pub use request::{Limits, Request};
