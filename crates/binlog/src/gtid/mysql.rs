//! MySQL GTIDs (`uuid:number`) and GTID sets (`uuid:1-5:7,uuid2:1-3`), in text and in the
//! binary form servers exchange (`Gtid_set::encode`: the SID block of
//! `COM_BINLOG_DUMP_GTID` and the body of `PREVIOUS_GTIDS`).
//!
//! Tagged GTIDs (MySQL 8.3+, `uuid:tag:number`) are not handled: a set naming one does not
//! parse, and a source logging one is refused by the assembler.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// A server's UUID (`@@server_uuid`), the source id of its GTIDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Uuid(pub [u8; 16]);

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl FromStr for Uuid {
    type Err = String;
    /// 32 hex digits, with or without the dashes.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a UUID");
        let digits: Vec<u8> = s.trim().bytes().filter(|&b| b != b'-').collect();
        if digits.len() != 32 {
            return Err(bad());
        }
        let mut out = [0u8; 16];
        for (i, pair) in digits.chunks(2).enumerate() {
            let text = std::str::from_utf8(pair).map_err(|_| bad())?;
            out[i] = u8::from_str_radix(text, 16).map_err(|_| bad())?;
        }
        Ok(Uuid(out))
    }
}

/// One MySQL transaction: `uuid:gno`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MysqlGtid {
    pub uuid: Uuid,
    pub gno: u64,
}

impl fmt::Display for MysqlGtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.uuid, self.gno)
    }
}

impl FromStr for MysqlGtid {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a MySQL GTID (uuid:number)");
        let (uuid, gno) = s.trim().split_once(':').ok_or_else(bad)?;
        let gno: u64 = gno.parse().map_err(|_| bad())?;
        if gno == 0 {
            return Err(bad());
        }
        Ok(MysqlGtid {
            uuid: uuid.parse()?,
            gno,
        })
    }
}

/// The largest transaction number MySQL gives (`GNO_END - 1`: GNOs are positive `int64`s).
pub const MAX_GNO: u64 = i64::MAX as u64 - 1;

/// A set of MySQL transactions: per source UUID, sorted disjoint intervals `[start, end]`
/// (inclusive, never touching: `1-3` and `4-5` are kept as `1-5`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GtidSet {
    by_uuid: BTreeMap<Uuid, Vec<(u64, u64)>>,
}

impl GtidSet {
    pub fn is_empty(&self) -> bool {
        self.by_uuid.is_empty()
    }

    /// Adds one transaction.
    pub fn add(&mut self, g: MysqlGtid) {
        self.add_interval(g.uuid, g.gno, g.gno);
    }

    /// Adds the transactions `start..=end` of `uuid` (nothing when `start` is 0 or after
    /// `end`; `end` capped at [`MAX_GNO`]).
    pub fn add_interval(&mut self, uuid: Uuid, start: u64, end: u64) {
        let end = end.min(MAX_GNO);
        if start == 0 || start > end {
            return;
        }
        let intervals = self.by_uuid.entry(uuid).or_default();
        // The first interval that ends at or after `start - 1` (it may touch or overlap).
        let at = intervals.partition_point(|&(_, e)| e.saturating_add(1) < start);
        let mut merged = (start, end);
        let mut last = at;
        while let Some(&(s, e)) = intervals.get(last) {
            if s > merged.1.saturating_add(1) {
                break;
            }
            merged = (merged.0.min(s), merged.1.max(e));
            last += 1;
        }
        intervals.splice(at..last, [merged]);
    }

    pub fn contains(&self, g: MysqlGtid) -> bool {
        self.by_uuid.get(&g.uuid).is_some_and(|intervals| {
            let at = intervals.partition_point(|&(_, e)| e < g.gno);
            intervals.get(at).is_some_and(|&(s, _)| s <= g.gno)
        })
    }

    /// Adds every transaction of `other`.
    pub fn union(&mut self, other: &GtidSet) {
        for (uuid, intervals) in &other.by_uuid {
            for &(s, e) in intervals {
                self.add_interval(*uuid, s, e);
            }
        }
    }

    /// Whether every transaction of `other` is in this set.
    pub fn includes(&self, other: &GtidSet) -> bool {
        other.by_uuid.iter().all(|(uuid, intervals)| {
            let mine = self
                .by_uuid
                .get(uuid)
                .map(Vec::as_slice)
                .unwrap_or_default();
            intervals.iter().all(|&(s, e)| {
                let at = mine.partition_point(|&(_, me)| me < s);
                mine.get(at).is_some_and(|&(ms, me)| ms <= s && e <= me)
            })
        })
    }

    /// The highest transaction number of `uuid` in the set.
    pub fn last_gno(&self, uuid: &Uuid) -> Option<u64> {
        self.by_uuid.get(uuid)?.last().map(|&(_, e)| e)
    }

    /// `(uuid, [start, end] inclusive intervals)` in UUID order.
    pub fn iter(&self) -> impl Iterator<Item = (&Uuid, &[(u64, u64)])> + '_ {
        self.by_uuid.iter().map(|(u, i)| (u, i.as_slice()))
    }

    /// The binary form: `n_sids` (8), then per UUID the 16 bytes, `n_intervals` (8) and each
    /// interval as `start` (8) and `end` exclusive (8), little-endian.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.by_uuid.len() as u64).to_le_bytes());
        for (uuid, intervals) in &self.by_uuid {
            out.extend_from_slice(&uuid.0);
            out.extend_from_slice(&(intervals.len() as u64).to_le_bytes());
            for &(s, e) in intervals {
                out.extend_from_slice(&s.to_le_bytes());
                out.extend_from_slice(&(e + 1).to_le_bytes());
            }
        }
    }

    /// Bytes [`GtidSet::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        8 + self
            .by_uuid
            .values()
            .map(|i| 16 + 8 + 16 * i.len())
            .sum::<usize>()
    }

    /// Reads the binary form from the start of `bytes`; the set and the bytes it took.
    pub fn decode(bytes: &[u8]) -> Result<(GtidSet, usize), String> {
        let mut at = 0usize;
        let u64_next = |at: &mut usize| -> Result<u64, String> {
            let b = bytes
                .get(*at..*at + 8)
                .ok_or("GTID set truncated".to_owned())?;
            *at += 8;
            Ok(u64::from_le_bytes(b.try_into().unwrap_or_default()))
        };
        let n_sids = u64_next(&mut at)?;
        let mut set = GtidSet::default();
        for _ in 0..n_sids {
            let uuid = bytes
                .get(at..at + 16)
                .ok_or("GTID set truncated".to_owned())?;
            let uuid = Uuid(uuid.try_into().unwrap_or_default());
            at += 16;
            // UUIDs come in any order (some clients encode from a hash map); one given twice
            // would merge into what is built, so it is refused: every interval is then
            // appended, never inserted, and a hostile order cannot make this quadratic.
            if set.by_uuid.contains_key(&uuid) {
                return Err("GTID set: a UUID given twice".to_owned());
            }
            let n = u64_next(&mut at)?;
            if n > (bytes.len() as u64) / 16 {
                return Err("GTID set: more intervals than bytes".to_owned());
            }
            let mut intervals: Vec<(u64, u64)> = Vec::new();
            for _ in 0..n {
                let start = u64_next(&mut at)?;
                let end = u64_next(&mut at)?;
                if start == 0 || end <= start || end - 1 > MAX_GNO {
                    return Err(format!("GTID set: bad interval {start}-{end}"));
                }
                match intervals.last_mut() {
                    // Touching the previous one (`1-3` then `4-6`): one interval.
                    Some(last) if start <= last.1.saturating_add(1) && start > last.0 => {
                        if start <= last.1 {
                            return Err(format!("GTID set: interval {start}-{end} overlaps"));
                        }
                        last.1 = end - 1;
                    }
                    Some(last) if start <= last.1 => {
                        return Err(format!("GTID set: interval {start}-{end} out of order"));
                    }
                    _ => intervals.push((start, end - 1)),
                }
            }
            if !intervals.is_empty() {
                set.by_uuid.insert(uuid, intervals);
            }
        }
        Ok((set, at))
    }
}

impl fmt::Display for GtidSet {
    /// As MySQL prints `@@gtid_executed` (without its line breaks): lower-case UUIDs in
    /// order, `uuid:1-5:7`, comma separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (uuid, intervals)) in self.by_uuid.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{uuid}")?;
            for &(s, e) in intervals {
                if s == e {
                    write!(f, ":{s}")?;
                } else {
                    write!(f, ":{s}-{e}")?;
                }
            }
        }
        Ok(())
    }
}

impl FromStr for GtidSet {
    type Err = String;
    /// `uuid:1-5:7,uuid2:3` (blanks and line breaks around the parts allowed); empty text is
    /// the empty set.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut set = GtidSet::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bad = || format!("{part:?} is not a MySQL GTID set (uuid:1-5:7)");
            let mut fields = part.split(':');
            let uuid: Uuid = fields.next().ok_or_else(bad)?.trim().parse()?;
            let mut any = false;
            for interval in fields {
                let interval = interval.trim();
                let (start, end) = match interval.split_once('-') {
                    Some((s, e)) => (s.parse(), e.parse()),
                    None => (interval.parse(), interval.parse()),
                };
                let (Ok(start), Ok(end)) = (start, end) else {
                    return Err(bad());
                };
                if start == 0 || end < start || end > MAX_GNO {
                    return Err(bad());
                }
                set.add_interval(uuid, start, end);
                any = true;
            }
            if !any {
                return Err(bad());
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "6d616e69-666f-6c64-8000-0000ee6b2801";

    #[test]
    fn sets_parse_merge_and_print_as_mysql() {
        let s: GtidSet = format!("{B}:3, {A}:1-5:7,\n{A}:6").parse().unwrap();
        assert_eq!(s.to_string(), format!("{A}:1-7,{B}:3"));
        let a: Uuid = A.parse().unwrap();
        assert!(s.contains(MysqlGtid { uuid: a, gno: 7 }));
        assert!(!s.contains(MysqlGtid { uuid: a, gno: 8 }));
        assert_eq!(s.last_gno(&a), Some(7));
        let mut t = GtidSet::default();
        t.add_interval(a, 10, 12);
        t.add(MysqlGtid { uuid: a, gno: 2 });
        assert_eq!(t.to_string(), format!("{A}:2:10-12"));
        t.add_interval(a, 3, 9);
        assert_eq!(t.to_string(), format!("{A}:2-12"));
        assert!(t.includes(&format!("{A}:4-6").parse().unwrap()));
        assert!(!t.includes(&s));
        for bad in [
            A.to_string(),
            format!("{A}:0"),
            format!("{A}:5-3"),
            "x:1".into(),
        ] {
            assert!(bad.parse::<GtidSet>().is_err(), "{bad}");
        }
        assert!("".parse::<GtidSet>().unwrap().is_empty());
    }

    #[test]
    fn binary_form_round_trips() {
        let s: GtidSet = format!("{A}:1-5:7,{B}:3").parse().unwrap();
        let mut out = vec![];
        s.encode(&mut out);
        assert_eq!(out.len(), s.encoded_len());
        assert_eq!(out.len(), 8 + (16 + 8 + 32) + (16 + 8 + 16));
        out.extend_from_slice(b"tail");
        let (back, used) = GtidSet::decode(&out).unwrap();
        assert_eq!(back, s);
        assert_eq!(used, out.len() - 4);
        assert!(GtidSet::decode(&out[..20]).is_err());
        // What a replica sends is sorted: anything else is refused, never sorted here at a
        // quadratic cost.
        let block = |intervals: &[(u64, u64)]| {
            let mut b = 1u64.to_le_bytes().to_vec();
            b.extend_from_slice(&[7; 16]);
            b.extend_from_slice(&(intervals.len() as u64).to_le_bytes());
            for &(s, e) in intervals {
                b.extend_from_slice(&s.to_le_bytes());
                b.extend_from_slice(&e.to_le_bytes());
            }
            b
        };
        assert_eq!(
            GtidSet::decode(&block(&[(1, 4), (4, 6), (9, 10)]))
                .unwrap()
                .0
                .to_string(),
            "07070707-0707-0707-0707-070707070707:1-5:9"
        );
        for bad in [&[(5, 7), (1, 3)][..], &[(1, 5), (3, 8)], &[(1, u64::MAX)]] {
            assert!(GtidSet::decode(&block(bad)).is_err(), "{bad:?}");
        }
        let mut twice = block(&[(1, 2)]);
        twice[..8].copy_from_slice(&2u64.to_le_bytes());
        twice.extend_from_slice(&block(&[(3, 4)])[8..]);
        assert!(GtidSet::decode(&twice).is_err(), "a UUID twice");
        // Two UUIDs, the greater first (as a client encoding from a hash map may send them).
        let mut two = block(&[(1, 2)]);
        two[..8].copy_from_slice(&2u64.to_le_bytes());
        let mut lower = block(&[(3, 4)])[8..].to_vec();
        lower[..16].copy_from_slice(&[1; 16]);
        two.extend_from_slice(&lower);
        let (set, _) = GtidSet::decode(&two).unwrap();
        assert_eq!(
            set.to_string(),
            "01010101-0101-0101-0101-010101010101:3,07070707-0707-0707-0707-070707070707:1"
        );
        assert!(format!("{A}:1-{}", u64::MAX).parse::<GtidSet>().is_err());
        let mut top = GtidSet::default();
        top.add_interval(A.parse().unwrap(), 1, u64::MAX);
        let mut out = vec![];
        top.encode(&mut out);
        assert_eq!(GtidSet::decode(&out).unwrap().0, top);
    }
}
