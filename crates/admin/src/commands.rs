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

fn show_backends(shared: &Shared) -> Reply {
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
    Reply::Rows {
        columns: &[
            "cluster",
            "node",
            "role",
            "state",
            "read_only",
            "lag_ms",
            "read_weight",
            "shunned_total",
        ],
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

/// Status variables, in the order `SHOW STATUS` lists them (documented in
/// docs/OPERATIONS.md).
fn status_variables(server: &Server<'_>) -> Vec<(&'static str, u64)> {
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
    vec![
        ("Uptime", server.started.elapsed().as_secs()),
        ("Client_connections", shared.connections() as u64),
        ("Client_connections_accepted", load(&m.connections_accepted)),
        ("Client_auth_failures", load(&m.auth_failures)),
        ("Client_protocol_errors", load(&m.protocol_errors)),
        ("Client_sha2_full_auths", load(&m.sha2_full_auths)),
        ("Client_sha2_fast_auths", load(&m.sha2_fast_auths)),
        ("Backend_errors", load(&m.backend_errors)),
        ("Backends_up", up),
        ("Backends_shunned", shunned),
        ("Backend_shuns", shuns),
        ("Causal_read_fallbacks", load(&m.causal_fallbacks)),
        ("Pipelined_statements", shared.pipelined()),
    ]
}

fn show_status(server: &Server<'_>, pattern: Option<&str>) -> Reply {
    let rows = status_variables(server)
        .into_iter()
        .filter(|(name, _)| pattern.is_none_or(|p| like(p, name)))
        .map(|(name, value)| vec![name.to_owned(), value.to_string()])
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
