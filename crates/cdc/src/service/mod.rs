//! The binlog service thread: runs one source reader and one heartbeat writer per cluster
//! primary, merges their transactions into one order, writes them to the global binlog's
//! files, applies retention, answers purge requests, and publishes what it wrote.
//!
//! One thread with its own current-thread runtime: the merge and the writer are one
//! sequence, so one thread owns them and nothing is locked on the write path. The workers
//! only read what it publishes ([`BinlogShared`]).
//!
//! OWNER: the service helper.

mod pipeline;
mod start_record;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use manifold_backend::{ConnKey, ServerFlavor};
use manifold_binlog::gtid::Dialect;
use manifold_binlog::store::Recovered;
use tokio::sync::{mpsc, watch};

use crate::config::BinlogConfig;
use crate::source::{SourceMsg, SourceTarget};
use crate::state::{BinlogShared, Request};
use pipeline::Pipeline;

/// Messages the sources may queue ahead of the merge before a source reader waits: enough
/// for a burst of small transactions, bounded so a stalled writer pushes back on the sources
/// (their servers keep the binlog) instead of growing memory.
const SOURCE_QUEUE: usize = 1024;

/// Messages taken in one batch before the merge is drained and the file flushed.
const BATCH: usize = 4096;

/// How often retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(60);

/// How long a start waits for each primary's handshake when telling the fleet's flavours.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The running service; [`BinlogService::stop`] (or dropping it) ends the thread and waits
/// for it.
#[derive(Debug)]
pub struct BinlogService {
    pub shared: Arc<BinlogShared>,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl BinlogService {
    /// Ends the thread: what was released is written and flushed, the source connections are
    /// closed. Waits for it.
    pub fn stop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("binlog: the service thread panicked");
            }
        }
    }
}

impl Drop for BinlogService {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts the service on its own thread. Returns once the global binlog's directory is
/// recovered and open (an error there is returned); the sources connect afterwards. On a first
/// start (no files yet) whose primaries do not answer, it returns at once: the thread waits
/// for a primary to tell the fleet's dialect before it writes anything (`SHOW BINLOG STATUS`
/// says so), and an error opening the files then stops the service (state `failed`).
pub fn start(
    config: BinlogConfig,
    sources: Vec<SourceTarget>,
    login: ConnKey,
) -> Result<BinlogService, String> {
    config.validate()?;
    if !config.enabled() {
        return Err("binlog.dir: not set (the global binlog is off)".into());
    }
    // Before anything is read or written there: every cluster's rows are in these files.
    manifold_binlog::private::tighten(&config.dir, &config.base_name, &config.spill_dir())
        .map_err(|e| {
            format!("binlog.dir: cannot make the global binlog's files private (chmod 700 the directory, 600 its files): {e}")
        })?;
    let dialect = fleet_dialect(&config, &sources)?;
    let clusters: Vec<String> = sources.iter().map(|s| s.cluster.clone()).collect();
    let (shared, requests) =
        BinlogShared::with_dialect(config, clusters, dialect.unwrap_or(Dialect::MariaDb));
    let (stop, stop_rx) = watch::channel(false);
    let (opened_tx, opened_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let thread_shared = shared.clone();
    let thread = std::thread::Builder::new()
        .name("binlog".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = opened_tx.send(Err(format!("binlog: cannot start a runtime: {e}")));
                    return;
                }
            };
            if dialect.is_none() {
                // Nothing is written before the dialect is known: the caller goes on.
                let _ = opened_tx.send(Ok(()));
                match learn_dialect(&thread_shared, &sources, &stop_rx) {
                    Some(dialect) => thread_shared.set_dialect(dialect),
                    None => return,
                }
            }
            let (pipeline, recovered) = match Pipeline::open(thread_shared.clone()) {
                Ok(opened) => opened,
                Err(e) => {
                    thread_shared.metrics.set_state(format!("failed: {e}"));
                    tracing::error!(error = %e, "binlog: the global binlog cannot open");
                    let _ = opened_tx.send(Err(e.to_string()));
                    return;
                }
            };
            log_recovery(&thread_shared, &recovered);
            thread_shared.metrics.set_state("running");
            let _ = opened_tx.send(Ok(()));
            let local = tokio::task::LocalSet::new();
            local.block_on(
                &runtime,
                run(Run {
                    pipeline,
                    recovered,
                    sources,
                    login,
                    requests,
                    stop: stop_rx,
                    shared: thread_shared,
                }),
            );
        })
        .map_err(|e| format!("binlog: cannot start a thread: {e}"))?;
    let mut service = BinlogService {
        shared,
        stop,
        thread: Some(thread),
    };
    match opened_rx.recv() {
        Ok(Ok(())) => Ok(service),
        Ok(Err(e)) => {
            service.stop();
            Err(e)
        }
        Err(_) => {
            service.stop();
            Err("binlog: the service thread ended while opening".into())
        }
    }
}

/// The dialect of the global binlog: the sources'. A global binlog reads MariaDB's events or
/// MySQL's, not both: a fleet of both is refused when the primaries that answer now tell so
/// (a primary that does not answer is not held against the start; the source reader checks
/// each connection's flavour too). When none answers, the existing files' dialect; with no
/// files yet (a first start), `None`: the service thread asks again ([`learn_dialect`]) — a
/// guess would be written into the first file and refuse the real fleet from then on.
fn fleet_dialect(
    config: &BinlogConfig,
    sources: &[SourceTarget],
) -> Result<Option<Dialect>, String> {
    if let Some(dialect) = check_one_flavour(sources)? {
        return Ok(Some(dialect));
    }
    if let Ok(Some(dialect)) = manifold_binlog::store::file_dialect(&config.dir, &config.base_name)
    {
        return Ok(Some(dialect));
    }
    if sources.is_empty() {
        return Ok(Some(Dialect::MariaDb));
    }
    Ok(None)
}

/// Asks the primaries once per reconnect interval until one answers (its dialect), the fleet
/// shows a mix (the service fails, saying so) or the service is stopped (`None`).
fn learn_dialect(
    shared: &BinlogShared,
    sources: &[SourceTarget],
    stop: &watch::Receiver<bool>,
) -> Option<Dialect> {
    let waiting =
        "waiting: no primary has answered yet to tell whether the fleet is MariaDB or MySQL";
    shared.metrics.set_state(waiting);
    tracing::warn!("binlog: {waiting}; nothing is written until one does");
    let step = Duration::from_millis(50);
    loop {
        let deadline = Instant::now() + shared.config.reconnect_interval;
        while Instant::now() < deadline {
            if *stop.borrow() {
                return None;
            }
            std::thread::sleep(step);
        }
        match check_one_flavour(sources) {
            Ok(Some(dialect)) => {
                tracing::info!(%dialect, "binlog: the fleet's dialect is known");
                return Some(dialect);
            }
            Ok(None) => {}
            Err(e) => {
                shared.metrics.set_state(format!("failed: {e}"));
                tracing::error!("{e}");
                return None;
            }
        }
    }
}

/// The dialect of the primaries that answer now (`None`: none did); an error when they mix
/// MariaDB and MySQL. Each cluster's current primary is asked (the one its reader will
/// read), not its first configured node, which may be a replica since a failover.
fn check_one_flavour(sources: &[SourceTarget]) -> Result<Option<Dialect>, String> {
    let mut seen: Vec<(Dialect, &str)> = Vec::new();
    for s in sources {
        let Some(primary) = s.targets.get(s.topology.primary()) else {
            continue;
        };
        if let Ok(version) = manifold_backend::probe_server_version(&primary.addr, PROBE_TIMEOUT) {
            let dialect = match ServerFlavor::of_version(&version) {
                ServerFlavor::MariaDb => Dialect::MariaDb,
                ServerFlavor::MySql => Dialect::MySql,
            };
            seen.push((dialect, s.cluster.as_str()));
        }
    }
    check_flavours(&seen)?;
    Ok(seen.first().map(|&(dialect, _)| dialect))
}

/// `flavours`: the dialect of each cluster whose primary answered.
fn check_flavours(flavours: &[(Dialect, &str)]) -> Result<(), String> {
    let maria = flavours.iter().find(|f| f.0 == Dialect::MariaDb);
    let mysql = flavours.iter().find(|f| f.0 == Dialect::MySql);
    match (maria, mysql) {
        (Some((_, m)), Some((_, y))) => Err(format!(
            "binlog: a mixed fleet: cluster {m} has a MariaDB primary and cluster {y} a MySQL \
             one; the global binlog is written in one dialect, so every cluster's primary must \
             be MariaDB or every one MySQL"
        )),
        _ => Ok(()),
    }
}

fn log_recovery(shared: &BinlogShared, recovered: &Recovered) {
    if recovered.truncated > 0 {
        tracing::warn!(
            bytes = recovered.truncated,
            "binlog: the newest file ended in a half-written transaction (a crash); cut back to the last whole one"
        );
    }
    for (i, cluster) in shared.clusters.iter().enumerate() {
        match recovered.sources.get(i).filter(|s| !s.pos.is_empty()) {
            Some(s) => {
                tracing::info!(cluster = %cluster, from = %s.pos, key = s.key, "binlog: source resumes");
            }
            None => {
                tracing::info!(cluster = %cluster, "binlog: new source, read from its current position");
            }
        }
    }
    tracing::info!(dir = %shared.config.dir.display(), gtid = %recovered.gtid, "binlog: global binlog open");
}

/// What the thread's loop runs with.
struct Run {
    pipeline: Pipeline,
    recovered: Recovered,
    sources: Vec<SourceTarget>,
    login: ConnKey,
    requests: mpsc::UnboundedReceiver<Request>,
    stop: watch::Receiver<bool>,
    shared: Arc<BinlogShared>,
}

async fn run(r: Run) {
    let Run {
        mut pipeline,
        recovered,
        sources,
        login,
        mut requests,
        mut stop,
        shared,
    } = r;
    let config = &shared.config;
    let heartbeat_table = {
        let (schema, table) = config.heartbeat_names();
        (schema.to_owned(), table.to_owned())
    };
    let (tx, mut rx) = mpsc::channel::<(usize, SourceMsg)>(SOURCE_QUEUE);
    for (index, target) in sources.into_iter().enumerate() {
        let start = pipeline.start_of(index, &recovered);
        tokio::task::spawn_local(crate::heartbeat::run(
            target.clone(),
            login.clone(),
            heartbeat_table.clone(),
            config.server_id,
            config.heartbeat_interval,
            stop.clone(),
        ));
        tokio::task::spawn_local(crate::source::run_from(
            index,
            target,
            login.clone(),
            start,
            heartbeat_table.clone(),
            pipeline.budget().clone(),
            config.server_id,
            tx.clone(),
            shared.clone(),
            config.reconnect_interval,
        ));
    }
    drop(tx);
    let mut retention = tokio::time::interval(RETENTION_EVERY);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let outcome = loop {
        tokio::select! {
            biased;
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    break Ok(());
                }
            }
            msg = rx.recv() => {
                let Some((index, msg)) = msg else {
                    break Err("every source reader ended".to_owned());
                };
                handle(&mut pipeline, index, msg);
                // Take what else is queued now: one drain and one flush for all of it.
                for _ in 1..BATCH {
                    match rx.try_recv() {
                        Ok((index, msg)) => handle(&mut pipeline, index, msg),
                        Err(_) => break,
                    }
                }
                if let Err(e) = pipeline.drain() {
                    break Err(e.to_string());
                }
                pipeline.check_held_back(Instant::now());
            }
            Some(request) = requests.recv() => pipeline.request(request),
            _ = retention.tick() => {
                if let Err(e) = pipeline.retain() {
                    tracing::warn!(error = %e, "binlog: retention could not remove files");
                }
            }
            _ = tick.tick() => {
                pipeline.check_held_back(Instant::now());
                // At most once a second: the sources' exact states (heartbeats included), so
                // that a restart resumes each source right where it stood.
                pipeline.checkpoint();
            }
        }
    };
    if outcome.is_ok() {
        pipeline.checkpoint();
    }
    match outcome {
        Ok(()) => {
            shared.metrics.set_state("stopped");
            tracing::info!("binlog: service stopped");
        }
        Err(e) => {
            // Writing on past a failed write could lose or reorder transactions: stop, and
            // say so where operators look (SHOW BINLOG STATUS, the log).
            shared.metrics.set_state(format!("failed: {e}"));
            tracing::error!(error = %e, "binlog: the global binlog stopped");
        }
    }
}

fn handle(pipeline: &mut Pipeline, index: usize, msg: SourceMsg) {
    match msg {
        SourceMsg::Txn(txn) => pipeline.on_txn(index, txn),
        SourceMsg::Connected { addr, from } => pipeline.on_connected(index, addr, &from),
        SourceMsg::Lost { error } => pipeline.on_lost(index, &error),
    }
}

#[cfg(test)]
mod tests;
