//! What an object answers: `@key` (names for expressions), `@column` (its items parsed, or
//! the operator's fragments where `@raw` marks it), the table's own visible columns without
//! it, and the outputs answered as JSON (`@json` and the schema's JSON columns).

use super::raw::RawMarks;
use super::select_list::{self, TableNames};
use super::Keywords;
use crate::query::{Expr, Ident, SelectItem};
use crate::schema::ColumnKind;
use crate::{PlanError, Scope};

/// An object's select list.
pub(super) struct Columns {
    pub(super) items: Vec<SelectItem>,
    pub(super) distinct: bool,
    pub(super) aggregate: bool,
    pub(super) json_outputs: Vec<String>,
}

/// `@key`: names the object's other keys may use for expressions (public requests only).
pub(super) fn keys(
    kw: Keywords<'_>,
    names: &mut TableNames<'_>,
    ctx: &Scope<'_>,
) -> Result<(), PlanError> {
    if let Some(k) = kw.text("key") {
        if !ctx.method.is_public() {
            return Err(PlanError::Forbidden(
                "@key is not allowed in private requests".into(),
            ));
        }
        names.keys = select_list::keys(&k, names)?;
    }
    Ok(())
}

/// `@column` and `@json`; the select list's output names become names of `names` for the
/// clauses after it.
pub(super) fn columns(
    kw: Keywords<'_>,
    raw: &RawMarks<'_>,
    names: &mut TableNames<'_>,
    ctx: &Scope<'_>,
) -> Result<Columns, PlanError> {
    // `"@column": ""` names no column: the table's own, as the reference reads it (in a
    // joined table of a subquery it adds none, see `plan_subquery`).
    let column_text = kw.text("column").filter(|t| !t.trim().is_empty());
    let (items, distinct) = match column_text {
        Some(text) => {
            let list = if raw.column {
                super::raw::raw_columns(&text, &ctx.options.raw_sql, names)?
            } else {
                select_list::columns(&text, names)?
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
        None => (default_columns(names), false),
    };
    let aggregate = select_list::has_aggregate(&items);
    let mut json_outputs: Vec<String> = items
        .iter()
        .filter(|c| {
            matches!(
                &c.expr,
                Expr::Column {
                    kind: ColumnKind::Json,
                    ..
                }
            )
        })
        .map(|c| c.alias.as_str().to_string())
        .collect();
    json_outputs.extend(kw.list("json"));
    Ok(Columns {
        items,
        distinct,
        aggregate,
        json_outputs,
    })
}

/// The table's columns (or the derived table's outputs) but the hidden ones.
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
