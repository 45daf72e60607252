//! Reading the files back: event by event for dumps, the file list, and where a GTID
//! position continues.

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use super::files::{read_header, read_index, MAX_EVENT};
use super::{damaged, io_error, FileInfo, Position, StoreError};
use crate::event::{self, CHECKSUM_LEN, HEADER_LEN};
use crate::gtid::GtidState;

/// Bytes read from the file at a time.
const READ_CHUNK: usize = 256 * 1024;

/// Reads a file of the global binlog event by event, for dumps and `SHOW BINLOG EVENTS`.
#[derive(Debug)]
pub struct Reader {
    path: PathBuf,
    file: File,
    /// Bytes read ahead: `buf[start..]` is the file from `pos` on.
    buf: Vec<u8>,
    start: usize,
    pos: u64,
    /// Opened at a position given from outside (not the file's first event): the event there
    /// is checked whole before it is believed, since a position inside an event reads as a
    /// header of garbage.
    check_next: bool,
}

impl Reader {
    /// Opens `file` in `dir` at `pos` (4: the first event).
    pub fn open(dir: &Path, file: &str, pos: u64) -> Result<Reader, StoreError> {
        let path = dir.join(file);
        let handle = File::open(&path).map_err(|e| io_error(&path, e))?;
        Ok(Reader {
            path,
            file: handle,
            buf: Vec::with_capacity(READ_CHUNK),
            start: 0,
            pos,
            check_next: pos != 4,
        })
    }

    /// The next whole event into `buf` if one ends at or before `limit` (the writer's end in
    /// this file, as published); false when none does yet.
    ///
    /// After opening past the first event, the first event read must lie whole below `limit`
    /// and the file's end and pass its checksum (`limit` is an event boundary): otherwise the
    /// position is not an event's start and the read fails, rather than waiting forever,
    /// skipping to the next file, or allocating what a garbage size says.
    pub fn next_event(&mut self, buf: &mut Vec<u8>, limit: u64) -> Result<bool, StoreError> {
        buf.clear();
        if self.check_next {
            return self.checked_event(buf, limit);
        }
        if !self.fill(HEADER_LEN, limit)? {
            return Ok(false);
        }
        let size = event::u32_at(&self.buf, self.start + 9);
        if (size as usize) < HEADER_LEN + CHECKSUM_LEN || size > MAX_EVENT {
            return Err(damaged(
                &self.path,
                format!("event at {} has a size of {size}", self.pos),
            ));
        }
        let size = size as usize;
        if !self.fill(size, limit)? {
            return Ok(false);
        }
        buf.extend_from_slice(&self.buf[self.start..self.start + size]);
        self.start += size;
        self.pos += size as u64;
        Ok(true)
    }

    /// [`Reader::next_event`] for the first event after a seek.
    fn checked_event(&mut self, buf: &mut Vec<u8>, limit: u64) -> Result<bool, StoreError> {
        let len = self
            .file
            .metadata()
            .map_err(|e| io_error(&self.path, e))?
            .len();
        let end = limit.min(len);
        if self.pos >= end {
            // At the end (of what is published): nothing to check yet.
            return Ok(false);
        }
        let (path, at) = (self.path.clone(), self.pos);
        let bogus =
            |what: &str| damaged(&path, format!("{at} is not the start of an event: {what}"));
        if !self.fill(HEADER_LEN, end)? {
            return Err(bogus("no whole header"));
        }
        let size = event::u32_at(&self.buf, self.start + 9);
        if (size as usize) < HEADER_LEN + CHECKSUM_LEN || self.pos + u64::from(size) > end {
            return Err(bogus(&format!("a size of {size}")));
        }
        let size = size as usize;
        if !self.fill(size, end)? {
            return Err(bogus("the event is cut short"));
        }
        let event = &self.buf[self.start..self.start + size];
        if let Err(e) = event::verify_checksum(event) {
            return Err(bogus(&e.to_string()));
        }
        self.check_next = false;
        buf.extend_from_slice(event);
        self.start += size;
        self.pos += size as u64;
        Ok(true)
    }

    /// Position of the next event.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Makes `need` bytes from `pos` available in `buf`, reading no further than `limit`;
    /// false when the file holds fewer below `limit`.
    fn fill(&mut self, need: usize, limit: u64) -> Result<bool, StoreError> {
        if self.pos + need as u64 > limit {
            return Ok(false);
        }
        let have = self.buf.len() - self.start;
        if have >= need {
            return Ok(true);
        }
        self.buf.drain(..self.start);
        self.start = 0;
        let read_from = self.pos + have as u64;
        let want = need
            .max(READ_CHUNK)
            .min(usize::try_from(limit - self.pos).unwrap_or(usize::MAX));
        let old = self.buf.len();
        self.buf.resize(want, 0);
        let mut got = old;
        while got < need {
            match self
                .file
                .read_at(&mut self.buf[got..], read_from + (got - old) as u64)
            {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(old);
                    return Err(io_error(&self.path, e));
                }
            }
        }
        self.buf.truncate(got);
        Ok(got >= need)
    }
}

/// The files listed in the index, in order, with their sizes.
pub fn list_files(dir: &Path, base_name: &str) -> Result<Vec<FileInfo>, StoreError> {
    let (names, _) = read_index(dir, base_name)?;
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let path = dir.join(&name);
        match std::fs::metadata(&path) {
            Ok(m) => files.push(FileInfo {
                name,
                size: m.len(),
            }),
            // Purged between the index read and now.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&path, e)),
        }
    }
    Ok(files)
}

/// The file and position where a consumer at global position `pos` (MariaDB
/// `@slave_connect_state`, or the GTID set of MySQL's `COM_BINLOG_DUMP_GTID`) continues: the start of the first file whose GTID list `pos`
/// covers, and the GTID list there, which the dump skips transactions up to.
///
/// Files are tried from the newest back: the answer is the newest file whose GTID list `pos`
/// covers (every GTID in the list is at or before `pos` in its domain; MySQL: `pos` includes
/// the file's previous-GTIDs set). `None` when `pos` is
/// older than the oldest file kept (it was purged).
pub fn locate_gtid(
    dir: &Path,
    base_name: &str,
    pos: &GtidState,
) -> Result<Option<(Position, GtidState)>, StoreError> {
    let (names, _) = read_index(dir, base_name)?;
    for name in names.iter().rev() {
        let path = dir.join(name);
        let header = match read_header(&path) {
            Ok(Some(h)) => h,
            // Being created, or purged since the index was read.
            Ok(None) => continue,
            Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                continue
            }
            Err(e) => return Err(e),
        };
        let covered = match (&header.gtid_list, pos) {
            (GtidState::MariaDb(list), GtidState::MariaDb(pos)) => {
                list.iter().all(|g| pos.contains(g))
            }
            (GtidState::MySql(list), GtidState::MySql(pos)) => pos.includes(list),
            (list, _) => list.is_empty(),
        };
        if covered {
            return Ok(Some((
                Position {
                    file: name.clone(),
                    pos: 4,
                },
                header.gtid_list,
            )));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of a few events; the positions where its events start, its end last.
    fn file(dir: &Path) -> Vec<u64> {
        let mut bytes = event::MAGIC.to_vec();
        let mut starts = Vec::new();
        for mut e in [
            event::format_description(0, 7, false),
            event::mariadb_gtid_list(0, 7, &crate::gtid::GtidPos::default()),
            event::query(0, 7, b"db", b"CREATE TABLE t (a INT)"),
            event::xid(0, 7, 0x1234_5678),
        ] {
            starts.push(bytes.len() as u64);
            let end = u32::try_from(bytes.len() + e.len()).unwrap();
            event::finish(&mut e, None, end);
            bytes.extend_from_slice(&e);
        }
        starts.push(bytes.len() as u64);
        std::fs::write(dir.join("f.000001"), &bytes).unwrap();
        starts
    }

    #[test]
    fn a_reader_opened_at_an_event_start_reads_on() {
        let tmp = tempfile::tempdir().unwrap();
        let starts = file(tmp.path());
        let end = *starts.last().unwrap();
        let mut buf = Vec::new();
        for (i, &at) in starts.iter().enumerate() {
            for limit in [end, u64::MAX] {
                let mut r = Reader::open(tmp.path(), "f.000001", at).unwrap();
                let mut n = 0;
                while r.next_event(&mut buf, limit).unwrap() {
                    n += 1;
                }
                assert_eq!(n, starts.len() - 1 - i, "from {at}");
                assert_eq!(r.pos(), end);
            }
        }
    }

    #[test]
    fn a_reader_opened_inside_an_event_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let starts = file(tmp.path());
        let end = *starts.last().unwrap();
        let mut buf = Vec::new();
        for at in (5..end).filter(|at| !starts.contains(at)) {
            // In the file being written (up to its published end) and in a complete one.
            for limit in [end, u64::MAX] {
                let mut r = Reader::open(tmp.path(), "f.000001", at).unwrap();
                assert!(
                    r.next_event(&mut buf, limit).is_err(),
                    "{at} (limit {limit}) is inside an event"
                );
            }
        }
    }
}
