#![forbid(unsafe_code)]
//! Connections spread evenly over workers, whichever worker's socket the kernel picks.

use std::future::Future;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use manifold_engine::{
    handler_factory, ConnectionHandler, Engine, EngineBuilder, EngineConfig, ShutdownReport,
    WorkerContext,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::{any_port, cfg};

/// Replies `[worker id, port tag, connections handed to this worker so far (max 255)]` and
/// holds the connection until the client closes it or
/// the worker drains.
struct Hold {
    tag: u8,
}

impl ConnectionHandler for Hold {
    fn handle(
        self: Rc<Self>,
        mut stream: tokio::net::TcpStream,
        _peer: SocketAddr,
        ctx: Rc<WorkerContext>,
    ) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let handed_in = u8::try_from(ctx.handed_in_connections()).unwrap_or(u8::MAX);
            if stream
                .write_all(&[ctx.id() as u8, self.tag, handed_in])
                .await
                .is_err()
            {
                return;
            }
            let mut buf = [0u8; 16];
            tokio::select! {
                _ = stream.read(&mut buf) => {}
                () = ctx.drain().notified() => {}
            }
        })
    }
}

fn start(threads: usize, ports: &[u8], balance: bool) -> Engine {
    let mut builder = EngineBuilder::new(EngineConfig {
        balance_connections: balance,
        ..cfg(threads)
    });
    for &tag in ports {
        builder = builder.listen(any_port(), handler_factory(move |_ctx| Hold { tag }));
    }
    builder.start().unwrap()
}

/// Connects and waits for the handler's reply, so that the connection is being served (and
/// counted on its worker) when this returns.
fn open(addr: SocketAddr) -> (TcpStream, u8, u8, u8) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reply = [0u8; 3];
    s.read_exact(&mut reply)
        .unwrap_or_else(|e| panic!("connection to {addr} not served: {e}"));
    (s, reply[0], reply[1], reply[2])
}

fn per_worker(workers: &[u8], threads: usize) -> Vec<usize> {
    let mut counts = vec![0; threads];
    for &w in workers {
        counts[usize::from(w)] += 1;
    }
    counts
}

fn spread(counts: &[usize]) -> usize {
    counts.iter().max().unwrap() - counts.iter().min().unwrap()
}

/// Waits until the engine's per-worker counts equal `want` (closes are seen by the workers a
/// moment after the client's).
fn wait_for_counts(engine: &Engine, want: &[usize]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = engine.connections_per_worker();
        if now == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "workers hold {now:?} connections, expected {want:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn connections_spread_evenly_over_workers() {
    // The kernel's SO_REUSEPORT hash alone puts 64 connections on 4 sockets 16 each about
    // once in 500 runs.
    let engine = start(4, b"a", true);
    let addr = engine.local_addrs()[0];
    let conns: Vec<_> = (0..64).map(|_| open(addr)).collect();
    let counts = per_worker(&conns.iter().map(|c| c.1).collect::<Vec<_>>(), 4);
    assert!(spread(&counts) <= 1, "connections per worker: {counts:?}");
    assert_eq!(engine.connections_per_worker(), counts);
    drop(conns);
    wait_for_counts(&engine, &[0, 0, 0, 0]);
    assert_eq!(
        engine.shutdown(Duration::from_secs(5)),
        ShutdownReport::default()
    );
}

#[test]
fn new_connections_go_to_the_worker_whose_connections_ended() {
    let engine = start(2, b"a", true);
    let addr = engine.local_addrs()[0];
    let conns: Vec<_> = (0..40).map(|_| open(addr)).collect();
    let (on_0, kept): (Vec<_>, Vec<_>) = conns.into_iter().partition(|c| c.1 == 0);
    assert_eq!((on_0.len(), kept.len()), (20, 20));
    drop(on_0);
    wait_for_counts(&engine, &[0, 20]);

    // Whichever socket the kernel picks, worker 0 has fewer until it is even again.
    let refill: Vec<_> = (0..20).map(|_| open(addr)).collect();
    let workers: Vec<_> = refill.iter().map(|c| c.1).collect();
    assert_eq!(
        workers,
        vec![0; 20],
        "new connections served by workers {workers:?}"
    );
    assert_eq!(engine.connections_per_worker(), vec![20, 20]);
    drop((kept, refill));
    assert_eq!(engine.shutdown(Duration::from_secs(5)).aborted, 0);
}

#[test]
fn a_handed_over_connection_is_served_by_its_own_ports_handler() {
    let engine = start(3, b"ab", true);
    let addrs = engine.local_addrs();
    let mut workers = Vec::new();
    let mut conns = Vec::new();
    for i in 0..60 {
        let port = i % 2;
        let (s, worker, tag, _) = open(addrs[port]);
        assert_eq!(tag, b"ab"[port], "connection {i} to port {port}");
        workers.push(worker);
        conns.push(s);
    }
    // Both ports count towards one figure per worker.
    let counts = per_worker(&workers, 3);
    assert!(spread(&counts) <= 1, "connections per worker: {counts:?}");
    assert_eq!(engine.connections_per_worker(), counts);
    // Every connection, handed over or not, is counted by the worker serving it and drained
    // by it at shutdown.
    assert_eq!(
        engine.shutdown(Duration::from_secs(5)),
        ShutdownReport {
            drained: 60,
            aborted: 0
        }
    );
    for mut s in conns {
        let mut rest = Vec::new();
        match s.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty()),
            Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset),
        }
    }
}

#[test]
fn with_balancing_off_every_worker_keeps_what_it_accepts() {
    let engine = start(2, b"a", false);
    let addr = engine.local_addrs()[0];
    let conns: Vec<_> = (0..40).map(|_| open(addr)).collect();
    let handed: Vec<_> = conns.iter().map(|c| c.3).collect();
    assert_eq!(
        handed,
        vec![0; 40],
        "connections handed over with balancing off"
    );
    // Counted all the same.
    let counts = per_worker(&conns.iter().map(|c| c.1).collect::<Vec<_>>(), 2);
    assert_eq!(engine.connections_per_worker(), counts);
    drop(conns);
    wait_for_counts(&engine, &[0, 0]);
}

#[test]
fn uneven_accepts_are_handed_over() {
    // The counterpart of the test above: on 2 workers the kernel gives 40 connections to
    // worker 0 and 1 alternately with odds of 2^-39, so some are handed over.
    let engine = start(2, b"a", true);
    let addr = engine.local_addrs()[0];
    let conns: Vec<_> = (0..40).map(|_| open(addr)).collect();
    assert!(
        conns.iter().any(|c| c.3 > 0),
        "no connection was handed over"
    );
}
