"""The Dramatiq application the framework tests run: its Redis broker and result backend on
the server named by MANIFOLD_FW_HOST/PORT/DB (the door or redis-server)."""

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.results import Results
from dramatiq.results.backends import RedisBackend

OPTIONS = {
    "host": "127.0.0.1",
    "port": int(os.environ["MANIFOLD_FW_PORT"]),
    "db": int(os.environ["MANIFOLD_FW_DB"]),
    "username": os.environ["MANIFOLD_FW_USER"],
    "password": os.environ["MANIFOLD_FW_PASSWORD"],
}
broker = RedisBroker(namespace="fw-dramatiq", **OPTIONS)
broker.add_middleware(Results(backend=RedisBackend(namespace="fw-dramatiq-results", **OPTIONS)))
dramatiq.set_broker(broker)


@dramatiq.actor(store_results=True, queue_name="fw")
def add(a, b):
    return a + b


@dramatiq.actor(store_results=True, max_retries=0, queue_name="fw")
def fail(text):
    raise ValueError(text)
