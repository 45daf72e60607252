//! What the source tests share: a source reader (and heartbeat writer) run on their own
//! thread as the service runs them, over a test kit topology of either flavour.

#![allow(dead_code)] // Each test file uses its own part.

use std::sync::Arc;
use std::time::Duration;

use manifold_backend::{BackendTarget, ConnKey, TlsMode};
use manifold_binlog::gtid::{Dialect, GtidState};
use manifold_binlog::spill::Budget;
use manifold_binlog::txn::SourceTxn;
use manifold_cdc::source::{self, SourceMsg, SourceTarget};
use manifold_cdc::{BinlogConfig, BinlogShared};
use manifold_testkit::{Flavor, Topology, TopologyConfig};

pub const USER: &str = "cdc_source";
pub const WAIT: Duration = Duration::from_secs(30);

/// A topology of `flavor` with `replicas` and the test user.
pub fn start_topology(flavor: Flavor, replicas: usize) -> Topology {
    let t = Topology::start(TopologyConfig {
        replicas,
        tls: false,
        flavor,
        ..TopologyConfig::default()
    })
    .unwrap_or_else(|e| {
        panic!(
            "start {flavor:?} (install mariadb-server, or run scripts/setup-mysql for MySQL): {e}"
        )
    });
    t.create_user(USER, USER).expect("create the test user");
    t
}

/// The cluster `cluster` of `t`, its primary first.
pub fn target_named(t: &Topology, cluster: &str) -> SourceTarget {
    let addr = t.primary.addr().to_string();
    let replicas: Vec<manifold_router::ReplicaEntry> = t
        .replicas
        .iter()
        .map(|r| manifold_router::ReplicaEntry::Addr(r.addr().to_string()))
        .collect();
    let topology =
        manifold_router::Topology::new(&addr, &replicas, manifold_router::RoutingConfig::default())
            .expect("topology");
    let targets = topology
        .nodes
        .iter()
        .map(|n| BackendTarget {
            addr: n.addr.clone(),
            tls_mode: TlsMode::Disabled,
            tls: None,
            max_packet: 1 << 30,
        })
        .collect();
    SourceTarget {
        cluster: cluster.into(),
        topology: Arc::new(topology),
        targets,
    }
}

pub fn target(t: &Topology) -> SourceTarget {
    target_named(t, "east")
}

pub fn login() -> ConnKey {
    ConnKey::new(USER, USER, 0, 45, false)
}

/// A source reader (and, when asked, a heartbeat writer) on their own thread and runtime, as
/// the service runs them; messages come out on a plain channel the test waits on.
pub struct Running {
    pub msgs: std::sync::mpsc::Receiver<SourceMsg>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub shared: Arc<BinlogShared>,
    _spill: tempfile::TempDir,
}

impl Running {
    /// A reader of a MariaDB fleet.
    pub fn start(
        target: SourceTarget,
        server_id: u32,
        heartbeat_every: Option<Duration>,
    ) -> Running {
        Running::start_in(Dialect::MariaDb, target, server_id, heartbeat_every)
    }

    /// A reader of a fleet whose global binlog is in `dialect`.
    pub fn start_in(
        dialect: Dialect,
        target: SourceTarget,
        server_id: u32,
        heartbeat_every: Option<Duration>,
    ) -> Running {
        let spill = tempfile::tempdir().expect("spill dir");
        let budget = Budget::new(64 << 20, spill.path().to_path_buf());
        let (shared, _requests) = BinlogShared::with_dialect(
            BinlogConfig::default(),
            vec![target.cluster.clone()],
            dialect,
        );
        let (out, msgs) = std::sync::mpsc::channel();
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let reader_shared = shared.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let (tx, mut rx) = tokio::sync::mpsc::channel(16);
                let table = ("manifold".to_owned(), "binlog_heartbeat".to_owned());
                if let Some(every) = heartbeat_every {
                    tokio::task::spawn_local(manifold_cdc::heartbeat::run(
                        target.clone(),
                        login(),
                        table.clone(),
                        server_id,
                        every,
                        stop_rx.clone(),
                    ));
                }
                tokio::task::spawn_local(source::run(
                    0,
                    target,
                    login(),
                    GtidState::default(),
                    table,
                    budget,
                    server_id,
                    tx,
                    reader_shared,
                    Duration::from_millis(300),
                ));
                let mut stop_rx = stop_rx;
                loop {
                    tokio::select! {
                        msg = rx.recv() => match msg {
                            Some((index, msg)) => {
                                assert_eq!(index, 0);
                                if out.send(msg).is_err() {
                                    return;
                                }
                            }
                            None => return,
                        },
                        _ = stop_rx.changed() => return,
                    }
                }
            });
        });
        Running {
            msgs,
            stop,
            thread: Some(thread),
            shared,
            _spill: spill,
        }
    }

    pub fn next(&self) -> SourceMsg {
        self.msgs
            .recv_timeout(WAIT)
            .expect("a message from the source reader")
    }

    pub fn connected(&self) -> String {
        match self.next() {
            SourceMsg::Connected { addr, .. } => addr,
            SourceMsg::Lost { error } => panic!("source lost: {error}"),
            SourceMsg::Txn(t) => panic!("transaction {} before connecting", t.gtid),
        }
    }

    /// The next transaction that is not a heartbeat's.
    pub fn txn(&self) -> SourceTxn {
        loop {
            match self.next() {
                SourceMsg::Txn(t) if t.heartbeat => {}
                SourceMsg::Txn(t) => return t,
                other => panic!("expected a transaction, got {other:?}"),
            }
        }
    }

    /// Refused attempts (or none), then the reconnection.
    pub fn lost_and_back_after_refusals(&self) {
        for _ in 0..100 {
            match self.next() {
                SourceMsg::Connected { .. } => return,
                SourceMsg::Lost { .. } => {}
                SourceMsg::Txn(t) => panic!("transaction {} while disconnected", t.gtid),
            }
        }
        panic!("no reconnection after 100 attempts");
    }

    /// A loss, then the reconnection.
    pub fn lost_and_back(&self) -> String {
        let error = match self.next() {
            SourceMsg::Lost { error } => error,
            other => panic!("expected the loss, got {other:?}"),
        };
        // A restarting server refuses a few attempts first.
        for _ in 0..100 {
            match self.next() {
                SourceMsg::Connected { .. } => return error,
                SourceMsg::Lost { .. } => {}
                SourceMsg::Txn(t) => panic!("transaction {} while disconnected", t.gtid),
            }
        }
        panic!("no reconnection after 100 attempts (first loss: {error})");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Inserts rows `from..to` into `src_t.t` on the primary, one stamped statement each (stamp
/// `1000 + id`).
pub fn insert(t: &Topology, from: u32, to: u32) {
    use std::fmt::Write as _;
    let mut sql = String::new();
    for i in from..to {
        let hlc = 1000 + i;
        writeln!(
            sql,
            "/*manifold:hlc={hlc}*/ INSERT INTO src_t.t VALUES ({i}, {i});"
        )
        .expect("to a String");
    }
    // The client strips comments unless told not to.
    let out = t
        .client_command(&t.primary)
        .args(["--comments", "-e", &sql])
        .output()
        .expect("run the client");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The id of the newest binlog dump thread on `server` (a replica's own is not one).
pub fn dump_thread(t: &Topology, server: &manifold_testkit::Server) -> String {
    t.sql_value(
        server,
        "SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%' \
         ORDER BY id DESC LIMIT 1",
    )
    .expect("dump thread")
}
