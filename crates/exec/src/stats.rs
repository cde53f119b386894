//! Process-wide counters for `/metrics`: relaxed atomics, read only when scraped.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static QUEUE_BATCHES: AtomicU64 = AtomicU64::new(0);
static QUEUE_ROWS: AtomicU64 = AtomicU64::new(0);
static QUEUE_WAIT_MICROS: AtomicU64 = AtomicU64::new(0);
static QUEUE_BATCH_MAX: AtomicU64 = AtomicU64::new(0);
/// Statements slower than this many microseconds are logged with their plan; 0 = off.
static SLOW_STATEMENT_MICROS: AtomicU64 = AtomicU64::new(0);

/// Statements slower than `limit` are logged at `warn` with the engine's plan (set once at
/// start-up from `slow_request_ms`).
pub fn set_slow_statement(limit: Option<std::time::Duration>) {
    let micros = limit.map_or(0, |d| d.as_micros().clamp(1, u64::MAX as u128) as u64);
    SLOW_STATEMENT_MICROS.store(micros, Relaxed);
}

/// The slow-statement threshold, when on.
pub(crate) fn slow_statement() -> Option<std::time::Duration> {
    match SLOW_STATEMENT_MICROS.load(Relaxed) {
        0 => None,
        n => Some(std::time::Duration::from_micros(n)),
    }
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Snapshot {
    /// Database connections lent out (0 on MySQL, whose driver does not say).
    pub pool_in_use: i64,
    /// Requests waiting for a database connection (PostgreSQL; SQLite never waits).
    pub pool_waiting: i64,
    /// Group commits written by the write queue.
    pub queue_batches: u64,
    /// Rows written by the write queue.
    pub queue_rows: u64,
    /// Time the first row of each batch waited before its batch was written, summed.
    pub queue_wait_micros: u64,
    /// The largest batch so far.
    pub queue_batch_max: u64,
}

/// A write-queue batch of `rows` rows whose first row waited `wait_micros`.
pub(crate) fn queue_batch(rows: usize, wait_micros: u64) {
    QUEUE_BATCHES.fetch_add(1, Relaxed);
    QUEUE_ROWS.fetch_add(rows as u64, Relaxed);
    QUEUE_WAIT_MICROS.fetch_add(wait_micros, Relaxed);
    QUEUE_BATCH_MAX.fetch_max(rows as u64, Relaxed);
}

/// The counters now, with the pool of `backend`.
pub fn snapshot(backend: &crate::Backend) -> Snapshot {
    let (pool_in_use, pool_waiting) = backend.pool_status();
    Snapshot {
        pool_in_use,
        pool_waiting,
        queue_batches: QUEUE_BATCHES.load(Relaxed),
        queue_rows: QUEUE_ROWS.load(Relaxed),
        queue_wait_micros: QUEUE_WAIT_MICROS.load(Relaxed),
        queue_batch_max: QUEUE_BATCH_MAX.load(Relaxed),
    }
}
