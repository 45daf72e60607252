"""FUNCTION LOAD/LIST/DELETE/FLUSH/STATS and FCALL/FCALL_RO against redis-server 7.0,
byte for byte, and the libraries kept in `redis_function`: across a restart and between
manifolds. Intended differences: FUNCTION LIST gives a library's functions in the order
they were registered (Redis: its dict's order, unspecified), so the comparison sorts them;
FUNCTION DUMP/RESTORE are not served (not compared); a library's load has no string methods
(`('x'):rep(3)`: Redis's load reaches them through the string metatable), and a library
change queued in MULTI is refused in place (checked on the door alone)."""

import pytest

from redisdiff import cmd, differential

LIB = "#!lua name=fnlib\nredis.register_function('fn_set', function(k, a) return redis.call('SET', k[1], a[1]) end)\nredis.register_function{function_name='fn_get', callback=function(k, a) return redis.call('GET', k[1]) end, flags={'no-writes'}}"


@pytest.mark.parametrize("pipeline", [True, False])
def test_functions(redis_door, redis_reference, pipeline):
    differential(redis_door, redis_reference, [
        cmd("FUNCTION", "FLUSH"),
        cmd("FCALL", "fn_set", "1", "fn:k", "v"),
        cmd("FUNCTION", "LOAD", LIB),
        cmd("FUNCTION", "LOAD", LIB),
        cmd("FUNCTION", "LOAD", "REPLACE", LIB),
        cmd("FCALL", "fn_set", "1", "fn:k", "v"),
        cmd("FCALL", "fn_get", "1", "fn:k"),
        cmd("FCALL_RO", "fn_get", "1", "fn:k"),
        cmd("FCALL_RO", "fn_set", "1", "fn:k", "w"),
        cmd("FCALL", "fn_get", "x"),
        cmd("FCALL", "fn_get", "-1"),
        cmd("FCALL", "fn_get", "3", "a"),
        cmd("MULTI"), cmd("FCALL", "fn_set", "1", "fn:k", "m"), cmd("FCALL", "nofn", "0"),
        cmd("FCALL_RO", "fn_get", "1", "fn:k"), cmd("FCALL_RO", "fn_set", "1", "fn:k", "w"),
        cmd("EXEC"),
        cmd("FUNCTION", "LIST"),
        cmd("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "fn*"),
        cmd("FUNCTION", "LIST", "bad"),
        cmd("FUNCTION", "STATS"),
        cmd("FUNCTION", "LOAD", "return 1"),
        cmd("FUNCTION", "LOAD", "#!lua name=x\nreturn 1"),
        cmd("FUNCTION", "LOAD", "#!lua name=fnlib2\nx"),
        cmd("FUNCTION", "LOAD", "#!lua name=fnlib2\nredis.register_function('fn_set', function() end)"),
        # A library's load sees `redis` alone, read-only, as Redis's; a last `return` is fine.
        cmd("FUNCTION", "LOAD", "#!lua name=fnmath\nlocal x = math.floor(1)"),
        cmd("FUNCTION", "LOAD", "#!lua name=fnglobal\na = 1"),
        cmd("FUNCTION", "LOAD", "#!lua name=fnret\nredis.log(redis.LOG_NOTICE, 'loading')\n"
            "redis.register_function('fn_ret', function(k, a) return #k + #a end)\nreturn 1"),
        cmd("FCALL", "fn_ret", "1", "fn:k", "a", "b"),
        cmd("FUNCTION", "DELETE", "fnret"),
        cmd("FUNCTION", "HELP"),
        cmd("FUNCTION", "KILL"),
        cmd("FUNCTION", "DELETE", "nolib"),
        cmd("FUNCTION", "DELETE", "fnlib"),
        cmd("FCALL", "fn_get", "1", "fn:k"),
        cmd("FUNCTION", "FLUSH", "bad"),
        cmd("FUNCTION", "FLUSH", "SYNC"),
        cmd("DEL", "fn:k"),
    ], pipeline=pipeline, normalize=_functions_sorted)


def _functions_sorted(request, reply):
    """FUNCTION LIST's functions of each library in name order."""
    if b"LIST" not in request or not isinstance(reply, list):
        return reply
    out = []
    for lib in reply:
        lib = list(lib)
        i = lib.index(b"functions") + 1
        lib[i] = sorted(lib[i], key=lambda f: f[1])
        out.append(lib)
    return out


def _door(topology, cfg, name):
    from conftest import PASSWORD, USER  # noqa: PLC0415
    from redisdiff import Conn, launch_door  # noqa: PLC0415
    m = launch_door(topology, ["--config", str(cfg)], log_name=name)
    c = Conn(m.redis_port)
    assert c.call("AUTH", USER, PASSWORD) == "OK"
    return m, c


def _until(check, what):
    """Polls `check` until it is true (another manifold reads the libraries every second)."""
    import time  # noqa: PLC0415
    deadline = time.monotonic() + 20
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


V1 = "#!lua name=keptlib\nredis.register_function('kept_fn', function(k, a) return 'v1' end)"
V2 = "#!lua name=keptlib\nredis.register_function('kept_fn', function(k, a) return 'v2' end)"


def test_libraries_survive_a_restart_and_reach_every_manifold(topology, tmp_path):
    """A library is kept in `redis_function`: a manifold started later runs it, and another
    manifold on the same tables sees it loaded, replaced and deleted."""
    from redisdiff import Err  # noqa: PLC0415
    cfg = tmp_path / "functions.toml"
    cfg.write_text('[redis]\nschema = "manifold_redis_functions"\n')
    first, a = _door(topology, cfg, "redis-functions-a")
    try:
        a.call("FUNCTION", "FLUSH")
        assert a.call("FUNCTION", "LOAD", V1) == b"keptlib"
        assert a.call("FCALL", "kept_fn", "0") == b"v1"
    finally:
        a.close()
        first.stop_and_check()
    # A restart: the library is there before anyone loads it.
    second, b = _door(topology, cfg, "redis-functions-b")
    third, c = _door(topology, cfg, "redis-functions-c")
    try:
        assert b.call("FCALL", "kept_fn", "0") == b"v1"
        listed = b.call("FUNCTION", "LIST", "WITHCODE")
        assert [lib[1] for lib in listed] == [b"keptlib"] and listed[0][7] == V1.encode()
        assert b.call("FUNCTION", "STATS")[3][1][1] == 1
        # The same tables behind two manifolds: a load, a replace, a delete through one is
        # seen by the other.
        assert c.call("FCALL", "kept_fn", "0") == b"v1"
        assert b.call("FUNCTION", "LOAD", "REPLACE", V2) == b"keptlib"
        _until(lambda: c.call("FCALL", "kept_fn", "0") == b"v2", "the replaced library")
        assert isinstance(c.call("FUNCTION", "LOAD", V1), Err)  # it exists
        assert b.call("FUNCTION", "DELETE", "keptlib") == "OK"
        _until(lambda: isinstance(c.call("FCALL", "kept_fn", "0"), Err), "the deleted library")
        assert c.call("FUNCTION", "LIST") == []
        assert c.call("FUNCTION", "LOAD", V1) == b"keptlib"
        assert b.call("FCALL", "kept_fn", "0") == b"v1"  # not known there yet: read at the call
        # The same function name in another library is refused by the table's state, not
        # only by this manifold's.
        other = "#!lua name=otherlib\nredis.register_function('kept_fn', function() return 1 end)"
        assert b.call("FUNCTION", "LOAD", other) == Err("ERR Function kept_fn already exists")
        # Checked against the table, not only this manifold's memory: a library loaded
        # through c and at once clashed with through b (which has not read it yet).
        fresh = "#!lua name=freshlib\nredis.register_function('fresh_fn', function() return 2 end)"
        clash = "#!lua name=clashlib\nredis.register_function('fresh_fn', function() return 3 end)"
        assert c.call("FUNCTION", "LOAD", fresh) == b"freshlib"
        assert b.call("FUNCTION", "LOAD", clash) == Err("ERR Function fresh_fn already exists")
        # A change queued in MULTI is refused in place (it could not roll back with EXEC).
        assert b.call("MULTI") == "OK"
        assert b.call("FUNCTION", "DELETE", "freshlib") == "QUEUED"
        assert b.call("FCALL", "fresh_fn", "0") == "QUEUED"
        got = b.call("EXEC")
        assert isinstance(got[0], Err) and "not served inside MULTI" in got[0] and got[1] == 2, got
        assert c.call("FUNCTION", "FLUSH") == "OK"
        _until(lambda: b.call("FUNCTION", "STATS")[3][1][1] == 0, "the flush")
    finally:
        for conn in (b, c):
            conn.close()
        second.stop_and_check()
        third.stop_and_check()
