"""The Redis door's figures: `INFO` (commandstats, stats, keyspace, clients) against
redis-server 7.0's, and the admin port's `SHOW REDIS` and `/metrics`'s `manifold_redis_*`
moving with the commands run through the door.

The commandstats checks are differential: the same requests go to manifold's door and to
redis-server, and each command's `calls`, `failed_calls` and `rejected_calls` must move by the
same amounts on both (`usec` differs: manifold's includes the database). Intended differences
(see `crates/frontend-redis/src/session/info.rs`): fields manifold cannot know are absent, and
`expired_keys` counts the keys the sweeper deleted, not the keys a command found expired.
"""

import random
import re
import time

import pymysql
import pytest

from redisdiff import AUTH, Conn, cmd, launch_door, replies
from test_admin import scrape

DB = 11


@pytest.fixture(scope="module")
def door(topology, tmp_path_factory):
    """A manifold of its own with the door, whose admin port and HTTP the tests read. Its
    keys live in a schema of their own: another manifold's sweeper (the other test files')
    would otherwise delete this one's expired keys before it does."""
    cfg = tmp_path_factory.mktemp("redis-metrics") / "redis-metrics.toml"
    cfg.write_text('[redis]\nschema = "manifold_redis_metrics"\n')
    m = launch_door(topology, ["--config", str(cfg)], log_name="redis-metrics")
    port = m.redis_port
    # wait_port's probe connection is counted by whichever worker accepted it, maybe after
    # the first test's baseline: wait until the count holds it (the probe and this one).
    c = Conn(port)
    try:
        assert c.call("AUTH", "app", "app") == "OK"
        deadline = time.time() + 10
        while b"total_connections_received:2\r\n" not in c.call("INFO", "stats"):
            assert time.time() < deadline, "the door never counted its first connections"
            time.sleep(0.05)
    finally:
        c.close()
    yield m
    m.stop_and_check()


def info(port, section):
    """`INFO section` (after AUTH) as {field: value} (values of `a=1,b=2` form as dicts)."""
    [_, text] = replies(port, [AUTH, cmd("INFO", section)], pipeline=False)
    out = {}
    for line in text.decode().split("\r\n"):
        if not line or line.startswith("#"):
            continue
        name, _, value = line.partition(":")
        if "=" in value:
            value = dict(kv.split("=", 1) for kv in value.split(","))
        out[name] = value
    return out


def commandstats(port):
    return {name.removeprefix("cmdstat_"): {k: float(v) for k, v in fields.items()}
            for name, fields in info(port, "commandstats").items()}


def delta(before, after):
    """Per command: how calls, failed_calls and rejected_calls moved."""
    out = {}
    for name, fields in after.items():
        was = before.get(name, {})
        d = {k: fields[k] - was.get(k, 0) for k in ("calls", "failed_calls", "rejected_calls")}
        if any(d.values()):
            out[name] = d
    return out


def stat_delta(before, after, fields):
    return {f: int(after[f]) - int(before[f]) for f in fields}


def run_both(door, reference, requests, pipeline=True):
    """Runs `requests` (after AUTH) on both servers; returns each one's commandstats delta
    and stats delta."""
    out = []
    for port in (door.redis_port, reference):
        s0, c0 = info(port, "stats"), commandstats(port)
        replies(port, [AUTH, *requests], pipeline)
        s1, c1 = info(port, "stats"), commandstats(port)
        out.append((delta(c0, c1), stat_delta(s0, s1, ["total_commands_processed", "total_error_replies",
                                                        "total_connections_received"])))
    return out


def k(name):
    return f"metrics:{name}"


BASIC = [
    cmd("SELECT", DB), cmd("DEL", k("a"), k("h"), k("l")), cmd("SET", k("a"), "1"), cmd("GET", k("a")),
    cmd("GET", k("a")), cmd("GET"), cmd("HSET", k("a"), "f", "v"), cmd("FOO", "x"), cmd("INCR", k("a")),
    cmd("INCRBY", k("a"), "x"), cmd("LPUSH", k("l"), "a", "b"), cmd("LRANGE", k("l"), "0", "-1"),
    cmd("CLIENT", "NOPE"), cmd("CLIENT", "SETNAME"), cmd("PING"), cmd("ECHO", "hi"), cmd("CONFIG", "GET", "save"),
    cmd("SELECT", "99"), cmd("SELECT", DB),
]


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_at_a_time"])
def test_commandstats_move_as_redis_does(door, redis_reference, pipeline):
    (got, got_stats), (want, want_stats) = run_both(door, redis_reference, BASIC, pipeline)
    assert got == want
    assert got_stats == want_stats
    # The figures themselves, once: what the sequence above does.
    assert got["get"] == {"calls": 2, "failed_calls": 0, "rejected_calls": 1}
    assert got["hset"] == {"calls": 1, "failed_calls": 1, "rejected_calls": 0}
    assert got["client|setname"] == {"calls": 0, "failed_calls": 0, "rejected_calls": 1}


EVERY_COMMAND = [
    cmd("CLIENT", "KILL", "ID", "999999"), cmd("CLIENT", "KILL", "127.0.0.1:1"), cmd("COMMAND", "INFO", "get"),
    cmd("COMMAND", "COUNT"), cmd("CLIENT"), cmd("CONFIG"), cmd("PUBSUB"), cmd("CLIENT", "KILL"),
]


def test_every_command_is_counted(door, redis_reference):
    # Every command of the door's table counts, as in Redis: a second list of names once left
    # out CLIENT KILL and COMMAND INFO, and the containers' own refusals (CLIENT alone).
    (got, got_stats), (want, want_stats) = run_both(door, redis_reference, EVERY_COMMAND, pipeline=False)
    assert got == want
    assert got_stats == want_stats
    assert got["client|kill"] == {"calls": 2, "failed_calls": 1, "rejected_calls": 1}
    assert got["command|info"] == {"calls": 1, "failed_calls": 0, "rejected_calls": 0}
    assert got["client"] == got["config"] == got["pubsub"] == {"calls": 0, "failed_calls": 0, "rejected_calls": 1}


TRANSACTIONS = [
    cmd("SELECT", DB), cmd("DEL", k("t")), cmd("MULTI"), cmd("SET", k("t"), "v"), cmd("INCR", k("t")),
    cmd("HSET", k("t"), "f", "v"), cmd("GET", k("t")), cmd("EXEC"),
    cmd("MULTI"), cmd("GET"), cmd("SET", k("t"), "w"), cmd("EXEC"),
    cmd("MULTI"), cmd("PING"), cmd("DISCARD"), cmd("EXEC"), cmd("WATCH", k("t")), cmd("UNWATCH"),
]


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_at_a_time"])
def test_transactions_count_what_exec_runs(door, redis_reference, pipeline):
    (got, got_stats), (want, want_stats) = run_both(door, redis_reference, TRANSACTIONS, pipeline)
    assert got == want
    assert got_stats == want_stats
    assert got["exec"] == {"calls": 3, "failed_calls": 2, "rejected_calls": 0}
    assert got["set"]["calls"] == 1, "a command queued by an aborted MULTI never runs"


def test_unauthenticated_commands_are_rejected(door, redis_reference):
    results = []
    for port in (door.redis_port, redis_reference):
        c0 = commandstats(port)
        replies(port, [cmd("GET", k("a")), cmd("SET", k("a"), "x"), cmd("PING")], pipeline=True)
        results.append(delta(c0, commandstats(port)))
    assert results[0] == results[1]
    assert results[0]["get"] == {"calls": 0, "failed_calls": 0, "rejected_calls": 1}


def test_random_sequence_counts_as_redis_does(door, redis_reference):
    rng = random.Random(20240611)
    keys = [k(f"r{i}") for i in range(4)]
    requests = [cmd("SELECT", DB), cmd("DEL", *keys)]
    for _ in range(300):
        key, other = rng.choice(keys), rng.choice(keys)
        requests.append(rng.choice([
            cmd("SET", key, rng.randint(0, 9)), cmd("GET", key), cmd("INCR", key), cmd("INCRBY", key, "z"),
            cmd("APPEND", key, "x"), cmd("HSET", key, "f", rng.randint(0, 9)), cmd("HGET", key, "f"),
            cmd("HINCRBY", key, "f", "1"), cmd("LPUSH", key, "v"), cmd("LPOP", key), cmd("LLEN", key),
            cmd("SADD", key, rng.randint(0, 3)), cmd("SCARD", key), cmd("ZADD", key, "1", "m"),
            cmd("ZSCORE", key, "m"), cmd("DEL", key), cmd("EXISTS", key, other), cmd("TYPE", key),
            cmd("EXPIRE", key, "100"), cmd("TTL", key), cmd("GET"), cmd("HSET", key, "f"), cmd("NOPE"),
            cmd("MGET", key, other), cmd("STRLEN", key), cmd("PING"),
        ]))
    (got, got_stats), (want, want_stats) = run_both(door, redis_reference, requests, pipeline=True)
    assert got == want
    assert got_stats == want_stats
    assert sum(d["failed_calls"] for d in got.values()) > 10, "WRONGTYPE and not-an-integer errors"


def test_info_sections_and_fields_are_redis_s(door, redis_reference):
    want_names = {}
    for port in (door.redis_port, redis_reference):
        [_, text] = replies(port, [AUTH, cmd("INFO", "everything")], pipeline=False)
        sections, current = {}, None
        for line in text.decode().split("\r\n"):
            if line.startswith("# "):
                current = line[2:]
                sections[current] = []
            elif line:
                sections[current].append(line.split(":", 1)[0])
        want_names[port] = sections
    got, want = want_names[door.redis_port], want_names[redis_reference]
    assert list(got) == [s for s in want if s in got], "sections in Redis's order"
    assert {"Server", "Clients", "Persistence", "Stats", "Replication", "Commandstats", "Keyspace"} <= set(got)
    for section, fields in got.items():
        if section in ("Commandstats", "Keyspace"):
            continue
        extra = [f for f in fields if f not in want[section] and f != "manifold_version"]
        assert not extra, f"{section}: fields redis-server does not have: {extra}"
        ours = [f for f in fields if f != "manifold_version"]
        assert ours == [f for f in want[section] if f in ours], f"{section}: in Redis's order"
    # The default sections: not commandstats; a bare INFO alike.
    for args in ([], ["default"]):
        [_, text] = replies(door.redis_port, [AUTH, cmd("INFO", *args)], pipeline=False)
        assert b"# Keyspace\r\n" in text and b"# Commandstats" not in text and b"loading:0\r\n" in text
    [_, text] = replies(door.redis_port, [AUTH, cmd("INFO", "nosuchsection")], pipeline=False)
    assert text == b""
    line = re.compile(r"^cmdstat_[a-z0-9_|-]+:calls=\d+,usec=\d+,usec_per_call=\d+\.\d\d,rejected_calls=\d+,failed_calls=\d+$")
    for port in (door.redis_port, redis_reference):
        stats = [l for l in replies(port, [AUTH, cmd("INFO", "commandstats")], pipeline=False)[1].decode().split("\r\n")
                 if l.startswith("cmdstat_")]
        assert stats and all(line.match(l) for l in stats), stats


def keyspace_line(port, requests, pipeline):
    """The `db11:` line of `INFO keyspace` after `requests` (and of an `INFO` inside EXEC)."""
    out = replies(port, [AUTH, cmd("SELECT", DB), cmd("FLUSHDB"), *requests, cmd("INFO", "keyspace"),
                         cmd("MULTI"), cmd("SET", k("in-multi"), "v"), cmd("INFO", "keyspace"), cmd("EXEC")],
                  pipeline)
    pick = lambda text: [l for l in text.decode().split("\r\n") if l.startswith(f"db{DB}:")]  # noqa: E731
    return pick(out[-5]), pick(out[-1][1])


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one_at_a_time"])
def test_info_keyspace_counts_keys_and_expiries(door, redis_reference, pipeline):
    requests = [cmd("SET", k("a"), "1"), cmd("HSET", k("h"), "f", "v"), cmd("SET", k("b"), "2", "EX", "100"),
                cmd("RPUSH", k("l"), "x")]
    got = keyspace_line(door.redis_port, requests, pipeline)
    want = keyspace_line(redis_reference, requests, pipeline)
    # avg_ttl: Redis's is sampled by its expiry cycle (0 until then), manifold's exact.
    ttls = [int(line[0].rsplit("avg_ttl=", 1)[1]) for line in got]
    assert all(0 < t <= 100_000 for t in ttls), got

    def counts(lines):
        return [[line[0].rsplit(",avg_ttl=", 1)[0]] for line in lines]
    assert counts(got) == counts(want), (got, want)
    assert counts(got)[0] == [f"db{DB}:keys=4,expires=1"]
    assert counts(got)[1] == [f"db{DB}:keys=5,expires=1"], "INFO in EXEC sees the transaction's write"
    for port in (door.redis_port, redis_reference):
        replies(port, [AUTH, cmd("SELECT", DB), cmd("FLUSHDB")])


def admin_rows(m, sql):
    with pymysql.connect(host="127.0.0.1", port=m.admin_port, user="admin", password="admin") as c:
        cur = c.cursor()
        cur.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]


def show_redis(m):
    return {r["Variable_name"]: int(r["Value"]) for r in admin_rows(m, "SHOW REDIS")}


def command_row(m, name):
    rows = [r for r in admin_rows(m, "SHOW REDIS COMMANDS") if r["command"] == name]
    return {k: (int(v) if k in ("calls", "failed_calls", "rejected_calls") else v) for k, v in rows[0].items()} \
        if rows else {"calls": 0, "failed_calls": 0, "rejected_calls": 0}


def series(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0)


def test_admin_and_metrics_move_with_the_commands(door):
    port = door.redis_port
    before, before_show, before_set = scrape(door), show_redis(door), command_row(door, "set")
    stages_before = {r["stage"]: int(r["count"]) for r in admin_rows(door, "SHOW REDIS STAGES")}
    sets = [cmd("SET", k(f"m{i}"), i) for i in range(10)]
    # One write: the ten SETs parse together and run as batches (one, unless TCP splits them).
    got = replies(port, [AUTH, cmd("SELECT", DB), *sets, cmd("GET", k("m1")), cmd("HGET", k("m1"), "f"), cmd("GET")])
    assert got[-2].startswith("WRONGTYPE") and got[-1].startswith("ERR wrong number")
    after, after_show, after_set = scrape(door), show_redis(door), command_row(door, "set")
    assert after_set["calls"] - before_set["calls"] == 10
    assert after_set["family"] == "strings"
    calls = lambda s, c, f: series(s, "manifold_redis_command_calls_total", command=c, family=f)  # noqa: E731
    assert calls(after, "set", "strings") - calls(before, "set", "strings") == 10
    assert calls(after, "hget", "hashes") - calls(before, "hget", "hashes") == 1
    failed = "manifold_redis_command_failed_calls_total"
    assert series(after, failed, command="hget", family="hashes") - series(before, failed, command="hget", family="hashes") == 1
    rejected = "manifold_redis_command_rejected_calls_total"
    assert series(after, rejected, command="get", family="strings") - series(before, rejected, command="get", family="strings") == 1
    d = {name: after_show[name] - before_show[name] for name in after_show}
    # AUTH, SELECT, 10 SET, GET, HGET (and the SHOW REDIS sessions are not Redis commands).
    assert d["Redis_commands"] == 14
    assert d["Redis_failed_calls"] == 1 and d["Redis_rejected_calls"] == 1
    assert d["Redis_batched_commands"] == 12
    assert 1 <= d["Redis_batches"] <= 12
    assert d["Redis_connections"] == 1
    assert d["Redis_net_input_bytes"] == sum(len(r) for r in [AUTH, cmd("SELECT", DB), *sets]) + len(
        cmd("GET", k("m1")) + cmd("HGET", k("m1"), "f") + cmd("GET"))
    for name, value in after_show.items():
        metric = {"Redis_delivered": "manifold_redis_pubsub_delivered_total",
                  "Redis_published": "manifold_redis_pubsub_published_total"}.get(name)
        if metric:
            assert series(after, metric) == value
    assert series(after, "manifold_redis_batch_size_count") - series(before, "manifold_redis_batch_size_count") == d["Redis_batches"]
    assert series(after, "manifold_redis_batch_size_sum") - series(before, "manifold_redis_batch_size_sum") == 12
    stage = lambda s, n: series(s, "manifold_redis_stage_seconds_count", stage=n)  # noqa: E731
    assert stage(after, "parse") - stage(before, "parse") == 15
    assert stage(after, "batch") - stage(before, "batch") == d["Redis_batches"]
    assert stage(after, "sql") - stage(before, "sql") >= d["Redis_batches"]
    assert stage(after, "reply") - stage(before, "reply") >= 1
    stages_after = {r["stage"]: int(r["count"]) for r in admin_rows(door, "SHOW REDIS STAGES")}
    assert stages_after["parse"] - stages_before["parse"] == 15
    assert [r["size_le"] for r in admin_rows(door, "SHOW REDIS BATCHES")][-1] == "+Inf"
    with pytest.raises(pymysql.err.ProgrammingError, match="SHOW REDIS takes"):
        admin_rows(door, "SHOW REDIS NOPE")


def test_clients_pubsub_and_expired_keys(door, redis_reference):
    port = door.redis_port
    show0, stats0 = show_redis(door), info(port, "stats")
    sub = Conn(port)
    try:
        assert sub.call("AUTH", "app", "app") == "OK"
        sub.call("SUBSCRIBE", k("ch"))
        assert int(info(port, "clients")["connected_clients"]) >= 2
        stats = info(port, "stats")
        assert int(stats["pubsub_channels"]) >= 1
        got = replies(port, [AUTH, cmd("PUBLISH", k("ch"), "m1"), cmd("PUBLISH", k("ch"), "m2"),
                             cmd("PUBLISH", k("nobody"), "m3")])
        assert got[1:] == [1, 1, 0]
        show1 = show_redis(door)
        assert show1["Redis_published"] - show0["Redis_published"] == 3
        assert show1["Redis_delivered"] - show0["Redis_delivered"] == 2
        assert show1["Redis_pubsub_channels"] >= 1
    finally:
        sub.close()
    # Keys that expire are deleted by the sweeper (every 100 ms) and counted.
    replies(port, [AUTH, cmd("SELECT", DB), *[cmd("SET", k(f"x{i}"), "v", "PX", "1") for i in range(3)]])
    deadline = time.time() + 10
    while show_redis(door)["Redis_expired_keys"] - show0["Redis_expired_keys"] < 3 and time.time() < deadline:
        time.sleep(0.1)
    assert show_redis(door)["Redis_expired_keys"] - show0["Redis_expired_keys"] >= 3
    assert int(info(port, "stats")["expired_keys"]) - int(stats0["expired_keys"]) >= 3
    assert series(scrape(door), "manifold_redis_expired_keys_total") >= 3
