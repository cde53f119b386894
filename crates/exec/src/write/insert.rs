//! POST: the rows of an object or a `Table[]` batch, one multi-row INSERT per chunk of rows
//! with the same columns; and the single-row POST the write queue takes instead.

use super::calls::{after, before};
use super::outcome::{Written, WrittenIds};
use super::WriteEnv;
use crate::backend::Tx;
use crate::ExecError;
use apijet_core::Value;
use apijet_plan::query::Insert;
use apijet_plan::write::{InsertStep, PlannedRow, RowValue, WritePlan};
use apijet_plan::PlanError;
use apijet_sql::render_insert;
use serde_json::Value as Json;

/// A row's columns, its values and its id, with the server's new id given and the ids of
/// earlier inserts (`ids`, by step) filled in.
fn resolve(
    row: &PlannedRow,
    env: &WriteEnv<'_>,
    ids: &[Option<Json>],
) -> Result<(Vec<Value>, Option<Json>), ExecError> {
    let mut new_id = None;
    let mut value = |v: &RowValue| -> Result<Value, ExecError> {
        Ok(match v {
            RowValue::Value(v) => v.clone(),
            RowValue::NewId => Value::Int(*new_id.get_or_insert_with(|| env.ids.next())),
            RowValue::IdOf(step) => ids
                .get(*step)
                .and_then(Option::as_ref)
                .map(Value::from_json)
                .ok_or_else(|| {
                    PlanError::Invalid("a reference names an object that got no id".into())
                })?,
        })
    };
    let values = row
        .values
        .iter()
        .map(&mut value)
        .collect::<Result<Vec<_>, _>>()?;
    let id = row
        .id
        .as_ref()
        .map(&mut value)
        .transpose()?
        .map(|v| v.to_json());
    Ok((values, id))
}

/// The insert the write queue takes instead of `plan` (one object as one row, nothing to run
/// after it), with its answer key and id; its validations run here.
pub fn single_insert(
    plan: &WritePlan,
    env: &WriteEnv<'_>,
) -> Result<Option<(String, Insert, Option<Json>)>, ExecError> {
    let Some(step) = plan.single_insert() else {
        return Ok(None);
    };
    let ([row], [calls]) = (step.rows.as_slice(), step.calls.as_slice()) else {
        return Ok(None);
    };
    before(calls, env)?;
    let (values, id) = resolve(row, env, &[])?;
    Ok(Some((
        step.key.clone(),
        step.insert(&row.columns, vec![values]),
        id,
    )))
}

/// What a queued insert wrote, shaped like any other.
pub fn single_insert_answer(id: Option<Json>) -> Written {
    Written {
        count: 1,
        ids: id.map(WrittenIds::One),
        ..Written::default()
    }
}

/// Runs an insert step; its answer, and the id of its first row.
pub(super) async fn post(
    tx: &mut Tx<'_>,
    step: &InsertStep,
    env: &WriteEnv<'_>,
    ids: &[Option<Json>],
) -> Result<(Written, Option<Json>), ExecError> {
    for calls in &step.calls {
        before(calls, env)?;
    }
    let mut row_ids = Vec::with_capacity(step.rows.len());
    // Items with the same columns share a statement; each statement stays under the
    // engines' parameter limits.
    let mut groups: Vec<(&[String], Vec<Vec<Value>>)> = Vec::new();
    for row in &step.rows {
        let (values, id) = resolve(row, env, ids)?;
        row_ids.push(id.unwrap_or(Json::Null));
        match groups
            .iter_mut()
            .find(|(c, _)| *c == row.columns.as_slice())
        {
            Some((_, g)) => g.push(values),
            None => groups.push((&row.columns, vec![values])),
        }
    }
    let mut inserted = 0;
    let mut sql = Vec::new();
    for (columns, mut group) in groups {
        let per_statement = (30_000 / columns.len().max(1)).clamp(1, env.max_insert_rows.max(1));
        while !group.is_empty() {
            let rest = group.split_off(per_statement.min(group.len()));
            let stmt = render_insert(env.dialect, &step.insert(columns, group));
            inserted += tx.execute(&stmt).await?;
            sql.push(stmt.sql);
            group = rest;
        }
    }
    let first = row_ids.first().filter(|v| !v.is_null()).cloned();
    let mut written = Written {
        sql: step.explain.then(|| sql.join(";\n")),
        count: inserted,
        ids: match step.batch {
            true => Some(WrittenIds::List(row_ids)),
            false => first.clone().map(WrittenIds::One),
        },
        results: Vec::new(),
    };
    if let Some(calls) = step.calls.first().filter(|_| !step.batch) {
        after(tx, calls, env, &mut written).await?;
    }
    Ok((written, first))
}
