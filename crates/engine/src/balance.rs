//! Keeps the workers' connection counts even.
//!
//! The kernel picks which worker's `SO_REUSEPORT` socket a new connection lands on by a hash of
//! its addresses, not by load: 64 connections over 2 workers split 32/32 only about one time in
//! ten, and 25/39 is as likely as 32/32 is. A connection stays on its worker for life, so a run
//! of equal clients leaves one worker with half again as much to do as the other. So after each
//! accept the worker compares its count with every worker's and, when another has fewer, hands
//! the socket to the one with the fewest (through its inbox, once per connection, never per
//! request).
//!
//! A worker's count is the connections it serves plus those on their way to it: a worker that
//! hands a connection over counts it on the receiver before sending, so two workers accepting
//! at once see each other's hand-offs. Counts are relaxed atomics on cache lines of their own,
//! changed once when a connection arrives and once when it ends.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// A connection accepted by one worker for another to serve.
#[derive(Debug)]
pub(crate) struct Handoff {
    /// Index of the front port (in `EngineBuilder::listen` order) it arrived on, so the
    /// receiver serves it with that port's handler.
    pub port: usize,
    pub stream: std::net::TcpStream,
    pub peer: SocketAddr,
}

/// One worker's connection count, alone on its cache line: written by the worker at every
/// connect and close, it must not slow the reads of its neighbours' counts.
#[repr(align(64))]
#[derive(Default)]
struct Count(AtomicUsize);

/// The workers' connection counts and inboxes, shared by all workers.
pub(crate) struct Balance {
    steer: bool,
    counts: Box<[Count]>,
    inboxes: Box<[UnboundedSender<Handoff>]>,
}

impl std::fmt::Debug for Balance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Balance")
            .field("steer", &self.steer)
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

impl Balance {
    /// Counts and inboxes for `workers` workers; the receivers go to the workers, in order.
    /// With `steer` false every connection stays where the kernel put it (counts are kept
    /// anyway, for [`crate::Engine::connections_per_worker`]).
    pub fn new(workers: usize, steer: bool) -> (Arc<Self>, Vec<UnboundedReceiver<Handoff>>) {
        let (inboxes, receivers) = (0..workers)
            .map(|_| unbounded_channel())
            .unzip::<_, _, Vec<_>, _>();
        let balance = Self {
            steer,
            counts: (0..workers).map(|_| Count::default()).collect(),
            inboxes: inboxes.into_boxed_slice(),
        };
        (Arc::new(balance), receivers)
    }

    pub fn workers(&self) -> usize {
        self.counts.len()
    }

    /// Counts a connection on `worker`.
    pub fn arrived(&self, worker: usize) {
        self.counts[worker].0.fetch_add(1, Relaxed);
    }

    /// Uncounts a connection of `worker`.
    pub fn left(&self, worker: usize) {
        self.counts[worker].0.fetch_sub(1, Relaxed);
    }

    /// Each worker's connections, served or on their way to it.
    pub fn counts(&self) -> Vec<usize> {
        self.counts.iter().map(|c| c.0.load(Relaxed)).collect()
    }

    /// Where a connection `worker` has just accepted should be served: `None` to keep it, else
    /// the worker with the fewest connections when that is fewer than `worker`'s own. Ties go
    /// to the first such worker after `worker`, so that no one worker is everyone's choice.
    pub fn steer(&self, worker: usize) -> Option<usize> {
        if !self.steer {
            return None;
        }
        let n = self.counts.len();
        let mut best = (self.counts[worker].0.load(Relaxed), worker);
        for k in 1..n {
            let w = (worker + k) % n;
            let count = self.counts[w].0.load(Relaxed);
            if count < best.0 {
                best = (count, w);
            }
        }
        (best.1 != worker).then_some(best.1)
    }

    /// Counts `handoff` on worker `to` and puts it in `to`'s inbox; gives it back (uncounted)
    /// if `to` no longer takes connections.
    pub fn send(&self, to: usize, handoff: Handoff) -> Result<(), Handoff> {
        self.arrived(to);
        self.inboxes[to].send(handoff).map_err(|back| {
            self.left(to);
            back.0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steers_to_the_worker_with_the_fewest_and_keeps_ties() {
        let (b, _rx) = Balance::new(3, true);
        // All equal: keep.
        assert_eq!(b.steer(0), None);
        assert_eq!(b.steer(2), None);
        b.arrived(0);
        // Worker 0 has more than 1 and 2: the first after it gets the connection.
        assert_eq!(b.steer(0), Some(1));
        // Worker 1 has fewest (tied with 2): it keeps its own.
        assert_eq!(b.steer(1), None);
        b.arrived(1);
        assert_eq!(b.steer(0), Some(2));
        assert_eq!(b.steer(1), Some(2));
        b.left(0);
        assert_eq!(b.steer(1), Some(2), "ties after worker 1 start at 2");
        assert_eq!(b.counts(), vec![0, 1, 0]);
    }

    #[test]
    fn never_steers_when_off() {
        let (b, _rx) = Balance::new(2, false);
        b.arrived(0);
        b.arrived(0);
        assert_eq!(b.steer(0), None);
        assert_eq!(b.counts(), vec![2, 0]);
    }

    #[test]
    fn a_closed_inbox_gives_the_connection_back_uncounted() {
        let (b, mut rx) = Balance::new(2, true);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, peer) = listener.accept().unwrap();
        rx[1].close();
        let back = b
            .send(
                1,
                Handoff {
                    port: 0,
                    stream,
                    peer,
                },
            )
            .expect_err("worker 1's inbox is closed");
        assert_eq!(back.peer, peer);
        assert_eq!(b.counts(), vec![0, 0]);

        let (stream, peer) = (back.stream, back.peer);
        b.send(
            0,
            Handoff {
                port: 3,
                stream,
                peer,
            },
        )
        .unwrap();
        assert_eq!(b.counts(), vec![1, 0]);
        let got = rx[0].try_recv().unwrap();
        assert_eq!((got.port, got.peer), (3, peer));
    }
}
