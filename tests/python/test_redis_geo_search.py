"""The Redis door's geo searches (GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and
their _RO forms) against Debian's redis-server 7.0.15: the same requests to both, the same
replies expected, byte for byte (RESP2 and RESP3), pipelined and one at a time.

The door searches as Redis does (the nine geohash cells around the centre, each a range of
the set's score index), so the points it finds, their order when no ASC/DESC is asked (cell
by cell), their order at equal distances (glibc's merge sort, Redis's partial quicksort with
COUNT) and their distances' text are compared as they are, not sorted. Points exactly at the
radius (the radius computed here with Redis's own float operations) and one ulp inside it,
near the poles and across the antimeridian are included, as are the STORE forms (then
ZRANGE WITHSCORES of the destination) and every error, in Redis's order.

No intended difference.
"""

import math
import random

from redisdiff import AUTH, cmd, differential, raw_reply, replies

P = "geos:"
G, G2, G3, D, D2, STR, MISSING = (P + n for n in ("g", "g2", "g3", "d", "d2", "str", "missing"))
RESET = cmd("DEL", G, G2, G3, D, D2, STR, MISSING)

LAT_MIN, LAT_MAX = -85.05112878, 85.05112878
EARTH_RADIUS_IN_METERS = 6372797.560856


def check(door, reference, requests):
    """Differential, pipelined and one at a time, then the raw bytes in RESP2 and RESP3."""
    for pipeline in (True, False):
        differential(door, reference, requests, pipeline=pipeline)
    for hello in (None, cmd("HELLO", "3")):
        reqs = [AUTH] + ([hello] if hello else []) + requests
        got = replies(door, reqs, True, read=raw_reply)
        want = replies(reference, reqs, True, read=raw_reply)
        for i, (req, g, w) in enumerate(zip(reqs, got, want)):
            if req != hello:
                assert g == w, f"request {i} {req!r}: manifold {g!r}, redis-server {w!r}"


# --- Redis's float operations, to put points exactly on the edge ----------------------------

def squash(v):
    out = 0
    for i in range(32):
        out |= ((v >> (2 * i)) & 1) << i
    return out


def spread(v):
    out = 0
    for i in range(32):
        out |= ((v >> i) & 1) << (2 * i)
    return out


def score_of(lon, lat):
    """GEOADD's score (geohashEncodeWGS84 at 26 steps)."""
    lat_off = (lat - LAT_MIN) / (LAT_MAX - LAT_MIN) * float(1 << 26)
    lon_off = (lon + 180.0) / 360.0 * float(1 << 26)
    return spread(int(lat_off)) | (spread(int(lon_off)) << 1)


def decode(score):
    """decodeGeohash: the centre of the score's cell."""
    bits = int(score)
    ilat, ilon = squash(bits), squash(bits >> 1)
    cells = float(1 << 26)
    lat_lo = LAT_MIN + (ilat * 1.0 / cells) * (LAT_MAX - LAT_MIN)
    lat_hi = LAT_MIN + ((ilat + 1) * 1.0 / cells) * (LAT_MAX - LAT_MIN)
    lon_lo = -180.0 + (ilon * 1.0 / cells) * 360.0
    lon_hi = -180.0 + ((ilon + 1) * 1.0 / cells) * 360.0
    lon = min(max((lon_lo + lon_hi) / 2, -180.0), 180.0)
    lat = min(max((lat_lo + lat_hi) / 2, LAT_MIN), LAT_MAX)
    return lon, lat


def deg_rad(d):
    return d * (math.pi / 180.0)


def distance(lon1, lat1, lon2, lat2):
    """geohashGetDistance."""
    lon1r, lon2r = deg_rad(lon1), deg_rad(lon2)
    v = math.sin((lon2r - lon1r) / 2)
    if v == 0.0:
        return EARTH_RADIUS_IN_METERS * abs(deg_rad(lat2) - deg_rad(lat1))
    lat1r, lat2r = deg_rad(lat1), deg_rad(lat2)
    u = math.sin((lat2r - lat1r) / 2)
    a = u * u + math.cos(lat1r) * math.cos(lat2r) * v * v
    return 2.0 * EARTH_RADIUS_IN_METERS * math.asin(math.sqrt(a))


def test_palermo_catania_every_form(redis_door, redis_reference):
    pts = ["13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania",
           "12.758489", "38.788135", "edge1", "17.241510", "38.788135", "edge2"]
    reqs = [RESET, cmd("GEOADD", G, *pts)]
    for shape in (["BYRADIUS", "200", "km"], ["BYRADIUS", "100", "km"], ["BYBOX", "400", "400", "km"],
                  ["BYBOX", "200", "100", "mi"], ["BYRADIUS", "0", "m"], ["BYRADIUS", "inf", "m"]):
        for frm in (["FROMLONLAT", "15", "37"], ["FROMMEMBER", "Palermo"], ["fromlonlat", "-180", "85.05112878"]):
            for opts in ([], ["ASC"], ["DESC"], ["WITHCOORD", "WITHDIST", "WITHHASH"], ["COUNT", "1"],
                         ["COUNT", "2", "DESC", "WITHDIST"], ["COUNT", "1", "ANY"], ["COUNT", "3", "ANY", "ASC", "WITHHASH"],
                         ["withdist", "asc", "count", "10"]):
                reqs.append(cmd("GEOSEARCH", G, *frm, *shape, *opts))
            reqs.append(cmd("GEOSEARCHSTORE", D, G, *frm, *shape))
            reqs.append(cmd("ZRANGE", D, "0", "-1", "WITHSCORES"))
            reqs.append(cmd("GEOSEARCHSTORE", D, G, *frm, *shape, "STOREDIST", "COUNT", "2"))
            reqs.append(cmd("ZRANGE", D, "0", "-1", "WITHSCORES"))
            reqs.append(cmd("TYPE", D))
    reqs += [
        cmd("GEORADIUS", G, "15", "37", "200", "km", "WITHDIST", "WITHCOORD"),
        cmd("GEORADIUS", G, "15", "37", "200", "km", "WITHDIST", "WITHCOORD", "WITHHASH", "COUNT", "2", "ASC"),
        cmd("GEORADIUS_RO", G, "15", "37", "150", "km", "DESC"),
        cmd("GEORADIUSBYMEMBER", G, "Palermo", "200", "km", "WITHDIST"),
        cmd("GEORADIUSBYMEMBER_RO", G, "Catania", "166.2742", "km", "WITHDIST"),
        cmd("GEORADIUSBYMEMBER_RO", G, "Catania", "166.2741", "km", "WITHDIST"),
        cmd("GEORADIUS", G, "15", "37", "200", "km", "STORE", D), cmd("ZRANGE", D, "0", "-1", "WITHSCORES"),
        cmd("GEORADIUS", G, "15", "37", "200", "km", "STOREDIST", D2, "COUNT", "2", "DESC"),
        cmd("ZRANGE", D2, "0", "-1", "WITHSCORES"),
        cmd("GEORADIUSBYMEMBER", G, "Palermo", "500", "mi", "STORE", D, "ASC"), cmd("ZRANGE", D, "0", "-1", "WITHSCORES"),
        cmd("GEORADIUSBYMEMBER", G, "Palermo", "10", "ft", "STOREDIST", D), cmd("ZRANGE", D, "0", "-1", "WITHSCORES"),
        # Nothing found: the destination is deleted.
        cmd("SET", D2, "x"), cmd("GEORADIUS", G, "-70", "40", "1", "km", "STORE", D2), cmd("EXISTS", D2),
        cmd("SET", D2, "x"), cmd("GEOSEARCHSTORE", D2, G, "FROMLONLAT", "-70", "40", "BYRADIUS", "1", "m"), cmd("EXISTS", D2),
        # A store over a key of another type, with a TTL: replaced, no TTL.
        cmd("SET", D2, "x", "EX", "100"), cmd("GEOSEARCHSTORE", D2, G, "FROMMEMBER", "Palermo", "BYRADIUS", "1000", "km"),
        cmd("TYPE", D2), cmd("TTL", D2), cmd("ZRANGE", D2, "0", "-1", "WITHSCORES"),
        # The source as its own destination.
        cmd("GEOADD", G3, "1", "1", "a", "1.001", "1", "b", "5", "5", "far"),
        cmd("GEOSEARCHSTORE", G3, G3, "FROMMEMBER", "a", "BYRADIUS", "1", "km", "STOREDIST"),
        cmd("ZRANGE", G3, "0", "-1", "WITHSCORES"),
        # Missing source: an empty array, or 0 and the destination deleted.
        cmd("GEOSEARCH", MISSING, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m"),
        cmd("GEOSEARCH", MISSING, "FROMMEMBER", "nobody", "BYRADIUS", "1", "m"),
        cmd("GEORADIUSBYMEMBER", MISSING, "nobody", "1", "m"),
        cmd("GEORADIUSBYMEMBER", MISSING, "nobody", "x", "m"),
        cmd("GEORADIUSBYMEMBER", MISSING, "nobody", "-1", "parsec", "COUNT", "1"),
        cmd("GEORADIUS", MISSING, "0", "0", "1", "m"),
        cmd("SET", D2, "x"), cmd("GEOSEARCHSTORE", D2, MISSING, "FROMMEMBER", "m", "BYBOX", "1", "1", "m"), cmd("EXISTS", D2),
        cmd("SET", D2, "x"), cmd("GEORADIUS", MISSING, "0", "0", "1", "m", "STORE", D2), cmd("EXISTS", D2),
        # A member scored outside the geohashes (ZADD): found where Redis finds it.
        cmd("ZADD", G2, "-5", "neg", "1e30", "big", "5.7", "frac"), cmd("GEOADD", G2, "0", "0", "zero"),
        cmd("GEOSEARCH", G2, "FROMMEMBER", "neg", "BYRADIUS", "100", "km", "WITHCOORD"),
        cmd("GEOSEARCH", G2, "FROMMEMBER", "big", "BYRADIUS", "100", "km", "WITHCOORD", "WITHHASH"),
        cmd("GEOSEARCH", G2, "FROMMEMBER", "frac", "BYRADIUS", "100", "km", "WITHCOORD", "WITHHASH", "WITHDIST"),
        cmd("GEOPOS", G2, "neg", "big", "frac"), cmd("GEODIST", G2, "neg", "big"),
        # Odd sizes: infinite, overflowing in metres, negative zero, denormal.
        cmd("GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYBOX", "inf", "inf", "m", "WITHDIST"),
        cmd("GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYBOX", "inf", "1", "m", "WITHDIST"),
        cmd("GEOSEARCH", G, "FROMLONLAT", "180", "-85.05112878", "BYRADIUS", "1e308", "km", "WITHDIST", "DESC"),
        cmd("GEOSEARCH", G, "FROMMEMBER", "Palermo", "BYRADIUS", "-0", "m", "WITHDIST", "WITHHASH"),
        cmd("GEOSEARCH", G, "FROMMEMBER", "Palermo", "BYBOX", "4.9e-324", "0", "ft", "WITHDIST"),
        cmd("GEOSEARCH", G, "FROMLONLAT", "15", "37", "BYBOX", "1e6", "20", "km", "WITHDIST"),
        cmd("GEOSEARCH", G, "FROMLONLAT", "15", "37", "BYBOX", "20", "1e6", "km", "WITHDIST"),
        # In MULTI (errors in EXEC's reply) and in scripts.
        cmd("MULTI"), cmd("GEOSEARCH", G, "FROMMEMBER", "Palermo", "BYRADIUS", "200", "km", "WITHDIST", "ASC"),
        cmd("GEOSEARCH", G, "FROMMEMBER", "nobody", "BYRADIUS", "200", "km"),
        cmd("GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "COUNT", "0"),
        cmd("GEORADIUS", G, "15", "37", "200", "km", "STOREDIST", D, "ASC"), cmd("ZRANGE", D, "0", "-1", "WITHSCORES"),
        cmd("EXEC"),
        cmd("EVAL", "return redis.call('GEOSEARCH', KEYS[1], 'FROMLONLAT', 15, 37, 'BYRADIUS', 200, 'km', "
            "'WITHDIST', 'WITHCOORD', 'WITHHASH', 'ASC')", "1", G),
        cmd("EVAL", "return redis.call('GEORADIUS', KEYS[1], 15, 37, 200, 'km', 'STORE', KEYS[2])", "2", G, D),
        cmd("EVAL_RO", "return redis.pcall('GEORADIUS', KEYS[1], 15, 37, 200, 'km')", "1", G),
        cmd("EVAL_RO", "return redis.call('GEORADIUS_RO', KEYS[1], 15, 37, 200, 'km', 'DESC')", "1", G),
        cmd("EVAL", "return redis.pcall('GEOSEARCH', KEYS[1], 'FROMMEMBER', 'nobody', 'BYRADIUS', 1, 'm')", "1", G),
    ]
    check(redis_door, redis_reference, reqs)


def test_errors_in_redis_order(redis_door, redis_reference):
    reqs = [RESET, cmd("GEOADD", G, "13.361389", "38.115556", "Palermo"), cmd("SET", STR, "x")]
    for c in [
        # Arity.
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS"], ["GEOSEARCHSTORE", D, G, "FROMMEMBER", "m", "BYRADIUS", "1"],
        ["GEORADIUS", G, "0", "0", "1"], ["GEORADIUS_RO", G, "0", "0", "1"], ["GEORADIUSBYMEMBER", G, "m", "1"],
        ["GEORADIUSBYMEMBER_RO", G, "m"], ["GEOSEARCH"],
        # WRONGTYPE before any argument error.
        ["GEOSEARCH", STR, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m"], ["GEOSEARCH", STR, "BOGUS", "1", "2", "3", "4"],
        ["GEORADIUS", STR, "x", "y", "1", "m"], ["GEORADIUSBYMEMBER", STR, "m", "x", "m"],
        ["GEOSEARCHSTORE", D, STR, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "WITHDIST"],
        # GEOSEARCHSTORE's destination may hold anything.
        ["GEOSEARCHSTORE", STR, G, "FROMLONLAT", "13", "38", "BYRADIUS", "100", "km"], ["TYPE", STR], ["SET", STR, "x"],
        # Options.
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "COUNT", "0"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "COUNT", "-1"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "COUNT", "x"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "COUNT"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "ANY"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "STORE", D],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "STOREDIST"],
        ["GEOSEARCH", G, "BYRADIUS", "1", "m", "WITHDIST", "ASC"], ["geosearch", G, "BYRADIUS", "1", "m", "WITHDIST", "ASC"],
        ["GeoSearchStore", D, G, "BYRADIUS", "1", "m", "ASC", "DESC"],
        ["GEOSEARCH", G, "FROMLONLAT", "1", "2", "ASC", "WITHDIST"], ["geoSEARCH", G, "FROMMEMBER", "Palermo", "ASC", "DESC"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMMEMBER", "Palermo", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMMEMBER", "Palermo", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "FROMLONLAT", "13", "38", "BYRADIUS", "100", "km"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "BYBOX", "1", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYBOX", "1", "1", "m", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "200", "0", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "-86", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "inf", "0", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "nan", "0", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "x", "0", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "x", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "-0.1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "yd"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYBOX", "x", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYBOX", "1", "x", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYBOX", "-1", "1", "m"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYBOX", "1", "1", "furlong"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYBOX", "1", "1"],
        ["GEOSEARCH", G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "WITHDIST", "BOGUS"],
        ["GEOSEARCHSTORE", D, G, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "WITHCOORD"],
        ["GEORADIUS", G, "0", "0", "1", "m", "WITHHASH", "STORE", D],
        ["GEORADIUS", G, "0", "0", "1", "m", "STOREDIST", D, "WITHDIST"],
        ["GEORADIUS_RO", G, "0", "0", "1", "m", "STORE", D],
        ["GEORADIUSBYMEMBER_RO", G, "Palermo", "1", "m", "STOREDIST", D],
        ["GEORADIUS", G, "0", "0", "1", "m", "FROMMEMBER", "Palermo"],
        ["GEORADIUS", G, "0", "0", "1", "m", "STORE"],
        ["GEORADIUS", G, "x", "0", "1", "m"], ["GEORADIUS", G, "0", "91", "1", "m"], ["GEORADIUS", G, "0", "0", "x", "m"],
        ["GEORADIUS", G, "0", "0", "1", "nm"], ["GEORADIUS", G, "0", "0", "1", "m", "ANY"],
        # Missing members where they stand among the arguments.
        ["GEOSEARCH", G, "FROMMEMBER", "nobody", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMMEMBER", "nobody", "BYRADIUS", "x", "m"],
        ["GEOSEARCH", G, "BYRADIUS", "x", "m", "FROMMEMBER", "nobody"],
        ["GEOSEARCH", G, "FROMMEMBER", "Palermo", "FROMMEMBER", "nobody", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "FROMMEMBER", "nobody", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "m"],
        ["GEOSEARCH", G, "COUNT", "0", "FROMMEMBER", "nobody", "BYRADIUS", "1", "m"],
        ["GEORADIUSBYMEMBER", G, "nobody", "x", "m"], ["GEORADIUSBYMEMBER", G, "Palermo", "x", "m"],
        ["GEORADIUSBYMEMBER", G, "Palermo", "-1", "m", "COUNT", "0"], ["GEORADIUSBYMEMBER", G, "Palermo", "1", "m", "COUNT", "0"],
        ["GEORADIUSBYMEMBER", MISSING, "nobody", "x", "m", "COUNT", "0"],
        ["GEORADIUSBYMEMBER", MISSING, "nobody", "x", "m", "WITHDIST", "STORE", D],
        ["GEOSEARCH", MISSING, "FROMMEMBER", "nobody", "BYRADIUS", "x", "m"],
        ["GEOSEARCH", MISSING, "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m", "ANY"],
    ]:
        reqs.append(cmd(*c))
    check(redis_door, redis_reference, reqs)


def wrap(lon):
    """A longitude past the antimeridian, back on the map."""
    return lon - 360.0 if lon > 180.0 else lon + 360.0 if lon < -180.0 else lon


def test_ties_in_both_sorts(redis_door, redis_reference):
    """Points at equal distances: all returned (glibc's merge sort keeps them in the order
    found) or fewer with COUNT (Redis's partial quicksort moves them), past 7 and 40 results
    (its median-of-three choices)."""
    reqs = [RESET]
    args = []
    for spot in range(12):
        for k in range(7):
            args += [repr(2.0 + spot * 0.001), "48.0", f"s{spot}m{k}"]
    # Members in an order unlike their names', so ties are not already sorted by name.
    for k in range(5):
        args += [repr(2.0 + 0.0005 * k), "48.0", f"z{k}"]
    reqs.append(cmd("GEOADD", G, *args))
    for frm in (["FROMLONLAT", "2.0", "48.0"], ["FROMLONLAT", "2.006", "48.0"], ["FROMMEMBER", "s5m3"]):
        for count in (1, 2, 3, 5, 6, 7, 8, 9, 20, 40, 41, 47, 60, 88, 89, 100):
            for order in ("ASC", "DESC"):
                reqs.append(cmd("GEOSEARCH", G, *frm, "BYRADIUS", "5", "km", "COUNT", str(count), order, "WITHDIST"))
            reqs.append(cmd("GEOSEARCH", G, *frm, "BYBOX", "3", "3", "km", "COUNT", str(count)))
            reqs.append(cmd("GEOSEARCHSTORE", D, G, *frm, "BYRADIUS", "5", "km", "COUNT", str(count), "DESC", "STOREDIST"))
            reqs.append(cmd("ZRANGE", D, "0", "-1", "WITHSCORES"))
        for order in ([], ["ASC"], ["DESC"]):
            reqs.append(cmd("GEOSEARCH", G, *frm, "BYRADIUS", "5", "km", *order))
    check(redis_door, redis_reference, reqs)


def test_edges_ties_and_random_searches(redis_door, redis_reference):
    rng = random.Random(2707)
    centres = [(13.361389, 38.115556), (179.95, 10.0), (-179.99, -20.0), (0.0, 84.9), (-120.0, -84.99),
               (0.0, 0.0), (45.0, 66.5), (-75.0, -80.5), (180.0, LAT_MAX), (-180.0, LAT_MIN)]
    points = []  # (lon, lat, name)
    for ci, (clon, clat) in enumerate(centres):
        for j in range(40):
            spread_deg = rng.choice([0.001, 0.05, 1.0, 10.0])
            lon = clon + rng.uniform(-spread_deg, spread_deg)
            lat = clat + rng.uniform(-spread_deg, spread_deg)
            points.append((wrap(lon), max(min(lat, LAT_MAX), LAT_MIN), f"c{ci}p{j}"))
        # Ties: several members on the same spot.
        for k in range(6):
            points.append((wrap(clon + 0.01), clat - 0.01 if clat > 0 else clat + 0.01, f"c{ci}same{k}"))
    reqs = [RESET]
    for i in range(0, len(points), 50):
        args = []
        for lon, lat, name in points[i:i + 50]:
            args += [repr(lon), repr(lat), name]
        reqs.append(cmd("GEOADD", G, *args))
    scores = {name: score_of(lon, lat) for lon, lat, name in points}
    names = list(scores)
    units = {"m": 1.0, "km": 1000.0, "mi": 1609.34, "ft": 0.3048}
    for _ in range(260):
        centre_name = rng.choice(names)
        clon, clat = decode(scores[centre_name])
        frm = rng.choice([["FROMMEMBER", centre_name], ["FROMLONLAT", repr(clon), repr(clat)]])
        kind = rng.random()
        unit = rng.choice(list(units))
        if kind < 0.35:
            # Exactly at a member's distance, or one ulp short of it: in, then out.
            other = rng.choice(names)
            olon, olat = decode(scores[other])
            d = distance(clon, clat, olon, olat) / units[unit]
            r = rng.choice([d, math.nextafter(d, 0.0), math.nextafter(d, math.inf)])
            shape = ["BYRADIUS", repr(r), unit]
        elif kind < 0.7:
            shape = ["BYRADIUS", repr(rng.choice([0.0, 1.0, 50.0, 2000.0, 150000.0, 900000.0, 5e6, 2.1e7]) * rng.random() / units[unit]), unit]
        else:
            w, h = (rng.choice([10.0, 5000.0, 300000.0, 3e6, 4e7]) * rng.random() / units[unit] for _ in range(2))
            shape = ["BYBOX", repr(w), repr(h), unit]
        opts = []
        for o in ("WITHDIST", "WITHCOORD", "WITHHASH"):
            if rng.random() < 0.4:
                opts.append(o)
        s = rng.random()
        if s < 0.3:
            opts.append(rng.choice(["ASC", "DESC"]))
        if rng.random() < 0.4:
            opts += ["COUNT", str(rng.choice([1, 2, 3, 5, 8, 20, 1000]))]
            if rng.random() < 0.3:
                opts.append("ANY")
        rng.shuffle(opts) if "COUNT" not in opts else None
        reqs.append(cmd("GEOSEARCH", G, *frm, *shape, *opts))
        if rng.random() < 0.15:
            store_opts = [o for o in opts if o not in ("WITHDIST", "WITHCOORD", "WITHHASH")]
            reqs.append(cmd("GEOSEARCHSTORE", D, G, *frm, *shape, *store_opts, *(["STOREDIST"] if rng.random() < 0.5 else [])))
            reqs.append(cmd("ZRANGE", D, "0", "-1", "WITHSCORES"))
        if shape[0] == "BYRADIUS" and rng.random() < 0.2:
            if frm[0] == "FROMMEMBER":
                reqs.append(cmd("GEORADIUSBYMEMBER_RO", G, centre_name, shape[1], unit, *opts))
            else:
                reqs.append(cmd("GEORADIUS_RO", G, frm[1], frm[2], shape[1], unit, *opts))
    check(redis_door, redis_reference, reqs)


def test_a_search_holds_at_most_128_mib_of_points(redis_door):
    """Three points of 45 MiB names at one place (135 MiB): a search that would hold them
    all is refused with a clear error, and the client goes on; with COUNT 1 ANY it holds one."""
    from conftest import PASSWORD, USER  # noqa: PLC0415
    from redisdiff import Conn, Err  # noqa: PLC0415
    c = Conn(redis_door)
    c.sock.settimeout(120)
    assert c.call("AUTH", USER, PASSWORD) == "OK"
    key = "geosearch:held"
    c.call("DEL", key)
    for ch in "abc":
        assert c.call("GEOADD", key, "13.361389", "38.115556", ch * (45 << 20)) == 1
    r = c.call("GEOSEARCH", key, "FROMLONLAT", "13.361389", "38.115556", "BYRADIUS", "1", "km")
    assert isinstance(r, Err) and "more points than one command may hold" in r, r[:200]
    r = c.call("GEOSEARCH", key, "FROMLONLAT", "13.361389", "38.115556", "BYRADIUS", "1", "km",
               "COUNT", "1", "ANY")
    assert len(r) == 1 and len(r[0]) == 45 << 20
    assert c.call("DEL", key) == 1
    c.close()
