//! `@raw`: condition values that are SQL, from the operator's `raw_sql` allow-list (the
//! reference's RAW_MAP). A value not on the list is refused, never bound as a look-alike string.

use crate::query::{CmpOp, Expr, Pred};
use crate::PlanError;
use apijet_request::{ConditionKey, Logic, Op, TableEntry, TableObject};
use serde_json::Value as Json;
use std::sync::Arc;

/// The keys `@raw` marks: each must be a condition of the object with a comparison operator.
pub(crate) fn raw_keys<'o>(v: &Json, obj: &'o TableObject) -> Result<Vec<&'o str>, PlanError> {
    let text = v
        .as_str()
        .ok_or_else(|| PlanError::WrongType("@raw must be a string of keys: \"k1,k2\"".into()))?;
    let mut out = Vec::new();
    for k in text.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        if k.starts_with('@') {
            return Err(PlanError::Invalid(format!(
                "@raw:'{k}': only conditions may be raw here; {k} is parsed as an expression"
            )));
        }
        let key = obj
            .entries
            .iter()
            .find_map(|e| match e {
                TableEntry::Condition { key, .. } if key.raw == k => Some(key.raw.as_str()),
                _ => None,
            })
            .ok_or_else(|| {
                PlanError::Invalid(format!("@raw:'{k}' names no condition of the object"))
            })?;
        out.push(key);
    }
    Ok(out)
}

/// The configured fragment a raw condition's value names, or a refusal naming the key.
pub(crate) fn raw_fragment(
    key: &ConditionKey,
    value: &Json,
    allowed: &[String],
) -> Result<Arc<str>, PlanError> {
    if !matches!(key.op, Op::Eq | Op::Gt | Op::Ge | Op::Lt | Op::Le) || key.length.is_some() {
        return Err(PlanError::Invalid(format!(
            "@raw: {} cannot be raw: only k, k!, k>, k>=, k<, k<= take a raw SQL value",
            key.raw
        )));
    }
    match value.as_str() {
        Some(text) if allowed.iter().any(|a| a == text) => Ok(Arc::from(text)),
        _ => Err(PlanError::Invalid(format!(
            "@raw: the value of {} is not in the server's raw_sql allow-list; raw SQL is \
             used only as the operator configured it",
            key.raw
        ))),
    }
}

pub(crate) fn raw_pred(key: &ConditionKey, lhs: &Expr, sql: &Arc<str>) -> Result<Pred, PlanError> {
    let not = key.logic == Logic::Not;
    let op = match key.op {
        Op::Eq if not => CmpOp::Ne,
        Op::Eq => CmpOp::Eq,
        Op::Gt => CmpOp::Gt,
        Op::Ge => CmpOp::Ge,
        Op::Lt => CmpOp::Lt,
        Op::Le => CmpOp::Le,
        _ => {
            return Err(PlanError::Invalid(format!(
                "@raw: {} cannot be raw",
                key.raw
            )))
        }
    };
    let p = Pred::Cmp(lhs.clone(), op, Expr::Raw(sql.clone()));
    Ok(if not && op != CmpOp::Ne {
        Pred::Not(Box::new(p))
    } else {
        p
    })
}
