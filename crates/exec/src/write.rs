//! POST, PUT and DELETE: a write's plan (`apijet_plan::write::WritePlan`) run in one
//! transaction (protocol §10).
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

/// Runs a write plan in one transaction; what it wrote, its objects in request order.
pub async fn write(plan: &WritePlan, env: &WriteEnv<'_>) -> Result<WriteOutcome, ExecError> {
    let mut tx = env.backend.begin().await?;
    let result = write_in(&mut tx, plan, env).await;
    match result {
        Ok(out) => {
            tx.commit().await?;
            Ok(out)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
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

/// Runs a write plan inside a transaction the caller owns: `/crud` runs several writes, each
/// with its own method, in one transaction.
pub async fn write_in(
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
