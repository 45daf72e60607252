"""Every form of a binlog question is answered by manifold while the global binlog is on:
MariaDB's `SET STATEMENT max_statement_time=... FOR` around a binlog statement or a read of
the global binlog's variables (what MariaDB's Connector/J sends for every query of a
connection with a query timeout, as Debezium's MariaDB connector has), and `SHOW VARIABLES`
whose pattern or condition covers binlog variables among the server's own. Each answer names
the global binlog's file and GTIDs (`0-4000000001-N`), never the primary's (`0-1-N`); the
server's other variables keep the server's values."""

import pymysql
import pytest

import binlogkit as bk

WRAP = "SET STATEMENT max_statement_time=30 FOR "


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    with bk.clusters(["default"]) as cs:
        a = cs[0]
        a.query("CREATE DATABASE questions")
        a.query("CREATE TABLE questions.t (id INT PRIMARY KEY)")
        mf = bk.BinlogManifold(cs, tmp_path_factory.mktemp("questions") / "binlog", {})
        with mf.connect(database="questions") as c, c.cursor() as cur:
            for i in range(3):
                cur.execute(f"INSERT INTO t VALUES ({i})")
        mf.wait_caught_up()
        yield a, mf
        mf.stop_and_check()


def rows(mf, sql, dicts=False):
    with mf.connect() as c, c.cursor(pymysql.cursors.DictCursor if dicts else None) as cur:
        cur.execute(sql)
        return cur.fetchall()


def global_binlog_pos(mf):
    """The global binlog's position, as manifold's own statement gives it."""
    pos = rows(mf, "SELECT @@global.gtid_binlog_pos")[0][0]
    assert pos.startswith(f"0-{bk.BINLOG_SERVER_ID}-"), pos
    return pos


def test_wrapped_binlog_statements_are_manifolds(setup):
    a, mf = setup
    primary_file = a.query("SHOW MASTER STATUS")[0][0]
    assert not primary_file.startswith("manifold-bin"), primary_file
    plain = rows(mf, "SHOW MASTER STATUS")
    assert plain[0][0].startswith("manifold-bin."), plain
    for statement in ["SHOW MASTER STATUS", "SHOW BINLOG STATUS"]:
        for sql in [WRAP + statement, "set statement max_statement_time = 1.5, sql_mode = '' for " + statement.lower()]:
            assert rows(mf, sql) == plain, sql
    logs = rows(mf, "SHOW BINARY LOGS")
    assert logs[0][0] == "manifold-bin.000001", logs
    for sql in [WRAP + "SHOW BINARY LOGS", WRAP + "SHOW MASTER LOGS"]:
        assert rows(mf, sql) == logs, sql
    events = rows(mf, WRAP + "SHOW BINLOG EVENTS IN 'manifold-bin.000001' LIMIT 3")
    assert [e[0] for e in events] == ["manifold-bin.000001"] * 3, events
    assert events[0][2] == "Format_desc" and events[0][3] == bk.BINLOG_SERVER_ID, events


def described(port, sql, **kw):
    """The column names and types and the rows of `sql` on `port`."""
    with pymysql.connect(host="127.0.0.1", port=port, autocommit=True, **kw) as c, c.cursor() as cur:
        cur.execute(sql)
        return [(d[0], d[1]) for d in cur.description], cur.fetchall()


def test_the_admin_port_answers_binlog_statements_as_the_mysql_port(setup):
    """One answer on both ports: the admin port's `SHOW MASTER STATUS` and `SHOW BINARY LOGS`
    are the MySQL port's, column types included (`Position` and `File_size` are numbers),
    in every form the MySQL port reads; `SHOW BINLOG STATUS` stays the admin port's figures."""
    a, mf = setup
    admin = dict(user="admin", password="admin")
    client = dict(user=bk.USER, password=bk.PASSWORD)
    for sql, same in [("SHOW MASTER STATUS", ["show master status;", "/* tool */ SHOW BINARY LOG STATUS",
                                              WRAP + "SHOW MASTER STATUS"]),
                      ("SHOW BINARY LOGS", ["SHOW MASTER LOGS", "show  binary\nlogs"])]:
        expected = described(mf.port, sql, **client)
        assert expected[1] and isinstance(expected[1][0][1], int), expected
        for form in [sql, *same]:
            assert described(mf.admin_port, form, **admin) == expected, form
    columns, figures = described(mf.admin_port, "SHOW BINLOG STATUS", **admin)
    assert [c[0] for c in columns] == ["Variable_name", "Value"], columns
    assert figures[0][0] == "Binlog_state", figures


def test_wrapped_variable_reads_are_manifolds(setup):
    a, mf = setup
    pos = global_binlog_pos(mf)
    assert a.query("SELECT @@gtid_binlog_pos")[0][0] != pos
    assert rows(mf, WRAP + "SELECT @@global.gtid_binlog_pos")[0][0] == pos
    assert rows(mf, WRAP + "SELECT @@gtid_current_pos, @@server_id") == ((pos, bk.BINLOG_SERVER_ID),)
    assert rows(mf, WRAP + "SHOW GLOBAL VARIABLES LIKE 'GTID_BINLOG_POS'") == (("gtid_binlog_pos", pos),)


def test_show_variables_patterns_answer_manifolds_values_among_the_servers(setup):
    a, mf = setup
    pos = global_binlog_pos(mf)
    for sql in ["SHOW GLOBAL VARIABLES LIKE 'GTID_%'", "show variables like 'gtid%'",
                WRAP + "SHOW GLOBAL VARIABLES LIKE 'gtid\\_%'",
                "SHOW GLOBAL VARIABLES WHERE Variable_name LIKE 'gtid%'"]:
        server = dict(a.query(sql))
        ours = dict(rows(mf, sql))
        # The server's names, each of them...
        assert set(ours) == set(server), sql
        assert "gtid_slave_pos" in ours and "gtid_binlog_state" in ours, sql
        # ...with manifold's values for those it owns, the server's for the others.
        assert ours["gtid_binlog_pos"] == pos and ours["gtid_current_pos"] == pos, (sql, ours)
        assert server["gtid_binlog_pos"] != pos, server
        assert ours["gtid_domain_id"] == "0" and ours["gtid_strict_mode"] == "ON", ours
        assert ours["gtid_slave_pos"] == server["gtid_slave_pos"], sql
        assert ours["gtid_ignore_duplicates"] == server["gtid_ignore_duplicates"], sql


def test_show_variables_of_both_and_all_of_them(setup):
    a, mf = setup
    pos = global_binlog_pos(mf)
    sql = "SHOW VARIABLES WHERE Variable_name IN ('gtid_binlog_pos', 'version', 'server_id')"
    got = dict(rows(mf, sql))
    assert got == {"gtid_binlog_pos": pos, "server_id": str(bk.BINLOG_SERVER_ID),
                   "version": a.query("SELECT @@version")[0][0]}, got
    got = dict(rows(mf, "SHOW SESSION VARIABLES LIKE 'server%'"))
    assert got["server_id"] == str(bk.BINLOG_SERVER_ID), got
    every = rows(mf, "SHOW GLOBAL VARIABLES")
    server = a.query("SHOW GLOBAL VARIABLES")
    assert [r[0] for r in every] == [r[0] for r in server]
    got = dict(every)
    assert got["gtid_binlog_pos"] == pos and got["server_id"] == str(bk.BINLOG_SERVER_ID)
    assert got["log_bin"] == "ON" and got["binlog_format"] == "ROW"
    assert got["max_connections"] == dict(server)["max_connections"]
    # The server's refusal is the client's.
    with pytest.raises(pymysql.err.MySQLError) as e:
        rows(mf, "SHOW VARIABLES WHERE no_such_column = 1")
    assert e.value.args[0] == 1054, e.value.args
    # And the form manifold answers alone stays.
    assert rows(mf, "SHOW VARIABLES LIKE 'gtid_binlog_pos'") == (("gtid_binlog_pos", pos),)


def multi(mf):
    """A login that may send several statements in one query (`a; b`)."""
    return mf.connect(client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)


def test_show_variables_with_more_statements_leaves_no_answer_behind(setup):
    """A binlog question followed by other statements in one query is refused whole (the
    server would answer both, manifold answers one statement per query) and nothing runs;
    a trailing `;` or comment leaves one statement, answered. Either way the next statement
    of the session, and of the next sessions borrowing the same backend connections, gets
    its own answer: before, a form the server answered left its further results unread on
    the pooled connection, for whoever borrowed it next."""
    a, mf = setup
    pos = global_binlog_pos(mf)
    version = a.query("SELECT @@version")[0][0]
    of_both = "SHOW VARIABLES WHERE Variable_name IN ('gtid_binlog_pos', 'version')"
    for n, sql in enumerate([of_both + "; SELECT 1", "SHOW GLOBAL VARIABLES LIKE 'gtid%';SELECT 1;",
                             "SHOW MASTER STATUS; INSERT INTO questions.t VALUES (100)"]):
        with multi(mf) as c, c.cursor() as cur:
            with pytest.raises(pymysql.err.MySQLError) as e:
                cur.execute(sql)
            assert e.value.args[0] == 1235 and "followed by other statements" in e.value.args[1], e.value.args
            cur.execute(f"SELECT {1000 + n}")
            assert cur.fetchall() == ((1000 + n,),), sql
        for k in range(3):
            with multi(mf) as c, c.cursor() as cur:
                cur.execute(f"SELECT {2000 + k}")
                assert cur.fetchall() == ((2000 + k,),), sql
    assert a.query("SELECT id FROM questions.t WHERE id = 100") == ()
    # One statement, its end written out: manifold's values, then the next answers.
    for n, sql in enumerate([of_both + ";", of_both + " ; ", of_both + "; -- the end",
                             of_both + "; /* the end */", of_both + ";;"]):
        with multi(mf) as c, c.cursor() as cur:
            cur.execute(sql)
            assert dict(cur.fetchall()) == {"gtid_binlog_pos": pos, "version": version}, sql
            while cur.nextset():
                pass
            cur.execute(f"SELECT {3000 + n}")
            assert cur.fetchall() == ((3000 + n,),), sql
        with multi(mf) as c, c.cursor() as cur:
            cur.execute(f"SELECT {4000 + n}")
            assert cur.fetchall() == ((4000 + n,),), sql
