//! SQL joins between the tables of one array item (`join`, protocol §12): the join specs, and
//! how a joined statement is made of the main object's and the joined objects' statements.

use super::TablePlan;
use crate::condition::Operand;
use crate::query::{CmpOp, Expr, Ident, Join, JoinKind, Pred, Select, SelectItem, Source};
use crate::PlanError;
use apijet_request::Op;
use serde_json::Value as Json;

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
        // As the reference reads it: the join type before the first `/`, then the table key,
        // then after the last `/` the reference key that forms the ON condition.
        let Some((kind_text, path)) = item.split_once('/') else {
            return Err(PlanError::Invalid(format!(
                "join: '{item}' is not valid: write it as &/Table or &/Table/key@"
            )));
        };
        let mut chars = kind_text.chars();
        let kind = match (chars.next(), chars.next()) {
            (Some(c), None) if "&<>|!^()@*~".contains(c) => c,
            (None, _) => {
                // The reference skips such an entry without a word and runs the table as an
                // ordinary object; joining nothing silently is what we refuse.
                return Err(PlanError::Invalid(format!(
                    "join: '{item}' has no join type: put one of & < > | ! ^ ( ) @ before the \
                     first /, or leave the entry out to query the table on its own"
                )));
            }
            _ => return Err(PlanError::Invalid(format!("join: '{item}' is not valid"))),
        };
        let (table_key, on_key) = match path.rsplit_once('/') {
            Some((t, k)) if k.ends_with('@') && k.len() > 1 => (t.to_string(), Some(k.to_string())),
            Some(_) => {
                return Err(PlanError::Invalid(format!(
                    "join: '{item}' is not valid: the part after the table must be a reference \
                     key ending in @"
                )))
            }
            None => (path.to_string(), None),
        };
        if table_key.is_empty() {
            return Err(PlanError::Invalid(format!("join: '{item}' names no table")));
        }
        if kind == '~' {
            return Err(PlanError::Forbidden(format!(
                "join: '{item}': ASOF JOIN (~) is not supported by SQLite, PostgreSQL or MariaDB"
            )));
        }
        if kind == '*' {
            return Err(PlanError::Forbidden(format!(
                "join: '{item}': CROSS JOIN (*) is disabled: it is slow and rarely needed"
            )));
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

/// `@/Sub[]/Table/key@`: an APP JOIN into a sub-array of the item, which the reference runs as
/// one statement for the rows of every item, `count` per item. The nested array already runs
/// that way here, so the spec only needs checking as the reference checks it.
pub fn check_app_join_into_array(
    spec: &JoinSpec,
    sub_array: &str,
    members: &[apijet_request::Member],
) -> Result<(), PlanError> {
    use apijet_request::{Node, TableEntry};
    let item = format!("{}/{}", spec.kind, spec.table_key);
    if spec.kind != '@' {
        return Err(PlanError::Forbidden(format!(
            "join: '{item}': only an @ APP JOIN may reach into a sub-array"
        )));
    }
    let inner = &spec.table_key[sub_array.len() + 1..];
    let arr = members
        .iter()
        .find(|m| m.key == sub_array)
        .and_then(|m| match &m.node {
            Node::Array(a) => Some(a),
            _ => None,
        })
        .ok_or_else(|| {
            PlanError::Invalid(format!(
                "join: '{item}': {sub_array} is not an array of the item"
            ))
        })?;
    if arr.join.is_some() {
        return Err(PlanError::Invalid(format!(
            "join: '{item}': an APP JOIN reaches one level only; {sub_array} must have no join"
        )));
    }
    if arr.page.as_ref().is_some_and(|p| p.as_i64() != Some(0)) {
        return Err(PlanError::Invalid(format!(
            "join: '{item}': {sub_array} must have no page (or page 0) in an APP JOIN"
        )));
    }
    let table = arr
        .items
        .members
        .iter()
        .find(|m| m.key == inner)
        .and_then(|m| match &m.node {
            Node::Table(t) => Some(t),
            _ => None,
        })
        .ok_or_else(|| {
            PlanError::Invalid(format!(
                "join: '{item}': {inner} is not a table object of {sub_array}"
            ))
        })?;
    let refs = table
        .entries
        .iter()
        .filter(|e| match e {
            TableEntry::RefCondition { key, .. } => {
                spec.on_key.as_deref().is_none_or(|k| k == key.raw)
            }
            _ => false,
        })
        .count();
    if refs != 1 {
        return Err(PlanError::Invalid(format!(
            "join: '{item}': an APP JOIN needs exactly one reference key@ in {inner} to join on"
        )));
    }
    Ok(())
}

/// The vice's `@group`, `@having` and `@order` (its own, or those of its ON object in the
/// object form of `join`) apply to the joined statement, after the main table's, as the
/// reference appends them (AbstractSQLConfig.gainGroupString and its siblings).
pub fn merge_vice_clauses(main: &mut Select, vice: &TablePlan) {
    use crate::query::OrderItem;
    main.group.extend(vice.group.iter().cloned());
    if let Some(h) = &vice.having {
        main.having = Some(match main.having.take() {
            Some(m) => Pred::And(vec![m, h.clone()]),
            None => h.clone(),
        });
    }
    // An output name of the vice is not one of the joined statement: order by its expression.
    let unalias = |e: &Expr| match e {
        Expr::Alias(a) => vice
            .columns
            .iter()
            .find(|c| c.alias == *a)
            .map_or_else(|| e.clone(), |c| c.expr.clone()),
        other => other.clone(),
    };
    main.order.extend(vice.order.iter().map(|o| match o {
        OrderItem::By(e, d) => OrderItem::By(unalias(e), *d),
        OrderItem::Random => OrderItem::Random,
    }));
}

/// Whether the vice rows of this join kind come from the joined statement itself (one vice row
/// per main row, as SQL pairs them), as the reference fills them; with the other kinds (`@`
/// APP, `|` FULL, `!` OUTER, `^` SIDE, `(` ANTI) the reference queries each vice object on its
/// own (REF-J07 shows its `@explain`).
pub fn carries_vice_rows(kind: char) -> bool {
    matches!(kind, '&' | '<' | '>' | ')')
}

/// Adds the vice's select list to the joined select, each output renamed `prefix` + its name,
/// so that each answered row carries the vice row SQL paired it with.
pub fn carry_vice_columns(main: &mut Select, prefix: &str, vice: &Select) {
    main.columns.extend(vice.columns.iter().map(|c| SelectItem {
        expr: c.expr.clone(),
        alias: Ident::new(format!("{prefix}{}", c.alias.as_str())),
    }));
}

/// Passes a joined select through the column gate as one statement: its ON conditions name
/// columns that reference paths gave, and the sides' clauses now sit together.
pub fn admit_joined(
    select: &Select,
    main: &TablePlan,
    vices: &[&TablePlan],
) -> Result<(), PlanError> {
    let known: Vec<_> = std::iter::once(main)
        .chain(vices.iter().copied())
        .map(TablePlan::known)
        .collect();
    crate::gate::admit_select(select, &known)
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
    let table = vice.table_source();
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
            sub.group.clear();
            sub.having = None;
            sub.order.clear();
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
