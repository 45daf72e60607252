"""The Redis door's TLS port (`--redis-tls-listen`, `redis.tls_listen`): TLS from the first
byte as Redis's `tls-port`, with the MySQL port's certificate (here the one manifold
generates in its data directory). redis-cli and redis-py (RESP2 and RESP3) work over it;
a client speaking plain RESP to it gets no reply and the connection ends, other clients
unharmed."""

import socket
import ssl
import subprocess

from conftest import AUTO_CERT, USER, PASSWORD, free_port
from redisdiff import cmd, need, redis_py, start_door


def test_tls_port(topology):
    tls_port = free_port()
    with start_door(topology, ["--redis-tls-listen", f"127.0.0.1:{tls_port}"]) as plain_port:
        cli = need("redis-cli")
        out = subprocess.run(
            [cli, "-p", str(tls_port), "--tls", "--cacert", str(AUTO_CERT), "--sni", "localhost",
             "--user", USER, "--pass", PASSWORD, "--no-auth-warning", "SET", "tls:k", "over tls"],
            capture_output=True, text=True, timeout=30)
        assert out.stdout.strip() == "OK", out.stdout + out.stderr
        redis = redis_py()
        for protocol in (2, 3):
            r = redis.Redis(port=tls_port, username=USER, password=PASSWORD, protocol=protocol, ssl=True,
                            ssl_ca_certs=str(AUTO_CERT), ssl_check_hostname=False, socket_timeout=10)
            assert r.get("tls:k") == b"over tls"
            r.close()
        # The certificate is the MySQL port's: the one in the data directory.
        ctx = ssl.create_default_context(cafile=str(AUTO_CERT))
        ctx.check_hostname = False
        with socket.create_connection(("127.0.0.1", tls_port), timeout=10) as raw:
            with ctx.wrap_socket(raw) as s:
                s.sendall(cmd("AUTH", USER, PASSWORD) + cmd("GET", "tls:k"))
                got = b""
                while got.count(b"\r\n") < 3:
                    got += s.recv(4096)
                assert got == b"+OK\r\n$8\r\nover tls\r\n"
        # Plain RESP on the TLS port: no RESP reply (at most a TLS alert record), and the
        # connection ends. (A plain door would answer `-NOAUTH`, so this is checked exactly,
        # not by the absence of `PONG`.)
        with socket.create_connection(("127.0.0.1", tls_port), timeout=15) as s:
            s.sendall(cmd("PING"))
            data = b""
            try:
                while chunk := s.recv(4096):
                    data += chunk
            except ConnectionResetError:
                pass
            except socket.timeout:
                raise AssertionError(f"the TLS port kept a plain client open (got {data!r})") from None
            assert data == b"" or data[:1] == b"\x15", f"not a TLS alert: {data!r}"
        # The plain port is unharmed.
        r = redis.Redis(port=plain_port, username=USER, password=PASSWORD, socket_timeout=10)
        assert r.get("tls:k") == b"over tls"
        r.close()
