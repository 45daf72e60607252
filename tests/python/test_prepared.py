"""Prepared statements, virtualised: a client's statement is manifold's, prepared on whichever
backend connection runs it, kept there for every session preparing the same text, and closed
least-recently-used first when a connection holds too many.

Each scenario is a function of a port that speaks the binary protocol in raw packets; it runs
against MariaDB directly and through a manifold with a tiny pool, and both must answer the
same (results and error codes alike)."""

import struct

import pytest

import rawmysql
from conftest import configured, native_hash

POOL_TIMEOUT = 7703


def small_pool_config(account, max_size, keep):
    name, password = account
    return f"""
[engine]
threads = 1

[pool]
min_idle = 0
max_size = {max_size}
wait_timeout = "1s"
max_prepared_statements = {keep}

[[users]]
name = "{name}"
password_native = "{native_hash(password)}"
backend_password = "{password}"
"""


@pytest.fixture
def small(topology, tmp_path, mariadb_account, request):
    """A manifold with one worker; (pool.max_size, pool.max_prepared_statements) from the
    test's parameter, (2, 2) by default."""
    max_size, keep = getattr(request, "param", (2, 2))
    m = configured(topology, tmp_path, small_pool_config(mariadb_account, max_size, keep),
                   "manifold-prepared")
    m.account = mariadb_account
    yield m
    m.stop_and_check()


def raw(port, account, database=None, caps=rawmysql.DEFAULT_CAPS):
    name, password = account
    return rawmysql.connect(port, user=name, password=password, database=database, caps=caps)


def error_code(fn, *args):
    try:
        fn(*args)
    except rawmysql.MySQLError as e:
        return e.code
    return None


def global_status(topology, name):
    with topology.root() as r:
        cur = r.cursor()
        cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
        return int(cur.fetchone()[1])


def rows(results):
    kind, _names, r = results[-1]
    assert kind == "rows", results
    return r


def sessions_sharing_one_statement(port, account, schema):
    """Two sessions with different time zones prepare the same text; one binds a string, the
    other an integer, then both execute many times sending no types (as libmariadb does after
    the first execute). A third session keeps opening and closing a transaction, so the other
    two move between connections."""
    a, b, c = (raw(port, account, schema) for _ in range(3))
    a.query("SET time_zone = '+03:00'")
    b.query("SET time_zone = '+05:00'")
    sql = "SELECT CONCAT(?, '|', @@session.time_zone)"
    sa, _, _ = a.prepare(sql)
    sb, _, _ = b.prepare(sql)
    out = [rows(a.execute(sa, ["a-first"]))[0][0], rows(b.execute(sb, [7]))[0][0]]
    for i in range(30):
        if i % 3 == 0:
            c.query("BEGIN")
            c.query("SELECT 1")
        elif i % 3 == 2:
            c.query("COMMIT")
        out.append(rows(a.execute(sa, [f"a{i}"], send_types=False))[0][0])
        out.append(rows(b.execute(sb, [i], send_types=False))[0][0])
    for conn in (a, b, c):
        conn.quit()
    return out


def test_sessions_share_statements_and_keep_their_own_types_and_state(topology, small, schema):
    want = ["a-first|+03:00", "7|+05:00"]
    for i in range(30):
        want += [f"a{i}|+03:00", f"{i}|+05:00"]
    assert sessions_sharing_one_statement(topology.primary_port, small.account, schema) == want
    assert sessions_sharing_one_statement(small.port, small.account, schema) == want


@pytest.mark.parametrize("small", [(1, 2)], indirect=True)
def test_least_recently_used_statements_are_closed_on_the_backend(topology, small, schema):
    """pool.max_size 1, pool.max_prepared_statements 2: five statements executed in turn all
    answer right, while the backend connection never holds more than two of them."""
    closes, held = global_status(topology, "Com_stmt_close"), global_status(topology, "Prepared_stmt_count")
    c = raw(small.port, small.account, schema)
    ids = [c.prepare(f"SELECT ? + {k}")[0] for k in range(5)]
    for round_ in range(4):
        for k, sid in enumerate(ids):
            got = rows(c.execute(sid, [100 * round_], send_types=(round_ == 0)))[0][0]
            assert got == str(100 * round_ + k), (round_, k)
        assert global_status(topology, "Prepared_stmt_count") - held <= 2
    assert global_status(topology, "Com_stmt_close") - closes >= 3 * 4
    c.quit()


def cursor_scenario(port, account, schema, caps):
    """A cursor opened by one session: fetched in two steps to its end; a fetch after the end
    and one on a statement without a cursor fail as on the server."""
    a = raw(port, account, schema, caps)
    sid, _, _ = a.prepare("SELECT seq, CONCAT('row', seq) FROM seq_1_to_5")
    first = a.execute(sid, cursor=True)
    assert first[-1][0] == "cursor", first
    part1, st1 = a.fetch(sid, 2)
    part2, st2 = a.fetch(sid, 10)
    after_end = error_code(a.fetch, sid, 1)
    plain, _, _ = a.prepare("SELECT 1")
    rows(a.execute(plain))
    no_cursor = error_code(a.fetch, plain, 1)
    a.quit()
    return (part1, bool(st1 & rawmysql.SERVER_STATUS_LAST_ROW_SENT), part2,
            bool(st2 & rawmysql.SERVER_STATUS_LAST_ROW_SENT), after_end, no_cursor)


@pytest.mark.parametrize("caps", [rawmysql.DEFAULT_CAPS, rawmysql.DEFAULT_CAPS | rawmysql.CLIENT_DEPRECATE_EOF],
                         ids=["eof", "deprecate-eof"])
@pytest.mark.parametrize("small", [(1, 2)], indirect=True)
def test_open_cursor_pins_until_fetched_to_the_end(topology, small, schema, caps):
    want = ([("1", "row1"), ("2", "row2")], False, [("3", "row3"), ("4", "row4"), ("5", "row5")], True,
            1421, 1421)
    assert cursor_scenario(topology.primary_port, small.account, schema, caps) == want
    assert cursor_scenario(small.port, small.account, schema, caps) == want
    # While a cursor is open the session holds the only backend connection.
    # b's text queries use classic EOF packets whatever a's flags (another pool key, same pool).
    a, b = raw(small.port, small.account, schema, caps), raw(small.port, small.account, schema)
    sid, _, _ = a.prepare("SELECT seq FROM seq_1_to_3")
    assert a.execute(sid, cursor=True)[-1][0] == "cursor"
    assert error_code(b.query, "SELECT 1") == POOL_TIMEOUT
    assert a.fetch(sid, 3)[0] == [("1",), ("2",), ("3",)]
    assert a.fetch(sid, 1)[1] & rawmysql.SERVER_STATUS_LAST_ROW_SENT
    assert b.scalar("SELECT 1") == "1"
    # COM_STMT_RESET and COM_STMT_CLOSE close a cursor too.
    for end in ("reset", "close"):
        assert a.execute(sid, cursor=True)[-1][0] == "cursor"
        assert error_code(b.query, "SELECT 1") == POOL_TIMEOUT
        if end == "reset":
            a.stmt_reset(sid)
        else:
            a.stmt_close(sid)
            sid, _, _ = a.prepare("SELECT seq FROM seq_1_to_3")
        assert b.scalar("SELECT 2") == "2"
    a.quit()
    b.quit()


def long_data_scenario(port, account):
    a = raw(port, account)
    sid, _, _ = a.prepare("SELECT CONCAT('<', ?, '>', ?)")
    a.send_long_data(sid, 0, b"abc")
    a.send_long_data(sid, 0, b"def")
    # Parameter 0 comes from the long data: typed as a blob, no value in the execute.
    payload = (bytes([rawmysql.COM_STMT_EXECUTE]) + struct.pack("<IBI", sid, 0, 1) + b"\x00\x01"
               + struct.pack("<HH", rawmysql.TYPE_BLOB, rawmysql.TYPE_LONGLONG) + struct.pack("<q", 42))
    got = rows(a.execute_raw(payload))[0][0]
    a.quit()
    return got


@pytest.mark.parametrize("small", [(1, 2)], indirect=True)
def test_long_data_reaches_the_execute_and_pins_until_then(topology, small):
    assert long_data_scenario(topology.primary_port, small.account) == "<abcdef>42"
    assert long_data_scenario(small.port, small.account) == "<abcdef>42"
    a, b = raw(small.port, small.account), raw(small.port, small.account)
    sid, _, _ = a.prepare("SELECT LENGTH(?)")
    a.send_long_data(sid, 0, b"x" * 1000)
    assert error_code(b.query, "SELECT 1") == POOL_TIMEOUT
    payload = (bytes([rawmysql.COM_STMT_EXECUTE]) + struct.pack("<IBI", sid, 0, 1) + b"\x00\x01"
               + struct.pack("<H", rawmysql.TYPE_BLOB))
    assert rows(a.execute_raw(payload)) == [("1000",)]
    assert b.scalar("SELECT 1") == "1"
    a.quit()
    b.quit()


def bad_statement_commands(port, account):
    """What a server answers to prepared-statement commands that name no statement, or are
    malformed; the session goes on afterwards."""
    c = raw(port, account)
    out = [error_code(c.execute, 4242)]
    out.append(error_code(c.fetch, 4242, 1))
    out.append(error_code(c.stmt_reset, 4242))
    c.stmt_close(4242)  # no answer
    out.append(error_code(c.prepare, "SELEC 1"))
    sid, _, nparams = c.prepare("SELECT ?, ?")
    assert nparams == 2
    # Too short: the null bitmap and types of two parameters are missing.
    out.append(error_code(c.execute_raw, bytes([rawmysql.COM_STMT_EXECUTE]) + struct.pack("<IBI", sid, 0, 1)))
    # MariaDB's execute-direct names the statement prepared last as 0xFFFFFFFF.
    c.prepare("SELECT CONCAT('last ', ?)")
    out.append(rows(c.execute(rawmysql.LAST_PREPARED, ["one"]))[0][0])
    c.stmt_close(sid)
    out.append(error_code(c.execute, sid, [1, 2]))
    out.append(c.scalar("SELECT 'still here'"))
    c.quit()
    return out


def test_bad_statement_commands_fail_as_on_the_server(topology, small):
    direct = bad_statement_commands(topology.primary_port, small.account)
    assert direct == [1243, 1243, 1243, 1064, 1210, "last one", 1243, "still here"], direct
    assert bad_statement_commands(small.port, small.account) == direct
