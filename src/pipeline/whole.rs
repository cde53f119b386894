//! A read's whole answer as JSON, for reads the server makes again on its own (live answers):
//! the plan of its shape run as `/get` runs it (one replica fallback), whatever the mode, with
//! a streamed answer's chunks gathered instead of sent.

use super::Pipeline;
use apijet_core::Visitor;
use apijet_exec::read::run;
use apijet_plan::read::ReadPlan;
use apijet_plan::PlanOptions;
use apijet_response::answer::{AnswerWriter, Finished};
use apijet_response::stream::Chunk;
use apijet_response::{now_ms, ApiError};
use serde_json::Value as Json;
use tokio::sync::mpsc;

impl Pipeline {
    /// Runs `plan` with `values` for `visitor` and answers the whole envelope, as `/get`
    /// writes it. `options` widen the answer's budgets (a read of many subscriptions at once).
    pub(crate) async fn read_whole(
        &self,
        plan: &ReadPlan,
        values: &[Json],
        visitor: Option<&Visitor>,
        options: Option<&PlanOptions>,
    ) -> Result<Json, ApiError> {
        let reader = self.reader(plan.method);
        let mut env = self.env(reader, visitor, values);
        if let Some(options) = options {
            env.options = options;
        }
        let (tx, mut rx) = mpsc::channel(super::answer::STREAM_CHANNEL);
        let env = &env;
        let produce = async move {
            let opts = env.options;
            // Dropped when the read ends, which ends the gathering below.
            let mut sink = AnswerWriter::streamed(tx, opts.max_rows, opts.max_answer_bytes);
            let outcome = run(plan, env, &mut sink).await?;
            let finished = sink.finish(now_ms(), outcome.statements).await;
            Ok::<_, ApiError>(finished)
        };
        let gather = async {
            let mut body = Vec::new();
            while let Some(chunk) = rx.recv().await {
                match chunk {
                    Chunk::Data(b) => body.extend_from_slice(&b),
                    Chunk::Fail(e) => return Err(e),
                    Chunk::Statements(_) => {}
                }
            }
            Ok(body)
        };
        let (finished, gathered) = tokio::join!(produce, gather);
        let body = match finished? {
            Ok(Finished::Json(v)) => return Ok(v),
            Ok(Finished::Bytes { body, .. }) => body.to_vec(),
            Ok(Finished::Sent { .. }) => gathered?,
            Err(e) => return Err(ApiError::Internal(format!("the answer failed: {e}"))),
        };
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::Internal(format!("an answer is not JSON: {e}")))
    }
}
