//! What a Redis client may hold in manifold's memory, alone and with all the others.
//!
//! - [`OutputLimits`]: Redis's `client-output-buffer-limit`, for the `normal` and `pubsub`
//!   classes: a hard limit (past it the client is closed at once) and a soft limit (past it
//!   for `soft_seconds` in a row, closed), in bytes of replies not yet taken by the client.
//!   A reply is cut off while it is produced ([`manifold_redis_proto::Reply::limited`]), so a
//!   reply larger than the hard limit never exists whole in memory.
//! - [`ClientMemory`]: Redis 7's `maxmemory-clients`: each connection publishes what its
//!   buffers hold ([`crate::kill::ClientHandle::note_memory`], a plain store when it
//!   changes); every [`TICK`] one task sums them, and while the sum passes the budget the
//!   largest clients are closed first, each logged and counted (`evicted_clients`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the clients' memory is summed.
pub const TICK: Duration = Duration::from_millis(100);

/// One class's limits (`0`: no such limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

impl ClassLimit {
    /// The hard limit as a buffer length (`usize::MAX`: none).
    pub fn hard_bytes(&self) -> usize {
        if self.hard == 0 {
            usize::MAX
        } else {
            usize::try_from(self.hard).unwrap_or(usize::MAX)
        }
    }

    /// The soft limit as a buffer length (`None`: none).
    pub fn soft_bytes(&self) -> Option<usize> {
        (self.soft > 0).then(|| usize::try_from(self.soft).unwrap_or(usize::MAX))
    }
}

/// `client-output-buffer-limit` for the classes the door has (it has no replicas: a
/// `replica`/`slave` class is accepted and ignored, so that a line from redis.conf works).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    pub normal: ClassLimit,
    pub pubsub: ClassLimit,
    /// What a `replica` class said (kept for `CONFIG GET`).
    pub replica: ClassLimit,
}

impl OutputLimits {
    /// Parses Redis's syntax: `<class> <hard> <soft> <soft seconds>`, repeated; classes not
    /// named keep the door's defaults. Sizes as Redis's `memtoull`: `1k` = 1000, `1kb` =
    /// 1024, `m`/`mb`, `g`/`gb`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut limits = Self::default();
        let words: Vec<&str> = s.split_whitespace().collect();
        if !words.len().is_multiple_of(4) {
            return Err(format!(
                "'{s}': expected <class> <hard limit> <soft limit> <soft seconds>, repeated"
            ));
        }
        for w in words.chunks(4) {
            let class = match w[0].to_ascii_lowercase().as_str() {
                "normal" => &mut limits.normal,
                "pubsub" => &mut limits.pubsub,
                "replica" | "slave" => &mut limits.replica,
                other => {
                    return Err(format!(
                        "'{other}' is not a class (normal, pubsub, replica)"
                    ))
                }
            };
            let hard = memtoull(w[1]).ok_or_else(|| format!("'{}' is not a size", w[1]))?;
            let soft = memtoull(w[2]).ok_or_else(|| format!("'{}' is not a size", w[2]))?;
            let soft_seconds: u64 = w[3]
                .parse()
                .map_err(|_| format!("'{}' is not a number of seconds", w[3]))?;
            *class = ClassLimit {
                hard,
                soft,
                soft_seconds,
            };
        }
        Ok(limits)
    }

    /// As `CONFIG GET client-output-buffer-limit` shows it (bytes, Redis's order).
    pub fn redis_form(&self) -> String {
        let c =
            |name: &str, l: &ClassLimit| format!("{name} {} {} {}", l.hard, l.soft, l.soft_seconds);
        format!(
            "{} {} {}",
            c("normal", &self.normal),
            c("slave", &self.replica),
            c("pubsub", &self.pubsub)
        )
    }
}

impl Default for OutputLimits {
    /// Redis's `pubsub 32mb 8mb 60` and `replica 256mb 64mb 60`; `normal` is bounded (Redis:
    /// `0 0 0`, unlimited) at 256 MiB hard, no soft limit: a reply larger than that is
    /// refused the way Redis refuses one past a configured limit.
    fn default() -> Self {
        Self {
            normal: ClassLimit {
                hard: 256 << 20,
                soft: 0,
                soft_seconds: 0,
            },
            pubsub: ClassLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_seconds: 60,
            },
            replica: ClassLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_seconds: 60,
            },
        }
    }
}

/// Redis's `memtoull`: a number with an optional unit, `b`, `k` (1000), `kb` (1024), `m`,
/// `mb`, `g`, `gb`, any case.
pub fn memtoull(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// The sum of every client's memory and what the budget did, shared by the workers.
#[derive(Debug, Default)]
pub struct ClientMemory {
    /// Bytes every client's buffers held at the last sum.
    pub used: AtomicU64,
    /// Clients closed because the sum passed `max_memory_clients` (`evicted_clients`).
    pub evicted: AtomicU64,
}

/// Sums the clients' memory every [`TICK`] and, past `budget` (0: no budget, only the sum),
/// closes the largest clients until the rest fit. Runs until `stop` is notified.
pub async fn run_budget(
    shared: Arc<crate::RedisShared>,
    budget: u64,
    stop: std::rc::Rc<manifold_engine::WorkerContext>,
) {
    loop {
        tokio::select! {
            biased;
            () = stop.drain().notified() => return,
            () = tokio::time::sleep(TICK) => {}
        }
        enforce_budget(&shared, budget);
    }
}

/// One sum, and the evictions it calls for.
pub fn enforce_budget(shared: &crate::RedisShared, budget: u64) {
    let total = shared.registry.memory_total();
    shared.client_memory.used.store(total, Ordering::Relaxed);
    if budget == 0 || total <= budget {
        return;
    }
    // Over the budget: the clients themselves, with what they hold now.
    let mut clients = shared.registry.memory();
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
        shared.client_memory.evicted.fetch_add(1, Ordering::Relaxed);
        total -= mem;
    }
    shared.client_memory.used.store(total, Ordering::Relaxed);
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
