//! Session ids unique across the fleet: a 32-bit connection id (what the handshake, `KILL`
//! and `CONNECTION_ID()` carry) whose top bits are the instance's id in the registry.
//!
//! Instance 0 is a manifold that has not registered (alone, or its registry unreachable so
//! far): its ids are its own only, as before there was a fleet.

/// Bits of a connection id that number sessions within one instance.
pub const LOCAL_BITS: u32 = 22;
/// The largest instance id: the rest of the 32 bits.
pub const MAX_INSTANCE: u16 = (1 << (32 - LOCAL_BITS)) - 1;
/// The session-number part of a connection id.
pub const LOCAL_MASK: u32 = (1 << LOCAL_BITS) - 1;

/// The instance a connection id was given by; 0 for an unregistered instance's ids.
pub fn instance_of(id: u32) -> u16 {
    (id >> LOCAL_BITS) as u16
}

/// The connection id of session number `local` of `instance`. A lone instance (0) keeps all
/// 32 bits for its sessions.
pub fn compose(instance: u16, local: u32) -> u32 {
    if instance == 0 {
        local
    } else {
        u32::from(instance) << LOCAL_BITS | (local & LOCAL_MASK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_names_its_instance() {
        let id = compose(3, 17);
        assert_eq!(instance_of(id), 3);
        assert_eq!(id & LOCAL_MASK, 17);
        assert_eq!(instance_of(compose(MAX_INSTANCE, LOCAL_MASK)), MAX_INSTANCE);
        assert_eq!(compose(MAX_INSTANCE, LOCAL_MASK), u32::MAX);
        // A lone instance's ids are as they were.
        assert_eq!(compose(0, 123_456_789), 123_456_789);
        // Wrapping within an instance stays within it.
        assert_eq!(instance_of(compose(5, LOCAL_MASK + 2)), 5);
    }
}
