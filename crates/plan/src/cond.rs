//! A condition of a table object: its key, its left side and where its value comes from.

use crate::query::{Expr, Quantifier, Select};
use apijet_request::ConditionKey;
use serde_json::Value as Json;
use std::sync::Arc;

/// Where a condition's value comes from.
#[derive(Debug, Clone)]
pub enum Operand {
    /// The value in the request.
    Literal(Json),
    /// A path to another object's result, resolved at execution.
    Ref(String),
    /// A subquery.
    Subquery(Box<Select>, Option<Quantifier>),
    /// A fragment of the operator's `raw_sql` allow-list, marked by `@raw`.
    Raw(Arc<str>),
}

/// A condition of a table object.
#[derive(Debug, Clone)]
pub struct CondSpec {
    /// The key as parsed.
    pub key: ConditionKey,
    /// The left side (column, `@key` expression, length of a column).
    pub lhs: Expr,
    /// The value.
    pub operand: Operand,
}

impl CondSpec {
    /// A plain `column: value` condition on the column itself: the only form in which the gate
    /// lets a structure-named hidden column be compared.
    pub fn is_exact(&self) -> bool {
        self.key.is_plain()
            && matches!(self.operand, Operand::Literal(_))
            && matches!(&self.lhs, Expr::Column { name, .. } if name.as_str() == self.key.column)
    }
}

/// Looks up a reference path among earlier results.
pub type Resolver<'r> = &'r mut dyn FnMut(&str) -> Option<Json>;
