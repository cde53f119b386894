//! The tables committed writes changed, for whoever follows them (live answers): every write
//! through the pipeline tells its plan's [`changes`](apijet_plan::write::WritePlan::changes)
//! once it has committed, and a reload tells "every table". Nothing is kept while no one
//! follows, so a server without subscriptions pays one atomic load per write.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use tokio::sync::Notify;

/// What stands for every table: a reload (the rules may have changed), lost notifications.
pub const EVERY_TABLE: &str = "*";

/// Tables changed since the follower last took them.
#[derive(Default)]
pub struct Changes {
    followed: AtomicBool,
    tables: Mutex<BTreeSet<String>>,
    changed: Notify,
}

impl Changes {
    /// From now on, changes are kept until taken.
    pub fn follow(&self) {
        self.followed.store(true, Ordering::Relaxed);
    }

    /// A committed write changed `tables` (SQL names, or [`EVERY_TABLE`]).
    pub fn committed<'a>(&self, tables: impl IntoIterator<Item = &'a str>) {
        if !self.followed.load(Ordering::Relaxed) {
            return;
        }
        let mut any = false;
        if let Ok(mut kept) = self.tables.lock() {
            for t in tables {
                any = true;
                if !kept.contains(t) {
                    kept.insert(t.to_string());
                }
            }
        }
        if any {
            self.changed.notify_one();
        }
    }

    /// The tables changed since the last call, leaving none.
    pub fn take(&self) -> BTreeSet<String> {
        self.tables
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default()
    }

    /// Waits until a change is told (at once when one was told since the last wait).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}
