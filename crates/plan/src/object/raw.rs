//! `@raw`: SQL fragments from the operator's `raw_sql` list (the reference's RAW_MAP), for the
//! keys `@raw` names: condition values (`"momentId>":"to.momentId"`), items of `@column`
//! (`"sumUserIdIsEven"`, `"substring_index(…) AS subContent"`) and of `@having`
//! (`"to_days(now())-to_days(`date`)<=7"`). A text on the list is written as the operator
//! configured it; any other condition value is refused, never bound as a look-alike string.
//! `@column` and `@having` items not on the list are parsed by the expression grammar as
//! always: the reference's `@raw` lets its parser accept operators and SQL words there, which
//! apijet's grammar accepts anyway.

use super::select_list::{self, ColumnList, TableNames};
use crate::expr::check_length;
use crate::query::{CmpOp, Expr, Ident, Pred, SelectItem};
use crate::PlanError;
use apijet_request::{ConditionKey, Logic, Op, TableEntry, TableObject};
use serde_json::Value as Json;
use std::sync::Arc;

/// The operator's raw SQL fragments: what a client may write, and the SQL written for it.
#[derive(Debug, Clone, Default)]
pub struct RawSql {
    fragments: Vec<(String, Arc<str>)>,
}

impl RawSql {
    /// Fragments as `(client text, SQL)` pairs.
    pub fn new(fragments: impl IntoIterator<Item = (String, String)>) -> RawSql {
        RawSql {
            fragments: fragments
                .into_iter()
                .map(|(text, sql)| (text, Arc::from(sql)))
                .collect(),
        }
    }

    /// The SQL configured for `text`.
    pub fn get(&self, text: &str) -> Option<&Arc<str>> {
        self.fragments
            .iter()
            .find_map(|(t, sql)| (t == text).then_some(sql))
    }

    /// Whether no fragment is configured.
    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }
}

/// What `@raw` marks in one object.
#[derive(Debug, Default)]
pub(crate) struct RawMarks<'o> {
    /// Condition keys whose values are fragments.
    pub conditions: Vec<&'o str>,
    /// `@column` items may be fragments.
    pub column: bool,
    /// `@having` items may be fragments.
    pub having: bool,
}

/// The keys `@raw` marks: conditions of the object with a comparison operator, `@column` and
/// `@having` (not `@having&`, which the reference refuses here too).
pub(crate) fn raw_keys<'o>(v: &Json, obj: &'o TableObject) -> Result<RawMarks<'o>, PlanError> {
    let text = v
        .as_str()
        .ok_or_else(|| PlanError::WrongType("@raw must be a string of keys: \"k1,k2\"".into()))?;
    let mut marks = RawMarks::default();
    for k in text.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        match k {
            "@column" => marks.column = true,
            "@having" => marks.having = true,
            "@having&" => {
                return Err(PlanError::Invalid(
                    "@raw:'@having&' is not supported: write @having (items OR-ed) for raw items"
                        .into(),
                ))
            }
            _ if k.starts_with('@') => {
                return Err(PlanError::Invalid(format!(
                    "@raw:'{k}': only conditions, @column and @having take raw SQL; {k} is \
                     parsed as it is"
                )))
            }
            _ => {
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
                marks.conditions.push(key);
            }
        }
    }
    Ok(marks)
}

/// The configured fragment a raw condition's value names, or a refusal naming the key.
pub(crate) fn raw_fragment(
    key: &ConditionKey,
    value: &Json,
    raw: &RawSql,
) -> Result<Arc<str>, PlanError> {
    if !matches!(key.op, Op::Eq | Op::Gt | Op::Ge | Op::Lt | Op::Le) || key.length.is_some() {
        return Err(PlanError::Invalid(format!(
            "@raw: {} cannot be raw: only k, k!, k>, k>=, k<, k<= take a raw SQL value",
            key.raw
        )));
    }
    match value.as_str().and_then(|text| raw.get(text)) {
        Some(sql) => Ok(sql.clone()),
        None => Err(PlanError::Invalid(format!(
            "@raw: the value of {} is not in the server's raw_sql list; raw SQL is used only as \
             the operator configured it",
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

/// Splits a trailing ` AS name` off a fragment (any letter case): the name it answers under.
fn trailing_alias(text: &str) -> Option<(&str, &str)> {
    let upper = text.to_ascii_uppercase();
    let at = upper.rfind(" AS ")?;
    let name = text[at + 4..].trim();
    apijet_request::is_name(name).then(|| (text[..at].trim_end(), name))
}

/// One `@column` segment that is a configured fragment, as a select item. The segment as a
/// whole (`sumUserIdIsEven`, `f(x) AS y`), or its part before `:alias`, is looked up; the
/// item answers under the alias, the fragment's own trailing `AS name`, or its text.
fn raw_column_item(
    segment: &str,
    raw: &RawSql,
    engine: apijet_core::Capabilities,
) -> Result<Option<SelectItem>, PlanError> {
    let (sql, mut alias) = match raw.get(segment) {
        Some(sql) => (sql.clone(), None),
        None => match segment.rsplit_once(':') {
            Some((text, alias)) if apijet_request::is_name(alias) => match raw.get(text) {
                Some(sql) => (sql.clone(), Some(alias.to_string())),
                None => return Ok(None),
            },
            _ => return Ok(None),
        },
    };
    let mut sql = sql;
    if let Some((body, name)) = trailing_alias(&sql) {
        alias.get_or_insert_with(|| name.to_string());
        sql = Arc::from(body);
    }
    let alias = match alias {
        Some(a) => a,
        None => match trailing_alias(segment) {
            Some((_, name)) => name.to_string(),
            None => match engine.max_output_name_bytes {
                Some(max) if segment.len() > max => {
                    return Err(PlanError::Invalid(format!(
                        "@column: the raw item '{segment}' is longer than the {max} bytes {} \
                         allows for a column name; give it an alias: item:alias",
                        engine.name
                    )))
                }
                _ => segment.to_string(),
            },
        },
    };
    Ok(Some(SelectItem {
        expr: Expr::Raw(sql),
        alias: Ident::new(alias),
    }))
}

/// `@column` of an object whose `@raw` names it: segments on the `raw_sql` list are written
/// as configured, the others parsed as always.
pub(crate) fn raw_columns(
    text: &str,
    raw: &RawSql,
    names: &TableNames<'_>,
) -> Result<ColumnList, PlanError> {
    check_length("@column", text, names.limits.max_length)?;
    if let Some(item) = raw_column_item(text.trim(), raw, names.limits.engine)? {
        return Ok(ColumnList {
            items: vec![item],
            distinct: false,
        });
    }
    let mut items = Vec::new();
    let mut distinct = false;
    for (i, segment) in text.split(';').enumerate() {
        let segment = segment.trim();
        if segment.is_empty() {
            continue;
        }
        if let Some(item) = raw_column_item(segment, raw, names.limits.engine)? {
            items.push(item);
            continue;
        }
        let list = select_list::columns(segment, names)?;
        distinct |= i == 0 && list.distinct;
        items.extend(list.items);
    }
    Ok(ColumnList { items, distinct })
}

/// `@having` of an object whose `@raw` names it: items on the `raw_sql` list are written as
/// configured (a condition each, OR-ed like the others), the others parsed as always.
pub(crate) fn raw_having(
    text: &str,
    raw: &RawSql,
    names: &TableNames<'_>,
) -> Result<Pred, PlanError> {
    if text.trim_start().starts_with('{') {
        return select_list::having(text, false, names);
    }
    if let Some(sql) = raw.get(text.trim()) {
        return Ok(Pred::Raw(sql.clone()));
    }
    let mut preds = Vec::new();
    for item in text.split(';').map(str::trim).filter(|i| !i.is_empty()) {
        preds.push(match raw.get(item) {
            Some(sql) => Pred::Raw(sql.clone()),
            None => select_list::having(item, false, names)?,
        });
    }
    Ok(Pred::Or(preds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_answers_under_its_alias_its_own_as_or_its_text() {
        let raw = RawSql::new([
            (
                "sumUserIdIsEven".to_string(),
                "sum(if(`userId`%2=0,1,0)) AS sumUserIdIsEven".to_string(),
            ),
            (
                "sum(if(userId%2=0,1,0))".to_string(),
                "sum(if(userId%2=0,1,0))".to_string(),
            ),
            (
                "substring_index(content,'.',1) AS subContent".to_string(),
                "substring_index(content,'.',1) AS subContent".to_string(),
            ),
        ]);
        let engine = apijet_core::Capabilities::MYSQL;
        let item = |s: &str| {
            raw_column_item(s, &raw, engine)
                .expect("ok")
                .map(|i| (i.expr, i.alias.as_str().to_string()))
        };
        assert_eq!(
            item("sumUserIdIsEven"),
            Some((
                Expr::Raw(Arc::from("sum(if(`userId`%2=0,1,0))")),
                "sumUserIdIsEven".to_string()
            ))
        );
        assert_eq!(
            item("sum(if(userId%2=0,1,0)):even").map(|(_, a)| a),
            Some("even".to_string())
        );
        assert_eq!(
            item("sum(if(userId%2=0,1,0))").map(|(_, a)| a),
            Some("sum(if(userId%2=0,1,0))".to_string())
        );
        assert_eq!(
            item("substring_index(content,'.',1) AS subContent"),
            Some((
                Expr::Raw(Arc::from("substring_index(content,'.',1)")),
                "subContent".to_string()
            ))
        );
        assert_eq!(item("count(*)"), None, "not on the list: parsed as always");
        assert_eq!(item("sumUserIdIsEven2"), None);
    }
}
