//! Reads, as the run stage runs them: the plan bound with its values on a replica (or the
//! primary), into the writer of the answer's form; a streamed list from a task of its own.

use super::answer::{spawn_producer, Answer, STREAM_CHANNEL};
use super::cache::{AnswerCache, CacheOutcome, Key, Leading, Lookup};
use super::changes::Stamp;
use super::plan::ReadAction;
use super::prepare::Client;
use super::run::Origin;
use super::Pipeline;
use crate::ledger::Admitted;
use crate::observe::Facts;
use apijet_core::Visitor;
use apijet_exec::read::{run, ReadEnv};
use apijet_exec::Backend;
use apijet_plan::read::{Mode, ReadPlan};
use apijet_plan::PlanOptions;
use apijet_response::answer::{AnswerWriter, Finished};
use apijet_response::stream::Chunk;
use apijet_response::{now_ms, ApiError};
use serde_json::Value as Json;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Where a fresh answer is kept: the store, its key and the stamp its read started at.
type Kept<'a> = (&'a Arc<AnswerCache<Stamp>>, Key, Stamp);

impl Pipeline {
    /// Runs a read: on the primary when `primary` (the reads of `/crud`, which see its
    /// writes), else where its method reads. `admitted` is held until its answer is complete.
    ///
    /// Its answer may come from, and go into, the answers kept in memory: looked up after
    /// admission (a kept answer is admitted and counted as any), kept with the stamp of the
    /// generations taken before the read started.
    pub(super) async fn read(
        self: &Arc<Self>,
        read: ReadAction<'_>,
        client: &Client,
        admitted: Option<Admitted>,
        (primary, origin): (bool, Origin),
        facts: &mut Facts,
    ) -> Result<Answer, ApiError> {
        facts.cache = Some(CacheOutcome::Miss.as_str());
        let kept = match &self.answers {
            // Budgets of its own answer differently; a refetch where other programs' writes
            // are not heard (no triggers) is what finds them.
            Some(answers)
                if read.options.is_none()
                    && (origin != Origin::Refetch || self.reach.borrow().programs) =>
            {
                answers.wanted(&read.plan, read.values).map(|parts| {
                    let key = Key::of(&read.plan, read.values, client.visitor.as_ref(), parts);
                    (answers, key, self.changes.stamp())
                })
            }
            _ => None,
        };
        // The first reader of a key that missed leads its read: the others that miss it
        // meanwhile wait for its answer to be kept (their admission held, as for any read).
        let mut leading = None;
        if let Some((answers, key, _)) = &kept {
            let deps = read.plan.dependencies();
            // While writes elsewhere cannot be heard, nothing kept is given.
            let moved =
                |at| self.changes.is_deaf() || self.changes.moved_since(at, |t| deps.depends_on(t));
            match answers.lookup(key, moved).await {
                Lookup::Hit(answer) => {
                    facts.cache = Some(CacheOutcome::Hit.as_str());
                    return Ok(answer);
                }
                Lookup::Miss(lead) => leading = lead,
            }
        }
        // Boxed here, after a hit was answered: the future of a fresh read is large (the
        // statement's), and a hit made and moved its room too when the whole read was boxed.
        Box::pin(self.fresh(read, client, admitted, primary, (kept, leading), facts)).await
    }

    /// A read from the database, kept (under `kept`'s key, for the readers `leading` waits
    /// for) when it may be.
    async fn fresh(
        self: &Arc<Self>,
        read: ReadAction<'_>,
        client: &Client,
        admitted: Option<Admitted>,
        primary: bool,
        (kept, leading): (Option<Kept<'_>>, Option<Leading<Stamp>>),
        facts: &mut Facts,
    ) -> Result<Answer, ApiError> {
        let ReadAction {
            plan,
            values,
            options,
        } = read;
        let reader = if primary {
            Arc::clone(&self.backend)
        } else {
            Arc::clone(self.reader(plan.method))
        };
        if matches!(plan.mode, Mode::List | Mode::Nested) {
            let visitor = client.visitor.clone();
            let answer = self.stream(plan, values.to_vec(), reader, visitor, admitted);
            return Ok(match (kept, answer) {
                (Some((answers, key, stamp)), Answer::Stream(rx)) => {
                    answers.tee(key, stamp, rx, leading)
                }
                (_, answer) => answer,
            });
        }
        let running = facts.clock();
        let mut env = self.env(&reader, client.visitor.as_ref(), values);
        if let Some(options) = &options {
            env.options = options;
        }
        let opts = env.options;
        let mut sink = AnswerWriter::buffered(opts.max_rows, opts.max_answer_bytes);
        let outcome = run(&plan, &env, &mut sink).await?;
        facts.exec = running.map(|t| t.elapsed());
        let encoding = facts.clock();
        let answer = match sink.finish(now_ms(), outcome.statements).await {
            Ok(Finished::Bytes { body, rows }) => Answer::Bytes {
                body,
                statements: outcome.statements,
                rows,
            },
            Ok(Finished::Json(v)) => Answer::Counted(v, outcome.statements),
            Ok(Finished::Sent { .. }) => {
                return Err(ApiError::Internal("a held answer was streamed".into()))
            }
            Err(e) => return Err(ApiError::Internal(format!("a held answer failed: {e}"))),
        };
        facts.encode = encoding.map(|t| t.elapsed());
        drop(admitted);
        if let Some((answers, key, stamp)) = kept {
            match &answer {
                Answer::Bytes { body, rows, .. } => answers.keep_body(key, stamp, body, *rows),
                Answer::Counted(v, _) => answers.keep_json(key, stamp, v),
                _ => {}
            }
        }
        drop(leading);
        Ok(answer)
    }

    pub(super) fn env<'a>(
        &'a self,
        backend: &'a Backend,
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
        reader: Arc<Backend>,
        visitor: Option<Visitor>,
        admitted: Option<Admitted>,
    ) -> Answer {
        let (tx, rx) = mpsc::channel(STREAM_CHANNEL);
        let state = Arc::clone(self);
        spawn_producer(tx.clone(), async move {
            let _admitted = admitted;
            let env = state.env(&reader, visitor.as_ref(), &values);
            let opts: &PlanOptions = &state.options;
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
