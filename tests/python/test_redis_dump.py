"""The Redis door's DUMP and RESTORE against Debian's redis-server 7.0: errors compared reply
for reply (pipelined and one at a time, RESP2 and RESP3 byte for byte), and values moved both
ways: a payload DUMPed by redis-server RESTOREd into the door, and one DUMPed by the door
RESTOREd into redis-server, giving the same type, members, scores and TTL, for small values
(redis-server's listpack and intset encodings) and large ones (its hashtable, skiplist and
multi-node quicklist encodings), integer-encoded and LZF-compressed strings; streams with
their tombstones, IDs, counters, consumer groups, consumers and pending entries (the same
XRANGE and XINFO STREAM FULL on both, delivery and seen times included).

Intended differences from redis-server (avoided here):
- The door's payloads are not byte-identical to redis-server's: it writes the plainest
  encodings (raw strings, LIST, SET, ZSET_2, HASH), which redis-server loads and converts.
  Only DUMPs of short non-integer strings (the same bytes on both) are compared directly.
- A stream's listpacks are laid out by the door (100 entries a listpack): XINFO STREAM's
  radix-tree-keys and radix-tree-nodes (Redis's memory layout, estimated by the door) are
  not compared.
- The door refuses stream payloads redis-server takes but could not serve as written: a
  length not the count of live entries, a last ID below an entry's, a recorded first ID not
  the first entry's, a PEL entry without a
  consumer, a group's entries-read below -1; and streams past its bounds (10,000 groups...).
- IDLETIME and FREQ are checked, then ignored (the door keeps no access times).
- A value taking more than 4 x proto-max-bulk-len once decoded is refused with its own
  error (redis-server has no such bound).
"""

import random
import threading
import time

from redisdiff import AUTH, Conn, byte_for_byte, cmd, differential, read_reply, ttl

P = "dump:"


def crc64(data):
    """Redis's CRC-64 (Jones, reflected)."""
    poly = 0x95AC9329AC4BC9B5
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return crc


def payload(body, version=10):
    """A DUMP payload of `body` (type byte and object) with its footer."""
    head = body + version.to_bytes(2, "little")
    return head + crc64(head).to_bytes(8, "little")


HELLO = payload(b"\x00\x05hello")


def fresh(port):
    """A connection, authenticated."""
    c = Conn(port)
    c.send(AUTH)
    assert read_reply(c.f) == "OK"
    return c


def snapshot(c, key):
    """A key's type and value, order-free where Redis leaves the order unspecified."""
    t = c.call("TYPE", key)
    if t == "string":
        v = c.call("GET", key)
    elif t == "list":
        v = c.call("LRANGE", key, 0, -1)
    elif t == "set":
        v = sorted(c.call("SMEMBERS", key))
    elif t == "zset":
        v = c.call("ZRANGE", key, 0, -1, "WITHSCORES")
    elif t == "hash":
        flat = c.call("HGETALL", key)
        v = sorted(zip(flat[0::2], flat[1::2]))
    else:
        v = None
    return t, v


def values():
    """(name, commands building it on a key `{k}`) for every type and encoding."""
    rnd = random.Random(27)
    big_list = [str(i) if i % 3 else "elem-%d-%s" % (i, "x" * (i % 90)) for i in range(3000)]
    return [
        ("str", [["SET", "{k}", "hello"]]),
        ("empty", [["SET", "{k}", ""]]),
        ("int8", [["SET", "{k}", "-7"]]),
        ("int16", [["SET", "{k}", "12345"]]),
        ("int32", [["SET", "{k}", "-2000000000"]]),
        ("int64", [["SET", "{k}", "123456789012345"]]),
        ("notint", [["SET", "{k}", "007"]]),
        ("binary", [["SET", "{k}", bytes(range(256))]]),
        ("lzf", [["SET", "{k}", "abcdefgh" * 2000]]),
        ("random", [["SET", "{k}", bytes(rnd.getrandbits(8) for _ in range(5000))]]),
        ("list-small", [["RPUSH", "{k}", "a", "b", "7", "-3", "1000000", "", "x" * 100]]),
        ("list-big", [["RPUSH", "{k}", *big_list[i:i + 500]] for i in range(0, 3000, 500)]),
        ("list-lzf", [["RPUSH", "{k}", *(["same-element"] * 400)]]),
        ("set-intset", [["SADD", "{k}", *range(-5, 20)]]),
        ("set-bigints", [["SADD", "{k}", "9223372036854775807", "-9223372036854775808", "1"]]),
        ("set-strings", [["SADD", "{k}", "a", "b", "c", ""]]),
        ("set-big", [["SADD", "{k}", *range(0, 1000)], ["SADD", "{k}", "word"]]),
        ("zset-small", [["ZADD", "{k}", "1.5", "a", "2", "b", "inf", "c", "-inf", "d", "-0.25", "e",
                         "1e100", "f", "3", "7"]]),
        ("zset-big", [["ZADD", "{k}", *[x for i in range(300) for x in (i * 0.37 - 20, "m%d" % i)]]]),
        ("zset-long", [["ZADD", "{k}", "1", "y" * 100, "2", "z"]]),
        ("hash-small", [["HSET", "{k}", "f", "v", "n", "5", "neg", "-100000", "", "empty"]]),
        ("hash-big", [["HSET", "{k}", *[x for i in range(700) for x in ("f%d" % i, "v%d" % (i * 7))]]]),
        ("hash-long", [["HSET", "{k}", "f", "v" * 200, "g", "1"]]),
    ]


def build(c, key, commands):
    c.call("DEL", key)
    for command in commands:
        reply = c.call(*[key if a == "{k}" else a for a in command])
        assert not isinstance(reply, str) or reply == "OK", reply


def test_redis_server_payloads_restore_into_the_door(redis_door, redis_reference):
    ref, door = fresh(redis_reference), fresh(redis_door)
    for name, commands in values():
        key = P + "from-redis:" + name
        build(ref, key, commands)
        data = ref.call("DUMP", key)
        assert isinstance(data, bytes), (name, data)
        door.call("DEL", key)
        assert door.call("RESTORE", key, 0, data) == "OK", name
        assert snapshot(door, key) == snapshot(ref, key), name
        assert door.call("PTTL", key) == -1
        # And back: the door's own DUMP of it restores into redis-server.
        again = door.call("DUMP", key)
        assert ref.call("RESTORE", key, 0, again, "REPLACE") == "OK", name
        assert snapshot(ref, key) == snapshot(door, key), name


def test_door_payloads_restore_into_redis_server(redis_door, redis_reference):
    ref, door = fresh(redis_reference), fresh(redis_door)
    for name, commands in values():
        key = P + "from-door:" + name
        build(door, key, commands)
        data = door.call("DUMP", key)
        assert isinstance(data, bytes), (name, data)
        ref.call("DEL", key)
        assert ref.call("RESTORE", key, 0, data) == "OK", name
        assert snapshot(ref, key) == snapshot(door, key), name
        # The door restores its own.
        assert door.call("RESTORE", key, 0, data, "REPLACE") == "OK"
        assert snapshot(door, key)[1] == snapshot(ref, key)[1]


def test_ttl_is_carried_both_ways(redis_door, redis_reference):
    ref, door = fresh(redis_reference), fresh(redis_door)
    key = P + "ttl"
    for src, dst in ((ref, door), (door, ref)):
        src.call("DEL", key)
        dst.call("DEL", key)
        src.call("RPUSH", key, "a", "b")
        data = src.call("DUMP", key)
        assert dst.call("RESTORE", key, 100_000, data) == "OK"
        assert 90_000 < dst.call("PTTL", key) <= 100_000
        at = int(time.time() * 1000) + 500_000
        assert dst.call("RESTORE", key, at, data, "REPLACE", "ABSTTL") == "OK"
        assert dst.call("PEXPIRETIME", key) == at
        assert dst.call("LRANGE", key, 0, -1) == [b"a", b"b"]


def test_errors_and_replies_as_redis_server(redis_door, redis_reference):
    k, s = P + "k", P + "s"
    empty_list = payload(b"\x01\x00")
    dup_set = payload(b"\x02\x02\x01a\x01a")
    requests = [
        cmd("DEL", k, s),
        cmd("DUMP", k),
        cmd("DUMP"), cmd("DUMP", k, k),
        cmd("RESTORE", k, 0), cmd("RESTORE", k),
        cmd("RESTORE", k, 0, HELLO), cmd("GET", k), cmd("TYPE", k), cmd("PTTL", k),
        cmd("DUMP", k),
        # BUSYKEY comes before the TTL and the payload are read.
        cmd("RESTORE", k, 0, HELLO), cmd("RESTORE", k, -1, b"junk"), cmd("RESTORE", k, "x", b"junk"),
        cmd("RESTORE", k, 0, HELLO, "REPLACE"),
        cmd("RESTORE", s, -1, HELLO), cmd("RESTORE", s, "x", HELLO), cmd("RESTORE", s, "1.5", HELLO),
        cmd("RESTORE", s, 0, b"short"), cmd("RESTORE", s, 0, b""),
        cmd("RESTORE", s, 0, HELLO[:-1] + bytes([HELLO[-1] ^ 1])),
        cmd("RESTORE", s, 0, payload(b"\x00\x05hello", version=11)),
        cmd("RESTORE", s, 0, payload(b"\x00\x05hello", version=9)), cmd("GET", s), cmd("DEL", s),
        cmd("RESTORE", s, 0, payload(b"\xc8\x00")), cmd("RESTORE", s, 0, payload(b"")),
        cmd("RESTORE", s, 0, empty_list), cmd("RESTORE", s, 0, dup_set),
        cmd("RESTORE", s, 0, payload(b"\x00\x09hel")),
        cmd("EXISTS", s),
        # Options: checked before anything else, in Redis's order.
        cmd("RESTORE", k, 0, HELLO, "bogus"), cmd("RESTORE", k, 0, HELLO, "IDLETIME"),
        cmd("RESTORE", k, 0, HELLO, "IDLETIME", -1), cmd("RESTORE", k, 0, HELLO, "IDLETIME", "x"),
        cmd("RESTORE", k, 0, HELLO, "FREQ", 256), cmd("RESTORE", k, 0, HELLO, "FREQ", -1),
        cmd("RESTORE", k, 0, HELLO, "FREQ", 1, "IDLETIME", 1),
        cmd("RESTORE", k, 0, HELLO, "IDLETIME", 1, "FREQ", 1),
        cmd("RESTORE", k, 0, HELLO, "replace", "idletime", 1000, "absttl"),
        cmd("RESTORE", k, 0, HELLO, "REPLACE", "FREQ", 5), cmd("GET", k),
        # A TTL already past: nothing is created, the key replaced is deleted.
        cmd("RESTORE", k, 1, HELLO, "REPLACE", "ABSTTL"), cmd("EXISTS", k),
        cmd("RESTORE", k, 1, HELLO, "ABSTTL"), cmd("EXISTS", k),
        cmd("RESTORE", k, 5000, HELLO), cmd("PTTL", k), cmd("TTL", k),
        # Inside MULTI, and from a script.
        cmd("MULTI"), cmd("DUMP", k), cmd("RESTORE", s, 0, HELLO, "REPLACE"), cmd("GET", s),
        cmd("EXEC"),
        cmd("EVAL", "return redis.call('DUMP', KEYS[1])", 1, k),
        cmd("EVAL", "return redis.call('RESTORE', KEYS[1], 0, ARGV[1], 'REPLACE')", 1, s, HELLO),
        cmd("EVAL", "return redis.pcall('RESTORE', KEYS[1], 0, ARGV[1])", 1, s, HELLO),
        cmd("GET", s),
        cmd("DEL", k, s),
    ]
    for pipeline in (True, False):
        differential(redis_door, redis_reference, requests, pipeline=pipeline, normalize=ttl)
    byte_for_byte(redis_door, redis_reference, [
        cmd("DEL", k), cmd("DUMP", k), cmd("RESTORE", k, 0, HELLO), cmd("DUMP", k),
        cmd("RESTORE", k, 0, HELLO), cmd("RESTORE", k, 0, b"bad", "REPLACE"), cmd("DEL", k),
    ])


def test_random_corruptions_answer_as_redis_server(redis_door, redis_reference):
    """Payloads of redis-server's own DUMPs with bytes changed (footer recomputed, so the
    value itself is malformed): the door never fails otherwise than with Bad data format, and
    when it accepts one it holds what redis-server holds."""
    ref, door = fresh(redis_reference), fresh(redis_door)
    # redis-server checks a payload's listpacks in depth only so (a malformed one would
    # otherwise crash it later).
    assert ref.call("CONFIG", "SET", "sanitize-dump-payload", "yes") == "OK"
    rnd = random.Random(7)
    sources = []
    for name, commands in values():
        if name in ("list-big", "set-big", "zset-big", "hash-big", "lzf", "random"):
            continue
        key = P + "fuzz-src"
        build(ref, key, commands)
        sources.append(ref.call("DUMP", key)[:-10])
    key = P + "fuzz"
    for _ in range(400):
        body = bytearray(rnd.choice(sources))
        for _ in range(rnd.randint(1, 3)):
            body[rnd.randrange(len(body))] = rnd.randrange(256)
        if rnd.random() < 0.3:
            body = body[: rnd.randrange(len(body) + 1)]
        data = payload(bytes(body))
        ref.call("DEL", key)
        door.call("DEL", key)
        got = door.call("RESTORE", key, 0, data)
        assert got in ("OK", "ERR Bad data format"), got
        want = ref.call("RESTORE", key, 0, data)
        if got == "OK" and want == "OK":
            assert snapshot(door, key) == snapshot(ref, key)
    ref.call("CONFIG", "SET", "sanitize-dump-payload", "no")
    # The door still serves after all that.
    assert door.call("PING") == "PONG"
    door.call("DEL", key)


def test_a_restored_list_wakes_a_blocked_client(redis_door):
    key = P + "blocked"
    door = fresh(redis_door)
    door.call("DEL", key)
    data = payload(b"\x01\x02\x01a\x01b")
    waiter = fresh(redis_door)
    got = {}

    def pop():
        got["reply"] = waiter.call("BLPOP", key, 10)

    t = threading.Thread(target=pop)
    t.start()
    # The waiter is blocked once the door lists it so.
    for _ in range(200):
        if b"cmd=blpop" in door.call("CLIENT", "LIST"):
            break
        time.sleep(0.02)
    assert door.call("RESTORE", key, 0, data) == "OK"
    t.join(15)
    assert got["reply"] == [key.encode(), b"a"]
    assert door.call("LRANGE", key, 0, -1) == [b"b"]
    door.call("DEL", key)


def test_a_value_too_large_in_memory_is_refused(redis_door):
    """An LZF string claiming 4 GiB out of 3 bytes: refused before anything is allocated
    (redis-server would try to allocate it)."""
    key = P + "huge"
    door = fresh(redis_door)
    door.call("DEL", key)
    data = payload(b"\x00\xc3\x03\x80\xff\xff\xff\xff\x02abc")
    assert door.call("RESTORE", key, 0, data) == (
        "ERR value too large to restore: it takes more than 4 times proto-max-bulk-len in memory")
    assert door.call("EXISTS", key) == 0


def test_keyspace_events_as_redis_server(redis_door, redis_reference):
    """`restore` on a key restored (no `del` for the key REPLACE overwrote, no `expire` for
    its TTL), `del` alone when a TTL already past deleted the key replaced, nothing for a
    refusal."""
    from test_redis_notify import L, C, config, same_messages  # noqa: PLC0415
    for port in (redis_door, redis_reference):
        config(port, "KEA")
    try:
        same_messages(redis_door, redis_reference, [
            cmd("RESTORE", C, 0, HELLO), cmd("RESTORE", C, 0, HELLO),
            cmd("RESTORE", C, 0, HELLO, "REPLACE"), cmd("RESTORE", C, 1, HELLO, "REPLACE", "ABSTTL"),
            cmd("RESTORE", C, 1, HELLO, "ABSTTL"), cmd("RESTORE", C, 100000, HELLO),
            cmd("RESTORE", L, 0, payload(b"\x01\x02\x01a\x01b")), cmd("RESTORE", L, 0, b"bad"),
        ])
    finally:
        for port in (redis_door, redis_reference):
            config(port, "")


def stream_builds():
    """(name, commands building a stream on a key `{k}`), IDs given so both servers agree."""
    big = []
    for i in range(1, 701):
        fields = ["f", "v%d" % i, "n", str(i)] if i % 5 else ["other", "x" * (i * 13 % 6000), "n", "-%d" % i]
        big.append(["XADD", "{k}", "%d-%d" % (1000 + i // 3, i % 3), *fields])
    return [
        ("small", [["XADD", "{k}", "1-1", "f", "v", "n", "5"], ["XADD", "{k}", "1-2", "f", "w", "n", "6"],
                   ["XADD", "{k}", "2-0", "other", "x"], ["XADD", "{k}", "2-1", "f", "1", "n", "2"],
                   ["XDEL", "{k}", "1-2"]]),
        ("big", big + [["XDEL", "{k}", "1001-0", "1100-2"]]),
        ("first-deleted", [["XADD", "{k}", "5-0", "a", "1"], ["XADD", "{k}", "6-0", "a", "2"],
                           ["XDEL", "{k}", "5-0"]]),
        ("emptied", [["XADD", "{k}", "5-0", "a", "1"], ["XDEL", "{k}", "5-0"]]),
        ("mkstream", [["XGROUP", "CREATE", "{k}", "g", "$", "MKSTREAM"]]),
        ("setid", [["XADD", "{k}", "3-3", "a", "b"],
                   ["XSETID", "{k}", "9-9", "ENTRIESADDED", "42", "MAXDELETEDID", "2-2"]]),
        ("groups", [
            *[["XADD", "{k}", "%d-0" % i, "f", "v%d" % i] for i in range(1, 21)],
            ["XGROUP", "CREATE", "{k}", "readers", "0"],
            ["XGROUP", "CREATE", "{k}", "late", "10-0", "ENTRIESREAD", "10"],
            ["XGROUP", "CREATE", "{k}", "unread", "$"],
            ["XREADGROUP", "GROUP", "readers", "alice", "COUNT", "5", "STREAMS", "{k}", ">"],
            ["XREADGROUP", "GROUP", "readers", "bob", "COUNT", "3", "STREAMS", "{k}", ">"],
            ["XREADGROUP", "GROUP", "readers", "alice", "STREAMS", "{k}", "0"],
            ["XACK", "{k}", "readers", "2-0", "7-0"],
            ["XCLAIM", "{k}", "readers", "carol", "0", "3-0", "6-0"],
            ["XGROUP", "CREATECONSUMER", "{k}", "readers", "idle"],
            ["XREADGROUP", "GROUP", "late", "dave", "COUNT", "2", "STREAMS", "{k}", ">"],
            ["XDEL", "{k}", "4-0", "15-0"],
        ]),
        ("noack", [["XADD", "{k}", "1-0", "a", "b"], ["XGROUP", "CREATE", "{k}", "g", "0"],
                   ["XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "{k}", ">"]]),
    ]


def stream_snapshot(c, key):
    """A stream's entries and XINFO STREAM FULL, less Redis's radix tree figures."""
    info = c.call("XINFO", "STREAM", key, "FULL")
    assert isinstance(info, list), info
    for i in range(0, len(info), 2):
        if info[i] in (b"radix-tree-keys", b"radix-tree-nodes"):
            info[i + 1] = None
    return c.call("TYPE", key), c.call("XRANGE", key, "-", "+"), info


def build_stream(c, key, commands):
    c.call("DEL", key)
    for command in commands:
        reply = c.call(*[key if a == "{k}" else a for a in command])
        assert not (isinstance(reply, str) and reply.startswith("ERR")), (command, reply)


def test_streams_move_both_ways(redis_door, redis_reference):
    ref, door = fresh(redis_reference), fresh(redis_door)
    for name, commands in stream_builds():
        for src, dst, way in ((ref, door, "from-redis"), (door, ref, "from-door")):
            key = P + way + ":" + name
            build_stream(src, key, commands)
            data = src.call("DUMP", key)
            assert isinstance(data, bytes), (name, data)
            dst.call("DEL", key)
            assert dst.call("RESTORE", key, 0, data) == "OK", (name, way)
            want = stream_snapshot(src, key)
            assert want[0] == "stream"
            assert stream_snapshot(dst, key) == want, (name, way)
            # And back: the copy's DUMP restores on the side it came from.
            back = dst.call("DUMP", key)
            assert src.call("RESTORE", key + ":back", 0, back, "REPLACE") == "OK", (name, way)
            assert stream_snapshot(src, key + ":back") == want, (name, way)
            for c in (src, dst):
                c.call("DEL", key, key + ":back")


def test_a_restored_stream_serves_as_redis_server(redis_door, redis_reference):
    """After RESTORE, both sides take the same commands the same way: new IDs past the
    restored last ID, groups reading on from their last delivered ID, PELs claimed and acked."""
    ref, door = fresh(redis_reference), fresh(redis_door)
    key = P + "serve"
    build_stream(ref, key, dict(stream_builds())["groups"])
    data = ref.call("DUMP", key)
    door.call("DEL", key)
    assert door.call("RESTORE", key, 0, data) == "OK"
    differential(redis_door, redis_reference, [
        cmd("XADD", key, "20-0", "x", "y"), cmd("XADD", key, "21-*", "x", "y"),
        cmd("XREADGROUP", "GROUP", "readers", "erin", "COUNT", "3", "STREAMS", key, ">"),
        cmd("XREADGROUP", "GROUP", "unread", "erin", "STREAMS", key, ">"),
        cmd("XACK", key, "readers", "1-0", "3-0", "8-0"),
        cmd("XPENDING", key, "readers"), cmd("XPENDING", key, "readers", "-", "+", 100, "bob"),
        cmd("XINFO", "GROUPS", key), cmd("XLEN", key), cmd("XRANGE", key, "-", "+"),
        cmd("DEL", key),
    ])


def test_corrupt_stream_payloads_are_refused_whole(redis_door, redis_reference):
    """Stream payloads of redis-server's with bytes changed (footer recomputed): the door
    answers OK or Bad data format, never writes part of a value, and holds what
    redis-server holds when both take one (redis-server checking in depth)."""
    ref, door = fresh(redis_reference), fresh(redis_door)
    assert ref.call("CONFIG", "SET", "sanitize-dump-payload", "yes") == "OK"
    rnd = random.Random(11)
    sources = []
    for name, commands in stream_builds():
        if name == "big":
            continue
        key = P + "sfuzz-src"
        build_stream(ref, key, commands)
        sources.append(ref.call("DUMP", key)[:-10])
    key = P + "sfuzz"
    accepted = 0
    for _ in range(300):
        body = bytearray(rnd.choice(sources))
        for _ in range(rnd.randint(1, 3)):
            body[rnd.randrange(len(body))] = rnd.randrange(256)
        if rnd.random() < 0.3:
            body = body[: rnd.randrange(len(body) + 1)]
        data = payload(bytes(body))
        ref.call("DEL", key)
        # An existing key: a refused REPLACE leaves it as it was.
        door.call("SET", key, "before")
        got = door.call("RESTORE", key, 0, data, "REPLACE")
        assert got in ("OK", "ERR Bad data format"), got
        if got != "OK":
            assert door.call("GET", key) == b"before"
            continue
        accepted += 1
        if ref.call("RESTORE", key, 0, data) == "OK" and ref.call("TYPE", key) == "stream":
            ids = [e[0] for e in ref.call("XRANGE", key, "-", "+")]
            # (redis-server keeps a listpack's entries out of order as they come.)
            if ids == sorted(ids, key=lambda i: tuple(map(int, i.split(b"-")))):
                assert stream_snapshot(door, key) == stream_snapshot(ref, key), bytes(body).hex()
    ref.call("CONFIG", "SET", "sanitize-dump-payload", "no")
    assert accepted > 0
    assert door.call("PING") == "PONG"
    door.call("DEL", key)
    ref.call("DEL", key)


def rdb_len(n):
    """An RDB length."""
    if n < 64:
        return bytes([n])
    if n < 16384:
        return bytes([0x40 | n >> 8, n & 0xFF])
    return b"\x80" + n.to_bytes(4, "big")


def test_stream_bounds(redis_door, redis_reference):
    """A stream of 10,001 empty groups: redis-server takes it, the door refuses it whole
    (at most 10,000 groups, 1,000,000 consumers, 10,000,000 entries or pending entries)."""
    ref, door = fresh(redis_reference), fresh(redis_door)
    key = P + "bounds"
    n = 10_001
    body = b"\x13\x00" + b"\x00" * 8 + rdb_len(n)
    body += b"".join(rdb_len(len(str(i))) + str(i).encode() + b"\x00\x00\x00\x00\x00" for i in range(n))
    data = payload(body)
    for c in (ref, door):
        c.call("DEL", key)
    assert ref.call("RESTORE", key, 0, data) == "OK"
    assert len(ref.call("XINFO", "GROUPS", key)) == n
    assert door.call("RESTORE", key, 0, data) == (
        "ERR stream too large to restore: more than 10000000 entries, 10000 groups, "
        "1000000 consumers or 10000000 pending entries")
    assert door.call("EXISTS", key) == 0
    # One fewer is taken.
    body = b"\x13\x00" + b"\x00" * 8 + rdb_len(n - 1)
    body += b"".join(rdb_len(len(str(i))) + str(i).encode() + b"\x00\x00\x00\x00\x00" for i in range(n - 1))
    assert door.call("RESTORE", key, 0, payload(body)) == "OK"
    assert len(door.call("XINFO", "GROUPS", key)) == n - 1
    for c in (ref, door):
        c.call("DEL", key)


def test_a_restored_stream_wakes_a_blocked_reader(redis_door):
    key = P + "xblocked"
    door = fresh(redis_door)
    door.call("DEL", key)
    door.call("XADD", key, "7-1", "f", "v")
    data = door.call("DUMP", key)
    door.call("DEL", key)
    waiter = fresh(redis_door)
    got = {}

    def read():
        got["reply"] = waiter.call("XREAD", "BLOCK", 10000, "STREAMS", key, "$")

    t = threading.Thread(target=read)
    t.start()
    for _ in range(200):
        if b"cmd=xread" in door.call("CLIENT", "LIST"):
            break
        time.sleep(0.02)
    assert door.call("RESTORE", key, 0, data) == "OK"
    t.join(15)
    assert got["reply"] == [[key.encode(), [[b"7-1", [b"f", b"v"]]]]]
    door.call("DEL", key)

