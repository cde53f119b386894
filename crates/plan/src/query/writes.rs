//! The planner's output for writes: INSERT, UPDATE and DELETE, SQL-free.

use super::{Ident, Pred};
use apijet_core::Value;

/// `INSERT INTO table (columns) VALUES (…), (…)`: one statement for a whole batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    /// The table.
    pub table: Ident,
    /// Columns, in the order of each row's values.
    pub columns: Vec<Ident>,
    /// The rows.
    pub rows: Vec<Vec<Value>>,
}

/// What `SET column = …` assigns.
#[derive(Debug, Clone, PartialEq)]
pub enum Assign {
    /// A value.
    Value(Value),
    /// `column + value` (`k+` on a number).
    Add(Value),
    /// `column - value` (`k-` on a number).
    Sub(Value),
    /// The column's text with the value appended (`k+` on a string).
    Append(Value),
    /// The column's text with every occurrence of the value removed (`k-` on a string).
    RemoveText(Value),
    /// NULL (`@null`).
    Null,
}

/// `UPDATE table SET … WHERE …`.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The table (conditions are qualified with its own name).
    pub table: Ident,
    /// Assignments.
    pub sets: Vec<(Ident, Assign)>,
    /// WHERE; writes always have one.
    pub filter: Pred,
    /// The most rows it may change (MySQL writes it as `LIMIT`).
    pub limit: Option<u64>,
}

/// `DELETE FROM table WHERE …`.
#[derive(Debug, Clone, PartialEq)]
pub struct Delete {
    /// The table.
    pub table: Ident,
    /// WHERE; writes always have one.
    pub filter: Pred,
    /// The most rows it may delete (MySQL writes it as `LIMIT`).
    pub limit: Option<u64>,
}
