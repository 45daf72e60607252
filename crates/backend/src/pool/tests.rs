//! The pool against a real MariaDB (the test binary's shared topology, started by
//! `manifold-testkit`): lending and giving back, limits, budgets and followers.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::{Acquired, BackendBudget, Lease, Pool, PoolLimits};
use crate::config::{PoolConfig, TlsMode};
use crate::conn::{BackendTarget, ConnKey};
use crate::errors::ErrorKind;
use crate::state::{state_signature, SessionVars, UserVars};

const USER: &str = "pool_unit";

fn target() -> BackendTarget {
    static PRIMARY: OnceLock<String> = OnceLock::new();
    let addr = PRIMARY.get_or_init(|| {
        let t = manifold_testkit::Topology::shared();
        t.create_user(USER, USER).expect("create the test user");
        t.primary.addr().to_string()
    });
    BackendTarget {
        addr: addr.clone(),
        tls_mode: TlsMode::Disabled,
        tls: None,
        max_packet: 16 << 20,
    }
}

fn key() -> ConnKey {
    // utf8mb4_general_ci, no client flags.
    ConnKey::new(USER, USER, 0, 45, false)
}

/// A pool of at most `max_size` connections, none kept idle, not adaptive.
fn fixed(max_size: usize) -> PoolConfig {
    PoolConfig {
        max_size,
        min_idle: 0,
        adaptive: false,
        ..PoolConfig::default()
    }
}

fn pool_with(config: PoolConfig, budget: &Arc<BackendBudget>) -> Rc<Pool> {
    let limits = PoolLimits::new(&config);
    Pool::new(target(), config, limits, budget.clone())
}

fn pool(config: PoolConfig) -> Rc<Pool> {
    pool_with(config, &BackendBudget::new(0))
}

/// Runs `f` on a worker-like runtime: one thread, tasks spawned locally.
fn run<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tokio::task::LocalSet::new().block_on(&rt, f)
}

/// Lets the other tasks run until `done` holds; fails if it never does.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..100_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never happened: {what}");
}

async fn acquire(pool: &Rc<Pool>) -> Lease {
    pool.acquire(&key(), None, signature_of_fresh())
        .await
        .expect("a connection")
}

/// The state signature of a connection nothing has changed.
fn signature_of_fresh() -> u64 {
    state_signature(&SessionVars::default(), &UserVars::default())
}

async fn user_var(lease: &mut Lease) -> Option<Vec<u8>> {
    let rows = lease
        .conn()
        .query_rows(b"SELECT @pool_unit")
        .await
        .expect("the connection works")
        .expect("the query runs");
    rows.rows[0][0].clone()
}

#[test]
fn a_clean_lease_goes_back_as_it_is_and_is_lent_again() {
    run(async {
        let pool = pool(fixed(1));
        let mut a = acquire(&pool).await;
        assert!(!a.reused(), "opened for this borrow");
        let id = a.conn().connection_id;
        a.mark_clean();
        drop(a);
        let s = pool.stats();
        assert_eq!((s.in_use, s.idle, s.opened_total), (0, 1, 1));
        let mut b = acquire(&pool).await;
        assert!(b.reused());
        assert_eq!(b.conn().connection_id, id, "the same connection");
        assert_eq!(pool.stats().opened_total, 1);
    });
}

#[test]
fn a_dirty_lease_is_reset_before_anyone_else_borrows_it() {
    run(async {
        let pool = pool(fixed(1));
        let mut a = acquire(&pool).await;
        let id = a.conn().connection_id;
        a.conn()
            .query_rows(b"SET @pool_unit = 'left behind'")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(user_var(&mut a).await.as_deref(), Some(&b"left behind"[..]));
        // Not marked clean: the pool resets it (in a task of its own) before lending it.
        drop(a);
        let mut b = acquire(&pool).await;
        assert_eq!(b.conn().connection_id, id, "the same connection, reset");
        assert_eq!(user_var(&mut b).await, None);
    });
}

#[test]
fn a_discarded_lease_frees_its_slot() {
    run(async {
        let pool = pool(fixed(1));
        let a = acquire(&pool).await;
        a.discard();
        assert_eq!(pool.stats().open(), 0);
        let _b = acquire(&pool).await;
        assert_eq!(pool.stats().opened_total, 2, "a new connection in the slot");
    });
}

#[test]
fn at_max_size_borrowers_wait_and_are_served_first_come_first_served() {
    run(async {
        let pool = pool(fixed(1));
        let mut held = acquire(&pool).await;
        held.mark_clean();
        let order = Rc::new(RefCell::new(Vec::new()));
        let waiters: Vec<_> = ["first", "second", "third"]
            .into_iter()
            .map(|name| {
                let (pool, order) = (pool.clone(), order.clone());
                tokio::task::spawn_local(async move {
                    let mut l = acquire(&pool).await;
                    order.borrow_mut().push(name);
                    l.mark_clean();
                })
            })
            .collect();
        until("three borrowers wait", || pool.stats().waiting == 3).await;
        assert_eq!(pool.stats().in_use, 1);
        drop(held);
        for w in waiters {
            w.await.unwrap();
        }
        assert_eq!(*order.borrow(), ["first", "second", "third"]);
        assert_eq!(pool.stats().opened_total, 1, "one connection served all");
    });
}

#[test]
fn a_borrower_that_waits_too_long_gets_an_error_naming_the_limit() {
    run(async {
        let pool = pool(PoolConfig {
            wait_timeout: Duration::from_millis(50),
            ..fixed(1)
        });
        let _held = acquire(&pool).await;
        let e = pool
            .acquire(&key(), None, signature_of_fresh())
            .await
            .err()
            .expect("no connection for the second borrower");
        assert!(matches!(e.kind, ErrorKind::PoolTimeout), "{e:?}");
        assert!(e.message.contains("pool.max_size 1"), "{}", e.message);
        assert_eq!(pool.stats().waiting, 0, "the waiter left");
    });
}

#[test]
fn a_lowered_max_size_closes_connections_as_they_come_back() {
    run(async {
        let pool = pool(fixed(2));
        let mut a = acquire(&pool).await;
        let mut b = acquire(&pool).await;
        pool.limits.set(1, 0).unwrap();
        a.mark_clean();
        b.mark_clean();
        drop(a);
        assert_eq!(pool.stats().open(), 1, "above the new max_size: closed");
        drop(b);
        assert_eq!(pool.stats().open(), 1, "within it: kept");
    });
}

#[test]
fn the_adaptive_limit_gates_lending_below_max_size() {
    run(async {
        let pool = pool(PoolConfig {
            max_size: 10,
            min_idle: 0,
            min_limit: 2,
            ..PoolConfig::default()
        });
        assert_eq!(pool.limit(), 2, "it starts at its floor");
        let mut a = acquire(&pool).await;
        let _b = acquire(&pool).await;
        let third = {
            let pool = pool.clone();
            tokio::task::spawn_local(async move {
                let mut l = acquire(&pool).await;
                l.mark_clean();
            })
        };
        until("the third borrower waits", || pool.stats().waiting == 1).await;
        assert_eq!(pool.stats().in_use, 2, "two lent, below max_size 10");
        a.mark_clean();
        drop(a);
        third.await.unwrap();
        assert!(pool.limit() <= 10);
    });
}

#[test]
fn a_pool_over_its_share_of_the_budget_gives_a_connection_to_a_starving_one() {
    run(async {
        // Two workers' pools to one backend, one connection between them.
        let budget = BackendBudget::new(1);
        let a = pool_with(fixed(4), &budget);
        let b = pool_with(fixed(4), &budget);
        let mut held = acquire(&a).await;
        held.mark_clean();
        assert_eq!(budget.open(), 1);
        let starving = {
            let b = b.clone();
            tokio::task::spawn_local(async move {
                let mut l = acquire(&b).await;
                l.mark_clean();
                l.conn().connection_id
            })
        };
        until("the other pool waits for budget", || b.stats().waiting == 1).await;
        // Coming back while another pool starves: closed, its budget handed over.
        drop(held);
        let id = starving.await.unwrap();
        assert!(id != 0);
        assert_eq!(a.stats().open(), 0);
        assert_eq!(b.stats().open(), 1);
        assert_eq!(budget.open(), 1, "never more than the budget");
    });
}

/// A command as a client sends it: `COM_QUERY` in one packet.
fn com_query(sql: &str) -> Vec<u8> {
    let len = u32::try_from(sql.len() + 1).unwrap().to_le_bytes();
    let mut p = vec![len[0], len[1], len[2], 0, 0x03];
    p.extend_from_slice(sql.as_bytes());
    p
}

/// What a borrower that waited with a command got.
struct Got {
    /// Its command rode behind another's: its answer is next on the connection.
    followed: bool,
    connection_id: u32,
    /// Other followers' answers come after its own on the connection.
    others_behind: bool,
}

/// A borrower waiting with a command that may follow another's: it registers as a follower.
/// It gives the connection back (as it is) at once.
fn follower(pool: &Rc<Pool>, sql: &str) -> tokio::task::JoinHandle<Got> {
    let pool = pool.clone();
    let command = com_query(sql);
    tokio::task::spawn_local(async move {
        let (followed, mut l) = match pool
            .acquire_or_follow(&key(), None, signature_of_fresh(), &command)
            .await
            .expect("a connection")
        {
            Acquired::Followed(l, sent) => {
                assert_eq!(
                    sent, command,
                    "the command written behind comes back with it"
                );
                (true, l)
            }
            Acquired::Lease(l) => (false, l),
        };
        l.mark_clean();
        Got {
            followed,
            connection_id: l.conn().connection_id,
            others_behind: l.conn().has_followers(),
        }
    })
}

#[test]
fn claimed_followers_get_the_connection_in_turn_with_their_commands_written_behind() {
    run(async {
        let pool = pool(fixed(1));
        let mut lead = acquire(&pool).await;
        assert!(lead.conn().tracking, "MariaDB reports session state");
        let first = follower(&pool, "SELECT 1");
        let second = follower(&pool, "SELECT 2");
        until("two followers wait", || pool.stats().waiting == 2).await;
        assert!(pool.has_followers());
        let mut out = com_query("SELECT 0");
        let taken = pool.claim_followers(lead.conn(), 8, &mut out);
        assert_eq!(taken, 2);
        let mut expected = com_query("SELECT 0");
        expected.extend(com_query("SELECT 1"));
        expected.extend(com_query("SELECT 2"));
        assert_eq!(out, expected, "their commands behind the lead's, in order");
        assert!(!pool.has_followers(), "claimed: no longer waiting to be");
        // Nothing was written here: the answers are not read, only the hand-over is tested.
        lead.mark_clean();
        drop(lead);
        let first = first.await.unwrap();
        assert!(first.followed, "the first follower's answer is next");
        assert!(first.others_behind, "the second still behind");
        let second = second.await.unwrap();
        assert!(second.followed);
        assert!(!second.others_behind);
        assert_eq!(first.connection_id, second.connection_id);
        let s = pool.stats();
        assert_eq!((s.in_use, s.idle, s.opened_total), (0, 1, 1));
    });
}

#[test]
fn claiming_respects_the_depth_and_the_connection_state() {
    run(async {
        let pool = pool(fixed(1));
        let mut lead = acquire(&pool).await;
        let a = follower(&pool, "SELECT 1");
        let b = follower(&pool, "SELECT 2");
        until("two followers wait", || pool.stats().waiting == 2).await;
        let mut out = Vec::new();
        assert_eq!(pool.claim_followers(lead.conn(), 1, &mut out), 1);
        assert_eq!(out, com_query("SELECT 1"), "the oldest first");
        // The connection's state is no longer what the other follower wants.
        lead.conn()
            .query_rows(b"SET @pool_unit = 1")
            .await
            .unwrap()
            .unwrap();
        lead.conn().user_vars.set(b"pool_unit", b"1");
        let mut out = Vec::new();
        assert_eq!(pool.claim_followers(lead.conn(), 8, &mut out), 0);
        assert!(out.is_empty());
        // Dirty with a follower claimed: its state cannot be reset under an answer on its
        // way, so the connection closes and the follower borrows again.
        drop(lead);
        let a = a.await.unwrap();
        assert!(!a.followed, "sent again on a connection of its own");
        assert!(!b.await.unwrap().followed, "never claimed");
        assert_eq!(pool.stats().opened_total, 2, "the lead's connection closed");
    });
}

#[test]
fn a_discarded_connection_sends_its_followers_elsewhere() {
    run(async {
        let pool = pool(fixed(1));
        let mut lead = acquire(&pool).await;
        lead.mark_clean();
        let f = follower(&pool, "SELECT 1");
        until("a follower waits", || pool.stats().waiting == 1).await;
        let mut out = Vec::new();
        assert_eq!(pool.claim_followers(lead.conn(), 8, &mut out), 1);
        let broken_id = lead.conn().connection_id;
        lead.discard();
        let f = f.await.unwrap();
        assert!(!f.followed, "its command goes again on another connection");
        assert_ne!(f.connection_id, broken_id);
        assert_eq!(pool.stats().opened_total, 2);
    });
}

#[test]
fn connections_held_without_coming_back_do_not_starve_the_other_borrowers() {
    run(async {
        let pool = pool(PoolConfig {
            max_size: 10,
            min_idle: 0,
            min_limit: 1,
            ..PoolConfig::default()
        });
        // A session pinned to its connection, idle: it never comes back while the others
        // wait.
        let _pinned = acquire(&pool).await;
        assert_eq!(pool.limit(), 1);
        let others: Vec<_> = (0..2)
            .map(|_| {
                let pool = pool.clone();
                tokio::task::spawn_local(async move { acquire(&pool).await })
            })
            .collect();
        // Held too, so that each needs a connection of its own.
        let mut held = Vec::new();
        for o in others {
            held.push(o.await.unwrap());
        }
        assert_eq!(pool.limit(), 3, "grown by one per stall");
        assert_eq!(pool.stats().in_use, 3);
    });
}

/// A follower of `SELECT 1` claimed behind `lead`'s `slow` statement (both written), once it
/// is out of patience and waiting for a free connection.
async fn out_of_patience_behind(
    pool: &Rc<Pool>,
    lead: &mut Lease,
    slow: &str,
) -> tokio::task::JoinHandle<Got> {
    use tokio::io::AsyncWriteExt;
    let waiting = follower(pool, "SELECT 1");
    until("a follower waits", || pool.stats().waiting == 1).await;
    let mut out = com_query(slow);
    assert_eq!(pool.claim_followers(lead.conn(), 8, &mut out), 1);
    lead.conn().io.stream.write_all(&out).await.unwrap();
    until(
        "the claimed follower stops waiting for a connection",
        || pool.stats().waiting == 0,
    )
    .await;
    for _ in 0..5_000 {
        if pool.stats().waiting == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(
        pool.stats().waiting,
        1,
        "out of patience, it waits for a connection"
    );
    waiting
}

#[test]
fn a_follower_behind_a_slow_answer_gives_up_its_place_and_its_answer_is_dropped() {
    run(async {
        let pool = pool(fixed(2));
        let mut lead = acquire(&pool).await;
        let mut other = acquire(&pool).await;
        let other_id = other.conn().connection_id;
        // Out of patience behind the slow answer, it waits like any borrower instead.
        let waiting = out_of_patience_behind(&pool, &mut lead, "SELECT SLEEP(1)").await;
        other.mark_clean();
        drop(other);
        let got = waiting.await.unwrap();
        assert!(
            !got.followed,
            "it sends its command again on a connection of its own"
        );
        assert_eq!(got.connection_id, other_id);
        // The lead reads its own answer; the one left behind it is nobody's.
        lead.conn().skip_answer().await.unwrap();
        lead.mark_clean();
        drop(lead);
        until("the dropped answer is read and the connection idle", || {
            let s = pool.stats();
            (s.in_use, s.idle) == (0, 2)
        })
        .await;
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut l = acquire(&pool).await;
            let rows = l.conn().query_rows(b"SELECT 42").await.unwrap().unwrap();
            assert_eq!(
                rows.rows,
                vec![vec![Some(b"42".to_vec())]],
                "no stale answer"
            );
            l.mark_clean();
            // Held until both were checked.
            held.push(l);
        }
    });
}

#[test]
fn a_follower_out_of_patience_still_takes_its_turn_when_no_connection_is_free() {
    run(async {
        let pool = pool(fixed(1));
        let mut lead = acquire(&pool).await;
        // Past its patience it also waits for a free connection; none comes first.
        let waiting = out_of_patience_behind(&pool, &mut lead, "SELECT SLEEP(0.5)").await;
        lead.conn().skip_answer().await.unwrap();
        lead.mark_clean();
        drop(lead);
        let got = waiting.await.unwrap();
        assert!(got.followed, "its answer came first: it reads it");
        let s = pool.stats();
        assert_eq!((s.in_use, s.idle, s.opened_total, s.waiting), (0, 1, 1, 0));
    });
}

#[test]
fn a_claimed_follower_whose_answer_and_connection_never_come_times_out() {
    run(async {
        use tokio::io::AsyncWriteExt;
        let pool = pool(PoolConfig {
            wait_timeout: Duration::from_millis(300),
            ..fixed(1)
        });
        let mut lead = acquire(&pool).await;
        let command = com_query("SELECT 1");
        let waiting = {
            let pool = pool.clone();
            tokio::task::spawn_local(async move {
                pool.acquire_or_follow(&key(), None, signature_of_fresh(), &command)
                    .await
                    .map(|_| ())
            })
        };
        until("a follower waits", || pool.stats().waiting == 1).await;
        let mut out = com_query("SELECT SLEEP(5)");
        assert_eq!(pool.claim_followers(lead.conn(), 8, &mut out), 1);
        lead.conn().io.stream.write_all(&out).await.unwrap();
        // The lead never reads its answer (its client stopped reading, say).
        let got = tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .expect("the follower gives up at pool.wait_timeout")
            .unwrap();
        assert!(
            matches!(&got, Err(e) if e.kind == ErrorKind::PoolTimeout),
            "{:?}",
            got.err()
        );
        lead.discard();
        let s = pool.stats();
        assert_eq!((s.in_use, s.waiting), (0, 0));
    });
}
