//! How an object's rows are grouped, filtered once grouped and ordered: `@group`, `@having`
//! (items OR-ed; `@having&` AND-ed; the operator's fragments where `@raw` marks it) and
//! `@order`.

use super::raw::RawMarks;
use super::select_list::{self, TableNames};
use super::Keywords;
use crate::query::{Expr, OrderItem, Pred};
use crate::{PlanError, Scope};

/// GROUP BY, HAVING and ORDER BY of an object.
pub(super) struct Clauses {
    pub(super) group: Vec<Expr>,
    pub(super) having: Option<Pred>,
    pub(super) order: Vec<OrderItem>,
}

/// The clauses of `kw`, resolving names against `names` (with the select list's output
/// names).
pub(super) fn clauses(
    kw: Keywords<'_>,
    raw: &RawMarks<'_>,
    names: &mut TableNames<'_>,
    ctx: &Scope<'_>,
) -> Result<Clauses, PlanError> {
    let order = match kw.text("order") {
        Some(t) => select_list::order(&t, names)?,
        None => Vec::new(),
    };
    let group = match kw.text("group") {
        Some(t) => select_list::group(&t, names)?,
        None => Vec::new(),
    };
    // HAVING names select-list outputs by their expressions: not every engine sees output
    // names there.
    names.alias_as_expr = true;
    let having = match (kw.text("having"), kw.text("having&")) {
        (Some(t), _) if raw.having => Some(super::raw::raw_having(&t, &ctx.options.raw_sql, names)),
        (Some(t), _) => Some(select_list::having(&t, false, names)),
        (None, Some(t)) => Some(select_list::having(&t, true, names)),
        _ => None,
    }
    .transpose();
    names.alias_as_expr = false;
    Ok(Clauses {
        group,
        having: having?,
        order,
    })
}
