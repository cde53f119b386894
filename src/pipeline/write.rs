//! Writes: a verified request, a single-row POST through the write queue, and the writes the
//! server makes itself for the account endpoints.

use super::Pipeline;
use crate::snapshot::Snapshot;
use apijet_core::{Method, Visitor};
use apijet_exec::write::{single_insert, single_insert_answer, write};
use apijet_plan::verify::ExistenceCheck;
use apijet_request::Request;
use apijet_response::ApiError;
use serde_json::{Map, Value as Json};

impl Pipeline {
    /// Runs a verified write as `visitor`.
    pub(crate) async fn write(
        &self,
        req: &Request,
        checks: &[ExistenceCheck],
        method: Method,
        visitor: Option<&Visitor>,
        snapshot: &Snapshot,
    ) -> Result<Map<String, Json>, ApiError> {
        let env = self.write_env(method, visitor, snapshot, false);
        Ok(write(req, checks, &env).await?)
    }

    /// A single-row POST goes through the write queue when it is on.
    pub(crate) async fn queued(
        &self,
        req: &Request,
        checks: &[ExistenceCheck],
        visitor: Option<&Visitor>,
        snapshot: &Snapshot,
    ) -> Result<Option<Map<String, Json>>, ApiError> {
        let Some(queue) = &self.queue else {
            return Ok(None);
        };
        let env = self.write_env(Method::Post, visitor, snapshot, false);
        let Some((key, insert, id)) = single_insert(req, checks, &env)? else {
            return Ok(None);
        };
        queue.insert(insert).await?;
        let mut out = Map::new();
        out.insert(key, Json::Object(single_insert_answer(id)));
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
        let env = self.write_env(method, None, &snapshot, true);
        Ok(write(&req, checks, &env).await?)
    }
}
