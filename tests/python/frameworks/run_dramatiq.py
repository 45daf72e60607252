"""Runs Dramatiq's worker on the Redis server MANIFOLD_FW_* names, sends it messages (with
results stored in Redis, one failing) and prints what came back as one JSON line."""

import json
import os
import subprocess
import sys

from dramatiq.results import ResultFailure

from dramatiq_app import add, fail

worker = subprocess.Popen(
    [sys.executable, "-m", "dramatiq", "dramatiq_app", "-p", "1", "-t", "2", "-Q", "fw"],
    cwd=os.path.dirname(os.path.abspath(__file__)), env=dict(os.environ),
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    sent = [add.send(i, 10) for i in range(4)]
    out = {"add": [m.get_result(block=True, timeout=90_000) for m in sent]}
    failing = fail.send("boom")
    try:
        failing.get_result(block=True, timeout=90_000)
        out["fail"] = "no error"
    except ResultFailure as e:
        out["fail"] = [e.orig_exc_type, e.orig_exc_msg]
    print(json.dumps(out, sort_keys=True))
finally:
    worker.terminate()
    worker.wait(60)
