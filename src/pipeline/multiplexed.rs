//! A multiplexed read: the plan of a read's shape over a list of values of one of its slots
//! (`apijet_plan::read::MultiplexPlan`), planned from the shape's plan with the slot as its
//! input, and run for many clients at once (live answers' subscriptions of one shape): each
//! listed value's answer written as `/get` writes it, held whole, without its `time`. Nothing
//! is parsed back: the rows go from the cursor to each answer's writer, routed by the key
//! they carry. Each client's part is admitted as its own refetch.

use super::plan::Purpose;
use super::prepare::{Client, Shaped};
use super::snapshot::Snapshot;
use super::Pipeline;
use crate::ledger::Kind;
use apijet_exec::read::run_multiplexed;
use apijet_plan::read::{Dependencies, ListKind, MultiplexPlan, ReadPlan};
use apijet_response::answer::AnswerWriter;
use apijet_response::ApiError;
use bytes::Bytes;
use serde_json::Value as Json;
use std::sync::Arc;

/// The plan of a shape over a list of one slot's values, and what it depends on.
pub struct Multiplexed {
    /// The plan.
    pub plan: Arc<MultiplexPlan>,
    /// The plan of the shape it was made from (a nested list's items and a record view's
    /// members are read by it).
    pub shape: Arc<ReadPlan>,
    /// The plan holds the visitor's own values: only one visitor's requests share a list.
    pub visitor_bound: bool,
}

impl Pipeline {
    /// The slots over which `shaped`'s shape (read by `client`) can be multiplexed.
    pub fn multiplex_slots(
        &self,
        snapshot: &Snapshot,
        shaped: &Shaped,
        client: &Client,
    ) -> Result<(Vec<usize>, Dependencies), ApiError> {
        let read = self.plan_read(snapshot, shaped, client, Purpose::Answer)?;
        Ok((
            MultiplexPlan::slots(&read.plan),
            read.plan.dependencies().clone(),
        ))
    }

    /// Plans `shaped`'s shape (read by `client`) over a list of values of `slot`: `None`
    /// when its first statement, the one the list is joined into, does not lead its answer.
    pub fn plan_multiplexed(
        &self,
        snapshot: &Snapshot,
        shaped: &Shaped,
        client: &Client,
        slot: usize,
    ) -> Result<Option<Multiplexed>, ApiError> {
        let read = self.plan_read(snapshot, shaped, client, Purpose::Answer)?;
        Ok(read.plan.multiplexed(slot).ok().map(|plan| Multiplexed {
            plan,
            visitor_bound: read.plan.visitor_bound,
            shape: Arc::clone(&read.plan),
        }))
    }

    /// Runs `planned` for the values `listed` of its slot, the other slots holding `values`, one
    /// value per client of `clients` (each admitted as a refetch of its own; their visitors
    /// are alike, or the plan would not be shared): per listed value its answer's text
    /// without `time`, or `None` where that answer passed its budget or its client was not
    /// admitted (it is read alone, which says why).
    ///
    /// The answers are held at once, so together they stay within one answer's budget
    /// (`max_answer_bytes`): each within its share, a larger one read alone.
    pub async fn run_multiplexed(
        &self,
        planned: &Multiplexed,
        values: &[Json],
        listed: &[(Json, &Client)],
        kind: ListKind,
    ) -> Result<Vec<Option<Bytes>>, ApiError> {
        // One statement reads for all of them: it is one read under way per client, however
        // many of that client's subscriptions it serves (counted once per subscriber, one
        // address's nine subscriptions held nine of its anonymous reads, and its next first
        // read was refused while they ran).
        let mut admitted = std::collections::HashMap::with_capacity(listed.len());
        let mut keys = Vec::with_capacity(listed.len());
        let mut list = Vec::with_capacity(listed.len());
        for (i, (value, client)) in listed.iter().enumerate() {
            let counted = client.counted();
            if let std::collections::hash_map::Entry::Vacant(e) = admitted.entry(counted) {
                match self.ledger.admit(counted, Kind::Refetch) {
                    Ok(a) => {
                        e.insert(a);
                    }
                    Err(_) => continue,
                }
            }
            keys.push(i);
            list.push(value.clone());
        }
        let mut answers = vec![None; listed.len()];
        let Some(first) = listed.first() else {
            return Ok(answers);
        };
        if list.is_empty() {
            return Ok(answers);
        }
        let mut watch = apijet_exec::cancel::current();
        if let Some((timeout, setting)) = admitted.values().find_map(|a| a.timeout()) {
            watch = watch.with_timeout(timeout, setting);
        }
        let visitor = first.1.visitor.as_ref();
        // Only GETs are read together (GETS are prepared again on every refetch).
        let reader = self.reader(apijet_core::Method::Get);
        let env = self.env(reader, visitor, values);
        let opts = &self.options;
        let share = opts.max_answer_bytes / list.len();
        let mut sinks: Vec<AnswerWriter<'_>> = list
            .iter()
            .map(|_| AnswerWriter::held(opts.max_rows, share))
            .collect();
        let run = run_multiplexed(&planned.shape, &planned.plan, &env, &list, kind, &mut sinks);
        let done = apijet_exec::cancel::watched(watch, run).await?;
        for ((key, sink), &i) in sinks.into_iter().enumerate().zip(&keys) {
            if done.refused.binary_search(&key).is_err() {
                answers[i] = sink.untimed().await.ok();
            }
        }
        drop(admitted);
        Ok(answers)
    }
}
