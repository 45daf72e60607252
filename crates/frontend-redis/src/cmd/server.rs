//! Server commands clients send on connect: `INFO`, `CONFIG GET`, `COMMAND`, `TIME`,
//! `DBSIZE`.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use manifold_redis_proto::Reply;

use super::{check, Args, Command, Reject, Session};

/// The server command named `name`, `Ok(None)` when it is not one.
pub fn parse<'a>(name: &[u8], args: Args<'a>) -> Result<Option<Command<'a>>, Reject<'a>> {
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    let cmd = if is("info") {
        Command::Info(args)
    } else if is("time") {
        check(1, &args, "time")?;
        Command::Time
    } else if is("dbsize") {
        check(1, &args, "dbsize")?;
        Command::DbSize
    } else if is("command") {
        if args.len() == 1 {
            Command::CommandAll
        } else {
            let sub = args.get(1);
            if sub.eq_ignore_ascii_case(b"count") {
                check(2, &args, "command|count")?;
                Command::CommandCount
            } else if sub.eq_ignore_ascii_case(b"docs") {
                Command::CommandDocs
            } else if sub.eq_ignore_ascii_case(b"help") {
                check(2, &args, "command|help")?;
                Command::CommandHelp
            } else {
                return Err(Reject::UnknownSubcommand {
                    container: "COMMAND",
                    sub,
                });
            }
        }
    } else if is("config") {
        check(-2, &args, "config")?;
        let sub = args.get(1);
        if sub.eq_ignore_ascii_case(b"get") {
            check(-3, &args, "config|get")?;
            Command::ConfigGet(args)
        } else if sub.eq_ignore_ascii_case(b"help") {
            check(2, &args, "config|help")?;
            Command::ConfigHelp
        } else {
            return Err(Reject::UnknownSubcommand {
                container: "CONFIG",
                sub,
            });
        }
    } else {
        return Ok(None);
    };
    Ok(Some(cmd))
}

/// Redis's `stringmatchlen` for `*`, `?`, `[...]` and `\`, without case.
fn glob(pattern: &[u8], s: &[u8]) -> bool {
    let Some((&p, rest)) = pattern.split_first() else {
        return s.is_empty();
    };
    match p {
        b'*' => (0..=s.len()).any(|i| glob(rest, &s[i..])),
        b'?' => !s.is_empty() && glob(rest, &s[1..]),
        b'[' => {
            let Some(end) = rest.iter().position(|&b| b == b']') else {
                return !s.is_empty() && s[0] == b'[' && glob(rest, &s[1..]);
            };
            let (set, after) = (&rest[..end], &rest[end + 1..]);
            let Some(&c) = s.first() else { return false };
            let (neg, set) = match set.split_first() {
                Some((b'^', r)) => (true, r),
                _ => (false, set),
            };
            let c = c.to_ascii_lowercase();
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    let (a, b) = (set[i].to_ascii_lowercase(), set[i + 2].to_ascii_lowercase());
                    hit |= (a.min(b)..=a.max(b)).contains(&c);
                    i += 3;
                } else {
                    hit |= set[i].to_ascii_lowercase() == c;
                    i += 1;
                }
            }
            hit != neg && glob(after, &s[1..])
        }
        b'\\' if !rest.is_empty() => {
            !s.is_empty() && s[0].eq_ignore_ascii_case(&rest[0]) && glob(&rest[1..], &s[1..])
        }
        _ => !s.is_empty() && s[0].eq_ignore_ascii_case(&p) && glob(rest, &s[1..]),
    }
}

/// The parameters `CONFIG GET` knows, with their values now.
fn parameters(session: &Session<'_>) -> [(&'static str, String); 7] {
    let cfg = &session.fe.shared.config;
    [
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("databases", super::connection::DATABASES.to_string()),
        ("maxclients", cfg.max_clients.to_string()),
        ("timeout", cfg.idle_timeout.as_secs().to_string()),
        ("proto-max-bulk-len", cfg.proto_max_bulk_len.to_string()),
        ("port", session.info.laddr.port().to_string()),
    ]
}

fn info_text(session: &Session<'_>, args: Args<'_>) -> Vec<u8> {
    let shared = &session.fe.shared;
    let wanted = |section: &str| {
        args.len() < 2
            || args.from(1).any(|a| {
                a.eq_ignore_ascii_case(section.as_bytes())
                    || a.eq_ignore_ascii_case(b"all")
                    || a.eq_ignore_ascii_case(b"default")
                    || a.eq_ignore_ascii_case(b"everything")
            })
    };
    let mut t = Vec::with_capacity(512);
    let sep = |t: &mut Vec<u8>| {
        if !t.is_empty() {
            t.extend_from_slice(b"\r\n");
        }
    };
    if wanted("server") {
        sep(&mut t);
        let _ = write!(
            t,
            "# Server\r\nredis_version:{}\r\nredis_mode:standalone\r\nmanifold_version:{}\r\nos:{} {}\r\narch_bits:{}\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\n",
            crate::REDIS_VERSION,
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH,
            usize::BITS,
            std::process::id(),
            session.info.laddr.port(),
            shared.uptime_secs(),
            shared.uptime_secs() / 86_400,
        );
    }
    if wanted("clients") {
        sep(&mut t);
        let _ = write!(
            t,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n",
            shared.clients(),
            shared.config.max_clients
        );
    }
    if wanted("persistence") {
        sep(&mut t);
        t.extend_from_slice(b"# Persistence\r\nloading:0\r\nasync_loading:0\r\n");
    }
    if wanted("replication") {
        sep(&mut t);
        t.extend_from_slice(b"# Replication\r\nrole:master\r\nconnected_slaves:0\r\n");
    }
    if wanted("keyspace") {
        sep(&mut t);
        t.extend_from_slice(b"# Keyspace\r\n");
    }
    t
}

pub fn apply(session: &mut Session<'_>, cmd: Command<'_>, out: &mut Vec<u8>) {
    match cmd {
        Command::Info(args) => {
            let text = info_text(session, args);
            Reply::new(out, session.proto).verbatim(b"txt", &text);
        }
        Command::Time => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let (s, us) = (itoa(now.as_secs()), itoa(u64::from(now.subsec_micros())));
            Reply::new(out, session.proto)
                .array_len(2)
                .bulk(&s)
                .bulk(&us);
        }
        Command::DbSize => {
            Reply::new(out, session.proto).integer(0);
        }
        Command::CommandAll => {
            Reply::new(out, session.proto).array_len(0);
        }
        Command::CommandCount => {
            Reply::new(out, session.proto).integer(super::COMMAND_COUNT);
        }
        Command::CommandDocs => {
            Reply::new(out, session.proto).map_len(0);
        }
        Command::CommandHelp | Command::ConfigHelp => {
            let (head, line): (&[u8], &[u8]) = if matches!(cmd, Command::CommandHelp) {
                (
                    b"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    b"COUNT | DOCS [<command-name> ...]",
                )
            } else {
                (
                    b"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    b"GET <pattern> [<pattern> ...]",
                )
            };
            Reply::new(out, session.proto)
                .array_len(2)
                .simple(head)
                .simple(line);
        }
        Command::ConfigGet(args) => {
            let params = parameters(session);
            let hit: Vec<&(&str, String)> = params
                .iter()
                .filter(|(name, _)| args.from(2).any(|p| glob(p, name.as_bytes())))
                .collect();
            let mut r = Reply::new(out, session.proto);
            r.map_len(hit.len());
            for (name, value) in hit {
                r.bulk(name.as_bytes()).bulk(value.as_bytes());
            }
        }
        _ => {}
    }
}

fn itoa(n: u64) -> Vec<u8> {
    n.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob(b"*", b"save"));
        assert!(glob(b"SAVE", b"save"));
        assert!(glob(b"app*", b"appendonly"));
        assert!(glob(b"s?ve", b"save"));
        assert!(glob(b"[st]ave", b"save"));
        assert!(!glob(b"[^s]ave", b"save"));
        assert!(!glob(b"sav", b"save"));
        assert!(glob(b"max*s", b"maxclients"));
    }
}
