//! The plan of a whole write request (POST, PUT, DELETE, and the writes of `/crud`):
//! [`WritePlan`], which `exec` runs in one transaction.
//!
//! Each root member becomes a [`WriteStep`] in request order. An insert's rows are planned
//! down to their values, but for what exists only once the write runs: the ids the server gives
//! new rows ([`RowValue::NewId`]) and, through references (`"id@": "Privacy/id"`), the ids an
//! earlier object of the request got ([`RowValue::IdOf`]). A member that cannot be planned is
//! kept as its error, raised when the write reaches it.

use crate::call::{Call, Planned};
use crate::query::{Assign, Delete, Ident, Insert, Select, Update};
use crate::verify::ExistenceCheck;
use crate::{Context, PlanError, Scope};
use apijet_core::{Method, Role, Value};
use apijet_request::{Node, Request, TableEntry, TableKey, TableObject};
use serde_json::{Map, Value as Json};

mod changes;
mod print;
mod rows;
mod statements;

pub use changes::{writing_call, WritingCall};
use rows::{insert_step, Written};
pub use statements::*;

/// A write request, planned.
#[derive(Debug)]
pub struct WritePlan {
    /// The method.
    pub method: Method,
    /// The structure's UNIQUE and EXIST checks, run first.
    pub checks: Vec<PlannedCheck>,
    /// The root members, in request order.
    pub steps: Vec<WriteStep>,
    /// One object inserted as one row, with nothing to check or run after it: the write queue
    /// may take it instead.
    pub queueable: bool,
    /// The SQL names of the tables its statements change (see [`WritePlan::changes`]).
    changes: Vec<String>,
}

/// A UNIQUE or EXIST check of the structure.
#[derive(Debug)]
pub struct PlannedCheck {
    /// `SELECT count(*) …` of the rows it is about.
    pub count: Select,
    /// The API table.
    pub table: String,
    /// `column:value, …`, for its refusal.
    pub described: String,
    /// EXIST (a row must exist) or UNIQUE (none may).
    pub must_exist: bool,
}

/// One root member of a write.
#[derive(Debug)]
pub enum WriteStep {
    /// `"Table": {…}` or `"Table[]": [{…}, …]` of a POST.
    Insert(InsertStep),
    /// `"Table": {…}` of a PUT.
    Update(UpdateStep),
    /// `"Table[]": [{…}, …]` of a PUT: each item its own update, answered together.
    UpdateBatch {
        /// The answer key (the table key).
        key: String,
        /// The items.
        items: Vec<UpdateStep>,
    },
    /// `"Table": {…}` of a DELETE.
    Delete(DeleteStep),
    /// A value answered as sent.
    Echo {
        /// The key.
        key: String,
        /// The value.
        value: Json,
    },
    /// A member that cannot be written: the write fails with this error when it reaches it.
    Fail(PlanError),
}

/// The remote functions of a written object (§11) and the values they read.
#[derive(Debug, Default)]
pub struct ObjectCalls {
    /// The plain `column: value` pairs of the object: the functions' arguments.
    pub values: Map<String, Json>,
    /// `k-()` validations, run before the statement.
    pub before: Vec<Planned>,
    /// `k()` calls run after it, whose results join the answer: the answer key and the call.
    pub after: Vec<(String, Planned)>,
}

/// A value of an inserted row.
#[derive(Debug, Clone, PartialEq)]
pub enum RowValue {
    /// Known while planning.
    Value(Value),
    /// The id the server gives this new row.
    NewId,
    /// The id the row of the request's step `n` (an earlier insert) got.
    IdOf(usize),
}

/// One row of an insert.
#[derive(Debug, Clone)]
pub struct PlannedRow {
    /// Column names.
    pub columns: Vec<String>,
    /// Values, in column order.
    pub values: Vec<RowValue>,
    /// The row's id, answered to the client.
    pub id: Option<RowValue>,
}

/// The rows of a POST object, or of a `Table[]` batch.
#[derive(Debug)]
pub struct InsertStep {
    /// The answer key.
    pub key: String,
    /// `Table[]`: answered with `id[]`.
    pub batch: bool,
    /// `@explain`: the statements are answered.
    pub explain: bool,
    pub(crate) table: Ident,
    /// The rows, one per object.
    pub rows: Vec<PlannedRow>,
    /// Each object's functions (those after the statement are run for a single object only).
    pub calls: Vec<ObjectCalls>,
}

impl InsertStep {
    /// The INSERT of `rows` (values resolved, all with the same columns).
    pub fn insert(&self, columns: &[String], rows: Vec<Vec<Value>>) -> Insert {
        Insert {
            table: self.table.clone(),
            columns: columns.iter().map(|c| Ident::new(c.clone())).collect(),
            rows,
        }
    }
}

/// A `k+`/`k-` on a JSON array column of a PUT: read, change, write back (as the reference).
#[derive(Debug)]
pub struct ArrayEditPlan {
    /// The column as sent.
    pub column: String,
    /// Its identifier in the SET list.
    pub ident: Ident,
    /// `SELECT column … WHERE <the update's filter>`: its current value.
    pub current: Select,
    /// Append (`k+`) or remove (`k-`).
    pub add: bool,
    /// The elements.
    pub items: Vec<Json>,
}

/// A PUT object.
#[derive(Debug)]
pub struct UpdateStep {
    /// The answer key.
    pub key: String,
    /// The API table, for refusals.
    pub table: String,
    /// `@explain`.
    pub explain: bool,
    /// The statement (without its array edits).
    pub update: Update,
    /// JSON array edits to read, apply and add to the statement.
    pub edits: Vec<ArrayEditPlan>,
    /// The ids its condition names (`id` or `id[]`), answered.
    pub ids: Option<Json>,
    /// Its functions.
    pub calls: ObjectCalls,
}

/// A DELETE object.
#[derive(Debug)]
pub struct DeleteStep {
    /// The answer key.
    pub key: String,
    /// The API table, for refusals.
    pub table: String,
    /// `@explain`.
    pub explain: bool,
    /// The statement.
    pub delete: Delete,
    /// The ids its condition names, answered.
    pub ids: Option<Json>,
    /// Its functions.
    pub calls: ObjectCalls,
}

impl UpdateStep {
    /// The statement with the array edits' new values (`(column, new JSON text)`).
    pub fn with_edits(&self, edited: Vec<(Ident, String)>) -> Update {
        let mut update = self.update.clone();
        update.sets.extend(
            edited
                .into_iter()
                .map(|(c, text)| (c, Assign::Value(Value::Text(text)))),
        );
        update
    }
}

impl WritePlan {
    /// Plans the verified write `req` with the structure's `checks`, in the context `inputs`
    /// (a write's method).
    pub fn build(
        req: &Request,
        checks: &[ExistenceCheck],
        inputs: &Context<'_>,
    ) -> Result<WritePlan, PlanError> {
        let ctx = Scope::of_request(*inputs, req.global("role"), false, None);
        let checks = checks
            .iter()
            .map(|c| plan_check(c, inputs))
            .collect::<Result<Vec<_>, _>>()?;
        let explain = req
            .global("explain")
            .and_then(Json::as_bool)
            .unwrap_or(false);
        let mut steps = Vec::with_capacity(req.root.members.len());
        let mut written: Vec<(String, Written)> = Vec::new();
        if explain && !inputs.options.debug {
            steps.push(WriteStep::Fail(PlanError::Forbidden(
                "@explain is only available in debug mode".into(),
            )));
        }
        for m in &req.root.members {
            let index = steps.len();
            let step = match &m.node {
                Node::Table(t) => object_step(&m.key, t, explain, &ctx, &written),
                Node::Value(Json::Array(items)) if m.key.ends_with("[]") => {
                    batch_step(&m.key, items, explain, &ctx, &written)
                }
                Node::Array(_) => Err(PlanError::Forbidden(format!(
                    "{}:{{}} arrays are only supported by GET and GETS",
                    m.key
                ))),
                Node::Value(v) => Ok(WriteStep::Echo {
                    key: m.key.clone(),
                    value: v.clone(),
                }),
                Node::Reference(_) | Node::Subquery(_) | Node::Function(_) => Err(
                    PlanError::Forbidden(format!("{} is not allowed in a write", m.key)),
                ),
            };
            let step = step.unwrap_or_else(WriteStep::Fail);
            if let (WriteStep::Insert(insert), Node::Table(t)) = (&step, &m.node) {
                written.push((
                    m.key.clone(),
                    Written {
                        values: values_of(t),
                        id: insert.rows.first().and_then(|r| r.id.clone()),
                        step: index,
                    },
                ));
            }
            let failed = matches!(step, WriteStep::Fail(_));
            steps.push(step);
            if failed {
                break;
            }
        }
        let queueable = inputs.method == Method::Post
            && checks.is_empty()
            && req.global("explain").is_none()
            && queueable(req);
        let changes = changes::changes(&steps, inputs.schema);
        Ok(WritePlan {
            method: inputs.method,
            checks,
            steps,
            queueable,
            changes,
        })
    }

    /// The SQL names of the tables the write changes once it commits, its functions' writes
    /// included: what subscriptions to reads of them are told (live answers).
    pub fn changes(&self) -> &[String] {
        &self.changes
    }

    /// The insert the write queue may take instead of the whole write (see `queueable`).
    pub fn single_insert(&self) -> Option<&InsertStep> {
        match self.steps.as_slice() {
            [WriteStep::Insert(step)] if self.queueable => Some(step),
            _ => None,
        }
    }
}

/// One object inserted as one row, with no reference, subquery or function to run after it.
fn queueable(req: &Request) -> bool {
    let [m] = req.root.members.as_slice() else {
        return false;
    };
    let Node::Table(t) = &m.node else {
        return false;
    };
    t.entries.iter().all(|e| match e {
        TableEntry::Function { key, .. } => key.ends_with("-()"),
        TableEntry::Keyword { name, .. } if name == "explain" => false,
        TableEntry::RefCondition { .. } | TableEntry::SubqueryCondition { .. } => false,
        _ => true,
    })
}

fn plan_check(c: &ExistenceCheck, inputs: &Context<'_>) -> Result<PlannedCheck, PlanError> {
    let table = inputs
        .schema
        .table(&c.table)
        .ok_or_else(|| PlanError::AccessDenied {
            table: c.table.clone(),
            role: Role::Unknown,
            method: inputs.method,
        })?;
    Ok(PlannedCheck {
        count: statements::existence_count(table, &c.values, c.exclude_id.as_ref())?,
        table: c.table.clone(),
        described: c
            .values
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(", "),
        must_exist: c.must_exist,
    })
}

/// The plain `column: value` pairs of an object, for remote functions' arguments.
fn values_of(t: &TableObject) -> Map<String, Json> {
    t.entries
        .iter()
        .filter_map(|e| match e {
            TableEntry::Condition { key, value } => Some((key.column.clone(), value.clone())),
            _ => None,
        })
        .collect()
}

fn calls_of(t: &TableObject) -> ObjectCalls {
    let mut calls = ObjectCalls {
        values: values_of(t),
        ..ObjectCalls::default()
    };
    for e in &t.entries {
        if let TableEntry::Function { key, call } = e {
            if key.ends_with("-()") {
                calls.before.push(Call::read(call));
            } else {
                let name = key.trim_end_matches("()").trim_end_matches('+');
                calls.after.push((name.to_string(), Call::read(call)));
            }
        }
    }
    calls
}

fn object_explain(t: &TableObject, root: bool, ctx: &Scope<'_>) -> Result<bool, PlanError> {
    // An object's own `@explain` answers its statement, as the root's does.
    let explain = root || t.entries.iter().any(
        |e| matches!(e, TableEntry::Keyword { name, value: Json::Bool(true) } if name == "explain"),
    );
    if explain && !ctx.options.debug {
        return Err(PlanError::Forbidden(
            "@explain is only available in debug mode".into(),
        ));
    }
    Ok(explain)
}

fn object_step(
    key: &str,
    t: &TableObject,
    root_explain: bool,
    ctx: &Scope<'_>,
    written: &[(String, Written)],
) -> Result<WriteStep, PlanError> {
    let explain = object_explain(t, root_explain, ctx)?;
    match ctx.method {
        Method::Post => Ok(WriteStep::Insert(insert_step(
            key.to_string(),
            std::slice::from_ref(t),
            false,
            explain,
            ctx,
            written,
        )?)),
        Method::Put => Ok(WriteStep::Update(update_step(key, t, explain, ctx)?)),
        Method::Delete => Ok(WriteStep::Delete(delete_step(key, t, explain, ctx)?)),
        other => Err(PlanError::Forbidden(format!("{other} cannot write {key}"))),
    }
}

fn batch_step(
    key: &str,
    items: &[Json],
    explain: bool,
    ctx: &Scope<'_>,
    written: &[(String, Written)],
) -> Result<WriteStep, PlanError> {
    let name = key.trim_end_matches("[]");
    let table_key = TableKey::parse(name)
        .ok_or_else(|| PlanError::Invalid(format!("{key}: a batch must be named Table[]")))?;
    let objects = items
        .iter()
        .map(|item| match item {
            Json::Object(map) => TableObject::from_map(table_key.clone(), map.clone())
                .map_err(|e| PlanError::Invalid(e.to_string())),
            _ => Err(PlanError::Invalid(format!(
                "{key}: every item must be an object"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    match ctx.method {
        Method::Post => Ok(WriteStep::Insert(insert_step(
            table_key.text(),
            &objects,
            true,
            explain,
            ctx,
            written,
        )?)),
        Method::Put => Ok(WriteStep::UpdateBatch {
            key: table_key.text(),
            items: objects
                .iter()
                .map(|t| update_step(&table_key.text(), t, false, ctx))
                .collect::<Result<_, _>>()?,
        }),
        other => Err(PlanError::Forbidden(format!(
            "{other} cannot take a list {key}"
        ))),
    }
}

fn update_step(
    key: &str,
    t: &TableObject,
    explain: bool,
    ctx: &Scope<'_>,
) -> Result<UpdateStep, PlanError> {
    let planned = statements::update(t, ctx, &mut |_| None)?;
    let edits = planned
        .array_edits
        .iter()
        .map(|edit| {
            let column = planned
                .plan
                .table
                .column(&edit.column)
                .map(|c| c.name.clone())
                .unwrap_or(edit.column.clone());
            Ok(ArrayEditPlan {
                column: edit.column.clone(),
                ident: statements::column_ident(&planned.plan, &column)?,
                current: statements::current_value(
                    &planned.plan,
                    &planned.update.filter,
                    &edit.column,
                )?,
                add: edit.add,
                items: edit.items.clone(),
            })
        })
        .collect::<Result<Vec<_>, PlanError>>()?;
    Ok(UpdateStep {
        key: key.to_string(),
        table: t.key.table.clone(),
        explain,
        update: planned.update,
        edits,
        ids: planned.ids,
        calls: calls_of(t),
    })
}

fn delete_step(
    key: &str,
    t: &TableObject,
    explain: bool,
    ctx: &Scope<'_>,
) -> Result<DeleteStep, PlanError> {
    let conditions = TableObject {
        key: t.key.clone(),
        entries: t
            .entries
            .iter()
            .filter(|e| !matches!(e, TableEntry::Function { .. }))
            .cloned()
            .collect(),
    };
    let (delete, ids, _plan) = statements::delete(&conditions, ctx, &mut |_| None)?;
    Ok(DeleteStep {
        key: key.to_string(),
        table: t.key.table.clone(),
        explain,
        delete,
        ids,
        calls: calls_of(t),
    })
}
