//! apijet-plan: a request tree resolved against the schema cache and the visitor's roles.
//!
//! This is the only stage where client strings become identifiers, and only through the schema
//! cache. Its output ([`query::Select`]) describes each statement without any SQL text; the
//! `sql` stage renders it for one dialect. Objects whose conditions refer to other objects'
//! results are planned once ([`TablePlan`]) and completed per execution ([`TablePlan::select`]).

#![deny(missing_docs)]

mod access;
pub mod call;
mod condition;
mod expr;
pub mod gate;
pub mod keywords;
mod object;
pub mod query;
pub mod read;
pub mod schema;
pub mod shape;
pub mod template;
pub mod verify;
pub mod write;

pub use access::{lookup, owner_column, visible_columns, OwnerReach};
pub use condition::combine::Combine;
pub use condition::path::RefPath;
pub use condition::predicate::check_pattern_budget;
pub use condition::{CondSpec, Operand, Resolver, ValueSource};
pub use expr::functions;
pub use object::{plan_subquery, procedure, raw, TablePlan};
pub use write as write_plan;

use apijet_core::{Method, Role};
use schema::SchemaCache;

/// Limits and switches from the configuration.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Debug mode: `@explain`, system tables and debug rows are available.
    pub debug: bool,
    /// Largest `count` of an array.
    pub max_count: u64,
    /// Largest `page` of an array.
    pub max_page: u64,
    /// Deepest nesting of objects.
    pub max_depth: usize,
    /// Most table objects in one container.
    pub max_objects: usize,
    /// Most arrays in one container.
    pub max_arrays: usize,
    /// Bounds on expression texts and patterns.
    pub expr: ExprLimits,
    /// Most rows one nested answer may hold, across all its nesting levels.
    pub max_rows: usize,
    /// Most bytes (approximately) one nested answer may hold.
    pub max_answer_bytes: usize,
    /// The raw SQL fragments the keys `@raw` marks may use (the reference's RAW_MAP), set by
    /// the operator; empty refuses every raw condition value.
    pub raw_sql: std::sync::Arc<raw::RawSql>,
    /// The stored procedures and functions `"@name()": "proc(args)"` may call; empty allows
    /// none.
    pub procedures: std::sync::Arc<Vec<String>>,
    /// The database and schema names `@database` and `@schema` may give.
    pub served: keywords::Served,
}

/// Bounds on what a client may write inside values: checked before anything is parsed, so a
/// hostile expression costs a length comparison, never a deep recursion or a slow query.
#[derive(Debug, Clone, Copy)]
pub struct ExprLimits {
    /// Longest text of an expression-bearing key (`@column`, `@having`, `@key`, `@combine`,
    /// `@order`, `@group`, …) or range string, in bytes.
    pub max_length: usize,
    /// Deepest nesting of an expression: parentheses, function calls and operator chains.
    pub max_depth: usize,
    /// Longest LIKE or regular-expression pattern, in bytes.
    pub max_pattern_length: usize,
    /// Most items in one value list (`k{}: […]`, `k<>`, LIKE and regex lists).
    pub max_list_items: usize,
    /// Most bytes of all LIKE and regex patterns of one request together.
    pub max_pattern_bytes: usize,
    /// Most bytes one expression's value may reach (the answer budget, `max_answer_bytes`).
    pub max_value_bytes: usize,
    /// What one stored value of a column of unbounded length counts as in those bounds (the
    /// largest value a request can store, `max_body_bytes`).
    pub stored_value_bytes: usize,
    /// What the engine the expressions will run on can do: a function it cannot express is
    /// refused while planning, by name, instead of failing in the database.
    pub engine: apijet_core::Capabilities,
}

impl Default for ExprLimits {
    fn default() -> Self {
        ExprLimits {
            max_length: 1024,
            max_depth: 32,
            max_pattern_length: 256,
            max_list_items: 1000,
            max_pattern_bytes: 1024,
            max_value_bytes: 16 << 20,
            stored_value_bytes: 1 << 20,
            engine: apijet_core::Capabilities::SQLITE,
        }
    }
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            debug: false,
            max_count: 100,
            max_page: 100,
            max_depth: 5,
            max_objects: 5,
            max_arrays: 5,
            expr: ExprLimits::default(),
            max_rows: 10_000,
            max_answer_bytes: 16 << 20,
            raw_sql: Default::default(),
            procedures: Default::default(),
            served: keywords::Served {
                databases: vec!["SQLITE".into()],
                schemas: vec!["main".into()],
            },
        }
    }
}

pub use apijet_core::Visitor;

/// Everything planning one object needs to know about its request.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// The schema cache.
    pub schema: &'a SchemaCache,
    /// Limits and switches.
    pub options: &'a PlanOptions,
    /// The object's method.
    pub method: Method,
    /// The visitor, if logged in.
    pub visitor: Option<&'a Visitor>,
    /// The root `@role`.
    pub global_role: Option<&'a serde_json::Value>,
    /// The root `@explain`.
    pub global_explain: bool,
    /// Named subqueries defined so far (`"sql@": {…}`), usable as `"k{}@": "sql"` and
    /// `"@from@": "sql"`.
    pub subqueries: Option<&'a std::collections::HashMap<String, query::Select>>,
    /// The server itself runs this request (`/register`): the `Request` structure has shaped
    /// it, and the `Access` role lists are not consulted. Never set from client input.
    pub trusted: bool,
}

impl Ctx<'_> {
    /// The subquery named `name` before (`"sq@": {…}`), for `"k{}@": "sq"` and `"@from@": "sq"`.
    pub(crate) fn named_subquery(&self, name: &str) -> Option<query::Select> {
        self.subqueries.and_then(|m| m.get(name)).cloned()
    }
}

/// Why a request cannot be planned. Each variant maps to one APIJSON code in `response`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PlanError {
    /// The role may not use this method on this table, or no such table is served: both get
    /// this same answer, so that it does not tell which tables exist.
    #[error(
        "no table {table} is served to {role} visitors for {method}: there is no such table, \
         or the Access table does not grant {role} visitors {method} on it (both are answered \
         alike, so that the answer does not reveal which tables exist)",
        role = role.name()
    )]
    AccessDenied {
        /// API table name.
        table: String,
        /// Role used.
        role: Role,
        /// Method.
        method: Method,
    },
    /// The role needs a login.
    #[error("not logged in, or the login has expired: log in and try again")]
    NotLoggedIn,
    /// No such role.
    #[error("role {0} does not exist: use one of [UNKNOWN, LOGIN, CONTACT, CIRCLE, OWNER, ADMIN]")]
    UnknownRole(String),
    /// A construct that is refused outright.
    #[error("{0}")]
    Forbidden(String),
    /// A function that is not on the allow-list.
    #[error("function {0} is not allowed")]
    UnknownFunction(String),
    /// A key or value that is not valid.
    #[error("{0}")]
    Invalid(String),
    /// A limit was exceeded.
    #[error("{0}")]
    Limit(String),
    /// A value of the wrong JSON type.
    #[error("{0}")]
    WrongType(String),
    /// A write would duplicate what must be unique, or add an element already present.
    #[error("{0}")]
    Conflict(String),
    /// A write removes an element that is not there.
    #[error("{0}")]
    Missing(String),
    /// A write changed no row: it is not the visitor's, or it does not exist.
    #[error("no permission to change {0}, or it does not exist")]
    NothingChanged(String),
    /// A column the table does not have.
    #[error("{table} has no column {column}")]
    UnknownColumn {
        /// API table name.
        table: String,
        /// The column as sent.
        column: String,
    },
}
