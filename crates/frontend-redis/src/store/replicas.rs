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

/// What `WAIT` counts: the replicas in service that have applied the last write of
/// `causal` (all of them when it wrote nothing yet, as Redis counts its replicas' acks).
/// With `wait`, those not known to have it are asked at once, concurrently, each on a
/// connection of its own (`MASTER_GTID_WAIT`, `WAIT_FOR_EXECUTED_GTID_SET` on MySQL),
/// until `want` have it or `deadline` passes (`None`: no deadline); without, only what the
/// monitor already knows counts. A write whose GTID cannot be read counts on no replica.
/// Cancel-safe: a wait dropped on its way drops its connection.
pub(crate) async fn replicas_with_write(
    store: &Store,
    key: &ConnKey,
    causal: &Causal,
    want: i64,
    deadline: Option<std::time::Instant>,
    wait: bool,
) -> i64 {
    let (mut have, asks) = known(store, causal, wait);
    if have >= want || asks.is_empty() {
        return have;
    }
    if store.wait_asks.get() + asks.len() > MAX_WAIT_ASKS {
        // Enough replica connections wait already: this one follows the monitor's view
        // (checked every `routing.monitor.interval`) and holds none.
        loop {
            tokio::time::sleep(MONITOR_POLL).await;
            let have = known(store, causal, false).0;
            if have >= want || deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return have;
            }
        }
    }
    let _asking = Asking::new(&store.wait_asks, asks.len());
    let mut waits: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = Option<NodeId>> + '_>>> =
        asks.into_iter()
            .map(|(node, g)| {
                Box::pin(async move {
                    replica_reached(store, key, node, g, deadline)
                        .await
                        .then_some(node)
                })
                    as std::pin::Pin<Box<dyn std::future::Future<Output = Option<NodeId>> + '_>>
            })
            .collect();
    std::future::poll_fn(|cx| {
        waits.retain_mut(|w| match w.as_mut().poll(cx) {
            std::task::Poll::Ready(reached) => {
                if let Some(node) = reached {
                    causal.borrow_mut().seen(node);
                    have += 1;
                }
                false
            }
            std::task::Poll::Pending => true,
        });
        if have >= want || waits.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    have
}

/// Most replica connections the `WAIT`s of one worker hold at once: past it a `WAIT` polls
/// the monitor's view instead, so waiting clients cannot take the replicas' pools from
/// reads.
const MAX_WAIT_ASKS: usize = 16;

/// How often a `WAIT` past [`MAX_WAIT_ASKS`] looks at the monitor's view.
const MONITOR_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Counts a `WAIT`'s asks in [`Store::wait_asks`] while it lives (dropped when the wait
/// ends or is abandoned).
struct Asking<'a> {
    count: &'a std::cell::Cell<usize>,
    n: usize,
}

impl<'a> Asking<'a> {
    fn new(count: &'a std::cell::Cell<usize>, n: usize) -> Self {
        count.set(count.get() + n);
        Asking { count, n }
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.count.set(self.count.get() - self.n);
    }
}

/// The replicas in service known to have the last write of `causal`, and (with `ask`)
/// those to ask, with the write.
fn known(store: &Store, causal: &Causal, ask: bool) -> (i64, Vec<(NodeId, Gtid)>) {
    let topology = store.backends.topology();
    let primary = topology.primary();
    let mut have = 0i64;
    let mut asks = Vec::new();
    for node in (0..topology.nodes.len()).filter(|&n| n != primary) {
        if !topology.nodes[node].in_service() {
            continue;
        }
        match causal
            .borrow()
            .needs(CLUSTER, node, |g| topology.has_applied(node, g))
        {
            Needs::Nothing => have += 1,
            Needs::Write(g) if ask => asks.push((node, g)),
            Needs::Write(_) | Needs::Primary => {}
        }
    }
    (have, asks)
}

/// `WAIT` inside `MULTI`: the replicas in service known now to have the last write of
/// `causal`.
pub(crate) fn replicas_known_with_write(store: &Store, causal: &Causal) -> i64 {
    known(store, causal, false).0
}

/// Whether replica `node` applies `g` by `deadline` (`None`: whenever it does).
async fn replica_reached(
    store: &Store,
    key: &ConnKey,
    node: NodeId,
    g: Gtid,
    deadline: Option<std::time::Instant>,
) -> bool {
    let Ok(mut lease) = store.backends.pool(node).acquire(key, None, 0).await else {
        return false;
    };
    // A year stands for no deadline (MariaDB has no "forever" but a missing argument).
    let secs = deadline.map_or(365.0 * 86_400.0, |d| {
        d.saturating_duration_since(std::time::Instant::now())
            .as_secs_f64()
            .max(0.001)
    });
    let sql = match lease.conn().flavor() {
        ServerFlavor::MariaDb => "SELECT MASTER_GTID_WAIT(?, ?)",
        ServerFlavor::MySql => "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)",
    };
    let (id, text) = store.statement(sql);
    let pos = g.to_string();
    let params = [Param::Bytes(pos.as_bytes()), Param::Double(secs)];
    let keep = store.shared.keep_statements;
    match lease.conn().execute(id, &text, &params, keep).await {
        Ok(Ok(done)) => {
            lease.mark_clean();
            done.rows
                .first()
                .and_then(|r| r.first())
                .and_then(super::int)
                == Some(0)
        }
        Ok(Err(_)) => {
            lease.mark_clean();
            false
        }
        Err(_) => {
            lease.discard();
            false
        }
    }
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
