"""The admin port through the `mariadb` command-line client: SHOW BACKENDS and SHOW STATUS
while a workload runs, its own credentials (--admin-user), and clear errors for wrong
credentials, unknown commands and a default password on a reachable address; PyMySQL
connecting there."""

import subprocess
import threading
import time

import pymysql
import pytest

from conftest import Manifold, binary, free_ports, wait_port
from test_clients_cli import mariadb_bin


def admin(m, *statements, user="admin", password="admin", check=True, force=False):
    """Runs statements on `m`'s admin port, in one session; returns the CLI's result
    (tab-separated, with column names). `force`: go on after an error."""
    cmd = [mariadb_bin(), "--no-defaults", "-h127.0.0.1", f"-P{m.admin_port}", "--protocol=tcp",
           "--skip-ssl", f"-u{user}", f"-p{password}", "--batch"]
    script = "".join(f"{s};\n" for s in statements)
    if force:  # read from stdin, where --force applies
        cmd.append("--force")
        p = subprocess.run(cmd, input=script, capture_output=True, text=True, timeout=30)
    else:
        p = subprocess.run([*cmd, "-e", script], capture_output=True, text=True, timeout=30)
    if check:
        assert p.returncode == 0, f"{cmd} exited {p.returncode}: {p.stderr}"
    return p


def table(out):
    """Rows of a --batch result as dicts by column name (the client prints nothing, not even
    the names, for an empty result)."""
    # Only the final newline goes: stripping all whitespace would also take the tab before an
    # empty last column of the last row, and that row would lose the column.
    lines = out.removesuffix("\n").split("\n") if out else []
    if not lines:
        return []
    names = lines[0].split("\t")
    return [dict(zip(names, line.split("\t"))) for line in lines[1:]]


def status(m, pattern=None):
    sql = "SHOW STATUS" + (f" LIKE '{pattern}'" if pattern else "")
    return {r["Variable_name"]: int(r["Value"]) for r in table(admin(m, sql).stdout)}


def test_show_backends_lists_every_node_with_its_role_and_health(topology, split_manifold):
    deadline = time.time() + 20
    while True:
        rows = table(admin(split_manifold, "SHOW BACKENDS").stdout)
        # The monitor has read each node's read_only by now, or soon.
        if all(r["read_only"] for r in rows) or time.time() > deadline:
            break
        time.sleep(0.2)
    assert [r["node"] for r in rows] == [topology.primary] + [f"127.0.0.1:{p}" for p in topology.replica_ports]
    assert [r["role"] for r in rows] == ["primary", "replica", "replica"]
    assert [r["read_only"] for r in rows] == ["OFF", "ON", "ON"]
    assert all(r["state"] == "up" and r["cluster"] == "default" for r in rows), rows
    assert all(r["lag_ms"].isdigit() for r in rows[1:]), rows
    assert list(rows[0]) == ["cluster", "node", "role", "state", "read_only", "lag_ms", "read_weight",
                             "in_flight", "connections_open", "connections_idle", "connect_errors",
                             "shunned_total", "pool_limit"]
    for column in ["in_flight", "connections_open", "connections_idle", "connect_errors", "pool_limit"]:
        assert all(r[column].isdigit() for r in rows), (column, rows)


def test_show_status_counts_move_with_traffic(manifold):
    before = status(manifold)
    held = [manifold.connect() for _ in range(5)]
    stop = threading.Event()
    connected = threading.Event()

    def load():
        with manifold.connect(autocommit=True) as c:
            connected.set()
            cur = c.cursor()
            while not stop.is_set():
                cur.execute("SELECT 1")

    worker = threading.Thread(target=load)
    worker.start()
    try:
        # The sixth connection is counted once its login is done.
        assert connected.wait(30), "the load's connection never logged in"
        during = status(manifold)
        assert during["Client_connections"] >= 6, during
        assert during["Client_connections_accepted"] >= before["Client_connections_accepted"] + 6
        assert during["Backends_up"] == 1 and during["Backends_shunned"] == 0, during
    finally:
        stop.set()
        worker.join()
        for c in held:
            c.close()
    with pytest.raises(Exception):
        manifold.connect(password="wrong")
    after = status(manifold)
    assert after["Client_auth_failures"] == during["Client_auth_failures"] + 1
    assert after["Uptime"] >= during["Uptime"]


def test_show_status_like_filters_names(manifold):
    got = status(manifold, "client\\_conn%")
    assert set(got) == {"Client_connections", "Client_connections_accepted", "Client_connections_closed"}
    assert status(manifold, "nothing%") == {}
    # What an interactive client asks on connecting.
    out = admin(manifold, "select @@version_comment limit 1").stdout
    assert table(out) == [{"@@version_comment": "manifold admin"}], out


def test_client_libraries_connect_and_their_session_sets_change_nothing(manifold):
    """PyMySQL sends SET NAMES on connecting (and an init_command if given): the admin port
    answers OK and keeps no session state. A tunable set without GLOBAL is refused, not
    ignored, and a dotted name that is no tunable is unknown."""
    c = pymysql.connect(host="127.0.0.1", port=manifold.admin_port, user="admin", password="admin",
                        init_command="SET sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE', autocommit = 1")
    try:
        cur = c.cursor()
        cur.execute("SHOW STATUS LIKE 'Uptime'")
        assert cur.fetchall()[0][0] == "Uptime"
        with pytest.raises(pymysql.MySQLError) as e:
            cur.execute("SET pool.max_size = 5")
        assert e.value.args[0] == 1229 and "SET GLOBAL" in e.value.args[1], e.value.args
        with pytest.raises(pymysql.MySQLError) as e:
            cur.execute("SET pool.max_sizes = 5")
        assert e.value.args[0] == 1193 and "pool.max_sizes" in e.value.args[1], e.value.args
        cur.execute("SHOW VARIABLES LIKE 'log.slow_query_threshold'")
        before = cur.fetchall()[0][1]
        cur.execute("SET @@global.log.slow_query_threshold = '7s'")
        cur.execute("SHOW VARIABLES LIKE 'log.slow_query_threshold'")
        assert cur.fetchall()[0][1] == "7s"
        cur.execute(f"SET GLOBAL log.slow_query_threshold = '{before}'")
        with pytest.raises(pymysql.MySQLError) as e:
            cur.execute("SET GLOBAL log.level = ''")
        assert e.value.args[0] == 1231, e.value.args
    finally:
        c.close()


def test_wrong_credentials_and_unknown_commands_get_clear_errors(manifold):
    p = admin(manifold, "SHOW BACKENDS", password="nope", check=False)
    assert p.returncode == 1
    assert "ERROR 1045 (28000)" in p.stderr and "Access denied for user 'admin'" in p.stderr, p.stderr
    p = admin(manifold, "SHOW BACKENDS", user="app", password="app", check=False)
    assert "ERROR 1045 (28000)" in p.stderr, p.stderr
    p = admin(manifold, "DROP TABLE t", check=False)
    assert p.returncode == 1
    assert "ERROR 1064 (42000)" in p.stderr and "Unknown admin command 'DROP TABLE t'" in p.stderr, p.stderr
    p = admin(manifold, "SHOW STATUS LIKE Client", check=False)
    assert "LIKE takes a quoted pattern" in p.stderr, p.stderr
    # `%` and `_` mixed: names of five characters or more; none ends in `#`.
    assert len(table(admin(manifold, "SHOW STATUS LIKE '%" + "_%" * 5 + "'").stdout)) > 5
    assert table(admin(manifold, "SHOW STATUS LIKE '" + "%_" * 12 + "%#'").stdout) == []
    # The session survives an error: the next statement on it answers.
    p = admin(manifold, "SHOW FOO", "SHOW STATUS LIKE 'Uptime'", check=False, force=True)
    assert "Unknown admin command 'SHOW FOO'" in p.stderr, p.stderr
    assert table(p.stdout)[0]["Variable_name"] == "Uptime", p.stdout


def test_admin_user_sets_the_credentials(topology):
    m = Manifold(topology, ["--admin-user", "ops:s3cret"], log_name="manifold-admin-user")
    try:
        rows = table(admin(m, "SHOW BACKENDS", user="ops", password="s3cret").stdout)
        assert rows[0]["role"] == "primary"
        assert "ERROR 1045" in admin(m, "SHOW BACKENDS", check=False).stderr
    finally:
        m.stop_and_check()


def test_default_password_is_refused_on_a_reachable_address(topology):
    listen, port = free_ports(2)
    r = subprocess.run([binary("manifold"), "--primary", topology.primary, "--user", "app:app",
                        "--listen", f"127.0.0.1:{listen}", "--admin-listen", f"0.0.0.0:{port}",
                        "--http-listen", ""],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "admin.password" in r.stderr and "loopback" in r.stderr, r.stderr
    # With a password of its own it starts.
    proc = subprocess.Popen([binary("manifold"), "--primary", topology.primary, "--user", "app:app",
                             "--listen", f"127.0.0.1:{listen}", "--admin-listen", f"0.0.0.0:{port}",
                             "--http-listen", "", "--admin-user", "ops:s3cret"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc, "manifold's admin port")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def pins(m):
    return {r["reason"]: int(r["pins"]) for r in table(admin(m, "SHOW PIN REASONS").stdout)}


def test_show_pin_reasons_counts_sessions_pinned(manifold, schema):
    before = pins(manifold)
    assert "transaction" in before and "temporary_table" in before, before
    with manifold.connect(database=schema, autocommit=True) as c:
        cur = c.cursor()
        for _ in range(3):
            cur.execute("BEGIN")
            cur.execute("SELECT 1")
            cur.execute("COMMIT")
        cur.execute("CREATE TEMPORARY TABLE tmp (i INT)")
        after = pins(manifold)
    assert after["transaction"] >= before["transaction"] + 3, (before, after)
    assert after["temporary_table"] == before["temporary_table"] + 1, (before, after)


def test_kill_session_ends_that_client_only(manifold):
    victim = manifold.connect(autocommit=True)
    bystander = manifold.connect(autocommit=True)
    cur = victim.cursor()
    cur.execute("SELECT CONNECTION_ID()")
    victim_id = cur.fetchone()[0]
    admin(manifold, f"KILL SESSION {victim_id}")
    with pytest.raises(Exception):
        for _ in range(50):  # the kill lands while the session waits for its client
            cur.execute("SELECT 1")
            time.sleep(0.05)
    cur = bystander.cursor()
    cur.execute("SELECT 2")
    assert cur.fetchone() == (2,)
    bystander.close()
    p = admin(manifold, "KILL SESSION 4000000000", check=False)
    assert "ERROR 1094 (HY000)" in p.stderr and "Unknown thread id: 4000000000" in p.stderr, p.stderr
    p = admin(manifold, "KILL SESSION me", check=False)
    assert "ERROR 1064 (42000)" in p.stderr and "takes a connection id (a number), not 'me'" in p.stderr, p.stderr


def http_get(m, path):
    """Status, content type and body of GET `path` on `m`'s HTTP port."""
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{m.http_port}{path}", timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def scrape(m):
    """/metrics parsed by Prometheus' own client library: {(name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families
    status, content_type, body = http_get(m, "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4"), (status, content_type)
    samples = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_metrics_parse_as_prometheus_text_and_move_with_traffic(topology, split_manifold):
    m = split_manifold
    before = scrape(m)
    accepted = ("manifold_client_connections_accepted_total", ())
    for _ in range(3):
        with m.connect() as c:
            c.cursor().execute("SELECT 1")
    with pytest.raises(Exception):
        m.connect(password="wrong")
    after = scrape(m)
    assert after[accepted] >= before[accepted] + 4, (before[accepted], after[accepted])
    failures = ("manifold_client_auth_failures_total", ())
    assert after[failures] == before[failures] + 1
    up = {dict(labels)["node"]: v for (name, labels), v in after.items() if name == "manifold_backend_up"}
    assert up == {topology.primary: 1.0, **{f"127.0.0.1:{p}": 1.0 for p in topology.replica_ports}}, up
    roles = {dict(labels)["role"] for (name, labels) in after if name == "manifold_backend_up"}
    assert roles == {"primary", "replica"}
    assert ("manifold_pins_total", (("reason", "transaction"),)) in after


def test_status_is_json_with_the_same_figures(split_manifold):
    import json
    status, content_type, body = http_get(split_manifold, "/status")
    assert status == 200 and content_type == "application/json"
    doc = json.loads(body)
    assert doc["status"]["Backends_up"] == 3, doc["status"]
    assert [b["role"] for b in doc["backends"]] == ["primary", "replica", "replica"]
    assert all(isinstance(b["shunned_total"], int) for b in doc["backends"])
    assert "transaction" in doc["pins"]
    code, _, body = http_get(split_manifold, "/nothing")
    assert code == 404 and "/metrics" in body
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", split_manifold.http_port, timeout=10)
    conn.request("POST", "/metrics", body="x")
    assert conn.getresponse().status == 405
    conn.close()
