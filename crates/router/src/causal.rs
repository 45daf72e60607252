//! What a session's reads must see (`routing.causal_reads = session`, the Redis door's
//! `redis.read_from = "replicas"`): its last committed write, where it is known to be
//! applied, and which nodes missed it in time.

use crate::gtid::Gtid;
use crate::topology::NodeId;

/// The session's last write and what is known of it on each node of its cluster (a bit per
/// node in each mask).
#[derive(Debug, Default)]
pub struct CausalState {
    /// The GTID of the session's last committed write (`last_gtid`, tracked by the server).
    write: Option<Gtid>,
    /// The cluster `write` was made in: only its nodes can have it.
    cluster: usize,
    /// Nodes known to have applied `write`.
    seen_on: u64,
    /// Nodes that did not apply a write of the session (`missing`) within
    /// `routing.causal_read_timeout`: the session's reads avoid them until the monitor sees
    /// they have it, instead of waiting on them again after each write.
    missing_on: u64,
    missing: Option<Gtid>,
}

/// What a read on a replica needs first, for the session's own writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: no write, another cluster's, or already applied there.
    Nothing,
    /// That the replica has applied this write.
    Write(Gtid),
    /// The primary: the last write's GTID cannot be read, so no replica can be asked for it.
    Primary,
}

impl CausalState {
    /// The session committed a write with GTID `gtid` on `node` of `cluster`.
    pub fn note_write(&mut self, gtid: Gtid, cluster: usize, node: NodeId) {
        if self.cluster != cluster {
            self.missing = None;
            self.missing_on = 0;
        }
        self.cluster = cluster;
        self.write = Some(gtid);
        self.seen_on = 1 << node;
    }

    /// Forgets the nodes of `cluster` (of `nodes`) that missed the session's write once
    /// `has_applied` (the monitor's view) says they have it.
    pub fn forget_caught_up(
        &mut self,
        cluster: usize,
        nodes: usize,
        has_applied: impl Fn(NodeId, Gtid) -> bool,
    ) {
        let Some(g) = self.missing else {
            return;
        };
        if self.cluster != cluster {
            return;
        }
        for n in 0..nodes {
            if self.missing_on & (1 << n) != 0 && has_applied(n, g) {
                self.missing_on &= !(1 << n);
            }
        }
        if self.missing_on == 0 {
            self.missing = None;
        }
    }

    /// Nodes of `cluster` the session's reads avoid: they missed its write.
    pub fn avoided(&self, cluster: usize) -> u64 {
        if self.cluster == cluster {
            self.missing_on
        } else {
            0
        }
    }

    /// What a read on `node` of `cluster` must wait for there, `has_applied` being the
    /// monitor's view of that node.
    pub fn needs(&self, cluster: usize, node: NodeId, has_applied: impl Fn(Gtid) -> bool) -> Needs {
        if self.cluster != cluster {
            return Needs::Nothing;
        }
        match self.write {
            Some(Gtid::Unreadable) => Needs::Primary,
            Some(g) if self.seen_on & (1 << node) == 0 && !has_applied(g) => Needs::Write(g),
            // No write, or one known to be there.
            _ => Needs::Nothing,
        }
    }

    /// `node` was seen to have applied the session's write (a wait for it answered).
    pub fn seen(&mut self, node: NodeId) {
        self.seen_on |= 1 << node;
    }

    /// `node` did not apply the session's write `gtid` in time.
    pub fn missed(&mut self, gtid: Gtid, node: NodeId) {
        self.missing.get_or_insert(gtid);
        self.missing_on |= 1 << node;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gtid(text: &str) -> Gtid {
        Gtid::parse(text.as_bytes()).expect("a GTID")
    }

    #[test]
    fn a_session_without_writes_waits_for_nothing() {
        let c = CausalState::default();
        assert_eq!(c.needs(0, 1, |_| false), Needs::Nothing);
        assert_eq!(c.avoided(0), 0);
    }

    #[test]
    fn a_write_is_waited_for_where_it_is_not_known() {
        let mut c = CausalState::default();
        let g = gtid("0-1-5");
        c.note_write(g, 0, 0);
        // The primary ran it; a replica the monitor has not seen apply it waits.
        assert_eq!(c.needs(0, 0, |_| false), Needs::Nothing);
        assert_eq!(c.needs(0, 1, |_| false), Needs::Write(g));
        assert_eq!(c.needs(0, 1, |_| true), Needs::Nothing);
        c.seen(1);
        assert_eq!(c.needs(0, 1, |_| false), Needs::Nothing);
        // Another cluster's reads do not wait for it.
        assert_eq!(c.needs(1, 1, |_| false), Needs::Nothing);
    }

    #[test]
    fn an_unreadable_write_sends_reads_to_the_primary() {
        let mut c = CausalState::default();
        c.note_write(Gtid::Unreadable, 0, 0);
        assert_eq!(c.needs(0, 2, |_| true), Needs::Primary);
        assert_eq!(c.needs(1, 2, |_| true), Needs::Nothing);
    }

    #[test]
    fn nodes_that_missed_a_write_are_avoided_until_they_catch_up() {
        let mut c = CausalState::default();
        let g = gtid("0-1-7");
        c.note_write(g, 0, 0);
        c.missed(g, 1);
        c.missed(g, 2);
        assert_eq!(c.avoided(0), 0b110);
        assert_eq!(c.avoided(1), 0);
        c.forget_caught_up(0, 3, |n, _| n == 1);
        assert_eq!(c.avoided(0), 0b100);
        // Another cluster's monitor says nothing about these nodes.
        c.forget_caught_up(1, 3, |_, _| true);
        assert_eq!(c.avoided(0), 0b100);
        c.forget_caught_up(0, 3, |_, _| true);
        assert_eq!(c.avoided(0), 0);
    }

    #[test]
    fn a_write_in_another_cluster_forgets_the_misses() {
        let mut c = CausalState::default();
        let g = gtid("0-1-9");
        c.note_write(g, 0, 0);
        c.missed(g, 1);
        c.note_write(gtid("0-1-10"), 0, 0);
        // Same cluster: the nodes that missed the older write stay avoided.
        assert_eq!(c.avoided(0), 0b10);
        c.note_write(gtid("0-2-1"), 1, 0);
        assert_eq!(c.avoided(1), 0);
        assert_eq!(c.avoided(0), 0);
    }
}
