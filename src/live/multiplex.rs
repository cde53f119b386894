//! Subscriptions of one plan shape read together: the plan of the shape over a list of one
//! slot's values (`apijet_plan::read::MultiplexPlan`), one statement for many subscriptions,
//! whose rows reach each subscription's answer by the key each row carries (the position of
//! its value in the list), never by a column of the answer.
//!
//! The subscriptions of a shape share their request but for their values. For each slot the
//! shape's statement binds, those whose other values (and visitor, when the plan holds the
//! visitor's own values) are the same can be read over that slot; the slot that leaves the
//! fewest reads is chosen. A subscription whose answer passes its share of the read's budget,
//! one that wants patches (its answers are kept as JSON), a shape that its first statement
//! does not lead (see `apijet_plan::read::MultiplexPlan`: a point, a list, a nested list, or a
//! record view whose later members refer to its first object), and a failed read are read
//! alone, as their GET is.

use super::answer::Written;
use super::registry::Shared;
use super::Live;
use crate::pipeline::multiplexed::Multiplexed;
use crate::pipeline::prepare::Client;
use apijet_core::Method;
use apijet_plan::read::{Dependencies, ListKind};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::Arc;

/// Subscriptions read together at most: the length of one list.
const CHUNK: usize = 1000;

/// What reading a shape's results together gave.
pub struct Together {
    /// The results it could not answer: each is read alone.
    pub alone: Vec<usize>,
    /// What the plan it ran depends on.
    pub deps: Dependencies,
    /// How many reads ran.
    pub ran: usize,
}

/// One list read together: the results it answers, their kind, and the values of the others
/// slots (the first result's).
struct Group {
    kind: ListKind,
    members: Vec<usize>,
}

/// The groups of `results` read together over `plan`'s slot, and the results left alone.
fn groups(plan: &Multiplexed, results: &[Arc<Shared>]) -> Vec<Group> {
    let mut by_key: HashMap<String, Group> = HashMap::new();
    for (i, r) in results.iter().enumerate() {
        if r.wants_patches() || r.query.method != Method::Get || r.query.source.is_some() {
            continue;
        }
        let Some(kind) = plan.plan.accepts(&r.query.read.values) else {
            continue;
        };
        let mut others = r.query.read.values.clone();
        others[plan.plan.slot] = Json::Null;
        let visitor = match plan.visitor_bound {
            true => format!("{:?}", r.query.visitor()),
            false => String::new(),
        };
        let key = format!("{kind:?}\u{0}{visitor}\u{0}{}", Json::Array(others));
        by_key
            .entry(key)
            .or_insert_with(|| Group {
                kind,
                members: Vec::new(),
            })
            .members
            .push(i);
    }
    by_key
        .into_values()
        .filter(|g| g.members.len() > 1)
        .collect()
}

/// Reads the results of one shape together where they can be, each list a task of its own
/// as `permits` allow; each answer is published as soon as its list is read.
pub async fn read_together(
    live: &Arc<Live>,
    results: &Arc<[Arc<Shared>]>,
    permits: &Arc<tokio::sync::Semaphore>,
) -> Together {
    let all = || (0..results.len()).collect::<Vec<_>>();
    let query = &results[0].query;
    if results.len() < 2 || query.method != Method::Get {
        return Together {
            alone: all(),
            deps: Dependencies::default(),
            ran: 0,
        };
    }
    let pipeline = &live.pipeline;
    let snapshot = pipeline.snapshot();
    let Ok((slots, deps)) = pipeline.multiplex_slots(&snapshot, &query.read, &query.client) else {
        return Together {
            alone: all(),
            deps: Dependencies::default(),
            ran: 0,
        };
    };
    // The slot whose lists leave the fewest reads.
    let mut best: Option<(usize, Arc<Multiplexed>, Vec<Group>)> = None;
    for slot in slots {
        let planned = pipeline.plan_multiplexed(&snapshot, &query.read, &query.client, slot);
        let Ok(Some(plan)) = planned else {
            continue;
        };
        let groups = groups(&plan, results);
        let together: usize = groups.iter().map(|g| g.members.len()).sum();
        let reads = groups.len() + results.len() - together;
        if best.as_ref().is_none_or(|(r, ..)| reads < *r) {
            best = Some((reads, Arc::new(plan), groups));
        }
    }
    let Some((_, plan, groups)) = best else {
        return Together {
            alone: all(),
            deps,
            ran: 0,
        };
    };
    let mut answered = vec![false; results.len()];
    let mut chunks = Vec::new();
    for g in groups {
        for chunk in g.members.chunks(CHUNK) {
            chunks.push((g.kind, chunk.to_vec()));
        }
    }
    let ran = chunks.len();
    let tasks = chunks.into_iter().map(|(kind, chunk)| {
        let (live, results, permits, plan) = (
            Arc::clone(live),
            Arc::clone(results),
            Arc::clone(permits),
            Arc::clone(&plan),
        );
        tokio::spawn(async move {
            let _permit = permits.acquire().await;
            read_list(&live, &plan, &results, &chunk, kind).await
        })
    });
    for done in futures_util::future::join_all(tasks.collect::<Vec<_>>()).await {
        for i in done.into_iter().flatten() {
            if let Some(a) = answered.get_mut(i) {
                *a = true;
            }
        }
    }
    Together {
        alone: (0..results.len()).filter(|i| !answered[*i]).collect(),
        deps,
        ran,
    }
}

/// One list read together: publishes the answers it has; returns the results it answered.
async fn read_list(
    live: &Live,
    plan: &Multiplexed,
    results: &[Arc<Shared>],
    chunk: &[usize],
    kind: ListKind,
) -> Vec<usize> {
    let Some(&first) = chunk.first() else {
        return Vec::new();
    };
    let query = &results[first].query;
    let listed: Vec<(Json, &Client)> = chunk
        .iter()
        .map(|&i| {
            let q = &results[i].query;
            (q.read.values[plan.plan.slot].clone(), &q.client)
        })
        .collect();
    let read = live
        .pipeline
        .run_multiplexed(plan, &query.read.values, &listed, kind);
    let answers = match read.await {
        Ok(answers) => answers,
        Err(e) => {
            // Each is read alone, which answers the error to whom it concerns.
            tracing::debug!(
                "a multiplexed read failed, its {} results are read alone: {e}",
                chunk.len()
            );
            return Vec::new();
        }
    };
    let time = apijet_response::now_ms();
    let mut answered = Vec::with_capacity(chunk.len());
    for (&i, answer) in chunk.iter().zip(answers) {
        if let Some(text) = answer {
            results[i].publish(Written::untimed(text, time));
            answered.push(i);
        }
    }
    answered
}
