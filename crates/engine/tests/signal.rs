#![forbid(unsafe_code)]
//! `run_until_signal`, in its own test binary because it signals the whole process.

use std::time::{Duration, Instant};

use manifold_engine::{EngineBuilder, EngineConfig, ShutdownReport};

#[test]
fn sigterm_triggers_shutdown() {
    // Installing a SIGTERM handler first makes a signal sent before the engine listens harmless
    // (tokio's handler swallows it) instead of killing the test process.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.block_on(async {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap()
    });

    let engine = EngineBuilder::new(EngineConfig {
        threads: 1,
        shutdown_timeout: Duration::from_secs(1),
        ..EngineConfig::default()
    })
    .start()
    .unwrap();
    let runner = std::thread::spawn(move || engine.run_until_signal());

    // A signal may arrive before run_until_signal listens and be missed, so keep sending.
    let give_up = Instant::now() + Duration::from_secs(5);
    while !runner.is_finished() {
        assert!(Instant::now() < give_up, "run_until_signal ignored SIGTERM");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(runner.join().unwrap(), ShutdownReport::default());
}
