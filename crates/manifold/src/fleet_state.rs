//! What the fleet shares of a server's configuration: every runtime tunable's value and
//! which nodes an operator took offline. A stored version is this text; applying it changes
//! what differs, as the admin port's own commands would.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;

use manifold_admin::{Control, SetError};
use manifold_frontend_mysql::Shared;

use crate::settings::Settings;

/// The server's side of the fleet's shared configuration. Weak: the fleet outlives neither.
pub struct FleetState {
    pub settings: Weak<Settings>,
    pub shared: Weak<Shared>,
}

impl manifold_fleet::Applier for FleetState {
    fn snapshot(&self) -> String {
        let (Some(settings), Some(shared)) = (self.settings.upgrade(), self.shared.upgrade())
        else {
            return String::new();
        };
        let mut out = String::new();
        for v in settings.variables().into_iter().filter(|v| v.runtime) {
            let _ = writeln!(out, "set {}={}", v.name, v.value);
        }
        let offline: BTreeSet<String> = shared
            .clusters
            .iter()
            .flat_map(|c| c.topology.nodes.iter())
            .filter(|n| n.is_offline())
            .map(|n| n.addr.clone())
            .collect();
        for addr in offline {
            let _ = writeln!(out, "offline {addr}");
        }
        out
    }

    fn apply<'a>(
        &'a self,
        state: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>> {
        Box::pin(async move {
            let (Some(settings), Some(shared)) = (self.settings.upgrade(), self.shared.upgrade())
            else {
                return Err("the server is stopping".into());
            };
            let mut failed = Vec::new();
            let now: std::collections::HashMap<String, String> = settings
                .variables()
                .into_iter()
                .filter(|v| v.runtime)
                .map(|v| (v.name, v.value))
                .collect();
            let mut offline = BTreeSet::new();
            for line in state.lines().filter(|l| !l.is_empty()) {
                if let Some((name, value)) =
                    line.strip_prefix("set ").and_then(|r| r.split_once('='))
                {
                    if now.get(name).map(String::as_str) == Some(value) {
                        continue;
                    }
                    if let Err(e) = settings.set_variable(name, value) {
                        let why = match e {
                            SetError::Unknown(m)
                            | SetError::RestartOnly(m)
                            | SetError::Invalid(m) => m,
                        };
                        failed.push(format!("{name}: {why}"));
                    }
                } else if let Some(addr) = line.strip_prefix("offline ") {
                    offline.insert(addr.to_owned());
                } else {
                    failed.push(format!("'{line}' is no setting this version knows"));
                }
            }
            let nodes: BTreeSet<(String, bool)> = shared
                .clusters
                .iter()
                .flat_map(|c| c.topology.nodes.iter())
                .map(|n| (n.addr.clone(), n.is_offline()))
                .collect();
            for (addr, is_offline) in &nodes {
                let want = offline.contains(addr);
                if want != *is_offline {
                    shared.set_backend_offline(addr, want).await;
                }
            }
            for addr in &offline {
                if !nodes.iter().any(|(a, _)| a == addr) {
                    failed.push(format!("no node {addr} here to take offline"));
                }
            }
            if failed.is_empty() {
                Ok(())
            } else {
                Err(failed.join("; "))
            }
        })
    }
}
