#![forbid(unsafe_code)]
//! A minimal blocking MySQL client for integration tests: enough protocol to log in
//! (`mysql_native_password`), run text queries, and send arbitrary bytes, so tests can speak
//! raw protocol to manifold and look at exactly what comes back.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use manifold_mysql_proto::auth;
use manifold_mysql_proto::consts::caps;
use manifold_mysql_proto::handshake::{AuthSwitchRequest, HandshakeResponse, HandshakeV10};
use manifold_mysql_proto::packets::{decode_text_row, ErrPacket, OkPacket};
use manifold_mysql_proto::{scan_logical, write_packet};

pub const CLIENT_CAPS: u32 = caps::LONG_PASSWORD
    | caps::LONG_FLAG
    | caps::PROTOCOL_41
    | caps::TRANSACTIONS
    | caps::SECURE_CONNECTION
    | caps::MULTI_STATEMENTS
    | caps::MULTI_RESULTS
    | caps::PLUGIN_AUTH
    | caps::PLUGIN_AUTH_LENENC_CLIENT_DATA;

#[derive(Debug)]
pub enum Error {
    Io(std::io::Error),
    Server(ErrPacket),
    Protocol(String),
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "io: {e}"),
            Error::Server(e) => write!(f, "{e}"),
            Error::Protocol(e) => write!(f, "protocol: {e}"),
        }
    }
}

impl Error {
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Server(e) => Some(e.code),
            _ => None,
        }
    }
}

/// One statement's outcome: rows as text (NULL = None), or an OK's counts.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QueryResult {
    pub columns: usize,
    pub rows: Vec<Vec<Option<String>>>,
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: u16,
}

impl QueryResult {
    /// The first column of the first row.
    pub fn scalar(&self) -> Option<String> {
        self.rows.first().and_then(|r| r.first().cloned().flatten())
    }
}

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
    pub connection_id: u32,
    pub server_version: String,
    /// Calls of [`Client::exchange`] so far: each marks its answer's end with its own number.
    exchanges: u64,
}

impl Client {
    /// Connects without logging in (for handshake-level tests).
    pub fn connect_raw(addr: SocketAddr) -> Result<(Client, HandshakeV10), Error> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut c = Client {
            stream,
            buf: Vec::new(),
            connection_id: 0,
            server_version: String::new(),
            exchanges: 0,
        };
        let (_, payload) = c.read_packet()?;
        if payload.first() == Some(&0xFF) {
            return Err(Error::Server(
                ErrPacket::decode(&payload).map_err(|e| Error::Protocol(e.to_string()))?,
            ));
        }
        let hs = HandshakeV10::decode(&payload).map_err(|e| Error::Protocol(e.to_string()))?;
        c.connection_id = hs.connection_id;
        c.server_version = String::from_utf8_lossy(&hs.server_version).into_owned();
        Ok((c, hs))
    }

    /// Connects and logs in with `mysql_native_password`.
    pub fn connect(
        addr: SocketAddr,
        user: &str,
        password: &str,
        db: Option<&str>,
    ) -> Result<Client, Error> {
        let (mut c, hs) = Self::connect_raw(addr)?;
        let scramble = &hs.auth_data[..20];
        let mut caps = CLIENT_CAPS;
        if db.is_some() {
            caps |= caps::CONNECT_WITH_DB;
        }
        let resp = HandshakeResponse {
            capabilities: caps,
            max_packet: 1 << 30,
            charset: 45,
            user: user.as_bytes().to_vec(),
            auth_response: auth::native_scramble(password.as_bytes(), scramble),
            database: db.map(|d| d.as_bytes().to_vec()),
            auth_plugin: Some(auth::NATIVE_PASSWORD.as_bytes().to_vec()),
            attributes: Vec::new(),
        };
        let mut out = Vec::new();
        resp.encode(&mut out);
        c.send(1, &out)?;
        loop {
            let (seq, payload) = c.read_packet()?;
            match payload.first() {
                Some(0x00) => return Ok(c),
                Some(0xFF) => {
                    return Err(Error::Server(
                        ErrPacket::decode(&payload).map_err(|e| Error::Protocol(e.to_string()))?,
                    ))
                }
                Some(0xFE) => {
                    let sw = AuthSwitchRequest::decode(&payload)
                        .map_err(|e| Error::Protocol(e.to_string()))?;
                    if sw.plugin != auth::NATIVE_PASSWORD.as_bytes() {
                        return Err(Error::Protocol(format!(
                            "test client cannot do {}",
                            String::from_utf8_lossy(&sw.plugin)
                        )));
                    }
                    let r = auth::native_scramble(password.as_bytes(), &sw.data[..20]);
                    c.send(seq.wrapping_add(1), &r)?;
                }
                _ => return Err(Error::Protocol("unexpected packet during login".into())),
            }
        }
    }

    /// Writes bytes as they are.
    pub fn send_bytes(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.stream.write_all(bytes)?;
        Ok(())
    }

    pub fn send(&mut self, seq: u8, payload: &[u8]) -> Result<(), Error> {
        let mut out = Vec::with_capacity(payload.len() + 4);
        write_packet(&mut out, seq, payload);
        self.send_bytes(&out)
    }

    /// Reads one logical packet: (last sequence id, payload).
    pub fn read_packet(&mut self) -> Result<(u8, Vec<u8>), Error> {
        loop {
            if let Some(p) =
                scan_logical(&self.buf, usize::MAX).map_err(|e| Error::Protocol(e.to_string()))?
            {
                let payload = p.payload(&self.buf).into_owned();
                self.buf.drain(..p.raw_len);
                return Ok((p.last_seq, payload));
            }
            let mut chunk = [0u8; 16384];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(Error::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "server closed the connection",
                )));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// True once the server has closed the connection (reads EOF), waiting up to `timeout`.
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        let _ = self.stream.set_read_timeout(Some(timeout));
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }

    /// Runs one statement (or the first result of several) and reads every result it sends;
    /// returns the last result, or the first error.
    pub fn query(&mut self, sql: &str) -> Result<QueryResult, Error> {
        let mut payload = vec![0x03];
        payload.extend_from_slice(sql.as_bytes());
        self.send(0, &payload)?;
        self.read_results()
    }

    pub fn read_results(&mut self) -> Result<QueryResult, Error> {
        loop {
            let r = self.read_one_result()?;
            if r.status & manifold_mysql_proto::consts::status::MORE_RESULTS_EXISTS == 0 {
                return Ok(r);
            }
        }
    }

    fn read_one_result(&mut self) -> Result<QueryResult, Error> {
        let (_, first) = self.read_packet()?;
        let proto = |e: manifold_mysql_proto::ProtoError| Error::Protocol(e.to_string());
        match first.first() {
            Some(0x00) => {
                let ok = OkPacket::decode(&first, 0).map_err(proto)?;
                Ok(QueryResult {
                    affected_rows: ok.affected_rows,
                    last_insert_id: ok.last_insert_id,
                    status: ok.status,
                    ..Default::default()
                })
            }
            Some(0xFF) => Err(Error::Server(ErrPacket::decode(&first).map_err(proto)?)),
            Some(_) => {
                let columns = manifold_mysql_proto::codec::Reader::new(&first)
                    .lenenc_int()
                    .map_err(proto)? as usize;
                for _ in 0..columns {
                    self.read_packet()?;
                }
                self.read_packet()?; // EOF after column definitions
                let mut rows = Vec::new();
                loop {
                    let (_, p) = self.read_packet()?;
                    if p.first() == Some(&0xFE) && p.len() < 9 {
                        let status = u16::from_le_bytes([p[3], p[4]]);
                        return Ok(QueryResult {
                            columns,
                            rows,
                            status,
                            ..Default::default()
                        });
                    }
                    if p.first() == Some(&0xFF) {
                        return Err(Error::Server(ErrPacket::decode(&p).map_err(proto)?));
                    }
                    let row = decode_text_row(&p, columns).map_err(proto)?;
                    rows.push(
                        row.into_iter()
                            .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))
                            .collect(),
                    );
                }
            }
            None => Err(Error::Protocol("empty packet".into())),
        }
    }

    /// Sends one command, then at once a `SELECT` of a marker only this call uses, and
    /// collects every packet that comes back before the marker's answer: the command's whole
    /// answer (none for commands the server does not answer), found without knowing its
    /// shape. An oracle independent of manifold's own idea of where answers end.
    pub fn exchange(&mut self, payload: &[u8]) -> Result<Vec<(u8, Vec<u8>)>, Error> {
        self.exchanges += 1;
        let marker = format!("<end of answer {}>", self.exchanges);
        self.send(0, payload)?;
        let mut sentinel = b"\x03SELECT '".to_vec();
        sentinel.extend_from_slice(marker.as_bytes());
        sentinel.push(b'\'');
        self.send(0, &sentinel)?;
        let mut packets = Vec::new();
        // The marker's answer: column count, its definition (naming the marker), EOF, the
        // row, EOF. Its definition is the first packet holding the marker.
        let holds_marker = |p: &[u8]| p.windows(marker.len()).any(|w| w == marker.as_bytes());
        while !packets
            .last()
            .is_some_and(|(_, p): &(u8, Vec<u8>)| holds_marker(p))
        {
            packets.push(self.read_packet()?);
        }
        packets.pop();
        if packets.pop() != Some((1, vec![1])) {
            return Err(Error::Protocol(format!(
                "the marker's answer has no column count before its definition: {packets:?}"
            )));
        }
        let rest = [
            self.read_packet()?,
            self.read_packet()?,
            self.read_packet()?,
        ];
        let is_eof = |p: &[u8]| p.first() == Some(&0xFE) && p.len() < 9;
        if !(is_eof(&rest[0].1) && holds_marker(&rest[1].1) && is_eof(&rest[2].1)) {
            return Err(Error::Protocol(format!(
                "the marker's answer is not EOF, its row, EOF: {rest:?}"
            )));
        }
        Ok(packets)
    }

    pub fn scalar(&mut self, sql: &str) -> Result<Option<String>, Error> {
        Ok(self.query(sql)?.scalar())
    }
}
