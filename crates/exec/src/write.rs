//! POST, PUT and DELETE: every object of a request in one transaction (protocol §10).
//!
//! The request has passed the `Request` structure already. Each object becomes one statement
//! (a batch of inserts becomes one multi-row INSERT per chunk); the transaction commits only if
//! every object succeeded, and a write that changes no row (not the visitor's, or gone) is 401
//! and rolls everything back, as the reference does.

use crate::backend::{Backend, Tx};
use crate::ids::IdGenerator;
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_core::{Method, Value, Visitor};
use apijet_plan::query::Assign;
use apijet_plan::schema::SchemaCache;
use apijet_plan::verify::ExistenceCheck;
use apijet_plan::write::{self, ArrayEdit, InsertRow};
use apijet_plan::{Ctx, PlanError, PlanOptions, TablePlan};
use apijet_request::{Node, Request, TableEntry, TableKey, TableObject};
use apijet_sql::{render, render_delete, render_insert, render_update, Dialect, Statement};
use serde_json::{json, Map, Value as Json};

/// Everything a write needs.
pub struct WriteEnv<'a> {
    /// The database.
    pub backend: &'a Backend,
    /// Its dialect.
    pub dialect: &'a dyn Dialect,
    /// The schema cache.
    pub schema: &'a SchemaCache,
    /// Limits and debug mode.
    pub options: &'a PlanOptions,
    /// POST, PUT or DELETE.
    pub method: Method,
    /// The visitor (writes always have one).
    pub visitor: Option<&'a Visitor>,
    /// Ids for new rows.
    pub ids: &'a IdGenerator,
    /// Rows per INSERT statement at most (engines bound the parameters of one statement).
    pub max_insert_rows: usize,
    /// The server itself runs the request (`/register`): see [`Ctx::trusted`].
    pub trusted: bool,
}

/// Runs a verified write request in one transaction; answers its objects in request order.
pub async fn write(
    req: &Request,
    checks: &[ExistenceCheck],
    env: &WriteEnv<'_>,
) -> Result<Map<String, Json>, ExecError> {
    let mut tx = env.backend.begin().await?;
    let result = write_in(&mut tx, req, checks, env).await;
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

fn ctx<'a>(env: &'a WriteEnv<'a>, req: &'a Request) -> Ctx<'a> {
    Ctx {
        schema: env.schema,
        options: env.options,
        method: env.method,
        visitor: env.visitor,
        global_role: req.global("role"),
        global_explain: false,
        subqueries: None,
        trusted: env.trusted,
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

/// Runs a verified write request inside a transaction the caller owns: `/crud` runs several
/// requests, each with its own method, in one transaction.
pub async fn write_in(
    tx: &mut Tx<'_>,
    req: &Request,
    checks: &[ExistenceCheck],
    env: &WriteEnv<'_>,
) -> Result<Map<String, Json>, ExecError> {
    for check in checks {
        let table = env
            .schema
            .table(&check.table)
            .ok_or_else(|| PlanError::AccessDenied {
                table: check.table.clone(),
                role: apijet_core::Role::Unknown,
                method: env.method,
            })?;
        let select = write::existence_count(table, &check.values, check.exclude_id.as_ref())?;
        let n = count(tx, &render(env.dialect, &select)).await?;
        let described = check
            .values
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(", ");
        if check.must_exist && n == 0 {
            return Err(PlanError::Conflict(format!(
                "{}: no row with {described} exists",
                check.table
            ))
            .into());
        }
        if !check.must_exist && n > 0 {
            return Err(PlanError::Conflict(format!(
                "{}: a row with {described} exists already",
                check.table
            ))
            .into());
        }
    }
    let explain = req
        .global("explain")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    if explain && !env.options.debug {
        return Err(PlanError::Forbidden("@explain is only available in debug mode".into()).into());
    }
    let mut out = Map::new();
    // What earlier objects wrote, for references like "id@": "Privacy/id".
    let mut written: Map<String, Json> = Map::new();
    for m in &req.root.members {
        match &m.node {
            Node::Table(t) => {
                // An object's own `@explain` answers its statement, as the root's does.
                let explain = explain
                    || t.entries.iter().any(|e| {
                        matches!(e, TableEntry::Keyword { name, value: Json::Bool(true) } if name == "explain")
                    });
                if explain && !env.options.debug {
                    return Err(PlanError::Forbidden(
                        "@explain is only available in debug mode".into(),
                    )
                    .into());
                }
                let answer = match env.method {
                    Method::Post => {
                        post(
                            tx,
                            req,
                            env,
                            std::slice::from_ref(t),
                            false,
                            explain,
                            &written,
                        )
                        .await?
                    }
                    Method::Put => put(tx, req, env, t, explain).await?,
                    Method::Delete => delete(tx, req, env, t, explain).await?,
                    other => {
                        return Err(ExecError::Forbidden(format!(
                            "{other} cannot write {}",
                            m.key
                        )))
                    }
                };
                let mut record = values_of(t);
                if let Some(id) = answer.get("id") {
                    record.insert("id".into(), id.clone());
                }
                written.insert(m.key.clone(), Json::Object(record));
                out.insert(m.key.clone(), Json::Object(answer));
            }
            Node::Value(Json::Array(items)) if m.key.ends_with("[]") => {
                let key = batch_table(&m.key)?;
                let objects = items
                    .iter()
                    .map(|item| match item {
                        Json::Object(map) => TableObject::from_map(key.clone(), map.clone())
                            .map_err(|e| ExecError::Invalid(e.to_string())),
                        _ => Err(ExecError::Invalid(format!(
                            "{}: every item must be an object",
                            m.key
                        ))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let answer = match env.method {
                    Method::Post => post(tx, req, env, &objects, true, explain, &written).await?,
                    Method::Put => put_batch(tx, req, env, &objects).await?,
                    other => {
                        return Err(ExecError::Forbidden(format!(
                            "{other} cannot take a list {}",
                            m.key
                        )))
                    }
                };
                out.insert(key.text(), Json::Object(answer));
            }
            Node::Array(_) => {
                return Err(ExecError::Forbidden(format!(
                    "{}:{{}} arrays are only supported by GET and GETS",
                    m.key
                )))
            }
            Node::Value(v) => {
                out.insert(m.key.clone(), v.clone());
            }
            Node::Reference(_) | Node::Subquery(_) | Node::Function(_) => {
                return Err(ExecError::Forbidden(format!(
                    "{} is not allowed in a write",
                    m.key
                )))
            }
        }
    }
    Ok(out)
}

/// A request the write queue can take instead: one object inserted as one row, with no
/// UNIQUE/EXIST check, reference or function to run after it. Its validations run here.
pub fn single_insert(
    req: &Request,
    checks: &[ExistenceCheck],
    env: &WriteEnv<'_>,
) -> Result<Option<(String, apijet_plan::query::Insert, Option<Json>)>, ExecError> {
    if env.method != Method::Post || !checks.is_empty() || req.global("explain").is_some() {
        return Ok(None);
    }
    let [m] = req.root.members.as_slice() else {
        return Ok(None);
    };
    let Node::Table(t) = &m.node else {
        return Ok(None);
    };
    let simple = t.entries.iter().all(|e| match e {
        TableEntry::Function { key, .. } => key.ends_with("-()"),
        TableEntry::Keyword { name, .. } if name == "explain" => false,
        TableEntry::RefCondition { .. } | TableEntry::SubqueryCondition { .. } => false,
        _ => true,
    });
    if !simple {
        return Ok(None);
    }
    before(t, env)?;
    let ctx = ctx(env, req);
    let mut next_id = || env.ids.next();
    let (plan, row) = write::insert_row(t, &ctx, &mut next_id, &mut |_| None)?;
    let id = row.id.clone();
    Ok(Some((m.key.clone(), write::insert(&plan, vec![row]), id)))
}

/// The answer of a queued insert, shaped like any other.
pub fn single_insert_answer(id: Option<Json>) -> Map<String, Json> {
    let mut answer = success(1);
    if let Some(id) = id {
        answer.insert("id".into(), id);
    }
    answer
}

fn batch_table(key: &str) -> Result<TableKey, ExecError> {
    let name = key.trim_end_matches("[]");
    TableKey::parse(name)
        .ok_or_else(|| ExecError::Invalid(format!("{key}: a batch must be named Table[]")))
}

fn success(count: u64) -> Map<String, Json> {
    let mut m = Map::new();
    m.insert("ok".into(), Json::Bool(true));
    m.insert("code".into(), json!(200));
    m.insert("msg".into(), json!("success"));
    m.insert("count".into(), json!(count));
    m
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

/// `k-()` functions injected by the structure run before the statement (validations).
fn before(t: &TableObject, env: &WriteEnv<'_>) -> Result<(), ExecError> {
    let mut values = None;
    for e in &t.entries {
        if let TableEntry::Function { key, call } = e {
            if key.ends_with("-()") {
                // Collected only when a validation needs them: every batch item passes here.
                let values = values.get_or_insert_with(|| values_of(t));
                crate::functions::call(call, values, env.visitor)?;
            }
        }
    }
    Ok(())
}

/// `k()` functions run after the statement; their results join the answer.
async fn after(
    tx: &mut Tx<'_>,
    t: &TableObject,
    env: &WriteEnv<'_>,
    answer: &mut Map<String, Json>,
) -> Result<(), ExecError> {
    let values = values_of(t);
    for e in &t.entries {
        if let TableEntry::Function { key, call } = e {
            if key.ends_with("-()") {
                continue;
            }
            let name = key.trim_end_matches("()").trim_end_matches('+');
            let result = match write_function(tx, call, &values, env).await? {
                Some(v) => Some(v),
                None => crate::functions::call(call, &values, env.visitor)?,
            };
            if let Some(v) = result {
                answer.insert(name.to_string(), v);
            }
        }
    }
    Ok(())
}

/// The demo's functions that write: deleting a moment's comments, a comment's replies.
async fn write_function(
    tx: &mut Tx<'_>,
    call: &str,
    values: &Map<String, Json>,
    env: &WriteEnv<'_>,
) -> Result<Option<Json>, ExecError> {
    let (column, recursive) = if call == "deleteCommentOfMoment(id)" {
        ("momentId", false)
    } else if call == "deleteChildComment(id)" {
        ("toId", true)
    } else {
        return Ok(None);
    };
    let Some(id) = values.get("id").cloned() else {
        return Ok(Some(json!(0)));
    };
    let Some(table) = env.schema.table("Comment") else {
        return Ok(Some(json!(0)));
    };
    let mut total = 0u64;
    let mut parents = vec![Value::from_json(&id)];
    while !parents.is_empty() {
        let mut next = Vec::new();
        if recursive {
            // Replies of replies go too: collect the next level before deleting this one.
            let select = write::ids_where(table, column, parents.clone())?;
            let mut sink = CollectSink::new(&[]);
            tx.fetch(&render(env.dialect, &select), &mut sink).await?;
            next.extend(
                sink.rows
                    .iter()
                    .filter_map(|r| r.get("id"))
                    .map(Value::from_json),
            );
        }
        let delete = write::delete_where(table, column, parents)?;
        total += tx.execute(&render_delete(env.dialect, &delete)).await?;
        parents = if recursive { next } else { Vec::new() };
    }
    Ok(Some(json!(total)))
}

async fn post(
    tx: &mut Tx<'_>,
    req: &Request,
    env: &WriteEnv<'_>,
    objects: &[TableObject],
    batch: bool,
    explain: bool,
    written: &Map<String, Json>,
) -> Result<Map<String, Json>, ExecError> {
    let ctx = ctx(env, req);
    let mut rows: Vec<InsertRow> = Vec::with_capacity(objects.len());
    let mut plan: Option<TablePlan> = None;
    // Items with the same key and keywords plan the same: planned once per batch, not per item.
    type PlanInputs<'o> = (&'o apijet_request::TableKey, Vec<(&'o str, &'o Json)>);
    let mut shared: Option<(PlanInputs<'_>, TablePlan)> = None;
    let mut next_id = || env.ids.next();
    for t in objects {
        before(t, env)?;
        let mut resolve = |path: &str| {
            let mut v = written.get(path.split('/').next().unwrap_or_default())?;
            for seg in path.split('/').skip(1) {
                v = v.get(seg)?;
            }
            Some(v.clone())
        };
        let inputs = write::insert_plan_inputs(t);
        let p = match &mut shared {
            Some((i, p)) if *i == inputs => &*p,
            slot => &slot.insert((inputs, write::insert_plan(t, &ctx)?)).1,
        };
        let row = write::insert_row_on(p, t, &ctx, &mut next_id, &mut resolve)?;
        if plan.is_none() {
            plan = Some(p.clone());
        }
        rows.push(row);
    }
    let plan = plan.ok_or_else(|| ExecError::Invalid("a batch needs at least one item".into()))?;
    let ids: Vec<Json> = rows
        .iter()
        .map(|r| r.id.clone().unwrap_or(Json::Null))
        .collect();
    let mut inserted = 0;
    let mut sql = Vec::new();
    // Items with the same columns share a statement; each statement stays under the
    // engines' parameter limits.
    let mut groups: Vec<Vec<InsertRow>> = Vec::new();
    for row in rows {
        match groups.iter_mut().find(|g| g[0].columns == row.columns) {
            Some(g) => g.push(row),
            None => groups.push(vec![row]),
        }
    }
    for mut group in groups {
        let per_statement =
            (30_000 / group[0].columns.len().max(1)).clamp(1, env.max_insert_rows.max(1));
        while !group.is_empty() {
            let rest = group.split_off(per_statement.min(group.len()));
            let stmt = render_insert(env.dialect, &write::insert(&plan, group));
            inserted += tx.execute(&stmt).await?;
            sql.push(stmt.sql);
            group = rest;
        }
    }
    let mut answer = Map::new();
    if explain {
        answer.insert("sql".into(), json!(sql.join(";\n")));
    }
    answer.extend(success(inserted));
    if batch {
        answer.insert("id[]".into(), Json::Array(ids));
    } else if let Some(id) = ids.into_iter().next().filter(|v| !v.is_null()) {
        answer.insert("id".into(), id);
    }
    if let Some(t) = objects.first().filter(|_| !batch) {
        after(tx, t, env, &mut answer).await?;
    }
    Ok(answer)
}

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

async fn put(
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

async fn put_batch(
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

async fn delete(
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
    let stmt = render_delete(env.dialect, &delete);
    change(tx, env, t, &stmt, ids, explain).await
}
