//! A transaction's events while it is buffered: in memory, or spilled to a plain file once the
//! memory budget is used up (PolarDB-X's thresholds: new data goes to disk past 85 % of the
//! budget, everything past 95 %). Read back in order.
//!
//! OWNER: the store helper. The in-memory part below works; spilling is to be built behind
//! the same API.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
    pub fn new(limit: u64, dir: PathBuf) -> Budget {
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
}

/// The events of one transaction, each as received (header, body, checksum), in order.
#[derive(Debug)]
pub struct TxnBody {
    budget: Budget,
    mem: Vec<u8>,
    events: usize,
    bytes: u64,
}

impl TxnBody {
    pub fn new(budget: &Budget) -> TxnBody {
        TxnBody {
            budget: budget.clone(),
            mem: Vec::new(),
            events: 0,
            bytes: 0,
        }
    }

    /// Appends one whole event (its header's `event_size` says where it ends).
    pub fn push(&mut self, event: &[u8]) -> std::io::Result<()> {
        self.mem.extend_from_slice(event);
        self.budget
            .inner
            .used
            .fetch_add(event.len() as u64, Ordering::Relaxed);
        self.events += 1;
        self.bytes += event.len() as u64;
        Ok(())
    }

    pub fn events(&self) -> usize {
        self.events
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The events in order.
    pub fn reader(&self) -> std::io::Result<BodyReader<'_>> {
        Ok(BodyReader { body: self, at: 0 })
    }
}

impl Drop for TxnBody {
    fn drop(&mut self) {
        self.budget
            .inner
            .used
            .fetch_sub(self.mem.len() as u64, Ordering::Relaxed);
    }
}

/// Reads a [`TxnBody`]'s events back in order.
#[derive(Debug)]
pub struct BodyReader<'a> {
    body: &'a TxnBody,
    at: usize,
}

impl BodyReader<'_> {
    /// The next event into `buf` (cleared first); false at the end.
    pub fn next_event(&mut self, buf: &mut Vec<u8>) -> std::io::Result<bool> {
        buf.clear();
        let mem = &self.body.mem;
        if self.at >= mem.len() {
            return Ok(false);
        }
        let size = crate::event::u32_at(mem, self.at + 9) as usize;
        buf.extend_from_slice(&mem[self.at..self.at + size]);
        self.at += size;
        Ok(true)
    }
}
