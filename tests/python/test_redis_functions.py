"""FUNCTION LOAD/LIST/DELETE/FLUSH/STATS and FCALL/FCALL_RO against redis-server 7.0,
byte for byte, and the libraries kept in `redis_function`: across a restart and between
manifolds. Intended differences: FUNCTION LIST gives a library's functions in the order
they were registered and the libraries in their own order (Redis: its dicts' orders,
unspecified), so the comparison sorts them;
FUNCTION DUMP's payload is not compared (redis-server compresses long code with LZF, the
door writes it plain: each restores the other's); a library's load has no string methods
(`('x'):rep(3)`: Redis's load reaches them through the string metatable), and a library
change (RESTORE too) queued in MULTI is refused in place (checked on the door alone)."""

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
    """FUNCTION LIST's libraries, and the functions of each, in name order (Redis: its
    dicts' orders)."""
    if b"LIST" not in request or not isinstance(reply, list):
        return reply
    out = []
    for lib in reply:
        lib = list(lib)
        i = lib.index(b"functions") + 1
        lib[i] = sorted(lib[i], key=lambda f: f[1])
        out.append(lib)
    return sorted(out, key=lambda lib: lib[1])


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


def _crc64_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x95AC9329AC4BC9B5 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC64 = _crc64_table()


def _crc64(data):
    """Redis's CRC-64/Jones (reflected), as its DUMP payloads' footer."""
    crc = 0
    for b in data:
        crc = _CRC64[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def _payload(body):
    """A FUNCTION DUMP payload of `body`: RDB version 10 and the checksum after it."""
    body += b"\x0a\x00"
    return body + _crc64(body).to_bytes(8, "little")


def _library(code):
    """One library of a payload: RDB_OPCODE_FUNCTION2 and its code as a raw RDB string."""
    code = code.encode()
    assert len(code) < 1 << 14
    return b"\xf5" + bytes([0x40 | len(code) >> 8, len(code) & 0xFF]) + code


RA = "#!lua name=rlib_a\nredis.register_function('ra_get', function(k, a) return 'a:' .. (redis.call('GET', k[1]) or '') end)\nredis.register_function('ra_two', function() return 2 end)"
RA2 = "#!lua name=rlib_a\nredis.register_function('ra_new', function() return 'new' end)"
RB = "#!lua name=rlib_b\nredis.register_function{function_name='rb_ro', callback=function() return 'b' end, flags={'no-writes'}}"
RC = "#!lua name=rlib_c\nredis.register_function('ra_two', function() return 'c' end)"


def _dumps(port, *codes):
    """The reference's FUNCTION DUMP of exactly the libraries `codes`."""
    from conftest import PASSWORD, USER  # noqa: PLC0415
    from redisdiff import Conn  # noqa: PLC0415
    c = Conn(port)
    try:
        assert c.call("AUTH", USER, PASSWORD) == "OK"
        assert c.call("FUNCTION", "FLUSH") == "OK"
        for code in codes:
            assert not isinstance(c.call("FUNCTION", "LOAD", code), Exception)
        payload = c.call("FUNCTION", "DUMP")
        assert c.call("FUNCTION", "FLUSH") == "OK"
        return payload
    finally:
        c.close()


@pytest.mark.parametrize("pipeline", [True, False])
def test_function_restore(redis_door, redis_reference, pipeline):
    """FUNCTION RESTORE of redis-server's own FUNCTION DUMP payloads, each policy, and every
    refusal, byte for byte."""
    both = _dumps(redis_reference, RA, RB)
    a = _dumps(redis_reference, RA)
    a2 = _dumps(redis_reference, RA2)
    c = _dumps(redis_reference, RC)
    empty = _dumps(redis_reference)
    bad_crc = a[:-1] + bytes([a[-1] ^ 1])
    newer = _payload(_library(RB))[:-10] + b"\x0b\x00"
    newer += _crc64(newer).to_bytes(8, "little")
    differential(redis_door, redis_reference, [
        cmd("FUNCTION", "FLUSH"),
        cmd("FUNCTION", "RESTORE", both),
        cmd("FUNCTION", "LIST", "WITHCODE"),
        cmd("FCALL", "ra_get", "1", "fr:k"),
        cmd("FCALL_RO", "rb_ro", "0"),
        # APPEND (the default): an existing library refuses the whole payload.
        cmd("FUNCTION", "RESTORE", a),
        cmd("FUNCTION", "RESTORE", a2, "append"),
        # REPLACE: rlib_a's new code, its old functions gone.
        cmd("FUNCTION", "RESTORE", a2, "REPLACE"),
        cmd("FCALL", "ra_new", "0"),
        cmd("FCALL", "ra_two", "0"),
        cmd("FUNCTION", "RESTORE", a, "REPLACE"),
        # A function of another library: refused, whatever the policy but FLUSH.
        cmd("FUNCTION", "RESTORE", c),
        cmd("FUNCTION", "RESTORE", c, "REPLACE"),
        cmd("FUNCTION", "LIST"),
        cmd("FUNCTION", "RESTORE", c, "FLUSH"),
        cmd("FUNCTION", "LIST", "WITHCODE"),
        cmd("FCALL", "ra_two", "0"),
        cmd("FUNCTION", "RESTORE", empty, "APPEND"),
        cmd("FUNCTION", "STATS"),
        # Refusals: arguments, policy, footer, content.
        cmd("FUNCTION", "RESTORE"),
        cmd("FUNCTION", "RESTORE", a, "FLUSH", "x"),
        cmd("FUNCTION", "restore", a, "bad"),
        cmd("FUNCTION", "RESTORE", "bad", "bad"),
        cmd("FUNCTION", "RESTORE", "short"),
        cmd("FUNCTION", "RESTORE", bad_crc),
        cmd("FUNCTION", "RESTORE", newer),
        cmd("FUNCTION", "RESTORE", _payload(b"\x00\x03abc")),
        cmd("FUNCTION", "RESTORE", _payload(b"\xf5\x10ab")),
        cmd("FUNCTION", "RESTORE", _payload(_library("return 1"))),
        cmd("FUNCTION", "RESTORE", _payload(_library("#!lua name=rbad\nreturn 1"))),
        cmd("FUNCTION", "RESTORE", _payload(_library("#!lua name=rbad\nx"))),
        cmd("FUNCTION", "RESTORE", _payload(_library(RB) + _library(RB))),
        cmd("FUNCTION", "RESTORE", _payload(_library(RA) + _library(RC)), "FLUSH"),
        cmd("FUNCTION", "RESTORE", _payload(_library(RB) + _library("return 1")), "FLUSH"),
        # Nothing of a refused payload was kept.
        cmd("FUNCTION", "LIST", "WITHCODE"),
        cmd("FUNCTION", "RESTORE", empty, "FLUSH"),
        cmd("FUNCTION", "LIST"),
        cmd("DEL", "fr:k"),
    ], pipeline=pipeline, normalize=_functions_sorted)


def test_function_dump_goes_both_ways(redis_door, redis_reference):
    """The door's FUNCTION DUMP restores into redis-server and redis-server's into the
    door: the same libraries (FUNCTION LIST WITHCODE), the same FCALL replies; FUNCTION
    RESTORE queued in MULTI is refused in place on the door (as LOAD)."""
    from conftest import PASSWORD, USER  # noqa: PLC0415
    from redisdiff import Conn, Err  # noqa: PLC0415
    door, ref = Conn(redis_door), Conn(redis_reference)
    try:
        for c in (door, ref):
            assert c.call("AUTH", USER, PASSWORD) == "OK"
            assert c.call("FUNCTION", "FLUSH") == "OK"
        for code in (RA, RB):
            assert not isinstance(door.call("FUNCTION", "LOAD", code), Err)
        payload = door.call("FUNCTION", "DUMP")
        assert ref.call("FUNCTION", "RESTORE", payload) == "OK"
        want = _functions_sorted(b"LIST", door.call("FUNCTION", "LIST", "WITHCODE"))
        assert _functions_sorted(b"LIST", ref.call("FUNCTION", "LIST", "WITHCODE")) == want
        assert len(want) == 2
        assert ref.call("FCALL", "ra_two", "0") == door.call("FCALL", "ra_two", "0") == 2
        # Back: redis-server's payload (LZF-compressed code) restored into the door.
        back = ref.call("FUNCTION", "DUMP")
        assert door.call("FUNCTION", "RESTORE", back, "FLUSH") == "OK"
        assert _functions_sorted(b"LIST", door.call("FUNCTION", "LIST", "WITHCODE")) == want
        assert door.call("FCALL_RO", "rb_ro", "0") == b"b"
        # An empty door's dump restores as nothing, on both.
        assert door.call("FUNCTION", "FLUSH") == "OK"
        none = door.call("FUNCTION", "DUMP")
        assert len(none) == 10
        assert ref.call("FUNCTION", "RESTORE", none, "FLUSH") == "OK"
        assert ref.call("FUNCTION", "LIST") == []
        # In MULTI: refused in place, the rest of the transaction runs.
        assert door.call("MULTI") == "OK"
        assert door.call("FUNCTION", "RESTORE", back) == "QUEUED"
        assert door.call("FUNCTION", "DUMP") == "QUEUED"
        got = door.call("EXEC")
        assert isinstance(got[0], Err) and "not served inside MULTI" in got[0], got
        assert got[1] == none, got
        assert door.call("FUNCTION", "LIST") == []
    finally:
        door.close()
        ref.close()


def test_function_restore_keeps_the_libraries_bounds(redis_door):
    """The door's bounds hold for FUNCTION RESTORE: more than 1,000 libraries, or one of
    more than 1 MiB, refuse the whole payload (door only: redis-server has no such bound)."""
    from conftest import PASSWORD, USER  # noqa: PLC0415
    from redisdiff import Conn, Err  # noqa: PLC0415
    door = Conn(redis_door)
    try:
        assert door.call("AUTH", USER, PASSWORD) == "OK"
        assert door.call("FUNCTION", "FLUSH") == "OK"
        many = b"".join(_library(f"#!lua name=bl{i}\nredis.register_function('bf{i}', function() return 1 end)")
                        for i in range(1001))
        assert door.call("FUNCTION", "RESTORE", _payload(many)) == Err(
            "ERR manifold: at most 1000 libraries are loaded")
        huge = ("#!lua name=bhuge\n" + "-" * (1 << 20)).encode()
        body = b"\xf5\x80" + len(huge).to_bytes(4, "big") + huge
        assert door.call("FUNCTION", "RESTORE", _payload(body)) == Err(
            "ERR manifold: a library's code is at most 1048576 bytes")
        assert door.call("FUNCTION", "LIST") == []
    finally:
        door.close()


ERRLIB = """#!lua name=fnerr
redis.register_function('fe_error', function() error('boom') end)
redis.register_function('fe_nil', function()
  local x = nil
  x()
end)
redis.register_function('fe_unknown', function() return redis.call('nosuchcmd') end)
redis.register_function('fe_reply', function() return redis.error_reply('MY custom') end)
redis.register_function('fe_table', function() error({err='XYZ from a table'}) end)
redis.register_function('fe_wrongtype', function(k) redis.call('SET', k[1], '1') return redis.call('LPUSH', k[1], '1') end)
redis.register_function('fe_pcall', function() return redis.pcall('nosuchcmd') end)
redis.register_function('fe_global', function() return undefined_name end)
redis.register_function('fe_write_global', function() new_name = 1 end)
redis.register_function('fe_level0', function() error('plain', 0) end)
redis.register_function('fe_level2', function() error('the caller', 2) end)
redis.register_function('fe_args', function() return redis.call('GET', {}) end)
redis.register_function('fe_nothing', function() error() end)
redis.register_function('fe_arith', function() return 1 + {} end)"""


@pytest.mark.parametrize("pipeline", [True, False])
def test_function_runtime_errors(redis_door, redis_reference, pipeline):
    """A runtime error inside an FCALL'd function names the function and `@user_function`
    (`script: <function>, on @user_function:<line>.`), where EVAL's names its SHA1 and
    `@user_script`; both side by side, byte for byte."""
    calls = [cmd("FCALL", f, "1", "fe:k") for f in (
        "fe_error", "fe_nil", "fe_unknown", "fe_reply", "fe_table", "fe_wrongtype",
        "fe_pcall", "fe_global", "fe_write_global", "fe_level0", "fe_level2", "fe_args",
        "fe_nothing", "fe_arith")]
    differential(redis_door, redis_reference, [
        cmd("FUNCTION", "FLUSH"),
        cmd("FUNCTION", "LOAD", ERRLIB),
        *calls,
        cmd("FCALL_RO", "fe_error", "0"),
        cmd("EVAL", "error('boom')", "0"),
        cmd("EVAL", "local x = nil\nx()", "0"),
        cmd("EVAL", "return redis.call('nosuchcmd')", "0"),
        # In MULTI, as outside.
        cmd("MULTI"), cmd("FCALL", "fe_error", "0"), cmd("FCALL", "fe_nil", "0"), cmd("EXEC"),
        cmd("FUNCTION", "FLUSH"),
        cmd("DEL", "fe:k"),
    ], pipeline=pipeline)


ROLIB = """#!lua name=fnro
redis.register_function('fr_field', function() string.upper = nil return 1 end)
redis.register_function('fr_global', function() planted = 1 return 1 end)
redis.register_function('fr_rawset', function() rawset(string, 'upper', string.lower) return 1 end)
redis.register_function('fr_rawset_g', function() rawset(_G, 'planted', 1) return 1 end)
redis.register_function('fr_insert', function() table.insert(redis, 'x') return 1 end)
redis.register_function('fr_meta', function() getmetatable('').__index.upper = nil return 1 end)
redis.register_function('fr_setmeta', function() setmetatable(math, {}) return 1 end)
redis.register_function('fr_pcall', function() return {pcall(rawset, cjson, 'x', 1)} end)
redis.register_function('fr_read', function()
  local n = 0
  for _ in pairs(string) do n = n + 1 end
  return {n, type(rawget(string, 'find')), tostring(getmetatable('').__index == string),
          ('a'):upper(), rawget(_G, 'planted')}
end)"""


@pytest.mark.parametrize("pipeline", [True, False])
def test_function_shared_tables_are_read_only(redis_door, redis_reference, pipeline):
    """An FCALL'd function sees the globals and libraries read-only, as EVAL's scripts and
    as Redis's functions: a write fails with Redis's error (at the function's line), and
    the next call reads the libraries unchanged."""
    calls = [cmd("FCALL", f, "0") for f in (
        "fr_field", "fr_global", "fr_rawset", "fr_rawset_g", "fr_insert", "fr_meta",
        "fr_setmeta", "fr_pcall")]
    differential(redis_door, redis_reference, [
        cmd("FUNCTION", "FLUSH"),
        cmd("FUNCTION", "LOAD", ROLIB),
        *[c for call in calls for c in (call, cmd("FCALL", "fr_read", "0"))],
        # At FUNCTION LOAD, as Redis's load: `redis` and the globals read-only.
        cmd("FUNCTION", "LOAD", "#!lua name=fnro2\nredis.register_function = nil"),
        cmd("FUNCTION", "LOAD", "#!lua name=fnro2\nredis.x = 1"),
        cmd("FUNCTION", "LOAD", "#!lua name=fnro2\nredis = nil"),
        cmd("FUNCTION", "LOAD", "#!lua name=fnro2\nlocal x = rawset"),
        # The version, at load and in a call.
        cmd("FUNCTION", "LOAD", "#!lua name=fnver\nlocal v = redis.REDIS_VERSION .. redis.REDIS_VERSION_NUM\n"
            "redis.register_function('fv', function() return {v, redis.REDIS_VERSION_NUM} end)"),
        cmd("FCALL", "fv", "0"),
        cmd("FUNCTION", "FLUSH"),
    ], pipeline=pipeline)


BUSY = """#!lua name=fkill
redis.register_function{function_name='fk_busy', callback=function()
  local i = 0
  while true do
    i = i + 1
  end
end, flags={'no-writes'}}"""


def test_function_kill_names_the_function(redis_door, redis_reference):
    """An FCALL stopped by FUNCTION KILL answers Redis's text, which names the function and
    `@user_function` (EVAL's: the SHA1 and `@user_script`), on the door as on redis-server."""
    import time  # noqa: PLC0415

    from conftest import PASSWORD, USER  # noqa: PLC0415
    from redisdiff import Conn, Err, read_reply  # noqa: PLC0415
    got = []
    for port in (redis_door, redis_reference):
        busy, other = Conn(port), Conn(port)
        try:
            for c in (busy, other):
                assert c.call("AUTH", USER, PASSWORD) == "OK"
            assert not isinstance(other.call("FUNCTION", "LOAD", "REPLACE", BUSY), Err)
            busy.send(cmd("FCALL", "fk_busy", "0"))
            for _ in range(1000):
                if other.call("FUNCTION", "KILL") == "OK":
                    break
                time.sleep(0.01)
            else:
                raise AssertionError("the function never ran")
            got.append(read_reply(busy.f))
            assert other.call("FUNCTION", "DELETE", "fkill") == "OK"
        finally:
            busy.close()
            other.close()
    assert got[0] == got[1] == "ERR Script killed by user with SCRIPT KILL... script: fk_busy, on @user_function:5.", got


def _load(first_line, fn):
    return cmd("FUNCTION", "LOAD", f"{first_line}\nredis.register_function('{fn}', function() return '{fn}' end)")


@pytest.mark.parametrize("pipeline", [True, False])
def test_function_command_texts(redis_door, redis_reference, pipeline):
    """FUNCTION LOAD's library metadata (`#!<engine> name=<lib>`, read as redis-server's
    `sdssplitargs` reads it), FUNCTION LIST's, LOAD's, FLUSH's, DELETE's and RESTORE's
    argument errors and arities, and LIBRARYNAME's pattern matched in any case, byte for
    byte."""
    differential(redis_door, redis_reference, [
        cmd("FUNCTION", "FLUSH"),
        # Metadata.
        cmd("FUNCTION", "LOAD", ""),
        cmd("FUNCTION", "LOAD", "#!"),
        cmd("FUNCTION", "LOAD", "#!\n"),
        cmd("FUNCTION", "LOAD", "#!lua name=nonl"),
        cmd("FUNCTION", "LOAD", b"#!lua name=nul\x00\nredis.register_function('f', function() end)"),
        _load("#!lua", "m_a"),
        _load("#!lua name=a name=b", "m_a"),
        _load("#!lua Name=a NAME=b", "m_a"),
        _load("#!lua name=a foo=b", "m_a"),
        _load("#!lua name=a description=x", "m_a"),
        _load("#!lua foo", "m_a"),
        _load("#! lua name=a", "m_a"),
        _load("#!lua name=", "m_a"),
        _load("#!lua name=a-b", "m_a"),
        _load("#!lua name=a\\x41b", "m_a"),
        _load("#!lua name=\"unbalanced", "m_a"),
        _load("#!lua name=\"a\"b", "m_a"),
        _load("#!python name=a", "m_a"),
        _load("#!python", "m_a"),
        _load("#!python name=a-b", "m_a"),
        cmd("FUNCTION", "LOAD", "#!lua name=empty\n"),
        # The load's errors and redis.register_function's, in Redis's order.
        *[cmd("FUNCTION", "LOAD", "#!lua name=le\n" + code) for code in (
            "error('boom')",
            "local x = nil\nx()",
            "redis.call('ping')",
            "redis.register_function()",
            "redis.register_function('a', function() end, 1)",
            "redis.register_function('f')",
            "redis.register_function('a-b', function() end)",
            "redis.register_function('f', 1)",
            "redis.register_function({}, function() end)",
            "redis.register_function{[{}]=1}",
            "redis.register_function{function_name={}}",
            "redis.register_function{function_name='f', description={}}",
            "redis.register_function{function_name='f', callback=1}",
            "redis.register_function{function_name='f', flags=1}",
            "redis.register_function{function_name='f', flags={'bad'}}",
            "redis.register_function{function_name='f', flags={{}}}",
            "redis.register_function{function_name='f', other=1}",
            "redis.register_function{callback=function() end}",
            "redis.register_function{function_name='f'}",
            "redis.register_function('f', function() end)\nredis.register_function('f', function() end)",
        )],
        # Keys and flags in any case; a number is a string.
        cmd("FUNCTION", "LOAD", "#!lua name=le\nredis.register_function{FUNCTION_NAME='le_f', "
            "Callback=function() return 'le' end, flags={'NO-WRITES'}}\n"
            "redis.register_function(12, function() return 12 end)"),
        cmd("FCALL_RO", "le_f", "0"),
        cmd("FCALL", "12", "0"),
        # Accepted: the engine's and the key's case, any space, quotes and escapes.
        _load("#!LUA name=MixedCase", "m_upper"),
        _load("#!lua NAME=m_key", "m_key"),
        _load("#!lua\tname=m_tab  \r", "m_tab"),
        _load("#!lua name=\"m_x\\x41y\"", "m_quoted"),
        _load("#!lua 'name=m_single'", "m_single"),
        cmd("FCALL", "m_quoted", "0"),
        # LOAD's options: REPLACE any number of times, nothing else.
        cmd("FUNCTION", "LOAD", "REPLACE", "REPLACE", "#!lua name=m_key\nredis.register_function('m_key', function() return 2 end)"),
        cmd("FUNCTION", "LOAD", "replace", "Replace", "replace", "#!lua name=m_key\nredis.register_function('m_key', function() return 3 end)"),
        cmd("FCALL", "m_key", "0"),
        cmd("FUNCTION", "LOAD", "bogus", "#!lua name=m_key\nredis.register_function('m_key', function() end)"),
        cmd("FUNCTION", "LOAD", "REPLACE", "bogus", "x"),
        cmd("FUNCTION", "LOAD", "bogus", "REPLACE", "x"),
        cmd("FUNCTION", "LOAD", "REPLACE"),
        cmd("FUNCTION", "LOAD"),
        # LIST: each option once, the pattern in any case.
        cmd("FUNCTION", "LIST", "LIBRARYNAME", "mixedcase"),
        cmd("FUNCTION", "LIST", "libraryname", "MIXED*"),
        cmd("FUNCTION", "LIST", "LIBRARYNAME", "m_[K]ey", "WITHCODE"),
        cmd("FUNCTION", "LIST", "LIBRARYNAME", "m_xAY"),
        cmd("FUNCTION", "LIST", "WITHCODE", "WITHCODE"),
        cmd("FUNCTION", "LIST", "withcode", "libraryname", "x", "WITHCODE"),
        cmd("FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME", "b"),
        cmd("FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME"),
        cmd("FUNCTION", "LIST", "LIBRARYNAME"),
        cmd("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME"),
        cmd("FUNCTION", "LIST", "LIBRARYNAME", "*", "bogus"),
        cmd("FUNCTION", "LIST", ""),
        # DELETE, FLUSH, RESTORE and the others' arities.
        cmd("FUNCTION", "DELETE", "mixedcase"),
        cmd("FUNCTION", "DELETE", "nolib"),
        cmd("FUNCTION", "DELETE"),
        cmd("FUNCTION", "DELETE", "a", "b"),
        cmd("FUNCTION", "FLUSH", "SYNC", "extra"),
        cmd("FUNCTION", "flush", "a", "b", "c"),
        cmd("FUNCTION", "FLUSH", "lazy"),
        cmd("FUNCTION", "FLUSH", ""),
        cmd("FUNCTION", "RESTORE"),
        cmd("FUNCTION", "RESTORE", "x", "badpolicy"),
        cmd("FUNCTION", "Restore", "x", "FLUSH", "y"),
        cmd("FUNCTION", "RESTORE", "x"),
        cmd("FUNCTION", "DUMP", "x"),
        cmd("FUNCTION", "STATS", "x"),
        cmd("FUNCTION", "KILL", "x"),
        cmd("FUNCTION", "HELP", "x"),
        cmd("FUNCTION", "BOGUS"),
        cmd("FUNCTION"),
        cmd("FCALL", "m_key"),
        cmd("FCALL", "m_key", "1"),
        cmd("FCALL", "m_key", "-1"),
        cmd("FCALL", "m_key", "99999999999999999999"),
        cmd("FCALL", "nofn", "x"),
        cmd("FUNCTION", "LIST"),
        cmd("FUNCTION", "FLUSH"),
    ], pipeline=pipeline, normalize=_functions_sorted)


GOOD = "#!lua name=rows_good\nredis.register_function('rows_good_fn', function() return 'good' end)"
BROKEN = "#!lua name=rows_broken\nredis.register_function('rows_broken_fn', function() return 'broken' end)"
LYING = "#!lua name=rows_lying\nredis.register_function('rows_lying_fn', function() return 'lying' end)"


def test_rows_edited_by_hand(topology, tmp_path):
    """Rows of `redis_function` edited through SQL: the code is the truth. A row whose code
    no longer loads, declares another library, or registers a function an earlier library
    (by name) has, is left out with a warning; a `functions` column that is not what the
    code registers is warned of and the code's functions are served; a code edited
    without its `code_sha` is read again. Nothing else is disturbed."""
    from redisdiff import Err  # noqa: PLC0415
    schema = "manifold_redis_fn_rows"
    cfg = tmp_path / "rows.toml"
    cfg.write_text(f'[redis]\nschema = "{schema}"\n')
    m, c = _door(topology, cfg, "redis-function-rows")
    try:
        assert c.call("FUNCTION", "FLUSH") == "OK"
        for code in (GOOD, BROKEN, LYING):
            assert not isinstance(c.call("FUNCTION", "LOAD", code), Err)
        assert c.call("FCALL", "rows_broken_fn", "0") == b"broken"
        other = "#!lua name=rows_zz_other\nredis.register_function('rows_good_fn', function() return 'other' end)"
        thief = "#!lua name=rows_aa_thief\nredis.register_function('rows_lying_fn', function() return 'thief' end)"
        with topology.root() as r, r.cursor() as cur:
            # A code that no longer compiles (its code_sha left as it was).
            cur.execute(f"UPDATE {schema}.redis_function SET code = %s WHERE name = 'rows_broken'",
                        ("#!lua name=rows_broken\nthis is not lua",))
            # A functions column naming functions the code does not register.
            cur.execute(f"UPDATE {schema}.redis_function SET functions = 'ghost_fn\nrows_lying_fn no-writes\n'"
                        " WHERE name = 'rows_lying'")
            # A row whose code declares another library, one whose name is not a library's,
            # and one registering a function that `rows_good` (earlier by name) has.
            for name, code in (("rows_misnamed", GOOD), ("rows bad name", GOOD), ("rows_zz_other", other)):
                cur.execute(f"INSERT INTO {schema}.redis_function (name, code, code_sha, functions)"
                            " VALUES (%s, %s, SHA1(%s), 'x\n')", (name, code, code))
            # A row registering a function a later library (by name) has: it is kept, and
            # that one left out.
            cur.execute(f"INSERT INTO {schema}.redis_function (name, code, code_sha, functions)"
                        " VALUES ('rows_aa_thief', %s, SHA1(%s), '')", (thief, thief))
            cur.execute(f"UPDATE {schema}.redis_meta SET value = value + 1 WHERE name = 'functions_version'")
        listed = c.call("FUNCTION", "LIST")
        names = sorted(lib[1] for lib in listed)
        assert names == [b"rows_aa_thief", b"rows_good"], listed
        assert c.call("FCALL", "rows_good_fn", "0") == b"good"
        assert c.call("FCALL", "rows_aa_thief", "0") == Err("ERR Function not found")
        assert c.call("FCALL", "rows_lying_fn", "0") == b"thief"
        assert c.call("FCALL", "ghost_fn", "0") == Err("ERR Function not found")
        assert c.call("FCALL", "rows_broken_fn", "0") == Err("ERR Function not found")
        assert c.call("FUNCTION", "STATS")[3][1] == [b"libraries_count", 2, b"functions_count", 2]
        # The table is the door's again: a library left out is loaded anew, a change goes
        # through the others, FLUSH deletes every row.
        assert c.call("FUNCTION", "DELETE", "rows_broken") == Err("ERR Library not found")
        assert c.call("FUNCTION", "LOAD", BROKEN) == b"rows_broken"
        assert c.call("FCALL", "rows_broken_fn", "0") == b"broken"
        assert c.call("FUNCTION", "DELETE", "rows_aa_thief") == "OK"
        assert c.call("FUNCTION", "LOAD", "REPLACE", LYING) == b"rows_lying"
        assert c.call("FCALL", "rows_lying_fn", "0") == b"lying"
        assert c.call("FUNCTION", "FLUSH") == "OK"
        with topology.root() as r, r.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {schema}.redis_function")
            assert cur.fetchone()[0] == 0
        log = m.log_text()
        assert "rows_broken" in log and "does not hold a library that loads" in log, log
        assert "rows_misnamed" in log and "declares library 'rows_good'" in log, log
        assert "the functions column of a redis_function row is not what its code registers" in log, log
        assert "registers a function another has" in log, log
    finally:
        c.close()
        m.stop_and_check()
