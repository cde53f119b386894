//! The third stage: an [`Action`] runs. Here and only here a piece of work is admitted (by the
//! ledger, [`Ledger::admit`](crate::ledger::Ledger::admit)), its statements get their timeout, a read finds its
//! replica, a write its transaction (one envelope, `apijet_exec::write::atomically`) or the
//! write queue, and what a committed write changed moves the generations of
//! [`Changes`](super::changes::Changes) before its answer is sent.

use super::answer::Answer;
use super::plan::{Action, CrudAction, WriteAction};
use super::prepare::Client;
use super::snapshot::Snapshot;
use super::Pipeline;
use crate::ledger::{Act, Admitted, Kind};
use crate::observe::Facts;
use apijet_core::Visitor;
use apijet_exec::write::{
    atomically, single_insert, single_insert_answer, Plans, WriteEnv, WriteOutcome, WrittenMember,
};
use apijet_plan::write::WritePlan;
use apijet_response::{written, ApiError};
use serde_json::Value as Json;
use std::sync::Arc;

/// Where a piece of work comes from: what the ledger counts it as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A client's call (`/{method}`, `/get/{json}`, `/router`).
    Call,
    /// An agent's MCP tool call.
    Tool,
    /// The first read of a subscription.
    Subscribe,
    /// A subscription read again after a write.
    Refetch,
    /// The server itself (the account endpoints, sign-ups).
    Server,
}

impl Pipeline {
    /// Runs `action` for `client`: admitted once, then read, written or both (`/crud`).
    pub async fn run(
        self: &Arc<Self>,
        action: Action<'_>,
        client: &Client,
        origin: Origin,
        facts: &mut Facts,
    ) -> Result<Answer, ApiError> {
        let act = match &action {
            Action::Read(_) => Act::Read,
            Action::Write(_) => Act::Write,
            Action::Crud(_) => Act::Crud,
        };
        let kind = match origin {
            Origin::Call => Kind::Call(act),
            Origin::Tool => Kind::Tool(act),
            Origin::Subscribe => Kind::FirstRead,
            Origin::Refetch => Kind::Refetch,
            Origin::Server => Kind::Server,
        };
        let admitted = self
            .ledger
            .admit(client.counted(), kind)
            .map_err(|refused| ApiError::TooManyRequests(refused.message))?;
        // Built in place: a future kept in a variable and then moved into another would take
        // its room twice. The work's own future is boxed: it is large (the reader's), and each
        // future that held it would copy it whole when it is made and moved.
        apijet_exec::cancel::within_timeout(admitted.timeout(), async move {
            match action {
                // Boxes its own fresh read (a hit's future is small).
                Action::Read(read) => {
                    self.read(read, client, Some(admitted), (false, origin), facts)
                        .await
                }
                Action::Write(write) => {
                    let answer = Box::pin(self.write(&write, client.visitor.as_ref())).await;
                    drop(admitted);
                    answer
                }
                Action::Crud(crud) => Box::pin(self.crud(crud, client, admitted, facts)).await,
            }
        })
        .await
    }

    /// A write: a single-row POST through the write queue when it is on, anything else in a
    /// transaction of its own.
    async fn write(
        &self,
        write: &WriteAction,
        visitor: Option<&Visitor>,
    ) -> Result<Answer, ApiError> {
        let env = self.write_env(visitor, &write.snapshot);
        let outcome = match self.queued(&write.plan, &env).await? {
            Some(outcome) => outcome,
            None => {
                let plans = [&write.plan];
                let work = Plans {
                    plans: &plans,
                    env: &env,
                };
                let mut results = atomically(&self.backend, &work).await?;
                results.pop().unwrap_or_default()
            }
        };
        self.committed(&write.plan);
        Ok(Answer::Written {
            results: written(outcome),
            format: write.format,
        })
    }

    /// A single-row POST through the write queue, when it is on and the write is one.
    async fn queued(
        &self,
        plan: &WritePlan,
        env: &WriteEnv<'_>,
    ) -> Result<Option<WriteOutcome>, ApiError> {
        let Some(queue) = &self.queue else {
            return Ok(None);
        };
        let Some((key, insert, id)) = single_insert(plan, env)? else {
            return Ok(None);
        };
        queue.insert(insert).await?;
        let member = WrittenMember::Object(single_insert_answer(id));
        Ok(Some(WriteOutcome {
            members: vec![(key, member)],
        }))
    }

    /// `/crud`: every write in one transaction, whatever its method (never the write queue,
    /// whose group commit would make a POST outlive a later part that fails); then the reads,
    /// on the primary, which has the writes.
    async fn crud(
        self: &Arc<Self>,
        crud: CrudAction<'_>,
        client: &Client,
        admitted: Admitted,
        facts: &mut Facts,
    ) -> Result<Answer, ApiError> {
        let mut answers: Vec<(String, Json)> = Vec::new();
        if !crud.writes.is_empty() {
            let env = self.write_env(client.visitor.as_ref(), &crud.snapshot);
            let plans: Vec<&WritePlan> = crud.writes.iter().map(|(_, plan)| plan).collect();
            let work = Plans {
                plans: &plans,
                env: &env,
            };
            let results = atomically(&self.backend, &work).await?;
            for ((key, plan), outcome) in crud.writes.iter().zip(results) {
                self.committed(plan);
                if let Some(v) = written(outcome).remove(*key) {
                    answers.push((key.to_string(), v));
                }
            }
        }
        for (key, read) in crud.reads {
            let answer = self
                .read(read, client, None, (true, Origin::Call), facts)
                .await?;
            if let Json::Object(mut results) = answer.into_json()? {
                if let Some(v) = results.remove(key) {
                    answers.push((key.to_string(), v));
                }
            }
        }
        drop(admitted);
        Ok(Answer::Written {
            results: answers.into_iter().collect(),
            format: false,
        })
    }

    /// Tells what a committed write changed.
    fn committed(&self, plan: &WritePlan) {
        self.changes
            .committed(plan.changes().iter().map(String::as_str));
    }

    pub(super) fn write_env<'a>(
        &'a self,
        visitor: Option<&'a Visitor>,
        snapshot: &'a Snapshot,
    ) -> WriteEnv<'a> {
        WriteEnv {
            backend: &self.backend,
            dialect: self.dialect.as_ref(),
            schema: &snapshot.schema,
            visitor,
            ids: &self.ids,
            max_insert_rows: self.max_batch,
        }
    }
}
