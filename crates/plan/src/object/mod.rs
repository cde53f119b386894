//! The plan of one table object ([`TablePlan`], made by `object`) and what it becomes per
//! execution: [`TablePlan::select`] completes it with the values of references, which exist
//! only once earlier objects have run, and passes the statement through the column gate.

pub(crate) mod joins;
mod plan;
mod print;
pub mod procedure;
pub mod raw;
pub(crate) mod select_list;
mod subquery;

pub use subquery::plan_subquery;

use crate::condition::assemble::{cast_values, combine_pred, subquery_pred};
use crate::condition::combine::Combine;
use crate::condition::predicate::{self, Outcome};
use crate::condition::{CondSpec, Operand, Resolver, ValueSource};
use crate::gate::{self, Known, ObjectParts, PartCondition};
use crate::query::{CastType, Expr, Ident, OrderItem, Pred, Select, SelectItem, Source};
use crate::schema::Table;
use crate::template::{SlotCheck, Template};
use crate::{Ctx, ExprLimits, PlanError};
use apijet_core::Role;
use apijet_request::TableObject;
use apijet_request::{Logic, Op};
use select_list::TableNames;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::Arc;

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
    /// The owner ids the role lets conditions name, checked on the bound values.
    pub owner_reach: Option<crate::access::OwnerReach>,
    /// Bounds on the expressions of conditions completed later (references).
    pub limits: ExprLimits,
    /// Objects under non-table keys, answered as sent (protocol §3.2).
    pub echoes: Vec<(String, Json)>,
    /// Whether grouped and DISTINCT lists without `@order` get their columns' order.
    pub sort_unordered_groups: bool,
    /// Stored procedures to call after the row is read (`"@name()": "proc(args)"`).
    pub procedures: Vec<procedure::ProcedureCall>,
    /// The hidden columns this object may compare with `=` (see [`crate::gate`]): those a plain
    /// `_column: value` key of a private request names, which its `Request` structure had to
    /// name exactly for verification to pass. Always empty for public requests and subqueries.
    pub hidden_keys: Vec<String>,
}

/// Where a table object sits in its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// An object of the request (or of an array item), whose answer the client sees; its
    /// `k-()` functions become conditions when `functions` is set.
    Object { functions: bool },
    /// A table of a subquery or `@from@`: its result only feeds another statement.
    Subquery,
}

/// The keys always AND-ed, whatever `@combine` says.
pub(crate) const FORCED_KEYS: [&str; 4] = ["id", "id{}", "userId", "userId{}"];

impl TablePlan {
    /// Plans a table object for `ctx.method`.
    pub fn new(obj: &TableObject, ctx: &Ctx<'_>) -> Result<TablePlan, PlanError> {
        plan::plan(obj, ctx, Place::Object { functions: false })
    }

    /// Plans a table object read on its own, whose `k-()` functions run before its statement
    /// and give conditions (§11): `"id-()": "getCurrentUserId()"` is `id = <their result>`.
    pub fn with_functions(obj: &TableObject, ctx: &Ctx<'_>) -> Result<TablePlan, PlanError> {
        plan::plan(obj, ctx, Place::Object { functions: true })
    }

    /// Plans a table of a subquery or `@from@`.
    fn in_subquery(obj: &TableObject, ctx: &Ctx<'_>) -> Result<TablePlan, PlanError> {
        plan::plan(obj, ctx, Place::Subquery)
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
    pub(crate) fn admit_parts(&self) -> Result<(), PlanError> {
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
            exact: c.is_exact(),
            subquery: match &c.operand {
                Operand::Subquery(sub, _) => Some(&**sub),
                _ => None,
            },
        });
        gate::admit_object(&parts, conds)
    }

    /// The concrete query with the request's `values` in their slots and the references'
    /// values; `None` when the object cannot match (a null reference, `id` ≤ 0, an empty `id{}`
    /// list): no SQL runs and its key is omitted.
    pub fn select(
        &self,
        values: &[Json],
        resolve: Resolver<'_>,
    ) -> Result<Option<Select>, PlanError> {
        self.build(&mut Binding::Values(values, Some(resolve)))
    }

    /// The query without its reference conditions: the vice side of a SQL join, whose
    /// references become the ON clause instead.
    pub fn select_without_refs(&self, values: &[Json]) -> Result<Option<Select>, PlanError> {
        self.build(&mut Binding::Values(values, None))
    }

    /// The query as every request of the shape makes it, when each of its request values is
    /// only bound (see [`Template`]): its slots in place, passed through the column gate.
    pub fn template(&self) -> Option<Template> {
        let mut checks = Vec::new();
        let select = self.build(&mut Binding::Slots(&mut checks)).ok()??;
        Some(Template {
            select,
            checks,
            text: Default::default(),
        })
    }

    /// The value of a literal or slot condition, in the form its keywords give it.
    fn bound(&self, c: &CondSpec, values: &[Json]) -> Result<Option<Json>, PlanError> {
        Ok(match &c.operand {
            Operand::Literal(v) => Some(c.shaped(v)),
            Operand::Slot(i) => Some(c.shaped(values.get(*i).ok_or_else(|| {
                PlanError::Invalid(format!("{}: the request has no value for it", c.key.raw))
            })?)),
            _ => None,
        })
    }

    fn build(&self, binding: &mut Binding<'_, '_>) -> Result<Option<Select>, PlanError> {
        if let Some(reach) = &self.owner_reach {
            let Binding::Values(values, _) = binding else {
                // The owner ids a request may name are checked on its values.
                return Ok(None);
            };
            for c in &self.conds {
                if let Some(v) = self.bound(c, values)? {
                    reach.check(c, &v)?;
                }
            }
        }
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
            let (values, resolve) = match binding {
                Binding::Values(values, resolve) => (*values, resolve),
                Binding::Slots(checks) => match (&c.operand, c.slot_check()) {
                    (Operand::Slot(slot), Some((op, check))) => {
                        checks.push((*slot, check));
                        let pred = Pred::Cmp(c.lhs.clone(), op, Expr::Slot(*slot));
                        self.place(c, pred, &mut forced, &mut plain, &mut by_key);
                        continue;
                    }
                    (Operand::Literal(_) | Operand::Subquery(..) | Operand::Raw(_), _) => {
                        (&[][..], &mut None)
                    }
                    // A value that is not only bound, or one known only while the plan runs.
                    _ => return Ok(None),
                },
            };
            let value = match &c.operand {
                Operand::Subquery(sub, range) => {
                    Resolved::Pred(subquery_pred(&c.key, &c.lhs, sub, *range)?)
                }
                Operand::Ref(path) => match resolve.as_mut().map(|r| r(ValueSource::Path(path))) {
                    None => continue,
                    Some(Some(v)) if !v.is_null() => Resolved::Value(v),
                    Some(_) => return Ok(None),
                },
                Operand::Function(call) => {
                    match resolve
                        .as_mut()
                        .and_then(|r| r(ValueSource::Function(call)))
                    {
                        Some(v) => Resolved::Value(v),
                        None => continue,
                    }
                }
                Operand::Parent(n) => {
                    match resolve.as_mut().and_then(|r| r(ValueSource::Parent(*n))) {
                        Some(v) => Resolved::Value(v),
                        None => return Ok(None),
                    }
                }
                Operand::Literal(_) | Operand::Slot(_) => match self.bound(c, values)? {
                    Some(v) => Resolved::Value(v),
                    None => continue,
                },
                Operand::Raw(sql) => Resolved::Pred(raw::raw_pred(&c.key, &c.lhs, sql)?),
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
                    match predicate::build(&c.key, c.lhs.clone(), &value, &names)? {
                        Outcome::Pred(p) => p,
                        Outcome::Skip => continue,
                        Outcome::NotExist => return Ok(None),
                    }
                }
            };
            self.place(c, pred, &mut forced, &mut plain, &mut by_key);
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

    /// Puts a condition's predicate (cast by `@cast`) where it belongs in WHERE: with the
    /// keys always AND-ed, under `@combine`, or with the others.
    fn place<'c>(
        &self,
        c: &'c CondSpec,
        pred: Pred,
        forced: &mut Vec<Pred>,
        plain: &mut Vec<Pred>,
        by_key: &mut HashMap<&'c str, Pred>,
    ) {
        let pred = match self.casts.get(&c.key.raw) {
            Some(t) => cast_values(pred, *t),
            None => pred,
        };
        if self.is_forced(c) {
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

    /// Whether `c` is always AND-ed, whatever `@combine` says.
    fn is_forced(&self, c: &CondSpec) -> bool {
        FORCED_KEYS.contains(&c.key.raw.as_str())
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

/// A condition's value once references are looked up.
enum Resolved {
    Pred(Pred),
    Value(Json),
}

/// How [`TablePlan::build`] takes the values of conditions.
enum Binding<'v, 'r> {
    /// The request's values, and the references' (none: without references).
    Values(&'v [Json], Option<Resolver<'r>>),
    /// The request's values as slots, for a [`Template`]: the slots each bound value takes,
    /// with what its value must be.
    Slots(&'v mut Vec<(usize, SlotCheck)>),
}
