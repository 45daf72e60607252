#![forbid(unsafe_code)]

use std::time::Duration;

use manifold_engine::{duration_serde, EngineConfig};
use serde::{Deserialize, Serialize};

#[test]
fn empty_table_gives_defaults() {
    let cfg: EngineConfig = toml::from_str("").unwrap();
    assert_eq!(cfg, EngineConfig::default());
    assert_eq!(cfg.blocking_max_threads, 16);
    assert_eq!(cfg.blocking_idle_timeout, Duration::from_secs(10));
    assert_eq!(cfg.shutdown_timeout, Duration::from_secs(30));
    assert_eq!(cfg.listen_backlog, 1024);
    cfg.validate().unwrap();
    assert!(cfg.effective_threads() >= 1);
}

#[test]
fn snake_case_keys_and_humane_durations() {
    let cfg: EngineConfig = toml::from_str(
        r#"
        threads = 3
        pin_threads = true
        blocking_min_threads = 1
        blocking_max_threads = 8
        blocking_grow_ratio = 2
        blocking_idle_timeout = "500ms"
        shutdown_timeout = "2m"
        listen_backlog = 4096
        balance_connections = false
        "#,
    )
    .unwrap();
    assert_eq!(
        cfg,
        EngineConfig {
            threads: 3,
            pin_threads: true,
            blocking_min_threads: 1,
            blocking_max_threads: 8,
            blocking_grow_ratio: 2,
            blocking_idle_timeout: Duration::from_millis(500),
            shutdown_timeout: Duration::from_mins(2),
            listen_backlog: 4096,
            balance_connections: false,
        }
    );
    assert_eq!(cfg.effective_threads(), 3);
    cfg.validate().unwrap();

    // Serialising gives the same humane form back.
    let text = toml::to_string(&cfg).unwrap();
    assert!(text.contains("shutdown_timeout = \"2m\""), "{text}");
    assert_eq!(toml::from_str::<EngineConfig>(&text).unwrap(), cfg);
}

#[test]
fn unknown_keys_and_unitless_durations_are_rejected() {
    let err = toml::from_str::<EngineConfig>("worker_threads = 4").unwrap_err();
    assert!(err.to_string().contains("worker_threads"), "{err}");
    let err = toml::from_str::<EngineConfig>("blocking-max-threads = 4").unwrap_err();
    assert!(err.to_string().contains("blocking-max-threads"), "{err}");
    let err = toml::from_str::<EngineConfig>("shutdown_timeout = 30").unwrap_err();
    assert!(err.to_string().contains("no unit"), "{err}");
    let err = toml::from_str::<EngineConfig>("shutdown_timeout = \"30 parsecs\"").unwrap_err();
    assert!(err.to_string().contains("unknown unit"), "{err}");
}

#[test]
fn validation_names_the_key() {
    let cases: [(&str, EngineConfig); 7] = [
        (
            "blocking_max_threads",
            EngineConfig {
                blocking_max_threads: 0,
                blocking_min_threads: 0,
                ..EngineConfig::default()
            },
        ),
        (
            "blocking_min_threads",
            EngineConfig {
                blocking_min_threads: 5,
                blocking_max_threads: 4,
                ..EngineConfig::default()
            },
        ),
        (
            "blocking_grow_ratio",
            EngineConfig {
                blocking_grow_ratio: 0,
                ..EngineConfig::default()
            },
        ),
        (
            "blocking_idle_timeout",
            EngineConfig {
                blocking_idle_timeout: Duration::ZERO,
                ..EngineConfig::default()
            },
        ),
        (
            "listen_backlog",
            EngineConfig {
                listen_backlog: 0,
                ..EngineConfig::default()
            },
        ),
        (
            "listen_backlog",
            EngineConfig {
                listen_backlog: u32::MAX,
                ..EngineConfig::default()
            },
        ),
        (
            "threads",
            EngineConfig {
                threads: 1_000_000,
                ..EngineConfig::default()
            },
        ),
    ];
    for (key, cfg) in cases {
        let err = cfg.validate().unwrap_err();
        assert_eq!(err.key(), key, "{err}");
        assert!(err.to_string().contains(key), "{err}");
    }
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct OtherCrateConfig {
    #[serde(with = "manifold_engine::duration_serde")]
    connect_timeout: Duration,
    #[serde(default, with = "manifold_engine::duration_serde::option")]
    max_lag: Option<Duration>,
}

#[test]
fn duration_serde_works_for_other_crates() {
    let a: OtherCrateConfig =
        toml::from_str("connect_timeout = \"1m30s\"\nmax_lag = \"250ms\"").unwrap();
    assert_eq!(
        a,
        OtherCrateConfig {
            connect_timeout: Duration::from_secs(90),
            max_lag: Some(Duration::from_millis(250)),
        }
    );
    let b: OtherCrateConfig = toml::from_str("connect_timeout = \"1.5s\"").unwrap();
    assert_eq!(b.max_lag, None);
    assert_eq!(b.connect_timeout, Duration::from_millis(1500));

    for d in [
        Duration::from_millis(1),
        Duration::from_secs(90),
        Duration::new(3, 5),
    ] {
        let v = OtherCrateConfig {
            connect_timeout: d,
            max_lag: Some(d),
        };
        let text = toml::to_string(&v).unwrap();
        assert_eq!(
            toml::from_str::<OtherCrateConfig>(&text).unwrap(),
            v,
            "{text}"
        );
    }
    assert_eq!(
        duration_serde::parse_duration(&duration_serde::format_duration(Duration::from_secs(90)))
            .unwrap(),
        Duration::from_secs(90)
    );
}
