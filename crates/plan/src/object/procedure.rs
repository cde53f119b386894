//! Stored procedures: `"@name()": "proc(a,b)"` in a table object calls `proc` after the object's
//! row is read, with the values of the object's keys `a` and `b` (or literal numbers and
//! `'strings'`), and answers `"name": {"count": …, "update": …, "list": […]}` as the reference
//! does (AbstractObjectParser.parseFunction, AbstractSQLExecutor.execute with unknownType).
//!
//! The procedure name must be on the operator's `procedures` allow-list; arguments are always
//! bound, never spliced.

use crate::query::Ident;
use crate::PlanError;
use serde_json::Value as Json;

/// One argument of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum ProcArg {
    /// The value of this key of the object's row, or of its custom `@` key (null when
    /// absent).
    Key(String),
    /// A literal number or string.
    Value(Json),
}

/// A planned procedure call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcedureCall {
    /// The key as sent (`@name()`), for messages.
    pub key: String,
    /// The key its answer takes (`name`).
    pub answer_key: String,
    /// The procedure, from the allow-list.
    pub name: Ident,
    /// Arguments in order.
    pub args: Vec<ProcArg>,
}

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Plans `"@name()": "proc(args)"`; `name` is the keyword without its `@`.
pub fn plan_call(name: &str, value: &Json, allowed: &[String]) -> Result<ProcedureCall, PlanError> {
    let key = format!("@{name}");
    let answer_key = name.trim_end_matches("()").trim_end_matches(['-', '+']);
    if !is_name(answer_key) {
        return Err(PlanError::Invalid(format!(
            "{key}: a stored-procedure key is @name() with a plain name"
        )));
    }
    let text = value.as_str().ok_or_else(|| {
        PlanError::WrongType(format!(
            "{key}: the value must be a call text \"proc(a,b)\""
        ))
    })?;
    let text = text.trim();
    let (proc_name, rest) = text.split_once('(').ok_or_else(|| {
        PlanError::Invalid(format!("{key}:'{text}' is not a call: write proc(a,b)"))
    })?;
    let args_text = rest.strip_suffix(')').ok_or_else(|| {
        PlanError::Invalid(format!("{key}:'{text}' is not a call: write proc(a,b)"))
    })?;
    let proc_name = proc_name.trim();
    if !is_name(proc_name) {
        return Err(PlanError::Invalid(format!(
            "{key}:'{text}': '{proc_name}' is not a procedure name"
        )));
    }
    if !allowed.iter().any(|p| p == proc_name) {
        return Err(PlanError::Forbidden(format!(
            "{key}: procedure {proc_name} is not on the server's procedures allow-list"
        )));
    }
    let mut args = Vec::new();
    for a in args_text.split(',').map(str::trim) {
        if a.is_empty() {
            if args_text.trim().is_empty() {
                break;
            }
            return Err(PlanError::Invalid(format!(
                "{key}:'{text}' has an empty argument"
            )));
        }
        let arg = if let Some(s) = a.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
            ProcArg::Value(Json::String(s.to_string()))
        } else if let Ok(n) = a.parse::<i64>() {
            ProcArg::Value(Json::from(n))
        } else if let Some(n) = a.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            ProcArg::Value(Json::Number(n))
        } else if is_name(a.strip_prefix('@').unwrap_or(a)) {
            // `@limit`: a custom key of the same object, as the reference's customMap.
            ProcArg::Key(a.to_string())
        } else {
            return Err(PlanError::Invalid(format!(
                "{key}:'{text}': argument '{a}' must be a key of the object, a number or a \
                 'string'"
            )));
        };
        args.push(arg);
    }
    Ok(ProcedureCall {
        key,
        answer_key: answer_key.to_string(),
        name: Ident::new(proc_name),
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_parse_and_names_are_checked() {
        let allowed = vec!["proc".to_string()];
        let c = plan_call("p()", &Json::from("proc(id, 3, 'x')"), &allowed).expect("call");
        assert_eq!(c.answer_key, "p");
        assert_eq!(
            c.args,
            vec![
                ProcArg::Key("id".into()),
                ProcArg::Value(Json::from(3)),
                ProcArg::Value(Json::from("x"))
            ]
        );
        assert!(plan_call("p()", &Json::from("other(id)"), &allowed).is_err());
        assert!(plan_call("p()", &Json::from("proc(id;drop)"), &allowed).is_err());
        assert!(plan_call("p()", &Json::from("proc"), &allowed).is_err());
        let custom = plan_call("p()", &Json::from("proc(id,@limit)"), &allowed).expect("call");
        assert_eq!(custom.args[1], ProcArg::Key("@limit".into()));
        assert!(plan_call("p()", &Json::from("proc(@)"), &allowed).is_err());
        let empty = plan_call("p()", &Json::from("proc()"), &allowed).expect("no args");
        assert!(empty.args.is_empty());
    }
}
