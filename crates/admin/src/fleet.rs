//! The fleet on the admin port: `SHOW MANIFOLDS`, `/status`'s `fleet`, and `KILL SESSION`
//! of a session another instance runs.

use manifold_fleet::{ids, PeerError, Request, Response, ShareError};
use manifold_mysql_proto::codes;

use crate::commands::{Reply, Server};
use crate::http::json_string;

/// `SHOW MANIFOLDS`' columns.
pub(crate) const COLUMNS: &[&str] = &[
    "id",
    "name",
    "me",
    "mysql",
    "admin",
    "http",
    "redis",
    "peer",
    "version",
    "started",
    "heartbeat_age_ms",
    "config_version",
    "config_fault",
];

fn rows(server: &Server<'_>) -> Vec<Vec<String>> {
    server
        .shared
        .fleet
        .members()
        .iter()
        .map(|m| {
            vec![
                m.id.to_string(),
                m.name.clone(),
                if m.me { "yes" } else { "" }.into(),
                m.mysql.clone(),
                m.admin.clone(),
                m.http.clone(),
                m.redis.clone(),
                m.peer.clone(),
                m.version.clone(),
                m.started.clone(),
                m.heartbeat_age.as_millis().to_string(),
                m.config_version.to_string(),
                m.config_fault.clone(),
            ]
        })
        .collect()
}

/// `SHOW MANIFOLDS`: the live fleet as this instance last read the registry. An instance
/// that cannot write the registry says why instead of listing a fleet it cannot see.
pub(crate) fn show(server: &Server<'_>) -> Reply {
    let fleet = &server.shared.fleet;
    if !fleet.config().enabled() {
        return Reply::Error(
            codes::PARSE_ERROR,
            "This manifold runs alone: fleet.table is empty".into(),
        );
    }
    if let Some(fault) = fleet.fault() {
        if fleet.members().is_empty() {
            return Reply::Error(
                codes::FLEET_UNREACHABLE,
                format!(
                    "The registry ({}) cannot be read: {fault}",
                    fleet.config().table
                ),
            );
        }
    }
    Reply::Rows {
        columns: COLUMNS,
        rows: rows(server),
    }
}

/// `/status`'s `fleet`: this instance's id, the registry's fault if any, the members.
pub(crate) fn status_json(server: &Server<'_>) -> String {
    let fleet = &server.shared.fleet;
    let members: Vec<String> = rows(server)
        .iter()
        .map(|r| {
            let fields: Vec<String> = COLUMNS
                .iter()
                .zip(r)
                .map(|(c, v)| match *c {
                    "id" | "heartbeat_age_ms" | "config_version" => {
                        format!("{}:{v}", json_string(c))
                    }
                    "me" => format!("{}:{}", json_string(c), !v.is_empty()),
                    _ => format!("{}:{}", json_string(c), json_string(v)),
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    format!(
        "{{\"enabled\":{},\"instance\":{},\"fault\":{},\"config_version\":{},\"config_fault\":{},\"members\":[{}]}}",
        fleet.config().enabled(),
        fleet.instance(),
        fleet.fault().map_or("null".into(), |f| json_string(&f)),
        fleet.config_version(),
        fleet.config_fault().map_or("null".into(), |f| json_string(&f)),
        members.join(",")
    )
}

/// `KILL SESSION id`: ends that session's client connection, on whichever instance runs it.
pub(crate) async fn kill_session(server: &Server<'_>, id: &str) -> Reply {
    let Ok(id) = id.parse::<u32>() else {
        return Reply::Error(
            codes::PARSE_ERROR,
            format!("KILL SESSION takes a connection id (a number), not '{id}'"),
        );
    };
    let unknown = || Reply::Error(codes::NO_SUCH_THREAD, format!("Unknown thread id: {id}"));
    let fleet = &server.shared.fleet;
    let instance = ids::instance_of(id);
    // This instance's own sessions first: an id of another instance is asked there.
    if server.shared.kill_session(id) {
        return Reply::Done;
    }
    if instance == 0 || instance == fleet.instance() || !fleet.config().enabled() {
        return unknown();
    }
    let asked = async {
        let mut link = fleet.link(instance).await?;
        link.call(&Request::Disconnect { id }).await
    };
    match asked.await {
        Ok(Response::Bool(true)) => Reply::Done,
        Ok(_) | Err(PeerError::NoSuchInstance(_)) => unknown(),
        Err(e) => Reply::Error(codes::FLEET_UNREACHABLE, format!("Nothing was killed: {e}")),
    }
}

/// After a runtime change made here (`done`, the command's own answer) on top of version
/// `base`: stores the fleet's new configuration version, so that every instance applies it. Another instance's change
/// stored first refuses this one (`ERROR 7721`; the newer version is applied here instead).
/// A registry that cannot be written leaves the change on this instance: the command still
/// succeeds, and the log says so.
pub(crate) async fn shared(server: &Server<'_>, what: &str, base: u64, done: Reply) -> Reply {
    if matches!(done, Reply::Error(..)) {
        return done;
    }
    match server.shared.fleet.share(what, base).await {
        Ok(()) | Err(ShareError::Unshared(_)) => done,
        Err(e @ ShareError::Conflict(_)) => Reply::Error(
            codes::FLEET_CONFIG_CONFLICT,
            format!("Nothing changed: {e}"),
        ),
    }
}
