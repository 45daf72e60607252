//! The admin command set: statements as the `mariadb` client sends them, parsed here and
//! answered from the server's shared state. Every reply is a result set or an error; the
//! state is read with relaxed loads (figures a moment apart may disagree by a request).

use std::sync::atomic::Ordering;
use std::time::Instant;

use manifold_frontend_mysql::{Shared, PIN_REASONS};
use manifold_mysql_proto::{codes, ErrorCode};
use manifold_router::ReadOnly;

/// What a command answers.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    Rows {
        columns: &'static [&'static str],
        rows: Vec<Vec<String>>,
    },
    /// Done, nothing to show.
    Done,
    Error(ErrorCode, String),
}

/// What the admin port knows of the server it belongs to.
pub(crate) struct Server<'a> {
    pub shared: &'a Shared,
    pub started: Instant,
}

/// Runs one statement. Keywords are case-insensitive; a trailing `;` and spaces are
/// ignored, as the client may send them.
pub(crate) fn run(sql: &str, server: &Server<'_>) -> Reply {
    let text = sql.trim().trim_end_matches(';').trim_end();
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    match upper.as_slice() {
        ["SHOW", "BACKENDS"] => show_backends(server.shared),
        ["SHOW", "PIN", "REASONS"] => show_pin_reasons(server.shared),
        ["KILL", "SESSION", id] => kill_session(server.shared, id),
        ["SHOW", "STATUS"] => show_status(server, None),
        ["SHOW", "STATUS", "LIKE", _] => match quoted(words[3]) {
            Some(pattern) => show_status(server, Some(&pattern)),
            None => syntax_error(text, "LIKE takes a quoted pattern, e.g. LIKE 'Client%'"),
        },
        // What the mariadb and mysql clients ask on connecting.
        ["SELECT", "@@VERSION_COMMENT", "LIMIT", "1"] | ["SELECT", "@@VERSION_COMMENT"] => {
            Reply::Rows {
                columns: &["@@version_comment"],
                rows: vec![vec!["manifold admin".into()]],
            }
        }
        [] => Reply::Error(codes::EMPTY_QUERY, "Query was empty".into()),
        _ => syntax_error(
            text,
            "see SHOW BACKENDS, SHOW STATUS [LIKE 'pattern'], SHOW PIN REASONS, KILL SESSION id",
        ),
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
fn like(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some(('%', rest)) => (0..=t.len()).any(|i| go(rest, &t[i..])),
            Some(('_', rest)) => !t.is_empty() && go(rest, &t[1..]),
            Some(('\\', rest)) if !rest.is_empty() => {
                t.first().is_some_and(|c| c.eq_ignore_ascii_case(&rest[0]))
                    && go(&rest[1..], &t[1..])
            }
            Some((c, rest)) => {
                t.first().is_some_and(|t0| t0.eq_ignore_ascii_case(c)) && go(rest, &t[1..])
            }
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t)
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
    "shunned_total",
];

fn show_backends(shared: &Shared) -> Reply {
    Reply::Rows {
        columns: BACKEND_COLUMNS,
        rows: backend_rows(shared),
    }
}

/// One row per node of every cluster, in [`BACKEND_COLUMNS`] order; empty strings for what
/// the monitor has not learned yet.
pub(crate) fn backend_rows(shared: &Shared) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for cluster in &shared.clusters {
        let topology = &cluster.topology;
        let primary = topology.primary();
        for (id, node) in topology.nodes.iter().enumerate() {
            rows.push(vec![
                cluster.name.clone(),
                node.addr.clone(),
                if id == primary { "primary" } else { "replica" }.into(),
                if node.is_up() { "up" } else { "shunned" }.into(),
                match node.read_only() {
                    ReadOnly::On => "ON",
                    ReadOnly::Off => "OFF",
                    ReadOnly::Unknown => "",
                }
                .into(),
                node.lag()
                    .map_or_else(String::new, |lag| lag.as_millis().to_string()),
                node.read_weight.to_string(),
                node.shunned_total().to_string(),
            ]);
        }
    }
    rows
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

fn kill_session(shared: &Shared, id: &str) -> Reply {
    let Ok(id) = id.parse::<u32>() else {
        return Reply::Error(
            codes::PARSE_ERROR,
            format!("KILL SESSION takes a connection id (a number), not '{id}'"),
        );
    };
    if shared.kill_session(id) {
        Reply::Done
    } else {
        Reply::Error(codes::NO_SUCH_THREAD, format!("Unknown thread id: {id}"))
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
pub(crate) fn status_variables(server: &Server<'_>) -> Vec<StatusVariable> {
    let shared = server.shared;
    let m = &shared.metrics;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let nodes = shared.clusters.iter().flat_map(|c| c.topology.nodes.iter());
    let (mut up, mut shunned, mut shuns) = (0, 0, 0);
    for node in nodes {
        if node.is_up() {
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
            "Nodes in service.",
            up,
        ),
        var(
            "Backends_shunned",
            "manifold_backends_shunned",
            false,
            "Nodes shunned.",
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
            "Pipelined_statements",
            "manifold_pipelined_statements_total",
            true,
            "Statements written behind another session's on a backend connection.",
            shared.pipelined(),
        ),
    ]
}

fn show_status(server: &Server<'_>, pattern: Option<&str>) -> Reply {
    let rows = status_variables(server)
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
    }

    #[test]
    fn quoted_patterns() {
        assert_eq!(quoted("'Client%'").as_deref(), Some("Client%"));
        assert_eq!(quoted("\"a\"\"b\"").as_deref(), Some("a\"b"));
        assert_eq!(quoted("Client%"), None);
        assert_eq!(quoted("'open"), None);
    }
}
