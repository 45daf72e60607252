"""Runs Celery's worker on the Redis server MANIFOLD_FW_URL names and a few kinds of work
through it (a task, a failing task, a group, a chain, a chord); prints what came back as one
JSON line."""

import json
import os
import subprocess
import sys

from celery import chain, chord, group

from celery_app import add, fail, total

worker = subprocess.Popen(
    [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "--pool=solo",
     "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=WARNING",
     "-Q", "fw-celery"],
    cwd=os.path.dirname(os.path.abspath(__file__)), env=dict(os.environ), stdout=sys.stderr)
try:
    out = {"add": add.delay(2, 3).get(timeout=90)}
    failed = fail.delay("boom")
    try:
        failed.get(timeout=90)
        out["fail"] = "no error"
    except ValueError as e:
        out["fail"] = ["ValueError", str(e), failed.state]
    out["group"] = group(add.s(i, i) for i in range(5)).apply_async().get(timeout=90)
    out["chain"] = chain(add.s(1, 2), add.s(10)).apply_async().get(timeout=90)
    out["chord"] = chord((add.s(i, 1) for i in range(3)), total.s()).apply_async().get(timeout=90)
    print(json.dumps(out, sort_keys=True))
finally:
    worker.terminate()
    worker.wait(60)
