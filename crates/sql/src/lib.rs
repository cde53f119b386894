//! apijet-sql: a planned [`Select`] rendered to SQL text and bind values for one dialect.
//!
//! The walk over the plan is shared ([`render`]); the [`Dialect`] trait holds only what truly
//! differs between engines: quoting, placeholders, regex, JSON containment and length, LIKE
//! case folding, random order. Text enters the statement in exactly two ways: a quoted
//! [`Ident`] (made only by the planner, from the schema cache) and a bound value. Rendering
//! cannot fail: whatever an engine cannot do was refused in `plan`.

#![deny(missing_docs)]

mod calls;
pub mod catalog;
mod dialect;
mod render;

pub use dialect::{dialect_for, Dialect, MySql, Postgres, Sqlite, LIST_KEY, LIST_VALUE};
pub use render::{
    render, render_delete, render_insert, render_multiplexed, render_template, render_update,
};

use apijet_core::Value;

/// SQL text with its bind values in placeholder order.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// The SQL text.
    pub sql: String,
    /// The values for its placeholders.
    pub binds: Vec<Value>,
    /// Its plan proves its cost bounded whatever its values: it reads at most one row by a
    /// unique key, with plain columns and comparisons only
    /// ([`apijet_plan::query::Select::is_key_lookup`]). A backend whose statements of unknown
    /// cost must leave the async workers (SQLite) may run it where it is called.
    pub bounded: bool,
}

#[cfg(test)]
mod tests;
