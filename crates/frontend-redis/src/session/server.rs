//! Server commands clients send on connect: `INFO` ([`super::info`]), `CONFIG GET`,
//! `COMMAND`, `TIME` (`DBSIZE` counts keys: [`super::keys`]).

use std::time::{SystemTime, UNIX_EPOCH};

use manifold_redis_proto::{Protocol, Reply};

use super::Session;
use crate::cmd::table::{table, Group};
use crate::cmd::{Args, Command};

/// Redis's `stringmatchlen` for `*`, `?`, `[...]` and `\\`, without case. Iterative, with
/// only the last `*` to go back to: at most pattern × text steps and no recursion, whatever
/// the client sends (a pattern of many stars would otherwise take exponential time, or
/// overflow the worker's stack).
fn glob(pattern: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    // Where to resume after the last `*`: the pattern after it, and the text it took up to.
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            star = Some((p, i));
            continue;
        }
        if let Some(next) = (p < pattern.len()).then(|| one(pattern, p, s[i])).flatten() {
            p = next;
            i += 1;
            continue;
        }
        let Some((after, took)) = star else {
            return false;
        };
        // The last `*` takes one more character.
        star = Some((after, took + 1));
        p = after;
        i = took + 1;
    }
    while p < pattern.len() && pattern[p] == b'*' {
        p += 1;
    }
    p == pattern.len()
}

/// Matches the character `c` against the pattern element at `p` (not a `*`): where the
/// pattern goes on if it matches.
fn one(pattern: &[u8], p: usize, c: u8) -> Option<usize> {
    let c = c.to_ascii_lowercase();
    match pattern[p] {
        b'?' => Some(p + 1),
        b'[' => {
            let rest = &pattern[p + 1..];
            let Some(end) = rest.iter().position(|&b| b == b']') else {
                // No closing bracket: a literal `[`.
                return (c == b'[').then_some(p + 1);
            };
            let (neg, set) = match rest[..end].split_first() {
                Some((b'^', r)) => (true, r),
                _ => (false, &rest[..end]),
            };
            let mut hit = false;
            let mut k = 0;
            while k < set.len() {
                if k + 2 < set.len() && set[k + 1] == b'-' {
                    let (a, b) = (set[k].to_ascii_lowercase(), set[k + 2].to_ascii_lowercase());
                    hit |= (a.min(b)..=a.max(b)).contains(&c);
                    k += 3;
                } else {
                    hit |= set[k].to_ascii_lowercase() == c;
                    k += 1;
                }
            }
            (hit != neg).then_some(p + 1 + end + 1)
        }
        b'\\' if p + 1 < pattern.len() => {
            (pattern[p + 1].to_ascii_lowercase() == c).then_some(p + 2)
        }
        x => (x.to_ascii_lowercase() == c).then_some(p + 1),
    }
}

/// The parameters `CONFIG GET` knows, with their values now.
fn parameters(session: &Session<'_>) -> [(&'static str, String); 11] {
    let cfg = &session.fe.shared.config;
    let shared = &session.fe.shared;
    [
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("databases", super::connection::DATABASES.to_string()),
        ("maxclients", cfg.max_clients.to_string()),
        ("timeout", cfg.idle_timeout.as_secs().to_string()),
        ("proto-max-bulk-len", cfg.proto_max_bulk_len.to_string()),
        ("port", session.info.laddr.port().to_string()),
        ("client-output-buffer-limit", shared.output.redis_form()),
        (
            "client-query-buffer-limit",
            shared.limits.client_query_buffer_limit.to_string(),
        ),
        ("maxmemory-clients", cfg.max_memory_clients.to_string()),
        ("maxmemory", "0".into()),
    ]
}

/// `CONFIG HELP`, as Redis 7.0.15 writes it.
const CONFIG_HELP: [&str; 11] = [
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
];

/// `COMMAND INFO [name...]`: each command's name, arity, flags, key positions and ACL
/// categories as Redis 7.0 lays them out (flags `write` or `readonly` only; no tips, key
/// specs or subcommands); a command the door does not serve is nil.
fn command_info(session: &Session<'_>, args: Args<'_>, out: &mut Vec<u8>) {
    let mut r = Reply::new(out, session.proto);
    r.array_len(args.len().saturating_sub(2));
    for name in args.from(2) {
        // `container|sub` names a subcommand, as in Redis 7.0.
        let found = match name.iter().position(|&b| b == b'|') {
            Some(bar) => table()
                .command(&name[..bar])
                .and_then(|c| table().subcommand(c, &name[bar + 1..])),
            None => table().command(name),
        };
        let Some(e) = found else {
            r.null();
            continue;
        };
        let write = e.write();
        r.array_len(10)
            .bulk(e.name.as_bytes())
            .integer(i64::from(e.arity));
        r.set_len(1)
            .simple(if write { b"write" } else { b"readonly" });
        r.integer(e.keys.first)
            .integer(e.keys.last)
            .integer(e.keys.step);
        // The data family's category; `@connection` for every other command.
        let family = match e.group {
            Group::Data(_) => e.group.name(),
            _ => "connection",
        };
        r.set_len(2)
            .simple(if write { b"@write" } else { b"@read" })
            .simple(format!("@{family}").as_bytes());
        // Tips, key specs, subcommands.
        r.set_len(0).set_len(0).set_len(0);
    }
}

/// `TIME` (a script calls it too).
pub fn time(proto: Protocol, out: &mut Vec<u8>) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let (s, us) = (itoa(now.as_secs()), itoa(u64::from(now.subsec_micros())));
    Reply::new(out, proto).array_len(2).bulk(&s).bulk(&us);
}

pub fn apply(session: &mut Session<'_>, cmd: Command<'_>, out: &mut Vec<u8>) {
    match cmd {
        Command::Info(args) => super::info::reply(session, args, out),
        Command::Time => time(session.proto, out),
        Command::CommandAll => {
            Reply::new(out, session.proto).array_len(0);
        }
        Command::CommandCount => {
            Reply::new(out, session.proto).integer(table().count() as i64);
        }
        Command::CommandInfo(args) => command_info(session, args, out),
        Command::CommandDocs => {
            Reply::new(out, session.proto).map_len(0);
        }
        Command::ConfigHelp => {
            let mut r = Reply::new(out, session.proto);
            r.array_len(CONFIG_HELP.len());
            for line in CONFIG_HELP {
                r.simple(line.as_bytes());
            }
        }
        Command::CommandHelp => {
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
            let mut params = parameters(session).to_vec();
            params.extend(session.fe.shared.settings.parameters());
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
        assert!(glob(b"*a*e*", b"databases"));
        assert!(glob(b"\\*x", b"*x"));
        assert!(!glob(b"\\*x", b"ax"));
        assert!(glob(b"[ab*", b"[abc"), "a [ without ] is literal");
        assert!(!glob(b"", b"save"));
        assert!(glob(b"", b""));
    }

    #[test]
    fn a_hostile_pattern_is_cheap() {
        // Exponential for a recursive matcher, and deep enough to overflow its stack.
        let mut many = b"*a".repeat(60);
        many.push(b'z');
        assert!(!glob(&many, &[b'a'; 64]));
        assert!(glob(&vec![b'*'; 200_000], b"save"));
    }
}
