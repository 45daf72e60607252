use std::ffi::OsString;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::Error;

/// A SQL string literal for the server's default `sql_mode` (backslash escapes on).
pub fn quote_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A backtick-quoted identifier.
pub fn quote_identifier(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// Runs `mariadb` with `args` and feeds `sql` on stdin.
///
/// SQL goes through stdin rather than `-e` so statement size is not bounded by the kernel's
/// per-argument limit (128 KiB), and passwords stay out of `ps` when `args` use a defaults file.
pub(crate) fn run_client(
    client: &Path,
    args: &[OsString],
    sql: &str,
    label: &str,
) -> Result<String, Error> {
    let mut child = Command::new(client)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("spawning {}", client.display()), e))?;
    let mut stdin = child.stdin.take().expect("stdin was piped");
    let input = sql.as_bytes().to_vec();
    // A separate writer avoids a pipe deadlock when both the statement and its result are large.
    let writer = std::thread::spawn(move || {
        // A broken pipe means the client quit early; its stderr explains why.
        let _ = stdin.write_all(&input);
    });
    let output = child
        .wait_with_output()
        .map_err(|e| Error::io(format!("waiting for {}", client.display()), e))?;
    let _ = writer.join();
    if output.status.success() {
        String::from_utf8(output.stdout).map_err(|e| Error::Sql {
            server: label.to_string(),
            sql: abbreviate(sql),
            stderr: format!("client output is not UTF-8: {e}"),
        })
    } else {
        let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if stderr.is_empty() {
            stderr = format!("mariadb exited with {}", output.status);
        }
        Err(Error::Sql {
            server: label.to_string(),
            sql: abbreviate(sql),
            stderr,
        })
    }
}

/// Keeps error messages readable when a test sends megabytes of SQL.
fn abbreviate(sql: &str) -> String {
    const MAX: usize = 2000;
    if sql.len() <= MAX {
        return sql.to_string();
    }
    let mut end = MAX;
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in total)", &sql[..end], sql.len())
}

/// Splits `mariadb -B` output that includes the header line into (column, value) rows.
pub(crate) fn rows_with_headers(output: &str) -> Vec<Vec<(String, String)>> {
    let mut lines = output.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let columns: Vec<&str> = header.split('\t').collect();
    lines
        .map(|line| {
            columns
                .iter()
                .zip(line.split('\t'))
                .map(|(c, v)| ((*c).to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_strings() {
        assert_eq!(quote_string("a'b\\c"), r"'a\'b\\c'");
        assert_eq!(quote_string(""), "''");
        assert_eq!(quote_string("x\0y"), r"'x\0y'");
    }

    #[test]
    fn quotes_identifiers() {
        assert_eq!(quote_identifier("db"), "`db`");
        assert_eq!(quote_identifier("a`b"), "`a``b`");
    }

    #[test]
    fn abbreviates_long_sql_on_char_boundary() {
        let long = "é".repeat(3000);
        let short = abbreviate(&long);
        assert!(short.len() < 2100);
        assert!(short.ends_with("(6000 bytes in total)"));
    }

    #[test]
    fn parses_rows_with_headers() {
        let rows = rows_with_headers("A\tB\n1\t2\n3\t\n");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0][1], ("B".to_string(), "2".to_string()));
        assert_eq!(rows[1][1], ("B".to_string(), String::new()));
        assert!(rows_with_headers("").is_empty());
    }
}
