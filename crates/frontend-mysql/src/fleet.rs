//! This instance's sessions as the other manifolds of the fleet see them (`KILL` and
//! `SHOW PROCESSLIST` through another instance), and the way this instance's clients reach
//! the others' sessions.

use manifold_fleet::{Backend, Marked, ProcessRow, Request, Response};

use crate::Shared;

impl manifold_fleet::Local for Shared {
    fn mark(&self, id: u32, user: Option<&str>) -> Marked {
        let Some(handle) = self.find_session(id) else {
            return Marked::Unknown;
        };
        if user.is_some_and(|u| handle.user() != u) {
            return Marked::NotOwner;
        }
        Marked::Running(handle.mark_query_killed().map(|m| {
            let (cluster, node, thread) = m.backend;
            ((cluster as u32, node as u32, thread), m.seq)
        }))
    }

    fn still_running(&self, id: u32, seq: u64, backend: Backend) -> bool {
        self.find_session(id).is_some_and(|h| {
            let (cluster, node, thread) = h.backend_thread();
            h.still_running(seq) && (cluster as u32, node as u32, thread) == backend
        })
    }

    fn disconnect(&self, id: u32) -> bool {
        self.kill_session(id)
    }

    fn processes(&self, user: Option<&str>) -> Vec<ProcessRow> {
        crate::processlist::rows(self, user)
    }
}

/// The sessions of `user` (`None`: all) that the other live instances report; an instance
/// that does not answer is left out, with a warning.
pub(crate) async fn remote_processes(shared: &Shared, user: Option<&str>) -> Vec<ProcessRow> {
    let request = Request::Processes {
        user: user.map(str::to_owned),
    };
    let mut rows = Vec::new();
    for (member, answer) in shared.fleet.ask_all(&request).await {
        match answer {
            Ok(Response::Processes(mut theirs)) => rows.append(&mut theirs),
            Ok(other) => tracing::warn!(
                instance = member.id,
                "fleet: a process list answered with {other:?}"
            ),
            Err(e) => tracing::warn!(
                instance = member.id,
                "fleet: no process list from {}: {e}",
                member.name
            ),
        }
    }
    rows
}
