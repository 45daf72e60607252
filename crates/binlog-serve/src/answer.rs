//! The result sets of the statements manifold answers for the global binlog, shaped as
//! MariaDB's (column names, types, the `Info` of `SHOW BINLOG EVENTS`).

use std::time::{Duration, SystemTime};

use manifold_binlog::event::{self, types, HEADER_LEN};
use manifold_binlog::gtid::Dialect;
use manifold_binlog::store;
use manifold_mysql_proto::consts::{column_flag, column_type};
use manifold_mysql_proto::packets::{ColumnDefinition, ErrPacket};
use manifold_mysql_proto::{codes, ErrorCode};

use crate::mysql;
use crate::sql::{
    SelectItem, Selected, ShowEvents, Statement, Value, MARIADB_ONLY_VARIABLES,
    MYSQL_ONLY_VARIABLES,
};
use crate::BinlogSession;
use manifold_cdc::state::BinlogShared;

pub type Row = Vec<Option<Vec<u8>>>;
pub type ResultSet = (Vec<ColumnDefinition>, Vec<Row>);

/// An ERR packet of one of the codes in manifold's table (`manifold_mysql_proto::codes`,
/// checked against docs/errors.md): the servers' code and SQLSTATE, manifold's text.
pub fn err(code: ErrorCode, message: impl Into<String>) -> ErrPacket {
    ErrPacket::new(code, message)
}

fn text(name: &str, length: u32) -> ColumnDefinition {
    let mut c = ColumnDefinition::new(name, column_type::VAR_STRING);
    c.column_length = length;
    c.flags = column_flag::NOT_NULL;
    c
}

fn unsigned(name: &str, length: u32, ty: u8) -> ColumnDefinition {
    let mut c = ColumnDefinition::new(name, ty);
    c.column_length = length;
    c.flags = column_flag::NOT_NULL | column_flag::UNSIGNED | column_flag::BINARY;
    c
}

#[allow(clippy::unnecessary_wraps)] // a cell of a row, which may be NULL elsewhere
fn cell(s: impl Into<String>) -> Option<Vec<u8>> {
    Some(s.into().into_bytes())
}

/// `SHOW MASTER STATUS` (MySQL adds `Executed_Gtid_Set`: every transaction written).
pub fn master_status(shared: &BinlogShared) -> ResultSet {
    let end = shared.end();
    let mysql = shared.dialect() == Dialect::MySql;
    let mut columns = vec![
        text("File", 512),
        unsigned("Position", 20, column_type::LONGLONG),
        text("Binlog_Do_DB", 1024),
        text("Binlog_Ignore_DB", 1024),
    ];
    if mysql {
        columns.push(text("Executed_Gtid_Set", 1024));
    }
    let rows = if end.file.is_empty() {
        Vec::new()
    } else {
        let mut row = vec![
            cell(end.file),
            cell(end.pos.to_string()),
            cell(""),
            cell(""),
        ];
        if mysql {
            row.push(cell(end.gtid.to_string()));
        }
        vec![row]
    };
    (columns, rows)
}

/// `SHOW BINARY LOGS` (MySQL adds `Encrypted`: manifold's files are not).
pub fn binary_logs(shared: &BinlogShared) -> ResultSet {
    let mysql = shared.dialect() == Dialect::MySql;
    let mut columns = vec![
        text("Log_name", 1020),
        unsigned("File_size", 20, column_type::LONGLONG),
    ];
    if mysql {
        columns.push(text("Encrypted", 3));
    }
    let rows = shared
        .files()
        .into_iter()
        .map(|f| {
            let mut row = vec![cell(f.name), cell(f.size.to_string())];
            if mysql {
                row.push(cell("No"));
            }
            row
        })
        .collect();
    (columns, rows)
}

/// The answer of a statement that shows only what the binlog service published (`SHOW
/// MASTER STATUS`, `SHOW BINARY LOGS` and their synonyms): the MySQL port and the admin port
/// both answer these through here, alike. `None` for any other statement.
pub fn published(shared: &BinlogShared, statement: &Statement) -> Option<ResultSet> {
    match statement {
        Statement::ShowMasterStatus => Some(master_status(shared)),
        Statement::ShowBinaryLogs => Some(binary_logs(shared)),
        _ => None,
    }
}

/// Whether the binlog's dialect has the owned variable `name` (the other dialect's server
/// knows it not).
pub fn has_variable(shared: &BinlogShared, name: &str) -> bool {
    let other = match shared.dialect() {
        Dialect::MariaDb => MYSQL_ONLY_VARIABLES,
        Dialect::MySql => MARIADB_ONLY_VARIABLES,
    };
    !other.contains(&name)
}

/// The transactions no longer in the files (`@@gtid_purged`): the oldest file's previous
/// GTIDs. Reads a file's first events.
fn gtid_purged(shared: &BinlogShared) -> String {
    let end = shared.end();
    shared.files().first().map_or_else(String::new, |f| {
        let limit = if f.name == end.file {
            end.pos
        } else {
            u64::MAX
        };
        mysql::file_start(&shared.config.dir, &f.name, limit)
            .map(|(set, _)| set.to_string())
            .unwrap_or_default()
    })
}

/// A binlog-owned variable's value: `(SELECT @@x form, SHOW VARIABLES form)`.
fn system_value(shared: &BinlogShared, name: &str) -> (String, String) {
    let on = |b: bool| {
        (
            if b { "1" } else { "0" }.to_owned(),
            if b { "ON" } else { "OFF" }.to_owned(),
        )
    };
    let same = |s: String| (s.clone(), s);
    match name {
        "server_id" => same(shared.config.server_id.to_string()),
        "log_bin" | "gtid_strict_mode" | "binlog_annotate_row_events" => on(true),
        "log_slave_updates" => on(false),
        "binlog_format" => same("ROW".into()),
        "binlog_row_image" => same("FULL".into()),
        "binlog_checksum" => same("CRC32".into()),
        "gtid_binlog_pos" | "gtid_current_pos" | "gtid_executed" => {
            same(shared.end().gtid.to_string())
        }
        "gtid_purged" => same(gtid_purged(shared)),
        "gtid_mode" | "enforce_gtid_consistency" => same("ON".into()),
        "server_uuid" => same(shared.config.uuid().to_string()),
        "gtid_domain_id" => same(shared.config.domain_id.to_string()),
        _ => same(String::new()),
    }
}

/// `SELECT @@x, @y ...` of owned system variables and the session's replication variables;
/// ERR 1193 for a variable the binlog's dialect does not have, as its servers answer.
pub fn select(
    shared: &BinlogShared,
    session: &BinlogSession,
    items: &[SelectItem],
) -> Result<ResultSet, ErrPacket> {
    let mut columns = Vec::with_capacity(items.len());
    let mut row = Vec::with_capacity(items.len());
    for item in items {
        let (mut column, value) = match &item.selected {
            Selected::System(name) if !has_variable(shared, name) => {
                return Err(err(
                    codes::UNKNOWN_SYSTEM_VARIABLE,
                    format!("Unknown system variable '{name}'"),
                ));
            }
            Selected::System(name) => {
                let v = system_value(shared, name).0;
                let numeric = v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty();
                let c = if numeric {
                    unsigned(&item.column, 21, column_type::LONGLONG)
                } else {
                    text(&item.column, 1024)
                };
                (c, Some(v.into_bytes()))
            }
            Selected::User(name) => match session.get(name) {
                Some(Value::Int(i)) => {
                    let mut c = ColumnDefinition::new(&item.column, column_type::LONGLONG);
                    c.column_length = 20;
                    (c, Some(i.to_string().into_bytes()))
                }
                Some(Value::Str(s)) => (text(&item.column, 1024), Some(s.clone().into_bytes())),
                Some(Value::Null) | None => {
                    let mut c = ColumnDefinition::new(&item.column, column_type::LONG_BLOB);
                    c.column_length = u32::MAX;
                    (c, None)
                }
            },
        };
        if value.is_none() {
            column.flags &= !column_flag::NOT_NULL;
        }
        columns.push(column);
        row.push(value);
    }
    Ok((columns, vec![row]))
}

/// `SHOW VARIABLES ...` of owned variables (those of the binlog's dialect).
pub fn show_variables(shared: &BinlogShared, names: &[&str]) -> ResultSet {
    let columns = vec![text("Variable_name", 256), text("Value", 8192)];
    let rows = names
        .iter()
        .filter(|n| has_variable(shared, n))
        .map(|n| vec![cell(*n), cell(system_value(shared, n).1)])
        .collect();
    (columns, rows)
}

/// The server's rows of a `SHOW VARIABLES` that may show owned variables among its own
/// (`Statement::ShowVariablesOfServer`): the value of every owned variable of the binlog's
/// dialect becomes manifold's; the server's other rows stay as they are.
pub fn replace_owned_values(shared: &BinlogShared, rows: &mut [Row]) {
    for row in rows {
        let Some(Some(name)) = row.first() else {
            continue;
        };
        let Some(owned) = crate::sql::OWNED_VARIABLES
            .iter()
            .copied()
            .find(|v| v.as_bytes().eq_ignore_ascii_case(name))
        else {
            continue;
        };
        if has_variable(shared, owned) {
            if let Some(value) = row.get_mut(1) {
                *value = cell(system_value(shared, owned).1);
            }
        }
    }
}

/// `PURGE BINARY LOGS BEFORE 'YYYY-MM-DD[ hh:mm:ss]'` (UTC) as a time.
pub fn parse_datetime(s: &str) -> Option<SystemTime> {
    let s = s.trim();
    let (date, time) = s.split_once([' ', 'T']).unwrap_or((s, "00:00:00"));
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time
        .splitn(3, ':')
        .map(|p| p.split('.').next()?.parse::<i64>().ok());
    let (hh, mm, ss) = (
        t.next()??,
        t.next().flatten().unwrap_or(0),
        t.next().flatten().unwrap_or(0),
    );
    // Years as a DATETIME has them: the arithmetic below cannot overflow.
    if !(0..=9999).contains(&y)
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&day)
        || !(0..=23).contains(&hh)
        || !(0..=59).contains(&mm)
        || !(0..=59).contains(&ss)
    {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    let secs = u64::try_from(secs).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

/// MariaDB's name of an event type in `SHOW BINLOG EVENTS`.
pub fn type_name(t: u8) -> &'static str {
    match t {
        types::QUERY => "Query",
        types::STOP => "Stop",
        types::ROTATE => "Rotate",
        types::INTVAR => "Intvar",
        types::RAND => "RAND",
        types::USER_VAR => "User var",
        types::FORMAT_DESCRIPTION => "Format_desc",
        types::XID => "Xid",
        types::TABLE_MAP => "Table_map",
        types::WRITE_ROWS_V1 => "Write_rows_v1",
        types::UPDATE_ROWS_V1 => "Update_rows_v1",
        types::DELETE_ROWS_V1 => "Delete_rows_v1",
        types::INCIDENT => "Incident",
        types::HEARTBEAT => "Heartbeat",
        types::WRITE_ROWS_V2 => "Write_rows",
        types::UPDATE_ROWS_V2 => "Update_rows",
        types::DELETE_ROWS_V2 => "Delete_rows",
        types::ANNOTATE_ROWS => "Annotate_rows",
        types::BINLOG_CHECKPOINT => "Binlog_checkpoint",
        types::GTID => "Gtid",
        types::GTID_LIST => "Gtid_list",
        types::START_ENCRYPTION => "Start_encryption",
        types::QUERY_COMPRESSED => "Query_compressed",
        types::WRITE_ROWS_COMPRESSED_V1 => "Write_rows_compressed_v1",
        types::UPDATE_ROWS_COMPRESSED_V1 => "Update_rows_compressed_v1",
        types::DELETE_ROWS_COMPRESSED_V1 => "Delete_rows_compressed_v1",
        types::WRITE_ROWS_COMPRESSED => "Write_rows_compressed",
        types::UPDATE_ROWS_COMPRESSED => "Update_rows_compressed",
        types::DELETE_ROWS_COMPRESSED => "Delete_rows_compressed",
        _ => "Unknown",
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The `Info` column of an event (with checksum) as MariaDB prints it for the common types.
pub fn info(e: &[u8]) -> String {
    let Ok(h) = event::Header::parse(e) else {
        return String::new();
    };
    let body_end = e.len().saturating_sub(event::CHECKSUM_LEN);
    let body = e.get(HEADER_LEN..body_end).unwrap_or_default();
    match h.type_code {
        types::FORMAT_DESCRIPTION => {
            let version = body.get(2..52).unwrap_or_default();
            let version = version.split(|&b| b == 0).next().unwrap_or_default();
            let binlog_version = body
                .get(..2)
                .map_or(4, |v| u16::from_le_bytes([v[0], v[1]]));
            format!(
                "Server ver: {}, Binlog ver: {binlog_version}",
                lossy(version)
            )
        }
        types::GTID_LIST => event::parse_mariadb_gtid_list(e)
            .map(|p| format!("[{p}]"))
            .unwrap_or_default(),
        types::BINLOG_CHECKPOINT => lossy(body.get(4..).unwrap_or_default()),
        types::GTID => match event::parse_mariadb_gtid(e) {
            Ok((g, f)) if f & event::gtid_flags::STANDALONE != 0 => format!("GTID {g}"),
            Ok((g, _)) => format!("BEGIN GTID {g}"),
            Err(_) => String::new(),
        },
        types::QUERY => {
            let text = event::query_text(e).map(lossy).unwrap_or_default();
            let schema_len = body.get(8).copied().map_or(0, usize::from);
            let status_len = body
                .get(11..13)
                .map_or(0, |s| usize::from(u16::from_le_bytes([s[0], s[1]])));
            let schema = body
                .get(13 + status_len..13 + status_len + schema_len)
                .unwrap_or_default();
            if schema.is_empty() {
                text
            } else {
                format!("use `{}`; {text}", lossy(schema))
            }
        }
        types::XID => body
            .get(..8)
            .map(|x| {
                let mut v = [0u8; 8];
                v.copy_from_slice(x);
                format!("COMMIT /* xid={} */", u64::from_le_bytes(v))
            })
            .unwrap_or_default(),
        types::TABLE_MAP => match (event::table_id(e), event::table_map_names(e)) {
            (Ok(id), Ok((db, t))) => format!("table_id: {id} ({}.{})", lossy(db), lossy(t)),
            _ => String::new(),
        },
        t if types::is_rows(t) => {
            let id = event::table_id(e).unwrap_or(0);
            let flags = body
                .get(6..8)
                .map_or(0, |f| u16::from_le_bytes([f[0], f[1]]));
            if flags & 1 != 0 {
                format!("table_id: {id} flags: STMT_END_F")
            } else {
                format!("table_id: {id}")
            }
        }
        types::ANNOTATE_ROWS | types::ROWS_QUERY => lossy(event::annotate_text(e)),
        types::ROTATE => {
            let pos = body.get(..8).map_or(0, |p| {
                let mut v = [0u8; 8];
                v.copy_from_slice(p);
                u64::from_le_bytes(v)
            });
            format!("{};pos={pos}", lossy(body.get(8..).unwrap_or_default()))
        }
        _ => String::new(),
    }
}

/// `SHOW BINLOG EVENTS ...`: reads the file (blocking: run it off the worker thread).
pub fn binlog_events(shared: &BinlogShared, q: &ShowEvents) -> Result<ResultSet, ErrPacket> {
    let columns = vec![
        text("Log_name", 1020),
        unsigned("Pos", 20, column_type::LONGLONG),
        text("Event_type", 80),
        unsigned("Server_id", 10, column_type::LONG),
        unsigned("End_log_pos", 20, column_type::LONGLONG),
        text("Info", 4096),
    ];
    let not_found = || {
        err(
            codes::ERROR_WHEN_EXECUTING_COMMAND,
            "Error when executing command SHOW BINLOG EVENTS: Could not find target log",
        )
    };
    let files = shared.files();
    let end = shared.end();
    let file = match &q.file {
        Some(f) => files.iter().find(|i| &i.name == f).ok_or_else(not_found)?,
        None => files.first().ok_or_else(not_found)?,
    };
    let limit = if file.name == end.file {
        end.pos
    } else {
        u64::MAX
    };
    let from = q.from.unwrap_or(4).max(4);
    let read_failed = |e: store::StoreError| {
        err(
            codes::ERROR_WHEN_EXECUTING_COMMAND,
            format!("Error when executing command SHOW BINLOG EVENTS: {e}"),
        )
    };
    let mut reader =
        store::Reader::open(&shared.config.dir, &file.name, from).map_err(read_failed)?;
    let mut rows = Vec::new();
    let mut skipped = 0u64;
    let mut buf = Vec::with_capacity(8192);
    while q.limit.is_none_or(|l| (rows.len() as u64) < l) {
        let pos = reader.pos();
        buf.clear();
        if !reader.next_event(&mut buf, limit).map_err(read_failed)? {
            break;
        }
        if skipped < q.offset {
            skipped += 1;
            continue;
        }
        let h = event::Header::parse(&buf).map_err(|e| {
            err(
                codes::ERROR_WHEN_EXECUTING_COMMAND,
                format!("Error when executing command SHOW BINLOG EVENTS: {e}"),
            )
        })?;
        let (name, info) = match shared.dialect() {
            Dialect::MySql => (
                mysql::type_name(h.type_code).unwrap_or_else(|| type_name(h.type_code)),
                mysql::info(&buf).unwrap_or_else(|| info(&buf)),
            ),
            Dialect::MariaDb => (type_name(h.type_code), info(&buf)),
        };
        rows.push(vec![
            cell(file.name.clone()),
            cell(pos.to_string()),
            cell(name),
            cell(h.server_id.to_string()),
            cell(reader.pos().to_string()),
            cell(info),
        ]);
    }
    Ok((columns, rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifold_binlog::gtid::{Gtid, GtidState};

    #[test]
    fn info_as_mariadb_prints_it() {
        let g = Gtid {
            domain: 0,
            server: 1,
            seq: 5,
        };
        assert_eq!(
            info(&event::mariadb_gtid(0, g, event::gtid_flags::TRANSACTIONAL)),
            "BEGIN GTID 0-1-5"
        );
        assert_eq!(
            info(&event::mariadb_gtid(0, g, event::gtid_flags::STANDALONE)),
            "GTID 0-1-5"
        );
        assert_eq!(info(&event::xid(0, 1, 42)), "COMMIT /* xid=42 */");
        assert_eq!(
            info(&event::mariadb_gtid_list(0, 1, &"0-1-5".parse().unwrap())),
            "[0-1-5]"
        );
        assert_eq!(
            info(&event::format_description(0, 1, false)),
            "Server ver: 10.11.19-MariaDB-manifold, Binlog ver: 4"
        );
        assert_eq!(
            info(&event::rotate(1, b"manifold-bin.000002", 4, false)),
            "manifold-bin.000002;pos=4"
        );
        assert_eq!(info(&event::query(0, 1, b"", b"BEGIN")), "BEGIN");
        assert_eq!(
            info(&event::query(0, 1, b"shop", b"CREATE TABLE t (a INT)")),
            "use `shop`; CREATE TABLE t (a INT)"
        );
        assert_eq!(
            info(&event::annotate(0, 1, b"insert into t values (1)")),
            "insert into t values (1)"
        );
        assert_eq!(info(&[1, 2, 3]), "");
    }

    fn shared(dialect: Dialect) -> std::sync::Arc<BinlogShared> {
        let config = manifold_cdc::config::BinlogConfig {
            server_id: 77,
            ..manifold_cdc::config::BinlogConfig::default()
        };
        let (shared, _requests) = BinlogShared::with_dialect(config, vec!["a".into()], dialect);
        shared.publish_end(manifold_cdc::state::End {
            file: "manifold-bin.000001".into(),
            pos: 900,
            gtid: GtidState::empty(dialect),
        });
        shared
    }

    fn item(name: &'static str) -> SelectItem {
        SelectItem {
            selected: Selected::System(name),
            column: format!("@@GLOBAL.{name}"),
        }
    }

    #[test]
    fn each_dialect_answers_its_own_variables_and_refuses_the_others() {
        let session = BinlogSession::default();
        let mysql = shared(Dialect::MySql);
        let (_, rows) =
            select(&mysql, &session, &[item("server_uuid"), item("gtid_mode")]).unwrap();
        assert_eq!(
            rows[0],
            vec![cell("6d616e69-666f-6c64-8000-00000000004d"), cell("ON")]
        );
        let e = select(&mysql, &session, &[item("gtid_binlog_pos")]).unwrap_err();
        assert_eq!(e.code, 1193);
        assert_eq!(e.message, b"Unknown system variable 'gtid_binlog_pos'");
        let mariadb = shared(Dialect::MariaDb);
        assert_eq!(
            select(&mariadb, &session, &[item("gtid_mode")])
                .unwrap_err()
                .code,
            1193
        );
        assert!(select(&mariadb, &session, &[item("gtid_binlog_pos")]).is_ok());
        let (_, rows) = show_variables(&mariadb, &["server_id", "server_uuid"]);
        assert_eq!(rows.len(), 1);
        // MySQL's SHOW MASTER STATUS and SHOW BINARY LOGS have a column more.
        assert_eq!(master_status(&mysql).0.len(), 5);
        assert_eq!(master_status(&mariadb).0.len(), 4);
        assert_eq!(binary_logs(&mysql).0.len(), 3);
        assert_eq!(binary_logs(&mariadb).0.len(), 2);
    }

    #[test]
    fn the_servers_variables_carry_manifolds_values_for_the_names_it_owns() {
        let row = |n: &str, v: &str| vec![cell(n), cell(v)];
        let mut rows = vec![
            row("gtid_binlog_pos", "0-1-999"),
            row("GTID_DOMAIN_ID", "3"),
            row("gtid_slave_pos", "0-1-5"),
            row("gtid_executed", "x"),
            row("server_id", "1"),
            vec![None, None],
        ];
        replace_owned_values(&shared(Dialect::MariaDb), &mut rows);
        assert_eq!(
            rows,
            vec![
                row("gtid_binlog_pos", ""),
                row("GTID_DOMAIN_ID", "0"),
                // Not manifold's: the server's.
                row("gtid_slave_pos", "0-1-5"),
                // MySQL's name, unknown to a MariaDB-dialect binlog.
                row("gtid_executed", "x"),
                row("server_id", "77"),
                vec![None, None],
            ]
        );
    }

    #[test]
    fn purge_dates() {
        assert_eq!(
            parse_datetime("1970-01-02 00:00:01"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(86_401))
        );
        assert_eq!(
            parse_datetime("2024-03-01"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_709_251_200))
        );
        assert_eq!(parse_datetime("2024-13-01"), None);
        assert_eq!(parse_datetime("yesterday"), None);
        // Years no DATETIME has, whose days in seconds do not fit an i64; negative fields.
        assert_eq!(parse_datetime("9223372036854775807-01-01"), None);
        assert_eq!(parse_datetime("-9223372036854775807-01-01"), None);
        assert_eq!(parse_datetime("99999999999999-01-01"), None);
        assert_eq!(parse_datetime("2024-01-01 -1:00:00"), None);
        assert_eq!(parse_datetime("2024-01-01 10:-5"), None);
        assert!(parse_datetime("9999-12-31 23:59:59").is_some());
    }
}
