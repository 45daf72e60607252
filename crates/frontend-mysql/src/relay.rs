//! Forwarding one command to a backend and streaming the answer back.
//!
//! The command's packets go out exactly as the client sent them, and the answer's bytes go
//! back as read — one write to the client per read from the backend — while a
//! [`ResponseTracker`] watches packet boundaries to know where the answer ends. Sequence ids
//! need no rewriting because client and backend count from the same command packet.

use manifold_backend::io::{PacketIo, ReadError};
use manifold_backend::BackendConn;
use manifold_mysql_proto::{Progress, ResponseKind, ResponseTracker};
use tokio::io::AsyncWriteExt;

#[derive(Debug)]
pub(crate) enum RelayError {
    /// The client went away or broke the protocol; the backend connection's state is unknown.
    Client(String),
    /// The backend connection failed. `err_seq` is where an ERR packet can still be injected
    /// cleanly, when the client stream is at a packet boundary.
    Backend {
        message: String,
        err_seq: Option<u8>,
    },
}

pub(crate) struct Relayed {
    pub last_status: u16,
    pub saw_error: bool,
}

/// Sends the command occupying the first `raw_len` bytes of `client.rbuf` to `backend` and
/// relays the answer. `first_seq` is the sequence id of the answer's first packet.
pub(crate) async fn forward(
    client: &mut PacketIo,
    backend: &mut BackendConn,
    raw_len: usize,
    kind: ResponseKind,
    deprecate_eof: bool,
    first_seq: u8,
    max_packet: usize,
) -> Result<Relayed, RelayError> {
    let sent = backend.io.stream.write_all(&client.rbuf[..raw_len]).await;
    client.consume(raw_len);
    if let Err(e) = sent {
        return Err(RelayError::Backend {
            message: format!("sending to backend: {e}"),
            err_seq: Some(first_seq),
        });
    }
    let mut tracker = ResponseTracker::new(kind, deprecate_eof, first_seq);
    if kind == ResponseKind::None {
        return Ok(Relayed {
            last_status: 0,
            saw_error: false,
        });
    }
    loop {
        if backend.io.rbuf.is_empty() {
            if let Err(e) = backend.io.fill().await {
                let message = match e {
                    ReadError::Closed => {
                        "backend closed the connection during the query".to_owned()
                    }
                    e => format!("reading from backend: {e}"),
                };
                return Err(RelayError::Backend {
                    message,
                    err_seq: tracker.at_boundary().then(|| tracker.next_seq()),
                });
            }
        }
        let (n, progress) = tracker
            .feed(&backend.io.rbuf)
            .map_err(|e| RelayError::Backend {
                message: format!("backend answer does not follow the protocol: {e}"),
                err_seq: None,
            })?;
        if n > 0 {
            client
                .stream
                .write_all(&backend.io.rbuf[..n])
                .await
                .map_err(|e| RelayError::Client(format!("writing to client: {e}")))?;
            backend.io.consume(n);
        }
        match progress {
            Progress::More => {}
            Progress::Done => break,
            Progress::LocalInfile => {
                client
                    .stream
                    .flush()
                    .await
                    .map_err(|e| RelayError::Client(format!("writing to client: {e}")))?;
                let next = relay_infile(client, backend, max_packet).await?;
                tracker.resume_after_infile(next);
            }
        }
    }
    client
        .stream
        .flush()
        .await
        .map_err(|e| RelayError::Client(format!("writing to client: {e}")))?;
    if !backend.io.rbuf.is_empty() {
        return Err(RelayError::Backend {
            message: "backend sent bytes past the end of its answer".into(),
            err_seq: None,
        });
    }
    Ok(Relayed {
        last_status: tracker.last_status(),
        saw_error: tracker.saw_error(),
    })
}

/// `LOAD DATA LOCAL INFILE`: the client's file packets go to the backend up to the empty packet
/// that ends them. Returns the sequence id the server's answer starts with.
async fn relay_infile(
    client: &mut PacketIo,
    backend: &mut BackendConn,
    max_packet: usize,
) -> Result<u8, RelayError> {
    loop {
        let p = client
            .read_packet(max_packet)
            .await
            .map_err(|e| RelayError::Client(format!("reading LOCAL INFILE data: {e}")))?;
        let sent = backend.io.stream.write_all(&client.rbuf[..p.raw_len]).await;
        client.consume(p.raw_len);
        sent.map_err(|e| RelayError::Backend {
            message: format!("sending LOCAL INFILE data to backend: {e}"),
            err_seq: None,
        })?;
        if p.payload_len == 0 {
            return Ok(p.last_seq.wrapping_add(1));
        }
    }
}
