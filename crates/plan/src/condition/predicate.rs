//! One condition key and its value → a predicate (protocol §5.2).

use crate::expr::{number, Names, Parser};
use crate::query::{CmpOp, Expr, Pred};
use crate::{ExprLimits, PlanError};
use apijet_core::Value;
use apijet_request::{ConditionKey, Container, Logic, Member, Node, Op, Request, TableEntry};
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
            if !matches!(lhs, Expr::Column { .. }) {
                return Err(invalid(
                    key,
                    "a regular expression applies to a column only, not to a value made by \
                     @key or a function: every row would build the value and run the expression \
                     over it",
                ));
            }
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
                if limits.engine.backtracking_regex {
                    if let Some(reason) = backtracking_risk(s) {
                        return Err(invalid(key, &format!("{s:?}: {reason}")));
                    }
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

/// Refuses a request whose LIKE and regex patterns together pass `max_pattern_bytes`: each
/// pattern is matched against every row a statement reads, so their total is what a request
/// costs, whatever the number of keys and list items it spreads them over. Literal patterns
/// are counted everywhere in the request (nested objects, lists, subqueries).
pub fn check_pattern_budget(req: &Request, limits: &ExprLimits) -> Result<(), PlanError> {
    let total = pattern_bytes(&req.root);
    if total > limits.max_pattern_bytes {
        return Err(PlanError::Limit(format!(
            "the LIKE and regular-expression patterns of this request add up to {total} bytes, \
             more than the {} allowed together (setting max_pattern_bytes)",
            limits.max_pattern_bytes
        )));
    }
    Ok(())
}

/// The bytes of the literal patterns in `c` and everything under it (the request's JSON
/// nesting, at most 128 levels, bounds the recursion).
fn pattern_bytes(c: &Container) -> usize {
    c.members
        .iter()
        .map(member_pattern_bytes)
        .fold(0, usize::saturating_add)
}

fn member_pattern_bytes(m: &Member) -> usize {
    match &m.node {
        Node::Table(t) => entries_pattern_bytes(&t.entries),
        Node::Array(a) => pattern_bytes(&a.items),
        Node::Subquery(q) => pattern_bytes(&q.items),
        Node::Reference(_) | Node::Function(_) | Node::Value(_) => 0,
    }
}

fn entries_pattern_bytes(entries: &[TableEntry]) -> usize {
    entries
        .iter()
        .map(|e| match e {
            TableEntry::Condition { key, value }
                if matches!(key.op, Op::Like | Op::LikeWrapped { .. } | Op::Regex { .. }) =>
            {
                list(value)
                    .iter()
                    .map(|v| v.as_str().map_or(0, str::len))
                    .fold(0, usize::saturating_add)
            }
            TableEntry::SubqueryCondition { subquery, .. } | TableEntry::FromSubquery(subquery) => {
                pattern_bytes(&subquery.items)
            }
            TableEntry::Child(member) => member_pattern_bytes(member),
            _ => 0,
        })
        .fold(0, usize::saturating_add)
}

/// What can make a backtracking engine (MariaDB's PCRE) take exponential time: a quantified
/// group that holds a quantifier or an alternation (`(a+)+`, `(a|a)*`, `(a?){25}`), or a
/// back-reference. Such a pattern can keep a statement busy for seconds per row.
fn backtracking_risk(pattern: &str) -> Option<&'static str> {
    // Per open group: it holds a quantifier, it holds an alternation.
    let mut groups: Vec<(bool, bool)> = vec![(false, false)];
    let mut chars = pattern.chars().peekable();
    let quantifier = |c: Option<&char>| matches!(c, Some('*' | '+' | '?' | '{'));
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if chars.next().is_some_and(|d| d.is_ascii_digit() && d != '0') {
                    return Some(
                        "a back-reference can take exponential time on this database's \
                         backtracking regular expressions",
                    );
                }
                if quantifier(chars.peek()) {
                    if let Some(g) = groups.last_mut() {
                        g.0 = true;
                    }
                }
            }
            '[' => {
                chars.next_if_eq(&'^');
                chars.next_if_eq(&']');
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        ']' => break,
                        _ => {}
                    }
                }
                if quantifier(chars.peek()) {
                    if let Some(g) = groups.last_mut() {
                        g.0 = true;
                    }
                }
            }
            '(' => {
                // `(?:`, `(?i)`: a group's options, not a quantifier.
                if chars.next_if_eq(&'?').is_some() {
                    while chars.next_if(|d| !matches!(d, ':' | ')' | '(')).is_some() {}
                    chars.next_if_eq(&':');
                }
                groups.push((false, false));
            }
            ')' => {
                let Some((quantified_inside, alternation)) = groups.pop() else {
                    continue;
                };
                let repeated = quantifier(chars.peek());
                if repeated && (quantified_inside || alternation) {
                    return Some(
                        "a repeated group that holds a repetition or an alternative ((a+)+, \
                         (a|b)*) can take exponential time on this database's backtracking \
                         regular expressions: write it without nesting (a+, [ab]*)",
                    );
                }
                if groups.is_empty() {
                    groups.push((false, false));
                }
                if let Some(g) = groups.last_mut() {
                    g.0 |= repeated || quantified_inside;
                }
            }
            '|' => {
                if let Some(g) = groups.last_mut() {
                    g.1 = true;
                }
            }
            _ => {
                if quantifier(chars.peek()) {
                    if let Some(g) = groups.last_mut() {
                        g.0 = true;
                    }
                }
            }
        }
        // A quantifier's own characters (`+`, `{2,5}`, a lazy `?`) are consumed here.
        if quantifier(chars.peek()) && c != '(' && c != '|' {
            while chars.next_if(|d| matches!(d, '*' | '+' | '?')).is_some() {}
            if chars.next_if_eq(&'{').is_some() {
                while chars.next_if(|d| *d != '}').is_some() {}
                chars.next_if_eq(&'}');
                chars.next_if(|d| matches!(d, '?' | '+'));
            }
        }
    }
    None
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
    use super::{backtracking_risk, unbalanced_regex};

    #[test]
    fn nested_repetitions_and_back_references_are_found() {
        for risky in [
            "(a+)+",
            "^(a|a)*$",
            "(a+)+(b+)+(c+)+z$",
            "^(a?){25}a{25}$",
            "((ab)*c)+",
            "(a|b)*",
            "(?:a+)+",
            "(\\w+\\s?)*$",
            "(.*a){12}",
            "(a)\\1",
        ] {
            assert!(backtracking_risk(risky).is_some(), "{risky}");
        }
        for fine in [
            "^a+b*$",
            "[ab]*c",
            "(abc)+",
            "^(foo|bar)$",
            "a{2,5}b?",
            "\\(a+\\)+",
            "[(a+)]+",
            "^Ad",
            "(?i)ada",
            "\\d+",
        ] {
            assert_eq!(backtracking_risk(fine), None, "{fine}");
        }
    }

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
