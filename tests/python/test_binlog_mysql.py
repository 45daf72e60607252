"""The global binlog in MySQL's dialect, read by consumers nobody here wrote: two MySQL 9.7
clusters (a primary and a replica each) behind one manifold. MySQL's own `mysqlbinlog -R
--verify-binlog-checksum` (by file, by GTID set with `--exclude-gtids`, and `--stop-never`
following new writes), a MySQL 9.7 replica replicating from manifold with
`SOURCE_AUTO_POSITION=1` (its tables end with the sources' `CHECKSUM TABLE` values after a
mixed load, one source compressing its transactions; it follows a rotation and resumes by
GTID after its IO thread restarts), python-mysql-replication as a MySQL client (every row
change with its values) and causal chains across the clusters, in order. Refusals match a
real MySQL 9.7's; a fleet mixing MariaDB and MySQL is refused at start."""

import hashlib
import re
import signal
import subprocess
import threading
import time

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

import binlogkit as bk
from conftest import native_hash

SCHEMAS = {"default": "my_a", "b": "my_b"}
LEDGER_SCHEMAS = {"default": "myl_a", "b": "myl_b"}
NOREPL = ("norepl", "norepl-pw")
BLOB = bytes(range(256)) * 4096 * 3  # 3 MiB, every byte value
GTID_NEXT = re.compile(r"SET @@SESSION.GTID_NEXT= '([0-9a-f-]{36}):(\d+)'")
HEARTBEAT_MAP = "Table_map: `manifold`.`binlog_heartbeat`"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    # Full row metadata: python-mysql-replication takes column names and charsets from it.
    with bk.clusters(["default", "b", "replica"], replicas=[1, 1, 0], flavors=["mysql"] * 3,
                     extra=["--server-arg=--binlog-row-metadata=FULL"]) as (a, b, replica):
        for c in (a, b):
            # A login that may use the data but not replicate, on manifold and the sources.
            c.query(f"CREATE USER IF NOT EXISTS '{NOREPL[0]}'@'%' IDENTIFIED BY '{NOREPL[1]}'")
            c.query(f"GRANT ALL ON `my%`.* TO '{NOREPL[0]}'@'%'")
        # Every transaction of b reaches manifold as one zstd TRANSACTION_PAYLOAD.
        b.query("SET GLOBAL binlog_transaction_compression = ON")
        mf = bk.BinlogManifold([a, b], tmp_path_factory.mktemp("mysql") / "binlog",
                               {"b": [SCHEMAS["b"], LEDGER_SCHEMAS["b"]]},
                               toml_extra=f'\n[[users]]\nname = "{NOREPL[0]}"\npassword_sha2 = "{sha2_hash(NOREPL[1])}"\n'
                               f'password_native = "{native_hash(NOREPL[1])}"\nbackend_password = "{NOREPL[1]}"\n')
        wait_streaming(mf)
        ledger = mixed_load(mf, {"default": a, "b": b})
        yield a, b, replica, mf, ledger
        mf.stop_and_check()


def sha2_hash(password):
    """caching_sha2_password's stored form in manifold's configuration (MySQL 9's clients
    have no mysql_native_password: the account must offer caching_sha2_password, as a MySQL
    9.7 account does)."""
    return "sha2:" + hashlib.sha256(hashlib.sha256(password.encode()).digest()).hexdigest()


def wait_streaming(mf):
    """Until every source reader streams: what the sources write from then on is in the
    global binlog (the load below creates its schemas on the sources directly)."""
    def streaming():
        rows = mf.admin("SHOW BINLOG SOURCES")
        return len(rows) == 2 and all(r["state"] == "streaming" for r in rows) and rows
    try:
        bk.wait_for("every MySQL source streaming", streaming, timeout=30)
    except AssertionError as e:
        raise AssertionError(f"{e}; sources: {mf.admin('SHOW BINLOG SOURCES')}") from None


def mixed_load(mf, sources):
    """DDL, inserts, updates, deletes, multi-statement transactions, a rollback and 3 MiB
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


def global_txns(mf):
    return bk.read_binlog(mf.files(), allow_torn_tail=True).transactions


def wait_in_global_binlog(mf, ledger, timeout=30):
    def done():
        tags = {tag for t in global_txns(mf) for tag in t.tags()}
        return set(ledger.committed) <= tags
    bk.wait_for("the load in the global binlog", done, timeout=timeout)
    return global_txns(mf)


def gtid_set(txns):
    """manifold's GTID set of the transactions read from its files: `uuid:1-N`."""
    return f"{bk.BINLOG_UUID}:1-{txns[-1].seq}"


def gtids_printed(text):
    """(uuid, gno) of every `SET @@SESSION.GTID_NEXT` mysqlbinlog printed, in order."""
    return [(u, int(n)) for u, n in GTID_NEXT.findall(text)]


# -- the files ------------------------------------------------------------------------------

def test_files_are_mysql_files_that_pass_the_ledger_checks(fleet):
    a, b, _, mf, ledger = fleet
    txns = wait_in_global_binlog(mf, ledger)
    binlog = bk.read_binlog(mf.files(), allow_torn_tail=True)
    bk.check_global_binlog(binlog, ledger, [a, b])
    assert all(t.mysql for t in txns), "MySQL GTID events"
    head = mf.files()[0].read_bytes()[:4 + 200]
    assert head[4 + 4] == bk.FORMAT_DESCRIPTION and b"8.4.0-manifold" in head, head[:80]
    fde_len = int.from_bytes(head[4 + 9:4 + 13], "little")
    assert head[4 + fde_len + 4] == bk.PREVIOUS_GTIDS, "a previous-GTIDs event follows the format description"
    # b's transactions arrived compressed: their rows are in, decompressed.
    assert any(t.origin.cluster == "b" and t.row_events() for t in txns)
    assert not any(t.compressed for t in txns)


# -- MySQL's mysqlbinlog ----------------------------------------------------------------------

def test_mysqlbinlog_reads_everything_remotely(fleet):
    _, _, _, mf, ledger = fleet
    txns = wait_in_global_binlog(mf, ledger)
    p = bk.mysqlbinlog(mf.port, "--verify-binlog-checksum", "-vv", "--to-last-log", "manifold-bin.000001")
    out = p.stdout.decode(errors="replace")
    for tag in ledger.committed:
        assert f"/*ledger:{tag}*/" in out, f"{tag} not in mysqlbinlog's output"
    assert "/*ledger:default.rolledback*/" not in out and "/*ledger:b.rolledback*/" not in out
    assert HEARTBEAT_MAP not in out, "heartbeat rows stay out of the global binlog"
    gtids = gtids_printed(out)
    assert gtids and all(u == bk.BINLOG_UUID for u, _ in gtids), gtids[:3]
    assert [n for _, n in gtids] == list(range(1, len(gtids) + 1)), "GTIDs uuid:1..N, consecutive"
    assert len(gtids) >= len(txns)
    origins = re.findall(r"# manifold origin cluster=(\S+) gtid=[0-9a-f-]{36}:\d+ key=\d+", out)
    assert len(origins) == len(gtids) and set(origins) == {"default", "b"}, "one origin per transaction"


def test_mysqlbinlog_by_gtid_set_skips_what_it_excludes(fleet):
    _, _, _, mf, ledger = fleet
    txns = wait_in_global_binlog(mf, ledger)
    last = txns[-1].seq
    skip = last // 2
    p = bk.mysqlbinlog(mf.port, "--verify-binlog-checksum", "--read-from-remote-source=BINLOG-DUMP-GTIDS",
                       f"--exclude-gtids={bk.BINLOG_UUID}:1-{skip}", "manifold-bin.000001")
    got = [n for _, n in gtids_printed(p.stdout.decode(errors="replace"))]
    assert got[:last - skip] == list(range(skip + 1, last + 1)), got[:5]


def test_mysqlbinlog_stop_never_follows_new_writes(fleet):
    _, _, _, mf, ledger = fleet
    cmd = [*bk.mysql_tool("mysqlbinlog"), "--read-from-remote-server", "--get-server-public-key",
           "--verify-binlog-checksum", "-vv", "--stop-never", "-h127.0.0.1", f"-P{mf.port}", f"-u{bk.USER}",
           f"-p{bk.PASSWORD}", "--to-last-log", "manifold-bin.000001"]
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
        tags = []
        for cluster, schema in SCHEMAS.items():
            with mf.connect(database=schema) as c, c.cursor() as cur:
                for i in range(5):
                    tag = f"{cluster}.follow.{i}"
                    cur.execute(f"/*ledger:{tag}*/ INSERT INTO kv (id, v, n) VALUES ({200 + i}, 'f', 0)")
                    ledger.add(tag, cluster)
                    tags.append(tag)
        bk.wait_for("mysqlbinlog --stop-never to print the new writes",
                    lambda: all(f"/*ledger:{t}*/".encode() in b"".join(chunks) for t in tags), timeout=30)
        assert proc.poll() is None, "--stop-never keeps reading"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


# -- a MySQL replica --------------------------------------------------------------------------

def replica_status(replica):
    with replica.root() as c, c.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SHOW REPLICA STATUS")
        st = cur.fetchone()
    assert st, "the replica is not configured"
    assert st["Last_SQL_Errno"] == 0 and st["Last_IO_Errno"] == 0, \
        f"replica failed: IO {st['Last_IO_Errno']} {st['Last_IO_Error']} SQL {st['Last_SQL_Errno']} {st['Last_SQL_Error']}"
    return st


def wait_replica_has(replica, target, what):
    def has():
        replica_status(replica)
        return replica.query(f"SELECT GTID_SUBSET('{target}', @@GLOBAL.gtid_executed)")[0][0] == 1
    bk.wait_for(f"the replica to reach {target} {what}", has, timeout=60)


def test_mysql_replica_fed_by_manifold_matches_the_sources(fleet):
    a, b, replica, mf, ledger = fleet
    wait_in_global_binlog(mf, ledger)
    # A clean GTID state and a server id of its own (the testkit numbers every topology's
    # servers from 1, as the sources' events carry).
    replica.query("STOP REPLICA")
    replica.query("RESET BINARY LOGS AND GTIDS")
    replica.query("SET GLOBAL server_id = 77")
    replica.query(f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={mf.port}, "
                  f"SOURCE_USER='{bk.USER}', SOURCE_PASSWORD='{bk.PASSWORD}', SOURCE_AUTO_POSITION=1, "
                  "GET_SOURCE_PUBLIC_KEY=1, SOURCE_CONNECT_RETRY=1")
    replica.query("START REPLICA")
    wait_replica_has(replica, gtid_set(global_txns(mf)), "")
    # A new file while the replica follows (FLUSH BINARY LOGS, as a rotation by size).
    with mf.connect() as c, c.cursor() as cur:
        for schema in SCHEMAS.values():
            cur.execute(f"CREATE TABLE {schema}.rotation (id INT PRIMARY KEY)")
        cur.execute(f"INSERT INTO {SCHEMAS['default']}.rotation VALUES (1)")
        cur.execute("SHOW BINARY LOGS")
        files_before = len(cur.fetchall())
        cur.execute("FLUSH BINARY LOGS")
        cur.execute(f"INSERT INTO {SCHEMAS['b']}.rotation VALUES (2)")
        cur.execute("SHOW BINARY LOGS")
        assert len(cur.fetchall()) == files_before + 1
    bk.wait_for("both rotation inserts in the global binlog",
                lambda: sum(1 for t in global_txns(mf) for tb in t.tables if tb[1] == b"rotation") >= 2)
    wait_replica_has(replica, gtid_set(global_txns(mf)), "past the rotation")
    check_replica_tables(a, b, replica, ("kv", "other", "rotation"))
    # manifold's heartbeat table (its DDL and its rows) stays on the sources.
    assert replica.query(
        "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'manifold'")[0][0] == 0
    # The IO thread reconnects and asks by GTID: it goes on from what it has, nothing repeated.
    replica.query("STOP REPLICA IO_THREAD")
    with mf.connect() as c, c.cursor() as cur:
        for i in range(3, 8):
            cur.execute(f"INSERT INTO {SCHEMAS['default' if i % 2 else 'b']}.rotation VALUES ({i})")
    replica.query("START REPLICA IO_THREAD")
    bk.wait_for("the inserts made while the IO thread was stopped in the global binlog",
                lambda: sum(1 for t in global_txns(mf) for tb in t.tables if tb[1] == b"rotation") >= 7)
    txns = global_txns(mf)
    target = gtid_set(txns)
    wait_replica_has(replica, target, "after its IO thread restarted")
    st = replica_status(replica)
    assert st["Retrieved_Gtid_Set"].replace("\n", "") == target, (st["Retrieved_Gtid_Set"], target)
    check_replica_tables(a, b, replica, ("kv", "other", "rotation"))
    # The replica's own binlog (log-replica-updates) holds each of manifold's transactions
    # once, in order: 1..N.
    got = [t.seq for t in bk.read_binlog(replica.binlog_files(), allow_torn_tail=True).transactions
           if t.gtid[0] == bk.BINLOG_UUID]
    assert got == list(range(1, txns[-1].seq + 1)), got[-10:]


def check_replica_tables(a, b, replica, tables):
    for cluster, source in (("default", a), ("b", b)):
        schema = SCHEMAS[cluster]
        for table in tables:
            want = source.query(f"CHECKSUM TABLE {schema}.{table}")[0][1]
            got = replica.query(f"CHECKSUM TABLE {schema}.{table}")[0][1]
            assert want is not None and got == want, f"{schema}.{table}: replica {got}, source {want}"


# -- python-mysql-replication -----------------------------------------------------------------

def test_python_mysql_replication_sees_every_row_change(fleet):
    _, _, _, mf, ledger = fleet
    wait_in_global_binlog(mf, ledger)
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": mf.port, "user": bk.USER, "passwd": bk.PASSWORD},
        server_id=991, blocking=False, is_mariadb=False, auto_position=f"{bk.BINLOG_UUID}:1",
        only_events=[GtidEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
    gtids, writes, updates, deletes = [], {}, [], []
    try:
        for event in stream:
            if isinstance(event, GtidEvent):
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
    seqs = [int(g.rsplit(":", 1)[1]) for g in gtids]
    assert seqs == list(range(2, len(seqs) + 2)), "all but the excluded uuid:1, in order"
    assert all(g.startswith(f"{bk.BINLOG_UUID}:") for g in gtids), gtids[:3]
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
        assert BLOB in blobs, f"{schema}: the 3 MiB blob arrives intact"
        assert len(writes[(schema, "other")]) == 2


# -- the order --------------------------------------------------------------------------------

def test_causal_chains_across_mysql_clusters_stay_in_order(fleet):
    """A commit on one cluster acknowledged, then a write on the other, through manifold:
    in that order in the global binlog (with writers on both clusters meanwhile)."""
    a, b, _, mf, ledger = fleet
    with mf.connect() as c, c.cursor() as cur:
        for schema in LEDGER_SCHEMAS.values():
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {schema}")
            cur.execute(f"CREATE TABLE IF NOT EXISTS {schema}.{bk.LEDGER_DDL.removeprefix('CREATE TABLE ')}")
    writers = bk.Writers(mf, LEDGER_SCHEMAS, ledger, threads_per_schema=1).start()
    time.sleep(4)
    writers.stop()
    assert len(ledger.chains) >= 5, "the chains ran"
    mf.wait_caught_up(timeout=30)
    bk.check_global_binlog(bk.read_binlog(mf.files(), allow_torn_tail=True), ledger, [a, b])


# -- refusals, as a real MySQL 9.7's ----------------------------------------------------------

def error_code(port, user, password, sql):
    with pymysql.connect(host="127.0.0.1", port=port, user=user, password=password) as c, c.cursor() as cur:
        with pytest.raises(pymysql.err.MySQLError) as e:
            cur.execute(sql)
        return e.value.args[0]


def mysqlbinlog_error(port, user, password, *args):
    p = bk.mysqlbinlog(port, *args, user=user, password=password, timeout=60, check=False)
    return p.returncode, p.stderr.decode(errors="replace")


def test_a_user_not_allowed_to_replicate_is_refused_as_mysql_refuses_it(fleet):
    a, _, _, mf, _ = fleet
    for sql in ("SHOW BINLOG EVENTS", "SHOW BINARY LOGS", "SHOW BINARY LOG STATUS"):
        want = error_code(a.primary_port, *NOREPL, sql)
        assert error_code(mf.port, *NOREPL, sql) == want, sql
    real = mysqlbinlog_error(a.primary_port, *NOREPL, "binlog.000001")
    ours = mysqlbinlog_error(mf.port, *NOREPL, "manifold-bin.000001")
    assert real[0] != 0 and ours[0] == real[0], (real, ours)
    assert "REPLICATION SLAVE" in real[1] and "REPLICATION SLAVE" in ours[1], (real[1], ours[1])
    real = mysqlbinlog_error(a.primary_port, *NOREPL, "--read-from-remote-source=BINLOG-DUMP-GTIDS", "binlog.000001")
    ours = mysqlbinlog_error(mf.port, *NOREPL, "--read-from-remote-source=BINLOG-DUMP-GTIDS", "manifold-bin.000001")
    assert real[0] != 0 and ours[0] == real[0] and "REPLICATION SLAVE" in ours[1], (real, ours)


def test_an_unknown_file_is_refused_as_mysql_refuses_it(fleet):
    a, _, _, mf, _ = fleet
    sql = "SHOW BINLOG EVENTS IN 'unknown'"
    assert error_code(mf.port, bk.USER, bk.PASSWORD, sql) == error_code(a.primary_port, bk.USER, bk.PASSWORD, sql)
    real = mysqlbinlog_error(a.primary_port, bk.USER, bk.PASSWORD, "binlog.999999")
    ours = mysqlbinlog_error(mf.port, bk.USER, bk.PASSWORD, "manifold-bin.999999")
    assert real[0] != 0 and ours[0] == real[0], (real, ours)
    expected = "Could not find first log file name in binary log index file"
    assert expected in real[1] and expected in ours[1], (real[1], ours[1])


def test_a_dump_asking_for_purged_gtids_is_refused_as_mysql_refuses_it(fleet):
    """Last of the fleet's tests: it purges the files the tests above read from the start,
    on manifold and on source `default`. mysqlbinlog by GTIDs with no file name sends
    COM_BINLOG_DUMP_GTID with an empty set: everything from 1 on, which is purged."""
    a, _, replica, mf, _ = fleet
    mf.wait_caught_up(timeout=30)
    # Files a dump still reads are kept (as MySQL keeps them): the replica stops first.
    replica.query("STOP REPLICA")
    expected = ("Cannot replicate because the source purged required binary logs. Replicate the missing "
                "transactions from elsewhere, or provision a new replica from backup. Consider increasing the "
                "source's binary log expiration period. The GTID set sent by the replica is '', and the missing "
                "transactions are '")
    # The real one: a new file, the older ones purged.
    a.query("FLUSH BINARY LOGS")
    a.query(f"PURGE BINARY LOGS TO '{a.query('SHOW BINARY LOG STATUS')[0][0]}'")
    real = mysqlbinlog_error(a.primary_port, bk.USER, bk.PASSWORD, "--read-from-remote-source=BINLOG-DUMP-GTIDS", "")
    with mf.connect() as c, c.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW BINARY LOGS")
        names = [r[0] for r in cur.fetchall()]
        # The new file holds a transaction (a file holding none yet keeps the one before it:
        # recovery reads the sources' positions from a file's first transaction).
        cur.execute(f"INSERT INTO {SCHEMAS['default']}.kv (id, v, n) VALUES (300, 'p', 0)")
        bk.wait_for("a transaction in the new file",
                    lambda: any(t.file == names[-1] for t in global_txns(mf)), timeout=30)
        # The stopped replica's dump ends when manifold next writes to it (the rotation and
        # the insert above), as a MySQL source's dump thread does.
        try:
            bk.wait_for("no dump connection left", lambda: not mf.admin("SHOW BINLOG CONSUMERS"), timeout=30)
        except AssertionError as e:
            raise AssertionError(f"{e}: {mf.admin('SHOW BINLOG CONSUMERS')}") from None
        cur.execute(f"PURGE BINARY LOGS TO '{names[-1]}'")
        cur.execute("SHOW BINARY LOGS")
        assert [r[0] for r in cur.fetchall()] == names[-1:], "the older files are purged"
    ours = mysqlbinlog_error(mf.port, bk.USER, bk.PASSWORD, "--read-from-remote-source=BINLOG-DUMP-GTIDS", "")
    assert real[0] != 0 and ours[0] == real[0], (real, ours)
    assert expected + a.uuid in real[1], real[1]
    assert expected + bk.BINLOG_UUID + ":1-" in ours[1], ours[1]


# -- a mixed fleet --------------------------------------------------------------------------

def test_a_fleet_of_mariadb_and_mysql_is_refused_at_start(tmp_path):
    with bk.clusters(["default", "mysql_b"], flavors=["mariadb", "mysql"]) as cs:
        mf = bk.BinlogManifold(cs, tmp_path / "binlog", {"mysql_b": []}, name="manifold-mixed", start=False)
        p = subprocess.run(mf.argv(), capture_output=True, timeout=60, cwd=bk.RUN_DIR, env=bk.manifold_env())
    out = (p.stdout + p.stderr).decode(errors="replace")
    assert p.returncode != 0, f"manifold started over a mixed fleet:\n{out[-2000:]}"
    assert "panicked" not in out, out[-2000:]
    # One line names both clusters and what each is.
    line = next((l for l in out.splitlines() if "MariaDB" in l and "MySQL" in l), "")
    assert "default" in line and "mysql_b" in line, out[-2000:]
    assert not list((tmp_path / "binlog").glob("manifold-bin.[0-9]*")), "no file written"
