//! The one seam between live answers and the read path: the subscriptions of one shape in,
//! one answer each out. Each answer is what the subscription's GET would answer now: the same
//! visitor, roles, `Access` and `Request` rules, applied again on every refetch with the
//! current snapshot.

use super::answer::Written;
use super::registry::{Query, Shared};
use crate::app::AppState;
use apijet_core::Method;
use apijet_exec::read::read;
use apijet_plan::reads::Reads;
use apijet_plan::PlanError;
use apijet_request::Request;
use apijet_response::{success, ApiError};
use serde_json::Value as Json;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// The shape of a query: the results of one shape are refetched together, at most once per
/// interval. Queries that [`multiplex`](super::multiplex) can read together share a shape
/// when only their first object's `id` differs; any other query is a shape of its own (until
/// the planner gives every read a shape, issue 18).
pub fn shape_of(query: &Query) -> String {
    super::multiplex::shape(query).unwrap_or_else(|| query.key())
}

/// What one refetch of a shape did.
pub struct Refetched {
    /// What the reads depended on.
    pub reads: Reads,
    /// How many reads ran (the cost grows with this, not with the subscribers).
    pub ran: usize,
}

/// Refetches the results of one shape: each result publishes its new answer as soon as it is
/// read. At most `permits` reads run at once across every shape; reads run as tasks of their
/// own, so that they use every core.
pub async fn refetch(
    state: &Arc<AppState>,
    results: &Arc<[Arc<Shared>]>,
    permits: &Arc<Semaphore>,
) -> Refetched {
    let together = match &results[..] {
        [_, _, ..] => super::multiplex::read_together(state, results, permits).await,
        _ => super::multiplex::Together {
            alone: (0..results.len()).collect(),
            reads: Reads::default(),
            ran: 0,
        },
    };
    let mut all = together.reads;
    let tasks: Vec<_> = together
        .alone
        .iter()
        .map(|&i| {
            let (state, results, permits) =
                (Arc::clone(state), Arc::clone(results), Arc::clone(permits));
            tokio::spawn(async move {
                let _permit = permits.acquire().await;
                let (answer, reads) = read_once(&state, &results[i].query).await;
                results[i].publish(Written::of(answer));
                reads
            })
        })
        .collect();
    let alone = futures_util::future::join_all(tasks).await;
    for reads in alone.iter().flatten() {
        all.merge(reads);
    }
    Refetched {
        reads: all,
        ran: together.ran + alone.len(),
    }
}

/// What the query's GET (or GETS, HEAD, HEADS) answers now, and what that read depends on.
pub async fn read_once(state: &AppState, query: &Query) -> (Json, Reads) {
    let reads = Mutex::new(Reads::default());
    let mut watch = apijet_exec::cancel::current();
    if query.visitor.is_none() {
        // The statements of a visitor who is not logged in stop as their GET's do.
        watch = watch.with_timeout(state.anonymous.timeout, "anonymous_statement_timeout_ms");
    }
    let answer = match apijet_exec::cancel::watched(watch, answer(state, query, &reads)).await {
        Ok(a) => a,
        Err(e) => state.failure(&e),
    };
    (
        answer,
        reads.into_inner().unwrap_or_else(|e| e.into_inner()),
    )
}

async fn answer(state: &AppState, query: &Query, reads: &Mutex<Reads>) -> Result<Json, ApiError> {
    let visitor = query.visitor.as_ref();
    crate::app::check_login_schema(visitor, &query.map, &state.options)?;
    if !query.method.is_public() && visitor.is_none() {
        return Err(PlanError::NotLoggedIn.into());
    }
    let snapshot = state.snapshot();
    let map = match query.method {
        Method::Get | Method::Head => query.map.clone(),
        Method::Gets | Method::Heads => state.verify(query.method, query.map.clone(), &snapshot)?,
        other => {
            return Err(ApiError::UnknownMethod(format!(
                "{other} cannot be subscribed to: only get, gets, head and heads"
            )))
        }
    };
    let req = Request::from_map(map)?;
    let reader = state.reader(query.method);
    let mut env = state.read_env(reader, query.method, visitor, &snapshot);
    env.reads = Some(reads);
    let outcome = match read(&req, &env).await {
        Err(e) if !Arc::ptr_eq(reader, &state.backend) && crate::app::unreachable(&e) => {
            let mut env = state.read_env(&state.backend, query.method, visitor, &snapshot);
            env.reads = Some(reads);
            read(&req, &env).await?
        }
        other => other?,
    };
    Ok(success(outcome.results, req.format))
}
