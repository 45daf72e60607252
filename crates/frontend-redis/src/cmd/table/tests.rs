//! The table against Redis 7.0.15's (`COMMAND INFO` of `redis-server` 7.0.15).

use super::{flags, table, Group, Keys};

/// One command as redis-server 7.0.15 answers `COMMAND INFO` for it: name, arity, `write`,
/// `admin`, `no_auth`, key positions (first, last, step).
type RedisEntry = (&'static str, i32, bool, bool, bool, (i64, i64, i64));

/// Every command the door has.
const REDIS_7_0: &[RedisEntry] = &[
    ("append", 3, true, false, false, (1, 1, 1)),
    ("auth", -2, false, false, true, (0, 0, 0)),
    ("bitcount", -2, false, false, false, (1, 1, 1)),
    ("bitfield", -2, true, false, false, (1, 1, 1)),
    ("bitfield_ro", -2, false, false, false, (1, 1, 1)),
    ("bitop", -4, true, false, false, (2, -1, 1)),
    ("bitpos", -3, false, false, false, (1, 1, 1)),
    ("blmove", 6, true, false, false, (1, 2, 1)),
    ("blmpop", -5, true, false, false, (0, 0, 0)),
    ("blpop", -3, true, false, false, (1, -2, 1)),
    ("brpop", -3, true, false, false, (1, -2, 1)),
    ("brpoplpush", 4, true, false, false, (1, 2, 1)),
    ("bzmpop", -5, true, false, false, (0, 0, 0)),
    ("bzpopmax", -3, true, false, false, (1, -2, 1)),
    ("bzpopmin", -3, true, false, false, (1, -2, 1)),
    ("client", -2, false, false, false, (0, 0, 0)),
    ("client|caching", 3, false, false, false, (0, 0, 0)),
    ("client|getname", 2, false, false, false, (0, 0, 0)),
    ("client|getredir", 2, false, false, false, (0, 0, 0)),
    ("client|help", 2, false, false, false, (0, 0, 0)),
    ("client|id", 2, false, false, false, (0, 0, 0)),
    ("client|info", 2, false, false, false, (0, 0, 0)),
    ("client|kill", -3, false, true, false, (0, 0, 0)),
    ("client|list", -2, false, true, false, (0, 0, 0)),
    ("client|no-evict", 3, false, true, false, (0, 0, 0)),
    ("client|setname", 3, false, false, false, (0, 0, 0)),
    ("client|tracking", -3, false, false, false, (0, 0, 0)),
    ("client|trackinginfo", 2, false, false, false, (0, 0, 0)),
    ("command", -1, false, false, false, (0, 0, 0)),
    ("command|count", 2, false, false, false, (0, 0, 0)),
    ("command|docs", -2, false, false, false, (0, 0, 0)),
    ("command|help", 2, false, false, false, (0, 0, 0)),
    ("command|info", -2, false, false, false, (0, 0, 0)),
    ("config", -2, false, false, false, (0, 0, 0)),
    ("config|get", -3, false, true, false, (0, 0, 0)),
    ("config|help", 2, false, false, false, (0, 0, 0)),
    ("config|resetstat", 2, false, true, false, (0, 0, 0)),
    ("config|rewrite", 2, false, true, false, (0, 0, 0)),
    ("config|set", -4, false, true, false, (0, 0, 0)),
    ("copy", -3, true, false, false, (1, 2, 1)),
    ("dbsize", 1, false, false, false, (0, 0, 0)),
    ("dump", 2, false, false, false, (1, 1, 1)),
    ("decr", 2, true, false, false, (1, 1, 1)),
    ("decrby", 3, true, false, false, (1, 1, 1)),
    ("del", -2, true, false, false, (1, -1, 1)),
    ("discard", 1, false, false, false, (0, 0, 0)),
    ("echo", 2, false, false, false, (0, 0, 0)),
    ("exec", 1, false, false, false, (0, 0, 0)),
    ("exists", -2, false, false, false, (1, -1, 1)),
    ("expire", -3, true, false, false, (1, 1, 1)),
    ("expireat", -3, true, false, false, (1, 1, 1)),
    ("expiretime", 2, false, false, false, (1, 1, 1)),
    ("flushall", -1, true, false, false, (0, 0, 0)),
    ("flushdb", -1, true, false, false, (0, 0, 0)),
    ("geoadd", -5, true, false, false, (1, 1, 1)),
    ("geodist", -4, false, false, false, (1, 1, 1)),
    ("geohash", -2, false, false, false, (1, 1, 1)),
    ("geopos", -2, false, false, false, (1, 1, 1)),
    ("georadius", -6, true, false, false, (1, 1, 1)),
    ("georadius_ro", -6, false, false, false, (1, 1, 1)),
    ("georadiusbymember", -5, true, false, false, (1, 1, 1)),
    ("georadiusbymember_ro", -5, false, false, false, (1, 1, 1)),
    ("geosearch", -7, false, false, false, (1, 1, 1)),
    ("geosearchstore", -8, true, false, false, (1, 2, 1)),
    ("get", 2, false, false, false, (1, 1, 1)),
    ("getbit", 3, false, false, false, (1, 1, 1)),
    ("getdel", 2, true, false, false, (1, 1, 1)),
    ("getex", -2, true, false, false, (1, 1, 1)),
    ("getrange", 4, false, false, false, (1, 1, 1)),
    ("getset", 3, true, false, false, (1, 1, 1)),
    ("hdel", -3, true, false, false, (1, 1, 1)),
    ("hello", -1, false, false, true, (0, 0, 0)),
    ("hexists", 3, false, false, false, (1, 1, 1)),
    ("hget", 3, false, false, false, (1, 1, 1)),
    ("hgetall", 2, false, false, false, (1, 1, 1)),
    ("hincrby", 4, true, false, false, (1, 1, 1)),
    ("hincrbyfloat", 4, true, false, false, (1, 1, 1)),
    ("hkeys", 2, false, false, false, (1, 1, 1)),
    ("hlen", 2, false, false, false, (1, 1, 1)),
    ("hmget", -3, false, false, false, (1, 1, 1)),
    ("hmset", -4, true, false, false, (1, 1, 1)),
    ("hrandfield", -2, false, false, false, (1, 1, 1)),
    ("hscan", -3, false, false, false, (1, 1, 1)),
    ("hset", -4, true, false, false, (1, 1, 1)),
    ("hsetnx", 4, true, false, false, (1, 1, 1)),
    ("hstrlen", 3, false, false, false, (1, 1, 1)),
    ("hvals", 2, false, false, false, (1, 1, 1)),
    ("incr", 2, true, false, false, (1, 1, 1)),
    ("incrby", 3, true, false, false, (1, 1, 1)),
    ("incrbyfloat", 3, true, false, false, (1, 1, 1)),
    ("info", -1, false, false, false, (0, 0, 0)),
    ("setbit", 4, true, false, false, (1, 1, 1)),
    ("slowlog", -2, false, false, false, (0, 0, 0)),
    ("slowlog|get", -2, false, true, false, (0, 0, 0)),
    ("slowlog|len", 2, false, true, false, (0, 0, 0)),
    ("slowlog|reset", 2, false, true, false, (0, 0, 0)),
    ("slowlog|help", 2, false, false, false, (0, 0, 0)),
    ("latency", -2, false, false, false, (0, 0, 0)),
    ("latency|latest", 2, false, true, false, (0, 0, 0)),
    ("latency|history", 3, false, true, false, (0, 0, 0)),
    ("latency|reset", -2, false, true, false, (0, 0, 0)),
    ("latency|doctor", 2, false, true, false, (0, 0, 0)),
    ("latency|graph", 3, false, true, false, (0, 0, 0)),
    ("latency|help", 2, false, false, false, (0, 0, 0)),
    ("keys", 2, false, false, false, (0, 0, 0)),
    ("lcs", -3, false, false, false, (1, 2, 1)),
    ("lindex", 3, false, false, false, (1, 1, 1)),
    ("linsert", 5, true, false, false, (1, 1, 1)),
    ("llen", 2, false, false, false, (1, 1, 1)),
    ("lmove", 5, true, false, false, (1, 2, 1)),
    ("lmpop", -4, true, false, false, (0, 0, 0)),
    ("lpop", -2, true, false, false, (1, 1, 1)),
    ("lpos", -3, false, false, false, (1, 1, 1)),
    ("lpush", -3, true, false, false, (1, 1, 1)),
    ("lpushx", -3, true, false, false, (1, 1, 1)),
    ("lrange", 4, false, false, false, (1, 1, 1)),
    ("lrem", 4, true, false, false, (1, 1, 1)),
    ("lset", 4, true, false, false, (1, 1, 1)),
    ("ltrim", 4, true, false, false, (1, 1, 1)),
    ("mget", -2, false, false, false, (1, -1, 1)),
    ("memory", -2, false, false, false, (0, 0, 0)),
    ("move", 3, true, false, false, (1, 1, 1)),
    ("object", -2, false, false, false, (0, 0, 0)),
    ("mset", -3, true, false, false, (1, -1, 2)),
    ("msetnx", -3, true, false, false, (1, -1, 2)),
    ("multi", 1, false, false, false, (0, 0, 0)),
    ("persist", 2, true, false, false, (1, 1, 1)),
    ("pexpire", -3, true, false, false, (1, 1, 1)),
    ("pexpireat", -3, true, false, false, (1, 1, 1)),
    ("pexpiretime", 2, false, false, false, (1, 1, 1)),
    ("pfadd", -2, true, false, false, (1, 1, 1)),
    // Redis: readonly; the door stores the count it computes, as Redis does, in a transaction.
    ("pfcount", -2, true, false, false, (1, -1, 1)),
    ("pfmerge", -2, true, false, false, (1, -1, 1)),
    ("ping", -1, false, false, false, (0, 0, 0)),
    ("psetex", 4, true, false, false, (1, 1, 1)),
    ("psubscribe", -2, false, false, false, (0, 0, 0)),
    ("pttl", 2, false, false, false, (1, 1, 1)),
    ("publish", 3, false, false, false, (0, 0, 0)),
    ("pubsub", -2, false, false, false, (0, 0, 0)),
    ("pubsub|channels", -2, false, false, false, (0, 0, 0)),
    ("pubsub|help", 2, false, false, false, (0, 0, 0)),
    ("eval", -3, false, false, false, (0, 0, 0)),
    ("evalsha", -3, false, false, false, (0, 0, 0)),
    ("eval_ro", -3, false, false, false, (0, 0, 0)),
    ("evalsha_ro", -3, false, false, false, (0, 0, 0)),
    ("script", -2, false, false, false, (0, 0, 0)),
    ("script|load", 3, false, false, false, (0, 0, 0)),
    ("script|exists", -3, false, false, false, (0, 0, 0)),
    ("script|flush", -2, false, false, false, (0, 0, 0)),
    ("script|kill", 2, false, false, false, (0, 0, 0)),
    ("script|help", 2, false, false, false, (0, 0, 0)),
    ("fcall", -3, false, false, false, (0, 0, 0)),
    ("fcall_ro", -3, false, false, false, (0, 0, 0)),
    ("function", -2, false, false, false, (0, 0, 0)),
    ("function|load", -3, true, false, false, (0, 0, 0)),
    ("function|delete", 3, true, false, false, (0, 0, 0)),
    ("function|flush", -2, true, false, false, (0, 0, 0)),
    ("function|list", -2, false, false, false, (0, 0, 0)),
    ("function|stats", 2, false, false, false, (0, 0, 0)),
    ("function|kill", 2, false, false, false, (0, 0, 0)),
    ("function|help", 2, false, false, false, (0, 0, 0)),
    ("function|dump", 2, false, false, false, (0, 0, 0)),
    ("function|restore", -3, true, false, false, (0, 0, 0)),
    ("pubsub|numpat", 2, false, false, false, (0, 0, 0)),
    ("pubsub|numsub", -2, false, false, false, (0, 0, 0)),
    ("punsubscribe", -1, false, false, false, (0, 0, 0)),
    ("quit", -1, false, false, true, (0, 0, 0)),
    ("randomkey", 1, false, false, false, (0, 0, 0)),
    ("rename", 3, true, false, false, (1, 2, 1)),
    ("renamenx", 3, true, false, false, (1, 2, 1)),
    ("reset", 1, false, false, true, (0, 0, 0)),
    ("restore", -4, true, false, false, (1, 1, 1)),
    ("rpop", -2, true, false, false, (1, 1, 1)),
    ("rpoplpush", 3, true, false, false, (1, 2, 1)),
    ("rpush", -3, true, false, false, (1, 1, 1)),
    ("rpushx", -3, true, false, false, (1, 1, 1)),
    ("sadd", -3, true, false, false, (1, 1, 1)),
    ("scan", -2, false, false, false, (0, 0, 0)),
    ("scard", 2, false, false, false, (1, 1, 1)),
    ("sdiff", -2, false, false, false, (1, -1, 1)),
    ("sdiffstore", -3, true, false, false, (1, -1, 1)),
    ("select", 2, false, false, false, (0, 0, 0)),
    ("set", -3, true, false, false, (1, 1, 1)),
    ("setex", 4, true, false, false, (1, 1, 1)),
    ("setnx", 3, true, false, false, (1, 1, 1)),
    ("setrange", 4, true, false, false, (1, 1, 1)),
    ("sinter", -2, false, false, false, (1, -1, 1)),
    ("sintercard", -3, false, false, false, (0, 0, 0)),
    ("sinterstore", -3, true, false, false, (1, -1, 1)),
    ("sismember", 3, false, false, false, (1, 1, 1)),
    ("smembers", 2, false, false, false, (1, 1, 1)),
    ("smismember", -3, false, false, false, (1, 1, 1)),
    ("smove", 4, true, false, false, (1, 2, 1)),
    ("sort", -2, true, false, false, (1, 1, 1)),
    ("sort_ro", -2, false, false, false, (1, 1, 1)),
    ("spop", -2, true, false, false, (1, 1, 1)),
    ("srandmember", -2, false, false, false, (1, 1, 1)),
    ("srem", -3, true, false, false, (1, 1, 1)),
    ("sscan", -3, false, false, false, (1, 1, 1)),
    ("strlen", 2, false, false, false, (1, 1, 1)),
    ("subscribe", -2, false, false, false, (0, 0, 0)),
    ("substr", 4, false, false, false, (1, 1, 1)),
    ("sunion", -2, false, false, false, (1, -1, 1)),
    ("sunionstore", -3, true, false, false, (1, -1, 1)),
    ("time", 1, false, false, false, (0, 0, 0)),
    ("wait", 3, false, false, false, (0, 0, 0)),
    ("touch", -2, false, false, false, (1, -1, 1)),
    ("ttl", 2, false, false, false, (1, 1, 1)),
    ("type", 2, false, false, false, (1, 1, 1)),
    ("unlink", -2, true, false, false, (1, -1, 1)),
    ("unsubscribe", -1, false, false, false, (0, 0, 0)),
    ("unwatch", 1, false, false, false, (0, 0, 0)),
    ("watch", -2, false, false, false, (1, -1, 1)),
    ("xack", -4, true, false, false, (1, 1, 1)),
    ("xadd", -5, true, false, false, (1, 1, 1)),
    ("xautoclaim", -6, true, false, false, (1, 1, 1)),
    ("xclaim", -6, true, false, false, (1, 1, 1)),
    ("xdel", -3, true, false, false, (1, 1, 1)),
    ("swapdb", 3, true, false, false, (0, 0, 0)),
    ("xgroup", -2, true, false, false, (0, 0, 0)),
    ("xinfo", -2, false, false, false, (0, 0, 0)),
    ("xlen", 2, false, false, false, (1, 1, 1)),
    ("xpending", -3, false, false, false, (1, 1, 1)),
    ("xrange", -4, false, false, false, (1, 1, 1)),
    ("xread", -4, false, false, false, (0, 0, 0)),
    ("xreadgroup", -7, true, false, false, (0, 0, 0)),
    ("xrevrange", -4, false, false, false, (1, 1, 1)),
    ("xsetid", -3, true, false, false, (1, 1, 1)),
    ("xtrim", -4, true, false, false, (1, 1, 1)),
    ("zadd", -4, true, false, false, (1, 1, 1)),
    ("zcard", 2, false, false, false, (1, 1, 1)),
    ("zcount", 4, false, false, false, (1, 1, 1)),
    ("zincrby", 4, true, false, false, (1, 1, 1)),
    ("zlexcount", 4, false, false, false, (1, 1, 1)),
    ("zmscore", -3, false, false, false, (1, 1, 1)),
    ("zmpop", -4, true, false, false, (0, 0, 0)),
    ("zpopmax", -2, true, false, false, (1, 1, 1)),
    ("zpopmin", -2, true, false, false, (1, 1, 1)),
    ("zrandmember", -2, false, false, false, (1, 1, 1)),
    ("zrange", -4, false, false, false, (1, 1, 1)),
    ("zrangebylex", -4, false, false, false, (1, 1, 1)),
    ("zrangebyscore", -4, false, false, false, (1, 1, 1)),
    ("zrangestore", -5, true, false, false, (1, 2, 1)),
    ("zdiff", -3, false, false, false, (0, 0, 0)),
    ("zdiffstore", -4, true, false, false, (1, 1, 1)),
    ("zinter", -3, false, false, false, (0, 0, 0)),
    ("zintercard", -3, false, false, false, (0, 0, 0)),
    ("zinterstore", -4, true, false, false, (1, 1, 1)),
    ("zunion", -3, false, false, false, (0, 0, 0)),
    ("zunionstore", -4, true, false, false, (1, 1, 1)),
    ("zrank", 3, false, false, false, (1, 1, 1)),
    ("zrem", -3, true, false, false, (1, 1, 1)),
    ("zremrangebylex", 4, true, false, false, (1, 1, 1)),
    ("zremrangebyrank", 4, true, false, false, (1, 1, 1)),
    ("zremrangebyscore", 4, true, false, false, (1, 1, 1)),
    ("zrevrange", -4, false, false, false, (1, 1, 1)),
    ("zrevrangebylex", -4, false, false, false, (1, 1, 1)),
    ("zrevrangebyscore", -4, false, false, false, (1, 1, 1)),
    ("zrevrank", 3, false, false, false, (1, 1, 1)),
    ("zscan", -3, false, false, false, (1, 1, 1)),
    ("zscore", 3, false, false, false, (1, 1, 1)),
];

#[test]
fn every_entry_is_redis_s() {
    let t = table();
    for e in t.entries() {
        if e.name == "client|setinfo" {
            // Redis 7.2's (clients send it): `CLIENT SETINFO attr value`.
            assert_eq!(e.arity, 4);
            continue;
        }
        let Some(&(_, arity, write, admin, no_auth, keys)) =
            REDIS_7_0.iter().find(|r| r.0 == e.name)
        else {
            panic!("{} is not a Redis 7.0 command", e.name);
        };
        assert_eq!(e.arity, arity, "{}'s arity", e.name);
        assert_eq!(e.write(), write, "{} writes", e.name);
        assert_eq!(e.has(flags::ADMIN), admin, "{} is admin", e.name);
        assert_eq!(
            e.has(flags::NO_AUTH),
            no_auth,
            "{} runs without AUTH",
            e.name
        );
        let keys = Keys {
            first: keys.0,
            last: keys.1,
            step: keys.2,
        };
        assert_eq!(e.keys, keys, "{}'s keys", e.name);
    }
    // And every one of those is in the table.
    for r in REDIS_7_0 {
        assert!(t.get(r.0).is_some(), "{} is missing", r.0);
    }
    assert_eq!(t.entries().len(), REDIS_7_0.len() + 1);
}

#[test]
fn slots_are_dense_and_names_sorted() {
    let t = table();
    for (i, e) in t.entries().iter().enumerate() {
        assert_eq!(e.slot, i);
        assert!(std::ptr::eq(t.at(i), e));
        assert!(std::ptr::eq(t.get(e.name).unwrap(), e));
    }
    assert!(t.entries().windows(2).all(|w| w[0].name < w[1].name));
}

#[test]
fn lookups_by_name() {
    let t = table();
    assert_eq!(t.command(b"GeT").unwrap().name, "get");
    assert_eq!(t.command(b"CLIENT").unwrap().container, Some("CLIENT"));
    assert!(
        t.command(b"client|kill").is_none(),
        "a subcommand is no command"
    );
    assert!(t.command(&[b'a'; 200]).is_none());
    let client = t.command(b"client").unwrap();
    assert_eq!(t.subcommand(client, b"KiLL").unwrap().name, "client|kill");
    assert!(t.subcommand(client, b"nope").is_none());
    assert!(t.subcommand(client, &[b'a'; 200]).is_none());
    assert!(t.get("get").unwrap().spec().is_some());
    assert!(t.get("ping").unwrap().spec().is_none());
}

#[test]
fn flags_and_groups() {
    let t = table();
    let subscribed: Vec<&str> = t
        .entries()
        .iter()
        .filter(|e| e.has(flags::SUBSCRIBED))
        .map(|e| e.name)
        .collect();
    assert_eq!(
        subscribed,
        [
            "ping",
            "psubscribe",
            "punsubscribe",
            "quit",
            "reset",
            "subscribe",
            "unsubscribe"
        ]
    );
    let group = |n: &str| t.get(n).unwrap().group.name();
    assert_eq!(group("get"), "strings");
    assert_eq!(group("hset"), "hashes");
    assert_eq!(group("psubscribe"), "pubsub");
    assert_eq!(group("pubsub|help"), "pubsub");
    assert_eq!(group("exec"), "transactions");
    assert_eq!(group("client|list"), "connection");
    assert_eq!(group("config|get"), "connection");
    assert!(matches!(t.get("zadd").unwrap().group, Group::Data(_)));
}

#[test]
fn command_count_is_the_commands_without_subcommands() {
    // 26 connection, server, Pub/Sub and transaction commands (SLOWLOG, LATENCY and WAIT
    // included), 8 scripting ones (`EVAL`, `EVALSHA`, `FCALL`, their `_RO`s, `SCRIPT`, `FUNCTION`), and the data
    // commands.
    assert_eq!(table().count(), 26 + 8 + super::data::families().count());
}
