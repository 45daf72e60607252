//! The start record: where each source was first read from, in `<base_name>.start` beside
//! the files (one `cluster gtid-position` line per source).
//!
//! A source read for the first time starts at its primary's position of that moment. Until
//! one of its transactions is in a file, nothing else says where that was: after a crash the
//! source would start again at its position *then*, and what it wrote in between would be
//! missing. So the position is recorded (written to a temporary file, synced, renamed) before
//! any of its transactions is taken. It also keeps the domains a source's transactions have
//! not touched yet.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use manifold_binlog::gtid::GtidState;

use crate::config::BinlogConfig;

pub(super) fn path(config: &BinlogConfig) -> PathBuf {
    config.dir.join(format!("{}.start", config.base_name))
}

/// The record, empty when there is none yet. A line that does not read is an error: a
/// damaged record must not silently start a source at its current position.
pub(super) fn read(config: &BinlogConfig) -> std::io::Result<BTreeMap<String, GtidState>> {
    let text = match std::fs::read_to_string(path(config)) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e),
    };
    let mut starts = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (cluster, pos) = line.split_once(' ').unwrap_or((line, ""));
        let pos: GtidState = pos.parse().map_err(|e: String| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("line {line:?}: {e}"),
            )
        })?;
        starts.insert(cluster.to_owned(), pos);
    }
    Ok(starts)
}

pub(super) fn write(
    config: &BinlogConfig,
    starts: &BTreeMap<String, GtidState>,
) -> std::io::Result<()> {
    let path = path(config);
    let tmp = path.with_extension("start.tmp");
    let mut text = String::new();
    for (cluster, pos) in starts {
        let _ = writeln!(text, "{cluster} {pos}");
    }
    manifold_binlog::private::replace(&path, &tmp, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_round_trips_and_a_damaged_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let config = BinlogConfig {
            dir: dir.path().to_path_buf(),
            ..BinlogConfig::default()
        };
        assert!(read(&config).unwrap().is_empty());
        let mut starts = BTreeMap::new();
        starts.insert("east".to_owned(), "0-1-5,1-2-9".parse().unwrap());
        starts.insert("west".to_owned(), GtidState::default());
        // A MySQL set of several servers, as `@@gtid_executed` gives it (line breaks and all).
        let mysql: GtidState = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,\n\
                                6d616e69-666f-6c64-8000-0000ee6b2801:3"
            .parse()
            .unwrap();
        assert_eq!(
            mysql.to_string(),
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,6d616e69-666f-6c64-8000-0000ee6b2801:3"
        );
        starts.insert("north".to_owned(), mysql);
        write(&config, &starts).unwrap();
        assert_eq!(read(&config).unwrap(), starts);
        std::fs::write(path(&config), "east 0-1\n").unwrap();
        assert!(read(&config).is_err());
    }
}
