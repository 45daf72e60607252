"""The global binlog follows the servers' privileges in MySQL's dialect: a user's backend login
must hold, on every source primary, what MySQL 9.7 itself asks (REPLICATION SLAVE to dump and
to show events, SUPER or REPLICATION CLIENT to list the files and show the status, SUPER or
BINLOG_ADMIN to purge, RELOAD to flush, RELOAD or FLUSH_TABLES to reset), and each refusal is
MySQL's own (code, SQLSTATE and text), compared here with what a real MySQL 9.7 primary
answers the same login. One topology for the file: two MySQL 9.7 clusters (a primary each)
behind one manifold started as the quick start does (`--user` flags, binlog.users unset)."""

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader

import binlogkit as bk
import rawmysql

SCHEMAS = {"default": "mypriv_a", "b": "mypriv_b"}
BOTH, DEFAULT_ONLY = ("default", "b"), ("default",)
# name: (global privileges, on which primaries)
LOGINS = {
    "nogrant": ("", BOTH),
    "reader": ("REPLICATION SLAVE, REPLICATION CLIENT", BOTH),
    "slave": ("REPLICATION SLAVE", BOTH),
    "monitor": ("REPLICATION CLIENT", BOTH),
    "binadmin": ("BINLOG_ADMIN", BOTH),
    "reloader": ("RELOAD", BOTH),
    "half": ("REPLICATION SLAVE, REPLICATION CLIENT, RELOAD, BINLOG_ADMIN", DEFAULT_ONLY),
}
DUMP_DENIED = "Access denied; you need (at least one of) the REPLICATION SLAVE privilege(s) for this operation"


def pw(name):
    return f"pw-{name}"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    with bk.clusters(["default", "b"], flavors=["mysql"] * 2) as (a, b):
        by_name = {"default": a, "b": b}
        for name, (privileges, where) in LOGINS.items():
            for c in (a, b):
                c.query(f"CREATE USER IF NOT EXISTS '{name}'@'%' IDENTIFIED BY '{pw(name)}'")
                c.query(f"GRANT ALL ON `mypriv\\_%`.* TO '{name}'@'%'")
            for cluster in where:
                if privileges:
                    by_name[cluster].query(f"GRANT {privileges} ON *.* TO '{name}'@'%'")
        binlog_dir = tmp_path_factory.mktemp("mysql-privileges") / "binlog"
        users = [arg for name in LOGINS for arg in ("--user", f"{name}:{pw(name)}")]
        mf = bk.BinlogManifold([a, b], binlog_dir, {"b": [SCHEMAS["b"]]}, name="manifold-mysql-privileges",
                               binlog_users=None, extra_args=["--binlog-dir", str(binlog_dir), *users])
        bk.create_schemas([a, b], SCHEMAS)
        with mf.connect(database=SCHEMAS["default"]) as c, c.cursor() as cur:
            cur.execute("INSERT INTO ledger VALUES (1, 'a', 1, NULL)")
            cur.execute("FLUSH BINARY LOGS")
        yield a, b, mf
        mf.stop_and_check()


def answer(port, user, sql):
    """(code, SQLSTATE, message) of the ERR the statement gets, or (None, None, rows)."""
    with pymysql.connect(host="127.0.0.1", port=port, user=user, password=pw(user)) as c, c.cursor() as cur:
        try:
            cur.execute(sql)
        except pymysql.err.MySQLError as e:
            return e.args[0], getattr(e, "sqlstate", None), e.args[1]
        return None, None, cur.fetchall()


def assert_refused_as_the_server(a, mf, user, sql, server_sql=None):
    """manifold's ERR is the real MySQL 9.7 primary's for the same login: code, SQLSTATE, text."""
    real = answer(a.primary_port, user, server_sql or sql)
    ours = answer(mf.port, user, sql)
    assert real[0] == 1227 and real[1] == "42000", (user, sql, real)
    assert ours == real, (user, sql, ours, real)
    return ours


def mysqlbinlog(port, user, *args):
    """MySQL's own `mysqlbinlog` reading remotely as `user`: (exit code, its ERROR line)."""
    p = bk.mysqlbinlog(port, *args, user=user, password=pw(user), timeout=60, check=False)
    errors = [line for line in p.stderr.decode(errors="replace").splitlines() if line.startswith("ERROR")]
    return p.returncode, errors


def dump_gtid_error(port, user, uuid):
    """COM_BINLOG_DUMP_GTID (python-mysql-replication with a GTID set) as `user`: the ERR."""
    stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": port, "user": user,
                                                     "passwd": pw(user)},
                                server_id=4343, blocking=False, auto_position=f"{uuid}:1")
    try:
        with pytest.raises(pymysql.err.MySQLError) as e:
            for _ in stream:
                pass
        return e.value.args[0], getattr(e.value, "sqlstate", None), e.value.args[1]
    finally:
        stream.close()


def files(mf):
    with mf.connect() as c, c.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [r[0] for r in cur.fetchall()]


def test_a_dump_needs_replication_slave_as_mysql_answers(setup):
    a, _, mf = setup
    ours_file = files(mf)[0]
    for user in ("nogrant", "monitor", "binadmin", "reloader"):
        for by_gtid in ([], ["--read-from-remote-source=BINLOG-DUMP-GTIDS"]):
            real = mysqlbinlog(a.primary_port, user, *by_gtid, "binlog.000001")
            ours = mysqlbinlog(mf.port, user, *by_gtid, ours_file)
            assert real[0] != 0 and real[1] == [f"ERROR: Got error reading packet from server: {DUMP_DENIED}"], real
            assert ours == real, (user, by_gtid, ours, real)
        real = dump_gtid_error(a.primary_port, user, a.uuid)
        assert real == (1227, "42000", DUMP_DENIED), real
        assert dump_gtid_error(mf.port, user, a.uuid) == real, user
    for user in ("reader", "slave"):
        for by_gtid in ([], ["--read-from-remote-source=BINLOG-DUMP-GTIDS"]):
            code, errors = mysqlbinlog(mf.port, user, *by_gtid, ours_file)
            assert code == 0 and not errors, (user, by_gtid, errors)


def test_show_binlog_events_needs_replication_slave_as_mysql_answers(setup):
    a, _, mf = setup
    for user in ("nogrant", "monitor"):
        assert_refused_as_the_server(a, mf, user, "SHOW BINLOG EVENTS LIMIT 1")
    code, _, rows = answer(mf.port, "slave", "SHOW BINLOG EVENTS LIMIT 1")
    assert code is None and len(rows) == 1, (code, rows)


def test_the_file_list_and_status_need_replication_client_as_mysql_answers(setup):
    a, _, mf = setup
    # REPLICATION SLAVE or BINLOG_ADMIN alone do not let a login list the files.
    for user in ("nogrant", "slave", "binadmin"):
        for sql in ("SHOW BINARY LOGS", "SHOW BINARY LOG STATUS"):
            assert_refused_as_the_server(a, mf, user, sql)
        # MySQL 9.7 no longer parses SHOW MASTER STATUS (removed in 8.4); manifold still
        # answers it for clients written for 8.0, behind 9.7's check of SHOW BINARY LOG STATUS.
        assert answer(a.primary_port, user, "SHOW MASTER STATUS")[0] == 1064
        assert_refused_as_the_server(a, mf, user, "SHOW MASTER STATUS", server_sql="SHOW BINARY LOG STATUS")
    for user in ("monitor", "reader"):
        for sql in ("SHOW BINARY LOGS", "SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
            code, _, rows = answer(mf.port, user, sql)
            assert code is None and rows and rows[0][0].startswith("manifold-bin."), (user, sql, code, rows)
    # Variables stay readable by anyone, as on the servers.
    code, _, rows = answer(mf.port, "nogrant", "SELECT @@gtid_executed")
    assert code is None, rows


def test_a_login_granted_on_one_primary_only_is_refused(setup):
    a, _, mf = setup
    # The login may on the default cluster's primary itself...
    assert answer(a.primary_port, "half", "SHOW BINARY LOGS")[0] is None
    code, errors = mysqlbinlog(a.primary_port, "half", "binlog.000001")
    assert code == 0, errors
    # ...but the global binlog carries cluster b's rows too: refused as a login without grants.
    refused = answer(a.primary_port, "nogrant", "SHOW BINARY LOGS")
    assert answer(mf.port, "half", "SHOW BINARY LOGS") == refused
    code, errors = mysqlbinlog(mf.port, "half", files(mf)[0])
    assert code != 0 and errors == [f"ERROR: Got error reading packet from server: {DUMP_DENIED}"], errors
    before = files(mf)
    code, _, message = answer(mf.port, "half", f"PURGE BINARY LOGS TO '{before[-1]}'")
    assert code == 1227 and "SUPER or BINLOG_ADMIN" in message, message
    code, _, message = answer(mf.port, "half", "FLUSH BINARY LOGS")
    assert code == 1227 and "the RELOAD privilege" in message, message
    assert files(mf) == before


def write_a_row(mf, key):
    """A transaction in the current file, waited for: FLUSH rotates only a file holding one."""
    tag = f"flush.{key}"
    with mf.connect(database=SCHEMAS["default"]) as c, c.cursor() as cur:
        cur.execute(f"/*ledger:{tag}*/ INSERT INTO ledger VALUES (%s, 'flush', 1, NULL)", (key,))
    last = files(mf)[-1]
    bk.wait_for(f"{tag} in {last}", lambda: any(tag in t.tags() and t.file == last for t in
                                                 bk.read_binlog(mf.files(), allow_torn_tail=True).transactions),
                timeout=30)


def test_flush_needs_reload_as_mysql_answers(setup):
    a, _, mf = setup
    write_a_row(mf, 2)
    before = files(mf)
    # BINLOG_ADMIN purges but does not flush.
    for user in ("nogrant", "reader", "binadmin"):
        assert_refused_as_the_server(a, mf, user, "FLUSH BINARY LOGS")
    assert files(mf) == before
    code, _, rows = answer(mf.port, "reloader", "FLUSH BINARY LOGS")
    assert code is None, rows
    bk.wait_for("a new file after FLUSH BINARY LOGS", lambda: len(files(mf)) == len(before) + 1, timeout=30)


def test_reset_asks_what_mysql_asks_before_manifold_refuses_it(setup):
    a, _, mf = setup
    before = files(mf)
    for user in ("nogrant", "binadmin"):
        # MySQL 9.7 asks RELOAD or FLUSH_TABLES (RESET MASTER is its 8.0 name).
        for sql in ("RESET BINARY LOGS AND GTIDS", "RESET MASTER"):
            assert_refused_as_the_server(a, mf, user, sql, server_sql="RESET BINARY LOGS AND GTIDS")
    # With the privilege, manifold still refuses: consumers depend on the positions.
    code, _, message = answer(mf.port, "reloader", "RESET BINARY LOGS AND GTIDS")
    assert code == 1235 and "RESET MASTER is refused" in message, message
    assert files(mf) == before


def test_purge_needs_binlog_admin_and_nothing_is_purged(setup):
    """Last: it removes files."""
    a, _, mf = setup
    write_a_row(mf, 3)
    with mf.connect() as c, c.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
    before = files(mf)
    assert len(before) >= 3, before
    purge = f"PURGE BINARY LOGS TO '{before[-1]}'"
    for user in ("nogrant", "reader", "monitor", "reloader"):
        # The server checks the privilege before it looks for the file.
        assert_refused_as_the_server(a, mf, user, purge)
        assert_refused_as_the_server(a, mf, user, "PURGE BINARY LOGS BEFORE '2000-01-01 00:00:00'")
    assert files(mf) == before
    assert {p.name for p in mf.files()} == set(before)
    code, _, rows = answer(mf.port, "binadmin", purge)
    assert code is None, rows
    # A dump that has not yet noticed its reader left holds its file (the purge stops there
    # with a warning, as MySQL's): the purge removes it once that dump has ended.
    bk.wait_for("the purge by BINLOG_ADMIN", lambda: answer(mf.port, "binadmin", purge)[0] is None
                and before[0] not in files(mf), timeout=30)


def register_replica(port, user):
    """COM_REGISTER_SLAVE as a replica sends it, raw: None (OK) or (code, SQLSTATE, message)."""
    c = rawmysql.RawConn(port).login(user, pw(user))
    try:
        # server_id, host, user, password (length-prefixed), port, rank, source id
        payload = bytes([0x15]) + (4243).to_bytes(4, "little") + b"\x00\x00\x00" + (3306).to_bytes(2, "little") \
            + bytes(8)
        c.send_command(payload)
        try:
            c.read_ok_or_err()
            return None
        except rawmysql.MySQLError as e:
            return e.code, e.sqlstate, e.message
    finally:
        c.quit()


def test_registering_a_replica_needs_replication_slave_as_mysql_answers(setup):
    a, _, mf = setup
    for user in ("nogrant", "monitor", "binadmin"):
        real = register_replica(a.primary_port, user)
        assert real == (1045, "28000", f"Access denied for user '{user}'@'%' (using password: YES)"), (user, real)
        assert register_replica(mf.port, user) == real, user
    assert register_replica(a.primary_port, "slave") is None
    assert register_replica(mf.port, "slave") is None
