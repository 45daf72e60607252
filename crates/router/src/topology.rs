//! The nodes of a cluster and what is known of each: up or shunned, lag, `read_only`, GTID
//! position. Written by the monitor (and by sessions when a connection attempt fails), read
//! with relaxed loads when a statement is routed.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::config::{ReplicaEntry, RoutingConfig};
use crate::gtid::{Gtid, GtidPos};

/// Index of a node in [`Topology::nodes`]; the configured primary is 0.
pub type NodeId = usize;

/// Most nodes a cluster may have (sessions keep per-node bits in a `u64`).
pub const MAX_NODES: usize = 64;

/// Lag not known (no check has succeeded, or replication is not configured).
const LAG_UNKNOWN: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOnly {
    Unknown,
    Off,
    On,
}

#[derive(Debug)]
pub struct Node {
    pub addr: String,
    pub read_weight: u32,
    pub max_lag: Duration,
    up: AtomicBool,
    lag_ms: AtomicU64,
    read_only: AtomicU8,
    /// What the node has applied (`@@gtid_current_pos`), as of the last check.
    position: ArcSwap<GtidPos>,
    /// Times the node was shunned.
    shunned: AtomicU64,
    /// Taken out of service by an operator (`BACKEND OFFLINE`): no new statements, whatever
    /// its health.
    offline: AtomicBool,
}

impl Node {
    fn new(addr: &str, read_weight: u32, max_lag: Duration) -> Node {
        Node {
            addr: addr.to_owned(),
            read_weight,
            max_lag,
            // Until the first check says otherwise: a node that is down costs its first
            // borrower one failed connect, which shuns it.
            up: AtomicBool::new(true),
            lag_ms: AtomicU64::new(LAG_UNKNOWN),
            read_only: AtomicU8::new(ReadOnly::Unknown as u8),
            position: ArcSwap::from_pointee(GtidPos::default()),
            shunned: AtomicU64::new(0),
            offline: AtomicBool::new(false),
        }
    }

    /// Up and not taken offline: may take new statements.
    pub fn in_service(&self) -> bool {
        self.is_up() && !self.is_offline()
    }

    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Relaxed)
    }

    /// Takes the node out of service (`BACKEND OFFLINE`) or puts it back; returns whether
    /// that changed anything.
    pub fn set_offline(&self, offline: bool) -> bool {
        let was = self.offline.swap(offline, Ordering::Relaxed);
        if was != offline {
            if offline {
                tracing::warn!(node = %self.addr, "node taken offline by an operator: draining");
            } else {
                tracing::info!(node = %self.addr, "node put back online by an operator");
            }
        }
        was != offline
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Replication lag as of the last check; `None` when not known.
    pub fn lag(&self) -> Option<Duration> {
        match self.lag_ms.load(Ordering::Relaxed) {
            LAG_UNKNOWN => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    pub fn read_only(&self) -> ReadOnly {
        match self.read_only.load(Ordering::Relaxed) {
            1 => ReadOnly::Off,
            2 => ReadOnly::On,
            _ => ReadOnly::Unknown,
        }
    }

    pub fn position(&self) -> arc_swap::Guard<std::sync::Arc<GtidPos>> {
        self.position.load()
    }

    pub fn shunned_total(&self) -> u64 {
        self.shunned.load(Ordering::Relaxed)
    }

    /// Marks the node down (no new statements); returns whether it was up.
    pub fn shun(&self, why: &str) -> bool {
        let was = self.up.swap(false, Ordering::Relaxed);
        if was {
            self.shunned.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(node = %self.addr, reason = why, "node shunned");
        }
        was
    }

    pub fn restore(&self) {
        if !self.up.swap(true, Ordering::Relaxed) {
            tracing::info!(node = %self.addr, "node back in service");
        }
    }

    pub(crate) fn set_lag(&self, lag: Option<Duration>) {
        let ms = lag.map_or(LAG_UNKNOWN, |d| {
            d.as_millis().min(u128::from(LAG_UNKNOWN - 1)) as u64
        });
        let before = self.lag_ms.swap(ms, Ordering::Relaxed);
        let bound = self.max_lag.as_millis() as u64;
        // A first measure within bounds is not news.
        let first = before == LAG_UNKNOWN;
        let crossed = if first {
            ms > bound
        } else {
            (before > bound) != (ms > bound)
        };
        if crossed {
            if ms > bound {
                tracing::warn!(node = %self.addr, lag_ms = ms, bound_ms = bound, "replica lags beyond its bound; no reads until it catches up");
            } else {
                tracing::info!(node = %self.addr, lag_ms = ms, "replica within its lag bound; reads resume");
            }
        }
    }

    pub(crate) fn set_read_only(&self, on: bool) {
        let v = if on { ReadOnly::On } else { ReadOnly::Off };
        self.read_only.store(v as u8, Ordering::Relaxed);
    }

    pub(crate) fn set_position(&self, pos: GtidPos) {
        if **self.position.load() != pos {
            self.position.store(std::sync::Arc::new(pos));
        }
    }
}

/// One primary and its replicas.
#[derive(Debug)]
pub struct Topology {
    pub nodes: Vec<Node>,
    primary: AtomicUsize,
    /// Times another node became the primary.
    failovers: AtomicU64,
    pub config: RoutingConfig,
    pub rules: crate::rules::Rules,
}

impl Topology {
    pub fn new(
        primary: &str,
        replicas: &[ReplicaEntry],
        config: RoutingConfig,
    ) -> Result<Topology, String> {
        if replicas.len() + 1 > MAX_NODES {
            return Err(format!(
                "backend.replicas: at most {} replicas",
                MAX_NODES - 1
            ));
        }
        let mut nodes = vec![Node::new(
            primary,
            config.primary_read_weight,
            config.max_replication_lag,
        )];
        for r in replicas {
            let node = match r {
                ReplicaEntry::Addr(a) => Node::new(a, 1, config.max_replication_lag),
                ReplicaEntry::Node(n) => Node::new(
                    &n.addr,
                    n.read_weight.unwrap_or(1),
                    n.max_replication_lag.unwrap_or(config.max_replication_lag),
                ),
            };
            if nodes.iter().any(|x| x.addr == node.addr) {
                return Err(format!("backend.replicas: {} is listed twice", node.addr));
            }
            nodes.push(node);
        }
        let rules = crate::rules::Rules::new(&config.rules, |addr| {
            nodes.iter().position(|n| n.addr == addr)
        })?;
        Ok(Topology {
            nodes,
            primary: AtomicUsize::new(0),
            failovers: AtomicU64::new(0),
            config,
            rules,
        })
    }

    /// The node writes go to.
    pub fn primary(&self) -> NodeId {
        self.primary.load(Ordering::Relaxed)
    }

    /// Writes go to `node` from now on (a promotion was seen).
    pub fn set_primary(&self, node: NodeId) {
        if self.primary.swap(node, Ordering::Relaxed) != node {
            self.failovers.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Times another node became the primary since start.
    pub fn failovers(&self) -> u64 {
        self.failovers.load(Ordering::Relaxed)
    }

    /// Reads are routed by weight; otherwise everything goes to the primary.
    pub fn splits_reads(&self) -> bool {
        self.config.read_write_split && self.nodes.len() > 1
    }

    /// `node` may take a read now: up, with read weight, and (a replica) within its lag
    /// bound.
    pub fn can_read(&self, node: NodeId) -> bool {
        let n = &self.nodes[node];
        if !n.in_service() || n.read_weight == 0 {
            return false;
        }
        node == self.primary() || n.lag_ms.load(Ordering::Relaxed) <= n.max_lag.as_millis() as u64
    }

    /// The node's last checked position includes `gtid`.
    pub fn has_applied(&self, node: NodeId, gtid: Gtid) -> bool {
        self.nodes[node].position.load().includes(gtid)
    }
}

/// One worker's read balancer: least outstanding requests weighted by read weight, with a
/// smooth weighted round robin among the equally loaded so that an idle cluster still
/// spreads reads by weight. Lives on one worker thread; nothing in it is shared.
#[derive(Debug, Default)]
pub struct Balancer {
    credit: std::cell::RefCell<Vec<i64>>,
}

impl Balancer {
    /// The node for a read. `outstanding(n)` is this worker's statements in flight on node
    /// `n`; `skip` has a bit set for each node not to use. Falls back to the primary when no
    /// other node can read.
    pub fn pick(
        &self,
        topology: &Topology,
        outstanding: impl Fn(NodeId) -> usize,
        skip: u64,
    ) -> NodeId {
        let mut credit = self.credit.borrow_mut();
        credit.resize(topology.nodes.len(), 0);
        // Load in thousandths of a request per unit of weight.
        let load =
            |n: NodeId| (outstanding(n) as u64 * 1000) / u64::from(topology.nodes[n].read_weight);
        let mut total = 0i64;
        let mut best: Option<NodeId> = None;
        let mut least: Option<(u64, NodeId)> = None;
        for n in 0..topology.nodes.len() {
            if skip & (1 << n) != 0 || !topology.can_read(n) {
                continue;
            }
            let w = i64::from(topology.nodes[n].read_weight);
            credit[n] += w;
            total += w;
            if best.is_none_or(|b| credit[n] > credit[b]) {
                best = Some(n);
            }
            let l = load(n);
            if least.is_none_or(|(ll, _)| l < ll) {
                least = Some((l, n));
            }
        }
        let Some(mut pick) = best else {
            return topology.primary();
        };
        // A node already more than one request per unit of weight busier than the least
        // loaded one (slow, or stuck) yields its turn.
        if let Some((l, n)) = least {
            if load(pick) > l + 1000 {
                pick = n;
            }
        }
        credit[pick] -= total;
        pick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(weights: &[u32]) -> Topology {
        let cfg = RoutingConfig {
            primary_read_weight: weights[0],
            ..RoutingConfig::default()
        };
        let replicas: Vec<ReplicaEntry> = weights[1..]
            .iter()
            .enumerate()
            .map(|(i, w)| {
                ReplicaEntry::Node(crate::config::ReplicaConfig {
                    addr: format!("r:{i}"),
                    read_weight: Some(*w),
                    max_replication_lag: None,
                })
            })
            .collect();
        let t = Topology::new("p:1", &replicas, cfg).unwrap();
        for n in &t.nodes[1..] {
            n.set_lag(Some(Duration::ZERO));
        }
        t
    }

    fn spread(t: &Topology, b: &Balancer, n: usize, skip: u64) -> Vec<usize> {
        let mut counts = vec![0; t.nodes.len()];
        for _ in 0..n {
            counts[b.pick(t, |_| 0, skip)] += 1;
        }
        counts
    }

    #[test]
    fn idle_cluster_spreads_reads_exactly_by_weight() {
        let t = topo(&[1, 2, 3]);
        assert_eq!(spread(&t, &Balancer::default(), 600, 0), [100, 200, 300]);
        let t = topo(&[0, 1, 1]);
        assert_eq!(spread(&t, &Balancer::default(), 10, 0), [0, 5, 5]);
    }

    #[test]
    fn shunned_lagging_and_skipped_nodes_get_nothing() {
        let t = topo(&[1, 1, 1]);
        let b = Balancer::default();
        t.nodes[1].shun("test");
        assert_eq!(spread(&t, &b, 10, 0), [5, 0, 5]);
        t.nodes[1].restore();
        t.nodes[2].set_lag(Some(Duration::from_secs(11)));
        assert_eq!(spread(&t, &b, 10, 0)[2], 0);
        t.nodes[2].set_lag(None);
        assert_eq!(
            spread(&t, &b, 10, 0)[2],
            0,
            "unknown lag is not within bounds"
        );
        t.nodes[2].set_lag(Some(Duration::from_secs(1)));
        assert_eq!(spread(&t, &b, 10, 0b001)[0], 0);
    }

    #[test]
    fn no_reader_left_means_the_primary() {
        let t = topo(&[0, 1]);
        t.nodes[1].shun("test");
        assert_eq!(Balancer::default().pick(&t, |_| 0, 0), 0);
    }

    #[test]
    fn a_busy_node_yields_to_the_least_loaded() {
        let t = topo(&[1, 1, 1]);
        let b = Balancer::default();
        // Node 1 holds 5 in flight: it never gets the next one while the others are idle.
        for _ in 0..30 {
            assert_ne!(b.pick(&t, |n| if n == 1 { 5 } else { 0 }, 0), 1);
        }
    }
}
