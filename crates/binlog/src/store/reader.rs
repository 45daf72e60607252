//! Reading the files back: event by event for dumps, the file list, and where a GTID
//! position continues.

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use super::files::{read_header, read_index, MAX_EVENT};
use super::{damaged, io_error, FileInfo, Position, StoreError};
use crate::event::{self, CHECKSUM_LEN, HEADER_LEN};
use crate::gtid::GtidPos;

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
        })
    }

    /// The next whole event into `buf` if one ends at or before `limit` (the writer's end in
    /// this file, as published); false when none does yet.
    pub fn next_event(&mut self, buf: &mut Vec<u8>, limit: u64) -> Result<bool, StoreError> {
        buf.clear();
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
/// `@slave_connect_state`) continues: the start of the first file whose GTID list `pos`
/// covers, and the GTID list there, which the dump skips transactions up to.
///
/// Files are tried from the newest back: the answer is the newest file whose GTID list `pos`
/// covers (every GTID in the list is at or before `pos` in its domain). `None` when `pos` is
/// older than the oldest file kept (it was purged).
pub fn locate_gtid(
    dir: &Path,
    base_name: &str,
    pos: &GtidPos,
) -> Result<Option<(Position, GtidPos)>, StoreError> {
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
        if header.gtid_list.iter().all(|g| pos.contains(g)) {
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
