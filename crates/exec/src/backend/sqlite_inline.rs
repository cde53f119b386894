//! Bounded reads on the async worker that asks for them.
//!
//! A job ([`super::sqlite_jobs`]) costs a point lookup more than its statement: a hand-off to a
//! blocking thread, a channel, wake-ups and context switches on a machine of few cores. A read
//! whose plan proves its cost bounded ([`apijet_sql::Statement::bounded`]: at most one row by a
//! unique key, plain columns and comparisons only, so its steps are few and each is cheap)
//! runs where it is called instead, on an idle pooled connection; when none is idle, or the
//! statement is not bounded, it runs as a job, as every other statement does. Writes and the
//! statements of transactions are never bounded: they stay jobs, behind the write lock.
//!
//! The plan's proof is backed by the engine's own count: a connection's progress handler
//! ([`super::sqlite_budget::StepBudget`]) interrupts an inline statement past its VM instructions
//! ([`INLINE_STEPS`]), and a statement that finds a second row stops too (a proof that was
//! wrong: an index that compares in another collation than the column, a schema changed under
//! the plan). Its row was only copied, never handed on, so it runs again as a job, from the
//! start, under the job's deadline and watchdog: reads are idempotent. An inline read ends in
//! about the time of the row it reads, so it needs neither the watchdog (nothing awaits while
//! it runs, so no client can leave it half-way) nor a thread slot: it holds its worker about as
//! long as parsing its request did, and the slots ([`crate::fair`]) still share the threads
//! between the clients whose statements can be expensive.

use super::sqlite_cells::cell;
use super::sqlite_jobs::{Fed, Output};
use crate::cell::Cell;
use crate::sink::RowSink;
use crate::ExecError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How many VM instructions an inline statement may run before it moves to a job: a lookup
/// through an index takes a few dozen.
pub(super) const INLINE_STEPS: u32 = 10_000;

/// How an inline read went.
pub(super) enum Inline {
    /// It ran to its end: its output columns and its rows.
    Read(Arc<Output>, Box<Fed>),
    /// It failed as it would have as a job.
    Failed(ExecError),
    /// It must run as a job: no connection was idle, it ran out of steps, or it found a
    /// second row.
    Moved,
}

/// How many reads ran inline and how many of those moved to a job, for tests and metrics.
#[derive(Debug, Default)]
pub struct InlineReads {
    ran: AtomicU64,
    moved: AtomicU64,
}

impl InlineReads {
    pub(super) fn count(&self, inline: &Inline) {
        let counter = match inline {
            Inline::Moved => &self.moved,
            Inline::Read(..) | Inline::Failed(_) => &self.ran,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads answered inline.
    pub fn ran(&self) -> u64 {
        self.ran.load(Ordering::Relaxed)
    }

    /// Bounded reads that ran as jobs instead: out of steps, a second row, or no idle
    /// connection.
    pub fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }
}

/// Hands the rows of an inline read to `sink`, as a job's are handed, and flushes it when it
/// asks to be.
pub(super) async fn hand_over<S: RowSink>(
    output: &Output,
    fed: Box<Fed>,
    sink: &mut S,
) -> Result<u64, ExecError> {
    sink.columns(output.names.iter().map(String::as_str));
    let mut n = 0u64;
    if !output.kinds.is_empty() {
        let mut cells: Vec<Cell<'_>> = Vec::with_capacity(output.kinds.len());
        for row in fed.raws().chunks(output.kinds.len()) {
            cells.clear();
            for (raw, decl) in row.iter().zip(&output.kinds) {
                cells.push(cell(fed.value(*raw), *decl));
            }
            sink.row(&cells)?;
            n += 1;
        }
    }
    drop(fed);
    if sink.wants_flush() {
        sink.flush().await?;
    }
    Ok(n)
}
