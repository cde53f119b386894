//! Remote functions (`"k()": "fn(a,b)"`, protocol §11): a registry of native functions with
//! the reference's names. Arguments name keys of the current object (or are literals), as the
//! reference resolves them.

use crate::ExecError;
use apijet_plan::call::{Arg, Function, Planned};
use apijet_plan::Visitor;
use serde_json::{Map, Value as Json};

/// The value of an argument in `obj`.
fn arg(obj: &Map<String, Json>, a: &Arg) -> Json {
    match a {
        Arg::Key(k) => obj.get(k).cloned().unwrap_or(Json::Null),
        Arg::Literal(text, v) => obj.get(text).cloned().unwrap_or_else(|| v.clone()),
    }
}

fn num(v: &Json) -> Option<f64> {
    match v {
        Json::Number(n) => n.as_f64(),
        Json::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn number(f: f64) -> Json {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Json::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number)
    }
}

fn same(a: &Json, b: &Json) -> bool {
    match (num(a), num(b)) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
        _ => a == b,
    }
}

/// A value as the reference's `getString` reads it: text as it is, null as nothing.
fn text_of(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Null => String::new(),
        other => other.to_string(),
    }
}

/// `name(arguments)` of a `Function` row.
fn function_call(obj: &Map<String, Json>) -> String {
    let text = |k: &str| obj.get(k).map_or(String::new(), text_of);
    format!("{}({})", text("name"), text("arguments").trim())
}

/// Runs the planned call against `obj`, or raises the error it was planned as; `Ok(None)`
/// means the key is left out.
pub fn call(
    planned: &Planned,
    obj: &Map<String, Json>,
    visitor: Option<&Visitor>,
) -> Result<Option<Json>, ExecError> {
    let call = planned.as_ref().map_err(|e| ExecError::Plan(e.clone()))?;
    let a: Vec<Json> = call.args.iter().map(|t| arg(obj, t)).collect();
    let at = |i: usize| a.get(i).cloned().unwrap_or(Json::Null);
    let arg_text = |i: usize| call.args.get(i).map_or("", Arg::text);
    let out = match call.function {
        Function::IsContain => Json::Bool(
            at(0)
                .as_array()
                .is_some_and(|l| l.iter().any(|x| same(x, &at(1)))),
        ),
        Function::IsContainKey => {
            let key = at(1);
            Json::Bool(
                at(0)
                    .as_object()
                    .is_some_and(|o| key.as_str().is_some_and(|k| o.contains_key(k))),
            )
        }
        Function::IsContainValue => Json::Bool(
            at(0)
                .as_object()
                .is_some_and(|o| o.values().any(|x| same(x, &at(1)))),
        ),
        Function::CountArray => Json::from(at(0).as_array().map_or(0, Vec::len)),
        Function::CountObject => Json::from(at(0).as_object().map_or(0, Map::len)),
        Function::IsArrayEmpty => Json::Bool(at(0).as_array().is_none_or(Vec::is_empty)),
        Function::IsObjectEmpty => Json::Bool(at(0).as_object().is_none_or(Map::is_empty)),
        Function::GetFromArray => {
            let i = num(&at(1)).unwrap_or(-1.0);
            match at(0).as_array() {
                Some(l) if i >= 0.0 => l.get(i as usize).cloned().unwrap_or(Json::Null),
                _ => Json::Null,
            }
        }
        Function::GetFromObject => {
            let key = at(1);
            at(0)
                .get(key.as_str().unwrap_or_default())
                .cloned()
                .unwrap_or(Json::Null)
        }
        Function::Plus | Function::Minus | Function::Multiply | Function::Divide => {
            let (x, y) = (num(&at(0)), num(&at(1)));
            match (x, y) {
                (Some(x), Some(y)) => match call.function {
                    Function::Plus => number(x + y),
                    Function::Minus => number(x - y),
                    Function::Multiply => number(x * y),
                    _ if y == 0.0 => {
                        return Err(ExecError::Invalid("divide: division by zero".into()))
                    }
                    _ => number(x / y),
                },
                _ => Json::Null,
            }
        }
        Function::BooleanValue => {
            Json::Bool(matches!(at(0), Json::Bool(true)) || num(&at(0)).is_some_and(|n| n != 0.0))
        }
        Function::IntValue => num(&at(0)).map_or(Json::Null, |n| Json::from(n as i64)),
        Function::FloatValue => num(&at(0)).map_or(Json::Null, number),
        Function::GetWithDefault => {
            if at(0).is_null() {
                at(1)
            } else {
                at(0)
            }
        }
        // Validations the demo's structures inject before writes: they answer nothing or fail.
        Function::VerifyIdList => {
            for (i, id) in at(0).as_array().into_iter().flatten().enumerate() {
                if id.as_i64().is_none_or(|n| n <= 0) {
                    return Err(ExecError::Invalid(format!(
                        "{}/{i}: {id} is not an id",
                        arg_text(0)
                    )));
                }
            }
            Json::Null
        }
        Function::VerifyUrlList => {
            for (i, url) in at(0).as_array().into_iter().flatten().enumerate() {
                let ok = url.as_str().is_some_and(|u| {
                    (u.starts_with("http://") || u.starts_with("https://"))
                        && u.len() > 8
                        && !u.contains(' ')
                });
                if !ok {
                    return Err(ExecError::Invalid(format!(
                        "{}/{i}: {url} is not a URL",
                        arg_text(0)
                    )));
                }
            }
            Json::Null
        }
        // The docs of a `Function` row (APIAuto's data dictionary): its demo request, with a
        // `"result()"` call of the function added when the demo has none, and its detail
        // after the call's signature, as the reference's framework answers them.
        Function::GetFunctionDemo => {
            let mut demo = match obj.get("demo") {
                Some(Json::Object(m)) => m.clone(),
                Some(Json::String(s)) => match serde_json::from_str(s) {
                    Ok(Json::Object(m)) => m,
                    _ => Map::new(),
                },
                _ => Map::new(),
            };
            // The reference's JSON writer leaves null members out.
            demo.retain(|_, v| !v.is_null());
            if !demo.contains_key("result()") {
                demo.insert("result()".into(), Json::String(function_call(obj)));
            }
            Json::Object(demo)
        }
        Function::GetFunctionDetail => {
            let detail = obj.get("detail").map_or(String::new(), text_of);
            Json::String(format!("{}: {}", function_call(obj), detail.trim()))
        }
        Function::GetCurrentUserId => visitor.map_or(Json::Null, |v| Json::from(v.id)),
        Function::GetCurrentUserIdAsList => visitor.map_or(Json::Null, |v| Json::from(vec![v.id])),
        Function::GetCurrentContactIdList => {
            visitor.map_or(Json::Null, |v| Json::from(v.contacts.clone()))
        }
        // The demo's functions that write run after a written object only.
        Function::DeleteCommentOfMoment | Function::DeleteChildComment => {
            return Err(ExecError::FunctionNotAllowed(call.name.clone()))
        }
    };
    Ok((!out.is_null()).then_some(out))
}

/// The results of the `k-()` functions of a statement, run before it with no row (§11):
/// each call with its value (none: the condition is left out).
pub fn pre_functions<'p>(
    plan: &'p apijet_plan::TablePlan,
    visitor: Option<&Visitor>,
) -> Result<Vec<(&'p Planned, Option<Json>)>, ExecError> {
    let empty = Map::new();
    let mut out = Vec::new();
    for c in &plan.conds {
        if let apijet_plan::Operand::Function(f) = &c.operand {
            out.push((f, call(f, &empty, visitor)?));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use apijet_plan::call::Call;
    use serde_json::json;

    fn run(text: &str, obj: &Map<String, Json>) -> Result<Option<Json>, ExecError> {
        call(&Call::read(text), obj, None)
    }

    #[test]
    fn arguments_name_keys_of_the_object() {
        let obj = json!({"praiseUserIdList": [82001, 82002], "userId": 82002});
        let obj = obj.as_object().expect("object");
        assert_eq!(
            run("isContain(praiseUserIdList,userId)", obj).expect("ok"),
            Some(json!(true))
        );
        assert_eq!(
            run("getFromArray(praiseUserIdList,0)", obj).expect("ok"),
            Some(json!(82001))
        );
        assert_eq!(
            run("countArray(praiseUserIdList)", obj).expect("ok"),
            Some(json!(2))
        );
    }

    #[test]
    fn function_rows_answer_their_demo_and_detail() {
        let obj = json!({"name": "isContain", "arguments": "array,value ", "detail": " 判断 ",
            "demo": "{\"array\": [1, 2], \"value\": 2}"});
        let obj = obj.as_object().expect("object");
        assert_eq!(
            run("getFunctionDemo()", obj).expect("ok"),
            Some(json!({"array": [1, 2], "value": 2, "result()": "isContain(array,value)"}))
        );
        assert_eq!(
            run("getFunctionDetail()", obj).expect("ok"),
            Some(json!("isContain(array,value): 判断"))
        );
        let given = json!({"name": "f", "demo": {"result()": "f(1)"}});
        let given = given.as_object().expect("object");
        assert_eq!(
            run("getFunctionDemo()", given).expect("ok"),
            Some(json!({"result()": "f(1)"}))
        );
        assert_eq!(
            run("getFunctionDetail()", given).expect("ok"),
            Some(json!("f(): "))
        );
    }

    #[test]
    fn unknown_functions_are_refused() {
        let obj = Map::new();
        assert!(matches!(
            run("hack(id)", &obj),
            Err(ExecError::Plan(apijet_plan::PlanError::Forbidden(_)))
        ));
    }
}
