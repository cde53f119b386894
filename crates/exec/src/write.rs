//! POST, PUT and DELETE: a write's plan (`apijet_plan::write::WritePlan`) run in one
//! transaction (protocol §10), the envelope every write runs in ([`atomically`]).
//!
//! The request has passed the `Request` structure already. Each object becomes one statement
//! (a batch of inserts becomes one multi-row INSERT per chunk); the transaction commits only if
//! every object succeeded, and a write that changes no row (not the visitor's, or gone) is 401
//! and rolls everything back, as the reference does.

use crate::backend::{Backend, Tx};
use crate::ids::IdGenerator;
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_core::Visitor;
use apijet_plan::schema::SchemaCache;
use apijet_plan::write::{WritePlan, WriteStep};
use apijet_plan::PlanError;
use apijet_sql::{render, Dialect, Statement};
use serde_json::Value as Json;
use std::future::Future;
use std::pin::Pin;

mod calls;
mod change;
mod insert;
mod outcome;

use change::{delete, put, put_batch};
use insert::post;
pub use insert::{single_insert, single_insert_answer};
pub use outcome::{WriteOutcome, Written, WrittenIds, WrittenMember};

/// Everything a write needs beside its plan.
pub struct WriteEnv<'a> {
    /// The database.
    pub backend: &'a Backend,
    /// Its dialect.
    pub dialect: &'a dyn Dialect,
    /// The schema cache (the demo's functions that write reach `Comment` through it).
    pub schema: &'a SchemaCache,
    /// The visitor (writes always have one, but for the server's own).
    pub visitor: Option<&'a Visitor>,
    /// Ids for new rows.
    pub ids: &'a IdGenerator,
    /// Rows per INSERT statement at most (engines bound the parameters of one statement).
    pub max_insert_rows: usize,
}

/// The future of work inside a transaction. Boxed: an opaque future borrowing the transaction
/// is not proven `Send` for every lifetime the caller's task needs.
pub type Running<'t, T> = Pin<Box<dyn Future<Output = Result<T, ExecError>> + Send + 't>>;

/// Work that runs inside one transaction ([`atomically`]).
pub trait Atomic: Sync {
    /// What it gives once committed.
    type Done: Send;

    /// Runs the work inside `tx`.
    fn run<'t>(&'t self, tx: &'t mut Tx<'_>) -> Running<'t, Self::Done>;
}

/// Runs `work` in one transaction: committed when all of it succeeded, rolled back when any of
/// it failed. The one envelope of every write: a write plan, the writes of a `/crud` call, a
/// batch of the write queue.
pub async fn atomically<A: Atomic>(backend: &Backend, work: &A) -> Result<A::Done, ExecError> {
    let mut tx = backend.begin().await?;
    match work.run(&mut tx).await {
        Ok(done) => {
            tx.commit().await?;
            Ok(done)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// Write plans run one after the other in one transaction (a write, the writes of `/crud`):
/// each plan's objects in request order.
pub struct Plans<'a> {
    /// The plans.
    pub plans: &'a [&'a WritePlan],
    /// What they run with.
    pub env: &'a WriteEnv<'a>,
}

impl Atomic for Plans<'_> {
    type Done = Vec<WriteOutcome>;

    fn run<'t>(&'t self, tx: &'t mut Tx<'_>) -> Running<'t, Self::Done> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(self.plans.len());
            for plan in self.plans {
                out.push(write_in(tx, plan, self.env).await?);
            }
            Ok(out)
        })
    }
}

async fn count(tx: &mut Tx<'_>, stmt: &Statement) -> Result<u64, ExecError> {
    let mut sink = CollectSink::new(&[]);
    tx.fetch(stmt, &mut sink).await?;
    Ok(sink
        .rows
        .first()
        .and_then(|r| r.get("count"))
        .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
        .unwrap_or(0))
}

/// Runs a write plan inside a transaction; answers its objects in request order.
async fn write_in(
    tx: &mut Tx<'_>,
    plan: &WritePlan,
    env: &WriteEnv<'_>,
) -> Result<WriteOutcome, ExecError> {
    for check in &plan.checks {
        let n = count(tx, &render(env.dialect, &check.count)).await?;
        if check.must_exist && n == 0 {
            return Err(PlanError::Conflict(format!(
                "{}: no row with {} exists",
                check.table, check.described
            ))
            .into());
        }
        if !check.must_exist && n > 0 {
            return Err(PlanError::Conflict(format!(
                "{}: a row with {} exists already",
                check.table, check.described
            ))
            .into());
        }
    }
    let mut out = Vec::with_capacity(plan.steps.len());
    // The id each insert's row got, for the references of later objects ("id@": "Privacy/id").
    let mut ids: Vec<Option<Json>> = Vec::with_capacity(plan.steps.len());
    for step in &plan.steps {
        let mut id = None;
        match step {
            WriteStep::Insert(s) => {
                let (written, first) = post(tx, s, env, &ids).await?;
                id = first;
                out.push((s.key.clone(), WrittenMember::Object(written)));
            }
            WriteStep::Update(s) => {
                let written = put(tx, s, env).await?;
                out.push((s.key.clone(), WrittenMember::Object(written)));
            }
            WriteStep::UpdateBatch { key, items } => {
                let written = put_batch(tx, items, env).await?;
                out.push((key.clone(), WrittenMember::Object(written)));
            }
            WriteStep::Delete(s) => {
                let written = delete(tx, s, env).await?;
                out.push((s.key.clone(), WrittenMember::Object(written)));
            }
            WriteStep::Echo { key, value } => {
                out.push((key.clone(), WrittenMember::Value(value.clone())));
            }
            WriteStep::Fail(e) => return Err(e.clone().into()),
        }
        ids.push(id);
    }
    Ok(WriteOutcome { members: out })
}
