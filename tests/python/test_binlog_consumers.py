"""Consumers nobody here wrote read manifold's global binlog of two independent clusters:
`mariadb-binlog -R --verify-binlog-checksum` (plain, and `--stop-never` following new
writes), a MariaDB server replicating from manifold with `MASTER_USE_GTID` (its tables end
with the sources' `CHECKSUM TABLE` values after a mixed load), and python-mysql-replication
(every row change with its values). Refusals match a real MariaDB's."""

import re
import signal
import subprocess
import threading

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import MariadbGtidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

import binlogkit as bk
from conftest import native_hash

SCHEMAS = {"default": "cons_a", "b": "cons_b"}
NOREPL = ("norepl", "norepl-pw")
BLOB = bytes(range(256)) * 4096  # 1 MiB, every byte value


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    # Full row metadata: python-mysql-replication takes column charsets from it (without,
    # it decodes every BLOB as UTF-8, against a real server too).
    with bk.clusters(["default", "b", "replica"], extra=["--server-arg=--binlog-row-metadata=FULL"]) as (a, b, replica):
        for c in (a, b):
            # A login that may use the data but not replicate, on manifold and the sources.
            c.query(f"CREATE USER IF NOT EXISTS '{NOREPL[0]}'@'%' IDENTIFIED BY '{NOREPL[1]}'")
            c.query(f"GRANT ALL ON `cons\\_%`.* TO '{NOREPL[0]}'@'%'")
        mf = bk.BinlogManifold([a, b], tmp_path_factory.mktemp("consumers") / "binlog", {"b": ["cons_b"]},
                               toml_extra=f'\n[[users]]\nname = "{NOREPL[0]}"\n'
                               f'password_native = "{native_hash(NOREPL[1])}"\nbackend_password = "{NOREPL[1]}"\n')
        ledger = mixed_load(mf, {"default": a, "b": b})
        yield a, b, replica, mf, ledger
        mf.stop_and_check()


def mixed_load(mf, sources):
    """DDL, inserts, updates, deletes, multi-statement transactions, a rollback and 1 MiB
    blobs on both clusters, through manifold (the schemas are created on the sources, after
    manifold started: all of it is in the global binlog)."""
    ledger = bk.Ledger()
    for cluster, schema in SCHEMAS.items():
        sources[cluster].query(f"CREATE DATABASE {schema}")
        with mf.connect(database=schema) as c, c.cursor() as cur:
            cur.execute("CREATE TABLE kv (id INT PRIMARY KEY, v VARCHAR(40), n BIGINT, b LONGBLOB)")
            cur.execute("CREATE TABLE other (id INT AUTO_INCREMENT PRIMARY KEY, d DATETIME(6), x DECIMAL(20,4))")
            for i in range(1, 21):
                tag = f"{cluster}.ins.{i}"
                cur.execute(f"/*ledger:{tag}*/ INSERT INTO kv VALUES (%s, %s, %s, NULL)", (i, f"v{i}", i * 1000))
                ledger.add(tag, cluster)
            c.begin()
            tag = f"{cluster}.multi"
            cur.execute(f"/*ledger:{tag}*/ UPDATE kv SET n = n + 1 WHERE id <= 10")
            cur.execute(f"/*ledger:{tag}*/ DELETE FROM kv WHERE id > 18")
            cur.execute(f"/*ledger:{tag}*/ INSERT INTO other (d, x) VALUES (NOW(6), 12345.6789), ('2024-01-02 03:04:05.5', -1)")
            c.commit()
            ledger.add(tag, cluster)
            c.begin()
            cur.execute(f"/*ledger:{cluster}.rolledback*/ INSERT INTO kv VALUES (999, 'no', 0, NULL)")
            c.rollback()
            tag = f"{cluster}.blob"
            cur.execute(f"/*ledger:{tag}*/ UPDATE kv SET b = %s WHERE id = 1", (BLOB,))
            ledger.add(tag, cluster)
            cur.execute("ALTER TABLE kv ADD COLUMN extra INT DEFAULT 7")
            tag = f"{cluster}.after_ddl"
            cur.execute(f"/*ledger:{tag}*/ INSERT INTO kv (id, v, n) VALUES (100, 'after', 1)")
            ledger.add(tag, cluster)
    return ledger


def wait_in_global_binlog(mf, ledger):
    def done():
        txns = bk.read_binlog(mf.files(), allow_torn_tail=True).transactions
        tags = {tag for t in txns for tag in t.tags()}
        return set(ledger.committed) <= tags
    bk.wait_for("the load in the global binlog", done, timeout=60)


def test_files_pass_the_ledger_checks(setup):
    a, b, _, mf, ledger = setup
    wait_in_global_binlog(mf, ledger)
    bk.check_global_binlog(bk.read_binlog(mf.files(), allow_torn_tail=True), ledger, [a, b])


def test_mariadb_binlog_reads_everything_remotely(setup):
    _, _, _, mf, ledger = setup
    wait_in_global_binlog(mf, ledger)
    p = bk.mariadb_binlog(mf.port, "--verify-binlog-checksum", "--to-last-log", "manifold-bin.000001")
    out = p.stdout.decode(errors="replace")
    for tag in ledger.committed:
        assert f"/*ledger:{tag}*/" in out, f"{tag} not in mariadb-binlog's output"
    assert "/*ledger:default.rolledback*/" not in out and "/*ledger:b.rolledback*/" not in out
    assert "Table_map: `manifold`.`binlog_heartbeat`" not in out, "heartbeat rows stay out of the global binlog"
    # The same through the server's own statements.
    with mf.connect() as c, c.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        logs = [r[0] for r in cur.fetchall()]
        assert logs and logs[0] == "manifold-bin.000001"
        cur.execute("SHOW MASTER STATUS")
        assert cur.fetchone()[0] == logs[-1]
        cur.execute("SELECT @@server_id")
        assert cur.fetchone()[0] == bk.BINLOG_SERVER_ID
        cur.execute("SELECT @@gtid_binlog_pos")
        pos = cur.fetchone()[0]
        last = bk.read_binlog(mf.files(), allow_torn_tail=True).transactions[-1].gtid
        assert pos.startswith(f"0-{bk.BINLOG_SERVER_ID}-"), pos
        assert int(pos.split("-")[2]) >= last[2]
        cur.execute("SHOW BINLOG EVENTS IN 'manifold-bin.000001' LIMIT 5")
        rows = cur.fetchall()
        assert rows[0][2] == "Format_desc", rows


def test_mariadb_binlog_stop_never_follows_new_writes(setup):
    _, _, _, mf, _ = setup
    cmd = ["mariadb-binlog", "--read-from-remote-server", "--verify-binlog-checksum", "--stop-never",
           "-h127.0.0.1", f"-P{mf.port}", f"-u{bk.USER}", f"-p{bk.PASSWORD}", "--to-last-log",
           "manifold-bin.000001"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    chunks = []

    def pump():
        while True:
            chunk = proc.stdout.read1(65536)
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        # Once it has printed the last transaction there is, what follows is new to it.
        last = bk.read_binlog(mf.files(), allow_torn_tail=True).transactions[-1].gtid
        printed = re.compile(rb"GTID %d-%d-%d\s" % last)
        bk.wait_for("mariadb-binlog to reach the end of the global binlog",
                    lambda: printed.search(b"".join(chunks)) or proc.poll() is not None, timeout=30)
        assert proc.poll() is None, proc.stderr.read().decode(errors="replace")
        tags = []
        for cluster, schema in SCHEMAS.items():
            with mf.connect(database=schema) as c, c.cursor() as cur:
                for i in range(5):
                    tag = f"{cluster}.follow.{i}"
                    cur.execute(f"/*ledger:{tag}*/ INSERT INTO kv (id, v, n) VALUES ({200 + i}, 'f', 0)")
                    tags.append(tag)
        bk.wait_for("mariadb-binlog --stop-never to print the new writes",
                    lambda: all(f"/*ledger:{t}*/".encode() in b"".join(chunks) for t in tags), timeout=30)
        assert proc.poll() is None, "--stop-never keeps reading"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_mariadb_replica_fed_by_manifold_matches_the_sources(setup):
    a, b, replica, mf, ledger = setup
    wait_in_global_binlog(mf, ledger)
    # The replica starts with a clean GTID state and a server id of its own (the testkit
    # gave every server id 1, as the sources' events carry).
    replica.query("STOP SLAVE")
    replica.query("RESET MASTER")
    replica.query("SET GLOBAL gtid_slave_pos = ''")
    replica.query("SET GLOBAL server_id = 77")
    replica.query(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={mf.port}, MASTER_USER='{bk.USER}', "
                  f"MASTER_PASSWORD='{bk.PASSWORD}', MASTER_USE_GTID=slave_pos")
    replica.query("START SLAVE")
    with mf.connect() as c, c.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        target = cur.fetchone()[0]

    def caught_up():
        with replica.root() as c, c.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SHOW SLAVE STATUS")
            st = cur.fetchone()
            assert st["Last_SQL_Errno"] == 0 and st["Last_IO_Errno"] == 0, \
                f"replica failed: {st['Last_IO_Error']} {st['Last_SQL_Error']}"
            cur.execute("SELECT @@gtid_slave_pos")
            return cur.fetchone()["@@gtid_slave_pos"] == target
    bk.wait_for(f"the replica to reach {target}", caught_up, timeout=90)
    # A new file while the replica follows (FLUSH BINARY LOGS, as a rotation by size): it
    # goes on into the next file.
    with mf.connect() as c, c.cursor() as cur:
        for schema in SCHEMAS.values():
            cur.execute(f"CREATE TABLE {schema}.rotation (id INT PRIMARY KEY)")
        cur.execute(f"INSERT INTO {SCHEMAS['default']}.rotation VALUES (1)")
        c.commit()
        cur.execute("SHOW BINARY LOGS")
        files_before = len(cur.fetchall())
        cur.execute("FLUSH BINARY LOGS")
        cur.execute(f"INSERT INTO {SCHEMAS['b']}.rotation VALUES (2)")
        c.commit()
        cur.execute("SHOW BINARY LOGS")
        assert len(cur.fetchall()) == files_before + 1
    seq = int(target.rsplit("-", 1)[1])

    def both_written():
        nonlocal target
        with mf.connect() as c, c.cursor() as cur:
            cur.execute("SELECT @@gtid_binlog_pos")
            target = cur.fetchone()[0]
        return int(target.rsplit("-", 1)[1]) >= seq + 4
    bk.wait_for("both tables and inserts in the global binlog", both_written, timeout=60)
    bk.wait_for(f"the replica to reach {target} past the rotation", caught_up, timeout=90)
    for cluster, source in (("default", a), ("b", b)):
        schema = SCHEMAS[cluster]
        for table in ("kv", "other", "rotation"):
            want = source.query(f"CHECKSUM TABLE {schema}.{table}")[0][1]
            got = replica.query(f"CHECKSUM TABLE {schema}.{table}")[0][1]
            assert want is not None and got == want, f"{schema}.{table}: replica {got}, source {want}"
    # manifold's heartbeat table (its DDL and its rows) stays on the sources.
    assert replica.query(
        "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'manifold'")[0][0] == 0


def test_python_mysql_replication_sees_every_row_change(setup):
    _, _, _, mf, ledger = setup
    wait_in_global_binlog(mf, ledger)
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": mf.port, "user": bk.USER, "passwd": bk.PASSWORD},
        server_id=991, blocking=False, is_mariadb=True, resume_stream=True,
        log_file="manifold-bin.000001", log_pos=4,
        only_events=[MariadbGtidEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
    gtids, writes, updates, deletes = [], {}, [], []
    try:
        for event in stream:
            if isinstance(event, MariadbGtidEvent):
                gtids.append(event.gtid)
                continue
            key = (event.schema, event.table)
            for row in event.rows:
                if isinstance(event, WriteRowsEvent):
                    writes.setdefault(key, []).append(list(row["values"].values()))
                elif isinstance(event, UpdateRowsEvent):
                    updates.append((key, list(row["before_values"].values()), list(row["after_values"].values())))
                else:
                    deletes.append((key, list(row["values"].values())))
    finally:
        stream.close()
    seqs = [int(g.split("-")[2]) for g in gtids]
    assert seqs == list(range(1, len(seqs) + 1)) and all(g.startswith(f"0-{bk.BINLOG_SERVER_ID}-") for g in gtids)
    for schema in SCHEMAS.values():
        kv = [r[:3] for r in writes[(schema, "kv")]]
        for i in range(1, 21):
            assert [i, f"v{i}", i * 1000] in kv, f"{schema}: insert {i} missing or wrong: {kv[:3]}"
        assert [999, "no", 0] not in kv, "the rolled back insert is not in"
        ups = [(b[:3], a_[:3]) for (k, b, a_) in updates if k == (schema, "kv")]
        for i in range(1, 11):
            assert ([i, f"v{i}", i * 1000], [i, f"v{i}", i * 1000 + 1]) in ups, f"{schema}: update of {i}"
        dels = [r[:3] for (k, r) in deletes if k == (schema, "kv")]
        assert sorted(dels) == [[19, "v19", 19000], [20, "v20", 20000]], dels
        blobs = [a_[3] for (k, b, a_) in updates if k == (schema, "kv") and len(a_) > 3 and a_[3]]
        assert BLOB in blobs, f"{schema}: the 1 MiB blob arrives intact"
        assert len(writes[(schema, "other")]) == 2


def mariadb_binlog_error(port, user, password, *args):
    p = subprocess.run(["mariadb-binlog", "--read-from-remote-server", "-h127.0.0.1", f"-P{port}",
                        f"-u{user}", f"-p{password}", *args], capture_output=True, timeout=60)
    return p.returncode, p.stderr.decode(errors="replace")


def error_code(port, user, password, sql):
    with pymysql.connect(host="127.0.0.1", port=port, user=user, password=password) as c, c.cursor() as cur:
        with pytest.raises(pymysql.err.MySQLError) as e:
            cur.execute(sql)
        return e.value.args[0]


def test_a_user_not_allowed_to_replicate_is_refused_as_mariadb_refuses_it(setup):
    a, _, _, mf, _ = setup
    for sql in ("SHOW BINLOG EVENTS", "SHOW BINARY LOGS"):
        want = error_code(a.primary_port, *NOREPL, sql)
        assert error_code(mf.port, *NOREPL, sql) == want, sql
    real = mariadb_binlog_error(a.primary_port, *NOREPL, "binlog.000001")
    ours = mariadb_binlog_error(mf.port, *NOREPL, "manifold-bin.000001")
    assert real[0] != 0 and ours[0] == real[0], (real, ours)
    assert "REPLICATION SLAVE" in real[1] and "REPLICATION SLAVE" in ours[1], (real[1], ours[1])


def test_an_unknown_file_is_refused_as_mariadb_refuses_it(setup):
    a, _, _, mf, _ = setup
    real = mariadb_binlog_error(a.primary_port, bk.USER, bk.PASSWORD, "binlog.999999")
    ours = mariadb_binlog_error(mf.port, bk.USER, bk.PASSWORD, "manifold-bin.999999")
    assert real[0] != 0 and ours[0] == real[0], (real, ours)
    assert "1236" in real[1] or "Could not find" in real[1], real[1]
    expected = "Could not find first log file name in binary log index file"
    assert expected in real[1] and expected in ours[1], (real[1], ours[1])


def test_purge_binary_logs_removes_older_files_as_mariadb_does(setup):
    """Last in the file: it removes the files the tests above read from the start."""
    a, _, _, mf, _ = setup
    assert error_code(mf.port, *NOREPL, "PURGE BINARY LOGS TO 'manifold-bin.000001'") == \
        error_code(a.primary_port, *NOREPL, "PURGE BINARY LOGS TO 'binlog.000001'")
    with mf.connect() as c, c.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW BINARY LOGS")
        names = [r[0] for r in cur.fetchall()]
        assert len(names) >= 2, names
        with pytest.raises(pymysql.err.MySQLError) as e:
            cur.execute("PURGE BINARY LOGS TO 'manifold-bin.999999'")
        assert e.value.args[0] == 1373, e.value.args
        cur.execute(f"PURGE BINARY LOGS TO '{names[-1]}'")
        cur.execute("SHOW BINARY LOGS")
        left = [r[0] for r in cur.fetchall()]
    # Files a consumer (the replica above) still reads stay; the first one goes.
    assert names[0] not in left and names[-1] in left, (names, left)
    assert {p.name for p in mf.files()} == set(left)
