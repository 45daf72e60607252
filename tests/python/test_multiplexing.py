"""Multiplexing: client sessions borrow a backend connection per statement (or transaction) and
give it back; each session's state follows it to whichever connection it borrows next; what
cannot move pins the session until it goes away.

Each test runs a manifold of its own whose backend login is a fresh MariaDB account, so the
backend connections it opens can be counted in the server's processlist."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pymysql
import pytest

from conftest import configured, native_hash
from test_admin import admin, table

POOL_TIMEOUT = 7703


def mux_config(account, threads, max_size, wait_timeout="30s"):
    name, password = account
    return f"""
[engine]
threads = {threads}

[pool]
min_idle = 0
max_size = {max_size}
wait_timeout = "{wait_timeout}"

[[users]]
name = "{name}"
password_native = "{native_hash(password)}"
backend_password = "{password}"
"""


def backend_connections(topology, user):
    with topology.root() as r:
        cur = r.cursor()
        cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (user,))
        return cur.fetchone()[0]


@pytest.fixture
def mux(topology, tmp_path, mariadb_account, request):
    threads, max_size, wait_timeout = getattr(request, "param", (2, 4, "30s"))
    m = configured(topology, tmp_path, mux_config(mariadb_account, threads, max_size, wait_timeout),
                   "manifold-mux")
    name, password = mariadb_account
    m.login = dict(user=name, password=password)
    m.account = name
    yield m
    m.stop_and_check()


def connect(m, **kw):
    kw.setdefault("autocommit", True)
    return m.connect(**m.login, **kw)


def one(conn, sql, args=None):
    cur = conn.cursor()
    cur.execute(sql, args)
    return cur.fetchone()


def test_2000_clients_on_8_backend_connections_each_keeping_its_state(topology, mux, schema):
    """2 workers x pool.max_size 4: 2000 sessions, each with its own variables, run statements
    32 at a time; the server never sees more than 8 connections from manifold, and every
    session reads back its own values."""
    sessions = [connect(mux, database=schema) for _ in range(2000)]
    peak = [0]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], backend_connections(topology, mux.account))
            done.wait(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()

    def set_state(i):
        c = sessions[i]
        c.cursor().execute(f"SET SESSION sql_select_limit = {1000 + i}")
        c.cursor().execute(f"SET time_zone = '+{i % 12:02d}:{i % 60:02d}', @mine = {i}")
        return one(c, "SELECT @@sql_select_limit, @@time_zone, DATABASE(), @mine")

    def check_state(i):
        # @@pseudo_thread_id is the backend connection's own id (CONNECTION_ID() is manifold's).
        return one(sessions[i], "SELECT @@sql_select_limit, @@time_zone, DATABASE(), @mine, @@pseudo_thread_id")

    try:
        with ThreadPoolExecutor(32) as ex:
            first = list(ex.map(set_state, range(2000)))
            second = list(ex.map(check_state, range(2000)))
    finally:
        done.set()
        watcher.join()
    for i in range(2000):
        want = (1000 + i, f"+{i % 12:02d}:{i % 60:02d}", schema, i)
        assert first[i] == want, f"session {i}"
        assert second[i][:4] == want, f"session {i} sees another session's state: {second[i]}"
    backend_ids = {row[4] for row in second}
    assert 1 <= len(backend_ids) <= 8, backend_ids
    assert 1 <= peak[0] <= 8, peak[0]
    assert backend_connections(topology, mux.account) <= 8
    for c in sessions:
        c.close()


def test_set_names_and_schema_follow_the_session(mux, schema):
    a, b = connect(mux, database=schema), connect(mux)
    a.cursor().execute("SET NAMES latin1 COLLATE latin1_bin")
    for _ in range(10):
        # b's statements take whichever connection is free; a's state must be there each time.
        assert one(b, "SELECT @@character_set_client, @@collation_connection, DATABASE()")[:2] == \
            ("utf8mb4", "utf8mb4_general_ci")
        assert one(a, "SELECT @@character_set_client, @@collation_connection, DATABASE()") == \
            ("latin1", "latin1_bin", schema)
    a.cursor().execute("USE mysql")
    assert one(a, "SELECT DATABASE()") == ("mysql",)
    assert one(b, "SELECT DATABASE()") == (None,)


@pytest.mark.parametrize("mux", [(1, 1, "1s")], indirect=True)
@pytest.mark.parametrize(
    "pin,unpin",
    [
        ("BEGIN", "COMMIT"),
        ("SET autocommit = 0; INSERT INTO t VALUES (1)", "ROLLBACK"),
        ("LOCK TABLES t WRITE", "UNLOCK TABLES"),
        ("SELECT GET_LOCK('mux-test', 5)", "SELECT RELEASE_LOCK('mux-test')"),
        ("CREATE TEMPORARY TABLE tmp (x INT)", "DROP TEMPORARY TABLE tmp"),
        ("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1", "SELECT FOUND_ROWS()"),
        ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SELECT 1"),
    ],
)
def test_pinned_session_keeps_its_connection_until_the_reason_goes(topology, mux, schema, pin, unpin):
    """One worker, pool.max_size 1, pool.wait_timeout 1s: while session A is pinned, session B
    cannot borrow the only connection and gets ERR 7703; once A's pin reason is gone, B runs."""
    with topology.root() as r:
        r.cursor().execute(f"CREATE TABLE {schema}.t (x INT)")
    a = connect(mux, database=schema, client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    b = connect(mux, database=schema)
    assert one(b, "SELECT 1") == (1,)
    cur = a.cursor()
    cur.execute(pin)
    while cur.nextset():
        pass
    with pytest.raises(pymysql.MySQLError) as e:
        one(b, "SELECT 1")
    assert e.value.args[0] == POOL_TIMEOUT, e.value.args
    assert "pool.wait_timeout" in e.value.args[1]
    if unpin is None:
        a.close()
    else:
        a.cursor().execute(unpin)
        # The statement after the one that lifted the pin is free to move.
        one(a, "SELECT 1")
    assert one(b, "SELECT 1") == (1,)


@pytest.mark.parametrize("mux", [(1, 1, "1s")], indirect=True)
def test_changed_variables_do_not_pin(mux):
    a, b = connect(mux), connect(mux)
    a.cursor().execute("SET SESSION sql_mode = 'ANSI', time_zone = '+03:00', autocommit = 1")
    assert one(b, "SELECT @@sql_mode, @@time_zone")[1] == "SYSTEM"
    assert one(a, "SELECT @@sql_mode, @@time_zone") == \
        ("REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI", "+03:00")


@pytest.mark.parametrize("mux", [(1, 1, "10s")], indirect=True)
def test_last_insert_id_and_warnings_follow_the_session(mux, schema):
    """Two sessions share one backend connection; each one's LAST_INSERT_ID() and the
    warnings of its previous statement are its own."""
    a, b = connect(mux, database=schema), connect(mux, database=schema)
    a.cursor().execute("CREATE TABLE ai (id INT AUTO_INCREMENT PRIMARY KEY, v TINYINT)")
    a.cursor().execute("INSERT INTO ai (v) VALUES (1)")
    one(a, "SELECT 1")
    b.cursor().execute("INSERT INTO ai (v) VALUES (2), (3)")
    one(b, "SELECT 1")
    assert one(a, "SELECT LAST_INSERT_ID()") == (1,)
    assert one(b, "SELECT LAST_INSERT_ID()") == (2,)
    # A warning (out-of-range value clipped) stays readable by the next statement.
    b.cursor().execute("SET SESSION sql_mode = ''")
    b.cursor().execute("INSERT INTO ai (v) VALUES (1000)")
    cur = b.cursor()
    cur.execute("SHOW WARNINGS")
    assert [w[1] for w in cur.fetchall()] == [1264]
    assert one(a, "SELECT @@warning_count") == (0,)


def diagnostics_run(connect_a, connect_b, schema):
    """Two sessions interleaving statements that leave warnings, errors, row counts and found
    rows with the statements that ask about them."""
    a, b = connect_a(), connect_b()
    seen = []

    def q(conn, sql):
        cur = conn.cursor()
        try:
            cur.execute(sql)
            seen.append((sql, cur.fetchall(), [d[0] for d in cur.description or []]))
        except pymysql.MySQLError as e:
            seen.append((sql, e.args))

    for c in (a, b):
        q(c, f"USE {schema}")
    q(a, "CREATE TABLE d (a INT)")
    q(a, "INSERT INTO d VALUES (1), (2), (3)")
    q(b, "SELECT 1/0")
    q(a, "SELECT ROW_COUNT()")
    q(b, "SHOW WARNINGS")
    q(b, "SHOW COUNT(*) WARNINGS")
    q(b, "SELECT @@warning_count, @@session.error_count, ROW_COUNT()")
    q(a, "SHOW WARNINGS")
    q(a, "SELECT * FROM d WHERE a > 1")
    q(b, "INSERT INTO missing VALUES (1)")
    q(a, "SELECT FOUND_ROWS(), ROW_COUNT()")
    q(b, "SHOW ERRORS")
    q(b, "SHOW WARNINGS LIMIT 0, 1")
    q(b, "SHOW COUNT(*) ERRORS")
    q(b, "SELECT ROW_COUNT()")
    q(a, "SELECT 1/0, 1/0 FROM d")
    q(a, "SET @x = 1")  # uses no table: the warnings stay
    q(a, "SHOW WARNINGS LIMIT 1")
    q(a, "SELECT a FROM d")  # uses a table: they go
    q(a, "SHOW WARNINGS")
    q(b, "UPDATE d SET a = a + 10 WHERE a > 1")
    q(a, "SELECT 2")
    q(b, "SELECT ROW_COUNT(), FOUND_ROWS()")
    q(b, "SHOW WARNINGS; SELECT 1")
    # Inside a transaction the connection answers; after COMMIT (no table) manifold does.
    q(a, "BEGIN")
    q(a, "SELECT 1/0 FROM d LIMIT 1")
    q(a, "SHOW WARNINGS")
    q(a, "COMMIT")
    q(a, "SHOW WARNINGS")
    q(a, "SELECT @@warning_count")
    return seen


@pytest.mark.parametrize("mux", [(1, 1, "10s")], indirect=True)
def test_previous_statement_answers_match_mariadb_without_holding_a_connection(topology, mux, schema):
    """ROW_COUNT(), FOUND_ROWS(), SHOW WARNINGS/ERRORS (all forms) and @@warning_count read
    what the session's own previous statement left, exactly as on MariaDB directly, while two
    sessions share one backend connection (a held connection would time the other out)."""
    name, password = mux.login["user"], mux.login["password"]

    def direct():
        return pymysql.connect(host="127.0.0.1", port=topology.primary_port, user=name,
                               password=password, autocommit=True)

    want = diagnostics_run(direct, direct, schema)
    with topology.root() as r:
        r.cursor().execute(f"DROP TABLE {schema}.d")
    got = diagnostics_run(lambda: connect(mux), lambda: connect(mux), schema)
    for w, g in zip(want, got):
        assert g == w
    assert len(got) == len(want)


@pytest.mark.parametrize("mux", [(1, 1, "1s")], indirect=True)
def test_get_diagnostics_outside_a_program_is_refused_clearly(mux):
    a = connect(mux)
    with pytest.raises(pymysql.MySQLError) as e:
        a.cursor().execute("GET DIAGNOSTICS @n = NUMBER")
    assert e.value.args[0] == 1235 and "SHOW WARNINGS" in e.value.args[1]
    # Inside a transaction the connection that ran the previous statement answers.
    a.cursor().execute("BEGIN")
    a.cursor().execute("SELECT 1/0")
    a.cursor().execute("GET DIAGNOSTICS @n = NUMBER")
    assert one(a, "SELECT @n") == (1,)
    a.cursor().execute("COMMIT")


def test_max_backend_connections_caps_all_workers_together(topology, tmp_path, mariadb_account, schema):
    """2 workers x pool.max_size 8 but pool.max_backend_connections 3: 400 statements from 40
    sessions (spread over both workers) all run, the server never counts more than 3
    connections (it enforces MAX_USER_CONNECTIONS 3 on the account, and manifold's connects
    never fail), and a worker whose sessions wait while the other holds the budget gets it
    (min_idle 2 per worker cannot both be met). With all 3 held in transactions, another
    statement gets ERR 7703 naming the limit, and runs once one commits."""
    name, password = mariadb_account
    with topology.root() as r:
        r.cursor().execute(f"ALTER USER '{name}'@'%' WITH MAX_USER_CONNECTIONS 3")
    m = configured(topology, tmp_path, f"""
[engine]
threads = 2

[pool]
min_idle = 2
max_size = 8
max_backend_connections = 3
wait_timeout = "2s"

[[users]]
name = "{name}"
password_native = "{native_hash(password)}"
backend_password = "{password}"
""", "manifold-budget")
    try:
        sessions = [m.connect(user=name, password=password, database=schema, autocommit=True)
                    for _ in range(40)]
        peak = [0]
        done = threading.Event()

        def watch():
            while not done.is_set():
                peak[0] = max(peak[0], backend_connections(topology, name))
                done.wait(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ThreadPoolExecutor(40) as ex:
                got = list(ex.map(lambda i: [one(sessions[i], "SELECT %s + SLEEP(0.01)", (k,))[0]
                                             for k in range(10)], range(40)))
        finally:
            done.set()
            watcher.join()
        assert got == [[float(k) for k in range(10)] for _ in range(40)] or \
            got == [list(range(10)) for _ in range(40)]
        # The server refused none of manifold's logins: a connection handed between workers
        # was let go of by the server before its replacement logged in. (The process list
        # itself may still show a closed one for a moment, so it is no measure of the count.)
        assert 1 <= peak[0], peak[0]
        refused = [line for line in m.log_text().splitlines() if "1226" in line or "max_user_connections" in line]
        assert not refused, refused[:3]
        assert all(r["connect_errors"] == "0" for r in table(admin(m, "SHOW POOLS").stdout))
        holders = sessions[:3]
        for h in holders:
            h.cursor().execute("BEGIN")
            one(h, "SELECT 1")
        deadline = time.time() + 10
        while backend_connections(topology, name) != 3 and time.time() < deadline:
            time.sleep(0.05)
        assert backend_connections(topology, name) == 3
        with pytest.raises(pymysql.MySQLError) as e:
            one(sessions[3], "SELECT 1")
        assert e.value.args[0] == POOL_TIMEOUT
        assert "max_backend_connections (3)" in e.value.args[1]
        holders[0].cursor().execute("COMMIT")
        assert one(sessions[3], "SELECT 2") == (2,)
        for h in holders[1:]:
            h.cursor().execute("COMMIT")
        assert backend_connections(topology, name) <= 3
        for c in sessions:
            c.close()
    finally:
        m.stop_and_check()


def test_client_without_session_tracking_sees_plain_ok_packets(mux, schema):
    """PyMySQL does not ask for CLIENT_SESSION_TRACK: the OK packets of statements that change
    state reach it without tracking data (it would read them as part of the info text)."""
    c = connect(mux, database=schema)
    cur = c.cursor()
    cur.execute("SET SESSION sql_mode = 'TRADITIONAL'")
    assert c.server_status & 0x4000 == 0
    cur.execute(f"CREATE TABLE {schema}.x (a INT)")
    cur.execute(f"INSERT INTO {schema}.x VALUES (1), (2), (3)")
    assert cur.rowcount == 3
    assert c._result.message in (b"", b"Records: 3  Duplicates: 0  Warnings: 0")


def test_connect_storm_opens_no_more_backend_connections_than_the_pool_holds(topology, mux):
    """1000 short sessions (connect, one statement, quit) from 16 threads: the server sees at
    most the pool's 8 connections from manifold, not one login per client."""
    def server_logins():
        with topology.root() as r:
            cur = r.cursor()
            cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
            return int(cur.fetchone()[1])

    def short_session(i):
        with connect(mux) as c:
            return one(c, "SELECT %s", (i,))[0]

    before = server_logins()
    with ThreadPoolExecutor(16) as ex:
        results = list(ex.map(short_session, range(1000)))
    logins = server_logins() - before
    assert results == list(range(1000))
    # 8 pooled connections plus the root logins counting them, with room for another test
    # manifold's maintenance; far below one login per client.
    assert logins <= 8 + 2 + 10, logins
    assert backend_connections(topology, mux.account) <= 8


SET_CORPUS = [
    ("SET SESSION sql_mode = 'ANSI_QUOTES,NO_ZERO_DATE'", "@@sql_mode"),
    ("SET sql_mode = ''", "@@sql_mode"),
    ("SET @@session.time_zone = '-07:30'", "@@time_zone"),
    ("SET time_zone = 'SYSTEM'", "@@time_zone"),
    ("SET NAMES latin1", "CONCAT(@@character_set_client, @@character_set_results, @@collation_connection)"),
    ("SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci", "@@collation_connection"),
    ("SET CHARACTER SET latin2", "CONCAT(@@character_set_client, @@character_set_connection)"),
    ("SET character_set_results = NULL", "IFNULL(@@character_set_results, 'NULL')"),
    ("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", "@@tx_isolation"),
    ("SET SESSION tx_read_only = 1", "@@tx_read_only"),
    ("SET SESSION tx_read_only = 0", "@@tx_read_only"),
    ("SET autocommit = 1", "@@autocommit"),
    ("SET SESSION sql_select_limit = 3", "@@sql_select_limit"),
    ("SET SESSION sql_select_limit = DEFAULT", "@@sql_select_limit"),
    ("SET SESSION group_concat_max_len = 123456", "@@group_concat_max_len"),
    ("SET SESSION max_statement_time = 2.5", "@@max_statement_time"),
    ("SET SESSION div_precision_increment = 7", "@@div_precision_increment"),
    ("SET SESSION lc_time_names = 'de_DE'", "@@lc_time_names"),
    ("SET SESSION sql_auto_is_null = ON", "@@sql_auto_is_null"),
    ("SET SESSION unique_checks = OFF, foreign_key_checks = 0", "CONCAT(@@unique_checks, @@foreign_key_checks)"),
    ("SET SESSION optimizer_switch = 'index_merge=off'", "@@optimizer_switch LIKE 'index_merge=off%'"),
    ("SET SESSION default_storage_engine = 'MyISAM'", "@@default_storage_engine"),
    ("SET SESSION net_write_timeout = 99", "@@net_write_timeout"),
    ("SET SESSION big_tables = 0", "@@max_heap_table_size > 0"),
    ("SET SESSION sql_quote_show_create = 0", "@@sql_quote_show_create"),
    ("/*!40101 SET SESSION sql_notes = 0 */", "@@sql_notes"),
    # User variables, read back with their types.
    ("SET @a := 1, @B = 'x', @c = 1.50, @d = 1.5e0", "CONCAT_WS(',', @a + 0, @b, @c * 2, @d / 4)"),
    ("SET @a = @a + 1, sql_mode = 'ANSI', @`odd``name` = X'00ff'",
     "CONCAT_WS(',', @a, @@sql_mode, HEX(@`odd``name`), COLLATION(@`odd``name`))"),
    ("SET @u = CAST(5 AS UNSIGNED), @s = _latin1 X'E9' COLLATE latin1_bin",
     "CONCAT_WS(',', @u, COLLATION(@s), HEX(@s), CAST(@u AS CHAR))"),
    ("SELECT 7, 'y' INTO @into, @b", "CONCAT_WS(',', @into, @b)"),
    ("SELECT @n := 41 + 1 FROM DUAL", "@n"),
    ("SET @a = NULL, @big = REPEAT('z', 70000)", "CONCAT_WS(',', IFNULL(@a, 'null'), LENGTH(@big))"),
    ("SET @bad = (SELECT 1 UNION SELECT 2)", "IFNULL(@bad, 'unset')"),
]


def corpus_run(port_connect):
    """Each SET in one session, then its value read back after another session has used the
    (shared) connection in between."""
    a, b = port_connect(), port_connect()
    seen = []
    for stmt, probe in SET_CORPUS:
        try:
            a.cursor().execute(stmt)
            outcome = "ok"
        except pymysql.MySQLError as e:
            outcome = e.args[0]
        # b takes the shared connection in between.
        one(b, "SELECT 1")
        seen.append((stmt, outcome, one(a, f"SELECT {probe}")[0]))
    # The other session kept the defaults throughout.
    seen.append(("other session", one(b, "SELECT @@sql_mode, @@time_zone, @@collation_connection, "
                                         "@a, @b, @into, @n, @s")))
    return seen


@pytest.mark.parametrize("mux", [(1, 1, "10s")], indirect=True)
def test_set_corpus_reads_back_as_on_mariadb(topology, mux):
    """One worker, one backend connection shared by two sessions: every SET of the corpus
    reads back exactly as it does on MariaDB directly, and the other session never sees it."""
    name, password = mux.login["user"], mux.login["password"]
    direct = corpus_run(lambda: pymysql.connect(host="127.0.0.1", port=topology.primary_port, user=name,
                                                password=password, autocommit=True))
    via = corpus_run(lambda: connect(mux))
    for d, v in zip(direct, via):
        assert v == d
