//! Recovery: the newest file is read to its last complete transaction and cut there; the
//! sources' states and the global position are rebuilt from the file's header and origins,
//! and from the sources checkpoint ([`super::checkpoint`]) when its point is in the file.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, BufWriter, Read as _, Seek as _, SeekFrom};
use std::path::Path;

use super::checkpoint::{self, Checkpoint};
use super::files::{
    create_file, file_name, file_number, read_header, read_index, set_in_use, write_index,
    MAX_EVENT,
};
use super::writer::WRITE_BUFFER;
use super::{io_error, FileInfo, Recovered, StoreError, StoreOptions, TableIds, Writer};
use crate::event::{self, gtid_flags, mysql, types, CHECKSUM_LEN, HEADER_LEN};
use crate::gtid::{Dialect, GtidState, TxnGtid};
use crate::origin::{Origin, SourceState};

pub(super) fn open(opts: StoreOptions) -> Result<(Writer, Recovered), StoreError> {
    crate::private::create_dir(&opts.dir).map_err(|e| io_error(&opts.dir, e))?;
    let (mut names, mut rewrite_index) = read_index(&opts.dir, &opts.base_name)?;
    let checkpoint = checkpoint::read(&opts.dir, &opts.base_name);
    loop {
        let Some(newest) = names.last() else {
            drop_checkpoint(&opts, checkpoint.is_some())?;
            return start_empty(opts, 1, 0);
        };
        let path = opts.dir.join(newest);
        let Some(scan) = scan_file(&path, &opts, checkpoint.as_ref())? else {
            // A file whose creation a crash interrupted: the index never named it, or named
            // it just before the crash. The previous file continues.
            let len = fs::metadata(&path).map_or(0, |m| m.len());
            let number = file_number(&opts.base_name, newest).unwrap_or(1);
            if names.len() == 1 {
                tracing::warn!(file = %path.display(), "only binlog file has no intact header; starting it afresh");
                drop_checkpoint(&opts, checkpoint.is_some())?;
                return start_empty(opts, number, len);
            }
            tracing::warn!(file = %path.display(), "binlog file has no intact header; removed");
            fs::remove_file(&path).map_err(|e| io_error(&path, e))?;
            names.pop();
            rewrite_index = true;
            continue;
        };
        if scan.dialect != opts.dialect {
            return Err(StoreError::Dialect {
                path: path.display().to_string(),
                found: scan.dialect,
                want: opts.dialect,
            });
        }
        if rewrite_index {
            write_index(&opts.dir, &opts.base_name, &names)?;
        }
        return resume(opts, &names, scan, checkpoint.as_ref());
    }
}

/// Removes a checkpoint recovery did not use: its point is not in the files (an OS crash lost
/// their tail, or they were replaced), and the transactions written from now on could reach
/// the same offset and global position with other sources' transactions.
fn drop_checkpoint(opts: &StoreOptions, exists: bool) -> Result<(), StoreError> {
    if !exists {
        return Ok(());
    }
    let path = checkpoint::path(&opts.dir, &opts.base_name);
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(&path, e)),
    }
    fs::File::open(&opts.dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(&opts.dir, e))
}

/// A directory without a usable file: the first file, empty.
fn start_empty(
    opts: StoreOptions,
    number: u32,
    truncated: u64,
) -> Result<(Writer, Recovered), StoreError> {
    let name = file_name(&opts.base_name, number);
    let path = opts.dir.join(&name);
    // The header carries the time it was made: an event with timestamp 0 is an artificial
    // one to mariadb-binlog, which would then skip this file's (empty) GTID list and, in its
    // default GTID strict mode, refuse the next file's list as missing data.
    let created = u32::try_from(crate::stamp::wall_now() / 1_000_000_000).unwrap_or(u32::MAX);
    let (file, size) = create_file(&path, &opts, created, &GtidState::empty(opts.dialect))?;
    write_index(&opts.dir, &opts.base_name, std::slice::from_ref(&name))?;
    let sources = empty_states(&opts);
    let recovered = Recovered {
        sources: sources.clone(),
        gtid: GtidState::empty(opts.dialect),
        truncated,
    };
    let writer = Writer {
        files: vec![FileInfo { name, size }],
        number,
        out: BufWriter::with_capacity(WRITE_BUFFER, file),
        size,
        file_has_txn: false,
        file_txns: 0,
        sources,
        gtid: GtidState::empty(opts.dialect),
        next_seq: 1,
        tables: TableIds::new(opts.clusters.len()),
        event: Vec::new(),
        broken: false,
        states_changed: false,
        opts,
    };
    Ok((writer, recovered))
}

/// Cuts the newest file after its last complete transaction and opens it for appending.
fn resume(
    opts: StoreOptions,
    names: &[String],
    mut scan: Scan,
    checkpoint: Option<&Checkpoint>,
) -> Result<(Writer, Recovered), StoreError> {
    let newest = &names[names.len() - 1];
    let path = opts.dir.join(newest);
    let mut used_checkpoint = scan.use_checked();
    let mut sources = std::mem::take(&mut scan.sources);
    if used_checkpoint {
        tracing::info!(file = %path.display(), "binlog: source positions from the sources checkpoint");
    } else if !scan.have_sources {
        // Not even the first transaction's origin made it: the sources stand where the
        // previous file left them.
        let previous = names.len().checked_sub(2).map(|i| opts.dir.join(&names[i]));
        let mut previous = previous
            .map(|p| scan_file(&p, &opts, checkpoint))
            .transpose()?
            .flatten();
        if let Some(prev) = previous.as_mut() {
            used_checkpoint = prev.use_checked();
        }
        match previous {
            Some(prev) if used_checkpoint || prev.have_sources => sources = prev.sources,
            _ => tracing::warn!(
                file = %path.display(),
                "no source positions recorded before this binlog file; sources start from scratch"
            ),
        }
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| io_error(&path, e))?;
    let truncated = scan.len - scan.cut;
    if truncated > 0 {
        tracing::warn!(file = %path.display(), bytes = truncated, "cutting an incomplete transaction off the global binlog");
        file.set_len(scan.cut).map_err(|e| io_error(&path, e))?;
    }
    set_in_use(&file, &path, true)?;
    file.sync_all().map_err(|e| io_error(&path, e))?;
    if !used_checkpoint {
        drop_checkpoint(&opts, checkpoint.is_some())?;
    }
    file.seek(SeekFrom::Start(scan.cut))
        .map_err(|e| io_error(&path, e))?;

    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let p = opts.dir.join(name);
        let size = fs::metadata(&p).map_err(|e| io_error(&p, e))?.len();
        files.push(FileInfo {
            name: name.clone(),
            size,
        });
    }
    let last = match &scan.gtid {
        GtidState::MariaDb(p) => p.get(opts.domain_id).map(|g| g.seq),
        GtidState::MySql(s) => s.last_gno(&opts.server_uuid),
    };
    let next_seq = last.map_or(1, |seq| seq.saturating_add(1));
    let recovered = Recovered {
        sources: sources.clone(),
        gtid: scan.gtid.clone(),
        truncated,
    };
    let writer = Writer {
        files,
        number: file_number(&opts.base_name, newest).unwrap_or(1),
        out: BufWriter::with_capacity(WRITE_BUFFER, file),
        size: scan.cut,
        file_has_txn: scan.txns > 0,
        file_txns: scan.txns,
        sources,
        gtid: scan.gtid,
        next_seq,
        tables: scan.tables,
        event: Vec::new(),
        broken: false,
        states_changed: false,
        opts,
    };
    Ok((writer, recovered))
}

fn empty_states(opts: &StoreOptions) -> Vec<SourceState> {
    opts.clusters
        .iter()
        .map(|c| SourceState {
            cluster: c.clone(),
            ..SourceState::default()
        })
        .collect()
}

/// What a file holds up to its last complete transaction.
struct Scan {
    /// The dialect its header announces.
    dialect: Dialect,
    /// End of the last complete transaction (the header's end when there is none).
    cut: u64,
    len: u64,
    /// The configured sources' states after the last complete transaction.
    sources: Vec<SourceState>,
    /// The file's first origin recorded the sources' states (else `sources` knows only what
    /// this file's transactions say).
    have_sources: bool,
    gtid: GtidState,
    tables: TableIds,
    txns: u64,
    /// The checkpoint whose point is a transaction boundary of this file, if any.
    checkpoint: Option<Checkpoint>,
    /// From the checkpoint's point on: the sources' states it records (`None`: a source it
    /// does not name), advanced by the origins after it.
    checked: Option<Vec<Option<SourceState>>>,
    /// The file's header ends at the checkpoint's point.
    checked_from_start: bool,
}

impl Scan {
    /// Whether the checkpoint gives the states: its point is in the file and it is more
    /// recent than the file's own record (which is taken at the first transaction, after a
    /// checkpoint at the header's end). If so, `sources` takes them (a source the checkpoint
    /// does not name keeps what the files say).
    fn use_checked(&mut self) -> bool {
        if self.checked_from_start && self.have_sources {
            return false;
        }
        let Some(checked) = self.checked.take() else {
            return false;
        };
        for (slot, state) in self.sources.iter_mut().zip(checked) {
            if let Some(state) = state {
                *slot = state;
            }
        }
        true
    }

    /// At a transaction boundary `at`: when it is the checkpoint's point, the states from
    /// here on start from the checkpoint's.
    fn at_boundary(&mut self, file: &str, at: u64, header_end: u64, opts: &StoreOptions) {
        let Some(c) = &self.checkpoint else {
            return;
        };
        if c.end.file != file || c.end.pos != at || c.gtid.to_string() != self.gtid.to_string() {
            return;
        }
        let checked = opts
            .clusters
            .iter()
            .map(|cluster| c.sources.iter().find(|s| s.cluster == *cluster).cloned())
            .collect();
        self.checked = Some(checked);
        self.checked_from_start = at == header_end;
        self.checkpoint = None;
    }
}

/// The transaction being read.
struct Pending {
    gtid: TxnGtid,
    /// Its group is one statement (MariaDB: flagged so; MySQL: its first query does not
    /// open a group).
    standalone: bool,
    /// The next event is the first after the GTID event (where the origin is).
    first: bool,
    /// MySQL: its first query is seen.
    query_seen: bool,
    /// MySQL: its first query opened a group (`BEGIN`, `XA START`), whose origin is in its
    /// first rows-query event, else in the comment ending one of its other statements.
    opened: bool,
    /// Its first rows-query event was read: in a group, the origin is there when the group
    /// has one (a comment on an earlier statement is then the user's own text).
    origin_taken: bool,
    origin: Option<Origin>,
    /// MySQL, a group without a rows-query event so far: the origin a statement's trailing
    /// comment gives, taken when the group ends without one (else it is the user's text).
    tentative: Option<Origin>,
    /// `(schema NUL table, file table id)` of its table maps.
    tables: Vec<(Vec<u8>, u64)>,
}

impl Pending {
    fn new(gtid: TxnGtid, standalone: bool) -> Pending {
        Pending {
            gtid,
            standalone,
            first: true,
            query_seen: false,
            opened: false,
            origin_taken: false,
            origin: None,
            tentative: None,
            tables: Vec::new(),
        }
    }
}

/// Reads `path` event by event, checking every CRC32; `None` when its header is not intact.
fn scan_file(
    path: &Path,
    opts: &StoreOptions,
    checkpoint: Option<&Checkpoint>,
) -> Result<Option<Scan>, StoreError> {
    let Some(header) = read_header(path)? else {
        return Ok(None);
    };
    let file = File::open(path).map_err(|e| io_error(path, e))?;
    let len = file.metadata().map_err(|e| io_error(path, e))?.len();
    let mut input = BufReader::with_capacity(1 << 20, file);
    input
        .seek(SeekFrom::Start(header.end))
        .map_err(|e| io_error(path, e))?;
    let mut scan = Scan {
        dialect: header.dialect,
        cut: header.end,
        len,
        sources: empty_states(opts),
        have_sources: false,
        gtid: header.gtid_list,
        tables: TableIds::new(opts.clusters.len()),
        txns: 0,
        checkpoint: checkpoint.cloned(),
        checked: None,
        checked_from_start: false,
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    scan.at_boundary(&name, header.end, header.end, opts);
    let mut at = header.end;
    let mut event = Vec::new();
    let mut pending: Option<Pending> = None;
    while read_next(&mut input, &mut event).map_err(|e| io_error(path, e))? {
        at += event.len() as u64;
        let type_code = event[4];
        if type_code == types::GTID || type_code == types::MYSQL_GTID {
            if pending.is_some() {
                break; // a transaction without its end: nothing after it counts
            }
            let parsed = if type_code == types::GTID {
                event::parse_mariadb_gtid(&event).map(|(gtid, flags)| {
                    Pending::new(gtid.into(), flags & gtid_flags::STANDALONE != 0)
                })
            } else {
                mysql::parse_mysql_gtid(&event).map(|e| Pending::new(e.gtid.into(), false))
            };
            let Ok(txn) = parsed else {
                break;
            };
            pending = Some(txn);
            continue;
        }
        let Some(txn) = pending.as_mut() else {
            if type_code == types::ROTATE {
                break;
            }
            continue;
        };
        let first = std::mem::replace(&mut txn.first, false);
        let ends = match type_code {
            types::ANNOTATE_ROWS if first => {
                take_origin(&mut scan, txn, event::annotate_text(&event));
                false
            }
            types::ROWS_QUERY if first || (txn.opened && !txn.origin_taken) => {
                txn.origin_taken = true;
                take_origin(&mut scan, txn, event::annotate_text(&event));
                false
            }
            types::QUERY
                if scan.dialect == Dialect::MySql
                    && txn.opened
                    && !txn.origin_taken
                    && txn.tentative.is_none() =>
            {
                // A group without rows: the origin ends the first of its statements that is
                // not its last event. Kept aside: a rows-query event later in the group holds
                // the origin instead.
                txn.tentative = event::query_text(&event)
                    .ok()
                    .and_then(mysql::trailing_comment)
                    .and_then(Origin::parse);
                event::ends_group(&event, txn.standalone)
            }
            types::QUERY if scan.dialect == Dialect::MySql && !txn.query_seen => {
                txn.query_seen = true;
                if mysql::opens_group(&event) {
                    txn.opened = true;
                    false
                } else {
                    // A one-statement group: the origin ends its statement.
                    txn.standalone = true;
                    let comment = event::query_text(&event)
                        .ok()
                        .and_then(mysql::trailing_comment);
                    if let Some(comment) = comment {
                        take_origin(&mut scan, txn, comment);
                    }
                    true
                }
            }
            types::TABLE_MAP => {
                if let (Ok(id), Ok((schema, table))) =
                    (event::table_id(&event), event::table_map_names(&event))
                {
                    let mut name = Vec::with_capacity(schema.len() + 1 + table.len());
                    name.extend_from_slice(schema);
                    name.push(0);
                    name.extend_from_slice(table);
                    txn.tables.push((name, id));
                }
                false
            }
            _ => event::ends_group(&event, txn.standalone),
        };
        if ends {
            if let Some(mut txn) = pending.take() {
                if !txn.origin_taken && txn.origin.is_none() {
                    let tentative = txn.tentative.take();
                    take_parsed_origin(&mut scan, &mut txn, tentative);
                }
                commit(&mut scan, txn, opts);
            }
            scan.cut = at;
            scan.at_boundary(&name, at, header.end, opts);
        }
    }
    Ok(Some(scan))
}

/// The origin record `text` of the transaction being read; the first of the file sets the
/// sources' states before it (valid even if that transaction is cut).
fn take_origin(scan: &mut Scan, txn: &mut Pending, text: &[u8]) {
    take_parsed_origin(scan, txn, Origin::parse(text));
}

fn take_parsed_origin(scan: &mut Scan, txn: &mut Pending, origin: Option<Origin>) {
    txn.origin = origin;
    if scan.txns == 0 && !scan.have_sources {
        if let Some(states) = txn.origin.as_ref().and_then(|o| o.sources.as_ref()) {
            apply_states(&mut scan.sources, states);
            scan.have_sources = true;
        }
    }
}

fn apply_states(sources: &mut [SourceState], states: &[SourceState]) {
    for state in states {
        if let Some(slot) = sources.iter_mut().find(|s| s.cluster == state.cluster) {
            slot.clone_from(state);
        }
    }
}

fn commit(scan: &mut Scan, txn: Pending, opts: &StoreOptions) {
    scan.gtid.update(&txn.gtid);
    scan.txns += 1;
    let source = txn
        .origin
        .as_ref()
        .and_then(|o| opts.clusters.iter().position(|c| *c == o.cluster));
    if let (Some(origin), Some(i)) = (&txn.origin, source) {
        let state = &mut scan.sources[i];
        state.pos.update(&origin.gtid);
        state.key = origin.key;
        if let Some(Some(state)) = scan.checked.as_mut().and_then(|c| c.get_mut(i)) {
            state.pos.update(&origin.gtid);
            state.key = origin.key;
        }
    }
    for (name, id) in txn.tables {
        scan.tables.restore(source, name, id);
    }
}

/// The next whole, intact event; false at the end or at a short or damaged one.
fn read_next(input: &mut BufReader<File>, event: &mut Vec<u8>) -> std::io::Result<bool> {
    event.clear();
    event.resize(HEADER_LEN, 0);
    if !read_full(input, event)? {
        return Ok(false);
    }
    let size = event::u32_at(event, 9);
    if (size as usize) < HEADER_LEN + CHECKSUM_LEN || size > MAX_EVENT {
        return Ok(false);
    }
    event.resize(size as usize, 0);
    if !read_full(input, &mut event[HEADER_LEN..])? {
        return Ok(false);
    }
    Ok(event::verify_checksum(event).is_ok())
}

fn read_full(input: &mut BufReader<File>, buf: &mut [u8]) -> std::io::Result<bool> {
    match input.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use crate::event::{self, gtid_flags, types};
    use crate::spill::Budget;
    use crate::store::tests::{options, raw_event, table_map, txn, write_rows};
    use crate::store::Writer;

    /// Both groups of an XA transaction end where the server ended them: at the XA_PREPARE
    /// event, and at the `XA COMMIT` query that is a group of its own. Recovery keeps them
    /// and everything after.
    #[test]
    fn recovery_keeps_xa_groups_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("b");
        let budget = Budget::new(1 << 20, tmp.path().join("spill"));
        let (mut w, _) = Writer::open(options(&dir, 1 << 20)).unwrap();
        let prepare = raw_event(
            types::XA_PREPARE,
            &[0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, b'1'],
        );
        let groups = [
            txn(
                &budget,
                0,
                1,
                gtid_flags::PREPARED_XA,
                &[
                    event::query(1, 1, b"app", b"XA START X'31',X'',1"),
                    table_map(100, b"app", b"t"),
                    write_rows(100, &[1]),
                    event::query(1, 1, b"app", b"XA END X'31',X'',1"),
                    prepare,
                ],
            ),
            txn(
                &budget,
                0,
                2,
                gtid_flags::COMPLETED_XA,
                &[event::query(1, 1, b"app", b"XA COMMIT X'31',X'',1")],
            ),
            txn(
                &budget,
                0,
                3,
                gtid_flags::COMPLETED_XA,
                &[event::query(1, 1, b"app", b"xa rollback X'32',X'',1")],
            ),
        ];
        for (i, group) in (0u64..).zip(&groups) {
            w.append(group, 100 + i).unwrap();
        }
        w.flush().unwrap();
        let (end, sources, gtid) = (w.end(), w.sources().to_vec(), w.gtid_pos());
        drop(w);
        let (w, rec) = Writer::open(options(&dir, 1 << 20)).unwrap();
        assert_eq!(rec.truncated, 0, "no group was cut");
        assert_eq!(w.end(), end);
        assert_eq!(rec.sources, sources);
        assert_eq!(rec.gtid, gtid);
    }
}
