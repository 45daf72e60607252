//! Password guessing on the admin port and in `/metrics`: `SHOW LOGIN FAILURES` (the users
//! failing now per address, as MySQL's `connection_control_failed_login_attempts` per
//! `'user'@'host'`), `FLUSH
//! LOGIN FAILURES`, and `manifold_login_failures_total{door=...}`. The table and figures
//! are [`manifold_engine::login_throttle`]'s, shared by every door.

use std::fmt::Write as _;

use manifold_engine::Door;

use crate::commands::{Reply, Server};

/// `SHOW LOGIN FAILURES`'s columns.
const COLUMNS: &[&str] = &[
    "address",
    "user",
    "failed_attempts",
    "address_failures",
    "waiting",
    "next_delay_ms",
    "seconds_since_last_failure",
];

/// `SHOW LOGIN FAILURES`: every (address, user) with failures, most first.
pub(crate) fn show(server: &Server<'_>) -> Reply {
    let rows = server
        .shared
        .logins
        .failures_now()
        .into_iter()
        .map(|f| {
            vec![
                f.address,
                f.user,
                f.failures.to_string(),
                f.address_failures.to_string(),
                f.waiting.to_string(),
                f.next_delay.as_millis().to_string(),
                f.since_last_failure.as_secs().to_string(),
            ]
        })
        .collect();
    Reply::Rows {
        columns: COLUMNS,
        rows,
    }
}

/// `FLUSH LOGIN FAILURES`: every address starts again (as a success from each would).
pub(crate) fn flush(server: &Server<'_>) -> Reply {
    server.shared.logins.clear();
    tracing::info!("admin: login failures flushed");
    Reply::Done
}

/// `manifold_login_failures_total{door=...}`.
pub(crate) fn prometheus(server: &Server<'_>, out: &mut String) {
    let logins = &server.shared.logins;
    let _ = writeln!(
        out,
        "# HELP manifold_login_failures_total Logins refused for wrong credentials, by door."
    );
    let _ = writeln!(out, "# TYPE manifold_login_failures_total counter");
    for door in Door::ALL {
        let _ = writeln!(
            out,
            "manifold_login_failures_total{{door=\"{}\"}} {}",
            door.name(),
            logins.failures(door)
        );
    }
}
