//! The table's rules, on tokio's paused clock where time matters.

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn throttle(threshold: u32, max: u64) -> LoginThrottle {
    LoginThrottle::new(&LoginThrottleConfig {
        failed_login_threshold: threshold,
        max_login_delay: Duration::from_secs(max),
    })
}

/// A failed attempt of `user` from `addr`, admitted without waiting.
fn fail(t: &LoginThrottle, addr: &str, user: &str) {
    t.attempt(ip(addr), user.as_bytes()).failed(Door::Mysql);
}

fn succeed(t: &LoginThrottle, addr: &str, user: &str) {
    t.attempt(ip(addr), user.as_bytes()).succeeded();
}

/// The delay `user`'s next attempt from `addr` would wait.
fn next_delay(t: &LoginThrottle, addr: &str, user: &str) -> u64 {
    let table = t.lock();
    let user = t.attempt(ip(addr), user.as_bytes()).user.hash;
    table
        .get(&key(ip(addr)))
        .map_or(0, |e| t.delay(e, user).as_secs())
}

#[test]
fn delays_double_from_the_threshold_up_to_the_cap() {
    let t = throttle(3, 30);
    let d: Vec<u64> = (0..10).map(|f| t.delay_past(f, 3).as_secs()).collect();
    assert_eq!(d, [0, 0, 0, 1, 2, 4, 8, 16, 30, 30]);
    assert_eq!(t.delay_past(u32::MAX, 3), Duration::from_secs(30));
    t.set_threshold(0);
    assert_eq!(t.delay_past(10, 0), Duration::ZERO);
    t.set_threshold(1);
    t.set_max_delay(Duration::ZERO);
    assert_eq!(t.delay_past(10, 1), Duration::ZERO);
}

/// The attack of a user with an account of its own: two guesses at the victim, one login
/// of its own, again. Its own success forgives only its own failures.
#[test]
fn a_success_resets_only_its_users_failures() {
    let t = throttle(3, 30);
    for _ in 0..3 {
        fail(&t, "10.0.0.1", "victim");
        fail(&t, "10.0.0.1", "victim");
        succeed(&t, "10.0.0.1", "attacker");
    }
    assert_eq!(next_delay(&t, "10.0.0.1", "victim"), 8);
    assert_eq!(next_delay(&t, "10.0.0.1", "attacker"), 0);
    // Not held up from another address, nor as another user.
    assert_eq!(next_delay(&t, "10.0.0.2", "victim"), 0);
    assert!(t.try_admit(ip("10.0.0.1"), b"victim").is_none());
    assert!(t.try_admit(ip("10.0.0.1"), b"neighbour").is_some());
    assert_eq!(t.delayed_addresses(), 1);
    assert_eq!(t.failures(Door::Mysql), 6);
    let rows = t.failures_now();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].user.as_str(),
            rows[0].failures,
            rows[0].address_failures
        ),
        ("victim", 6, 3)
    );
    // The victim's own login forgives it; the address is forgotten.
    succeed(&t, "10.0.0.1", "victim");
    assert!(t.failures_now().is_empty());
    assert!(t.empty());
}

/// Password spraying: a guess or two at many users from one address delays the address,
/// while one user failing on and on delays that user alone.
#[test]
fn spraying_many_users_delays_the_address() {
    let t = throttle(3, 30);
    for _ in 0..100 {
        fail(&t, "10.0.0.1", "stuck");
    }
    assert_eq!(next_delay(&t, "10.0.0.1", "stuck"), 30);
    assert_eq!(
        next_delay(&t, "10.0.0.1", "neighbour"),
        0,
        "one user's count is capped"
    );
    // 3 (stuck, capped) + 6 users x 3 + 1 = 22 counted, 8 users kept apart.
    for i in 0..6 {
        for _ in 0..3 {
            fail(&t, "10.0.0.1", &format!("user{i}"));
        }
    }
    fail(&t, "10.0.0.1", "once");
    assert_eq!(next_delay(&t, "10.0.0.1", "once"), 0);
    assert_eq!(next_delay(&t, "10.0.0.1", "neighbour"), 0);
    // 8 more users, one guess each, share one count: 30 counted delay the whole address,
    // and the shared count (8) delays every user without a place of its own.
    for i in 0..8 {
        fail(&t, "10.0.0.1", &format!("more{i}"));
    }
    assert_eq!(
        next_delay(&t, "10.0.0.1", "once"),
        1,
        "the address's own count"
    );
    assert_eq!(
        next_delay(&t, "10.0.0.1", "neighbour"),
        30,
        "the shared count"
    );
    // Logging in as oneself takes back one's own share only.
    succeed(&t, "10.0.0.1", "user0");
    assert_eq!(next_delay(&t, "10.0.0.1", "once"), 0);
    assert_eq!(next_delay(&t, "10.0.0.1", "neighbour"), 30);
}

/// Naming many users does not push the victim's count out: an address keeps
/// MAX_USERS_PER_ADDRESS users apart, and the rest share one count.
#[test]
fn users_per_address_are_bounded_and_never_evicted() {
    let t = throttle(3, 30);
    for _ in 0..3 {
        fail(&t, "10.0.0.1", "victim");
    }
    for i in 0..500 {
        fail(&t, "10.0.0.1", &format!("u{i}"));
    }
    {
        let table = t.lock();
        let e = &table[&ip("10.0.0.1")];
        assert_eq!(e.users.len(), MAX_USERS_PER_ADDRESS);
        assert_eq!(e.others, 500 - (MAX_USERS_PER_ADDRESS as u32 - 1));
    }
    assert!(next_delay(&t, "10.0.0.1", "victim") > 0);
    // An untracked user shares the others' count; its success forgives nothing.
    assert_eq!(next_delay(&t, "10.0.0.1", "u400"), 30);
    succeed(&t, "10.0.0.1", "u400");
    assert_eq!(next_delay(&t, "10.0.0.1", "u400"), 30);
    // A long name is shown cut, and still told apart by its whole.
    let long = "x".repeat(100);
    fail(&t, "10.0.0.3", &long);
    assert_eq!(next_delay(&t, "10.0.0.3", &"x".repeat(99)), 0);
    assert_eq!(
        t.failures_now()
            .iter()
            .find(|r| r.address == "10.0.0.3")
            .unwrap()
            .user,
        "x".repeat(NAME_SHOWN)
    );
}

#[test]
fn an_ipv6_host_is_its_64_and_mapped_ipv4_is_ipv4() {
    let t = throttle(2, 30);
    fail(&t, "2001:db8::1", "u");
    fail(&t, "2001:db8::ffff:2", "u");
    assert!(next_delay(&t, "2001:db8::3", "u") > 0);
    assert_eq!(next_delay(&t, "2001:db8:0:1::3", "u"), 0);
    assert_eq!(t.failures_now()[0].address, "2001:db8::/64");
    fail(&t, "::ffff:10.1.1.1", "u");
    fail(&t, "10.1.1.1", "u");
    assert!(next_delay(&t, "10.1.1.1", "u") > 0);
}

/// Logins look without the lock only while no address has failures; once one has,
/// every login looks, and the last address forgiven makes the look free again.
#[test]
fn the_lock_free_look_follows_the_table() {
    let t = throttle(1, 30);
    assert!(t.empty());
    fail(&t, "10.0.0.9", "u");
    assert!(!t.empty());
    succeed(&t, "10.0.0.8", "u");
    assert!(
        t.try_admit(ip("10.0.0.9"), b"u").is_none(),
        "another address forgives nothing"
    );
    succeed(&t, "10.0.0.9", "u");
    assert!(t.empty());
    fail(&t, "10.0.0.9", "u");
    t.clear();
    assert!(t.empty());
}

#[test]
fn the_table_stays_bounded() {
    let t = throttle(3, 30);
    for i in 0..(MAX_ADDRESSES as u32 + 5000) {
        t.attempt(IpAddr::V4(i.into()), b"u").failed(Door::Redis);
    }
    let n = t.lock().len();
    assert!(n <= MAX_ADDRESSES, "{n}");
    // The newest is kept.
    assert!(t
        .lock()
        .contains_key(&IpAddr::V4((MAX_ADDRESSES as u32 + 4999).into())));
}

/// Attempts at a delayed user from many connections go one at a time: each after the
/// previous one's result, then its own delay; so they guess no faster than one
/// connection. Taking 1 s to check each, 5 attempts past the threshold take
/// 1+1 + 2+1 + 4+1 + 8+1 + 16+1 s.
#[tokio::test(start_paused = true)]
async fn delayed_attempts_go_one_at_a_time() {
    let t = Arc::new(throttle(3, 3600));
    let a = ip("10.0.0.9");
    for _ in 0..3 {
        fail(&t, "10.0.0.9", "victim");
    }
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let attempt = t.admit(a, b"victim", None).await.unwrap();
            let admitted = start.elapsed().as_secs();
            tokio::time::sleep(Duration::from_secs(1)).await;
            attempt.failed(Door::Redis);
            admitted
        }));
    }
    let mut admitted = Vec::new();
    for task in tasks {
        admitted.push(task.await.unwrap());
    }
    admitted.sort_unstable();
    assert_eq!(admitted, [1, 4, 9, 18, 35]);
    assert_eq!(t.waiting_now(), 0);
    let table = t.lock();
    let e = &table[&a];
    assert_eq!(
        (
            e.waiting,
            e.in_flight,
            e.user_failures(t.attempt(a, b"victim").user.hash)
        ),
        (0, 0, 8)
    );
}

/// An address without failures is never held up: 50 attempts at once are all in
/// flight together. Once it has failures, the attempts being checked count: the one
/// that would reach the threshold if they all failed waits for the turn.
#[tokio::test(start_paused = true)]
async fn attempts_being_checked_count_once_the_address_has_failures() {
    let t = throttle(3, 3600);
    let a = ip("10.0.0.5");
    let mut pool = Vec::new();
    for _ in 0..50 {
        pool.push(t.admit(a, b"app", None).await.unwrap());
    }
    for attempt in pool {
        attempt.succeeded();
    }
    assert!(t.empty());
    fail(&t, "10.0.0.5", "victim");
    let first = t.try_admit(a, b"victim").expect("1 failure + 0 in flight");
    let second = t.try_admit(a, b"victim").expect("1 failure + 1 in flight");
    assert!(
        t.try_admit(a, b"victim").is_none(),
        "1 + 2 in flight reach 3"
    );
    // A user of its own is not held up by them.
    t.try_admit(a, b"neighbour")
        .expect("no failures of its own")
        .succeeded();
    // The third waits for the turn, which is free: no delay yet (1 failure), then in flight.
    let third = t.admit(a, b"victim", None).await.unwrap();
    assert_eq!(t.delayed_total(), 0);
    first.failed(Door::Mysql);
    second.failed(Door::Mysql);
    third.failed(Door::Mysql);
    let before = tokio::time::Instant::now();
    t.admit(a, b"victim", None)
        .await
        .unwrap()
        .failed(Door::Mysql);
    assert_eq!(before.elapsed(), Duration::from_secs(2), "4 failures: 2 s");
    // A client leaving midway gives its place back.
    drop(t.try_admit(a, b"neighbour").unwrap());
    assert_eq!(t.lock()[&a].in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn waiting_attempts_are_bounded() {
    let t = Arc::new(throttle(1, 3600));
    let a = ip("10.0.0.9");
    fail(&t, "10.0.0.9", "u");
    let mut waits = Vec::new();
    for _ in 0..MAX_WAITING_PER_ADDRESS {
        let t = t.clone();
        waits.push(tokio::spawn(async move {
            t.admit(a, b"u", None)
                .await
                .map(|at| at.failed(Door::Mysql))
        }));
    }
    while t.waiting_now() < MAX_WAITING_PER_ADDRESS as usize {
        tokio::task::yield_now().await;
    }
    assert_eq!(t.admit(a, b"u", None).await.err(), Some(TooManyWaiting));
    // Another user of the address, with no failures of its own, is not held up.
    t.admit(a, b"other", None).await.unwrap().succeeded();
    for w in waits {
        assert_eq!(w.await.unwrap(), Ok(()));
    }
    assert_eq!(t.waiting_now(), 0);
    assert_eq!(t.lock()[&a].waiting, 0);
    assert_eq!(t.refused_waiting_total(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_login_timeout_leaves_the_waits_out() {
    let t = Arc::new(throttle(1, 30));
    let a = ip("10.0.0.7");
    fail(&t, "10.0.0.7", "u");
    fail(&t, "10.0.0.7", "u");
    // Another attempt holds the turn for 20 s (its 2 s delay, then 18 s of checking).
    let holder = {
        let t = t.clone();
        tokio::spawn(async move {
            let at = t.admit(a, b"u", None).await.unwrap();
            tokio::time::sleep(Duration::from_secs(18)).await;
            at.succeeded();
        })
    };
    tokio::task::yield_now().await;
    let clock = WaitClock::default();
    let login = async {
        let at = t.admit(a, b"u", Some(&clock)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        at.succeeded();
        "answered"
    };
    // 20 s for the turn and 5 s of talk fit in a 6 s timeout that leaves the turn out.
    assert_eq!(
        clock.timeout(Duration::from_secs(6), login).await,
        Some("answered")
    );
    holder.await.unwrap();
    let slow = async {
        tokio::time::sleep(Duration::from_secs(7)).await;
    };
    assert_eq!(clock.timeout(Duration::from_secs(6), slow).await, None);
}

/// A user without failures of its own, at an address where another user has one, logs in
/// at once however many of its logins are in flight (a pool's first logins): only its own
/// attempts in flight count toward its threshold, the address's toward the address's.
#[tokio::test(start_paused = true)]
async fn other_users_in_flight_do_not_hold_up_a_user_without_failures() {
    let t = throttle(3, 3600);
    let a = ip("10.0.0.6");
    fail(&t, "10.0.0.6", "victim");
    let mut pool = Vec::new();
    for i in 0..10 {
        pool.push(
            t.try_admit(a, b"app")
                .unwrap_or_else(|| panic!("login {i} of a user without failures waited")),
        );
    }
    // The failing user's own check still counts its attempts in flight.
    let first = t
        .try_admit(a, b"victim")
        .expect("1 failure + 0 of its own in flight");
    let second = t
        .try_admit(a, b"victim")
        .expect("1 failure + 1 of its own in flight");
    assert!(
        t.try_admit(a, b"victim").is_none(),
        "1 + 2 of its own reach 3"
    );
    for attempt in pool {
        attempt.succeeded();
    }
    first.failed(Door::Mysql);
    second.failed(Door::Mysql);
    let e = &t.lock()[&a];
    assert_eq!((e.in_flight, e.in_flight_users.len()), (0, 0));
}

/// An attempt dropped without a result counts as nothing, unless the door said that leaving
/// from that point on is a failure (a client asked for its password after a check it may
/// have learned from).
#[test]
fn a_dropped_attempt_fails_only_once_told_to() {
    let t = throttle(3, 30);
    drop(t.attempt(ip("10.0.0.3"), b"u"));
    assert!(t.failures_now().is_empty());
    let mut a = t.attempt(ip("10.0.0.3"), b"u");
    a.fail_if_dropped(Door::Mysql);
    drop(a);
    assert_eq!(t.failures(Door::Mysql), 1);
    assert_eq!(t.failures_now()[0].failures, 1);
    // Told so, then finished with a result: that result counts, once.
    let mut a = t.attempt(ip("10.0.0.3"), b"u");
    a.fail_if_dropped(Door::Mysql);
    a.succeeded();
    assert!(t.failures_now().is_empty());
    let mut a = t.attempt(ip("10.0.0.3"), b"u");
    a.fail_if_dropped(Door::Mysql);
    a.failed(Door::Mysql);
    assert_eq!(t.failures(Door::Mysql), 2);
    assert_eq!(t.failures_now()[0].failures, 1);
}
