//! The transaction context: what a data command runs with ([`Cx`]), the batch's
//! transaction and the buffer its reply goes to, bounded by the client's output limit.
//! Batches are run by [`crate::exec`]; the families in [`crate::cmd`] apply their commands
//! on a `Cx`.

use std::ops::ControlFlow;

use manifold_backend::Param;
use manifold_mysql_proto::packets::Value;
use manifold_redis_proto::{Protocol, Reply};

use super::{StoreError, Tx};

/// The client a batch's replies are for, as the context needs it (the client registry's
/// handle, [`crate::kill::ClientHandle`], is one): what its buffers hold, published for the
/// clients' memory budget, and whether it was killed.
pub trait ReplyClient {
    /// The bytes the client's buffers hold, as last published.
    fn memory(&self) -> u64;
    /// Publishes that the client's buffers hold `bytes`.
    fn note_memory(&self, bytes: u64);
    /// The client was killed (`CLIENT KILL`, evicted by the memory budget).
    fn is_killed(&self) -> bool;
    /// Its id (the writer of its batch's changes, for `CLIENT TRACKING ... NOLOOP`).
    fn id(&self) -> u64;
}

/// Most keys in one batched statement.
pub const RUN_MAX: usize = 128;

/// What a command runs with: the batch's transaction, and the buffer its reply goes to.
pub struct Cx<'s> {
    pub tx: Tx<'s>,
    pub out: Vec<u8>,
    pub proto: Protocol,
    /// The client's `SELECT`ed database.
    pub db: u8,
    /// Bytes `out` may hold: what the client's output buffer limit leaves. Past it replies
    /// stop growing ([`Reply::limited`]) and the connection is closed once the batch ends.
    pub out_limit: usize,
    /// The client the replies are for (`None`: replies shared by several clients).
    pub client: Option<ReplyOwner<'s>>,
}

/// The client a batch's replies are for: while they grow, what they hold is published on
/// its handle, so the clients' memory budget (`max_memory_clients`) counts a reply under
/// way and not only one waiting to be written; and a client evicted (or killed) meanwhile
/// stops its replies there, as it is closed without them.
pub struct ReplyOwner<'s> {
    handle: &'s dyn ReplyClient,
    /// What the client held before the batch (its request and reply buffers).
    base: u64,
    /// The reply buffer's capacity last published.
    noted: usize,
}

/// The batch's replies are the connection's to count again once it ends: what the client
/// held before is published back (the connection publishes what it holds next).
impl Drop for ReplyOwner<'_> {
    fn drop(&mut self) {
        if self.noted != 0 {
            self.handle.note_memory(self.base);
        }
    }
}

impl<'s> ReplyOwner<'s> {
    pub fn new(handle: &'s dyn ReplyClient) -> Self {
        Self {
            handle,
            base: handle.memory(),
            noted: 0,
        }
    }

    /// Publishes what the client holds with a reply buffer of `capacity` bytes, when that
    /// changed (a plain store, at most once per doubling of the buffer); `false` once the
    /// client was killed.
    fn note(&mut self, capacity: usize) -> bool {
        if capacity != self.noted {
            self.noted = capacity;
            self.handle.note_memory(self.base + capacity as u64);
        }
        !self.handle.is_killed()
    }
}

impl Cx<'_> {
    pub fn reply(&mut self) -> Reply<'_> {
        Reply::limited(&mut self.out, self.proto, self.out_limit)
    }

    /// The replies passed the client's output limit, or the client was killed (evicted by
    /// the memory budget, `CLIENT KILL`): whatever follows is dropped, so a command may stop
    /// producing it.
    pub fn over_limit(&self) -> bool {
        self.out.len() > self.out_limit
            || self.client.as_ref().is_some_and(|c| c.handle.is_killed())
    }

    /// Publishes what the replies hold now ([`ReplyOwner`]).
    pub fn note_memory(&mut self) {
        if let Some(c) = self.client.as_mut() {
            c.note(self.out.capacity());
        }
    }

    /// The batch's clock, in Unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.tx.now_ms
    }

    /// Replies with one aggregate (array, map, set) made of the rows of `sql`, written as
    /// they are read: `element` appends a row's elements and says how many units of the
    /// header it adds (0 for a row it skips); `header` then writes the aggregate's header for
    /// that many units in front of them (one move of this reply's bytes). Once the replies
    /// pass the client's output limit the rest of the rows are dropped unread by `element`
    /// (the client is closed without them), so a collection of any size costs about the
    /// output limit plus one row, never the whole result set. Returns the units counted.
    pub async fn stream_reply(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        header: impl FnOnce(&mut Reply<'_>, usize),
        element: impl FnMut(&mut Reply<'_>, Vec<Value>) -> usize,
    ) -> Result<usize, StoreError> {
        self.stream(sql, params, header, element).await
    }

    /// The rows of `sql` for a reply that writes each of them at least once, every column a
    /// bulk string, plus `row_extra` bytes per row (say a RESP3 pair's header): read until
    /// what those bulks take in the reply (their real RESP size, never more) passes what the
    /// client's output limit leaves, so they never cost much more than the limit. `false`
    /// with them when that stopped the read: then writing each row once passes the limit
    /// (the client is closed without that reply); the caller must not stand other rows in
    /// for the ones left unread.
    pub async fn rows_for_reply(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        row_extra: usize,
    ) -> Result<(Vec<Vec<Value>>, bool), StoreError> {
        let budget = self.out_limit.saturating_sub(self.out.len());
        let (mut rows, mut held, mut whole) = (Vec::new(), 0usize, true);
        self.tx
            .exec_each(sql, params, |row| {
                held += row_extra
                    + row
                        .iter()
                        .map(|v| match v {
                            Value::Bytes(b) => bulk_size(b.len()),
                            // A null is `_\r\n` in RESP3.
                            _ => 3,
                        })
                        .sum::<usize>();
                rows.push(row);
                if held > budget {
                    whole = false;
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .await?;
        Ok((rows, whole))
    }

    async fn stream(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        header: impl FnOnce(&mut Reply<'_>, usize),
        mut element: impl FnMut(&mut Reply<'_>, Vec<Value>) -> usize,
    ) -> Result<usize, StoreError> {
        let at = self.out.len();
        let (out, proto, limit) = (&mut self.out, self.proto, self.out_limit);
        let client = &mut self.client;
        let (mut units, mut killed) = (0usize, false);
        self.tx
            .exec_each(sql, params, |row| {
                let mut reply = Reply::limited(out, proto, limit);
                units += element(&mut reply, row);
                let over = reply.over_limit();
                killed = killed || client.as_mut().is_some_and(|c| !c.note(out.capacity()));
                if over || killed {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .await?;
        if killed {
            // The client goes without this reply: the replies before it stay whole.
            self.out.truncate(at);
        } else if self.out.len() <= self.out_limit {
            let mut head = Vec::with_capacity(24);
            header(&mut Reply::new(&mut head, proto), units);
            self.out.splice(at..at, head);
        }
        Ok(units)
    }
}

/// The bytes of a bulk string of `len` bytes in a reply: `$<len>\r\n<bytes>\r\n`.
pub fn bulk_size(len: usize) -> usize {
    let mut digits = 1;
    let mut rest = len / 10;
    while rest > 0 {
        digits += 1;
        rest /= 10;
    }
    len + digits + 5
}
