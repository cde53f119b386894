//! Reads: the plan of the request's shape (kept in the snapshot), run into the writer of the
//! answer's form.

use super::answer::{spawn_producer, Answer, STREAM_CHANNEL};
use super::snapshot::Snapshot;
use super::Pipeline;
use crate::observe::Facts;
use apijet_core::{Method, Visitor};
use apijet_exec::read::{run, ReadEnv};
use apijet_plan::read::{Mode, ReadPlan};
use apijet_plan::shape::Slots;
use apijet_request::Request;
use apijet_response::answer::{AnswerWriter, Finished};
use apijet_response::stream::Chunk;
use apijet_response::{now_ms, ApiError};
use serde_json::{Map, Value as Json};
use std::sync::Arc;
use tokio::sync::mpsc;

impl Pipeline {
    /// Answers a GET, HEAD, GETS or HEADS whose body passed its checks.
    pub(crate) async fn read(
        self: &Arc<Self>,
        map: Map<String, Json>,
        method: Method,
        visitor: Option<&Visitor>,
        snapshot: Arc<Snapshot>,
        permit: Option<crate::anonymous::ReadPermit>,
        facts: &mut Facts,
    ) -> Result<Answer, ApiError> {
        let planning = std::time::Instant::now();
        let (req, values) = self.shape_of(map)?;
        let plan = self.plan_of(&req, method, visitor, &snapshot)?;
        facts.plan = Some(planning.elapsed());
        let reader = Arc::clone(self.reader(method));
        if matches!(plan.mode, Mode::List | Mode::Nested) {
            return Ok(self.stream(plan, values, reader, visitor.cloned(), permit));
        }
        let running = std::time::Instant::now();
        let env = self.env(&reader, visitor, &values);
        let opts = &self.options;
        let mut sink = AnswerWriter::buffered(opts.max_rows, opts.max_answer_bytes);
        let outcome = run(&plan, &env, &mut sink).await?;
        facts.exec = Some(running.elapsed());
        let encoding = std::time::Instant::now();
        let answer = match sink.finish(now_ms(), outcome.statements).await {
            Ok(Finished::Bytes { body, rows }) => Answer::Bytes {
                body,
                statements: outcome.statements,
                rows,
            },
            Ok(Finished::Json(v)) => Answer::Counted(v, outcome.statements),
            Ok(Finished::Sent { .. }) | Err(_) => {
                return Err(ApiError::Unsupported("a held answer was streamed".into()))
            }
        };
        facts.encode = Some(encoding.elapsed());
        Ok(answer)
    }

    /// A read's shape (its request with the condition values in slots) and its values.
    pub(crate) fn shape_of(&self, map: Map<String, Json>) -> Result<(Request, Slots), ApiError> {
        let mut req = Request::from_map(map)?;
        let values = apijet_plan::shape::take_values(&mut req, &self.options.expr)?;
        Ok((req, values))
    }

    /// The plan of a read's shape, kept in the snapshot.
    pub(crate) fn plan_of(
        &self,
        req: &Request,
        method: Method,
        visitor: Option<&Visitor>,
        snapshot: &Snapshot,
    ) -> Result<Arc<ReadPlan>, ApiError> {
        let inputs = self.context(method, visitor, snapshot, false);
        Ok(snapshot.plans.plan(req, &inputs)?)
    }

    /// The reads of `/crud`: each part as a general read on the primary, which has the
    /// writes of the same call; its members.
    pub(crate) async fn read_members(
        &self,
        req: Request,
        method: Method,
        visitor: Option<&Visitor>,
        snapshot: &Snapshot,
    ) -> Result<Map<String, Json>, ApiError> {
        let mut req = req;
        let values = apijet_plan::shape::take_values(&mut req, &self.options.expr)?;
        let inputs = self.context(method, visitor, snapshot, false);
        let mut plan = ReadPlan::build(&req, &inputs)?;
        plan.mode = Mode::General;
        let env = ReadEnv {
            fallback: None,
            ..self.env(&self.backend, visitor, &values)
        };
        let opts = &self.options;
        let mut sink = AnswerWriter::buffered(opts.max_rows, opts.max_answer_bytes);
        let outcome = run(&plan, &env, &mut sink).await?;
        match sink.finish(now_ms(), outcome.statements).await {
            Ok(Finished::Json(Json::Object(members))) => Ok(members),
            _ => Err(ApiError::Unsupported(
                "a general read gave no members".into(),
            )),
        }
    }

    pub(super) fn env<'a>(
        &'a self,
        backend: &'a apijet_exec::Backend,
        visitor: Option<&'a Visitor>,
        values: &'a [Json],
    ) -> ReadEnv<'a> {
        ReadEnv {
            backend,
            fallback: (!std::ptr::eq(backend, &*self.backend)).then_some(&*self.backend),
            dialect: self.dialect.as_ref(),
            options: &self.options,
            visitor,
            values,
        }
    }

    /// Streams a list read from a task of its own: what is refused before its first byte is an
    /// error envelope, a failure after it aborts the body.
    fn stream(
        self: &Arc<Self>,
        plan: Arc<ReadPlan>,
        values: Vec<Json>,
        reader: Arc<apijet_exec::Backend>,
        visitor: Option<Visitor>,
        permit: Option<crate::anonymous::ReadPermit>,
    ) -> Answer {
        let (tx, rx) = mpsc::channel(STREAM_CHANNEL);
        let state = Arc::clone(self);
        spawn_producer(tx.clone(), async move {
            let _permit = permit;
            let env = state.env(&reader, visitor.as_ref(), &values);
            let opts = &state.options;
            let mut sink = AnswerWriter::streamed(tx.clone(), opts.max_rows, opts.max_answer_bytes);
            match run(&plan, &env, &mut sink).await {
                Ok(outcome) => {
                    if let Ok(Finished::Sent { rows }) =
                        sink.finish(now_ms(), outcome.statements).await
                    {
                        state.metrics.streamed(rows, 0);
                    }
                }
                Err(e) => {
                    let _ = tx.send(Chunk::Fail(e.into())).await;
                }
            }
        });
        Answer::Stream(rx)
    }
}
