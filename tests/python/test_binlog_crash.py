"""The global binlog through crashes: the ledger load on two clusters while manifold is
SIGKILLed and restarted on the same directory 20 times, a source primary restarted once and
consumers disconnecting at random; then a failover by promotion on one cluster. Afterwards
the ledger checks hold (nothing lost, nothing duplicated, each transaction whole, per-source
and causal order) and the files read after the last restart hold every source transaction."""

import random
import time

import pytest

import binlogkit as bk

SCHEMAS = {"default": "crash_a", "b": "crash_b"}
KILLS = bk.env_int("BINLOG_TEST_KILLS", 20)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    # Cluster b has a replica to promote; manifold promotes it itself.
    with bk.clusters(["default"]) as (a,), bk.clusters(["b"], replicas=1) as (b,):
        bk.create_schemas([a, b], SCHEMAS)
        mf = bk.BinlogManifold(
            [a, b], tmp_path_factory.mktemp("crash") / "binlog", {"b": ["crash_b"]},
            binlog_extra='max_file_size = "1M"\nreconnect_interval = "200ms"',
            toml_extra='\n[routing]\nauto_promote = true\nfailover_timeout = "20s"\n')
        yield a, b, mf, bk.Ledger()
        mf.stop_and_check()


def random_consumers(mf):
    """`mariadb-binlog --stop-never` readers, each killed after a random while."""
    return bk.KilledReaders(["mariadb-binlog", "--read-from-remote-server", "--stop-never",
                             "--verify-binlog-checksum", "-h127.0.0.1", f"-P{mf.port}",
                             f"-u{bk.USER}", f"-p{bk.PASSWORD}", "--to-last-log", "manifold-bin.000001"],
                            seed=7, outages=mf.outages)


def test_kill_minus_nine_under_load(setup):
    a, b, mf, ledger = setup
    rng = random.Random(19)
    writers = bk.Writers(mf, SCHEMAS, ledger, tolerate_errors=True).start()
    with random_consumers(mf) as consumers:
        for k in range(KILLS):
            time.sleep(rng.uniform(0.3, 1.2))
            mf.kill()
            if k == KILLS // 2:
                # The source primary restarts while manifold is down, then while it is up.
                a.restart_primary()
            mf.start()
            if k == KILLS // 4:
                time.sleep(0.5)
                a.restart_primary()
        time.sleep(2)
    writers.stop()
    assert mf.starts == KILLS + 1
    assert consumers.runs > 3
    # (Each ended for a reason, checked on leaving the `with`; manifold is down for much of
    # the time, so many readers never get to read.)
    assert consumers.events_read > 0, "no reader printed an event"
    assert len(ledger.committed) > 100, "writes went on between the crashes"
    mf.wait_caught_up(timeout=120)
    bk.check_global_binlog(bk.read_binlog(mf.files(), allow_torn_tail=True), ledger, [a, b])
    # Once manifold stops, every file is whole, the last one too; then it starts again.
    mf.stop_and_check()
    bk.check_global_binlog(bk.read_binlog(mf.files()), ledger, [a, b])
    mf.start()


def test_a_strict_reader_reads_across_files(setup):
    """mariadb-binlog's default `--gtid-strict-mode` checks each file's GTID list against the
    transactions before it; a real MariaDB's files pass it across a rotation. The test makes
    its own rotation between transactions of both clusters (it passes alone, too)."""
    _, _, mf, _ = setup
    with mf.connect() as c, c.cursor() as cur:
        for schema in SCHEMAS.values():
            cur.execute(f"CREATE TABLE IF NOT EXISTS {schema}.strict_reader (id INT AUTO_INCREMENT PRIMARY KEY, n INT)")
        files_before = len(mf.files())
        for n in range(2):
            for schema in SCHEMAS.values():
                cur.execute(f"INSERT INTO {schema}.strict_reader (n) VALUES ({n})")
            if n == 0:
                cur.execute("FLUSH BINARY LOGS")
    mf.wait_caught_up()
    assert len(mf.files()) > files_before, "FLUSH BINARY LOGS rotated the files"
    p = bk.mariadb_binlog(mf.port, "--to-last-log", "manifold-bin.000001", check=False)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-1000:]


def test_sources_follow_a_promoted_primary(setup):
    a, b, mf, ledger = setup
    writers = bk.Writers(mf, {"b": "crash_b"}, ledger, chains=False, tolerate_errors=True).start()
    time.sleep(2)
    writers.stop()
    # The replica has everything the primary committed (async replication would otherwise
    # lose acknowledged commits in the cluster itself, not in manifold).
    target = b.query("SELECT @@gtid_binlog_pos")[0][0]
    bk.wait_for("the replica to catch up", lambda: b.query(
        f"SELECT MASTER_GTID_WAIT('{target}', 1)", port=b.replica_ports[0])[0][0] == 0, timeout=30)
    b.query("SHUTDOWN")
    old_port = b.primary_port
    # Writes after the failover: manifold promotes the replica and sources follow it.
    writers = bk.Writers(mf, {"b": "crash_b"}, ledger, chains=False, tolerate_errors=True).start()
    bk.wait_for("a promoted primary", lambda: b.query("SELECT @@read_only", port=b.replica_ports[0])[0][0] == 0,
                timeout=60)
    before = len(ledger.committed)
    state = {}

    def progressed():
        state.update(committed=len(ledger.committed) - before, errors=writers.errors[-2:])
        return state["committed"] > 50
    try:
        bk.wait_for("writes on the promoted primary", progressed, timeout=60)
    except AssertionError as e:
        raise AssertionError(f"{e}: {state}") from None
    writers.stop()
    b.primary_port = b.replica_ports[0]
    try:
        mf.wait_caught_up(timeout=60)
        binlog = bk.read_binlog(mf.files(), allow_torn_tail=True)
        bk.check_global_binlog(binlog, ledger, [a, b])
        servers = {t.origin.gtid[1] for t in binlog.transactions if t.origin.cluster == "b"}
        assert len(servers) >= 2, f"b's transactions came from the old and the promoted primary: {servers}"
    finally:
        b.primary_port = old_port
