//! The second stage: a prepared call becomes an [`Action`], a read, a write or `/crud`, planned
//! against the snapshot it was prepared with. A read's plan comes from the snapshot's plans by
//! shape; what its answer is for ([`Purpose`]) is an input of planning, so the plan says how it
//! is produced and no caller changes that afterwards.

use super::prepare::{Asked, Client, Shaped, Writing};
use super::snapshot::Snapshot;
use super::Pipeline;
use apijet_plan::read::{self, ReadPlan};
use apijet_plan::write::WritePlan;
use apijet_plan::PlanOptions;
use apijet_response::ApiError;
use serde_json::Value as Json;
use std::sync::Arc;

/// What a read's answer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// An answer to the client, in the form that suits it (a point written as its row is
    /// read, a list streamed from the cursor).
    Answer,
    /// The whole answer as JSON, for the server itself: a part of `/crud`, a live answer.
    Whole,
}

/// What a call does, planned: the third stage ([`Pipeline::run`]) runs it.
pub enum Action<'p> {
    /// A read.
    Read(ReadAction<'p>),
    /// A write.
    Write(WriteAction),
    /// `/crud`: its writes, then its reads.
    Crud(CrudAction<'p>),
}

/// A read: the plan of its shape and the values it binds.
pub struct ReadAction<'p> {
    /// The plan.
    pub plan: Arc<ReadPlan>,
    /// Its values, slot by slot.
    pub(super) values: &'p [Json],
    /// Budgets of its own, when they are not the pipeline's (a read together).
    pub(super) options: Option<Arc<PlanOptions>>,
}

impl ReadAction<'_> {
    /// Its plan, for the other requests of its shape: none when it holds the visitor's own
    /// values or budgets of its own.
    pub fn shared(&self) -> Option<SharedPlan> {
        (!self.plan.visitor_bound && self.options.is_none())
            .then(|| SharedPlan(Arc::clone(&self.plan)))
    }
}

/// The plan of a shape, shared by the requests of the shape (the subscriptions of one shape,
/// refetched together).
#[derive(Clone)]
pub struct SharedPlan(Arc<ReadPlan>);

impl SharedPlan {
    /// The read of a request of the shape, with its `values`.
    pub fn bind<'q>(&self, values: &'q [Json]) -> ReadAction<'q> {
        ReadAction {
            plan: Arc::clone(&self.0),
            values,
            options: None,
        }
    }
}

/// A write: its plan, the form of its answer and the snapshot it was planned on.
pub struct WriteAction {
    pub(super) plan: WritePlan,
    pub(super) format: bool,
    pub(super) snapshot: Arc<Snapshot>,
}

/// `/crud`: the writes in request order, each with the key it answers, run in one
/// transaction; then the reads, which see them.
pub struct CrudAction<'p> {
    pub(super) writes: Vec<(&'p str, WritePlan)>,
    pub(super) reads: Vec<(&'p str, ReadAction<'p>)>,
    pub(super) snapshot: Arc<Snapshot>,
}

impl Pipeline {
    /// Plans what `asked` asks of `client`, for `purpose`, on `snapshot`.
    pub fn plan<'p>(
        &self,
        snapshot: &Arc<Snapshot>,
        asked: &'p Asked,
        client: &Client,
        purpose: Purpose,
    ) -> Result<Action<'p>, ApiError> {
        Ok(match asked {
            Asked::Read(shaped) => Action::Read(self.plan_read(snapshot, shaped, client, purpose)?),
            Asked::Write(writing) => Action::Write(self.plan_write(snapshot, writing, client)?),
            Asked::Crud(parts) => {
                let mut writes = Vec::new();
                let mut reads = Vec::new();
                for (key, part) in parts {
                    match part {
                        Asked::Read(shaped) => reads.push((
                            key.as_str(),
                            self.plan_read(snapshot, shaped, client, Purpose::Whole)?,
                        )),
                        Asked::Write(writing) => writes.push((
                            key.as_str(),
                            self.plan_write(snapshot, writing, client)?.plan,
                        )),
                        Asked::Crud(_) => {
                            return Err(ApiError::Internal("a part of /crud is a /crud".into()))
                        }
                    }
                }
                Action::Crud(CrudAction {
                    writes,
                    reads,
                    snapshot: Arc::clone(snapshot),
                })
            }
        })
    }

    /// Plans a read of `shaped` by `client` for `purpose`: the plan kept for its shape (a
    /// subscription's read keeps its shape and is planned again on every refetch).
    pub fn plan_read<'p>(
        &self,
        snapshot: &Snapshot,
        shaped: &'p Shaped,
        client: &Client,
        purpose: Purpose,
    ) -> Result<ReadAction<'p>, ApiError> {
        let inputs = self.context(shaped.method, client.visitor.as_ref(), snapshot, false);
        let kept = match purpose {
            Purpose::Answer => read::Purpose::Answer,
            Purpose::Whole => read::Purpose::Whole,
        };
        Ok(ReadAction {
            plan: snapshot.plans.plan_for(&shaped.req, &inputs, kept)?,
            values: &shaped.values,
            options: None,
        })
    }

    fn plan_write(
        &self,
        snapshot: &Arc<Snapshot>,
        writing: &Writing,
        client: &Client,
    ) -> Result<WriteAction, ApiError> {
        let visitor = client.visitor.as_ref();
        let inputs = self.context(writing.method, visitor, snapshot, writing.trusted);
        Ok(WriteAction {
            plan: WritePlan::build(&writing.req, &writing.checks, &inputs)?,
            format: writing.req.format,
            snapshot: Arc::clone(snapshot),
        })
    }
}
