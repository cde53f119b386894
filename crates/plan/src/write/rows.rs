//! The rows of POST objects: each object's values, the ids the server gives new rows, and the
//! references to what earlier objects of the request wrote.

use super::{calls_of, InsertStep, PlannedRow, RowValue};
use crate::query::Ident;
use crate::schema::ColumnKind;
use crate::{access, PlanError, Scope, TablePlan};
use apijet_core::{Role, Value};
use apijet_request::{ConditionKey, Logic, Op, TableEntry, TableKey, TableObject};
use serde_json::{Map, Value as Json};

/// What an earlier insert of the request wrote, for references: its plain values and its id.
pub(super) struct Written {
    pub(super) values: Map<String, Json>,
    pub(super) id: Option<RowValue>,
    pub(super) step: usize,
}

fn is_plain(key: &ConditionKey) -> bool {
    key.op == Op::Eq && key.logic == Logic::Default && key.length.is_none() && !key.reference
}

/// The value a reference of a POST object reads: every object of a write sits at the root, so
/// `/Random/id` (the path from the root, as the demo's `POST Random` structure writes it) and
/// `Random/id` are the same.
fn referred(path: &str, written: &[(String, Written)]) -> Option<RowValue> {
    let mut segments = path.strip_prefix('/').unwrap_or(path).split('/');
    let first = segments.next().unwrap_or_default();
    let (_, w) = written.iter().rev().find(|(k, _)| k == first)?;
    let rest: Vec<&str> = segments.collect();
    if let ["id"] = rest.as_slice() {
        if !w.values.contains_key("id") {
            return match &w.id {
                Some(RowValue::NewId) => Some(RowValue::IdOf(w.step)),
                other => other.clone(),
            };
        }
    }
    let mut v = w.values.get(*rest.first()?)?;
    for seg in &rest[1..] {
        v = v.get(seg)?;
    }
    (!v.is_null()).then(|| RowValue::Value(Value::from_json(v)))
}

pub(super) fn insert_step(
    key: String,
    objects: &[TableObject],
    batch: bool,
    explain: bool,
    ctx: &Scope<'_>,
    written: &[(String, Written)],
) -> Result<InsertStep, PlanError> {
    let mut rows = Vec::with_capacity(objects.len());
    let mut calls = Vec::with_capacity(objects.len());
    let mut table = None;
    // Items with the same key and keywords plan the same: planned once per batch, not per item.
    type PlanInputs<'o> = (&'o TableKey, Vec<(&'o str, &'o Json)>);
    let mut shared: Option<(PlanInputs<'_>, TablePlan)> = None;
    for t in objects {
        let inputs = super::statements::insert_plan_inputs(t);
        let plan = match &mut shared {
            Some((i, p)) if *i == inputs => &*p,
            slot => {
                &slot
                    .insert((inputs, super::statements::insert_plan(t, ctx)?))
                    .1
            }
        };
        rows.push(insert_row(plan, t, ctx, written)?);
        calls.push(calls_of(t));
        table.get_or_insert_with(|| Ident::new(plan.table.sql_name.clone()));
    }
    let table =
        table.ok_or_else(|| PlanError::Invalid("a batch needs at least one item".into()))?;
    Ok(InsertStep {
        key,
        batch,
        explain,
        table,
        rows,
        calls,
    })
}

/// The row of a POST object on its plan (see [`write::insert_plan`]).
fn insert_row(
    plan: &TablePlan,
    obj: &TableObject,
    ctx: &Scope<'_>,
    written: &[(String, Written)],
) -> Result<PlannedRow, PlanError> {
    let table = &plan.table;
    let mut columns = Vec::new();
    let mut values = Vec::new();
    let unknown = |column: &str| PlanError::UnknownColumn {
        table: table.api_name.clone(),
        column: column.to_string(),
    };
    for e in &obj.entries {
        match e {
            TableEntry::Condition { key, value } if is_plain(key) => {
                if table.column(&key.column).is_none() {
                    return Err(unknown(&key.column));
                }
                if value.is_null() {
                    continue;
                }
                columns.push(key.column.clone());
                values.push(RowValue::Value(Value::from_json(value)));
            }
            TableEntry::RefCondition { key, path }
                if is_plain(&ConditionKey {
                    reference: false,
                    ..key.clone()
                }) =>
            {
                // A value from an object written earlier in the same request ("id@": "Privacy/id").
                let value = referred(path, written).ok_or_else(|| {
                    PlanError::Invalid(format!(
                        "POST {}: {} refers to {path}, which no earlier object of the request gives",
                        obj.key.table, key.raw
                    ))
                })?;
                if table.column(&key.column).is_none() {
                    return Err(unknown(&key.column));
                }
                columns.push(key.column.clone());
                values.push(value);
            }
            TableEntry::Condition { key, .. }
            | TableEntry::RefCondition { key, .. }
            | TableEntry::SubqueryCondition { key, .. }
            | TableEntry::Slot { key, .. } => {
                return Err(PlanError::Invalid(format!(
                    "POST {}: {} is not a column name; an insert takes column:value pairs only",
                    obj.key.table, key.raw
                )))
            }
            TableEntry::Echo { key, .. } => {
                return Err(PlanError::Invalid(format!(
                    "POST {}: {key} has an object value",
                    obj.key.table
                )))
            }
            _ => {}
        }
    }
    if let Some(owner) = access::owner_column(table).filter(|_| plan.role == Role::Owner) {
        let visitor = ctx.visitor.ok_or(PlanError::NotLoggedIn)?;
        match columns.iter().position(|c| c == owner) {
            Some(i) => {
                let given = match &values[i] {
                    RowValue::Value(v) => v.to_json(),
                    _ => Json::Null,
                };
                let n = given
                    .as_i64()
                    .or_else(|| given.as_str().and_then(|s| s.parse().ok()));
                if n != Some(visitor.id) && owner != "id" {
                    return Err(PlanError::AccessDenied {
                        table: format!("{owner} = {given} of {}", table.api_name),
                        role: Role::Owner,
                        method: ctx.method,
                    });
                }
            }
            None if owner != "id" => {
                columns.push(owner.to_string());
                values.push(RowValue::Value(Value::Int(visitor.id)));
            }
            None => {}
        }
    }
    let mut id = None;
    if let Some(i) = columns.iter().position(|c| c == "id") {
        id = Some(values[i].clone());
    } else if table
        .column("id")
        .is_some_and(|c| c.kind == ColumnKind::Int)
    {
        columns.insert(0, "id".into());
        values.insert(0, RowValue::NewId);
        id = Some(RowValue::NewId);
    }
    Ok(PlannedRow {
        columns,
        values,
        id,
    })
}
