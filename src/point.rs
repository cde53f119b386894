//! Point lookups answered from the plan cache of the snapshot (see `apijet_exec::point`).

use crate::app::{unreachable, Answer, AppState};
use crate::edge::Facts;
use crate::snapshot::Snapshot;
use apijet_core::{Method, Visitor};
use apijet_exec::read::over_budget;
use apijet_exec::sink::RowSink;
use apijet_exec::{point_query, Backend, ExecError};
use apijet_response::object::ObjectSink;
use apijet_response::{now_ms, ApiError};
use serde_json::{Map, Value as Json};
use std::sync::Arc;

impl AppState {
    /// A point lookup of a shape planned before: its statement runs with this request's values
    /// and its row is written straight into the answer's bytes.
    pub(crate) async fn point(
        &self,
        map: &Map<String, Json>,
        reader: &Arc<Backend>,
        method: Method,
        visitor: Option<&Visitor>,
        snapshot: &Snapshot,
        facts: &mut Facts,
    ) -> Result<Option<Answer>, ApiError> {
        let started = std::time::Instant::now();
        let env = self.read_env(reader, method, visitor, snapshot, &[]);
        let Some(query) = point_query(map, &env, &snapshot.points)? else {
            return Ok(None);
        };
        let opts = &self.options;
        let plan = &query.plan;
        let mut sink = ObjectSink::new(
            &plan.key,
            &plan.json_outputs,
            opts.max_rows,
            opts.max_answer_bytes,
        );
        let mut result = reader.fetch(&query.statement, &mut sink).await;
        if !Arc::ptr_eq(reader, &self.backend) && matches!(&result, Err(e) if unreachable(e)) {
            // Reads change nothing: a replica that could not answer is retried on the primary.
            sink.restart();
            result = self.backend.fetch(&query.statement, &mut sink).await;
        }
        match result {
            Err(ExecError::ClientGone) if sink.over_budget => return Err(over_budget(opts).into()),
            other => other?,
        };
        facts.exec = Some(started.elapsed());
        let encoding = std::time::Instant::now();
        let rows = sink.rows() as u64;
        let body = sink.finish(now_ms());
        facts.encode = Some(encoding.elapsed());
        Ok(Some(Answer::Bytes {
            body,
            statements: 1,
            rows,
        }))
    }
}
