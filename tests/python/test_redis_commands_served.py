"""Every command and subcommand Debian's redis-server 7.0.15 lists (`COMMAND LIST`, and each
container's subcommands from its `COMMAND INFO`) is either served by the door (its `COMMAND
INFO` knows it) or named, with its reason, in docs/REDIS.md's "Commands not served" section;
and nothing that section names is served. So the list of what a client will find missing
stays true as commands are added."""

import pathlib
import re

from redisdiff import AUTH, Conn, cmd, read_reply

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "REDIS.md"


def documented_missing():
    """The names (lowercase, subcommands as `container|sub`) the section's list items give
    before their reason (a container named stands for its subcommands too)."""
    text = DOCS.read_text()
    m = re.search(r"^## Commands not served\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "docs/REDIS.md has no '## Commands not served' section"
    items = re.split(r"^- ", m.group(1), flags=re.M)[1:]
    names = set()
    for item in items:
        head = " ".join(item.split())
        head = head[: head.index("`:") + 1] if "`:" in head else ""
        assert head, f"an item names no command before its reason: {item!r}"
        for name in re.findall(r"`([^`]+)`", head):
            names.add(name.lower().replace(" ", "|"))
    assert names, "the section names no command"
    return names


def names_of(conn):
    """redis-server's commands and subcommands."""
    conn.send(cmd("COMMAND", "LIST"))
    top = sorted(n.decode() for n in read_reply(conn.f))
    names = set(top)
    conn.send(cmd("COMMAND", "INFO", *top))
    for info in read_reply(conn.f):
        for sub in info[9] if info and len(info) > 9 else []:
            names.add(sub[0].decode())
    return names


def served(conn, names):
    """Which of `names` the door serves: those its COMMAND INFO knows, and the subcommands of
    a command it knows that it does not answer as unknown (a data command's subcommands,
    such as XGROUP's, are parsed by their family, not listed on their own)."""
    names = sorted(names)
    conn.send(cmd("COMMAND", "INFO", *names))
    infos = read_reply(conn.f)
    known = {n for n, info in zip(names, infos) if info is not None}
    for name in names:
        container, bar, sub = name.partition("|")
        if bar and name not in known and container in known:
            conn.send(cmd(container, sub))
            reply = read_reply(conn.f)
            if not (isinstance(reply, str) and reply.startswith("ERR unknown subcommand")):
                known.add(name)
    return known


def test_every_missing_command_is_documented(redis_door, redis_reference):
    reference = Conn(redis_reference)
    door = Conn(redis_door)
    try:
        reference.send(AUTH)
        read_reply(reference.f)
        door.send(AUTH)
        assert read_reply(door.f) == "OK"
        redis_names = names_of(reference)
        assert len(redis_names) > 300, len(redis_names)
        on_door = served(door, redis_names)
        missing = redis_names - on_door
        documented = documented_missing()
        documented |= {n for n in missing if n.split("|")[0] in documented}
        undocumented = sorted(missing - documented)
        assert not undocumented, f"served by redis-server, not by the door, not in docs/REDIS.md: {undocumented}"
        # A container is named when all its subcommands are missing; the section names nothing
        # the door serves.
        wrongly = sorted(n for n in documented & on_door)
        assert not wrongly, f"docs/REDIS.md says these are not served, the door serves them: {wrongly}"
        unknown = sorted(documented - redis_names)
        assert not unknown, f"docs/REDIS.md names commands redis-server 7.0 does not have: {unknown}"
    finally:
        reference.close()
        door.close()
