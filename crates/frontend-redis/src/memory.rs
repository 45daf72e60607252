//! What a Redis client may hold in manifold's memory, alone and with all the others.
//!
//! - [`OutputLimits`] (parsed with the configuration, [`crate::config`]): Redis's
//!   `client-output-buffer-limit`, for the `normal` and `pubsub` classes: a hard limit
//!   (past it the client is closed at once) and a soft limit (past it for `soft_seconds` in
//!   a row, closed), in bytes of replies not yet taken by the client.
//!   A reply is cut off while it is produced ([`manifold_redis_proto::Reply::limited`]), so a
//!   reply larger than the hard limit never exists whole in memory.
//! - [`ClientMemory`]: Redis 7's `maxmemory-clients`: each connection publishes what its
//!   buffers hold ([`crate::kill::ClientHandle::note_memory`], a plain store when it
//!   changes); every [`TICK`] one task sums them, and while the sum passes the budget the
//!   largest clients are closed first, each logged and counted (`evicted_clients`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often the clients' memory is summed.
pub const TICK: Duration = Duration::from_millis(100);

pub use crate::config::{memtoull, ClassLimit, OutputLimits};
use crate::kill::Registry;

/// The sum of every client's memory and what the budget did, shared by the workers.
#[derive(Debug, Default)]
pub struct ClientMemory {
    /// Bytes every client's buffers held at the last sum.
    pub used: AtomicU64,
    /// Clients closed because the sum passed `max_memory_clients` (`evicted_clients`).
    pub evicted: AtomicU64,
}

/// Runs `sum` (an [`enforce_budget`] over every client) every [`TICK`], until `stop`'s
/// worker drains.
pub async fn run_budget(sum: impl Fn(), stop: std::rc::Rc<manifold_engine::WorkerContext>) {
    loop {
        tokio::select! {
            biased;
            () = stop.drain().notified() => return,
            () = tokio::time::sleep(TICK) => {}
        }
        sum();
    }
}

/// Sums the memory of the clients of `registry` into `memory` and, past `budget` (0: no
/// budget, only the sum), closes the largest clients until the rest fit.
pub fn enforce_budget(registry: &Registry, memory: &ClientMemory, budget: u64) {
    let total = registry.memory_total();
    memory.used.store(total, Ordering::Relaxed);
    if budget == 0 || total <= budget {
        return;
    }
    // Over the budget: the clients themselves, with what they hold now.
    let mut clients = registry.memory();
    let mut total: u64 = clients.iter().map(|(m, _)| *m).sum();
    // The largest first, as Redis 7 evicts.
    clients.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
    for (mem, handle) in clients {
        if total <= budget {
            break;
        }
        if mem == 0 {
            break;
        }
        tracing::warn!(
            target: "manifold::redis",
            client = handle.id,
            addr = %handle.addr,
            memory = mem,
            total,
            max_memory_clients = budget,
            "redis client evicted: the clients' memory passed redis.max_memory_clients"
        );
        handle.kill();
        memory.evicted.fetch_add(1, Ordering::Relaxed);
        total -= mem;
    }
    memory.used.store(total, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_syntax() {
        assert_eq!(memtoull("32mb"), Some(32 << 20));
        assert_eq!(memtoull("1k"), Some(1000));
        assert_eq!(memtoull("1KB"), Some(1024));
        assert_eq!(memtoull("0"), Some(0));
        assert_eq!(memtoull("1x"), None);
        let l = OutputLimits::parse("normal 1mb 512kb 10 pubsub 0 0 0").unwrap();
        assert_eq!(
            l.normal,
            ClassLimit {
                hard: 1 << 20,
                soft: 512 << 10,
                soft_seconds: 10
            }
        );
        assert_eq!(l.pubsub.hard_bytes(), usize::MAX);
        assert_eq!(l.pubsub.soft_bytes(), None);
        // A class not named keeps its default; a replica line is accepted.
        let l = OutputLimits::parse("replica 1gb 1gb 0").unwrap();
        assert_eq!(l.normal, OutputLimits::default().normal);
        assert!(OutputLimits::parse("normal 1mb").is_err());
        assert!(OutputLimits::parse("other 1 1 1").is_err());
        assert_eq!(
            OutputLimits::default().redis_form(),
            "normal 268435456 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
    }
}
