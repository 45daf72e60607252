//! Where a command runs: the node (from the statement's class, hints and routing rules, by
//! the worker's balancer), what a replica must have applied first (causal reads), waiting for
//! a primary, and leaving a replica a session is held on.

use manifold_backend::ServerFlavor;
use manifold_mysql_proto::codes;
use manifold_mysql_proto::consts::status;
use manifold_mysql_proto::packets::ErrPacket;
use manifold_router::{CausalReads, Gtid, GtidPos, NodeId};
use manifold_sql_lex::{Class, RouteHint, Scan, Verb};

use super::decode::Effect;
use super::Session;
use crate::metrics::FrontendMetrics;
use manifold_router::causal::Needs;

/// Where a statement may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Primary,
    /// Any node that can read, by weight.
    Any,
    /// Any node but the primary that can read (the primary when none can).
    Replicas,
    Node(NodeId),
}

impl From<manifold_router::Target> for Target {
    fn from(t: manifold_router::Target) -> Self {
        match t {
            manifold_router::Target::Primary => Target::Primary,
            manifold_router::Target::Replicas => Target::Replicas,
            manifold_router::Target::Node(n) => Target::Node(n),
        }
    }
}

/// Where a statement may go by itself: a hint decides, then the first matching rule, then
/// the statement's class. Rules move reads (and `CALL`s, multi-statements...); writes,
/// locking reads, transaction control and `SET` stay on the primary whatever a rule says.
/// `SHOW` stays on the primary: it describes the server that answers.
fn statement_target(scan: &Scan, rule: Option<Target>) -> Target {
    match (scan.hint, rule) {
        (Some(RouteHint::Primary), _) => Target::Primary,
        (Some(RouteHint::Replica), _) => Target::Replicas,
        (None, Some(t))
            if matches!(
                scan.class(),
                Class::Read | Class::BeginReadOnly | Class::Unknown
            ) =>
        {
            t
        }
        (None, _) => match scan.class() {
            Class::Read if scan.verb != Verb::Show => Target::Any,
            Class::BeginReadOnly => Target::Any,
            _ => Target::Primary,
        },
    }
}

/// What a read routed to a replica must wait for there first (causal reads).
#[derive(Debug, Clone, Copy)]
pub(super) enum Wait {
    /// The session's last write.
    Write(Gtid),
    /// Everything the primary has committed as of now.
    Primary,
}

impl Session {
    /// Where a command of a session holding no connection runs, and what a replica must
    /// have applied first. Reads (and read-only transactions) of an autocommit session go to
    /// any node that can read, by weight and load; everything else to the primary. `SHOW`
    /// stays on the primary: `SHOW MASTER STATUS`, `SHOW PROCESSLIST` and the like describe
    /// the server that answers. Hints override the class. `skip`: nodes not to use.
    pub(super) fn route(
        &self,
        effect: Effect,
        skip: u64,
        rule: Option<Target>,
    ) -> (NodeId, Option<Wait>) {
        let topology = self.topology();
        let primary = topology.primary();
        if !topology.splits_reads() || self.pins.is_pinned() {
            return (primary, None);
        }
        let Some(scan) = effect.scan() else {
            return (primary, None);
        };
        let between_transactions =
            self.status & status::IN_TRANS == 0 && self.status & status::AUTOCOMMIT != 0;
        let target = statement_target(&scan, rule);
        if !between_transactions || target == Target::Primary {
            return (primary, None);
        }
        let pools = &self.fe.pools;
        let skip = skip | self.causal.avoided(self.cluster);
        let pick = |skip: u64| {
            self.fe.balancers[self.cluster].pick(
                topology,
                |n| pools[self.cluster][n].in_use(),
                skip,
            )
        };
        let node = match target {
            Target::Node(n) if topology.nodes[n].in_service() && skip & (1 << n) == 0 => n,
            Target::Replicas | Target::Node(_) => pick(skip | 1 << primary),
            Target::Any | Target::Primary => pick(skip),
        };
        if node == primary {
            return (primary, None);
        }
        let wait = match topology.config.causal_reads {
            CausalReads::None => None,
            CausalReads::Session => {
                match self
                    .causal
                    .needs(self.cluster, node, |g| topology.has_applied(node, g))
                {
                    Needs::Nothing => None,
                    Needs::Write(g) => Some(Wait::Write(g)),
                    // No replica can be asked whether it has the write.
                    Needs::Primary => return (primary, None),
                }
            }
            CausalReads::Global => Some(Wait::Primary),
        };
        (node, wait)
    }

    /// The first routing rule matching the statement about to be routed (`digest` holds a
    /// query's digest text, computed with its scan; a prepared statement's is the one kept
    /// with the statement), counted in the worker's rule hits.
    pub(super) fn match_rule(&mut self, effect: Effect) -> Option<Target> {
        let fe = self.fe.clone();
        let rules = &fe.shared.clusters[self.cluster].topology.rules;
        if rules.is_empty() {
            return None;
        }
        effect.scan()?;
        let meta = self.executed_statement(effect);
        let digest = meta.as_ref().map_or(self.digest.as_slice(), |m| &m.digest);
        let (rule, target) = rules.first_match(digest, self.schema.as_deref(), &self.user.name)?;
        fe.count_rule_hit(self.cluster, rule);
        Some(Target::from(target))
    }

    /// A session held on a replica connection with a command that must run on the primary
    /// (outside a transaction: a read-only one is the server's to refuse writes in): a
    /// session held only so the next statement could ask about its previous one lets go of
    /// it (manifold answers those questions itself once it has moved); one held by
    /// server-side state cannot move, and the command is refused with the ERR returned.
    pub(super) fn leave_replica_for(&mut self, effect: Effect) -> Option<ErrPacket> {
        if self.lease.is_none()
            || self.lease_node == self.primary()
            || self.status & status::IN_TRANS != 0
        {
            return None;
        }
        let scan = effect.scan()?;
        let rule = self.match_rule(effect);
        // `SET`, `COMMIT`... change only the session: they may run where it is held.
        if statement_target(&scan, rule) != Target::Primary
            || matches!(scan.class(), Class::Session | Class::End)
        {
            return None;
        }
        if !self.pins.holds_server_state() {
            self.pins.hold_for_next(false, &self.fe.pins, self.id);
            self.release_if_unpinned();
            return None;
        }
        Some(ErrPacket::new(
            codes::PRIMARY_NEEDED_ON_REPLICA,
            format!(
                "This statement must run on the primary, but the session is held on replica {} by state it made there ({}); end that state first, or start such work with /* manifold:primary */",
                self.topology().nodes[self.lease_node].addr,
                self.pins.describe(),
            ),
        ))
    }

    /// Some node other than `node` can take a read now (so retrying one elsewhere makes sense).
    pub(super) fn another_reader(&self, node: NodeId) -> bool {
        let topology = self.topology();
        topology.splits_reads()
            && (0..topology.nodes.len()).any(|n| n != node && topology.can_read(n))
    }

    /// The primary is down: waits for it (or a promoted replica) to answer the monitor, up
    /// to `routing.failover_timeout` from the first call for this statement (`deadline`).
    pub(super) async fn wait_for_primary(
        &mut self,
        deadline: &mut Option<tokio::time::Instant>,
    ) -> Result<(), ErrPacket> {
        let topology = self.topology().clone();
        let limit = topology.config.failover_timeout;
        let until = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + limit);
        loop {
            if topology.nodes[topology.primary()].in_service() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= until {
                FrontendMetrics::inc(&self.fe.shared.metrics.backend_errors);
                let primary = &topology.nodes[topology.primary()];
                let state = if primary.is_offline() {
                    "taken offline (BACKEND OFFLINE)"
                } else {
                    "down"
                };
                return Err(ErrPacket::new(
                    codes::BACKEND_UNAVAILABLE,
                    format!("No primary: {} is {state} and no other node became primary within routing.failover_timeout ({limit:?})", primary.addr),
                ));
            }
            let step = tokio::time::Instant::now() + std::time::Duration::from_millis(20);
            tokio::time::sleep_until(step.min(until)).await;
        }
    }

    /// Forgets the nodes that missed the session's write once the monitor sees they have
    /// applied it.
    pub(super) fn recheck_missing_writes(&mut self) {
        let topology = self.topology().clone();
        self.causal
            .forget_caught_up(self.cluster, topology.nodes.len(), |n, g| {
                topology.has_applied(n, g)
            });
    }

    /// Waits (`MASTER_GTID_WAIT` on MariaDB, `WAIT_FOR_EXECUTED_GTID_SET` on MySQL, up to
    /// `routing.causal_read_timeout`) until the replica the session holds has applied what
    /// `wait` names; false when it has not, after giving the connection back: the read goes
    /// elsewhere.
    pub(super) async fn wait_until_applied(&mut self, wait: Wait) -> bool {
        let topology = self.topology().clone();
        // MySQL waits forever for a timeout of 0.
        let timeout = topology.config.causal_read_timeout.as_secs_f64().max(0.001);
        let position = match wait {
            Wait::Write(g) => g.to_string(),
            Wait::Primary => match self.primary_position().await {
                Some(p) if p.is_empty() => return true,
                Some(p) => p.to_string(),
                None => {
                    self.give_back_lease();
                    return false;
                }
            },
        };
        let node = self.lease_node;
        let Some(lease) = self.lease.as_mut() else {
            return false;
        };
        let conn = lease.conn();
        // Both answer 0 once the position is applied (else -1 or 1 on timeout).
        let sql = match conn.flavor() {
            ServerFlavor::MariaDb => format!("SELECT MASTER_GTID_WAIT('{position}', {timeout:.3})"),
            ServerFlavor::MySql => {
                format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{position}', {timeout:.3})")
            }
        };
        let reached = match conn.query_rows(sql.as_bytes()).await {
            Ok(Ok(rows)) => {
                rows.rows.first().and_then(|r| r.first()).cloned().flatten() == Some(b"0".to_vec())
            }
            Ok(Err(e)) => {
                tracing::warn!(connection = self.id, node = %topology.nodes[node].addr, error = %e.message_lossy(), "waiting for a GTID refused; the read goes elsewhere");
                false
            }
            Err(e) => {
                tracing::info!(connection = self.id, node = %topology.nodes[node].addr, error = %e, "backend connection lost waiting for a GTID; the read goes elsewhere");
                if let Some(l) = self.take_lease() {
                    l.discard();
                }
                return false;
            }
        };
        if reached {
            if let Wait::Write(_) = wait {
                self.causal.seen(node);
            }
            return true;
        }
        tracing::debug!(connection = self.id, node = %topology.nodes[node].addr, %position, "replica has not applied the session's write in time; the read goes elsewhere");
        FrontendMetrics::inc(&self.fe.shared.metrics.causal_fallbacks);
        if let Wait::Write(g) = wait {
            self.causal.missed(g, node);
        }
        self.give_back_lease();
        false
    }

    /// The primary's position (`@@gtid_binlog_pos`, `@@gtid_executed` on MySQL), read on a
    /// connection borrowed for it.
    async fn primary_position(&mut self) -> Option<GtidPos> {
        let mut lease = self.borrow_primary().await.ok()?;
        let sql: &[u8] = match lease.conn().flavor() {
            ServerFlavor::MariaDb => b"SELECT @@gtid_binlog_pos",
            ServerFlavor::MySql => b"SELECT @@gtid_executed",
        };
        let rows = lease.conn().query_rows(sql).await;
        match rows {
            Ok(Ok(rows)) => {
                // The query changed nothing on the connection.
                lease.mark_clean();
                let text = rows.rows.first()?.first()?.clone().unwrap_or_default();
                GtidPos::parse(&text)
            }
            Ok(Err(_)) => None,
            Err(_) => {
                lease.discard();
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(sql: &str, rule: Option<Target>) -> Target {
        statement_target(&manifold_sql_lex::scan(sql.as_bytes()), rule)
    }

    #[test]
    fn reads_go_anywhere_and_the_rest_to_the_primary() {
        assert_eq!(target("SELECT * FROM t", None), Target::Any);
        assert_eq!(target("START TRANSACTION READ ONLY", None), Target::Any);
        assert_eq!(target("UPDATE t SET a = 1", None), Target::Primary);
        assert_eq!(target("SELECT * FROM t FOR UPDATE", None), Target::Primary);
        assert_eq!(target("BEGIN", None), Target::Primary);
        assert_eq!(target("SET @@session.sql_mode = ''", None), Target::Primary);
        // SHOW describes the server that answers.
        assert_eq!(target("SHOW MASTER STATUS", None), Target::Primary);
    }

    #[test]
    fn hints_decide_before_rules() {
        let rule = Some(Target::Node(2));
        assert_eq!(
            target("/* manifold:primary */ SELECT 1", rule),
            Target::Primary
        );
        assert_eq!(
            target("/* manifold:replica */ SELECT 1", rule),
            Target::Replicas
        );
        assert_eq!(
            target("/* manifold:replica */ DELETE FROM t", None),
            Target::Replicas
        );
    }

    #[test]
    fn rules_move_reads_but_not_writes() {
        let rule = Some(Target::Node(1));
        assert_eq!(target("SELECT 1", rule), Target::Node(1));
        assert_eq!(target("SHOW TABLES", rule), Target::Node(1));
        assert_eq!(target("INSERT INTO t VALUES (1)", rule), Target::Primary);
        assert_eq!(target("COMMIT", rule), Target::Primary);
        assert_eq!(target("SET autocommit = 0", rule), Target::Primary);
    }
}
