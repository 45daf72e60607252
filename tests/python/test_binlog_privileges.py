"""The global binlog follows the servers' privileges: a user's backend login must hold, on
every source primary, what MariaDB itself asks for the command (REPLICATION SLAVE to dump,
BINLOG MONITOR to show events, SUPER or BINLOG MONITOR to list the files, SUPER or BINLOG
ADMIN to purge, RELOAD to flush), and the refusals are MariaDB's own ERR 1227, compared here
with what the real primary answers the same login. `binlog.users` only narrows.

manifold runs as the quick start does (`--binlog-dir` and `--user` flags, binlog.users
unset), in front of two independent clusters."""

import subprocess

import pymysql
import pytest

import binlogkit as bk
import rawmysql

SCHEMAS = {"default": "priv_a", "b": "priv_b"}
BOTH, DEFAULT_ONLY = ("default", "b"), ("default",)
# name: (global privileges, on which primaries)
LOGINS = {
    "nogrant": ("", BOTH),
    "reader": ("REPLICATION SLAVE, BINLOG MONITOR", BOTH),
    "monitor": ("BINLOG MONITOR", BOTH),
    "binadmin": ("BINLOG ADMIN, BINLOG MONITOR", BOTH),
    "half": ("REPLICATION SLAVE, BINLOG MONITOR, BINLOG ADMIN, RELOAD", DEFAULT_ONLY),
    "late": ("", BOTH),
    "roleuser": ("", BOTH),
}
# A manifold user whose backend login (with every privilege) exists on the default cluster's
# primary only: its grants on cluster b's cannot be learned.
GHOST = "ghost"
DUMP_DENIED = "Access denied; you need (at least one of) the REPLICATION SLAVE privilege(s) for this operation"


def pw(name):
    return f"pw-{name}"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    with bk.clusters(["default", "b"]) as (a, b):
        by_name = {"default": a, "b": b}
        for name, (privileges, where) in LOGINS.items():
            for c in (a, b):
                c.query(f"CREATE USER IF NOT EXISTS '{name}'@'%' IDENTIFIED BY '{pw(name)}'")
                c.query(f"GRANT ALL ON `priv\\_%`.* TO '{name}'@'%'")
            for cluster in where:
                if privileges:
                    by_name[cluster].query(f"GRANT {privileges} ON *.* TO '{name}'@'%'")
        # A role granting the binlog's reading privileges, active at login (MariaDB's
        # SET DEFAULT ROLE): its grants count as the server counts them.
        for c in (a, b):
            c.query("CREATE ROLE IF NOT EXISTS binlog_reader")
            c.query("GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO binlog_reader")
            c.query("GRANT binlog_reader TO 'roleuser'@'%'")
            c.query("SET DEFAULT ROLE binlog_reader FOR 'roleuser'@'%'")
        a.query(f"CREATE USER IF NOT EXISTS '{GHOST}'@'%' IDENTIFIED BY '{pw(GHOST)}'")
        a.query(f"GRANT ALL PRIVILEGES ON *.* TO '{GHOST}'@'%'")
        binlog_dir = tmp_path_factory.mktemp("privileges") / "binlog"
        users = [arg for name in [*LOGINS, GHOST] for arg in ("--user", f"{name}:{pw(name)}")]
        mf = bk.BinlogManifold([a, b], binlog_dir, {"b": ["priv_b"]}, name="manifold-privileges",
                               binlog_users=None, extra_args=["--binlog-dir", str(binlog_dir), *users])
        bk.create_schemas([a, b], SCHEMAS)
        with mf.connect(database="priv_a") as c, c.cursor() as cur:
            cur.execute("INSERT INTO ledger VALUES (1, 'a', 1, NULL)")
            cur.execute("FLUSH BINARY LOGS")
        yield a, b, mf
        mf.stop_and_check()


def answer(port, user, sql):
    """(code, message) of the ERR the statement gets, or None and its rows."""
    with pymysql.connect(host="127.0.0.1", port=port, user=user, password=pw(user)) as c, c.cursor() as cur:
        try:
            cur.execute(sql)
        except pymysql.err.MySQLError as e:
            return e.args[0], e.args[1]
        return None, cur.fetchall()


def dump(port, user, file):
    """`mariadb-binlog --read-from-remote-server` as `user`: (exit code, stderr)."""
    p = subprocess.run(["mariadb-binlog", "--read-from-remote-server", "-h127.0.0.1", f"-P{port}",
                        f"-u{user}", f"-p{pw(user)}", file], capture_output=True, timeout=60)
    return p.returncode, p.stderr.decode(errors="replace")


def first_file(mf):
    with mf.connect() as c, c.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return cur.fetchall()[0][0]


def answer_as_app(mf, sql):
    with mf.connect() as c, c.cursor() as cur:
        try:
            cur.execute(sql)
        except pymysql.err.MySQLError as e:
            return e.args[0], e.args[1]
        return None, cur.fetchall()


def files(mf):
    with mf.connect() as c, c.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [r[0] for r in cur.fetchall()]


def assert_refused_as_the_server(a, mf, user, sql, server_sql=None):
    """manifold's ERR is the real primary's, code and text, for the same login."""
    real = answer(a.primary_port, user, server_sql or sql)
    ours = answer(mf.port, user, sql)
    assert real[0] == 1227, (user, sql, real)
    assert ours == real, (user, sql, ours, real)


def test_a_dump_needs_replication_slave_as_mariadb_answers(setup):
    a, _, mf = setup
    for user in ("nogrant", "monitor", "binadmin"):
        real = dump(a.primary_port, user, "binlog.000001")
        ours = dump(mf.port, user, first_file(mf))
        assert real[0] != 0 and DUMP_DENIED in real[1], real
        assert ours[0] == real[0] and DUMP_DENIED in ours[1], (user, ours)
    code, err = dump(mf.port, "reader", first_file(mf))
    assert code == 0, err


def test_a_dump_by_python_mysql_replication_is_refused_without_the_grant(setup):
    from pymysqlreplication import BinLogStreamReader
    _, _, mf = setup
    stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": mf.port, "user": "nogrant",
                                                     "passwd": pw("nogrant")},
                                server_id=4242, blocking=False, is_mariadb=True, log_file=first_file(mf), log_pos=4)
    try:
        with pytest.raises(pymysql.err.OperationalError) as e:
            for _ in stream:
                pass
        assert e.value.args[0] == 1227 and e.value.args[1] == DUMP_DENIED, e.value.args
    finally:
        stream.close()


def register_replica(port, user):
    """COM_REGISTER_SLAVE as a replica sends it, raw: None (OK) or (code, SQLSTATE, message)."""
    c = rawmysql.RawConn(port).login(user, pw(user))
    try:
        # server_id, host, user, password (length-prefixed), port, rank, master id
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


def test_registering_a_replica_needs_replication_slave_as_mariadb_answers(setup):
    a, _, mf = setup
    for user in ("nogrant", "monitor", "binadmin"):
        real = register_replica(a.primary_port, user)
        # Not the dump's 1227: the server's login refusal, for the account as it matched.
        assert real == (1045, "28000", f"Access denied for user '{user}'@'%' (using password: YES)"), (user, real)
        assert register_replica(mf.port, user) == real, user
    assert register_replica(a.primary_port, "reader") is None
    assert register_replica(mf.port, "reader") is None


def test_show_binlog_events_asks_what_mariadb_asks(setup):
    a, _, mf = setup
    # MariaDB 10.11 asks BINLOG MONITOR (REPLICATION SLAVE alone is not enough).
    assert_refused_as_the_server(a, mf, "nogrant", "SHOW BINLOG EVENTS LIMIT 1")
    for user in ("reader", "monitor"):
        code, rows = answer(mf.port, user, "SHOW BINLOG EVENTS LIMIT 1")
        assert code is None and len(rows) == 1, (user, code, rows)


def test_the_file_list_and_status_need_binlog_monitor(setup):
    a, _, mf = setup
    for sql in ("SHOW BINARY LOGS", "SHOW MASTER STATUS", "SHOW BINLOG STATUS"):
        assert_refused_as_the_server(a, mf, "nogrant", sql)
        code, rows = answer(mf.port, "monitor", sql)
        assert code is None and rows and rows[0][0].startswith("manifold-bin."), (sql, code, rows)
    # Variables stay readable by anyone, as on the servers.
    code, rows = answer(mf.port, "nogrant", "SELECT @@gtid_binlog_pos")
    assert code is None, rows


def test_a_login_granted_on_one_primary_only_is_refused(setup):
    a, _, mf = setup
    # The login may on the default cluster's primary itself...
    assert answer(a.primary_port, "half", "SHOW BINARY LOGS")[0] is None
    # ...but the global binlog carries cluster b's rows too.
    code, err = dump(mf.port, "half", first_file(mf))
    assert code != 0 and DUMP_DENIED in err, err
    code, message = answer(mf.port, "half", "SHOW BINARY LOGS")
    assert code == 1227 and "SUPER, BINLOG MONITOR" in message, message
    before = files(mf)
    code, message = answer(mf.port, "half", f"PURGE BINARY LOGS TO '{before[-1]}'")
    assert code == 1227 and "SUPER, BINLOG ADMIN" in message, message
    assert files(mf) == before


def test_a_default_role_counts_as_on_mariadb(setup):
    a, _, mf = setup
    assert answer(a.primary_port, "roleuser", "SHOW BINARY LOGS")[0] is None
    code, rows = answer(mf.port, "roleuser", "SHOW BINARY LOGS")
    assert code is None and rows, (code, rows)
    code, err = dump(mf.port, "roleuser", first_file(mf))
    assert code == 0, err


def test_grants_that_cannot_be_learned_refuse_with_the_servers_words(setup):
    a, _, mf = setup
    logged_before = len(mf.log_path.read_bytes())
    # The login fails on cluster b's primary: refused as the server refuses a login without
    # the privilege, naming neither the backend login, nor the cluster, nor the backend's
    # error (which manifold logs).
    assert_refused_as_the_server(a, mf, "nogrant", "SHOW BINARY LOGS")
    assert answer(mf.port, GHOST, "SHOW BINARY LOGS") == answer(mf.port, "nogrant", "SHOW BINARY LOGS")
    code, err = dump(mf.port, GHOST, first_file(mf))
    assert code != 0 and DUMP_DENIED in err, err
    assert "could not learn" not in err and "cluster" not in err, err
    bk.wait_for("the reason in manifold's log",
                lambda: b"the grants could not be learned" in mf.log_path.read_bytes()[logged_before:], timeout=10)


def test_a_grant_added_counts_within_seconds_and_a_revoked_one_after_a_reload(setup):
    a, b, mf = setup
    assert answer(mf.port, "late", "SHOW BINARY LOGS")[0] == 1227
    a.query("GRANT BINLOG MONITOR ON *.* TO 'late'@'%'")
    # Granted on one primary: still refused.
    assert answer(mf.port, "late", "SHOW BINARY LOGS")[0] == 1227
    b.query("GRANT BINLOG MONITOR ON *.* TO 'late'@'%'")
    # A refusal is remembered for 5 s: the grant counts once it is asked again.
    bk.wait_for("the grant to count", lambda: answer(mf.port, "late", "SHOW BINARY LOGS")[0] is None, timeout=30)
    for c in (a, b):
        c.query("REVOKE BINLOG MONITOR ON *.* FROM 'late'@'%'")
    mf.admin("RELOAD CONFIG")
    assert answer(mf.port, "late", "SHOW BINARY LOGS")[0] == 1227


def show_grants_run(cluster):
    return int(cluster.query("SHOW GLOBAL STATUS LIKE 'Com_show_grants'")[0][1])


def test_a_looping_refused_user_does_not_make_every_statement_ask_the_primaries(setup):
    """A refusal, and a failure to learn the grants (a failed backend login, which MariaDB's
    max_password_errors counts), are remembered for a while: not one SHOW GRANTS per
    statement."""
    a, b, mf = setup
    loops = 30
    for user in ("nogrant", GHOST):
        before = show_grants_run(a), show_grants_run(b)
        with pymysql.connect(host="127.0.0.1", port=mf.port, user=user, password=pw(user)) as c, c.cursor() as cur:
            for _ in range(loops):
                with pytest.raises(pymysql.err.OperationalError) as e:
                    cur.execute("SHOW MASTER STATUS")
                assert e.value.args[0] == 1227, e.value.args
        asked = show_grants_run(a) - before[0], show_grants_run(b) - before[1]
        # One lookup per 5 s at most (the loop takes far less than 5 s per statement).
        assert asked[0] < loops // 3 and asked[1] < loops // 3, (user, asked)


def test_binlog_users_narrows_and_never_widens(setup):
    _, _, mf = setup
    original = mf.config.read_text()
    first = first_file(mf)
    try:
        # The [binlog] section is the file's last.
        mf.config.write_text(original + 'users = ["reader", "nogrant"]\n')
        changes = mf.admin("RELOAD CONFIG")
        assert any("binlog.users" in str(row.values()) for row in changes), changes
        # Listed and granted.
        assert answer(mf.port, "reader", "SHOW BINARY LOGS")[0] is None
        # Listed, without the grants: still refused.
        assert answer(mf.port, "nogrant", "SHOW BINARY LOGS")[0] == 1227
        # Granted, not listed: refused, with the server's words.
        code, message = answer(mf.port, "roleuser", "SHOW BINARY LOGS")
        assert code == 1227 and "SUPER, BINLOG MONITOR" in message, message
        code, err = dump(mf.port, "roleuser", first)
        assert code != 0 and DUMP_DENIED in err, err
        # Nor the users with every privilege, when not listed.
        assert answer_as_app(mf, "SHOW BINARY LOGS")[0] == 1227
    finally:
        mf.config.write_text(original)
        mf.admin("RELOAD CONFIG")
    assert answer(mf.port, "roleuser", "SHOW BINARY LOGS")[0] is None


def test_purge_and_flush_need_the_servers_privileges_and_nothing_is_purged(setup):
    """Last: it removes files."""
    a, _, mf = setup
    with mf.connect() as c, c.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
    before = files(mf)
    assert len(before) >= 2, before
    purge = f"PURGE BINARY LOGS TO '{before[-1]}'"
    for user in ("nogrant", "reader", "monitor"):
        # The server checks the privilege before it looks for the file.
        assert_refused_as_the_server(a, mf, user, purge)
        assert_refused_as_the_server(a, mf, user, "PURGE BINARY LOGS BEFORE '2000-01-01 00:00:00'")
        assert_refused_as_the_server(a, mf, user, "FLUSH BINARY LOGS")
    # BINLOG ADMIN purges but does not flush (that is RELOAD, on MariaDB as on MySQL).
    assert_refused_as_the_server(a, mf, "binadmin", "FLUSH BINARY LOGS")
    assert files(mf) == before
    assert {p.name for p in mf.files()} == set(before)
    code, rows = answer(mf.port, "binadmin", purge)
    assert code is None, rows
    assert before[0] not in files(mf)
