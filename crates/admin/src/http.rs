//! HTTP on `[admin] http_listen`: `/metrics` in Prometheus' text format and `/status` as
//! JSON, from the same figures as `SHOW STATUS` and `SHOW BACKENDS`. One request per
//! connection (`Connection: close`), served on the admin thread.

use std::fmt::Write as _;
use std::time::Duration;

use manifold_frontend_mysql::PIN_REASONS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::commands::{backend_rows, status_variables, Server, BACKEND_COLUMNS};

/// A request head larger than this is refused; scrapers send a few hundred bytes.
const MAX_HEAD: usize = 8 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) async fn connection(mut stream: TcpStream, server: &Server<'_>) -> Result<(), String> {
    let mut head = Vec::with_capacity(1024);
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            if head.len() >= MAX_HEAD {
                return Err("request head too large".to_owned());
            }
            let mut chunk = [0u8; 1024];
            let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("closed before the request ended".to_owned());
            }
            head.extend_from_slice(&chunk[..n]);
        }
        Ok(())
    };
    let (status, content_type, body) = match tokio::time::timeout(READ_TIMEOUT, read).await {
        Err(_) => return Err("request timed out".into()),
        Ok(Err(why)) if why.starts_with("request head") => {
            ("431 Request Header Fields Too Large", "text/plain", why)
        }
        Ok(Err(why)) => return Err(why),
        Ok(Ok(())) => respond(&head, server),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(response.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    stream.shutdown().await.map_err(|e| e.to_string())
}

/// Status line, content type and body for a request head.
fn respond(head: &[u8], server: &Server<'_>) -> (&'static str, &'static str, String) {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if method != "GET" {
        return ("405 Method Not Allowed", "text/plain", "GET only\n".into());
    }
    match path {
        "/metrics" => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics(server),
        ),
        "/status" => ("200 OK", "application/json", status_json(server)),
        _ => (
            "404 Not Found",
            "text/plain",
            "not found: try /metrics or /status\n".into(),
        ),
    }
}

/// A label value with `\`, `"` and newlines escaped as the text format wants.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A per-node metric's value from a `SHOW BACKENDS` row; `None` when not known yet.
type NodeValue = fn(&[String]) -> Option<String>;

fn metrics(server: &Server<'_>) -> String {
    let mut out = String::new();
    for v in status_variables(server) {
        let kind = if v.counter { "counter" } else { "gauge" };
        let _ = writeln!(out, "# HELP {} {}", v.metric, v.help);
        let _ = writeln!(out, "# TYPE {} {kind}", v.metric);
        let _ = writeln!(out, "{} {}", v.metric, v.value);
    }
    let rows = backend_rows(server.shared);
    let families: [(&str, &str, &str, NodeValue); 4] = [
        (
            "manifold_backend_up",
            "gauge",
            "1 when the node is in service, 0 when shunned.",
            |r| Some(if r[3] == "up" { "1" } else { "0" }.into()),
        ),
        (
            "manifold_backend_read_only",
            "gauge",
            "The node's read_only (1 ON, 0 OFF), once the monitor has read it.",
            |r| match r[4].as_str() {
                "ON" => Some("1".into()),
                "OFF" => Some("0".into()),
                _ => None,
            },
        ),
        (
            "manifold_backend_lag_seconds",
            "gauge",
            "Replication lag, once known.",
            |r| r[5].parse::<f64>().ok().map(|ms| (ms / 1000.0).to_string()),
        ),
        (
            "manifold_backend_node_shuns_total",
            "counter",
            "Times this node was shunned.",
            |r| Some(r[7].clone()),
        ),
    ];
    for (name, kind, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for r in &rows {
            if let Some(v) = value(r) {
                let _ = writeln!(
                    out,
                    "{name}{{cluster=\"{}\",node=\"{}\",role=\"{}\"}} {v}",
                    label(&r[0]),
                    label(&r[1]),
                    r[2]
                );
            }
        }
    }
    let _ = writeln!(out, "# HELP manifold_pins_total Times sessions became pinned to their backend connection, by reason.");
    let _ = writeln!(out, "# TYPE manifold_pins_total counter");
    for reason in PIN_REASONS {
        let _ = writeln!(
            out,
            "manifold_pins_total{{reason=\"{}\"}} {}",
            reason.name(),
            server.shared.pins(reason)
        );
    }
    out
}

/// A JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn status_json(server: &Server<'_>) -> String {
    let status: Vec<String> = status_variables(server)
        .iter()
        .map(|v| format!("{}:{}", json_string(v.name), v.value))
        .collect();
    let backends: Vec<String> = backend_rows(server.shared)
        .iter()
        .map(|row| {
            let fields: Vec<String> = BACKEND_COLUMNS
                .iter()
                .zip(row)
                .map(|(column, value)| {
                    let value = match *column {
                        "lag_ms" | "read_weight" | "shunned_total" if value.is_empty() => {
                            "null".to_owned()
                        }
                        "lag_ms" | "read_weight" | "shunned_total" => value.clone(),
                        _ if value.is_empty() => "null".to_owned(),
                        _ => json_string(value),
                    };
                    format!("{}:{value}", json_string(column))
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    let pins: Vec<String> = PIN_REASONS
        .iter()
        .map(|&r| format!("{}:{}", json_string(r.name()), server.shared.pins(r)))
        .collect();
    format!(
        "{{\"status\":{{{}}},\"backends\":[{}],\"pins\":{{{}}}}}\n",
        status.join(","),
        backends.join(","),
        pins.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(label("x\"y\\z\n"), "x\\\"y\\\\z\\n");
    }
}
