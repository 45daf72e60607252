//! The sources checkpoint: `<base_name>.sources` beside the files, every source's exact state
//! and the point of the global binlog it goes with.
//!
//! The files record each source's state only in a file's first transaction (`sources=`) and
//! the origin of each transaction written after it. Transactions not written — heartbeats —
//! move a source's state too ([`Writer::note_skipped`]): without a record of them a MySQL
//! source's set gets a hole per heartbeat, and a restart asks the source for all of them
//! again. The checkpoint is that record. It is taken after written bytes are flushed, and
//! names the point it goes with by the end position (file, offset) and the global GTID
//! position there; recovery uses it only when that exact point is a transaction boundary of
//! the recovered file (so never past what survived a crash), and applies the origins of the
//! transactions after it. A missing or damaged record only costs that precision: recovery
//! falls back to the files.
//!
//! ```text
//! end manifold-bin.000003 12345
//! gtid 6d616e69-666f-6c64-8000-00000000004d:1-812
//! source east 1732450000000000000 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9031
//! ```
//!
//! [`Writer::note_skipped`]: super::Writer::note_skipped

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{io_error, Position, StoreError};
use crate::gtid::GtidState;
use crate::origin::SourceState;

/// What the record holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Checkpoint {
    /// The end of what was written when it was taken.
    pub end: Position,
    /// The global GTID position there.
    pub gtid: GtidState,
    pub sources: Vec<SourceState>,
}

pub(super) fn path(dir: &Path, base: &str) -> PathBuf {
    dir.join(format!("{base}.sources"))
}

impl Checkpoint {
    fn format(&self) -> String {
        let mut text = format!(
            "end {} {}\ngtid {}\n",
            self.end.file, self.end.pos, self.gtid
        );
        for s in &self.sources {
            let _ = writeln!(text, "source {} {} {}", s.cluster, s.key, s.pos);
        }
        text
    }

    fn parse(text: &str) -> Option<Checkpoint> {
        let mut lines = text.lines();
        let end = lines.next()?.strip_prefix("end ")?;
        let (file, pos) = end.split_once(' ')?;
        let gtid = lines.next()?.strip_prefix("gtid ")?.parse().ok()?;
        let mut sources = Vec::new();
        for line in lines.filter(|l| !l.is_empty()) {
            let mut fields = line.strip_prefix("source ")?.splitn(3, ' ');
            let cluster = fields.next()?.to_owned();
            let key = fields.next()?.parse().ok()?;
            let pos = fields.next()?.parse().ok()?;
            sources.push(SourceState { cluster, pos, key });
        }
        Some(Checkpoint {
            end: super::Position {
                file: file.to_owned(),
                pos: pos.parse().ok()?,
            },
            gtid,
            sources,
        })
    }
}

/// The record, `None` when there is none or it does not read (a warning: recovery falls back
/// to the files, which is always safe).
pub(super) fn read(dir: &Path, base: &str) -> Option<Checkpoint> {
    let path = path(dir, base);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "binlog: the sources checkpoint cannot be read; source positions come from the files");
            return None;
        }
    };
    let checkpoint = Checkpoint::parse(&text);
    if checkpoint.is_none() {
        tracing::warn!(file = %path.display(), "binlog: the sources checkpoint is damaged; source positions come from the files");
    }
    checkpoint
}

/// Replaces the record atomically: a temporary file (mode 0600), synced, renamed over it.
pub(super) fn write(dir: &Path, base: &str, checkpoint: &Checkpoint) -> Result<(), StoreError> {
    let path = path(dir, base);
    let tmp = path.with_extension("sources.tmp");
    crate::private::replace(&path, &tmp, checkpoint.format().as_bytes())
        .map_err(|e| io_error(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_round_trips_and_a_damaged_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path(), "b"), None);
        let checkpoint = Checkpoint {
            end: Position {
                file: "b.000003".into(),
                pos: 12345,
            },
            gtid: "6d616e69-666f-6c64-8000-00000000004d:1-812".parse().unwrap(),
            sources: vec![
                SourceState {
                    cluster: "east".into(),
                    pos: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9031,4f22ab58-82db-22f2-8f44-d91bb5530673:1-3"
                        .parse()
                        .unwrap(),
                    key: 1_732_450_000_000_000_000,
                },
                SourceState {
                    cluster: "west".into(),
                    pos: GtidState::default(),
                    key: 0,
                },
            ],
        };
        write(dir.path(), "b", &checkpoint).unwrap();
        assert_eq!(read(dir.path(), "b"), Some(checkpoint));
        std::fs::write(path(dir.path(), "b"), "end b.000003 12345\ngtid 0-1\n").unwrap();
        assert_eq!(read(dir.path(), "b"), None);
    }
}
