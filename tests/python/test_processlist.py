"""The process list speaks manifold's session ids: `SHOW [FULL] PROCESSLIST` and
`information_schema.PROCESSLIST` list manifold's sessions (the ids `CONNECTION_ID()` returns
and `KILL` takes), in the server's column layout, each user its own sessions and a user with
`process = true` all of them. Layouts are compared with MariaDB's own answers."""

import time

import pymysql
import pytest

import rawmysql
from conftest import USER, PASSWORD, configured, native_hash, run_in_thread

SHOW_COLUMNS = ["Id", "User", "Host", "db", "Command", "Time", "State", "Info", "Progress"]


def three_users_config(account):
    """`app` (the flags' user), `other` and `watcher` (with `process`), both logging into
    the backends as the test's second MariaDB account."""
    name, password = account
    users = ""
    for user, process in (("other", "false"), ("watcher", "true")):
        users += f"""
[[users]]
name = "{user}"
password_native = "{native_hash(user + '-pw')}"
backend_user = "{name}"
backend_password = "{password}"
process = {process}
"""
    return "[engine]\nthreads = 2\n" + users


@pytest.fixture
def plist(topology, tmp_path, mariadb_account):
    m = configured(topology, tmp_path, three_users_config(mariadb_account), "manifold-plist")
    yield m
    m.stop_and_check()


def login(m, user=USER, **kw):
    password = PASSWORD if user == USER else user + "-pw"
    return m.connect(user=user, password=password, autocommit=True, **kw)


def rows(conn, sql):
    cur = conn.cursor()
    cur.execute(sql)
    return [d[0] for d in cur.description], [d[1] for d in cur.description], cur.fetchall()


def by_id(result):
    names, _, found = result
    return {r[0]: dict(zip(names, r)) for r in found}


def wait_for_backend_statement(topology, marker, timeout=20):
    """Bounded poll until a statement containing `marker` runs on the primary (manifold has
    sent it, so a KILL QUERY reaches it)."""
    deadline = time.monotonic() + timeout
    with topology.root() as r:
        cur = r.cursor()
        while time.monotonic() < deadline:
            # Not this poll itself, whose text holds the marker too.
            cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST"
                        " WHERE INFO LIKE %s AND ID <> CONNECTION_ID()",
                        (f"%{marker}%",))
            if cur.fetchone()[0]:
                return
            time.sleep(0.05)
    pytest.fail(f"the statement marked {marker} never reached the primary")


def wait_until_idle(viewer, session_id, timeout=20):
    """Bounded poll until `viewer` lists the session as idle: a session is marked idle just
    after its answer is sent, so its client may already be on to the next thing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = by_id(rows(viewer, "SHOW PROCESSLIST"))[session_id]
        if listed["Command"] == "Sleep":
            return listed
        time.sleep(0.02)
    pytest.fail(f"session {session_id} never showed as idle")


def test_show_processlist_lists_the_session_by_its_own_id_in_the_servers_layout(topology, plist, schema):
    with topology.root() as direct:
        want_names, want_types, _ = rows(direct, "SHOW PROCESSLIST")
        want_full_names, want_full_types, _ = rows(direct, "SHOW FULL PROCESSLIST")
    assert want_names == SHOW_COLUMNS
    c = login(plist, database=schema)
    idle = login(plist)
    own = c.thread_id()
    wait_until_idle(c, idle.thread_id())
    for sql, names, types in (("SHOW PROCESSLIST", want_names, want_types),
                              ("show full processlist", want_full_names, want_full_types)):
        got = rows(c, sql)
        assert got[0] == names and got[1] == types, sql
        listed = by_id(got)
        me = listed[own]
        assert me["User"] == USER
        assert me["Host"] == "%s:%d" % c._sock.getsockname()[:2]
        assert me["db"] == schema
        assert (me["Command"], me["Info"]) == ("Query", sql)
        other = listed[idle.thread_id()]
        assert (other["Command"], other["Info"], other["db"]) == ("Sleep", None, None)
        assert other["Time"] >= 0
        # No backend connection's id among them: every id is a session of this manifold.
        assert set(listed) == {own, idle.thread_id()}
    # `USE` moves the `db` column along.
    c.cursor().execute("USE information_schema")
    assert by_id(rows(c, "SHOW PROCESSLIST"))[own]["db"] == "information_schema"
    # Info is cut to 100 characters without FULL, as the server cuts it.
    long_sql = "SHOW /*" + "x" * 150 + "*/ PROCESSLIST"
    cur = c.cursor()
    cur.execute(long_sql)
    assert [r[7] for r in cur.fetchall() if r[0] == own] == [long_sql[:100]]
    c.close()
    idle.close()


def test_information_schema_processlist_reads_manifolds_sessions(topology, plist, schema):
    with topology.root() as direct:
        want_names, _, _ = rows(direct, "SELECT * FROM information_schema.PROCESSLIST")
    c = login(plist, database=schema)
    own = c.thread_id()
    sql = "SELECT ID, USER, DB, COMMAND, INFO FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()"
    assert rows(c, sql)[2] == ((own, USER, schema, "Query", sql),)
    assert rows(c, "SELECT * FROM information_schema.PROCESSLIST")[0] == want_names
    # Any spelling of the table, aliases, joins, subqueries, ORDER BY; the server evaluates them.
    for q in (
        "select id from `INFORMATION_SCHEMA`.`processlist` where id = connection_id()",
        "SELECT p.ID FROM information_schema.processlist AS p WHERE p.ID = CONNECTION_ID()",
        "SELECT information_schema.PROCESSLIST.ID FROM information_schema.PROCESSLIST "
        "WHERE PROCESSLIST.ID = CONNECTION_ID() ORDER BY ID",
        "SELECT a.ID FROM information_schema.PROCESSLIST a JOIN information_schema.PROCESSLIST b "
        "ON a.ID = b.ID WHERE a.ID = CONNECTION_ID()",
        "SELECT (SELECT MAX(ID) FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID())",
    ):
        assert rows(c, q)[2] == ((own,),), q
    # No row matches: the columns keep the server's types.
    names, types, found = rows(c, "SELECT ID, USER, TIME, TIME_MS FROM information_schema.PROCESSLIST WHERE ID = 0")
    assert found == ()
    assert types == [pymysql.constants.FIELD_TYPE.LONGLONG, pymysql.constants.FIELD_TYPE.VAR_STRING,
                     pymysql.constants.FIELD_TYPE.LONG, pymysql.constants.FIELD_TYPE.NEWDECIMAL]
    # The bare name in information_schema; other tables of that name stay the server's.
    c.cursor().execute("USE information_schema")
    assert rows(c, "SELECT ID, DB FROM PROCESSLIST WHERE ID = CONNECTION_ID()")[2] == ((own, "information_schema"),)
    # Describing the table is the server's business.
    described = rows(c, "SHOW COLUMNS FROM information_schema.PROCESSLIST")[2]
    assert [r[0] for r in described] == want_names
    c.close()


def test_each_user_sees_its_own_sessions_and_process_sees_all(plist):
    a, a2 = login(plist), login(plist)
    o = login(plist, "other")
    w = login(plist, "watcher")
    ids = {"a": a.thread_id(), "a2": a2.thread_id(), "o": o.thread_id(), "w": w.thread_id()}
    for conn, want in ((a, {"a", "a2"}), (o, {"o"}), (w, {"a", "a2", "o", "w"})):
        shown = set(by_id(rows(conn, "SHOW PROCESSLIST")))
        selected = {r[0] for r in rows(conn, "SELECT ID FROM information_schema.PROCESSLIST")[2]}
        assert shown == selected == {ids[k] for k in want}
    assert by_id(rows(w, "SHOW PROCESSLIST"))[ids["o"]]["User"] == "other"
    for conn in (a, a2, o, w):
        conn.close()


def test_an_id_from_the_list_kills_exactly_that_session(topology, plist):
    killer, victim, bystander = login(plist), login(plist), login(plist)
    # A running statement shows as Query with its text; its id is the one KILL takes.
    cur = victim.cursor()
    t, out = run_in_thread(lambda: cur.execute("SELECT SLEEP(60) AS plist_kill_query"))
    wait_for_backend_statement(topology, "plist_kill_query")
    running = [r for r in rows(killer, "SHOW FULL PROCESSLIST")[2] if r[7] and "plist_kill_query" in r[7]]
    assert len(running) == 1 and running[0][4] == "Query"
    target = running[0][0]
    assert target == victim.thread_id()
    killer.cursor().execute(f"KILL QUERY {target}")
    t.join(30)
    assert not t.is_alive(), "KILL QUERY with the listed id did not interrupt the statement"
    assert isinstance(out.get("error"), pymysql.err.OperationalError) and out["error"].args[0] == 1317, out
    # Then the whole session, found by its id in information_schema.PROCESSLIST.
    (target,), = rows(killer, f"SELECT ID FROM information_schema.PROCESSLIST WHERE ID = {victim.thread_id()}")[2]
    killer.cursor().execute(f"KILL {target}")
    with pytest.raises(pymysql.err.OperationalError):
        victim.cursor().execute("SELECT 1")
    assert rows(bystander, "SELECT CONNECTION_ID()")[2] == ((bystander.thread_id(),),)
    # The killed session leaves the list once its task ends (bounded poll).
    deadline = time.monotonic() + 20
    while set(by_id(rows(killer, "SHOW PROCESSLIST"))) != {killer.thread_id(), bystander.thread_id()}:
        assert time.monotonic() < deadline, "the killed session stayed in the list"
        time.sleep(0.02)
    killer.close()
    bystander.close()


def test_another_users_session_cannot_be_killed(plist):
    a = login(plist)
    o = login(plist, "other")
    w = login(plist, "watcher")
    assert a.thread_id() not in by_id(rows(o, "SHOW PROCESSLIST"))
    assert a.thread_id() in by_id(rows(w, "SHOW PROCESSLIST"))
    # Seeing a session (PROCESS) is not owning it: as MariaDB, ERR 1095 for both.
    for conn in (o, w):
        with pytest.raises(pymysql.err.MySQLError) as e:
            conn.cursor().execute(f"KILL {a.thread_id()}")
        assert e.value.args[0] == 1095
    assert rows(a, "SELECT CONNECTION_ID()")[2] == ((a.thread_id(),),)
    for conn in (a, o, w):
        conn.close()


def test_a_running_statement_with_any_bytes_in_it_is_listed_safely(topology, plist):
    viewer, runner = login(plist), login(plist)
    # A quote, a backslash, a NUL, a byte that is not UTF-8 and a comment closer in the text.
    text = b"SELECT SLEEP(60) AS plist_odd, 'it''s', '\\\\', '\x00', 'caf\xe9', '*/ -- x'"
    t, out = run_in_thread(lambda: runner.query(text))
    wait_for_backend_statement(topology, "plist_odd")
    found = rows(viewer, "SELECT ID, COMMAND, INFO, INFO_BINARY FROM information_schema.PROCESSLIST "
                         "WHERE INFO LIKE '%plist_odd%' AND ID <> CONNECTION_ID()")[2]
    assert len(found) == 1
    rid, command, info, info_binary = found[0]
    assert (rid, command) == (runner.thread_id(), "Query")
    assert info.startswith("SELECT SLEEP(60) AS plist_odd, 'it''s', '\\\\', '\x00', 'caf")
    assert info.endswith("'*/ -- x'")
    assert info_binary == info.encode()
    shown = [r for r in rows(viewer, "SHOW FULL PROCESSLIST")[2] if r[0] == runner.thread_id()]
    assert shown[0][7] == info
    viewer.cursor().execute(f"KILL {runner.thread_id()}")
    t.join(30)
    assert not t.is_alive()
    viewer.close()


def test_a_prepared_statement_running_shows_as_execute(topology, plist):
    viewer = login(plist)
    runner = rawmysql.connect(plist.port)
    sid, _, _ = runner.prepare("SELECT SLEEP(60) AS plist_execute")
    t, out = run_in_thread(lambda: runner.execute(sid))
    wait_for_backend_statement(topology, "plist_execute")
    listed = by_id(rows(viewer, "SHOW FULL PROCESSLIST"))[runner.handshake.connection_id]
    assert (listed["Command"], listed["Info"]) == ("Execute", "SELECT SLEEP(60) AS plist_execute")
    viewer.cursor().execute(f"KILL QUERY {listed['Id']}")
    t.join(30)
    assert not t.is_alive(), "KILL QUERY with the listed id did not interrupt the execution"
    assert isinstance(out.get("error"), rawmysql.MySQLError) and out["error"].code == 1317, out
    # The session goes on, idle again.
    assert wait_until_idle(viewer, runner.handshake.connection_id)["Info"] is None
    runner.quit()
    viewer.close()


def test_a_parenthesised_table_reference_lists_manifolds_sessions(plist):
    c = login(plist)
    own = c.thread_id()
    for sql in ("SELECT ID FROM (information_schema.PROCESSLIST) WHERE ID = CONNECTION_ID()",
                "SELECT p.ID FROM ((information_schema.PROCESSLIST p)) WHERE p.ID = CONNECTION_ID()"):
        assert rows(c, sql)[2] == ((own,),), sql
    c.close()
