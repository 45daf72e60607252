"""The expectations of crates/redis-lua's library tests, re-checked against a live redis-server.

crates/redis-lua/tests/cases/<lib>.txt records, for each script (`S` line), what redis-server
7.0.15 answered (`E` line: the reply as redis-cli prints it; an error as its text without Redis's
` script: <sha>, on @user_script:N.` suffix). The Rust test (crates/redis-lua/tests/libs.rs)
runs the scripts on our libraries and compares with these lines; this test runs them on the
reference and through the door's EVAL, in the same order after SCRIPT FLUSH (the libraries'
settings carry over from one script to the next, as in one Lua state), so the recorded values
cannot drift from Redis and the door's scripts answer them too.

Intended differences (not in the files): a library function called straight from `pcall`
(`pcall(cjson.decode, x)`) names itself in "bad argument" texts where Redis says '?', and
`type(cjson.encode)` is "table" (a callable table), not "function".
"""

import pathlib

import pytest

from conftest import PASSWORD, USER
from redisdiff import Conn, Err

CASES = pathlib.Path(__file__).resolve().parents[2] / "crates" / "redis-lua" / "tests" / "cases"


def unescape(s):
    out = bytearray()
    i = 0
    b = s.encode()
    while i < len(b):
        if b[i] == 0x5C:
            c = b[i + 1]
            if c == 0x5C:
                out.append(0x5C)
            elif c == ord("n"):
                out.append(10)
            elif c == ord("x"):
                out.append(int(b[i + 2:i + 4], 16))
                i += 2
            else:
                raise AssertionError(f"bad escape in {s!r}")
            i += 2
        else:
            out.append(b[i])
            i += 1
    return bytes(out)


def cases(name):
    lines = (CASES / f"{name}.txt").read_text().splitlines()
    assert len(lines) % 2 == 0 and lines, name
    return [(unescape(lines[i][2:]), unescape(lines[i + 1][2:])) for i in range(0, len(lines), 2)]


def as_cli_prints(reply):
    if isinstance(reply, Err):
        text = str(reply)
        cut = text.rfind(" script:")
        return (text[:cut] if cut >= 0 else text).encode()
    if reply is None:
        return b""
    if isinstance(reply, int):
        return str(reply).encode()
    if isinstance(reply, bytes):
        return reply
    return repr(reply).encode()


@pytest.mark.parametrize("lib", ["bit", "cjson", "cmsgpack", "struct", "numbers"])
@pytest.mark.parametrize("server", ["redis-server", "door"])
def test_recorded_values_are_what_redis_and_the_door_answer(request, server, lib):
    conn = Conn(request.getfixturevalue("redis_reference" if server == "redis-server" else "redis_door"))
    try:
        assert conn.call("AUTH", USER, PASSWORD) == "OK"
        assert conn.call("SCRIPT", "FLUSH") == "OK"
        mismatches = []
        for script, want in cases(lib):
            got = as_cli_prints(conn.call("EVAL", script, "0"))
            if got != want:
                mismatches.append((script, want, got))
        assert not mismatches, mismatches
    finally:
        conn.call("SCRIPT", "FLUSH")
        conn.close()
