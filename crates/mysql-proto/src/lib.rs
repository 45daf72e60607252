#![forbid(unsafe_code)]
//! The MySQL client/server wire protocol, without I/O.
//!
//! This crate owns the byte formats manifold speaks on both sides: packet framing (including
//! payloads split at 16 MiB), the connection phase (handshake v10, handshake response, TLS
//! upgrade, auth switch), the auth plugins' cryptography for verifying clients and for logging
//! into backends, command packets, OK/ERR/EOF, column definitions, text and binary rows,
//! session-state tracking data, and a tracker that follows a server's answer as it streams
//! past. It must not do I/O, allocate per forwarded packet, or panic on any input: everything
//! here is fed bytes from the network.

pub mod auth;
pub mod codec;
pub mod command;
pub mod consts;
pub mod errors;
pub mod handshake;
pub mod packet;
pub mod packets;
pub mod response;

pub use command::{Command, ResponseKind};
pub use errors::{codes, ErrorCode, ProtoError};
pub use packet::{renumber, scan_logical, write_packet, Header, LogicalPacket, PacketBuilder};
pub use response::{Progress, ResponseTracker};
