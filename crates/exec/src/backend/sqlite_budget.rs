//! The step budget of a SQLite connection's inline reads ([`super::sqlite_inline`]): SQLite's
//! own count of the VM instructions a statement runs, which stops it when it ran too many.

use rusqlite::Connection;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// How often (in VM instructions) a connection's progress handler counts.
const PERIOD: i32 = 100;

/// The budget of a statement that is not inline: never spent.
const UNARMED: i64 = i64::MAX;

/// The steps an inline statement has left on its connection, counted by SQLite's progress
/// handler: every [`PERIOD`] VM instructions it takes one, and interrupts the statement once
/// none are left. Unarmed (any statement but an inline one), it never interrupts.
pub(super) struct StepBudget(Arc<AtomicI64>);

impl StepBudget {
    /// Installs the handler on `db`, unarmed.
    pub(super) fn install(db: &Connection) -> StepBudget {
        let left = Arc::new(AtomicI64::new(UNARMED));
        let counted = Arc::clone(&left);
        db.progress_handler(
            PERIOD,
            Some(move || counted.fetch_sub(1, Ordering::Relaxed) <= 0),
        );
        StepBudget(left)
    }

    /// The statement about to step may run about `steps` VM instructions.
    pub(super) fn arm(&self, steps: u32) {
        let periods = i64::from(steps) / i64::from(PERIOD);
        self.0.store(periods, Ordering::Relaxed);
    }

    /// Disarms the budget; true when the statement ran out of it.
    pub(super) fn disarm(&self) -> bool {
        self.0.swap(UNARMED, Ordering::Relaxed) < 0
    }
}
