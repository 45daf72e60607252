//! Password guessing costs time: MySQL's `connection_control`, for every door.
//!
//! Per client address, after `failed_login_threshold` consecutive failed logins each further
//! attempt waits before its password is checked: 1 s, doubling with every further failure,
//! up to `max_login_delay`. A success from the address resets its count. The wait runs on
//! the session's own task (a tokio timer): the worker keeps serving its other connections.
//!
//! - **One table for all doors and workers**, behind one mutex taken on the login path
//!   only (never per request). It is bounded: [`MAX_ADDRESSES`] entries, an address not
//!   failing for [`FORGET_AFTER`] is forgotten, and when the table is full the entries
//!   failing least recently make room.
//! - **An address is an IPv4 address or an IPv6 /64** (what one IPv6 host is usually given),
//!   so that an attacker cannot take a fresh address per guess; an IPv4-mapped IPv6 address
//!   is its IPv4 address.
//! - **Concurrent attempts queue up**: an attempt's delay counts the attempts of its address
//!   already waiting, so guessing over many connections at once is no faster than over one,
//!   and at most [`MAX_WAITING_PER_ADDRESS`] attempts of one address wait at a time; more
//!   are refused at once, without their password being checked.
//!
//! This module does not know any protocol: the doors call [`LoginThrottle::wait`] before
//! checking a password and [`LoginThrottle::failed`] / [`LoginThrottle::succeeded`] after.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Addresses the table keeps at most (a few MB at most under a spray of addresses).
pub const MAX_ADDRESSES: usize = 10_000;
/// An address that has not failed for this long is forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// Attempts of one address waiting out their delay at one time; more are refused at once.
pub const MAX_WAITING_PER_ADDRESS: u32 = 10;
/// The first delay; each further failure doubles it.
pub const FIRST_DELAY: Duration = Duration::from_secs(1);
/// Largest `max_login_delay` accepted.
pub const MAX_MAX_DELAY: Duration = Duration::from_secs(3600);

/// The `[security]` table's login settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoginThrottleConfig {
    /// Consecutive failed logins from an address before its next attempts are delayed;
    /// 0 turns the delays off.
    pub failed_login_threshold: u32,
    /// The longest delay (the delays double from 1 s up to it); 0 turns the delays off.
    #[serde(with = "crate::duration_serde")]
    pub max_login_delay: Duration,
}

impl Default for LoginThrottleConfig {
    fn default() -> Self {
        Self {
            failed_login_threshold: 3,
            max_login_delay: Duration::from_secs(30),
        }
    }
}

/// Which door a login came through (the label of the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    Mysql,
    Redis,
    Admin,
}

impl Door {
    pub const ALL: [Door; 3] = [Door::Mysql, Door::Redis, Door::Admin];

    pub fn name(self) -> &'static str {
        match self {
            Door::Mysql => "mysql",
            Door::Redis => "redis",
            Door::Admin => "admin",
        }
    }
}

/// The attempt may not wait: its address already has [`MAX_WAITING_PER_ADDRESS`] waiting.
/// The door refuses it as a wrong password, without checking it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many logins from this address are waiting out their delay")]
pub struct TooManyWaiting;

/// One address's record.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Consecutive failures.
    failures: u32,
    last_failure: Instant,
    /// Attempts waiting out their delay now.
    waiting: u32,
}

/// What [`LoginThrottle::addresses`] shows of one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressFailures {
    /// The address (an IPv6 /64 is shown as its first address, `/64` appended).
    pub address: String,
    pub failures: u32,
    /// How long ago its last failure was.
    pub since_last_failure: Duration,
    /// Attempts waiting out their delay now.
    pub waiting: u32,
    /// The delay its next attempt would wait.
    pub next_delay: Duration,
}

/// The per-address table of failed logins, shared by every door and worker.
#[derive(Debug)]
pub struct LoginThrottle {
    threshold: AtomicU32,
    max_delay_ms: AtomicU64,
    table: Mutex<HashMap<IpAddr, Entry>>,
    /// Addresses in `table`, as of the last time it was unlocked: a login while it is 0
    /// (every login but a guesser's, nearly always) takes no lock.
    entries: AtomicUsize,
    failures: [AtomicU64; 3],
    delayed: AtomicU64,
    refused_waiting: AtomicU64,
    waiting: AtomicUsize,
}

impl Default for LoginThrottle {
    fn default() -> Self {
        Self::new(&LoginThrottleConfig::default())
    }
}

/// The key an address is counted under: IPv4, or the IPv6 /64 it is in.
fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

fn door_index(door: Door) -> usize {
    match door {
        Door::Mysql => 0,
        Door::Redis => 1,
        Door::Admin => 2,
    }
}

impl LoginThrottle {
    pub fn new(cfg: &LoginThrottleConfig) -> Self {
        let t = Self {
            threshold: AtomicU32::new(0),
            max_delay_ms: AtomicU64::new(0),
            table: Mutex::default(),
            entries: AtomicUsize::new(0),
            failures: Default::default(),
            delayed: AtomicU64::new(0),
            refused_waiting: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
        };
        t.set_threshold(cfg.failed_login_threshold);
        t.set_max_delay(cfg.max_login_delay);
        t
    }

    pub fn threshold(&self) -> u32 {
        self.threshold.load(Relaxed)
    }

    pub fn set_threshold(&self, n: u32) {
        self.threshold.store(n, Relaxed);
    }

    pub fn max_delay(&self) -> Duration {
        Duration::from_millis(self.max_delay_ms.load(Relaxed))
    }

    pub fn set_max_delay(&self, d: Duration) {
        let ms = d.min(MAX_MAX_DELAY).as_millis() as u64;
        self.max_delay_ms.store(ms, Relaxed);
    }

    fn on(&self) -> bool {
        self.threshold() > 0 && self.max_delay_ms.load(Relaxed) > 0
    }

    /// The delay an attempt waits when `failures` (plus attempts already waiting) precede it.
    fn delay_for(&self, failures: u32) -> Duration {
        let threshold = self.threshold();
        if !self.on() || failures < threshold {
            return Duration::ZERO;
        }
        let doublings = (failures - threshold).min(31);
        FIRST_DELAY
            .saturating_mul(1u32 << doublings)
            .min(self.max_delay())
    }

    fn lock(&self) -> Table<'_> {
        // A panic elsewhere while holding it left counts, which are still counts.
        Table {
            guard: self
                .table
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            entries: &self.entries,
        }
    }

    /// Whether no address has failures now (as of the table's last unlock). A failure
    /// recorded at the same instant as a login's look is taken as after it.
    fn empty(&self) -> bool {
        self.entries.load(Relaxed) == 0
    }

    /// Before a password from `ip` is checked: waits out the delay its address has earned
    /// (none below the threshold), on the caller's task. `waited`, when given, is told the
    /// delay before the wait begins, so that a login timeout can leave it out. Dropping the
    /// future (the client left) ends the wait cleanly.
    pub async fn wait(
        &self,
        ip: IpAddr,
        waited: Option<&WaitClock>,
    ) -> Result<Duration, TooManyWaiting> {
        if !self.on() || self.empty() {
            return Ok(Duration::ZERO);
        }
        let key = key(ip);
        let delay = {
            let mut table = self.lock();
            let now = Instant::now();
            let Some(entry) = table.get_mut(&key) else {
                return Ok(Duration::ZERO);
            };
            if entry.waiting == 0 && now.duration_since(entry.last_failure) >= FORGET_AFTER {
                table.remove(&key);
                return Ok(Duration::ZERO);
            }
            let delay = self.delay_for(entry.failures.saturating_add(entry.waiting));
            if delay.is_zero() {
                return Ok(Duration::ZERO);
            }
            if entry.waiting >= MAX_WAITING_PER_ADDRESS {
                self.refused_waiting.fetch_add(1, Relaxed);
                return Err(TooManyWaiting);
            }
            entry.waiting += 1;
            delay
        };
        self.delayed.fetch_add(1, Relaxed);
        self.waiting.fetch_add(1, Relaxed);
        let _waiting = Waiting {
            throttle: self,
            key,
        };
        if let Some(w) = waited {
            w.add(delay);
        }
        tokio::time::sleep(delay).await;
        Ok(delay)
    }

    /// Whether an attempt from `ip` now would be delayed: for the attempts that cannot wait
    /// (a Redis `AUTH` queued in `MULTI` runs inside `EXEC`), refused instead.
    pub fn would_delay(&self, ip: IpAddr) -> bool {
        if !self.on() || self.empty() {
            return false;
        }
        let table = self.lock();
        table.get(&key(ip)).is_some_and(|e| {
            Instant::now().duration_since(e.last_failure) < FORGET_AFTER
                && !self
                    .delay_for(e.failures.saturating_add(e.waiting))
                    .is_zero()
        })
    }

    /// A failed login from `ip` through `door`. Counted even when the delays are off (the
    /// table then shows who is guessing, and the count is there when they are turned on).
    pub fn failed(&self, ip: IpAddr, door: Door) {
        self.failures[door_index(door)].fetch_add(1, Relaxed);
        let key = key(ip);
        let now = Instant::now();
        let mut table = self.lock();
        if !table.contains_key(&key) && table.len() >= MAX_ADDRESSES {
            make_room(&mut table, now);
        }
        let entry = table.entry(key).or_insert(Entry {
            failures: 0,
            last_failure: now,
            waiting: 0,
        });
        if now.duration_since(entry.last_failure) >= FORGET_AFTER {
            entry.failures = 0;
        }
        entry.failures = entry.failures.saturating_add(1);
        entry.last_failure = now;
    }

    /// A successful login from `ip`: its count starts again.
    pub fn succeeded(&self, ip: IpAddr) {
        if self.empty() {
            return;
        }
        let key = key(ip);
        let mut table = self.lock();
        if let Some(e) = table.get_mut(&key) {
            if e.waiting == 0 {
                table.remove(&key);
            } else {
                e.failures = 0;
            }
        }
    }

    /// Forgets every address (`FLUSH LOGIN FAILURES`).
    pub fn clear(&self) {
        let mut table = self.lock();
        table.retain(|_, e| e.waiting > 0);
        for e in table.values_mut() {
            e.failures = 0;
        }
    }

    /// Every address with failures now, most failures first.
    pub fn addresses(&self) -> Vec<AddressFailures> {
        let now = Instant::now();
        let mut rows: Vec<AddressFailures> = {
            let table = self.lock();
            table
                .iter()
                .filter(|(_, e)| e.waiting > 0 || now.duration_since(e.last_failure) < FORGET_AFTER)
                .map(|(ip, e)| AddressFailures {
                    address: match ip {
                        IpAddr::V4(v4) => v4.to_string(),
                        IpAddr::V6(v6) => format!("{v6}/64"),
                    },
                    failures: e.failures,
                    since_last_failure: now.duration_since(e.last_failure),
                    waiting: e.waiting,
                    next_delay: self.delay_for(e.failures.saturating_add(e.waiting)),
                })
                .collect()
        };
        rows.sort_by(|a, b| {
            b.failures
                .cmp(&a.failures)
                .then_with(|| a.address.cmp(&b.address))
        });
        rows
    }

    /// Failed logins through `door` since start.
    pub fn failures(&self, door: Door) -> u64 {
        self.failures[door_index(door)].load(Relaxed)
    }

    /// Attempts that waited out a delay, since start.
    pub fn delayed_total(&self) -> u64 {
        self.delayed.load(Relaxed)
    }

    /// Attempts refused because their address had too many waiting, since start.
    pub fn refused_waiting_total(&self) -> u64 {
        self.refused_waiting.load(Relaxed)
    }

    /// Attempts waiting out their delay now.
    pub fn waiting_now(&self) -> usize {
        self.waiting.load(Relaxed)
    }

    /// Addresses whose next attempt would be delayed now.
    pub fn delayed_addresses(&self) -> usize {
        if !self.on() {
            return 0;
        }
        let now = Instant::now();
        let table = self.lock();
        table
            .values()
            .filter(|e| {
                now.duration_since(e.last_failure) < FORGET_AFTER
                    && !self
                        .delay_for(e.failures.saturating_add(e.waiting))
                        .is_zero()
            })
            .count()
    }
}

/// The table is full: forget the addresses past [`FORGET_AFTER`], and if that is not enough,
/// the eighth failing least recently (none waiting is forgotten: its count is in use).
fn make_room(table: &mut HashMap<IpAddr, Entry>, now: Instant) {
    table.retain(|_, e| e.waiting > 0 || now.duration_since(e.last_failure) < FORGET_AFTER);
    if table.len() < MAX_ADDRESSES {
        return;
    }
    let mut ages: Vec<Instant> = table
        .values()
        .filter(|e| e.waiting == 0)
        .map(|e| e.last_failure)
        .collect();
    if ages.is_empty() {
        return;
    }
    let cut = (ages.len() / 8).max(1) - 1;
    let (_, oldest_kept, _) = ages.select_nth_unstable(cut);
    let oldest_kept = *oldest_kept;
    table.retain(|_, e| e.waiting > 0 || e.last_failure > oldest_kept);
}

/// The locked table; unlocking it notes how many addresses it holds ([`LoginThrottle::empty`]).
struct Table<'a> {
    guard: std::sync::MutexGuard<'a, HashMap<IpAddr, Entry>>,
    entries: &'a AtomicUsize,
}

impl std::ops::Deref for Table<'_> {
    type Target = HashMap<IpAddr, Entry>;
    fn deref(&self) -> &Self::Target {
        &self.guard
    }
}

impl std::ops::DerefMut for Table<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.guard
    }
}

impl Drop for Table<'_> {
    fn drop(&mut self) {
        self.entries.store(self.guard.len(), Relaxed);
    }
}

/// Counts an attempt waiting out its delay; its end (also when the client leaves midway).
struct Waiting<'a> {
    throttle: &'a LoginThrottle,
    key: IpAddr,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.throttle.waiting.fetch_sub(1, Relaxed);
        if let Some(e) = self.throttle.lock().get_mut(&self.key) {
            e.waiting = e.waiting.saturating_sub(1);
        }
    }
}

/// The time a login spent waiting out delays, for a login timeout that must not count it
/// (a client delayed 30 s still gets its answer). Shared with the login's task only.
#[derive(Debug, Default)]
pub struct WaitClock {
    waited_ms: AtomicU64,
}

impl WaitClock {
    fn add(&self, d: Duration) {
        self.waited_ms.fetch_add(d.as_millis() as u64, Relaxed);
    }

    fn take(&self) -> Duration {
        Duration::from_millis(self.waited_ms.swap(0, Relaxed))
    }

    /// Runs `login` under `limit`, not counting the delays it waited out: `None` when it
    /// took longer.
    pub async fn timeout<F: std::future::Future>(
        &self,
        limit: Duration,
        login: F,
    ) -> Option<F::Output> {
        let mut login = std::pin::pin!(login);
        let sleep = tokio::time::sleep(limit);
        let mut sleep = std::pin::pin!(sleep);
        loop {
            tokio::select! {
                biased;
                out = &mut login => return Some(out),
                () = &mut sleep => {
                    let waited = self.take();
                    if waited.is_zero() {
                        return None;
                    }
                    let deadline = sleep.deadline() + waited;
                    sleep.as_mut().reset(deadline);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn delays_double_from_the_threshold_up_to_the_cap() {
        let t = throttle(3, 30);
        let d: Vec<u64> = (0..10).map(|f| t.delay_for(f).as_secs()).collect();
        assert_eq!(d, [0, 0, 0, 1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(t.delay_for(u32::MAX), Duration::from_secs(30));
        t.set_threshold(0);
        assert_eq!(t.delay_for(10), Duration::ZERO);
        t.set_threshold(1);
        t.set_max_delay(Duration::ZERO);
        assert_eq!(t.delay_for(10), Duration::ZERO);
    }

    #[test]
    fn a_success_resets_and_addresses_are_counted_apart() {
        let t = throttle(3, 30);
        for _ in 0..3 {
            t.failed(ip("10.0.0.1"), Door::Mysql);
        }
        t.failed(ip("10.0.0.2"), Door::Redis);
        assert!(t.would_delay(ip("10.0.0.1")));
        assert!(!t.would_delay(ip("10.0.0.2")));
        assert_eq!(t.delayed_addresses(), 1);
        assert_eq!(t.failures(Door::Mysql), 3);
        assert_eq!(t.failures(Door::Redis), 1);
        t.succeeded(ip("10.0.0.1"));
        assert!(!t.would_delay(ip("10.0.0.1")));
        let rows = t.addresses();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].address, "10.0.0.2");
    }

    #[test]
    fn an_ipv6_host_is_its_64_and_mapped_ipv4_is_ipv4() {
        let t = throttle(2, 30);
        t.failed(ip("2001:db8::1"), Door::Mysql);
        t.failed(ip("2001:db8::ffff:2"), Door::Mysql);
        assert!(t.would_delay(ip("2001:db8::3")));
        assert!(!t.would_delay(ip("2001:db8:0:1::3")));
        assert_eq!(t.addresses()[0].address, "2001:db8::/64");
        t.failed(ip("::ffff:10.1.1.1"), Door::Mysql);
        t.failed(ip("10.1.1.1"), Door::Mysql);
        assert!(t.would_delay(ip("10.1.1.1")));
    }

    /// Logins look without the lock only while no address has failures; once one has,
    /// every login looks, and the last address forgiven makes the look free again.
    #[test]
    fn the_lock_free_look_follows_the_table() {
        let t = throttle(1, 30);
        assert!(t.empty());
        t.failed(ip("10.0.0.9"), Door::Admin);
        assert!(!t.empty());
        assert!(t.would_delay(ip("10.0.0.9")));
        t.succeeded(ip("10.0.0.8"));
        assert!(
            t.would_delay(ip("10.0.0.9")),
            "another address forgives nothing"
        );
        t.succeeded(ip("10.0.0.9"));
        assert!(t.empty());
        t.failed(ip("10.0.0.9"), Door::Admin);
        t.clear();
        assert!(t.empty());
    }

    #[test]
    fn the_table_stays_bounded() {
        let t = throttle(3, 30);
        for i in 0..(MAX_ADDRESSES as u32 + 5000) {
            t.failed(IpAddr::V4(i.into()), Door::Redis);
        }
        let n = t.lock().len();
        assert!(n <= MAX_ADDRESSES, "{n}");
        // The newest is kept.
        assert!(t
            .lock()
            .contains_key(&IpAddr::V4((MAX_ADDRESSES as u32 + 4999).into())));
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_attempts_queue_up_and_are_bounded() {
        let t = std::sync::Arc::new(throttle(1, 3600));
        let a = ip("10.0.0.9");
        t.failed(a, Door::Mysql);
        let mut waits = Vec::new();
        for _ in 0..MAX_WAITING_PER_ADDRESS {
            let t = t.clone();
            waits.push(tokio::spawn(async move { t.wait(a, None).await }));
        }
        // Let every one register its wait.
        while t.waiting_now() < MAX_WAITING_PER_ADDRESS as usize {
            tokio::task::yield_now().await;
        }
        assert_eq!(t.wait(a, None).await, Err(TooManyWaiting));
        let mut delays: Vec<u64> = Vec::new();
        for w in waits {
            delays.push(w.await.unwrap().unwrap().as_secs());
        }
        delays.sort_unstable();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]);
        assert_eq!(t.waiting_now(), 0);
        assert_eq!(t.lock()[&a].waiting, 0);
        assert_eq!(t.refused_waiting_total(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_login_timeout_leaves_the_delay_out() {
        let t = throttle(1, 30);
        let a = ip("10.0.0.7");
        t.failed(a, Door::Admin);
        t.failed(a, Door::Admin);
        let clock = WaitClock::default();
        let login = async {
            t.wait(a, Some(&clock)).await.unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
            "answered"
        };
        // A 2 s delay then 5 s of talk fit in a 6 s timeout that leaves the delay out.
        assert_eq!(
            clock.timeout(Duration::from_secs(6), login).await,
            Some("answered")
        );
        let slow = async {
            tokio::time::sleep(Duration::from_secs(7)).await;
        };
        assert_eq!(clock.timeout(Duration::from_secs(6), slow).await, None);
    }
}
