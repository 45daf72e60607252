//! `INFO [section...]`, with Redis 7.0's section names and field formats.
//!
//! Sections: `server`, `clients`, `memory`, `persistence`, `stats`, `replication`, `cpu`,
//! `modules`, `commandstats`, `errorstats`, `latencystats`, `cluster`, `keyspace`; no
//! argument and `default` give Redis 7.0's default ones (not `commandstats` nor
//! `latencystats`), `all` and `everything` all of them; several may be named at once. The
//! figures come from [`crate::metrics`] (every worker's, summed). `keyspace` counts the keys
//! in SQL (`SELECT db, COUNT(*), COUNT(expire_at), AVG(expire_at - now) ... GROUP BY db`): an
//! `INFO` that shows it runs asynchronously ([`super::handle`]), between the batches of its
//! connection, or inside `EXEC`'s transaction; one without it answers at once.
//!
//! `memory`: nothing in manifold holds the data set, so `used_memory` is the process's
//! resident memory (`used_memory_peak` its peak), with its Redis clients' buffers
//! (`mem_clients_normal`), and `maxmemory:0` (keys live in InnoDB tables: none is ever
//! evicted) with the policy a client set.
//!
//! Differences from Redis: fields manifold cannot know are absent (the allocator's,
//! `client_recent_max_*`, `keyspace_hits`, `keyspace_misses`, `expired_stale_perc`, the fork
//! fields...); `latencystats` is empty; `instantaneous_ops_per_sec` is 0; `expired_keys`
//! counts the keys the sweeper deleted (not those a write found expired); `avg_ttl` is exact;
//! a keyspace that cannot be read (the database down) shows no database.

use std::io::Write;

use manifold_backend::Param;
use manifold_redis_proto::{Protocol, Reply};

use super::Session;
use crate::cmd::Args;
use crate::store::{int, StoreError, Tx};

/// Sections in Redis's order, and whether a bare `INFO` (or `default`) shows each.
const SECTIONS: [(&str, bool); 13] = [
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
];

/// Whether `INFO args` shows `section`.
fn wanted(args: Args<'_>, section: &str) -> bool {
    let default = SECTIONS.iter().any(|(s, d)| *s == section && *d);
    if args.len() < 2 {
        return default;
    }
    args.from(1).any(|a| {
        a.eq_ignore_ascii_case(section.as_bytes())
            || a.eq_ignore_ascii_case(b"all")
            || a.eq_ignore_ascii_case(b"everything")
            || (default && a.eq_ignore_ascii_case(b"default"))
    })
}

/// `INFO args` shows the keyspace and the client may run SQL now: it runs asynchronously.
pub fn runs_async(session: &Session<'_>, args: Args<'_>) -> bool {
    session.authenticated
        && session.login.is_some()
        && session.multi.is_none()
        && !(session.proto == Protocol::Resp2 && crate::pubsub::subscribed(session))
        && wanted(args, "keyspace")
}

/// Whether `parsed` (a queued request) is an `INFO` showing the keyspace.
pub fn needs_keyspace(parsed: &crate::cmd::Parsed<'_>) -> bool {
    matches!(parsed.cmd, crate::cmd::Command::Info(args) if wanted(args, "keyspace"))
}

/// One database's figures: `(db, keys, keys with an expiry, their average TTL in ms)`.
type DbFigures = (u8, u64, u64, u64);

/// The figures of each database holding live keys, in order.
async fn keyspace(tx: &mut Tx<'_>) -> Result<Vec<DbFigures>, StoreError> {
    let now = tx.now_ms;
    let rows = tx
        .rows(
            "SELECT db, COUNT(*), COUNT(expire_at), \
             CAST(COALESCE(AVG(expire_at - ?), 0) AS SIGNED) FROM {s}.redis_keys \
             WHERE expire_at IS NULL OR expire_at > ? GROUP BY db ORDER BY db",
            &[Param::Int(now), Param::Int(now)],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let db = u8::try_from(int(r.first()?)?).ok()?;
            let keys = u64::try_from(int(r.get(1)?)?).ok()?;
            let expires = u64::try_from(int(r.get(2)?)?).ok()?;
            let avg_ttl = u64::try_from(int(r.get(3)?)?).unwrap_or(0);
            Some((db, keys, expires, avg_ttl))
        })
        .collect())
}

/// `INFO` with the keyspace, read in a statement of its own.
pub async fn reply_async(session: &mut Session<'_>, args: Args<'_>, out: &mut Vec<u8>) {
    session.info.cmd.set("info");
    let dbs = match session.login.clone() {
        Some(login) => {
            let mut tx = session.fe.worker.begin(&login, false);
            match keyspace(&mut tx).await {
                Ok(dbs) => tx.commit().await.ok().map(|()| dbs),
                Err(e) => {
                    tracing::debug!(target: "manifold::redis", error = ?e, "INFO keyspace not read");
                    tx.abandon();
                    None
                }
            }
        }
        None => None,
    };
    let text = text(session, args, dbs.as_deref());
    Reply::new(out, session.proto).verbatim(b"txt", &text);
}

/// `INFO` with the keyspace inside `EXEC`'s transaction `tx`.
pub async fn reply_in(
    session: &Session<'_>,
    tx: &mut Tx<'_>,
    args: Args<'_>,
    out: &mut Vec<u8>,
) -> Result<(), StoreError> {
    let dbs = keyspace(tx).await?;
    let text = text(session, args, Some(&dbs));
    Reply::new(out, session.proto).verbatim(b"txt", &text);
    Ok(())
}

/// `INFO` answered at once (no keyspace figures to read).
pub fn reply(session: &Session<'_>, args: Args<'_>, out: &mut Vec<u8>) {
    let text = text(session, args, None);
    Reply::new(out, session.proto).verbatim(b"txt", &text);
}

/// The text of `INFO args`; `dbs`: the keyspace figures, when read.
pub fn text(session: &Session<'_>, args: Args<'_>, dbs: Option<&[DbFigures]>) -> Vec<u8> {
    let shared = &session.fe.shared;
    let wanted = |section: &str| wanted(args, section);
    let figures = (wanted("stats") || wanted("commandstats") || wanted("errorstats"))
        .then(|| shared.metrics.snapshot());
    let mut t = Vec::with_capacity(1024);
    let sep = |t: &mut Vec<u8>| {
        if !t.is_empty() {
            t.extend_from_slice(b"\r\n");
        }
    };
    if wanted("server") {
        sep(&mut t);
        let _ = write!(
            t,
            "# Server\r\nredis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_mode:standalone\r\nmanifold_version:{}\r\nos:{} {}\r\narch_bits:{}\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:10\r\nconfigured_hz:10\r\nconfig_file:\r\nio_threads_active:0\r\n",
            crate::REDIS_VERSION,
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH,
            usize::BITS,
            std::process::id(),
            run_id(),
            session.info.laddr.port(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_micros(),
            shared.uptime_secs(),
            shared.uptime_secs() / 86_400,
        );
    }
    if wanted("clients") {
        sep(&mut t);
        let _ = write!(
            t,
            "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:0\r\n",
            shared.clients(),
            shared.config.max_clients,
            session.fe.worker.waiters.blocked_clients(),
            shared.tracker.figures().clients,
        );
    }
    if wanted("memory") {
        sep(&mut t);
        t.extend_from_slice(b"# Memory\r\n");
        // Nothing in manifold holds the data set: `used_memory` is the process's resident
        // memory, its peak the resident peak.
        let (rss, peak) = resident_bytes();
        let peak = peak.max(rss);
        let _ = write!(
            t,
            "used_memory:{rss}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_lua:{lua}\r\nnumber_of_cached_scripts:{cached}\r\nused_memory_scripts:0\r\n",
            bytes_human(rss),
            bytes_human(rss),
            bytes_human(peak),
            lua = shared.scripts.lua_memory(),
            cached = shared.scripts.cached(),
        );
        // In Redis's order: `maxmemory*`, then the fragmentation, the clients' buffers and
        // the allocator.
        let _ = write!(
            t,
            "maxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:{}\r\nmem_fragmentation_ratio:1.00\r\nmem_clients_slaves:0\r\nmem_clients_normal:{}\r\nmem_allocator:libc\r\n",
            shared.settings.maxmemory_policy(),
            shared
                .client_memory
                .used
                .load(std::sync::atomic::Ordering::Relaxed)
        );
    }
    if wanted("persistence") {
        sep(&mut t);
        // Keys are in InnoDB: no snapshot, no append-only file, nothing ever loading.
        let _ = write!(
            t,
            "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:ok\r\nrdb_last_bgsave_time_sec:-1\r\nrdb_current_bgsave_time_sec:-1\r\nrdb_saves:0\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:-1\r\naof_last_bgrewrite_status:ok\r\naof_rewrites:0\r\naof_last_write_status:ok\r\n",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs()
                .saturating_sub(shared.uptime_secs()),
        );
    }
    if let (true, Some(f)) = (wanted("stats"), &figures) {
        sep(&mut t);
        let tracking = shared.tracker.figures();
        let _ = write!(
            t,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:0\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:0\r\nevicted_clients:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\ntotal_error_replies:{}\r\ntotal_reads_processed:{}\r\ntotal_writes_processed:{}\r\n",
            f.connections,
            f.calls(),
            f.net_in,
            f.net_out,
            f.rejected_connections,
            f.expired_keys,
            shared
                .client_memory
                .evicted
                .load(std::sync::atomic::Ordering::Relaxed),
            shared.pubsub.channels(None).len(),
            shared.pubsub.numpat(),
            tracking.keys,
            tracking.items,
            tracking.prefixes,
            f.error_replies,
            f.reads,
            f.writes,
        );
    }
    if wanted("replication") {
        sep(&mut t);
        let _ = write!(
            t,
            "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n",
            run_id()
        );
    }
    if wanted("cpu") {
        sep(&mut t);
        t.extend_from_slice(b"# CPU\r\n");
        if let Some([user, sys, cuser, csys]) = cpu_seconds() {
            let _ = write!(
                t,
                "used_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{csys:.6}\r\nused_cpu_user_children:{cuser:.6}\r\n"
            );
        }
    }
    if wanted("modules") {
        sep(&mut t);
        t.extend_from_slice(b"# Modules\r\n");
    }
    if let (true, Some(f)) = (wanted("commandstats"), &figures) {
        sep(&mut t);
        t.extend_from_slice(b"# Commandstats\r\n");
        for c in &f.commands {
            let per_call = if c.calls == 0 {
                0.0
            } else {
                c.usec as f64 / c.calls as f64
            };
            let _ = write!(
                t,
                "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                c.name, c.calls, c.usec, c.rejected, c.failed
            );
        }
    }
    if let (true, Some(f)) = (wanted("errorstats"), &figures) {
        sep(&mut t);
        t.extend_from_slice(b"# Errorstats\r\n");
        for (kind, n) in crate::metrics::ERROR_KINDS.iter().zip(f.error_kinds) {
            if n > 0 {
                let _ = write!(t, "errorstat_{kind}:count={n}\r\n");
            }
        }
    }
    if wanted("latencystats") {
        sep(&mut t);
        t.extend_from_slice(b"# Latencystats\r\n");
    }
    if wanted("cluster") {
        sep(&mut t);
        t.extend_from_slice(b"# Cluster\r\ncluster_enabled:0\r\n");
    }
    if wanted("keyspace") {
        sep(&mut t);
        t.extend_from_slice(b"# Keyspace\r\n");
        for (db, keys, expires, avg_ttl) in dbs.unwrap_or_default() {
            let _ = write!(
                t,
                "db{db}:keys={keys},expires={expires},avg_ttl={avg_ttl}\r\n"
            );
        }
    }
    t
}

/// The process's resident memory and its peak (`VmRSS`, `VmHWM` of `/proc/self/status`),
/// 0 where the system does not tell them.
fn resident_bytes() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The process's CPU seconds (user, system, children's user, children's system) from
/// `/proc/self/stat` (in clock ticks of 1/100 s, Linux's `USER_HZ`).
fn cpu_seconds() -> Option<[f64; 4]> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name (in parentheses, which may hold spaces): fields from `state`.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime, stime, cutime, cstime are fields 14-17 of the line, 12-15 after the name.
    let tick = |i: usize| -> Option<f64> { Some(f.get(i)?.parse::<f64>().ok()? / 100.0) };
    Some([tick(11)?, tick(12)?, tick(13)?, tick(14)?])
}

/// This run's 40 hexadecimal digits (`run_id`, `master_replid`), chosen at the first `INFO`.
fn run_id() -> &'static str {
    use sha2::Digest;
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let digest = sha2::Sha256::digest(format!("{now} {}", std::process::id()));
        digest.iter().take(20).fold(String::new(), |mut hex, b| {
            let _ = std::fmt::Write::write_fmt(&mut hex, format_args!("{b:02x}"));
            hex
        })
    })
}

/// Redis's `bytesToHuman`: `B`, then `K`, `M`, `G`, `T`, `P` with two decimals.
fn bytes_human(n: u64) -> String {
    const UNITS: [&str; 5] = ["K", "M", "G", "T", "P"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.2}{}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::bytes_human;

    #[test]
    fn sizes_read_as_redis_writes_them() {
        assert_eq!(bytes_human(0), "0B");
        assert_eq!(bytes_human(1023), "1023B");
        assert_eq!(bytes_human(1024), "1.00K");
        assert_eq!(bytes_human(1536), "1.50K");
        assert_eq!(bytes_human(10 * 1024 * 1024), "10.00M");
        assert_eq!(bytes_human(3 << 30), "3.00G");
    }
}
