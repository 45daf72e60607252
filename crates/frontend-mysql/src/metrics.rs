//! Counters of the front door. Relaxed atomics touched once per connection (not per
//! statement); per-statement figures belong in per-worker histograms.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct FrontendMetrics {
    pub connections_accepted: AtomicU64,
    pub auth_failures: AtomicU64,
    pub sha2_full_auths: AtomicU64,
    pub sha2_fast_auths: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub backend_errors: AtomicU64,
    /// Reads a replica could not serve in time for causal consistency, answered elsewhere.
    pub causal_fallbacks: AtomicU64,
    /// Commands sent again to another connection or node after a backend failed before
    /// answering them.
    pub retries: AtomicU64,
    /// Client connections closed, for any reason.
    pub connections_closed: AtomicU64,
    /// Transactions run again on a new backend connection after theirs was lost, whose
    /// answers all matched.
    pub replays: AtomicU64,
    /// Replayed transactions whose answers differed from what the client had received.
    pub replay_mismatches: AtomicU64,
    /// Statements that may have committed (a `COMMIT`...) interrupted by a lost connection.
    pub commit_outcome_unknown: AtomicU64,
    /// Transactions interrupted by a lost connection and not replayed, by reason
    /// ([`ReplayDecline`]).
    pub replay_declined: [AtomicU64; REPLAY_DECLINES.len()],
}

impl FrontendMetrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Why a transaction whose backend connection was lost was not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayDecline {
    /// `routing.transaction_replay` is off.
    Disabled,
    /// Its statements grew past `routing.transaction_replay_max_size`.
    TooLarge,
    /// It ran a command other than a text query (a prepared statement's execute, say).
    Command,
    /// It changed the session (variables, user variables, schema) or holds more than the
    /// transaction on its connection (a lock, a temporary table, `SET TRANSACTION`...).
    SessionState,
    /// It ran on a replica (`START TRANSACTION READ ONLY`) or on another cluster.
    NotPrimary,
    /// Part of an answer had already reached the client when the connection broke.
    MidResult,
    /// `LOAD DATA LOCAL INFILE`: the file is not kept.
    LocalInfile,
    /// No primary answered within `routing.failover_timeout`.
    NoPrimary,
    /// The server killed the transaction's connection (`KILL`): what was killed is not
    /// brought back.
    Killed,
}

pub const REPLAY_DECLINES: [ReplayDecline; 9] = [
    ReplayDecline::Disabled,
    ReplayDecline::TooLarge,
    ReplayDecline::Command,
    ReplayDecline::SessionState,
    ReplayDecline::NotPrimary,
    ReplayDecline::MidResult,
    ReplayDecline::LocalInfile,
    ReplayDecline::NoPrimary,
    ReplayDecline::Killed,
];

impl ReplayDecline {
    pub fn name(self) -> &'static str {
        match self {
            ReplayDecline::Disabled => "disabled",
            ReplayDecline::TooLarge => "too_large",
            ReplayDecline::Command => "command",
            ReplayDecline::SessionState => "session_state",
            ReplayDecline::NotPrimary => "not_primary",
            ReplayDecline::MidResult => "mid_result",
            ReplayDecline::LocalInfile => "local_infile",
            ReplayDecline::NoPrimary => "no_primary",
            ReplayDecline::Killed => "killed",
        }
    }
}

impl FrontendMetrics {
    pub fn replay_declined(&self, reason: ReplayDecline) -> u64 {
        self.replay_declined[reason as usize].load(Ordering::Relaxed)
    }
}
