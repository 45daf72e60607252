"""The Celery application the framework tests run: its broker and result backend are the
Redis server named by MANIFOLD_FW_URL (the door or redis-server)."""

import os

from celery import Celery

URL = os.environ["MANIFOLD_FW_URL"]
app = Celery("manifold_fw", broker=URL, backend=URL)
app.conf.update(
    broker_connection_retry_on_startup=True,
    task_default_queue="fw-celery",
    result_expires=600,
    worker_hijack_root_logger=False,
)


@app.task
def add(a, b):
    return a + b


@app.task
def fail(text):
    raise ValueError(text)


@app.task
def total(values):
    return sum(values)
