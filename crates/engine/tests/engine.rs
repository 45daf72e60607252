#![forbid(unsafe_code)]
//! Workers, listeners and shutdown, driven by std clients from the test thread.

use std::collections::HashSet;
use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use manifold_engine::{
    handler_factory, ConnectionHandler, EngineBuilder, EngineConfig, EngineError, HandlerFactory,
    ShutdownReport, WorkerContext,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::{any_port, cfg};

fn factory<H: ConnectionHandler>(make: fn() -> H) -> HandlerFactory {
    handler_factory(move |_ctx| make())
}

fn read_to_end(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        // An aborted session may close with RST if our bytes were unread; that is still "ended".
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("read failed: {e}"),
    }
    out
}

fn read_exact_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = vec![0; n];
    s.read_exact(&mut buf).unwrap();
    buf
}

/// Replies `[worker id, worker count, nodelay]` and closes.
struct WhoAmI;

impl ConnectionHandler for WhoAmI {
    fn handle(
        self: Rc<Self>,
        mut stream: tokio::net::TcpStream,
        _peer: SocketAddr,
        ctx: Rc<WorkerContext>,
    ) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let nodelay = u8::from(stream.nodelay().unwrap_or(false));
            let reply = [ctx.id() as u8, ctx.workers() as u8, nodelay];
            let _ = stream.write_all(&reply).await;
        })
    }
}

struct Echo;

impl ConnectionHandler for Echo {
    fn handle(
        self: Rc<Self>,
        mut stream: tokio::net::TcpStream,
        _peer: SocketAddr,
        _ctx: Rc<WorkerContext>,
    ) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let (mut r, mut w) = stream.split();
            let _ = tokio::io::copy(&mut r, &mut w).await;
        })
    }
}

/// Reads one command byte, acknowledges with `S`, then:
/// `w` works until the client sends another byte, then says `done`; `s` works 30 s;
/// `i` idles until drain and says `bye`; `p` panics. EOF ends the session.
struct Scripted;

impl ConnectionHandler for Scripted {
    fn handle(
        self: Rc<Self>,
        mut stream: tokio::net::TcpStream,
        _peer: SocketAddr,
        ctx: Rc<WorkerContext>,
    ) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let mut cmd = [0u8];
            if stream.read_exact(&mut cmd).await.is_err() {
                return;
            }
            assert!(cmd[0] != b'p', "scripted panic");
            stream.write_all(b"S").await.unwrap();
            match cmd[0] {
                b'w' => {
                    if stream.read_exact(&mut cmd).await.is_ok() {
                        stream.write_all(b"done").await.unwrap();
                    }
                }
                b's' => tokio::time::sleep(Duration::from_secs(30)).await,
                b'i' => {
                    tokio::select! {
                        () = ctx.drain().notified() => {
                            assert!(ctx.drain().is_draining());
                            stream.write_all(b"bye").await.unwrap();
                        }
                        () = tokio::time::sleep(Duration::from_secs(30)) => {}
                    }
                }
                other => panic!("unknown command {other}"),
            }
        })
    }
}

fn start_session(addr: SocketAddr, cmd: u8) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&[cmd]).unwrap();
    assert_eq!(read_exact_n(&mut s, 1), b"S");
    s
}

/// Lets a `w` session finish its work and returns what it said before closing.
fn finish_work(s: &mut TcpStream) -> Vec<u8> {
    s.write_all(b"x").unwrap();
    read_to_end(s)
}

/// True while the server keeps `s` open without sending anything.
fn still_open(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let open = matches!(s.peek(&mut [0u8; 1]), Err(e) if e.kind() == ErrorKind::WouldBlock);
    s.set_nonblocking(false).unwrap();
    open
}

/// Shuts `engine` down with a deadline far beyond any test, on another thread.
fn shutdown_in_background(
    engine: manifold_engine::Engine,
) -> std::thread::JoinHandle<ShutdownReport> {
    std::thread::spawn(move || engine.shutdown(Duration::from_secs(3600)))
}

/// Waits for a shutdown that has nothing left to wait for; a minute stands for "never".
fn finished(shutdown: std::thread::JoinHandle<ShutdownReport>, what: &str) -> ShutdownReport {
    let give_up = Instant::now() + Duration::from_secs(60);
    while !shutdown.is_finished() {
        assert!(Instant::now() < give_up, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
    shutdown.join().unwrap()
}

#[test]
fn port_zero_is_shared_by_all_workers() {
    let started = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = Arc::clone(&started);
    let engine = EngineBuilder::new(cfg(4))
        .listen(any_port(), factory(|| WhoAmI))
        .listen(any_port(), factory(|| WhoAmI))
        .on_worker_start(Arc::new(move |ctx: &Rc<WorkerContext>| {
            hook_seen.lock().unwrap().push(ctx.id());
        }))
        .start()
        .unwrap();

    assert_eq!(engine.threads(), 4);
    let addrs = engine.local_addrs();
    assert_eq!(addrs.len(), 2);
    assert!(addrs.iter().all(|a| a.port() != 0), "{addrs:?}");
    assert_ne!(addrs[0].port(), addrs[1].port());
    // start() returns only once every worker ran its hooks.
    let mut hooked = started.lock().unwrap().clone();
    hooked.sort_unstable();
    assert_eq!(hooked, vec![0, 1, 2, 3]);

    let mut seen = HashSet::new();
    for i in 0..200 {
        let addr = addrs[i % 2];
        let mut s = TcpStream::connect(addr).unwrap();
        let reply = read_to_end(&mut s);
        assert_eq!(reply.len(), 3, "connection {i} not served");
        assert!(reply[0] < 4, "worker id {}", reply[0]);
        assert_eq!(reply[1], 4, "worker count");
        assert_eq!(reply[2], 1, "TCP_NODELAY not set on accepted socket");
        seen.insert(reply[0]);
    }
    // Only possible if several workers each have a socket on the one port.
    assert!(seen.len() > 1, "all 200 connections served by {seen:?}");

    // Nothing in flight, so shutdown must not wait for its (hour-long) deadline.
    let report = finished(
        shutdown_in_background(engine),
        "shutdown waited for its deadline with nothing in flight",
    );
    assert_eq!(report, ShutdownReport::default());
}

#[test]
fn echo_is_served_concurrently() {
    let engine = EngineBuilder::new(cfg(2))
        .listen(any_port(), factory(|| Echo))
        .start()
        .unwrap();
    let addr = engine.local_addrs()[0];
    let clients: Vec<_> = (0..8)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                for round in 0..10 {
                    let msg = format!("client {c} round {round}");
                    s.write_all(msg.as_bytes()).unwrap();
                    assert_eq!(read_exact_n(&mut s, msg.len()), msg.as_bytes());
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    engine.shutdown(Duration::from_secs(2));
}

#[test]
fn graceful_shutdown_drains_then_aborts() {
    // One worker: each worker counts its sessions when it begins draining, and with two the
    // working session could finish on a worker that had not begun yet, so not count as drained.
    let engine = EngineBuilder::new(cfg(1))
        .listen(any_port(), factory(|| Scripted))
        .start()
        .unwrap();
    let addr = engine.local_addrs()[0];
    let mut working = start_session(addr, b'w');
    let mut idle = start_session(addr, b'i');
    let mut slow = start_session(addr, b's');

    // The deadline is far beyond the steps below, which each wait for an event.
    let shutdown = std::thread::spawn(move || engine.shutdown(Duration::from_secs(5)));
    assert_eq!(
        read_to_end(&mut idle),
        b"bye",
        "an idle session is told to go"
    );
    assert_eq!(
        finish_work(&mut working),
        b"done",
        "a working session may finish while draining"
    );
    assert!(
        still_open(&slow),
        "a session is not cut off before the deadline"
    );
    assert_eq!(
        shutdown.join().unwrap(),
        ShutdownReport {
            drained: 2,
            aborted: 1
        }
    );
    assert_eq!(read_to_end(&mut slow), b"", "cut off at the deadline");
    let refused = TcpStream::connect(addr).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn new_connections_are_refused_while_draining() {
    let engine = EngineBuilder::new(cfg(3))
        .listen(any_port(), factory(|| Scripted))
        .start()
        .unwrap();
    let addr = engine.local_addrs()[0];
    let mut busy = start_session(addr, b'w');

    let shutdown = shutdown_in_background(engine);
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect(addr) {
            // Raced the listener close; dropping it ends that session at once.
            Ok(s) => drop(s),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
                break;
            }
        }
        assert!(
            Instant::now() < give_up,
            "still accepting after shutdown began"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The busy session still runs (until it is told to finish), so the refusal came from
    // draining, not from exiting.
    assert!(
        !shutdown.is_finished(),
        "shutdown ended while a session was working"
    );
    assert_eq!(finish_work(&mut busy), b"done");
    let report = finished(shutdown, "shutdown went on after the last session finished");
    assert_eq!(report.aborted, 0);
    assert!(report.drained >= 1, "{report:?}");
}

#[test]
fn dropping_the_engine_aborts_sessions() {
    let engine = EngineBuilder::new(cfg(1))
        .listen(any_port(), factory(|| Scripted))
        .start()
        .unwrap();
    let mut slow = start_session(engine.local_addrs()[0], b's');
    drop(engine);
    // Closed at once: its 30 s of work would outlast read_to_end's 5 s read timeout.
    assert_eq!(read_to_end(&mut slow), b"");
}

#[test]
fn a_panicking_session_does_not_take_the_worker_down() {
    let engine = EngineBuilder::new(cfg(1))
        .listen(any_port(), factory(|| Scripted))
        .start()
        .unwrap();
    let addr = engine.local_addrs()[0];
    let mut doomed = TcpStream::connect(addr).unwrap();
    doomed.write_all(b"p").unwrap();
    assert_eq!(read_to_end(&mut doomed), b"");

    let mut working = start_session(addr, b'w');
    assert_eq!(finish_work(&mut working), b"done");
    // The panicked session was uncounted, so nothing is left to drain.
    assert_eq!(
        engine.shutdown(Duration::from_secs(2)),
        ShutdownReport::default()
    );
}

#[test]
fn bind_failure_is_returned_with_the_address() {
    // A socket without SO_REUSEPORT makes the port unshareable.
    let taken = std::net::TcpListener::bind(any_port()).unwrap();
    let addr = taken.local_addr().unwrap();
    let err = EngineBuilder::new(cfg(2))
        .listen(addr, factory(|| Echo))
        .start()
        .unwrap_err();
    match &err {
        EngineError::Bind {
            addr: a,
            op,
            source,
        } => {
            assert_eq!(*a, addr);
            assert_eq!(*op, "bind");
            assert_eq!(source.kind(), ErrorKind::AddrInUse);
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}

#[test]
fn duplicate_listen_address_is_refused() {
    let taken = std::net::TcpListener::bind(any_port()).unwrap();
    let addr = taken.local_addr().unwrap();
    drop(taken);
    let err = EngineBuilder::new(cfg(1))
        .listen(addr, factory(|| Echo))
        .listen(addr, factory(|| Echo))
        .start()
        .unwrap_err();
    assert!(
        matches!(err, EngineError::DuplicateListen(a) if a == addr),
        "{err:?}"
    );
}

#[test]
fn invalid_config_is_refused_by_start() {
    let bad = EngineConfig {
        blocking_max_threads: 0,
        ..cfg(1)
    };
    let err = EngineBuilder::new(bad).start().unwrap_err();
    assert!(matches!(&err, EngineError::Config(c) if c.key() == "blocking_max_threads"));
}

#[test]
fn a_failing_start_hook_fails_start() {
    let err = EngineBuilder::new(cfg(3))
        .listen(any_port(), factory(|| Echo))
        .on_worker_start(Arc::new(|ctx: &Rc<WorkerContext>| {
            assert!(ctx.id() != 1, "hook refuses worker 1");
        }))
        .start()
        .unwrap_err();
    match &err {
        EngineError::WorkerStart { worker, reason } => {
            assert_eq!(*worker, 1);
            assert!(reason.contains("hook refuses worker 1"), "{reason}");
        }
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn workers_can_be_pinned_and_use_the_blocking_pool() {
    let engine = EngineBuilder::new(EngineConfig {
        pin_threads: true,
        ..cfg(2)
    })
    .listen(any_port(), factory(|| Blocking))
    .start()
    .unwrap();
    let mut s = TcpStream::connect(engine.local_addrs()[0]).unwrap();
    assert_eq!(read_to_end(&mut s), b"42");
    engine.shutdown(Duration::from_secs(2));
}

/// Answers with a value computed on the blocking pool.
struct Blocking;

impl ConnectionHandler for Blocking {
    fn handle(
        self: Rc<Self>,
        mut stream: tokio::net::TcpStream,
        _peer: SocketAddr,
        ctx: Rc<WorkerContext>,
    ) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            let v = ctx.blocking().spawn(|| 6 * 7).await.unwrap();
            stream.write_all(v.to_string().as_bytes()).await.unwrap();
        })
    }
}

/// Says `+` when accepted; on `t`, answers the worker's memory trim count (u64 LE).
struct Trims;

impl ConnectionHandler for Trims {
    fn handle(
        self: Rc<Self>,
        mut stream: tokio::net::TcpStream,
        _peer: SocketAddr,
        ctx: Rc<WorkerContext>,
    ) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            if stream.write_all(b"+").await.is_err() {
                return;
            }
            let mut b = [0u8; 1];
            while let Ok(1) = stream.read(&mut b).await {
                if b[0] == b't' {
                    let _ = stream.write_all(&ctx.memory_trims().to_le_bytes()).await;
                }
            }
        })
    }
}

#[test]
fn free_memory_is_returned_once_a_crowd_of_connections_is_gone() {
    let engine = EngineBuilder::new(cfg(1))
        .listen(any_port(), factory(|| Trims))
        .start()
        .unwrap();
    let addr = engine.local_addrs()[0];
    let trims = || {
        let mut s = TcpStream::connect(addr).unwrap();
        assert_eq!(read_exact_n(&mut s, 1), b"+");
        s.write_all(b"t").unwrap();
        u64::from_le_bytes(read_exact_n(&mut s, 8).try_into().unwrap())
    };
    assert_eq!(trims(), 0);
    let crowd: Vec<TcpStream> = (0..1100)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            assert_eq!(read_exact_n(&mut s, 1), b"+");
            s
        })
        .collect();
    assert_eq!(trims(), 0, "no trim while the crowd is connected");
    drop(crowd);
    // The worker sees the closes in its own time.
    let deadline = Instant::now() + Duration::from_secs(10);
    while trims() == 0 {
        assert!(
            Instant::now() < deadline,
            "no trim after 1100 connections closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(trims(), 1, "one trim per crowd");
}
