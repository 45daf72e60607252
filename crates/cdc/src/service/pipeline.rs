//! The service thread's state between messages: the merge, the writer, and what it publishes.
//! No network here: the loop in [`super`] feeds it what the sources send.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use manifold_binlog::gtid::{GtidState, TxnGtid};
use manifold_binlog::merge::Merger;
use manifold_binlog::spill::Budget;
use manifold_binlog::store::{FileInfo, Recovered, StoreError, StoreOptions, Writer};
use manifold_binlog::txn::SourceTxn;

use super::start_record;
use crate::metrics::Metrics;
use crate::state::{BinlogShared, End, PurgeStop, Purged, Request};

/// How long one source may hold the merge back before a warning names it.
pub(crate) const HOLD_BACK_WARNING: Duration = Duration::from_secs(5);

/// The merge and the writer, and the figures they publish.
pub(crate) struct Pipeline {
    shared: Arc<BinlogShared>,
    writer: Writer,
    merger: Merger<SourceTxn>,
    budget: Budget,
    /// The source holding the merge back, since when, and whether that was warned of.
    held: Option<(usize, Instant, bool)>,
    /// Released transactions were written since the last flush.
    unflushed: bool,
    /// Where each source was first read from (`start_record`).
    starts: BTreeMap<String, GtidState>,
    /// Per source, the heartbeats not yet noted in the writer's state: `(transactions of the
    /// source pushed before it, its GTID, its key)`. A heartbeat is noted only once the
    /// source's earlier transactions are written (a MariaDB position is the last GTID per
    /// domain: noting it first would let a crash skip the ones still waiting).
    heartbeats: Vec<VecDeque<(u64, TxnGtid, u64)>>,
    /// Per source, its transactions pushed into the merge, and those written.
    pushed: Vec<u64>,
    written: Vec<u64>,
    /// The last checkpoint failed (and that was logged).
    checkpoint_failing: bool,
}

impl Pipeline {
    /// Recovers the directory and sets up the merge from what the files record. Returns the
    /// recovered state too: where each source resumes.
    pub(crate) fn open(shared: Arc<BinlogShared>) -> Result<(Pipeline, Recovered), StoreError> {
        let config = &shared.config;
        let (writer, recovered) = Writer::open(StoreOptions {
            dir: config.dir.clone(),
            base_name: config.base_name.clone(),
            max_file_size: config.max_file_size,
            server_id: config.server_id,
            domain_id: config.domain_id,
            dialect: shared.dialect(),
            server_uuid: config.uuid(),
            clusters: shared.clusters.clone(),
        })?;
        let budget = Budget::new(config.memory_budget, config.spill_dir());
        let mut keys: Vec<u64> = recovered.sources.iter().map(|s| s.key).collect();
        keys.resize(shared.clusters.len(), 0);
        let merger = Merger::new(keys);
        let starts = start_record::read(config).map_err(|e| StoreError::Io {
            path: start_record::path(config).display().to_string(),
            source: e,
        })?;
        let sources = shared.clusters.len();
        let pipeline = Pipeline {
            starts,
            heartbeats: vec![VecDeque::new(); sources],
            pushed: vec![0; sources],
            written: vec![0; sources],
            checkpoint_failing: false,
            shared,
            writer,
            merger,
            budget,
            held: None,
            unflushed: false,
        };
        pipeline.publish();
        Ok((pipeline, recovered))
    }

    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// A whole transaction of source `index`: a heartbeat moves its key (and is noted in the
    /// source's state once the source's earlier transactions are written), anything else
    /// waits for the watermark.
    pub(crate) fn on_txn(&mut self, index: usize, txn: SourceTxn) {
        self.shared
            .update_source(index, |s| s.received.update(&txn.gtid));
        if index >= self.pushed.len() {
            self.pushed.resize(index + 1, 0);
            self.written.resize(index + 1, 0);
            self.heartbeats.resize_with(index + 1, VecDeque::new);
        }
        if txn.heartbeat {
            if let Some(stamp) = txn.stamp {
                self.merger.advance(index, stamp);
            }
            let key = self.merger.last_keys().get(index).copied().unwrap_or(0);
            self.heartbeats[index].push_back((self.pushed[index], txn.gtid, key));
            self.note_heartbeats(index);
            return;
        }
        self.pushed[index] += 1;
        self.merger.push(index, txn.stamp, txn);
    }

    /// Notes the heartbeats of source `index` whose earlier transactions are all written.
    fn note_heartbeats(&mut self, index: usize) {
        let written = self.written[index];
        while let Some(&(before, gtid, key)) = self.heartbeats[index].front() {
            if before > written {
                break;
            }
            self.heartbeats[index].pop_front();
            self.writer.note_skipped(index, &gtid, key);
        }
    }

    /// Records the sources' exact states (see [`Writer::write_checkpoint`]) when they changed.
    /// A failure is logged (once until one succeeds), not fatal: the record already on disk
    /// stays valid, and recovery without a newer one only resumes sources earlier.
    pub(crate) fn checkpoint(&mut self) {
        match self.writer.write_checkpoint() {
            Ok(_) => self.checkpoint_failing = false,
            Err(e) => {
                if !std::mem::replace(&mut self.checkpoint_failing, true) {
                    tracing::warn!(error = %e, "binlog: the sources checkpoint cannot be written; a restart would resume sources from the files' record");
                }
            }
        }
    }

    /// Where source `index` resumes: its recorded position, with the domains it lacks taken
    /// from where the source first started (the start record). `None`: it was never read
    /// (no transaction of it written, no start recorded). A recorded empty start is
    /// `Some(empty)`: its primary had written nothing then, so everything it wrote since is
    /// read.
    pub(crate) fn start_of(&mut self, index: usize, recovered: &Recovered) -> Option<GtidState> {
        let mut start = recovered
            .sources
            .get(index)
            .map(|s| s.pos.clone())
            .filter(|pos| !pos.is_empty());
        if let Some(first) = self.starts.get(&self.shared.clusters[index]) {
            start
                .get_or_insert_with(GtidState::default)
                .fill_from(first);
            self.writer.set_start(index, first);
        }
        start
    }

    pub(crate) fn on_connected(&mut self, index: usize, addr: String, from: &GtidState) {
        // A source read for the first time starts at its primary's position then: that is
        // recorded (synced) before any of its transactions is taken, or a crash before the
        // first one is written would start it again later, past what it wrote meanwhile.
        let cluster = &self.shared.clusters[index];
        if !self.starts.contains_key(cluster) && self.writer.sources()[index].pos.is_empty() {
            self.starts.insert(cluster.clone(), from.clone());
            if let Err(e) = start_record::write(&self.shared.config, &self.starts) {
                tracing::error!(error = %e, "binlog: cannot record where a new source starts");
                self.starts.remove(cluster);
            }
            self.writer.set_start(index, from);
        }
        self.shared.update_source(index, |s| {
            s.addr = addr;
            "streaming".clone_into(&mut s.state);
        });
    }

    pub(crate) fn on_lost(&self, index: usize, error: &str) {
        self.shared
            .update_source(index, |s| s.state = format!("error: {error}"));
    }

    /// Writes every transaction the watermark releases, then flushes once and publishes the
    /// new end (a batch costs one flush, however many transactions it holds).
    pub(crate) fn drain(&mut self) -> Result<(), StoreError> {
        let shared = self.shared.clone();
        let metrics = &shared.metrics;
        let mut written = false;
        while let Some((key, index, txn)) = self.merger.pop() {
            let appended = self.writer.append(&txn, key)?;
            written = true;
            let now = SystemTime::now();
            let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
            Metrics::add(&metrics.events, appended.events);
            Metrics::add(&metrics.dml_events, u64::from(txn.dml_events));
            Metrics::add(&metrics.bytes, appended.bytes);
            Metrics::add(&metrics.transactions, 1);
            if appended.rotated {
                Metrics::add(&metrics.files, 1);
            }
            let commit = UNIX_EPOCH + Duration::from_secs(u64::from(txn.timestamp));
            let delay = now.duration_since(commit).unwrap_or_default();
            Metrics::set(
                &metrics.delay_ms,
                u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            );
            let now_ns = u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX);
            if let Some(stamp) = txn.stamp {
                metrics.record_stamped_delay(now_ns.saturating_sub(stamp));
            }
            if let Some(commit) = txn.mysql {
                let committed_ns = commit.immediate_commit_us.saturating_mul(1000);
                metrics.record_commit_delay(now_ns.saturating_sub(committed_ns));
            }
            if let Some(n) = self.written.get_mut(index) {
                *n += 1;
                self.note_heartbeats(index);
            }
            self.shared.update_source(index, |s| {
                s.events += appended.events;
                s.transactions += 1;
                s.last_commit = Some(commit);
            });
        }
        if written {
            self.unflushed = true;
        }
        self.flush()
    }

    /// Makes written bytes visible (flush) and publishes the end, files, and sources.
    fn flush(&mut self) -> Result<(), StoreError> {
        if self.unflushed {
            self.writer.flush()?;
            self.unflushed = false;
        }
        self.publish();
        Ok(())
    }

    /// Publishes what is written and the merge's state.
    fn publish(&self) {
        let end = self.writer.end();
        let new_end = End {
            file: end.file,
            pos: end.pos,
            gtid: self.writer.gtid_pos(),
        };
        if self.shared.end() != new_end {
            // Files first: a dump woken by the new end at the end of a rotated file looks for
            // the next one in the list.
            self.shared.set_files(self.writer.files());
            self.shared.publish_end(new_end);
        }
        let held = self.merger.held_back_by();
        let keys = self.merger.last_keys();
        for (i, state) in self.writer.sources().iter().enumerate() {
            self.shared.update_source(i, |s| {
                s.written.clone_from(&state.pos);
                s.key = keys.get(i).copied().unwrap_or(state.key);
                s.holding_back = held == Some(i);
            });
        }
        let metrics = &self.shared.metrics;
        Metrics::set(&metrics.waiting, self.merger.len() as u64);
        Metrics::set(&metrics.memory_used, self.budget.used());
        Metrics::set(&metrics.spilled_bytes, self.budget.spilled());
    }

    /// Follows which source holds the merge back; logs a warning naming it once it has for
    /// [`HOLD_BACK_WARNING`] (once per episode). Returns the source warned of, if a warning
    /// was logged now.
    pub(crate) fn check_held_back(&mut self, now: Instant) -> Option<usize> {
        let holder = self.merger.held_back_by();
        match (holder, &mut self.held) {
            (None, _) => self.held = None,
            (Some(s), Some((held, since, warned))) if *held == s => {
                if !*warned && now.duration_since(*since) >= HOLD_BACK_WARNING {
                    *warned = true;
                    let name = self.shared.clusters.get(s).cloned().unwrap_or_default();
                    tracing::warn!(
                        cluster = %name,
                        waiting = self.merger.len(),
                        "binlog: source {name} holds the global binlog back (no transaction or heartbeat from it for {}s)",
                        HOLD_BACK_WARNING.as_secs()
                    );
                    return Some(s);
                }
            }
            (Some(s), _) => self.held = Some((s, now, false)),
        }
        None
    }

    /// Answers a session's request.
    pub(crate) fn request(&mut self, request: Request) {
        match request {
            Request::PurgeTo(file, reply) => {
                let result = self.purge_to(&file);
                let _ = reply.send(result);
            }
            Request::PurgeBefore(time, reply) => {
                let result = self.purge_before(time);
                let _ = reply.send(result);
            }
            Request::Rotate(reply) => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as u32);
                let result = match self.writer.rotate(now) {
                    Ok(rotated) => {
                        if rotated {
                            Metrics::add(&self.shared.metrics.files, 1);
                        }
                        self.publish();
                        Ok(())
                    }
                    Err(e) => Err(e.to_string()),
                };
                let _ = reply.send(result);
            }
        }
    }

    fn purge_to(&mut self, file: &str) -> Result<Purged, String> {
        if !self.writer.files().iter().any(|f| f.name == file) {
            return Err(format!(
                "Target log not found in binlog index: '{file}' is not a file of the global binlog"
            ));
        }
        let in_use = self.oldest_in_use();
        let files_before = self.writer.files();
        let removed = self
            .writer
            .purge_to_keeping(file, in_use.as_ref().map(|u| u.file.as_str()))
            .map_err(|e| e.to_string())?;
        self.after_purge(&removed);
        let stopped_at = warn_in_use(in_use.as_ref(), file, &files_before);
        Ok(Purged {
            removed,
            stopped_at,
        })
    }

    /// The oldest file a dump is reading, and which dumps read it: it and every later file
    /// stay (a dump moves on to the next file by the list, and a removed file cannot be
    /// opened).
    fn oldest_in_use(&self) -> Option<InUse> {
        let files = self.writer.files();
        let consumers = self.shared.consumers();
        let at = consumers
            .iter()
            .filter_map(|c| files.iter().position(|f| f.name == c.file))
            .min()?;
        let file = files[at].name.clone();
        let readers = consumers
            .iter()
            .filter(|c| c.file == file)
            .map(|c| c.id)
            .collect();
        Some(InUse { file, readers })
    }

    /// Removes the files whose last write is before `time`: everything before the first file
    /// written at or after it (never the current one).
    fn purge_before(&mut self, time: SystemTime) -> Result<Purged, String> {
        let files = self.writer.files();
        let dir = self.shared.config.dir.clone();
        let keep_from = files
            .iter()
            .find(|f| modified(&dir, &f.name).is_none_or(|m| m >= time))
            .or(files.last());
        let Some(keep_from) = keep_from else {
            return Ok(Purged::default());
        };
        let keep_from = keep_from.name.clone();
        let in_use = self.oldest_in_use();
        let removed = self
            .writer
            .purge_to_keeping(&keep_from, in_use.as_ref().map(|u| u.file.as_str()))
            .map_err(|e| e.to_string())?;
        self.after_purge(&removed);
        let stopped_at = warn_in_use(in_use.as_ref(), &keep_from, &files);
        Ok(Purged {
            removed,
            stopped_at,
        })
    }

    fn after_purge(&self, removed: &[String]) {
        if removed.is_empty() {
            return;
        }
        Metrics::add(&self.shared.metrics.purged_files, removed.len() as u64);
        tracing::info!(files = ?removed, "binlog: files purged");
        self.shared.set_files(self.writer.files());
    }

    /// Retention (`retention_size`, `retention_age`).
    pub(crate) fn retain(&mut self) -> Result<(), StoreError> {
        let in_use = self.oldest_in_use();
        let config = &self.shared.config;
        let removed = self.writer.retain_keeping(
            config.retention_size,
            config.retention_age,
            in_use.as_ref().map(|u| u.file.as_str()),
        )?;
        self.after_purge(&removed);
        Ok(())
    }
}

/// The last write time of `name` in `dir`, if it can be read.
fn modified(dir: &Path, name: &str) -> Option<SystemTime> {
    std::fs::metadata(dir.join(name)).ok()?.modified().ok()
}

/// The oldest file dumps are reading.
struct InUse {
    file: String,
    /// The connection ids of the dumps in it.
    readers: Vec<u64>,
}

/// A purge up to `target` that stopped at a file a dump reads says so in the log, as
/// MariaDB's, and to the client (the purge itself succeeds with what it could remove).
/// `files`: the files before the purge.
fn warn_in_use(in_use: Option<&InUse>, target: &str, files: &[FileInfo]) -> Option<PurgeStop> {
    let in_use = in_use?;
    let position = |name: &str| files.iter().position(|f| f.name == name);
    let (used, target) = (position(&in_use.file)?, position(target)?);
    if used >= target {
        return None;
    }
    for reader in &in_use.readers {
        tracing::warn!(
            "binlog: file {} was not purged because it was being read by thread number {reader}",
            in_use.file
        );
    }
    Some(PurgeStop {
        file: in_use.file.clone(),
        readers: in_use.readers.len(),
        wanted: target,
    })
}
