use std::net::SocketAddr;
use std::sync::OnceLock;

use manifold::config::{user_with_password, Config};
use manifold::Server;
use manifold_testkit::Topology;
use manifold_tests::Client;

pub const USER: &str = "app";
pub const PASSWORD: &str = "app";

/// The binary's shared topology, with the test user created once.
pub fn topology() -> &'static Topology {
    static READY: OnceLock<()> = OnceLock::new();
    let t = Topology::shared();
    READY.get_or_init(|| t.create_user(USER, PASSWORD).expect("create test user"));
    t
}

/// A configuration for a manifold in front of the shared primary, on a free port.
pub fn config() -> Config {
    let t = topology();
    // What manifold generates (TLS certificate, RSA key), shared by the tests' servers.
    let mut cfg = Config {
        data_dir: Some(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("manifold-data")),
        ..Config::default()
    };
    // Servers run side by side here: each its own admin port and HTTP.
    cfg.admin.listen = "127.0.0.1:0".into();
    cfg.admin.http_listen = "127.0.0.1:0".into();
    cfg.backend.primary = t.primary.addr().to_string();
    cfg.mysql.listen = "127.0.0.1:0".into();
    cfg.engine.threads = 2;
    cfg.pool.min_idle = 1;
    cfg.users.push(user_with_password(USER, PASSWORD));
    // Alone: the binary's servers run side by side, and a fleet shares runtime changes (a
    // test's SET GLOBAL would reach the others). The fleet's tests name a registry each.
    cfg.fleet.table = String::new();
    cfg
}

pub fn start(cfg: &Config) -> Server {
    manifold::start(cfg).expect("manifold starts")
}

/// A fresh schema on the primary.
pub fn schema(name: &str) -> String {
    let name = format!("it_{name}");
    topology().create_schema(&name).expect("create schema");
    name
}

pub fn client(addr: SocketAddr, db: Option<&str>) -> Client {
    Client::connect(addr, USER, PASSWORD, db).expect("login through manifold")
}
