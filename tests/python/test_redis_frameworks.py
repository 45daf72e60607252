"""Job frameworks built on Redis, with their real workers, through the door: Celery (Redis
broker and result backend), RQ and Dramatiq (Redis broker, results in Redis). Each run is
made once against Debian's redis-server and once against the door, and must come back the
same (and as the framework documents it: the reference run is checked too).

They use what applications use: Celery's broker lists, BRPOP, Pub/Sub and its `EVALSHA`
scripts; RQ's registries (sorted sets), `LMOVE`, transactions and its results in streams;
Dramatiq's one big Lua script that moves messages between its lists, sets and hashes.

Each framework has its own database number, so their keys never meet the other tests'.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PASSWORD, USER

FRAMEWORKS = Path(__file__).parent / "frameworks"

CELERY_DB, RQ_DB, DRAMATIQ_DB = 11, 12, 13


def need(module):
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"the Python package {module} is missing: run scripts/setup")


def run(script, port, db):
    """Runs a framework's script against the server on `port`; returns what it printed."""
    env = dict(os.environ,
               MANIFOLD_FW_URL=f"redis://{USER}:{PASSWORD}@127.0.0.1:{port}/{db}",
               MANIFOLD_FW_PORT=str(port), MANIFOLD_FW_DB=str(db),
               MANIFOLD_FW_USER=USER, MANIFOLD_FW_PASSWORD=PASSWORD,
               PYTHONPATH=str(FRAMEWORKS))
    p = subprocess.run([sys.executable, str(FRAMEWORKS / script)], cwd=FRAMEWORKS, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{script} against port {port} failed:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{script} printed no result:\n{p.stdout[-2000:]}"
    return json.loads(lines[-1])


def test_celery_runs_tasks_groups_chains_and_chords_through_the_door(redis_door, redis_reference):
    need("celery")
    reference = run("run_celery.py", redis_reference, CELERY_DB)
    assert reference == {"add": 5, "fail": ["ValueError", "boom", "FAILURE"],
                         "group": [0, 2, 4, 6, 8], "chain": 13, "chord": 6}, reference
    assert run("run_celery.py", redis_door, CELERY_DB) == reference


def test_rq_runs_jobs_and_records_failures_through_the_door(redis_door, redis_reference):
    need("rq")
    reference = run("run_rq.py", redis_reference, RQ_DB)
    assert reference == {"jobs": [["finished", 0], ["finished", 2], ["finished", 4]],
                         "queued": 0, "finished": 3, "failed": 1,
                         "failing": ["failed", True]}, reference
    assert run("run_rq.py", redis_door, RQ_DB) == reference


def test_dramatiq_runs_messages_and_stores_results_through_the_door(redis_door, redis_reference):
    need("dramatiq")
    reference = run("run_dramatiq.py", redis_reference, DRAMATIQ_DB)
    assert reference == {"add": [10, 11, 12, 13], "fail": ["ValueError", "boom"]}, reference
    assert run("run_dramatiq.py", redis_door, DRAMATIQ_DB) == reference
