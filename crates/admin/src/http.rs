//! HTTP on `[admin] http_listen`: `/metrics` in Prometheus' text format and `/status` as
//! JSON, from the same figures as `SHOW STATUS` and `SHOW BACKENDS`, and at `/` a dashboard
//! page (`dashboard.html`, self-contained) that polls `/status` once a second. One request per
//! connection (`Connection: close`), served on the admin thread.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

use manifold_frontend_mysql::PIN_REASONS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use manifold_frontend_mysql::telemetry::bucket_upper;
use manifold_frontend_mysql::Stage;

use crate::commands::{
    backend_rows, perf_rows, pool_rows, session_rows, status_variables, Server, BACKEND_COLUMNS,
    PERF_COLUMNS, POOL_COLUMNS,
};
use crate::errors::HttpError;
use crate::history::INTERVAL;

/// A request head larger than this is refused; scrapers send a few hundred bytes.
const MAX_HEAD: usize = 8 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The dashboard served at `/`: one page, its CSS and JS inline, nothing fetched but `/status`.
const DASHBOARD: &str = include_str!("dashboard.html");

pub(crate) async fn connection(
    mut stream: TcpStream,
    server: &Server<'_>,
) -> Result<(), HttpError> {
    let mut head = Vec::with_capacity(1024);
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            if head.len() >= MAX_HEAD {
                return Err(HttpError::HeadTooLarge);
            }
            let mut chunk = [0u8; 1024];
            let n = stream.read(&mut chunk).await.map_err(HttpError::Io)?;
            if n == 0 {
                return Err(HttpError::ClosedEarly);
            }
            head.extend_from_slice(&chunk[..n]);
        }
        Ok(())
    };
    let (status, content_type, body) = match tokio::time::timeout(READ_TIMEOUT, read).await {
        Err(_) => return Err(HttpError::Timeout),
        Ok(Err(why @ HttpError::HeadTooLarge)) => (
            "431 Request Header Fields Too Large",
            "text/plain",
            why.to_string().into(),
        ),
        Ok(Err(why)) => return Err(why),
        Ok(Ok(())) => respond(&head, server).await,
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(response.as_bytes())
        .await
        .map_err(HttpError::Io)?;
    stream.shutdown().await.map_err(HttpError::Io)
}

/// Status line, content type and body for a request head.
async fn respond(
    head: &[u8],
    server: &Server<'_>,
) -> (&'static str, &'static str, Cow<'static, str>) {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if method != "GET" {
        return ("405 Method Not Allowed", "text/plain", "GET only\n".into());
    }
    match path {
        "/" | "/index.html" => ("200 OK", "text/html; charset=utf-8", DASHBOARD.into()),
        "/metrics" => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics(server).await.into(),
        ),
        "/status" => (
            "200 OK",
            "application/json",
            status_json(server).await.into(),
        ),
        _ => (
            "404 Not Found",
            "text/plain",
            "not found: try / (the dashboard), /metrics or /status\n".into(),
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

/// A per-node metric's value from a `SHOW BACKENDS` column's; `None` when not known yet.
type NodeValue = fn(&str) -> Option<String>;

/// The index of a `SHOW BACKENDS` column, by name.
fn backend_column(name: &str) -> usize {
    BACKEND_COLUMNS
        .iter()
        .position(|c| *c == name)
        .expect("a SHOW BACKENDS column")
}

async fn metrics(server: &Server<'_>) -> String {
    let mut out = String::new();
    for v in status_variables(server).await {
        let kind = if v.counter { "counter" } else { "gauge" };
        let _ = writeln!(out, "# HELP {} {}", v.metric, v.help);
        let _ = writeln!(out, "# TYPE {} {kind}", v.metric);
        let _ = writeln!(out, "{} {}", v.metric, v.value);
    }
    let rows = backend_rows(server).await;
    let families: [(&str, &str, &str, &str, NodeValue); 8] = [
        (
            "manifold_backend_up",
            "gauge",
            "1 when the node is in service, 0 when shunned or taken offline.",
            "state",
            |v| Some(if v == "up" { "1" } else { "0" }.into()),
        ),
        (
            "manifold_backend_in_flight",
            "gauge",
            "Connections to the node lent out now (a statement running, or a session holding one).",
            "in_flight",
            |v| Some(v.to_owned()),
        ),
        (
            "manifold_backend_connections_open",
            "gauge",
            "Connections open to the node, over all workers.",
            "connections_open",
            |v| Some(v.to_owned()),
        ),
        (
            "manifold_backend_connect_errors_total",
            "counter",
            "Connects or logins to the node that failed.",
            "connect_errors",
            |v| Some(v.to_owned()),
        ),
        (
            "manifold_backend_read_only",
            "gauge",
            "The node's read_only (1 ON, 0 OFF), once the monitor has read it.",
            "read_only",
            |v| match v {
                "ON" => Some("1".into()),
                "OFF" => Some("0".into()),
                _ => None,
            },
        ),
        (
            "manifold_backend_lag_seconds",
            "gauge",
            "Replication lag, once known.",
            "lag_ms",
            |v| v.parse::<f64>().ok().map(|ms| (ms / 1000.0).to_string()),
        ),
        (
            "manifold_backend_node_shuns_total",
            "counter",
            "Times this node was shunned.",
            "shunned_total",
            |v| Some(v.to_owned()),
        ),
        (
            "manifold_backend_pool_limit",
            "gauge",
            "Connections to the node the pools may lend at once now: their adaptive limits, summed over workers.",
            "pool_limit",
            |v| Some(v.to_owned()),
        ),
    ];
    let (cluster, node, role) = (
        backend_column("cluster"),
        backend_column("node"),
        backend_column("role"),
    );
    for (name, kind, help, column, value) in families {
        let column = backend_column(column);
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for r in &rows {
            if let Some(v) = value(&r[column]) {
                let _ = writeln!(
                    out,
                    "{name}{{cluster=\"{}\",node=\"{}\",role=\"{}\"}} {v}",
                    label(&r[cluster]),
                    label(&r[node]),
                    r[role]
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
    stage_histograms(server, &mut out);
    crate::redis::prometheus(server, &mut out);
    crate::logins::prometheus(server, &mut out);
    crate::binlog::prometheus(server, &mut out);
    out
}

/// `manifold_stage_seconds{stage=...}`: a histogram per stage, with a bucket at each power
/// of two from ~1 µs to ~69 s (bounds of the recorded buckets, so the counts are exact).
fn stage_histograms(server: &Server<'_>, out: &mut String) {
    let _ = writeln!(out, "# HELP manifold_stage_seconds Time spent in each stage of a request (docs/OPERATIONS.md lists the stages).");
    let _ = writeln!(out, "# TYPE manifold_stage_seconds histogram");
    for stage in Stage::ALL {
        let h = server.shared.telemetry.histogram(stage);
        let name = stage.name();
        let mut cumulative = 0;
        for (i, n) in h.buckets.iter().enumerate() {
            cumulative += n;
            let upper = bucket_upper(i);
            // Every fourth bucket ends at a power of two (and the first, at 1024 ns).
            if i % 4 == 0 && i + 1 < h.buckets.len() {
                let _ = writeln!(
                    out,
                    "manifold_stage_seconds_bucket{{stage=\"{name}\",le=\"{}\"}} {cumulative}",
                    upper as f64 / 1e9
                );
            }
        }
        let _ = writeln!(
            out,
            "manifold_stage_seconds_bucket{{stage=\"{name}\",le=\"+Inf\"}} {cumulative}"
        );
        let _ = writeln!(
            out,
            "manifold_stage_seconds_sum{{stage=\"{name}\"}} {}",
            h.sum_ns as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "manifold_stage_seconds_count{{stage=\"{name}\"}} {cumulative}"
        );
    }
}

/// A JSON string literal.
pub(crate) fn json_string(s: &str) -> String {
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

async fn status_json(server: &Server<'_>) -> String {
    let status: Vec<String> = status_variables(server)
        .await
        .iter()
        .map(|v| format!("{}:{}", json_string(v.name), v.value))
        .collect();
    let backends = rows_json(BACKEND_COLUMNS, &backend_rows(server).await, numeric);
    let pins: Vec<String> = PIN_REASONS
        .iter()
        .map(|&r| format!("{}:{}", json_string(r.name()), server.shared.pins(r)))
        .collect();
    let (queries, errors) = {
        let h = server.history.lock().expect("history");
        let list = |v: &std::collections::VecDeque<u64>| {
            v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
        };
        (list(&h.queries), list(&h.errors))
    };
    let stages = rows_json(PERF_COLUMNS, &perf_rows(server.shared), |c| c != "stage");
    let pools = rows_json(POOL_COLUMNS, &pool_rows(server).await, |c| {
        c != "cluster" && c != "node"
    });
    let pinned: Vec<String> = session_rows(server.shared)
        .iter()
        .filter(|r| !r[5].is_empty())
        .map(|r| {
            format!(
                "{{\"id\":{},\"user\":{},\"client\":{},\"reason\":{},\"state\":{},\"time_ms\":{}}}",
                r[0],
                json_string(&r[1]),
                json_string(&r[2]),
                json_string(&r[5]),
                json_string(&r[3]),
                r[4]
            )
        })
        .collect();
    format!(
        "{{\"status\":{{{}}},\"backends\":[{}],\"pins\":{{{}}},\"history\":{{\"interval_seconds\":{},\"queries\":[{queries}],\"errors\":[{errors}]}},\"stages\":[{}],\"pools\":[{}],\"pinned_sessions\":[{}],\"redis\":{},\"binlog\":{},\"fleet\":{}}}\n",
        status.join(","),
        backends,
        pins.join(","),
        INTERVAL.as_secs(),
        stages,
        pools,
        pinned.join(","),
        crate::redis::status_json(server),
        crate::binlog::status_json(server),
        crate::fleet::status_json(server)
    )
}

/// Rows as JSON objects keyed by column, comma-separated: `numeric` columns bare, other
/// text quoted, empty values null.
fn rows_json(columns: &[&str], rows: &[Vec<String>], numeric: impl Fn(&str) -> bool) -> String {
    let objects: Vec<String> = rows
        .iter()
        .map(|row| {
            let fields: Vec<String> = columns
                .iter()
                .zip(row)
                .map(|(column, value)| {
                    let value = if value.is_empty() {
                        "null".to_owned()
                    } else if numeric(column) {
                        value.clone()
                    } else {
                        json_string(value)
                    };
                    format!("{}:{value}", json_string(column))
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    objects.join(",")
}

/// `SHOW BACKENDS` columns that are numbers in JSON: those from `lag_ms` on.
fn numeric(column: &str) -> bool {
    BACKEND_COLUMNS
        .iter()
        .skip_while(|c| **c != "lag_ms")
        .any(|c| *c == column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(label("x\"y\\z\n"), "x\\\"y\\\\z\\n");
    }

    #[test]
    fn dashboard_is_self_contained_and_has_its_elements() {
        // Nothing from the network: no scripts, styles, fonts or images from elsewhere.
        for asset in [
            "http://", "https://", "//cdn", "@import", "url(", "src=", "<link",
        ] {
            assert!(
                !DASHBOARD.to_ascii_lowercase().contains(asset),
                "dashboard.html has {asset}: no external assets"
            );
        }
        for id in [
            "uptime",
            "clients",
            "qps",
            "errors",
            "stages",
            "backends",
            "pools",
            "pinned",
            "updated",
            "banner",
            "redis",
            "redis-families",
            "redis-stages",
            "redis-batches",
        ] {
            assert!(
                DASHBOARD.contains(&format!("id=\"{id}\"")),
                "dashboard.html has no element with id {id}"
            );
        }
        assert!(DASHBOARD.contains("fetch(\"/status\""));
        assert!(DASHBOARD.len() < 25 * 1024, "{} bytes", DASHBOARD.len());
    }
}
