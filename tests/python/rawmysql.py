"""A minimal MySQL client protocol implementation for tests that need to step outside what
real client libraries send: arbitrary bytes, wrong sequence ids, oversized packets,
COM_CHANGE_USER, unknown commands.

Only what the tests need: handshake v10, optional TLS upgrade, mysql_native_password and
caching_sha2_password (fast path, cleartext over TLS, RSA without TLS), COM_QUERY with
text result sets (classic EOF packets: CLIENT_DEPRECATE_EOF is not requested), COM_PING,
COM_CHANGE_USER, raw packet / byte helpers."""

import hashlib
import socket
import ssl
import struct
import time

# Capability flags
CLIENT_LONG_PASSWORD = 1
CLIENT_FOUND_ROWS = 1 << 1
CLIENT_LONG_FLAG = 1 << 2
CLIENT_CONNECT_WITH_DB = 1 << 3
CLIENT_LOCAL_FILES = 1 << 7
CLIENT_PROTOCOL_41 = 1 << 9
CLIENT_SSL = 1 << 11
CLIENT_TRANSACTIONS = 1 << 13
CLIENT_SECURE_CONNECTION = 1 << 15
CLIENT_MULTI_STATEMENTS = 1 << 16
CLIENT_MULTI_RESULTS = 1 << 17
CLIENT_PLUGIN_AUTH = 1 << 19
CLIENT_CONNECT_ATTRS = 1 << 20
CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA = 1 << 21
CLIENT_DEPRECATE_EOF = 1 << 24

DEFAULT_CAPS = (CLIENT_LONG_PASSWORD | CLIENT_LONG_FLAG | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS
                | CLIENT_SECURE_CONNECTION | CLIENT_MULTI_RESULTS | CLIENT_PLUGIN_AUTH
                | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA)

SERVER_MORE_RESULTS_EXISTS = 1 << 3

COM_QUIT = 0x01
COM_INIT_DB = 0x02
COM_QUERY = 0x03
COM_SHUTDOWN = 0x08
COM_PING = 0x0E
COM_CHANGE_USER = 0x11
COM_BINLOG_DUMP = 0x12
COM_RESET_CONNECTION = 0x1F
COM_STMT_PREPARE = 0x16
COM_STMT_EXECUTE = 0x17
COM_STMT_SEND_LONG_DATA = 0x18
COM_STMT_CLOSE = 0x19
COM_STMT_RESET = 0x1A
COM_STMT_FETCH = 0x1C

SERVER_STATUS_CURSOR_EXISTS = 1 << 6
SERVER_STATUS_LAST_ROW_SENT = 1 << 7
CURSOR_TYPE_READ_ONLY = 1
# MariaDB's "the statement prepared last" (execute-direct)
LAST_PREPARED = 0xFFFFFFFF

TYPE_TINY, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_NULL, TYPE_LONGLONG = 1, 2, 3, 5, 6, 8
TYPE_BLOB, TYPE_VAR_STRING = 252, 253

UTF8MB4_GENERAL_CI = 45
NATIVE = "mysql_native_password"
SHA2 = "caching_sha2_password"


class MySQLError(Exception):
    """An ERR packet."""

    def __init__(self, code, sqlstate, message):
        super().__init__(f"({code}, {sqlstate!r}, {message!r})")
        self.code, self.sqlstate, self.message = code, sqlstate, message


class ConnectionClosed(Exception):
    """The peer closed the connection (EOF) while a packet was expected."""


def parse_err(payload):
    assert payload[0] == 0xFF, payload[:16]
    code = struct.unpack_from("<H", payload, 1)[0]
    if payload[3:4] == b"#":
        return MySQLError(code, payload[4:9].decode(), payload[9:].decode("utf-8", "replace"))
    return MySQLError(code, "", payload[3:].decode("utf-8", "replace"))


def lenenc_int(buf, pos):
    b = buf[pos]
    if b < 0xFB:
        return b, pos + 1
    if b == 0xFB:
        return None, pos + 1
    if b == 0xFC:
        return struct.unpack_from("<H", buf, pos + 1)[0], pos + 3
    if b == 0xFD:
        return int.from_bytes(buf[pos + 1:pos + 4], "little"), pos + 4
    return struct.unpack_from("<Q", buf, pos + 1)[0], pos + 9


def lenenc_bytes(buf, pos):
    n, pos = lenenc_int(buf, pos)
    if n is None:
        return None, pos
    return bytes(buf[pos:pos + n]), pos + n


def put_lenenc_int(n):
    if n < 0xFB:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + struct.pack("<Q", n)


def put_lenenc_bytes(b):
    return put_lenenc_int(len(b)) + b


def native_scramble(password, scramble):
    if not password:
        return b""
    pw = password.encode() if isinstance(password, str) else password
    h1 = hashlib.sha1(pw).digest()
    h2 = hashlib.sha1(h1).digest()
    h3 = hashlib.sha1(scramble[:20] + h2).digest()
    return bytes(a ^ b for a, b in zip(h1, h3))


def sha2_scramble(password, scramble):
    if not password:
        return b""
    pw = password.encode() if isinstance(password, str) else password
    p1 = hashlib.sha256(pw).digest()
    p2 = hashlib.sha256(p1).digest()
    p3 = hashlib.sha256(p2 + scramble[:20]).digest()
    return bytes(a ^ b for a, b in zip(p1, p3))


def sha2_rsa_encrypt(password, scramble, public_pem):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    pw = (password.encode() if isinstance(password, str) else password) + b"\0"
    xored = bytes(b ^ scramble[i % 20] for i, b in enumerate(pw))
    key = serialization.load_pem_public_key(public_pem)
    return key.encrypt(xored, padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None))


class Handshake:
    def __init__(self, payload):
        self.raw = payload
        self.protocol = payload[0]
        end = payload.index(b"\0", 1)
        self.server_version = payload[1:end].decode()
        pos = end + 1
        self.connection_id = struct.unpack_from("<I", payload, pos)[0]
        pos += 4
        part1 = payload[pos:pos + 8]
        pos += 9
        caps_lo = struct.unpack_from("<H", payload, pos)[0]
        pos += 2
        self.charset = payload[pos]
        self.status = struct.unpack_from("<H", payload, pos + 1)[0]
        caps_hi = struct.unpack_from("<H", payload, pos + 3)[0]
        self.capabilities = caps_lo | (caps_hi << 16)
        auth_len = payload[pos + 5]
        pos += 6 + 10
        n2 = max(13, auth_len - 8)
        part2 = payload[pos:pos + n2]
        pos += n2
        self.scramble = bytes(part1 + part2).rstrip(b"\0")[:20]
        self.auth_plugin = ""
        if self.capabilities & CLIENT_PLUGIN_AUTH and pos < len(payload):
            self.auth_plugin = payload[pos:].split(b"\0")[0].decode()


class BioTlsSocket:
    """A TLS client over a plain socket driven through memory BIOs, so that the bytes of the
    handshake can be written together with `first_bytes` in one send. Offers what RawConn uses
    of a socket: sendall, recv, settimeout, close."""

    def __init__(self, sock, ca=None, first_bytes=b""):
        self.raw = sock
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl._create_unverified_context()
        ctx.check_hostname = False
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname="127.0.0.1")
        pending = first_bytes
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            pending += self.outgoing.read()
            if pending:
                self.raw.sendall(pending)
                pending = b""
            data = self.raw.recv(65536)
            if not data:
                raise ConnectionClosed("connection closed during the TLS handshake")
            self.incoming.write(data)
        rest = self.outgoing.read()
        if rest:
            self.raw.sendall(rest)

    def version(self):
        return self.obj.version()

    def settimeout(self, t):
        self.raw.settimeout(t)

    def sendall(self, data):
        self.obj.write(data)
        self.raw.sendall(self.outgoing.read())

    def recv(self, n):
        while True:
            try:
                return self.obj.read(n)
            except ssl.SSLWantReadError:
                data = self.raw.recv(65536)
                if not data:
                    return b""
                self.incoming.write(data)
            except ssl.SSLZeroReturnError:
                return b""

    def close(self):
        self.raw.close()


class RawConn:
    """One client connection speaking raw packets."""

    def __init__(self, port, host="127.0.0.1", timeout=30, source=None):
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.seq = 0
        self.handshake = None
        self.capabilities = 0
        self.log = []  # auth exchange steps, for assertions ("fast", "full", "rsa", "switch")

    # ---- bytes and packets -------------------------------------------------------------

    def settimeout(self, t):
        self.sock.settimeout(t)

    def send_raw(self, data):
        self.sock.sendall(data)

    def _recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionClosed(f"connection closed with {len(self.buf)} of {n} bytes read")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_packet(self):
        """One logical packet (joins 16 MiB splits). Returns the payload; sets self.seq to the
        sequence id the next packet sent must carry."""
        payload = b""
        while True:
            header = self._recv_exact(4)
            length = int.from_bytes(header[:3], "little")
            seq = header[3]
            payload += self._recv_exact(length)
            self.seq = (seq + 1) & 0xFF
            if length < 0xFFFFFF:
                return payload

    def send_packet(self, payload, seq=None):
        """Sends one logical packet, splitting at 16 MiB - 1 as the protocol requires."""
        if seq is None:
            seq = self.seq
        out = []
        pos = 0
        while True:
            chunk = payload[pos:pos + 0xFFFFFF]
            out.append(len(chunk).to_bytes(3, "little") + bytes([seq & 0xFF]) + chunk)
            seq += 1
            pos += len(chunk)
            if len(chunk) < 0xFFFFFF:
                break
        self.seq = seq & 0xFF
        self.sock.sendall(b"".join(out))

    def send_command(self, payload):
        self.seq = 0
        self.send_packet(payload)

    def read_ok_or_err(self):
        p = self.read_packet()
        if p[0] == 0xFF:
            raise parse_err(p)
        return p

    def wait_closed(self, timeout=30):
        """Reads until the server closes the connection; returns every packet it sent first.
        Raises TimeoutError if the connection is still open after `timeout` seconds."""
        packets = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"connection still open after {timeout}s; got {packets!r}")
            self.sock.settimeout(left)
            try:
                packets.append(self.read_packet())
            except ConnectionClosed:
                return packets
            except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
                return packets
            except socket.timeout:
                raise TimeoutError(f"connection still open after {timeout}s; got {packets!r}") from None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def quit(self):
        try:
            self.send_command(bytes([COM_QUIT]))
        except OSError:
            pass
        self.close()

    # ---- connection phase --------------------------------------------------------------

    def read_handshake(self):
        p = self.read_packet()
        if p[0] == 0xFF:
            raise parse_err(p)
        self.handshake = Handshake(p)
        return self.handshake

    def handshake_response(self, user, auth_response, plugin, database=None, caps=DEFAULT_CAPS,
                           charset=UTF8MB4_GENERAL_CI, attrs=None):
        if database:
            caps |= CLIENT_CONNECT_WITH_DB
        if attrs:
            caps |= CLIENT_CONNECT_ATTRS
        caps &= self.handshake.capabilities | CLIENT_SSL
        self.capabilities = caps
        out = struct.pack("<IIB", caps, 1 << 24, charset) + b"\0" * 23
        out += user.encode() + b"\0"
        out += put_lenenc_bytes(auth_response)
        if database:
            out += database.encode() + b"\0"
        out += plugin.encode() + b"\0"
        if attrs:
            kv = b"".join(put_lenenc_bytes(k.encode()) + put_lenenc_bytes(v.encode()) for k, v in attrs.items())
            out += put_lenenc_bytes(kv)
        return out

    def start_tls(self, ca=None, caps=DEFAULT_CAPS, charset=UTF8MB4_GENERAL_CI):
        req = struct.pack("<IIB", (caps | CLIENT_SSL) & (self.handshake.capabilities | CLIENT_SSL), 1 << 24, charset) + b"\0" * 23
        self.send_packet(req)
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl._create_unverified_context()
        if ca:
            ctx.check_hostname = False
        self.sock = ctx.wrap_socket(self.sock, server_hostname="127.0.0.1")
        self.tls = True

    def start_tls_pipelined(self, ca=None, caps=DEFAULT_CAPS, charset=UTF8MB4_GENERAL_CI):
        """Like start_tls, but the TLS ClientHello goes out in the same write as the SSL
        request, as it may on the wire whenever a client writes both back to back."""
        req = struct.pack("<IIB", (caps | CLIENT_SSL) & (self.handshake.capabilities | CLIENT_SSL), 1 << 24, charset) + b"\0" * 23
        packet = len(req).to_bytes(3, "little") + bytes([self.seq]) + req
        self.seq = (self.seq + 1) & 0xFF
        self.sock = BioTlsSocket(self.sock, ca, first_bytes=packet)
        self.tls = True

    def login(self, user, password, database=None, plugin=None, caps=DEFAULT_CAPS, tls_ca=None, use_tls=False,
              charset=UTF8MB4_GENERAL_CI):
        """Full connection phase. Raises MySQLError on an ERR. Returns self."""
        hs = self.read_handshake()
        self.tls = False
        if use_tls == "pipelined":
            self.start_tls_pipelined(tls_ca, caps, charset)
        elif use_tls or tls_ca:
            self.start_tls(tls_ca, caps, charset)
        plugin = plugin or hs.auth_plugin or NATIVE
        self.password = password
        resp = self._auth_data(plugin, password, hs.scramble)
        self.send_packet(self.handshake_response(user, resp, plugin, database, caps | (CLIENT_SSL if self.tls else 0), charset))
        self._auth_loop(plugin, password, hs.scramble)
        return self

    @staticmethod
    def _auth_data(plugin, password, scramble):
        return sha2_scramble(password, scramble) if plugin == SHA2 else native_scramble(password, scramble)

    def _auth_loop(self, plugin, password, scramble):
        while True:
            p = self.read_packet()
            if p[0] == 0x00:
                return p
            if p[0] == 0xFF:
                raise parse_err(p)
            if p[0] == 0xFE:  # auth switch
                end = p.index(b"\0", 1)
                plugin = p[1:end].decode()
                scramble = bytes(p[end + 1:]).rstrip(b"\0")[:20]
                self.log.append("switch:" + plugin)
                self.send_packet(self._auth_data(plugin, password, scramble))
                continue
            if p[0] == 0x01 and plugin == SHA2:
                if p[1:2] == b"\x03":
                    self.log.append("fast")
                    continue
                if p[1:2] == b"\x04":
                    self.log.append("full")
                    if self.tls:
                        self.send_packet(password.encode() + b"\0")
                    else:
                        self.send_packet(b"\x02")  # request the public key
                        key = self.read_packet()
                        if key[0] == 0xFF:
                            raise parse_err(key)
                        assert key[0] == 0x01, key[:8]
                        self.log.append("rsa")
                        self.send_packet(sha2_rsa_encrypt(password, scramble, key[1:]))
                    continue
            raise AssertionError(f"unexpected packet during auth: {p[:32]!r}")

    # ---- commands ----------------------------------------------------------------------

    def ping(self):
        self.send_command(bytes([COM_PING]))
        return self.read_ok_or_err()

    def init_db(self, name):
        self.send_command(bytes([COM_INIT_DB]) + name.encode())
        return self.read_ok_or_err()

    def change_user(self, user, password, database="", charset=UTF8MB4_GENERAL_CI, plugin=NATIVE):
        scramble = self.handshake.scramble
        payload = bytes([COM_CHANGE_USER]) + user.encode() + b"\0"
        data = self._auth_data(plugin, password, scramble)
        payload += bytes([len(data)]) + data
        payload += database.encode() + b"\0"
        payload += struct.pack("<H", charset)
        payload += plugin.encode() + b"\0"
        self.send_command(payload)
        self.password = password
        return self._auth_loop(plugin, password, scramble)

    def query(self, sql):
        """Runs COM_QUERY; returns a list of results, one per result set / OK:
        ("ok", affected_rows, warnings) or ("rows", [column names], [rows as tuples of str/None]).
        Raises MySQLError on an ERR (after earlier results were read)."""
        self.send_command(bytes([COM_QUERY]) + (sql.encode() if isinstance(sql, str) else sql))
        return self.read_results()

    def _ok_or_column_count(self):
        """The first packet of a result: (("ok", affected rows, warnings), status) for an OK,
        (column count, None) for a result set. Raises MySQLError on an ERR."""
        p = self.read_packet()
        if p[0] == 0xFF:
            raise parse_err(p)
        if p[0] == 0x00:
            affected, pos = lenenc_int(p, 1)
            _insert_id, pos = lenenc_int(p, pos)
            status, warnings = struct.unpack_from("<HH", p, pos)
            return ("ok", affected, warnings), status
        return lenenc_int(p, 0)[0], None

    def _read_all(self, result_set):
        """Reads results until one says no more follow. `result_set(column count)` reads one
        result set and returns (entry, status); a "cursor" entry ends the answer."""
        results = []
        while True:
            ok, status = self._ok_or_column_count()
            if status is None:
                ok, status = result_set(ok)
            results.append(ok)
            if ok[0] == "cursor" or not status & SERVER_MORE_RESULTS_EXISTS:
                return results

    def read_results(self):
        return self._read_all(self._text_result_set)

    def _text_result_set(self, ncols):
        names = []
        for _ in range(ncols):
            col = self.read_packet()
            pos = 0
            fields = []
            for _ in range(6):  # catalog, schema, table, org_table, name, org_name
                v, pos = lenenc_bytes(col, pos)
                fields.append(v)
            names.append(fields[4].decode())
        eof = self.read_packet()
        assert eof[0] == 0xFE and len(eof) < 9, eof
        rows = []
        while True:
            r = self.read_packet()
            if r[0] == 0xFE and len(r) < 9:
                status = struct.unpack_from("<H", r, 3)[0]
                return ("rows", names, rows), status
            if r[0] == 0xFF:
                raise parse_err(r)
            pos, row = 0, []
            for _ in range(ncols):
                v, pos = lenenc_bytes(r, pos)
                row.append(None if v is None else v.decode("utf-8", "replace"))
            rows.append(tuple(row))

    # ---- prepared statements (binary protocol) ---------------------------------------------

    def _column_defs(self, n):
        cols = []
        for _ in range(n):
            col = self.read_packet()
            pos, fields = 0, []
            for _ in range(6):
                v, pos = lenenc_bytes(col, pos)
                fields.append(v)
            _fixed, pos = lenenc_int(col, pos)
            cols.append((fields[4].decode(), col[pos + 6]))  # name, type
        self.eof_status = None
        if n and not self.capabilities & CLIENT_DEPRECATE_EOF:
            eof = self.read_packet()
            assert eof[0] == 0xFE and len(eof) < 9, eof
            self.eof_status = struct.unpack_from("<H", eof, 3)[0]
        return cols

    def prepare(self, sql):
        """COM_STMT_PREPARE; returns (statement id, column count, parameter count)."""
        self.send_command(bytes([COM_STMT_PREPARE]) + (sql.encode() if isinstance(sql, str) else sql))
        p = self.read_packet()
        if p[0] == 0xFF:
            raise parse_err(p)
        stmt_id, ncols, nparams = struct.unpack_from("<IHH", p, 1)
        self._column_defs(nparams)
        self._column_defs(ncols)
        return stmt_id, ncols, nparams

    def execute(self, stmt_id, params=(), send_types=True, cursor=False):
        """COM_STMT_EXECUTE with `params` (int, str/bytes or None), the types included only if
        `send_types`. Returns the results as `query` does, values as str; with `cursor`, a
        result set whose rows wait behind a cursor is ("cursor", names, status)."""
        out = bytes([COM_STMT_EXECUTE]) + struct.pack("<IBI", stmt_id, CURSOR_TYPE_READ_ONLY if cursor else 0, 1)
        if params:
            bitmap = bytearray((len(params) + 7) // 8)
            types, values = b"", b""
            for i, v in enumerate(params):
                if v is None:
                    bitmap[i // 8] |= 1 << (i % 8)
                    types += struct.pack("<H", TYPE_NULL)
                elif isinstance(v, int):
                    types += struct.pack("<H", TYPE_LONGLONG)
                    values += struct.pack("<q", v)
                else:
                    b = v.encode() if isinstance(v, str) else v
                    types += struct.pack("<H", TYPE_VAR_STRING)
                    values += put_lenenc_bytes(b)
            out += bytes(bitmap) + (b"\x01" + types if send_types else b"\x00") + values
        self.send_command(out)
        return self.read_binary_results()

    def execute_raw(self, payload):
        """Sends a COM_STMT_EXECUTE payload as given; reads the answer."""
        self.send_command(payload)
        return self.read_binary_results()

    def _binary_rows(self, cols):
        rows = []
        while True:
            r = self.read_packet()
            if r[0] == 0xFE and len(r) < 0xFFFFFF and (len(r) < 9 or self.capabilities & CLIENT_DEPRECATE_EOF):
                if self.capabilities & CLIENT_DEPRECATE_EOF:
                    _a, pos = lenenc_int(r, 1)
                    _i, pos = lenenc_int(r, pos)
                    status = struct.unpack_from("<H", r, pos)[0]
                else:
                    status = struct.unpack_from("<H", r, 3)[0]
                return rows, status
            if r[0] == 0xFF:
                raise parse_err(r)
            nullmap_len = (len(cols) + 7 + 2) // 8
            nulls = r[1:1 + nullmap_len]
            pos, row = 1 + nullmap_len, []
            for i, (_name, t) in enumerate(cols):
                if nulls[(i + 2) // 8] & (1 << ((i + 2) % 8)):
                    row.append(None)
                    continue
                fixed = {TYPE_TINY: ("<b", 1), TYPE_SHORT: ("<h", 2), TYPE_LONG: ("<i", 4),
                         TYPE_LONGLONG: ("<q", 8), TYPE_DOUBLE: ("<d", 8)}.get(t)
                if fixed:
                    row.append(str(struct.unpack_from(fixed[0], r, pos)[0]))
                    pos += fixed[1]
                else:
                    v, pos = lenenc_bytes(r, pos)
                    row.append(v.decode("utf-8", "replace"))
            rows.append(tuple(row))

    def read_binary_results(self):
        return self._read_all(self._binary_result_set)

    def _binary_result_set(self, ncols):
        cols = self._column_defs(ncols)
        self.columns = cols
        names = [c[0] for c in cols]
        status = self.eof_status
        if status is not None and status & SERVER_STATUS_CURSOR_EXISTS:
            return ("cursor", names, status), status
        rows, status = self._binary_rows(cols)
        if not rows and status & SERVER_STATUS_CURSOR_EXISTS:
            # CLIENT_DEPRECATE_EOF: the cursor shows in the packet ending the columns.
            return ("cursor", names, status), status
        return ("rows", names, rows), status

    def fetch(self, stmt_id, n):
        """COM_STMT_FETCH of up to `n` rows from the cursor `execute(..., cursor=True)` opened
        (columns as that execute reported them); returns (rows, status)."""
        self.send_command(bytes([COM_STMT_FETCH]) + struct.pack("<II", stmt_id, n))
        return self._binary_rows(getattr(self, "columns", []))

    def send_long_data(self, stmt_id, param, data):
        self.send_command(bytes([COM_STMT_SEND_LONG_DATA]) + struct.pack("<IH", stmt_id, param) + data)

    def stmt_reset(self, stmt_id):
        self.send_command(bytes([COM_STMT_RESET]) + struct.pack("<I", stmt_id))
        return self.read_ok_or_err()

    def stmt_close(self, stmt_id):
        self.send_command(bytes([COM_STMT_CLOSE]) + struct.pack("<I", stmt_id))

    def scalar(self, sql):
        res = self.query(sql)
        kind, _names, rows = res[-1]
        assert kind == "rows", res
        return rows[0][0]


def connect(port, user="app", password="app", **kw):
    timeout = kw.pop("timeout", 30)
    c = RawConn(port, timeout=timeout)
    return c.login(user, password, **kw)


# ---- test support ---------------------------------------------------------------------------


def local_port(conn):
    """The client-side port of a RawConn: manifold's log names it as peer=127.0.0.1:<port>."""
    sock = conn.sock.raw if isinstance(conn.sock, BioTlsSocket) else conn.sock
    return sock.getsockname()[1]


def wait_for_log(read_log, *needles, timeout=15):
    """Bounded poll until one line of the log contains every needle; returns that line.
    `read_log` returns the log text (log lines are written asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        text = read_log()
        for line in text.splitlines():
            if all(n in line for n in needles):
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no log line with {needles!r} within {timeout}s")
        time.sleep(0.05)


class Bystander:
    """A second session, logged in before the misbehaving client acts, that must keep working
    after it: `check()` runs a query on it."""

    def __init__(self, port, **kw):
        self.conn = connect(port, **kw)
        self.n = 0
        self.check()

    def check(self):
        self.n += 1
        got = self.conn.query(f"SELECT {self.n} + 1000, CONNECTION_ID() > 0 AS has_id")
        assert got == [("rows", [f"{self.n} + 1000", "has_id"], [(str(self.n + 1000), "1")])], got

    def close(self):
        self.conn.quit()


def read_err_then_closed(conn, timeout=30):
    """The server's last words: every packet it sent before closing (bounded wait)."""
    return conn.wait_closed(timeout=timeout)


def err_packets(packets):
    """(code, message) of every packet in `packets`, which must all be ERR packets (what a
    server sends before closing a connection it refuses)."""
    out = []
    for p in packets:
        assert p[:1] == b"\xff", f"expected only ERR packets before the close, got {p[:40]!r}"
        e = parse_err(p)
        out.append((e.code, e.message))
    return out
