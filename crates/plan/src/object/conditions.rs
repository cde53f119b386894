//! An object's conditions: each condition key with where its value comes from (the
//! request's slot, a reference to an earlier result or a named subquery, a subquery, a
//! `k-()` function run first, the operator's fragment where `@raw` marks the key), `@string`,
//! `@trim` and `@cast` on them and `@combine` over them; and the object's other entries that
//! are no conditions: values answered as sent, custom `@` keys, stored procedures.

use super::raw::RawMarks;
use super::select_list::{self, TableNames};
use super::{Keywords, Place, FORCED_KEYS};
use crate::condition::combine::{self, Combine};
use crate::condition::path::RefPath;
use crate::condition::{CondSpec, Operand};
use crate::object::procedure::ProcedureCall;
use crate::query::{CastType, Expr, Quantifier};
use crate::{PlanError, Scope};
use apijet_request::{ConditionKey, Op, TableEntry, TableObject};
use serde_json::Value as Json;
use std::collections::HashMap;

/// What an object's entries make of its statement beside the select list and the clauses.
pub(super) struct Conditions {
    pub(super) conds: Vec<CondSpec>,
    pub(super) casts: HashMap<String, CastType>,
    pub(super) combine: Option<Combine>,
    pub(super) echoes: Vec<(String, Json)>,
    pub(super) procedures: Vec<ProcedureCall>,
}

/// The conditions and other entries of `obj` at `place`; its subqueries are planned in
/// `nested`.
pub(super) fn conditions(
    obj: &TableObject,
    kw: Keywords<'_>,
    raw: &RawMarks<'_>,
    names: &TableNames<'_>,
    ctx: &Scope<'_>,
    nested: &Scope<'_>,
    place: Place,
) -> Result<Conditions, PlanError> {
    let casts = match kw.text("cast") {
        Some(t) => select_list::casts(&t)?,
        None => HashMap::new(),
    };
    let stringify = kw.list("string");
    let trim = kw.list("trim");
    // A value's form as `@string` and `@trim` give it.
    let shaped = |spec: CondSpec| CondSpec {
        stringify: stringify.contains(&spec.key.raw),
        trim: trim.contains(&spec.key.raw),
        ..spec
    };
    let mut conds = Vec::new();
    let mut echoes = Vec::new();
    let mut procedures = Vec::new();
    for entry in &obj.entries {
        match entry {
            TableEntry::Condition { key, value } if raw.conditions.contains(&key.raw.as_str()) => {
                conds.push(CondSpec::new(
                    key.clone(),
                    lhs_of(key, names)?,
                    Operand::Raw(super::raw::raw_fragment(key, value, &ctx.options.raw_sql)?),
                ))
            }
            TableEntry::Condition { key, value } => conds.push(shaped(CondSpec::new(
                key.clone(),
                lhs_of(key, names)?,
                Operand::Literal(value.clone()),
            ))),
            TableEntry::Slot { key, slot } => conds.push(shaped(CondSpec::new(
                key.clone(),
                lhs_of(key, names)?,
                Operand::Slot(*slot),
            ))),
            TableEntry::Function { key, call }
                if key.ends_with("-()") && place == (Place::Object { functions: true }) =>
            {
                let name = key.trim_end_matches("-()");
                let key =
                    ConditionKey::parse(name).map_err(|e| PlanError::Invalid(e.to_string()))?;
                let lhs = lhs_of(&key, names)?;
                conds.push(shaped(CondSpec::new(
                    key,
                    lhs,
                    Operand::Function(crate::call::Call::read(call)),
                )));
            }
            TableEntry::RefCondition { key, path } => conds.push(CondSpec::new(
                key.clone(),
                lhs_of(key, names)?,
                match ctx.named_subquery(path) {
                    Some(sub) => Operand::Subquery(Box::new(sub), None),
                    None => Operand::Ref(RefPath::read(path)),
                },
            )),
            TableEntry::SubqueryCondition { key, subquery } => {
                let sub = super::subquery::plan_subquery(subquery, nested)?;
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
                    lhs_of(key, names)?
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
    let combine = match kw.text("combine") {
        Some(t) => Some(combined(&t, &conds, ctx)?),
        None => None,
    };
    Ok(Conditions {
        conds,
        casts,
        combine,
        echoes,
        procedures,
    })
}

/// `@combine` over the object's conditions `conds`.
fn combined(text: &str, conds: &[CondSpec], ctx: &Scope<'_>) -> Result<Combine, PlanError> {
    let c = combine::parse(text, ctx.options.expr.max_depth)?;
    for k in c.keys() {
        if FORCED_KEYS.contains(&k) {
            return Err(PlanError::Forbidden(format!(
                "@combine:'{text}' must not name {k}: id, id{{}}, userId and userId{{}} are \
                 always AND-ed"
            )));
        }
        if !conds.iter().any(|c| c.key.raw == k) {
            return Err(PlanError::Invalid(format!(
                "@combine:'{text}' names '{k}', but the object has no condition {k}"
            )));
        }
    }
    Ok(c)
}

/// The left side of a condition: its column (or `@key` name), with its length function.
fn lhs_of(key: &ConditionKey, names: &TableNames<'_>) -> Result<Expr, PlanError> {
    use apijet_request::LengthFn;
    let base = match names.keys.get(&key.column) {
        Some(e) => e.clone(),
        None => names
            .column(&key.column)
            .ok_or_else(|| PlanError::UnknownColumn {
                table: names.table.api_name.clone(),
                column: key.column.clone(),
            })?,
    };
    Ok(match key.length {
        Some(LengthFn::Text) => Expr::TextLength(Box::new(base)),
        Some(LengthFn::Json) => Expr::JsonLength(Box::new(base)),
        None => base,
    })
}
