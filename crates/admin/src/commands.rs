//! The admin command set: statements as the `mariadb` client sends them, parsed here and
//! answered from the server's shared state, its workers (asked on their own threads) and
//! its tunables. Every reply is a result set, OK or an error; figures are read with relaxed
//! loads (figures a moment apart may disagree by a request).

use manifold_backend::PoolStats;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

use manifold_frontend_mysql::{describe_pins, ReplayDecline, Shared, Stage, PIN_REASONS};
use manifold_mysql_proto::{codes, ErrorCode};
use manifold_router::ReadOnly;

use crate::control::Control;
use crate::history::History;

mod settings;

use settings::{reload_config, set_global, set_session, show_variables};

/// What a command answers.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    Rows {
        columns: &'static [&'static str],
        rows: Vec<Vec<String>>,
    },
    /// A result set of typed columns, as the MySQL port sends it (the global binlog's
    /// `SHOW MASTER STATUS` and `SHOW BINARY LOGS`, answered by `manifold-binlog-serve`).
    Typed(manifold_binlog_serve::ResultSet),
    /// Done, nothing to show.
    Done,
    Error(ErrorCode, String),
}

/// What the admin port knows of the server it belongs to.
pub(crate) struct Server<'a> {
    pub shared: &'a Shared,
    /// The Redis door, when it listens ([`crate::redis`]).
    pub redis: Option<&'a manifold_frontend_redis::RedisShared>,
    pub started: Instant,
    pub control: &'a dyn Control,
    pub history: &'a Mutex<History>,
    /// The workers' pool figures, asked once per command or HTTP request.
    pub pools: tokio::sync::OnceCell<Vec<(u32, PoolRows)>>,
}

const HELP: &str = "see SHOW BACKENDS, SHOW POOLS, SHOW SESSIONS, SHOW STATUS, SHOW VARIABLES, \
SHOW QUERY DIGESTS, SHOW PIN REASONS, SHOW RULES, SET GLOBAL name = value, RELOAD CONFIG, \
BACKEND OFFLINE|ONLINE 'host:port', KILL SESSION id, PERF HIST [stage|ALL|RESET], \
SHOW REDIS [COMMANDS|STAGES|BATCHES], SHOW BINLOG STATUS|SOURCES|CONSUMERS, SHOW MASTER STATUS, \
SHOW BINARY LOGS, SHOW LOGIN FAILURES, FLUSH LOGIN FAILURES, SHOW MANIFOLDS (docs/OPERATIONS.md, docs/BINLOG.md)";

/// Runs one statement. Keywords are case-insensitive; a trailing `;` and spaces are
/// ignored, as the client may send them.
pub(crate) async fn run(sql: &str, server: &Server<'_>) -> Reply {
    let text = sql.trim().trim_end_matches(';').trim_end();
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    // `SHOW MASTER STATUS`, `SHOW BINARY LOGS` and their synonyms, read as the MySQL port
    // reads them (`SET STATEMENT ... FOR` and comments included). Not `SHOW BINLOG STATUS`:
    // on this port that is the service's figures, not MariaDB's synonym.
    if !matches!(upper.as_slice(), ["SHOW", "BINLOG", ..]) {
        if let Some(reply) = crate::binlog::statement(server, sql) {
            return reply;
        }
    }
    match upper.as_slice() {
        ["SHOW", "BACKENDS"] => Reply::Rows {
            columns: BACKEND_COLUMNS,
            rows: backend_rows(server).await,
        },
        ["SHOW", "POOLS"] => show_pools(server).await,
        ["SHOW", "SESSIONS"] => show_sessions(server.shared),
        ["SHOW", "QUERY", "DIGESTS"] => show_digests(server.shared, usize::MAX).await,
        ["SHOW", "QUERY", "DIGESTS", "LIMIT", n] => match n.parse() {
            Ok(n) => show_digests(server.shared, n).await,
            Err(_) => syntax_error(text, "LIMIT takes a number"),
        },
        ["RESET", "QUERY", "DIGESTS"] => {
            server
                .shared
                .ask_workers(manifold_frontend_mysql::WorkerFrontend::clear_digests)
                .await;
            Reply::Done
        }
        ["SHOW", "PIN", "REASONS"] => show_pin_reasons(server.shared),
        ["SHOW", "RULES"] => show_rules(server.shared).await,
        ["KILL", "SESSION", _] => crate::fleet::kill_session(server, words[2]).await,
        ["SHOW", "MANIFOLDS"] => crate::fleet::show(server),
        ["SHOW", "STATUS"] => show_status(server, None).await,
        ["SHOW", "STATUS", "LIKE", _] => match quoted(words[3]) {
            Some(pattern) => show_status(server, Some(&pattern)).await,
            None => syntax_error(text, "LIKE takes a quoted pattern, e.g. LIKE 'Client%'"),
        },
        ["SHOW", "VARIABLES"] => show_variables(server, None),
        ["SHOW", "VARIABLES", "LIKE", _] => match quoted(words[3]) {
            Some(pattern) => show_variables(server, Some(&pattern)),
            None => syntax_error(text, "LIKE takes a quoted pattern, e.g. LIKE 'pool.%'"),
        },
        ["SET", "GLOBAL", ..] => {
            let base = server.shared.fleet.config_version();
            let done = set_global(server, text);
            crate::fleet::shared(server, text, base, done).await
        }
        ["SET", ..] => set_session(server, text),
        ["RELOAD", "CONFIG"] => {
            let base = server.shared.fleet.config_version();
            let done = reload_config(server);
            crate::fleet::shared(server, text, base, done).await
        }
        ["BACKEND", state @ ("OFFLINE" | "ONLINE"), _] => {
            let addr = quoted(words[2]).unwrap_or_else(|| words[2].to_owned());
            let base = server.shared.fleet.config_version();
            let done = backend_state(server.shared, &addr, *state == "OFFLINE").await;
            crate::fleet::shared(server, text, base, done).await
        }
        ["SHOW", "REDIS", what @ ..] => crate::redis::show(server, what),
        ["SHOW", "LOGIN", "FAILURES"] => crate::logins::show(server),
        ["FLUSH", "LOGIN", "FAILURES"] => crate::logins::flush(server),
        ["SHOW", "BINLOG", what @ ..] => crate::binlog::show(server, what),
        ["PERF", "HIST"] => perf_hist(server.shared, "ALL"),
        ["PERF", "HIST", what] => perf_hist(server.shared, what),
        // What the mariadb and mysql clients ask on connecting.
        ["SELECT", "@@VERSION_COMMENT", "LIMIT", "1"] | ["SELECT", "@@VERSION_COMMENT"] => {
            Reply::Rows {
                columns: &["@@version_comment"],
                rows: vec![vec!["manifold admin".into()]],
            }
        }
        [] => Reply::Error(codes::EMPTY_QUERY, "Query was empty".into()),
        _ => syntax_error(text, HELP),
    }
}

fn syntax_error(text: &str, hint: &str) -> Reply {
    let shown: String = text.chars().take(80).collect();
    Reply::Error(
        codes::PARSE_ERROR,
        format!("Unknown admin command '{shown}': {hint}"),
    )
}

/// The text of a single- or double-quoted SQL string, without escapes beyond doubled quotes
/// (patterns need none).
fn quoted(word: &str) -> Option<String> {
    let quote = word.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = word.strip_prefix(quote)?.strip_suffix(quote)?;
    let doubled = format!("{quote}{quote}");
    Some(inner.replace(&doubled, &quote.to_string()))
}

/// SQL `LIKE`, ASCII case-insensitive: `%` any run, `_` any one character, `\` escapes.
/// Matched greedily, going back only to the last `%`: time linear in pattern times text, where
/// trying every split at every `%` grows exponentially with their number (`'%_%_%_...'` held
/// the admin thread for seconds).
fn like(pattern: &str, text: &str) -> bool {
    enum Token {
        AnyRun,
        AnyOne,
        Char(char),
    }
    let mut tokens = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        tokens.push(match c {
            '%' => Token::AnyRun,
            '_' => Token::AnyOne,
            '\\' => Token::Char(chars.next().unwrap_or('\\')),
            c => Token::Char(c),
        });
    }
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // The last `%` seen and where in the text its run ends now.
    let mut resume: Option<(usize, usize)> = None;
    while t < text.len() {
        match tokens.get(p) {
            Some(Token::AnyRun) => {
                resume = Some((p + 1, t));
                p += 1;
                continue;
            }
            Some(Token::AnyOne) => {
                (p, t) = (p + 1, t + 1);
                continue;
            }
            Some(Token::Char(c)) if c.eq_ignore_ascii_case(&text[t]) => {
                (p, t) = (p + 1, t + 1);
                continue;
            }
            _ => {}
        }
        // A mismatch: the last `%` takes one more character, else no match.
        let Some((after, run_end)) = resume else {
            return false;
        };
        resume = Some((after, run_end + 1));
        (p, t) = (after, run_end + 1);
    }
    tokens[p..].iter().all(|t| matches!(t, Token::AnyRun))
}

/// `SHOW BACKENDS`'s columns.
pub(crate) const BACKEND_COLUMNS: &[&str] = &[
    "cluster",
    "node",
    "role",
    "state",
    "read_only",
    "lag_ms",
    "read_weight",
    "in_flight",
    "connections_open",
    "connections_idle",
    "connect_errors",
    "shunned_total",
    "pool_limit",
];

/// One worker's pool figures, `[cluster][node]`.
type PoolRows = Vec<Vec<PoolStats>>;

async fn pools<'s>(server: &'s Server<'_>) -> &'s [(u32, PoolRows)] {
    server
        .pools
        .get_or_init(|| async {
            let mut per_worker = server
                .shared
                .ask_workers(|w| (w.worker_id(), w.pool_stats()))
                .await;
            per_worker.sort_by_key(|(w, _)| *w);
            per_worker
        })
        .await
}

/// One row per node of every cluster, in [`BACKEND_COLUMNS`] order; empty strings for what
/// the monitor has not learned yet. Connection figures are summed over workers.
pub(crate) async fn backend_rows(server: &Server<'_>) -> Vec<Vec<String>> {
    let shared = server.shared;
    let per_worker = pools(server).await;
    let mut rows = Vec::new();
    for (c, cluster) in shared.clusters.iter().enumerate() {
        let topology = &cluster.topology;
        let primary = topology.primary();
        for (id, node) in topology.nodes.iter().enumerate() {
            let mut sum = PoolStats::default();
            for (_, pools) in per_worker {
                sum += &pools[c][id];
            }
            let state = if node.is_offline() {
                "offline"
            } else if node.is_up() {
                "up"
            } else {
                "shunned"
            };
            rows.push(vec![
                cluster.name.clone(),
                node.addr.clone(),
                if id == primary { "primary" } else { "replica" }.into(),
                state.into(),
                match node.read_only() {
                    ReadOnly::On => "ON",
                    ReadOnly::Off => "OFF",
                    ReadOnly::Unknown => "",
                }
                .into(),
                node.lag()
                    .map_or_else(String::new, |lag| lag.as_millis().to_string()),
                node.read_weight.to_string(),
                sum.in_use.to_string(),
                sum.open().to_string(),
                sum.idle.to_string(),
                sum.failed_total.to_string(),
                node.shunned_total().to_string(),
                sum.limit.to_string(),
            ]);
        }
    }
    rows
}

/// `SHOW POOLS`'s columns.
pub(crate) const POOL_COLUMNS: &[&str] = &[
    "worker",
    "cluster",
    "node",
    "in_use",
    "idle",
    "pending",
    "waiting",
    "opened_total",
    "connect_errors",
    "limit",
    "max_size",
];

pub(crate) async fn pool_rows(server: &Server<'_>) -> Vec<Vec<String>> {
    let max = server.shared.pool_limits.max_size().to_string();
    let mut rows = Vec::new();
    for (worker, pools) in pools(server).await {
        let nodes = server.shared.clusters.iter().zip(pools).flat_map(|(c, p)| {
            c.topology
                .nodes
                .iter()
                .zip(p)
                .map(|(n, s)| (&c.name, &n.addr, s))
        });
        for (cluster, node, s) in nodes {
            rows.push(vec![
                worker.to_string(),
                cluster.clone(),
                node.clone(),
                s.in_use.to_string(),
                s.idle.to_string(),
                s.pending.to_string(),
                s.waiting.to_string(),
                s.opened_total.to_string(),
                s.failed_total.to_string(),
                s.limit.to_string(),
                max.clone(),
            ]);
        }
    }
    rows
}

async fn show_pools(server: &Server<'_>) -> Reply {
    Reply::Rows {
        columns: POOL_COLUMNS,
        rows: pool_rows(server).await,
    }
}

/// `SHOW SESSIONS`'s columns.
pub(crate) const SESSION_COLUMNS: &[&str] = &[
    "id",
    "user",
    "client",
    "state",
    "time_ms",
    "pinned",
    "backend",
    "statement",
];

pub(crate) fn session_rows(shared: &Shared) -> Vec<Vec<String>> {
    shared
        .sessions()
        .into_iter()
        .map(|s| {
            let (cluster, node, thread) = s.backend;
            let backend = if thread == 0 {
                String::new()
            } else {
                let addr = shared
                    .clusters
                    .get(cluster)
                    .and_then(|c| c.topology.nodes.get(node))
                    .map_or("?", |n| n.addr.as_str());
                format!("{addr} thread {thread}")
            };
            let (state, time, statement) = match s.statement {
                Some((text, running)) => ("query", running, text),
                None => ("idle", s.connected, String::new()),
            };
            vec![
                s.id.to_string(),
                s.user,
                s.client.to_string(),
                state.into(),
                time.as_millis().to_string(),
                describe_pins(s.pins),
                backend,
                statement,
            ]
        })
        .collect()
}

fn show_sessions(shared: &Shared) -> Reply {
    Reply::Rows {
        columns: SESSION_COLUMNS,
        rows: session_rows(shared),
    }
}

const DIGEST_COLUMNS: &[&str] = &[
    "digest",
    "schema",
    "digest_text",
    "count",
    "total_ms",
    "avg_us",
    "p99_us",
    "rows",
    "errors",
    "to_primary",
    "to_replica",
];

async fn show_digests(shared: &Shared, limit: usize) -> Reply {
    let parts = shared
        .ask_workers(manifold_frontend_mysql::WorkerFrontend::digest_stats)
        .await;
    let rows = manifold_frontend_mysql::digests::merge(parts)
        .into_iter()
        .take(limit)
        .map(|d| {
            let count = d.count.max(1);
            vec![
                if d.digest == 0 {
                    String::new()
                } else {
                    format!("{:016x}", d.digest)
                },
                d.schema,
                if d.digest == 0 {
                    "(other statements: admin.query_digests_max reached)".into()
                } else {
                    d.text
                },
                d.count.to_string(),
                format!("{:.3}", d.latency.sum_ns as f64 / 1e6),
                (d.latency.sum_ns / count / 1000).to_string(),
                (d.latency.quantile(0.99) / 1000).to_string(),
                d.rows.to_string(),
                d.errors.to_string(),
                d.to_primary.to_string(),
                d.to_replica.to_string(),
            ]
        })
        .collect();
    Reply::Rows {
        columns: DIGEST_COLUMNS,
        rows,
    }
}

async fn show_rules(shared: &Shared) -> Reply {
    let per_worker = shared
        .ask_workers(manifold_frontend_mysql::WorkerFrontend::rule_hits)
        .await;
    let hits = |cluster: usize, rule: usize| -> u64 {
        per_worker
            .iter()
            .filter_map(|w| w.get(cluster)?.get(rule))
            .sum()
    };
    let mut rows = Vec::new();
    for (k, c) in shared.clusters.iter().enumerate() {
        for (i, r) in c.topology.config.rules.iter().enumerate() {
            rows.push(vec![
                c.name.clone(),
                i.to_string(),
                r.digest.clone().unwrap_or_default(),
                r.schema.clone().unwrap_or_default(),
                r.user.clone().unwrap_or_default(),
                r.target.clone(),
                hits(k, i).to_string(),
            ]);
        }
    }
    Reply::Rows {
        columns: &[
            "cluster", "rule", "digest", "schema", "user", "target", "hits",
        ],
        rows,
    }
}

/// `BACKEND OFFLINE|ONLINE 'host:port'`: every node with that address, in every cluster.
async fn backend_state(shared: &Shared, addr: &str, offline: bool) -> Reply {
    if shared.set_backend_offline(addr, offline).await {
        Reply::Done
    } else {
        Reply::Error(
            codes::UNKNOWN_BACKEND,
            format!("No backend '{addr}': SHOW BACKENDS lists the nodes"),
        )
    }
}

pub(crate) const PERF_COLUMNS: &[&str] = &[
    "stage", "count", "avg_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
];

/// One row per stage: count and percentiles (µs, bucket upper bounds).
pub(crate) fn perf_rows(shared: &Shared) -> Vec<Vec<String>> {
    Stage::ALL
        .iter()
        .map(|&stage| histogram_row(stage.name(), &shared.telemetry.histogram(stage)))
        .collect()
}

/// A `PERF HIST` row (and `SHOW REDIS STAGES`'s): name, count and percentiles in µs.
pub(crate) fn histogram_row(
    name: &str,
    h: &manifold_frontend_mysql::telemetry::Histogram,
) -> Vec<String> {
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
    let count = h.count();
    vec![
        name.to_owned(),
        count.to_string(),
        us(h.sum_ns.checked_div(count).unwrap_or(0)),
        us(h.quantile(0.5)),
        us(h.quantile(0.9)),
        us(h.quantile(0.99)),
        us(h.quantile(0.999)),
        us(h.max()),
    ]
}

fn perf_hist(shared: &Shared, what: &str) -> Reply {
    if what.eq_ignore_ascii_case("ALL") {
        return Reply::Rows {
            columns: PERF_COLUMNS,
            rows: perf_rows(shared),
        };
    }
    if what.eq_ignore_ascii_case("RESET") {
        shared.telemetry.reset();
        return Reply::Done;
    }
    let Some(stage) = Stage::from_name(what) else {
        let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
        return Reply::Error(
            codes::PARSE_ERROR,
            format!(
                "PERF HIST takes ALL, RESET or a stage: {}",
                names.join(", ")
            ),
        );
    };
    // The stage's buckets: upper bound and count, then the running total.
    let h = shared.telemetry.histogram(stage);
    let mut seen = 0;
    let rows = h
        .buckets
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(i, &n)| {
            seen += n;
            vec![
                stage.name().to_owned(),
                format!(
                    "{:.3}",
                    manifold_frontend_mysql::telemetry::bucket_upper(i) as f64 / 1000.0
                ),
                n.to_string(),
                seen.to_string(),
            ]
        })
        .collect();
    Reply::Rows {
        columns: &["stage", "le_us", "count", "cumulative"],
        rows,
    }
}

fn show_pin_reasons(shared: &Shared) -> Reply {
    let rows = PIN_REASONS
        .iter()
        .map(|&reason| vec![reason.name().to_owned(), shared.pins(reason).to_string()])
        .collect();
    Reply::Rows {
        columns: &["reason", "pins"],
        rows,
    }
}

/// A status variable: its `SHOW STATUS` name, its Prometheus metric (docs/OPERATIONS.md
/// lists both) and whether that is a counter.
pub(crate) struct StatusVariable {
    pub name: &'static str,
    pub metric: &'static str,
    pub counter: bool,
    pub help: &'static str,
    pub value: u64,
}

/// Status variables, in the order `SHOW STATUS` lists them.
pub(crate) async fn status_variables(server: &Server<'_>) -> Vec<StatusVariable> {
    let shared = server.shared;
    let per_worker = pools(server).await;
    let workers = per_worker.len() as u64;
    let (mut backend_open, mut backend_idle, mut pool_waiting) = (0, 0, 0);
    for (_, pools) in per_worker {
        for s in pools.iter().flatten() {
            backend_open += s.open() as u64;
            backend_idle += s.idle as u64;
            pool_waiting += s.waiting as u64;
        }
    }
    let t = &shared.telemetry;
    let (stmt_hits, stmt_misses, stmt_evictions) = t.stmt_cache();
    let m = &shared.metrics;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let nodes = shared.clusters.iter().flat_map(|c| c.topology.nodes.iter());
    let (mut up, mut shunned, mut shuns) = (0, 0, 0);
    for node in nodes {
        if node.in_service() {
            up += 1;
        } else {
            shunned += 1;
        }
        shuns += node.shunned_total();
    }
    let var = |name, metric, counter, help, value| StatusVariable {
        name,
        metric,
        counter,
        help,
        value,
    };
    vec![
        var(
            "Uptime",
            "manifold_uptime_seconds",
            false,
            "Seconds since start.",
            server.started.elapsed().as_secs(),
        ),
        var(
            "Client_connections",
            "manifold_client_connections",
            false,
            "Client connections open.",
            shared.connections() as u64,
        ),
        var(
            "Client_sessions",
            "manifold_client_sessions",
            false,
            "Client sessions logged in.",
            shared.sessions_open() as u64,
        ),
        var(
            "Threads_workers",
            "manifold_worker_threads",
            false,
            "Worker threads answering the admin port.",
            workers,
        ),
        var(
            "Questions",
            "manifold_statements_total",
            true,
            "Statements the clients sent that a backend answered.",
            t.statements(),
        ),
        var(
            "Statement_errors",
            "manifold_statement_errors_total",
            true,
            "Of those, statements answered with an error.",
            t.statement_errors(),
        ),
        var(
            "Slow_queries",
            "manifold_slow_queries_total",
            true,
            "Statements slower than log.slow_query_threshold.",
            t.slow_statements(),
        ),
        var(
            "Backend_connections",
            "manifold_backend_connections",
            false,
            "Backend connections open (in use, idle or being set up), all nodes.",
            backend_open,
        ),
        var(
            "Backend_connections_idle",
            "manifold_backend_connections_idle",
            false,
            "Of those, idle in a pool.",
            backend_idle,
        ),
        var(
            "Pool_waiting",
            "manifold_pool_waiting",
            false,
            "Statements waiting for a backend connection now.",
            pool_waiting,
        ),
        var(
            "Client_connections_closed",
            "manifold_client_connections_closed_total",
            true,
            "Client connections closed, for any reason.",
            load(&m.connections_closed),
        ),
        var(
            "Stmt_cache_hits",
            "manifold_stmt_cache_hits_total",
            true,
            "Prepared-statement executions whose statement was ready on the backend connection.",
            stmt_hits,
        ),
        var(
            "Stmt_cache_misses",
            "manifold_stmt_cache_misses_total",
            true,
            "Prepared-statement executions that prepared the statement on the connection first.",
            stmt_misses,
        ),
        var(
            "Stmt_cache_evictions",
            "manifold_stmt_cache_evictions_total",
            true,
            "Prepared statements closed on a backend connection to make room (pool.max_prepared_statements).",
            stmt_evictions,
        ),
        var(
            "Retries",
            "manifold_retries_total",
            true,
            "Commands sent again elsewhere after a backend failed before answering.",
            load(&m.retries),
        ),
        var(
            "Failovers",
            "manifold_failovers_total",
            true,
            "Times another node became a cluster's primary.",
            shared.clusters.iter().map(|c| c.topology.failovers()).sum(),
        ),
        var(
            "Fleet_publish_dropped",
            "manifold_fleet_publish_dropped_total",
            true,
            "Redis messages published here that did not reach the fleet's other instances (outbox full, over 16 MiB, or an instance unreachable).",
            shared.fleet.publish_dropped(),
        ),
        var(
            "Transaction_replays",
            "manifold_transaction_replays_total",
            true,
            "Transactions run again on the primary after their backend connection was lost, every answer as the client had it.",
            load(&m.replays),
        ),
        var(
            "Transaction_replay_mismatches",
            "manifold_transaction_replay_mismatches_total",
            true,
            "Replayed transactions whose answers differed: rolled back, the client told (7709).",
            load(&m.replay_mismatches),
        ),
        var(
            "Transaction_commit_outcome_unknown",
            "manifold_transaction_commit_outcome_unknown_total",
            true,
            "Statements that may commit (COMMIT...) whose backend connection was lost: never run again (7710).",
            load(&m.commit_outcome_unknown),
        ),
        var(
            "Transaction_replay_declined_disabled",
            "manifold_transaction_replay_declined_disabled_total",
            true,
            "Transactions lost with their connection, not replayed: routing.transaction_replay is off.",
            m.replay_declined(ReplayDecline::Disabled),
        ),
        var(
            "Transaction_replay_declined_too_large",
            "manifold_transaction_replay_declined_too_large_total",
            true,
            "Not replayed: the transaction outgrew routing.transaction_replay_max_size.",
            m.replay_declined(ReplayDecline::TooLarge),
        ),
        var(
            "Transaction_replay_declined_command",
            "manifold_transaction_replay_declined_command_total",
            true,
            "Not replayed: the transaction ran a command other than a text query (a prepared statement...).",
            m.replay_declined(ReplayDecline::Command),
        ),
        var(
            "Transaction_replay_declined_session_state",
            "manifold_transaction_replay_declined_session_state_total",
            true,
            "Not replayed: the transaction changed the session (variables, schema) or held more than itself (a lock, a temporary table...).",
            m.replay_declined(ReplayDecline::SessionState),
        ),
        var(
            "Transaction_replay_declined_not_primary",
            "manifold_transaction_replay_declined_not_primary_total",
            true,
            "Not replayed: the transaction ran on a replica or another cluster.",
            m.replay_declined(ReplayDecline::NotPrimary),
        ),
        var(
            "Transaction_replay_declined_mid_result",
            "manifold_transaction_replay_declined_mid_result_total",
            true,
            "Not replayed: part of an answer had reached the client when the connection broke.",
            m.replay_declined(ReplayDecline::MidResult),
        ),
        var(
            "Transaction_replay_declined_local_infile",
            "manifold_transaction_replay_declined_local_infile_total",
            true,
            "Not replayed: the transaction ran LOAD DATA LOCAL INFILE.",
            m.replay_declined(ReplayDecline::LocalInfile),
        ),
        var(
            "Transaction_replay_declined_no_primary",
            "manifold_transaction_replay_declined_no_primary_total",
            true,
            "Not replayed: no primary answered within routing.failover_timeout.",
            m.replay_declined(ReplayDecline::NoPrimary),
        ),
        var(
            "Transaction_replay_declined_killed",
            "manifold_transaction_replay_declined_killed_total",
            true,
            "Not replayed: the server killed the transaction's connection (KILL).",
            m.replay_declined(ReplayDecline::Killed),
        ),
        var(
            "Client_connections_accepted",
            "manifold_client_connections_accepted_total",
            true,
            "Client connections accepted.",
            load(&m.connections_accepted),
        ),
        var(
            "Client_auth_failures",
            "manifold_client_auth_failures_total",
            true,
            "Client logins refused.",
            load(&m.auth_failures),
        ),
        var(
            "Client_protocol_errors",
            "manifold_client_protocol_errors_total",
            true,
            "Client connections closed for a protocol error.",
            load(&m.protocol_errors),
        ),
        var(
            "Client_sha2_full_auths",
            "manifold_client_sha2_full_auths_total",
            true,
            "caching_sha2_password logins that needed the full exchange.",
            load(&m.sha2_full_auths),
        ),
        var(
            "Client_sha2_fast_auths",
            "manifold_client_sha2_fast_auths_total",
            true,
            "caching_sha2_password logins answered from the cache.",
            load(&m.sha2_fast_auths),
        ),
        var(
            "Backend_errors",
            "manifold_backend_errors_total",
            true,
            "Statements failed for a backend.",
            load(&m.backend_errors),
        ),
        var(
            "Backends_up",
            "manifold_backends_up",
            false,
            "Nodes in service (up and not taken offline).",
            up,
        ),
        var(
            "Backends_shunned",
            "manifold_backends_shunned",
            false,
            "Nodes out of service (shunned or taken offline).",
            shunned,
        ),
        var(
            "Backend_shuns",
            "manifold_backend_shuns_total",
            true,
            "Times a node was shunned.",
            shuns,
        ),
        var(
            "Causal_read_fallbacks",
            "manifold_causal_read_fallbacks_total",
            true,
            "Reads answered elsewhere because a replica could not catch up in time.",
            load(&m.causal_fallbacks),
        ),
        var(
            "Login_delays",
            "manifold_login_delayed_total",
            true,
            "Logins (any door) that waited out a delay for their user's or address's failures.",
            shared.logins.delayed_total(),
        ),
        var(
            "Login_delayed_addresses",
            "manifold_login_delayed_addresses",
            false,
            "Client addresses from which some user's next login waits now.",
            shared.logins.delayed_addresses() as u64,
        ),
        var(
            "Login_waiting",
            "manifold_login_waiting",
            false,
            "Logins waiting for their address's turn or out their delay now.",
            shared.logins.waiting_now() as u64,
        ),
        var(
            "Login_refused_waiting",
            "manifold_login_refused_waiting_total",
            true,
            "Logins refused unchecked: their address already had the most waiting.",
            shared.logins.refused_waiting_total(),
        ),
        var(
            "Pipelined_statements",
            "manifold_pipelined_statements_total",
            true,
            "Statements written behind another session's on a backend connection.",
            shared.pipelined(),
        ),
    ]
}

async fn show_status(server: &Server<'_>, pattern: Option<&str>) -> Reply {
    let rows = status_variables(server)
        .await
        .into_iter()
        .filter(|v| pattern.is_none_or(|p| like(p, v.name)))
        .map(|v| vec![v.name.to_owned(), v.value.to_string()])
        .collect();
    Reply::Rows {
        columns: &["Variable_name", "Value"],
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_matches_as_sql_does() {
        assert!(like("Client%", "Client_connections"));
        assert!(like("client\\_conn%", "Client_connections"));
        assert!(!like("client\\_conn%", "ClientXconnections"));
        assert!(like("_ptime", "Uptime"));
        assert!(like("%", ""));
        assert!(!like("Backend", "Backends_up"));
        assert!(like("%conn%s", "Client_connections"));
        assert!(like("%_%_%_%", "abc"));
        assert!(!like("%_%_%_%_", "abc"));
        assert!(like("a%b%c", "aXbYbZc"));
        assert!(!like("a%b%c", "aXbYbZ"));
        assert!(like("\\%%", "%x"));
        assert!(!like("\\%%", "x%"));
        assert!(like("ab\\", "ab\\"));
        // Many `%` against a long text that does not match: answered at once, where trying
        // every split took exponential time.
        let pattern = "%_".repeat(40) + "%#";
        assert!(!like(&pattern, &"x".repeat(200)));
    }

    #[test]
    fn quoted_patterns() {
        assert_eq!(quoted("'Client%'").as_deref(), Some("Client%"));
        assert_eq!(quoted("\"a\"\"b\"").as_deref(), Some("a\"b"));
        assert_eq!(quoted("Client%"), None);
        assert_eq!(quoted("'open"), None);
    }
}
