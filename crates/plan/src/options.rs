//! The limits and switches of planning, as the configuration sets them.

use crate::keywords::Served;
use crate::object::raw::RawSql;
use std::sync::Arc;

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
    pub raw_sql: Arc<RawSql>,
    /// The stored procedures and functions `"@name()": "proc(args)"` may call; empty allows
    /// none.
    pub procedures: std::sync::Arc<Vec<String>>,
    /// The database and schema names `@database` and `@schema` may give.
    pub served: Served,
    /// What the read plans kept by shape may hold (`plan_cache_bytes`,
    /// `plan_cache_key_bytes`).
    pub plan_cache: crate::read::CacheBudget,
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
            served: Served {
                databases: vec!["SQLITE".into()],
                schemas: vec!["main".into()],
            },
            plan_cache: crate::read::CacheBudget::default(),
        }
    }
}
