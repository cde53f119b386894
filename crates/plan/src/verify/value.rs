//! `TYPE` and `VERIFY`: checks of single request values against a structure's rules.
//!
//! The reference runs some `VERIFY` rules (`k{}` ranges, `k$`) as tiny SQL statements against
//! the database; here every rule is evaluated in memory so verification never touches the
//! database and the caller's connection stays free for the statements that matter.

use std::borrow::Cow;
use std::collections::HashMap;

use apijet_request::{ConditionKey, KeyParts, LengthFn, Logic, Op};
use regex::Regex;
use serde_json::{Map, Value};

use super::bad_rule;
use crate::PlanError;

/// The `TYPE` names; `X[]` (any depth) is an array of `X`.
const TYPES: [&str; 10] = [
    "BOOLEAN", "NUMBER", "DECIMAL", "STRING", "URL", "DATE", "TIME", "DATETIME", "OBJECT", "ARRAY",
];

/// Whether a `TYPE` value names a known type, so bad rows are reported when they are loaded.
pub(super) fn is_known_type(name: &str) -> bool {
    let mut base = name;
    while let Some(b) = base.strip_suffix("[]") {
        base = b;
    }
    TYPES.contains(&base)
}

/// `TYPE: {key: type}`. Absent and null values pass: `MUST` is the rule that demands presence.
///
/// A rule on a plain column holds for every key that gives that column a value: `k`, `k!`,
/// comparisons, the items of `k{}` lists, and what `k+`/`k-`/`k<>` add, remove or look for
/// (the elements, for a list type such as `NUMBER[]`). A rule written on one spelling
/// (`balance+`, `Moment[].page`) checks that key only, as in the reference.
pub(super) fn verify_type(
    key: &str,
    ty: &Value,
    real: &Map<String, Value>,
) -> Result<(), PlanError> {
    let Value::String(ty) = ty else {
        return Err(PlanError::WrongType(format!(
            "Request structure error: TYPE {key}: the type must be a string"
        )));
    };
    let Some(rule) = KeyParts::of(key).filter(KeyParts::is_plain) else {
        return match real.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(v) => check_type(key, ty, v, false),
        };
    };
    for (k, v) in real {
        let Some(form) = KeyParts::of(k) else {
            continue;
        };
        if v.is_null() || form.column != rule.column || form.reference || form.length.is_some() {
            continue;
        }
        let item_ty = ty.strip_suffix("[]");
        match (form.op, item_ty) {
            (Op::Eq | Op::Gt | Op::Ge | Op::Lt | Op::Le, _) => check_type(k, ty, v, false)?,
            (Op::Add | Op::Sub | Op::Contains, Some(item)) => match v {
                Value::Array(items) => {
                    for i in items.iter().filter(|i| !i.is_null()) {
                        check_type(k, item, i, true)?;
                    }
                }
                one => check_type(k, item, one, true)?,
            },
            (Op::Add | Op::Sub, None) => check_type(k, ty, v, false)?,
            (Op::In, None) => {
                for i in v.as_array().into_iter().flatten().filter(|i| !i.is_null()) {
                    check_type(k, ty, i, true)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_type(key: &str, ty: &str, v: &Value, in_array: bool) -> Result<(), PlanError> {
    if let Some(item) = ty.strip_suffix("[]") {
        check_type(key, "ARRAY", v, false)?;
        for i in v.as_array().into_iter().flatten() {
            if !i.is_null() {
                check_type(key, item, i, true)?;
            }
        }
        return Ok(());
    }
    let ok = match ty {
        "BOOLEAN" => v.is_boolean(),
        "NUMBER" => is_integer(v),
        "DECIMAL" => is_decimal(v),
        "STRING" => v.is_string(),
        "URL" => v.as_str().is_some_and(is_url),
        "DATE" => v.as_str().is_some_and(is_date),
        "TIME" => v.as_str().is_some_and(is_time),
        "DATETIME" => v.as_str().is_some_and(is_datetime),
        "OBJECT" => v.is_object(),
        "ARRAY" => v.is_array(),
        _ => {
            return Err(PlanError::WrongType(format!(
                "Request structure error: TYPE {key}: unknown type {ty}; use one of [{}] or an \
                 array of one of them (X[])",
                TYPES.join(", ")
            )))
        }
    };
    if ok {
        return Ok(());
    }
    let form = match ty {
        "DATE" => " (YYYY-MM-DD, e.g. 2020-02-20)",
        "TIME" => " (HH:mm:ss, e.g. 12:01:30)",
        "DATETIME" => " (YYYY-MM-DDTHH:mm:ss, e.g. 2020-02-20T12:01:30)",
        _ => "",
    };
    Err(PlanError::WrongType(format!(
        "{key}:value is invalid: its type must be {ty}{}{form}",
        if in_array { "[]" } else { "" }
    )))
}

/// NUMBER is an integer; like the reference (which parses the value's text as a `long`), a
/// string holding an integer also passes.
fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_i64() || n.as_u64().is_some_and(|u| i64::try_from(u).is_ok()),
        Value::String(s) => s.parse::<i64>().is_ok(),
        _ => false,
    }
}

fn is_decimal(v: &Value) -> bool {
    match v {
        Value::Number(_) => true,
        Value::String(s) => s.trim().parse::<f64>().is_ok(),
        _ => false,
    }
}

/// What `java.net.URL` accepts: a scheme it has a handler for, then `:`.
fn is_url(s: &str) -> bool {
    s.trim().split_once(':').is_some_and(|(scheme, _)| {
        matches!(
            scheme.to_ascii_lowercase().as_str(),
            "http" | "https" | "ftp" | "file" | "jar" | "mailto"
        )
    })
}

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// ISO `YYYY-MM-DD` with a real calendar day (as `LocalDate.parse`).
pub(super) fn is_date(s: &str) -> bool {
    let mut parts = s.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (digits(y), digits(m), digits(d)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// ISO `HH:mm`, `HH:mm:ss` or `HH:mm:ss.fffffffff` (as `LocalTime.parse`).
pub(super) fn is_time(s: &str) -> bool {
    let (hms, fraction) = match s.split_once('.') {
        Some((hms, f)) => (hms, Some(f)),
        None => (s, None),
    };
    let parts: Vec<&str> = hms.split(':').collect();
    if !(2..=3).contains(&parts.len()) || (fraction.is_some() && parts.len() != 3) {
        return false;
    }
    let limits = [23, 59, 59];
    let fields_ok = parts
        .iter()
        .zip(limits)
        .all(|(p, max)| p.len() == 2 && digits(p).is_some_and(|n| n <= max));
    let fraction_ok = fraction.is_none_or(|f| (1..=9).contains(&f.len()) && digits(f).is_some());
    fields_ok && fraction_ok
}

/// ISO `YYYY-MM-DDTHH:mm:ss` (as `LocalDateTime.parse`).
pub(super) fn is_datetime(s: &str) -> bool {
    s.split_once('T')
        .is_some_and(|(date, time)| is_date(date) && is_time(time))
}

/// The text a value is matched as: strings as they are, anything else as JSON.
fn text(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(other.to_string()),
    }
}

/// The operator at the end of a `VERIFY` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VerifyOp {
    /// `k{}`: a list of allowed values, or a range string such as `">0,<=100"`.
    In,
    /// `k<>`: the array value contains the given item(s).
    Contains,
    /// `k~`: a regular expression or a named pattern.
    Regex,
    /// `k$`: an SQL LIKE pattern.
    Like,
}

/// Reads a `VERIFY` key with the condition-key grammar: `balance+&{}` is operator `{}`, logic
/// `&`, checked key `balance+`; `phone[{}` is `{}` with length function `[` on `phone`. The
/// operators a rule may end in are `{}`, `<>`, `~` and a plain `$`.
fn parse_verify_key(key: &str) -> Option<(&str, Option<LengthFn>, Logic, VerifyOp)> {
    let parts = KeyParts::read(key);
    let op = match parts.op {
        Op::In => VerifyOp::In,
        Op::Contains => VerifyOp::Contains,
        Op::Regex {
            case_insensitive: false,
        } => VerifyOp::Regex,
        Op::Like => VerifyOp::Like,
        _ => return None,
    };
    (!parts.column.is_empty() && !parts.reference).then_some((
        parts.column,
        parts.length,
        parts.logic,
        op,
    ))
}

/// The request key a `VERIFY` key checks: `balance+` for `balance+&{}`, `_password` for
/// `_password[{}`.
pub(super) fn verify_target(key: &str) -> Option<&str> {
    parse_verify_key(key).map(|(target, ..)| target)
}

/// `VERIFY` holds for a column, not a spelling: a key that gives a verified column a value in
/// a form no rule checks (`balance-` where only `balance+` is verified, `phone@`, `_password+`)
/// is refused, since its effect on the stored value cannot be checked here. The reference only
/// looks at the exact key, which let `k+` and friends through.
pub(super) fn verify_verified_forms(
    rules: &Map<String, Value>,
    real: &Map<String, Value>,
) -> Result<(), PlanError> {
    let targets: Vec<(&str, &str)> = rules
        .keys()
        .filter_map(|k| verify_target(k))
        .filter_map(|t| ConditionKey::column_of(t).map(|c| (c, t)))
        .collect();
    if targets.is_empty() {
        return Ok(());
    }
    for k in real.keys() {
        let Some(c) = ConditionKey::column_of(k) else {
            continue;
        };
        let forms: Vec<&str> = targets
            .iter()
            .filter(|(col, _)| *col == c)
            .map(|(_, t)| *t)
            .collect();
        if !forms.is_empty() && !forms.contains(&k.as_str()) {
            return Err(PlanError::Invalid(format!(
                "{k}:value cannot be verified: VERIFY checks {c} only as [{}]; send that key \
                 instead",
                forms.join(",")
            )));
        }
    }
    Ok(())
}

/// Combines per-item results: OR by default, `&` all, `!` none.
fn combine(
    logic: Logic,
    mut results: impl Iterator<Item = Result<bool, PlanError>>,
) -> Result<bool, PlanError> {
    match logic {
        Logic::Default | Logic::Or => results.try_fold(false, |acc, r| Ok(acc || r?)),
        Logic::And => results.try_fold(true, |acc, r| Ok(acc && r?)),
        Logic::Not => results.try_fold(true, |acc, r| Ok(acc && !r?)),
    }
}

/// A rule value that may be one item or a list of items.
fn items(rule: &Value) -> Vec<&Value> {
    match rule {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    }
}

/// `VERIFY: {key: rule}` against the object's values. `patterns` holds every regular
/// expression of the loaded structures and the named patterns, compiled once per snapshot.
pub(super) fn verify_value(
    key: &str,
    rule: &Value,
    real: &Map<String, Value>,
    patterns: &HashMap<String, Regex>,
) -> Result<(), PlanError> {
    let Some((column, length, logic, op)) = parse_verify_key(key) else {
        return Err(bad_rule(format!(
            "VERIFY {key}: the key must end in one of {{}}, <>, ~, $"
        )));
    };
    if rule.is_null() {
        return Err(bad_rule(format!("VERIFY {key}: the rule is null")));
    }
    let Some(raw) = real.get(column).filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let value: Cow<'_, Value> = match length {
        None => Cow::Borrowed(raw),
        Some(LengthFn::Text) => Cow::Owned(Value::from(text(raw).chars().count())),
        Some(LengthFn::Json) => match raw {
            Value::Array(a) => Cow::Owned(Value::from(a.len())),
            Value::Object(o) => Cow::Owned(Value::from(o.len())),
            _ => {
                return Err(PlanError::WrongType(format!(
                    "{column}:value is invalid: {key} needs a JSON array or object"
                )))
            }
        },
    };
    let ok = match op {
        VerifyOp::In => match rule {
            Value::String(range) => {
                let x = number(column, &value)?;
                combine(logic, range.split(',').map(|item| range_item(key, item, x)))?
            }
            Value::Array(allowed) => {
                allowed.iter().any(|a| json_eq(a, &value)) != (logic == Logic::Not)
            }
            _ => {
                return Err(bad_rule(format!(
                    "VERIFY {key}: the rule must be a list of values or a range string"
                )))
            }
        },
        VerifyOp::Contains => {
            let Value::Array(have) = value.as_ref() else {
                return Err(PlanError::WrongType(format!(
                    "{column}:value is invalid: {key} needs an array"
                )));
            };
            combine(
                logic,
                items(rule)
                    .into_iter()
                    .map(|want| Ok(have.iter().any(|h| json_eq(h, want)))),
            )?
        }
        VerifyOp::Regex => {
            let subject = text(&value);
            combine(
                logic,
                items(rule).into_iter().map(|p| {
                    let Value::String(p) = p else {
                        return Err(PlanError::WrongType(format!(
                            "Request structure error: VERIFY {key}: patterns must be strings"
                        )));
                    };
                    let re = patterns.get(p).ok_or_else(|| {
                        bad_rule(format!(
                            "VERIFY {key}: {p} is not a valid regular expression"
                        ))
                    })?;
                    Ok(re.is_match(&subject))
                }),
            )?
        }
        VerifyOp::Like => {
            let subject = text(&value);
            combine(
                logic,
                items(rule).into_iter().map(|p| match p {
                    Value::String(p) => Ok(like(p, &subject)),
                    _ => Err(bad_rule(format!(
                        "VERIFY {key}: LIKE patterns must be strings"
                    ))),
                }),
            )?
        }
    };
    if ok {
        Ok(())
    } else {
        Err(PlanError::Invalid(format!(
            "{column}:value is invalid: it must match {key}:{rule}"
        )))
    }
}

/// The numeric value a range compares; numeric strings count, as the database would cast them.
fn number(column: &str, v: &Value) -> Result<f64, PlanError> {
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    };
    n.ok_or_else(|| PlanError::Invalid(format!("{column}:value is invalid: it must be a number")))
}

/// One item of a range string: `>0`, `<=100`, `=11`, `!=3`, `=null`.
fn range_item(key: &str, item: &str, x: f64) -> Result<bool, PlanError> {
    let item = item.trim();
    let (op, operand) = [">=", "<=", "!=", ">", "<", "="]
        .into_iter()
        .find_map(|op| item.strip_prefix(op).map(|rest| (op, rest.trim())))
        .ok_or_else(|| {
            bad_rule(format!(
                "VERIFY {key}: range item {item:?} must start with one of >=, <=, !=, >, <, ="
            ))
        })?;
    if operand == "null" {
        // The value is never null here (null values are skipped), so only `!=null` holds.
        return match op {
            "=" => Ok(false),
            "!=" => Ok(true),
            _ => Err(bad_rule(format!(
                "VERIFY {key}: null only compares with = or !="
            ))),
        };
    }
    let y: f64 = operand.parse().map_err(|_| {
        bad_rule(format!(
            "VERIFY {key}: {operand:?} in range item {item:?} is not a number"
        ))
    })?;
    Ok(match op {
        ">=" => x >= y,
        "<=" => x <= y,
        "!=" => x != y,
        ">" => x > y,
        "<" => x < y,
        _ => x == y,
    })
}

/// JSON equality with numbers compared by value, so `1` matches `1.0` and a `u64` id matches
/// the same id sent as `i64`.
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        _ => a == b,
    }
}

/// SQL LIKE: `%` any run, `_` one character, `\` escapes the next one. Case-sensitive, as in
/// PostgreSQL; MySQL's default collations would ignore case.
pub(super) fn like(pattern: &str, subject: &str) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Tok {
        Any,
        One,
        Lit(char),
    }
    let mut toks = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        toks.push(match c {
            '%' => Tok::Any,
            '_' => Tok::One,
            '\\' => Tok::Lit(chars.next().unwrap_or('\\')),
            c => Tok::Lit(c),
        });
    }
    let s: Vec<char> = subject.chars().collect();
    // Greedy match with one backtrack point: the last `%` seen and where it started matching.
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        match toks.get(p) {
            Some(Tok::Any) => {
                star = Some((p, i));
                p += 1;
            }
            Some(Tok::One) => {
                p += 1;
                i += 1;
            }
            Some(Tok::Lit(c)) if *c == s[i] => {
                p += 1;
                i += 1;
            }
            _ => match star {
                Some((sp, si)) => {
                    p = sp + 1;
                    i = si + 1;
                    star = Some((sp, si + 1));
                }
                None => return false,
            },
        }
    }
    toks[p..].iter().all(|t| *t == Tok::Any)
}
