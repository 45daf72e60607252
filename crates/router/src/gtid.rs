//! MariaDB GTID positions (`domain-server-sequence`, comma separated), as far as routing
//! needs them: whether one position includes another.

/// One domain's last transaction in a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gtid {
    pub domain: u32,
    pub server: u32,
    pub seq: u64,
}

impl Gtid {
    /// `"0-1-42"`; `None` for anything else.
    pub fn parse(text: &[u8]) -> Option<Gtid> {
        let text = std::str::from_utf8(text).ok()?.trim();
        let mut parts = text.splitn(3, '-');
        let domain = parts.next()?.parse().ok()?;
        let server = parts.next()?.parse().ok()?;
        let seq = parts.next()?.parse().ok()?;
        Some(Gtid {
            domain,
            server,
            seq,
        })
    }
}

/// A server's position: the last transaction of each replication domain it has applied.
/// Sequence numbers grow within a domain whichever server wrote them, so a position includes
/// a transaction when its domain's sequence number is at least the transaction's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GtidPos(Vec<Gtid>);

impl GtidPos {
    /// `@@gtid_current_pos` / `@@gtid_binlog_pos` text; empty text is the empty position.
    /// `None` when the text is not a position.
    pub fn parse(text: &[u8]) -> Option<GtidPos> {
        let text = std::str::from_utf8(text).ok()?.trim();
        if text.is_empty() {
            return Some(GtidPos::default());
        }
        let mut v: Vec<Gtid> = Vec::new();
        for part in text.split(',') {
            let g = Gtid::parse(part.as_bytes())?;
            match v.iter_mut().find(|x| x.domain == g.domain) {
                Some(x) if x.seq < g.seq => *x = g,
                Some(_) => {}
                None => v.push(g),
            }
        }
        Some(GtidPos(v))
    }

    /// This position has applied `g`.
    pub fn includes(&self, g: Gtid) -> bool {
        self.0
            .iter()
            .any(|x| x.domain == g.domain && x.seq >= g.seq)
    }

    /// This position has applied everything `other` has.
    pub fn covers(&self, other: &GtidPos) -> bool {
        other.0.iter().all(|g| self.includes(*g))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for GtidPos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, g) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}-{}-{}", g.domain, g.server, g.seq)?;
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

    #[test]
    fn rejects_what_is_not_a_position() {
        for bad in ["x", "0-1", "0-1-x", "0-1-2,", "-1-2-3", "0-1-2-3"] {
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
