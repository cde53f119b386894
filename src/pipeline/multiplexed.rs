//! A multiplexed read (the plan of a shape over a list of one slot's values) run for the
//! server itself (live answers): each listed value's answer written as `/get` writes it, held
//! whole, without its `time`. Nothing is parsed back: the rows go from the cursor to each
//! answer's writer, routed by the key they carry.

use super::Pipeline;
use apijet_core::{Method, Visitor};
use apijet_exec::read::run_multiplexed;
use apijet_plan::read::{ListKind, MultiplexPlan};
use apijet_response::answer::AnswerWriter;
use apijet_response::ApiError;
use bytes::Bytes;
use serde_json::Value as Json;

impl Pipeline {
    /// Runs `plan` (of a `method` read) for the values `listed` of its slot, the other slots
    /// holding `values`, for `visitor`: per listed value its answer's text without `time`, or
    /// `None` where that answer passed its budget (it is read alone, which says so).
    ///
    /// The answers are held at once, so together they stay within one answer's budget
    /// (`max_answer_bytes`): each within its share, a larger one read alone.
    pub(crate) async fn read_multiplexed(
        &self,
        plan: &MultiplexPlan,
        method: Method,
        values: &[Json],
        listed: &[Json],
        kind: ListKind,
        visitor: Option<&Visitor>,
    ) -> Result<Vec<Option<Bytes>>, ApiError> {
        let reader = self.reader(method);
        let env = self.env(reader, visitor, values);
        let opts = &self.options;
        let share = opts.max_answer_bytes / listed.len().max(1);
        let mut sinks: Vec<AnswerWriter<'_>> = listed
            .iter()
            .map(|_| AnswerWriter::held(opts.max_rows, share))
            .collect();
        let done = run_multiplexed(plan, &env, listed, kind, &mut sinks).await?;
        let mut answers = Vec::with_capacity(sinks.len());
        for (key, sink) in sinks.into_iter().enumerate() {
            let whole = done.refused.binary_search(&key).is_err();
            answers.push(match whole {
                true => sink.untimed().await.ok().flatten(),
                false => None,
            });
        }
        Ok(answers)
    }
}
