"""The Redis door's geo commands (GEOADD, GEOPOS, GEODIST, GEOHASH) against Debian's
redis-server 7.0: the same requests to both, the same replies expected (RESP2 and RESP3
bytes), pipelined and one at a time. Points are members of a sorted set scored by their
52-bit geohash, so ZSCORE/ZRANGE are compared too. The searches are in
test_redis_geo_search.py.
"""

import random

from redisdiff import AUTH, cmd, differential, raw_reply, replies

P = "geo:"
G, G2, STR, MISSING = (P + n for n in ("g", "g2", "str", "missing"))
RESET = cmd("DEL", G, G2, STR, MISSING)


def check(door, reference, requests):
    for pipeline in (True, False):
        differential(door, reference, requests, pipeline=pipeline)
    for hello in (None, cmd("HELLO", "3")):
        reqs = [AUTH] + ([hello] if hello else []) + requests
        got = replies(door, reqs, True, read=raw_reply)
        want = replies(reference, reqs, True, read=raw_reply)
        for i, (req, g, w) in enumerate(zip(reqs, got, want)):
            if req != hello:
                assert g == w, f"request {i} {req!r}: manifold {g!r}, redis-server {w!r}"


def test_geoadd_pos_dist_hash(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        RESET,
        cmd("GEOADD", G, "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"),
        cmd("ZSCORE", G, "Palermo"), cmd("ZRANGE", G, "0", "-1", "WITHSCORES"),
        cmd("GEOPOS", G, "Palermo", "nope", "Catania"), cmd("GEOPOS", MISSING, "a", "b"),
        cmd("GEODIST", G, "Palermo", "Catania"), cmd("GEODIST", G, "Palermo", "Catania", "km"),
        cmd("GEODIST", G, "Palermo", "Catania", "MI"), cmd("GEODIST", G, "Palermo", "Catania", "ft"),
        cmd("GEODIST", G, "Palermo", "nope"), cmd("GEODIST", MISSING, "a", "b"),
        cmd("GEOHASH", G, "Palermo", "Catania", "nope"), cmd("GEOHASH", MISSING, "a"),
        # Edges: poles of Web Mercator, the antimeridian, zero.
        cmd("GEOADD", G, "180", "85.05112878", "ne", "-180", "-85.05112878", "sw", "0", "0", "zero",
            "179.9999", "0", "east", "-179.9999", "0", "west"),
        cmd("GEOPOS", G, "ne", "sw", "zero", "east", "west"), cmd("GEOHASH", G, "ne", "sw", "zero", "east"),
        cmd("GEODIST", G, "east", "west"), cmd("GEODIST", G, "ne", "sw", "km"), cmd("GEODIST", G, "zero", "zero"),
        cmd("ZRANGE", G, "0", "-1", "WITHSCORES"),
        # Options.
        cmd("GEOADD", G, "NX", "1", "1", "Palermo", "2", "2", "new"), cmd("GEOADD", G, "XX", "CH", "3", "3", "new", "4", "4", "other"),
        cmd("GEOADD", G, "CH", "3", "3", "new"), cmd("GEOADD", G, "ch", "xx", "5", "5", "new"), cmd("GEOPOS", G, "new", "other"),
        # Errors.
        cmd("GEOADD", G, "1", "2"), cmd("GEOADD", G, "x", "2", "m"), cmd("GEOADD", G, "1", "y", "m"),
        cmd("GEOADD", G, "200", "2", "m"), cmd("GEOADD", G, "1", "86", "m"), cmd("GEOADD", G, "-180.5", "-86", "m"),
        cmd("GEOADD", G, "inf", "2", "m"), cmd("GEOADD", G, "NX", "XX", "1", "2", "m"), cmd("GEOADD", G, "CH", "1", "2"), cmd("GEOADD", G, "CH", "CH", "CH"), cmd("GEOADD", STR, "NX", "CH", "XX"),
        cmd("GEOADD", G, "1", "2", "m", "1", "2"), cmd("GEODIST", G, "a", "b", "yards"), cmd("GEODIST", G, "a", "b", "m", "x"),
        cmd("GEODIST", G, "a"), cmd("GEOPOS"), cmd("GEOHASH"),
        cmd("SET", STR, "x"), cmd("GEOADD", STR, "1", "2", "m"), cmd("GEOPOS", STR, "m"),
        cmd("GEODIST", STR, "a", "b"), cmd("GEOHASH", STR, "m"), cmd("GEODIST", STR, "a", "b", "yards"),
    ])


def test_random_points(redis_door, redis_reference):
    rng = random.Random(7)
    reqs = [RESET]
    names = [f"p{i}" for i in range(40)]
    for _ in range(6):
        args = []
        for n in rng.sample(names, 10):
            lon = rng.choice([rng.uniform(-180, 180), 180, -180, rng.uniform(179, 180)])
            lat = rng.choice([rng.uniform(-85.05112878, 85.05112878), 85.05112878, -85.05112878, 0])
            args += [f"{lon:.6f}", f"{lat:.6f}", n]
        reqs.append(cmd("GEOADD", G2, *args))
        reqs.append(cmd("GEOPOS", G2, *rng.sample(names, 8)))
        reqs.append(cmd("GEOHASH", G2, *rng.sample(names, 8)))
        for _ in range(5):
            a, b = rng.sample(names, 2)
            reqs.append(cmd("GEODIST", G2, a, b, rng.choice(["m", "km", "ft", "mi"])))
    reqs.append(cmd("ZRANGE", G2, "0", "-1", "WITHSCORES"))
    check(redis_door, redis_reference, reqs)
