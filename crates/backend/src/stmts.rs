//! Server-side prepared statements living on one backend connection.
//!
//! Client sessions do not own backend statements: a statement is known to manifold by a
//! worker-wide id, and each backend connection prepares it the first time a session runs it
//! there. This map says which of those statements a connection has, under which id the
//! server knows it, and which parameter types the server last bound to it (the protocol lets
//! a client send types only when they change, so a statement moving between connections may
//! need them sent again). The least recently used statement is the one to close when the
//! connection holds too many.

use std::collections::HashMap;

/// One statement prepared on this connection.
#[derive(Debug)]
pub struct ConnStatement {
    /// The id the server gave it.
    pub backend_id: u32,
    pub params: u16,
    /// Parameter types (two bytes each) the server last received for it; empty until then.
    pub bound_types: Vec<u8>,
    last_used: u64,
}

#[derive(Debug, Default)]
pub struct PreparedOnConn {
    by_global_id: HashMap<u64, ConnStatement>,
    clock: u64,
    /// Statements forgotten to make room, since the connection opened.
    pub evictions: u64,
}

impl PreparedOnConn {
    /// The statement manifold knows as `global_id`, if prepared here; marks it used.
    pub fn get(&mut self, global_id: u64) -> Option<&mut ConnStatement> {
        self.clock += 1;
        let clock = self.clock;
        let s = self.by_global_id.get_mut(&global_id)?;
        s.last_used = clock;
        Some(s)
    }

    /// Records a statement the server just prepared; returns the server id of the copy it
    /// replaces, which the caller should close.
    pub fn insert(&mut self, global_id: u64, backend_id: u32, params: u16) -> Option<u32> {
        self.clock += 1;
        self.by_global_id
            .insert(
                global_id,
                ConnStatement {
                    backend_id,
                    params,
                    bound_types: Vec::new(),
                    last_used: self.clock,
                },
            )
            .map(|old| old.backend_id)
    }

    /// Forgets the least recently used statement, returning its server id, for the caller to
    /// close with `COM_STMT_CLOSE`.
    pub fn evict_least_recently_used(&mut self) -> Option<u32> {
        let (&global, _) = self.by_global_id.iter().min_by_key(|(_, s)| s.last_used)?;
        self.evictions += 1;
        self.by_global_id.remove(&global).map(|s| s.backend_id)
    }

    pub fn len(&self) -> usize {
        self.by_global_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_global_id.is_empty()
    }

    /// The server dropped all statements (the session was reset).
    pub fn clear(&mut self) {
        self.by_global_id.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut p = PreparedOnConn::default();
        p.insert(1, 101, 0);
        p.insert(2, 102, 1);
        p.insert(3, 103, 2);
        assert_eq!(p.get(1).map(|s| s.backend_id), Some(101));
        assert_eq!(p.evict_least_recently_used(), Some(102));
        assert_eq!(p.evict_least_recently_used(), Some(103));
        assert_eq!(p.len(), 1);
        assert!(p.get(2).is_none());
    }

    #[test]
    fn a_second_prepare_replaces_the_first() {
        let mut p = PreparedOnConn::default();
        assert_eq!(p.insert(7, 1, 0), None);
        assert_eq!(p.insert(7, 2, 0), Some(1));
        assert_eq!(p.get(7).map(|s| s.backend_id), Some(2));
        p.clear();
        assert!(p.is_empty());
    }
}
