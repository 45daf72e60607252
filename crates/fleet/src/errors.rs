//! What can go wrong between instances.

/// A failed exchange with another instance.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The registry lists no live instance with that id.
    #[error("no live manifold has instance id {0}")]
    NoSuchInstance(u16),
    /// It could not be reached, or the link broke.
    #[error("manifold {instance} at {addr}: {reason}")]
    Unreachable {
        instance: u16,
        addr: String,
        reason: String,
    },
    /// Its proof of the fleet's secret was wrong, or it refused ours.
    #[error("manifold {instance} at {addr} does not share this fleet's secret")]
    Refused { instance: u16, addr: String },
    /// A malformed message.
    #[error("fleet link: {0}")]
    Protocol(String),
    /// This instance has not read the fleet's secret yet (its registry is unreachable).
    #[error("this manifold has not joined its fleet yet: {0}")]
    NotJoined(String),
}
