//! What the global binlog records of each transaction's origin, as the text of an annotate
//! event written right after the transaction's GTID event:
//!
//! ```text
//! # manifold origin cluster=east gtid=0-1-5 key=1732450000000000000
//! ```
//!
//! The first transaction of every file also records where every source stood before it
//! (`sources=NAME@GTIDPOS@KEY;...`): recovery reads that state from the last file and applies
//! the origins after it, so every source resumes right after the last transaction that reached
//! the global binlog, and its key (the merge order) continues from there.

use std::fmt::Write as _;

use crate::gtid::{GtidState, TxnGtid};

const PREFIX: &str = "# manifold origin ";

/// Where one source stands: the position to resume its dump from, and the key of its last
/// transaction in the global order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceState {
    /// The cluster's name (`default` for `[backend]`).
    pub cluster: String,
    pub pos: GtidState,
    pub key: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub cluster: String,
    /// The transaction's GTID on its source.
    pub gtid: TxnGtid,
    /// Its key in the global order.
    pub key: u64,
    /// Every source's state before this transaction (first transaction of a file only).
    pub sources: Option<Vec<SourceState>>,
}

impl Origin {
    /// The annotate text.
    pub fn format(&self) -> String {
        let mut s = format!(
            "{PREFIX}cluster={} gtid={} key={}",
            self.cluster, self.gtid, self.key
        );
        if let Some(sources) = &self.sources {
            s.push_str(" sources=");
            for (i, st) in sources.iter().enumerate() {
                if i > 0 {
                    s.push(';');
                }
                let _ = write!(s, "{}@{}@{}", st.cluster, st.pos, st.key);
            }
        }
        s
    }

    /// Parses an annotate text; `None` when it is not an origin record.
    pub fn parse(text: &[u8]) -> Option<Origin> {
        let text = std::str::from_utf8(text).ok()?.strip_prefix(PREFIX)?;
        let mut origin = Origin {
            cluster: String::new(),
            gtid: TxnGtid::default(),
            key: 0,
            sources: None,
        };
        let mut seen = 0;
        for field in text.split(' ') {
            let (name, value) = field.split_once('=')?;
            match name {
                "cluster" => {
                    value.clone_into(&mut origin.cluster);
                    seen |= 1;
                }
                "gtid" => {
                    origin.gtid = value.parse().ok()?;
                    seen |= 2;
                }
                "key" => {
                    origin.key = value.parse().ok()?;
                    seen |= 4;
                }
                "sources" => {
                    let mut sources = Vec::new();
                    for entry in value.split(';').filter(|e| !e.is_empty()) {
                        let mut parts = entry.split('@');
                        let cluster = parts.next()?.to_owned();
                        let pos = parts.next()?.parse().ok()?;
                        let key = parts.next()?.parse().ok()?;
                        sources.push(SourceState { cluster, pos, key });
                    }
                    origin.sources = Some(sources);
                }
                _ => {}
            }
        }
        (seen == 7).then_some(origin)
    }
}

/// Whether a cluster name can appear in an origin record (the configuration checks it).
pub fn valid_cluster_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_round_trip() {
        let o = Origin {
            cluster: "east-1".into(),
            gtid: "0-1-5".parse().unwrap(),
            key: 42,
            sources: Some(vec![
                SourceState {
                    cluster: "east-1".into(),
                    pos: "0-1-4,2-3-9".parse().unwrap(),
                    key: 40,
                },
                SourceState {
                    cluster: "west".into(),
                    pos: GtidState::default(),
                    key: 0,
                },
            ]),
        };
        assert_eq!(Origin::parse(o.format().as_bytes()), Some(o.clone()));
        let plain = Origin { sources: None, ..o };
        assert_eq!(
            plain.format(),
            "# manifold origin cluster=east-1 gtid=0-1-5 key=42"
        );
        assert_eq!(Origin::parse(plain.format().as_bytes()), Some(plain));
        assert_eq!(Origin::parse(b"insert into t values (1)"), None);
        assert_eq!(Origin::parse(b"# manifold origin cluster=a"), None);
        assert!(valid_cluster_name("east_1.b"));
        assert!(!valid_cluster_name("a b"));
    }

    #[test]
    fn origins_of_mysql_sources_round_trip_with_multi_uuid_sets() {
        let a = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        let b = "6d616e69-666f-6c64-8000-0000ee6b2801";
        let o = Origin {
            cluster: "east".into(),
            gtid: format!("{a}:8").parse().unwrap(),
            key: 7,
            sources: Some(vec![
                SourceState {
                    cluster: "east".into(),
                    pos: format!("{b}:1-3:5,{a}:1-7").parse().unwrap(),
                    key: 6,
                },
                SourceState {
                    cluster: "west".into(),
                    pos: GtidState::empty(crate::gtid::Dialect::MySql),
                    key: 0,
                },
            ]),
        };
        let text = o.format();
        assert_eq!(
            text,
            format!(
                "# manifold origin cluster=east gtid={a}:8 key=7 sources=east@{a}:1-7,{b}:1-3:5@6;west@@0"
            )
        );
        let back = Origin::parse(text.as_bytes()).unwrap();
        assert_eq!(back.gtid, o.gtid);
        let sources = back.sources.unwrap();
        assert_eq!(sources[0], o.sources.as_ref().unwrap()[0]);
        // The empty set reads back as the empty position, which takes the dialect of the
        // first GTID recorded in it.
        assert!(sources[1].pos.is_empty());
        let mut pos = sources[1].pos.clone();
        pos.update(&o.gtid);
        assert_eq!(pos.to_string(), format!("{a}:8"));
    }
}
