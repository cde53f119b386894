//! Subqueries of objects (`"k{}@": {…}`, `"@from@": {…}`, named `"sq@": {…}`), planned into
//! complete statements, with the SQL joins of their `join`.

use super::joins::{self, JoinPlan};
use super::TablePlan;
use crate::query::{Expr, Pred, Select, SelectItem};
use crate::{PlanError, Scope};
use apijet_request::{SubqueryObject, TableEntry, TableObject};
use serde_json::Value as Json;

/// Plans a subquery object into a complete SELECT (literal conditions only), with the SQL
/// joins of its `join` (`"id@":{"from":"Comment","join":"&/Moment/id@","Comment":{…},
/// "Moment":{"id@":"/Comment/momentId",…}}`).
pub fn plan_subquery(sq: &SubqueryObject, ctx: &Scope<'_>) -> Result<Select, PlanError> {
    use apijet_request::Node;
    if sq.with.as_ref().is_some_and(|w| !w.is_boolean()) {
        return Err(PlanError::WrongType(
            "with must be true or false: a subquery as a WITH clause".into(),
        ));
    }
    let depth = subquery_depth(sq);
    if depth > ctx.options.max_depth {
        return Err(PlanError::Limit(format!(
            "subqueries nest {depth} levels deep, more than the limit of {} (setting max_depth)",
            ctx.options.max_depth
        )));
    }
    let tables: Vec<(&str, &TableObject)> = sq
        .items
        .members
        .iter()
        .filter_map(|m| match &m.node {
            Node::Table(t) => Some((m.key.as_str(), t)),
            _ => None,
        })
        .collect();
    if let Some(m) = sq
        .items
        .members
        .iter()
        .find(|m| !matches!(m.node, Node::Table(_)))
    {
        return Err(PlanError::Invalid(format!(
            "a subquery holds table objects only: {} is not one",
            m.key
        )));
    }
    let (main_key, table) = tables
        .iter()
        .find(|(k, _)| sq.from.as_deref().is_none_or(|f| f == *k))
        .copied()
        .ok_or_else(|| {
            PlanError::Invalid("a subquery needs a table object named by from".into())
        })?;
    let plan = TablePlan::in_subquery(table, ctx)?;
    let mut no_refs = |_: crate::condition::ValueSource<'_>| None;
    let mut select = plan.select(&[], &mut no_refs)?.ok_or_else(|| {
        PlanError::Invalid("a subquery's conditions cannot use references".into())
    })?;
    let specs = match &sq.join {
        Some(j) => super::joins::join_specs(j)?,
        None => Vec::new(),
    };
    for (key, _) in &tables {
        if *key != main_key && !specs.iter().any(|s| s.table_key == *key) {
            return Err(PlanError::Invalid(format!(
                "the subquery selects from {main_key}; its table object {key} is in no join"
            )));
        }
    }
    let mut planned = Vec::with_capacity(specs.len());
    for spec in specs {
        if spec.kind == '@' || spec.table_key.contains('/') {
            return Err(PlanError::Forbidden(format!(
                "join: '{}/{}': a subquery takes SQL joins only, not an @ APP JOIN",
                spec.kind, spec.table_key
            )));
        }
        let vice = tables
            .iter()
            .find(|(k, _)| *k == spec.table_key)
            .map(|(_, t)| *t)
            .ok_or_else(|| {
                PlanError::Invalid(format!(
                    "join: {} is not a table object of the subquery",
                    spec.table_key
                ))
            })?;
        let vice_plan = TablePlan::in_subquery(vice, ctx)?;
        let on = joins::on_object(&spec, vice)?;
        let named = joins::names_columns(vice) || on.as_ref().is_some_and(joins::names_columns);
        let on_names_columns = on.as_ref().is_some_and(joins::names_columns);
        let on = on.map(|o| TablePlan::in_subquery(&o, ctx)).transpose()?;
        let join = JoinPlan::new(spec, vice_plan, on, on_names_columns)?;
        if !join.apply(&mut select, main_key, &[])? {
            // A vice that cannot match empties an inner join and leaves the others' rows.
            if join.spec.kind == '&' {
                select.filter = Some(Pred::Or(Vec::new()));
            }
            continue;
        }
        select.columns.extend(output_columns(&join, named));
        planned.push(join);
    }
    if !planned.is_empty() {
        let joined: Vec<&JoinPlan> = planned.iter().collect();
        joins::admit_joined(&select, &plan, &joined)?;
    }
    if let Some(c) = sq.count.as_ref().and_then(Json::as_u64) {
        select.limit = Some(c);
        select.offset = sq.page.as_ref().and_then(Json::as_u64).unwrap_or(0) * c;
    }
    Ok(select)
}

/// The columns a joined table adds to its subquery's output, as the reference selects them
/// after the main table's: its `@column`, or its ON object's (none without one, or with
/// `"@column": ""`), so that an outer `@from@` may read them (`"@column":"DISTINCT
/// host,project"` over TestRecord joined with Document). A RIGHT join reads the joined table
/// through a subquery of its columns: only plain columns can be named there.
fn output_columns(join: &JoinPlan, named: bool) -> Vec<SelectItem> {
    if !named {
        return Vec::new();
    }
    join.columns
        .iter()
        .filter(|c| join.spec.kind != '>' || matches!(c.expr, Expr::Column { .. }))
        .cloned()
        .collect()
}

/// How deep subqueries nest in `sq`, itself included. The tree is at most as deep as the JSON
/// parser allows, so this walk is bounded; planning (and every engine's parser) is not.
fn subquery_depth(sq: &SubqueryObject) -> usize {
    use apijet_request::Node;
    1 + sq
        .items
        .members
        .iter()
        .filter_map(|m| match &m.node {
            Node::Table(t) => Some(t),
            _ => None,
        })
        .flat_map(|t| t.entries.iter())
        .filter_map(|e| match e {
            TableEntry::SubqueryCondition { subquery, .. } => Some(subquery_depth(subquery)),
            TableEntry::FromSubquery(subquery) => Some(subquery_depth(subquery)),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}
