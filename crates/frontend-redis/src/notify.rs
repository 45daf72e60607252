//! Keyspace notifications: which events a data command made, decided once for every
//! command right after it ran in its batch's transaction ([`crate::exec::run_one`], which
//! `EXEC`, scripts and blocking pops run their commands through too), from the command's
//! name, its arguments, whether it changed any row, and, for a pop of several keys, the key
//! its reply names. The transaction keeps them and its worker publishes them once it
//! committed ([`crate::store::events`]); the store itself records `del` (a key deleted, or
//! left empty by the command: after the command's own event, as Redis) and `expired`.
//!
//! The names are Redis 7.0's (`notifyKeyspaceEvent` calls in `t_string.c`, `t_list.c`,
//! `t_hash.c`, `t_set.c`, `t_zset.c`, `t_stream.c`, `db.c`, `expire.c`, `geo.c`,
//! `hyperloglog.c`). A command that changed no row makes no event, as Redis notifies only a
//! change. Gaps, listed in docs/REDIS.md: `new` (`n`) and
//! `keymiss` (`m`) are never sent; `evicted` never happens (keys live in InnoDB).

use crate::cmd::{Args, Spec};
use crate::store::context::Cx;
use crate::store::events::class::{GENERIC, HASH, LIST, SET, STREAM, STRING, ZSET};
use crate::store::events::Mark;

/// Records the events of the command `spec` `args` that just ran on `cx` (`mark`: where
/// it started). Nothing when it changed no row.
pub fn after_command(cx: &mut Cx<'_>, spec: &Spec, args: Args<'_>, mark: Mark) {
    if cx.tx.changed() == mark.changed {
        return;
    }
    let db = cx.db;
    let k1 = args.get(1);
    let arg = |i: usize| if i < args.len() { args.get(i) } else { &[][..] };
    let deleted = cx.tx.made_event(&mark, "del");
    // The key a pop of several keys served: the first element of its reply.
    let replied_key = |out: &[u8]| reply_key(out.get(mark.out..).unwrap_or_default());
    let tx = &mut cx.tx;
    let mut ev =
        |class: u16, name: &'static str, key: &[u8]| tx.notify_command(class, name, db, key);
    match spec.name {
        // Strings.
        "set" => {
            ev(STRING, "set", k1);
            if args.from(3).any(|a| {
                ["ex", "px", "exat", "pxat"]
                    .iter()
                    .any(|o| a.eq_ignore_ascii_case(o.as_bytes()))
            }) {
                ev(GENERIC, "expire", k1);
            }
        }
        "setnx" | "getset" => ev(STRING, "set", k1),
        "setex" | "psetex" => {
            ev(STRING, "set", k1);
            ev(GENERIC, "expire", k1);
        }
        "mset" | "msetnx" => {
            for i in (1..args.len()).step_by(2) {
                ev(STRING, "set", args.get(i));
            }
        }
        "getex" if !deleted => {
            if args.from(2).any(|a| a.eq_ignore_ascii_case(b"persist")) {
                ev(GENERIC, "persist", k1);
            } else if args.len() > 2 {
                ev(GENERIC, "expire", k1);
            }
        }
        "append" => ev(STRING, "append", k1),
        "incr" | "decr" | "incrby" | "decrby" => ev(STRING, "incrby", k1),
        "incrbyfloat" => ev(STRING, "incrbyfloat", k1),
        "setrange" => ev(STRING, "setrange", k1),
        "setbit" | "bitfield" => ev(STRING, "setbit", k1),
        "bitop" => store_event(cx, &mark, STRING, "set", db, arg(2)),
        "pfadd" | "pfmerge" => ev(STRING, "pfadd", k1),
        // Lists.
        "lpush" | "lpushx" => ev(LIST, "lpush", k1),
        "rpush" | "rpushx" => ev(LIST, "rpush", k1),
        "lpop" => ev(LIST, "lpop", k1),
        "rpop" => ev(LIST, "rpop", k1),
        "lset" => ev(LIST, "lset", k1),
        "linsert" => ev(LIST, "linsert", k1),
        "lrem" => ev(LIST, "lrem", k1),
        "ltrim" => ev(LIST, "ltrim", k1),
        "rpoplpush" | "brpoplpush" => {
            // The push on the destination first, then the pop (and the source's `del`).
            ev(LIST, "lpush", arg(2));
            ev(LIST, "rpop", k1);
        }
        "lmove" | "blmove" => {
            let push = if arg(4).eq_ignore_ascii_case(b"left") {
                "lpush"
            } else {
                "rpush"
            };
            let pop = if arg(3).eq_ignore_ascii_case(b"left") {
                "lpop"
            } else {
                "rpop"
            };
            ev(LIST, push, arg(2));
            ev(LIST, pop, k1);
        }
        "blpop" | "brpop" | "lmpop" | "blmpop" => {
            let pop = match spec.name {
                "blpop" => "lpop",
                "brpop" => "rpop",
                _ => {
                    // `[timeout] numkeys key... LEFT|RIGHT`.
                    let at = usize::from(spec.name == "blmpop") + 1;
                    let n = crate::cmd::parse_i64(arg(at)).unwrap_or(0).max(0) as usize;
                    if arg(at + 1 + n).eq_ignore_ascii_case(b"left") {
                        "lpop"
                    } else {
                        "rpop"
                    }
                }
            };
            if let Some(key) = replied_key(&cx.out) {
                cx.tx.notify_command(LIST, pop, db, &key);
            }
        }
        // Hashes.
        "hset" | "hmset" | "hsetnx" => ev(HASH, "hset", k1),
        "hdel" => ev(HASH, "hdel", k1),
        "hincrby" => ev(HASH, "hincrby", k1),
        "hincrbyfloat" => ev(HASH, "hincrbyfloat", k1),
        // Sets.
        "sadd" => ev(SET, "sadd", k1),

        "spop" => ev(SET, "spop", k1),
        // `SMOVE`'s `sadd` on the destination, when it gained the member, is the family's
        // (recorded after the source's `del`, as Redis).
        "srem" | "smove" => ev(SET, "srem", k1),
        "sinterstore" | "sunionstore" | "sdiffstore" => {
            store_event(cx, &mark, SET, spec.name, db, k1);
        }
        // Sorted sets (and geo, which are sorted sets).
        "zadd" => {
            let incr = args
                .from(2)
                .take_while(|a| {
                    ["nx", "xx", "gt", "lt", "ch", "incr"]
                        .iter()
                        .any(|o| a.eq_ignore_ascii_case(o.as_bytes()))
                })
                .any(|a| a.eq_ignore_ascii_case(b"incr"));
            ev(ZSET, if incr { "zincr" } else { "zadd" }, k1);
        }
        "geoadd" => ev(ZSET, "zadd", k1),
        "zincrby" => ev(ZSET, "zincr", k1),
        "zrem" | "zremrangebyrank" | "zremrangebyscore" | "zremrangebylex" | "zpopmin"
        | "zpopmax" => ev(ZSET, spec_name(spec), k1),
        "bzpopmin" | "bzpopmax" | "zmpop" | "bzmpop" => {
            let pop = match spec.name {
                "bzpopmin" => "zpopmin",
                "bzpopmax" => "zpopmax",
                _ => {
                    let at = usize::from(spec.name == "bzmpop") + 1;
                    let n = crate::cmd::parse_i64(arg(at)).unwrap_or(0).max(0) as usize;
                    if arg(at + 1 + n).eq_ignore_ascii_case(b"min") {
                        "zpopmin"
                    } else {
                        "zpopmax"
                    }
                }
            };
            if let Some(key) = replied_key(&cx.out) {
                cx.tx.notify_command(ZSET, pop, db, &key);
            }
        }
        "zrangestore" | "zunionstore" | "zinterstore" | "zdiffstore" | "geosearchstore" => {
            store_event(cx, &mark, ZSET, spec.name, db, k1);
        }
        "georadius" | "georadiusbymember" => {
            let at = (2..args.len()).find(|&i| {
                args.get(i).eq_ignore_ascii_case(b"store")
                    || args.get(i).eq_ignore_ascii_case(b"storedist")
            });
            if let Some(at) = at {
                store_event(cx, &mark, ZSET, "georadiusstore", db, arg(at + 1));
            }
        }
        // Keys.
        "rename" | "renamenx" => {
            ev(GENERIC, "rename_from", k1);
            ev(GENERIC, "rename_to", arg(2));
        }
        "copy" => {
            // In the `DB` it names, if any.
            let target = (3..args.len())
                .find(|&i| args.get(i).eq_ignore_ascii_case(b"db"))
                .and_then(|i| crate::cmd::parse_i64(arg(i + 1)))
                .and_then(|n| u8::try_from(n).ok())
                .unwrap_or(db);
            cx.tx.notify_command(GENERIC, "copy_to", target, arg(2));
        }
        "move" => {
            ev(GENERIC, "move_from", k1);
            if let Some(target) = crate::cmd::parse_i64(arg(2)).and_then(|n| u8::try_from(n).ok()) {
                cx.tx.notify_command(GENERIC, "move_to", target, k1);
            }
        }
        // A TTL already past deleted the key it replaced: its `del` alone.
        "restore" if !deleted => ev(GENERIC, "restore", k1),
        "sort" => {
            let at = (2..args.len()).find(|&i| args.get(i).eq_ignore_ascii_case(b"store"));
            if let Some(at) = at {
                store_event(cx, &mark, LIST, "sortstore", db, arg(at + 1));
            }
        }
        // Expiry: a time in the past deletes the key (its `del` alone).
        "expire" | "pexpire" | "expireat" | "pexpireat" if !deleted => {
            ev(GENERIC, "expire", k1);
        }
        "persist" => ev(GENERIC, "persist", k1),
        // Streams.
        "xadd" => ev(STREAM, "xadd", k1),
        "xtrim" => ev(STREAM, "xtrim", k1),
        "xdel" => ev(STREAM, "xdel", k1),
        "xsetid" => ev(STREAM, "xsetid", k1),
        "xgroup" => {
            let sub = arg(1);
            let name = [
                ("create", "xgroup-create"),
                ("createconsumer", "xgroup-createconsumer"),
                ("delconsumer", "xgroup-delconsumer"),
                ("destroy", "xgroup-destroy"),
                ("setid", "xgroup-setid"),
            ]
            .into_iter()
            .find(|(s, _)| sub.eq_ignore_ascii_case(s.as_bytes()));
            if let Some((_, name)) = name {
                ev(STREAM, name, arg(2));
            }
        }
        // `DEL`, `UNLINK`, `GETDEL`: their `del`s are the store's. `FLUSHDB`/`FLUSHALL`
        // make none in Redis either.
        _ => {}
    }
}

/// The command's name as its event (`zrem`, `sinterstore`...).
fn spec_name(spec: &Spec) -> &'static str {
    spec.name
}

/// A `*STORE` command's event on its destination `dst`: when it wrote one, its event
/// alone (the destination it replaced goes without a `del`, as Redis's `setKey`); when the
/// result was empty (`:0`), the `del` of a destination that existed, alone.
fn store_event(cx: &mut Cx<'_>, mark: &Mark, class: u16, name: &'static str, db: u8, dst: &[u8]) {
    if cx.out.get(mark.out..) != Some(&b":0\r\n"[..]) {
        cx.tx.forget_events(mark, "del", db, dst);
        cx.tx.notify_command(class, name, db, dst);
    }
}
/// The first element of a reply that is an array whose first element is a bulk string:
/// the key a pop of several keys (`BLPOP`, `LMPOP`, `BZPOPMIN`...) served.
fn reply_key(reply: &[u8]) -> Option<Vec<u8>> {
    if reply.first() != Some(&b'*') {
        return None;
    }
    let line = reply.iter().position(|&b| b == b'\n')? + 1;
    let rest = &reply[line..];
    if rest.first() != Some(&b'$') {
        return None;
    }
    let end = rest.iter().position(|&b| b == b'\r')?;
    let len: usize = std::str::from_utf8(&rest[1..end]).ok()?.parse().ok()?;
    rest.get(end + 2..end + 2 + len).map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::reply_key;

    #[test]
    fn the_key_a_pop_served_is_its_reply_first_element() {
        assert_eq!(
            reply_key(b"*2\r\n$3\r\nkey\r\n$1\r\nv\r\n"),
            Some(b"key".to_vec())
        );
        assert_eq!(reply_key(b"*-1\r\n"), None);
        assert_eq!(reply_key(b"_\r\n"), None);
        assert_eq!(reply_key(b"*3\r\n$0\r\n\r\n"), Some(Vec::new()));
    }
}
