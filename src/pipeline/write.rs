//! Writes: a write plan in a transaction of its own, a single-row POST through the write
//! queue, and the writes the server makes itself for the account endpoints and sign-ups; each
//! tells what it changed once it has committed.

use super::snapshot::Snapshot;
use super::Pipeline;
use apijet_core::{Method, Visitor};
use apijet_exec::write::{single_insert, single_insert_answer, write};
use apijet_plan::verify::ExistenceCheck;
use apijet_plan::write::WritePlan;
use apijet_request::Request;
use apijet_response::ApiError;
use serde_json::{Map, Value as Json};

impl Pipeline {
    /// A single-row POST goes through the write queue when it is on.
    pub(crate) async fn queued(
        &self,
        plan: &WritePlan,
        visitor: Option<&Visitor>,
        snapshot: &Snapshot,
    ) -> Result<Option<Map<String, Json>>, ApiError> {
        let Some(queue) = &self.queue else {
            return Ok(None);
        };
        let env = self.write_env(visitor, snapshot);
        let Some((key, insert, id)) = single_insert(plan, &env)? else {
            return Ok(None);
        };
        queue.insert(insert).await?;
        self.told(plan);
        let mut out = Map::new();
        let answer = apijet_response::written_object(single_insert_answer(id));
        out.insert(key, Json::Object(answer));
        Ok(Some(out))
    }

    /// Runs a write as the server itself, without roles: the caller (an account endpoint, a
    /// sign-up) has made the checks, and `checks` are the structure's.
    pub(crate) async fn trusted_write(
        &self,
        method: Method,
        body: Map<String, Json>,
        checks: &[ExistenceCheck],
    ) -> Result<Map<String, Json>, ApiError> {
        let req = Request::from_map(body)?;
        let snapshot = self.snapshot();
        let plan = self.plan_write(&req, checks, method, None, &snapshot, true)?;
        self.write(&plan, None, &snapshot).await
    }

    /// Runs a write plan in a transaction of its own.
    pub(crate) async fn write(
        &self,
        plan: &WritePlan,
        visitor: Option<&Visitor>,
        snapshot: &Snapshot,
    ) -> Result<Map<String, Json>, ApiError> {
        let outcome = write(plan, &self.write_env(visitor, snapshot)).await?;
        self.told(plan);
        Ok(apijet_response::written(outcome))
    }

    /// Tells the tables a committed write changed.
    pub(crate) fn told(&self, plan: &WritePlan) {
        self.changes
            .committed(plan.changes().iter().map(String::as_str));
    }
}
