"""What one client session leaves behind must not reach the next one: manifold runs sessions on
pooled backend connections, so each new session must start as a fresh server connection would.
Raw protocol (rawmysql) so that no client library resets anything itself (PyMySQL always sends
SET NAMES at connect). Compared with MariaDB directly."""

import rawmysql
from conftest import Manifold


STATE = ("SELECT @@character_set_client, @@collation_connection, @@sql_mode, @@autocommit, "
         "@@time_zone, IFNULL(@leftover, 'none'), @@in_transaction")


def dirty_then_fresh(port, schema, rounds=6):
    """Sessions that change everything they can, each followed by a fresh session that
    reports what it sees."""
    seen = []
    for i in range(rounds):
        d = rawmysql.connect(port, database=schema, charset=33)
        d.query("SET NAMES latin2")
        d.query("SET SESSION sql_mode = 'ANSI'")
        d.query("SET @leftover = 'dirty'")
        d.query("SET autocommit = 0")
        d.query("SET time_zone = '+05:00'")
        d.query("CREATE TEMPORARY TABLE IF NOT EXISTS leftover_tmp (x INT)")
        d.query("BEGIN")
        d.quit()
        f = rawmysql.connect(port, database=schema, charset=33)
        seen.append(f.query(STATE)[0][2])
        try:
            f.query("SELECT * FROM leftover_tmp")
            seen.append("temporary table leaked")
        except rawmysql.MySQLError as e:
            seen.append(e.code)
        f.quit()
    return seen


def test_session_state_does_not_leak_between_sessions(topology, manifold, schema):
    direct = dirty_then_fresh(topology.primary_port, schema)
    via = dirty_then_fresh(manifold.port, schema)
    assert via == direct
    assert direct[1] == 1146


def database_seen(port, first_db, second_db, rounds=6):
    seen = []
    for _ in range(rounds):
        a = rawmysql.connect(port, database=first_db)
        a.query("SELECT 1")
        a.quit()
        b = rawmysql.connect(port, database=second_db)
        seen.append(b.scalar("SELECT DATABASE()"))
        b.quit()
    return seen


def test_schema_does_not_leak_between_sessions(topology, manifold, schema):
    """A session that connects without a database must see DATABASE() = NULL, whatever the
    previous user of the pooled backend connection had selected (otherwise unqualified names
    resolve in someone else's schema)."""
    direct = database_seen(topology.primary_port, schema, None)
    via = database_seen(manifold.port, schema, None)
    assert direct == [None] * 6
    assert via == direct


def test_use_statement_does_not_leak_between_sessions(topology, manifold, schema):
    """Same with the schema chosen by a USE statement in the previous session."""
    seen = {}
    for name, port in (("direct", topology.primary_port), ("manifold", manifold.port)):
        seen[name] = []
        for _ in range(6):
            a = rawmysql.connect(port)
            a.query(f"USE {schema}")
            a.quit()
            b = rawmysql.connect(port)
            seen[name].append(b.scalar("SELECT DATABASE()"))
            b.quit()
    assert seen["direct"] == [None] * 6
    assert seen["manifold"] == seen["direct"]


def test_handshake_server_version_is_the_backends(topology):
    """The handshake's version string is the backend's with "-manifold" appended, from the
    very first client of a fresh manifold on (clients switch behaviour on it)."""
    d = rawmysql.connect(topology.primary_port)
    want = d.handshake.server_version + "-manifold"
    backend_version = d.scalar("SELECT VERSION()")
    d.quit()
    m = Manifold(topology, log_name="manifold-clients-version")
    try:
        versions = []
        for _ in range(6):  # the first connection of each worker included
            c = rawmysql.RawConn(m.port)
            versions.append(c.read_handshake().server_version)
            c.close()
        assert versions == [want] * 6
        c = rawmysql.connect(m.port)
        assert c.scalar("SELECT VERSION()") == backend_version
        c.quit()
    finally:
        m.stop()
        assert "panicked" not in m.log_path.read_text()
