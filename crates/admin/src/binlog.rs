//! The global binlog on the admin port (`SHOW BINLOG STATUS`, `SHOW BINLOG SOURCES`, `SHOW
//! BINLOG CONSUMERS`), in `/metrics` (`manifold_binlog_*`) and in `/status` (`"binlog"`),
//! from what the binlog service publishes ([`manifold_cdc::BinlogShared`]). `SHOW MASTER
//! STATUS` and `SHOW BINARY LOGS` are answered by `manifold-binlog-serve`, as on the MySQL
//! port.

use std::fmt::Write as _;
use std::time::SystemTime;

use manifold_binlog_serve::Statement;
use manifold_cdc::metrics::Metrics;
use manifold_cdc::BinlogShared;
use manifold_mysql_proto::codes;

use crate::commands::{Reply, Server};
use crate::http::json_string;
use crate::redis::label;

/// `SHOW BINLOG SOURCES`'s columns.
pub(crate) const SOURCE_COLUMNS: &[&str] = &[
    "cluster",
    "addr",
    "state",
    "received",
    "written",
    "key",
    "holding_back",
    "events",
    "transactions",
    "forged_stamps",
    "delay_ms",
];

/// `SHOW BINLOG CONSUMERS`'s columns.
pub(crate) const CONSUMER_COLUMNS: &[&str] = &[
    "id",
    "user",
    "addr",
    "server_id",
    "file",
    "pos",
    "gtid",
    "delay_ms",
    "events",
    "bytes",
];

const OFF: &str = "The global binlog is off: binlog.dir (--binlog-dir) is empty";

/// A figure of `SHOW BINLOG STATUS`: its name there, its Prometheus metric, whether that is
/// a counter, its help.
struct Figure {
    name: &'static str,
    metric: &'static str,
    counter: bool,
    help: &'static str,
    value: u64,
}

fn figures(b: &BinlogShared) -> Vec<Figure> {
    let m = &b.metrics;
    let f = |name, metric, counter, help, value| Figure {
        name,
        metric,
        counter,
        help,
        value,
    };
    let sources = b.sources();
    let files = b.files();
    let delays = m.stamped_delay();
    let commits = m.commit_delay();
    vec![
        f("Binlog_running", "manifold_binlog_running", false,
          "1 while the global binlog service writes; 0 once it stopped (SHOW BINLOG STATUS says why).",
          u64::from(m.state() == "running")),
        f("Binlog_events", "manifold_binlog_events_total", true,
          "Events written to the global binlog.", Metrics::get(&m.events)),
        f("Binlog_dml_events", "manifold_binlog_dml_events_total", true,
          "Table map and rows events written to the global binlog.", Metrics::get(&m.dml_events)),
        f("Binlog_bytes", "manifold_binlog_bytes_total", true,
          "Bytes written to the global binlog.", Metrics::get(&m.bytes)),
        f("Binlog_transactions", "manifold_binlog_transactions_total", true,
          "Transactions written to the global binlog.", Metrics::get(&m.transactions)),
        f("Binlog_files_started", "manifold_binlog_files_started_total", true,
          "Global binlog files started (rotations).", Metrics::get(&m.files)),
        f("Binlog_files_purged", "manifold_binlog_files_purged_total", true,
          "Global binlog files removed by retention or PURGE BINARY LOGS.", Metrics::get(&m.purged_files)),
        f("Binlog_spilled_bytes", "manifold_binlog_spilled_bytes_total", true,
          "Bytes of waiting transactions written to spill files (memory_budget reached).", Metrics::get(&m.spilled_bytes)),
        f("Binlog_files", "manifold_binlog_files", false,
          "Global binlog files kept now.", files.len() as u64),
        f("Binlog_files_bytes", "manifold_binlog_files_bytes", false,
          "Bytes of the global binlog files kept now.", files.iter().map(|f| f.size).sum()),
        f("Binlog_waiting", "manifold_binlog_waiting_transactions", false,
          "Transactions received and waiting for every source to pass them.", Metrics::get(&m.waiting)),
        f("Binlog_memory_used", "manifold_binlog_memory_used_bytes", false,
          "Memory held by waiting transactions.", Metrics::get(&m.memory_used)),
        f("Binlog_delay_ms", "manifold_binlog_delay_milliseconds", false,
          "Source commit to written, of the last transaction written (second precision).", Metrics::get(&m.delay_ms)),
        f("Binlog_stamped_delay_p50_ms", "manifold_binlog_stamped_delay_p50_milliseconds", false,
          "Median stamp to written delay of the writes that went through manifold (bucket bound).", delays.quantile(0.5) / 1_000_000),
        f("Binlog_stamped_delay_p99_ms", "manifold_binlog_stamped_delay_p99_milliseconds", false,
          "99th percentile stamp to written delay of the writes that went through manifold (bucket bound).", delays.quantile(0.99) / 1_000_000),
        f("Binlog_commit_delay_p50_ms", "manifold_binlog_commit_delay_p50_milliseconds", false,
          "Median source commit to written delay (MySQL sources, whose commit times have microseconds; 0 with MariaDB's) (bucket bound).", commits.quantile(0.5) / 1_000_000),
        f("Binlog_commit_delay_p99_ms", "manifold_binlog_commit_delay_p99_milliseconds", false,
          "99th percentile source commit to written delay (MySQL sources) (bucket bound).", commits.quantile(0.99) / 1_000_000),
        f("Binlog_sources", "manifold_binlog_sources", false,
          "Sources (cluster primaries) read.", sources.len() as u64),
        f("Binlog_sources_streaming", "manifold_binlog_sources_streaming", false,
          "Sources connected and streaming.", sources.iter().filter(|s| s.state == "streaming").count() as u64),
        f("Binlog_sources_holding_back", "manifold_binlog_sources_holding_back", false,
          "Sources holding the global order back now.", sources.iter().filter(|s| s.holding_back).count() as u64),
        f("Binlog_consumers", "manifold_binlog_consumers", false,
          "Replicas and CDC tools reading the global binlog now.", b.consumers().len() as u64),
    ]
}

/// Milliseconds from `t` to now (0 for a time not yet known or in the future).
fn age_ms(t: Option<SystemTime>) -> u64 {
    t.and_then(|t| SystemTime::now().duration_since(t).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `SHOW BINLOG [STATUS|SOURCES|CONSUMERS]`, `SHOW MASTER STATUS`, `SHOW BINARY LOGS`.
pub(crate) fn show(server: &Server<'_>, what: &[&str]) -> Reply {
    let Some(b) = server.shared.binlog.as_deref() else {
        return Reply::Error(codes::PARSE_ERROR, OFF.into());
    };
    match what {
        ["STATUS"] | [] => {
            let end = b.end();
            let mut rows = vec![
                vec!["Binlog_state".to_owned(), b.metrics.state()],
                vec!["Binlog_dir".to_owned(), b.config.dir.display().to_string()],
                vec!["Binlog_file".to_owned(), end.file],
                vec!["Binlog_position".to_owned(), end.pos.to_string()],
                vec!["Binlog_gtid_pos".to_owned(), end.gtid.to_string()],
            ];
            rows.extend(
                figures(b)
                    .into_iter()
                    .map(|f| vec![f.name.to_owned(), f.value.to_string()]),
            );
            Reply::Rows {
                columns: &["Variable_name", "Value"],
                rows,
            }
        }
        ["SOURCES"] => Reply::Rows {
            columns: SOURCE_COLUMNS,
            rows: source_rows(b),
        },
        ["CONSUMERS"] => Reply::Rows {
            columns: CONSUMER_COLUMNS,
            rows: consumer_rows(b),
        },
        _ => Reply::Error(
            codes::PARSE_ERROR,
            "SHOW BINLOG takes STATUS, SOURCES or CONSUMERS".into(),
        ),
    }
}

/// The binlog statements the admin port shares with the MySQL port (`SHOW MASTER STATUS`,
/// `SHOW BINARY LOGS` and their synonyms): read and answered by `manifold-binlog-serve`, one
/// answer for both ports. `None` when `sql` is none of them.
pub(crate) fn statement(server: &Server<'_>, sql: &str) -> Option<Reply> {
    let statement = manifold_binlog_serve::parse(sql)?;
    if !matches!(
        statement,
        Statement::ShowMasterStatus | Statement::ShowBinaryLogs
    ) {
        return None;
    }
    let Some(b) = server.shared.binlog.as_deref() else {
        return Some(Reply::Error(codes::PARSE_ERROR, OFF.into()));
    };
    manifold_binlog_serve::answer::published(b, &statement).map(Reply::Typed)
}

pub(crate) fn source_rows(b: &BinlogShared) -> Vec<Vec<String>> {
    b.sources()
        .into_iter()
        .map(|s| {
            vec![
                s.cluster,
                s.addr,
                s.state,
                s.received.to_string(),
                s.written.to_string(),
                s.key.to_string(),
                u8::from(s.holding_back).to_string(),
                s.events.to_string(),
                s.transactions.to_string(),
                s.forged_stamps.to_string(),
                age_ms(s.last_commit).to_string(),
            ]
        })
        .collect()
}

pub(crate) fn consumer_rows(b: &BinlogShared) -> Vec<Vec<String>> {
    b.consumers()
        .into_iter()
        .map(|c| {
            vec![
                c.id.to_string(),
                c.user,
                c.addr,
                c.server_id.to_string(),
                c.file,
                c.pos.to_string(),
                c.gtid,
                c.delay_ms.to_string(),
                c.events.to_string(),
                c.bytes.to_string(),
            ]
        })
        .collect()
}

/// A per-source series' value.
type SourceFigure = fn(&manifold_cdc::state::SourceStatus) -> u64;

/// The `manifold_binlog_*` series of `/metrics` (nothing when the global binlog is off).
pub(crate) fn prometheus(server: &Server<'_>, out: &mut String) {
    let Some(b) = server.shared.binlog.as_deref() else {
        return;
    };
    for f in figures(b) {
        let kind = if f.counter { "counter" } else { "gauge" };
        let _ = writeln!(out, "# HELP {} {}", f.metric, f.help);
        let _ = writeln!(out, "# TYPE {} {kind}", f.metric);
        let _ = writeln!(out, "{} {}", f.metric, f.value);
    }
    let sources = b.sources();
    let per_source: [(&str, &str, &str, SourceFigure); 4] = [
        (
            "manifold_binlog_source_transactions_total",
            "counter",
            "Transactions of each source written to the global binlog.",
            |s| s.transactions,
        ),
        (
            "manifold_binlog_source_forged_stamps_total",
            "counter",
            "Statements of each source whose ordering stamp was ignored for being too far ahead of the clock.",
            |s| s.forged_stamps,
        ),
        (
            "manifold_binlog_source_holding_back",
            "gauge",
            "1 while the source holds the global order back.",
            |s| u64::from(s.holding_back),
        ),
        (
            "manifold_binlog_source_delay_milliseconds",
            "gauge",
            "Source commit of the source's last transaction written, to now.",
            |s| age_ms(s.last_commit),
        ),
    ];
    for (name, kind, help, value) in per_source {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for s in &sources {
            let _ = writeln!(
                out,
                "{name}{{cluster=\"{}\"}} {}",
                label(&s.cluster),
                value(s)
            );
        }
    }
    histogram(
        out,
        "manifold_binlog_stamped_delay_seconds",
        "Stamp (the write passed manifold) to written in the global binlog, of every stamped transaction.",
        &b.metrics.stamped_delay(),
    );
    histogram(
        out,
        "manifold_binlog_commit_delay_seconds",
        "Source commit to written in the global binlog, of every transaction of a MySQL source (microsecond commit times).",
        &b.metrics.commit_delay(),
    );
}

/// A Prometheus histogram of `h` (bucket bounds in nanoseconds, shown in seconds).
fn histogram(out: &mut String, name: &str, help: &str, h: &manifold_engine::histogram::Histogram) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    let mut cumulative = 0;
    for (i, n) in h.buckets.iter().enumerate() {
        cumulative += n;
        // Every fourth bucket ends at a power of two (and the first, at 1024 ns).
        if i % 4 == 0 && i + 1 < h.buckets.len() {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{}\"}} {cumulative}",
                manifold_engine::histogram::bucket_upper(i) as f64 / 1e9
            );
        }
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
    let _ = writeln!(out, "{name}_sum {}", h.sum_ns as f64 / 1e9);
    let _ = writeln!(out, "{name}_count {cumulative}");
}

/// `/status`'s `"binlog"`: `null` when the global binlog is off.
pub(crate) fn status_json(server: &Server<'_>) -> String {
    let Some(b) = server.shared.binlog.as_deref() else {
        return "null".into();
    };
    let end = b.end();
    let mut status: Vec<String> = figures(b)
        .iter()
        .map(|f| format!("{}:{}", json_string(f.name), f.value))
        .collect();
    status.push(format!(
        "\"Binlog_state\":{}",
        json_string(&b.metrics.state())
    ));
    status.push(format!("\"Binlog_file\":{}", json_string(&end.file)));
    status.push(format!("\"Binlog_position\":{}", end.pos));
    status.push(format!(
        "\"Binlog_gtid_pos\":{}",
        json_string(&end.gtid.to_string())
    ));
    let rows = |columns: &[&str], rows: Vec<Vec<String>>, numeric: &[&str]| -> String {
        rows.iter()
            .map(|r| {
                let fields: Vec<String> = columns
                    .iter()
                    .zip(r)
                    .map(|(c, v)| {
                        if numeric.contains(c) {
                            format!("{}:{v}", json_string(c))
                        } else {
                            format!("{}:{}", json_string(c), json_string(v))
                        }
                    })
                    .collect();
                format!("{{{}}}", fields.join(","))
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let sources = rows(
        SOURCE_COLUMNS,
        source_rows(b),
        &[
            "key",
            "holding_back",
            "events",
            "transactions",
            "forged_stamps",
            "delay_ms",
        ],
    );
    let consumers = rows(
        CONSUMER_COLUMNS,
        consumer_rows(b),
        &["id", "server_id", "pos", "delay_ms", "events", "bytes"],
    );
    format!(
        "{{\"status\":{{{}}},\"sources\":[{sources}],\"consumers\":[{consumers}]}}",
        status.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifold_cdc::state::{ConsumerStatus, End};

    fn shared() -> std::sync::Arc<BinlogShared> {
        let config = manifold_cdc::BinlogConfig {
            dir: "/tmp/gb".into(),
            ..manifold_cdc::BinlogConfig::default()
        };
        BinlogShared::new(config, vec!["east".into(), "west".into()]).0
    }

    #[test]
    fn sources_consumers_and_figures_show_what_the_service_published() {
        let b = shared();
        b.update_source(1, |s| {
            s.addr = "10.0.0.2:3306".into();
            s.state = "streaming".into();
            s.received = "0-2-9".parse().unwrap();
            s.written = "0-2-8".parse().unwrap();
            s.key = 42;
            s.holding_back = true;
            s.transactions = 3;
        });
        let rows = source_rows(&b);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0][0], "east");
        assert_eq!(rows[0][2], "connecting");
        assert_eq!(
            rows[1][..9],
            [
                "west",
                "10.0.0.2:3306",
                "streaming",
                "0-2-9",
                "0-2-8",
                "42",
                "1",
                "0",
                "3"
            ]
        );
        b.update_consumer(ConsumerStatus {
            id: 7,
            user: "repl".into(),
            file: "manifold-bin.000002".into(),
            pos: 400,
            ..ConsumerStatus::default()
        });
        let rows = consumer_rows(&b);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][0], "7");
        assert_eq!(rows[0][4], "manifold-bin.000002");
        assert_eq!(rows[0][5], "400");

        Metrics::add(&b.metrics.transactions, 5);
        b.metrics.record_stamped_delay(3_000_000);
        b.metrics.record_commit_delay(40_000_000);
        b.publish_end(End {
            file: "manifold-bin.000002".into(),
            pos: 400,
            gtid: "0-4000000001-12".parse().unwrap(),
        });
        let figures = figures(&b);
        let value = |name: &str| figures.iter().find(|f| f.name == name).unwrap().value;
        assert_eq!(value("Binlog_transactions"), 5);
        assert_eq!(value("Binlog_sources"), 2);
        assert_eq!(value("Binlog_sources_streaming"), 1);
        assert_eq!(value("Binlog_sources_holding_back"), 1);
        assert_eq!(value("Binlog_consumers"), 1);
        assert_eq!(
            value("Binlog_running"),
            0,
            "the service has not opened the files"
        );
        assert!((3..5).contains(&value("Binlog_stamped_delay_p50_ms")));
        assert!((40..51).contains(&value("Binlog_commit_delay_p99_ms")));
        let metrics: std::collections::HashSet<&str> = figures.iter().map(|f| f.metric).collect();
        assert_eq!(metrics.len(), figures.len(), "one series per figure");
        assert!(figures
            .iter()
            .all(|f| f.metric.starts_with("manifold_binlog_")));
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
