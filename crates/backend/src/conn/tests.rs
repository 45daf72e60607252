//! Backend connections against a real MariaDB (the test binary's shared topology): login,
//! session tracking, state the connection learns, reset, and telling a dead one apart.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use manifold_mysql_proto::auth;
use manifold_mysql_proto::consts::caps;

use super::{
    plugin_response, probe_server_version, BackendConn, BackendTarget, ConnKey, Schema,
    ServerFlavor,
};
use crate::config::TlsMode;
use crate::errors::ErrorKind;
use crate::state::{SessionVars, UserVars};

const USER: &str = "conn_unit";

fn topology() -> &'static manifold_testkit::Topology {
    static READY: OnceLock<()> = OnceLock::new();
    let t = manifold_testkit::Topology::shared();
    READY.get_or_init(|| t.create_user(USER, USER).expect("create the test user"));
    t
}

fn target() -> BackendTarget {
    BackendTarget {
        addr: topology().primary.addr().to_string(),
        tls_mode: TlsMode::Disabled,
        tls: None,
        max_packet: 16 << 20,
    }
}

fn key() -> ConnKey {
    ConnKey::new(USER, USER, 0, 45, false)
}

fn run<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

async fn connect() -> BackendConn {
    BackendConn::connect(&target(), &key(), Duration::from_secs(10))
        .await
        .expect("login")
}

#[test]
fn the_flavor_comes_from_the_version_string() {
    assert_eq!(
        ServerFlavor::of_version(b"5.5.5-10.11.6-MariaDB-0+deb12u1"),
        ServerFlavor::MariaDb
    );
    assert_eq!(
        ServerFlavor::of_version(b"11.4.2-mariadb"),
        ServerFlavor::MariaDb
    );
    assert_eq!(ServerFlavor::of_version(b"8.0.36"), ServerFlavor::MySql);
    assert_eq!(ServerFlavor::of_version(b""), ServerFlavor::MySql);
}

#[test]
fn a_key_keeps_only_the_client_flags_that_change_the_server() {
    let all = ConnKey::new("u", "p", u32::MAX, 45, false);
    assert_eq!(all.caps, caps::SESSION_AFFECTING);
    assert_eq!(ConnKey::new("u", "p", 0, 45, false).caps, 0);
    assert_ne!(
        ConnKey::new("u", "p", 0, 45, false),
        ConnKey::new("u", "p", 0, 45, true),
        "a TLS client's connections are not a plain client's"
    );
}

#[test]
fn the_auth_response_follows_the_plugin() {
    let scramble = [7u8; 20];
    assert_eq!(
        plugin_response(auth::CACHING_SHA2_PASSWORD, b"pw", &scramble),
        auth::sha2_scramble(b"pw", &scramble)
    );
    assert_eq!(
        plugin_response("mysql_native_password", b"pw", &scramble),
        auth::native_scramble(b"pw", &scramble)
    );
}

#[test]
fn the_version_probe_reads_the_handshake_or_says_why_not() {
    let version = probe_server_version(&target().addr, Duration::from_secs(10)).unwrap();
    assert_eq!(ServerFlavor::of_version(&version), ServerFlavor::MariaDb);
    let closed = format!("127.0.0.1:{}", manifold_testkit::free_port());
    let e = probe_server_version(&closed, Duration::from_secs(2)).unwrap_err();
    assert!(e.to_string().contains(&closed), "{e}");
}

#[test]
fn a_login_tracks_session_state_and_learns_what_changes() {
    run(async {
        let mut c = connect().await;
        assert!(c.tracking, "MariaDB reports state changes");
        assert_eq!(c.flavor(), ServerFlavor::MariaDb);
        assert_eq!(c.schema, Schema::None);
        assert!(c.connection_id != 0);
        // Brought to a session's state with one SET: the connection knows it has it.
        let mut want = SessionVars::default();
        want.set(b"sql_mode", b"ANSI_QUOTES");
        let mut want_user = UserVars::default();
        want_user.set(b"conn_unit", b"42");
        c.sync_vars(&want, &want_user, None).await.unwrap().unwrap();
        assert_eq!(c.vars.get(b"sql_mode"), Some(&b"ANSI_QUOTES"[..]));
        assert_eq!(c.user_vars.get(b"conn_unit"), Some(&b"42"[..]));
        let rows = c
            .query_rows(b"SELECT @@SESSION.sql_mode, @conn_unit")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(rows.rows[0][0].as_deref(), Some(&b"ANSI_QUOTES"[..]));
        assert_eq!(rows.rows[0][1].as_deref(), Some(&b"42"[..]));
        // A reset forgets it, on the server and here.
        c.reset().await.unwrap().unwrap();
        assert!(c.vars.is_empty() && c.user_vars.is_empty());
        let rows = c
            .query_rows(b"SELECT @@SESSION.sql_mode, @conn_unit")
            .await
            .unwrap()
            .unwrap();
        assert_ne!(rows.rows[0][0].as_deref(), Some(&b"ANSI_QUOTES"[..]));
        assert_eq!(rows.rows[0][1], None);
    });
}

#[test]
fn a_wrong_password_is_a_login_error_naming_the_backend() {
    run(async {
        let bad = ConnKey::new(USER, "not the password", 0, 45, false);
        let e = BackendConn::connect(&target(), &bad, Duration::from_secs(10))
            .await
            .err()
            .expect("refused");
        // ER_ACCESS_DENIED_ERROR, as the server sent it.
        assert!(
            matches!(&e.kind, ErrorKind::Auth(p) if p.code == 1045),
            "{e:?}"
        );
        assert!(e.message.contains(&target().addr), "{}", e.message);
    });
}

#[test]
fn a_connection_the_server_killed_no_longer_looks_alive() {
    run(async {
        let c = connect().await;
        assert!(c.looks_alive());
        let t = topology();
        t.sql(&t.primary, &format!("KILL {}", c.connection_id))
            .unwrap();
        // The close reaches the reactor when the runtime next polls for events.
        for _ in 0..1000 {
            if !c.looks_alive() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("a killed connection still looks alive after 10 s");
    });
}

#[test]
fn a_statement_read_row_by_row_can_stop_and_the_connection_goes_on() {
    use manifold_mysql_proto::packets::Value;
    use std::ops::ControlFlow;

    use super::execute::Param;

    run(async {
        let mut c = connect().await;
        // 10,000 rows of 1 KB, handed over one at a time.
        // (MariaDB's SEQUENCE engine.)
        let numbers = b"SELECT seq, REPEAT('x', 1000) FROM mysql.seq_1_to_10000 WHERE seq <= ?";
        let mut seen = Vec::new();
        let done = c
            .execute_each(1, numbers, &[Param::Int(10_000)], 16, |row| {
                seen.push(row[0].clone());
                if seen.len() == 3 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .await
            .expect("no connection error")
            .expect("no server error");
        assert!(done.rows.is_empty(), "rows are handed over, not kept");
        assert_eq!(seen, [Value::UInt(1), Value::UInt(2), Value::UInt(3)]);
        // The 9,997 rows left were read and dropped: the next statement gets its own answer.
        assert!(!c.answer_pending);
        let next = c
            .execute(1, numbers, &[Param::Int(2)], 16)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(next.rows.len(), 2);
        assert_eq!(next.rows[1][0], Value::UInt(2));
        // Read whole, the same statement collects every row.
        let all = c
            .execute(1, numbers, &[Param::Int(10_000)], 16)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(all.rows.len(), 10_000);
    });
}

/// A text of several statements on a connection that allows them: manifold's query reads the
/// first result and drops the others, so the next query reads its own answer, not one left
/// over (a further result set, an OK, an ERR that ends the chain).
#[test]
fn query_rows_leaves_no_further_result_behind() {
    run(async {
        let multi = ConnKey::new(USER, USER, caps::MULTI_STATEMENTS, 45, false);
        let mut c = BackendConn::connect(&target(), &multi, Duration::from_secs(10))
            .await
            .expect("login");
        let texts: [&[u8]; 3] = [
            b"SELECT 1; SELECT 2, 3; DO 1",
            b"SELECT 1; SELECT * FROM no_such_schema.no_such_table",
            b"SELECT 1; -- a comment makes an empty further result",
        ];
        for (i, sql) in texts.into_iter().enumerate() {
            let rows = c.query_rows(sql).await.unwrap().unwrap();
            assert_eq!(rows.rows, vec![vec![Some(b"1".to_vec())]]);
            let next = format!("SELECT {}", 100 + i);
            let rows = c.query_rows(next.as_bytes()).await.unwrap().unwrap();
            assert_eq!(
                rows.rows,
                vec![vec![Some((100 + i).to_string().into_bytes())]]
            );
        }
        assert!(c.looks_alive());
    });
}
