"""Operating manifold from its admin port, through the `mariadb` client, while clients work:
SHOW POOLS, SHOW SESSIONS, SHOW QUERY DIGESTS, SHOW RULES, PERF HIST, SHOW VARIABLES and
SET GLOBAL (checked by behaviour), RELOAD CONFIG and SIGHUP, BACKEND OFFLINE|ONLINE, the
slow query log and the rate-limited connection log."""

import os
import re
import signal
import threading
import time

import pymysql
import pytest

from conftest import USER, Manifold, configured
from test_admin import admin, scrape, status, table


def variables(m, pattern="%"):
    return {r["Variable_name"]: r for r in table(admin(m, f"SHOW VARIABLES LIKE '{pattern}'").stdout)}


def wait_until(what, check, timeout=20):
    deadline = time.time() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def sleepers(m, n, seconds, **kw):
    """`n` clients each running SELECT SLEEP(seconds) at once; returns the threads (started)
    and a list their errors land in."""
    errors = []

    def run():
        try:
            with m.connect(autocommit=True, **kw) as c:
                c.cursor().execute(f"SELECT SLEEP({seconds})")
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    return threads, errors


def backend_sleeps(topology, seconds):
    """Backend connections of the test account running SELECT SLEEP(seconds) now."""
    with topology.root() as r:
        cur = r.cursor()
        cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s AND INFO = %s",
                    (USER, f"SELECT SLEEP({seconds})"))
        return cur.fetchone()[0]


def test_show_pools_and_sessions_while_clients_work(manifold, schema):
    holder = manifold.connect(database=schema, autocommit=True)
    cur = holder.cursor()
    cur.execute("BEGIN")
    cur.execute("SELECT 1")
    cur.execute("SELECT CONNECTION_ID()")
    holder_id = cur.fetchone()[0]
    # Long enough that the pools and backends below are read while it still runs, on a
    # loaded machine too.
    threads, errors = sleepers(manifold, 1, 3)
    try:
        def running():
            rows = table(admin(manifold, "SHOW SESSIONS").stdout)
            return rows if any(r["statement"] == "SELECT SLEEP(3)" for r in rows) else None

        rows = wait_until("the sleeping statement in SHOW SESSIONS", running)
        assert list(rows[0]) == ["id", "user", "client", "state", "time_ms", "pinned", "backend", "statement"]
        sleeping = next(r for r in rows if r["statement"] == "SELECT SLEEP(3)")
        assert sleeping["state"] == "query" and sleeping["user"] == USER, sleeping
        assert sleeping["backend"].startswith(manifold_primary(manifold)), sleeping
        mine = next(r for r in rows if int(r["id"]) == holder_id)
        local = holder._sock.getsockname()
        assert mine["client"] == f"{local[0]}:{local[1]}", mine
        assert mine["state"] == "idle" and "transaction" in mine["pinned"], mine
        assert re.search(r" thread \d+$", mine["backend"]), mine

        pools = table(admin(manifold, "SHOW POOLS").stdout)
        assert list(pools[0]) == ["worker", "cluster", "node", "in_use", "idle", "pending", "waiting",
                                  "opened_total", "connect_errors", "limit", "max_size"]
        # Each pool's adaptive limit lies between its floor and its ceiling.
        assert all(1 <= int(r["limit"]) <= int(r["max_size"]) for r in pools), pools
        assert {r["worker"] for r in pools} == {str(w) for w in range(len(pools))}, pools
        # The transaction's connection and the sleeper's are lent out now.
        assert sum(int(r["in_use"]) for r in pools) >= 2, pools
        assert all(int(r["opened_total"]) >= int(r["in_use"]) for r in pools), pools
        backends = table(admin(manifold, "SHOW BACKENDS").stdout)
        assert int(backends[0]["in_flight"]) >= 2, backends
        assert int(backends[0]["connections_open"]) >= 2, backends
    finally:
        for t in threads:
            t.join()
        holder.close()
    assert not errors, errors
    wait_until("the closed session to leave SHOW SESSIONS", lambda: holder_id not in [
        int(r["id"]) for r in table(admin(manifold, "SHOW SESSIONS").stdout)])


def manifold_primary(m):
    return table(admin(m, "SHOW BACKENDS").stdout)[0]["node"]


def test_query_digests_count_shapes_time_rows_errors_and_where_they_ran(split_manifold, schema, topology):
    m = split_manifold
    with topology.root() as r:
        r.cursor().execute(f"CREATE TABLE {schema}.t (id INT PRIMARY KEY, v INT)")
        r.cursor().execute(f"INSERT INTO {schema}.t VALUES (1, 10), (2, 20), (3, 30)")
    admin(m, "RESET QUERY DIGESTS")
    with m.connect(database=schema, autocommit=True) as c:
        cur = c.cursor()
        for i in range(20):
            cur.execute(f"SELECT v FROM t WHERE id = {i % 3 + 1}")
        cur.execute("UPDATE t SET v = v + 1 WHERE id IN (1, 2)")
        with pytest.raises(pymysql.MySQLError):
            cur.execute("SELECT nope FROM t WHERE id = 5")
    rows = table(admin(m, "SHOW QUERY DIGESTS").stdout)
    assert list(rows[0]) == ["digest", "schema", "digest_text", "count", "total_ms", "avg_us", "p99_us", "rows",
                             "errors", "to_primary", "to_replica"]
    by_text = {r["digest_text"]: r for r in rows if r["schema"] == schema}
    select = by_text["SELECT v FROM t WHERE id = ?"]
    assert int(select["count"]) == 20 and int(select["rows"]) == 20, select
    # Reads split over the replicas (and the primary at its weight).
    assert int(select["to_primary"]) + int(select["to_replica"]) == 20 and int(select["to_replica"]) > 0, select
    assert int(select["errors"]) == 0 and float(select["total_ms"]) > 0, select
    assert int(select["p99_us"]) >= int(select["avg_us"]) > 0, select
    assert re.fullmatch(r"[0-9a-f]{16}", select["digest"]), select
    update = by_text["UPDATE t SET v = v + ? WHERE id IN (?,...)"]
    assert (update["count"], update["rows"], update["to_primary"]) == ("1", "2", "1"), update
    failed = by_text["SELECT nope FROM t WHERE id = ?"]
    assert failed["errors"] == "1", failed
    assert len(table(admin(m, "SHOW QUERY DIGESTS LIMIT 1").stdout)) == 1
    admin(m, "RESET QUERY DIGESTS")
    assert [r for r in table(admin(m, "SHOW QUERY DIGESTS").stdout) if r["schema"] == schema] == []


def test_perf_hist_shows_every_stage_and_resets(manifold):
    with manifold.connect(autocommit=True) as c:
        cur = c.cursor()
        for _ in range(50):
            cur.execute("SELECT 1")
    rows = {r["stage"]: r for r in table(admin(manifold, "PERF HIST ALL").stdout)}
    assert list(rows) == ["connect", "auth", "client_read", "route", "pool_wait", "backend_first_byte",
                          "backend_last_byte", "client_write", "total"]
    for stage in ["connect", "auth", "client_read", "route", "backend_first_byte", "backend_last_byte",
                  "client_write", "total"]:
        r = rows[stage]
        assert int(r["count"]) > 0, r
        assert float(r["p50_us"]) <= float(r["p99_us"]) <= float(r["max_us"]), r
    assert int(rows["total"]["count"]) >= 50
    buckets = table(admin(manifold, "PERF HIST total").stdout)
    assert int(buckets[-1]["cumulative"]) == sum(int(b["count"]) for b in buckets) >= 50, buckets
    # /metrics has the same histogram.
    samples = scrape(manifold)
    assert samples[("manifold_stage_seconds_count", (("stage", "total"),))] >= 50
    assert samples[("manifold_stage_seconds_bucket", (("le", "+Inf"), ("stage", "total")))] >= 50
    p = admin(manifold, "PERF HIST nothing", check=False)
    assert "ERROR 1064" in p.stderr and "backend_first_byte" in p.stderr, p.stderr
    admin(manifold, "PERF HIST RESET")
    rows = {r["stage"]: r for r in table(admin(manifold, "PERF HIST").stdout)}
    assert int(rows["total"]["count"]) < 50, rows


def test_set_global_checks_ranges_and_changes_the_pool_size(topology):
    m = Manifold(topology, ["--threads", "1"], log_name="manifold-set-global")
    try:
        vs = variables(m)
        assert vs["pool.max_size"]["Changeable"] == "runtime" and vs["pool.max_size"]["Value"] == "256", vs
        assert vs["engine.threads"]["Changeable"] == "restart", vs["engine.threads"]
        # Defaults are those of a configuration that sets nothing, whatever runs now.
        assert (vs["pool.max_size"]["Default"], vs["log.slow_query_threshold"]["Default"],
                vs["engine.threads"]["Default"]) == ("256", "1s", "0"), vs
        assert list(vs["pool.max_size"]) == ["Variable_name", "Value", "Default", "Range", "Changeable",
                                             "Description"]
        p = admin(m, "SET GLOBAL pool.max_size = 0", check=False)
        assert "ERROR 1231 (42000)" in p.stderr and "4..=100000" in p.stderr, p.stderr
        # Below a microsecond too: the threshold is kept in nanoseconds.
        admin(m, "SET GLOBAL log.slow_query_threshold = '500ns'")
        assert variables(m, "log.slow_query_threshold")["log.slow_query_threshold"]["Value"] == "500ns"
        admin(m, "SET GLOBAL log.slow_query_threshold = '1s'")
        p = admin(m, "SET GLOBAL log.slow_query_threshold = '2h'", check=False)
        assert "ERROR 1231" in p.stderr and "0..=1h" in p.stderr, p.stderr
        p = admin(m, "SET GLOBAL admin.stage_histograms = maybe", check=False)
        assert "ERROR 1231" in p.stderr and "not ON or OFF" in p.stderr, p.stderr
        p = admin(m, "SET GLOBAL engine.threads = 4", check=False)
        assert "ERROR 1238 (HY000)" in p.stderr and "restart" in p.stderr, p.stderr
        p = admin(m, "SET GLOBAL no.such = 1", check=False)
        assert "ERROR 1193 (HY000)" in p.stderr, p.stderr
        assert variables(m, "pool.max_size")["pool.max_size"]["Value"] == "256"

        admin(m, "SET GLOBAL pool.min_idle = 0", "SET GLOBAL pool.max_size = 1")
        assert variables(m, "pool.%")["pool.max_size"]["Value"] == "1"
        # Four clients sleep at once; with one backend connection they take turns.
        threads, errors = sleepers(m, 4, 0.4)
        seen = []
        while any(t.is_alive() for t in threads):
            seen.append(backend_sleeps(topology, 0.4))
            time.sleep(0.05)
        for t in threads:
            t.join()
        assert not errors, errors
        assert max(seen) == 1, seen
        # Recording off: nothing is recorded.
        admin(m, "SET GLOBAL admin.stage_histograms = OFF", "SET GLOBAL admin.query_digests = OFF",
              "PERF HIST RESET", "RESET QUERY DIGESTS")
        with m.connect(autocommit=True) as c:
            for _ in range(10):
                c.cursor().execute("SELECT 1")
        perf = {r["stage"]: r for r in table(admin(m, "PERF HIST").stdout)}
        assert perf["total"]["count"] == "0" and perf["connect"]["count"] == "0", perf
        assert table(admin(m, "SHOW QUERY DIGESTS").stdout) == []
        admin(m, "SET GLOBAL admin.stage_histograms = ON", "SET GLOBAL admin.query_digests = 1")
        with m.connect(autocommit=True) as c:
            for _ in range(10):
                c.cursor().execute("SELECT 1")
        perf = {r["stage"]: r for r in table(admin(m, "PERF HIST").stdout)}
        assert int(perf["total"]["count"]) >= 10, perf
        # Rows come by total time: on a busy host the client's own SET may come first.
        digests = {r["digest_text"]: r for r in table(admin(m, "SHOW QUERY DIGESTS").stdout)}
        assert int(digests["SELECT ?"]["count"]) >= 10, digests

        admin(m, "SET GLOBAL pool.max_size = 8")
        threads, errors = sleepers(m, 4, 2)
        top = wait_until("four backend connections sleeping", lambda: backend_sleeps(topology, 2) == 4 or None)
        for t in threads:
            t.join()
        assert top and not errors, errors
    finally:
        m.stop_and_check()


def test_log_level_slow_query_log_and_connection_log(topology):
    m = Manifold(topology, log_name="manifold-logs")
    try:
        with m.connect() as c:
            c.cursor().execute("SELECT 1")
        assert "session ended" not in m.log_text()  # a debug line
        admin(m, "SET GLOBAL log.level = 'debug'")
        assert variables(m, "log.level")["log.level"]["Value"] == "debug"
        with m.connect() as c:
            c.cursor().execute("SELECT 1")
        wait_until("a debug line", lambda: "session ended" in m.log_text())
        p = admin(m, "SET GLOBAL log.level = 'info,[['", check=False)
        assert "ERROR 1231" in p.stderr, p.stderr
        admin(m, "SET GLOBAL log.level = info")

        before = status(m, "Slow_queries")["Slow_queries"]
        admin(m, "SET GLOBAL log.slow_query_threshold = '500ms'")
        with m.connect(autocommit=True) as c:
            c.cursor().execute("SELECT SLEEP(0.6) AS slow_one")
            c.cursor().execute("SELECT 1 AS fast_one")
        assert status(m, "Slow_queries")["Slow_queries"] == before + 1
        log = wait_until("the slow query line", lambda: "slow query" in m.log_text() and m.log_text())
        line = next(x for x in log.splitlines() if "slow query" in x)
        assert "SELECT SLEEP(0.6) AS slow_one" in line and "duration_ms" in line, line
        assert "fast_one" not in log

        admin(m, "SET GLOBAL log.connection_log_rate = 2")
        # A storm of failures as fast as they come: without login delays (test_login_throttle.py).
        admin(m, "SET GLOBAL security.failed_login_threshold = 0")
        # A port probe at start may have logged a failed login already.
        earlier = len([x for x in m.log_text().splitlines() if "login failed" in x])
        started = time.time()
        for _ in range(30):
            with pytest.raises(pymysql.MySQLError):
                m.connect(password="wrong")
        seconds = time.time() - started
        failed = [x for x in m.log_text().splitlines() if "login failed" in x][earlier:]
        # At most two lines a second got through: a storm cannot fill the disk.
        assert 1 <= len(failed) <= 2 * (int(seconds) + 2), (len(failed), seconds)
        time.sleep(1.1)
        with pytest.raises(pymysql.MySQLError):
            m.connect(password="wrong")
        lines = wait_until("the next connection log line", lambda: (
            lambda ls: ls if len(ls) > len(failed) else None)(
            [x for x in m.log_text().splitlines() if "login failed" in x][earlier:]))
        # Every failure was logged or counted in a later line's suppressed=N.
        held_back = sum(int(re.search(r"suppressed=(\d+)", x).group(1)) for x in lines)
        assert held_back == 31 - len(lines), (held_back, len(lines))
        assert held_back > 0
        assert "peer=127.0.0.1:" in lines[-1] and "Access denied" in lines[-1], lines[-1]
    finally:
        m.stop_and_check()


def test_reload_config_applies_a_good_file_and_refuses_a_broken_one(topology, tmp_path):
    base = f"""
[pool]
max_size = 50

[log]
slow_query_threshold = "3s"
"""
    m = configured(topology, tmp_path, base, "manifold-reload")
    cfg = tmp_path / "manifold-reload.toml"
    try:
        client = m.connect(autocommit=True)
        assert variables(m, "pool.max_size")["pool.max_size"]["Value"] == "50"
        good = cfg.read_text()
        cfg.write_text(good.replace("max_size = 50", "max_size = [oops"))
        p = admin(m, "RELOAD CONFIG", check=False)
        assert "ERROR 7706 (HY000)" in p.stderr and "nothing changed" in p.stderr, p.stderr
        assert "manifold-reload.toml" in p.stderr and "max_size" in p.stderr, p.stderr
        assert variables(m, "pool.max_size")["pool.max_size"]["Value"] == "50"
        # Valid TOML but an invalid setting: refused as a whole.
        cfg.write_text(good.replace("max_size = 50", "max_size = 60\nmin_idle = 70"))
        p = admin(m, "RELOAD CONFIG", check=False)
        assert "ERROR 7706" in p.stderr and "min_idle" in p.stderr, p.stderr
        assert variables(m, "pool.%")["pool.max_size"]["Value"] == "50"

        cfg.write_text(good.replace("max_size = 50", "max_size = 70")
                           .replace('"3s"', '"250ms"')
                           + '\n[mysql]\nmax_allowed_packet = 1048576\n')
        changes = {r["setting"]: r for r in table(admin(m, "RELOAD CONFIG").stdout)}
        assert changes["pool.max_size"]["status"] == "applied" and changes["pool.max_size"]["new"] == "70", changes
        assert changes["log.slow_query_threshold"]["status"] == "applied", changes
        assert changes["mysql.max_allowed_packet"]["status"] == "needs restart", changes
        vs = variables(m)
        assert vs["pool.max_size"]["Value"] == "70" and vs["log.slow_query_threshold"]["Value"] == "250ms"
        # The client connected before the reload never noticed.
        cur = client.cursor()
        cur.execute("SELECT 42")
        assert cur.fetchone() == (42,)

        # SIGHUP reloads too.
        cfg.write_text(good.replace("max_size = 50", "max_size = 80"))
        os.kill(m.proc.pid, signal.SIGHUP)
        wait_until("SIGHUP to apply pool.max_size",
                   lambda: variables(m, "pool.max_size")["pool.max_size"]["Value"] == "80")
        assert m.proc.poll() is None
        cur.execute("SELECT 43")
        assert cur.fetchone() == (43,)
        client.close()
    finally:
        log = m.stop_and_check()
    assert "SIGHUP: configuration reloaded" in log


def test_reload_keeps_rust_log_until_the_file_changes_log_level(topology, tmp_path, monkeypatch):
    """RUST_LOG at start wins over the file's log.level: a reload for something else keeps
    it; a reload that changes log.level in the file applies it."""
    monkeypatch.setenv("RUST_LOG", "info,manifold_backend=debug")
    m = configured(topology, tmp_path, "[log]\nlevel = \"info\"\n", "manifold-rust-log")
    cfg = tmp_path / "manifold-rust-log.toml"
    try:
        assert variables(m, "log.level")["log.level"]["Value"] == "info,manifold_backend=debug"
        cfg.write_text(cfg.read_text() + "\n[pool]\nmax_size = 40\n")
        changes = {r["setting"]: r for r in table(admin(m, "RELOAD CONFIG").stdout)}
        assert "pool.max_size" in changes and "log.level" not in changes, changes
        assert variables(m, "log.level")["log.level"]["Value"] == "info,manifold_backend=debug"
        cfg.write_text(cfg.read_text().replace('level = "info"', 'level = "warn"'))
        changes = {r["setting"]: r for r in table(admin(m, "RELOAD CONFIG").stdout)}
        assert changes["log.level"]["status"] == "applied", changes
        assert variables(m, "log.level")["log.level"]["Value"] == "warn"
    finally:
        m.stop_and_check()


def test_reload_without_a_file_says_so(manifold):
    p = admin(manifold, "RELOAD CONFIG", check=False)
    assert "ERROR 7706" in p.stderr and "without a configuration file" in p.stderr, p.stderr


def test_backend_offline_drains_a_replica_and_online_brings_it_back(split_manifold, topology):
    m = split_manifold
    replica = f"127.0.0.1:{topology.replica_ports[0]}"
    port = topology.replica_ports[0]

    def ports(n):
        seen = []
        with m.connect(autocommit=True) as c:
            cur = c.cursor()
            for _ in range(n):
                cur.execute("SELECT @@port")
                seen.append(cur.fetchone()[0])
        return seen

    wait_until("reads on the replica", lambda: port in ports(30))

    # Reads running when the replica goes offline: batches of three, each batch's statement
    # its own, started until one of them runs there (the balancer spreads them). Each client
    # records the node that answered and what SLEEP returned (0: it ran to the end).
    threads, errors, answers = [], [], []

    def read_batch(batch):
        statement = f"SELECT {batch}, @@port, SLEEP(3)"

        def run():
            try:
                with m.connect(autocommit=True) as c:
                    cur = c.cursor()
                    cur.execute(statement)
                    answers.append(cur.fetchone())
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        for _ in range(3):
            threads.append(threading.Thread(target=run))
            threads[-1].start()
        return statement

    def all_three_running(statement):
        """The nodes the batch's reads run on, once all three run (else None)."""
        backends = [r["backend"] for r in table(admin(m, "SHOW SESSIONS").stdout)
                    if r["statement"] == statement and r["backend"]]
        return backends if len(backends) == 3 else None

    try:
        on_replica = None
        for batch in range(10):
            statement = read_batch(batch)
            backends = wait_until(f"batch {batch}'s three reads to run",
                                  lambda statement=statement: all_three_running(statement))
            if any(b.startswith(f"{replica} thread ") for b in backends):
                on_replica = batch
                break
        assert on_replica is not None, "no read ran on the replica in 10 batches"
        admin(m, f"BACKEND OFFLINE '{replica}'")
        rows = {r["node"]: r for r in table(admin(m, "SHOW BACKENDS").stdout)}
        assert rows[replica]["state"] == "offline", rows
        assert port not in ports(60)
        for t in threads:
            t.join()
        assert not errors, errors
        assert (on_replica, port, 0) in answers, f"the read in flight on the replica did not finish: {answers}"
        wait_until("the drained replica's connections to close", lambda: {
            r["node"]: r for r in table(admin(m, "SHOW BACKENDS").stdout)}[replica]["connections_open"] == "0")
    finally:
        for t in threads:
            t.join()
        admin(m, f"BACKEND ONLINE '{replica}'")
    p = admin(m, "BACKEND OFFLINE '127.0.0.1:1'", check=False)
    assert "ERROR 7707 (HY000)" in p.stderr, p.stderr
    admin(m, f"BACKEND ONLINE '{replica}'")
    assert table(admin(m, "SHOW BACKENDS").stdout)[1]["state"] == "up"
    wait_until("reads on the replica again", lambda: port in ports(30))


def test_show_rules_lists_the_routing_rules(topology, tmp_path):
    m = configured(topology, tmp_path, f"""
[[routing.rules]]
digest = "^SELECT .* FOR UPDATE"
target = "primary"

[[routing.rules]]
schema = "reports"
user = "{USER}"
target = "replicas"
""", "manifold-rules")
    try:
        with m.connect(autocommit=True) as c:
            for _ in range(3):
                c.cursor().execute("SELECT 1 FOR UPDATE")
            c.cursor().execute("SELECT 1")
        rows = table(admin(m, "SHOW RULES").stdout)
        assert rows == [
            {"cluster": "default", "rule": "0", "digest": "^SELECT .* FOR UPDATE", "schema": "", "user": "",
             "target": "primary", "hits": "3"},
            {"cluster": "default", "rule": "1", "digest": "", "schema": "reports", "user": USER,
             "target": "replicas", "hits": "0"},
        ], rows
    finally:
        m.stop_and_check()


def test_operations_md_documents_every_variable_status_and_metric(manifold):
    from conftest import ROOT
    doc = (ROOT / "docs" / "OPERATIONS.md").read_text()
    for name in variables(manifold):
        assert f"`{name}`" in doc, f"tunable {name} is not in docs/OPERATIONS.md"
    for name in status(manifold):
        assert f"`{name}`" in doc, f"status variable {name} is not in docs/OPERATIONS.md"
    for name, _ in scrape(manifold):
        # A histogram's series are documented under its family's name.
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        if f"`{family}`" not in doc:
            family = name
        assert f"`{family}`" in doc, f"metric {family} is not in docs/OPERATIONS.md"
    for command in ["SHOW BACKENDS", "SHOW POOLS", "SHOW SESSIONS", "SHOW QUERY DIGESTS", "SHOW PIN REASONS",
                    "SHOW RULES", "SHOW VARIABLES", "SET GLOBAL", "RELOAD CONFIG", "BACKEND OFFLINE",
                    "BACKEND ONLINE", "KILL SESSION", "PERF HIST", "SHOW REDIS"]:
        assert f"`{command}" in doc, command


def test_prepared_statement_cache_counters_move_with_executions(manifold):
    import rawmysql
    before = status(manifold, "Stmt_cache_%")
    c = rawmysql.connect(manifold.port)
    try:
        stmt, _, _ = c.prepare("SELECT ? + 1 AS prepared_digest_probe")
        for i in range(5):
            c.execute(stmt, (i,))
    finally:
        c.close()
    after = status(manifold, "Stmt_cache_%")
    hits = after["Stmt_cache_hits"] - before["Stmt_cache_hits"]
    misses = after["Stmt_cache_misses"] - before["Stmt_cache_misses"]
    assert hits + misses == 5, (before, after)
    # The statement, once prepared on a connection, is found there again.
    assert hits >= 1 and misses <= 2, (before, after)
    assert after["Stmt_cache_evictions"] == before["Stmt_cache_evictions"]
    # The executions count under the prepared text's digest.
    rows = [r for r in table(admin(manifold, "SHOW QUERY DIGESTS").stdout)
            if r["digest_text"] == "SELECT ? + ? AS prepared_digest_probe"]
    assert len(rows) == 1 and rows[0]["count"] == "5" and rows[0]["rows"] == "5", rows
