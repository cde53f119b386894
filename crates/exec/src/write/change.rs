//! PUT and DELETE: rows named by their conditions, planned like a read's WHERE; no row
//! changed is 401. PUT's JSON array edits (`k+`/`k-` with a list) read, change and write back.

use super::calls::{after, before};
use super::outcome::{Written, WrittenIds};
use super::WriteEnv;
use crate::backend::Tx;
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_plan::query::Ident;
use apijet_plan::write::{ArrayEditPlan, DeleteStep, ObjectCalls, UpdateStep};
use apijet_plan::PlanError;
use apijet_sql::{render, render_delete, render_update, Statement};
use serde_json::Value as Json;

/// The ids a changed object answers: `id[]` for the ids `id{}` named, else its `id`.
fn ids_of(ids: Option<Json>) -> Option<WrittenIds> {
    match ids {
        Some(Json::Array(list)) => Some(WrittenIds::List(list)),
        Some(id) => Some(WrittenIds::One(id)),
        None => None,
    }
}

/// The new JSON text of an array column: its current value read, the elements added or
/// removed.
async fn edited(
    tx: &mut Tx<'_>,
    env: &WriteEnv<'_>,
    edit: &ArrayEditPlan,
    table: &str,
) -> Result<(Ident, String), ExecError> {
    let mut sink = CollectSink::new(std::slice::from_ref(&edit.column));
    tx.fetch(&render(env.dialect, &edit.current), &mut sink)
        .await?;
    let Some(row) = sink.rows.into_iter().next() else {
        return Err(PlanError::NothingChanged(table.to_string()).into());
    };
    let current = row.get(&edit.column).cloned();
    let mut list = match current {
        Some(Json::Array(a)) => a,
        None | Some(Json::Null) if edit.add => Vec::new(),
        None | Some(Json::Null) => {
            return Err(PlanError::Missing(format!(
                "PUT {table}: {}- on an empty value",
                edit.column
            ))
            .into())
        }
        Some(other) => {
            return Err(PlanError::WrongType(format!(
                "{table}.{} is not a JSON array: {other}",
                edit.column
            ))
            .into())
        }
    };
    for (i, item) in edit.items.iter().enumerate() {
        let at = list.iter().position(|x| same_json(x, item));
        match (edit.add, at) {
            (true, Some(_)) => {
                return Err(PlanError::Conflict(format!(
                    "PUT {table}: {}+/{i} {item} is already there",
                    edit.column
                ))
                .into())
            }
            (true, None) => list.push(item.clone()),
            (false, Some(p)) => {
                list.remove(p);
            }
            (false, None) => {
                return Err(PlanError::Missing(format!(
                    "PUT {table}: {}-/{i} {item} is not there",
                    edit.column
                ))
                .into())
            }
        }
    }
    Ok((edit.ident.clone(), Json::Array(list).to_string()))
}

/// Elements compare as JSON values: `82001` equals `82001.0` (the reference compares Java types
/// and misses that).
fn same_json(a: &Json, b: &Json) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

pub(super) async fn put(
    tx: &mut Tx<'_>,
    step: &UpdateStep,
    env: &WriteEnv<'_>,
) -> Result<Written, ExecError> {
    before(&step.calls, env)?;
    let mut edits = Vec::with_capacity(step.edits.len());
    for edit in &step.edits {
        edits.push(edited(tx, env, edit, &step.table).await?);
    }
    let stmt = render_update(env.dialect, &step.with_edits(edits));
    let changed = Changed {
        table: &step.table,
        calls: &step.calls,
        ids: step.ids.clone(),
        explain: step.explain,
    };
    change(tx, env, &stmt, changed).await
}

/// What an UPDATE or DELETE answers about.
struct Changed<'s> {
    table: &'s str,
    calls: &'s ObjectCalls,
    ids: Option<Json>,
    explain: bool,
}

/// Runs an UPDATE or DELETE: no row changed is 401 (not the visitor's, or gone); else the
/// answer with its ids, and the object's functions run after it.
async fn change(
    tx: &mut Tx<'_>,
    env: &WriteEnv<'_>,
    stmt: &Statement,
    changed: Changed<'_>,
) -> Result<Written, ExecError> {
    let n = tx.execute(stmt).await?;
    if n == 0 {
        return Err(PlanError::NothingChanged(changed.table.to_string()).into());
    }
    if let Some(Json::Array(list)) = &changed.ids {
        // `id[]` must list what changed: when some of `id{}` are not the visitor's (or are
        // gone) the whole write is refused like a write that changed nothing, rather than
        // answering ids it did not touch.
        let mut distinct: Vec<String> = list.iter().map(id_text).collect();
        distinct.sort_unstable();
        distinct.dedup();
        if n < distinct.len() as u64 {
            return Err(PlanError::NothingChanged(format!(
                "{} (only {n} of the {} rows of id{{}})",
                changed.table,
                distinct.len()
            ))
            .into());
        }
    }
    let mut written = Written {
        sql: changed.explain.then(|| stmt.sql.clone()),
        count: n,
        ids: ids_of(changed.ids),
        results: Vec::new(),
    };
    after(tx, changed.calls, env, &mut written).await?;
    Ok(written)
}

/// An id as the database compares it: `1` and `"1"` name the same row.
fn id_text(v: &Json) -> String {
    match v {
        Json::String(s) => s.trim().to_string(),
        other => other.to_string(),
    }
}

pub(super) async fn put_batch(
    tx: &mut Tx<'_>,
    items: &[UpdateStep],
    env: &WriteEnv<'_>,
) -> Result<Written, ExecError> {
    let mut ids = Vec::with_capacity(items.len());
    let mut total = 0;
    for step in items {
        let written = put(tx, step, env).await?;
        total += written.count;
        ids.push(match written.ids {
            Some(WrittenIds::One(id)) => id,
            _ => Json::Null,
        });
    }
    Ok(Written {
        count: total,
        ids: Some(WrittenIds::List(ids)),
        ..Written::default()
    })
}

pub(super) async fn delete(
    tx: &mut Tx<'_>,
    step: &DeleteStep,
    env: &WriteEnv<'_>,
) -> Result<Written, ExecError> {
    before(&step.calls, env)?;
    let stmt = render_delete(env.dialect, &step.delete);
    let changed = Changed {
        table: &step.table,
        calls: &step.calls,
        ids: step.ids.clone(),
        explain: step.explain,
    };
    change(tx, env, &stmt, changed).await
}
