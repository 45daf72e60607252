//! Who may use the global binlog: what the backend servers would allow. A user's backend
//! login must hold, on every source primary (the global binlog carries every cluster's rows),
//! the privilege the server itself asks for the statement; `binlog.users`, when set, narrows
//! that further to the users it lists.
//!
//! The grants are learned with `SHOW GRANTS` through the user's own backend login (in the
//! session's task, never blocking a worker), kept per user for [`GRANTS_FRESH_FOR`], and
//! forgotten at a configuration reload. A refusal, or a failure to learn the grants, is kept
//! for [`REFUSAL_FRESH_FOR`] only: a grant added on the backend counts within that time, while
//! a client looping a refused statement costs the servers one `SHOW GRANTS` (and, when the
//! login fails, one failed login, which MariaDB's `max_password_errors` counts) per primary
//! per [`REFUSAL_FRESH_FOR`], not one per statement. One lookup per user runs at a time; the
//! others wait for its result. A revoked grant stops counting after at most
//! [`GRANTS_FRESH_FOR`] or at the next reload.
//!
//! A primary that cannot be reached (down, failing over, out of connections) cannot say
//! what it grants: for up to [`GRACE_WHILE_UNREACHABLE`] after the grants were last
//! learned they are taken as they were, so a CDC reader (which takes a 1227 as fatal) keeps
//! reading the global binlog, which needs no primary, through a failover. A server that
//! answers and refuses (the login, or `SHOW GRANTS`) is believed at once.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use manifold_binlog::gtid::Dialect;
use manifold_mysql_proto::codes;
use manifold_mysql_proto::packets::ErrPacket;

/// How long learned grants are taken as they were.
pub const GRANTS_FRESH_FOR: Duration = Duration::from_secs(60);

/// How long a refusal, or a failure to learn the grants, is answered without asking again.
pub const REFUSAL_FRESH_FOR: Duration = Duration::from_secs(5);

/// How long after they were last learned grants still count while a source primary cannot
/// be reached to learn them again: longer than a failover takes, short enough that a grant
/// revoked meanwhile does not count for long once the servers answer again.
pub const GRACE_WHILE_UNREACHABLE: Duration = Duration::from_secs(600);

/// What asking the source primaries for a login's grants gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Held on every source primary.
    Held(Privileges),
    /// A server refused (the login, or `SHOW GRANTS`): refused here too.
    Refused,
    /// A source primary could not be reached, or did not answer in time; with what the
    /// primaries that did answer all grant (`None`: none answered).
    Unreachable(Option<Privileges>),
}

/// What a binlog command or statement does, as the servers check it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinlogOp {
    /// `COM_BINLOG_DUMP`, `COM_BINLOG_DUMP_GTID`.
    Dump,
    /// `COM_REGISTER_SLAVE` (MariaDB's `PRIV_COM_REGISTER_SLAVE` is `REPLICATION SLAVE`;
    /// the refusal is [`register_denied`]'s).
    RegisterReplica,
    /// `SHOW BINLOG EVENTS`.
    ShowEvents,
    /// `SHOW BINARY LOGS`, `SHOW MASTER STATUS`, `SHOW BINLOG STATUS`.
    Monitor,
    /// `PURGE BINARY LOGS`.
    Purge,
    /// `FLUSH BINARY LOGS`.
    Flush,
    /// `RESET MASTER`, `RESET BINARY LOGS AND GTIDS` (asked for, then refused anyway).
    Reset,
}

/// Global (`ON *.*`) privileges that matter to the global binlog, as bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Privileges(u8);

impl Privileges {
    pub const NONE: Privileges = Privileges(0);
    pub const ALL: Privileges = Privileges(1);
    pub const REPLICATION_SLAVE: Privileges = Privileges(1 << 1);
    /// MariaDB's `BINLOG MONITOR` (formerly `REPLICATION CLIENT`, still accepted as its
    /// alias); MySQL's `REPLICATION CLIENT`.
    pub const BINLOG_MONITOR: Privileges = Privileges(1 << 2);
    pub const SUPER: Privileges = Privileges(1 << 3);
    /// MariaDB's `BINLOG ADMIN`, MySQL's dynamic `BINLOG_ADMIN`.
    pub const BINLOG_ADMIN: Privileges = Privileges(1 << 4);
    pub const RELOAD: Privileges = Privileges(1 << 5);
    /// MySQL's dynamic `FLUSH_TABLES`: MySQL 9.7 takes it instead of `RELOAD` for a reset.
    pub const FLUSH_TABLES: Privileges = Privileges(1 << 6);

    #[must_use]
    pub fn union(self, other: Privileges) -> Privileges {
        Privileges(self.0 | other.0)
    }

    /// What two servers both grant.
    #[must_use]
    pub fn intersection(self, other: Privileges) -> Privileges {
        Privileges(self.0 & other.0)
    }

    fn any_of(self, wanted: Privileges) -> bool {
        self.0 & (wanted.0 | Privileges::ALL.0) != 0
    }

    fn of_name(name: &str) -> Privileges {
        match name {
            "ALL" | "ALL PRIVILEGES" => Privileges::ALL,
            "REPLICATION SLAVE" => Privileges::REPLICATION_SLAVE,
            "BINLOG MONITOR" | "REPLICATION CLIENT" => Privileges::BINLOG_MONITOR,
            "SUPER" => Privileges::SUPER,
            "BINLOG ADMIN" | "BINLOG_ADMIN" => Privileges::BINLOG_ADMIN,
            "RELOAD" => Privileges::RELOAD,
            "FLUSH_TABLES" => Privileges::FLUSH_TABLES,
            _ => Privileges::NONE,
        }
    }
}

impl BinlogOp {
    /// The privileges any one of which allows it (`ALL PRIVILEGES` always does), as
    /// MariaDB 10.11 and MySQL 8.0 to 9.7 check it.
    fn wanted(self, dialect: Dialect) -> Privileges {
        use Privileges as P;
        match (self, dialect) {
            (BinlogOp::Dump | BinlogOp::RegisterReplica, _)
            | (BinlogOp::ShowEvents, Dialect::MySql) => P::REPLICATION_SLAVE,
            (BinlogOp::ShowEvents, Dialect::MariaDb) => P::BINLOG_MONITOR,
            (BinlogOp::Monitor, _) => P::SUPER.union(P::BINLOG_MONITOR),
            (BinlogOp::Purge, _) => P::SUPER.union(P::BINLOG_ADMIN),
            (BinlogOp::Flush, _) | (BinlogOp::Reset, Dialect::MariaDb) => P::RELOAD,
            (BinlogOp::Reset, Dialect::MySql) => P::RELOAD.union(P::FLUSH_TABLES),
        }
    }

    pub fn allowed(self, held: Privileges, dialect: Dialect) -> bool {
        held.any_of(self.wanted(dialect))
    }

    /// The ERR 1227 the server answers a user without the privilege, word for word.
    pub fn denied(self, dialect: Dialect) -> ErrPacket {
        let named = match (self, dialect) {
            (BinlogOp::Dump | BinlogOp::RegisterReplica, _)
            | (BinlogOp::ShowEvents, Dialect::MySql) => "REPLICATION SLAVE",
            (BinlogOp::ShowEvents, Dialect::MariaDb) => "BINLOG MONITOR",
            (BinlogOp::Monitor, Dialect::MariaDb) => "SUPER, BINLOG MONITOR",
            (BinlogOp::Monitor, Dialect::MySql) => "SUPER, REPLICATION CLIENT",
            (BinlogOp::Purge, Dialect::MariaDb) => "SUPER, BINLOG ADMIN",
            (BinlogOp::Purge, Dialect::MySql) => "SUPER or BINLOG_ADMIN",
            (BinlogOp::Flush, _) | (BinlogOp::Reset, Dialect::MariaDb) => "RELOAD",
            (BinlogOp::Reset, Dialect::MySql) => "RELOAD or FLUSH_TABLES",
        };
        access_denied(&format!(
            "Access denied; you need (at least one of) the {named} privilege(s) for this operation"
        ))
    }
}

/// The ERR a server answers a `COM_REGISTER_SLAVE` by a login without `REPLICATION SLAVE`:
/// not 1227 but 1045 (`ER_ACCESS_DENIED_ERROR`, SQLSTATE 28000) naming the account as it
/// matched, MariaDB 10.11 and MySQL 9.7 alike. manifold's users match from any host: `'%'`;
/// they always log in with a password.
pub fn register_denied(user: &str) -> ErrPacket {
    ErrPacket::new(
        codes::ACCESS_DENIED,
        format!("Access denied for user '{user}'@'%' (using password: YES)"),
    )
}

/// ERR 1227 (`ER_SPECIFIC_ACCESS_DENIED_ERROR`, SQLSTATE 42000) with `message`.
pub fn access_denied(message: &str) -> ErrPacket {
    ErrPacket::new(codes::SPECIFIC_ACCESS_DENIED, message)
}

/// The global privileges one server's `SHOW GRANTS` rows give: every `GRANT ... ON *.* TO`
/// line, whoever it names. MariaDB lists the grants of the role active at login (the
/// `SET DEFAULT ROLE`) after the user's own, so they count; a role granted but not active
/// is only a `GRANT role TO user` line without `ON`, and does not (as on the server, where
/// it takes a `SET ROLE` first). MySQL lists a role's name but not its privileges: only
/// what is granted to the login itself counts there.
pub fn parse_show_grants<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> Privileges {
    let mut held = Privileges::NONE;
    for line in lines {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let Some(rest) = line.strip_prefix("GRANT ") else {
            continue;
        };
        // The privilege list ends at the first " ON "; a role's (quoted) name in a
        // `GRANT role TO user` line is never read as privileges.
        let Some((list, target)) = rest.split_once(" ON ") else {
            continue;
        };
        if list.contains(['`', '\'', '"']) || !target.starts_with("*.* TO ") {
            continue;
        }
        for name in list.split(',') {
            held = held.union(Privileges::of_name(name.trim()));
        }
    }
    held
}

/// Grants as last learned for one user.
#[derive(Debug, Clone)]
struct Learned {
    /// The backend login they were learned through (a reload may change it).
    backend_user: String,
    /// Held on every source primary; `None`: they could not be learned (refused as a lack
    /// of the privilege, the details only in manifold's log).
    outcome: Option<Privileges>,
    at: Instant,
    /// The last lookup since `at` that found a source primary unreachable: `outcome` then
    /// still counts within [`GRACE_WHILE_UNREACHABLE`], asked again after
    /// [`REFUSAL_FRESH_FOR`].
    unreachable_at: Option<Instant>,
}

impl Learned {
    /// Whether `outcome` counts now without asking the servers.
    fn fresh(&self, allowed: bool) -> bool {
        let age = self.at.elapsed();
        let fresh_for = if allowed {
            GRANTS_FRESH_FOR
        } else {
            REFUSAL_FRESH_FOR
        };
        age < fresh_for
            || (self.outcome.is_some()
                && age < GRANTS_FRESH_FOR + GRACE_WHILE_UNREACHABLE
                && self
                    .unreachable_at
                    .is_some_and(|u| u.elapsed() < REFUSAL_FRESH_FOR))
    }
}

/// Every user's grants as learned since the last reload.
#[derive(Debug, Default)]
struct LearnedGrants {
    by_user: HashMap<String, Learned>,
    /// Bumped by each reload: a lookup started before it does not store its result.
    generation: u64,
}

/// The narrowing list and the grants learned, shared by every worker. Only binlog commands
/// look here: a short lock, never held across a wait.
#[derive(Debug, Default)]
pub struct BinlogAccess {
    /// `binlog.users` when the configuration sets it.
    listed: Mutex<Option<HashSet<String>>>,
    learned: Mutex<LearnedGrants>,
    /// One lookup per user at a time: a session takes its user's turn (waiting while another
    /// session's lookup runs) before asking the servers.
    lookups: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl BinlogAccess {
    /// Takes `binlog.users` as configured (at start and at each reload) and forgets every
    /// grant learned, so the next binlog command asks the servers again.
    pub fn configure(&self, users: Option<&[String]>) {
        *lock(&self.listed) = users.map(|u| u.iter().cloned().collect());
        let mut learned = lock(&self.learned);
        learned.by_user.clear();
        learned.generation += 1;
        drop(learned);
        // Turns nobody holds or waits for (users a reload may have removed).
        lock(&self.lookups).retain(|_, turn| Arc::strong_count(turn) > 1);
    }

    /// `binlog.users` as it applies now, sorted (`None`: every user the grants allow).
    pub fn listed(&self) -> Option<Vec<String>> {
        lock(&self.listed).as_ref().map(|set| {
            let mut v: Vec<String> = set.iter().cloned().collect();
            v.sort();
            v
        })
    }

    /// Whether `binlog.users` lets `user` in at all (before its grants are looked at).
    pub fn is_listed(&self, user: &str) -> bool {
        lock(&self.listed)
            .as_ref()
            .is_none_or(|set| set.contains(user))
    }

    /// The answer for `op` from the grants learned for `user` through `backend_user`, while
    /// it is fresh: an allowance for [`GRANTS_FRESH_FOR`], a refusal or a failure to learn
    /// for [`REFUSAL_FRESH_FOR`] (grants kept through a primary's absence: until the next
    /// lookup is due, [`REFUSAL_FRESH_FOR`] after the last). `None`: ask the servers.
    pub fn answer(
        &self,
        user: &str,
        backend_user: &str,
        op: BinlogOp,
        dialect: Dialect,
    ) -> Option<Result<(), ErrPacket>> {
        let learned = lock(&self.learned);
        let l = learned
            .by_user
            .get(user)
            .filter(|l| l.backend_user == backend_user)?;
        let allowed = l.outcome.is_some_and(|held| op.allowed(held, dialect));
        l.fresh(allowed).then(|| {
            if allowed {
                Ok(())
            } else {
                Err(op.denied(dialect))
            }
        })
    }

    /// `user`'s turn to ask the servers: hold its lock while asking.
    pub fn lookup_turn(&self, user: &str) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.lookups)
            .entry(user.to_owned())
            .or_default()
            .clone()
    }

    /// Which reload the grants learned belong to: take it before a lookup starts and give
    /// it to [`BinlogAccess::remember`].
    pub fn generation(&self) -> u64 {
        lock(&self.learned).generation
    }

    /// Keeps what a lookup started at `generation` learned, unless a reload came since (its
    /// result may predate the reload's, a grant revoked before it included), and gives the
    /// grants that count now: an unreachable primary leaves the last learned ones counting
    /// within [`GRACE_WHILE_UNREACHABLE`]; `None`: refused.
    pub fn remember(
        &self,
        user: &str,
        backend_user: &str,
        generation: u64,
        lookup: Lookup,
    ) -> Option<Privileges> {
        self.remember_at(user, backend_user, generation, lookup, Instant::now())
    }

    fn remember_at(
        &self,
        user: &str,
        backend_user: &str,
        generation: u64,
        lookup: Lookup,
        now: Instant,
    ) -> Option<Privileges> {
        let mut learned = lock(&self.learned);
        let current = learned.generation == generation;
        if let Lookup::Unreachable(answered) = lookup {
            if let Some(l) = learned.by_user.get_mut(user).filter(|l| {
                current
                    && l.backend_user == backend_user
                    && l.outcome.is_some()
                    && now.saturating_duration_since(l.at)
                        < GRANTS_FRESH_FOR + GRACE_WHILE_UNREACHABLE
            }) {
                // A grant revoked on a primary that did answer counts at once.
                if let (Some(held), Some(answered)) = (l.outcome, answered) {
                    l.outcome = Some(held.intersection(answered));
                }
                l.unreachable_at = Some(now);
                return l.outcome;
            }
        }
        let outcome = match lookup {
            Lookup::Held(held) => Some(held),
            Lookup::Refused | Lookup::Unreachable(_) => None,
        };
        if current {
            learned.by_user.insert(
                user.to_owned(),
                Learned {
                    backend_user: backend_user.to_owned(),
                    outcome,
                    at: now,
                    unreachable_at: None,
                },
            );
        }
        outcome
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[&str]) -> Privileges {
        parse_show_grants(lines.iter().map(|l| l.as_bytes()))
    }

    #[test]
    fn global_grants_of_mariadb_are_read_and_others_are_not() {
        let p = parse(&[
            "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `rs`@`%` IDENTIFIED BY PASSWORD '*7B9E'",
            "GRANT SELECT, INSERT ON `test`.* TO PUBLIC",
            "GRANT SUPER ON `db`.* TO `rs`@`%`",
        ]);
        assert_eq!(
            p,
            Privileges::REPLICATION_SLAVE.union(Privileges::BINLOG_MONITOR)
        );
        assert!(BinlogOp::Dump.allowed(p, Dialect::MariaDb));
        assert!(BinlogOp::Monitor.allowed(p, Dialect::MariaDb));
        assert!(!BinlogOp::Purge.allowed(p, Dialect::MariaDb));
        assert!(!BinlogOp::Flush.allowed(p, Dialect::MariaDb));
    }

    #[test]
    fn a_default_role_counts_as_mariadb_lists_it_and_a_role_name_is_never_a_privilege() {
        let p = parse(&[
            "GRANT `r1` TO `ro`@`%`",
            "GRANT USAGE ON *.* TO `ro`@`%` IDENTIFIED BY PASSWORD '*7B9E'",
            "GRANT REPLICATION SLAVE ON *.* TO `r1`",
            "SET DEFAULT ROLE `r1` FOR `ro`@`%`",
            "GRANT `SUPER ON *.* TO x` TO `ro`@`%`",
        ]);
        assert_eq!(p, Privileges::REPLICATION_SLAVE);
        assert!(!BinlogOp::Monitor.allowed(p, Dialect::MariaDb));
    }

    #[test]
    fn all_privileges_allow_everything() {
        let p = parse(&["GRANT ALL PRIVILEGES ON *.* TO `a`@`%` WITH GRANT OPTION"]);
        for op in [
            BinlogOp::Dump,
            BinlogOp::ShowEvents,
            BinlogOp::Monitor,
            BinlogOp::Purge,
            BinlogOp::Flush,
        ] {
            assert!(op.allowed(p, Dialect::MariaDb), "{op:?}");
            assert!(op.allowed(p, Dialect::MySql), "{op:?}");
        }
        assert!(!BinlogOp::Dump.allowed(Privileges::NONE, Dialect::MariaDb));
    }

    #[test]
    fn mysql_dynamic_privileges_are_read() {
        let p = parse(&[
            "GRANT REPLICATION CLIENT ON *.* TO `u`@`%`",
            "GRANT APPLICATION_PASSWORD_ADMIN,BINLOG_ADMIN ON *.* TO `u`@`%`",
            "GRANT `r`@`%` TO `u`@`%`",
        ]);
        assert!(BinlogOp::Purge.allowed(p, Dialect::MySql));
        assert!(BinlogOp::Monitor.allowed(p, Dialect::MySql));
        assert!(!BinlogOp::ShowEvents.allowed(p, Dialect::MySql));
    }

    #[test]
    fn each_statement_asks_what_the_server_asks() {
        let p = Privileges::SUPER;
        assert!(BinlogOp::Monitor.allowed(p, Dialect::MariaDb));
        assert!(BinlogOp::Purge.allowed(p, Dialect::MariaDb));
        // MariaDB 10.11: SUPER neither dumps, nor shows events, nor flushes.
        assert!(!BinlogOp::Dump.allowed(p, Dialect::MariaDb));
        assert!(!BinlogOp::ShowEvents.allowed(p, Dialect::MariaDb));
        assert!(!BinlogOp::Flush.allowed(p, Dialect::MariaDb));
        assert!(BinlogOp::ShowEvents.allowed(Privileges::BINLOG_MONITOR, Dialect::MariaDb));
        assert!(!BinlogOp::ShowEvents.allowed(Privileges::BINLOG_MONITOR, Dialect::MySql));
        assert!(BinlogOp::Flush.allowed(Privileges::RELOAD, Dialect::MySql));
        // MySQL 9.7 resets with FLUSH_TABLES too, but flushes the binary logs only with RELOAD.
        let p = parse(&["GRANT FLUSH_TABLES ON *.* TO `u`@`%`"]);
        assert!(BinlogOp::Reset.allowed(p, Dialect::MySql));
        assert!(!BinlogOp::Reset.allowed(p, Dialect::MariaDb));
        assert!(!BinlogOp::Flush.allowed(p, Dialect::MySql));
    }

    #[test]
    fn refusals_are_the_servers_words() {
        let e = BinlogOp::Dump.denied(Dialect::MariaDb);
        assert_eq!(e.code, 1227);
        assert_eq!(&e.sqlstate, b"42000");
        assert_eq!(
            String::from_utf8(e.message).unwrap(),
            "Access denied; you need (at least one of) the REPLICATION SLAVE privilege(s) for this operation"
        );
        assert_eq!(
            String::from_utf8(register_denied("nogrant").message).unwrap(),
            "Access denied for user 'nogrant'@'%' (using password: YES)"
        );
        assert!(!BinlogOp::RegisterReplica.allowed(Privileges::SUPER, Dialect::MariaDb));
        assert!(BinlogOp::RegisterReplica.allowed(Privileges::REPLICATION_SLAVE, Dialect::MySql));
        let e = BinlogOp::Purge.denied(Dialect::MySql);
        assert_eq!(
            String::from_utf8(e.message).unwrap(),
            "Access denied; you need (at least one of) the SUPER or BINLOG_ADMIN privilege(s) for this operation"
        );
        let e = BinlogOp::Reset.denied(Dialect::MySql);
        assert_eq!(
            String::from_utf8(e.message).unwrap(),
            "Access denied; you need (at least one of) the RELOAD or FLUSH_TABLES privilege(s) for this operation"
        );
    }

    #[test]
    fn the_list_narrows_and_a_reload_forgets_what_was_learned() {
        let a = BinlogAccess::default();
        let (op, d) = (BinlogOp::Dump, Dialect::MariaDb);
        assert!(a.is_listed("anyone"));
        a.remember("app", "app", a.generation(), Lookup::Held(Privileges::ALL));
        assert_eq!(a.answer("app", "app", op, d), Some(Ok(())));
        assert_eq!(a.answer("app", "other_login", op, d), None);
        a.configure(Some(&["app".to_owned()]));
        assert!(a.is_listed("app") && !a.is_listed("other"));
        assert_eq!(a.answer("app", "app", op, d), None);
        assert_eq!(a.listed(), Some(vec!["app".to_owned()]));
    }

    #[test]
    fn a_lookup_started_before_a_reload_is_not_kept() {
        let a = BinlogAccess::default();
        let (op, d) = (BinlogOp::Dump, Dialect::MariaDb);
        let started = a.generation();
        a.configure(None);
        a.remember("app", "app", started, Lookup::Held(Privileges::ALL));
        assert_eq!(a.answer("app", "app", op, d), None);
        a.remember("app", "app", a.generation(), Lookup::Held(Privileges::ALL));
        assert_eq!(a.answer("app", "app", op, d), Some(Ok(())));
    }

    #[test]
    fn a_refusal_and_a_failure_are_kept_briefly_and_an_allowance_longer() {
        let a = BinlogAccess::default();
        let d = Dialect::MariaDb;
        let ago = |t: Duration| Instant::now().checked_sub(t).unwrap();
        a.remember("mon", "mon", 0, Lookup::Held(Privileges::BINLOG_MONITOR));
        assert_eq!(a.answer("mon", "mon", BinlogOp::Monitor, d), Some(Ok(())));
        assert_eq!(
            a.answer("mon", "mon", BinlogOp::Dump, d),
            Some(Err(BinlogOp::Dump.denied(d)))
        );
        let past_refusal = REFUSAL_FRESH_FOR + Duration::from_secs(1);
        a.remember_at(
            "mon",
            "mon",
            0,
            Lookup::Held(Privileges::BINLOG_MONITOR),
            ago(past_refusal),
        );
        assert_eq!(a.answer("mon", "mon", BinlogOp::Monitor, d), Some(Ok(())));
        assert_eq!(a.answer("mon", "mon", BinlogOp::Dump, d), None);
        a.remember_at(
            "mon",
            "mon",
            0,
            Lookup::Held(Privileges::BINLOG_MONITOR),
            ago(GRANTS_FRESH_FOR + Duration::from_secs(1)),
        );
        assert_eq!(a.answer("mon", "mon", BinlogOp::Monitor, d), None);
        // Grants that could not be learned: the server's own refusal, nothing more.
        a.remember("ghost", "ghost", 0, Lookup::Refused);
        assert_eq!(
            a.answer("ghost", "ghost", BinlogOp::Monitor, d),
            Some(Err(BinlogOp::Monitor.denied(d)))
        );
        a.remember_at(
            "ghost",
            "ghost",
            0,
            Lookup::Unreachable(None),
            ago(past_refusal),
        );
        assert_eq!(a.answer("ghost", "ghost", BinlogOp::Monitor, d), None);
    }

    #[test]
    fn grants_learned_count_while_a_primary_is_unreachable_but_not_past_the_grace() {
        let a = BinlogAccess::default();
        let (op, d) = (BinlogOp::Dump, Dialect::MariaDb);
        let ago = |t: Duration| Instant::now().checked_sub(t).unwrap();
        let stale = GRANTS_FRESH_FOR + Duration::from_secs(1);
        a.remember_at(
            "cdc",
            "cdc",
            0,
            Lookup::Held(Privileges::REPLICATION_SLAVE),
            ago(stale),
        );
        assert_eq!(
            a.answer("cdc", "cdc", op, d),
            None,
            "stale grants are asked again"
        );
        // The primary is failing over: the grants still count, and are not asked again
        // until REFUSAL_FRESH_FOR has passed.
        assert_eq!(
            a.remember("cdc", "cdc", 0, Lookup::Unreachable(None)),
            Some(Privileges::REPLICATION_SLAVE)
        );
        assert_eq!(a.answer("cdc", "cdc", op, d), Some(Ok(())));
        assert_eq!(
            a.answer("cdc", "cdc", BinlogOp::Purge, d),
            Some(Err(BinlogOp::Purge.denied(d))),
            "what the grants did not allow stays refused"
        );
        // A server that answers and refuses is believed at once.
        assert_eq!(a.remember("cdc", "cdc", 0, Lookup::Refused), None);
        assert_eq!(a.answer("cdc", "cdc", op, d), Some(Err(op.denied(d))));
        // Past the grace, an unreachable primary refuses.
        let past_grace = GRANTS_FRESH_FOR + GRACE_WHILE_UNREACHABLE + Duration::from_secs(1);
        a.remember_at(
            "old",
            "old",
            0,
            Lookup::Held(Privileges::ALL),
            ago(past_grace),
        );
        assert_eq!(a.remember("old", "old", 0, Lookup::Unreachable(None)), None);
        assert_eq!(a.answer("old", "old", op, d), Some(Err(op.denied(d))));
        // Nothing learned before: unreachable is a refusal.
        assert_eq!(a.remember("new", "new", 0, Lookup::Unreachable(None)), None);
        // A primary that answers without the grant while another is unreachable: the grant
        // is gone at once.
        a.remember(
            "two",
            "two",
            0,
            Lookup::Held(Privileges::REPLICATION_SLAVE.union(Privileges::BINLOG_MONITOR)),
        );
        assert_eq!(
            a.remember(
                "two",
                "two",
                0,
                Lookup::Unreachable(Some(Privileges::BINLOG_MONITOR))
            ),
            Some(Privileges::BINLOG_MONITOR)
        );
        assert_eq!(a.answer("two", "two", op, d), Some(Err(op.denied(d))));
        assert_eq!(a.answer("two", "two", BinlogOp::Monitor, d), Some(Ok(())));
        // Grants learned through another backend login do not carry over.
        a.remember("cdc", "cdc", 0, Lookup::Held(Privileges::ALL));
        assert_eq!(
            a.remember("cdc", "other", 0, Lookup::Unreachable(None)),
            None
        );
    }

    #[tokio::test]
    async fn one_lookup_per_user_runs_at_a_time() {
        let a = BinlogAccess::default();
        let turn = a.lookup_turn("u");
        let held = turn.lock().await;
        let same = a.lookup_turn("u");
        assert!(same.try_lock().is_err());
        assert!(a.lookup_turn("other").try_lock().is_ok());
        // A reload keeps a turn in use.
        a.configure(None);
        assert!(a.lookup_turn("u").try_lock().is_err());
        drop(held);
        assert!(a.lookup_turn("u").try_lock().is_ok());
    }
}
