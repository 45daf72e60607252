//! MySQL primaries as sources: the settings their binlog needs, and the replica handshake a
//! MySQL 8.4/9.x replica performs before its `COM_BINLOG_DUMP_GTID`.
//!
//! The dump thread (`rpl_binlog_sender.cc`) reads the replica's user variables: the checksum
//! it can verify (`@source_binlog_checksum`, formerly `@master_binlog_checksum`: without it a
//! server writing CRC32 refuses the dump), the heartbeat period in nanoseconds
//! (`@source_heartbeat_period` / `@master_heartbeat_period`) and the replica's UUID
//! (`@replica_uuid` / `@slave_uuid`: a new dump with the same UUID ends the old one, so a
//! reconnection never leaves a zombie dump behind). Both spellings are set, as MySQL's own
//! replica does, so that servers of either naming read them.

use std::time::Duration;

use manifold_backend::BackendConn;
use manifold_binlog::gtid::{GtidSet, Uuid};

/// `COM_BINLOG_DUMP_GTID`.
const COM_BINLOG_DUMP_GTID: u8 = 0x1e;
/// Dump flag: the position is given as a GTID set (libmysqlclient sets it whenever it sends
/// one; the server reads the set either way).
const BINLOG_THROUGH_GTID: u16 = 0x04;

/// The binlog settings of a MySQL source, as read at every connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MysqlSourceVars {
    pub binlog_format: String,
    pub binlog_row_image: String,
    pub log_bin: String,
    pub binlog_checksum: String,
    pub rows_query_log_events: String,
    pub gtid_mode: String,
    pub version: String,
    /// `@@gtid_executed` as the server prints it (line breaks after its commas).
    pub gtid_executed: String,
}

const QUERY: &[u8] = b"SELECT @@global.binlog_format, @@global.binlog_row_image, @@log_bin, \
@@global.binlog_checksum, @@global.binlog_rows_query_log_events, @@global.gtid_mode, @@version, \
@@global.gtid_executed";

impl MysqlSourceVars {
    /// Reads them on a MySQL connection.
    pub async fn read(conn: &mut BackendConn) -> Result<MysqlSourceVars, String> {
        let rows = match conn.query_rows(QUERY).await {
            Ok(Ok(rows)) => rows,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(e) => return Err(e.to_string()),
        };
        let Some(row) = rows.rows.first().filter(|r| r.len() == 8) else {
            return Err("the server answered with no row of eight values".to_owned());
        };
        let text = |i: usize| {
            row[i]
                .as_deref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default()
        };
        Ok(MysqlSourceVars {
            binlog_format: text(0),
            binlog_row_image: text(1),
            log_bin: text(2),
            binlog_checksum: text(3),
            rows_query_log_events: text(4),
            gtid_mode: text(5),
            version: text(6),
            gtid_executed: text(7),
        })
    }

    /// The server's position: every transaction in its binlog history.
    pub fn executed(&self) -> Result<GtidSet, String> {
        self.gtid_executed.parse()
    }
}

/// Refuses a MySQL source whose binlog the global binlog cannot use, saying what to set;
/// `source` names it (`source east (127.0.0.1:3306)`).
pub fn check_mysql_source(vars: &MysqlSourceVars, source: &str) -> Result<(), String> {
    let fix = |setting: &str, have: &str, want: &str| {
        Err(format!(
            "{source} has {setting}={have}: the global binlog needs {setting}={want} \
             (SET PERSIST {setting}={want}, or in the server's configuration)"
        ))
    };
    if vars.log_bin != "1" {
        return Err(format!(
            "{source} has no binary log (log_bin=OFF): the global binlog needs it on \
             (remove skip-log-bin / disable-log-bin from the server's configuration and \
             restart it)"
        ));
    }
    if !vars.binlog_format.eq_ignore_ascii_case("ROW") {
        return fix("binlog_format", &vars.binlog_format, "ROW");
    }
    if !vars.binlog_row_image.eq_ignore_ascii_case("FULL") {
        return fix("binlog_row_image", &vars.binlog_row_image, "FULL");
    }
    if !vars.binlog_checksum.eq_ignore_ascii_case("CRC32") {
        return fix("binlog_checksum", &vars.binlog_checksum, "CRC32");
    }
    // The ordering stamps travel in the statement text logged before the rows.
    if vars.rows_query_log_events != "1" {
        return fix("binlog_rows_query_log_events", "OFF", "ON");
    }
    if !vars.gtid_mode.eq_ignore_ascii_case("ON") {
        return Err(format!(
            "{source} has gtid_mode={}: the global binlog needs gtid_mode=ON (with \
             enforce_gtid_consistency=ON; from OFF, step gtid_mode through OFF_PERMISSIVE and \
             ON_PERMISSIVE with SET PERSIST, or set both in the server's configuration)",
            vars.gtid_mode
        ));
    }
    Ok(())
}

/// The user variables a MySQL replica sets before its dump.
pub(super) fn replica_setup(uuid: Uuid, heartbeat: Duration) -> [String; 3] {
    let period_ns = heartbeat.as_nanos();
    [
        "SET @source_binlog_checksum='CRC32', @master_binlog_checksum='CRC32'".to_owned(),
        format!("SET @source_heartbeat_period={period_ns}, @master_heartbeat_period={period_ns}"),
        format!("SET @replica_uuid='{uuid}', @slave_uuid='{uuid}'"),
    ]
}

/// The replica UUID of a reader registering as `server_id`: manifold's own UUID form with
/// a variant of its own, so it is never taken for the UUID of manifold's GTIDs.
pub(super) fn replica_uuid(server_id: u32) -> Uuid {
    let mut bytes = *b"manifold\x80\x01\0\0\0\0\0\0";
    bytes[12..].copy_from_slice(&server_id.to_be_bytes());
    Uuid(bytes)
}

/// `COM_BINLOG_DUMP_GTID`: flags, server id, no file name, position 4, then the GTID set the
/// reader has (the server sends every transaction not in it).
pub(super) fn dump_gtid_payload(out: &mut Vec<u8>, server_id: u32, have: &GtidSet) {
    out.push(COM_BINLOG_DUMP_GTID);
    out.extend_from_slice(&BINLOG_THROUGH_GTID.to_le_bytes());
    out.extend_from_slice(&server_id.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // file name length
    out.extend_from_slice(&4u64.to_le_bytes()); // position
                                                // A set too large for its 32-bit length would be billions of intervals: not a position
                                                // any server holds.
    let size = u32::try_from(have.encoded_len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&size.to_le_bytes());
    have.encode(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> MysqlSourceVars {
        MysqlSourceVars {
            binlog_format: "ROW".into(),
            binlog_row_image: "FULL".into(),
            log_bin: "1".into(),
            binlog_checksum: "CRC32".into(),
            rows_query_log_events: "1".into(),
            gtid_mode: "ON".into(),
            version: "9.7.4".into(),
            gtid_executed: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,\n\
                            3e11fa47-71ca-11e1-9e33-c80aa9429563:1"
                .into(),
        }
    }

    #[test]
    fn a_mysql_source_is_refused_with_what_to_set() {
        let name = "source west (127.0.0.1:3306)";
        assert_eq!(check_mysql_source(&good(), name), Ok(()));
        let no_rows_query = MysqlSourceVars {
            rows_query_log_events: "0".into(),
            ..good()
        };
        assert_eq!(
            check_mysql_source(&no_rows_query, name).unwrap_err(),
            "source west (127.0.0.1:3306) has binlog_rows_query_log_events=OFF: the global \
             binlog needs binlog_rows_query_log_events=ON (SET PERSIST \
             binlog_rows_query_log_events=ON, or in the server's configuration)"
        );
        for (vars, needs) in [
            (
                MysqlSourceVars {
                    log_bin: "0".into(),
                    ..good()
                },
                "log_bin=OFF",
            ),
            (
                MysqlSourceVars {
                    binlog_format: "MIXED".into(),
                    ..good()
                },
                "binlog_format=ROW",
            ),
            (
                MysqlSourceVars {
                    binlog_row_image: "MINIMAL".into(),
                    ..good()
                },
                "binlog_row_image=FULL",
            ),
            (
                MysqlSourceVars {
                    binlog_checksum: "NONE".into(),
                    ..good()
                },
                "binlog_checksum=CRC32",
            ),
            (
                MysqlSourceVars {
                    gtid_mode: "ON_PERMISSIVE".into(),
                    ..good()
                },
                "gtid_mode=ON",
            ),
        ] {
            let e = check_mysql_source(&vars, name).unwrap_err();
            assert!(e.starts_with(name) && e.contains(needs), "{e}");
        }
    }

    #[test]
    fn the_executed_set_reads_across_its_line_breaks() {
        let set = good().executed().unwrap();
        assert_eq!(
            set.to_string(),
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,3e11fa47-71ca-11e1-9e33-c80aa9429563:1"
        );
        let empty = MysqlSourceVars {
            gtid_executed: String::new(),
            ..good()
        };
        assert!(empty.executed().unwrap().is_empty());
    }

    #[test]
    fn the_gtid_dump_is_laid_out_as_the_server_reads_it() {
        let set: GtidSet = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5".parse().unwrap();
        let mut p = Vec::new();
        dump_gtid_payload(&mut p, 0x0102_0304, &set);
        let mut sid = Vec::new();
        set.encode(&mut sid);
        assert_eq!(sid.len(), 8 + 16 + 8 + 16);
        let head: &[u8] = &[
            0x1e, 4, 0, // command, flags
            4, 3, 2, 1, // server id
            0, 0, 0, 0, // no file name
            4, 0, 0, 0, 0, 0, 0, 0, // position
            48, 0, 0, 0, // data size
        ];
        assert_eq!(p, [head, &sid].concat());
        p.clear();
        dump_gtid_payload(&mut p, 7, &GtidSet::default());
        assert_eq!(p.len(), head.len() + 8, "an empty set is its count alone");
        assert_eq!(&p[19..23], &[8, 0, 0, 0]);
    }

    #[test]
    fn the_replica_announces_its_checksum_heartbeat_and_uuid() {
        let uuid = replica_uuid(4_000_000_001);
        assert_eq!(uuid.to_string(), "6d616e69-666f-6c64-8001-0000ee6b2801");
        let [checksum, heartbeat, id] = replica_setup(uuid, Duration::from_secs(1));
        assert!(checksum.contains("@source_binlog_checksum='CRC32'"));
        assert!(heartbeat.contains("@source_heartbeat_period=1000000000"));
        assert_eq!(
            id,
            "SET @replica_uuid='6d616e69-666f-6c64-8001-0000ee6b2801', \
             @slave_uuid='6d616e69-666f-6c64-8001-0000ee6b2801'"
        );
    }
}
