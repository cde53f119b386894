//! The planner's output: a SQL-free description of one SELECT, ready for a dialect to render.
//!
//! Two things may carry text that reached us from a client, and both are safe by type: an
//! [`Ident`] can only be made by the planner from a name found in the schema cache (or an
//! alias that passed the name grammar), and every client value is a bound [`Value`].
//! Function names are `&'static str` from the planner's allow-list.

use crate::schema::ColumnKind;
use apijet_core::Value;
use std::fmt;

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

impl Select {
    /// `SELECT columns FROM table WHERE filter [LIMIT limit]` on one table of the schema,
    /// unaliased: the server's own lookups (login, checks, read-modify-write).
    pub(crate) fn on_table(
        table: &crate::schema::Table,
        columns: Vec<SelectItem>,
        filter: Pred,
        limit: Option<u64>,
    ) -> Select {
        Select {
            distinct: false,
            columns,
            source: Source::Table(Ident::new(table.sql_name.clone())),
            alias: Ident::new(table.sql_name.clone()),
            joins: Vec::new(),
            filter: Some(filter),
            group: Vec::new(),
            having: None,
            order: Vec::new(),
            limit,
            offset: 0,
        }
    }

    /// `SELECT count(*) AS count FROM (self without paging)` — totals and compat counts.
    pub fn count_wrapped(&self) -> Select {
        let mut inner = self.clone();
        inner.limit = None;
        inner.offset = 0;
        inner.order.clear();
        Select {
            distinct: false,
            columns: vec![count_star()],
            source: Source::Select(Box::new(inner)),
            alias: Ident::new("t"),
            joins: Vec::new(),
            filter: None,
            group: Vec::new(),
            having: None,
            order: Vec::new(),
            limit: None,
            offset: 0,
        }
    }

    /// Makes the order total by adding `key` (a unique column, already checked against the
    /// schema) last, unless the order names it already, so that pages of the select read one
    /// after another neither repeat nor skip rows. False when no order can be: a random order,
    /// a grouped, aggregated or distinct select.
    pub fn order_totally_by(&mut self, key: &str) -> bool {
        if self.distinct || !self.group.is_empty() || self.having.is_some() {
            return false;
        }
        let mut named = false;
        for item in &self.order {
            match item {
                OrderItem::Random => return false,
                OrderItem::By(Expr::Column { name, .. }, _) if name.as_str() == key => named = true,
                OrderItem::By(..) => {}
            }
        }
        if !named {
            self.order.push(OrderItem::By(
                Expr::Column {
                    table: Some(self.alias.clone()),
                    name: Ident::new(key),
                    kind: crate::schema::ColumnKind::Int,
                },
                Direction::Asc,
            ));
        }
        true
    }

    /// The rows of many parents at once, `count` per parent from page `page`: the nested array
    /// of every item of a list in one statement instead of one per item. `partition` names the
    /// columns (output names) that tell the parents apart; the answer is ordered by them, then
    /// by the row's rank within its parent.
    ///
    /// Without an order of its own, rows rank by `key_order` (the table's primary key, already
    /// checked against the schema): the order in which MySQL's per-parent index lookups return
    /// them, and a stable one on every engine.
    pub fn per_parent_page(
        self,
        partition: &[String],
        count: u64,
        page: u64,
        key_order: Option<&str>,
    ) -> Select {
        let rank = Ident::new("__rank");
        let mut inner = self;
        if let (true, Some(key)) = (inner.order.is_empty(), key_order) {
            inner.order.push(OrderItem::By(
                Expr::Column {
                    table: Some(inner.alias.clone()),
                    name: Ident::new(key),
                    kind: crate::schema::ColumnKind::Int,
                },
                Direction::Asc,
            ));
        }
        let part: Vec<Expr> = partition
            .iter()
            .filter_map(|p| {
                inner
                    .columns
                    .iter()
                    .find(|c| c.alias.as_str() == p)
                    .map(|c| c.expr.clone())
            })
            .collect();
        inner.columns.push(SelectItem {
            expr: Expr::RowNumber {
                partition: part,
                order: std::mem::take(&mut inner.order),
            },
            alias: rank.clone(),
        });
        inner.limit = None;
        inner.offset = 0;
        let t = Ident::new("t");
        let col = |name: &Ident| Expr::Column {
            table: Some(t.clone()),
            name: name.clone(),
            kind: crate::schema::ColumnKind::Other,
        };
        let columns: Vec<SelectItem> = inner
            .columns
            .iter()
            .map(|c| SelectItem {
                expr: col(&c.alias),
                alias: c.alias.clone(),
            })
            .collect();
        let mut order: Vec<OrderItem> = partition
            .iter()
            .map(|p| OrderItem::By(col(&Ident::new(p.clone())), Direction::Default))
            .collect();
        order.push(OrderItem::By(col(&rank), Direction::Asc));
        Select {
            distinct: false,
            columns,
            source: Source::Select(Box::new(inner)),
            alias: t.clone(),
            joins: Vec::new(),
            filter: Some(Pred::And(vec![
                Pred::Cmp(
                    col(&rank),
                    CmpOp::Gt,
                    Expr::Value(Value::Int((page * count) as i64)),
                ),
                Pred::Cmp(
                    col(&rank),
                    CmpOp::Le,
                    Expr::Value(Value::Int(((page + 1) * count) as i64)),
                ),
            ])),
            group: Vec::new(),
            having: None,
            order,
            limit: None,
            offset: 0,
        }
    }

    /// The same query counting rows instead of returning them (no paging, no order).
    pub fn count_plain(&self) -> Select {
        let mut s = self.clone();
        s.columns = vec![count_star()];
        s.distinct = false;
        s.limit = None;
        s.offset = 0;
        s.order.clear();
        s
    }
}

fn count_star() -> SelectItem {
    SelectItem {
        expr: Expr::Func {
            name: "count",
            args: vec![Expr::Star],
            distinct: false,
        },
        alias: Ident::new("count"),
    }
}
