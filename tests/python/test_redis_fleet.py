"""The Redis door across a fleet of manifolds: a message published (or a keyspace
notification raised) through one instance reaches the subscribers of every instance, with
redis-py and redis-cli. As in a Redis Cluster, PUBLISH answers the subscribers of the
instance it was sent to."""

import subprocess
import time
import uuid

import pymysql
import pytest

from conftest import PASSWORD, USER
from redisdiff import launch_door, need, redis_py


@pytest.fixture(scope="module")
def pair(topology):
    fleet = f"rf_{uuid.uuid4().hex[:8]}.fleet"
    a = launch_door(topology, log_name="redis-fleet-a", fleet=fleet)
    b = launch_door(topology, log_name="redis-fleet-b", fleet=fleet)
    try:
        deadline = time.monotonic() + 30
        for m in (a, b):
            while True:
                with pymysql.connect(host="127.0.0.1", port=m.admin_port, user="admin", password="admin") as c:
                    cur = c.cursor()
                    cur.execute("SHOW MANIFOLDS")
                    if len(cur.fetchall()) == 2:
                        break
                assert time.monotonic() < deadline, "the two instances never listed each other"
                time.sleep(0.1)
        yield a, b
    finally:
        a.stop_and_check()
        b.stop_and_check()


def client(m, **kw):
    return redis_py().Redis(host="127.0.0.1", port=m.redis_port, username=USER, password=PASSWORD, **kw)


def next_message(p, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = p.get_message(ignore_subscribe_messages=True, timeout=0.2)
        if m is not None:
            return m
    return None


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_message_published_on_one_instance_reaches_subscribers_on_the_other(pair, protocol):
    a, b = pair
    sub = client(b, protocol=protocol).pubsub()
    sub.subscribe("rf:chan")
    sub.psubscribe("rf:pat*")
    assert next_message(sub, timeout=0.5) is None
    pub = client(a)
    # The subscribers of the instance it was sent to, as a Redis Cluster node answers.
    assert pub.publish("rf:chan", b"hello\r\nworld") == 0
    m = next_message(sub)
    assert m is not None and m["type"] == "message" and m["channel"] == b"rf:chan", m
    assert m["data"] == b"hello\r\nworld"
    pub.publish("rf:pattern", b"p")
    m = next_message(sub)
    assert m is not None and m["type"] == "pmessage" and m["pattern"] == b"rf:pat*", m
    assert m["data"] == b"p"
    # In order, and each once.
    for i in range(50):
        pub.publish("rf:chan", str(i))
    got = [next_message(sub)["data"] for _ in range(50)]
    assert got == [str(i).encode() for i in range(50)]
    assert next_message(sub, timeout=0.5) is None
    # The instance's own subscribers are counted; a message is delivered once to each.
    local = client(a).pubsub()
    local.subscribe("rf:chan")
    assert next_message(local, timeout=0.3) is None
    assert pub.publish("rf:chan", "both") == 1
    assert next_message(local)["data"] == b"both"
    assert next_message(sub)["data"] == b"both"
    assert next_message(local, timeout=0.5) is None
    sub.close()
    local.close()


def test_redis_cli_publish_and_keyspace_notifications_cross_instances(pair):
    a, b = pair
    cli = need("redis-cli")
    sub = client(b).pubsub()
    sub.psubscribe("__keyspace@0__:rf:*")
    sub.subscribe("rf:cli")
    assert next_message(sub, timeout=0.5) is None
    out = subprocess.run([cli, "-p", str(a.redis_port), "--user", USER, "--pass", PASSWORD, "--no-auth-warning",
                          "PUBLISH", "rf:cli", "from redis-cli"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "0", out
    m = next_message(sub)
    assert m is not None and m["data"] == b"from redis-cli", m
    # Notifications follow the writing instance's setting, as Redis's follow its node's.
    writer = client(a)
    assert writer.config_set("notify-keyspace-events", "K$")
    try:
        writer.set("rf:key", "v")
        m = next_message(sub)
        assert m is not None and m["channel"] == b"__keyspace@0__:rf:key" and m["data"] == b"set", m
    finally:
        writer.config_set("notify-keyspace-events", "")
        writer.delete("rf:key")
    sub.close()
