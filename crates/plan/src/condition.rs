//! One condition key and its value → a predicate (protocol §5.2).

use crate::expr::{number, Names, Parser};
use crate::query::{CmpOp, Expr, Pred};
use crate::PlanError;
use apijet_core::Value;
use apijet_request::{ConditionKey, Logic, Op};
use serde_json::Value as Json;

/// What a condition contributes to its object's WHERE.
#[derive(Debug)]
pub enum Outcome {
    /// A predicate to add.
    Pred(Pred),
    /// Nothing (a null value, an empty `!{}` list).
    Skip,
    /// The object cannot match anything (an empty `{}` list): no SQL, key omitted.
    NotExist,
}

fn invalid(key: &ConditionKey, why: &str) -> PlanError {
    PlanError::Invalid(format!("{}: {why}", key.raw))
}

fn scalar(key: &ConditionKey, v: &Json) -> Result<Value, PlanError> {
    match v {
        Json::Array(_) | Json::Object(_) => Err(PlanError::WrongType(format!(
            "{}: the value must be a number, string or boolean",
            key.raw
        ))),
        other => Ok(Value::from_json(other)),
    }
}

fn list(v: &Json) -> Vec<&Json> {
    match v {
        Json::Array(items) => items.iter().collect(),
        other => vec![other],
    }
}

/// Joins item predicates with the key's logic: OR by default, AND for `&`, NOT(OR) for `!`.
fn combine(logic: Logic, preds: Vec<Pred>) -> Pred {
    match logic {
        Logic::And => Pred::And(preds),
        Logic::Not => Pred::Not(Box::new(Pred::Or(preds))),
        Logic::Default | Logic::Or => Pred::Or(preds),
    }
}

/// Builds the predicate for `key: value` on `lhs`.
pub(crate) fn build<N: Names>(
    key: &ConditionKey,
    lhs: Expr,
    value: &Json,
    names: &N,
) -> Result<Outcome, PlanError> {
    if value.is_null() {
        return Ok(Outcome::Skip);
    }
    let limits = names.limits();
    if let Json::Array(items) = value {
        if items.len() > limits.max_list_items {
            return Err(PlanError::Limit(format!(
                "{}: {} items is more than the {} allowed in one list (setting max_list_items)",
                key.raw,
                items.len(),
                limits.max_list_items
            )));
        }
    }
    let pattern_length = |s: &str| {
        if s.len() > limits.max_pattern_length {
            Err(PlanError::Limit(format!(
                "{}: a pattern of {} bytes is longer than the {} allowed (setting \
                 max_pattern_length)",
                key.raw,
                s.len(),
                limits.max_pattern_length
            )))
        } else {
            Ok(())
        }
    };
    let pred = match key.op {
        Op::Eq => {
            let v = scalar(key, value)?;
            let op = if key.logic == Logic::Not {
                CmpOp::Ne
            } else {
                CmpOp::Eq
            };
            Pred::Cmp(lhs, op, Expr::Value(v))
        }
        Op::Gt | Op::Ge | Op::Lt | Op::Le => {
            let op = match key.op {
                Op::Gt => CmpOp::Gt,
                Op::Ge => CmpOp::Ge,
                Op::Lt => CmpOp::Lt,
                _ => CmpOp::Le,
            };
            Pred::Cmp(lhs, op, Expr::Value(scalar(key, value)?))
        }
        Op::In => match value {
            Json::Array(items) => {
                if key.logic == Logic::And {
                    return Err(invalid(key, "a list allows only | or ! before {}"));
                }
                let mut vals = Vec::with_capacity(items.len());
                for item in items {
                    vals.push(scalar(key, item)?);
                }
                if vals.is_empty() {
                    return Ok(if key.logic == Logic::Not {
                        Outcome::Skip
                    } else {
                        Outcome::NotExist
                    });
                }
                let p = Pred::In(lhs, vals);
                if key.logic == Logic::Not {
                    Pred::Not(Box::new(p))
                } else {
                    p
                }
            }
            Json::String(s) => range_expression(key, lhs, s, names)?,
            _ => {
                return Err(invalid(
                    key,
                    "the value of {} must be a list or a range string",
                ))
            }
        },
        Op::Contains => {
            let items = list(value);
            if items.is_empty() {
                // An empty list asks for rows whose array is empty or missing.
                return Ok(Outcome::Pred(Pred::Or(vec![
                    Pred::IsNull(lhs.clone()),
                    Pred::Cmp(lhs, CmpOp::Eq, Expr::Value(Value::Text("[]".into()))),
                ])));
            }
            let preds = items
                .into_iter()
                .map(|item| Pred::JsonContains(lhs.clone(), item.to_string()))
                .collect();
            combine(key.logic, preds)
        }
        Op::Like | Op::LikeWrapped { .. } => {
            let mut preds = Vec::new();
            for item in list(value) {
                let Json::String(s) = item else {
                    return Err(PlanError::WrongType(format!(
                        "{}: LIKE patterns must be strings",
                        key.raw
                    )));
                };
                if s.is_empty() {
                    return Err(invalid(
                        key,
                        "an empty pattern means nothing and is not allowed",
                    ));
                }
                pattern_length(s)?;
                let pattern = match key.op {
                    Op::LikeWrapped { left, right } => {
                        let mut p = String::with_capacity(s.len() + 4);
                        p.extend(left);
                        for c in s.chars() {
                            if matches!(c, '\\' | '%' | '_') {
                                p.push('\\');
                            }
                            p.push(c);
                        }
                        p.extend(right);
                        p
                    }
                    _ => s.clone(),
                };
                preds.push(Pred::Like(lhs.clone(), Value::Text(pattern)));
            }
            combine(key.logic, preds)
        }
        Op::Regex { case_insensitive } => {
            let mut preds = Vec::new();
            for item in list(value) {
                let Json::String(s) = item else {
                    return Err(PlanError::WrongType(format!(
                        "{}: regular expressions must be strings",
                        key.raw
                    )));
                };
                pattern_length(s)?;
                if let Some(reason) = unbalanced_regex(s) {
                    return Err(invalid(
                        key,
                        &format!("{s:?} is not a valid regular expression: {reason}"),
                    ));
                }
                preds.push(Pred::Regex {
                    lhs: lhs.clone(),
                    pattern: Value::Text(s.clone()),
                    case_insensitive,
                });
            }
            combine(key.logic, preds)
        }
        Op::Between => {
            let mut preds = Vec::new();
            for item in list(value) {
                let Json::String(s) = item else {
                    return Err(invalid(key, "each range must be a \"start,end\" string"));
                };
                let Some((lo, hi)) = s.split_once(',').filter(|(_, hi)| !hi.contains(',')) else {
                    return Err(invalid(
                        key,
                        "each range must be \"start,end\" with one comma",
                    ));
                };
                let lit = |x: &str| number(x.trim()).unwrap_or(Value::Text(x.trim().to_string()));
                preds.push(Pred::Between(lhs.clone(), lit(lo), lit(hi)));
            }
            combine(key.logic, preds)
        }
        Op::Exists => return Err(invalid(key, "}{ needs a subquery object after @")),
        Op::Add | Op::Sub => {
            return Err(invalid(
                key,
                "k+ and k- change values and are only allowed in PUT",
            ))
        }
    };
    Ok(Outcome::Pred(pred))
}

/// `"<=80000,>90000"`, `"=null"`, `"%5+1>2;length(name)%3<=1"` → OR (or AND/NOT) of items.
fn range_expression<N: Names>(
    key: &ConditionKey,
    lhs: Expr,
    text: &str,
    names: &N,
) -> Result<Pred, PlanError> {
    if text.len() > 100 {
        return Err(PlanError::Forbidden(format!(
            "{}: an expression may be at most 100 characters long (a fixed limit)",
            key.raw
        )));
    }
    let mut preds = Vec::new();
    for segment in text.split(';') {
        if segment.contains('(') {
            // A full comparison with its own left side: `length(name)%3<=1`.
            let mut p = Parser::new(segment, names)?;
            let l = p.expr()?;
            let op = p.take_cmp()?;
            let r = p.expr()?;
            if !p.at_end() {
                return Err(invalid(key, &format!("'{segment}' has trailing text")));
            }
            preds.push(Pred::Cmp(l, op, r));
            continue;
        }
        for item in segment.split(',') {
            let item = item.trim();
            match item {
                "=null" => preds.push(Pred::IsNull(lhs.clone())),
                "!=null" => preds.push(Pred::Not(Box::new(Pred::IsNull(lhs.clone())))),
                _ => {
                    if !item
                        .bytes()
                        .all(|b| b.is_ascii_digit() || b"%!=<>/.+-*^".contains(&b))
                    {
                        return Err(PlanError::Forbidden(format!(
                            "{}: '{item}' is not a valid range item (only numbers and \
                             operators such as >10, <=20, %5+1>2)",
                            key.raw
                        )));
                    }
                    let mut p = Parser::new(item, names)?;
                    let l = if p.peek_cmp().is_some() {
                        lhs.clone()
                    } else {
                        p.continue_expr(lhs.clone())?
                    };
                    let op = p.take_cmp()?;
                    let r = p.expr()?;
                    if !p.at_end() {
                        return Err(invalid(key, &format!("'{item}' has trailing text")));
                    }
                    preds.push(Pred::Cmp(l, op, r));
                }
            }
        }
    }
    Ok(combine(key.logic, preds))
}

/// What every engine's regular expressions refuse alike: an unclosed or unopened group or
/// bracket class. Checked here so the client hears which key is wrong (a 406) instead of the
/// database's own error; subtler faults are left to the engine, whose dialects differ.
fn unbalanced_regex(pattern: &str) -> Option<&'static str> {
    let mut depth = 0usize;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' => {
                // A class ends at the first `]` that is not its first character.
                chars.next_if_eq(&'^');
                chars.next_if_eq(&']');
                loop {
                    match chars.next() {
                        None => return Some("a [ class is not closed"),
                        Some('\\') => {
                            chars.next();
                        }
                        Some(']') => break,
                        Some(_) => {}
                    }
                }
            }
            '(' => depth += 1,
            ')' => {
                if depth == 0 {
                    return Some("a ) closes no group");
                }
                depth -= 1;
            }
            _ => {}
        }
    }
    (depth > 0).then_some("a ( group is not closed")
}

#[cfg(test)]
mod regex_tests {
    use super::unbalanced_regex;

    #[test]
    fn unbalanced_groups_and_classes_are_found() {
        for bad in ["([\"`", "(a", "a)", "[abc", "[]", "(\\)"] {
            assert!(unbalanced_regex(bad).is_some(), "{bad}");
        }
        for good in [
            "^a.*b$", "(a|b)+", "[(]", "[]a]", "[^]a]", "\\(", "a[\\]]b", "",
        ] {
            assert_eq!(unbalanced_regex(good), None, "{good}");
        }
    }
}
