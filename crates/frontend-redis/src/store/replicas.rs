//! Reads on replicas (`redis.read_from = "replicas"`), never missing the client's own writes.
//!
//! - Every Redis session keeps a [`CausalState`] (the router's, as the MySQL door's
//!   sessions do): the GTID of its last committed write, learnt from the OK packet of the
//!   commit (MariaDB's tracked `last_gtid`, MySQL's `session_track_gtids`) by the
//!   transaction the write ran in ([`crate::store::Tx::noting`]). A group's write gives its
//!   position to every member.
//! - A read-only batch (and a group of `GET`s) runs on a replica picked by the worker's
//!   balancer (the MySQL door's: healthy, within `max_replication_lag`, by weight and
//!   load), not the primary, nor a node that missed one of the sessions' writes lately. When
//!   the monitor does not already know that replica has applied the sessions' writes,
//!   `MASTER_GTID_WAIT` (`WAIT_FOR_EXECUTED_GTID_SET` on MySQL) waits for them there, up to
//!   `routing.causal_read_timeout`. A group waits for the most recent write of each of its
//!   members (per replication domain, or per MySQL source).
//! - The primary serves the read when no replica qualifies, the wait times out (that
//!   replica is then avoided by those sessions until the monitor sees it caught up), a
//!   write's GTID cannot be read, the schema is not known to exist yet, or the read fails on
//!   the replica.

use std::cell::RefCell;
use std::rc::Rc;

use manifold_backend::state::TrackedChanges;
use manifold_backend::{ConnKey, Lease, Param, ServerFlavor};
use manifold_router::causal::{CausalState, Needs};
use manifold_router::{Gtid, NodeId};

use super::Store;

/// One session's causal state, shared with the transactions and groups it runs in.
pub type Causal = Rc<RefCell<CausalState>>;

/// The door keeps its keys in the first cluster.
pub const CLUSTER: usize = 0;

/// The GTID an OK packet's session-state data reports committed (`last_gtid` on MariaDB,
/// the GTID tracker on MySQL: a set manifold cannot read is [`Gtid::Unreadable`]).
pub fn committed_gtid(session_state: &[u8]) -> Option<Gtid> {
    let changes = TrackedChanges::decode(session_state)?;
    if let Some(g) = &changes.gtids {
        return Some(Gtid::parse(g).unwrap_or(Gtid::Unreadable));
    }
    changes
        .vars
        .iter()
        .find(|(name, _)| name == b"last_gtid")
        .and_then(|(_, value)| Gtid::parse(value))
}

/// Adds `g` to the position `waits`: one GTID per MariaDB domain or MySQL source, the
/// latest (each replicates in order).
fn merge(waits: &mut Vec<Gtid>, g: Gtid) {
    let same = |a: &Gtid| match (a, &g) {
        (Gtid::MariaDb { domain: x, .. }, Gtid::MariaDb { domain: y, .. }) => x == y,
        (Gtid::MySql { source: x, .. }, Gtid::MySql { source: y, .. }) => x == y,
        _ => false,
    };
    let seq = |a: &Gtid| match *a {
        Gtid::MariaDb { seq, .. } | Gtid::MySql { seq, .. } => seq,
        Gtid::Unreadable => 0,
    };
    match waits.iter_mut().find(|w| same(w)) {
        Some(w) if seq(w) < seq(&g) => *w = g,
        Some(_) => {}
        None => waits.push(g),
    }
}

/// The position text `waits` (`0-1-5,1-2-7`).
fn position(waits: &[Gtid]) -> String {
    waits
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A connection to a replica that has applied the writes of `sessions`, and its node;
/// `None`: the read runs on the primary.
pub(crate) async fn acquire(
    store: &Store,
    key: &ConnKey,
    sessions: &[Causal],
) -> Option<(Lease, NodeId)> {
    let backends = &store.backends;
    let topology = backends.topology();
    let primary = topology.primary();
    let nodes = topology.nodes.len();
    if nodes < 2 {
        return None;
    }
    let mut skip = 1u64 << primary;
    for s in sessions {
        let mut c = s.borrow_mut();
        c.forget_caught_up(CLUSTER, nodes, |n, g| topology.has_applied(n, g));
        skip |= c.avoided(CLUSTER);
    }
    let node = backends.pick_reader(skip);
    if node == primary || skip & (1 << node) != 0 {
        return None;
    }
    // What each session needs there: (its index, the write).
    let mut needed: Vec<(usize, Gtid)> = Vec::new();
    let mut waits: Vec<Gtid> = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        match s
            .borrow()
            .needs(CLUSTER, node, |g| topology.has_applied(node, g))
        {
            Needs::Nothing => {}
            Needs::Write(g) => {
                needed.push((i, g));
                merge(&mut waits, g);
            }
            // No replica can be asked whether it has that write.
            Needs::Primary => return None,
        }
    }
    let mut lease = match backends.pool(node).acquire(key, None, 0).await {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!(node = %topology.nodes[node].addr, error = %e, "redis read: no replica connection; the primary serves it");
            return None;
        }
    };
    if waits.is_empty() {
        return Some((lease, node));
    }
    // MySQL waits forever for a timeout of 0.
    let timeout = topology.config.causal_read_timeout.as_secs_f64().max(0.001);
    let sql = match lease.conn().flavor() {
        ServerFlavor::MariaDb => "SELECT MASTER_GTID_WAIT(?, ?)",
        ServerFlavor::MySql => "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)",
    };
    let (id, text) = store.statement(sql);
    let pos = position(&waits);
    let params = [Param::Bytes(pos.as_bytes()), Param::Double(timeout)];
    let keep = store.shared.keep_statements;
    let answer = lease.conn().execute(id, &text, &params, keep).await;
    let reached = match answer {
        // Both answer 0 once the position is applied (-1 or 1 on timeout).
        Ok(Ok(done)) => {
            done.rows
                .first()
                .and_then(|r| r.first())
                .and_then(super::int)
                == Some(0)
        }
        Ok(Err(e)) => {
            tracing::warn!(node = %topology.nodes[node].addr, error = %e.message_lossy(), "redis read: waiting for a GTID refused; the primary serves it");
            false
        }
        Err(e) => {
            tracing::info!(node = %topology.nodes[node].addr, error = %e, "redis read: replica connection lost waiting for a GTID; the primary serves it");
            lease.discard();
            return None;
        }
    };
    // The wait changed nothing on the connection.
    lease.mark_clean();
    if reached {
        for s in sessions {
            s.borrow_mut().seen(node);
        }
        return Some((lease, node));
    }
    tracing::debug!(node = %topology.nodes[node].addr, position = %pos, "redis read: replica has not applied the client's write in time; the primary serves it");
    for (i, g) in needed {
        sessions[i].borrow_mut().missed(g, node);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gtid(text: &str) -> Gtid {
        Gtid::parse(text.as_bytes()).expect("a GTID")
    }

    #[test]
    fn a_position_keeps_the_latest_write_of_each_domain() {
        let mut w = Vec::new();
        merge(&mut w, gtid("0-1-5"));
        merge(&mut w, gtid("0-1-9"));
        merge(&mut w, gtid("0-2-7"));
        merge(&mut w, gtid("3-1-2"));
        assert_eq!(position(&w), "0-1-9,3-1-2");
    }

    #[test]
    fn a_commit_reports_its_gtid() {
        // Session-state data: one system variable entry (type 0), `last_gtid` = `0-1-42`.
        let mut var = Vec::new();
        var.push(9u8);
        var.extend_from_slice(b"last_gtid");
        var.push(6);
        var.extend_from_slice(b"0-1-42");
        let mut data = vec![0u8, var.len() as u8];
        data.extend_from_slice(&var);
        assert_eq!(committed_gtid(&data), Some(gtid("0-1-42")));
        assert_eq!(committed_gtid(&[]), None);
    }
}
