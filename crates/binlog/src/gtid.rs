//! GTIDs and positions of both dialects.
//!
//! - MariaDB: GTIDs `domain-server-seq` and positions of the last GTID of each replication
//!   domain, as `@@gtid_binlog_pos` and `@slave_connect_state` spell them (`0-1-5,1-2-9`).
//! - MySQL: GTIDs `uuid:number` and GTID sets, as `@@gtid_executed` spells them
//!   (`3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,...`), and their binary form (the SID block
//!   of `COM_BINLOG_DUMP_GTID` and `PREVIOUS_GTIDS`).
//! - [`TxnGtid`] and [`GtidState`]: one transaction's GTID and one server's position in either
//!   dialect, which the sources, the origin records and the files carry.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Gtid {
    pub domain: u32,
    pub server: u32,
    pub seq: u64,
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server, self.seq)
    }
}

impl FromStr for Gtid {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a GTID (domain-server-sequence)");
        let mut parts = s.trim().splitn(3, '-');
        let mut next = || parts.next().ok_or_else(bad);
        let domain = next()?.parse().map_err(|_| bad())?;
        let server = next()?.parse().map_err(|_| bad())?;
        let seq = next()?.parse().map_err(|_| bad())?;
        Ok(Gtid {
            domain,
            server,
            seq,
        })
    }
}

/// One GTID per domain: where a server's binlog (or a reader of it) stands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GtidPos {
    by_domain: BTreeMap<u32, Gtid>,
}

impl GtidPos {
    /// Records `gtid` as its domain's latest.
    pub fn update(&mut self, gtid: Gtid) {
        self.by_domain.insert(gtid.domain, gtid);
    }

    pub fn get(&self, domain: u32) -> Option<Gtid> {
        self.by_domain.get(&domain).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.by_domain.is_empty()
    }

    /// The GTIDs in domain order.
    pub fn iter(&self) -> impl Iterator<Item = Gtid> + '_ {
        self.by_domain.values().copied()
    }

    /// Whether `gtid` is at or before this position in its domain (already seen).
    pub fn contains(&self, gtid: Gtid) -> bool {
        self.get(gtid.domain).is_some_and(|g| g.seq >= gtid.seq)
    }
}

impl fmt::Display for GtidPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, g) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{g}")?;
        }
        Ok(())
    }
}

impl FromStr for GtidPos {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut pos = GtidPos::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            pos.update(part.parse()?);
        }
        Ok(pos)
    }
}

pub use mysql::{GtidSet, MysqlGtid, Uuid};

mod mysql;

/// The binlog dialect of a server, and of the global binlog's files (the sources').
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    MariaDb,
    MySql,
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dialect::MariaDb => "MariaDB",
            Dialect::MySql => "MySQL",
        })
    }
}

/// One transaction's GTID, in its source's dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnGtid {
    MariaDb(Gtid),
    MySql(MysqlGtid),
}

impl Default for TxnGtid {
    fn default() -> Self {
        TxnGtid::MariaDb(Gtid::default())
    }
}

impl TxnGtid {
    pub fn dialect(&self) -> Dialect {
        match self {
            TxnGtid::MariaDb(_) => Dialect::MariaDb,
            TxnGtid::MySql(_) => Dialect::MySql,
        }
    }

    /// The sequence number (MariaDB) or transaction number (MySQL).
    pub fn seq(&self) -> u64 {
        match self {
            TxnGtid::MariaDb(g) => g.seq,
            TxnGtid::MySql(g) => g.gno,
        }
    }
}

impl From<Gtid> for TxnGtid {
    fn from(g: Gtid) -> Self {
        TxnGtid::MariaDb(g)
    }
}

impl From<MysqlGtid> for TxnGtid {
    fn from(g: MysqlGtid) -> Self {
        TxnGtid::MySql(g)
    }
}

impl fmt::Display for TxnGtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnGtid::MariaDb(g) => g.fmt(f),
            TxnGtid::MySql(g) => g.fmt(f),
        }
    }
}

impl FromStr for TxnGtid {
    type Err = String;
    /// `domain-server-seq` or `uuid:number`.
    fn from_str(s: &str) -> Result<Self, String> {
        if s.contains(':') {
            s.parse().map(TxnGtid::MySql)
        } else {
            s.parse().map(TxnGtid::MariaDb)
        }
    }
}

/// A server's (or a reader's) position in either dialect: MariaDB's last GTID per domain,
/// or MySQL's set of every transaction. The empty position belongs to neither: it takes the
/// dialect of the first GTID recorded in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GtidState {
    MariaDb(GtidPos),
    MySql(GtidSet),
}

impl Default for GtidState {
    fn default() -> Self {
        GtidState::MariaDb(GtidPos::default())
    }
}

impl From<GtidPos> for GtidState {
    fn from(p: GtidPos) -> Self {
        GtidState::MariaDb(p)
    }
}

impl From<GtidSet> for GtidState {
    fn from(s: GtidSet) -> Self {
        GtidState::MySql(s)
    }
}

impl GtidState {
    /// The empty position of `dialect`.
    pub fn empty(dialect: Dialect) -> GtidState {
        match dialect {
            Dialect::MariaDb => GtidState::MariaDb(GtidPos::default()),
            Dialect::MySql => GtidState::MySql(GtidSet::default()),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            GtidState::MariaDb(p) => p.is_empty(),
            GtidState::MySql(s) => s.is_empty(),
        }
    }

    /// `None` for the empty position.
    pub fn dialect(&self) -> Option<Dialect> {
        match self {
            _ if self.is_empty() => None,
            GtidState::MariaDb(_) => Some(Dialect::MariaDb),
            GtidState::MySql(_) => Some(Dialect::MySql),
        }
    }

    /// Records `gtid` as applied: MariaDB, its domain's latest; MySQL, added to the set. A
    /// GTID of the other dialect replaces an empty position's dialect and is otherwise
    /// ignored (mixed fleets are refused before any reaches here).
    pub fn update(&mut self, gtid: &TxnGtid) {
        if self.is_empty() && self.dialect_of_variant() != gtid.dialect() {
            *self = GtidState::empty(gtid.dialect());
        }
        match (self, gtid) {
            (GtidState::MariaDb(p), TxnGtid::MariaDb(g)) => p.update(*g),
            (GtidState::MySql(s), TxnGtid::MySql(g)) => s.add(*g),
            _ => {}
        }
    }

    /// Whether `gtid` is already applied at this position.
    pub fn contains(&self, gtid: &TxnGtid) -> bool {
        match (self, gtid) {
            (GtidState::MariaDb(p), TxnGtid::MariaDb(g)) => p.contains(*g),
            (GtidState::MySql(s), TxnGtid::MySql(g)) => s.contains(*g),
            _ => false,
        }
    }

    /// Takes from `start` what this position lacks: MariaDB, the domains it has none of;
    /// MySQL, every transaction (the union). An empty position becomes `start`.
    pub fn fill_from(&mut self, start: &GtidState) {
        if self.is_empty() {
            *self = start.clone();
            return;
        }
        match (self, start) {
            (GtidState::MariaDb(p), GtidState::MariaDb(start)) => {
                for g in start.iter() {
                    if p.get(g.domain).is_none() {
                        p.update(g);
                    }
                }
            }
            (GtidState::MySql(s), GtidState::MySql(start)) => s.union(start),
            _ => {}
        }
    }

    pub fn as_mariadb(&self) -> Option<&GtidPos> {
        match self {
            GtidState::MariaDb(p) => Some(p),
            GtidState::MySql(_) => None,
        }
    }

    pub fn as_mysql(&self) -> Option<&GtidSet> {
        match self {
            GtidState::MySql(s) => Some(s),
            GtidState::MariaDb(_) => None,
        }
    }

    fn dialect_of_variant(&self) -> Dialect {
        match self {
            GtidState::MariaDb(_) => Dialect::MariaDb,
            GtidState::MySql(_) => Dialect::MySql,
        }
    }
}

impl fmt::Display for GtidState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GtidState::MariaDb(p) => p.fmt(f),
            GtidState::MySql(s) => s.fmt(f),
        }
    }
}

impl FromStr for GtidState {
    type Err = String;
    /// A MariaDB position or a MySQL GTID set (told apart by the `:` of the latter); the
    /// empty text is the empty position.
    fn from_str(s: &str) -> Result<Self, String> {
        if s.contains(':') {
            s.parse().map(GtidState::MySql)
        } else {
            s.parse().map(GtidState::MariaDb)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_take_the_dialect_of_their_first_gtid() {
        let mut s = GtidState::default();
        let g: TxnGtid = "3e11fa47-71ca-11e1-9e33-c80aa9429562:5".parse().unwrap();
        assert!(!s.contains(&g));
        s.update(&g);
        assert!(s.contains(&g));
        assert_eq!(s.dialect(), Some(Dialect::MySql));
        assert_eq!(s.to_string(), "3e11fa47-71ca-11e1-9e33-c80aa9429562:5");
        let back: GtidState = s.to_string().parse().unwrap();
        assert_eq!(back, s);
        let mut m: GtidState = "0-1-5".parse().unwrap();
        m.fill_from(&"0-1-9,1-2-3".parse().unwrap());
        assert_eq!(m.to_string(), "0-1-5,1-2-3");
        let mut e = GtidState::default();
        e.fill_from(&back);
        assert_eq!(e, back);
        assert_eq!("".parse::<GtidState>().unwrap().dialect(), None);
    }

    #[test]
    fn positions_parse_and_print_as_mariadb() {
        let p: GtidPos = " 1-2-9, 0-1-5 ".parse().unwrap();
        assert_eq!(p.to_string(), "0-1-5,1-2-9");
        assert!(p.contains("0-7-5".parse().unwrap()));
        assert!(!p.contains("0-1-6".parse().unwrap()));
        assert!(!p.contains("2-1-1".parse().unwrap()));
        assert_eq!("".parse::<GtidPos>().unwrap(), GtidPos::default());
        assert!("0-1".parse::<GtidPos>().is_err());
        assert!("a-1-2".parse::<Gtid>().is_err());
    }
}
