"""COM_CHANGE_USER through manifold (raw protocol: PyMySQL has no change_user), compared with
MariaDB directly. manifold authenticates the new user against its own table and runs the
session on that user's backend login; CURRENT_USER() reports the backend account, so the
manifold user here has the same name and password as a real MariaDB account and the results
must equal the direct ones."""


import pytest

import rawmysql
from conftest import PASSWORD, USER, Manifold


def stop_and_check(m):
    m.stop()
    text = m.log_path.read_text()
    assert "panicked" not in text, f"manifold panicked: see {m.log_path}"
    return text




@pytest.fixture
def two_user_manifold(topology, mariadb_account):
    name, password = mariadb_account
    m = Manifold(topology, ["--user", f"{name}:{password}"], log_name="manifold-auth-cu")
    yield m
    stop_and_check(m)


def scenario(port, schema, second):
    """The same COM_CHANGE_USER sequence; returns what the session saw at each step."""
    name, password = second
    out = []
    c = rawmysql.connect(port, database=schema)
    try:
        c.query("SET @v = 42")
        c.query("CREATE TEMPORARY TABLE tmp_cu (x INT)")
        c.query("SET SESSION sql_mode = 'ANSI_QUOTES'")
        out.append(c.query("SELECT CURRENT_USER(), DATABASE(), @v, @@session.sql_mode = 'ANSI_QUOTES'"))

        c.change_user(name, password, database=schema)
        out.append(c.query("SELECT CURRENT_USER(), DATABASE(), @v, @@session.sql_mode = 'ANSI_QUOTES'"))
        try:
            c.query("SELECT * FROM tmp_cu")
            out.append("temporary table survived")
        except rawmysql.MySQLError as e:
            out.append(("tmp gone", e.code))

        # An open transaction is rolled back by the switch.
        c.query("CREATE TABLE IF NOT EXISTS cu_t (id INT PRIMARY KEY) ENGINE=InnoDB")
        c.query("BEGIN")
        c.query(f"INSERT INTO cu_t VALUES ({port % 1000 + 1})")
        c.change_user(USER, PASSWORD)  # no database this time
        out.append(c.query("SELECT CURRENT_USER(), DATABASE(), @@in_transaction"))
        out.append(c.query(f"SELECT COUNT(*) FROM {schema}.cu_t"))
        c.query(f"DROP TABLE {schema}.cu_t")
        out.append(c.ping()[:1])
    finally:
        c.quit()
    return out


def test_change_user_switches_and_resets_state(topology, manifold, two_user_manifold, schema, mariadb_account):
    direct = scenario(topology.primary_port, schema, mariadb_account)
    via = scenario(two_user_manifold.port, schema, mariadb_account)
    assert via == direct
    name = mariadb_account[0]
    assert direct[0] == [("rows", ["CURRENT_USER()", "DATABASE()", "@v", "@@session.sql_mode = 'ANSI_QUOTES'"],
                          [("app@%", schema, "42", "1")])]
    assert direct[1][0][2] == [(f"{name}@%", schema, None, "0")]
    assert direct[2] == ("tmp gone", 1146)
    assert direct[3][0][2] == [("app@%", None, "0")]
    assert direct[4][0][2] == [("0",)]


def test_change_user_back_and_forth_many_times(topology, two_user_manifold, mariadb_account):
    name, password = mariadb_account
    c = rawmysql.connect(two_user_manifold.port)
    try:
        for i in range(10):
            user, pw, want = (name, password, f"{name}@%") if i % 2 == 0 else (USER, PASSWORD, "app@%")
            c.query(f"SET @marker = {i}")
            c.change_user(user, pw)
            assert c.query("SELECT CURRENT_USER(), @marker")[0][2] == [(want, None)]
    finally:
        c.quit()


def test_change_user_to_unknown_database(topology, two_user_manifold, mariadb_account):
    """Directly: ERR 1049 for COM_CHANGE_USER itself. Through manifold the schema is checked
    when the backend is first used: the error may come from the change or from the next
    statement, and must be 1049 with the server's message either way."""
    name, password = mariadb_account
    results = {}
    for label, port in (("direct", topology.primary_port), ("manifold", two_user_manifold.port)):
        c = rawmysql.connect(port)
        try:
            try:
                c.change_user(name, password, database="no_such_db_cu")
                c.query("SELECT 1")
                results[label] = None
            except rawmysql.MySQLError as e:
                results[label] = (e.code, e.message)
        finally:
            c.close()
    assert results["direct"][0] == 1049
    assert results["manifold"] == results["direct"]


def test_failed_change_user_keeps_connection_like_mariadb(topology, two_user_manifold, mariadb_account, schema):
    """A wrong password in COM_CHANGE_USER: ERR 1045. MariaDB keeps the connection open and
    logged in as the previous user, in the same database, with its session state reset (user
    variables gone); a drop-in must not drop it."""
    outcomes = {}
    for label, port in (("direct", topology.primary_port), ("manifold", two_user_manifold.port)):
        c = rawmysql.connect(port, database=schema)
        try:
            c.query("SET @keep = 1")
            with pytest.raises(rawmysql.MySQLError) as e:
                c.change_user(mariadb_account[0], "wrong-password")
            err = (e.value.code, e.value.message)
            try:
                after = c.query("SELECT CURRENT_USER(), DATABASE(), @keep")[0][2]
            except (rawmysql.ConnectionClosed, ConnectionError) as exc:
                after = f"connection closed: {exc!r}"
            outcomes[label] = (err, after)
        finally:
            c.close()
    assert outcomes["direct"][0] == (1045, f"Access denied for user '{mariadb_account[0]}'@'127.0.0.1' (using password: YES)")
    assert outcomes["direct"][1] == [("app@%", schema, None)]
    assert outcomes["manifold"][0] == outcomes["direct"][0]
    assert outcomes["manifold"] == outcomes["direct"]


def test_change_user_unknown_user_gives_1045(topology, manifold):
    c = rawmysql.connect(manifold.port)
    try:
        with pytest.raises(rawmysql.MySQLError) as e:
            c.change_user("nobody_cu", "x")
        assert (e.value.code, e.value.message) == (1045, "Access denied for user 'nobody_cu'@'127.0.0.1' (using password: YES)")
    finally:
        c.close()
    # Other sessions are unaffected.
    other = rawmysql.connect(manifold.port)
    assert other.scalar("SELECT 1") == "1"
    other.quit()


def test_change_user_with_caching_sha2_manifold(topology, tmp_path, mariadb_account):
    """On a manifold advertising caching_sha2_password, COM_CHANGE_USER with the native
    scramble (what the client computed) is switched or verified, and lands on the new user."""
    name, password = mariadb_account
    cfg = tmp_path / "sha2.toml"
    cfg.write_text('[mysql]\ndefault_auth_plugin = "caching_sha2_password"\n')
    m = Manifold(topology, ["--config", str(cfg), "--user", f"{name}:{password}"], log_name="manifold-auth-cu-sha2")
    try:
        c = rawmysql.connect(m.port)
        c.change_user(name, password, plugin="caching_sha2_password")
        assert c.scalar("SELECT CURRENT_USER()") == f"{name}@%"
        c.change_user(USER, PASSWORD, plugin="mysql_native_password")
        assert c.scalar("SELECT CURRENT_USER()") == "app@%"
        c.quit()
    finally:
        stop_and_check(m)
