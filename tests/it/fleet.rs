//! Several manifolds in front of one primary as one fleet: the registry lists them, their
//! connection ids carry their instance, and `KILL`, `KILL SESSION` and the process list of a
//! user with `process` reach sessions on any instance; an instance that leaves is gone at
//! once, and one without the fleet's secret is not obeyed.
//!
//! Each test has a registry table of its own: the binary's other servers (each alone in
//! front of the shared topology, in the default table) are not in its fleet.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use manifold::config::{user_with_password, Config};
use manifold::Server;
use manifold_tests::Client;

use crate::harness::{client, config, start, topology, PASSWORD, USER};

const WATCHER: &str = "fleet_watcher";
const OTHER: &str = "fleet_other";

fn fleet_config(table: &str) -> Config {
    let mut cfg = config();
    cfg.fleet.table = table.into();
    cfg.fleet.heartbeat_interval = Duration::from_millis(200);
    cfg.fleet.member_timeout = Duration::from_secs(2);
    let mut watcher = user_with_password(WATCHER, PASSWORD);
    watcher.backend_user = Some(USER.into());
    watcher.process = true;
    cfg.users.push(watcher);
    let mut other = user_with_password(OTHER, PASSWORD);
    other.backend_user = Some(USER.into());
    cfg.users.push(other);
    cfg
}

fn admin(server: &Server) -> Client {
    Client::connect(
        server.admin_addr().expect("admin port"),
        "admin",
        "admin",
        None,
    )
    .expect("admin login")
}

fn login(addr: SocketAddr, user: &str) -> Client {
    Client::connect(addr, user, PASSWORD, None).expect("login through manifold")
}

/// `SHOW MANIFOLDS` on `server`: (id, me) of each live instance.
fn members(server: &Server) -> Vec<(u32, bool)> {
    admin(server)
        .query("SHOW MANIFOLDS")
        .expect("SHOW MANIFOLDS")
        .rows
        .iter()
        .map(|r| {
            let id = r[0].as_deref().unwrap().parse().unwrap();
            (id, r[2].as_deref() == Some("yes"))
        })
        .collect()
}

/// Waits (bounded) until every server lists `n` live instances.
fn until_fleet_of(servers: &[&Server], n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for s in servers {
        loop {
            let listed = members(s);
            if listed.len() == n {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "a fleet of {n} was never listed: {listed:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The instance id `server` registered as.
fn instance(server: &Server) -> u32 {
    members(server)
        .into_iter()
        .find_map(|(id, me)| me.then_some(id))
        .expect("the server lists itself")
}

fn connection_id(c: &mut Client) -> u32 {
    c.scalar("SELECT CONNECTION_ID()")
        .unwrap()
        .unwrap()
        .parse()
        .unwrap()
}

/// Runs `SELECT SLEEP(60)` on `c` on a thread; its error code when it ends.
fn sleeping(mut c: Client) -> std::thread::JoinHandle<Option<u16>> {
    std::thread::spawn(move || c.query("SELECT SLEEP(60)").err().and_then(|e| e.code()))
}

/// Waits (bounded) until the backend runs `SLEEP(60)` for the test's user.
fn until_sleeping() {
    let t = topology();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let n = t
            .sql_value(
                &t.primary,
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(60)'",
            )
            .unwrap();
        if n != "0" {
            return;
        }
        assert!(Instant::now() < deadline, "the statement never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_fleet_lists_itself_and_kills_and_lists_sessions_across_instances() {
    let cfg = fleet_config("it_fleet_a.fleet");
    let (s1, s2, s3) = (start(&cfg), start(&cfg), start(&cfg));
    until_fleet_of(&[&s1, &s2, &s3], 3);
    let ids = [instance(&s1), instance(&s2), instance(&s3)];
    assert!(
        ids.iter().all(|&i| i != 0) && ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "{ids:?}"
    );
    // Connection ids carry their instance.
    let mut victim = client(s1.mysql_addr(), None);
    let victim_id = connection_id(&mut victim);
    assert_eq!(victim_id >> 22, ids[0]);
    let mut killer = client(s2.mysql_addr(), None);
    assert_eq!(connection_id(&mut killer) >> 22, ids[1]);

    // KILL QUERY through another instance interrupts exactly that statement.
    let run = sleeping(victim);
    until_sleeping();
    // Who may see every session sees the fleet's, in both forms of the list.
    let mut watcher = login(s3.mysql_addr(), WATCHER);
    let watcher_id = connection_id(&mut watcher);
    for sql in [
        "SHOW FULL PROCESSLIST",
        "SELECT ID, USER, INFO FROM information_schema.PROCESSLIST",
    ] {
        let rows = watcher.query(sql).unwrap().rows;
        let row = rows
            .iter()
            .find(|r| r[0].as_deref() == Some(&victim_id.to_string()))
            .unwrap_or_else(|| panic!("{sql} through another instance lacks the victim: {rows:?}"));
        assert_eq!(row[1].as_deref(), Some(USER));
        assert!(
            rows.iter()
                .any(|r| r[0].as_deref() == Some(&watcher_id.to_string())),
            "{rows:?}"
        );
    }
    // A user without `process` sees its own sessions here only.
    let mut other = login(s2.mysql_addr(), OTHER);
    let rows = other.query("SHOW PROCESSLIST").unwrap().rows;
    assert_eq!(rows.len(), 1, "{rows:?}");
    // Another user may not kill it, wherever it runs.
    let denied = other.query(&format!("KILL QUERY {victim_id}")).unwrap_err();
    assert_eq!(denied.code(), Some(1095), "{denied}");
    killer
        .query(&format!("KILL QUERY {victim_id}"))
        .expect("KILL QUERY across instances");
    assert_eq!(
        run.join().unwrap(),
        Some(1317),
        "the statement was interrupted"
    );

    // KILL CONNECTION through another instance ends the client's connection there.
    let mut victim = client(s1.mysql_addr(), None);
    let victim_id = connection_id(&mut victim);
    killer
        .query(&format!("KILL {victim_id}"))
        .expect("KILL across instances");
    assert!(victim.closed_within(Duration::from_secs(20)));
    // The admin port's KILL SESSION too.
    let mut victim = client(s1.mysql_addr(), None);
    let victim_id = connection_id(&mut victim);
    admin(&s3)
        .query(&format!("KILL SESSION {victim_id}"))
        .expect("KILL SESSION across instances");
    assert!(victim.closed_within(Duration::from_secs(20)));
    // Ids of no session, on a live instance and on none.
    for id in [victim_id + 4096, 1000 << 22 | 5] {
        let e = killer.query(&format!("KILL {id}")).unwrap_err();
        assert_eq!(e.code(), Some(1094), "{e}");
        let e = admin(&s2).query(&format!("KILL SESSION {id}")).unwrap_err();
        assert_eq!(e.code(), Some(1094), "{e}");
    }

    // An instance that stops leaves the registry: the others list it no more.
    s3.shutdown(Duration::from_secs(5));
    until_fleet_of(&[&s1, &s2], 2);
    // A restarted one rejoins.
    let s3 = start(&cfg);
    until_fleet_of(&[&s1, &s2, &s3], 3);
}

#[test]
fn an_instance_without_the_fleets_secret_is_not_obeyed() {
    let cfg = fleet_config("it_fleet_b.fleet");
    let s1 = start(&cfg);
    let mut stranger_cfg = cfg.clone();
    stranger_cfg.fleet.secret = Some("not the secret of this fleet".into());
    let s2 = start(&stranger_cfg);
    until_fleet_of(&[&s1, &s2], 2);
    let mut victim = client(s1.mysql_addr(), None);
    let victim_id = connection_id(&mut victim);
    let mut stranger = client(s2.mysql_addr(), None);
    let e = stranger
        .query(&format!("KILL {victim_id}"))
        .expect_err("a kill from an instance without the secret");
    assert_eq!(e.code(), Some(7720), "{e}");
    assert!(
        e.to_string().contains("does not share this fleet's secret"),
        "{e}"
    );
    // The victim lives on.
    assert_eq!(connection_id(&mut victim), victim_id);
    let e = admin(&s1)
        .query(&format!("KILL SESSION {}", connection_id(&mut stranger)))
        .expect_err("the other way round");
    assert_eq!(e.code(), Some(7720), "{e}");
}

/// `SHOW VARIABLES LIKE 'name'` on `server`'s admin port: the value.
fn variable(server: &Server, name: &str) -> String {
    admin(server)
        .query(&format!("SHOW VARIABLES LIKE '{name}'"))
        .unwrap()
        .rows[0][1]
        .clone()
        .unwrap()
}

/// The shared configuration's version `server` runs (its `SHOW MANIFOLDS` row).
fn config_version(server: &Server) -> String {
    admin(server)
        .query("SHOW MANIFOLDS")
        .unwrap()
        .rows
        .into_iter()
        .find(|r| r[2].as_deref() == Some("yes"))
        .and_then(|r| r[11].clone())
        .unwrap()
}

/// Waits (bounded) until `f` holds.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn runtime_changes_on_one_instance_reach_every_instance_and_a_restarted_one() {
    let cfg = fleet_config("it_fleet_c.fleet");
    let (s1, s2) = (start(&cfg), start(&cfg));
    until_fleet_of(&[&s1, &s2], 2);
    admin(&s1)
        .query("SET GLOBAL pool.max_size = 77")
        .expect("SET GLOBAL");
    until("s2 runs the change", || {
        variable(&s2, "pool.max_size") == "77"
    });
    // A node taken offline on one is offline on every instance; and back.
    let primary = topology().primary.addr().to_string();
    let state = |s: &Server| {
        admin(s)
            .query("SHOW BACKENDS")
            .unwrap()
            .rows
            .iter()
            .find(|r| r[1].as_deref() == Some(primary.as_str()))
            .and_then(|r| r[3].clone())
            .unwrap()
    };
    admin(&s2)
        .query(&format!("BACKEND OFFLINE '{primary}'"))
        .expect("BACKEND OFFLINE");
    // Applied in full (the version recorded) before the next change is made there.
    until("s1 has the node offline", || {
        state(&s1) == "offline" && config_version(&s1) == config_version(&s2)
    });
    admin(&s1)
        .query(&format!("BACKEND ONLINE '{primary}'"))
        .expect("BACKEND ONLINE");
    until("s2 has the node back", || state(&s2) != "offline");
    // A restarted instance runs the fleet's version from the start, not its file's.
    let s3 = start(&cfg);
    assert_eq!(variable(&s3, "pool.max_size"), "77");
    // Every instance lists the version it runs.
    until("every instance runs the same version", || {
        let rows = admin(&s3).query("SHOW MANIFOLDS").unwrap().rows;
        rows.len() == 3
            && rows
                .iter()
                .all(|r| r[11] == rows[0][11] && r[11].as_deref() != Some("0"))
    });
    // A version an instance cannot apply is named on every instance's row.
    let t = topology();
    let latest = t
        .sql_value(
            &t.primary,
            "SELECT MAX(version) FROM it_fleet_c.fleet_config",
        )
        .unwrap();
    let next: u64 = latest.parse::<u64>().unwrap() + 1;
    t.sql(
        &t.primary,
        &format!(
            "INSERT INTO it_fleet_c.fleet_config VALUES ({next}, 999, NOW(6), 'a test', 'set pool.max_size=0\n')"
        ),
    )
    .unwrap();
    until("each instance says it could not apply it", || {
        let rows = admin(&s1).query("SHOW MANIFOLDS").unwrap().rows;
        rows.len() == 3
            && rows.iter().all(|r| {
                r[12].as_deref().is_some_and(|f| {
                    f.contains(&format!("version {next}")) && f.contains("pool.max_size")
                })
            })
    });
    assert_eq!(
        variable(&s2, "pool.max_size"),
        "77",
        "nothing of it applied"
    );
}

#[test]
fn of_two_concurrent_changes_the_second_is_refused_and_the_first_applied() {
    let mut cfg = fleet_config("it_fleet_d.fleet");
    // No heartbeat between the two changes: the second instance has not seen the first.
    cfg.fleet.heartbeat_interval = Duration::from_secs(60);
    cfg.fleet.member_timeout = Duration::from_secs(120);
    let (s1, s2) = (start(&cfg), start(&cfg));
    // Each has written its doors' addresses (the round its start asked for): no other round
    // runs before the next heartbeat, a minute away.
    for s in [&s1, &s2] {
        until("the instance's row has its admin address", || {
            admin(s)
                .query("SHOW MANIFOLDS")
                .unwrap()
                .rows
                .iter()
                .any(|r| {
                    r[2].as_deref() == Some("yes") && r[4].as_deref().is_some_and(|a| !a.is_empty())
                })
        });
    }
    let min_idle = variable(&s2, "pool.min_idle");
    admin(&s1)
        .query("SET GLOBAL pool.max_size = 55")
        .expect("the first change");
    let refused = admin(&s2)
        .query("SET GLOBAL pool.min_idle = 3")
        .expect_err("a change based on an old version");
    assert_eq!(refused.code(), Some(7721), "{refused}");
    assert!(
        refused
            .to_string()
            .contains("SET GLOBAL pool.max_size = 55"),
        "{refused}"
    );
    // The first change runs there now, the refused one does not.
    assert_eq!(variable(&s2, "pool.max_size"), "55");
    assert_eq!(variable(&s2, "pool.min_idle"), min_idle);
    // Made again, it stands.
    admin(&s2)
        .query("SET GLOBAL pool.min_idle = 3")
        .expect("the change made again");
    assert_eq!(variable(&s2, "pool.min_idle"), "3");
}
