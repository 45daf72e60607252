"""go-sql-driver/mysql's own test suite, run directly against the MariaDB primary and through
manifold. The bar: no failures either way, every test the suite declares reports an outcome in
both runs, and nothing that passes directly may be skipped (or not run at all) through
manifold.

tests/go-sql-driver/run.sh fetches the pinned module from the Go module proxy into
target/gomodcache and compiles its test binary; both runs use that one binary, through
`go tool test2json`, so every test's outcome is read from JSON events."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from conftest import Manifold

ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "app", "app"  # as in conftest.py: exists on the backends and in manifold
RUN_SH = ROOT / "tests" / "go-sql-driver" / "run.sh"
VERSION = "v1.10.1"
PACKAGE = "github.com/go-sql-driver/mysql"
GO_TIMEOUT = "300s"

# Not run in either place, with why. Everything else in the suite runs.
SKIPPED_EVERYWHERE = {
    # A client-only test: it dials 1.1.1.1:1234 and expects "i/o timeout". Its outcome depends on
    # the host's network, not on the server (sandboxes that accept any connection make it panic).
    "TestConnectorReturnsTimeout": "dials 1.1.1.1:1234; tests the host's network, not the server",
}
# MYSQL_TEST_CONCURRENT=1 only through manifold: TestConcurrent opens @@max_connections (2000 on
# the testkit's servers) connections at once. Directly, mariadbd resets some of them when the
# previous subtest's 2000 threads have not yet exited (flaky, environmental); through manifold the
# 2000 client connections share manifold's backend pool, which is what is worth testing.


def find_go():
    go = os.environ.get("GO") or shutil.which("go") or "/usr/local/go/bin/go"
    if not os.access(go, os.X_OK):
        pytest.fail("go not found (PATH, /usr/local/go/bin/go): install Go >= 1.24 from https://go.dev/dl/ "
                    "(or set GO=/path/to/go) to run the go-sql-driver/mysql suite")
    return go


def build(go, workdir):
    env = dict(os.environ, GO=go, GSD_VERSION=VERSION)
    r = subprocess.run([str(RUN_SH), "prepare", str(workdir)], env=env, capture_output=True, text=True, timeout=900)
    if r.returncode == 3:
        pytest.fail(r.stderr.strip())
    if r.returncode != 0:
        pytest.fail(f"fetching/building go-sql-driver/mysql {VERSION} failed (exit {r.returncode}):\n"
                    f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
    return Path(r.stdout.strip().splitlines()[-1])


def suite_tests(binary):
    """The suite's top-level tests: the `func TestX(t *testing.T)` its source declares, which
    must be what the compiled binary lists (`-test.list`), so that neither can shrink unseen."""
    declared = set()
    for f in binary.parent.glob("*_test.go"):
        declared.update(re.findall(r"(?m)^func (Test\w+)\(\w+ \*testing\.T\)", f.read_text()))
    r = subprocess.run([str(binary), "-test.list", "^Test"], cwd=binary.parent, capture_output=True, text=True,
                       timeout=120)
    listed = {line.strip() for line in r.stdout.splitlines() if line.startswith("Test")}
    if r.returncode != 0 or not declared or listed != declared:
        pytest.fail(f"go-sql-driver/mysql {VERSION}: the binary lists {len(listed)} tests (exit {r.returncode}), "
                    f"its source declares {len(declared)}; only listed {sorted(listed - declared)[:10]}, "
                    f"only declared {sorted(declared - listed)[:10]}\n{r.stderr[-2000:]}")
    return listed


class Outcome:
    """Final action per test ("pass", "fail", "skip") and each test's output, from test2json events."""

    def __init__(self, label):
        self.label = label
        self.result = {}
        self.output = {}
        self.package_output = []
        self.package_result = None
        self.seconds = 0.0

    def feed(self, line):
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            self.package_output.append(line)
            return
        test, action = ev.get("Test"), ev.get("Action")
        if action == "output":
            (self.output.setdefault(test, []) if test else self.package_output).append(ev.get("Output", ""))
        elif action in ("pass", "fail", "skip"):
            if test:
                self.result[test] = action
            else:
                self.package_result = action

    def names(self, action):
        return sorted(t for t, a in self.result.items() if a == action)

    def failed(self):
        fails = self.names("fail")
        if self.package_result != "pass" and not fails:
            fails.append("(package: " + (self.package_result or "no result") + ")")
        return fails

    def counts(self):
        return {a: len(self.names(a)) for a in ("pass", "fail", "skip")}

    def top_level_counts(self):
        top = {t: a for t, a in self.result.items() if "/" not in t}
        return {a: sum(1 for v in top.values() if v == a) for a in ("pass", "fail", "skip")}

    def excerpt(self, test, lines=15):
        out = self.output.get(test) if not test.startswith("(package") else self.package_output
        out = [l.rstrip("\n") for l in (out or []) if not l.startswith(("=== RUN", "=== PAUSE", "=== CONT"))]
        panic = next((i for i, l in enumerate(out) if l.startswith("panic:")), None)
        if panic is not None:  # a panic or -test.timeout: its first lines, not the goroutine dump
            out = out[max(panic - 3, 0):panic + 6]
        return "\n".join("      " + l for l in out[-lines:])


def run_suite(go, binary, label, addr, dbname, extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYSQL_TEST_")}
    env.update(MYSQL_TEST_USER=USER, MYSQL_TEST_PASS=PASSWORD, MYSQL_TEST_PROT="tcp",
               MYSQL_TEST_ADDR=addr, MYSQL_TEST_DBNAME=dbname, **(extra_env or {}))
    skip = "|".join(f"^{t}$" for t in SKIPPED_EVERYWHERE)
    cmd = [go, "tool", "test2json", "-t", "-p", PACKAGE, str(binary),
           "-test.v=test2json", "-test.count=1", f"-test.timeout={GO_TIMEOUT}", f"-test.skip={skip}"]
    outcome = Outcome(label)
    start = time.time()
    log_path = ROOT / "target" / f"go-sql-driver-{label}.jsonl"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=binary.parent, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            log.write(line)
            outcome.feed(line)
        proc.wait(timeout=60)
    outcome.seconds = time.time() - start
    return outcome


@pytest.fixture
def global_causal_manifold(topology, tmp_path):
    """A manifold splitting reads over the replicas with `routing.causal_reads = global`.
    The suite shares a database/sql connection pool between statements: a test that cancels
    a query goes on on a new connection, and reads there what it wrote on the old one.
    Session causality covers a connection's own writes only, so under load such a read could
    find a replica behind; global causality makes every read wait for the primary's
    position."""
    cfg = tmp_path / "go-sql-driver.toml"
    cfg.write_text('[routing]\ncausal_reads = "global"\n')
    m = Manifold(topology, ["--config", str(cfg)], log_name="manifold-go-sql-driver", split=True)
    yield m
    m.stop_and_check()


def test_go_sql_driver_suite(topology, global_causal_manifold):
    """Through a manifold splitting reads over the replicas, as it runs in production."""
    manifold = global_causal_manifold
    go = find_go()
    suffix = uuid.uuid4().hex[:8]
    databases = {"direct": f"gsd_direct_{suffix}", "manifold": f"gsd_manifold_{suffix}"}
    started = time.time()
    workdir = Path(tempfile.mkdtemp(prefix="go-sql-driver-"))
    try:
        binary = build(go, workdir)
        expected = suite_tests(binary) - set(SKIPPED_EVERYWHERE)
        built = time.time()
        with topology.root() as c:
            cur = c.cursor()
            for db in databases.values():
                cur.execute(f"CREATE DATABASE {db}")
                cur.execute(f"GRANT ALL ON {db}.* TO '{USER}'@'%'")
        direct = run_suite(go, binary, "direct", topology.primary, databases["direct"])
        through = run_suite(go, binary, "manifold", f"127.0.0.1:{manifold.port}", databases["manifold"],
                            {"MYSQL_TEST_CONCURRENT": "1"})
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        try:
            with topology.root() as c:
                for db in databases.values():
                    c.cursor().execute(f"DROP DATABASE IF EXISTS {db}")
        except Exception as e:  # the verdict below matters more than the cleanup
            print(f"dropping the test databases failed: {e}")

    direct_fail, through_fail = direct.failed(), through.failed()
    passed_directly = set(direct.names("pass"))
    hidden_skips = sorted(passed_directly & set(through.names("skip")))
    not_run = sorted(t for t in passed_directly if t not in through.result)
    # Every test of the suite reports, in both runs: a run cut short (a panic, a timeout, a
    # filter gone wrong) cannot pass on the tests it happened to run.
    unreported = {o.label: sorted(expected - set(o.result)) for o in (direct, through)}

    lines = [f"go-sql-driver/mysql {VERSION}: build {built - started:.0f}s, "
             f"direct {direct.seconds:.0f}s, through manifold {through.seconds:.0f}s"]
    for o in (direct, through):
        lines.append(f"  {o.label:>8}: tests+subtests {o.counts()}, top-level {o.top_level_counts()}, "
                     f"skipped {o.names('skip')}")
    lines.append(f"  the suite's top-level tests: {len(expected)} (and {sorted(SKIPPED_EVERYWHERE)}, "
                 f"not run in either); MYSQL_TEST_CONCURRENT only through manifold")
    if through_fail:
        lines.append(f"FAILED THROUGH MANIFOLD ({len(through_fail)}), see {manifold.log_path}:")
        lines += [f"  {t}\n{through.excerpt(t)}" for t in through_fail]
    if direct_fail:
        lines.append(f"FAILED DIRECTLY against {topology.primary} ({len(direct_fail)}): an environment "
                     "problem, not manifold's:")
        lines += [f"  {t}\n{direct.excerpt(t)}" for t in direct_fail]
    if hidden_skips:
        lines.append(f"PASS directly but SKIPPED through manifold ({len(hidden_skips)}):")
        lines += [f"  {t}\n{through.excerpt(t, 5)}" for t in hidden_skips]
    # manifold runs with TLS on by default (no certificate configured): the suite's TLS
    # tests (tls=preferred, skip-verify, a custom config) must run and pass through it.
    tls_missing = "TestTLS" not in through.names("pass")
    if tls_missing:
        lines.append(f"TestTLS did not pass through manifold: {through.result.get('TestTLS', 'not run')}")
    if not_run:
        shown = ", ".join(not_run[:25]) + (f", ... ({len(not_run) - 25} more)" if len(not_run) > 25 else "")
        lines.append(f"PASS directly but NOT RUN through manifold ({len(not_run)}): {shown}")
    for label, missing in unreported.items():
        if missing:
            shown = ", ".join(missing[:25]) + (f", ... ({len(missing) - 25} more)" if len(missing) > 25 else "")
            lines.append(f"NO OUTCOME {label} for {len(missing)} of the suite's {len(expected)} tests: {shown}")
    lines.append("  full event logs: target/go-sql-driver-direct.jsonl, target/go-sql-driver-manifold.jsonl")
    summary = "\n".join(lines)
    print(summary)
    assert not (through_fail or direct_fail or hidden_skips or not_run or tls_missing
                or any(unreported.values())), summary
