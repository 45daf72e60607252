"""The Redis door's ZMPOP against Debian's redis-server 7.0.15: the same requests to both,
the same replies expected byte for byte, pipelined and one at a time, in RESP2 and RESP3,
error cases (arity, syntax, numkeys, count, wrong type) and a random sequence of pops.

Not yet on the door (issue 27 step 4, left for later): ZRANDMEMBER, BZPOPMIN, BZPOPMAX,
BZMPOP.
"""

import random

from redisdiff import AUTH, cmd, raw_reply, replies

K = "zpops:k"
K2 = "zpops:k2"
STR = "zpops:str"
MISSING = "zpops:missing"
RESET = cmd("DEL", K, K2, STR, MISSING)


def check(door, reference, requests):
    """The same replies, byte for byte, in RESP2 and RESP3, pipelined and one at a time."""
    for hello in (None, cmd("HELLO", "3")):
        seq = [AUTH] + ([hello] if hello else []) + requests
        for pipeline in (True, False):
            got = replies(door, seq, pipeline, read=raw_reply)
            want = replies(reference, seq, pipeline, read=raw_reply)
            for i, (req, g, w) in enumerate(zip(seq, got, want)):
                if req == hello:
                    continue
                assert g == w, f"request {i} {req!r}: manifold {g!r}, redis-server {w!r}"


def test_zmpop(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("ZMPOP", "1", MISSING, "MIN"), cmd("ZMPOP", "2", MISSING, K, "MAX", "COUNT", "3"),
        cmd("ZADD", K2, "1", "a", "2", "b", "3", "c", "-inf", "n", "+inf", "p", "1.5", "x"),
        cmd("ZMPOP", "2", MISSING, K2, "MIN"), cmd("ZMPOP", "2", K2, MISSING, "max"),
        cmd("ZMPOP", "1", K2, "MIN", "COUNT", "2"), cmd("ZMPOP", "1", K2, "MAX", "count", "100"),
        cmd("EXISTS", K2),
        cmd("SET", STR, "v"), cmd("ZADD", K, "1", "a"),
        cmd("ZMPOP", "2", STR, K, "MIN"), cmd("ZMPOP", "2", K, STR, "MIN"), cmd("ZMPOP", "2", MISSING, STR, "MAX"),
        # Errors.
        cmd("ZMPOP"), cmd("ZMPOP", "1"), cmd("ZMPOP", "1", K), cmd("ZMPOP", "0", K, "MIN"),
        cmd("ZMPOP", "-1", K, "MIN"), cmd("ZMPOP", "x", K, "MIN"), cmd("ZMPOP", "3", K, "MIN"),
        cmd("ZMPOP", "1", K, "LEFT"), cmd("ZMPOP", "1", K, "MIN", "COUNT"),
        cmd("ZMPOP", "1", K, "MIN", "COUNT", "0"), cmd("ZMPOP", "1", K, "MIN", "COUNT", "-2"),
        cmd("ZMPOP", "1", K, "MIN", "COUNT", "x"), cmd("ZMPOP", "1", K, "MIN", "COUNT", "1", "COUNT", "1"),
        cmd("ZMPOP", "1", K, "MIN", "extra"),
        RESET,
    ])


def test_zmpop_random_sequences(redis_door, redis_reference):
    rng = random.Random(27)
    requests = [RESET]
    for _ in range(150):
        r = rng.random()
        key = rng.choice([K, K2])
        if r < 0.5:
            pairs = []
            for _ in range(rng.randint(1, 4)):
                pairs += [str(rng.choice([rng.randint(-3, 3), rng.uniform(-5, 5)])), "m%d" % rng.randint(0, 12)]
            requests.append(cmd("ZADD", key, *pairs))
        elif r < 0.9:
            keys = rng.sample([K, K2, MISSING], rng.randint(1, 3))
            extra = ["COUNT", str(rng.randint(1, 5))] if rng.random() < 0.6 else []
            requests.append(cmd("ZMPOP", str(len(keys)), *keys, rng.choice(["MIN", "MAX"]), *extra))
        else:
            requests.append(cmd("ZRANGE", key, "0", "-1", "WITHSCORES"))
    requests.append(RESET)
    check(redis_door, redis_reference, requests)
