"""The Redis door's expiry: `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT` (`NX`/`XX`/`GT`/
`LT`), `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`, `PERSIST`, differential against Debian's
redis-server 7.0; then real expiry, with short times and waiting: expired keys read as absent
at once, the sweeper deleting their rows and members (made by commands, checked in SQL on
the primary), `gc`
collected, keys made again after expiry starting afresh.

Normalized (intended differences, not bugs):
- `TTL`/`PTTL` values and `EXPIRETIME`/`PEXPIRETIME` of relative expiries depend on when
  each server ran the command: they are compared in buckets (a twentieth of a decade of
  seconds, so 1000 and 999 are one bucket); absolute times (`EXPIREAT`) compare exactly.
- In a pipeline the door reads its clock once per batch, redis-server once per command: the
  sequences never compare two relative expiries of the same length with `GT`/`LT`.
"""

import random
import time

import pytest

from redisdiff import Conn, cmd, differential, read_reply, ttl

SCHEMA = "manifold_redis"
# 3000-01-01 in Unix seconds: far enough that both servers answer the same.
FAR = 32503680000


# TTLs in buckets; expiry times near now (relative expiries) as buckets of what is left.
normalize = ttl


def both_ways(door, reference, requests):
    differential(door, reference, requests, pipeline=True, normalize=normalize)
    differential(door, reference, requests, pipeline=False, normalize=normalize)


A, B, C, M = "expiry:a", "expiry:b", "expiry:c", "expiry:missing"
CLEAN = cmd("DEL", A, B, C, M)

BASIC = [
    CLEAN,
    cmd("TTL", A), cmd("PTTL", A), cmd("EXPIRETIME", A), cmd("PEXPIRETIME", A), cmd("PERSIST", A),
    cmd("EXPIRE", A, 100), cmd("PEXPIRE", A, 100), cmd("EXPIREAT", A, FAR), cmd("PEXPIREAT", A, FAR * 1000),
    cmd("SET", A, "v"),
    cmd("TTL", A), cmd("PTTL", A), cmd("EXPIRETIME", A), cmd("PEXPIRETIME", A), cmd("PERSIST", A),
    cmd("EXPIRE", A, 1000), cmd("TTL", A), cmd("PTTL", A), cmd("EXPIRETIME", A), cmd("PEXPIRETIME", A),
    cmd("PEXPIRE", A, 5000000), cmd("TTL", A), cmd("PTTL", A),
    cmd("EXPIREAT", A, FAR), cmd("TTL", A), cmd("EXPIRETIME", A), cmd("PEXPIRETIME", A),
    cmd("PEXPIREAT", A, FAR * 1000 + 500), cmd("EXPIRETIME", A), cmd("PEXPIRETIME", A),
    cmd("PEXPIREAT", A, FAR * 1000 + 499), cmd("EXPIRETIME", A), cmd("PEXPIRETIME", A),
    cmd("PEXPIREAT", A, 2**63 - 1), cmd("PEXPIRETIME", A), cmd("EXPIRETIME", A), cmd("TTL", A),
    cmd("PERSIST", A), cmd("TTL", A), cmd("PERSIST", A), cmd("GET", A),
    # SET drops the TTL unless KEEPTTL; GET, EXISTS, TYPE leave it.
    cmd("SET", A, "v", "EX", 1000), cmd("GET", A), cmd("EXISTS", A), cmd("TYPE", A), cmd("TTL", A),
    cmd("SET", A, "w", "KEEPTTL"), cmd("TTL", A), cmd("SET", A, "x"), cmd("TTL", A),
    cmd("SET", A, "y", "PX", 10000000), cmd("TTL", A), cmd("SET", A, "z", "XX", "KEEPTTL"), cmd("TTL", A),
    cmd("SET", A, "z2", "NX", "EX", 100), cmd("TTL", A), cmd("SET", A, "z3", "GET"), cmd("TTL", A),
    # A time not in the future deletes the key and answers 1.
    cmd("EXPIRE", A, 0), cmd("EXISTS", A), cmd("GET", A), cmd("TTL", A), cmd("EXPIRE", A, 0),
    cmd("SET", A, "v"), cmd("EXPIRE", A, -100), cmd("EXISTS", A),
    cmd("SET", A, "v"), cmd("PEXPIRE", A, -1), cmd("EXISTS", A),
    cmd("SET", A, "v"), cmd("EXPIREAT", A, 1), cmd("EXISTS", A),
    cmd("SET", A, "v"), cmd("PEXPIREAT", A, 0), cmd("EXISTS", A),
    cmd("SET", A, "v"), cmd("EXPIREAT", A, -9223372036854775), cmd("EXISTS", A),
    cmd("SET", A, "v"), cmd("PEXPIREAT", A, -(2**63)), cmd("EXISTS", A),
    cmd("SET", A, "v", "EX", 1000), cmd("PEXPIRE", A, 0), cmd("TTL", A),
    # A key made again after its deletion has no TTL.
    cmd("SET", A, "again"), cmd("TTL", A), cmd("GET", A),
    # Databases are apart.
    cmd("SELECT", 1), cmd("DEL", A), cmd("SET", A, "one", "EX", 1000), cmd("TTL", A), cmd("SELECT", 0),
    cmd("TTL", A), cmd("PERSIST", A), cmd("SELECT", 1), cmd("TTL", A), cmd("PERSIST", A), cmd("TTL", A),
    cmd("DEL", A), cmd("SELECT", 0),
    cmd("DEL", A), cmd("EXPIRE", A, 1000), cmd("TTL", A),
]

FLAGS = [
    CLEAN,
    cmd("EXPIRE", M, 100, "NX"), cmd("EXPIRE", M, 100, "XX"), cmd("EXPIRE", M, 100, "GT"),
    cmd("EXPIRE", M, 100, "LT"),
    cmd("SET", B, "v"),
    # No TTL: XX and GT refuse (no TTL counts as infinite), LT sets.
    cmd("EXPIRE", B, 1000, "XX"), cmd("EXPIRE", B, 1000, "GT"), cmd("EXPIRE", B, 1000, "xx", "gt"),
    cmd("TTL", B), cmd("EXPIRE", B, 1000, "LT"), cmd("TTL", B),
    cmd("EXPIRE", B, 100, "NX"), cmd("TTL", B), cmd("EXPIRE", B, 10000, "GT"), cmd("TTL", B),
    cmd("EXPIRE", B, 100, "GT"), cmd("TTL", B), cmd("EXPIRE", B, 100000, "LT"), cmd("TTL", B),
    cmd("EXPIRE", B, 100, "lt"), cmd("TTL", B), cmd("EXPIRE", B, 1000, "XX"), cmd("TTL", B),
    cmd("EXPIRE", B, 10000, "XX", "LT"), cmd("EXPIRE", B, 10, "XX", "LT"), cmd("TTL", B),
    # Equal absolute times: GT and LT both refuse.
    cmd("EXPIREAT", B, FAR, "GT"), cmd("EXPIREAT", B, FAR, "GT"), cmd("EXPIREAT", B, FAR, "LT"),
    cmd("PEXPIREAT", B, FAR * 1000, "LT"), cmd("PEXPIREAT", B, FAR * 1000 - 1, "LT"),
    cmd("PEXPIRETIME", B), cmd("PEXPIREAT", B, FAR * 1000, "GT"), cmd("PEXPIRETIME", B),
    cmd("PEXPIREAT", B, FAR * 1000 + 1, "gT", "Gt"), cmd("PEXPIRETIME", B),
    cmd("PERSIST", B), cmd("EXPIRE", B, 100, "NX"), cmd("EXPIRE", B, 100, "nx"), cmd("TTL", B),
    cmd("EXPIRE", B, 1000, "NX", "NX"),
    # A past time that passes the flags deletes.
    cmd("EXPIRE", B, 0, "LT"), cmd("EXISTS", B),
    cmd("SET", B, "v"), cmd("EXPIRE", B, -1, "GT"), cmd("EXISTS", B), cmd("EXPIRE", B, -1, "LT"),
    cmd("EXISTS", B), cmd("SET", B, "v", "EX", 1000), cmd("EXPIRE", B, -1, "XX"), cmd("EXISTS", B),
    cmd("SET", C, "v"), cmd("PEXPIRE", C, 0, "NX"), cmd("EXISTS", C),
    # A NUL ends an option, as in C.
    cmd("SET", C, "v"), cmd("EXPIRE", C, 1000, b"nx\x00zz"), cmd("TTL", C),
    cmd("DEL", B, C),
]

ERRORS = [
    CLEAN, cmd("SET", A, "v"),
    cmd("EXPIRE"), cmd("EXPIRE", A), cmd("PEXPIRE", A), cmd("EXPIREAT", A), cmd("PEXPIREAT", A),
    cmd("TTL"), cmd("TTL", A, B), cmd("PTTL"), cmd("PTTL", A, B), cmd("EXPIRETIME"),
    cmd("EXPIRETIME", A, B), cmd("PEXPIRETIME"), cmd("PEXPIRETIME", A, B), cmd("PERSIST"),
    cmd("PERSIST", A, B),
    cmd("EXPIRE", A, "abc"), cmd("EXPIRE", A, "1.5"), cmd("EXPIRE", A, ""), cmd("EXPIRE", A, "01"),
    cmd("EXPIRE", A, " 1"), cmd("EXPIRE", A, "+1"), cmd("EXPIRE", A, "-0"),
    cmd("EXPIRE", A, "9223372036854775808"), cmd("PEXPIRE", M, "x"), cmd("PEXPIREAT", A, "1e3"),
    cmd("EXPIRE", A, 100, "foo"), cmd("EXPIRE", A, "abc", "foo"), cmd("EXPIRE", A, 100, "NX", "foo"),
    cmd("EXPIRE", A, 100, b"bad\r\nopt"), cmd("EXPIRE", A, 100, b"bad\x00zz"), cmd("EXPIRE", A, 100, ""),
    cmd("EXPIRE", A, "abc", "nx", "xx"), cmd("EXPIRE", A, 100, "nx", "xx"), cmd("EXPIRE", A, 100, "NX", "GT"),
    cmd("EXPIRE", A, 100, "lt", "nx"), cmd("EXPIRE", A, 100, "gt", "lt"), cmd("EXPIRE", A, 100, "xx", "gt", "lt"),
    cmd("EXPIRE", A, 100, "nx", "gt", "lt"), cmd("PEXPIREAT", M, 100, "GT", "LT"),
    cmd("EXPIRE", A, "9223372036854776"), cmd("EXPIRE", A, "-9223372036854776"),
    cmd("EXPIRE", A, "9223372036854775"), cmd("EXPIRE", M, "9223372036854776"),
    cmd("PEXPIRE", A, "9223372036854775807"), cmd("EXPIREAT", A, "9223372036854776"),
    cmd("EXPIREAT", A, "-9223372036854776"), cmd("EXPIREAT", A, "9223372036854775", "GT"),
    cmd("PEXPIRETIME", A), cmd("PERSIST", A),
    cmd("EXPIRE", A, "9223372036854776", "nx", "xx"), cmd("TTL", A), cmd("GET", A),
    cmd("DEL", A),
]

SEQUENCES = {"basic": BASIC, "flags": FLAGS, "errors": ERRORS}


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_same_replies_as_redis_server(redis_door, redis_reference, name):
    both_ways(redis_door, redis_reference, SEQUENCES[name])


def random_sequence(seed, n=300):
    """Expiry commands mixed with string and key commands over a few keys. A relative expiry
    is never compared with GT/LT to one of the same length the key may hold (see the
    module's doc): `possible` keeps, per key, the relative lengths (ms) it may have."""
    rng = random.Random(seed)
    keys = [f"expiry:r{i}" for i in range(4)]
    possible = {k: set() for k in keys}
    rel_ms = [1_000_000, 3_000_000, 10_000_000, 30_000_000, 100_000_000]
    out = [cmd("DEL", *keys)]
    for _ in range(n):
        k = rng.choice(keys)
        r = rng.random()
        if r < 0.15:
            opt = rng.choice([[], [], ["EX", 1000], ["PX", 10_000_000], ["KEEPTTL"], ["NX"], ["XX"],
                              ["GET"], ["XX", "KEEPTTL"], ["NX", "EX", 3000]])
            out.append(cmd("SET", k, rng.choice("uvw"), *opt))
            length = {"EX": int(opt[opt.index("EX") + 1]) * 1000 if "EX" in opt else None,
                      "PX": int(opt[opt.index("PX") + 1]) if "PX" in opt else None}
            got = length["EX"] or length["PX"]
            if "NX" in opt or "XX" in opt or "KEEPTTL" in opt:
                if got:
                    possible[k].add(got)
            else:
                possible[k] = {got} if got else set()
        elif r < 0.22:
            out.append(cmd(rng.choice(["GET", "EXISTS", "TYPE"]), k))
        elif r < 0.27:
            out.append(cmd("DEL", k))
            possible[k] = set()
        elif r < 0.33:
            out.append(cmd("PERSIST", k))
            possible[k] = set()
        elif r < 0.55:
            out.append(cmd(rng.choice(["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]), k))
        else:
            flags = rng.choice([[], [], ["NX"], ["XX"], ["GT"], ["LT"], ["XX", "GT"], ["XX", "lt"],
                                ["NX", "GT"], ["GT", "LT"], ["nx"], ["bogus"]])
            kind = rng.random()
            if kind < 0.1:
                # Past: the key goes (when the flags let it).
                name, value = rng.choice([("EXPIRE", 0), ("EXPIRE", -5), ("PEXPIRE", -1),
                                          ("EXPIREAT", 1), ("PEXPIREAT", 0)])
                out.append(cmd(name, k, value, *flags))
                continue
            compares = any(f.lower() in ("gt", "lt") for f in flags)
            free = [m for m in rel_ms if m not in possible[k]]
            if kind < 0.55 and (free or not compares):
                ms = rng.choice(free if compares else rel_ms)
                if rng.random() < 0.5:
                    out.append(cmd("EXPIRE", k, ms // 1000, *flags))
                else:
                    out.append(cmd("PEXPIRE", k, ms, *flags))
                if flags:
                    possible[k].add(ms)
                else:
                    possible[k] = {ms}
                continue
            at = FAR + rng.choice([0, 1000, 5000])
            if rng.random() < 0.5:
                out.append(cmd("EXPIREAT", k, at, *flags))
            else:
                out.append(cmd("PEXPIREAT", k, at * 1000 + rng.choice([0, 499, 500]), *flags))
            if not flags:
                possible[k] = set()
    return out


def test_random_sequence_matches_redis_server(redis_door, redis_reference):
    both_ways(redis_door, redis_reference, random_sequence(20240607))


# Real expiry: short times, waiting, and the rows on the primary.


def door_conn(port):
    c = Conn(port)
    assert c.call("AUTH", "app", "app") == "OK"
    return c


def key_row(root, key, db=0):
    with root.cursor() as cur:
        cur.execute(f"SELECT kid, type, expire_at, gc FROM {SCHEMA}.redis_keys "
                    "WHERE db = %s AND kh = UNHEX(SHA2(%s, 256))", (db, key))
        return cur.fetchone()


def members(root, table, kid):
    with root.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {SCHEMA}.{table} WHERE kid = %s", (kid,))
        return cur.fetchone()[0]


def wait_for(check, timeout=15.0, what="the sweeper"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.05)
    pytest.fail(f"{what} did not get there within {timeout}s")


def make_hash(port, root, key, n, expire_in_ms=None):
    """A hash of `n` fields made by `HSET` (and `PEXPIRE`) on the door: its `kid`."""
    c = door_conn(port)
    try:
        fields = [x for i in range(n) for x in (f"f{i}", f"v{i}")]
        assert c.call("HSET", key, *fields) == n
        if expire_in_ms is not None:
            assert c.call("PEXPIRE", key, expire_in_ms) == 1
    finally:
        c.close()
    return key_row(root, key)[0]


def test_expired_keys_read_as_absent_before_the_sweeper(redis_door, topology):
    """The row is held locked (so the sweeper cannot delete it): reads already see nothing,
    and once the lock goes the sweeper deletes the row."""
    c = door_conn(redis_door)
    root = topology.root()
    try:
        c.call("DEL", "expiry:held")
        assert c.call("SET", "expiry:held", "v", "PX", 400) == "OK"
        assert c.call("GET", "expiry:held") == b"v"
        holder = topology.root()
        try:
            holder.begin()
            with holder.cursor() as cur:
                cur.execute(f"SELECT kid FROM {SCHEMA}.redis_keys WHERE db = 0 "
                            "AND kh = UNHEX(SHA2(%s, 256)) FOR UPDATE", ("expiry:held",))
                assert cur.fetchone() is not None
            time.sleep(0.6)
            assert c.call("GET", "expiry:held") is None
            assert c.call("EXISTS", "expiry:held") == 0
            assert c.call("TTL", "expiry:held") == -2
            assert c.call("PTTL", "expiry:held") == -2
            assert c.call("TYPE", "expiry:held") == "none"
            time.sleep(0.3)
            assert key_row(root, "expiry:held") is not None, "the sweeper got past a held lock"
        finally:
            holder.rollback()
            holder.close()
        wait_for(lambda: key_row(root, "expiry:held") is None)
        # The sweeper got over the lock wait it met: it still sweeps.
        assert c.call("SET", "expiry:held2", "v", "PX", 100) == "OK"
        wait_for(lambda: key_row(root, "expiry:held2") is None)
    finally:
        c.close()
        root.close()


def test_the_sweeper_deletes_expired_rows_and_members(redis_door, topology):
    c = door_conn(redis_door)
    root = topology.root()
    try:
        keys = [f"expiry:sw{i}" for i in range(250)]
        c.call("DEL", *keys, "expiry:big", "expiry:stays")
        c.send(b"".join(cmd("SET", k, "v", "PX", 200) for k in keys))
        assert [read_reply(c.f) for _ in keys] == ["OK"] * len(keys)
        c.call("SET", "expiry:stays", "v", "EX", 1000)
        kid = make_hash(redis_door, root, "expiry:big", 2500, expire_in_ms=1500)
        assert c.call("TYPE", "expiry:big") == "hash"
        assert members(root, "redis_hash", kid) == 2500
        wait_for(lambda: key_row(root, "expiry:big") is None and members(root, "redis_hash", kid) == 0
                 and all(key_row(root, k) is None for k in keys[::25]))
        with root.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {SCHEMA}.redis_keys WHERE k LIKE 'expiry:sw%%'")
            assert cur.fetchone()[0] == 0
        assert key_row(root, "expiry:stays") is not None
        assert c.call("TTL", "expiry:stays") > 990
        c.call("DEL", "expiry:stays")
    finally:
        c.close()
        root.close()


def test_gc_collects_the_members_of_a_collection_written_over(redis_door, topology):
    c = door_conn(redis_door)
    root = topology.root()
    try:
        c.call("DEL", "expiry:gc")
        kid = make_hash(redis_door, root, "expiry:gc", 1500)
        assert c.call("TYPE", "expiry:gc") == "hash"
        # A plain SET (the batched upsert) keeps the row and marks its old members.
        assert c.call("SET", "expiry:gc", "s") == "OK"
        assert c.call("TYPE", "expiry:gc") == "string"
        wait_for(lambda: members(root, "redis_hash", kid) == 0 and key_row(root, "expiry:gc")[3] is None)
        assert c.call("GET", "expiry:gc") == b"s"
        assert key_row(root, "expiry:gc")[0] == kid
        c.call("DEL", "expiry:gc")
    finally:
        c.close()
        root.close()


def test_a_key_made_again_after_expiry_starts_afresh(redis_door, redis_reference, topology):
    root = topology.root()
    try:
        def steps(port):
            c = door_conn(port)
            try:
                out = [c.call("DEL", "expiry:again"),
                       c.call("SET", "expiry:again", "old", "PX", 150)]
                time.sleep(0.4)
                out += [c.call("GET", "expiry:again"), c.call("EXPIRE", "expiry:again", 100),
                        c.call("PERSIST", "expiry:again"), c.call("TTL", "expiry:again"),
                        c.call("SET", "expiry:again", "new", "KEEPTTL"), c.call("TTL", "expiry:again"),
                        c.call("SET", "expiry:again", "v", "PX", 150), c.call("EXPIRE", "expiry:again", 1000),
                        c.call("TTL", "expiry:again")]
                time.sleep(0.4)
                out += [c.call("GET", "expiry:again"), c.call("PTTL", "expiry:again"),
                        c.call("SET", "expiry:again", "v", "PX", 150), c.call("PERSIST", "expiry:again")]
                time.sleep(0.4)
                out += [c.call("TTL", "expiry:again"), c.call("GET", "expiry:again"),
                        c.call("DEL", "expiry:again")]
                return out
            finally:
                c.close()
        want = steps(redis_reference)
        got = steps(redis_door)
        assert [normalize(cmd("TTL"), r) for r in got] == [normalize(cmd("TTL"), r) for r in want]

        # A hash past its expiry, then a string of that name: no old TTL, no old members.
        c = door_conn(redis_door)
        try:
            c.call("DEL", "expiry:h")
            kid = make_hash(redis_door, root, "expiry:h", 10, expire_in_ms=30)
            time.sleep(0.06)
            assert c.call("TYPE", "expiry:h") == "none"
            assert c.call("SET", "expiry:h", "s") == "OK"
            assert c.call("TTL", "expiry:h") == -1
            assert c.call("GET", "expiry:h") == b"s"
            wait_for(lambda: members(root, "redis_hash", kid) == 0)
            row = key_row(root, "expiry:h")
            assert row is not None and row[1] == 0 and row[2] is None
            c.call("DEL", "expiry:h")
        finally:
            c.close()
    finally:
        root.close()


def test_the_sweeper_never_empties_a_key_made_live_again(redis_door, topology):
    """A batch that read the clock before a key's expiry may give it a new life (here
    `PERSIST`) while it waits on a lock past that expiry; the sweeper, meanwhile past the
    expiry, must leave the key's members alone. (The batch takes its keys' rows first, then
    waits here on a member row of another key.)"""
    c = door_conn(redis_door)
    root = topology.root()
    try:
        c.call("DEL", "expiry:live", "expiry:lock")
        assert c.call("HSET", "expiry:lock", "g", "0") == 1
        assert c.call("HSET", "expiry:live", "f", "1") == 1
        assert c.call("PEXPIRE", "expiry:live", 300) == 1
        holder = topology.root()
        try:
            with holder.cursor() as cur:
                cur.execute(f"SELECT kid FROM {SCHEMA}.redis_keys WHERE db = 0 "
                            "AND kh = UNHEX(SHA2(%s, 256))", ("expiry:lock",))
                (kid,) = cur.fetchone()
            holder.begin()
            with holder.cursor() as cur:
                cur.execute(f"SELECT field FROM {SCHEMA}.redis_hash WHERE kid = %s FOR UPDATE", (kid,))
            # One batch: it locks both keys, then waits for the held member row past the
            # expiry.
            c.send(cmd("HSET", "expiry:live", "f2", "2") + cmd("HINCRBY", "expiry:lock", "g", "1")
                   + cmd("PERSIST", "expiry:live"))
            time.sleep(1.5)
        finally:
            holder.rollback()
            holder.close()
        assert [read_reply(c.f) for _ in range(3)] == [1, 1, 1]
        time.sleep(0.5)
        assert c.call("TTL", "expiry:live") == -1
        assert c.call("HLEN", "expiry:live") == 2
        assert c.call("HGETALL", "expiry:live") in ([b"f", b"1", b"f2", b"2"], [b"f2", b"2", b"f", b"1"])
    finally:
        c.close()
        root.close()
