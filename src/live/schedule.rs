//! When to refetch: the scheduler follows the generations of what writes changed, and a moved
//! table makes the shapes that read it due; a shape starts a refetch at most once per
//! `live_interval_ms`, and without changes every `live_poll_ms` when set (or every interval
//! when its answer depends on the clock). Refetches run as tasks; the reads in them share
//! `live_concurrency` permits.

use super::registry::{Due, Shared};
use super::Live;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Semaphore;

/// The scheduler of one instance; ends on shutdown.
pub async fn run(live: Arc<Live>) {
    let permits = Arc::new(Semaphore::new(live.settings.concurrency));
    let mut stop = live.stop.subscribe();
    // With no shape due the loop still looks once a second, so that the gauges of open
    // subscriptions follow the ones that ended; a mark or a new shape wakes it earlier.
    let idle = std::time::Duration::from_secs(1);
    let mut next: Option<tokio::time::Instant> = None;
    let changes = &live.pipeline.changes;
    let mut seen = changes.follow();
    loop {
        let soon = tokio::time::Instant::now() + idle;
        let sleep_until = next.map_or(soon, |n| n.min(soon));
        tokio::select! {
            () = live.wake.notified() => {}
            () = changes.wait(seen) => {}
            () = tokio::time::sleep_until(sleep_until) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let now = Instant::now();
        let (moved, stamp) = changes.since(seen);
        seen = stamp;
        live.registry.apply_marks(&moved);
        let (due, at) = live.registry.due(now, &live.settings);
        next = at.map(tokio::time::Instant::from_std);
        let (open, shapes, held) = live.registry.counts();
        live.pipeline.metrics.live_counts(open, shapes, held);
        for d in due {
            tokio::spawn(refetch(Arc::clone(&live), d, Arc::clone(&permits)));
        }
    }
}

async fn refetch(live: Arc<Live>, due: Due, permits: Arc<Semaphore>) {
    let started = Instant::now();
    let results: Arc<[Arc<Shared>]> = due.results.into();
    let done = super::refetch::refetch(&live, &results, &permits).await;
    live.pipeline
        .metrics
        .live_refetch(results.len(), done.ran, started.elapsed().as_secs_f64());
    live.registry.finished(&due.shape, &done.deps);
    // It may be due again already (marked while it ran).
    live.wake.notify_one();
}
