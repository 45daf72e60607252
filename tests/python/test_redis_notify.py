"""Keyspace notifications (`notify-keyspace-events`, `__keyspace@<db>__:<key>` and
`__keyevent@<db>__:<event>`) on the Redis door against Debian's redis-server 7.0: the same
writes on both, the same messages expected by a pattern subscriber (RESP2 and RESP3), byte
for byte and in the same order; `CONFIG SET`/`GET` of the setting compared byte for byte.

How the tests know every message arrived without waiting a fixed time: each sequence ends
with `SET ntf:end`, and the subscriber reads until that key's `set` event (the door publishes
one connection's events in command order, after each batch commits).

Intended differences from redis-server (avoided here, listed in docs/REDIS.md):
- A read of a key past its expiry does not delete it (the sweeper does, within 100 ms):
  its `expired` comes from the sweeper, not from the read. Writes delete it as Redis does.
- `new` (n) and `keymiss` (m) are never sent.
- Notifications are per manifold: writes made through another manifold are not seen.
"""

import time

import pytest

from conftest import PASSWORD, USER
from redisdiff import Conn, cmd, raw_reply, read_reply, replies, AUTH, byte_for_byte

P = "ntf:"
END = "ntf:end"
PATTERNS = ("__keyspace@*__:ntf:*", "__keyevent@*__:*")


class Subscriber:
    """A pattern subscriber to both channel kinds, keeping the messages about `ntf:` keys."""

    def __init__(self, port, resp3=False):
        self.c = Conn(port)
        self.c.sock.settimeout(20)
        assert self.c.call("AUTH", USER, PASSWORD) == "OK"
        if resp3:
            self.c.send(cmd("HELLO", "3"))
            read_reply(self.c.f)
        self.c.send(cmd("PSUBSCRIBE", *PATTERNS))
        for _ in PATTERNS:
            raw_reply(self.c.f)

    def until(self, last):
        """The messages about `ntf:` keys, raw, up to the first one containing `last`."""
        got = []
        while True:
            m = raw_reply(self.c.f)
            if b"ntf:" not in m:
                continue
            got.append(m)
            if last in m:
                return got

    def until_end(self):
        # The keyevent message of END's `set`: the sequence's last.
        return self.until(b"__keyevent@0__:set\r\n$7\r\nntf:end")

    def close(self):
        self.c.close()


def config(port, value):
    assert replies(port, [AUTH, cmd("CONFIG", "SET", "notify-keyspace-events", value)]) == ["OK", "OK"]


@pytest.fixture()
def events(redis_door, redis_reference):
    """Keyspace notifications on (`KEA`) on both, off again afterwards (the door is shared
    with the other test files)."""
    for port in (redis_door, redis_reference):
        config(port, "KEA")
    yield
    for port in (redis_door, redis_reference):
        config(port, "")


def messages(port, requests, pipeline, resp3=False):
    """The messages a subscriber gets for `requests` (after a reset of the `ntf:` keys, in
    databases 0 and 1)."""
    keys = [P + s for s in ("s", "s2", "l", "l2", "h", "z", "z2", "st", "x", "c", "none")]
    replies(port, [AUTH, cmd("DEL", *keys), cmd("SELECT", "1"), cmd("DEL", *keys)])
    sub = Subscriber(port, resp3)
    try:
        replies(port, [AUTH, *requests, cmd("SET", END, "1")], pipeline)
        return sub.until_end()
    finally:
        sub.close()


def brief(msgs):
    """The messages as `channel payload`, for a readable failure."""
    return [b" ".join(m.split(b"\r\n")[-4::2]).decode(errors="replace") for m in msgs]


def same_messages(door, reference, requests):
    for resp3 in (False, True):
        for pipeline in (True, False):
            got = messages(door, requests, pipeline, resp3)
            want = messages(reference, requests, pipeline, resp3)
            assert got == want, f"pipeline={pipeline} resp3={resp3}:\nmanifold {brief(got)}\nredis    {brief(want)}"


S, S2, L, L2, H, Z, Z2, ST, X, C = (P + s for s in ("s", "s2", "l", "l2", "h", "z", "z2", "st", "x", "c"))


def test_config_set_and_get_as_redis(redis_door, redis_reference):
    body = []
    for value in ("", "KEA", "Egx", "A", "g$lshzxetd", "nmKA", "KEA", "Kl", "$", "Q", "KEQ", ""):
        body += [cmd("CONFIG", "SET", "notify-keyspace-events", value),
                 cmd("CONFIG", "GET", "notify-keyspace-events")]
    byte_for_byte(redis_door, redis_reference, body)


def test_off_by_default_sends_nothing(redis_door, redis_reference):
    """With the setting empty (the default) writes make no message; once on, the first
    message is the first write's."""
    for port in (redis_door, redis_reference):
        config(port, "")
        sub = Subscriber(port)
        try:
            replies(port, [AUTH, cmd("SET", S, "1"), cmd("LPUSH", L, "a"), cmd("DEL", S, L)])
            config(port, "KEA")
            replies(port, [AUTH, cmd("SET", END, "1")])
            got = sub.until_end()
            assert got == [
                b"*4\r\n$8\r\npmessage\r\n$20\r\n__keyspace@*__:ntf:*\r\n$22\r\n__keyspace@0__:ntf:end\r\n$3\r\nset\r\n",
                b"*4\r\n$8\r\npmessage\r\n$16\r\n__keyevent@*__:*\r\n$18\r\n__keyevent@0__:set\r\n$7\r\nntf:end\r\n",
            ], got
        finally:
            sub.close()
            config(port, "")


def test_strings(redis_door, redis_reference, events):
    same_messages(redis_door, redis_reference, [
        cmd("SET", S, "1"), cmd("SET", S, "2", "EX", "100"), cmd("SET", S, "3", "KEEPTTL"),
        cmd("SET", S, "4", "NX"), cmd("SET", S2, "x", "XX"), cmd("SET", S, "5", "GET"),
        cmd("SETNX", S, "x"), cmd("SETNX", S2, "x"), cmd("SETEX", S2, "100", "y"),
        cmd("PSETEX", S2, "100000", "z"), cmd("GETSET", S, "6"),
        cmd("MSET", S, "1", S2, "2"), cmd("MSETNX", S, "1", X, "2"), cmd("MSETNX", X, "1", C, "2"),
        cmd("INCR", S), cmd("DECR", S), cmd("INCRBY", S, "5"), cmd("DECRBY", S, "2"),
        cmd("INCRBYFLOAT", S, "1.5"), cmd("APPEND", S, "xyz"), cmd("SETRANGE", S, "1", "ab"),
        cmd("SETRANGE", X, "0", ""), cmd("INCR", L), cmd("LPUSH", L, "a"), cmd("INCR", L),
        cmd("GETEX", S), cmd("GETEX", S, "EX", "100"), cmd("GETEX", S, "PERSIST"),
        cmd("GETEX", S, "PERSIST"), cmd("GETEX", S2, "PX", "100000"), cmd("GETDEL", S2), cmd("GETDEL", S2),
        cmd("GET", S), cmd("MGET", S, S2),
    ])


def test_lists(redis_door, redis_reference, events):
    same_messages(redis_door, redis_reference, [
        cmd("LPUSH", L, "a", "b"), cmd("RPUSH", L, "c"), cmd("LPUSHX", L2, "x"), cmd("RPUSHX", L, "d"),
        cmd("LPUSHX", L, "e"), cmd("LSET", L, "0", "E"), cmd("LINSERT", L, "BEFORE", "c", "C"),
        cmd("LINSERT", L, "BEFORE", "nope", "C"), cmd("LREM", L, "0", "C"), cmd("LREM", L, "0", "nope"),
        cmd("LPOP", L), cmd("RPOP", L, "2"), cmd("LPOP", L2),
        cmd("RPUSH", L, "1", "2", "3"), cmd("RPOPLPUSH", L, L2), cmd("LMOVE", L, L2, "LEFT", "RIGHT"),
        cmd("LMOVE", L, L2, "RIGHT", "LEFT"), cmd("RPUSH", L, "1", "2", "3", "4"),
        cmd("LTRIM", L, "1", "2"), cmd("LTRIM", L, "0", "-1"), cmd("LTRIM", L, "5", "6"),
        cmd("RPUSH", L, "1", "2"), cmd("LMPOP", "2", "ntf:none", L, "RIGHT", "COUNT", "5"),
        cmd("BLPOP", L2, "1"), cmd("BRPOP", "ntf:none", L2, "1"),
        cmd("RPUSH", L, "x"), cmd("BLMPOP", "1", "1", L, "LEFT"),
        cmd("RPUSH", L, "x", "y"), cmd("BLMOVE", L, L2, "LEFT", "LEFT", "1"), cmd("BRPOPLPUSH", L, L2, "1"),
        cmd("LLEN", L2), cmd("LRANGE", L2, "0", "-1"),
    ])


def test_hashes_and_sets(redis_door, redis_reference, events):
    same_messages(redis_door, redis_reference, [
        cmd("HSET", H, "a", "1", "b", "2"), cmd("HSET", H, "a", "1"), cmd("HMSET", H, "c", "3"),
        cmd("HSETNX", H, "a", "9"), cmd("HSETNX", H, "d", "4"), cmd("HINCRBY", H, "a", "2"),
        cmd("HINCRBYFLOAT", H, "b", "0.5"), cmd("HDEL", H, "nope"), cmd("HDEL", H, "a", "b"),
        cmd("HDEL", H, "c", "d"), cmd("HGET", H, "a"),
        cmd("SADD", S, "a", "b", "c"), cmd("SADD", S, "a"), cmd("SREM", S, "nope"), cmd("SREM", S, "a"),
        cmd("SMOVE", S, S2, "b"), cmd("SADD", S, "b"), cmd("SMOVE", S, S2, "b"),
        cmd("SMOVE", S, S2, "c"), cmd("SMOVE", S, S2, "c"),
        cmd("SADD", S, "x", "y"), cmd("SPOP", S), cmd("SPOP", S, "5"),
        cmd("SADD", S, "1", "2", "3"), cmd("SPOP", S, "1"),
        cmd("SINTERSTORE", X, S, S2), cmd("SUNIONSTORE", X, S, S2), cmd("SDIFFSTORE", X, S, S),
        cmd("SDIFFSTORE", X, S, S), cmd("SMEMBERS", S2),
    ])


def test_sorted_sets(redis_door, redis_reference, events):
    same_messages(redis_door, redis_reference, [
        cmd("ZADD", Z, "1", "a", "2", "b", "3", "c"), cmd("ZADD", Z, "1", "a"), cmd("ZADD", Z, "INCR", "5", "a"),
        cmd("ZADD", Z, "NX", "9", "a"), cmd("ZINCRBY", Z, "1", "b"), cmd("ZREM", Z, "nope"), cmd("ZREM", Z, "a"),
        cmd("ZADD", Z, "1", "x", "2", "y", "3", "z"), cmd("ZREMRANGEBYRANK", Z, "0", "0"),
        cmd("ZREMRANGEBYSCORE", Z, "2", "2"), cmd("ZREMRANGEBYSCORE", Z, "100", "200"),
        cmd("ZPOPMIN", Z), cmd("ZPOPMAX", Z), cmd("ZPOPMAX", Z, "10"),
        cmd("ZADD", Z, "0", "a", "0", "b"), cmd("ZREMRANGEBYLEX", Z, "[a", "[a"),
        cmd("ZADD", Z2, "1", "q"), cmd("ZUNIONSTORE", X, "2", Z, Z2), cmd("ZINTERSTORE", X, "2", Z, Z2),
        cmd("ZDIFFSTORE", C, "1", Z), cmd("ZRANGESTORE", C, Z, "0", "-1"),
        cmd("ZMPOP", "2", "ntf:none", Z, "MIN"), cmd("ZPOPMAX", Z2),
        cmd("GEOADD", Z, "13.361389", "38.115556", "Palermo"),
        cmd("ZRANGE", Z, "0", "-1"),
    ])


def test_keys_and_expiry(redis_door, redis_reference, events):
    same_messages(redis_door, redis_reference, [
        cmd("SET", S, "1"), cmd("LPUSH", L, "a"), cmd("DEL", S, L, "ntf:none"), cmd("UNLINK", S),
        cmd("SET", S, "1"), cmd("RENAME", S, S2), cmd("SET", S, "2"), cmd("RENAME", S, S2),
        cmd("RENAMENX", S2, S), cmd("SET", X, "1"), cmd("RENAMENX", S, X), cmd("RENAME", X, X),
        cmd("COPY", S, C), cmd("COPY", S, C), cmd("COPY", S, C, "REPLACE"), cmd("COPY", S, C, "DB", "1"),
        cmd("EXPIRE", S, "100"), cmd("PEXPIRE", S, "100000"), cmd("EXPIREAT", S, "99999999999"),
        cmd("PEXPIREAT", S, "99999999999000"), cmd("EXPIRE", S, "100", "NX"), cmd("PERSIST", S),
        cmd("PERSIST", S), cmd("EXPIRE", "ntf:none", "10"), cmd("EXPIRE", S, "0"), cmd("PEXPIRE", C, "-5"),
        cmd("EXISTS", S, C), cmd("SELECT", "1"), cmd("DEL", C), cmd("SET", C, "1"), cmd("SELECT", "0"),
    ])


def test_streams(redis_door, redis_reference, events):
    same_messages(redis_door, redis_reference, [
        cmd("XADD", ST, "1-1", "f", "v"), cmd("XADD", ST, "2-1", "f", "v"), cmd("XADD", ST, "NOMKSTREAM", "3-1", "f", "v"),
        cmd("XADD", "ntf:none", "NOMKSTREAM", "*", "f", "v"), cmd("XDEL", ST, "1-1"), cmd("XDEL", ST, "9-9"),
        cmd("XTRIM", ST, "MAXLEN", "5"), cmd("XTRIM", ST, "MAXLEN", "1"), cmd("XSETID", ST, "10-0"),
        cmd("XADD", ST, "MAXLEN", "5", "11-0", "f", "v"), cmd("XADD", ST, "MAXLEN", "1", "12-0", "f", "v"),
        cmd("XADD", ST, "MINID", "12", "13-0", "f", "v"),
        cmd("XGROUP", "CREATE", ST, "g", "0"), cmd("XGROUP", "CREATECONSUMER", ST, "g", "c"),
        cmd("XGROUP", "CREATECONSUMER", ST, "g", "c"), cmd("XGROUP", "SETID", ST, "g", "$"),
        cmd("XGROUP", "DELCONSUMER", ST, "g", "c"), cmd("XGROUP", "DELCONSUMER", ST, "g", "c"),
        cmd("XGROUP", "DESTROY", ST, "g"), cmd("XGROUP", "DESTROY", ST, "g"),
        cmd("XGROUP", "CREATE", X, "g", "$", "MKSTREAM"), cmd("XLEN", ST),
        cmd("XGROUP", "CREATE", ST, "g2", "0"), cmd("XREADGROUP", "GROUP", "g2", "c1", "COUNT", "1", "STREAMS", ST, ">"),
        cmd("XREADGROUP", "GROUP", "g2", "c1", "COUNT", "1", "STREAMS", ST, ">"),
        cmd("XCLAIM", ST, "g2", "c2", "0", "13-0"), cmd("XCLAIM", ST, "g2", "c2", "0", "13-0"),
        cmd("XAUTOCLAIM", ST, "g2", "c3", "0", "0"), cmd("XACK", ST, "g2", "13-0"),
    ])


def test_transactions_and_scripts(redis_door, redis_reference, events):
    same_messages(redis_door, redis_reference, [
        cmd("MULTI"), cmd("SET", S, "1"), cmd("LPUSH", L, "a"), cmd("INCR", S), cmd("LPOP", L), cmd("EXEC"),
        cmd("EVAL", "redis.call('SET', KEYS[1], 'x'); redis.call('HSET', KEYS[2], 'f', 'v'); "
                    "return redis.call('DEL', KEYS[1])", "2", S, H),
        cmd("EVAL", "redis.call('SADD', KEYS[1], 'm'); return redis.call('INCR', KEYS[1])", "1", S2),
        cmd("SMEMBERS", S2),
    ])


def test_classes_select_what_is_sent(redis_door, redis_reference):
    """Only the asked classes, on the asked channel kinds; no message without K or E."""
    try:
        for flags in ("K$", "Eg", "Kl", "El", "$lg", "KEx", "AK", "AE"):
            for port in (redis_door, redis_reference):
                config(port, flags)
            # The END sentinel needs `set` on the keyevent channel: sent separately below.
            body = [cmd("SET", S, "1"), cmd("LPUSH", L, "a"), cmd("DEL", S), cmd("EXPIRE", L, "100"),
                    cmd("HSET", H, "f", "v"), cmd("DEL", H, L)]
            got = flagged(redis_door, flags, body)
            want = flagged(redis_reference, flags, body)
            assert got == want, f"flags {flags}:\nmanifold {got!r}\nredis    {want!r}"
    finally:
        for port in (redis_door, redis_reference):
            config(port, "")


def flagged(port, flags, body):
    sub = Subscriber(port)
    try:
        replies(port, [AUTH, *body])
        # Then the sentinel with every class on both kinds.
        config(port, "KEA")
        replies(port, [AUTH, cmd("SET", END, "1")])
        config(port, flags)
        return sub.until_end()
    finally:
        sub.close()


def test_expired_from_the_sweeper_and_from_a_write(redis_door, redis_reference, events):
    """A key left alone past its expiry: `expired` (the door's sweeper, Redis's active
    expiry). One written after its expiry: `expired` first, then the write's event."""
    for port in (redis_door, redis_reference):
        sub = Subscriber(port)
        try:
            replies(port, [AUTH, cmd("SET", X, "1", "PX", "30")])
            got = sub.until(b"__keyevent@0__:expired\r\n$5\r\nntf:x")
            assert [m.split(b"\r\n")[-2] for m in got] == [b"set", b"ntf:x", b"expire", b"ntf:x", b"expired", b"ntf:x"], got
        finally:
            sub.close()


def test_lazy_expiry_then_write(redis_door, redis_reference, events):
    """A write on a key past its expiry: `expired`, then the write's events, on both (the
    sweeper may have reaped it first: the same messages)."""
    for port in (redis_door, redis_reference):
        replies(port, [AUTH, cmd("DEL", L)])
    results = {}
    for name, port in (("door", redis_door), ("redis", redis_reference)):
        sub = Subscriber(port)
        try:
            replies(port, [AUTH, cmd("SET", L, "1", "PX", "1")])
            # Until the key reads as gone (no fixed wait).
            for _ in range(1000):
                if replies(port, [AUTH, cmd("PTTL", L)])[1] == -2:
                    break
                time.sleep(0.01)
            replies(port, [AUTH, cmd("LPUSH", L, "a"), cmd("SET", END, "1")])
            results[name] = sub.until_end()
        finally:
            sub.close()
    assert results["door"] == results["redis"]


def test_rolled_back_attempt_sends_nothing(redis_door, topology, events):
    """A batch chosen as a deadlock's victim is rolled back and runs again: the events of
    the rolled back attempt are never sent, the second attempt's once. The deadlock: an SQL
    session (heavier, so InnoDB rolls the door's batch back) holds `ntf:c`'s row while the
    batch, having created `ntf:l`, waits for it; then the session asks for `ntf:l`'s row."""
    schema = "manifold_redis"
    replies(redis_door, [AUTH, cmd("DEL", L, C), cmd("SET", C, "1")])
    sql = topology.root()
    sub = Subscriber(redis_door)
    door = Conn(redis_door)
    try:
        cur = sql.cursor()
        cur.execute(f"CREATE TABLE IF NOT EXISTS {schema}.ntf_scratch (n INT PRIMARY KEY)")
        cur.execute(f"DELETE FROM {schema}.ntf_scratch")
        cur.execute("START TRANSACTION")
        # Weight: InnoDB rolls back the transaction that changed fewer rows.
        cur.execute(f"INSERT INTO {schema}.ntf_scratch (n) VALUES " + ",".join(f"({i})" for i in range(2000)))
        cur.execute(f"SELECT kid FROM {schema}.redis_keys WHERE db = 0 AND kh = UNHEX(SHA2(%s, 256)) FOR UPDATE", (C,))
        assert door.call("AUTH", USER, PASSWORD) == "OK"
        door.send(cmd("LPUSH", L, "a") + cmd("INCR", C) + cmd("SET", END, "1"))
        # Until the door's batch waits for `ntf:c`'s row.
        watch = topology.root()
        try:
            for _ in range(2000):
                wc = watch.cursor()
                wc.execute("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'")
                if wc.fetchone()[0] > 0:
                    break
                time.sleep(0.01)
            else:
                wc = watch.cursor()
                wc.execute("SELECT trx_state, trx_query FROM information_schema.INNODB_TRX")
                rows = wc.fetchall()
                door.sock.settimeout(1)
                raise AssertionError(f"the door's batch never waited for the row: {rows} {read_reply(door.f)}")
        finally:
            watch.close()
        cur.execute(f"SELECT kid FROM {schema}.redis_keys WHERE db = 0 AND kh = UNHEX(SHA2(%s, 256)) FOR UPDATE", (L,))
        cur.execute("ROLLBACK")
        assert [read_reply(door.f) for _ in range(3)] == [1, 2, "OK"]
        msgs = sub.until_end()
        assert brief(msgs) == [
            "__keyspace@0__:ntf:l lpush", "__keyevent@0__:lpush ntf:l",
            "__keyspace@0__:ntf:c incrby", "__keyevent@0__:incrby ntf:c",
            "__keyspace@0__:ntf:end set", "__keyevent@0__:set ntf:end",
        ], brief(msgs)
    finally:
        door.close()
        sub.close()
        sql.cursor().execute(f"DROP TABLE IF EXISTS {schema}.ntf_scratch")
        sql.close()


def test_blocked_pop_woken_by_a_push(redis_door, redis_reference, events):
    """A BLPOP that waited, served by another client's push: `lpush`, then the pop's `lpop`
    and `del`, as Redis."""
    results = {}
    for name, port in (("door", redis_door), ("redis", redis_reference)):
        replies(port, [AUTH, cmd("DEL", L)])
        sub = Subscriber(port)
        blocked = Conn(port)
        try:
            assert blocked.call("AUTH", USER, PASSWORD) == "OK"
            blocked.send(cmd("BLPOP", L, "0"))
            # Until the door/server counts it blocked (no fixed wait).
            for _ in range(1000):
                info = replies(port, [AUTH, cmd("INFO", "clients")])[1]
                if b"blocked_clients:1" in info:
                    break
                time.sleep(0.01)
            else:
                raise AssertionError(f"{name}: the BLPOP never blocked")
            replies(port, [AUTH, cmd("LPUSH", L, "a")])
            assert read_reply(blocked.f) == [L.encode(), b"a"]
            replies(port, [AUTH, cmd("SET", END, "1")])
            results[name] = brief(sub.until_end())
        finally:
            blocked.close()
            sub.close()
    assert results["door"] == results["redis"], results
    assert results["door"][:6] == [
        "__keyspace@0__:ntf:l lpush", "__keyevent@0__:lpush ntf:l",
        "__keyspace@0__:ntf:l lpop", "__keyevent@0__:lpop ntf:l",
        "__keyspace@0__:ntf:l del", "__keyevent@0__:del ntf:l",
    ], results["door"]


def test_events_from_every_worker(redis_door, events):
    """Writes on many connections (spread over the door's workers) all reach one subscriber."""
    sub = Subscriber(redis_door)
    try:
        conns = [Conn(redis_door) for _ in range(16)]
        try:
            for i, c in enumerate(conns):
                assert c.call("AUTH", USER, PASSWORD) == "OK"
                assert c.call("SET", f"ntf:w{i}", "1") == "OK"
        finally:
            for c in conns:
                c.close()
        replies(redis_door, [AUTH, cmd("SET", END, "1")])
        msgs = sub.until_end()
        keys = {m.split(b"\r\n")[-2] for m in msgs if b"__keyevent@0__:set" in m}
        assert keys == {f"ntf:w{i}".encode() for i in range(16)} | {b"ntf:end"}
    finally:
        sub.close()
        replies(redis_door, [AUTH, cmd("DEL", *[f"ntf:w{i}" for i in range(16)])])
