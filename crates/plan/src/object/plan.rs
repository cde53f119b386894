//! One table object → a [`TablePlan`]: everything about its statement that does not depend
//! on other objects' results, put together from the keyword families: where its rows come
//! from (`source`), what it answers (`columns`), how they are grouped and ordered (`clauses`)
//! and its conditions (`conditions`); then the role's row filter, and the column gate.

use super::{Keywords, Place, TablePlan};
use crate::expr::check_length;
use crate::{access, PlanError, Scope};
use apijet_request::{TableEntry, TableObject};
use serde_json::Value as Json;

/// Plans the table object `obj` for `ctx.method`, sitting at `place` in its request.
pub(super) fn plan(
    obj: &TableObject,
    ctx: &Scope<'_>,
    place: Place,
) -> Result<TablePlan, PlanError> {
    // Every keyword's text is bounded before any of them is parsed.
    for e in &obj.entries {
        if let TableEntry::Keyword {
            name,
            value: Json::String(text),
        } = e
        {
            check_length(&format!("@{name}"), text, ctx.options.expr.max_length)?;
        }
    }
    let kw = Keywords(obj);
    let (source, nested) = super::source::source(obj, kw, ctx)?;
    let mut names = source.names(ctx);
    super::columns::keys(kw, &mut names, ctx)?;
    let raw = match kw.value("raw") {
        Some(v) => super::raw::raw_keys(v, obj)?,
        None => Default::default(),
    };
    let columns = super::columns::columns(kw, &raw, &mut names, ctx)?;
    let clauses = super::clauses::clauses(kw, &raw, &mut names, ctx)?;
    let explain = kw
        .value("explain")
        .and_then(Json::as_bool)
        .unwrap_or(ctx.global_explain);
    if explain && !ctx.options.debug {
        return Err(PlanError::Forbidden(
            "@explain is only available in debug mode".into(),
        ));
    }
    let conditions = super::conditions::conditions(obj, kw, &raw, &names, ctx, &nested, place)?;
    drop(names);

    let owner_reach = access::owner_reach(&source.table, source.role, ctx);
    let role_filter = access::role_filter(&source.table, source.role, ctx, &source.alias)?;
    // The exact conditions on hidden columns a private request's structure named (see
    // `crate::gate`); never those of a subquery.
    let may_test_hidden =
        (!ctx.method.is_public() || ctx.trusted) && matches!(place, Place::Object { .. });
    let hidden_keys = conditions
        .conds
        .iter()
        .filter(|c| may_test_hidden && c.is_exact() && c.key.column.starts_with('_'))
        .map(|c| c.key.column.clone())
        .collect();
    let plan = TablePlan {
        catalog: ctx.schema.catalog_view(&source.table.api_name),
        table: source.table,
        alias: source.alias,
        columns: columns.items,
        distinct: columns.distinct,
        aggregate: columns.aggregate,
        json_outputs: columns.json_outputs,
        conds: conditions.conds,
        combine: conditions.combine,
        group: clauses.group,
        having: clauses.having,
        order: clauses.order,
        from: source.from,
        casts: conditions.casts,
        explain,
        drop: kw.value("drop").and_then(Json::as_bool).unwrap_or(false),
        role: source.role,
        role_filter,
        owner_reach,
        limits: ctx.options.expr,
        echoes: conditions.echoes,
        procedures: conditions.procedures,
        // Grouped and DISTINCT lists without `@order` are sorted by their columns where the
        // engine does not sort them itself, so every engine answers in the order MariaDB's
        // grouping gives; MariaDB answers in its own order, as the reference.
        sort_unordered_groups: !ctx.options.expr.engine.sorted_groups,
        hidden_keys,
    };
    plan.admit_parts()?;
    Ok(plan)
}
