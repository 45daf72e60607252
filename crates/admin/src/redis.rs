//! The Redis door's figures on the admin port (`SHOW REDIS`, `SHOW REDIS COMMANDS`,
//! `SHOW REDIS STAGES`, `SHOW REDIS BATCHES`), in `/metrics` (`manifold_redis_*`) and in
//! `/status` (`"redis"`), from [`manifold_frontend_redis::metrics`]: every worker's figures
//! summed when asked.

use std::fmt::Write as _;

use manifold_frontend_redis::metrics::{bucket_upper, size_upper, Snapshot, Stage, SIZE_BUCKETS};
use manifold_frontend_redis::RedisShared;
use manifold_mysql_proto::codes;

use crate::commands::{Reply, Server, PERF_COLUMNS};

/// `SHOW REDIS COMMANDS`'s columns.
pub(crate) const COMMAND_COLUMNS: &[&str] = &[
    "command",
    "family",
    "calls",
    "failed_calls",
    "rejected_calls",
    "usec",
    "usec_per_call",
];

/// `SHOW REDIS BATCHES`'s columns.
const BATCH_COLUMNS: &[&str] = &["size_le", "batches", "cumulative"];

/// A figure of `SHOW REDIS`: its name there, its Prometheus metric, whether that is a
/// counter, its help.
struct Figure {
    name: &'static str,
    metric: &'static str,
    counter: bool,
    help: &'static str,
    value: u64,
}

fn figures(door: &RedisShared, s: &Snapshot) -> Vec<Figure> {
    let f = |name, metric, counter, help, value| Figure {
        name,
        metric,
        counter,
        help,
        value,
    };
    vec![
        f(
            "Redis_clients",
            "manifold_redis_clients",
            false,
            "Redis clients connected now.",
            door.clients() as u64,
        ),
        f(
            "Redis_connections",
            "manifold_redis_connections_total",
            true,
            "Redis client connections accepted.",
            s.connections,
        ),
        f(
            "Redis_connections_rejected",
            "manifold_redis_connections_rejected_total",
            true,
            "Redis client connections refused (redis.max_clients reached).",
            s.rejected_connections,
        ),
        f(
            "Redis_commands",
            "manifold_redis_commands_total",
            true,
            "Redis commands run (calls), all commands.",
            s.calls(),
        ),
        f(
            "Redis_failed_calls",
            "manifold_redis_failed_calls_total",
            true,
            "Redis commands that ran and answered an error.",
            s.failed(),
        ),
        f(
            "Redis_rejected_calls",
            "manifold_redis_rejected_calls_total",
            true,
            "Redis commands refused before running (arity, NOAUTH...).",
            s.rejected(),
        ),
        f(
            "Redis_error_replies",
            "manifold_redis_error_replies_total",
            true,
            "Error replies, unknown commands included.",
            s.error_replies,
        ),
        f(
            "Redis_batches",
            "manifold_redis_batches_total",
            true,
            "Batches of data commands run (one SQL transaction or statement each).",
            s.batches(),
        ),
        f(
            "Redis_batched_commands",
            "manifold_redis_batched_commands_total",
            true,
            "Data commands run in batches.",
            s.batched,
        ),
        f(
            "Redis_net_input_bytes",
            "manifold_redis_net_input_bytes_total",
            true,
            "Bytes read from Redis clients.",
            s.net_in,
        ),
        f(
            "Redis_net_output_bytes",
            "manifold_redis_net_output_bytes_total",
            true,
            "Bytes written to Redis clients.",
            s.net_out,
        ),
        f(
            "Redis_clients_memory",
            "manifold_redis_clients_memory_bytes",
            false,
            "Bytes every Redis client's buffers held at the last sum (redis.max_memory_clients).",
            door.client_memory.used.load(std::sync::atomic::Ordering::Relaxed),
        ),
        f(
            "Redis_evicted_clients",
            "manifold_redis_evicted_clients_total",
            true,
            "Redis clients closed, largest first, because all clients' memory passed redis.max_memory_clients.",
            door.client_memory.evicted.load(std::sync::atomic::Ordering::Relaxed),
        ),
        f(
            "Redis_output_buffer_limit_disconnections",
            "manifold_redis_output_buffer_limit_disconnections_total",
            true,
            "Redis clients closed past redis.client_output_buffer_limit.",
            s.output_limit_closed,
        ),
        f(
            "Redis_query_buffer_limit_disconnections",
            "manifold_redis_query_buffer_limit_disconnections_total",
            true,
            "Redis clients closed past redis.client_query_buffer_limit.",
            s.query_limit_closed,
        ),
        f(
            "Redis_write_timeout_disconnections",
            "manifold_redis_write_timeout_disconnections_total",
            true,
            "Redis clients closed for taking none of their replies within redis.write_timeout.",
            s.write_timeout_closed,
        ),
        f(
            "Redis_expired_keys",
            "manifold_redis_expired_keys_total",
            true,
            "Expired keys the sweeper deleted.",
            s.expired_keys,
        ),
        f(
            "Redis_swept_members",
            "manifold_redis_swept_members_total",
            true,
            "Member rows the sweeper deleted (of expired keys and overwritten collections).",
            s.swept_members,
        ),
        f(
            "Redis_sweep_errors",
            "manifold_redis_sweep_errors_total",
            true,
            "Sweeper ticks that failed.",
            s.sweep_errors,
        ),
        f(
            "Redis_published",
            "manifold_redis_pubsub_published_total",
            true,
            "PUBLISH commands run.",
            s.published,
        ),
        f(
            "Redis_delivered",
            "manifold_redis_pubsub_delivered_total",
            true,
            "Messages put in subscribers' queues.",
            s.delivered,
        ),
        f(
            "Redis_pubsub_channels",
            "manifold_redis_pubsub_channels",
            false,
            "Channels with subscribers now.",
            door.pubsub.channels(None).len() as u64,
        ),
        f(
            "Redis_pubsub_patterns",
            "manifold_redis_pubsub_patterns",
            false,
            "Patterns subscribed to now.",
            door.pubsub.numpat() as u64,
        ),
    ]
}

/// `SHOW REDIS [COMMANDS|STAGES|BATCHES]` (`what`: the words after `SHOW REDIS`, upper
/// case).
pub(crate) fn show(server: &Server<'_>, what: &[&str]) -> Reply {
    let Some(door) = server.redis else {
        return Reply::Error(
            codes::PARSE_ERROR,
            "The Redis door is off: redis.listen (--redis-listen) is empty".into(),
        );
    };
    let s = door.metrics.snapshot();
    match what {
        [] => Reply::Rows {
            columns: &["Variable_name", "Value"],
            rows: figures(door, &s)
                .into_iter()
                .map(|f| vec![f.name.to_owned(), f.value.to_string()])
                .collect(),
        },
        ["COMMANDS"] => Reply::Rows {
            columns: COMMAND_COLUMNS,
            rows: command_rows(&s),
        },
        ["STAGES"] => Reply::Rows {
            columns: PERF_COLUMNS,
            rows: stage_rows(&s),
        },
        ["BATCHES"] => Reply::Rows {
            columns: BATCH_COLUMNS,
            rows: batch_rows(&s),
        },
        _ => Reply::Error(
            codes::PARSE_ERROR,
            "SHOW REDIS takes nothing, COMMANDS, STAGES or BATCHES".into(),
        ),
    }
}

fn command_rows(s: &Snapshot) -> Vec<Vec<String>> {
    s.commands
        .iter()
        .map(|c| {
            let per_call = if c.calls == 0 {
                0.0
            } else {
                c.usec as f64 / c.calls as f64
            };
            vec![
                c.name.to_owned(),
                c.family.to_owned(),
                c.calls.to_string(),
                c.failed.to_string(),
                c.rejected.to_string(),
                c.usec.to_string(),
                format!("{per_call:.2}"),
            ]
        })
        .collect()
}

fn stage_rows(s: &Snapshot) -> Vec<Vec<String>> {
    Stage::ALL
        .iter()
        .map(|&stage| crate::commands::histogram_row(stage.name(), s.stage(stage)))
        .collect()
}

fn batch_rows(s: &Snapshot) -> Vec<Vec<String>> {
    let mut seen = 0;
    (0..SIZE_BUCKETS)
        .map(|i| {
            seen += s.batch_sizes[i];
            vec![
                size_upper(i).map_or_else(|| "+Inf".to_owned(), |u| u.to_string()),
                s.batch_sizes[i].to_string(),
                seen.to_string(),
            ]
        })
        .collect()
}

/// A per-command series' value.
type Field = fn(&manifold_frontend_redis::metrics::CommandStats) -> String;

/// A label value with `\`, `"` and newlines escaped as the text format wants.
pub(crate) fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The `manifold_redis_*` series of `/metrics` (nothing when the door is off).
pub(crate) fn prometheus(server: &Server<'_>, out: &mut String) {
    let Some(door) = server.redis else {
        return;
    };
    let s = door.metrics.snapshot();
    for f in figures(door, &s) {
        let kind = if f.counter { "counter" } else { "gauge" };
        let _ = writeln!(out, "# HELP {} {}", f.metric, f.help);
        let _ = writeln!(out, "# TYPE {} {kind}", f.metric);
        let _ = writeln!(out, "{} {}", f.metric, f.value);
    }
    let per_command: [(&str, &str, Field); 4] = [
        (
            "manifold_redis_command_calls_total",
            "Calls of each Redis command.",
            |c| c.calls.to_string(),
        ),
        (
            "manifold_redis_command_failed_calls_total",
            "Calls of each Redis command that answered an error.",
            |c| c.failed.to_string(),
        ),
        (
            "manifold_redis_command_rejected_calls_total",
            "Each Redis command's requests refused before running.",
            |c| c.rejected.to_string(),
        ),
        (
            "manifold_redis_command_seconds_total",
            "Time each Redis command took (a batch's time shared by its commands).",
            |c| (c.usec as f64 / 1e6).to_string(),
        ),
    ];
    for (name, help, value) in per_command {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        for c in &s.commands {
            let _ = writeln!(
                out,
                "{name}{{command=\"{}\",family=\"{}\"}} {}",
                label(c.name),
                c.family,
                value(c)
            );
        }
    }
    let _ = writeln!(out, "# HELP manifold_redis_stage_seconds Time spent in each stage of the Redis door (parse, batch, sql, reply).");
    let _ = writeln!(out, "# TYPE manifold_redis_stage_seconds histogram");
    for stage in Stage::ALL {
        let h = s.stage(stage);
        let name = stage.name();
        let mut cumulative = 0;
        for (i, n) in h.buckets.iter().enumerate() {
            cumulative += n;
            // Every fourth bucket ends at a power of two (and the first, at 1024 ns).
            if i % 4 == 0 && i + 1 < h.buckets.len() {
                let _ = writeln!(
                    out,
                    "manifold_redis_stage_seconds_bucket{{stage=\"{name}\",le=\"{}\"}} {cumulative}",
                    bucket_upper(i) as f64 / 1e9
                );
            }
        }
        let _ = writeln!(
            out,
            "manifold_redis_stage_seconds_bucket{{stage=\"{name}\",le=\"+Inf\"}} {cumulative}"
        );
        let _ = writeln!(
            out,
            "manifold_redis_stage_seconds_sum{{stage=\"{name}\"}} {}",
            h.sum_ns as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "manifold_redis_stage_seconds_count{{stage=\"{name}\"}} {cumulative}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP manifold_redis_batch_size Data commands per batch."
    );
    let _ = writeln!(out, "# TYPE manifold_redis_batch_size histogram");
    let mut cumulative = 0;
    for (i, n) in s.batch_sizes.iter().enumerate() {
        cumulative += n;
        let le = size_upper(i).map_or_else(|| "+Inf".to_owned(), |u| u.to_string());
        let _ = writeln!(
            out,
            "manifold_redis_batch_size_bucket{{le=\"{le}\"}} {cumulative}"
        );
    }
    let _ = writeln!(out, "manifold_redis_batch_size_sum {}", s.batched);
    let _ = writeln!(out, "manifold_redis_batch_size_count {cumulative}");
}

/// A JSON string literal of text without quotes, backslashes or control characters (the
/// names here).
fn json_name(s: &str) -> String {
    format!("\"{}\"", s.replace(['"', '\\'], ""))
}

/// `/status`'s `"redis"`: `null` when the door is off.
pub(crate) fn status_json(server: &Server<'_>) -> String {
    let Some(door) = server.redis else {
        return "null".into();
    };
    let s = door.metrics.snapshot();
    let status: Vec<String> = figures(door, &s)
        .iter()
        .map(|f| format!("{}:{}", json_name(f.name), f.value))
        .collect();
    let commands: Vec<String> = command_rows(&s)
        .iter()
        .map(|r| {
            format!(
                "{{\"command\":{},\"family\":{},\"calls\":{},\"failed_calls\":{},\"rejected_calls\":{},\"usec\":{}}}",
                json_name(&r[0]),
                json_name(&r[1]),
                r[2],
                r[3],
                r[4],
                r[5]
            )
        })
        .collect();
    let stages: Vec<String> = stage_rows(&s)
        .iter()
        .map(|r| {
            let fields: Vec<String> = PERF_COLUMNS
                .iter()
                .zip(r)
                .map(|(c, v)| {
                    if *c == "stage" {
                        format!("\"stage\":{}", json_name(v))
                    } else {
                        format!("{}:{v}", json_name(c))
                    }
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    let sizes: Vec<String> = s.batch_sizes.iter().map(u64::to_string).collect();
    format!(
        "{{\"status\":{{{}}},\"commands\":[{}],\"stages\":[{}],\"batch_sizes\":[{}]}}",
        status.join(","),
        commands.join(","),
        stages.join(","),
        sizes.join(",")
    )
}
