//! File names, the index file, and the header every file starts with (magic, format
//! description, GTID list).

use std::fs::{self, File};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use super::{damaged, io_error, StoreError};
use crate::event::{self, flags, mysql, types, Header, CHECKSUM_LEN, HEADER_LEN, MAGIC};
use crate::gtid::{Dialect, GtidState};

/// `{base}.{number:06}`, as MariaDB names its files.
pub(super) fn file_name(base: &str, number: u32) -> String {
    format!("{base}.{number:06}")
}

/// The number of a file named `{base}.NNNNNN` (six or more digits).
pub(super) fn file_number(base: &str, name: &str) -> Option<u32> {
    let digits = name.strip_prefix(base)?.strip_prefix('.')?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

pub(super) fn index_path(dir: &Path, base: &str) -> PathBuf {
    dir.join(format!("{base}.index"))
}

/// The files of the global binlog, oldest first, that exist on disk: from the index, or — when
/// the index is missing or damaged — from the directory. The flag says the index must be
/// rewritten.
pub(super) fn read_index(dir: &Path, base: &str) -> Result<(Vec<String>, bool), StoreError> {
    let path = index_path(dir, base);
    match fs::read_to_string(&path) {
        Ok(text) => {
            if let Some(names) = parse_index(dir, base, &text) {
                if !names.is_empty() {
                    let complete =
                        names.len() == text.lines().filter(|l| !l.trim().is_empty()).count();
                    return Ok((names, !complete));
                }
            }
            tracing::warn!(index = %path.display(), "binlog index damaged; listing the directory");
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            tracing::warn!(index = %path.display(), "binlog index not text; listing the directory");
        }
        Err(e) => return Err(io_error(&path, e)),
    }
    let names = list_dir(dir, base)?;
    let rewrite = !names.is_empty();
    Ok((names, rewrite))
}

/// The index's names that exist, or `None` when a line is not one of ours or the order is off.
fn parse_index(dir: &Path, base: &str, text: &str) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let mut last = 0;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        // MariaDB's index holds paths (`./name`); ours holds names.
        let name = Path::new(line).file_name()?.to_str()?;
        let number = file_number(base, name)?;
        if number <= last {
            return None;
        }
        last = number;
        if dir.join(name).is_file() {
            names.push(name.to_owned());
        }
    }
    Some(names)
}

fn list_dir(dir: &Path, base: &str) -> Result<Vec<String>, StoreError> {
    let mut numbered = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io_error(dir, e))? {
        let entry = entry.map_err(|e| io_error(dir, e))?;
        if let Some(name) = entry.file_name().to_str() {
            if let Some(number) = file_number(base, name) {
                numbered.push((number, name.to_owned()));
            }
        }
    }
    numbered.sort();
    Ok(numbered.into_iter().map(|(_, name)| name).collect())
}

/// Replaces the index atomically (temporary file, fsync, rename), mode 0600.
pub(super) fn write_index(dir: &Path, base: &str, names: &[String]) -> Result<(), StoreError> {
    let path = index_path(dir, base);
    let tmp = dir.join(format!("{base}.index.tmp"));
    let mut text = String::with_capacity(names.len() * (base.len() + 8));
    for name in names {
        text.push_str(name);
        text.push('\n');
    }
    crate::private::replace(&path, &tmp, text.as_bytes()).map_err(|e| io_error(&path, e))
}

/// What a file's header says.
#[derive(Debug, Clone)]
pub(super) struct FileHeader {
    /// Where the first transaction starts.
    pub end: u64,
    /// The dialect its format description announces.
    pub dialect: Dialect,
    /// The GTID list (MariaDB) or previous GTIDs (MySQL): the global position before the
    /// file.
    pub gtid_list: GtidState,
}

/// Reads the magic, format description and GTID list of `path`; `None` when they are not all
/// there and intact (a file whose creation a crash interrupted).
pub(super) fn read_header(path: &Path) -> Result<Option<FileHeader>, StoreError> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return Err(io_error(path, e)),
    };
    let mut magic = [0u8; 4];
    if file.read_exact(&mut magic).is_err() || magic != MAGIC {
        return Ok(None);
    }
    let mut event = Vec::new();
    if !read_event_at(&file, 4, &mut event).map_err(|e| io_error(path, e))?
        || event[4] != types::FORMAT_DESCRIPTION
    {
        return Ok(None);
    }
    let (dialect, list_type) = if mysql::is_mysql_format_description(&event) {
        (Dialect::MySql, types::PREVIOUS_GTIDS)
    } else {
        (Dialect::MariaDb, types::GTID_LIST)
    };
    let at = 4 + event.len() as u64;
    if !read_event_at(&file, at, &mut event).map_err(|e| io_error(path, e))?
        || event[4] != list_type
    {
        return Ok(None);
    }
    let gtid_list = match dialect {
        Dialect::MariaDb => event::parse_mariadb_gtid_list(&event).map(GtidState::from),
        Dialect::MySql => mysql::parse_previous_gtids(&event).map(GtidState::from),
    };
    Ok(gtid_list.ok().map(|gtid_list| FileHeader {
        end: at + event.len() as u64,
        dialect,
        gtid_list,
    }))
}

/// The dialect of the global binlog in `dir` (its newest file's format description), or
/// `None` when it holds no file yet.
pub fn file_dialect(dir: &Path, base_name: &str) -> Result<Option<Dialect>, StoreError> {
    let (names, _) = read_index(dir, base_name)?;
    for name in names.iter().rev() {
        if let Some(header) = read_header(&dir.join(name))? {
            return Ok(Some(header.dialect));
        }
    }
    Ok(None)
}

/// Largest event read back from a file of ours (a sanity bound on a damaged size field).
pub(super) const MAX_EVENT: u32 = 1 << 30;

/// Reads the whole event at `at` into `event` and checks its CRC32; false when there is no
/// whole intact event there.
pub(super) fn read_event_at(file: &File, at: u64, event: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut header = [0u8; HEADER_LEN];
    if !read_full_at(file, &mut header, at)? {
        return Ok(false);
    }
    let size = event::u32_at(&header, 9);
    if (size as usize) < HEADER_LEN + CHECKSUM_LEN || size > MAX_EVENT {
        return Ok(false);
    }
    event.clear();
    event.resize(size as usize, 0);
    if !read_full_at(file, event, at)? {
        return Ok(false);
    }
    Ok(verify_file_checksum(event))
}

/// Checks an event's CRC32 as it lies in a file (a format description's in-use flag is not
/// covered: see [`event::verify_checksum`]).
pub(super) fn verify_file_checksum(event: &mut [u8]) -> bool {
    event::verify_checksum(event).is_ok()
}

/// `read_exact_at` that says false at the end of the file instead of failing.
fn read_full_at(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<bool> {
    match file.read_exact_at(buf, at) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// Creates (or empties) `path`, mode 0600, and writes its header; returns the file, positioned at its end,
/// and the header's length. Synced: the index may name it next.
pub(super) fn create_file(
    path: &Path,
    opts: &super::StoreOptions,
    timestamp: u32,
    gtid_list: &GtidState,
) -> Result<(File, u64), StoreError> {
    let server_id = opts.server_id;
    let mut bytes = MAGIC.to_vec();
    let header = match (opts.dialect, gtid_list) {
        (Dialect::MariaDb, GtidState::MariaDb(list)) => [
            event::format_description(timestamp, server_id, false),
            event::mariadb_gtid_list(timestamp, server_id, list),
        ],
        (Dialect::MariaDb, GtidState::MySql(_)) => [
            event::format_description(timestamp, server_id, false),
            event::mariadb_gtid_list(timestamp, server_id, &crate::gtid::GtidPos::default()),
        ],
        (Dialect::MySql, GtidState::MySql(set)) => [
            mysql::mysql_format_description(timestamp, server_id, false),
            mysql::previous_gtids(timestamp, server_id, set),
        ],
        (Dialect::MySql, GtidState::MariaDb(_)) => [
            mysql::mysql_format_description(timestamp, server_id, false),
            mysql::previous_gtids(timestamp, server_id, &crate::gtid::GtidSet::default()),
        ],
    };
    for mut event in header {
        let end = bytes.len() + event.len();
        event::finish(&mut event, Some(server_id), end as u32);
        bytes.extend_from_slice(&event);
    }
    // Open: in use, the checksum staying the one computed without the flag (as MariaDB).
    let fde_flags = 4 + 17;
    bytes[fde_flags] |= flags::BINLOG_IN_USE as u8;
    let mut file = crate::private::options()
        .write(true)
        .read(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| io_error(path, e))?;
    // A file a crash left behind (started afresh) keeps its mode when reopened.
    crate::private::set_private(&file)
        .and_then(|()| file.write_all(&bytes))
        .and_then(|()| file.sync_all())
        .map_err(|e| io_error(path, e))?;
    Ok((file, bytes.len() as u64))
}

/// Sets or clears `BINLOG_IN_USE` in the format description of `file` (MariaDB's "this file
/// is open" mark); the checksum is computed without it and stays.
pub(super) fn set_in_use(file: &File, path: &Path, in_use: bool) -> Result<(), StoreError> {
    let mut fde = Vec::new();
    if !read_event_at(file, 4, &mut fde).map_err(|e| io_error(path, e))? {
        return Err(damaged(path, "no intact format description at 4"));
    }
    let header = Header::parse(&fde).map_err(|e| damaged(path, e.to_string()))?;
    let flags = if in_use {
        header.flags | flags::BINLOG_IN_USE
    } else {
        header.flags & !flags::BINLOG_IN_USE
    };
    if flags == header.flags {
        return Ok(());
    }
    file.write_all_at(&flags.to_le_bytes(), 4 + 17)
        .map_err(|e| io_error(path, e))
}
