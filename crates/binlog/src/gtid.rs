//! MariaDB GTIDs (`domain-server-seq`) and positions: the last GTID of each replication domain,
//! as `@@gtid_binlog_pos` and `@slave_connect_state` spell them (`0-1-5,1-2-9`).

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

#[cfg(test)]
mod tests {
    use super::*;

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
