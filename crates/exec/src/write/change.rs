//! PUT and DELETE: rows named by their conditions, planned like a read's WHERE; no row
//! changed is 401. PUT's JSON array edits (`k+`/`k-` with a list) read, change and write back.

use super::calls::{after, before};
use super::{ctx, success, WriteEnv};
use crate::backend::Tx;
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_core::Value;
use apijet_plan::query::Assign;
use apijet_plan::write::{self, ArrayEdit};
use apijet_plan::PlanError;
use apijet_request::{Request, TableEntry, TableObject};
use apijet_sql::{render, render_delete, render_update, Statement};
use serde_json::{json, Map, Value as Json};

fn id_answer(answer: &mut Map<String, Json>, ids: Option<Json>) {
    match ids {
        Some(Json::Array(list)) => {
            answer.insert("id[]".into(), Json::Array(list));
        }
        Some(id) => {
            answer.insert("id".into(), id);
        }
        None => {}
    }
}

async fn apply_array_edits(
    tx: &mut Tx<'_>,
    env: &WriteEnv<'_>,
    planned: &mut write::PlannedUpdate,
    table: &str,
) -> Result<(), ExecError> {
    let edits: Vec<ArrayEdit> = std::mem::take(&mut planned.array_edits);
    for edit in edits {
        let select = write::current_value(&planned.plan, &planned.update.filter, &edit.column)?;
        let mut sink = CollectSink::new(std::slice::from_ref(&edit.column));
        tx.fetch(&render(env.dialect, &select), &mut sink).await?;
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
        let column = planned
            .plan
            .table
            .column(&edit.column)
            .map(|c| c.name.clone())
            .unwrap_or(edit.column.clone());
        planned.update.sets.push((
            apijet_plan::write::column_ident(&planned.plan, &column)?,
            Assign::Value(Value::Text(Json::Array(list).to_string())),
        ));
    }
    Ok(())
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
    req: &Request,
    env: &WriteEnv<'_>,
    t: &TableObject,
    explain: bool,
) -> Result<Map<String, Json>, ExecError> {
    before(t, env)?;
    let ctx = ctx(env, req);
    let mut planned = write::update(t, &ctx, &mut |_| None)?;
    apply_array_edits(tx, env, &mut planned, &t.key.table).await?;
    env.written.note(&planned.update.table);
    let stmt = render_update(env.dialect, &planned.update);
    change(tx, env, t, &stmt, planned.ids, explain).await
}

/// Runs an UPDATE or DELETE: no row changed is 401 (not the visitor's, or gone); else the
/// answer with its ids, and the object's functions run after it.
async fn change(
    tx: &mut Tx<'_>,
    env: &WriteEnv<'_>,
    t: &TableObject,
    stmt: &Statement,
    ids: Option<Json>,
    explain: bool,
) -> Result<Map<String, Json>, ExecError> {
    let n = tx.execute(stmt).await?;
    if n == 0 {
        return Err(PlanError::NothingChanged(t.key.table.clone()).into());
    }
    if let Some(Json::Array(list)) = &ids {
        // `id[]` must list what changed: when some of `id{}` are not the visitor's (or are
        // gone) the whole write is refused like a write that changed nothing, rather than
        // answering ids it did not touch.
        let mut distinct: Vec<String> = list.iter().map(id_text).collect();
        distinct.sort_unstable();
        distinct.dedup();
        if n < distinct.len() as u64 {
            return Err(PlanError::NothingChanged(format!(
                "{} (only {n} of the {} rows of id{{}})",
                t.key.table,
                distinct.len()
            ))
            .into());
        }
    }
    let mut answer = Map::new();
    if explain {
        answer.insert("sql".into(), json!(stmt.sql));
    }
    answer.extend(success(n));
    id_answer(&mut answer, ids);
    after(tx, t, env, &mut answer).await?;
    Ok(answer)
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
    req: &Request,
    env: &WriteEnv<'_>,
    objects: &[TableObject],
) -> Result<Map<String, Json>, ExecError> {
    let mut ids = Vec::with_capacity(objects.len());
    let mut total = 0;
    for t in objects {
        let answer = put(tx, req, env, t, false).await?;
        total += answer.get("count").and_then(Json::as_u64).unwrap_or(0);
        ids.push(answer.get("id").cloned().unwrap_or(Json::Null));
    }
    let mut answer = success(total);
    answer.insert("id[]".into(), Json::Array(ids));
    Ok(answer)
}

pub(super) async fn delete(
    tx: &mut Tx<'_>,
    req: &Request,
    env: &WriteEnv<'_>,
    t: &TableObject,
    explain: bool,
) -> Result<Map<String, Json>, ExecError> {
    before(t, env)?;
    let ctx = ctx(env, req);
    let conditions = TableObject {
        key: t.key.clone(),
        entries: t
            .entries
            .iter()
            .filter(|e| !matches!(e, TableEntry::Function { .. }))
            .cloned()
            .collect(),
    };
    let (delete, ids, _plan) = write::delete(&conditions, &ctx, &mut |_| None)?;
    env.written.note(&delete.table);
    let stmt = render_delete(env.dialect, &delete);
    change(tx, env, t, &stmt, ids, explain).await
}
