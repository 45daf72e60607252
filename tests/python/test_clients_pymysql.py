"""PyMySQL through manifold behaves as it does against MariaDB directly.

Most tests run the same statements through manifold and directly against the primary and
compare what PyMySQL returns (values, column descriptions, errors, warnings).

Not covered here:
- prepared statements: PyMySQL has no binary protocol (it interpolates parameters client-side);
- COM_CHANGE_USER: PyMySQL has no change_user(); test_auth_change_user.py does it with rawmysql.
"""

import hashlib
import os
import ssl

import pymysql
import pymysql.cursors
import pytest
from pymysql.constants import CLIENT
from pathlib import Path

from conftest import PASSWORD, USER


def mc(m, **kw):
    """A PyMySQL connection through manifold `m`. Plain TCP unless the test asks for TLS:
    PyMySQL >= 1.2 prefers TLS by default, and TLS logins to manifold fail intermittently
    (see test_tls_*); the TLS tests cover that on their own so that it does not mask
    everything else."""
    kw.setdefault("ssl_disabled", True)
    return m.connect(**kw)


def direct(topology, **kw):
    kw.setdefault("ssl_disabled", True)
    kw.setdefault("user", USER)
    kw.setdefault("password", PASSWORD)
    return pymysql.connect(host="127.0.0.1", port=topology.primary_port, **kw)


def both(topology, manifold, **kw):
    """(through manifold, direct) connections with the same arguments."""
    return mc(manifold, **kw), direct(topology, **kw)


def stop_and_check(m):
    m.stop()
    text = m.log_path.read_text()
    assert "panicked" not in text, f"manifold panicked: see {m.log_path}"
    return text


def run(conn, sql, args=None):
    with conn.cursor() as c:
        c.execute(sql, args)
        return c.description, c.fetchall()


def error_of(conn, sql):
    with pytest.raises(pymysql.MySQLError) as e:
        run(conn, sql)
    return e.value.args


TYPES_TABLE = """
CREATE TABLE types (
  id INT PRIMARY KEY,
  ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, i INT, iu INT UNSIGNED,
  bi BIGINT, bu BIGINT UNSIGNED,
  d DECIMAL(30,10), dbig DECIMAL(65,30),
  f FLOAT, db DOUBLE,
  dt DATE, dtm DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME(6), y YEAR,
  b BIT(10),
  e ENUM('a','b','ü'), st SET('x','y','z'),
  c CHAR(10), vc VARCHAR(200), tx TEXT,
  bin BINARY(4), vb VARBINARY(300), bl BLOB,
  j JSON
) DEFAULT CHARSET=utf8mb4
"""

TYPES_ROWS = [
    "(1, -128, 255, -32768, -8388608, -2147483648, 4294967295, -9223372036854775808, 18446744073709551615,"
    " '-12345678901234567890.0123456789', '12345678901234567890123456789012345.123456789012345678901234567890',"
    " -3.5, 2.718281828459045,"
    " '1000-01-01', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999', '-838:59:59.000000', 1901,"
    " b'1010101010', 'ü', 'x,z',"
    " 'fixed', 'héllo wörld — 日本語 🐬🎉', REPEAT('long text ', 100),"
    " X'00FF7F80', X'000102030405FEFF', X'00', '{\"k\": [1, 2, {\"emoji\": \"😀\"}]}')",
    "(2, 127, 0, 32767, 8388607, 2147483647, 0, 9223372036854775807, 0,"
    " '0.0000000001', '0', 1.25e30, -1.7976931348623157e308,"
    " '2024-02-29', '1970-01-01 00:00:00', '1999-12-31 23:59:59', '838:59:59.999999', 2155,"
    " b'0', 'a', '',"
    " '', '', '',"
    " X'', X'', X'', '[]')",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]


def test_column_types_match_direct(topology, manifold, schema):
    via, dr = both(topology, manifold, database=schema, autocommit=True)
    with via, dr:
        run(via, TYPES_TABLE)
        run(via, "INSERT INTO types VALUES " + ",".join(TYPES_ROWS))
        # A blob with every byte value, written with a parameter.
        every_byte = bytes(range(256))
        run(via, "UPDATE types SET bl = %s WHERE id = 1", (every_byte,))
        for sql in [
            "SELECT * FROM types ORDER BY id",
            "SELECT id, bl, HEX(bl), LENGTH(vc), CHAR_LENGTH(vc) FROM types ORDER BY id",
            "SELECT 1, -1, 1.5, 1e300, NULL, '', 'a''b', _utf8mb4'🐬', X'00ff', b'101', DATE('2020-01-02'),"
            " CAST('12:34:56.789' AS TIME(3)), 18446744073709551615, -9223372036854775808",
            "SELECT NULL AS n1, NULL AS n2 UNION ALL SELECT 1, NULL",
        ]:
            got_desc, got = run(via, sql)
            want_desc, want = run(dr, sql)
            assert got == want, sql
            assert got_desc == want_desc, sql
        _, rows = run(via, "SELECT bl, vc, j FROM types WHERE id = 1")
        assert rows[0][0] == every_byte
        assert rows[0][1] == "héllo wörld — 日本語 🐬🎉"
        assert "😀" in rows[0][2]


def test_ddl_and_dml_match_direct(topology, manifold, schema):
    via, dr = both(topology, manifold, database=schema, autocommit=True)
    with via, dr:
        results = {}
        for name, conn in (("via", via), ("direct", dr)):
            t = f"dml_{name}"
            out = []
            with conn.cursor() as c:
                out.append(c.execute(f"CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20), n INT)"))
                out.append(c.execute(f"INSERT INTO {t} (v, n) VALUES ('a', 1), ('b', 2), ('c', 3)"))
                out.append(c.lastrowid)
                out.append(c.execute(f"INSERT INTO {t} (v, n) VALUES (%s, %s)", ("d", 4)))
                out.append(c.lastrowid)
                out.append(c.execute(f"UPDATE {t} SET n = n * 10 WHERE n >= 2"))
                out.append(c.execute(f"UPDATE {t} SET n = n WHERE id = 1"))  # matched, not changed
                out.append(c.execute(f"DELETE FROM {t} WHERE v = 'b'"))
                out.append(c.execute(f"ALTER TABLE {t} ADD COLUMN extra INT DEFAULT 7"))
                out.append(c.execute(f"CREATE INDEX ix_{t} ON {t} (v)"))
                c.execute(f"SELECT id, v, n, extra FROM {t} ORDER BY id")
                out.append(c.fetchall())
                out.append(c.execute(f"SELECT LAST_INSERT_ID()"))
                out.append(c.fetchall())
                out.append(c.execute(f"TRUNCATE TABLE {t}"))
                out.append(c.execute(f"DROP TABLE {t}"))
            results[name] = out
        assert results["via"] == results["direct"]
        assert results["via"][10] == ((1, "a", 1, 7), (3, "c", 30, 7), (4, "d", 40, 7))


def test_transactions_commit_and_rollback(topology, manifold, schema):
    with direct(topology, database=schema, autocommit=True) as observer:
        run(observer, "CREATE TABLE acct (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        with mc(manifold, database=schema, autocommit=False) as via:
            run(via, "INSERT INTO acct VALUES (1, 10)")
            assert run(via, "SELECT COUNT(*) FROM acct")[1] == ((1,),)
            assert run(observer, "SELECT COUNT(*) FROM acct")[1] == ((0,),), "uncommitted row visible outside"
            via.rollback()
            assert run(via, "SELECT COUNT(*) FROM acct")[1] == ((0,),)

            run(via, "INSERT INTO acct VALUES (2, 20)")
            run(via, "UPDATE acct SET v = v + 1 WHERE id = 2")
            assert run(observer, "SELECT COUNT(*) FROM acct")[1] == ((0,),)
            via.commit()
            assert run(observer, "SELECT id, v FROM acct")[1] == ((2, 21),)

            # Explicit BEGIN / COMMIT / ROLLBACK statements, and @@in_transaction.
            via.autocommit(True)
            run(via, "BEGIN")
            assert run(via, "SELECT @@in_transaction")[1] == ((1,),)
            run(via, "DELETE FROM acct")
            run(via, "ROLLBACK")
            assert run(via, "SELECT @@in_transaction")[1] == ((0,),)
            assert run(observer, "SELECT COUNT(*) FROM acct")[1] == ((1,),)
            run(via, "START TRANSACTION")
            run(via, "INSERT INTO acct VALUES (3, 30)")
            run(via, "COMMIT")
            assert run(observer, "SELECT id FROM acct ORDER BY id")[1] == ((2,), (3,))


def all_results(conn, sql):
    """Every result of a multi-result statement: (description, rows, rowcount) each."""
    out = []
    with conn.cursor() as c:
        c.execute(sql)
        while True:
            out.append((c.description, c.fetchall(), c.rowcount))
            if not c.nextset():
                break
    return out


def test_multi_statements_match_direct(topology, manifold, schema):
    via, dr = both(topology, manifold, database=schema, client_flag=CLIENT.MULTI_STATEMENTS, autocommit=True)
    with via, dr:
        for name, conn in (("via", via), ("direct", dr)):
            run(conn, f"CREATE TABLE m_{name} (id INT PRIMARY KEY, v VARCHAR(10))")
        res = {}
        for name, conn in (("via", via), ("direct", dr)):
            res[name] = all_results(
                conn,
                f"INSERT INTO m_{name} VALUES (1, 'x'), (2, 'y'); SELECT 1 AS a, 'two' AS b; "
                f"UPDATE m_{name} SET v = 'z' WHERE id = 2; SELECT id, v FROM m_{name} ORDER BY id; "
                f"SELECT NULL AS nothing FROM DUAL WHERE 1 = 0; DELETE FROM m_{name}",
            )
        assert res["via"] == res["direct"]
        assert len(res["via"]) == 6
        assert res["via"][3][1] == ((1, "x"), (2, "z"))
        # The connection is usable after the last result, and an error in the middle of a
        # batch stops it the same way as directly.
        assert run(via, "SELECT 42")[1] == ((42,),)
        errs = [error_of(c, "SELECT 1; SELEC 2; SELECT 3") for c in (via, dr)]
        assert errs[0] == errs[1]
        assert errs[0][0] == 1064
        assert run(via, "SELECT 43")[1] == ((43,),)


def test_stored_procedure_two_result_sets(topology, manifold, schema):
    via, dr = both(topology, manifold, database=schema, autocommit=True)
    with via, dr:
        run(via, "CREATE TABLE p (id INT, name VARCHAR(20))")
        run(via, "INSERT INTO p VALUES (1, 'one'), (2, 'two'), (3, 'three')")
        run(via, """
            CREATE PROCEDURE two_sets(IN lim INT)
            BEGIN
              SELECT id, name FROM p WHERE id <= lim ORDER BY id;
              SELECT COUNT(*) AS n, SUM(id) AS s FROM p;
            END""")
        got = all_results(via, "CALL two_sets(2)")
        want = all_results(dr, "CALL two_sets(2)")
        assert got == want
        # Two result sets, then the CALL's own OK.
        assert len(got) == 3
        assert got[0][1] == ((1, "one"), (2, "two"))
        assert got[1][1] == ((3, 6),)
        assert got[2][0] is None
        # The session goes on normally after the multi-result answer.
        assert run(via, "SELECT name FROM p WHERE id = 3")[1] == (("three",),)
        # callproc() (a CALL plus SELECT of the OUT/INOUT variables).
        with via.cursor() as c:
            c.callproc("two_sets", (1,))
            assert c.fetchall() == ((1, "one"),)
            assert c.nextset()
            assert c.fetchall() == ((3, 6),)


def test_load_data_local_infile(topology, manifold, schema, tmp_path):
    rows = [(i, f"name-{i}", f"{i * 1.5:.2f}", "ünïcødé 🐬" if i % 7 == 0 else "plain") for i in range(1, 5001)]
    path = tmp_path / "data.tsv"
    path.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")
    with mc(manifold, database=schema, local_infile=True, autocommit=True) as via:
        run(via, "CREATE TABLE ld (id INT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(10,2), note VARCHAR(40)) CHARSET utf8mb4")
        with via.cursor() as c:
            n = c.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE ld CHARACTER SET utf8mb4 "
                          "FIELDS TERMINATED BY '\\t' LINES TERMINATED BY '\\n'")
            assert n == 5000
        assert run(via, "SELECT COUNT(*), SUM(id), SUM(amount) FROM ld")[1] == ((5000, 12502500, pytest.approx(18753750)),)
        got = run(via, "SELECT id, name, CAST(amount AS CHAR), note FROM ld ORDER BY id")[1]
        assert got == tuple(rows)
        # A second load on the same session: the relay of the file exchange left it clean.
        with via.cursor() as c:
            assert c.execute(f"LOAD DATA LOCAL INFILE '{path}' IGNORE INTO TABLE ld") == 0
        assert run(via, "SELECT COUNT(*) FROM ld")[1] == ((5000,),)


def test_load_data_local_infile_missing_file(topology, manifold, schema):
    """The client cannot read the file: PyMySQL sends an empty packet; the server's answer
    goes back and the session keeps working, as directly."""
    via, dr = both(topology, manifold, database=schema, local_infile=True, autocommit=True)
    with via, dr:
        run(via, "CREATE TABLE ld2 (id INT)")
        for conn in (via, dr):
            with pytest.raises(pymysql.err.OperationalError) as e:
                run(conn, "LOAD DATA LOCAL INFILE '/nonexistent/file.tsv' INTO TABLE ld2")
            assert e.value.args[0] == 1017  # PyMySQL's own "Can't find file"
            assert run(conn, "SELECT COUNT(*) FROM ld2")[1] == ((0,),)


def binary_literal(value):
    """What mysql_real_escape_string-based clients send for a blob: _binary'...' with backslash
    escapes (about 1.01x the size), as bytes."""
    return b"_binary'" + value.replace(b"\\", b"\\\\").replace(b"'", b"\\'").replace(b"\0", b"\\0") + b"'"


def blob_round_trip(m, schema, size, as_parameter):
    data = os.urandom(size)
    digest = hashlib.sha256(data).hexdigest()
    with mc(m, database=schema, autocommit=True, max_allowed_packet=256 << 20, read_timeout=300,
            write_timeout=300) as via:
        run(via, "CREATE TABLE IF NOT EXISTS big (id INT PRIMARY KEY, b LONGBLOB)")
        if as_parameter:
            run(via, "INSERT INTO big VALUES (1, %s)", (data,))
        else:
            run(via, b"INSERT INTO big VALUES (1, " + binary_literal(data) + b")")
        _, rows = run(via, "SELECT b, LENGTH(b), SHA2(b, 256) FROM big WHERE id = 1")
        blob, length, server_digest = rows[0]
        assert length == len(data)
        assert server_digest == digest
        assert hashlib.sha256(blob).hexdigest() == digest
        assert run(via, "SELECT 1")[1] == ((1,),)


def test_blob_48mib_round_trip(manifold, schema):
    """48 MiB written and read back (16 MiB packet splits both ways) on manifold's default
    max_allowed_packet (64M). PyMySQL >= 1.1.1 would send a bytes parameter as hex (~96 MiB,
    over the limit), so the statement carries the blob as an escaped binary literal, as C
    clients using mysql_real_escape_string do."""
    blob_round_trip(manifold, schema, 48 << 20, as_parameter=False)


def test_blob_48mib_hex_parameter(topology, schema):
    """A 48 MiB blob as a PyMySQL parameter (sent as hex: a ~96 MiB statement), through a
    manifold with max_allowed_packet raised to 128M."""
    from conftest import Manifold

    cfg = Path(f"/tmp/manifold-blob-{schema}.toml")
    cfg.write_text('[mysql]\nmax_allowed_packet = "128M"\n')
    m = Manifold(topology, ["--config", str(cfg)], log_name="manifold-clients-blob")
    try:
        blob_round_trip(m, schema, 48 << 20, as_parameter=True)
    finally:
        stop_and_check(m)


def test_large_result_streamed_with_sscursor(manifold, schema):
    n = 200_000
    with mc(manifold, database=schema, autocommit=True, cursorclass=pymysql.cursors.SSCursor) as via:
        with via.cursor() as c:
            c.execute(f"SELECT seq, CONCAT('row-', seq), seq * 2 FROM seq_1_to_{n}")
            count = total = 0
            last = 0
            for seq, text, double in c.fetchall_unbuffered():
                assert seq == last + 1
                assert text == f"row-{seq}"
                assert double == 2 * seq
                last = seq
                count += 1
                total += seq
        assert count == n
        assert total == n * (n + 1) // 2
        # Abandoning a streamed result half way: PyMySQL reads the rest on close; the session
        # stays in sync.
        with via.cursor() as c:
            c.execute(f"SELECT seq FROM seq_1_to_{n}")
            assert [c.fetchone() for _ in range(10)] == [(i,) for i in range(1, 11)]
        with via.cursor() as c:
            c.execute("SELECT 'after'")
            assert c.fetchone() == ("after",)


def test_select_db_and_ping(topology, manifold, schema):
    with topology.root() as r:
        run(r, f"CREATE TABLE {schema}.marker (x INT)")
        run(r, f"INSERT INTO {schema}.marker VALUES (7)")
    via, dr = both(topology, manifold, autocommit=True)
    with via, dr:
        assert run(via, "SELECT DATABASE()")[1] == ((None,),)
        via.ping(reconnect=False)
        via.select_db(schema)  # COM_INIT_DB
        assert run(via, "SELECT DATABASE()")[1] == ((schema,),)
        assert run(via, "SELECT x FROM marker")[1] == ((7,),)
        via.ping(reconnect=False)
        # An unknown schema: the same error as directly, and the current schema stays.
        errs = []
        for conn in (via, dr):
            with pytest.raises(pymysql.err.OperationalError) as e:
                conn.select_db("no_such_schema_xyz")
            errs.append(e.value.args)
        assert errs[0] == errs[1]
        assert errs[0][0] == 1049
        assert run(via, "SELECT DATABASE()")[1] == ((schema,),)
        via.ping(reconnect=False)
        # USE through a query, then ping and select_db again.
        run(via, "USE mysql")
        assert run(via, "SELECT DATABASE()")[1] == (("mysql",),)
        via.select_db(schema)
        assert run(via, "SELECT DATABASE()")[1] == ((schema,),)


def test_server_errors_pass_through(topology, manifold, schema):
    via, dr = both(topology, manifold, database=schema, autocommit=True)
    with via, dr:
        run(via, "CREATE TABLE u (id INT PRIMARY KEY, v INT NOT NULL)")
        run(via, "INSERT INTO u VALUES (1, 1)")
        cases = [
            ("SELEC 1", 1064),
            ("SELECT * FROM u WHERE", 1064),
            ("INSERT INTO u VALUES (1, 2)", 1062),
            ("SELECT * FROM no_such_table", 1146),
            ("SELECT no_such_column FROM u", 1054),
            ("INSERT INTO u VALUES (5, NULL)", 1048),
            ("SELECT 1 FROM u, u", 1066),
            ("SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'custom ünicode 🐬 failure', MYSQL_ERRNO = 1644", 1644),
        ]
        for sql, code in cases:
            got = error_of(via, sql)
            want = error_of(dr, sql)
            assert got == want, sql
            assert got[0] == code, (sql, got)
            # The session survives every error.
            assert run(via, "SELECT COUNT(*) FROM u")[1] == ((1,),)
        # Same exception classes as directly.
        with pytest.raises(pymysql.err.IntegrityError):
            run(via, "INSERT INTO u VALUES (1, 3)")
        with pytest.raises(pymysql.err.ProgrammingError):
            run(via, "SELEC 1")


def test_warnings_and_show_warnings(topology, manifold, schema):
    via, dr = both(topology, manifold, database=schema, autocommit=True)
    with via, dr:
        run(via, "CREATE TABLE w (t TINYINT, s VARCHAR(3))")
        for sql in [
            "SELECT CAST('12abc' AS SIGNED), 1/0",
            "INSERT IGNORE INTO w VALUES (1000, 'abcdef'), (-1000, 'xyzw')",
            "DROP TABLE IF EXISTS no_such_table_for_warning",
        ]:
            out = {}
            for name, conn in (("via", via), ("direct", dr)):
                with conn.cursor() as c:
                    c.execute(sql)
                    c.fetchall()
                    count = c._result.warning_count
                    c.execute("SHOW WARNINGS")
                    shown = c.fetchall()
                    c.execute("SELECT @@warning_count")
                    out[name] = (count, shown, c.fetchall())
            assert out["via"] == out["direct"], sql
            assert out["via"][0] > 0 and len(out["via"][1]) == out["via"][0], sql
        # Both connections inserted the same two clamped rows.
        assert run(via, "SELECT t, s FROM w ORDER BY t")[1] == ((-128, "xyz"), (-128, "xyz"), (127, "abc"), (127, "abc"))


def test_connect_to_unknown_database(topology, manifold, request):
    """Directly, MariaDB refuses the login with 1049. manifold authenticates itself and learns
    that the schema does not exist at the first statement; PyMySQL's connect() always sends
    SET NAMES, so the error surfaces from connect() as well."""
    with pytest.raises(pymysql.err.OperationalError) as e:
        direct(topology, database="no_such_db_abc")
    want = e.value.args
    assert want[0] == 1049

    where = None
    got = None
    try:
        conn = mc(manifold, database="no_such_db_abc")
    except pymysql.err.OperationalError as exc:
        where, got = "connect", exc.args
    else:
        with conn:
            try:
                run(conn, "SELECT 1")
            except pymysql.err.OperationalError as exc:
                where, got = "first statement", exc.args
    request.node.user_properties.append(("unknown_database_error_at", where))
    print(f"manifold reports 1049 at: {where}")
    assert got is not None, "manifold never reported the unknown database"
    assert got == want


def test_connect_to_unknown_database_raw_protocol_reports_at_first_statement(topology, manifold):
    """Without PyMySQL's SET NAMES: the login succeeds and the first command gets 1049 with the
    server's message; the session then works without a current schema."""
    import rawmysql

    with pytest.raises(rawmysql.MySQLError) as e:
        rawmysql.connect(topology.primary_port, database="no_such_db_abc")
    assert e.value.code == 1049
    c = rawmysql.connect(manifold.port, database="no_such_db_abc")
    try:
        with pytest.raises(rawmysql.MySQLError) as e2:
            c.query("SELECT 1")
        assert (e2.value.code, e2.value.message) == (1049, e.value.message)
        assert c.scalar("SELECT DATABASE()") is None
    finally:
        c.quit()


@pytest.mark.parametrize("charset", ["latin1", "utf8mb4", "utf8mb3"])
def test_charset_handling(topology, manifold, schema, charset):
    via, dr = both(topology, manifold, database=schema, charset=charset, autocommit=True)
    with via, dr:
        sql = ("SELECT @@character_set_client, @@character_set_connection, @@character_set_results, "
               "@@collation_connection")
        got = run(via, sql)[1]
        assert got == run(dr, sql)[1]
        assert got[0][0] == charset
        run(via, "CREATE TABLE cs (s VARCHAR(20) CHARACTER SET utf8mb4)")
        text = {"latin1": "café ñ", "utf8mb3": "café 日本", "utf8mb4": "café 日本 🐬"}[charset]
        run(via, "INSERT INTO cs VALUES (%s)", (text,))
        for conn in (via, dr):
            (value, length), = run(conn, "SELECT s, CHAR_LENGTH(s) FROM cs")[1]
            if isinstance(value, bytes):
                value = value.decode()
            assert (value, length) == (text, len(text))


def test_charset_per_session_does_not_leak(manifold, schema):
    """Two sessions with different character sets, interleaved, each keeps its own."""
    with mc(manifold, charset="latin1") as a, mc(manifold, charset="utf8mb4") as b:
        for _ in range(3):
            assert run(a, "SELECT @@character_set_client")[1] == (("latin1",),)
            assert run(b, "SELECT @@character_set_client")[1] == (("utf8mb4",),)
    with mc(manifold, charset="utf8mb4") as c, mc(manifold, charset="latin1") as d:
        assert run(c, "SELECT @@character_set_client")[1] == (("utf8mb4",),)
        assert run(d, "SELECT @@character_set_client")[1] == (("latin1",),)


def test_tls_client_connection(topology, manifold, schema):
    with manifold.connect(database=schema, ssl={"ca": manifold.ca, "check_hostname": False}) as via:
        assert isinstance(via._sock, ssl.SSLSocket)
        assert via._sock.version() in ("TLSv1.2", "TLSv1.3")
        assert via._sock.cipher() is not None
        # The certificate manifold presents is the one it generated (verified against it).
        assert via._sock.getpeercert()
        assert run(via, "SELECT 1 + 1")[1] == ((2,),)
        big = "x" * 300_000
        assert run(via, "SELECT %s", (big,))[1] == ((big,),)
        # backend.tls.mode = as_client (the default): a TLS client is encrypted end to end, so
        # the server reports a TLS session, as it would to the client directly.
        assert run(via, "SHOW SESSION STATUS LIKE 'Ssl_cipher'")[1][0][1] != ""
    # PyMySQL >= 1.2 prefers TLS when the server offers it, as it does here.
    with manifold.connect(database=schema) as preferred:
        assert isinstance(preferred._sock, ssl.SSLSocket)
    # ssl_disabled: plain TCP.
    with manifold.connect(database=schema, ssl_disabled=True) as plain:
        assert not isinstance(plain._sock, ssl.SSLSocket)
        assert run(plain, "SELECT 1")[1] == ((1,),)
        # ...and a plain client's backend session is plain too, as directly.
        assert run(plain, "SHOW SESSION STATUS LIKE 'Ssl_cipher'")[1][0][1] == ""


def test_backend_ending_an_idle_session_closes_the_client(topology, manifold):
    """The server's wait_timeout ends an idle session: directly the client's socket is closed;
    through manifold too (not an error 7702 on the next statement), so drivers that check
    idle connections (go-sql-driver's stale-connection check) reconnect cleanly."""
    for conn in both(topology, manifold):
        with conn:
            run(conn, "SET SESSION wait_timeout = 1")
            # The server may send an ERR before closing; either way the connection must end in
            # EOF. A socket that stays open times out (30 s) and fails the test.
            conn._sock.settimeout(30)
            try:
                while conn._sock.recv(1024):
                    pass
            except ConnectionResetError:
                pass  # closed with a reset: closed all the same


def test_tls_verifies_against_ca_with_hostname(topology, manifold, cert_manifold):
    """Full verification (CA + hostname 127.0.0.1) as PyMySQL does by default with ssl={'ca'}:
    works directly; must work through manifold configured with the same certificate, and
    through manifold with the one it generated (its names include 127.0.0.1)."""
    with direct(topology, ssl={"ca": topology.ca}, ssl_disabled=False) as d:
        assert isinstance(d._sock, ssl.SSLSocket)
    for m in (cert_manifold, manifold):
        with m.connect(ssl={"ca": m.ca}) as via:
            assert isinstance(via._sock, ssl.SSLSocket)
            assert run(via, "SELECT 1")[1] == ((1,),)


def test_tls_logins_with_pymysql_defaults_are_reliable(topology, manifold):
    """PyMySQL >= 1.2 upgrades to TLS whenever the server offers it. 40 logins in a row each
    must succeed, as they do directly against MariaDB."""
    failures = {"direct": [], "manifold": []}
    for name, port in (("direct", topology.primary_port), ("manifold", manifold.port)):
        for _ in range(40):
            try:
                with pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD) as c:
                    assert isinstance(c._sock, ssl.SSLSocket)
                    assert run(c, "SELECT 1")[1] == ((1,),)
            except pymysql.err.OperationalError as e:
                failures[name].append(e.args)
    assert failures["direct"] == []
    assert failures["manifold"] == [], f"{len(failures['manifold'])}/40 TLS logins failed, e.g. {failures['manifold'][0]}"


@pytest.mark.parametrize("target", ["direct", "manifold"])
def test_tls_client_hello_in_same_segment_as_ssl_request(topology, manifold, target):
    """A client may write the TLS ClientHello right behind its SSL request (nothing is
    answered in between), and the two then arrive in one TCP segment. Deterministic version
    of the intermittent failure above."""
    import rawmysql

    port, ca = (topology.primary_port, topology.ca) if target == "direct" else (manifold.port, manifold.ca)
    c = rawmysql.RawConn(port, timeout=30)
    try:
        c.login(USER, PASSWORD, tls_ca=ca, use_tls="pipelined")
        assert c.sock.version() in ("TLSv1.2", "TLSv1.3")
        assert c.scalar("SELECT 1") == "1"
    finally:
        c.close()
