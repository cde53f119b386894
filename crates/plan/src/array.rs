//! Array objects: paging keywords and SQL joins between the tables of one item (§4.1, §12).

use crate::query::{CmpOp, Expr, Ident, Join, JoinKind, Pred, Select, SelectItem, Source};
use crate::table::{Operand, TablePlan};
use crate::PlanError;
use apijet_request::{ArrayObject, Op};
use serde_json::Value as Json;

/// What `query` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryMode {
    /// Rows only.
    Rows,
    /// The total only.
    Total,
    /// Both.
    Both,
}

/// The validated paging of an array.
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    /// Page size.
    pub count: u64,
    /// Page index.
    pub page: u64,
    /// `query`.
    pub mode: QueryMode,
    /// `compat`: count over the whole query (right for DISTINCT and GROUP BY).
    pub compat: bool,
}

fn int_of(v: &Json) -> Option<i64> {
    match v {
        Json::Number(n) => n.as_i64(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Validates `count`, `page`, `query` and `compat` of the array at `path`.
pub fn paging(
    arr: &ArrayObject,
    path: &str,
    max_count: u64,
    max_page: u64,
) -> Result<Paging, PlanError> {
    let count = match &arr.count {
        None => 10.min(max_count),
        Some(v) => match int_of(v) {
            Some(0) => max_count,
            Some(c) if c > 0 && (c as u64) <= max_count => c as u64,
            _ => {
                return Err(PlanError::Limit(format!(
                    "{path}/count:{v} is not valid: it must be within 0-{max_count}"
                )))
            }
        },
    };
    let page = match &arr.page {
        None => 0,
        Some(v) => match int_of(v) {
            Some(p) if p >= 0 && (p as u64) <= max_page => p as u64,
            _ => {
                return Err(PlanError::Limit(format!(
                    "{path}/page:{v} is not valid: it must be within 0-{max_page}"
                )))
            }
        },
    };
    let mode = match &arr.query {
        None => QueryMode::Rows,
        Some(v) => match (int_of(v), v.as_str()) {
            (Some(0), _) | (_, Some("TABLE")) => QueryMode::Rows,
            (Some(1), _) | (_, Some("TOTAL")) => QueryMode::Total,
            (Some(2), _) | (_, Some("ALL")) => QueryMode::Both,
            _ => {
                return Err(PlanError::Invalid(format!(
                    "{path}/query:{v} is not valid: use 0/TABLE, 1/TOTAL or 2/ALL"
                )))
            }
        },
    };
    let compat = arr.compat.as_ref().and_then(Json::as_bool).unwrap_or(false);
    Ok(Paging {
        count,
        page,
        mode,
        compat,
    })
}

/// One entry of `join`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinSpec {
    /// The join character (`&`, `<`, `>`, `|`, `!`, `^`, `(`, `)`, `@`, `*`).
    pub kind: char,
    /// The vice table key (`User`, `Comment:to`).
    pub table_key: String,
    /// The reference key that forms the ON condition (`id@`), if named.
    pub on_key: Option<String>,
    /// Extra ON conditions of the object form, as sent.
    pub extra: Option<Json>,
}

/// Parses `join` (string or object form).
pub fn join_specs(join: &Json) -> Result<Vec<JoinSpec>, PlanError> {
    let items: Vec<(String, Option<Json>)> = match join {
        Json::String(s) => s.split(',').map(|i| (i.trim().to_string(), None)).collect(),
        Json::Object(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect(),
        _ => {
            return Err(PlanError::WrongType(
                "join must be a string or an object".into(),
            ))
        }
    };
    let mut out = Vec::new();
    for (item, extra) in items {
        let mut parts = item.splitn(3, '/');
        let kind_text = parts.next().unwrap_or_default();
        let table_key = parts.next().unwrap_or_default().to_string();
        let on_key = parts.next().map(str::to_string);
        let mut chars = kind_text.chars();
        let kind = match (chars.next(), chars.next()) {
            (Some(c), None) if "&<>|!^()@*~".contains(c) => c,
            _ => return Err(PlanError::Invalid(format!("join: '{item}' is not valid"))),
        };
        if table_key.is_empty() {
            return Err(PlanError::Invalid(format!("join: '{item}' names no table")));
        }
        if kind == '*' {
            return Err(PlanError::Forbidden(
                "CROSS JOIN (*) is disabled: it is slow and rarely needed".into(),
            ));
        }
        out.push(JoinSpec {
            kind,
            table_key,
            on_key,
            extra,
        });
    }
    Ok(out)
}

/// Turns the main table's select into the joined select: ON conditions come from the vice's
/// references to the main table (`"id@": "/Moment/userId"`), WHERE combines both sides as the
/// join character says (§12.2).
pub fn apply_join(
    main: &mut Select,
    main_key: &str,
    spec: &JoinSpec,
    vice: &TablePlan,
    vice_select: Select,
) -> Result<(), PlanError> {
    let mut on = Vec::new();
    for c in &vice.conds {
        let Operand::Ref(path) = &c.operand else {
            continue;
        };
        if spec.on_key.as_deref().is_some_and(|k| k != c.key.raw) {
            continue;
        }
        let target = path.trim_start_matches('/');
        let Some((table, column)) = target.split_once('/') else {
            continue;
        };
        if table != main_key {
            continue;
        }
        if c.key.op != Op::Eq {
            return Err(PlanError::Forbidden(
                "complex JOIN relations ($, ~, {}, <>, >, <, >=, <=) are disabled".into(),
            ));
        }
        let main_col = main
            .columns
            .iter()
            .find(|s| s.alias.as_str() == column)
            .map(|s| s.expr.clone())
            .unwrap_or_else(|| Expr::Column {
                table: Some(main.alias.clone()),
                name: Ident::new(column),
                kind: crate::schema::ColumnKind::Other,
            });
        on.push(Pred::Cmp(c.lhs.clone(), CmpOp::Eq, main_col));
    }
    if on.is_empty() {
        return Err(PlanError::Invalid(format!(
            "join: {} has no reference to {main_key} to join on",
            spec.table_key
        )));
    }
    let vice_filter = vice_select.filter.clone();
    let table = Source::Table(Ident::new(vice.table.sql_name.clone()));
    match spec.kind {
        '<' => {
            // LEFT JOIN (SELECT … WHERE B) ON … keeps the same rows as LEFT JOIN … ON … AND B.
            on.extend(vice_filter);
            main.joins.push(Join {
                kind: JoinKind::Left,
                source: table,
                alias: vice.alias.clone(),
                on: Pred::And(on),
            });
            return Ok(());
        }
        '>' => {
            let mut sub = vice_select;
            sub.columns = vice
                .table
                .columns
                .iter()
                .filter(|c| !c.name.starts_with('_'))
                .map(|c| SelectItem {
                    expr: Expr::Column {
                        table: Some(vice.alias.clone()),
                        name: Ident::new(c.name.clone()),
                        kind: c.kind,
                    },
                    alias: Ident::new(c.name.clone()),
                })
                .collect();
            sub.limit = None;
            main.joins.push(Join {
                kind: JoinKind::Right,
                source: Source::Select(Box::new(sub)),
                alias: vice.alias.clone(),
                on: Pred::And(on),
            });
            return Ok(());
        }
        _ => main.joins.push(Join {
            kind: JoinKind::Inner,
            source: table,
            alias: vice.alias.clone(),
            on: Pred::And(on),
        }),
    }
    let a = main.filter.take();
    let b = vice_filter;
    let empty = || Pred::And(Vec::new());
    let not = |p: Pred| Pred::Not(Box::new(p));
    main.filter = match spec.kind {
        '&' | '@' => Some(Pred::And(a.into_iter().chain(b).collect())),
        '|' => Some(Pred::Or(vec![
            a.unwrap_or_else(empty),
            b.unwrap_or_else(empty),
        ])),
        '!' => Some(not(Pred::Or(vec![
            a.unwrap_or_else(empty),
            b.unwrap_or_else(empty),
        ]))),
        '^' => Some(not(Pred::And(vec![
            a.unwrap_or_else(empty),
            b.unwrap_or_else(empty),
        ]))),
        '(' => Some(Pred::And(vec![
            a.unwrap_or_else(empty),
            not(b.unwrap_or_else(empty)),
        ])),
        ')' => Some(Pred::And(vec![
            not(a.unwrap_or_else(empty)),
            b.unwrap_or_else(empty),
        ])),
        _ => a,
    };
    Ok(())
}
