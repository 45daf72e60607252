//! A transaction's events while it is buffered: in memory, or spilled to a plain file once the
//! memory budget is used up (PolarDB-X's thresholds: new data goes to disk past 85 % of the
//! budget, everything past 95 %). Read back in order.
//!
//! OWNER: the store helper.
//!
//! A body keeps its first events in memory while the budget allows; once a push would take
//! the memory in use past 85 % of the limit, that body's new events go to its own spill file;
//! a push past 95 % also moves the body's in-memory events to the file. A spill file is plain
//! (no WAL, nothing to recover: sources are re-read after a crash), created lazily in
//! [`Budget::dir`] and unlinked at once, so it is gone when the body is dropped or the process
//! dies. Spilled events pass through a write buffer (grown only as far as needed, counted in
//! the budget, freed by [`TxnBody::finish`] once the body is complete) and are read back
//! through a bounded one, so a multi-gigabyte body needs little memory. A limit of 0 means no limit (never
//! spill).

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::event::HEADER_LEN;

/// Spill files are named `manifold-spill-<pid>-<n>` for the moment between creating and
/// unlinking them; [`Budget::new`] removes any a crash left.
const SPILL_PREFIX: &str = "manifold-spill-";
/// Past this share of the limit (percent) a body's new events spill.
const SPILL_NEW_PERCENT: u64 = 85;
/// Past this share a pushed body spills its in-memory events too.
const SPILL_ALL_PERCENT: u64 = 95;
/// Largest write buffer of a spilling body. It grows only as far as the body's spilled
/// events need, counts in the budget, and is freed when the body is finished.
const WRITE_BUFFER: usize = 256 * 1024;
/// Read buffer of a [`BodyReader`] over spilled events.
const READ_CHUNK: usize = 1 << 20;

static SPILL_FILES: AtomicU64 = AtomicU64::new(0);

/// The memory all buffered transactions may use together, and where spill files go.
#[derive(Debug, Clone)]
pub struct Budget {
    inner: Arc<BudgetInner>,
}

#[derive(Debug)]
struct BudgetInner {
    limit: u64,
    used: AtomicU64,
    spilled: AtomicU64,
    dir: PathBuf,
}

impl Budget {
    /// A budget of `limit` bytes (0: no limit) spilling into `dir`, which is scratch: spill
    /// files a crash left there are removed.
    pub fn new(limit: u64, dir: PathBuf) -> Budget {
        remove_stale_spill_files(&dir);
        Budget {
            inner: Arc::new(BudgetInner {
                limit,
                used: AtomicU64::new(0),
                spilled: AtomicU64::new(0),
                dir,
            }),
        }
    }

    /// Bytes buffered in memory now.
    pub fn used(&self) -> u64 {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// Bytes written to spill files since start.
    pub fn spilled(&self) -> u64 {
        self.inner.spilled.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> u64 {
        self.inner.limit
    }

    pub fn dir(&self) -> &std::path::Path {
        &self.inner.dir
    }

    /// Whether `bytes` in memory would be past `percent` of the limit.
    fn past(&self, bytes: u64, percent: u64) -> bool {
        let limit = u128::from(self.inner.limit);
        limit > 0 && u128::from(bytes) * 100 > limit * u128::from(percent)
    }

    fn add_used(&self, bytes: usize) {
        self.inner.used.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    fn sub_used(&self, bytes: usize) {
        self.inner.used.fetch_sub(bytes as u64, Ordering::Relaxed);
    }
}

fn remove_stale_spill_files(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let stale = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(SPILL_PREFIX));
        if stale {
            if let Err(e) = std::fs::remove_file(entry.path()) {
                tracing::warn!(file = %entry.path().display(), error = %e, "cannot remove a stale spill file");
            }
        }
    }
}

/// The events of one transaction, each as received (header, body, checksum), in order.
#[derive(Debug)]
pub struct TxnBody {
    budget: Budget,
    /// The first events, while they are in memory (counted in the budget).
    mem: Vec<u8>,
    spill: Option<SpillFile>,
    /// The spill file's write buffer capacity counted in the budget.
    buffer_counted: usize,
    events: usize,
    bytes: u64,
}

/// The spilled part of a body. Offsets are in the file as if the write buffer were written.
#[derive(Debug)]
struct SpillFile {
    file: File,
    /// Bytes in the file proper.
    written: u64,
    /// Bytes after `written`, not yet in the file.
    pending: Vec<u8>,
    /// Where the body's first events went when they left memory: `(offset, length)`. They
    /// come first when reading; the file's other bytes follow in file order.
    head: Option<(u64, u64)>,
}

impl SpillFile {
    fn create(dir: &std::path::Path) -> std::io::Result<SpillFile> {
        crate::private::create_dir(dir)?;
        let n = SPILL_FILES.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{SPILL_PREFIX}{}-{n}", std::process::id()));
        // 0600: until it is unlinked, and through /proc/<pid>/fd after.
        let file = crate::private::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        // Unlinked at once: the open file is all there is, and it dies with the body.
        std::fs::remove_file(&path)?;
        Ok(SpillFile {
            file,
            written: 0,
            pending: Vec::new(),
            head: None,
        })
    }

    fn len(&self) -> u64 {
        self.written + self.pending.len() as u64
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.pending.len() + bytes.len() > WRITE_BUFFER {
            self.write_pending()?;
        }
        if bytes.len() >= WRITE_BUFFER {
            self.file.write_all_at(bytes, self.written)?;
            self.written += bytes.len() as u64;
        } else {
            let needed = self.pending.len() + bytes.len();
            if needed > self.pending.capacity() {
                // Doubling up to the cap, never past it: a body spilling a few small events
                // holds a few small buffers' worth, not the whole cap.
                let want = needed.max(self.pending.capacity() * 2).min(WRITE_BUFFER);
                self.pending.reserve_exact(want - self.pending.len());
            }
            self.pending.extend_from_slice(bytes);
        }
        Ok(())
    }

    /// Writes `bytes` to the file after what is there and in the write buffer.
    fn write_direct(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.write_pending()?;
        self.file.write_all_at(bytes, self.written)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn write_pending(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            self.file.write_all_at(&self.pending, self.written)?;
            self.written += self.pending.len() as u64;
            self.pending.clear();
        }
        Ok(())
    }

    /// Fills `out` from `at` on (file, then the write buffer).
    fn read_at(&self, mut out: &mut [u8], mut at: u64) -> std::io::Result<()> {
        if at < self.written {
            let from_file = usize::try_from(self.written - at)
                .unwrap_or(usize::MAX)
                .min(out.len());
            self.file.read_exact_at(&mut out[..from_file], at)?;
            out = &mut out[from_file..];
            at += from_file as u64;
        }
        if out.is_empty() {
            return Ok(());
        }
        let start = usize::try_from(at - self.written).unwrap_or(usize::MAX);
        let src = self
            .pending
            .get(start..start.saturating_add(out.len()))
            .ok_or_else(|| corrupt("read past the end of a spill file"))?;
        out.copy_from_slice(src);
        Ok(())
    }
}

fn corrupt(what: &'static str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

impl TxnBody {
    pub fn new(budget: &Budget) -> TxnBody {
        TxnBody {
            budget: budget.clone(),
            mem: Vec::new(),
            spill: None,
            buffer_counted: 0,
            events: 0,
            bytes: 0,
        }
    }

    /// Appends one whole event (its header's `event_size` says where it ends).
    pub fn push(&mut self, event: &[u8]) -> std::io::Result<()> {
        if event.len() < HEADER_LEN || crate::event::u32_at(event, 9) as usize != event.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not one whole event (its size field disagrees with its length)",
            ));
        }
        let used = self.budget.used();
        let len = event.len() as u64;
        if !self.mem.is_empty() && self.budget.past(used + len, SPILL_ALL_PERCENT) {
            self.spill_memory()?;
        }
        if self.spill.is_none() && !self.budget.past(used + len, SPILL_NEW_PERCENT) {
            self.mem.extend_from_slice(event);
            self.budget.add_used(event.len());
        } else {
            let appended = self.spill_file()?.append(event);
            self.count_buffer();
            appended?;
            self.budget.inner.spilled.fetch_add(len, Ordering::Relaxed);
        }
        self.events += 1;
        self.bytes += len;
        Ok(())
    }

    /// Ends the body's writing: spilled events still in the write buffer go to the file and
    /// the buffer is freed, so a body waiting its turn holds no memory beyond what it keeps
    /// in the budget. Pushing more afterwards still works (a buffer is taken again).
    pub fn finish(&mut self) -> std::io::Result<()> {
        let Some(spill) = self.spill.as_mut() else {
            return Ok(());
        };
        let written = spill.write_pending();
        if written.is_ok() {
            spill.pending = Vec::new();
        }
        self.count_buffer();
        written
    }

    /// Brings the budget in line with the write buffer's capacity now.
    fn count_buffer(&mut self) {
        let capacity = self.spill.as_ref().map_or(0, |s| s.pending.capacity());
        if capacity > self.buffer_counted {
            self.budget.add_used(capacity - self.buffer_counted);
        } else {
            self.budget.sub_used(self.buffer_counted - capacity);
        }
        self.buffer_counted = capacity;
    }

    fn spill_file(&mut self) -> std::io::Result<&mut SpillFile> {
        if self.spill.is_none() {
            self.spill = Some(SpillFile::create(self.budget.dir())?);
        }
        self.spill
            .as_mut()
            .ok_or_else(|| corrupt("spill file vanished"))
    }

    /// Moves the in-memory events to the spill file (they stay first when read).
    fn spill_memory(&mut self) -> std::io::Result<()> {
        self.spill_file()?;
        let Some(spill) = self.spill.as_mut() else {
            return Err(corrupt("spill file vanished"));
        };
        // Straight to the file: copying it through the write buffer would hold it twice.
        let at = spill.len();
        let written = spill.write_direct(&self.mem);
        if written.is_ok() {
            spill.head = Some((at, self.mem.len() as u64));
        }
        // The write buffer went to the file too, and stays empty.
        self.count_buffer();
        written?;
        let mem = std::mem::take(&mut self.mem);
        self.budget.sub_used(mem.len());
        self.budget
            .inner
            .spilled
            .fetch_add(mem.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    pub fn events(&self) -> usize {
        self.events
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes of this body in its spill file.
    pub fn spilled_bytes(&self) -> u64 {
        self.spill.as_ref().map_or(0, SpillFile::len)
    }

    /// The events in order.
    pub fn reader(&self) -> std::io::Result<BodyReader<'_>> {
        // File ranges in reading order: the moved head first, then the rest of the file.
        let mut ranges = [(0u64, 0u64); 3];
        if let Some(spill) = &self.spill {
            let end = spill.len();
            ranges = match spill.head {
                Some((at, len)) => [(at, at + len), (0, at), (at + len, end)],
                None => [(0, end), (0, 0), (0, 0)],
            };
        }
        Ok(BodyReader {
            body: self,
            mem_at: 0,
            ranges,
            range: 0,
            chunk: Vec::new(),
            chunk_at: 0,
        })
    }
}

impl Drop for TxnBody {
    fn drop(&mut self) {
        self.budget.sub_used(self.mem.len() + self.buffer_counted);
    }
}

/// Reads a [`TxnBody`]'s events back in order.
#[derive(Debug)]
pub struct BodyReader<'a> {
    body: &'a TxnBody,
    mem_at: usize,
    /// Spill file ranges to read, in order; `range` is the current one, its start advancing.
    ranges: [(u64, u64); 3],
    range: usize,
    /// Spilled bytes read ahead, from offset `chunk_at`.
    chunk: Vec<u8>,
    chunk_at: u64,
}

impl BodyReader<'_> {
    /// The next event into `buf` (cleared first); false at the end.
    pub fn next_event(&mut self, buf: &mut Vec<u8>) -> std::io::Result<bool> {
        buf.clear();
        let mem = &self.body.mem;
        if self.mem_at < mem.len() {
            let rest = &mem[self.mem_at..];
            let size = event_size(rest)?;
            let event = rest
                .get(..size)
                .ok_or_else(|| corrupt("buffered event past the end"))?;
            buf.extend_from_slice(event);
            self.mem_at += size;
            return Ok(true);
        }
        let Some(spill) = &self.body.spill else {
            return Ok(false);
        };
        while let Some(&(at, end)) = self.ranges.get(self.range) {
            if at >= end {
                self.range += 1;
                continue;
            }
            if end - at < HEADER_LEN as u64 {
                return Err(corrupt("spilled event shorter than a header"));
            }
            let size = event_size(self.chunk_slice(spill, at, HEADER_LEN)?)?;
            if at + size as u64 > end {
                return Err(corrupt("spilled event past the end of its range"));
            }
            if size <= READ_CHUNK {
                let event = self.chunk_slice(spill, at, size)?;
                buf.extend_from_slice(event);
            } else {
                buf.resize(size, 0);
                spill.read_at(buf, at)?;
            }
            self.ranges[self.range].0 += size as u64;
            return Ok(true);
        }
        Ok(false)
    }

    /// `len` spilled bytes from `at`, refilling the read buffer when it does not hold them.
    fn chunk_slice(&mut self, spill: &SpillFile, at: u64, len: usize) -> std::io::Result<&[u8]> {
        let held =
            at >= self.chunk_at && at + len as u64 <= self.chunk_at + self.chunk.len() as u64;
        if !held {
            let want = usize::try_from(spill.len() - at)
                .unwrap_or(usize::MAX)
                .min(READ_CHUNK)
                .max(len);
            self.chunk.resize(want, 0);
            spill.read_at(&mut self.chunk, at)?;
            self.chunk_at = at;
        }
        let start = usize::try_from(at - self.chunk_at).unwrap_or(usize::MAX);
        self.chunk
            .get(start..start + len)
            .ok_or_else(|| corrupt("spilled event past the read buffer"))
    }
}

/// The `event_size` of the event `bytes` starts with, checked to be at least a header.
fn event_size(bytes: &[u8]) -> std::io::Result<usize> {
    if bytes.len() < HEADER_LEN {
        return Err(corrupt("buffered event shorter than a header"));
    }
    let size = crate::event::u32_at(bytes, 9) as usize;
    if size < HEADER_LEN {
        return Err(corrupt("buffered event with a size below its header's"));
    }
    Ok(size)
}

#[cfg(test)]
mod tests;
