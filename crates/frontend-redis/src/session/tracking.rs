//! Client-side caching, the session's part: `CLIENT TRACKING`, `CLIENT CACHING`, `CLIENT
//! GETREDIR`, `CLIENT TRACKINGINFO` (Redis 7.0's `clientCommand`, same checks in the same
//! order, same texts), and the keys a tracking client reads, remembered in the shared table
//! ([`crate::tracking`]) **before** the command runs: a change committed after that is
//! sent to the client after the command's reply (its queue is written only between
//! requests), so the client never keeps a value older than the last invalidation it got.
//!
//! A tracking client's batches run alone (never joined with other clients' into one
//! statement, [`crate::group`]) and on the primary: a replica may not have applied a change
//! whose invalidation was already sent, and a value read there would then be kept.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use manifold_redis_proto::{Protocol, Reply};

use super::Session;
use crate::cmd::{parse_i64, Args, Entry, Spec};
use crate::errors;
use crate::tracking::{Mode, MAX_PREFIXES};

/// A session's tracking of keys, while it is on.
#[derive(Debug)]
pub struct ClientTracking {
    pub mode: Mode,
    /// `CLIENT CACHING` was given for the next command (or transaction).
    pub caching: bool,
    /// The `BCAST` prefixes, in order.
    pub prefixes: BTreeSet<Vec<u8>>,
    /// Its redirect target left (set by whoever found it gone).
    pub broken: Arc<AtomicBool>,
}

/// The error texts of `CLIENT TRACKING` and `CLIENT CACHING`, as Redis 7.0's.
mod text {
    pub const ONE_REDIRECT: &[u8] = b"A client can only redirect to a single other client";
    pub const NO_SUCH_REDIRECT: &[u8] = b"The client ID you want redirect to does not exist";
    pub const PREFIX_NEEDS_BCAST: &[u8] = b"PREFIX option requires BCAST mode to be enabled";
    pub const BCAST_SWITCH: &[u8] = b"You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.";
    pub const BCAST_OPTIN: &[u8] = b"OPTIN and OPTOUT are not compatible with BCAST";
    pub const OPTIN_OPTOUT: &[u8] = b"You can't specify both OPTIN mode and OPTOUT mode";
    pub const OPT_SWITCH: &[u8] = b"You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.";
    pub const CACHING_OFF: &[u8] = b"CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled";
    pub const CACHING_YES: &[u8] =
        b"CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.";
    pub const CACHING_NO: &[u8] =
        b"CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.";
}

/// Whether `a` and `b` would invalidate some key alike (one starts the other).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p]... [OPTIN] [OPTOUT] [NOLOOP]`.
pub fn tracking(session: &mut Session<'_>, args: Args<'_>, out: &mut Vec<u8>) {
    let mut r = Reply::new(out, session.proto);
    let mut mode = Mode::default();
    let mut redirect: i64 = 0;
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let opt = args.get(j);
        let more = args.len() - 1 > j;
        if opt.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if redirect != 0 {
                r.error(text::ONE_REDIRECT);
                return;
            }
            let Some(id) = parse_i64(args.get(j)) else {
                r.error(errors::NOT_INTEGER);
                return;
            };
            redirect = id;
            // Another user's client is answered for as one that does not exist (as
            // `CLIENT KILL` does): its key names are not this client's to send there.
            let target = u64::try_from(id)
                .ok()
                .and_then(|id| session.fe.shared.registry.get(id));
            let visible = target.is_some_and(|t| {
                crate::session::connection::sees_everyone(session.info)
                    || t.is_user(session.info.user.borrow().as_deref())
            });
            if !visible {
                r.error(text::NO_SUCH_REDIRECT);
                return;
            }
        } else if opt.eq_ignore_ascii_case(b"bcast") {
            mode.bcast = true;
        } else if opt.eq_ignore_ascii_case(b"optin") {
            mode.optin = true;
        } else if opt.eq_ignore_ascii_case(b"optout") {
            mode.optout = true;
        } else if opt.eq_ignore_ascii_case(b"noloop") {
            mode.noloop = true;
        } else if opt.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            prefixes.push(args.get(j));
        } else {
            r.error(errors::SYNTAX);
            return;
        }
        j += 1;
    }
    mode.redirect = redirect as u64;
    let on = args.get(2);
    if on.eq_ignore_ascii_case(b"off") {
        if session.tracking.take().is_some() {
            session.fe.shared.tracker.disable(session.info.id);
            shown_off(session.info);
            crate::pubsub::release(session);
        }
        Reply::new(out, session.proto).simple(b"OK");
        return;
    }
    if !on.eq_ignore_ascii_case(b"on") {
        r.error(errors::SYNTAX);
        return;
    }
    if !mode.bcast && !prefixes.is_empty() {
        r.error(text::PREFIX_NEEDS_BCAST);
        return;
    }
    let was = session.tracking.as_deref();
    if was.is_some_and(|t| t.mode.bcast != mode.bcast) {
        r.error(text::BCAST_SWITCH);
        return;
    }
    if mode.bcast && (mode.optin || mode.optout) {
        r.error(text::BCAST_OPTIN);
        return;
    }
    if mode.optin && mode.optout {
        r.error(text::OPTIN_OPTOUT);
        return;
    }
    if was.is_some_and(|t| (mode.optin && t.mode.optout) || (mode.optout && t.mode.optin)) {
        r.error(text::OPT_SWITCH);
        return;
    }
    if mode.bcast {
        let held = was.map(|t| &t.prefixes);
        for (i, p) in prefixes.iter().enumerate() {
            let clash = match held.and_then(|h| h.iter().find(|q| overlap(p, q))) {
                Some(q) => Some(("an existing", &q[..])),
                None => prefixes[i + 1..]
                    .iter()
                    .find(|q| overlap(p, q))
                    .map(|q| ("another provided", *q)),
            };
            if let Some((which, q)) = clash {
                let mut e = b"Prefix '".to_vec();
                e.extend_from_slice(p);
                e.extend_from_slice(format!("' overlaps with {which} prefix '").as_bytes());
                e.extend_from_slice(q);
                e.extend_from_slice(b"'. Prefixes for a single client must not overlap.");
                r.error(&e);
                return;
            }
        }
        let count = held.map_or(0, BTreeSet::len) + prefixes.len().max(1);
        if count > MAX_PREFIXES {
            r.error(format!("manifold: at most {MAX_PREFIXES} prefixes per client").as_bytes());
            return;
        }
    }
    let broken = session.fe.shared.tracker.enable(
        session.info.id,
        mode,
        &prefixes,
        session.proto == Protocol::Resp3,
    );
    // Enabled again: `CLIENT CACHING` given before still counts, as in Redis.
    let (mut held, caching) = session
        .tracking
        .take()
        .map(|t| (t.prefixes, t.caching))
        .unwrap_or_default();
    if mode.bcast {
        if prefixes.is_empty() {
            held.insert(Vec::new());
        }
        held.extend(prefixes.iter().map(|p| p.to_vec()));
    }
    session.tracking = Some(Box::new(ClientTracking {
        mode,
        caching,
        prefixes: held,
        broken,
    }));
    session.info.redirect.set(mode.redirect as i64);
    session.info.bcast.set(mode.bcast);
    *session.info.broken_redirect.borrow_mut() =
        session.tracking.as_ref().map(|t| t.broken.clone());
    crate::pubsub::queue(session);
    Reply::new(out, session.proto).simple(b"OK");
}

/// `CLIENT LIST` shows the client not tracking.
pub fn shown_off(info: &crate::server::ClientInfo) {
    info.redirect.set(-1);
    info.bcast.set(false);
    info.broken_redirect.borrow_mut().take();
}

/// `CLIENT CACHING YES|NO`.
pub fn caching(session: &mut Session<'_>, arg: &[u8], out: &mut Vec<u8>) {
    let mut r = Reply::new(out, session.proto);
    let Some(t) = session.tracking.as_deref_mut() else {
        r.error(text::CACHING_OFF);
        return;
    };
    if arg.eq_ignore_ascii_case(b"yes") {
        if !t.mode.optin {
            r.error(text::CACHING_YES);
            return;
        }
    } else if arg.eq_ignore_ascii_case(b"no") {
        if !t.mode.optout {
            r.error(text::CACHING_NO);
            return;
        }
    } else {
        r.error(errors::SYNTAX);
        return;
    }
    t.caching = true;
    r.simple(b"OK");
}

/// `CLIENT GETREDIR`.
pub fn getredir(session: &Session<'_>, out: &mut Vec<u8>) {
    let id = session
        .tracking
        .as_ref()
        .map_or(-1, |t| t.mode.redirect as i64);
    Reply::new(out, session.proto).integer(id);
}

/// `CLIENT TRACKINGINFO`.
pub fn trackinginfo(session: &Session<'_>, out: &mut Vec<u8>) {
    let t = session.tracking.as_deref();
    let mut flags: Vec<&[u8]> = vec![if t.is_some() { b"on" } else { b"off" }];
    if let Some(t) = t {
        if t.mode.bcast {
            flags.push(b"bcast");
        }
        if t.mode.optin {
            flags.push(b"optin");
            if t.caching {
                flags.push(b"caching-yes");
            }
        }
        if t.mode.optout {
            flags.push(b"optout");
            if t.caching {
                flags.push(b"caching-no");
            }
        }
        if t.mode.noloop {
            flags.push(b"noloop");
        }
        if t.broken.load(Ordering::Relaxed) {
            flags.push(b"broken_redirect");
        }
    }
    let mut r = Reply::new(out, session.proto);
    r.map_len(3).bulk(b"flags").set_len(flags.len());
    for f in flags {
        r.bulk(f);
    }
    r.bulk(b"redirect")
        .integer(t.map_or(-1, |t| t.mode.redirect as i64));
    r.bulk(b"prefixes");
    let prefixes = t.map(|t| &t.prefixes);
    r.array_len(prefixes.map_or(0, BTreeSet::len));
    for p in prefixes.into_iter().flatten() {
        r.bulk(p);
    }
}

/// Whether the session's next read is remembered: tracking on, not `BCAST`, and `OPTIN`
/// with `CLIENT CACHING YES` given, or `OPTOUT` without `CLIENT CACHING NO`.
pub fn remembers(session: &Session<'_>) -> bool {
    session.tracking.as_deref().is_some_and(|t| {
        let asked = if t.mode.optin {
            t.caching
        } else if t.mode.optout {
            !t.caching
        } else {
            true
        };
        asked && !t.mode.bcast
    })
}

/// Before the data command `spec` `args` runs: if it reads and the session remembers what
/// it reads, its keys go in the table.
pub fn before_command(session: &Session<'_>, spec: &Spec, args: Args<'_>) {
    // `PFCOUNT` writes only its cached count: Redis counts it a read.
    if (spec.write && spec.name != "pfcount") || !remembers(session) {
        return;
    }
    let keys = read_keys(spec.name, args);
    if !keys.is_empty() {
        session
            .fe
            .shared
            .tracker
            .remember(session.info.id, keys.into_iter());
    }
}

/// Before a script's read command runs (`redis.call` of one): the script's declared keys
/// (`keys`) are remembered, as Redis remembers its caller's (`EVAL`'s) keys.
pub fn before_script_read<'k>(session: &Session<'_>, keys: impl Iterator<Item = &'k [u8]>) {
    if remembers(session) {
        session.fe.shared.tracker.remember(session.info.id, keys);
    }
}

/// What the session was sent while its requests ran (its own writes' invalidations among
/// them) goes out before the next request's reply, as Redis sends a client's pending
/// invalidations right after the command that made them.
pub fn flush_pushes(session: &mut Session<'_>, out: &mut Vec<u8>) {
    if session.tracking.is_none() {
        return;
    }
    let subscribed = crate::pubsub::subscribed(session);
    let proto = session.proto;
    if let Some(subs) = session.subs.as_mut() {
        while let Some(m) = subs.try_next() {
            m.encode(out, proto, subscribed);
        }
    }
}

/// After a request (`entry`, none for an unknown command) ran or was refused: `CLIENT
/// CACHING` counts for the next command only (the next transaction, inside `MULTI`), as
/// Redis's `resetClient` has it.
pub fn after_command(session: &mut Session<'_>, entry: Option<&Entry>) {
    let client = entry.is_some_and(|e| e.name.starts_with("client|"));
    if session.multi.is_some() || client {
        return;
    }
    if let Some(t) = session.tracking.as_deref_mut() {
        t.caching = false;
    }
}

/// The keys a read-only data command reads: its key positions (Redis's first, last,
/// step), or, for those whose keys follow a count or a word, found as Redis's `getkeys`
/// procedures find them.
pub fn read_keys<'a>(name: &str, args: Args<'a>) -> Vec<&'a [u8]> {
    let n = args.len();
    let range = |from: usize, to: usize| (from..to.min(n)).map(|i| args.get(i)).collect();
    match name {
        // `numkeys key...`.
        "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard" => {
            let count = parse_i64(args.get(1)).unwrap_or(0).max(0) as usize;
            range(2, 2usize.saturating_add(count))
        }
        // `... STREAMS key... id...`.
        "xread" => match (1..n).find(|&i| args.get(i).eq_ignore_ascii_case(b"streams")) {
            Some(at) => {
                let rest = n - at - 1;
                range(at + 1, at + 1 + rest / 2)
            }
            None => Vec::new(),
        },
        // `XINFO STREAM key`, `OBJECT ENCODING key`, `MEMORY USAGE key`.
        "xinfo" | "object" | "memory" => range(2, 3),
        _ => crate::cmd::positional_keys(name, &args),
    }
}
