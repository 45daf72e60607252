"""Transaction replay with real client libraries: a PyMySQL client and a go-sql-driver/mysql
client (tests/go-sql-driver/replay, built here from the module cache tests/go-sql-driver/run.sh
fills) each in the middle of a transaction while the primary is killed (`kill -9`) and
restarted; both go on and commit all their rows without seeing an error.

go-sql-driver sends statements with arguments as prepared statements unless
`interpolateParams=true`; a transaction that ran prepared statements is not replayed
(docs/OPERATIONS.md "Transaction replay"), so the Go client interpolates."""

import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import ROOT, USER, PASSWORD, Topology, configured, start_testkit, wait_port
from test_go_sql_driver import find_go

GO_CLIENT = ROOT / "tests" / "go-sql-driver" / "replay"


def build_go_client(go, out):
    env = dict(os.environ, GOMODCACHE=str(ROOT / "target" / "gomodcache"), GOFLAGS="-mod=mod -buildvcs=false",
               GOTOOLCHAIN="local", GOPROXY="off")
    r = subprocess.run([go, "build", "-trimpath", "-o", str(out), "."], cwd=GO_CLIENT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, ("building the Go client failed (run tests/go-sql-driver/run.sh prepare DIR once "
                               f"to fill target/gomodcache):\n{r.stderr[-3000:]}")
    return out


def state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def kill_and_restart(topo, pid, log_path):
    """SIGKILLs the primary and starts it again on its data directory and port."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 30
    while state(pid) not in ("Z", "gone") and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc = subprocess.Popen([a.decode() for a in argv], stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    wait_port(topo.primary_port, proc, "the restarted primary", timeout=60)
    return proc


def test_pymysql_and_go_sql_driver_commit_across_a_killed_primary(tmp_path):
    go = find_go()
    go_client = build_go_client(go, tmp_path / "replay-client")
    with start_testkit(0) as info:
        topo = Topology(info)
        pid = int(info["pids"].split(",")[0])
        with topo.root() as c, c.cursor() as cur:
            cur.execute("CREATE DATABASE replay")
            cur.execute("CREATE TABLE replay.r (id INT PRIMARY KEY)")
            cur.execute("CREATE TABLE replay.p (id INT PRIMARY KEY, v VARCHAR(20))")
        m = configured(topo, tmp_path, '[routing]\nfailover_timeout = "30s"\n', "manifold-replay")
        restarted = None
        try:
            py = m.connect(database="replay", autocommit=False)
            cur = py.cursor()
            cur.execute("BEGIN")
            for i in range(1, 4):
                cur.execute("INSERT INTO p VALUES (%s, %s)", (i, f"row {i}"))
            cur.execute("SELECT COUNT(*) FROM p")
            assert cur.fetchone() == (3,)

            dsn = f"{USER}:{PASSWORD}@tcp(127.0.0.1:{m.port})/replay?interpolateParams=true"
            gc = subprocess.Popen([str(go_client), dsn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert gc.stdout.readline().strip() == "ready"

            restarted = kill_and_restart(topo, pid, tmp_path / "primary-restarted.log")

            gc.stdin.write("go\n")
            gc.stdin.flush()
            assert gc.stdout.readline().strip() == "ok 4"
            assert gc.wait(timeout=60) == 0

            cur.execute("INSERT INTO p VALUES (4, 'row 4')")
            cur.execute("SELECT id, v FROM p ORDER BY id")
            assert cur.fetchall() == tuple((i, f"row {i}") for i in range(1, 5))
            py.commit()
            py.close()

            with topo.root() as c, c.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM replay.r")
                assert cur.fetchone() == (4,)
                cur.execute("SELECT COUNT(*) FROM replay.p")
                assert cur.fetchone() == (4,)
            log = m.stop_and_check()
            assert log.count("transaction replayed") == 2, log[-3000:]
        finally:
            if m.proc.poll() is None:
                m.stop()
            if restarted is not None:
                restarted.terminate()
                restarted.wait(timeout=60)
