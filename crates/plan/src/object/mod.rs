//! A table object: its plan ([`TablePlan`]), everything about its statement that does not
//! depend on other objects' results, made from the object's keys by the keyword families of
//! this module (`plan`), and what it becomes per execution (`bind`).

mod bind;
mod clauses;
mod columns;
mod conditions;
pub(crate) mod joins;
mod plan;
mod print;
pub mod procedure;
pub mod raw;
pub(crate) mod select_list;
mod source;
mod subquery;

pub use subquery::plan_subquery;

use crate::condition::combine::Combine;
use crate::condition::{CondSpec, Operand};
use crate::gate::{self, Known, ObjectParts, PartCondition};
use crate::query::{CastType, Expr, Ident, OrderItem, Pred, Select, SelectItem, Source};
use crate::schema::Table;
use crate::{ExprLimits, PlanError, Scope};
use apijet_core::Role;
use apijet_request::{TableEntry, TableObject};
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

/// The `@` keywords of one table object, by name.
#[derive(Clone, Copy)]
struct Keywords<'o>(&'o TableObject);

impl<'o> Keywords<'o> {
    /// The value of `@name`.
    fn value(self, name: &str) -> Option<&'o Json> {
        self.0.entries.iter().find_map(|e| match e {
            TableEntry::Keyword { name: n, value } if n == name => Some(value),
            _ => None,
        })
    }

    /// The text of `@name`: a string as it is, another value as its JSON text, null as none.
    fn text(self, name: &str) -> Option<String> {
        match self.value(name)? {
            Json::String(s) => Some(s.clone()),
            Json::Null => None,
            other => Some(other.to_string()),
        }
    }

    /// The comma-separated items of `@name` (`@json`, `@string`, `@trim`).
    fn list(self, name: &str) -> Vec<String> {
        self.text(name)
            .map(|t| t.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default()
    }
}

/// The keys always AND-ed, whatever `@combine` says.
pub(crate) const FORCED_KEYS: [&str; 4] = ["id", "id{}", "userId", "userId{}"];

impl TablePlan {
    /// Plans a table object for `ctx.method`.
    pub fn new(obj: &TableObject, ctx: &Scope<'_>) -> Result<TablePlan, PlanError> {
        plan::plan(obj, ctx, Place::Object { functions: false })
    }

    /// Plans a table object read on its own, whose `k-()` functions run before its statement
    /// and give conditions (§11): `"id-()": "getCurrentUserId()"` is `id = <their result>`.
    pub fn with_functions(obj: &TableObject, ctx: &Scope<'_>) -> Result<TablePlan, PlanError> {
        plan::plan(obj, ctx, Place::Object { functions: true })
    }

    /// Plans a table of a subquery or `@from@`.
    fn in_subquery(obj: &TableObject, ctx: &Scope<'_>) -> Result<TablePlan, PlanError> {
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
