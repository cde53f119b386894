//! Predicates a table plan builds from its parts: subquery comparisons, `@cast` values and the
//! `@combine` tree.

use super::combine::Combine;
use crate::query::{CastType, CmpOp, Expr, Pred, Quantifier, Select};
use crate::PlanError;
use apijet_request::{ConditionKey, Logic, Op};
use std::collections::HashMap;

pub(crate) fn subquery_pred(
    key: &ConditionKey,
    lhs: &Expr,
    sub: &Select,
    range: Option<Quantifier>,
) -> Result<Pred, PlanError> {
    let sub = Box::new(sub.clone());
    let not = key.logic == Logic::Not;
    let p = match key.op {
        Op::Exists => Pred::Exists(sub),
        Op::In => Pred::InSelect(lhs.clone(), sub),
        Op::Eq => Pred::CmpSelect(
            lhs.clone(),
            if not { CmpOp::Ne } else { CmpOp::Eq },
            range,
            sub,
        ),
        Op::Gt => Pred::CmpSelect(lhs.clone(), CmpOp::Gt, range, sub),
        Op::Ge => Pred::CmpSelect(lhs.clone(), CmpOp::Ge, range, sub),
        Op::Lt => Pred::CmpSelect(lhs.clone(), CmpOp::Lt, range, sub),
        Op::Le => Pred::CmpSelect(lhs.clone(), CmpOp::Le, range, sub),
        _ => {
            return Err(PlanError::Invalid(format!(
                "{}: this operator cannot take a subquery",
                key.raw
            )))
        }
    };
    Ok(if not && matches!(key.op, Op::Exists | Op::In) {
        Pred::Not(Box::new(p))
    } else {
        p
    })
}

pub(crate) fn cast_values(pred: Pred, t: CastType) -> Pred {
    match pred {
        Pred::Cmp(l, op, v @ (Expr::Value(_) | Expr::Slot(_))) => {
            Pred::Cmp(l, op, Expr::Cast(Box::new(v), t))
        }
        other => other,
    }
}

pub(crate) fn combine_pred(cb: &Combine, by_key: &HashMap<&str, Pred>) -> Pred {
    match cb {
        Combine::Key(k) => by_key
            .get(k.as_str())
            .cloned()
            .unwrap_or(Pred::And(Vec::new())),
        Combine::Not(c) => Pred::Not(Box::new(combine_pred(c, by_key))),
        Combine::And(cs) => Pred::And(cs.iter().map(|c| combine_pred(c, by_key)).collect()),
        Combine::Or(cs) => Pred::Or(cs.iter().map(|c| combine_pred(c, by_key)).collect()),
    }
}
