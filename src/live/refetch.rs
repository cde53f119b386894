//! The one seam between live answers and the pipeline: the subscriptions of one shape in, one
//! answer each out. Each answer is what the subscription's GET would answer now, read through
//! the pipeline's stages: the plan of its shape taken from the current snapshot (so the same
//! visitor, roles, `Access` and `Request` rules are applied again on every refetch; GETS and
//! HEADS are prepared again, as their `Request` structures may have changed), run as a
//! refetch.

use super::answer::Written;
use super::registry::{Query, Shared};
use super::Live;
use crate::observe::Facts;
use crate::pipeline::plan::{Action, Purpose, SharedPlan};
use crate::pipeline::prepare::{Asked, Body, Call};
use crate::pipeline::run::Origin;
use crate::pipeline::Pipeline;
use apijet_plan::read::Dependencies;
use apijet_response::ApiError;
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
    // visitor's own values (then each is planned for its visitor, as its GET is) or its
    // request is prepared again (GETS, HEADS).
    let shared = together.alone.first().and_then(|&i| {
        let query = &results[i].query;
        if query.source.is_some() {
            return None;
        }
        let pipeline = &live.pipeline;
        let planned = pipeline.plan_read(
            &pipeline.snapshot(),
            &query.read,
            &query.client,
            Purpose::Whole,
        );
        planned.ok()?.shared()
    });
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
                let (written, deps) = read(&live.pipeline, &results[i].query, shared).await;
                results[i].publish(written);
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

/// What the query's GET (or GETS, HEAD, HEADS) answers now, written (an error as its
/// envelope), and what its plan depends on (none when it could not be planned); with the plan
/// of its shape when the caller has it already.
async fn read(
    pipeline: &Arc<Pipeline>,
    query: &Query,
    shared: Option<SharedPlan>,
) -> (Written, Option<Dependencies>) {
    let mut deps = None;
    let answer = async {
        let again;
        let read = match &query.source {
            Some(source) => {
                let method = query.method.name().to_ascii_lowercase();
                let call = Call {
                    method: &method,
                    tag: None,
                    query: &[],
                    body: Body::Sent(source),
                };
                again = pipeline.prepare(call, &query.client, &mut Facts::default())?;
                match &again.asked {
                    Asked::Read(read) => read,
                    _ => return Err(ApiError::Internal("a subscription is no read".into())),
                }
            }
            None => &query.read,
        };
        let action = match &shared {
            Some(plan) => plan.bind(&read.values),
            None => {
                pipeline.plan_read(&pipeline.snapshot(), read, &query.client, Purpose::Whole)?
            }
        };
        deps = Some(action.plan.dependencies().clone());
        let action = Action::Read(action);
        let mut facts = Facts::default();
        let answered = pipeline.run(action, &query.client, Origin::Refetch, &mut facts);
        answered.await?.into_json()
    }
    .await;
    let written = match answer {
        Ok(answer) => Written::of(answer),
        Err(e) => Written::of(pipeline.failure(&e)),
    };
    (written, deps)
}
