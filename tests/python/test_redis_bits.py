"""The Redis door's bitmaps (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP) against Debian's
redis-server 7.0.15: the same requests to both, the same replies expected byte for byte,
pipelined and one at a time, RESP2 and RESP3, error cases (arity, offsets, bits, ranges,
syntax, wrong type) and a random sequence whose values are read back with GET.

Intended differences from redis-server (not exercised here): a value as large as an offset
near 2^32 bits (512 MiB) is built in manifold's memory and then refused by the backend's
max_allowed_packet, where redis-server stores it.
"""

import random

from redisdiff import cmd, differential

P = "bits:"
A, B, C, D, L, MISSING = (P + s for s in ("a", "b", "c", "d", "l", "missing"))
RESET = cmd("DEL", A, B, C, D, L, MISSING)
HELLO3 = cmd("HELLO", "3")


def no_hello(req, reply):
    """HELLO's reply carries the connection id, which differs."""
    return None if req == HELLO3 else reply


def check(door, reference, requests):
    for pipeline in (True, False):
        differential(door, reference, requests, pipeline=pipeline)
        differential(door, reference, [HELLO3, *requests], pipeline=pipeline, normalize=no_hello)


def test_setbit_getbit(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("SETBIT", A, "7", "1"), cmd("GET", A), cmd("SETBIT", A, "7", "1"), cmd("SETBIT", A, "7", "0"),
        cmd("GET", A), cmd("SETBIT", A, "100", "1"), cmd("GET", A), cmd("STRLEN", A),
        cmd("SETBIT", B, "0", "0"), cmd("GET", B), cmd("EXISTS", B),
        cmd("GETBIT", A, "100"), cmd("GETBIT", A, "99"), cmd("GETBIT", A, "100000"), cmd("GETBIT", MISSING, "3"),
        cmd("SET", C, "42"), cmd("GETBIT", C, "2"), cmd("GETBIT", C, "3"), cmd("SETBIT", C, "15", "1"), cmd("GET", C),
        cmd("SET", D, "x", "EX", "1000"), cmd("SETBIT", D, "3", "1"), cmd("TTL", D), cmd("GET", D),
        # errors, in Redis's order
        cmd("SETBIT", A, "-1", "1"), cmd("SETBIT", A, "x", "1"), cmd("SETBIT", A, "4294967296", "1"),
        cmd("SETBIT", A, "1", "2"), cmd("SETBIT", A, "1", "-1"), cmd("SETBIT", A, "1", "x"),
        cmd("SETBIT", A, "x", "x"), cmd("GETBIT", A, "-1"), cmd("GETBIT", A, "4294967296"), cmd("GETBIT", A, "1.5"),
        cmd("RPUSH", L, "x"), cmd("SETBIT", L, "1", "1"), cmd("GETBIT", L, "1"), cmd("SETBIT", L, "-1", "1"),
        cmd("SETBIT", A, "1"), cmd("GETBIT", A), cmd("SETBIT", A, "1", "1", "1"), cmd("GETBIT", A, "1", "2"),
    ])


def test_bitcount(redis_door, redis_reference):
    ranges = [("0", "-1"), ("1", "1"), ("-2", "-1"), ("-1", "-2"), ("5", "2"), ("-100", "100"), ("3", "-5"),
              ("0", "0"), ("100", "200"), ("-1", "-1")]
    requests = [RESET, cmd("SET", A, "foobar"), cmd("BITCOUNT", A), cmd("SET", B, ""), cmd("BITCOUNT", B),
                cmd("BITCOUNT", MISSING), cmd("BITCOUNT", MISSING, "0", "1")]
    for s, e in ranges:
        requests += [cmd("BITCOUNT", A, s, e), cmd("BITCOUNT", A, s, e, "BYTE"), cmd("BITCOUNT", A, s, e, "bit"),
                     cmd("BITCOUNT", B, s, e, "BIT")]
    requests += [cmd("BITCOUNT", A, "5", "30", "BIT"), cmd("BITCOUNT", A, "-13", "-3", "BIT"),
                 cmd("BITCOUNT", A, "7", "7", "BIT"), cmd("BITCOUNT", A, "9", "14", "BIT")]
    requests += [
        cmd("BITCOUNT", A, "0"), cmd("BITCOUNT", A, "x", "1"), cmd("BITCOUNT", A, "0", "y"),
        cmd("BITCOUNT", A, "0", "1", "bits"), cmd("BITCOUNT", A, "0", "1", "BIT", "x"),
        cmd("BITCOUNT", MISSING, "0"), cmd("BITCOUNT", MISSING, "0", "1", "nope"),
        cmd("RPUSH", L, "x"), cmd("BITCOUNT", L), cmd("BITCOUNT", L, "x"), cmd("BITCOUNT"),
    ]
    check(redis_door, redis_reference, requests)


def test_bitpos(redis_door, redis_reference):
    requests = [RESET, cmd("SET", A, b"\xff\xf0\x00"), cmd("SET", B, b"\x00\x00\x00"), cmd("SET", C, b"\xff\xff\xff"),
                cmd("SET", D, "")]
    for k in (A, B, C, D, MISSING):
        for bit in ("0", "1"):
            requests += [cmd("BITPOS", k, bit), cmd("BITPOS", k, bit, "1"), cmd("BITPOS", k, bit, "-1"),
                         cmd("BITPOS", k, bit, "0", "1"), cmd("BITPOS", k, bit, "1", "-1"),
                         cmd("BITPOS", k, bit, "2", "1"), cmd("BITPOS", k, bit, "0", "-1", "BYTE"),
                         cmd("BITPOS", k, bit, "5", "17", "BIT"), cmd("BITPOS", k, bit, "7", "7", "bit"),
                         cmd("BITPOS", k, bit, "-10", "-2", "BIT"), cmd("BITPOS", k, bit, "12", "-1", "BIT"),
                         cmd("BITPOS", k, bit, "100"), cmd("BITPOS", k, bit, "0", "100", "BIT")]
    requests += [
        cmd("BITPOS", A, "2"), cmd("BITPOS", A, "x"), cmd("BITPOS", A, "-1"), cmd("BITPOS", MISSING, "2"),
        cmd("BITPOS", A, "1", "x"), cmd("BITPOS", A, "1", "0", "y"), cmd("BITPOS", A, "1", "0", "1", "bits"),
        cmd("BITPOS", A, "1", "0", "x", "bits"), cmd("BITPOS", A, "1", "0", "1", "BIT", "extra"),
        cmd("BITPOS", MISSING, "1", "x"), cmd("RPUSH", L, "x"), cmd("BITPOS", L, "1"), cmd("BITPOS", L, "3"),
        cmd("BITPOS", A), cmd("BITPOS"),
    ]
    check(redis_door, redis_reference, requests)


def test_bitop(redis_door, redis_reference):
    requests = [RESET, cmd("SET", A, "foobar"), cmd("SET", B, "abcdef"), cmd("SET", C, "x")]
    for op in ("AND", "or", "Xor"):
        requests += [cmd("BITOP", op, D, A, B), cmd("GET", D), cmd("BITOP", op, D, A, C, MISSING), cmd("GET", D),
                     cmd("BITOP", op, D, A), cmd("GET", D)]
    requests += [
        cmd("BITOP", "NOT", D, A), cmd("GET", D), cmd("BITOP", "not", D, MISSING), cmd("EXISTS", D),
        cmd("SET", D, "old", "EX", "100"), cmd("BITOP", "OR", D, C), cmd("TTL", D), cmd("GET", D),
        cmd("RPUSH", L, "x"), cmd("BITOP", "AND", L, A), cmd("TYPE", L), cmd("GET", L),
        cmd("BITOP", "OR", D, MISSING, MISSING), cmd("EXISTS", D),
        cmd("BITOP", "AND", A, A, B), cmd("GET", A),
        # errors, in Redis's order
        cmd("BITOP", "NAND", D, A), cmd("BITOP", "NOT", D, A, B), cmd("BITOP", "NOT", D, L),
        cmd("BITOP", "AND", D, A, L), cmd("BITOP", "AND", D), cmd("BITOP", "NOT"), cmd("BITOP", "bogus", D),
    ]
    check(redis_door, redis_reference, requests)


def test_bits_random(redis_door, redis_reference):
    rng = random.Random(2711)
    keys = [A, B, C]
    requests = [RESET]
    for _ in range(400):
        k = rng.choice(keys)
        r = rng.random()
        if r < 0.35:
            requests.append(cmd("SETBIT", k, rng.randrange(0, 200), rng.randrange(0, 2)))
        elif r < 0.45:
            requests.append(cmd("GETBIT", k, rng.randrange(0, 220)))
        elif r < 0.6:
            requests.append(cmd("BITCOUNT", k, rng.randrange(-30, 30), rng.randrange(-30, 30),
                                rng.choice(["BYTE", "BIT"])))
        elif r < 0.8:
            args = [rng.randrange(-40, 40) for _ in range(rng.randrange(0, 3))]
            if len(args) == 2:
                args.append(rng.choice(["BYTE", "BIT"]))
            requests.append(cmd("BITPOS", k, rng.randrange(0, 2), *args))
        elif r < 0.9:
            requests.append(cmd("BITOP", rng.choice(["AND", "OR", "XOR"]), rng.choice(keys), *rng.sample(keys, 2)))
        else:
            requests.append(cmd("GET", k))
    for pipeline in (True, False):
        differential(redis_door, redis_reference, requests, pipeline=pipeline)


def test_values_grow_only_to_proto_max_bulk_len(redis_door):
    """A bit offset or SETRANGE reaching past the door's proto-max-bulk-len (64 MiB by
    default; Redis's is 512 MiB) is refused as redis-server refuses one past its own, so no
    request builds a value larger than that in manifold's memory."""
    from conftest import PASSWORD, USER  # noqa: PLC0415
    from redisdiff import Conn  # noqa: PLC0415
    c = Conn(redis_door)
    c.call("AUTH", USER, PASSWORD)
    limit = int(c.call("CONFIG", "GET", "proto-max-bulk-len")[1])
    assert limit == 64 << 20
    assert c.call("SETBIT", P + "big", str(limit * 8), "1") == "ERR bit offset is not an integer or out of range"
    assert c.call("SETRANGE", P + "big", str(limit), "x") == \
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    assert c.call("GETBIT", P + "big", str(limit * 8 - 1)) == 0
    assert c.call("EXISTS", P + "big") == 0
    c.close()


def test_bitfield(redis_door, redis_reference):
    requests = [RESET,
                cmd("BITFIELD", A, "SET", "i8", "0", "100", "GET", "i8", "0", "INCRBY", "i8", "0", "100",
                    "OVERFLOW", "SAT", "INCRBY", "i8", "0", "100", "OVERFLOW", "FAIL", "INCRBY", "i8", "0", "1"),
                cmd("GET", A),
                cmd("BITFIELD", A, "SET", "u5", "#3", "31", "INCRBY", "u5", "#3", "3", "GET", "u5", "#3",
                    "OVERFLOW", "SAT", "INCRBY", "u5", "#3", "-40", "SET", "u63", "1", "-1", "GET", "u63", "1"),
                cmd("GET", A),
                cmd("BITFIELD", A, "SET", "i64", "7", "-9223372036854775808", "INCRBY", "i64", "7", "-1",
                    "OVERFLOW", "SAT", "INCRBY", "i64", "7", "-1", "OVERFLOW", "FAIL", "SET", "i4", "0", "9",
                    "SET", "i4", "0", "-9", "SET", "u4", "0", "16", "GET", "i4", "0"),
                cmd("GET", A),
                cmd("BITFIELD", B, "OVERFLOW", "FAIL", "INCRBY", "u8", "100", "300"), cmd("GET", B), cmd("STRLEN", B),
                cmd("BITFIELD", C, "GET", "u8", "0"), cmd("EXISTS", C), cmd("BITFIELD", C), cmd("EXISTS", C),
                cmd("BITFIELD_RO", A, "GET", "i16", "3", "OVERFLOW", "WRAP", "GET", "u1", "#9"),
                cmd("BITFIELD_RO", MISSING, "GET", "u63", "#1000"),
                cmd("SET", D, "x", "EX", "100"), cmd("BITFIELD", D, "SET", "u8", "0", "65"), cmd("TTL", D), cmd("GET", D),
                # errors, in Redis's order
                cmd("BITFIELD", A, "GET", "u64", "0"), cmd("BITFIELD", A, "GET", "I8", "0"),
                cmd("BITFIELD", A, "GET", "i65", "0"), cmd("BITFIELD", A, "GET", "u8", "-1"),
                cmd("BITFIELD", A, "GET", "u8", "#-1"), cmd("BITFIELD", A, "SET", "u8", "0", "x"),
                cmd("BITFIELD", A, "OVERFLOW", "bogus", "GET", "u8", "0"), cmd("BITFIELD", A, "GET", "u8"),
                cmd("BITFIELD", A, "SET", "u8", "0"), cmd("BITFIELD", A, "bogus", "u8", "0"),
                cmd("BITFIELD_RO", A, "SET", "u8", "0", "1"), cmd("BITFIELD_RO", A, "GET", "u8", "0", "INCRBY", "u8", "0", "1"),
                cmd("RPUSH", L, "x"), cmd("BITFIELD", L, "GET", "u8", "0"), cmd("BITFIELD_RO", L, "GET", "u8", "0"),
                cmd("BITFIELD", L, "GET", "u99", "0"), cmd("BITFIELD"), cmd("BITFIELD_RO")]
    check(redis_door, redis_reference, requests)


def test_bitfield_random(redis_door, redis_reference):
    rng = random.Random(91)
    requests = [RESET]
    for _ in range(300):
        ops = []
        for _ in range(rng.randrange(1, 4)):
            kind = rng.choice(["GET", "SET", "INCRBY", "OVERFLOW"])
            if kind == "OVERFLOW":
                ops += ["OVERFLOW", rng.choice(["WRAP", "SAT", "FAIL"])]
                continue
            signed = rng.random() < 0.5
            bits = rng.randrange(1, 65 if signed else 64)
            t = ("i" if signed else "u") + str(bits)
            off = rng.choice([str(rng.randrange(0, 100)), "#" + str(rng.randrange(0, 5))])
            ops += [kind, t, off]
            if kind != "GET":
                ops.append(str(rng.randrange(-(1 << 63), 1 << 63) if rng.random() < 0.3 else rng.randrange(-300, 300)))
        requests.append(cmd("BITFIELD", rng.choice([A, B]), *ops))
        if rng.random() < 0.2:
            requests.append(cmd("GET", rng.choice([A, B])))
    for pipeline in (True, False):
        differential(redis_door, redis_reference, requests, pipeline=pipeline)


def test_bitop_holds_one_source_at_a_time(topology):
    """BITOP naming one 4 MiB key 150 times holds the result and one source, not 150 copies
    (600 MiB): the door's peak memory stays far below that, and the answer is Redis's (an
    even number of XORs of a value is zeros)."""
    from conftest import PASSWORD, USER  # noqa: PLC0415
    from redisdiff import Conn, launch_door  # noqa: PLC0415
    m = launch_door(topology, log_name="redis-bitop-memory")
    try:
        c = Conn(m.redis_port)
        c.sock.settimeout(120)
        c.call("AUTH", USER, PASSWORD)
        big = P + "bitop-big"
        c.call("SET", big, b"\xa5" * (4 << 20))
        assert c.call("BITOP", "XOR", P + "bitop-dst", *[big] * 150) == 4 << 20
        assert c.call("BITCOUNT", P + "bitop-dst") == 0
        assert c.call("BITOP", "OR", P + "bitop-dst", *[big] * 150) == 4 << 20
        assert c.call("BITCOUNT", P + "bitop-dst") == (4 << 20) * 4  # 0xa5 has four bits set
        with open(f"/proc/{m.proc.pid}/status") as f:
            peak_kib = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
        assert peak_kib < 300 * 1024, f"peak {peak_kib} KiB"
        c.call("DEL", big, P + "bitop-dst")
        c.close()
    finally:
        m.stop_and_check()
