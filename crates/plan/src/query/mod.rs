//! The planner's output: a SQL-free description of one SELECT, ready for a dialect to render.
//!
//! Two things may carry text that reached us from a client, and both are safe by type: an
//! [`Ident`] can only be made by the planner from a name found in the schema cache (or an
//! alias that passed the name grammar), and every client value is a bound [`Value`].
//! Function names are `&'static str` from the planner's allow-list.

use crate::schema::ColumnKind;
use apijet_core::Value;
use std::fmt;

mod bounded;
pub(crate) mod print;
mod select;
mod writes;

pub use writes::{Assign, Delete, Insert, Update};

/// An identifier checked by the planner: a schema name or a validated alias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident(String);

impl Ident {
    /// Only the planner creates identifiers, after checking them.
    pub(crate) fn new(s: impl Into<String>) -> Ident {
        Ident(s.into())
    }

    /// The identifier text (unquoted).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A value expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `table.column` (the qualifier is the table's alias in this statement).
    Column {
        /// The table alias, when the statement has joins.
        table: Option<Ident>,
        /// The column.
        name: Ident,
        /// Its kind, where known (lets dialects cast for regex, JSON…).
        kind: ColumnKind,
    },
    /// A reference to a select-list alias (ORDER BY, HAVING on engines that allow it).
    Alias(Ident),
    /// A bound value.
    Value(Value),
    /// The request's value in this slot, bound when the statement runs (see
    /// [`crate::template`]).
    Slot(usize),
    /// `*` (only inside `count(*)`).
    Star,
    /// `name(args)` for an allow-listed function.
    Func {
        /// The function name from the allow-list.
        name: &'static str,
        /// Arguments.
        args: Vec<Expr>,
        /// `DISTINCT` before the first argument (`count(DISTINCT x)`).
        distinct: bool,
    },
    /// String length of an expression.
    TextLength(Box<Expr>),
    /// JSON array length of an expression.
    JsonLength(Box<Expr>),
    /// `lhs <op> rhs` arithmetic.
    Arith {
        /// Left side.
        lhs: Box<Expr>,
        /// Operator.
        op: ArithOp,
        /// Right side.
        rhs: Box<Expr>,
    },
    /// A SQL fragment from the operator's `raw_sql` allow-list, written as configured.
    Raw(std::sync::Arc<str>),
    /// `CAST(expr AS type)` with a type from the allow-list.
    Cast(Box<Expr>, CastType),
    /// `lhs op rhs` as a value (a comparison suffix on a select item, a CASE condition).
    Compare(Box<Expr>, CmpOp, Box<Expr>),
    /// `expr IS NULL` as a value (`isnull(x)`).
    IsNull(Box<Expr>),
    /// `CASE [operand] WHEN … THEN … [ELSE …] END`.
    Case {
        /// The simple CASE's operand.
        operand: Option<Box<Expr>>,
        /// `(WHEN, THEN)` pairs.
        whens: Vec<(Expr, Expr)>,
        /// ELSE.
        otherwise: Option<Box<Expr>>,
    },
    /// An aggregate or window function `OVER (PARTITION BY … ORDER BY …)`.
    Window {
        /// The function call.
        func: Box<Expr>,
        /// PARTITION BY.
        partition: Vec<Expr>,
        /// ORDER BY inside the window.
        order: Vec<OrderItem>,
    },
    /// `date_add(base, INTERVAL amount unit)` (negated amount for `date_sub`).
    DateAdd {
        /// The date or timestamp.
        base: Box<Expr>,
        /// How many units.
        amount: Box<Expr>,
        /// The unit.
        unit: IntervalUnit,
        /// `date_sub` / `subdate`.
        subtract: bool,
    },
    /// Full-text relevance: `match(columns) AGAINST (query [IN BOOLEAN MODE])`.
    Match {
        /// The columns searched.
        columns: Vec<Expr>,
        /// The bound search text.
        query: Value,
        /// `IN BOOLEAN MODE`.
        boolean: bool,
    },
    /// `(a, b)`: a row of values, compared with the rows of a subquery (an `@key` such as
    /// `"k:(table_name,table_schema)"` with `"k{}@": {…}`).
    Row(Vec<Expr>),
    /// `row_number() OVER (PARTITION BY … ORDER BY …)`: pages of many parents in one query.
    RowNumber {
        /// PARTITION BY.
        partition: Vec<Expr>,
        /// ORDER BY inside the window.
        order: Vec<OrderItem>,
    },
}

/// Arithmetic operators allowed in `{}` expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
}

/// Units of `INTERVAL n unit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalUnit {
    /// SECOND
    Second,
    /// MINUTE
    Minute,
    /// HOUR
    Hour,
    /// DAY
    Day,
    /// WEEK
    Week,
    /// MONTH
    Month,
    /// QUARTER
    Quarter,
    /// YEAR
    Year,
}

impl IntervalUnit {
    /// The unit named `name` (any letter case).
    pub fn parse(name: &str) -> Option<IntervalUnit> {
        Some(match name.to_ascii_uppercase().as_str() {
            "SECOND" => IntervalUnit::Second,
            "MINUTE" => IntervalUnit::Minute,
            "HOUR" => IntervalUnit::Hour,
            "DAY" => IntervalUnit::Day,
            "WEEK" => IntervalUnit::Week,
            "MONTH" => IntervalUnit::Month,
            "QUARTER" => IntervalUnit::Quarter,
            "YEAR" => IntervalUnit::Year,
            _ => return None,
        })
    }

    /// The MySQL keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            IntervalUnit::Second => "SECOND",
            IntervalUnit::Minute => "MINUTE",
            IntervalUnit::Hour => "HOUR",
            IntervalUnit::Day => "DAY",
            IntervalUnit::Week => "WEEK",
            IntervalUnit::Month => "MONTH",
            IntervalUnit::Quarter => "QUARTER",
            IntervalUnit::Year => "YEAR",
        }
    }
}

/// Types allowed in `@cast`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CastType {
    /// DATE
    Date,
    /// TIMESTAMP / DATETIME
    Timestamp,
    /// TIME
    Time,
    /// signed integer
    Integer,
    /// decimal
    Decimal,
    /// text
    Text,
}

impl CastType {
    /// The type names `@cast` and `cast(x AS type)` accept, for messages.
    pub const NAMES: &'static str =
        "DATE, DATETIME, TIMESTAMP, TIME, SIGNED, UNSIGNED, INTEGER, DECIMAL, CHAR, VARCHAR or TEXT";

    /// The cast type named `name` (any letter case).
    pub fn parse(name: &str) -> Option<CastType> {
        Some(match name.to_ascii_uppercase().as_str() {
            "DATE" => CastType::Date,
            "DATETIME" | "TIMESTAMP" => CastType::Timestamp,
            "TIME" => CastType::Time,
            "SIGNED" | "UNSIGNED" | "INTEGER" | "INT" | "BIGINT" => CastType::Integer,
            "DECIMAL" | "NUMERIC" => CastType::Decimal,
            "CHAR" | "VARCHAR" | "TEXT" => CastType::Text,
            _ => return None,
        })
    }
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

impl CmpOp {
    /// The SQL spelling.
    pub fn sql(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "!=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
        }
    }
}

/// A boolean condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Pred {
    /// All must hold (empty = true).
    And(Vec<Pred>),
    /// Any must hold (empty = false).
    Or(Vec<Pred>),
    /// Negation.
    Not(Box<Pred>),
    /// `lhs op rhs`.
    Cmp(Expr, CmpOp, Expr),
    /// `lhs IN (values)`.
    In(Expr, Vec<Value>),
    /// `lhs IN (subquery)`.
    InSelect(Expr, Box<Select>),
    /// `lhs op [ANY|ALL] (subquery)`.
    CmpSelect(Expr, CmpOp, Option<Quantifier>, Box<Select>),
    /// `EXISTS (subquery)`.
    Exists(Box<Select>),
    /// `lhs LIKE pattern` (case-insensitive on every engine, as MySQL's default collation).
    Like(Expr, Value),
    /// Regular expression match.
    Regex {
        /// The subject.
        lhs: Expr,
        /// The pattern.
        pattern: Value,
        /// `*~`
        case_insensitive: bool,
    },
    /// `lhs BETWEEN lo AND hi`.
    Between(Expr, Value, Value),
    /// `lhs IS NULL`.
    IsNull(Expr),
    /// The JSON array in `lhs` contains the JSON value (given as JSON text).
    JsonContains(Expr, String),
    /// A condition from the operator's `raw_sql` list, written as configured (a `@having`
    /// item `@raw` marks).
    Raw(std::sync::Arc<str>),
}

/// `ANY` / `ALL` before a subquery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantifier {
    /// `ANY`
    Any,
    /// `ALL`
    All,
}

/// One item of the select list.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectItem {
    /// The expression.
    pub expr: Expr,
    /// The output name (`AS alias`), always set so the row decoder knows each column's key.
    pub alias: Ident,
}

/// What a SELECT reads from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A table of the schema.
    Table(Ident),
    /// A subquery.
    Select(Box<Select>),
    /// A view of the database's catalogue (`information_schema.tables` …), as each dialect
    /// reaches it.
    Catalog(crate::schema::CatalogView),
}

/// Join kinds that become SQL joins (protocol §12.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// `INNER JOIN`
    Inner,
    /// `LEFT JOIN`
    Left,
    /// `RIGHT JOIN`
    Right,
}

/// `JOIN source AS alias ON on`.
#[derive(Debug, Clone, PartialEq)]
pub struct Join {
    /// Kind.
    pub kind: JoinKind,
    /// Joined source.
    pub source: Source,
    /// Its alias.
    pub alias: Ident,
    /// ON condition.
    pub on: Pred,
}

/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ascending.
    Asc,
    /// Descending.
    Desc,
    /// The engine's default.
    Default,
}

/// One ORDER BY item.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderItem {
    /// An expression and its direction.
    By(Expr, Direction),
    /// `rand()` (each dialect spells it its own way).
    Random,
}

/// A complete SELECT.
#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    /// `DISTINCT`
    pub distinct: bool,
    /// Select list; never empty.
    pub columns: Vec<SelectItem>,
    /// FROM source.
    pub source: Source,
    /// Alias of the FROM source.
    pub alias: Ident,
    /// Joins.
    pub joins: Vec<Join>,
    /// WHERE (None = no WHERE).
    pub filter: Option<Pred>,
    /// GROUP BY.
    pub group: Vec<Expr>,
    /// HAVING.
    pub having: Option<Pred>,
    /// ORDER BY.
    pub order: Vec<OrderItem>,
    /// LIMIT.
    pub limit: Option<u64>,
    /// OFFSET.
    pub offset: u64,
}
