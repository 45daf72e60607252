#!/usr/bin/env python3
"""Holds many idle MySQL client sessions open, for bench/idle_clients.sh.

Each session is a plain TCP connection that goes through the whole connection phase (initial
handshake, HandshakeResponse41 with a mysql_native_password scramble, an auth switch if the
server asks for one) and must end with an OK packet; only then does it count as open. After
that it sends nothing until told to.

Driven by commands on stdin, one per line; every answer is one line on stdout:

  warmup        one session: log in, SELECT 1, COM_QUIT      -> "warmup ok" | "warmup failed: ..."
  open          open --clients sessions, --concurrency at a time
                                                             -> "open ok=N failed=F secs=S [errors=...]"
  check         every session: is it still open, with nothing unexpected received (an ERR packet,
                a close)? Then COM_PING on --ping-sample of them, expecting OK
                                                             -> "check open=N closed=C unexpected=U ping_ok=P ping_failed=Q [errors=...]"
  close (or EOF) COM_QUIT and close every session, then exit -> "closed N"

The protocol comes from tests/python/rawmysql.py (imported from the checkout this script is
in): its constants, the handshake parser, the mysql_native_password scramble and ERR parsing,
and for the one warm-up session its blocking RawConn. The many sessions need asyncio, which
RawConn (a blocking socket per connection) does not offer, so the packet I/O, the login
exchange and COM_PING are written here again on asyncio streams.
"""

import argparse
import asyncio
import collections
import os
import random
import struct
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ left in tests/python by a benchmark
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from rawmysql import (COM_PING, COM_QUIT, DEFAULT_CAPS, NATIVE, UTF8MB4_GENERAL_CI,  # noqa: E402
                      Handshake, RawConn, native_scramble, parse_err, put_lenenc_bytes)


class Failed(Exception):
    pass


def err_text(p):
    e = parse_err(p)
    return f"ERR {e.code} {e.message}"


class Session:
    def __init__(self, reader, writer):
        self.reader, self.writer, self.seq = reader, writer, 0

    async def read_packet(self):
        try:
            header = await self.reader.readexactly(4)
            payload = await self.reader.readexactly(int.from_bytes(header[:3], "little"))
        except asyncio.IncompleteReadError:
            raise Failed("connection closed by the server") from None
        self.seq = (header[3] + 1) & 0xFF
        return payload

    def write_packet(self, payload):
        self.writer.write(len(payload).to_bytes(3, "little") + bytes([self.seq]) + payload)
        self.seq = (self.seq + 1) & 0xFF

    async def login(self, user, password):
        p = await self.read_packet()
        if p[0] == 0xFF:
            raise Failed("handshake: " + err_text(p))
        hs = Handshake(p)
        # Whatever plugin the handshake proposes, answer with mysql_native_password; a server
        # that wants another one for this user sends an auth switch, which fails below.
        # (RawConn.handshake_response builds the same packet, from a RawConn's state.)
        out = struct.pack("<IIB", DEFAULT_CAPS & hs.capabilities, 1 << 24, UTF8MB4_GENERAL_CI) + b"\0" * 23
        out += user.encode() + b"\0" + put_lenenc_bytes(native_scramble(password, hs.scramble))
        self.write_packet(out + NATIVE.encode() + b"\0")
        await self.writer.drain()
        while True:
            p = await self.read_packet()
            if p[0] == 0x00:
                return
            if p[0] == 0xFF:
                raise Failed("login: " + err_text(p))
            if p[0] == 0xFE:  # auth switch request
                end = p.index(b"\0", 1)
                name = p[1:end].decode()
                if name != NATIVE:
                    raise Failed(f"login: server switched to {name}")
                self.write_packet(native_scramble(password, bytes(p[end + 1:]).rstrip(b"\0")[:20]))
                await self.writer.drain()
                continue
            raise Failed(f"login: unexpected packet {bytes(p[:16])!r}")

    async def command(self, payload):
        self.seq = 0
        self.write_packet(payload)
        await self.writer.drain()

    async def ping(self):
        await self.command(bytes([COM_PING]))
        p = await self.read_packet()
        if p[0] != 0x00:
            raise Failed("ping: " + (err_text(p) if p[0] == 0xFF else repr(bytes(p[:16]))))

    def quit(self):
        try:
            self.seq = 0
            self.write_packet(bytes([COM_QUIT]))
            self.writer.close()
        except Exception:
            pass


async def connect(args):
    reader, writer = await asyncio.wait_for(asyncio.open_connection(args.host, args.port), args.timeout)
    s = Session(reader, writer)
    try:
        await asyncio.wait_for(s.login(args.user, args.password), args.timeout)
    except BaseException:
        writer.close()
        raise
    return s


def warmup(args):
    """One blocking session: log in, SELECT 1 (checked), COM_QUIT."""
    c = RawConn(args.port, host=args.host, timeout=args.timeout)
    try:
        c.login(args.user, args.password)
        v = c.scalar("SELECT 1")
        if v != "1":
            raise Failed(f"SELECT 1 returned {v!r}")
    finally:
        c.quit()


def describe(e):
    if isinstance(e, asyncio.TimeoutError):
        return f"timeout ({type(e).__name__})"
    return f"{type(e).__name__}: {e}" if not isinstance(e, Failed) else str(e)


def summary(errors):
    if not errors:
        return ""
    return " errors=" + "; ".join(f"{n}x {msg}" for msg, n in errors.most_common(5))


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--user", default="app")
    ap.add_argument("--password", default="app")
    ap.add_argument("--clients", type=int, default=10000)
    ap.add_argument("--concurrency", type=int, default=200)
    ap.add_argument("--ping-sample", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args()

    sessions = []
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)

    def say(line):
        print(line, flush=True)

    say("started")
    while True:
        line = (await stdin.readline()).decode().strip()
        if line in ("", "close"):
            for s in sessions:
                s.quit()
            await asyncio.sleep(0.5)  # let the COM_QUIT packets go out
            say(f"closed {len(sessions)}")
            return
        if line == "warmup":
            try:
                await asyncio.to_thread(warmup, args)
                say("warmup ok")
            except Exception as e:
                say("warmup failed: " + describe(e))
        elif line == "open":
            sem = asyncio.Semaphore(args.concurrency)
            errors = collections.Counter()

            async def one():
                async with sem:
                    try:
                        sessions.append(await connect(args))
                    except Exception as e:
                        errors[describe(e)] += 1

            t0 = time.monotonic()
            await asyncio.gather(*(one() for _ in range(args.clients)))
            say(f"open ok={len(sessions)} failed={sum(errors.values())} "
                f"secs={time.monotonic() - t0:.1f}{summary(errors)}")
        elif line == "check":
            # Nothing is read from an idle session, so whatever the server sent (an ERR before
            # closing, such as wait_timeout's 1159) or a close sits in its reader.
            closed = unexpected = 0
            errors = collections.Counter()
            for s in sessions:
                if s.reader._buffer:  # bytes nobody asked for
                    unexpected += 1
                    errors["unexpected " + repr(bytes(s.reader._buffer[:40]))] += 1
                if s.reader._eof or s.writer.is_closing():
                    closed += 1
            sample = random.sample(sessions, min(args.ping_sample, len(sessions)))
            ping_ok = 0
            for s in sample:
                try:
                    await asyncio.wait_for(s.ping(), args.timeout)
                    ping_ok += 1
                except Exception as e:
                    errors["ping: " + describe(e)] += 1
            say(f"check open={len(sessions) - closed} closed={closed} unexpected={unexpected} "
                f"ping_ok={ping_ok} ping_failed={len(sample) - ping_ok}{summary(errors)}")
        else:
            say(f"unknown command {line!r}")


if __name__ == "__main__":
    asyncio.run(main())
