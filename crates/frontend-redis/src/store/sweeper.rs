//! The active expiry sweeper: deletes keys past their expiry that nobody touches (a command
//! that touches one treats it as absent, and a write deletes it, in [`super::keys`]), and
//! the members a string write left behind under a collection's `kid` (`gc`).
//!
//! - One worker sweeps (worker 0): its task wakes every [`TICK`], and does nothing until a
//!   client's batch made sure the door's tables exist (the sweeper never creates them). It
//!   runs as manifold's own login (`redis.user`, else the monitor's: [`OwnLogin`]), never a
//!   client's: a client's grants do not decide whether keys expire, and its login is not
//!   used for statements it did not send.
//! - A tick reads at most [`BATCH`] expired keys, earliest first (`SELECT db, kh, kid, type,
//!   gc ... WHERE expire_at <= ? ORDER BY expire_at LIMIT 100`), and claims each in a short
//!   transaction: its row read again `FOR UPDATE`, deleted only if still that key and still
//!   expired by the clock now, its member types recorded in `redis_gc` in the same
//!   transaction. No member of a live key is ever touched, and none is left without a record.
//! - Then the members of `redis_gc`'s keys are deleted in chunks (`DELETE FROM
//!   {s}.redis_hash WHERE kid = ? LIMIT 1000`, again while a chunk was full), each chunk
//!   committing on its own, and the entry last; a sweep cut short goes on at the next tick.
//! - A full batch is followed at once by another (Redis's adaptive expiry), within a budget
//!   of statements per tick ([`STATEMENTS_PER_TICK`]) so one tick stays short.
//! - Then rows with `gc` set: their old members are deleted in chunks, then `gc = NULL`
//!   if it still holds that type.
//! - An error is logged (a warning for the first of a run of failures, as a login without
//!   the privileges it needs fails every time; debug level after) and the next tick waits
//!   longer (doubling up to [`MAX_BACKOFF`]); the task ends when the worker drains.
//!
//! Counters ([`Stats`]) are kept in the worker's figures ([`crate::metrics`]).

use std::rc::Rc;
use std::time::Duration;

use manifold_backend::{ConnKey, Param};
use manifold_engine::{Drain, WorkerContext};
use manifold_mysql_proto::packets::Value;

use super::keys::kind;
use super::{int, Store, StoreError, Tx, TxHost};
use crate::metrics::Counter;

/// How often the sweeper wakes.
pub const TICK: Duration = Duration::from_millis(100);
/// The longest wait after errors.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Keys read per batch.
pub const BATCH: usize = 100;
/// Members deleted per statement.
pub const CHUNK: u64 = 1000;
/// Statements one tick may run (each deletes at most [`CHUNK`] rows).
pub const STATEMENTS_PER_TICK: usize = 200;

/// What the sweeper did since the worker started.
#[derive(Debug, Default)]
pub struct Stats {
    /// Expired keys deleted.
    pub keys: Counter,
    /// Member rows deleted (of expired keys and of `gc`).
    pub members: Counter,
    /// Batches that found work.
    pub batches: Counter,
    /// Keys whose `gc` was collected.
    pub gc: Counter,
    /// Ticks that failed.
    pub errors: Counter,
}

fn add(c: &Counter, n: u64) {
    c.set(c.get().saturating_add(n));
}

/// manifold's own login on the door's tables, the one the sweeper runs as. Its `Debug` does
/// not show it.
pub struct OwnLogin(pub ConnKey);

impl std::fmt::Debug for OwnLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnLogin(..)")
    }
}

impl Store {
    /// The login the sweeper runs as, once the door's tables are known to exist.
    pub fn sweep_login(&self) -> Option<&ConnKey> {
        self.shared.is_ready().then_some(&self.shared.own_login.0)
    }
}

/// Starts the sweeper on `ctx`'s worker if it is worker 0 (call from within its `LocalSet`).
pub fn spawn<W: TxHost + 'static>(worker: &Rc<W>, ctx: &Rc<WorkerContext>) {
    if ctx.id() == 0 {
        tokio::task::spawn_local(run(worker.clone(), ctx.clone()));
    }
}

/// Sweeps every [`TICK`] until the worker drains.
pub async fn run<W: TxHost>(worker: Rc<W>, ctx: Rc<WorkerContext>) {
    let mut wait = TICK;
    let mut failing = false;
    loop {
        tokio::select! {
            biased;
            () = ctx.drain().notified() => return,
            () = tokio::time::sleep(wait) => {}
        }
        let Some(login) = worker.store().sweep_login() else {
            continue;
        };
        match tick(&*worker, login, ctx.drain()).await {
            Ok(()) => {
                wait = TICK;
                failing = false;
            }
            Err(e) => {
                add(&worker.metrics().sweep.errors, 1);
                wait = (wait * 2).min(MAX_BACKOFF);
                let error = String::from_utf8_lossy(&e.reply_text()).into_owned();
                let retry_ms = wait.as_millis() as u64;
                if failing {
                    tracing::debug!(target: "manifold::redis", %error, retry_ms, "redis expiry sweep failed");
                } else {
                    tracing::warn!(
                        target: "manifold::redis",
                        %error,
                        user = %login.user,
                        retry_ms,
                        "redis expiry sweep failed (it runs as redis.user, else the monitor's login, which needs SELECT, INSERT, UPDATE and DELETE on redis.schema)"
                    );
                }
                failing = true;
            }
        }
    }
}

/// One tick: expired keys, batch after full batch, then `gc`, within the statement budget.
pub async fn tick(worker: &dyn TxHost, login: &ConnKey, drain: &Drain) -> Result<(), StoreError> {
    let mut budget = STATEMENTS_PER_TICK;
    let mut tx = Tx::new(worker, login, false);
    while budget > 0 && !drain.is_draining() {
        if !expired_batch(worker, login, &mut tx, &mut budget, drain).await? {
            break;
        }
    }
    while budget > 0 && !drain.is_draining() {
        if !orphans_batch(&mut tx, &worker.metrics().sweep, &mut budget, drain).await? {
            break;
        }
    }
    while budget > 0 && !drain.is_draining() {
        if !gc_batch(&mut tx, &worker.metrics().sweep, &mut budget, drain).await? {
            break;
        }
    }
    tx.commit().await
}

/// [`BATCH`] expired keys, earliest first.
const EXPIRED: &str = "SELECT db, kh, kid, type, gc FROM {s}.redis_keys WHERE expire_at <= ? \
                       ORDER BY expire_at LIMIT 100";
/// [`BATCH`] keys with members to collect. A type whose members are the key's own is never
/// collected (`gc <> type`).
const GC: &str = "SELECT db, kh, kid, type, gc FROM {s}.redis_keys \
                  WHERE gc IS NOT NULL AND gc <> type LIMIT 100";

/// A row of the sweeper's reads: `db, kh, kid, type, gc`.
struct Candidate {
    db: u8,
    kh: Vec<u8>,
    kid: u64,
    gc: Option<u8>,
}

impl Candidate {
    fn from_row(row: &mut [Value]) -> Option<Candidate> {
        if row.len() < 5 {
            return None;
        }
        Some(Candidate {
            db: u8::try_from(int(&row[0])?).ok()?,
            kh: super::take_bytes(&mut row[1])?,
            kid: u64::try_from(int(&row[2])?).ok()?,
            gc: int(&row[4]).and_then(|t| u8::try_from(t).ok()),
        })
    }
}

/// Deletes one batch of expired keys; whether it was full (so another may follow).
///
/// Each key is claimed first, in a short transaction of its own: its row is read again with
/// `FOR UPDATE` and deleted only if it is still that key and still expired by the sweeper's
/// clock now (a batch that read the clock earlier may have seen it live and given it a new
/// TTL), and its members are handed to `redis_gc` in the same transaction. They belong to
/// nobody from then on, and [`orphans_batch`] deletes them in chunks.
async fn expired_batch(
    worker: &dyn TxHost,
    login: &ConnKey,
    tx: &mut Tx<'_>,
    budget: &mut usize,
    drain: &Drain,
) -> Result<bool, StoreError> {
    let stats = &worker.metrics().sweep;
    *budget = budget.saturating_sub(1);
    let mut rows = tx.rows(EXPIRED, &[Param::Int(super::now_ms())]).await?;
    if rows.is_empty() {
        return Ok(false);
    }
    add(&stats.batches, 1);
    let full = rows.len() >= BATCH;
    for row in &mut rows {
        let Some(c) = Candidate::from_row(row) else {
            continue;
        };
        if *budget < 4 || drain.is_draining() {
            return Ok(false);
        }
        *budget -= 4;
        let mut claim = Tx::new(worker, login, true);
        let key = [
            Param::UInt(u64::from(c.db)),
            Param::Bytes(&c.kh),
            Param::UInt(c.kid),
        ];
        let now = super::now_ms();
        let still = claim
            .rows(
                "SELECT type, gc, k FROM {s}.redis_keys WHERE db = ? AND kh = ? AND kid = ? \
                 AND expire_at <= ? FOR UPDATE",
                &[key[0], key[1], key[2], Param::Int(now)],
            )
            .await?;
        let Some(found) = still.first() else {
            claim.commit().await?;
            continue;
        };
        let types = [int(&found[0]), int(&found[1])];
        // `expired` is published once the claim commits (keyspace notifications).
        if let Some(Value::Bytes(k)) = found.get(2) {
            let k = k.clone();
            claim.notify(super::events::class::EXPIRED, "expired", c.db, &k);
        }
        claim
            .exec(
                "DELETE FROM {s}.redis_keys WHERE db = ? AND kh = ? AND kid = ?",
                &key,
            )
            .await?;
        for t in types.into_iter().flatten() {
            if !chunk_deletes(u8::try_from(t).unwrap_or(kind::STRING)).is_empty() {
                claim
                    .exec(
                        "INSERT IGNORE INTO {s}.redis_gc (kid, type) VALUES (?, ?)",
                        &[Param::UInt(c.kid), Param::Int(t)],
                    )
                    .await?;
            }
        }
        claim.commit().await?;
        add(&stats.keys, 1);
    }
    Ok(full)
}

/// Members of keys the sweeper deleted (`redis_gc`): one batch, in chunks; whether it was
/// full.
async fn orphans_batch(
    tx: &mut Tx<'_>,
    stats: &Stats,
    budget: &mut usize,
    drain: &Drain,
) -> Result<bool, StoreError> {
    *budget = budget.saturating_sub(1);
    let rows = tx
        .rows("SELECT kid, type FROM {s}.redis_gc LIMIT 100", &[])
        .await?;
    if rows.is_empty() {
        return Ok(false);
    }
    let full = rows.len() >= BATCH;
    for row in &rows {
        let (Some(kid), Some(t)) = (
            int(&row[0]).and_then(|k| u64::try_from(k).ok()),
            int(&row[1]).and_then(|t| u8::try_from(t).ok()),
        ) else {
            continue;
        };
        if !delete_members(tx, stats, t, kid, budget, drain).await?
            || *budget == 0
            || drain.is_draining()
        {
            // Cut short: the entry stays, the next tick goes on with it.
            return Ok(false);
        }
        *budget -= 1;
        tx.exec(
            "DELETE FROM {s}.redis_gc WHERE kid = ? AND type = ?",
            &[Param::UInt(kid), Param::UInt(u64::from(t))],
        )
        .await?;
    }
    Ok(full)
}

/// Collects one batch of `gc`: whether it was full.
async fn gc_batch(
    tx: &mut Tx<'_>,
    stats: &Stats,
    budget: &mut usize,
    drain: &Drain,
) -> Result<bool, StoreError> {
    *budget = budget.saturating_sub(1);
    let mut rows = tx.rows(GC, &[]).await?;
    if rows.is_empty() {
        return Ok(false);
    }
    add(&stats.batches, 1);
    let full = rows.len() >= BATCH;
    for row in &mut rows {
        let Some(Candidate {
            kid, gc: Some(t), ..
        }) = Candidate::from_row(row)
        else {
            continue;
        };
        if !delete_members(tx, stats, t, kid, budget, drain).await?
            || *budget == 0
            || drain.is_draining()
        {
            return Ok(false);
        }
        *budget -= 1;
        let cleared = tx
            .affected(
                "UPDATE {s}.redis_keys SET gc = NULL WHERE kid = ? AND gc = ?",
                &[Param::UInt(kid), Param::UInt(u64::from(t))],
            )
            .await?;
        add(&stats.gc, cleared);
    }
    Ok(full)
}

/// The statements deleting [`CHUNK`] rows of type `t` under a `kid`, one table each (none
/// for a string).
fn chunk_deletes(t: u8) -> &'static [&'static str] {
    match t {
        kind::LIST => &["DELETE FROM {s}.redis_list WHERE kid = ? LIMIT 1000"],
        kind::SET => &["DELETE FROM {s}.redis_set WHERE kid = ? LIMIT 1000"],
        kind::ZSET => &["DELETE FROM {s}.redis_zset WHERE kid = ? LIMIT 1000"],
        kind::HASH => &["DELETE FROM {s}.redis_hash WHERE kid = ? LIMIT 1000"],
        // A stream's pending entries, consumers and groups may be as many as its entries:
        // each table in chunks too, its state last.
        kind::STREAM => &[
            "DELETE FROM {s}.redis_stream_pending WHERE kid = ? LIMIT 1000",
            "DELETE FROM {s}.redis_stream_consumer WHERE kid = ? LIMIT 1000",
            "DELETE FROM {s}.redis_stream_group WHERE kid = ? LIMIT 1000",
            "DELETE FROM {s}.redis_stream WHERE kid = ? LIMIT 1000",
            "DELETE FROM {s}.redis_stream_meta WHERE kid = ? LIMIT 1000",
        ],
        _ => &[],
    }
}

/// Deletes the members of type `t` under `kid` (and a stream's other rows) in chunks of
/// [`CHUNK`], each chunk one statement of the budget; whether all are gone (`false`: the
/// budget ran out or the worker drains first, and the next tick starts again).
async fn delete_members(
    tx: &mut Tx<'_>,
    stats: &Stats,
    t: u8,
    kid: u64,
    budget: &mut usize,
    drain: &Drain,
) -> Result<bool, StoreError> {
    for &sql in chunk_deletes(t) {
        loop {
            if *budget == 0 || drain.is_draining() {
                return Ok(false);
            }
            *budget -= 1;
            let n = tx.affected(sql, &[Param::UInt(kid)]).await?;
            add(&stats.members, n);
            if n < CHUNK {
                break;
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_read_their_row_or_nothing() {
        let mut row = vec![
            Value::Int(3),
            Value::Bytes(vec![7; 32]),
            Value::UInt(42),
            Value::Int(i64::from(kind::HASH)),
            Value::Null,
        ];
        let c = Candidate::from_row(&mut row).expect("a row");
        assert_eq!((c.db, c.kid, c.gc), (3, 42, None));
        assert_eq!(c.kh, vec![7; 32]);
        assert!(Candidate::from_row(&mut [Value::Int(1)]).is_none());
        let mut bad = vec![
            Value::Int(300),
            Value::Bytes(vec![]),
            Value::Int(1),
            Value::Int(0),
            Value::Null,
        ];
        assert!(Candidate::from_row(&mut bad).is_none());
    }

    #[test]
    fn statements_take_the_sizes_the_loops_count_on() {
        // A chunk shorter than CHUNK ends the loop: the LIMIT must be CHUNK.
        for t in [kind::LIST, kind::SET, kind::ZSET, kind::HASH, kind::STREAM] {
            let sqls = chunk_deletes(t);
            for sql in sqls {
                assert!(sql.ends_with(&format!("LIMIT {CHUNK}")), "{sql}");
            }
            let table = super::super::keys::members_table(t).expect("a members table");
            assert!(
                sqls.iter()
                    .any(|sql| sql.contains(&format!("{{s}}.{table} "))),
                "{sqls:?}"
            );
        }
        // Every table a stream's rows are in, each deleted in chunks.
        for sql in super::super::keys::STREAM_STATE_DELETES {
            let table = sql.split_whitespace().nth(2).unwrap();
            assert!(
                chunk_deletes(kind::STREAM)
                    .iter()
                    .any(|c| c.split_whitespace().nth(2) == Some(table)),
                "{table}"
            );
        }
        assert!(chunk_deletes(kind::STRING).is_empty());
        // A batch of BATCH rows is full: another follows at once.
        assert!(EXPIRED.ends_with(&format!("LIMIT {BATCH}")));
        assert!(GC.ends_with(&format!("LIMIT {BATCH}")));
    }

    #[test]
    fn the_own_login_is_not_shown() {
        let l = OwnLogin(ConnKey::new("u", "secret", 0, 63, false));
        assert_eq!(format!("{l:?}"), "OwnLogin(..)");
    }
}
