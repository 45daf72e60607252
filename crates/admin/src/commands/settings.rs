//! The admin port's own settings: `SHOW VARIABLES`, `SET GLOBAL` (and the `SET` statements
//! client libraries send on connecting), `RELOAD CONFIG`.

use manifold_mysql_proto::codes;

use super::{like, quoted, syntax_error, Reply, Server};
use crate::control::SetError;

pub(super) fn show_variables(server: &Server<'_>, pattern: Option<&str>) -> Reply {
    let rows = server
        .control
        .variables()
        .into_iter()
        .filter(|v| pattern.is_none_or(|p| like(p, &v.name)))
        .map(|v| {
            vec![
                v.name,
                v.value,
                v.default,
                v.range,
                if v.runtime { "runtime" } else { "restart" }.into(),
                v.help,
            ]
        })
        .collect();
    Reply::Rows {
        columns: &[
            "Variable_name",
            "Value",
            "Default",
            "Range",
            "Changeable",
            "Description",
        ],
        rows,
    }
}

/// `SET GLOBAL name = value`: the value may be quoted.
pub(super) fn set_global(server: &Server<'_>, text: &str) -> Reply {
    let rest = text["SET".len()..].trim_start();
    let rest = rest["GLOBAL".len()..].trim();
    let Some((name, value)) = rest.split_once('=') else {
        return syntax_error(text, "SET GLOBAL name = value");
    };
    let name = name.trim().trim_matches('`');
    let value = value.trim();
    if name.is_empty() || value.is_empty() {
        return syntax_error(text, "SET GLOBAL name = value");
    }
    // A quoted empty value is a value: the tunable says whether it takes it.
    let value = quoted(value).unwrap_or_else(|| value.to_owned());
    match server.control.set_variable(name, &value) {
        Ok(()) => Reply::Done,
        Err(SetError::Unknown(m)) => Reply::Error(codes::UNKNOWN_SYSTEM_VARIABLE, m),
        Err(SetError::RestartOnly(m)) => Reply::Error(codes::READ_ONLY_VARIABLE, m),
        Err(SetError::Invalid(m)) => Reply::Error(
            codes::WRONG_VALUE_FOR_VAR,
            format!("Variable can't be set to the value: {m}"),
        ),
    }
}

/// `SET` without `GLOBAL`. Client libraries set up their session on connecting (PyMySQL's
/// `SET NAMES utf8mb4`, an `init_command`, `SET autocommit = 1`); the admin port has no
/// session state, so those succeed and change nothing, as on ProxySQL's admin port. A
/// tunable named without `GLOBAL` is refused rather than ignored (MySQL's 1229), and a
/// dotted name that is no tunable is unknown (1193): an operator's typo never answers OK.
pub(super) fn set_session(server: &Server<'_>, text: &str) -> Reply {
    let rest = text["SET".len()..].trim_start();
    let first = rest.split_ascii_whitespace().next().unwrap_or("");
    if ["NAMES", "CHARACTER", "CHARSET"]
        .iter()
        .any(|w| first.eq_ignore_ascii_case(w))
    {
        return Reply::Done;
    }
    let assignments = split_outside_quotes(rest, ',');
    for assignment in &assignments {
        let Some((name, value)) = assignment.split_once('=') else {
            return syntax_error(text, "SET name = value");
        };
        let mut name = name.trim();
        if let Some((scope, after)) = name.split_once(|c: char| c.is_ascii_whitespace()) {
            if scope.eq_ignore_ascii_case("SESSION") || scope.eq_ignore_ascii_case("LOCAL") {
                name = after.trim_start();
            }
        }
        for prefix in ["@@SESSION.", "@@LOCAL.", "@@"] {
            if let Some(rest) = strip_prefix_ignore_case(name, prefix) {
                name = rest;
            }
        }
        let name = name.trim_matches('`');
        if let Some(global) = strip_prefix_ignore_case(name, "GLOBAL.") {
            if assignments.len() > 1 {
                return syntax_error(text, "SET GLOBAL name = value, one at a time");
            }
            return set_global(server, &format!("SET GLOBAL {global}={value}"));
        }
        if !name.contains('.') {
            continue; // A client session variable (or a user variable): nothing to do here.
        }
        let tunables = server.control.variables();
        return if tunables.iter().any(|v| v.name.eq_ignore_ascii_case(name)) {
            Reply::Error(
                codes::GLOBAL_VARIABLE,
                format!("Variable '{name}' is a GLOBAL variable and should be set with SET GLOBAL"),
            )
        } else {
            Reply::Error(
                codes::UNKNOWN_SYSTEM_VARIABLE,
                format!("Unknown system variable '{name}': SHOW VARIABLES lists the tunables"),
            )
        };
    }
    Reply::Done
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// `text` split at `sep` where it is outside '...', "..." and `...`.
fn split_outside_quotes(text: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut quote = None;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            None if c == '\'' || c == '"' || c == '`' => quote = Some(c),
            None if c == sep => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

pub(super) fn reload_config(server: &Server<'_>) -> Reply {
    match server.control.reload_config() {
        Ok(changes) => Reply::Rows {
            columns: &["setting", "old", "new", "status"],
            rows: changes
                .into_iter()
                .map(|c| {
                    vec![
                        c.name,
                        c.old,
                        c.new,
                        if c.applied {
                            "applied"
                        } else {
                            "needs restart"
                        }
                        .into(),
                    ]
                })
                .collect(),
        },
        Err(why) => Reply::Error(
            codes::CONFIG_INVALID,
            format!("Configuration not reloaded, nothing changed: {why}"),
        ),
    }
}
