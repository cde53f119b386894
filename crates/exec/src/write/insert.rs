//! POST: the rows of an object or a `Table[]` batch, one multi-row INSERT per chunk of rows
//! with the same columns; and the single-row POST the write queue takes instead.

use super::calls::{after, before};
use super::{ctx, success, WriteEnv};
use crate::backend::Tx;
use crate::ExecError;
use apijet_core::Method;
use apijet_plan::verify::ExistenceCheck;
use apijet_plan::write::{self, InsertRow};
use apijet_plan::TablePlan;
use apijet_request::{Node, Request, TableEntry, TableObject};
use apijet_sql::render_insert;
use serde_json::{json, Map, Value as Json};

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

pub(super) async fn post(
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
        let mut resolve = |v: apijet_plan::ValueSource<'_>| {
            let apijet_plan::ValueSource::Path(path) = v else {
                return None;
            };
            // Every object of a write sits at the root: `/Random/id` (the path from the root,
            // as the demo's `POST Random` structure writes it) and `Random/id` are the same.
            let mut segments = path.strip_prefix('/').unwrap_or(path).split('/');
            let mut v = written.get(segments.next().unwrap_or_default())?;
            for seg in segments {
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
