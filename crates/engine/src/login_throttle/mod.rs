//! Password guessing costs time: MySQL's `connection_control`, for every door.
//!
//! Failed logins are counted per client address and, within it, per user (MySQL's
//! `connection_control` counts per `'user'@'host'`):
//!
//! - **Per (address, user)**: after `failed_login_threshold` consecutive failures of a user
//!   from an address, each further attempt for that user from there waits before its
//!   password is checked: 1 s, doubling with every further failure, up to
//!   `max_login_delay`. A success resets that user's count only: logging in as one's own
//!   account between guesses at another's forgives nothing of the other's.
//! - **Per address** (password spraying: a few guesses at many users): every user's failures
//!   from the address count toward the address's own count, each user's at most the
//!   threshold (a user failing on and on is that user's delay, not its neighbours'). At
//!   [`ADDRESS_THRESHOLD_FACTOR`] times the threshold every user's attempts from the
//!   address are delayed, doubling likewise. A success takes back only its user's share.
//! - **One at a time once delayed**: an attempt that would be delayed (or would reach a
//!   threshold, counting the attempts of its address still being checked) waits for its
//!   address's turn: the previous delayed attempt's result, then its own delay from that
//!   moment. So many connections guess no faster than one. An address without failures is
//!   never held up (a pool opening 50 connections at once waits for nothing), nor is a user
//!   below the threshold at an address below its own.
//!
//! The table is one for all doors and workers, behind one mutex taken on the login path
//! only while some address has failures ([`LoginThrottle::empty`]: short connections share
//! no lock in the common case), and bounded: [`MAX_ADDRESSES`] addresses of at most
//! [`MAX_USERS_PER_ADDRESS`] users each (further users of an address share one count), an
//! address not failing for [`FORGET_AFTER`] is forgotten, a full table forgets the addresses
//! failing least recently, and at most [`MAX_WAITING_PER_ADDRESS`] attempts of an address
//! wait at a time (more are refused at once, unchecked). An address is an IPv4 address or
//! an IPv6 /64 (what one IPv6 host is usually given); an IPv4-mapped IPv6 address is its
//! IPv4 address. The waits run on the session's own task (tokio timers).
//!
//! This module does not know any protocol: a door calls [`LoginThrottle::admit`] before it
//! checks a password and tells the [`Attempt`] it gets how the check ended.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Addresses the table keeps at most (a few MB at most under a spray of addresses).
pub const MAX_ADDRESSES: usize = 10_000;
/// Users whose failures an address keeps apart; the failures of its further users are
/// counted together (so that naming many users cannot push a victim's count out).
pub const MAX_USERS_PER_ADDRESS: usize = 8;
/// An address's failures (each user's counted up to the threshold) delay all its users at
/// this many times the threshold.
pub const ADDRESS_THRESHOLD_FACTOR: u32 = 10;
/// An address that has not failed for this long is forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// Attempts of one address waiting for their turn or delay at one time; more are refused.
pub const MAX_WAITING_PER_ADDRESS: u32 = 10;
/// The first delay; each further failure doubles it.
pub const FIRST_DELAY: Duration = Duration::from_secs(1);
/// Largest `max_login_delay` accepted.
pub const MAX_MAX_DELAY: Duration = Duration::from_secs(3600);
/// Bytes of a user name kept to show (`SHOW LOGIN FAILURES`); a user is told apart by a
/// keyed hash of its whole name.
const NAME_SHOWN: usize = 32;
/// How `SHOW LOGIN FAILURES` names the shared count of an address's further users.
pub const OTHER_USERS: &str = "(other users)";

/// The `[security]` table's login settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoginThrottleConfig {
    /// Consecutive failed logins of a user from an address before its next attempts are
    /// delayed (ten times as many, of all its users, delay the whole address); 0 turns the
    /// delays off.
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

/// A user name as the table keeps it: a keyed hash of the whole name (what tells users
/// apart) and its first bytes (what is shown). Built without allocating.
#[derive(Clone, Copy)]
struct UserKey {
    hash: u64,
    shown: [u8; NAME_SHOWN],
    len: u8,
}

impl UserKey {
    fn shown(&self) -> String {
        String::from_utf8_lossy(&self.shown[..usize::from(self.len)]).into_owned()
    }
}

impl std::fmt::Debug for UserKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

/// One user's consecutive failures from one address.
#[derive(Debug)]
struct UserFailures {
    user: UserKey,
    failures: u32,
}

/// One address's record.
#[derive(Debug)]
struct Entry {
    /// At most [`MAX_USERS_PER_ADDRESS`] users that failed from the address (a success
    /// zeroes a user's count and keeps its place).
    users: Vec<UserFailures>,
    /// Failures of the users the address had no room to keep apart.
    others: u32,
    last_failure: Instant,
    /// Attempts admitted and not yet answered (their password being checked).
    in_flight: u32,
    /// The same, per user (a user's check counts only its own attempts in flight).
    in_flight_users: Vec<(u64, u32)>,
    /// Attempts waiting for the turn or out their delay.
    waiting: u32,
    /// Held by the delayed attempt being waited out or checked: they go one at a time.
    turn: Arc<Semaphore>,
}

impl Entry {
    fn new(now: Instant) -> Self {
        Self {
            users: Vec::new(),
            others: 0,
            last_failure: now,
            in_flight: 0,
            in_flight_users: Vec::new(),
            waiting: 0,
            turn: Arc::new(Semaphore::new(1)),
        }
    }

    /// The failures `user` is delayed for: its own, or the shared count of the users the
    /// address has no room for.
    fn user_failures(&self, user: u64) -> u32 {
        match self.users.iter().find(|u| u.user.hash == user) {
            Some(u) => u.failures,
            None if self.users.len() >= MAX_USERS_PER_ADDRESS => self.others,
            None => 0,
        }
    }

    /// The address's own count: each user's failures up to `threshold`, and all of the
    /// shared count's.
    fn address_failures(&self, threshold: u32) -> u32 {
        self.users.iter().fold(self.others, |n, u| {
            n.saturating_add(u.failures.min(threshold))
        })
    }

    /// `user`'s attempts in flight: its own, or for the users sharing the count of those
    /// the address has no room for, all of the address's.
    fn user_in_flight(&self, user: u64) -> u32 {
        if self.users.len() >= MAX_USERS_PER_ADDRESS
            && !self.users.iter().any(|u| u.user.hash == user)
        {
            return self.in_flight;
        }
        self.in_flight_users
            .iter()
            .find(|(u, _)| *u == user)
            .map_or(0, |(_, n)| *n)
    }

    fn enter(&mut self, user: u64) {
        self.in_flight += 1;
        match self.in_flight_users.iter_mut().find(|(u, _)| *u == user) {
            Some((_, n)) => *n += 1,
            None => self.in_flight_users.push((user, 1)),
        }
    }

    fn leave(&mut self, user: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(i) = self.in_flight_users.iter().position(|(u, _)| *u == user) {
            self.in_flight_users[i].1 -= 1;
            if self.in_flight_users[i].1 == 0 {
                self.in_flight_users.swap_remove(i);
            }
        }
    }

    fn has_failures(&self) -> bool {
        self.others > 0 || self.users.iter().any(|u| u.failures > 0)
    }

    fn busy(&self) -> bool {
        self.in_flight > 0 || self.waiting > 0
    }

    fn stale(&self, now: Instant) -> bool {
        now.duration_since(self.last_failure) >= FORGET_AFTER
    }

    fn forget_failures(&mut self) {
        self.users.clear();
        self.others = 0;
    }

    fn add_failure(&mut self, user: UserKey) {
        if let Some(u) = self.users.iter_mut().find(|u| u.user.hash == user.hash) {
            u.failures = u.failures.saturating_add(1);
        } else if self.users.len() < MAX_USERS_PER_ADDRESS {
            self.users.push(UserFailures { user, failures: 1 });
        } else {
            self.others = self.others.saturating_add(1);
        }
    }

    /// `user` logged in: its failures are forgiven (not the shared count's: a user without
    /// a place of its own cannot tell its failures from the others'). It keeps its place
    /// until the address is forgotten, so that a success cannot make room for a user whose
    /// failures were in the shared count to start again from none.
    fn forgive(&mut self, user: u64) {
        if let Some(u) = self.users.iter_mut().find(|u| u.user.hash == user) {
            u.failures = 0;
        }
    }
}

/// What [`LoginThrottle::failures_now`] shows: one user's count at one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginFailures {
    /// The address (an IPv6 /64 is shown as its first address, `/64` appended).
    pub address: String,
    /// The user (its first 32 bytes); [`OTHER_USERS`] for the shared count of the users
    /// the address had no room for; empty on the row of an address with attempts waiting
    /// and no failures.
    pub user: String,
    /// The user's consecutive failures from the address.
    pub failures: u32,
    /// The address's own count (each user's failures up to the threshold), which delays all
    /// its users at [`ADDRESS_THRESHOLD_FACTOR`] times the threshold.
    pub address_failures: u32,
    /// How long ago the address's last failure was.
    pub since_last_failure: Duration,
    /// Attempts of the address waiting for their turn or delay now.
    pub waiting: u32,
    /// The delay the user's next attempt from the address would wait.
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
    /// The key of the user names' hash, random per process (names cannot be chosen to
    /// share a count).
    names: RandomState,
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

/// How an attempt may go ahead.
enum Admission {
    /// At once.
    Now,
    /// After the address's turn (the waiting count already holds it).
    Turn(Arc<Semaphore>),
    /// It would have to wait, and may not.
    WouldWait,
    /// It would have to wait, and [`MAX_WAITING_PER_ADDRESS`] are waiting already.
    Full,
}

impl LoginThrottle {
    pub fn new(cfg: &LoginThrottleConfig) -> Self {
        let t = Self {
            threshold: AtomicU32::new(0),
            max_delay_ms: AtomicU64::new(0),
            table: Mutex::default(),
            entries: AtomicUsize::new(0),
            names: RandomState::new(),
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

    /// The address's own threshold: [`ADDRESS_THRESHOLD_FACTOR`] times the user's.
    fn address_threshold(&self) -> u32 {
        self.threshold().saturating_mul(ADDRESS_THRESHOLD_FACTOR)
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

    /// The delay `failures` earn against `threshold`: none below it, then 1 s doubling.
    fn delay_past(&self, failures: u32, threshold: u32) -> Duration {
        if !self.on() || failures < threshold {
            return Duration::ZERO;
        }
        let doublings = (failures - threshold).min(31);
        FIRST_DELAY
            .saturating_mul(1u32 << doublings)
            .min(self.max_delay())
    }

    /// The delay `user`'s next attempt from the address of `e` waits: its own count's or the
    /// address's, the longer.
    fn delay(&self, e: &Entry, user: u64) -> Duration {
        let own = self.delay_past(e.user_failures(user), self.threshold());
        let address = self.delay_past(
            e.address_failures(self.threshold()),
            self.address_threshold(),
        );
        own.max(address)
    }

    /// The longest delay any user's next attempt from the address of `e` waits.
    fn worst_delay(&self, e: &Entry) -> Duration {
        let threshold = self.threshold();
        let mut worst = self.delay_past(e.address_failures(threshold), self.address_threshold());
        for u in &e.users {
            worst = worst.max(self.delay_past(u.failures, threshold));
        }
        if e.users.len() >= MAX_USERS_PER_ADDRESS {
            worst = worst.max(self.delay_past(e.others, threshold));
        }
        worst
    }

    /// Whether `user`'s attempt goes ahead at once: the address has no failures, or neither
    /// the user (if it has failures: one without goes at once, as at an address without
    /// failures) nor the address would reach its threshold even if every attempt being
    /// checked now failed (the user's own attempts for the user, all for the address).
    fn at_once(&self, e: &Entry, user: u64) -> bool {
        let threshold = self.threshold();
        let own = e.user_failures(user);
        !e.has_failures()
            || ((own == 0 || own.saturating_add(e.user_in_flight(user)) < threshold)
                && e.address_failures(threshold).saturating_add(e.in_flight)
                    < self.address_threshold())
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

    fn attempt(&self, ip: IpAddr, user: &[u8]) -> Attempt<'_> {
        let mut shown = [0; NAME_SHOWN];
        let len = user.len().min(NAME_SHOWN);
        shown[..len].copy_from_slice(&user[..len]);
        Attempt {
            throttle: self,
            key: key(ip),
            user: UserKey {
                hash: self.names.hash_one(user),
                shown,
                len: len as u8,
            },
            registered: false,
            done: false,
            turn: None,
        }
    }

    /// Looks at the attempt's address: admits it at once (counted in flight there), or says
    /// it must wait for the address's turn (counted waiting, when `may_wait`).
    fn look(&self, attempt: &mut Attempt<'_>, may_wait: bool) -> Admission {
        let mut table = self.lock();
        let now = Instant::now();
        let Some(e) = table.get_mut(&attempt.key) else {
            return Admission::Now;
        };
        if e.stale(now) {
            if !e.busy() {
                table.remove(&attempt.key);
                return Admission::Now;
            }
            e.forget_failures();
        }
        if self.at_once(e, attempt.user.hash) {
            e.enter(attempt.user.hash);
            attempt.registered = true;
            return Admission::Now;
        }
        if !may_wait {
            return Admission::WouldWait;
        }
        if e.waiting >= MAX_WAITING_PER_ADDRESS {
            return Admission::Full;
        }
        e.waiting += 1;
        Admission::Turn(e.turn.clone())
    }

    /// Before `user`'s password from `ip` is checked: admits the attempt, at once while
    /// its address has no failures, else after the delayed attempts of its address before
    /// it and the delay it has earned ([`LoginThrottle`]'s rules), waited on the caller's
    /// task. `waited`, when given, is told of the waits, so that a login timeout leaves
    /// them out. Dropping the future (the client left) ends the wait cleanly.
    pub async fn admit(
        &self,
        ip: IpAddr,
        user: &[u8],
        waited: Option<&WaitClock>,
    ) -> Result<Attempt<'_>, TooManyWaiting> {
        let mut attempt = self.attempt(ip, user);
        if !self.on() || self.empty() {
            return Ok(attempt);
        }
        let turn = match self.look(&mut attempt, true) {
            Admission::Now => return Ok(attempt),
            Admission::Turn(turn) => turn,
            Admission::WouldWait | Admission::Full => {
                self.refused_waiting.fetch_add(1, Relaxed);
                return Err(TooManyWaiting);
            }
        };
        self.waiting.fetch_add(1, Relaxed);
        let mut waiting = Waiting {
            throttle: self,
            key: attempt.key,
            armed: true,
        };
        let paused = waited.map(WaitClock::pause);
        // The turn is only ever taken, never closed.
        let Ok(permit) = turn.acquire_owned().await else {
            return Err(TooManyWaiting);
        };
        drop(paused);
        // The previous delayed attempt's result is in: this one's delay counts from now.
        let delay = self
            .lock()
            .get(&attempt.key)
            .map_or(Duration::ZERO, |e| self.delay(e, attempt.user.hash));
        if !delay.is_zero() {
            self.delayed.fetch_add(1, Relaxed);
            if let Some(w) = waited {
                w.add(delay);
            }
            tokio::time::sleep(delay).await;
        }
        {
            let mut table = self.lock();
            // Kept while it had this attempt waiting.
            if let Some(e) = table.get_mut(&attempt.key) {
                e.waiting = e.waiting.saturating_sub(1);
                e.enter(attempt.user.hash);
                attempt.registered = true;
            }
            waiting.armed = false;
        }
        self.waiting.fetch_sub(1, Relaxed);
        attempt.turn = Some(permit);
        Ok(attempt)
    }

    /// For an attempt that cannot wait (a Redis `AUTH` queued in `MULTI` runs inside
    /// `EXEC`): admitted if it would go ahead at once, `None` if it would have to wait
    /// (the door refuses it unchecked).
    pub fn try_admit(&self, ip: IpAddr, user: &[u8]) -> Option<Attempt<'_>> {
        let mut attempt = self.attempt(ip, user);
        if !self.on() || self.empty() {
            return Some(attempt);
        }
        match self.look(&mut attempt, false) {
            Admission::Now => Some(attempt),
            _ => None,
        }
    }

    /// Forgets every address (`FLUSH LOGIN FAILURES`).
    pub fn clear(&self) {
        let mut table = self.lock();
        table.retain(|_, e| e.busy());
        for e in table.values_mut() {
            e.forget_failures();
        }
    }

    /// Every (address, user) with failures now, most failures first; an address with
    /// attempts waiting and no failures has one row, its user empty.
    pub fn failures_now(&self) -> Vec<LoginFailures> {
        let now = Instant::now();
        let threshold = self.threshold();
        let mut rows = Vec::new();
        {
            let table = self.lock();
            for (ip, e) in table.iter() {
                let stale = e.stale(now);
                if stale && !e.busy() {
                    continue;
                }
                let address = match ip {
                    IpAddr::V4(v4) => v4.to_string(),
                    IpAddr::V6(v6) => format!("{v6}/64"),
                };
                let row = |user: String, failures: u32, next_delay: Duration| LoginFailures {
                    address: address.clone(),
                    user,
                    failures,
                    address_failures: if stale {
                        0
                    } else {
                        e.address_failures(threshold)
                    },
                    since_last_failure: now.duration_since(e.last_failure),
                    waiting: e.waiting,
                    next_delay,
                };
                if stale || !e.has_failures() {
                    rows.push(row(String::new(), 0, Duration::ZERO));
                    continue;
                }
                for u in e.users.iter().filter(|u| u.failures > 0) {
                    rows.push(row(u.user.shown(), u.failures, self.delay(e, u.user.hash)));
                }
                if e.others > 0 {
                    let delay = self.delay_past(e.others, threshold).max(
                        self.delay_past(e.address_failures(threshold), self.address_threshold()),
                    );
                    rows.push(row(OTHER_USERS.to_owned(), e.others, delay));
                }
            }
        }
        rows.sort_by(|a, b| {
            b.failures
                .cmp(&a.failures)
                .then_with(|| a.address.cmp(&b.address))
                .then_with(|| a.user.cmp(&b.user))
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

    /// Attempts waiting for their turn or delay now.
    pub fn waiting_now(&self) -> usize {
        self.waiting.load(Relaxed)
    }

    /// Addresses from which some user's next attempt would be delayed now.
    pub fn delayed_addresses(&self) -> usize {
        if !self.on() {
            return 0;
        }
        let now = Instant::now();
        let table = self.lock();
        table
            .values()
            .filter(|e| !e.stale(now) && !self.worst_delay(e).is_zero())
            .count()
    }
}

/// The table is full: forget the addresses past [`FORGET_AFTER`], and if that is not enough,
/// the eighth failing least recently (none with attempts waiting or being checked: their
/// count is in use).
fn make_room(table: &mut HashMap<IpAddr, Entry>, now: Instant) {
    table.retain(|_, e| e.busy() || !e.stale(now));
    if table.len() < MAX_ADDRESSES {
        return;
    }
    let mut ages: Vec<Instant> = table
        .values()
        .filter(|e| !e.busy())
        .map(|e| e.last_failure)
        .collect();
    if ages.is_empty() {
        return;
    }
    let cut = (ages.len() / 8).max(1) - 1;
    let (_, oldest_kept, _) = ages.select_nth_unstable(cut);
    let oldest_kept = *oldest_kept;
    table.retain(|_, e| e.busy() || e.last_failure > oldest_kept);
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

/// Counts an attempt waiting for its turn or delay, until admitted or gone (the client
/// left midway).
struct Waiting<'a> {
    throttle: &'a LoginThrottle,
    key: IpAddr,
    armed: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.throttle.waiting.fetch_sub(1, Relaxed);
        let mut table = self.throttle.lock();
        if let Some(e) = table.get_mut(&self.key) {
            e.waiting = e.waiting.saturating_sub(1);
            if !e.has_failures() && !e.busy() {
                table.remove(&self.key);
            }
        }
    }
}

/// How an attempt's check ended.
#[derive(Clone, Copy)]
enum Outcome {
    Failed(Door),
    Succeeded,
    /// The client left before its answer.
    Abandoned,
}

/// One admitted login attempt: the door says how its check ended ([`Attempt::failed`],
/// [`Attempt::succeeded`]); dropped without, it counts as neither. It holds its address's
/// turn, if it took it, until then: the next delayed attempt goes after its result.
#[derive(Debug)]
#[must_use = "say how the check ended"]
pub struct Attempt<'a> {
    throttle: &'a LoginThrottle,
    key: IpAddr,
    user: UserKey,
    /// Counted in flight at its address.
    registered: bool,
    done: bool,
    /// Released after the result is recorded (fields drop after [`Drop::drop`]).
    turn: Option<OwnedSemaphorePermit>,
}

impl Attempt<'_> {
    /// Wrong credentials (an unknown user, a wrong password): counted against the user and
    /// the address. Counted even when the delays are off (the table then shows who is
    /// guessing, and the count is there when they are turned on).
    pub fn failed(mut self, door: Door) {
        self.finish(Outcome::Failed(door));
    }

    /// The password was right: the user's failures from the address are forgiven.
    pub fn succeeded(mut self) {
        self.finish(Outcome::Succeeded);
    }

    fn finish(&mut self, outcome: Outcome) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let t = self.throttle;
        let failed = matches!(outcome, Outcome::Failed(_));
        if let Outcome::Failed(door) = outcome {
            t.failures[door_index(door)].fetch_add(1, Relaxed);
        }
        let needs_lock =
            self.registered || failed || (matches!(outcome, Outcome::Succeeded) && !t.empty());
        if !needs_lock {
            return;
        }
        let now = Instant::now();
        let mut table = t.lock();
        if failed && !table.contains_key(&self.key) && table.len() >= MAX_ADDRESSES {
            make_room(&mut table, now);
        }
        let e = if failed {
            table.entry(self.key).or_insert_with(|| Entry::new(now))
        } else {
            match table.get_mut(&self.key) {
                Some(e) => e,
                None => return,
            }
        };
        if self.registered {
            e.leave(self.user.hash);
        }
        match outcome {
            Outcome::Failed(_) => {
                if e.stale(now) {
                    e.forget_failures();
                }
                e.add_failure(self.user);
                e.last_failure = now;
            }
            Outcome::Succeeded => e.forgive(self.user.hash),
            Outcome::Abandoned => {}
        }
        if !e.has_failures() && !e.busy() {
            table.remove(&self.key);
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        self.finish(Outcome::Abandoned);
    }
}

/// The time a login spent waiting for its turn and out its delays, for a login timeout
/// that must not count it (a client delayed 30 s still gets its answer). Shared with the
/// login's task only.
#[derive(Debug, Default)]
pub struct WaitClock {
    /// Waits known, not yet taken by the timeout.
    waited_ms: AtomicU64,
    /// Waiting for the address's turn now (of unknown length): the timeout does not fire.
    paused: AtomicU32,
    /// Of the current pause, what the timeout already moved its deadline by.
    credited_ms: AtomicU64,
}

/// A wait of unknown length ([`WaitClock::pause`]); its end tells the clock how long it was.
struct Pause<'a> {
    clock: &'a WaitClock,
    /// tokio's clock, as the timeout's (and paused with it in tests).
    since: tokio::time::Instant,
}

impl Drop for Pause<'_> {
    fn drop(&mut self) {
        let c = self.clock;
        c.paused.fetch_sub(1, Relaxed);
        let took = self.since.elapsed().as_millis() as u64;
        let credited = c.credited_ms.swap(0, Relaxed);
        c.waited_ms
            .fetch_add(took.saturating_sub(credited), Relaxed);
    }
}

/// While paused, the timeout looks again this often.
const PAUSED_RECHECK: Duration = Duration::from_secs(1);

/// Waits `d` as a login delay, which `waited`'s login timeout leaves out: a door's wait that
/// stands in for a check's (so that a step checking nothing answers as late as one that does).
pub async fn wait_as_delay(waited: Option<&WaitClock>, d: Duration) {
    if let Some(w) = waited {
        w.add(d);
    }
    tokio::time::sleep(d).await;
}

impl WaitClock {
    fn add(&self, d: Duration) {
        self.waited_ms.fetch_add(d.as_millis() as u64, Relaxed);
    }

    fn pause(&self) -> Pause<'_> {
        self.paused.fetch_add(1, Relaxed);
        Pause {
            clock: self,
            since: tokio::time::Instant::now(),
        }
    }

    fn take(&self) -> Duration {
        Duration::from_millis(self.waited_ms.swap(0, Relaxed))
    }

    /// Runs `login` under `limit`, not counting the waits it was told of: `None` when it
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
                    let mut waited = self.take();
                    if self.paused.load(Relaxed) > 0 {
                        self.credited_ms.fetch_add(PAUSED_RECHECK.as_millis() as u64, Relaxed);
                        waited += PAUSED_RECHECK;
                    }
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
mod tests;
