//! The one seam between live answers and the read path: the subscriptions of one shape in,
//! one answer each out. Each answer is what the subscription's GET would answer now: the plan
//! of its shape taken from the current snapshot (so the same visitor, roles, `Access` and
//! `Request` rules are applied again on every refetch), bound with the subscription's values
//! and run as `/get` runs it.

use super::answer::Written;
use super::registry::{Query, Shared};
use super::Live;
use apijet_core::Method;
use apijet_plan::read::{Dependencies, ReadPlan};
use apijet_response::ApiError;
use serde_json::Value as Json;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// What one refetch of a shape did.
pub struct Refetched {
    /// What the plans it ran depend on.
    pub deps: Dependencies,
    /// How many reads ran (the cost grows with this, not with the subscribers).
    pub ran: usize,
}

/// Refetches the results of one shape: each result publishes its new answer as soon as it is
/// read. At most `permits` reads run at once across every shape; reads run as tasks of their
/// own, so that they use every core.
pub async fn refetch(
    live: &Arc<Live>,
    results: &Arc<[Arc<Shared>]>,
    permits: &Arc<Semaphore>,
) -> Refetched {
    let together = match &results[..] {
        [_, _, ..] => super::multiplex::read_together(live, results, permits).await,
        _ => super::multiplex::Together {
            alone: (0..results.len()).collect(),
            deps: Dependencies::default(),
            ran: 0,
        },
    };
    // The results of a shape share its plan, planned once per refetch, unless it holds a
    // visitor's own values (then each is planned for its visitor, as its GET is).
    let shared = match together.alone.first() {
        Some(&i) => plan(live, &results[i].query)
            .ok()
            .and_then(|(plan, values)| (values.is_none() && !plan.visitor_bound).then_some(plan)),
        None => None,
    };
    let tasks: Vec<_> = together
        .alone
        .iter()
        .map(|&i| {
            let (live, results, permits, shared) = (
                Arc::clone(live),
                Arc::clone(results),
                Arc::clone(permits),
                shared.clone(),
            );
            tokio::spawn(async move {
                let _permit = permits.acquire().await;
                let (answer, deps) = read_with(&live, &results[i].query, shared).await;
                results[i].publish(Written::of(answer));
                deps
            })
        })
        .collect();
    let alone = futures_util::future::join_all(tasks).await;
    let mut deps = together.deps;
    for d in alone.iter().flatten().flatten() {
        deps.merge(d);
    }
    Refetched {
        deps,
        ran: together.ran + alone.len(),
    }
}

/// What the query's GET (or GETS, HEAD, HEADS) answers now, and what its plan depends on
/// (none when it could not be planned).
pub async fn read_once(live: &Live, query: &Query) -> (Json, Option<Dependencies>) {
    read_with(live, query, None).await
}

/// [`read_once`], with the plan of its shape when the caller has it already.
async fn read_with(
    live: &Live,
    query: &Query,
    shared: Option<Arc<ReadPlan>>,
) -> (Json, Option<Dependencies>) {
    let mut watch = apijet_exec::cancel::current();
    if query.visitor.is_none() && !live.settings.anonymous_timeout.is_zero() {
        // The statements of a visitor who is not logged in stop as their GET's do.
        watch = watch.with_timeout(
            live.settings.anonymous_timeout,
            "anonymous_statement_timeout_ms",
        );
    }
    let pipeline = &live.pipeline;
    let planned = match shared {
        Some(plan) => Ok((plan, None)),
        None => plan(live, query),
    };
    let deps = planned
        .as_ref()
        .ok()
        .map(|(plan, _)| plan.dependencies().clone());
    let read = async {
        let (plan, values) = planned?;
        let values = values.as_deref().unwrap_or(&query.values);
        pipeline
            .read_whole(&plan, values, query.visitor.as_ref(), None)
            .await
    };
    let answer = match apijet_exec::cancel::watched(watch, read).await {
        Ok(a) => a,
        Err(e) => pipeline.failure(&e),
    };
    (answer, deps)
}

/// The plan of the query's shape in the current snapshot, with the values to bind when they
/// are not the query's own (GETS and HEADS are verified again: the `Request` structures may
/// have changed).
fn plan(live: &Live, query: &Query) -> Result<(Arc<ReadPlan>, Option<Vec<Json>>), ApiError> {
    let pipeline = &live.pipeline;
    let snapshot = pipeline.snapshot();
    let visitor = query.visitor.as_ref();
    match query.method {
        Method::Get | Method::Head => {
            let plan = pipeline.plan_of(&query.req, query.method, visitor, &snapshot)?;
            Ok((plan, None))
        }
        Method::Gets | Method::Heads => {
            let verified = pipeline.verify(query.method, query.map.clone(), &snapshot)?;
            let (req, values) = pipeline.shape_of(verified)?;
            let plan = pipeline.plan_of(&req, query.method, visitor, &snapshot)?;
            Ok((plan, Some(values)))
        }
        other => Err(ApiError::UnknownMethod(format!(
            "{other} cannot be subscribed to: only get, gets, head and heads"
        ))),
    }
}
