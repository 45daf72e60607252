"""Enqueues RQ jobs on the Redis server MANIFOLD_FW_* names, runs RQ's worker in burst mode
on them, and prints what became of each (status, result, error) as one JSON line."""

import json
import os
import subprocess
import sys

import redis
from rq import Queue
from rq.registry import FailedJobRegistry, FinishedJobRegistry

from rq_jobs import add, fail

env = os.environ
url = (f"redis://{env['MANIFOLD_FW_USER']}:{env['MANIFOLD_FW_PASSWORD']}@127.0.0.1:"
       f"{env['MANIFOLD_FW_PORT']}/{env['MANIFOLD_FW_DB']}")
r = redis.Redis.from_url(url)
q = Queue("fw-rq", connection=r)
jobs = [q.enqueue(add, i, i) for i in range(3)]
failing = q.enqueue(fail, "boom")
subprocess.run([sys.executable, "-m", "rq.cli", "worker", "--burst", "--url", url, "fw-rq"],
               cwd=os.path.dirname(os.path.abspath(__file__)), env=dict(os.environ),
               check=True, timeout=120)
out = {"jobs": [], "queued": q.count,
       "finished": FinishedJobRegistry("fw-rq", connection=r).count,
       "failed": FailedJobRegistry("fw-rq", connection=r).count}
for j in jobs:
    j.refresh()
    out["jobs"].append([j.get_status().value, j.return_value()])
failing.refresh()
out["failing"] = [failing.get_status().value, "ValueError: boom" in (failing.exc_info or "")]
print(json.dumps(out, sort_keys=True))
