//! The process list in manifold's session-id space: `SHOW [FULL] PROCESSLIST` is answered
//! from the session registry, and `information_schema.PROCESSLIST` in a query is replaced by
//! a derived table of the registry's rows, which the server then filters, joins and sorts
//! as the query says. A backend's own list would show backend connections, whose ids mean
//! nothing to a client: `CONNECTION_ID()` and `KILL` speak manifold's ids.
//!
//! As on the server, a user sees the sessions of its own user name, and a user with
//! `process = true` (the `PROCESS` privilege's counterpart) sees every session. Only
//! statements the lexer flags with [`Scan::PROCESSLIST`](manifold_sql_lex::Scan) come here.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

use manifold_fleet::ProcessRow;

use manifold_mysql_proto::codes;
use manifold_mysql_proto::consts::{column_flag, column_type, BINARY_COLLATION, MAX_PAYLOAD};
use manifold_mysql_proto::packets::{ColumnDefinition, ErrPacket};
use manifold_sql_lex::TooLong;

use crate::registry::SessionInfo;
use crate::users::User;
use crate::Shared;

/// `Info` of `SHOW PROCESSLIST` without `FULL`: the server's `PROCESS_LIST_WIDTH`, in
/// characters.
const INFO_WIDTH: usize = 100;

/// Text rows of a result set: a value, or NULL, per column.
type TextRows = Vec<Vec<Option<Vec<u8>>>>;

/// One row of the process list.
#[derive(Debug, Clone, PartialEq)]
struct Process {
    id: u32,
    user: String,
    /// The client's `ip:port`.
    host: String,
    db: Option<String>,
    /// `Query` while a statement runs (`Execute` for a prepared one), `Sleep` while the
    /// session waits for its client.
    command: Cow<'static, str>,
    /// In that state.
    time: Duration,
    state: Cow<'static, str>,
    /// The running statement's text (its first
    /// [`STATEMENT_SHOWN`](crate::registry::STATEMENT_SHOWN) bytes); `None` while idle.
    info: Option<String>,
}

impl Process {
    fn of(s: SessionInfo) -> Process {
        let (command, time, state, info) = match s.statement {
            Some((text, running)) => {
                let command = if s.executes { "Execute" } else { "Query" };
                (command, running, "executing", Some(text))
            }
            None => ("Sleep", s.idle, "", None),
        };
        Process {
            id: s.id,
            user: s.user,
            host: s.client.to_string(),
            db: s.schema,
            command: Cow::Borrowed(command),
            time,
            state: Cow::Borrowed(state),
            info,
        }
    }

    /// A session another instance of the fleet runs, as it reported it.
    fn of_row(r: ProcessRow) -> Process {
        Process {
            id: r.id,
            user: r.user,
            host: r.host,
            db: r.db,
            command: Cow::Owned(r.command),
            time: Duration::from_millis(r.time_ms),
            state: Cow::Owned(r.state),
            info: r.info,
        }
    }

    fn into_row(self) -> ProcessRow {
        ProcessRow {
            id: self.id,
            user: self.user,
            host: self.host,
            db: self.db,
            executes: self.command == "Execute",
            command: self.command.into_owned(),
            time_ms: self.time.as_millis() as u64,
            state: self.state.into_owned(),
            info: self.info,
        }
    }
}

/// This instance's sessions of `user` (`None`: all), for another instance's process list.
pub(crate) fn rows(shared: &Shared, user: Option<&str>) -> Vec<ProcessRow> {
    shared
        .sessions()
        .into_iter()
        .filter(|s| user.is_none_or(|u| s.user == u))
        .map(|s| Process::of(s).into_row())
        .collect()
}

/// The sessions of this instance `viewer` may see, by id.
fn visible(shared: &Shared, viewer: &User) -> Vec<Process> {
    shared
        .sessions()
        .into_iter()
        .filter(|s| viewer.process || s.user == viewer.name)
        .map(Process::of)
        .collect()
}

/// Whether the backends are MariaDB (whose process list has more columns than MySQL's): as
/// the primary's handshake said, else as manifold announces itself.
fn mariadb(shared: &Shared) -> bool {
    let learned = shared.backend_version.load();
    let version = learned
        .as_deref()
        .map_or(shared.config.server_version.as_bytes(), Vec::as_slice);
    version.is_empty() || version.windows(7).any(|w| w == b"MariaDB")
}

/// A string column of `SHOW PROCESSLIST` as the server describes it (`chars` characters of
/// `utf8mb4`).
fn text_column(name: &str, chars: u32, nullable: bool) -> ColumnDefinition {
    let mut c = ColumnDefinition::new(name, column_type::VAR_STRING);
    c.column_length = chars * 4;
    c.decimals = 39;
    if !nullable {
        c.flags = column_flag::NOT_NULL;
    }
    c
}

/// The columns of `SHOW [FULL] PROCESSLIST`, with the server's names, types and lengths.
fn show_columns(full: bool, mariadb: bool) -> Vec<ColumnDefinition> {
    let mut id = ColumnDefinition::new("Id", column_type::LONGLONG);
    id.column_length = 11;
    id.flags = column_flag::NOT_NULL | column_flag::BINARY;
    let mut time = ColumnDefinition::new("Time", column_type::LONG);
    time.column_length = 7;
    time.flags = column_flag::NOT_NULL | column_flag::BINARY;
    let info = if full {
        let mut c = ColumnDefinition::new("Info", column_type::LONG_BLOB);
        c.column_length = u32::MAX;
        c.decimals = 39;
        c
    } else {
        text_column("Info", INFO_WIDTH as u32, true)
    };
    let mut columns = vec![
        id,
        text_column("User", 128, false),
        text_column("Host", 64, false),
        text_column("db", 64, true),
        text_column("Command", 16, false),
        time,
        text_column("State", 30, true),
        info,
    ];
    if mariadb {
        let mut progress = ColumnDefinition::new("Progress", column_type::DOUBLE);
        progress.column_length = 7;
        progress.decimals = 3;
        progress.flags = column_flag::NOT_NULL | column_flag::BINARY;
        progress.charset = u16::from(BINARY_COLLATION);
        columns.push(progress);
    }
    columns
}

/// `SHOW [FULL] PROCESSLIST` for `viewer`: the columns and text rows to send; `fleet`: the
/// sessions the other instances of the fleet reported (for a viewer who may see them).
pub(crate) fn show(
    shared: &Shared,
    viewer: &User,
    full: bool,
    fleet: Vec<ProcessRow>,
) -> (Vec<ColumnDefinition>, TextRows) {
    let mariadb = mariadb(shared);
    let mut all = visible(shared, viewer);
    all.extend(fleet.into_iter().map(Process::of_row));
    all.sort_by_key(|p| p.id);
    let rows = all
        .into_iter()
        .map(|p| show_row(p, full, mariadb))
        .collect();
    (show_columns(full, mariadb), rows)
}

fn show_row(p: Process, full: bool, mariadb: bool) -> Vec<Option<Vec<u8>>> {
    let info = p.info.map(|text| {
        if full {
            text
        } else {
            text.chars().take(INFO_WIDTH).collect()
        }
    });
    let mut row = vec![
        Some(p.id.to_string().into_bytes()),
        Some(p.user.into_bytes()),
        Some(p.host.into_bytes()),
        p.db.map(String::into_bytes),
        Some(p.command.into_owned().into_bytes()),
        Some(p.time.as_secs().to_string().into_bytes()),
        Some(p.state.into_owned().into_bytes()),
        info.map(String::into_bytes),
    ];
    if mariadb {
        row.push(Some(b"0.000".to_vec()));
    }
    row
}

/// The columns of MariaDB's `information_schema.PROCESSLIST` (10.11), in order.
const MARIADB_COLUMNS: &[&str] = &[
    "ID",
    "USER",
    "HOST",
    "DB",
    "COMMAND",
    "TIME",
    "STATE",
    "INFO",
    "TIME_MS",
    "STAGE",
    "MAX_STAGE",
    "PROGRESS",
    "MEMORY_USED",
    "MAX_MEMORY_USED",
    "EXAMINED_ROWS",
    "QUERY_ID",
    "INFO_BINARY",
    "TID",
];

/// MySQL's have the first eight.
const MYSQL_COLUMNS: usize = 8;

/// A string as SQL text that no byte of it can escape from: `_utf8mb4 X'…'` (hex digits
/// only), with an explicit collation so that it mixes with the server's `utf8mb3` columns in
/// a `UNION` (the explicit side wins; no "illegal mix of collations").
fn push_string(out: &mut String, s: Option<&str>) {
    match s {
        None => out.push_str("NULL"),
        Some(s) => {
            out.push_str("_utf8mb4 X'");
            push_hex(out, s.as_bytes());
            out.push_str("' COLLATE utf8mb4_general_ci");
        }
    }
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02X}");
    }
}

/// `(SELECT … FROM information_schema.PROCESSLIST WHERE 0 UNION ALL SELECT <row> …)`: the
/// first part names the columns and gives them the server's types (also when no row
/// follows), the rest are `viewer`'s visible sessions.
fn derived_table(rows: &[Process], mariadb: bool) -> Vec<u8> {
    let columns = if mariadb {
        MARIADB_COLUMNS
    } else {
        &MARIADB_COLUMNS[..MYSQL_COLUMNS]
    };
    let mut sql = String::with_capacity(256 + rows.len() * 256);
    sql.push_str("(SELECT ");
    sql.push_str(&columns.join(", "));
    sql.push_str(" FROM information_schema.PROCESSLIST WHERE 0");
    for p in rows {
        sql.push_str(" UNION ALL SELECT ");
        let _ = write!(sql, "{}, ", p.id);
        push_string(&mut sql, Some(&p.user));
        sql.push_str(", ");
        push_string(&mut sql, Some(&p.host));
        sql.push_str(", ");
        push_string(&mut sql, p.db.as_deref());
        sql.push_str(", ");
        push_string(&mut sql, Some(&p.command));
        let _ = write!(sql, ", {}, ", p.time.as_secs());
        push_string(&mut sql, Some(&p.state));
        sql.push_str(", ");
        push_string(&mut sql, p.info.as_deref());
        if mariadb {
            let ms = p.time.as_micros();
            let _ = write!(
                sql,
                ", {}.{:03}, 0, 0, 0.000, 0, 0, 0, 0, ",
                ms / 1000,
                ms % 1000
            );
            match &p.info {
                Some(text) => {
                    sql.push_str("X'");
                    push_hex(&mut sql, text.as_bytes());
                    sql.push('\'');
                }
                None => sql.push_str("NULL"),
            }
            sql.push_str(", 0");
        }
    }
    sql.push(')');
    sql.into_bytes()
}

/// Bytes of a packet's header, which `out` of [`rewrite`] starts with.
const HEADER: usize = 4;

/// Appends `sql` to `out` (a packet so far: its header, then the command byte) with each
/// `information_schema.PROCESSLIST` it reads (a bare `PROCESSLIST` too when `schema` is
/// `information_schema`) replaced by the sessions `viewer` may see. False, and `out` holds
/// `sql` unchanged, when it reads none.
///
/// The derived table grows with every visible session; a payload past `max_packet` (the
/// backend would refuse it) or past one packet (the statement would be split over several
/// frames) is not sent: the error to answer instead.
pub(crate) fn rewrite(
    shared: &Shared,
    viewer: &User,
    schema: Option<&[u8]>,
    sql: &[u8],
    max_packet: usize,
    fleet: Vec<ProcessRow>,
    out: &mut Vec<u8>,
) -> Result<bool, ErrPacket> {
    let in_information_schema =
        schema.is_some_and(|s| s.eq_ignore_ascii_case(b"information_schema"));
    // The sessions are read (a lock per registry shard) only for a statement that reads the
    // table, not for every one that has the word.
    let derived = || {
        let mut all = visible(shared, viewer);
        all.extend(fleet.into_iter().map(Process::of_row));
        derived_table(&all, mariadb(shared))
    };
    replace(sql, in_information_schema, derived, max_packet, out)
}

/// Whether `sql` reads `information_schema.PROCESSLIST` (a bare `PROCESSLIST` too when
/// `schema` is `information_schema`): only then is the fleet asked for its sessions.
pub(crate) fn reads_table(schema: Option<&[u8]>, sql: &[u8]) -> bool {
    let in_information_schema =
        schema.is_some_and(|s| s.eq_ignore_ascii_case(b"information_schema"));
    let mut scratch = Vec::new();
    manifold_sql_lex::replace_processlist_tables(
        sql,
        in_information_schema,
        Vec::new,
        usize::MAX,
        &mut scratch,
    )
    .unwrap_or(true)
}

/// [`rewrite`] with the derived table from `derived`.
fn replace(
    sql: &[u8],
    in_information_schema: bool,
    derived: impl FnOnce() -> Vec<u8>,
    max_packet: usize,
    out: &mut Vec<u8>,
) -> Result<bool, ErrPacket> {
    let payload = max_packet.min(MAX_PAYLOAD - 1);
    manifold_sql_lex::replace_processlist_tables(
        sql,
        in_information_schema,
        derived,
        HEADER + payload,
        out,
    )
    .map_err(|TooLong| {
        ErrPacket::new(
            codes::PROCESSLIST_TOO_LARGE,
            format!(
                "information_schema.PROCESSLIST with the visible sessions in its place makes a statement of more than {payload} bytes (max_allowed_packet, or one packet); SHOW FULL PROCESSLIST lists them all"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(id: u32, info: Option<&str>) -> Process {
        Process {
            id,
            user: "app".into(),
            host: "127.0.0.1:5000".into(),
            db: Some("shop".into()),
            command: Cow::Borrowed(if info.is_some() { "Query" } else { "Sleep" }),
            time: Duration::from_millis(2500),
            state: Cow::Borrowed(if info.is_some() { "executing" } else { "" }),
            info: info.map(str::to_owned),
        }
    }

    #[test]
    fn show_has_the_servers_columns() {
        let names = |full, mariadb| -> Vec<String> {
            show_columns(full, mariadb)
                .into_iter()
                .map(|c| String::from_utf8(c.name).unwrap())
                .collect()
        };
        assert_eq!(
            names(false, true),
            ["Id", "User", "Host", "db", "Command", "Time", "State", "Info", "Progress"]
        );
        assert_eq!(names(true, false).len(), 8);
        assert_eq!(
            show_columns(true, true)[7].column_type,
            column_type::LONG_BLOB
        );
    }

    #[test]
    fn info_is_cut_to_a_hundred_characters_without_full() {
        let long = "é".repeat(150);
        let row = show_row(process(7, Some(&long)), false, true);
        let info = String::from_utf8(row[7].clone().unwrap()).unwrap();
        assert_eq!(info.chars().count(), 100);
        let row = show_row(process(7, Some(&long)), true, true);
        assert_eq!(row[7].as_deref(), Some(long.as_bytes()));
        assert_eq!(row[5].as_deref(), Some(&b"2"[..]));
        assert_eq!(row[8].as_deref(), Some(&b"0.000"[..]));
        let idle = show_row(process(8, None), false, false);
        assert_eq!(idle.len(), 8);
        assert_eq!(idle[4].as_deref(), Some(&b"Sleep"[..]));
        assert_eq!(idle[7], None);
    }

    #[test]
    fn the_derived_table_holds_no_text_of_its_rows() {
        let nasty = "x' OR 1=1 -- \\' \0 \u{1F600} `PROCESSLIST` */";
        let sql = String::from_utf8(derived_table(&[process(9, Some(nasty))], true)).unwrap();
        assert!(!sql.contains("OR 1=1"), "{sql}");
        assert!(!sql.contains('\0'));
        assert!(sql.starts_with("(SELECT ID, USER, HOST, DB, COMMAND, TIME, STATE, INFO, TIME_MS,"));
        assert!(sql.contains(" FROM information_schema.PROCESSLIST WHERE 0 UNION ALL SELECT 9, _utf8mb4 X'617070' COLLATE utf8mb4_general_ci, "));
        assert!(sql.contains(", 2, _utf8mb4 X'657865637574696E67' COLLATE utf8mb4_general_ci, "));
        assert!(sql.contains(", 2500.000, 0, 0, 0.000, 0, 0, 0, 0, X'"));
        assert!(sql.ends_with(", 0)"));
        // Every quote opens or closes a hex literal.
        let mut hex = sql.split('\'').skip(1).step_by(2);
        assert!(hex.all(|h| h.bytes().all(|b| b.is_ascii_hexdigit())));
        // No sessions: the typed empty part alone.
        let empty = String::from_utf8(derived_table(&[], false)).unwrap();
        assert_eq!(
            empty,
            "(SELECT ID, USER, HOST, DB, COMMAND, TIME, STATE, INFO FROM information_schema.PROCESSLIST WHERE 0)"
        );
        let mysql = String::from_utf8(derived_table(&[process(3, None)], false)).unwrap();
        assert!(
            mysql.ends_with(", 2, _utf8mb4 X'' COLLATE utf8mb4_general_ci, NULL)"),
            "{mysql}"
        );
    }

    #[test]
    fn a_process_list_too_large_for_the_packet_is_an_error() {
        let info = "SELECT ".repeat(40);
        let many: Vec<Process> = (1..=2000).map(|id| process(id, Some(&info))).collect();
        let sql = b"SELECT COUNT(*) FROM information_schema.PROCESSLIST";
        let run = |max_packet| {
            let mut out = vec![0; HEADER + 1];
            replace(
                sql,
                false,
                || derived_table(&many, true),
                max_packet,
                &mut out,
            )
            .map(|replaced| (replaced, out.len()))
        };
        // Within max_allowed_packet: the whole list goes.
        let (replaced, len) = run(64 << 20).unwrap();
        assert!(replaced);
        assert!(len > 1 << 20, "{len}");
        // Past it, or past one packet however large max_allowed_packet is: an error to answer.
        let e = run(1 << 20).unwrap_err();
        assert_eq!(e.code, codes::PROCESSLIST_TOO_LARGE.code);
        assert!(String::from_utf8_lossy(&e.message).contains("1048576 bytes"));
        let few = [process(1, Some(&info))];
        let mut out = vec![0; HEADER + 1];
        assert_eq!(
            replace(sql, false, || derived_table(&few, true), 1 << 20, &mut out),
            Ok(true)
        );
        let huge = "x".repeat(300);
        let most: Vec<Process> = (1..=20_000).map(|id| process(id, Some(&huge))).collect();
        let mut out = vec![0; HEADER + 1];
        let e = replace(
            sql,
            false,
            || derived_table(&most, true),
            usize::MAX,
            &mut out,
        )
        .unwrap_err();
        assert!(String::from_utf8_lossy(&e.message).contains(&format!("{} bytes", MAX_PAYLOAD - 1)));
        // Text with no reference to the table is never refused.
        let mut out = vec![0; HEADER + 1];
        assert_eq!(
            replace(
                b"SELECT * FROM sys.processlist",
                false,
                || derived_table(&most, true),
                10,
                &mut out
            ),
            Ok(false)
        );
    }
}
