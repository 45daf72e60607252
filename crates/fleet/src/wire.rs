//! The messages instances exchange, and their framing: a 4-byte big-endian length, then a
//! kind byte and the fields (numbers big-endian, strings as a 4-byte length and bytes).
//! No I/O here.

use crate::errors::PeerError;

/// Which backend connection a session holds: cluster, node, server thread id (0: none).
pub type Backend = (u32, u32, u32);

/// What one instance asks another about the sessions it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Mark session `id`'s statement killed (the first step of `KILL [QUERY]`), if `user`
    /// owns it (`None`: the admin port, which may kill any).
    Mark { id: u32, user: Option<String> },
    /// Whether session `id` still runs the statement marked as `seq` on `backend`.
    Still { id: u32, seq: u64, backend: Backend },
    /// End session `id`'s client connection (`KILL CONNECTION`).
    Disconnect { id: u32 },
    /// The sessions `user` owns (`None`: every session).
    Processes { user: Option<String> },
    /// A message published on another instance (a Redis `PUBLISH` or keyspace
    /// notification), for this one's subscribers. Not answered.
    Publish { channel: Vec<u8>, payload: Vec<u8> },
}

/// What a [`Request::Mark`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marked {
    /// No session has that id.
    Unknown,
    /// Another user's session.
    NotOwner,
    /// Marked; the statement that was running, if any: its backend connection and sequence.
    Running(Option<(Backend, u64)>),
}

/// One row of a process list, as an instance reports its sessions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessRow {
    pub id: u32,
    pub user: String,
    /// The client's `ip:port`.
    pub host: String,
    pub db: Option<String>,
    pub command: String,
    pub time_ms: u64,
    pub state: String,
    pub info: Option<String>,
    /// Whether `info` is a prepared statement's execution.
    pub executes: bool,
}

/// The answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Marked(Marked),
    Bool(bool),
    Processes(Vec<ProcessRow>),
    /// The instance could not answer (it is stopping).
    Failed(String),
}

/// Builds one frame.
#[derive(Default)]
#[must_use]
pub struct Out(Vec<u8>);

impl Out {
    pub fn new(kind: u8) -> Out {
        Out(vec![0, 0, 0, 0, kind])
    }
    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn bytes(mut self, v: &[u8]) -> Self {
        self = self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
        self
    }
    pub fn str(self, v: &str) -> Self {
        self.bytes(v.as_bytes())
    }
    pub fn opt(self, v: Option<&str>) -> Self {
        match v {
            Some(s) => self.u8(1).str(s),
            None => self.u8(0),
        }
    }
    /// The frame, its length filled in.
    pub fn finish(mut self) -> Vec<u8> {
        let len = (self.0.len() - 4) as u32;
        self.0[..4].copy_from_slice(&len.to_be_bytes());
        self.0
    }
}

/// Reads one frame's body (after its length).
pub struct In<'a>(&'a [u8]);

impl<'a> In<'a> {
    pub fn new(body: &'a [u8]) -> In<'a> {
        In(body)
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], PeerError> {
        if self.0.len() < n {
            return Err(PeerError::Protocol("a message ends early".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    pub fn u8(&mut self) -> Result<u8, PeerError> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32, PeerError> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub fn u64(&mut self) -> Result<u64, PeerError> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    pub fn bytes(&mut self) -> Result<&'a [u8], PeerError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub fn str(&mut self) -> Result<String, PeerError> {
        String::from_utf8(self.bytes()?.to_vec())
            .map_err(|_| PeerError::Protocol("a string is not UTF-8".into()))
    }
    pub fn opt(&mut self) -> Result<Option<String>, PeerError> {
        match self.u8()? {
            0 => Ok(None),
            _ => self.str().map(Some),
        }
    }
    pub fn end(&self) -> Result<(), PeerError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(PeerError::Protocol(
                "a message has bytes past its end".into(),
            ))
        }
    }
}

mod kind {
    pub const MARK: u8 = 1;
    pub const STILL: u8 = 2;
    pub const DISCONNECT: u8 = 3;
    pub const PROCESSES: u8 = 4;
    pub const PUBLISH: u8 = 5;
    pub const MARKED: u8 = 101;
    pub const BOOL: u8 = 102;
    pub const ROWS: u8 = 103;
    pub const FAILED: u8 = 104;
}

impl Request {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Request::Mark { id, user } => Out::new(kind::MARK).u32(*id).opt(user.as_deref()),
            Request::Still { id, seq, backend } => Out::new(kind::STILL)
                .u32(*id)
                .u64(*seq)
                .u32(backend.0)
                .u32(backend.1)
                .u32(backend.2),
            Request::Disconnect { id } => Out::new(kind::DISCONNECT).u32(*id),
            Request::Processes { user } => Out::new(kind::PROCESSES).opt(user.as_deref()),
            Request::Publish { channel, payload } => {
                Out::new(kind::PUBLISH).bytes(channel).bytes(payload)
            }
        }
        .finish()
    }

    pub fn decode(body: &[u8]) -> Result<Request, PeerError> {
        let mut r = In::new(body);
        let req = match r.u8()? {
            kind::MARK => Request::Mark {
                id: r.u32()?,
                user: r.opt()?,
            },
            kind::STILL => Request::Still {
                id: r.u32()?,
                seq: r.u64()?,
                backend: (r.u32()?, r.u32()?, r.u32()?),
            },
            kind::DISCONNECT => Request::Disconnect { id: r.u32()? },
            kind::PROCESSES => Request::Processes { user: r.opt()? },
            kind::PUBLISH => Request::Publish {
                channel: r.bytes()?.to_vec(),
                payload: r.bytes()?.to_vec(),
            },
            k => return Err(PeerError::Protocol(format!("unknown request kind {k}"))),
        };
        r.end()?;
        Ok(req)
    }
}

impl Response {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Response::Marked(Marked::Unknown) => Out::new(kind::MARKED).u8(0),
            Response::Marked(Marked::NotOwner) => Out::new(kind::MARKED).u8(1),
            Response::Marked(Marked::Running(None)) => Out::new(kind::MARKED).u8(2),
            Response::Marked(Marked::Running(Some((b, seq)))) => Out::new(kind::MARKED)
                .u8(3)
                .u32(b.0)
                .u32(b.1)
                .u32(b.2)
                .u64(*seq),
            Response::Bool(v) => Out::new(kind::BOOL).u8(u8::from(*v)),
            Response::Processes(rows) => {
                let mut out = Out::new(kind::ROWS).u32(rows.len() as u32);
                for p in rows {
                    out = out
                        .u32(p.id)
                        .str(&p.user)
                        .str(&p.host)
                        .opt(p.db.as_deref())
                        .str(&p.command)
                        .u64(p.time_ms)
                        .str(&p.state)
                        .opt(p.info.as_deref())
                        .u8(u8::from(p.executes));
                }
                out
            }
            Response::Failed(why) => Out::new(kind::FAILED).str(why),
        }
        .finish()
    }

    pub fn decode(body: &[u8]) -> Result<Response, PeerError> {
        let mut r = In::new(body);
        let resp = match r.u8()? {
            kind::MARKED => Response::Marked(match r.u8()? {
                0 => Marked::Unknown,
                1 => Marked::NotOwner,
                2 => Marked::Running(None),
                _ => Marked::Running(Some(((r.u32()?, r.u32()?, r.u32()?), r.u64()?))),
            }),
            kind::BOOL => Response::Bool(r.u8()? != 0),
            kind::ROWS => {
                let n = r.u32()? as usize;
                // Each row takes at least 30 bytes: a count past what the frame holds is a lie.
                let mut rows = Vec::with_capacity(n.min(body.len() / 30));
                for _ in 0..n {
                    rows.push(ProcessRow {
                        id: r.u32()?,
                        user: r.str()?,
                        host: r.str()?,
                        db: r.opt()?,
                        command: r.str()?,
                        time_ms: r.u64()?,
                        state: r.str()?,
                        info: r.opt()?,
                        executes: r.u8()? != 0,
                    });
                }
                Response::Processes(rows)
            }
            kind::FAILED => Response::Failed(r.str()?),
            k => return Err(PeerError::Protocol(format!("unknown answer kind {k}"))),
        };
        r.end()?;
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(frame: &[u8]) -> &[u8] {
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        &frame[4..]
    }

    #[test]
    fn every_message_round_trips() {
        let requests = [
            Request::Mark {
                id: 7,
                user: Some("app".into()),
            },
            Request::Mark { id: 8, user: None },
            Request::Still {
                id: 9,
                seq: 1 << 40,
                backend: (1, 2, 3),
            },
            Request::Disconnect { id: u32::MAX },
            Request::Processes { user: None },
            Request::Processes {
                user: Some("é".into()),
            },
            Request::Publish {
                channel: b"ch".to_vec(),
                payload: b"\r\n\0".to_vec(),
            },
        ];
        for r in requests {
            assert_eq!(Request::decode(body(&r.encode())).unwrap(), r);
        }
        let responses = [
            Response::Marked(Marked::Unknown),
            Response::Marked(Marked::NotOwner),
            Response::Marked(Marked::Running(None)),
            Response::Marked(Marked::Running(Some(((0, 1, 99), 5)))),
            Response::Bool(true),
            Response::Processes(vec![
                ProcessRow {
                    id: 1,
                    user: "app".into(),
                    host: "127.0.0.1:5000".into(),
                    db: Some("db".into()),
                    command: "Query".into(),
                    time_ms: 1500,
                    state: "executing".into(),
                    info: Some("SELECT 1".into()),
                    executes: true,
                },
                ProcessRow::default(),
            ]),
            Response::Failed("stopping".into()),
        ];
        for r in responses {
            assert_eq!(Response::decode(body(&r.encode())).unwrap(), r);
        }
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        for bad in [
            &b""[..],
            &[1],
            &[1, 0, 0],
            &[99],
            &[4, 1, 0, 0, 0, 9, b'a'],
            &[103, 255, 255, 255, 255],
            &[3, 0, 0, 0, 1, 0],
        ] {
            assert!(Request::decode(bad).is_err() || Response::decode(bad).is_err());
            let _ = Request::decode(bad);
            let _ = Response::decode(bad);
        }
    }
}
