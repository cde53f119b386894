//! SQL joins between the tables of one array item or subquery (`join`, protocol §12): the
//! join specs, and how a joined statement is composed of the main object's statement and each
//! joined (vice) object's, as the reference composes it (AbstractSQLConfig.gainJoinString,
//! gainColumnString, gainGroupString and their siblings):
//!
//! - the vice's references to the main object are the ON clause, its ON object's conditions
//!   (`"join": {"&/User": {…}}`) are AND-ed to it, and the vice's own conditions combine with
//!   the main object's in WHERE as the join character says;
//! - each of the joined statement's `@column` items, `@group`, `@having` and `@order` is the
//!   ON object's where it names that keyword, else the vice's own (for a LEFT or RIGHT join,
//!   which reads the vice through its own statement, that statement keeps them);
//! - where the vice's rows come with the main rows (`& < > )`), the vice's answer is its part
//!   of the joined row, grouped and aggregated with the joined statement (`count(1)` of a
//!   grouped join counts the joined rows of the group), never a statement of its own.

use super::TablePlan;
use crate::condition::Operand;
use crate::gate::Known;
use crate::query::{
    CmpOp, Expr, Ident, Join, JoinKind, OrderItem, Pred, Select, SelectItem, Source,
};
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

/// The ON object of `spec` (`join`'s object form) as a table object of the vice `vice`.
pub fn on_object(
    spec: &JoinSpec,
    vice: &apijet_request::TableObject,
) -> Result<Option<apijet_request::TableObject>, PlanError> {
    match &spec.extra {
        Some(Json::Object(extra)) => {
            apijet_request::TableObject::from_map(vice.key.clone(), extra.clone())
                .map(Some)
                .map_err(|e| PlanError::Invalid(e.to_string()))
        }
        _ => Ok(None),
    }
}

/// Whether a table object names its columns (`"@column": ""` names none).
pub fn names_columns(obj: &apijet_request::TableObject) -> bool {
    obj.entries.iter().any(|e| {
        matches!(e, apijet_request::TableEntry::Keyword { name, value: Json::String(text) }
            if name == "column" && !text.trim().is_empty())
    })
}

/// Whether the vice rows of this join kind come from the joined statement itself (one vice row
/// per main row, as SQL pairs them), as the reference fills them; with the other kinds (`@`
/// APP, `|` FULL, `!` OUTER, `^` SIDE, `(` ANTI) the reference queries each vice object on its
/// own (REF-J07 shows its `@explain`).
pub fn carries_vice_rows(kind: char) -> bool {
    matches!(kind, '&' | '<' | '>' | ')')
}

/// A SQL join of the main object with one vice object, planned.
#[derive(Debug)]
pub struct JoinPlan {
    /// The entry of `join`.
    pub spec: JoinSpec,
    /// The vice object's own plan: its references to the main object give the ON clause, its
    /// other conditions the join's B side.
    pub vice: TablePlan,
    /// The ON object of `join`'s object form, planned on the vice's table: its conditions are
    /// AND-ed to the ON clause.
    pub on: Option<TablePlan>,
    /// What the vice adds to the joined select list, under its own output names: the ON
    /// object's `@column` where it names one, else the vice's own.
    pub columns: Vec<SelectItem>,
    /// What the vice adds to the joined statement's GROUP BY, HAVING and ORDER BY.
    pub group: Vec<Expr>,
    /// HAVING.
    pub having: Option<Pred>,
    /// ORDER BY.
    pub order: Vec<OrderItem>,
    /// A LEFT or RIGHT join of a vice whose statement groups, aggregates or is DISTINCT
    /// reads it through that statement as a subquery; `columns` name its outputs.
    through_statement: bool,
}

/// What a keyword of the joined statement comes from.
fn outer<T: Clone>(
    on: Option<&TablePlan>,
    vice: &TablePlan,
    side_reads_own_statement: bool,
    part: impl Fn(&TablePlan) -> Option<T>,
) -> Option<T> {
    match on.and_then(&part) {
        Some(given) => Some(given),
        None if side_reads_own_statement => None,
        None => part(vice),
    }
}

/// `e` with the output names of `plan`'s select list spelled as their expressions: a vice's
/// output name is no name of the joined statement.
fn unaliased(e: &Expr, plan: &TablePlan) -> Expr {
    match e {
        Expr::Alias(a) => plan
            .columns
            .iter()
            .find(|c| c.alias == *a)
            .map_or_else(|| e.clone(), |c| c.expr.clone()),
        other => other.clone(),
    }
}

impl JoinPlan {
    /// Composes the join of `vice` (the vice object's own plan) with its ON object `on`, if
    /// any; `on_names_columns` tells whether the ON object gave `@column`.
    pub fn new(
        spec: JoinSpec,
        vice: TablePlan,
        on: Option<TablePlan>,
        on_names_columns: bool,
    ) -> Result<JoinPlan, PlanError> {
        let left_or_right = matches!(spec.kind, '<' | '>');
        let grouped =
            !vice.group.is_empty() || vice.having.is_some() || vice.aggregate || vice.distinct;
        let through_statement = left_or_right && grouped;
        let on_ref = on.as_ref();
        if through_statement && on_names_columns {
            return Err(PlanError::Invalid(format!(
                "join: '{}/{}': the ON object of a LEFT or RIGHT join cannot name @column when \
                 the joined object groups or aggregates: name the columns in {} itself",
                spec.kind, spec.table_key, spec.table_key
            )));
        }
        let columns = match (on_ref.filter(|_| on_names_columns), through_statement) {
            (Some(on), _) => on.columns.clone(),
            (None, false) => vice.columns.clone(),
            // The joined statement reads the vice's own statement's outputs by name.
            (None, true) => vice
                .columns
                .iter()
                .map(|c| SelectItem {
                    expr: Expr::Column {
                        table: Some(vice.alias.clone()),
                        name: c.alias.clone(),
                        kind: match &c.expr {
                            Expr::Column { kind, .. } => *kind,
                            _ => crate::schema::ColumnKind::Other,
                        },
                    },
                    alias: c.alias.clone(),
                })
                .collect(),
        };
        let group = outer(on_ref, &vice, left_or_right, |p| {
            (!p.group.is_empty()).then(|| p.group.clone())
        })
        .unwrap_or_default();
        let having = outer(on_ref, &vice, left_or_right, |p| p.having.clone());
        let order = outer(on_ref, &vice, left_or_right, |p| {
            (!p.order.is_empty()).then(|| {
                p.order
                    .iter()
                    .map(|o| match o {
                        OrderItem::By(e, d) => OrderItem::By(unaliased(e, p), *d),
                        OrderItem::Random => OrderItem::Random,
                    })
                    .collect()
            })
        })
        .unwrap_or_default();
        Ok(JoinPlan {
            spec,
            vice,
            on,
            columns,
            group,
            having,
            order,
            through_statement,
        })
    }

    /// The objects of the joined statement, for the column gate.
    pub fn known(&self) -> impl Iterator<Item = Known<'_>> {
        std::iter::once(self.vice.known()).chain(self.on.iter().map(TablePlan::known))
    }

    /// The vice's items of the joined select list, each output named `prefix` + its name.
    pub fn columns_as<'p>(&'p self, prefix: &'p str) -> impl Iterator<Item = SelectItem> + 'p {
        self.columns.iter().map(move |c| SelectItem {
            expr: c.expr.clone(),
            alias: Ident::new(format!("{prefix}{}", c.alias.as_str())),
        })
    }

    /// Joins the vice into `main`, the main object's statement bound with the request's
    /// `values`: the ON clause from the vice's references to the object `main_key`, WHERE
    /// combined as the join character says (§12.2), and the vice's GROUP BY, HAVING and ORDER
    /// BY after the main object's (its columns are the caller's to add: [`JoinPlan::columns`]).
    /// False when the vice cannot match.
    pub fn apply(
        &self,
        main: &mut Select,
        main_key: &str,
        values: &[Json],
    ) -> Result<bool, PlanError> {
        let Some(vice_select) = self.vice.select_without_refs(values)? else {
            return Ok(false);
        };
        let mut on = self.on_clause(main, main_key)?;
        if let Some(o) = &self.on {
            let Some(on_select) = o.select_without_refs(values)? else {
                return Ok(false);
            };
            on.extend(on_select.filter);
        }
        main.group.extend(self.group.iter().cloned());
        if let Some(h) = &self.having {
            main.having = Some(match main.having.take() {
                Some(m) => Pred::And(vec![m, h.clone()]),
                None => h.clone(),
            });
        }
        main.order.extend(self.order.iter().cloned());
        let vice = &self.vice;
        match self.spec.kind {
            '<' | '>' => {
                let kind = match self.spec.kind {
                    '<' => JoinKind::Left,
                    _ => JoinKind::Right,
                };
                let source = match (self.through_statement, kind) {
                    (true, _) => Source::Select(Box::new(self.own_statement(vice_select))),
                    // LEFT JOIN (SELECT … WHERE B) ON … keeps the rows of LEFT JOIN … ON … AND B.
                    (false, JoinKind::Left) => {
                        on.extend(vice_select.filter);
                        vice.table_source()
                    }
                    (false, _) => Source::Select(Box::new(plain_columns(vice, vice_select))),
                };
                main.joins.push(Join {
                    kind,
                    source,
                    alias: vice.alias.clone(),
                    on: Pred::And(on),
                });
                return Ok(true);
            }
            _ => main.joins.push(Join {
                kind: JoinKind::Inner,
                source: vice.table_source(),
                alias: vice.alias.clone(),
                on: Pred::And(on),
            }),
        }
        let a = main.filter.take();
        let b = vice_select.filter;
        let empty = || Pred::And(Vec::new());
        let not = |p: Pred| Pred::Not(Box::new(p));
        main.filter = match self.spec.kind {
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
        Ok(true)
    }

    /// The ON conditions the vice's references to the main object `main_key` make
    /// (`"id@": "/Moment/userId"` is `User.id = Moment.userId`).
    fn on_clause(&self, main: &Select, main_key: &str) -> Result<Vec<Pred>, PlanError> {
        let mut on = Vec::new();
        for c in &self.vice.conds {
            let Operand::Ref(path) = &c.operand else {
                continue;
            };
            if self.spec.on_key.as_deref().is_some_and(|k| k != c.key.raw) {
                continue;
            }
            let Some((table, column)) = path.path().split_once('/') else {
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
            let lhs = match self.through_statement {
                // The vice's own statement answers its columns under their names.
                true => Expr::Column {
                    table: Some(self.vice.alias.clone()),
                    name: Ident::new(c.key.column.clone()),
                    kind: crate::schema::ColumnKind::Other,
                },
                false => c.lhs.clone(),
            };
            on.push(Pred::Cmp(lhs, CmpOp::Eq, main_col));
        }
        if on.is_empty() {
            return Err(PlanError::Invalid(format!(
                "join: {} has no reference to {main_key} to join on",
                self.spec.table_key
            )));
        }
        Ok(on)
    }

    /// The vice's own statement as the source of a LEFT or RIGHT join: its columns, with the
    /// columns its references join on added where it does not select them.
    fn own_statement(&self, mut select: Select) -> Select {
        for c in &self.vice.conds {
            let (Operand::Ref(_), Some(column)) =
                (&c.operand, self.vice.table.column(&c.key.column))
            else {
                continue;
            };
            if select
                .columns
                .iter()
                .any(|s| s.alias.as_str() == column.name)
            {
                continue;
            }
            select.columns.push(SelectItem {
                expr: Expr::Column {
                    table: Some(self.vice.alias.clone()),
                    name: Ident::new(column.name.clone()),
                    kind: column.kind,
                },
                alias: Ident::new(column.name.clone()),
            });
        }
        select.order.clear();
        select.limit = None;
        select
    }

    /// Whether the join reads the vice through the vice's own statement, as a subquery.
    pub fn reads_own_statement(&self) -> bool {
        self.through_statement
    }

    /// Whether the vice's answer is its part of the joined row (see [`carries_vice_rows`]).
    pub fn carries_rows(&self) -> bool {
        carries_vice_rows(self.spec.kind)
    }
}

/// A RIGHT join of a plain vice reads it through a subquery of all its visible columns and
/// its conditions.
fn plain_columns(vice: &TablePlan, mut sub: Select) -> Select {
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
    sub
}

/// Passes a joined select through the column gate as one statement: its ON conditions name
/// columns that reference paths gave, and the sides' clauses now sit together.
pub fn admit_joined(
    select: &Select,
    main: &TablePlan,
    joins: &[&JoinPlan],
) -> Result<(), PlanError> {
    let known: Vec<Known<'_>> = std::iter::once(main.known())
        .chain(joins.iter().flat_map(|j| j.known()))
        .collect();
    crate::gate::admit_select(select, &known)
}
