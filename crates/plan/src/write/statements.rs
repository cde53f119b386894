//! POST, PUT and DELETE objects → [`Insert`], [`Update`], [`Delete`] (protocol §10).
//!
//! The WHERE of an update or delete is planned exactly like a read's, by [`TablePlan`] (so
//! roles, references and every operator mean the same thing); this module decides which keys
//! are values and which are conditions, and what the row of an insert holds.

use crate::condition::Resolver;
use crate::object::TablePlan;
use crate::query::{Assign, Delete, Ident, Update};
use crate::{PlanError, Scope};
use apijet_core::Value;
use apijet_request::{ConditionKey, Logic, Op, TableEntry, TableKey, TableObject};
use serde_json::Value as Json;

/// The keys that always stay conditions, never values.
const CONDITION_KEYS: [&str; 2] = ["id", "userId"];

fn is_plain(key: &ConditionKey) -> bool {
    key.op == Op::Eq && key.logic == Logic::Default && key.length.is_none() && !key.reference
}

/// A `k+`/`k-` on a JSON array column: read, change in memory, write back (as the reference).
#[derive(Debug, Clone)]
pub struct ArrayEdit {
    /// The column.
    pub column: String,
    /// Append (`k+`) or remove (`k-`).
    pub add: bool,
    /// The elements.
    pub items: Vec<Json>,
}

/// The plan of a POST object: its table, role and access, from its key and keywords only
/// ([`insert_plan_inputs`]), so that objects that agree on those (the items of a batch) share
/// one.
pub fn insert_plan(obj: &TableObject, ctx: &Scope<'_>) -> Result<TablePlan, PlanError> {
    let keywords = TableObject {
        key: obj.key.clone(),
        entries: obj
            .entries
            .iter()
            .filter(|e| matches!(e, TableEntry::Keyword { .. }))
            .cloned()
            .collect(),
    };
    TablePlan::new(&keywords, ctx)
}

/// Everything [`insert_plan`] reads of `obj`: its key and its keywords, in order.
pub fn insert_plan_inputs(obj: &TableObject) -> (&TableKey, Vec<(&str, &Json)>) {
    let keywords = obj
        .entries
        .iter()
        .filter_map(|e| match e {
            TableEntry::Keyword { name, value } => Some((name.as_str(), value)),
            _ => None,
        })
        .collect();
    (&obj.key, keywords)
}

/// A planned PUT object.
#[derive(Debug, Clone)]
pub struct PlannedUpdate {
    /// The statement (its array edits not applied yet).
    pub update: Update,
    /// JSON array edits to read, apply and write back.
    pub array_edits: Vec<ArrayEdit>,
    /// The ids the condition names, answered to the client (`id` or `id[]`).
    pub ids: Option<Json>,
    /// The plan of the conditions.
    pub plan: TablePlan,
}

fn ids_of(obj: &TableObject) -> Option<Json> {
    obj.entries.iter().find_map(|e| match e {
        TableEntry::Condition { key, value }
            if key.column == "id" && key.logic == Logic::Default =>
        {
            match key.op {
                Op::Eq | Op::In => Some(value.clone()),
                _ => None,
            }
        }
        _ => None,
    })
}

fn keyword<'a>(obj: &'a TableObject, name: &str) -> Option<&'a Json> {
    obj.entries.iter().find_map(|e| match e {
        TableEntry::Keyword { name: n, value } if n == name => Some(value),
        _ => None,
    })
}

fn list_of(v: Option<&Json>) -> Vec<String> {
    v.and_then(Json::as_str)
        .map(|s| {
            s.split(',')
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Splits a PUT object into assignments and conditions and plans both.
pub fn update(
    obj: &TableObject,
    ctx: &Scope<'_>,
    resolve: Resolver<'_>,
) -> Result<PlannedUpdate, PlanError> {
    let combined = list_of(keyword(obj, "combine"));
    let nulls = list_of(keyword(obj, "null"));
    let mut sets = Vec::new();
    let mut array_edits = Vec::new();
    let mut conditions = Vec::new();
    for e in &obj.entries {
        match e {
            TableEntry::Condition { key, value }
                if matches!(key.op, Op::Add | Op::Sub) && key.length.is_none() =>
            {
                let add = key.op == Op::Add;
                let assign = match value {
                    Json::Array(items) => {
                        array_edits.push(ArrayEdit {
                            column: key.column.clone(),
                            add,
                            items: items.clone(),
                        });
                        continue;
                    }
                    Json::Number(_) if add => Assign::Add(Value::from_json(value)),
                    Json::Number(_) => Assign::Sub(Value::from_json(value)),
                    Json::String(_) if add => Assign::Append(Value::from_json(value)),
                    Json::String(_) => Assign::RemoveText(Value::from_json(value)),
                    _ => {
                        return Err(PlanError::WrongType(format!(
                            "{}: k+ and k- take a number, a string or an array",
                            key.raw
                        )))
                    }
                };
                sets.push((key.column.clone(), assign));
            }
            TableEntry::Condition { key, value }
                if is_plain(key)
                    && !CONDITION_KEYS.contains(&key.column.as_str())
                    && !combined.contains(&key.raw) =>
            {
                sets.push((key.column.clone(), Assign::Value(Value::from_json(value))));
            }
            TableEntry::Keyword { name, .. } if name == "null" || name == "combine" => {}
            other => conditions.push(other.clone()),
        }
    }
    for n in nulls {
        sets.push((n, Assign::Null));
    }
    if sets.is_empty() && array_edits.is_empty() {
        return Err(PlanError::Invalid(format!(
            "PUT {}: give at least one key:value to change",
            obj.key.table
        )));
    }
    if !combined.is_empty() {
        // The structure's @combine names value keys that must match instead (e.g. a password):
        // plain AND conditions.
        for e in &obj.entries {
            if let TableEntry::Condition { key, .. } = e {
                if combined.contains(&key.raw) && is_plain(key) {
                    conditions.push(e.clone());
                }
            }
        }
    }
    let cond_obj = TableObject {
        key: obj.key.clone(),
        entries: conditions,
    };
    let plan = TablePlan::new(&cond_obj, ctx)?;
    for (column, _) in &sets {
        if plan.table.column(column).is_none() {
            return Err(PlanError::UnknownColumn {
                table: plan.table.api_name.clone(),
                column: column.clone(),
            });
        }
    }
    for edit in &array_edits {
        if plan.table.column(&edit.column).is_none() {
            return Err(PlanError::UnknownColumn {
                table: plan.table.api_name.clone(),
                column: edit.column.clone(),
            });
        }
    }
    let filter = write_filter(&plan, resolve, &obj.key.table)?;
    let ids = ids_of(obj);
    Ok(PlannedUpdate {
        update: Update {
            table: Ident::new(plan.table.sql_name.clone()),
            sets: sets.into_iter().map(|(c, a)| (Ident::new(c), a)).collect(),
            filter,
            limit: Some(limit_of(&ids)),
        },
        array_edits,
        ids,
        plan,
    })
}

/// Plans a DELETE object: every key is a condition.
pub fn delete(
    obj: &TableObject,
    ctx: &Scope<'_>,
    resolve: Resolver<'_>,
) -> Result<(Delete, Option<Json>, TablePlan), PlanError> {
    let plan = TablePlan::new(obj, ctx)?;
    let filter = write_filter(&plan, resolve, &obj.key.table)?;
    let ids = ids_of(obj);
    Ok((
        Delete {
            table: Ident::new(plan.table.sql_name.clone()),
            filter,
            limit: Some(limit_of(&ids)),
        },
        ids,
        plan,
    ))
}

fn limit_of(ids: &Option<Json>) -> u64 {
    match ids {
        Some(Json::Array(a)) => a.len() as u64,
        _ => 1,
    }
}

fn write_filter(
    plan: &TablePlan,
    resolve: Resolver<'_>,
    table: &str,
) -> Result<crate::query::Pred, PlanError> {
    let select = plan
        .select(&[], resolve)?
        .ok_or_else(|| PlanError::NothingChanged(table.to_string()))?;
    match select.filter {
        Some(f) => Ok(f),
        None => Err(PlanError::Forbidden(format!(
            "{table}: a write must have conditions"
        ))),
    }
}

/// `DELETE FROM table WHERE column IN (values)` for server-side functions (e.g. deleting a
/// moment's comments).
pub fn delete_where(
    table: &crate::schema::Table,
    column: &str,
    values: Vec<Value>,
) -> Result<Delete, PlanError> {
    use crate::query::{Expr, Pred};
    let col = table
        .column(column)
        .ok_or_else(|| PlanError::UnknownColumn {
            table: table.api_name.clone(),
            column: column.to_string(),
        })?;
    Ok(Delete {
        table: Ident::new(table.sql_name.clone()),
        filter: Pred::In(
            Expr::Column {
                table: None,
                name: Ident::new(col.name.clone()),
                kind: col.kind,
            },
            values,
        ),
        limit: None,
    })
}

/// `SELECT count(*)` of the rows of `table` matching every `column = value` (NULL matches
/// `IS NULL`), except the row `exclude_id`: the UNIQUE and EXIST checks of a structure.
pub fn existence_count(
    table: &crate::schema::Table,
    values: &[(String, Json)],
    exclude_id: Option<&Json>,
) -> Result<crate::query::Select, PlanError> {
    use crate::query::{CmpOp, Expr, Pred, Select, SelectItem};
    let col = |name: &str| crate::access::column_of(table, name);
    let mut preds = Vec::new();
    for (name, v) in values {
        preds.push(if v.is_null() {
            Pred::IsNull(col(name)?)
        } else {
            Pred::Cmp(col(name)?, CmpOp::Eq, Expr::Value(Value::from_json(v)))
        });
    }
    if let Some(id) = exclude_id {
        preds.push(Pred::Cmp(
            col("id")?,
            CmpOp::Ne,
            Expr::Value(Value::from_json(id)),
        ));
    }
    let count = SelectItem {
        expr: Expr::Func {
            name: "count",
            args: vec![Expr::Star],
            distinct: false,
        },
        alias: Ident::new("count"),
    };
    Ok(Select::on_table(table, vec![count], Pred::And(preds), None))
}

/// `SELECT column FROM table WHERE filter`: the current value of a JSON array being edited.
pub fn current_value(
    plan: &TablePlan,
    filter: &crate::query::Pred,
    column: &str,
) -> Result<crate::query::Select, PlanError> {
    use crate::query::{Expr, Select, SelectItem};
    let c = plan
        .table
        .column(column)
        .ok_or_else(|| PlanError::UnknownColumn {
            table: plan.table.api_name.clone(),
            column: column.to_string(),
        })?;
    let item = SelectItem {
        expr: Expr::Column {
            table: None,
            name: Ident::new(c.name.clone()),
            kind: c.kind,
        },
        alias: Ident::new(c.name.clone()),
    };
    Ok(Select::on_table(
        &plan.table,
        vec![item],
        filter.clone(),
        Some(1),
    ))
}

/// A column of the planned table as an identifier, checked against the schema.
pub fn column_ident(plan: &TablePlan, column: &str) -> Result<Ident, PlanError> {
    plan.table
        .column(column)
        .map(|c| Ident::new(c.name.clone()))
        .ok_or_else(|| PlanError::UnknownColumn {
            table: plan.table.api_name.clone(),
            column: column.to_string(),
        })
}

/// `SELECT id FROM table WHERE column IN (values)`: the children a recursive delete reaches.
pub fn ids_where(
    table: &crate::schema::Table,
    column: &str,
    values: Vec<Value>,
) -> Result<crate::query::Select, PlanError> {
    use crate::query::{Expr, Select, SelectItem};
    let id = table.column("id").ok_or_else(|| PlanError::UnknownColumn {
        table: table.api_name.clone(),
        column: "id".into(),
    })?;
    let item = SelectItem {
        expr: Expr::Column {
            table: None,
            name: Ident::new(id.name.clone()),
            kind: id.kind,
        },
        alias: Ident::new("id"),
    };
    Ok(Select::on_table(
        table,
        vec![item],
        delete_where(table, column, values)?.filter,
        None,
    ))
}
