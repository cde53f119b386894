//! One table object → a [`TablePlan`]: everything about its query that does not depend on
//! other objects' results.

use super::select_list::{self, TableNames};
use super::{Place, TablePlan, FORCED_KEYS};
use crate::condition::combine;
use crate::condition::{CondSpec, Operand};
use crate::expr::check_length;
use crate::query::{Expr, Ident, Quantifier, SelectItem};
use crate::{access, Ctx, PlanError};
use apijet_request::{ConditionKey, Op, TableEntry, TableObject};
use serde_json::Value as Json;
use std::collections::HashMap;

fn text_of(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Null => None,
        other => Some(other.to_string()),
    }
}

/// Plans the table object `obj` for `ctx.method`, sitting at `place` in its request.
pub(super) fn plan(obj: &TableObject, ctx: &Ctx<'_>, place: Place) -> Result<TablePlan, PlanError> {
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
    let kw = |name: &str| {
        obj.entries.iter().find_map(|e| match e {
            TableEntry::Keyword { name: n, value } if n == name => Some(value),
            _ => None,
        })
    };
    let role_value = kw("role").or(ctx.global_role);
    let (table, role) = access::check(&obj.key.table, role_value, ctx)?;
    // Under a Request structure, the subqueries of an object run with the object's role
    // unless they name one: a subquery is part of what the tag allows, not a way around it.
    let nested = Ctx {
        global_role: if ctx.method.is_public() {
            ctx.global_role
        } else {
            role_value
        },
        ..*ctx
    };
    // Writes name their table without an alias (not every engine accepts one in UPDATE and
    // DELETE), so their conditions are qualified with the table's own name.
    let alias = if ctx.method.is_query() {
        Ident::new(obj.key.sql_alias())
    } else {
        Ident::new(table.sql_name.clone())
    };

    let named = |name: &str| ctx.subqueries.and_then(|m| m.get(name)).cloned();
    let from = match obj.entries.iter().find_map(|e| match e {
        TableEntry::FromSubquery(sq) => Some(sq),
        _ => None,
    }) {
        Some(sq) => Some(Box::new(super::subquery::plan_subquery(sq, &nested)?)),
        None => match kw("from@").and_then(Json::as_str) {
            Some(name) => Some(Box::new(named(name).ok_or_else(|| {
                PlanError::Invalid(format!("@from@:'{name}' names no subquery defined before"))
            })?)),
            None => None,
        },
    };
    let mut names = TableNames {
        table: &table,
        limits: ctx.options.expr,
        subquery_columns: from.as_ref().map(|s| {
            s.columns
                .iter()
                .map(|c| c.alias.as_str().to_string())
                .collect()
        }),
        qualifier: alias.clone(),
        keys: HashMap::new(),
        select_aliases: Vec::new(),
        alias_as_expr: false,
    };
    if let Some(k) = kw("key").and_then(text_of) {
        if !ctx.method.is_public() {
            return Err(PlanError::Forbidden(
                "@key is not allowed in private requests".into(),
            ));
        }
        names.keys = select_list::keys(&k, &names)?;
    }

    let raw = match kw("raw") {
        Some(v) => super::raw::raw_keys(v, obj)?,
        None => Default::default(),
    };
    // `"@column": ""` names no column: the table's own, as the reference reads it (in a
    // joined table of a subquery it adds none, see `plan_subquery`).
    let column_text = kw("column")
        .and_then(text_of)
        .filter(|t| !t.trim().is_empty());
    let (columns, distinct) = match column_text {
        Some(text) => {
            let list = if raw.column {
                super::raw::raw_columns(&text, &ctx.options.raw_sql, &names)?
            } else {
                select_list::columns(&text, &names)?
            };
            names.select_aliases = list
                .items
                .iter()
                .map(|c| (c.alias.as_str().to_string(), c.expr.clone()))
                .collect();
            (list.items, list.distinct)
        }
        // The default columns' aliases are the table's own column names, which resolve
        // as columns before any alias is consulted: no alias list to build.
        None => (default_columns(&names), false),
    };
    let aggregate = select_list::has_aggregate(&columns);

    let order = match kw("order").and_then(text_of) {
        Some(t) => select_list::order(&t, &names)?,
        None => Vec::new(),
    };
    let group = match kw("group").and_then(text_of) {
        Some(t) => select_list::group(&t, &names)?,
        None => Vec::new(),
    };
    names.alias_as_expr = true;
    let having = match (
        kw("having").and_then(text_of),
        kw("having&").and_then(text_of),
    ) {
        (Some(t), _) if raw.having => {
            Some(super::raw::raw_having(&t, &ctx.options.raw_sql, &names)?)
        }
        (Some(t), _) => Some(select_list::having(&t, false, &names)?),
        (None, Some(t)) => Some(select_list::having(&t, true, &names)?),
        _ => None,
    };
    names.alias_as_expr = false;

    let mut json_outputs: Vec<String> = columns
        .iter()
        .filter(|c| {
            matches!(
                &c.expr,
                Expr::Column {
                    kind: crate::schema::ColumnKind::Json,
                    ..
                }
            )
        })
        .map(|c| c.alias.as_str().to_string())
        .collect();
    if let Some(t) = kw("json").and_then(text_of) {
        json_outputs.extend(t.split(',').map(|s| s.trim().to_string()));
    }
    let casts = match kw("cast").and_then(text_of) {
        Some(t) => select_list::casts(&t)?,
        None => HashMap::new(),
    };
    let stringify: Vec<String> = kw("string")
        .and_then(text_of)
        .map(|t| t.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_default();
    let trim: Vec<String> = kw("trim")
        .and_then(text_of)
        .map(|t| t.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_default();

    let explain = kw("explain")
        .and_then(Json::as_bool)
        .unwrap_or(ctx.global_explain);
    if explain && !ctx.options.debug {
        return Err(PlanError::Forbidden(
            "@explain is only available in debug mode".into(),
        ));
    }

    let mut conds = Vec::new();
    let mut echoes = Vec::new();
    let mut procedures = Vec::new();
    for entry in &obj.entries {
        match entry {
            TableEntry::Condition { key, value } if raw.conditions.contains(&key.raw.as_str()) => {
                conds.push(CondSpec::new(
                    key.clone(),
                    lhs_of(key, &names)?,
                    Operand::Raw(super::raw::raw_fragment(key, value, &ctx.options.raw_sql)?),
                ))
            }
            TableEntry::Condition { key, .. } | TableEntry::Slot { key, .. } => {
                let operand = match entry {
                    TableEntry::Slot { slot, .. } => Operand::Slot(*slot),
                    TableEntry::Condition { value, .. } => Operand::Literal(value.clone()),
                    _ => continue,
                };
                conds.push(CondSpec {
                    stringify: stringify.iter().any(|k| k == &key.raw),
                    trim: trim.iter().any(|k| k == &key.raw),
                    ..CondSpec::new(key.clone(), lhs_of(key, &names)?, operand)
                });
            }
            TableEntry::Function { key, call }
                if key.ends_with("-()") && place == (Place::Object { functions: true }) =>
            {
                let name = key.trim_end_matches("-()");
                let key =
                    ConditionKey::parse(name).map_err(|e| PlanError::Invalid(e.to_string()))?;
                conds.push(CondSpec {
                    stringify: stringify.iter().any(|k| k == &key.raw),
                    trim: trim.iter().any(|k| k == &key.raw),
                    ..CondSpec::new(
                        key.clone(),
                        lhs_of(&key, &names)?,
                        Operand::Function(call.clone()),
                    )
                });
            }
            TableEntry::RefCondition { key, path } => conds.push(CondSpec::new(
                key.clone(),
                lhs_of(key, &names)?,
                match named(path) {
                    Some(sub) => Operand::Subquery(Box::new(sub), None),
                    None => Operand::Ref(path.clone()),
                },
            )),
            TableEntry::SubqueryCondition { key, subquery } => {
                let sub = super::subquery::plan_subquery(subquery, &nested)?;
                let range = match &subquery.range {
                    None => None,
                    Some(v) => match v.as_str() {
                        Some("ANY") => Some(Quantifier::Any),
                        Some("ALL") => Some(Quantifier::All),
                        _ => {
                            return Err(PlanError::Invalid(format!(
                                "{}: range must be ANY or ALL",
                                key.raw
                            )))
                        }
                    },
                };
                let lhs = if key.op == Op::Exists {
                    Expr::Star
                } else {
                    lhs_of(key, &names)?
                };
                conds.push(CondSpec::new(
                    key.clone(),
                    lhs,
                    Operand::Subquery(Box::new(sub), range),
                ));
            }
            TableEntry::Keyword { name, value } if name.ends_with("()") => {
                if !ctx.method.is_query() || ctx.method.is_count() {
                    return Err(PlanError::Forbidden(format!(
                        "@{name}: stored procedures are called from GET and GETS only"
                    )));
                }
                procedures.push(super::procedure::plan_call(
                    name,
                    value,
                    &ctx.options.procedures,
                )?)
            }
            TableEntry::Keyword { name, value } => {
                use crate::keywords::{check_table_keyword, KeyUse};
                if check_table_keyword(name, value, ctx)? == KeyUse::Custom {
                    // Echoed after the row's columns, where functions read it too.
                    echoes.push((format!("@{name}"), value.clone()));
                }
            }
            TableEntry::Echo { key, value } => echoes.push((key.clone(), value.clone())),
            _ => {}
        }
    }

    let combine = match kw("combine").and_then(text_of) {
        Some(t) => {
            let c = combine::parse(&t, ctx.options.expr.max_depth)?;
            for k in c.keys() {
                if FORCED_KEYS.contains(&k) {
                    return Err(PlanError::Forbidden(format!(
                        "@combine:'{t}' must not name {k}: id, id{{}}, userId and \
                             userId{{}} are always AND-ed"
                    )));
                }
                if !conds.iter().any(|c| c.key.raw == k) {
                    return Err(PlanError::Invalid(format!(
                        "@combine:'{t}' names '{k}', but the object has no condition {k}"
                    )));
                }
            }
            Some(c)
        }
        None => None,
    };
    let owner_reach = access::owner_reach(&table, role, ctx);
    let role_filter = access::role_filter(&table, role, ctx, &alias)?;
    let may_test_hidden =
        (!ctx.method.is_public() || ctx.trusted) && matches!(place, Place::Object { .. });
    let hidden_keys = conds
        .iter()
        .filter(|c| may_test_hidden && c.is_exact() && c.key.column.starts_with('_'))
        .map(|c| c.key.column.clone())
        .collect();

    let plan = TablePlan {
        catalog: ctx.schema.catalog_view(&table.api_name),
        table,
        alias,
        columns,
        distinct,
        aggregate,
        json_outputs,
        conds,
        combine,
        group,
        having,
        order,
        from,
        casts,
        explain,
        drop: kw("drop").and_then(Json::as_bool).unwrap_or(false),
        role,
        role_filter,
        owner_reach,
        limits: ctx.options.expr,
        echoes,
        procedures,
        // Grouped and DISTINCT lists without `@order` are sorted by their columns where the
        // engine does not sort them itself, so every engine answers in the order
        // MariaDB's grouping gives; MariaDB answers in its own order, as the reference.
        sort_unordered_groups: !ctx.options.expr.engine.sorted_groups,
        hidden_keys,
    };
    plan.admit_parts()?;
    Ok(plan)
}

fn lhs_of(key: &ConditionKey, names: &TableNames<'_>) -> Result<Expr, PlanError> {
    use apijet_request::LengthFn;
    let base = if let Some(e) = names.keys.get(&key.column) {
        e.clone()
    } else {
        names
            .column(&key.column)
            .ok_or_else(|| PlanError::UnknownColumn {
                table: names.table.api_name.clone(),
                column: key.column.clone(),
            })?
    };
    Ok(match key.length {
        Some(LengthFn::Text) => Expr::TextLength(Box::new(base)),
        Some(LengthFn::Json) => Expr::JsonLength(Box::new(base)),
        None => base,
    })
}

fn default_columns(names: &TableNames<'_>) -> Vec<SelectItem> {
    let item = |c: &str| {
        if c.starts_with('_') {
            return None;
        }
        names.column(c).map(|expr| SelectItem {
            expr,
            alias: Ident::new(c),
        })
    };
    match &names.subquery_columns {
        Some(cols) => cols.iter().filter_map(|c| item(c)).collect(),
        None => names
            .table
            .columns
            .iter()
            .filter_map(|c| item(&c.name))
            .collect(),
    }
}
