//! One table object → a [`TablePlan`]: everything about its query that does not depend on
//! other objects' results. References (`k@`) are resolved later, per execution, by
//! [`TablePlan::select`], because their values exist only once earlier objects have run.

use crate::combine::{self, Combine};
use crate::condition::{self, Outcome};
use crate::expr::check_length;
use crate::gate::{self, Known, ObjectParts, PartCondition};
use crate::preds::{cast_values, combine_pred, subquery_pred};
use crate::query::{
    CastType, Expr, Ident, OrderItem, Pred, Quantifier, Select, SelectItem, Source,
};
use crate::schema::Table;
use crate::select_list::{self, TableNames};
use crate::{access, Ctx, ExprLimits, PlanError};
use apijet_core::Role;
use apijet_request::{ConditionKey, Logic, Op, SubqueryObject, TableEntry, TableObject};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a condition's value comes from.
#[derive(Debug, Clone)]
pub enum Operand {
    /// The value in the request.
    Literal(Json),
    /// A path to another object's result, resolved at execution.
    Ref(String),
    /// A subquery.
    Subquery(Box<Select>, Option<Quantifier>),
    /// A fragment of the operator's `raw_sql` allow-list, marked by `@raw`.
    Raw(Arc<str>),
}

/// A condition of a table object.
#[derive(Debug, Clone)]
pub struct CondSpec {
    /// The key as parsed.
    pub key: ConditionKey,
    /// The left side (column, `@key` expression, length of a column).
    pub lhs: Expr,
    /// The value.
    pub operand: Operand,
}

/// The static plan of one table object.
#[derive(Debug, Clone)]
pub struct TablePlan {
    /// The table.
    pub table: Arc<Table>,
    /// Its alias in SQL (the table key's alias, else its API name).
    pub alias: Ident,
    /// Select list.
    pub columns: Vec<SelectItem>,
    /// `DISTINCT`.
    pub distinct: bool,
    /// The select list aggregates.
    pub aggregate: bool,
    /// Output names to answer as JSON (`@json` plus the schema's JSON columns).
    pub json_outputs: Vec<String>,
    /// Conditions in request order.
    pub conds: Vec<CondSpec>,
    /// `@combine`.
    pub combine: Option<Combine>,
    /// GROUP BY.
    pub group: Vec<Expr>,
    /// HAVING.
    pub having: Option<Pred>,
    /// ORDER BY.
    pub order: Vec<OrderItem>,
    /// `@from@`.
    pub from: Option<Box<Select>>,
    /// The catalogue view the table reads, when it is one (`Table`, `Column`, …).
    pub catalog: Option<crate::schema::CatalogView>,
    /// `@cast` by condition key.
    pub casts: HashMap<String, CastType>,
    /// `@explain`.
    pub explain: bool,
    /// `@drop`.
    pub drop: bool,
    /// The role the object runs as.
    pub role: Role,
    /// Predicates the role adds (OWNER, CONTACT, CIRCLE).
    pub role_filter: Option<Pred>,
    /// Bounds on the expressions of conditions completed later (references).
    pub limits: ExprLimits,
    /// Objects under non-table keys, answered as sent (protocol §3.2).
    pub echoes: Vec<(String, Json)>,
    /// Whether grouped and DISTINCT lists without `@order` get their columns' order.
    pub sort_unordered_groups: bool,
    /// Stored procedures to call after the row is read (`"@name()": "proc(args)"`).
    pub procedures: Vec<crate::procedure::ProcedureCall>,
    /// The hidden columns this object may compare with `=` (see [`crate::gate`]): those a plain
    /// `_column: value` key of a private request names, which its `Request` structure had to
    /// name exactly for verification to pass. Always empty for public requests and subqueries.
    pub hidden_keys: Vec<String>,
}

fn text_of(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Null => None,
        other => Some(other.to_string()),
    }
}

const FORCED_KEYS: [&str; 4] = ["id", "id{}", "userId", "userId{}"];

/// Where a table object sits in its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// An object of the request (or of an array item), whose answer the client sees.
    Object,
    /// A table of a subquery or `@from@`: its result only feeds another statement.
    Subquery,
}

impl TablePlan {
    /// Plans a table object for `ctx.method`.
    pub fn new(obj: &TableObject, ctx: &Ctx<'_>) -> Result<TablePlan, PlanError> {
        TablePlan::new_at(obj, ctx, Place::Object)
    }

    fn new_at(obj: &TableObject, ctx: &Ctx<'_>, place: Place) -> Result<TablePlan, PlanError> {
        // Every keyword's text is bounded before any of them is parsed.
        for e in &obj.entries {
            if let TableEntry::Keyword {
                name,
                value: Json::String(text),
            } = e
            {
                check_length(&format!("@{name}"), text, ctx.options.expr.max_length)?;
            }
        }
        let kw = |name: &str| {
            obj.entries.iter().find_map(|e| match e {
                TableEntry::Keyword { name: n, value } if n == name => Some(value),
                _ => None,
            })
        };
        let role_value = kw("role").or(ctx.global_role);
        let (table, role) = access::check(&obj.key.table, role_value, ctx)?;
        // Under a Request structure, the subqueries of an object run with the object's role
        // unless they name one: a subquery is part of what the tag allows, not a way around it.
        let nested = Ctx {
            global_role: if ctx.method.is_public() {
                ctx.global_role
            } else {
                role_value
            },
            ..*ctx
        };
        // Writes name their table without an alias (not every engine accepts one in UPDATE and
        // DELETE), so their conditions are qualified with the table's own name.
        let alias = if ctx.method.is_query() {
            Ident::new(obj.key.sql_alias())
        } else {
            Ident::new(table.sql_name.clone())
        };

        let named = |name: &str| ctx.subqueries.and_then(|m| m.get(name)).cloned();
        let from = match obj.entries.iter().find_map(|e| match e {
            TableEntry::FromSubquery(sq) => Some(sq),
            _ => None,
        }) {
            Some(sq) => Some(Box::new(plan_subquery(sq, &nested)?)),
            None => match kw("from@").and_then(Json::as_str) {
                Some(name) => Some(Box::new(named(name).ok_or_else(|| {
                    PlanError::Invalid(format!("@from@:'{name}' names no subquery defined before"))
                })?)),
                None => None,
            },
        };
        let mut names = TableNames {
            table: &table,
            limits: ctx.options.expr,
            subquery_columns: from.as_ref().map(|s| {
                s.columns
                    .iter()
                    .map(|c| c.alias.as_str().to_string())
                    .collect()
            }),
            qualifier: alias.clone(),
            keys: HashMap::new(),
            select_aliases: Vec::new(),
            alias_as_expr: false,
        };
        if let Some(k) = kw("key").and_then(text_of) {
            if !ctx.method.is_public() {
                return Err(PlanError::Forbidden(
                    "@key is not allowed in private requests".into(),
                ));
            }
            names.keys = select_list::keys(&k, &names)?;
        }

        let raw = match kw("raw") {
            Some(v) => crate::raw::raw_keys(v, obj)?,
            None => Default::default(),
        };
        // `"@column": ""` names no column: the table's own, as the reference reads it (in a
        // joined table of a subquery it adds none, see `plan_subquery`).
        let column_text = kw("column")
            .and_then(text_of)
            .filter(|t| !t.trim().is_empty());
        let (columns, distinct) = match column_text {
            Some(text) => {
                let list = if raw.column {
                    crate::raw::raw_columns(&text, &ctx.options.raw_sql, &names)?
                } else {
                    select_list::columns(&text, &names)?
                };
                names.select_aliases = list
                    .items
                    .iter()
                    .map(|c| (c.alias.as_str().to_string(), c.expr.clone()))
                    .collect();
                (list.items, list.distinct)
            }
            // The default columns' aliases are the table's own column names, which resolve
            // as columns before any alias is consulted: no alias list to build.
            None => (default_columns(&names), false),
        };
        let aggregate = select_list::has_aggregate(&columns);

        let order = match kw("order").and_then(text_of) {
            Some(t) => select_list::order(&t, &names)?,
            None => Vec::new(),
        };
        let group = match kw("group").and_then(text_of) {
            Some(t) => select_list::group(&t, &names)?,
            None => Vec::new(),
        };
        names.alias_as_expr = true;
        let having = match (
            kw("having").and_then(text_of),
            kw("having&").and_then(text_of),
        ) {
            (Some(t), _) if raw.having => {
                Some(crate::raw::raw_having(&t, &ctx.options.raw_sql, &names)?)
            }
            (Some(t), _) => Some(select_list::having(&t, false, &names)?),
            (None, Some(t)) => Some(select_list::having(&t, true, &names)?),
            _ => None,
        };
        names.alias_as_expr = false;

        let mut json_outputs: Vec<String> = columns
            .iter()
            .filter(|c| {
                matches!(
                    &c.expr,
                    Expr::Column {
                        kind: crate::schema::ColumnKind::Json,
                        ..
                    }
                )
            })
            .map(|c| c.alias.as_str().to_string())
            .collect();
        if let Some(t) = kw("json").and_then(text_of) {
            json_outputs.extend(t.split(',').map(|s| s.trim().to_string()));
        }
        let casts = match kw("cast").and_then(text_of) {
            Some(t) => select_list::casts(&t)?,
            None => HashMap::new(),
        };
        let stringify: Vec<String> = kw("string")
            .and_then(text_of)
            .map(|t| t.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default();
        let trim: Vec<String> = kw("trim")
            .and_then(text_of)
            .map(|t| t.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default();

        let explain = kw("explain")
            .and_then(Json::as_bool)
            .unwrap_or(ctx.global_explain);
        if explain && !ctx.options.debug {
            return Err(PlanError::Forbidden(
                "@explain is only available in debug mode".into(),
            ));
        }

        let mut conds = Vec::new();
        let mut echoes = Vec::new();
        let mut procedures = Vec::new();
        for entry in &obj.entries {
            match entry {
                TableEntry::Condition { key, value }
                    if raw.conditions.contains(&key.raw.as_str()) =>
                {
                    conds.push(CondSpec {
                        lhs: lhs_of(key, &names)?,
                        key: key.clone(),
                        operand: Operand::Raw(crate::raw::raw_fragment(
                            key,
                            value,
                            &ctx.options.raw_sql,
                        )?),
                    })
                }
                TableEntry::Condition { key, value } => {
                    let mut value = value.clone();
                    if stringify.iter().any(|k| k == &key.raw) && !value.is_string() {
                        value = Json::String(value.to_string());
                    }
                    if trim.iter().any(|k| k == &key.raw) {
                        if let Json::String(s) = &value {
                            value = Json::String(s.trim().to_string());
                        }
                    }
                    conds.push(CondSpec {
                        lhs: lhs_of(key, &names)?,
                        key: key.clone(),
                        operand: Operand::Literal(value),
                    });
                }
                TableEntry::RefCondition { key, path } => conds.push(CondSpec {
                    lhs: lhs_of(key, &names)?,
                    key: key.clone(),
                    operand: match named(path) {
                        Some(sub) => Operand::Subquery(Box::new(sub), None),
                        None => Operand::Ref(path.clone()),
                    },
                }),
                TableEntry::SubqueryCondition { key, subquery } => {
                    let sub = plan_subquery(subquery, &nested)?;
                    let range = match &subquery.range {
                        None => None,
                        Some(v) => match v.as_str() {
                            Some("ANY") => Some(Quantifier::Any),
                            Some("ALL") => Some(Quantifier::All),
                            _ => {
                                return Err(PlanError::Invalid(format!(
                                    "{}: range must be ANY or ALL",
                                    key.raw
                                )))
                            }
                        },
                    };
                    let lhs = if key.op == Op::Exists {
                        Expr::Star
                    } else {
                        lhs_of(key, &names)?
                    };
                    conds.push(CondSpec {
                        lhs,
                        key: key.clone(),
                        operand: Operand::Subquery(Box::new(sub), range),
                    });
                }
                TableEntry::Keyword { name, value } if name.ends_with("()") => {
                    if !ctx.method.is_query() || ctx.method.is_count() {
                        return Err(PlanError::Forbidden(format!(
                            "@{name}: stored procedures are called from GET and GETS only"
                        )));
                    }
                    procedures.push(crate::procedure::plan_call(
                        name,
                        value,
                        &ctx.options.procedures,
                    )?)
                }
                TableEntry::Keyword { name, value } => {
                    use crate::keywords::{check_table_keyword, KeyUse};
                    if check_table_keyword(name, value, ctx)? == KeyUse::Custom {
                        // Echoed after the row's columns, where functions read it too.
                        echoes.push((format!("@{name}"), value.clone()));
                    }
                }
                TableEntry::Echo { key, value } => echoes.push((key.clone(), value.clone())),
                _ => {}
            }
        }

        let combine = match kw("combine").and_then(text_of) {
            Some(t) => {
                let c = combine::parse(&t, ctx.options.expr.max_depth)?;
                for k in c.keys() {
                    if FORCED_KEYS.contains(&k) {
                        return Err(PlanError::Forbidden(format!(
                            "@combine:'{t}' must not name {k}: id, id{{}}, userId and \
                             userId{{}} are always AND-ed"
                        )));
                    }
                    if !conds.iter().any(|c| c.key.raw == k) {
                        return Err(PlanError::Invalid(format!(
                            "@combine:'{t}' names '{k}', but the object has no condition {k}"
                        )));
                    }
                }
                Some(c)
            }
            None => None,
        };
        access::check_owner_values(&table, role, ctx, &conds)?;
        let role_filter = access::role_filter(&table, role, ctx, &alias)?;
        let may_test_hidden = (!ctx.method.is_public() || ctx.trusted) && place == Place::Object;
        let hidden_keys = conds
            .iter()
            .filter(|c| may_test_hidden && is_exact(c) && c.key.column.starts_with('_'))
            .map(|c| c.key.column.clone())
            .collect();

        let plan = TablePlan {
            catalog: ctx.schema.catalog_view(&table.api_name),
            table,
            alias,
            columns,
            distinct,
            aggregate,
            json_outputs,
            conds,
            combine,
            group,
            having,
            order,
            from,
            casts,
            explain,
            drop: kw("drop").and_then(Json::as_bool).unwrap_or(false),
            role,
            role_filter,
            limits: ctx.options.expr,
            echoes,
            procedures,
            sort_unordered_groups: ctx.options.sort_unordered_groups,
            hidden_keys,
        };
        plan.admit_parts()?;
        Ok(plan)
    }

    /// What the column gate knows of this object.
    pub fn known(&self) -> Known<'_> {
        Known {
            alias: &self.alias,
            table: &self.table,
            hidden_keys: &self.hidden_keys,
        }
    }

    /// Passes the columns known before execution through the gate, so that a request is
    /// refused before any of its statements runs; [`TablePlan::select`] passes the complete
    /// statement again, with what references and values add.
    fn admit_parts(&self) -> Result<(), PlanError> {
        let parts = ObjectParts {
            known: self.known(),
            from: self.from.as_deref(),
            columns: &self.columns,
            group: &self.group,
            having: self.having.as_ref(),
            order: &self.order,
        };
        let conds = self.conds.iter().map(|c| PartCondition {
            key: &c.key.raw,
            lhs: &c.lhs,
            exact: is_exact(c),
            subquery: match &c.operand {
                Operand::Subquery(sub, _) => Some(&**sub),
                _ => None,
            },
        });
        gate::admit_object(&parts, conds)
    }

    /// The concrete query once references are known; `None` when the object cannot match
    /// (a null reference, `id` ≤ 0, an empty `id{}` list): no SQL runs and its key is omitted.
    pub fn select(
        &self,
        resolve: &mut dyn FnMut(&str) -> Option<Json>,
    ) -> Result<Option<Select>, PlanError> {
        self.build(Some(resolve))
    }

    /// The query without its reference conditions: the vice side of a SQL join, whose
    /// references become the ON clause instead.
    pub fn select_without_refs(&self) -> Result<Option<Select>, PlanError> {
        self.build(None)
    }

    fn build(&self, mut resolve: Option<Resolver<'_>>) -> Result<Option<Select>, PlanError> {
        // Expressions in condition values (`"len{}":"length(len)>1"`) name the columns of
        // the `@from@` derived table, as the keys do, not those of the base table.
        let names = TableNames {
            table: &self.table,
            limits: self.limits,
            subquery_columns: self.from.as_ref().map(|s| {
                s.columns
                    .iter()
                    .map(|c| c.alias.as_str().to_string())
                    .collect()
            }),
            qualifier: self.alias.clone(),
            keys: HashMap::new(),
            select_aliases: Vec::new(),
            alias_as_expr: false,
        };
        let mut forced = Vec::new();
        let mut plain = Vec::new();
        let mut by_key: HashMap<&str, Pred> = HashMap::new();
        for c in &self.conds {
            let value = match &c.operand {
                Operand::Subquery(sub, range) => {
                    Resolved::Pred(subquery_pred(&c.key, &c.lhs, sub, *range)?)
                }
                Operand::Ref(path) => match resolve.as_mut().map(|r| r(path)) {
                    None => continue,
                    Some(Some(v)) if !v.is_null() => Resolved::Value(v),
                    Some(_) => return Ok(None),
                },
                Operand::Literal(v) => Resolved::Value(v.clone()),
                Operand::Raw(sql) => Resolved::Pred(crate::raw::raw_pred(&c.key, &c.lhs, sql)?),
            };
            let pred = match value {
                Resolved::Pred(pred) => pred,
                Resolved::Value(value) => {
                    if c.key.column == "id" && c.key.op == Op::Eq && c.key.logic == Logic::Default {
                        let gone = match &value {
                            Json::Number(n) => n.as_f64().is_some_and(|f| f <= 0.0),
                            Json::String(s) => s.is_empty(),
                            _ => false,
                        };
                        if gone {
                            return Ok(None);
                        }
                    }
                    match condition::build(&c.key, c.lhs.clone(), &value, &names)? {
                        Outcome::Pred(p) => p,
                        Outcome::Skip => continue,
                        Outcome::NotExist => return Ok(None),
                    }
                }
            };
            let pred = match self.casts.get(&c.key.raw) {
                Some(t) => cast_values(pred, *t),
                None => pred,
            };
            if FORCED_KEYS.contains(&c.key.raw.as_str()) {
                forced.push(pred);
            } else if self
                .combine
                .as_ref()
                .is_some_and(|cb| cb.keys().contains(&c.key.raw.as_str()))
            {
                by_key.insert(&c.key.raw, pred);
            } else {
                plain.push(pred);
            }
        }
        let mut all = forced;
        all.extend(self.role_filter.clone());
        all.extend(plain);
        if let Some(cb) = &self.combine {
            all.push(combine_pred(cb, &by_key));
        }
        let source = match &self.from {
            Some(sub) => Source::Select(sub.clone()),
            None => self.table_source(),
        };
        let select = Select {
            distinct: self.distinct,
            columns: self.columns.clone(),
            source,
            alias: self.alias.clone(),
            joins: Vec::new(),
            filter: (!all.is_empty()).then_some(Pred::And(all)),
            group: self.group.clone(),
            having: self.having.clone(),
            order: self.default_order(),
            limit: None,
            offset: 0,
        };
        gate::admit_select(&select, &[self.known()])?;
        Ok(Some(select))
    }

    /// The table itself as a statement's source: its name, or the catalogue view it reads.
    pub fn table_source(&self) -> Source {
        match self.catalog {
            Some(view) => Source::Catalog(view),
            None => Source::Table(Ident::new(self.table.sql_name.clone())),
        }
    }

    /// `@order`, or — as MariaDB answers grouped lists sorted by their columns — those columns
    /// on PostgreSQL and SQLite, so that every engine gives the same rows in the same order.
    /// MariaDB itself answers in its own order, as the reference does.
    fn default_order(&self) -> Vec<OrderItem> {
        use crate::query::Direction;
        if !self.order.is_empty() || !self.sort_unordered_groups {
            return self.order.clone();
        }
        if !self.group.is_empty() {
            return self
                .group
                .iter()
                .map(|g| OrderItem::By(g.clone(), Direction::Default))
                .collect();
        }
        if self.distinct {
            return self
                .columns
                .iter()
                .map(|c| OrderItem::By(Expr::Alias(c.alias.clone()), Direction::Default))
                .collect();
        }
        Vec::new()
    }

    /// The HEAD form of a select: a count with the reference's `@column` quirks (§4.3).
    pub fn count_select(&self, mut select: Select) -> Select {
        let count_arg = match self.columns.as_slice() {
            [only] if !matches!(only.expr, Expr::Func { .. }) && self.columns_explicit() => {
                only.expr.clone()
            }
            _ => Expr::Star,
        };
        if !self.group.is_empty() || self.distinct || self.from.is_some() || self.aggregate {
            return select.count_wrapped();
        }
        select.columns = vec![SelectItem {
            expr: Expr::Func {
                name: "count",
                args: vec![count_arg],
                distinct: false,
            },
            alias: Ident::new("count"),
        }];
        select.order.clear();
        select
    }

    fn columns_explicit(&self) -> bool {
        self.columns.len() == 1 && self.table.columns.len() > 1
    }
}

/// Looks up a reference path among earlier results.
pub type Resolver<'r> = &'r mut dyn FnMut(&str) -> Option<Json>;

/// A condition's value once references are looked up.
enum Resolved {
    Pred(Pred),
    Value(Json),
}

/// A plain `column: value` condition on the column itself: the only form in which the gate
/// lets a structure-named hidden column be compared.
fn is_exact(c: &CondSpec) -> bool {
    c.key.is_plain()
        && matches!(c.operand, Operand::Literal(_))
        && matches!(&c.lhs, Expr::Column { name, .. } if name.as_str() == c.key.column)
}

fn lhs_of(key: &ConditionKey, names: &TableNames<'_>) -> Result<Expr, PlanError> {
    use apijet_request::LengthFn;
    let base = if let Some(e) = names.keys.get(&key.column) {
        e.clone()
    } else {
        names
            .column(&key.column)
            .ok_or_else(|| PlanError::UnknownColumn {
                table: names.table.api_name.clone(),
                column: key.column.clone(),
            })?
    };
    Ok(match key.length {
        Some(LengthFn::Text) => Expr::TextLength(Box::new(base)),
        Some(LengthFn::Json) => Expr::JsonLength(Box::new(base)),
        None => base,
    })
}

fn default_columns(names: &TableNames<'_>) -> Vec<SelectItem> {
    let item = |c: &str| {
        if c.starts_with('_') {
            return None;
        }
        names.column(c).map(|expr| SelectItem {
            expr,
            alias: Ident::new(c),
        })
    };
    match &names.subquery_columns {
        Some(cols) => cols.iter().filter_map(|c| item(c)).collect(),
        None => names
            .table
            .columns
            .iter()
            .filter_map(|c| item(&c.name))
            .collect(),
    }
}

/// Plans a subquery object into a complete SELECT (literal conditions only), with the SQL
/// joins of its `join` (`"id@":{"from":"Comment","join":"&/Moment/id@","Comment":{…},
/// "Moment":{"id@":"/Comment/momentId",…}}`).
pub fn plan_subquery(sq: &SubqueryObject, ctx: &Ctx<'_>) -> Result<Select, PlanError> {
    use apijet_request::Node;
    if sq.with.as_ref().is_some_and(|w| !w.is_boolean()) {
        return Err(PlanError::WrongType(
            "with must be true or false: a subquery as a WITH clause".into(),
        ));
    }
    let depth = subquery_depth(sq);
    if depth > ctx.options.max_depth {
        return Err(PlanError::Limit(format!(
            "subqueries nest {depth} levels deep, more than the limit of {} (setting max_depth)",
            ctx.options.max_depth
        )));
    }
    let tables: Vec<(&str, &TableObject)> = sq
        .items
        .members
        .iter()
        .filter_map(|m| match &m.node {
            Node::Table(t) => Some((m.key.as_str(), t)),
            _ => None,
        })
        .collect();
    if let Some(m) = sq
        .items
        .members
        .iter()
        .find(|m| !matches!(m.node, Node::Table(_)))
    {
        return Err(PlanError::Invalid(format!(
            "a subquery holds table objects only: {} is not one",
            m.key
        )));
    }
    let (main_key, table) = tables
        .iter()
        .find(|(k, _)| sq.from.as_deref().is_none_or(|f| f == *k))
        .copied()
        .ok_or_else(|| {
            PlanError::Invalid("a subquery needs a table object named by from".into())
        })?;
    let plan = TablePlan::new_at(table, ctx, Place::Subquery)?;
    let mut no_refs = |_: &str| None;
    let mut select = plan.select(&mut no_refs)?.ok_or_else(|| {
        PlanError::Invalid("a subquery's conditions cannot use references".into())
    })?;
    let specs = match &sq.join {
        Some(j) => crate::array::join_specs(j)?,
        None => Vec::new(),
    };
    for (key, _) in &tables {
        if *key != main_key && !specs.iter().any(|s| s.table_key == *key) {
            return Err(PlanError::Invalid(format!(
                "the subquery selects from {main_key}; its table object {key} is in no join"
            )));
        }
    }
    let mut vices = Vec::with_capacity(specs.len());
    for spec in &specs {
        if spec.kind == '@' || spec.table_key.contains('/') {
            return Err(PlanError::Forbidden(format!(
                "join: '{}/{}': a subquery takes SQL joins only, not an @ APP JOIN",
                spec.kind, spec.table_key
            )));
        }
        let vice = tables
            .iter()
            .find(|(k, _)| *k == spec.table_key)
            .map(|(_, t)| *t)
            .ok_or_else(|| {
                PlanError::Invalid(format!(
                    "join: {} is not a table object of the subquery",
                    spec.table_key
                ))
            })?;
        let vice = match &spec.extra {
            Some(Json::Object(extra)) => {
                let extra = TableObject::from_map(vice.key.clone(), extra.clone())
                    .map_err(|e| PlanError::Invalid(e.to_string()))?;
                vice.merged(&extra)
            }
            _ => vice.clone(),
        };
        let vice_plan = TablePlan::new_at(&vice, ctx, Place::Subquery)?;
        let Some(vice_select) = vice_plan.select_without_refs()? else {
            // A vice that cannot match empties an inner join and leaves the others' rows.
            if spec.kind == '&' {
                select.filter = Some(Pred::Or(Vec::new()));
            }
            continue;
        };
        crate::array::apply_join(&mut select, main_key, spec, &vice_plan, vice_select)?;
        crate::array::merge_vice_clauses(&mut select, &vice_plan);
        select
            .columns
            .extend(vice_output_columns(&vice, &vice_plan, spec.kind));
        vices.push(vice_plan);
    }
    if !vices.is_empty() {
        crate::array::admit_joined(&select, &plan, &vices)?;
    }
    if let Some(c) = sq.count.as_ref().and_then(Json::as_u64) {
        select.limit = Some(c);
        select.offset = sq.page.as_ref().and_then(Json::as_u64).unwrap_or(0) * c;
    }
    Ok(select)
}

/// The columns a joined table adds to its subquery's output, as the reference selects them
/// after the main table's: its `@column` (none without one, or with `"@column": ""`), so that
/// an outer `@from@` may read them (`"@column":"DISTINCT host,project"` over TestRecord
/// joined with Document). A RIGHT join reads the joined table through a subquery of its
/// columns: only plain columns can be named there.
fn vice_output_columns(vice: &TableObject, plan: &TablePlan, kind: char) -> Vec<SelectItem> {
    let named = vice.entries.iter().any(|e| {
        matches!(e, TableEntry::Keyword { name, value: Json::String(text) }
            if name == "column" && !text.trim().is_empty())
    });
    if !named {
        return Vec::new();
    }
    plan.columns
        .iter()
        .filter(|c| kind != '>' || matches!(c.expr, Expr::Column { .. }))
        .cloned()
        .collect()
}

/// How deep subqueries nest in `sq`, itself included. The tree is at most as deep as the JSON
/// parser allows, so this walk is bounded; planning (and every engine's parser) is not.
fn subquery_depth(sq: &SubqueryObject) -> usize {
    use apijet_request::Node;
    1 + sq
        .items
        .members
        .iter()
        .filter_map(|m| match &m.node {
            Node::Table(t) => Some(t),
            _ => None,
        })
        .flat_map(|t| t.entries.iter())
        .filter_map(|e| match e {
            TableEntry::SubqueryCondition { subquery, .. } => Some(subquery_depth(subquery)),
            TableEntry::FromSubquery(subquery) => Some(subquery_depth(subquery)),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}
