"""The Redis door's server commands clients probe at start: CONFIG SET / RESETSTAT / REWRITE
/ HELP, and INFO's sections, against Debian's redis-server 7.0.15 where the replies are
deterministic (same requests, same replies, pipelined and one at a time, RESP2 and RESP3
byte for byte), on the door alone where they legitimately differ.

Intended differences from redis-server (avoided here, checked on the door alone):
- CONFIG SET accepts, per manifold, the settings that change nothing another client is
  served (notify-keyspace-events, maxmemory-policy, busy-reply-threshold/lua-time-limit,
  slowlog-*, latency-monitor-threshold, latency-tracking): stored and read back, acting on
  nothing yet. The operator's (timeout, maxclients, maxmemory, port) and the persistence
  ones (save, appendonly) accept only their current value; another is refused.
- CONFIG RESETSTAT is refused (the figures are shared); CONFIG REWRITE too (redis-server
  without a file refuses it with another text).
- INFO's figures differ (memory, uptime, counts): field presence and types are checked.
"""


from redisdiff import Conn, byte_for_byte, cmd, differential, redis_py
from conftest import PASSWORD, USER

# Redis 7.0's defaults: the settings tests set are put back to them, on both servers (the
# door and the reference are shared by every test file).
RESTORE = cmd("CONFIG", "SET", "notify-keyspace-events", "", "maxmemory-policy", "noeviction",
              "busy-reply-threshold", "5000", "slowlog-log-slower-than", "10000",
              "slowlog-max-len", "128", "latency-monitor-threshold", "0", "latency-tracking", "yes")


def check(door, reference, requests):
    for pipeline in (True, False):
        differential(door, reference, [*requests, RESTORE], pipeline=pipeline)


def test_config_set_what_clients_set(redis_door, redis_reference):
    check(redis_door, redis_reference, [
        # Spring Session, Sidekiq-style probes.
        cmd("CONFIG", "SET", "notify-keyspace-events", "Egx"),
        cmd("CONFIG", "GET", "notify-keyspace-events"),
        cmd("CONFIG", "SET", "notify-keyspace-events", "KEA"), cmd("CONFIG", "GET", "notify-keyspace-events"),
        cmd("CONFIG", "SET", "notify-keyspace-events", "g$lshzxetd"), cmd("CONFIG", "GET", "notify-keyspace-events"),
        cmd("CONFIG", "SET", "notify-keyspace-events", "nmKA"), cmd("CONFIG", "GET", "notify-keyspace-events"),
        cmd("CONFIG", "SET", "notify-keyspace-events", "Q"), cmd("CONFIG", "GET", "notify-keyspace-events"),
        cmd("CONFIG", "SET", "notify-keyspace-events", ""), cmd("CONFIG", "GET", "notify-keyspace-events"),
        cmd("CONFIG", "SET", "maxmemory-policy", "ALLKEYS-LRU"), cmd("CONFIG", "GET", "maxmemory-policy"),
        cmd("CONFIG", "SET", "maxmemory-policy", "bogus"), cmd("CONFIG", "GET", "maxmemory-policy"),
        cmd("CONFIG", "SET", "lua-time-limit", "6000"), cmd("CONFIG", "GET", "busy-reply-threshold"),
        cmd("CONFIG", "GET", "lua-time-limit"), cmd("CONFIG", "SET", "busy-reply-threshold", "-1"),
        cmd("CONFIG", "SET", "slowlog-log-slower-than", "-1"), cmd("CONFIG", "SET", "slowlog-log-slower-than", "-2"),
        cmd("CONFIG", "SET", "slowlog-max-len", "abc"), cmd("CONFIG", "SET", "slowlog-max-len", "07"),
        cmd("CONFIG", "SET", "slowlog-max-len", "1000"), cmd("CONFIG", "GET", "slowlog-max-len"), cmd("CONFIG", "GET", "slowlog-log-slower-than"),
        cmd("CONFIG", "SET", "latency-monitor-threshold", "100"), cmd("CONFIG", "GET", "latency-monitor-threshold"),
        cmd("CONFIG", "SET", "latency-tracking", "maybe"), cmd("CONFIG", "SET", "latency-tracking", "NO"),
        cmd("CONFIG", "GET", "latency-tracking"),
        # Several pairs: all or none, the first problem in order reported.
        cmd("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu", "slowlog-max-len", "5"),
        cmd("CONFIG", "GET", "maxmemory-policy"), cmd("CONFIG", "GET", "slowlog-max-len"),
        cmd("CONFIG", "SET", "maxmemory-policy", "volatile-ttl", "slowlog-max-len", "x"),
        cmd("CONFIG", "GET", "maxmemory-policy"),
        cmd("CONFIG", "SET", "slowlog-max-len", "1", "foo", "1"),
        cmd("CONFIG", "SET", "slowlog-max-len", "x", "foo", "1"),
        cmd("CONFIG", "SET", "slowlog-max-len", "1", "slowlog-max-len", "2"),
        cmd("CONFIG", "SET", "SLOWLOG-MAX-LEN", "1", "slowlog-max-len", "2", "foo", "3"),
        cmd("CONFIG", "SET", "databases", "1", "foo", "1"), cmd("CONFIG", "SET", "Databases", "16"),
        cmd("CONFIG", "SET", "daemonize", "yes"),
        cmd("CONFIG", "SET", "foo", "1"), cmd("CONFIG", "SET", "Nope", "1", "timeout", "0"),
        # Arity and syntax.
        cmd("CONFIG", "SET", "timeout"), cmd("CONFIG", "SET"), cmd("CONFIG", "SET", "timeout", "0", "maxclients"),
        cmd("CONFIG", "RESETSTAT", "x"), cmd("CONFIG", "REWRITE", "x"), cmd("CONFIG", "HELP"),
        cmd("CONFIG", "HELP", "x"), cmd("CONFIG", "NOPE"),
        # The operator's and the persistence settings: their current value is accepted,
        # malformed values get Redis's texts.
        cmd("CONFIG", "SET", "timeout", "0"), cmd("CONFIG", "SET", "timeout", "x"),
        cmd("CONFIG", "SET", "timeout", "-1"), cmd("CONFIG", "SET", "maxclients", "0"),
        cmd("CONFIG", "SET", "maxclients", "10000"), cmd("CONFIG", "SET", "save", ""),
        cmd("CONFIG", "SET", "save", "x"), cmd("CONFIG", "SET", "save", "1"),
        cmd("CONFIG", "SET", "appendonly", "no"), cmd("CONFIG", "SET", "appendonly", "maybe"),
        cmd("CONFIG", "SET", "maxmemory", "0"), cmd("CONFIG", "SET", "maxmemory", "0kb"),
        cmd("CONFIG", "SET", "maxmemory", "1x"), cmd("CONFIG", "SET", "maxmemory", "-1"),
        cmd("CONFIG", "SET", "port", "70000"), cmd("CONFIG", "SET", "port", "x"),
        cmd("CONFIG", "GET", "save"), cmd("CONFIG", "GET", "appendonly"), cmd("CONFIG", "GET", "timeout"),
        cmd("CONFIG", "GET", "maxmemory"),
    ])


def test_config_set_resp3_byte_for_byte(redis_door, redis_reference):
    body = [
        cmd("CONFIG", "SET", "notify-keyspace-events", "Ex", "maxmemory-policy", "allkeys-lru"),
        cmd("CONFIG", "GET", "notify-keyspace-events"), cmd("CONFIG", "GET", "maxmemory-policy"),
        cmd("CONFIG", "SET", "maxmemory-policy", "x"), cmd("CONFIG", "HELP"), RESTORE,
    ]
    byte_for_byte(redis_door, redis_reference, body)


def test_config_set_refusals_are_clear(redis_door):
    """What the door refuses where redis-server would change its own behaviour."""
    c = Conn(redis_door)
    try:
        assert c.call("AUTH", USER, PASSWORD) == "OK"
        prefix = "CONFIG SET failed (possibly related to argument '"
        e = c.call("CONFIG", "SET", "timeout", "30")
        assert e.startswith(f"ERR {prefix}timeout') - set by manifold's operator"), e
        e = c.call("CONFIG", "SET", "maxmemory", "1gb")
        assert e.startswith(f"ERR {prefix}maxmemory') - set by manifold's operator"), e
        e = c.call("CONFIG", "SET", "save", "3600 1")
        assert e.startswith(f"ERR {prefix}save') - not supported by manifold: keys are kept in InnoDB"), e
        e = c.call("CONFIG", "SET", "appendonly", "yes")
        assert e.startswith(f"ERR {prefix}appendonly') - not supported by manifold"), e
        # All or none: a refused pair leaves the others as they were.
        e = c.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru", "timeout", "30")
        assert e.startswith(f"ERR {prefix}timeout')"), e
        assert c.call("CONFIG", "GET", "maxmemory-policy") == [b"maxmemory-policy", b"noeviction"]
        e = c.call("CONFIG", "RESETSTAT")
        assert e.startswith("ERR CONFIG RESETSTAT is not supported by manifold"), e
        e = c.call("CONFIG", "REWRITE")
        assert e.startswith("ERR CONFIG REWRITE is not supported by manifold"), e
    finally:
        c.close()


def test_config_set_is_seen_by_every_client(redis_door):
    """Per manifold: another connection (on any worker) reads what one set, INFO included."""
    a, b = Conn(redis_door), Conn(redis_door)
    try:
        for c in (a, b):
            assert c.call("AUTH", USER, PASSWORD) == "OK"
        assert a.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru", "notify-keyspace-events", "Kx") == "OK"
        assert b.call("CONFIG", "GET", "maxmemory-policy") == [b"maxmemory-policy", b"allkeys-lru"]
        assert b.call("CONFIG", "GET", "notify-keyspace-events") == [b"notify-keyspace-events", b"xK"]
        assert "maxmemory_policy:allkeys-lru\r\n" in b.call("INFO", "memory").decode()
        assert b.call("CONFIG", "SET", "maxmemory-policy", "noeviction", "notify-keyspace-events", "") == "OK"
        assert "maxmemory_policy:noeviction\r\n" in a.call("INFO", "memory").decode()
    finally:
        a.close()
        b.close()


def test_clients_start_up_probes(redis_door):
    """redis-py's and Spring-style start-up calls pass: CONFIG SET of keyspace events, INFO,
    CLIENT SETINFO."""
    redis = redis_py()
    for protocol in (2, 3):
        r = redis.Redis(port=redis_door, username=USER, password=PASSWORD, protocol=protocol,
                        socket_timeout=10)
        try:
            assert r.config_set("notify-keyspace-events", "Egx") is True
            got = r.config_get("notify-keyspace-events")
            assert got in ({"notify-keyspace-events": "gxE"}, {b"notify-keyspace-events": b"gxE"}), got
            assert r.config_set("maxmemory-policy", "noeviction") is True
            info = r.info()
            assert info["redis_version"] == "7.0.15" and info["loading"] == 0
            assert r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "redis-py") in (True, b"OK", "OK")
        finally:
            r.config_set("notify-keyspace-events", "")
            r.close()


def headers(text):
    return [line for line in text.split("\r\n") if line.startswith("#")]


def fields(text):
    return dict(line.split(":", 1) for line in text.split("\r\n") if line and not line.startswith("#"))


INFO_ARGS = [(), ("default",), ("all",), ("everything",), ("server", "cpu"), ("CPU", "Server"),
             ("default", "commandstats"), ("errorstats",), ("modules",), ("cluster",),
             ("latencystats",), ("nope",), ("keyspace", "memory"), ("persistence", "replication")]


def test_info_sections_as_redis(redis_door, redis_reference):
    """The same sections, in the same order, for each way of asking (7.0: several at once)."""
    for args in INFO_ARGS:
        got = [Conn(redis_door), Conn(redis_reference)]
        try:
            texts = []
            for c in got:
                assert c.call("AUTH", USER, PASSWORD) == "OK"
                texts.append(c.call("INFO", *args).decode())
            assert headers(texts[0]) == headers(texts[1]), args
            if args == ("nope",):
                assert texts[0] == texts[1] == ""
        finally:
            for c in got:
                c.close()


def test_info_fields_clients_read(redis_door):
    c = Conn(redis_door)
    try:
        assert c.call("AUTH", USER, PASSWORD) == "OK"
        assert c.call("DEL", "srvmore:k", "srvmore:t") == 0 or True
        assert c.call("SET", "srvmore:k", "v") == "OK"
        assert c.call("SET", "srvmore:t", "v", "EX", "1000") == "OK"
        c.call("NOPE")
        c.call("GET")
        c.call("LPUSH", "srvmore:k", "x")
        f = fields(c.call("INFO", "everything").decode())
        ints = ["blocked_clients", "used_memory", "used_memory_peak", "used_memory_rss", "maxmemory",
                "connected_clients", "uptime_in_seconds", "process_id", "rdb_last_save_time",
                "master_repl_offset", "server_time_usec", "total_error_replies"]
        for name in ints:
            assert int(f[name]) >= 0, name
        assert int(f["used_memory"]) > 0 and int(f["used_memory_peak"]) >= int(f["used_memory"])
        assert f["used_memory_human"][-1] in "BKMGTP" and f["used_memory_peak_human"][-1] in "BKMGTP"
        assert float(f["mem_fragmentation_ratio"]) > 0
        assert f["loading"] == "0" and f["aof_enabled"] == "0" and f["rdb_bgsave_in_progress"] == "0"
        assert f["rdb_last_bgsave_status"] == "ok" and f["aof_last_write_status"] == "ok"
        assert f["role"] == "master" and f["connected_slaves"] == "0"
        assert len(f["master_replid"]) == 40 and len(f["run_id"]) == 40 and f["run_id"] == f["master_replid"]
        assert f["cluster_enabled"] == "0"
        for name in ("used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_children"):
            assert float(f[name]) >= 0, name
        assert int(f["errorstat_ERR"].removeprefix("count=")) >= 2
        assert int(f["errorstat_WRONGTYPE"].removeprefix("count=")) >= 1
        assert f["cmdstat_get"].startswith("calls=")
        db0 = dict(kv.split("=") for kv in f["db0"].split(","))
        assert int(db0["keys"]) >= 2 and int(db0["expires"]) >= 1
        # Other tests' keys share db0 (some expire centuries ahead): only the sign is this one's.
        assert int(db0["avg_ttl"]) > 0
        # The errors counted go up by one per error reply, under their code.
        before = int(fields(c.call("INFO", "errorstats").decode())["errorstat_WRONGTYPE"][6:])
        c.call("LPUSH", "srvmore:k", "x")
        after = int(fields(c.call("INFO", "errorstats").decode())["errorstat_WRONGTYPE"][6:])
        assert after == before + 1
        c.call("DEL", "srvmore:k", "srvmore:t")
    finally:
        c.close()


def test_slowlog_and_latency_as_an_empty_redis(redis_door, redis_reference):
    """Nothing recorded on either side (the reference's thresholds are not reached by these
    requests: slowlog-log-slower-than 10 ms, latency monitor off); what other test files
    made the reference record is cleared first."""
    ref = Conn(redis_reference)
    ref.call("AUTH", USER, PASSWORD)
    assert ref.call("SLOWLOG", "RESET") == "OK" and ref.call("LATENCY", "RESET") == 0
    ref.close()
    body = [
        cmd("SLOWLOG", "GET"), cmd("SLOWLOG", "GET", "5"), cmd("SLOWLOG", "GET", "-1"),
        cmd("SLOWLOG", "GET", "-2"), cmd("SLOWLOG", "GET", "x"), cmd("SLOWLOG", "GET", "01"),
        cmd("SLOWLOG", "get", "1", "2"), cmd("SLOWLOG", "LEN"), cmd("SLOWLOG", "LEN", "x"),
        cmd("SLOWLOG", "RESET"), cmd("SLOWLOG", "HELP"), cmd("SLOWLOG", "NOPE"), cmd("SLOWLOG"),
        cmd("LATENCY", "LATEST"), cmd("LATENCY", "LATEST", "x"), cmd("LATENCY", "HISTORY", "command"),
        cmd("LATENCY", "HISTORY"), cmd("LATENCY", "RESET"), cmd("LATENCY", "RESET", "a", "b"),
        cmd("LATENCY", "DOCTOR"), cmd("CONFIG", "SET", "latency-monitor-threshold", "100"),
        cmd("LATENCY", "DOCTOR"), RESTORE, cmd("LATENCY", "HELP"), cmd("LATENCY", "GRAPH", "command"),
        cmd("LATENCY", "NOPE"), cmd("LATENCY"),
    ]
    check(redis_door, redis_reference, body)
    byte_for_byte(redis_door, redis_reference, body)
