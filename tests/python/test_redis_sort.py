"""The Redis door's SORT and SORT_RO against Debian's redis-server 7.0: the same requests to
both, the same replies expected, pipelined and one at a time, RESP2 and RESP3 byte for byte.

Intended differences from redis-server (avoided or normalized here):
- `BY nosort` (a pattern without `*`) on a set: the door sorts the members ALPHA (as Redis
  does with STORE or in a script); Redis answers in its hash table's order. Compared sorted.
- Elements Redis compares equal (ALPHA with BY values equal or missing) keep the order
  they were read in: the same as Redis for lists (glibc's qsort is a merge sort), the
  door's own order for sets and sorted sets, and unspecified in Redis with BY and LIMIT
  (pqsort). The sequences make such ties only on lists without LIMIT.
"""

import random
import socket
import time

from redisdiff import AUTH, Conn, args_of, byte_for_byte, cmd, differential, read_reply, replies

P = "sort:"
L, S, Z, H, STR, DST, MISSING = (P + n for n in ("l", "s", "z", "h", "str", "dst", "missing"))
ALL = [L, S, Z, H, STR, DST, MISSING, P + "l2", P + "s2", P + "z2", P + "num"]


def weights(prefix, pairs):
    """MSET of the weight keys `prefix` + element."""
    flat = []
    for k, v in pairs:
        flat += [prefix + k, v]
    return cmd("MSET", *flat)


def reset():
    return RESET


RESET = cmd("DEL", *ALL, *(f"{P}w_{e}" for e in "abcdefgxyz123"), *(f"{P}h_{e}" for e in "abcdefgxyz123"),
            P + "fresh", P + "nope_a")


def is_set_nosort(req):
    """SORT of the set S (or s2) with BY without `*`, no STORE: its order is the set's."""
    a = [x.lower() for x in args_of(req)]
    if a[0] not in (b"sort", b"sort_ro") or a[1] not in (S.encode(), (P + "s2").encode()):
        return False
    for i, x in enumerate(a[:-1]):
        if x == b"by" and b"*" not in a[i + 1]:
            return b"store" not in a
    return False


def normalize(req, reply):
    if req == RESET:
        return None  # the door-only test leaves keys behind on the door
    if isinstance(reply, list) and is_set_nosort(req):
        return sorted(reply, key=lambda v: (v is None, v or b""))
    return reply


def check(door, reference, requests):
    for pipeline in (True, False):
        differential(door, reference, [reset(), *requests], pipeline=pipeline, normalize=normalize)


def fill():
    return [
        cmd("RPUSH", L, "3", "1", "20", "-5", "1.5", "10", "2e1", "0x10", "1"),
        cmd("SADD", S, "b", "a", "c", "10", "9", "B", "aa"),
        cmd("ZADD", Z, "3", "c", "1", "a", "2", "b", "2", "bb", "-1", "z"),
        cmd("RPUSH", P + "num", "5", "3", "8", "1", "13", "2"),
    ]


def test_sort_collections(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        *fill(),
        cmd("SORT", L), cmd("SORT", L, "DESC"), cmd("SORT", L, "ALPHA"), cmd("SORT", L, "ALPHA", "DESC"),
        cmd("SORT", L, "asc"), cmd("SORT_RO", L), cmd("SORT", P + "num", "LIMIT", "1", "3"),
        cmd("SORT", S, "ALPHA"), cmd("SORT", S, "ALPHA", "DESC"), cmd("SORT", S),
        cmd("SORT", Z), cmd("SORT", Z, "ALPHA"), cmd("SORT", Z, "ALPHA", "DESC", "LIMIT", "1", "2"),
        cmd("SORT", MISSING), cmd("SORT", MISSING, "STORE", DST), cmd("EXISTS", DST),
        cmd("SORT_RO", S, "ALPHA", "LIMIT", "0", "2"),
        # Repeated options: the last wins (DESC then ASC, LIMIT twice).
        cmd("SORT", P + "num", "DESC", "ASC", "LIMIT", "0", "1", "LIMIT", "2", "2"),
        cmd("SORT", P + "num", "alpha", "desc", "alpha"),
        # Numbers in every form strtod reads.
        cmd("DEL", L), cmd("RPUSH", L, "1e1", ".5", "5.", "-0", "0", "+3", "0x1p3", "inf", "-inf", "-Infinity", "1E-2", " 7"),
        cmd("SORT", L), cmd("SORT", L, "DESC"),
        cmd("DEL", L), cmd("RPUSH", L, "b", "a\x00z", "a\x00b", "a", "A", "\xff", "é", ""),
        cmd("SORT", L, "ALPHA"), cmd("SORT", L, "ALPHA", "DESC"),
        cmd("SORT", L, "ALPHA", "STORE", DST), cmd("LRANGE", DST, "0", "-1"),
    ])


def test_sort_limit(redis_door, redis_reference):
    reqs = [*fill()]
    for start, count in [("0", "0"), ("0", "-1"), ("-5", "2"), ("2", "-10"), ("5", "100"), ("6", "1"),
                         ("100", "1"), ("-1", "-1"), ("9223372036854775807", "9223372036854775807"),
                         ("-9223372036854775808", "3"), ("3", "0")]:
        for k in (P + "num", S, Z):
            reqs.append(cmd("SORT", k, "LIMIT", start, count, "ALPHA"))
            if k != S:  # a set's own order is not the door's (module docstring)
                reqs.append(cmd("SORT", k, "LIMIT", start, count, "BY", "nosort"))
                reqs.append(cmd("SORT", k, "LIMIT", start, count, "BY", "nosort", "DESC"))
            reqs.append(cmd("SORT", k, "LIMIT", start, count, "BY", f"{P}w_*", "DESC"))
    reqs.append(cmd("SORT", MISSING, "LIMIT", "0", "1", "BY", "x"))
    check(redis_door, redis_reference, reqs)


def test_sort_by_and_get(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        cmd("RPUSH", L, "a", "b", "c", "d", "e", "x"),
        cmd("SADD", S, "a", "b", "c", "d"),
        cmd("ZADD", Z, "4", "a", "3", "b", "2", "c", "1", "d"),
        weights(P + "w_", [("a", "3"), ("b", "1"), ("c", "2"), ("d", "-1"), ("e", "1")]),
        cmd("HSET", P + "h_a", "f", "z", "n", "10"), cmd("HSET", P + "h_b", "f", "y", "n", "2"),
        cmd("HSET", P + "h_c", "f", "x"), cmd("SET", P + "h_d", "str"),
        cmd("RPUSH", P + "w_x", "notastring"),
        # Numeric BY: missing weights count 0; ties broken by the elements.
        cmd("SORT", L, "BY", P + "w_*"), cmd("SORT", L, "BY", P + "w_*", "DESC"),
        cmd("SORT", S, "BY", P + "w_*"), cmd("SORT", Z, "BY", P + "w_*", "DESC"),
        cmd("SORT", L, "BY", P + "h_*->n"), cmd("SORT", S, "BY", P + "h_*->n", "DESC"),
        # ALPHA BY (missing values first).
        cmd("SORT", L, "BY", P + "h_*->f", "ALPHA"), cmd("SORT", L, "BY", P + "h_*->f", "ALPHA", "DESC"),
        cmd("SORT", S, "BY", P + "h_*->f", "ALPHA", "LIMIT", "0", "3"),
        # GET: strings, hash fields, the element, missing keys, constants.
        cmd("SORT", L, "BY", P + "w_*", "GET", "#", "GET", P + "w_*", "GET", P + "h_*->f", "GET", "nostar"),
        cmd("SORT", S, "ALPHA", "GET", P + "h_*->n", "GET", P + "h_*->missing", "GET", P + "h_*->"),
        cmd("SORT", Z, "BY", "nosort", "GET", "#", "GET", P + "w_*"),
        cmd("SORT", Z, "BY", "nosort", "DESC", "LIMIT", "1", "2", "GET", "#"),
        cmd("SORT", L, "BY", "nosort", "DESC", "LIMIT", "1", "3"),
        cmd("SORT", L, "BY", "nosort", "GET", P + "w_*", "GET", "#"),
        cmd("SORT", S, "BY", "nosort", "GET", "#"),
        # `->` forms: field at the end only, `->` before the `*`, two arrows.
        cmd("SORT", L, "ALPHA", "GET", P + "h_*->f->g"), cmd("SORT", L, "ALPHA", "GET", "->" + P + "h_*"),
        cmd("SORT", L, "ALPHA", "GET", P + "h_*-"), cmd("SORT", L, "ALPHA", "GET", "*"),
        cmd("SORT", L, "ALPHA", "GET", "**"), cmd("SORT", L, "ALPHA", "GET", P + "w_*\x00zz"),
        cmd("SORT", L, "ALPHA", "GET", "#\x00"), cmd("SORT", L, "BY", "no\x00*"),
        # The key itself (and a GET of the list key) through a pattern.
        cmd("SORT", L, "ALPHA", "GET", P + "*"),
        # A BY value that is no number.
        cmd("SET", P + "w_e", "x1"), cmd("SORT", L, "BY", P + "w_*"), cmd("SORT", L, "BY", P + "w_*", "ALPHA"),
        cmd("SET", P + "w_e", ""), cmd("SORT", L, "BY", P + "w_*"),
        cmd("SET", P + "w_e", "1\x00x"), cmd("SORT", L, "BY", P + "w_*"),
    ])


def test_sort_weights_parsed_as_redis(redis_door, redis_reference):
    reqs = [cmd("RPUSH", L, "a", "b")]
    # The range errors last: Redis does not clear errno before its strtod, so once one set
    # ERANGE every later weight of the connection's burst is refused too (until some other
    # call sets errno: a new connection's accept does).
    for w in ["1", " 1", "1 ", "", "inf", "-inf", "nan", "0x10", "0x", "1e", "+", ".", "1\x00", "\t2",
              "Infinity", "infinit", "nan(1)", "2.2250738585072014e-308", "1e400", "-1e400", "1e-400", "1e-310"]:
        reqs += [cmd("SET", P + "w_a", w), cmd("SORT", L, "BY", P + "w_*")]
        reqs += [cmd("DEL", P + "num"), cmd("RPUSH", P + "num", w, "0"), cmd("SORT", P + "num")]
    check(redis_door, redis_reference, reqs)


def test_sort_errors(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        *fill(),
        cmd("SET", STR, "v"), cmd("HSET", H, "f", "v"),
        cmd("SORT", STR), cmd("SORT", H, "ALPHA"), cmd("SORT_RO", STR), cmd("SORT", STR, "STORE", DST),
        cmd("SORT"), cmd("SORT_RO"),
        cmd("SORT", L, "BOGUS"), cmd("SORT", L, "LIMIT"), cmd("SORT", L, "LIMIT", "1"),
        cmd("SORT", L, "LIMIT", "x", "1"), cmd("SORT", L, "LIMIT", "1", "1.5"), cmd("SORT", STR, "LIMIT", "a", "b"),
        cmd("SORT", L, "BY"), cmd("SORT", L, "GET"), cmd("SORT", L, "STORE"),
        cmd("SORT_RO", L, "STORE", DST), cmd("SORT", STR, "BOGUS"),
        cmd("SORT", S), cmd("SORT", S, "STORE", DST), cmd("EXISTS", DST), cmd("SORT", Z, "GET", "#"),
        cmd("SORT", L, "LIMIT", "0", "1", "BOGUS"),
    ])


def test_sort_store(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        *fill(),
        cmd("SORT", P + "num", "STORE", DST), cmd("TYPE", DST), cmd("LRANGE", DST, "0", "-1"),
        # Over another type, with a TTL: replaced by a list without TTL.
        cmd("SET", DST, "x", "EX", "100"), cmd("SORT", S, "ALPHA", "STORE", DST, "DESC"),
        cmd("TTL", DST), cmd("LRANGE", DST, "0", "-1"),
        cmd("HSET", P + "h_a", "f", "1"), weights(P + "w_", [("b", "2")]),
        cmd("SORT", S, "ALPHA", "GET", "#", "GET", P + "w_*", "GET", P + "h_*->f", "STORE", DST),
        cmd("LRANGE", DST, "0", "-1"), cmd("LLEN", DST),
        # nosort on a set with STORE sorts ALPHA (as Redis).
        cmd("SORT", S, "BY", "nosort", "STORE", DST), cmd("LRANGE", DST, "0", "-1"),
        cmd("SORT", Z, "BY", "nosort", "DESC", "STORE", DST, "LIMIT", "1", "2"), cmd("LRANGE", DST, "0", "-1"),
        # Empty: the destination is deleted.
        cmd("SORT", MISSING, "STORE", DST), cmd("EXISTS", DST),
        cmd("SET", DST, "x"), cmd("SORT", P + "num", "LIMIT", "0", "0", "STORE", DST), cmd("EXISTS", DST),
        # Onto itself.
        cmd("SORT", P + "num", "STORE", P + "num"), cmd("LRANGE", P + "num", "0", "-1"),
        cmd("SORT", P + "num", "DESC", "STORE", P + "num", "STORE", DST), cmd("LRANGE", DST, "0", "-1"),
        # A weight error stores nothing.
        cmd("RPUSH", L, "x"), cmd("SORT", L, "STORE", P + "fresh"), cmd("EXISTS", P + "fresh"),
    ])


def test_sort_in_multi_and_scripts(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        *fill(),
        cmd("MULTI"), cmd("SORT", P + "num"), cmd("SORT", P + "num", "STORE", DST), cmd("LLEN", DST),
        cmd("SORT_RO", S, "ALPHA"), cmd("SORT", STR), cmd("EXEC"),
        cmd("MULTI"), cmd("SORT_RO", L, "STORE", DST), cmd("EXEC"),
        cmd("EVAL", f"return redis.call('SORT', '{P}num', 'DESC', 'STORE', KEYS[1])", "1", DST),
        cmd("EVAL", "return redis.call('SORT', KEYS[1], 'ALPHA')", "1", S),
        # In a script nosort on a set sorts ALPHA in Redis too.
        cmd("EVAL", "return redis.call('SORT', KEYS[1], 'BY', 'nosort')", "1", S),
        cmd("EVAL_RO", "return redis.call('SORT_RO', KEYS[1])", "1", P + "num"),
        cmd("EVAL_RO", "return redis.call('SORT', KEYS[1])", "1", P + "num"),
        cmd("EVAL", "return redis.pcall('SORT', KEYS[1])", "1", L),
        cmd("LRANGE", DST, "0", "-1"),
    ])


def test_sort_resp3_byte_for_byte(redis_door, redis_reference):
    byte_for_byte(redis_door, redis_reference, [
        reset(), *fill(), cmd("HSET", P + "h_a", "f", "1"),
        cmd("SORT", P + "num"), cmd("SORT", S, "ALPHA", "GET", "#", "GET", P + "h_*->f"),
        cmd("SORT", L, "STORE", DST), cmd("SORT", STR), cmd("SORT", MISSING), cmd("SORT_RO", Z, "BY", "nosort"),
        cmd("SORT", L, "BY", "x"), cmd("SORT", L, "LIMIT", "a", "1"), cmd("SORT", L, "BY", "nosort", "STORE", DST),
    ])


def test_sort_store_wakes_blocked_client_and_notifies(redis_door):
    sub = Conn(redis_door)
    sub.send(AUTH)
    assert read_reply(sub.f) == "OK"
    waiter = Conn(redis_door)
    waiter.send(AUTH)
    assert read_reply(waiter.f) == "OK"
    c = Conn(redis_door)
    c.send(AUTH)
    assert read_reply(c.f) == "OK"
    c.send(cmd("CONFIG", "SET", "notify-keyspace-events", "KEA"))
    assert read_reply(c.f) == "OK"
    try:
        c.send(reset())
        read_reply(c.f)
        sub.send(cmd("PSUBSCRIBE", f"__keyspace@0__:{P}*"))
        read_reply(sub.f)
        waiter.send(cmd("BLPOP", DST, "0"))
        # The waiter is registered once the door reports it blocked (no other test of this
        # file blocks a client).
        deadline = time.time() + 10
        while b"blocked_clients:1" not in c.call("INFO", "clients"):
            assert time.time() < deadline
            time.sleep(0.02)
        c.send(cmd("RPUSH", P + "num", "3", "1", "2"))
        assert read_reply(c.f) == 3
        c.send(cmd("SORT", P + "num", "STORE", DST))
        assert read_reply(c.f) == 3
        assert read_reply(waiter.f) == [DST.encode(), b"1"]
        seen = []
        while b"sortstore" not in seen:
            msg = read_reply(sub.f)
            seen.append(msg[3])
        assert seen[-1] == b"sortstore"
        # An empty result deletes the destination: `del`.
        c.send(cmd("SORT", MISSING, "STORE", DST))
        assert read_reply(c.f) == 0
        while True:
            msg = read_reply(sub.f)
            if msg[2] == f"__keyspace@0__:{DST}".encode() and msg[3] == b"del":
                break
    finally:
        c.send(cmd("CONFIG", "SET", "notify-keyspace-events", ""))
        read_reply(c.f)
        for x in (sub, waiter, c):
            x.close()


def random_requests(rng, n):
    elems = ["a", "b", "c", "1", "2", "10", "-3", "1.5", "x", "B", "e"]
    out = []
    for _ in range(n):
        r = rng.random()
        k = rng.choice([L, P + "l2", S, Z, P + "num", MISSING, STR])
        if r < 0.12:
            out.append(cmd("RPUSH", rng.choice([L, P + "l2"]), *rng.sample(elems, rng.randint(1, 4))))
        elif r < 0.2:
            out.append(cmd("SADD", S, *rng.sample(elems, rng.randint(1, 4))))
        elif r < 0.28:
            e = rng.sample(elems, rng.randint(1, 3))
            flat = []
            for x in e:
                flat += [str(rng.randint(-3, 3)), x]
            out.append(cmd("ZADD", Z, *flat))
        elif r < 0.34:
            out.append(cmd("RPUSH", P + "num", *[str(rng.randint(-20, 20)) for _ in range(rng.randint(1, 4))]))
        elif r < 0.42:
            e = rng.choice(elems)
            # Distinct weights per element (ties only where elements break them).
            out.append(cmd("SET", P + "w_" + e, str(elems.index(e) * rng.choice([1, -1, 2]))))
        elif r < 0.47:
            e = rng.choice(elems)
            out.append(cmd("HSET", P + "h_" + e, "f", e + "!", "n", str(elems.index(e))))
        elif r < 0.5:
            out.append(cmd("DEL", rng.choice([L, S, Z, P + "w_" + rng.choice(elems)])))
        else:
            args = [k]
            listy = k in (L, P + "l2", P + "num", MISSING)
            if rng.random() < 0.3:
                args += ["BY", rng.choice([P + "w_*", P + "h_*->n", "nosort"] + ([P + "h_*->f"] if listy else []))]
            elif rng.random() < 0.4 and k != P + "num":
                args += ["ALPHA"]
            if rng.random() < 0.3 and not (k == S and "nosort" in args):
                args += ["LIMIT", str(rng.randint(-2, 5)), str(rng.randint(-2, 5))]
            for _ in range(rng.choice([0, 0, 1, 2])):
                args += ["GET", rng.choice(["#", P + "w_*", P + "h_*->f", P + "nope_*"])]
            if rng.random() < 0.4:
                args += ["DESC"]
            if "BY" in args and args[args.index("BY") + 1] == P + "h_*->f":
                args += ["ALPHA"]
                if "LIMIT" in args:
                    i = args.index("LIMIT")
                    del args[i:i + 3]
            if rng.random() < 0.2:
                args += ["STORE", DST]
                out += [cmd("SORT", *args), cmd("LRANGE", DST, "0", "-1")]
            else:
                out.append(cmd(rng.choice(["SORT", "SORT_RO"]), *args))
    return out


def test_sort_random_sequences(redis_door, redis_reference):
    rng = random.Random(2718)
    for _ in range(6):
        reqs = random_requests(rng, 150)
        check(redis_door, redis_reference, reqs)


def test_what_a_sort_holds_is_bounded_by_proto_max_bulk_len(topology, tmp_path):
    """With proto_max_bulk_len = 1 MiB, a SORT that would hold more (its elements, then the
    list it stores) is refused with the door's error; a range read without sorting is not."""
    from conftest import configured  # noqa: PLC0415
    from redisdiff import Err, free_port, wait_port  # noqa: PLC0415

    port = free_port()
    m = configured(topology, tmp_path,
                   f'[redis]\nlisten = "127.0.0.1:{port}"\nproto_max_bulk_len = 1048576\n', "redis-sort-bound")
    too_large = "ERR manifold: SORT needs more memory than proto-max-bulk-len allows"
    try:
        wait_port(port, m.proc, "manifold's Redis door")
        c = Conn(port)
        c.send(AUTH)
        assert read_reply(c.f) == "OK"
        big = P + "big"
        c.call("DEL", big, DST)
        values = [f"{i:02d}" + "x" * 60_000 for i in range(20)]
        for v in values:
            c.call("RPUSH", big, v)
        err = c.call("SORT", big, "ALPHA")
        assert err == Err(too_large), err
        # Not sorted: only the LIMIT range is read.
        got = c.call("SORT", big, "BY", "nosort", "LIMIT", "18", "2")
        assert got == [v.encode() for v in values[18:]]
        c.call("LTRIM", big, "0", "9")
        assert c.call("SORT", big, "ALPHA", "DESC") == [v.encode() for v in reversed(values[:10])]
        # The elements fit, the elements and the stored list do not.
        err = c.call("SORT", big, "ALPHA", "STORE", DST)
        assert err == Err(too_large), err
        assert c.call("EXISTS", DST) == 0
        assert c.call("SORT", big, "ALPHA", "LIMIT", "0", "3", "STORE", DST) == 3
        c.call("DEL", big, DST)
        c.close()
    finally:
        m.stop_and_check()
