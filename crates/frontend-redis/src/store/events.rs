//! Keyspace notifications (`notify-keyspace-events`), the store's part: the classes a client
//! may ask for, and the events a batch's transaction records while its commands run. They
//! are published by the transaction's worker ([`super::TxHost::keyspace_events`]) only once
//! the transaction committed, in the order the commands made them; a batch rolled back (or
//! run again after a deadlock) publishes none of its attempt's. Which event a command makes
//! is decided once for all commands after each one ran ([`crate::exec`]'s `run_one`, by the
//! rules of `crate::notify`); the store records only what it alone knows: a key deleted
//! because it emptied or was deleted (`del`) and one found past its expiry (`expired`).
//!
//! Off by default (the empty setting): then a transaction records nothing and a command
//! pays one relaxed load of the flags.
//!
//! While some client tracks keys (`CLIENT TRACKING`, [`crate::tracking`]), every event is
//! recorded whatever the setting, as the keys a transaction changed: once it committed,
//! the clients that may hold those keys get their invalidation; only the events of the
//! classes asked for are published.

use std::sync::atomic::{AtomicU16, Ordering};

use super::Tx;

/// `notify-keyspace-events`' flags, as Redis's `NOTIFY_*`.
pub mod class {
    pub const KEYSPACE: u16 = 1 << 0; // K
    pub const KEYEVENT: u16 = 1 << 1; // E
    pub const GENERIC: u16 = 1 << 2; // g
    pub const STRING: u16 = 1 << 3; // $
    pub const LIST: u16 = 1 << 4; // l
    pub const SET: u16 = 1 << 5; // s
    pub const HASH: u16 = 1 << 6; // h
    pub const ZSET: u16 = 1 << 7; // z
    pub const EXPIRED: u16 = 1 << 8; // x
    pub const EVICTED: u16 = 1 << 9; // e
    pub const STREAM: u16 = 1 << 10; // t
    pub const KEY_MISS: u16 = 1 << 11; // m
    pub const MODULE: u16 = 1 << 12; // d
    pub const NEW: u16 = 1 << 13; // n
    /// `A`: every class but `m` and `n`.
    pub const ALL: u16 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

    /// Redis's `keyspaceEventsStringToFlags`: `None` for a character it does not know.
    pub fn parse(s: &[u8]) -> Option<u16> {
        let mut f = 0;
        for &c in s {
            f |= match c {
                b'A' => ALL,
                b'g' => GENERIC,
                b'$' => STRING,
                b'l' => LIST,
                b's' => SET,
                b'h' => HASH,
                b'z' => ZSET,
                b'x' => EXPIRED,
                b'e' => EVICTED,
                b'K' => KEYSPACE,
                b'E' => KEYEVENT,
                b't' => STREAM,
                b'm' => KEY_MISS,
                b'd' => MODULE,
                b'n' => NEW,
                _ => return None,
            };
        }
        Some(f)
    }

    /// Redis's `keyspaceEventsFlagsToString` (`n` is not shown with `A`, as Redis).
    pub fn text(f: u16) -> String {
        let mut s = String::new();
        if f & ALL == ALL {
            s.push('A');
        } else {
            for (bit, c) in [
                (GENERIC, 'g'),
                (STRING, '$'),
                (LIST, 'l'),
                (SET, 's'),
                (HASH, 'h'),
                (ZSET, 'z'),
                (EXPIRED, 'x'),
                (EVICTED, 'e'),
                (STREAM, 't'),
                (MODULE, 'd'),
                (NEW, 'n'),
            ] {
                if f & bit != 0 {
                    s.push(c);
                }
            }
        }
        for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
            if f & bit != 0 {
                s.push(c);
            }
        }
        s
    }
}

/// The classes asked for now (`CONFIG SET notify-keyspace-events`), read by every worker.
#[derive(Debug, Default)]
pub struct Classes(AtomicU16);

impl Classes {
    pub fn get(&self) -> u16 {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self, flags: u16) {
        self.0.store(flags, Ordering::Relaxed);
    }

    /// Whether events of `class` are published: asked for, and on at least one of the two
    /// channel kinds (`K`, `E`), as Redis's `notifyKeyspaceEvent` checks.
    pub fn wants(flags: u16, class: u16) -> bool {
        flags & class != 0 && flags & (class::KEYSPACE | class::KEYEVENT) != 0
    }
}

/// Most bytes of events one transaction holds until it commits (its keys, plus 64 per
/// event): a script writing millions of keys cannot hold memory without bound. Past it
/// the rest of the transaction's events are dropped, counted and logged at the commit.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// One event a command made, published after the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub db: u8,
    /// Its class ([`class`]): published only when asked for.
    pub class: u16,
    /// Its event name, as Redis's (`set`, `lpush`, `del`, `expired`...).
    pub name: &'static str,
    pub key: Vec<u8>,
}

/// Where the events of one command start in its transaction ([`Tx::events_mark`]): what
/// the rules after the command look at.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    /// The classes asked for when the command started.
    pub flags: u16,
    /// Rows the transaction had changed before the command.
    pub changed: u64,
    /// Events recorded before the command.
    pub events: usize,
    /// Reply bytes before the command.
    pub out: usize,
}

/// Publishes a committed transaction's events: on `__keyspace@<db>__:<key>` (the event's
/// name) with `K`, on `__keyevent@<db>__:<name>` (the key) with `E`, keyspace first, as
/// Redis. The Pub/Sub hub is one ([`crate::pubsub::Hub`]).
pub trait Publisher {
    /// Delivers `payload` on `channel`; the number of subscribers that got it.
    fn publish(&self, channel: &[u8], payload: &[u8]) -> i64;
}

/// Where a committed transaction's changed keys go while some client tracks keys
/// (`crate::tracking`'s table).
pub trait Invalidator {
    /// The keys of `events` changed (by client `writer`, 0: by none known), or all of them
    /// (`all`: a flush, or events dropped): the clients that may hold them are told.
    fn invalidate(&self, writer: u64, events: &[Event], all: bool);
}

/// Publishes those of `events` whose class `flags` ask for, as they say (`K`, `E`); the
/// subscribers reached.
pub fn publish(to: &dyn Publisher, flags: u16, events: &[Event]) -> u64 {
    let mut channel = Vec::with_capacity(64);
    let mut reached = 0;
    for e in events.iter().filter(|e| Classes::wants(flags, e.class)) {
        if flags & class::KEYSPACE != 0 {
            channel.clear();
            channel.extend_from_slice(format!("__keyspace@{}__:", e.db).as_bytes());
            channel.extend_from_slice(&e.key);
            reached += to.publish(&channel, e.name.as_bytes()).max(0) as u64;
        }
        if flags & class::KEYEVENT != 0 {
            channel.clear();
            channel.extend_from_slice(format!("__keyevent@{}__:{}", e.db, e.name).as_bytes());
            reached += to.publish(&channel, &e.key).max(0) as u64;
        }
    }
    reached
}

impl Tx<'_> {
    /// The classes asked for now.
    pub fn event_flags(&self) -> u16 {
        self.store.shared.keyspace_events.get()
    }

    /// The classes recorded now: those asked for, or all while some client tracks keys
    /// (their keys are what the transaction changed).
    fn recorded(&self) -> u16 {
        if self
            .store
            .shared
            .tracking
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            class::ALL | class::KEYSPACE
        } else {
            self.event_flags()
        }
    }

    /// Where the next command's events start, `None` when nothing is recorded
    /// (notifications off and no client tracking keys).
    pub fn events_mark(&mut self, out: usize) -> Option<Mark> {
        let flags = self.recorded();
        if flags & (class::KEYSPACE | class::KEYEVENT) == 0 {
            return None;
        }
        self.trailing = None;
        Some(Mark {
            flags,
            changed: self.changed,
            events: self.events.len(),
            out,
        })
    }

    /// Rows this transaction's statements changed so far (their affected rows).
    pub fn changed(&self) -> u64 {
        self.changed
    }

    /// The event, if the transaction may still hold it ([`MAX_EVENT_BYTES`]).
    fn held(&mut self, class: u16, name: &'static str, db: u8, key: &[u8]) -> Option<Event> {
        let size = key.len() + 64;
        if self.events_bytes + size > MAX_EVENT_BYTES {
            self.events_dropped += 1;
            return None;
        }
        self.events_bytes += size;
        Some(Event {
            db,
            class,
            name,
            key: key.to_vec(),
        })
    }

    /// `key` changed without a keyspace event of its own (`PFCOUNT` caching its count in
    /// the value): recorded, while some client tracks keys, for the invalidation alone
    /// (class 0 is never published).
    pub fn touch(&mut self, db: u8, key: &[u8]) {
        if self
            .store
            .shared
            .tracking
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            if let Some(e) = self.held(0, "touch", db, key) {
                self.events.push(e);
            }
        }
    }

    /// Events this transaction dropped past [`MAX_EVENT_BYTES`].
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped
    }

    /// Records the event `name` of `class` on `key` of `db`, if asked for.
    pub fn notify(&mut self, class: u16, name: &'static str, db: u8, key: &[u8]) {
        if Classes::wants(self.recorded(), class) {
            if let Some(e) = self.held(class, name, db, key) {
                self.events.push(e);
            }
        }
    }

    /// Records an event that follows the command's own (a `del` of a key the command left
    /// empty): the command's event, recorded after it ran, goes in front of it.
    pub fn notify_after(&mut self, class: u16, name: &'static str, db: u8, key: &[u8]) {
        if Classes::wants(self.recorded(), class) {
            self.trailing.get_or_insert(self.events.len());
            self.notify(class, name, db, key);
        }
    }

    /// Records the command's own event, in front of those [`Tx::notify_after`] recorded
    /// during it.
    pub fn notify_command(&mut self, class: u16, name: &'static str, db: u8, key: &[u8]) {
        if Classes::wants(self.recorded(), class) {
            let Some(e) = self.held(class, name, db, key) else {
                return;
            };
            match self.trailing.as_mut() {
                Some(at) => {
                    self.events.insert(*at, e);
                    *at += 1;
                }
                None => self.events.push(e),
            }
        }
    }

    /// Forgets the events named `name` on `key` recorded since `mark`: the `del` of a
    /// destination a `*STORE` command wrote over (Redis replaces it without one).
    pub fn forget_events(&mut self, mark: &Mark, name: &str, db: u8, key: &[u8]) {
        let from = mark.events.min(self.events.len());
        let mut tail = self.events.split_off(from);
        let before = tail.len();
        tail.retain(|e| !(e.name == name && e.db == db && e.key == key));
        if tail.len() != before {
            // What follows the command's own event is no longer where it was.
            self.trailing = None;
        }
        self.events.append(&mut tail);
    }

    /// The events recorded since `mark` named `name` (a `del` the command made).
    pub fn made_event(&self, mark: &Mark, name: &str) -> bool {
        self.events[mark.events.min(self.events.len())..]
            .iter()
            .any(|e| e.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::class;

    #[test]
    fn classes_read_and_written_as_redis() {
        let t = |s: &str| class::text(class::parse(s.as_bytes()).unwrap());
        assert_eq!(t("Egx"), "gxE");
        assert_eq!(t("A"), "A");
        assert_eq!(t("g$lshzxetd"), "A");
        assert_eq!(t("nmKA"), "AKm");
        assert_eq!(t(""), "");
        assert_eq!(t("KEA"), "AKE");
        assert!(class::parse(b"Q").is_none());
        assert!(class::parse(b"Z").is_none());
    }
}
