#![forbid(unsafe_code)]
//! Connection I/O shared by every side of manifold: the client-facing doors and the backend
//! connections.
//!
//! [`Stream`] is a TCP connection, plain or upgraded to TLS as a client or as a server; it
//! knows no protocol. [`PacketIo`] frames MySQL packets over it with one reusable read buffer.
//! A door speaking another protocol uses [`Stream`] and frames its own packets. This crate
//! must not know about pools, routing or sessions.

pub mod packet;
pub mod stream;

pub use packet::{PacketIo, ReadError};
pub use stream::Stream;
