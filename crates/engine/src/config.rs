use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::blocking::BlockingConfig;
use crate::errors::ConfigError;

/// Engine tunables, usually the `[engine]` table of the gateway's TOML.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Worker threads; 0 means one per available core (affinity mask and cgroup quota aware).
    pub threads: usize,
    /// Pin worker `i` to core `i` (modulo the cores we may run on).
    pub pin_threads: bool,
    /// Blocking-pool threads kept alive even when idle.
    pub blocking_min_threads: usize,
    /// Hard cap on blocking-pool threads.
    pub blocking_max_threads: usize,
    /// Add a blocking thread when queued jobs exceed `ratio * live threads`.
    pub blocking_grow_ratio: usize,
    /// A blocking thread idle this long exits (never below `blocking_min_threads`).
    #[serde(with = "crate::duration_serde")]
    pub blocking_idle_timeout: Duration,
    /// How long shutdown waits for in-flight connections before aborting them.
    #[serde(with = "crate::duration_serde")]
    pub shutdown_timeout: Duration,
    /// `listen(2)` backlog of each worker's socket.
    pub listen_backlog: u32,
    /// Hand each accepted connection to the worker with the fewest connections when that is
    /// not the one that accepted it, instead of keeping the kernel's `SO_REUSEPORT` choice.
    pub balance_connections: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            threads: 0,
            pin_threads: false,
            blocking_min_threads: 0,
            blocking_max_threads: 16,
            blocking_grow_ratio: 1,
            blocking_idle_timeout: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(30),
            listen_backlog: 1024,
            balance_connections: true,
        }
    }
}

/// Beyond this many workers the value is a typo, not a machine.
const MAX_THREADS: usize = 4096;

impl EngineConfig {
    /// Rejects values that cannot work; the error names the offending key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &'static str, reason: String| Err(ConfigError::Invalid { key, reason });
        if self.threads > MAX_THREADS {
            return bad(
                "threads",
                format!("{} is more than {MAX_THREADS}", self.threads),
            );
        }
        if self.blocking_max_threads == 0 {
            return bad("blocking_max_threads", "must be at least 1".into());
        }
        if self.blocking_max_threads > MAX_THREADS {
            return bad(
                "blocking_max_threads",
                format!("{} is more than {MAX_THREADS}", self.blocking_max_threads),
            );
        }
        if self.blocking_min_threads > self.blocking_max_threads {
            return bad(
                "blocking_min_threads",
                format!(
                    "{} is more than blocking_max_threads ({})",
                    self.blocking_min_threads, self.blocking_max_threads
                ),
            );
        }
        if self.blocking_grow_ratio == 0 {
            return bad("blocking_grow_ratio", "must be at least 1".into());
        }
        if self.blocking_idle_timeout.is_zero() {
            // Zero would make every thread exit right after each job: churn, not elasticity.
            return bad("blocking_idle_timeout", "must be greater than 0".into());
        }
        if self.listen_backlog == 0 {
            return bad("listen_backlog", "must be at least 1".into());
        }
        if i32::try_from(self.listen_backlog).is_err() {
            return bad(
                "listen_backlog",
                format!("{} does not fit listen(2)", self.listen_backlog),
            );
        }
        Ok(())
    }

    /// `threads` with 0 resolved to the number of cores this process may use.
    pub fn effective_threads(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        }
    }

    /// The blocking-pool part of this config.
    pub fn blocking_config(&self) -> BlockingConfig {
        BlockingConfig {
            min_threads: self.blocking_min_threads,
            max_threads: self.blocking_max_threads,
            grow_ratio: self.blocking_grow_ratio,
            idle_timeout: self.blocking_idle_timeout,
        }
    }
}
