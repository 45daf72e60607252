//! GTID positions of both servers, as far as routing needs them: whether one position
//! includes a transaction or another position.
//!
//! - MariaDB: `domain-server-sequence`, one per replication domain, comma separated
//!   (`@@gtid_current_pos`, `last_gtid`).
//! - MySQL: GTID sets, `source_uuid:1-5:7` (and `uuid:tag:1-3` since 8.3), comma separated
//!   (`@@gtid_executed`, the `session_track_gtids` tracker).

use std::fmt::Write as _;

/// One committed transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gtid {
    /// MariaDB's `domain-server-sequence`.
    MariaDb { domain: u32, server: u32, seq: u64 },
    /// MySQL's `source_uuid:number` (untagged).
    MySql { source: [u8; 16], seq: u64 },
    /// A committed write whose GTID manifold cannot read (a tagged MySQL GTID, a set of
    /// several sources): only the primary is known to have it.
    Unreadable,
}

impl Gtid {
    /// `"0-1-42"`, `"3e11fa47-71ca-11e1-9e33-c80aa9429562:23"`; for a MySQL set of one
    /// source (what `session_track_gtids=OWN_GTID` reports, `uuid:5` or `uuid:5-7` after a
    /// multi-statement text) its last transaction, as replicas commit in order. `None` for
    /// anything else, tagged GTIDs included.
    pub fn parse(text: &[u8]) -> Option<Gtid> {
        let text = std::str::from_utf8(text).ok()?.trim();
        if text.contains(':') {
            let set = GtidPos::parse(text.as_bytes())?;
            let [(source, intervals)] = set.mysql.as_slice() else {
                return None;
            };
            if source.tag.is_some() {
                return None;
            }
            let &(_, seq) = intervals.last()?;
            return Some(Gtid::MySql {
                source: source.uuid,
                seq,
            });
        }
        let mut parts = text.splitn(3, '-');
        let domain = parts.next()?.parse().ok()?;
        let server = parts.next()?.parse().ok()?;
        let seq = parts.next()?.parse().ok()?;
        Some(Gtid::MariaDb {
            domain,
            server,
            seq,
        })
    }
}

impl std::fmt::Display for Gtid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gtid::MariaDb {
                domain,
                server,
                seq,
            } => write!(f, "{domain}-{server}-{seq}"),
            Gtid::MySql { source, seq } => {
                write_uuid(f, source)?;
                write!(f, ":{seq}")
            }
            Gtid::Unreadable => f.write_str("(unreadable GTID)"),
        }
    }
}

/// Where MySQL transactions come from: a server's UUID and, since MySQL 8.3, a tag.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Source {
    uuid: [u8; 16],
    /// Lower-cased, as the server compares tags case-insensitively.
    tag: Option<String>,
}

/// A server's position: what it has applied.
///
/// MariaDB keeps the last transaction of each replication domain: sequence numbers grow
/// within a domain whichever server wrote them, so a position includes a transaction when
/// its domain's sequence number is at least the transaction's. MySQL keeps the set of every
/// transaction of every source, as sorted, disjoint intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GtidPos {
    mariadb: Vec<(u32, u32, u64)>,
    mysql: Vec<(Source, Vec<(u64, u64)>)>,
}

impl GtidPos {
    /// `@@gtid_current_pos`, `@@gtid_binlog_pos` or `@@gtid_executed` text; empty text is
    /// the empty position. `None` when the text is not a position.
    pub fn parse(text: &[u8]) -> Option<GtidPos> {
        let text = std::str::from_utf8(text).ok()?.trim();
        let mut pos = GtidPos::default();
        if text.is_empty() {
            return Some(pos);
        }
        for part in text.split(',') {
            // `@@gtid_executed` breaks its lines after the commas.
            let part = part.trim();
            if part.contains(':') {
                pos.add_mysql(part)?;
                continue;
            }
            let Some(Gtid::MariaDb {
                domain,
                server,
                seq,
            }) = Gtid::parse(part.as_bytes())
            else {
                return None;
            };
            match pos.mariadb.iter_mut().find(|x| x.0 == domain) {
                Some(x) if x.2 < seq => *x = (domain, server, seq),
                Some(_) => {}
                None => pos.mariadb.push((domain, server, seq)),
            }
        }
        for (_, intervals) in &mut pos.mysql {
            normalize(intervals);
        }
        pos.mysql.sort_by(|a, b| a.0.cmp(&b.0));
        Some(pos)
    }

    /// One `uuid:1-5:7:tag:1-3` element of a MySQL set.
    fn add_mysql(&mut self, part: &str) -> Option<()> {
        let mut items = part.split(':');
        let uuid = parse_uuid(items.next()?.trim())?;
        let mut source = Source { uuid, tag: None };
        let mut any = false;
        for item in items {
            let item = item.trim();
            if item.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                if !item.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') || item.len() > 32
                {
                    return None;
                }
                source.tag = Some(item.to_ascii_lowercase());
                continue;
            }
            let (a, b) = if let Some((a, b)) = item.split_once('-') {
                (a.parse().ok()?, b.parse().ok()?)
            } else {
                let n = item.parse().ok()?;
                (n, n)
            };
            if a == 0 || b < a {
                return None;
            }
            any = true;
            match self.mysql.iter_mut().find(|(s, _)| *s == source) {
                Some((_, v)) => v.push((a, b)),
                None => self.mysql.push((source.clone(), vec![(a, b)])),
            }
        }
        any.then_some(())
    }

    /// This position has applied `g`.
    pub fn includes(&self, g: Gtid) -> bool {
        match g {
            Gtid::MariaDb { domain, seq, .. } => {
                self.mariadb.iter().any(|x| x.0 == domain && x.2 >= seq)
            }
            Gtid::MySql { source, seq } => self
                .intervals(&Source {
                    uuid: source,
                    tag: None,
                })
                .iter()
                .any(|&(a, b)| a <= seq && seq <= b),
            Gtid::Unreadable => false,
        }
    }

    /// This position has applied everything `other` has.
    pub fn covers(&self, other: &GtidPos) -> bool {
        other.mariadb.iter().all(|&(domain, server, seq)| {
            self.includes(Gtid::MariaDb {
                domain,
                server,
                seq,
            })
        }) && other.mysql.iter().all(|(source, theirs)| {
            let ours = self.intervals(source);
            theirs
                .iter()
                .all(|&(a, b)| ours.iter().any(|&(x, y)| x <= a && b <= y))
        })
    }

    fn intervals(&self, source: &Source) -> &[(u64, u64)] {
        self.mysql
            .iter()
            .find(|(s, _)| s == source)
            .map_or(&[], |(_, v)| v.as_slice())
    }

    pub fn is_empty(&self) -> bool {
        self.mariadb.is_empty() && self.mysql.is_empty()
    }
}

/// Sorts intervals and merges those that overlap or touch.
fn normalize(intervals: &mut Vec<(u64, u64)>) {
    intervals.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
    for &(a, b) in intervals.iter() {
        match merged.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    *intervals = merged;
}

fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let b = text.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let hex: Vec<u8> = b.iter().copied().filter(|&c| c != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        out[i] = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(out)
}

fn write_uuid(f: &mut impl std::fmt::Write, uuid: &[u8; 16]) -> std::fmt::Result {
    for (i, byte) in uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            f.write_char('-')?;
        }
        write!(f, "{byte:02x}")?;
    }
    Ok(())
}

impl std::fmt::Display for GtidPos {
    /// The server's own spelling, for `MASTER_GTID_WAIT` and `WAIT_FOR_EXECUTED_GTID_SET`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        for &(domain, server, seq) in &self.mariadb {
            if !std::mem::take(&mut first) {
                f.write_char(',')?;
            }
            write!(f, "{domain}-{server}-{seq}")?;
        }
        for (source, intervals) in &self.mysql {
            if !std::mem::take(&mut first) {
                f.write_char(',')?;
            }
            write_uuid(f, &source.uuid)?;
            if let Some(tag) = &source.tag {
                write!(f, ":{tag}")?;
            }
            for &(a, b) in intervals {
                if a == b {
                    write!(f, ":{a}")?;
                } else {
                    write!(f, ":{a}-{b}")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(s: &str) -> GtidPos {
        GtidPos::parse(s.as_bytes()).unwrap()
    }

    #[test]
    fn parses_and_compares_by_domain() {
        let p = pos("0-1-100,1-2-5");
        assert!(p.includes(Gtid::parse(b"0-1-100").unwrap()));
        assert!(p.includes(Gtid::parse(b"0-3-99").unwrap()));
        assert!(!p.includes(Gtid::parse(b"0-1-101").unwrap()));
        assert!(!p.includes(Gtid::parse(b"2-1-1").unwrap()));
        assert!(p.covers(&pos("0-1-7")));
        assert!(p.covers(&pos("")));
        assert!(!p.covers(&pos("0-1-7,1-2-6")));
        assert!(!pos("").covers(&p));
        assert_eq!(p.to_string(), "0-1-100,1-2-5");
    }

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "4d22fb58-82db-22f2-8f44-d91bb0530673";

    #[test]
    fn mysql_sets_parse_merge_and_compare_by_interval() {
        let p = pos(&format!("{A}:1-5:7-9,\n{B}:1-3"));
        let g = |t: &str| Gtid::parse(t.as_bytes()).unwrap();
        assert!(p.includes(g(&format!("{A}:5"))));
        assert!(!p.includes(g(&format!("{A}:6"))), "a gap is not applied");
        assert!(p.includes(g(&format!("{A}:9"))));
        assert!(!p.includes(g(&format!("{B}:4"))));
        assert!(p.covers(&pos(&format!("{A}:2-4:8"))));
        assert!(!p.covers(&pos(&format!("{A}:5-7"))));
        assert!(!p.covers(&pos(&format!("{A}:1-5,{B}:1-4"))));
        assert!(
            pos(&format!("{A}:1-3:4-6")).covers(&pos(&format!("{A}:2-5"))),
            "touching intervals merge"
        );
        assert_eq!(p.to_string(), format!("{A}:1-5:7-9,{B}:1-3"));
        // The uuid's case does not matter; tags are their own sources.
        assert!(pos(&format!("{}:1-2", A.to_uppercase())).covers(&pos(&format!("{A}:2"))));
        let tagged = pos(&format!("{A}:1-5:Blue:1-2"));
        assert!(!tagged.covers(&pos(&format!("{A}:blue:3"))));
        assert!(tagged.covers(&pos(&format!("{A}:blue:2"))));
        assert_eq!(tagged.to_string(), format!("{A}:1-5,{A}:blue:1-2"));
        // What session tracking reports after a multi-statement text: its last GTID.
        assert_eq!(g(&format!("{A}:5-7")), g(&format!("{A}:7")));
        assert_eq!(g(&format!("{A}:7")).to_string(), format!("{A}:7"));
        assert!(Gtid::parse(format!("{A}:blue:7").as_bytes()).is_none());
        assert!(Gtid::parse(format!("{A}:1,{B}:2").as_bytes()).is_none());
    }

    #[test]
    fn rejects_what_is_not_a_position() {
        for bad in [
            "x",
            "0-1",
            "0-1-x",
            "0-1-2,",
            "-1-2-3",
            "0-1-2-3",
            "3e11fa47-71ca-11e1-9e33-c80aa9429562",
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:0",
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:5-3",
            "3e11fa47-71ca-11e1-9e33-c80aa942956:1",
            "3e11fa47x71ca-11e1-9e33-c80aa9429562:1",
            "3e11fa47-71ca-11e1-9e33-c80aa942956g:1",
        ] {
            assert!(GtidPos::parse(bad.as_bytes()).is_none(), "{bad}");
        }
        assert!(Gtid::parse(b"").is_none());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_without_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let _ = GtidPos::parse(&b);
            let _ = Gtid::parse(&b);
        }
    }
}
