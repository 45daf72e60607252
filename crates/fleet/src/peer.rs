//! Links between instances: one TCP connection per exchange (kills and process lists are
//! rare), each side proving the fleet's secret with an HMAC over both sides' fresh nonces
//! before any request is read.
//!
//! Every message after the handshake carries a MAC under a key of that link alone.
//!
//! What an unauthenticated connection may cost is bounded: at most [`MAX_LINKS`] links at
//! once, [`HANDSHAKE_TIMEOUT`] to prove the secret, a proof of fixed size. An authenticated
//! link asks one thing at a time, requests of at most [`MAX_REQUEST`] bytes, and is closed
//! after [`IDLE_TIMEOUT`] without one.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::errors::PeerError;
use crate::hmac::{hmac_sha256, same};
use crate::wire::{In, Out, Request, Response};
use crate::Local;

pub const MAX_LINKS: usize = 64;
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// A proven peer's request: a published message is the largest.
pub const MAX_REQUEST: usize = 16 << 20;
/// An answer (a process list of many sessions) may be long; it comes from a proven peer.
pub const MAX_ANSWER: usize = 256 << 20;
/// How long a request may wait for its answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

const HELLO: u8 = 200;
const PROOF: u8 = 201;
const ACCEPTED: u8 = 202;

/// Reads one frame's body, refusing one longer than `max`.
async fn read_frame(stream: &mut TcpStream, max: usize) -> Result<Vec<u8>, PeerError> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.map_err(io)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(PeerError::Protocol(format!(
            "a message of {len} bytes (at most {max})"
        )));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await.map_err(io)?;
    Ok(body)
}

/// The next request, or `None` when the link was closed before one began.
async fn next_frame(stream: &mut TcpStream) -> Result<Option<Vec<u8>>, PeerError> {
    let mut first = [0u8; 1];
    if stream.read(&mut first).await.map_err(io)? == 0 {
        return Ok(None);
    }
    let mut rest = [0u8; 3];
    stream.read_exact(&mut rest).await.map_err(io)?;
    let len = u32::from_be_bytes([first[0], rest[0], rest[1], rest[2]]) as usize;
    if len > MAX_REQUEST {
        return Err(PeerError::Protocol(format!(
            "a request of {len} bytes (at most {MAX_REQUEST})"
        )));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await.map_err(io)?;
    Ok(Some(body))
}

#[allow(clippy::needless_pass_by_value)] // used as map_err(io)
fn io(e: std::io::Error) -> PeerError {
    PeerError::Protocol(e.to_string())
}

/// A side's proof: the secret's MAC over both instances' ids and both nonces.
fn proof(secret: &[u8], side: &[u8], ids: (u16, u16), server: &[u8], client: &[u8]) -> [u8; 32] {
    let (s, c) = (ids.0.to_be_bytes(), ids.1.to_be_bytes());
    hmac_sha256(secret, &[b"manifold-fleet/", side, &s, &c, server, client])
}

/// Every message after the handshake carries a MAC under a key of that link alone, over its
/// direction, its number on the link and its bytes: a message cannot be forged, replayed,
/// reordered or moved to another link by whoever relays the handshake.
struct Seal {
    key: [u8; 32],
    mine: u8,
    sent: u64,
    received: u64,
}

const TAG: usize = 32;

impl Seal {
    fn new(secret: &[u8], server: &[u8], client: &[u8], mine: u8) -> Seal {
        Seal {
            key: hmac_sha256(secret, &[b"manifold-fleet/link", server, client]),
            mine,
            sent: 0,
            received: 0,
        }
    }

    fn tag(&self, side: u8, n: u64, body: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.key, &[&[side], &n.to_be_bytes(), body])
    }

    /// `frame` (length, body) with its MAC appended and the length set again.
    fn seal(&mut self, mut frame: Vec<u8>) -> Vec<u8> {
        let tag = self.tag(self.mine, self.sent, &frame[4..]);
        self.sent += 1;
        frame.extend_from_slice(&tag);
        let len = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        frame
    }

    /// The body of a received frame, its MAC checked and taken off.
    fn open(&mut self, mut body: Vec<u8>) -> Result<Vec<u8>, PeerError> {
        if body.len() < TAG {
            return Err(PeerError::Protocol("a message without its MAC".into()));
        }
        let at = body.len() - TAG;
        let theirs = if self.mine == b'c' { b's' } else { b'c' };
        if !same(&body[at..], &self.tag(theirs, self.received, &body[..at])) {
            return Err(PeerError::Protocol("a message with a wrong MAC".into()));
        }
        self.received += 1;
        body.truncate(at);
        Ok(body)
    }
}

/// What the serving side needs: this instance's id, the secret, and the sessions.
pub struct Serving {
    pub instance: Box<dyn Fn() -> u16 + Send + Sync>,
    pub secret: Box<dyn Fn() -> Option<Arc<[u8]>> + Send + Sync>,
    pub local: Weak<dyn Local>,
    /// Delivers a message published on another instance to this one's subscribers.
    pub publish: Box<crate::Deliver>,
}

/// Accepts links until the task is dropped.
pub async fn serve(listener: TcpListener, serving: Arc<Serving>) {
    let links = Arc::new(Semaphore::new(MAX_LINKS));
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Ok(permit) = links.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "fleet link refused: {MAX_LINKS} links are open");
            continue;
        };
        let serving = serving.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_link(stream, &serving).await {
                tracing::debug!(%peer, "fleet link closed: {e}");
            }
            drop(permit);
        });
    }
}

async fn serve_link(mut stream: TcpStream, serving: &Serving) -> Result<(), PeerError> {
    let _ = stream.set_nodelay(true);
    let Some(secret) = (serving.secret)() else {
        return Err(PeerError::NotJoined("no secret yet".into()));
    };
    let nonce: [u8; 32] = rand::random();
    let me = (serving.instance)();
    let hello = Out::new(HELLO).u32(u32::from(me)).bytes(&nonce).finish();
    let handshake = async {
        stream.write_all(&hello).await.map_err(io)?;
        let body = read_frame(&mut stream, 128).await?;
        let mut r = In::new(&body);
        if r.u8()? != PROOF {
            return Err(PeerError::Protocol("expected a proof".into()));
        }
        let their_id = r.u32()? as u16;
        let theirs = r.bytes()?.to_vec();
        let mac = r.bytes()?;
        r.end()?;
        let ids = (me, their_id);
        if !same(mac, &proof(&secret, b"client", ids, &nonce, &theirs)) {
            return Err(PeerError::Protocol(
                "a peer without the fleet's secret".into(),
            ));
        }
        let accepted = Out::new(ACCEPTED)
            .bytes(&proof(&secret, b"server", ids, &nonce, &theirs))
            .finish();
        stream.write_all(&accepted).await.map_err(io)?;
        Ok(Seal::new(&secret, &nonce, &theirs, b's'))
    };
    let mut seal = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| PeerError::Protocol("no proof within the handshake timeout".into()))??;
    loop {
        // A link closed by its opener between requests is the usual end.
        let body = match tokio::time::timeout(IDLE_TIMEOUT, next_frame(&mut stream)).await {
            Err(_) | Ok(Ok(None)) => return Ok(()),
            Ok(Ok(Some(body))) => body,
            Ok(Err(e)) => return Err(e),
        };
        let request = Request::decode(&seal.open(body)?)?;
        if let Request::Publish { channel, payload } = &request {
            (serving.publish)(channel, payload);
            continue;
        }
        let answer = match serving.local.upgrade() {
            Some(local) => answer(&*local, request),
            None => Response::Failed("the manifold is stopping".into()),
        };
        stream
            .write_all(&seal.seal(answer.encode()))
            .await
            .map_err(io)?;
    }
}

fn answer(local: &dyn Local, request: Request) -> Response {
    match request {
        Request::Mark { id, user } => Response::Marked(local.mark(id, user.as_deref())),
        Request::Still { id, seq, backend } => {
            Response::Bool(local.still_running(id, seq, backend))
        }
        Request::Disconnect { id } => Response::Bool(local.disconnect(id)),
        Request::Processes { user } => Response::Processes(local.processes(user.as_deref())),
        Request::Publish { .. } => Response::Failed("a published message is not answered".into()),
    }
}

/// An authenticated link to another instance.
pub struct Link {
    stream: TcpStream,
    seal: Seal,
    instance: u16,
    addr: String,
    /// A call failed: what the stream holds next is unknown, so it asks nothing more.
    broken: bool,
}

impl Link {
    /// Connects (as instance `me`) to instance `instance` at `addr` and proves the secret
    /// both ways.
    pub async fn open(
        me: u16,
        instance: u16,
        addr: &str,
        secret: &[u8],
    ) -> Result<Link, PeerError> {
        let unreachable = |reason: String| PeerError::Unreachable {
            instance,
            addr: addr.to_owned(),
            reason,
        };
        let open = async {
            let mut stream = TcpStream::connect(addr)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            let _ = stream.set_nodelay(true);
            let body = read_frame(&mut stream, 128)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            let mut r = In::new(&body);
            if r.u8()? != HELLO {
                return Err(PeerError::Protocol("expected a hello".into()));
            }
            let theirs = r.u32()?;
            let server_nonce = r.bytes()?.to_vec();
            r.end()?;
            if theirs != u32::from(instance) {
                return Err(unreachable(format!("manifold {theirs} answers there now")));
            }
            let nonce: [u8; 32] = rand::random();
            let ids = (instance, me);
            let proof_msg = Out::new(PROOF)
                .u32(u32::from(me))
                .bytes(&nonce)
                .bytes(&proof(secret, b"client", ids, &server_nonce, &nonce))
                .finish();
            stream
                .write_all(&proof_msg)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            let refused = || PeerError::Refused {
                instance,
                addr: addr.to_owned(),
            };
            let body = read_frame(&mut stream, 128).await.map_err(|_| refused())?;
            let mut r = In::new(&body);
            if r.u8()? != ACCEPTED {
                return Err(refused());
            }
            let mac = r.bytes()?;
            if !same(mac, &proof(secret, b"server", ids, &server_nonce, &nonce)) {
                return Err(refused());
            }
            Ok((stream, Seal::new(secret, &server_nonce, &nonce, b'c')))
        };
        let (stream, seal) = tokio::time::timeout(HANDSHAKE_TIMEOUT, open)
            .await
            .map_err(|_| unreachable("no handshake within 2s".into()))??;
        Ok(Link {
            stream,
            seal,
            instance,
            addr: addr.to_owned(),
            broken: false,
        })
    }

    /// Whether the other side still holds the link open: it never writes on a link that
    /// only sends, so anything readable (its close, a reset) means it is gone.
    pub fn is_open(&self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    /// Sends what is not answered (a published message).
    pub async fn send(&mut self, request: &Request) -> Result<(), PeerError> {
        if self.broken {
            return Err(PeerError::Unreachable {
                instance: self.instance,
                addr: self.addr.clone(),
                reason: "an earlier message on this link failed".into(),
            });
        }
        let frame = self.seal.seal(request.encode());
        match tokio::time::timeout(CALL_TIMEOUT, self.stream.write_all(&frame)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                self.broken = true;
                Err(io(e))
            }
            Err(_) => {
                self.broken = true;
                Err(PeerError::Protocol("a message not taken within 5s".into()))
            }
        }
    }

    /// Asks one thing and waits for the answer.
    pub async fn call(&mut self, request: &Request) -> Result<Response, PeerError> {
        if self.broken {
            return Err(PeerError::Unreachable {
                instance: self.instance,
                addr: self.addr.clone(),
                reason: "an earlier question on this link failed".into(),
            });
        }
        // Cleared when the answer is read whole.
        self.broken = true;
        let exchange = async {
            let frame = self.seal.seal(request.encode());
            self.stream.write_all(&frame).await.map_err(io)?;
            let body = read_frame(&mut self.stream, MAX_ANSWER).await?;
            Response::decode(&self.seal.open(body)?)
        };
        let answer = tokio::time::timeout(CALL_TIMEOUT, exchange).await;
        if matches!(answer, Ok(Ok(_))) {
            self.broken = false;
        }
        match answer {
            Ok(Ok(Response::Failed(why))) => Err(PeerError::Unreachable {
                instance: self.instance,
                addr: self.addr.clone(),
                reason: why,
            }),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(PeerError::Unreachable {
                instance: self.instance,
                addr: self.addr.clone(),
                reason: e.to_string(),
            }),
            Err(_) => Err(PeerError::Unreachable {
                instance: self.instance,
                addr: self.addr.clone(),
                reason: "no answer within 5s".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Marked, ProcessRow};

    struct Sessions;

    impl Local for Sessions {
        fn mark(&self, id: u32, user: Option<&str>) -> Marked {
            match (id, user) {
                (1, Some("app") | None) => Marked::Running(Some(((0, 1, 42), 7))),
                (1, _) => Marked::NotOwner,
                _ => Marked::Unknown,
            }
        }
        fn still_running(&self, id: u32, seq: u64, backend: crate::Backend) -> bool {
            id == 1 && seq == 7 && backend == (0, 1, 42)
        }
        fn disconnect(&self, id: u32) -> bool {
            id == 1
        }
        fn processes(&self, user: Option<&str>) -> Vec<ProcessRow> {
            vec![ProcessRow {
                id: 1,
                user: user.unwrap_or("app").into(),
                ..ProcessRow::default()
            }]
        }
    }

    async fn server(secret: &'static [u8]) -> (String, Arc<dyn Local>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let local: Arc<dyn Local> = Arc::new(Sessions);
        let serving = Arc::new(Serving {
            instance: Box::new(|| 4),
            secret: Box::new(move || Some(Arc::from(secret))),
            local: Arc::downgrade(&local),
            publish: Box::new(|_, _| {}),
        });
        tokio::spawn(serve(listener, serving));
        (addr, local)
    }

    #[tokio::test]
    async fn a_link_with_the_secret_asks_and_is_answered() {
        let (addr, _local) = server(b"the fleet's secret").await;
        let mut link = Link::open(1, 4, &addr, b"the fleet's secret")
            .await
            .unwrap();
        let marked = link
            .call(&Request::Mark {
                id: 1,
                user: Some("app".into()),
            })
            .await
            .unwrap();
        assert_eq!(
            marked,
            Response::Marked(Marked::Running(Some(((0, 1, 42), 7))))
        );
        let other = link
            .call(&Request::Mark {
                id: 1,
                user: Some("eve".into()),
            })
            .await
            .unwrap();
        assert_eq!(other, Response::Marked(Marked::NotOwner));
        let still = link
            .call(&Request::Still {
                id: 1,
                seq: 7,
                backend: (0, 1, 42),
            })
            .await
            .unwrap();
        assert_eq!(still, Response::Bool(true));
        let Response::Processes(rows) =
            link.call(&Request::Processes { user: None }).await.unwrap()
        else {
            panic!("not a process list")
        };
        assert_eq!(rows.len(), 1);
    }

    #[tokio::test]
    async fn a_message_with_a_wrong_or_replayed_mac_ends_the_link() {
        let (addr, _local) = server(b"the fleet's secret").await;
        let mut link = Link::open(1, 4, &addr, b"the fleet's secret")
            .await
            .unwrap();
        // A replayed first message (its MAC is for message 0, not 1) is refused.
        let first = link.seal.seal(Request::Disconnect { id: 1 }.encode());
        link.stream.write_all(&first).await.unwrap();
        let body = read_frame(&mut link.stream, MAX_ANSWER).await.unwrap();
        assert_eq!(
            Response::decode(&link.seal.open(body).unwrap()).unwrap(),
            Response::Bool(true)
        );
        link.stream.write_all(&first).await.unwrap();
        let mut rest = Vec::new();
        link.stream.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "a replayed message was answered");
        // One bit changed.
        let mut link = Link::open(1, 4, &addr, b"the fleet's secret")
            .await
            .unwrap();
        let mut frame = link.seal.seal(Request::Disconnect { id: 1 }.encode());
        frame[6] ^= 1;
        link.stream.write_all(&frame).await.unwrap();
        let mut rest = Vec::new();
        link.stream.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "a changed message was answered");
    }

    #[tokio::test]
    async fn a_link_the_other_side_closed_is_seen_closed_before_a_send() {
        let (addr, _local) = server(b"the fleet's secret").await;
        let mut link = Link::open(1, 4, &addr, b"the fleet's secret")
            .await
            .unwrap();
        assert!(link.is_open());
        // A message without its MAC: the other side closes the link.
        link.stream.write_all(&[0, 0, 0, 1, 9]).await.unwrap();
        for _ in 0..500 {
            if !link.is_open() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("a link the other side closed looked open");
    }

    #[tokio::test]
    async fn a_wrong_secret_or_instance_is_refused_both_ways() {
        let (addr, _local) = server(b"the fleet's secret").await;
        let Err(e) = Link::open(1, 4, &addr, b"another secret!!").await else {
            panic!("a wrong secret was accepted")
        };
        assert!(matches!(e, PeerError::Refused { .. }), "{e}");
        let Err(e) = Link::open(1, 5, &addr, b"the fleet's secret").await else {
            panic!("instance 4 answered as 5")
        };
        assert!(
            e.to_string().contains("manifold 4 answers there now"),
            "{e}"
        );
        // A client that sends garbage instead of a proof gets nothing and is closed.
        let mut raw = TcpStream::connect(&addr).await.unwrap();
        let _hello = read_frame(&mut raw, 128).await.unwrap();
        raw.write_all(
            &Out::new(PROOF)
                .u32(0)
                .bytes(&[0; 32])
                .bytes(&[0; 32])
                .finish(),
        )
        .await
        .unwrap();
        let mut rest = Vec::new();
        raw.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "an unproven client was answered");
        // An oversized first message is refused without reading it.
        let mut raw = TcpStream::connect(&addr).await.unwrap();
        let _hello = read_frame(&mut raw, 128).await.unwrap();
        raw.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
        let mut rest = Vec::new();
        raw.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
    }
}
