"""The Redis door's generic key commands (`RENAME`, `RENAMENX`, `COPY`, `KEYS`, `SCAN`,
`RANDOMKEY`, `TOUCH`, `DBSIZE`, `FLUSHDB`, `FLUSHALL`, with `DEL`/`EXISTS`/`TYPE`) against
Debian's redis-server 7.0, request by request (`redisdiff.differential`), pipelined and one
at a time, plus a seeded random sequence.

The keys live in databases 9 and 10 (`SELECT`), which this file flushes; db 0 is shared
with the other test files (`FLUSHALL` runs once, in `test_flushall`, on both servers).
Collections are made by the same commands on both servers (`HSET`, `SADD`, `RPUSH`,
`ZADD`); after each sequence both servers' keys are read back by commands
(`HGETALL`/`SMEMBERS`/`LRANGE`/`ZRANGE` and the lengths) and compared, and the door's
tables are checked for member rows of deleted keys.

Intended differences, normalised here:
- `KEYS` and a one-page `SCAN` list keys in another order: compared sorted;
- `SCAN`'s cursors differ: a whole iteration is compared as the set of keys it returned;
- `RANDOMKEY` with several keys: only whether a key came back;
- `DBSIZE` counts live keys only (Redis counts expired keys not reclaimed yet): the
  sequences read expired keys before counting.
"""

import random
import time

import pytest

from redisdiff import AUTH, Conn, Err, args_of, cmd, differential, replies, scan_pages

DB, DB2 = 9, 10
SCHEMA = "manifold_redis"
TYPES = {"string": 0, "list": 1, "set": 2, "zset": 3, "hash": 4}


def normalize(req, reply):
    name = args_of(req)[0].upper()
    if name == b"KEYS" and isinstance(reply, list):
        return sorted(reply)
    if name == b"SCAN" and isinstance(reply, list):
        return [reply[0], sorted(reply[1])]
    if name == b"RANDOMKEY" and not isinstance(reply, Err):
        return reply is not None
    return reply


def diff(door, reference, requests, pipeline):
    differential(door, reference, requests, pipeline=pipeline, normalize=normalize)


def fresh(*dbs):
    out = []
    for db in dbs:
        out += [cmd("SELECT", db), cmd("FLUSHDB")]
    return out + [cmd("SELECT", DB)]


# --- collections: made by commands on both servers, compared by commands ------------------

def create(key, kind, members):
    """The commands creating `key` (after a `DEL`) in the selected database."""
    reqs = [cmd("DEL", key)]
    if kind == "hash":
        reqs.append(cmd("HSET", key, *[x for kv in members.items() for x in kv]))
    elif kind == "set":
        reqs.append(cmd("SADD", key, *members))
    elif kind == "list":
        reqs.append(cmd("RPUSH", key, *members))
    elif kind == "zset":
        reqs.append(cmd("ZADD", key, *[x for m, s in members.items() for x in (s, m)]))
    return reqs


COLLECTIONS = {
    "keys:h": ("hash", {"f1": "v1", "f2": "v2", "f3": ""}),
    "keys:s": ("set", ["m1", "m2"]),
    "keys:l": ("list", ["a", "b", "a", "c"]),
    "keys:z": ("zset", {"x": 1.5, "y": -2, "w": 0}),
}


def seed(door, reference):
    """Databases 9 and 10 emptied, then the collections created in db 9 on both servers."""
    reqs = fresh(DB2, DB)
    for key, (kind, members) in COLLECTIONS.items():
        reqs += create(key, kind, members)
    for port in (door, reference):
        got = replies(port, [AUTH, *reqs])
        assert not any(isinstance(r, Err) for r in got), got


LENGTH = {"hash": "HLEN", "set": "SCARD", "zset": "ZCARD", "list": "LLEN"}


def state(port, dbs=(DB, DB2)):
    """Every live key of `dbs` on a server, read by commands: (db, key) -> (type, contents);
    each collection's length checked against its members."""
    out = {}
    c = Conn(port)
    try:
        c.call("AUTH", "app", "app")
        for db in dbs:
            c.call("SELECT", db)
            for k in c.call("KEYS", "*"):
                t = c.call("TYPE", k)
                if t == "string":
                    content = c.call("GET", k)
                elif t == "hash":
                    flat = c.call("HGETALL", k)
                    content = dict(zip(flat[::2], flat[1::2]))
                elif t == "set":
                    content = set(c.call("SMEMBERS", k))
                elif t == "zset":
                    flat = c.call("ZRANGE", k, 0, -1, "WITHSCORES")
                    content = {m: float(s) for m, s in zip(flat[::2], flat[1::2])}
                else:
                    content = c.call("LRANGE", k, 0, -1)
                if t != "string":
                    n = c.call(LENGTH[t], k)
                    assert n == len(content), f"length {n} of {k!r} with {len(content)} members"
                out[(db, k)] = (TYPES[t], content)
    finally:
        c.close()
    return out


def no_orphans(topology):
    """No member row left behind by a deleted key, in the door's tables. The sweeper deletes
    an expired key's row first, recording its kid in `redis_gc`, then its members in chunks:
    members under a kid recorded there are on their way out, not left behind (keys of other
    tests expire while this one runs)."""
    conn = topology.root()
    try:
        with conn.cursor() as c:
            for t in ("redis_hash", "redis_set", "redis_zset", "redis_list"):
                c.execute(f"SELECT COUNT(*) FROM {SCHEMA}.{t} WHERE kid NOT IN "
                          f"(SELECT kid FROM {SCHEMA}.redis_keys) AND kid NOT IN "
                          f"(SELECT kid FROM {SCHEMA}.redis_gc)")
                assert c.fetchone()[0] == 0, f"members of deleted keys in {t}"
    finally:
        conn.close()


def same_state(door, reference, topology):
    got, want = state(door), state(reference)
    assert got == want, f"\nmanifold:     {got}\nredis-server: {want}"
    no_orphans(topology)


# --- deterministic sequences ---------------------------------------------------------------

SEQUENCES = {
    "rename": [
        cmd("SET", "keys:a", "1"), cmd("RENAME", "keys:a", "keys:b"), cmd("GET", "keys:a"),
        cmd("GET", "keys:b"), cmd("RENAME", "keys:a", "keys:b"), cmd("RENAME", "keys:b", "keys:b"),
        cmd("RENAMENX", "keys:b", "keys:b"), cmd("RENAMENX", "keys:none", "keys:b"),
        cmd("RENAME", "keys:none", "keys:none"), cmd("SET", "keys:c", "3"),
        cmd("RENAMENX", "keys:b", "keys:c"), cmd("GET", "keys:b"), cmd("RENAME", "keys:b", "keys:c"),
        cmd("GET", "keys:c"), cmd("EXISTS", "keys:b"),
        cmd("RENAMENX", "keys:c", "keys:d"), cmd("GET", "keys:d"),
        cmd("RENAME", "keys:h", "keys:h2"), cmd("TYPE", "keys:h"), cmd("TYPE", "keys:h2"),
        cmd("RENAME", "keys:s", "keys:h2"), cmd("TYPE", "keys:h2"), cmd("RENAME", "keys:h2", "keys:d"),
        cmd("TYPE", "keys:d"), cmd("GET", "keys:d"), cmd("RENAMENX", "keys:l", "keys:z"),
        cmd("RENAME", "keys:l", ""), cmd("TYPE", ""), cmd("RENAME", "", "keys:l"),
        cmd("SET", "keys:e", "v", "PXAT", "1"), cmd("RENAME", "keys:e", "keys:f"),
        cmd("RENAME", "keys:d", "keys:e"), cmd("SET", "keys:g", "v", "PXAT", "1"),
        cmd("RENAMENX", "keys:e", "keys:g"), cmd("TYPE", "keys:g"),
        cmd("RENAME"), cmd("RENAME", "a"), cmd("RENAME", "a", "b", "c"), cmd("RENAMENX", "a"),
        cmd("SELECT", DB2), cmd("RENAME", "keys:g", "keys:x"), cmd("SELECT", DB),
        cmd("KEYS", "*"), cmd("DBSIZE"),
    ],
    "copy": [
        cmd("SET", "keys:a", "va"), cmd("COPY", "keys:a", "keys:b"), cmd("GET", "keys:b"),
        cmd("COPY", "keys:a", "keys:b"), cmd("SET", "keys:a", "va2"), cmd("COPY", "keys:a", "keys:b", "REPLACE"),
        cmd("GET", "keys:b"), cmd("COPY", "keys:a", "keys:a"), cmd("COPY", "keys:a", "keys:a", "DB", DB),
        cmd("COPY", "keys:a", "keys:a", "DB", DB2), cmd("COPY", "keys:a", "keys:a", "db", DB2),
        cmd("COPY", "keys:a", "keys:a", "DB", DB2, "replace"), cmd("COPY", "keys:none", "keys:x"),
        cmd("COPY", "keys:none", "keys:a", "REPLACE"), cmd("COPY", "keys:a", "keys:b", "DB", "16"),
        cmd("COPY", "keys:a", "keys:b", "DB", "-1"), cmd("COPY", "keys:a", "keys:b", "DB", "x"),
        cmd("COPY", "keys:a", "keys:b", "DB", "99999999999"), cmd("COPY", "keys:a", "keys:b", "DB", "01"),
        cmd("COPY", "keys:a", "keys:b", "DB"), cmd("COPY", "keys:a", "keys:b", "FOO"),
        cmd("COPY", "keys:a", "keys:b", "DB", "99", "FOO"), cmd("COPY", "keys:a", "keys:b", "FOO", "DB", "99"),
        cmd("COPY", "keys:a", "keys:b", "REPLACE", "REPLACE", "DB", "3", "DB", DB2),
        cmd("COPY", "keys:a"), cmd("COPY"),
        cmd("COPY", "keys:h", "keys:h2"), cmd("COPY", "keys:s", "keys:s2", "DB", DB2),
        cmd("COPY", "keys:l", "keys:l2"), cmd("COPY", "keys:z", "keys:z2"), cmd("COPY", "keys:z", "keys:h", "REPLACE"),
        cmd("COPY", "keys:l", "keys:a", "REPLACE"), cmd("TYPE", "keys:a"), cmd("TYPE", "keys:h"),
        cmd("SET", "keys:e", "v", "PXAT", "1"), cmd("COPY", "keys:e", "keys:f"), cmd("COPY", "keys:a", "keys:e"),
        cmd("TYPE", "keys:e"), cmd("SELECT", DB2), cmd("KEYS", "*"), cmd("DBSIZE"), cmd("TYPE", "keys:s2"),
        cmd("COPY", "keys:s2", "keys:s3", "DB", DB), cmd("SELECT", DB), cmd("KEYS", "*"), cmd("DBSIZE"),
    ],
    "inspect": [
        cmd("SET", "keys:a", "1"), cmd("SET", "keys:ab", "2"), cmd("SET", "keys:b", "3"), cmd("SET", "", "empty"),
        cmd("SET", "Keys:A", "4"), cmd("SET", b"keys:\xff\x00", "5"), cmd("SET", "keys:[x]", "6"),
        cmd("SET", "keys:e", "v", "PXAT", "1"),
        cmd("KEYS", "*"), cmd("KEYS", "keys:*"), cmd("KEYS", "keys:?"), cmd("KEYS", "keys:[ab]*"),
        cmd("KEYS", "keys:[^a]"), cmd("KEYS", "keys:[a-b]"), cmd("KEYS", "K*"), cmd("KEYS", "**"),
        cmd("KEYS", ""), cmd("KEYS", "?*"), cmd("KEYS", "keys:\\[x\\]"), cmd("KEYS", "keys:[x]"),
        cmd("KEYS", b"keys:\xff*"), cmd("KEYS", "keys:e"), cmd("KEYS", "nothing"), cmd("KEYS", "keys:[abc"),
        cmd("KEYS"), cmd("KEYS", "a", "b"),
        cmd("EXISTS", "keys:e"), cmd("DBSIZE"), cmd("DBSIZE", "x"),
        cmd("TOUCH", "keys:a", "keys:a", "keys:none", "keys:h", "keys:e"), cmd("TOUCH"),
        cmd("EXISTS", "keys:a", "keys:h", "keys:none"), cmd("TYPE", "keys:z"), cmd("TYPE", "keys:e"),
        cmd("SCAN", "0", "COUNT", "1000"), cmd("SCAN", "0", "COUNT", "1000", "MATCH", "keys:?"),
        cmd("SCAN", "0", "COUNT", "1000", "TYPE", "string"), cmd("SCAN", "0", "COUNT", "1000", "TYPE", "HASH"),
        cmd("SCAN", "0", "count", "1000", "type", "list", "match", "keys:*"),
        cmd("SCAN", "0", "COUNT", "1000", "TYPE", "stream"), cmd("SCAN", "0", "COUNT", "1000", "TYPE", "nonsense"),
        cmd("SCAN", "0", "MATCH", "a", "MATCH", "*", "COUNT", "1000"),
        cmd("SCAN", "x"), cmd("SCAN", " 0"), cmd("SCAN", "0x1"), cmd("SCAN", "18446744073709551616"),
        cmd("SCAN", "-"), cmd("SCAN", "x", "COUNT", "0"), cmd("SCAN", "0", "COUNT", "0"),
        cmd("SCAN", "0", "COUNT", "-1"), cmd("SCAN", "0", "COUNT", "x"), cmd("SCAN", "0", "COUNT"),
        cmd("SCAN", "0", "MATCH"), cmd("SCAN", "0", "TYPE"), cmd("SCAN", "0", "FOO", "bar"),
        cmd("SCAN", "0", "COUNT", "99999999999999999999"), cmd("SCAN", "0", "COUNT", "1", "FOO"), cmd("SCAN"),
        cmd("RANDOMKEY", "x"), cmd("RANDOMKEY"),
        cmd("SELECT", DB2), cmd("RANDOMKEY"), cmd("SCAN", "0"), cmd("SCAN", "-1"), cmd("SCAN", ""),
        cmd("KEYS", "*"), cmd("DBSIZE"),
        cmd("SET", "keys:one", "1"), cmd("RANDOMKEY"), cmd("SET", "keys:gone", "v", "PXAT", "1"),
        cmd("RANDOMKEY"), cmd("SCAN", "0"), cmd("DBSIZE"), cmd("SELECT", DB),
    ],
    "flush": [
        cmd("SET", "keys:a", "1"), cmd("SELECT", DB2), cmd("SET", "keys:a", "2"), cmd("COPY", "keys:a", "keys:b"),
        cmd("SELECT", DB), cmd("FLUSHDB", "x"), cmd("FLUSHDB", "ASYNC", "SYNC"), cmd("FLUSHDB", "async"),
        cmd("DBSIZE"), cmd("KEYS", "*"), cmd("GET", "keys:a"), cmd("TYPE", "keys:h"), cmd("RANDOMKEY"),
        cmd("SCAN", "0"), cmd("SELECT", DB2), cmd("DBSIZE"), cmd("GET", "keys:a"), cmd("FLUSHDB", "SYNC"),
        cmd("DBSIZE"), cmd("SET", "keys:a", "3"), cmd("FLUSHDB"), cmd("GET", "keys:a"),
        cmd("FLUSHALL", "x"), cmd("FLUSHALL", "sync", "async"), cmd("SELECT", DB),
    ],
}


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_by_one"])
@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_same_replies_as_redis_server(redis_door, redis_reference, topology, name, pipeline):
    seed(redis_door, redis_reference)
    diff(redis_door, redis_reference, [cmd("SELECT", DB), *SEQUENCES[name]], pipeline)
    # The members went where the keys went, lengths exact.
    same_state(redis_door, redis_reference, topology)


def test_ttl_goes_with_rename_and_copy(redis_door, redis_reference, topology):
    seed(redis_door, redis_reference)
    first = [cmd("SELECT", DB), cmd("SET", "keys:t", "v", "PX", "400"), cmd("SET", "keys:p", "v"),
             cmd("RENAME", "keys:t", "keys:t2"), cmd("COPY", "keys:t2", "keys:t3"),
             cmd("COPY", "keys:t2", "keys:t4", "DB", DB2), cmd("RENAME", "keys:p", "keys:t5"),
             cmd("EXISTS", "keys:t", "keys:t2", "keys:t3", "keys:t5")]
    diff(redis_door, redis_reference, first, True)
    time.sleep(0.8)
    later = [cmd("SELECT", DB), cmd("EXISTS", "keys:t2", "keys:t3", "keys:t5"), cmd("KEYS", "keys:t*"),
             cmd("RENAME", "keys:t2", "keys:x"), cmd("COPY", "keys:t3", "keys:x"), cmd("SELECT", DB2),
             cmd("EXISTS", "keys:t4"), cmd("KEYS", "*"), cmd("DBSIZE")]
    diff(redis_door, redis_reference, later, False)


def scan_all(port, *options, db=DB):
    """Every key a whole `SCAN` iteration returns, and its pages' sizes."""
    c = Conn(port)
    try:
        c.call("AUTH", "app", "app")
        c.call("SELECT", db)
        pages = scan_pages(c, ["SCAN"], options)
        return {k for page in pages for k in page}, [len(page) for page in pages]
    finally:
        c.close()


def test_scan_iterates_every_key_once(redis_door, redis_reference, topology):
    seed(redis_door, redis_reference)
    reqs = [cmd("SELECT", DB)] + [cmd("SET", f"keys:{i}", i) for i in range(300)]
    reqs += [cmd("SET", f"keys:gone{i}", "v", "PXAT", "1") for i in range(20)]
    for port in (redis_door, redis_reference):
        assert "OK" in replies(port, [AUTH, *reqs])
    for options in [(), ("COUNT", "7"), ("COUNT", "1"), ("COUNT", "1000"), ("MATCH", "keys:1*"),
                    ("MATCH", "keys:[2-3]?", "COUNT", "13"), ("TYPE", "string", "COUNT", "50"),
                    ("TYPE", "zset"), ("MATCH", "keys:[hs]", "TYPE", "hash"), ("MATCH", "nothing")]:
        got, pages = scan_all(redis_door, *options)
        want, _ = scan_all(redis_reference, *options)
        assert got == want, options
        count = int(options[options.index("COUNT") + 1]) if "COUNT" in options else 10
        assert max(pages) <= count, (options, pages)
    _, pages = scan_all(redis_door, "COUNT", "7")
    assert len(pages) == 304 // 7 + 1, "each page holds COUNT keys"


def test_randomkey_draws_every_key(redis_door, topology):
    c = Conn(redis_door)
    c.call("AUTH", "app", "app")
    c.call("SELECT", DB2)
    c.call("FLUSHDB")
    names = {f"keys:r{i}".encode() for i in range(5)}
    for n in names:
        c.call("SET", n, "v")
    seen = {c.call("RANDOMKEY") for _ in range(300)}
    assert seen == names
    c.call("FLUSHDB")
    c.close()


def test_flushall(redis_door, redis_reference, topology):
    seed(redis_door, redis_reference)
    reqs = [cmd("SELECT", DB2), cmd("SET", "keys:a", "1"), cmd("SELECT", DB), cmd("FLUSHALL"),
            cmd("DBSIZE"), cmd("SELECT", DB2), cmd("DBSIZE"), cmd("SET", "keys:a", "1"), cmd("FLUSHALL", "ASYNC"),
            cmd("DBSIZE"), cmd("SELECT", 0), cmd("KEYS", "keys:*")]
    diff(redis_door, redis_reference, reqs, True)
    conn = topology.root()
    try:
        with conn.cursor() as c:
            for t in ("redis_hash", "redis_set", "redis_zset", "redis_list", "redis_keys"):
                c.execute(f"SELECT COUNT(*) FROM {SCHEMA}.{t}")
                assert c.fetchone()[0] == 0, t
    finally:
        conn.close()


# --- random sequence -------------------------------------------------------------------------

def random_sequence(rng, n):
    keys = ["keys:a", "keys:b", "keys:c", "keys:h", "keys:s", "keys:l", "keys:z", ""]
    patterns = ["*", "keys:?", "keys:[a-c]", "k*s:*", "*[hz]", "?", "keys:[^ab]"]
    out = []
    for _ in range(n):
        k, k2 = rng.choice(keys), rng.choice(keys)
        r = rng.random()
        if r < 0.12:
            out.append(cmd("SET", k, rng.choice(["1", "x", ""])))
        elif r < 0.16:
            out.append(cmd("SET", k, "v", "PXAT", "1"))
        elif r < 0.24:
            out.append(cmd("GET", k))
        elif r < 0.30:
            out.append(cmd(rng.choice(["DEL", "UNLINK", "EXISTS", "TOUCH"]), k, k2))
        elif r < 0.36:
            out.append(cmd("TYPE", k))
        elif r < 0.48:
            out.append(cmd(rng.choice(["RENAME", "RENAMENX"]), k, k2))
        elif r < 0.60:
            extra = rng.choice([[], ["REPLACE"], ["DB", DB2], ["DB", DB2, "REPLACE"], ["DB", DB]])
            out.append(cmd("COPY", k, k2, *extra))
        elif r < 0.68:
            out.append(cmd("KEYS", rng.choice(patterns)))
        elif r < 0.76:
            out.append(cmd("SCAN", "0", "COUNT", "1000", "MATCH", rng.choice(patterns)))
        elif r < 0.80:
            out.append(cmd("SCAN", "0", "COUNT", "1000", "TYPE", rng.choice(list(TYPES))))
        elif r < 0.84:
            out.append(cmd("RANDOMKEY"))
        elif r < 0.88:
            out.append(cmd("SELECT", rng.choice([DB, DB, DB2])))
        elif r < 0.90:
            out.append(cmd("FLUSHDB"))
        else:
            # Expired keys are reclaimed (EXISTS) before counting: DBSIZE then agrees.
            out += [cmd("EXISTS", *keys), cmd("DBSIZE")]
    return out


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_by_one"])
def test_random_sequence(redis_door, redis_reference, topology, pipeline):
    rng = random.Random(20240607 + pipeline)
    for _ in range(3):
        seed(redis_door, redis_reference)
        diff(redis_door, redis_reference, [cmd("SELECT", DB), *random_sequence(rng, 150)], pipeline)
        same_state(redis_door, redis_reference, topology)
