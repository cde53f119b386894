//! Remote functions (`"k()": "fn(a,b)"`, `"k-()": "fn(a)"`, protocol §11): a call's text read
//! once while planning into the function it names, from the registry of the reference's names,
//! and its arguments, so that running it is a lookup of its arguments in the row it runs on.
//!
//! A call that cannot be read (no call, no such function, the wrong number of arguments) is
//! kept as its error, raised when the call would run: a function of an object without a row,
//! or after a batch insert, never runs, as in the reference.

use crate::PlanError;
use serde_json::Value as Json;
use std::fmt;

/// A function of the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// `isContain(array, value)`
    IsContain,
    /// `isContainKey(object, key)`
    IsContainKey,
    /// `isContainValue(object, value)`
    IsContainValue,
    /// `countArray(array)`
    CountArray,
    /// `countObject(object)`
    CountObject,
    /// `isArrayEmpty(array)`
    IsArrayEmpty,
    /// `isObjectEmpty(object)`
    IsObjectEmpty,
    /// `getFromArray(array, position)`
    GetFromArray,
    /// `getFromObject(object, key)`
    GetFromObject,
    /// `plus(a, b)`
    Plus,
    /// `minus(a, b)`
    Minus,
    /// `multiply(a, b)`
    Multiply,
    /// `divide(a, b)`
    Divide,
    /// `booleanValue(v)`
    BooleanValue,
    /// `intValue(v)`, `longValue(v)`
    IntValue,
    /// `floatValue(v)`, `doubleValue(v)`
    FloatValue,
    /// `getWithDefault(value, default)`
    GetWithDefault,
    /// `verifyIdList(list)`: a validation the demo's structures inject before writes.
    VerifyIdList,
    /// `verifyURLList(list)`: likewise.
    VerifyUrlList,
    /// `getFunctionDemo()` of a `Function` row.
    GetFunctionDemo,
    /// `getFunctionDetail()` of a `Function` row.
    GetFunctionDetail,
    /// `getCurrentUserId()`
    GetCurrentUserId,
    /// `getCurrentUserIdAsList()`
    GetCurrentUserIdAsList,
    /// `getCurrentContactIdList()`
    GetCurrentContactIdList,
    /// `deleteCommentOfMoment(id)`: the demo's function that deletes a moment's comments, run
    /// after a written object only.
    DeleteCommentOfMoment,
    /// `deleteChildComment(id)`: deletes a comment's replies, level by level.
    DeleteChildComment,
}

impl Function {
    /// The function a name names, as the reference spells it.
    pub fn named(name: &str) -> Option<Function> {
        use Function::*;
        Some(match name {
            "isContain" => IsContain,
            "isContainKey" => IsContainKey,
            "isContainValue" => IsContainValue,
            "countArray" => CountArray,
            "countObject" => CountObject,
            "isArrayEmpty" => IsArrayEmpty,
            "isObjectEmpty" => IsObjectEmpty,
            "getFromArray" => GetFromArray,
            "getFromObject" => GetFromObject,
            "plus" => Plus,
            "minus" => Minus,
            "multiply" => Multiply,
            "divide" => Divide,
            "booleanValue" => BooleanValue,
            "intValue" | "longValue" => IntValue,
            "floatValue" | "doubleValue" => FloatValue,
            "getWithDefault" => GetWithDefault,
            "verifyIdList" => VerifyIdList,
            "verifyURLList" => VerifyUrlList,
            "getFunctionDemo" => GetFunctionDemo,
            "getFunctionDetail" => GetFunctionDetail,
            "getCurrentUserId" => GetCurrentUserId,
            "getCurrentUserIdAsList" => GetCurrentUserIdAsList,
            "getCurrentContactIdList" => GetCurrentContactIdList,
            "deleteCommentOfMoment" => DeleteCommentOfMoment,
            "deleteChildComment" => DeleteChildComment,
            _ => return None,
        })
    }

    /// How many arguments it takes, where the registry checks it.
    fn arity(self) -> Option<usize> {
        use Function::*;
        match self {
            IsContain | IsContainKey | IsContainValue | GetFromArray | GetFromObject | Plus
            | Minus | Multiply | Divide | GetWithDefault => Some(2),
            CountArray | CountObject | IsArrayEmpty | IsObjectEmpty | BooleanValue | IntValue
            | FloatValue | VerifyIdList | VerifyUrlList => Some(1),
            GetFunctionDemo | GetFunctionDetail => Some(0),
            GetCurrentUserId
            | GetCurrentUserIdAsList
            | GetCurrentContactIdList
            | DeleteCommentOfMoment
            | DeleteChildComment => None,
        }
    }
}

/// One argument of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// A key of the object the call runs on: its value (null when absent).
    Key(String),
    /// A number or a quoted string (`1`, `2.5`, `'x'`), as written: the value of a key of the
    /// object spelt so, where there is one, else this value.
    Literal(String, Json),
}

impl Arg {
    fn read(token: &str) -> Arg {
        let literal = if let Ok(i) = token.parse::<i64>() {
            Some(Json::from(i))
        } else if let Ok(f) = token.parse::<f64>() {
            Some(serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number))
        } else {
            token
                .strip_prefix('\'')
                .and_then(|t| t.strip_suffix('\''))
                .map(|s| Json::String(s.to_string()))
        };
        match literal {
            Some(v) => Arg::Literal(token.to_string(), v),
            None => Arg::Key(token.to_string()),
        }
    }

    /// The argument as written, for messages.
    pub fn text(&self) -> &str {
        match self {
            Arg::Key(k) | Arg::Literal(k, _) => k,
        }
    }
}

/// A call, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The function.
    pub function: Function,
    /// Its name as written (`longValue` for [`Function::IntValue`]), for messages.
    pub name: String,
    /// Its arguments.
    pub args: Vec<Arg>,
    text: String,
}

impl Call {
    /// Reads `fn(a,b)`; arguments are split at every comma, as the reference splits them.
    pub fn read(text: &str) -> Result<Call, PlanError> {
        let bad = || PlanError::Invalid(format!("'{text}' is not a function call like fn(a,b)"));
        let open = text.find('(').ok_or_else(bad)?;
        let inner = text[open + 1..].strip_suffix(')').ok_or_else(bad)?;
        let name = &text[..open];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad());
        }
        let function = Function::named(name).ok_or_else(|| {
            PlanError::Forbidden(format!("remote function {name} is not allowed"))
        })?;
        let args: Vec<Arg> = if inner.trim().is_empty() {
            Vec::new()
        } else {
            inner.split(',').map(|t| Arg::read(t.trim())).collect()
        };
        if let Some(n) = function.arity().filter(|&n| n != args.len()) {
            return Err(PlanError::Invalid(format!(
                "{name} takes {n} argument(s), got {}",
                args.len()
            )));
        }
        Ok(Call {
            function,
            name: name.to_string(),
            args,
            text: text.to_string(),
        })
    }

    /// The call as written.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A call as planned: read, or the error it raises when it would run.
pub type Planned = Result<Call, PlanError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_read_into_their_function_and_arguments() {
        let c = Call::read("getFromArray(praiseUserIdList,0)").expect("a call");
        assert_eq!(c.function, Function::GetFromArray);
        assert_eq!(
            c.args,
            [
                Arg::Key("praiseUserIdList".into()),
                Arg::Literal("0".into(), Json::from(0))
            ]
        );
        assert_eq!(
            Call::read("plus( 'a' , 2.5)").expect("a call").args,
            [
                Arg::Literal("'a'".into(), Json::from("a")),
                Arg::Literal("2.5".into(), Json::from(2.5))
            ]
        );
        assert!(matches!(
            Call::read("hack(id)"),
            Err(PlanError::Forbidden(_))
        ));
        assert!(matches!(
            Call::read("countArray(a,b)"),
            Err(PlanError::Invalid(_))
        ));
        assert!(matches!(
            Call::read("countArray"),
            Err(PlanError::Invalid(_))
        ));
    }
}
