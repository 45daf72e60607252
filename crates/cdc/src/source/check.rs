//! What a primary must be set to for its binlog to feed the global binlog, and the message
//! that tells the operator what to change when it is not.

use manifold_backend::BackendConn;

/// The binlog settings of a source, as read at every connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceVars {
    pub binlog_format: String,
    pub binlog_row_image: String,
    pub log_bin: String,
    pub binlog_checksum: String,
    pub annotate_row_events: String,
    pub version: String,
    pub gtid_binlog_pos: String,
}

const QUERY: &[u8] = b"SELECT @@binlog_format, @@binlog_row_image, @@log_bin, @@binlog_checksum, \
@@binlog_annotate_row_events, @@version, @@gtid_binlog_pos";

impl SourceVars {
    /// Reads them on a MariaDB connection.
    pub async fn read(conn: &mut BackendConn) -> Result<SourceVars, String> {
        let rows = match conn.query_rows(QUERY).await {
            Ok(Ok(rows)) => rows,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(e) => return Err(e.to_string()),
        };
        let Some(row) = rows.rows.first().filter(|r| r.len() == 7) else {
            return Err("the server answered with no row of seven values".to_owned());
        };
        let text = |i: usize| {
            row[i]
                .as_deref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default()
        };
        Ok(SourceVars {
            binlog_format: text(0),
            binlog_row_image: text(1),
            log_bin: text(2),
            binlog_checksum: text(3),
            annotate_row_events: text(4),
            version: text(5),
            gtid_binlog_pos: text(6),
        })
    }
}

/// Refuses a source whose binlog the global binlog cannot use, saying what to set; `source`
/// names it (`source east (127.0.0.1:3306)`).
pub fn check_source(vars: &SourceVars, source: &str) -> Result<(), String> {
    let fix = |setting: &str, have: &str, want: &str, set: &str| {
        Err(format!(
            "{source} has {setting}={have}: the global binlog needs {setting}={want} \
             ({set} and in the server's configuration)"
        ))
    };
    if vars.log_bin != "1" {
        return Err(format!(
            "{source} has no binary log (log_bin=OFF): the global binlog needs log_bin=ON \
             (set log_bin in the server's configuration and restart it)"
        ));
    }
    if !vars.binlog_format.eq_ignore_ascii_case("ROW") {
        return fix(
            "binlog_format",
            &vars.binlog_format,
            "ROW",
            "SET GLOBAL binlog_format=ROW",
        );
    }
    if !vars.binlog_row_image.eq_ignore_ascii_case("FULL") {
        return fix(
            "binlog_row_image",
            &vars.binlog_row_image,
            "FULL",
            "SET GLOBAL binlog_row_image=FULL",
        );
    }
    if !vars.binlog_checksum.eq_ignore_ascii_case("CRC32") {
        return fix(
            "binlog_checksum",
            &vars.binlog_checksum,
            "CRC32",
            "SET GLOBAL binlog_checksum=CRC32",
        );
    }
    if vars.annotate_row_events != "1" {
        return fix(
            "binlog_annotate_row_events",
            "OFF",
            "ON",
            "SET GLOBAL binlog_annotate_row_events=ON",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> SourceVars {
        SourceVars {
            binlog_format: "ROW".into(),
            binlog_row_image: "FULL".into(),
            log_bin: "1".into(),
            binlog_checksum: "CRC32".into(),
            annotate_row_events: "1".into(),
            version: "10.11.19-MariaDB".into(),
            gtid_binlog_pos: "0-1-5".into(),
        }
    }

    #[test]
    fn a_source_is_refused_with_what_to_set() {
        let name = "source east (127.0.0.1:3306)";
        assert_eq!(check_source(&good(), name), Ok(()));
        let mixed = SourceVars {
            binlog_format: "MIXED".into(),
            ..good()
        };
        assert_eq!(
            check_source(&mixed, name).unwrap_err(),
            "source east (127.0.0.1:3306) has binlog_format=MIXED: the global binlog needs \
             binlog_format=ROW (SET GLOBAL binlog_format=ROW and in the server's configuration)"
        );
        let minimal = SourceVars {
            binlog_row_image: "MINIMAL".into(),
            ..good()
        };
        assert!(check_source(&minimal, name)
            .unwrap_err()
            .contains("binlog_row_image=FULL"));
        let no_log = SourceVars {
            log_bin: "0".into(),
            ..good()
        };
        assert!(check_source(&no_log, name).unwrap_err().contains("log_bin"));
        let no_crc = SourceVars {
            binlog_checksum: "NONE".into(),
            ..good()
        };
        assert!(check_source(&no_crc, name)
            .unwrap_err()
            .contains("binlog_checksum=CRC32"));
        let no_annotate = SourceVars {
            annotate_row_events: "0".into(),
            ..good()
        };
        assert!(check_source(&no_annotate, name)
            .unwrap_err()
            .contains("binlog_annotate_row_events=ON"));
    }
}
