//! A condition of a table object: its key, its left side and where its value comes from.

pub(crate) mod assemble;
pub mod combine;
pub mod path;
pub(crate) mod predicate;

use crate::query::{Expr, Quantifier, Select};
use apijet_request::ConditionKey;
use serde_json::Value as Json;
use std::sync::Arc;

/// Where a condition's value comes from.
#[derive(Debug, Clone)]
pub enum Operand {
    /// A value given while planning (a join's ON object, a function's result).
    Literal(Json),
    /// The request's value in this slot (see [`crate::shape`]), bound per execution.
    Slot(usize),
    /// A path to another object's result, resolved at execution.
    Ref(path::RefPath),
    /// The result of the object's `k-()` function, run before its statement.
    Function(crate::call::Planned),
    /// Every parent item's value of link `n`: the IN list of a member batched for all the
    /// items of its array.
    Parent(usize),
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
    /// `@string` names the key: a value that is not text is compared as its JSON text.
    pub stringify: bool,
    /// `@trim` names the key: a text value is compared without its surrounding spaces.
    pub trim: bool,
}

impl CondSpec {
    /// A plain `column: value` condition on the column itself: the only form in which the gate
    /// lets a structure-named hidden column be compared.
    pub fn is_exact(&self) -> bool {
        self.key.is_plain()
            && matches!(self.operand, Operand::Literal(_) | Operand::Slot(_))
            && matches!(&self.lhs, Expr::Column { name, .. } if name.as_str() == self.key.column)
    }
}

/// A value a plan takes while it runs rather than from the request.
#[derive(Debug, Clone, Copy)]
pub enum ValueSource<'a> {
    /// A reference path to an earlier result (`"id@": "/Moment/userId"`).
    Path(&'a path::RefPath),
    /// A `k-()` function's call: its result (none: no condition).
    Function(&'a crate::call::Planned),
    /// Every parent item's value of link `n` (see [`Operand::Parent`]), as one JSON array.
    Parent(usize),
}

/// Gives the values of [`ValueSource`]s while a plan runs.
pub type Resolver<'r> = &'r mut dyn FnMut(ValueSource<'_>) -> Option<Json>;

impl CondSpec {
    /// A condition of `key` on `lhs` whose value is `operand`, as given.
    pub(crate) fn new(key: ConditionKey, lhs: Expr, operand: Operand) -> CondSpec {
        CondSpec {
            key,
            lhs,
            operand,
            stringify: false,
            trim: false,
        }
    }

    /// The comparison a request value of this condition is bound into, when it is only bound
    /// (`column = value`, `column > value`), with what the value must be for that to hold;
    /// `None` when the value decides more (lists, patterns, ranges, `@string`, `@trim`).
    /// [`crate::condition`] builds these very predicates from a value that passes the check.
    pub(crate) fn slot_check(&self) -> Option<(crate::query::CmpOp, crate::template::SlotCheck)> {
        use crate::query::CmpOp;
        use crate::template::SlotCheck;
        use apijet_request::{Logic, Op};
        if self.stringify || self.trim {
            return None;
        }
        let op = match (self.key.op, self.key.logic) {
            (Op::Eq, Logic::Default) => CmpOp::Eq,
            (Op::Eq, Logic::Not) => CmpOp::Ne,
            (Op::Gt, Logic::Default) => CmpOp::Gt,
            (Op::Ge, Logic::Default) => CmpOp::Ge,
            (Op::Lt, Logic::Default) => CmpOp::Lt,
            (Op::Le, Logic::Default) => CmpOp::Le,
            _ => return None,
        };
        let id = self.key.column == "id" && op == CmpOp::Eq;
        Some((op, if id { SlotCheck::Id } else { SlotCheck::Scalar }))
    }

    /// A request value in the form `@string` and `@trim` give it.
    pub(crate) fn shaped(&self, value: &Json) -> Json {
        let mut value = value.clone();
        if self.stringify && !value.is_string() {
            value = Json::String(value.to_string());
        }
        if self.trim {
            if let Json::String(s) = &value {
                value = Json::String(s.trim().to_string());
            }
        }
        value
    }
}
