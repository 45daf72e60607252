//! Connection commands: `PING`, `ECHO`, `QUIT`, `RESET`, `SELECT`, `AUTH`, `HELLO`, `CLIENT`.

use std::time::Instant;

use manifold_redis_proto::{Protocol, Reply};

use super::Session;
use crate::cmd::{parse_i64, Args, Command};
use crate::errors;

pub use crate::cmd::DATABASES;

/// Redis's `validateClientName`: printable ASCII without spaces (an empty name clears it).
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

/// Failed `AUTH` / `HELLO ... AUTH` after which a connection is closed (the last one's
/// `WRONGPASS` sent first): guessing needs a new connection every few tries, each
/// delayed as its address has earned.
pub const MAX_AUTH_FAILURES: u8 = 3;

/// Whether `cmd` checks a password: `AUTH`, or `HELLO` with its `AUTH` option.
pub fn is_login(cmd: &Command<'_>) -> bool {
    match cmd {
        Command::Auth { too_many, .. } => !too_many,
        Command::Hello(args) => args.from(2).any(|a| a.eq_ignore_ascii_case(b"AUTH")),
        _ => false,
    }
}

/// The user a login is counted against by the failed-logins table: the one named, or for
/// `AUTH pass` the one checked first (`user` of `user:pass`, else `default`).
fn counted_user<'a>(user: Option<&'a [u8]>, pass: &'a [u8]) -> &'a [u8] {
    match user {
        Some(u) => u,
        None => pass
            .iter()
            .position(|&b| b == b':')
            .map_or(&b"default"[..], |i| &pass[..i]),
    }
}

/// The user `HELLO`'s `AUTH` option names, read as [`hello`] reads its options: with
/// several `AUTH` options [`hello`] checks the last one, so the last one is counted (a
/// guess must never count against another user, whose login would forgive it).
fn hello_user<'a>(args: &Args<'a>) -> &'a [u8] {
    let mut user: &'a [u8] = b"default";
    let mut j = 2;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j);
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            user = args.get(j + 1);
            j += 3;
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            j += 2;
        } else {
            break;
        }
    }
    user
}

/// Before a login `cmd` is applied (outside `MULTI`): admits it as its address and user
/// have earned by failing ([`manifold_engine::login_throttle`]: at once, or one at a time
/// after a delay), waiting on this connection's task.
pub async fn wait_before_login<'s>(session: &mut Session<'s>, cmd: &Command<'_>) {
    let user = match cmd {
        Command::Auth { user, pass, .. } => counted_user(*user, pass),
        Command::Hello(args) => hello_user(args),
        _ => return,
    };
    let logins: &'s manifold_engine::LoginThrottle = session.fe.shared.credentials.logins();
    session.login_attempt = Some(logins.admit(session.info.addr.ip(), user, None).await);
}

/// How an `AUTH` (or `HELLO ... AUTH`) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Auth {
    LoggedIn,
    /// Redis's `WRONGPASS`; the client stays logged in as before, if it was.
    Refused,
    /// The user is at its `max_connections` (its MySQL sessions count too): the client gets
    /// Redis's `maxclients` error and is closed.
    UserLimit,
}

/// `AUTH` and `HELLO ... AUTH`: `user` and `pass` against manifold's users. `AUTH pass`
/// alone is `user:pass` (for clients that send one argument), else the user `default`.
///
/// Guessing costs time: the password is checked only once admitted ([`wait_before_login`]).
/// A login queued in `MULTI` runs inside `EXEC`, where it cannot wait: it is checked if it
/// would be admitted at once, else refused unchecked; and once the connection has had
/// [`MAX_AUTH_FAILURES`] (it closes after the `EXEC`) no further one is checked. A failure
/// counts against the user at the client's address and toward the connection's
/// [`MAX_AUTH_FAILURES`], inside `EXEC` as outside.
fn authenticate(session: &mut Session<'_>, user: Option<&[u8]>, pass: &[u8]) -> Auth {
    let fe = session.fe;
    let creds = &fe.shared.credentials;
    let logins = creds.logins();
    let ip = session.info.addr.ip();
    let attempt = match session.login_attempt.take() {
        Some(admitted) => admitted.ok(),
        None if session.auth_failures >= MAX_AUTH_FAILURES => None,
        None => logins.try_admit(ip, counted_user(user, pass)),
    };
    let found = if attempt.is_none() {
        None
    } else if let Some(u) = user {
        creds.check(u, pass).map(|l| (u, l))
    } else {
        let split = pass
            .iter()
            .position(|&b| b == b':')
            .map(|i| (&pass[..i], &pass[i + 1..]));
        match split.and_then(|(u, p)| creds.check(u, p).map(|l| (u, l))) {
            Some(found) => Some(found),
            None => creds.check(b"default", pass).map(|l| (&b"default"[..], l)),
        }
    };
    let Some((u, login)) = found else {
        if let Some(attempt) = attempt {
            attempt.failed(manifold_engine::Door::Redis);
        }
        session.auth_failures = session.auth_failures.saturating_add(1);
        if session.auth_failures >= MAX_AUTH_FAILURES {
            session.quit = true;
        }
        return Auth::Refused;
    };
    // The password was right: the user's failures from the address are forgiven even when
    // it is at its connection limit.
    if let Some(attempt) = attempt {
        attempt.succeeded();
    }
    // Logging in again as the same user keeps its connection; another user's is taken
    // before this one's is given back (as the MySQL door's COM_CHANGE_USER).
    let same_user = session.info.user.borrow().as_deref() == Some(u);
    let account = match creds.account(u) {
        Some(account) => account,
        // At the limit by its own connection: it keeps that one.
        None if same_user && session.info.account.borrow().is_some() => {
            return logged_in(session, u, &login);
        }
        None => return Auth::UserLimit,
    };
    *session.info.account.borrow_mut() = Some(account);
    logged_in(session, u, &login)
}

fn logged_in(session: &mut Session<'_>, user: &[u8], login: &crate::store::BackendLogin) -> Auth {
    session.authenticated = true;
    session.login = Some(std::rc::Rc::new(crate::store::conn_key(login)));
    *session.info.user.borrow_mut() = Some(user.to_vec());
    session.info.handle.set_user(Some(user));
    Auth::LoggedIn
}

/// Answers an `AUTH` (or `HELLO ... AUTH`) that did not log in, and says whether it did
/// not.
fn refused(session: &mut Session<'_>, auth: Auth, out: &mut Vec<u8>) -> bool {
    match auth {
        Auth::LoggedIn => return false,
        Auth::Refused => {
            Reply::new(out, session.proto).error(errors::WRONGPASS);
        }
        Auth::UserLimit => {
            Reply::new(out, session.proto).error(b"max number of clients reached");
            session.quit = true;
        }
    }
    true
}

/// Switches the session to `proto` (`HELLO`, `RESET`, an `EXEC` tried again).
pub fn set_proto(session: &mut Session<'_>, proto: Protocol) {
    session.proto = proto;
    session.info.proto.set(proto);
    if session.tracking.is_some() {
        let resp3 = proto == Protocol::Resp3;
        session.fe.shared.tracker.set_resp3(session.info.id, resp3);
    }
    // A RESP3 client may be sent pushes any time (the invalidations of a client that
    // redirects them to it): it has a queue.
    if proto == Protocol::Resp3 {
        crate::pubsub::queue(session);
    } else {
        crate::pubsub::release(session);
    }
}

/// `PING [message]`; `subscribed`: the client is a RESP2 subscriber (a script's calls never
/// are).
pub fn ping(args: Args<'_>, proto: Protocol, subscribed: bool, out: &mut Vec<u8>) {
    let mut r = Reply::new(out, proto);
    match args.len() {
        1 | 2 if subscribed => r.array_len(2).bulk(b"pong").bulk(args.get(1)),
        1 => r.simple(b"PONG"),
        2 => r.bulk(args.get(1)),
        _ => {
            let mut text = Vec::with_capacity(48);
            errors::arity(&mut text, "ping");
            r.error(&text)
        }
    };
}

pub fn apply(session: &mut Session<'_>, cmd: Command<'_>, out: &mut Vec<u8>) {
    match cmd {
        Command::Ping(args) => {
            // A RESP2 subscriber gets `pong` and the message as an array.
            let subscribed = session.proto == Protocol::Resp2 && crate::pubsub::subscribed(session);
            ping(args, session.proto, subscribed, out);
        }
        Command::Echo(msg) => {
            Reply::new(out, session.proto).bulk(msg);
        }
        Command::Quit => {
            session.quit = true;
            Reply::new(out, session.proto).simple(b"OK");
        }
        Command::Reset => {
            // Redis's clearClientConnectionState: protocol 2, database 0, no name, the
            // default user (here: none, so not authenticated).
            set_proto(session, Protocol::Resp2);
            session.info.db.set(0);
            session.info.name.borrow_mut().clear();
            session.authenticated = false;
            session.login = None;
            session.multi = None;
            session.watched.clear();
            crate::pubsub::leave(session);
            *session.info.user.borrow_mut() = None;
            session.info.account.borrow_mut().take();
            session.info.handle.set_user(None);
            Reply::new(out, session.proto).simple(b"RESET");
        }
        Command::Select(db) => {
            let mut r = Reply::new(out, session.proto);
            match parse_i64(db).and_then(|n| i32::try_from(n).ok()) {
                None => {
                    r.error(errors::NOT_INTEGER);
                }
                Some(n) if !(0..DATABASES as i32).contains(&n) => {
                    r.error(errors::DB_OUT_OF_RANGE);
                }
                Some(n) => {
                    session.info.db.set(n as u8);
                    r.simple(b"OK");
                }
            }
        }
        Command::Auth {
            user,
            pass,
            too_many,
        } => {
            if too_many {
                Reply::new(out, session.proto).error(errors::SYNTAX);
            } else {
                let auth = authenticate(session, user, pass);
                if !refused(session, auth, out) {
                    Reply::new(out, session.proto).simple(b"OK");
                }
            }
        }
        Command::Hello(args) => hello(session, args, out),
        Command::ClientId => {
            Reply::new(out, session.proto).integer(session.info.id as i64);
        }
        Command::ClientSetName(name) => {
            let mut r = Reply::new(out, session.proto);
            if valid_name(name) {
                name.clone_into(&mut session.info.name.borrow_mut());
                r.simple(b"OK");
            } else {
                r.error(errors::BAD_CLIENT_NAME);
            }
        }
        Command::ClientGetName => {
            let name = session.info.name.borrow();
            let mut r = Reply::new(out, session.proto);
            if name.is_empty() {
                r.null();
            } else {
                r.bulk(&name);
            }
        }
        Command::ClientSetInfo(attr, value) => {
            // Redis 7.2's command (clients send it; 7.0 does not know it).
            let mut r = Reply::new(out, session.proto);
            let known =
                attr.eq_ignore_ascii_case(b"lib-name") || attr.eq_ignore_ascii_case(b"lib-ver");
            if !known {
                let mut text = b"Unrecognized option '".to_vec();
                text.extend_from_slice(attr);
                text.push(b'\'');
                r.error(&text);
            } else if !valid_name(value) {
                let mut text = attr.to_ascii_lowercase();
                text.extend_from_slice(b" cannot contain spaces, newlines or special characters.");
                r.error(&text);
            } else {
                r.simple(b"OK");
            }
        }
        Command::ClientInfo => {
            let mut line = Vec::with_capacity(256);
            client_line(session.fe, session.info, &mut line);
            Reply::new(out, session.proto).verbatim(b"txt", &line);
        }
        Command::ClientList(args) => client_list(session, args, out),
        Command::ClientKill(args) => {
            crate::kill::client_kill(session, args, out);
            // Killed itself: closes once its replies are written.
            if session.info.handle.is_killed() {
                session.quit = true;
            }
        }
        Command::ClientNoEvict(arg) => {
            let mut r = Reply::new(out, session.proto);
            if arg.eq_ignore_ascii_case(b"on") || arg.eq_ignore_ascii_case(b"off") {
                r.simple(b"OK");
            } else {
                r.error(errors::SYNTAX);
            }
        }
        Command::ClientTracking(args) => super::tracking::tracking(session, args, out),
        Command::ClientCaching(arg) => super::tracking::caching(session, arg, out),
        Command::ClientGetRedir => super::tracking::getredir(session, out),
        Command::ClientTrackingInfo => super::tracking::trackinginfo(session, out),
        Command::ClientHelp => {
            let lines: [&[u8]; 15] = [
                b"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                b"ID",
                b"    Return the ID of the current connection.",
                b"GETNAME | SETNAME <name>",
                b"    Return or set the name of the current connection.",
                b"INFO | LIST",
                b"    Describe the current connection, or this worker's connections.",
                b"NO-EVICT (ON|OFF) | SETINFO (LIB-NAME|LIB-VER) <value>: accepted, no effect.",
                b"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
                b"         [OPTIN] [OPTOUT] [NOLOOP]",
                b"    Control server assisted client side caching.",
                b"CACHING (YES|NO)",
                b"    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
                b"GETREDIR | TRACKINGINFO",
                b"    Return the client invalidations are redirected to, or the tracking state.",
            ];
            let mut r = Reply::new(out, session.proto);
            r.array_len(lines.len());
            for l in lines {
                r.simple(l);
            }
        }
        _ => {}
    }
}

/// `HELLO [version [AUTH user pass] [SETNAME name]]`, checked in Redis's order.
fn hello(session: &mut Session<'_>, args: Args<'_>, out: &mut Vec<u8>) {
    let mut proto = None;
    if args.len() >= 2 {
        let Some(v) = parse_i64(args.get(1)) else {
            Reply::new(out, session.proto).error(errors::PROTO_NOT_INTEGER);
            return;
        };
        let Some(p) = Protocol::from_version(v) else {
            Reply::new(out, session.proto).error(errors::NOPROTO);
            return;
        };
        proto = Some(p);
    }
    let (mut auth, mut name) = (None, None);
    let mut j = 2;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j);
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            auth = Some((args.get(j + 1), args.get(j + 2)));
            j += 3;
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            let n = args.get(j + 1);
            if !valid_name(n) {
                Reply::new(out, session.proto).error(errors::BAD_CLIENT_NAME);
                return;
            }
            name = Some(n);
            j += 2;
        } else {
            let mut text = b"Syntax error in HELLO option '".to_vec();
            text.extend_from_slice(opt);
            text.push(b'\'');
            Reply::new(out, session.proto).error(&text);
            return;
        }
    }
    if let Some((user, pass)) = auth {
        let auth = authenticate(session, Some(user), pass);
        if refused(session, auth, out) {
            return;
        }
    }
    if !session.authenticated {
        Reply::new(out, session.proto).error(errors::HELLO_NOAUTH);
        return;
    }
    if let Some(n) = name {
        n.clone_into(&mut session.info.name.borrow_mut());
    }
    if let Some(p) = proto {
        set_proto(session, p);
    }
    let mut r = Reply::new(out, session.proto);
    r.map_len(7);
    r.bulk(b"server").bulk(b"redis");
    r.bulk(b"version").bulk(crate::REDIS_VERSION.as_bytes());
    r.bulk(b"proto").integer(match session.proto {
        Protocol::Resp2 => 2,
        Protocol::Resp3 => 3,
    });
    r.bulk(b"id").integer(session.info.id as i64);
    r.bulk(b"mode").bulk(b"standalone");
    r.bulk(b"role").bulk(b"master");
    r.bulk(b"modules").array_len(0);
}

/// `CLIENT LIST`, `CLIENT LIST TYPE normal`, `CLIENT LIST ID id...`: this worker's clients.
fn client_list(session: &Session<'_>, args: Args<'_>, out: &mut Vec<u8>) {
    let mut ids: Option<Vec<u64>> = None;
    if args.len() > 2 {
        let opt = args.get(2);
        let ok = if opt.eq_ignore_ascii_case(b"type") && args.len() == 4 {
            let t = args.get(3);
            if t.eq_ignore_ascii_case(b"normal") {
                true
            } else if [&b"master"[..], b"replica", b"slave", b"pubsub"]
                .iter()
                .any(|k| t.eq_ignore_ascii_case(k))
            {
                ids = Some(Vec::new());
                true
            } else {
                let mut text = b"Unknown client type '".to_vec();
                text.extend_from_slice(t);
                text.push(b'\'');
                Reply::new(out, session.proto).error(&text);
                return;
            }
        } else if opt.eq_ignore_ascii_case(b"id") && args.len() >= 4 {
            let mut v = Vec::new();
            for a in args.from(3) {
                match parse_i64(a) {
                    Some(n) if n > 0 => v.push(n as u64),
                    _ => {
                        Reply::new(out, session.proto).error(b"Invalid client ID");
                        return;
                    }
                }
            }
            ids = Some(v);
            true
        } else {
            false
        };
        if !ok {
            Reply::new(out, session.proto).error(errors::SYNTAX);
            return;
        }
    }
    let mut text = Vec::with_capacity(256);
    let process = sees_everyone(session.info);
    let me = session.info.user.borrow();
    for (id, info) in session.fe.clients.borrow().iter() {
        if ids.as_ref().is_none_or(|ids| ids.contains(id))
            && (process || *info.user.borrow() == *me)
        {
            client_line(session.fe, info, &mut text);
        }
    }
    Reply::new(out, session.proto).verbatim(b"txt", &text);
}

/// The client's user has `process = true`: it sees (and may end) every user's clients, not
/// only its own user's.
pub fn sees_everyone(info: &crate::server::ClientInfo) -> bool {
    info.account.borrow().as_ref().is_some_and(|a| a.process)
}

/// `CLIENT LIST`'s flags of what the door shows: `t` tracking keys, `R` its redirect
/// target left, `B` broadcast; `N` none.
fn tracking_flags(c: &crate::server::ClientInfo) -> &'static str {
    if c.redirect.get() < 0 {
        return "N";
    }
    let broken = c
        .broken_redirect
        .borrow()
        .as_ref()
        .is_some_and(|b| b.load(std::sync::atomic::Ordering::Relaxed));
    match (broken, c.bcast.get()) {
        (false, false) => "t",
        (true, false) => "tR",
        (false, true) => "tB",
        (true, true) => "tRB",
    }
}

/// One line of `CLIENT LIST` in Redis 7.0's fields; memory and buffer fields are 0.
fn client_line(
    fe: &crate::server::RedisFrontend,
    c: &crate::server::ClientInfo,
    out: &mut Vec<u8>,
) {
    use std::io::Write;
    let now = Instant::now();
    let _ = fe;
    let user = c.user.borrow();
    let user = user.as_deref().map_or(
        std::borrow::Cow::Borrowed("default"),
        String::from_utf8_lossy,
    );
    let _ = write!(
        out,
        "id={} addr={} laddr={} fd={} name=",
        c.id, c.addr, c.laddr, c.fd
    );
    out.extend_from_slice(&c.name.borrow());
    let _ = writeln!(
        out,
        " age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir={} resp={}",
        now.duration_since(c.created).as_secs(),
        now.duration_since(c.last_active.get()).as_secs(),
        tracking_flags(c),
        c.db.get(),
        c.cmd.get(),
        user,
        c.redirect.get(),
        match c.proto.get() {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    );
}
