//! The SQL functions a client may name in `@column`, `@having`, `@key` and `@order`: the
//! MySQL part of the reference's `SQL_FUNCTION_MAP`, with the engines that can express each.
//!
//! MySQL and MariaDB run every function natively. SQLite gets the missing MySQL functions as
//! native functions registered on each connection (`exec`), PostgreSQL gets them spelled by its
//! dialect (`sql`). What an engine truly cannot express is refused here, by name, before any
//! SQL is written, so rendering never fails.

use crate::query::Expr;
use apijet_core::Engine;

/// How a function is used in a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FnKind {
    /// One value per row.
    Scalar,
    /// One value per group; may also take `OVER (…)`.
    Aggregate,
    /// Needs `OVER (…)`.
    Window,
}

/// Engines that can express a function.
#[derive(Debug, Clone, Copy)]
pub struct Engines(u8);

const P: Engines = Engines(2);
const M: Engines = Engines(4);
const SM: Engines = Engines(5);
const PM: Engines = Engines(6);
const ALL: Engines = Engines(7);

impl Engines {
    /// Whether `engine` can express the function.
    pub fn has(self, engine: Engine) -> bool {
        let bit = match engine {
            Engine::Sqlite => 1,
            Engine::Postgres => 2,
            Engine::MySql => 4,
        };
        self.0 & bit != 0
    }
}

/// One allow-listed function.
#[derive(Debug, Clone, Copy)]
pub struct Function {
    /// The name as clients write it (lower case, as in the reference's map).
    pub name: &'static str,
    /// Fewest arguments.
    pub min_args: usize,
    /// Most arguments.
    pub max_args: usize,
    /// Scalar, aggregate or window.
    pub kind: FnKind,
    /// Engines that can express it.
    pub engines: Engines,
}

const fn f(name: &'static str, min_args: usize, max_args: usize, engines: Engines) -> Function {
    Function {
        name,
        min_args,
        max_args,
        kind: FnKind::Scalar,
        engines,
    }
}

const fn agg(name: &'static str, min_args: usize, max_args: usize, engines: Engines) -> Function {
    Function {
        name,
        min_args,
        max_args,
        kind: FnKind::Aggregate,
        engines,
    }
}

const fn win(name: &'static str, min_args: usize, max_args: usize) -> Function {
    Function {
        name,
        min_args,
        max_args,
        kind: FnKind::Window,
        engines: ALL,
    }
}

/// Functions whose value changes without any write to the database: the clock and chance. A
/// read that calls one is refetched by live answers every interval, written or not.
pub const VOLATILE: [&str; 11] = [
    "now",
    "sysdate",
    "current_timestamp",
    "localtime",
    "localtimestamp",
    "curdate",
    "current_date",
    "curtime",
    "current_time",
    "unix_timestamp",
    "rand",
];

/// Unbounded argument count.
const N: usize = 64;

/// The catalogue. `cast`, `convert`, `date_add`, `date_sub`, `adddate`, `subdate`, `match`
/// and `case` have their own grammar in the parser and are listed for their engines only.
pub const FUNCTIONS: &[Function] = &[
    // aggregates
    agg("count", 1, 1, ALL),
    agg("sum", 1, 1, ALL),
    agg("max", 1, 1, ALL),
    agg("min", 1, 1, ALL),
    agg("avg", 1, 1, ALL),
    // Several arguments are concatenated per row, as MySQL's.
    agg("group_concat", 1, N, ALL),
    agg("json_arrayagg", 1, 1, ALL),
    agg("json_objectagg", 2, 2, ALL),
    // MySQL 8's any value of the group; MariaDB has none: every engine spells it as an
    // aggregate of its own (sql::calls).
    agg("any_value", 1, 1, ALL),
    // window functions
    win("rank", 0, 0),
    win("dense_rank", 0, 0),
    win("row_number", 0, 0),
    win("ntile", 1, 1),
    win("first_value", 1, 1),
    win("last_value", 1, 1),
    win("lag", 1, 3),
    win("lead", 1, 3),
    win("cume_dist", 0, 0),
    win("percent_rank", 0, 0),
    // strings
    f("ascii", 1, 1, ALL),
    f("char_length", 1, 1, ALL),
    f("character_length", 1, 1, ALL),
    f("concat", 1, N, ALL),
    f("concat_ws", 2, N, ALL),
    f("field", 2, N, ALL),
    f("find_in_set", 2, 2, ALL),
    f("insert", 4, 4, ALL),
    f("locate", 2, 2, ALL),
    f("lcase", 1, 1, ALL),
    f("ucase", 1, 1, ALL),
    f("lower", 1, 1, ALL),
    f("upper", 1, 1, ALL),
    f("left", 2, 2, ALL),
    f("right", 2, 2, ALL),
    f("length", 1, 1, ALL),
    f("lpad", 3, 3, ALL),
    f("rpad", 3, 3, ALL),
    f("ltrim", 1, 1, ALL),
    f("rtrim", 1, 1, ALL),
    f("trim", 1, 1, ALL),
    f("mid", 2, 3, ALL),
    f("substr", 2, 3, ALL),
    f("substring", 2, 3, ALL),
    f("substring_index", 3, 3, ALL),
    f("repeat", 2, 2, ALL),
    f("replace", 3, 3, ALL),
    f("reverse", 1, 1, ALL),
    f("space", 1, 1, ALL),
    f("strcmp", 2, 2, ALL),
    // numbers
    f("abs", 1, 1, ALL),
    f("acos", 1, 1, ALL),
    f("asin", 1, 1, ALL),
    f("atan", 1, 1, ALL),
    f("atan2", 2, 2, ALL),
    f("ceil", 1, 1, ALL),
    f("ceiling", 1, 1, ALL),
    f("cos", 1, 1, ALL),
    f("cot", 1, 1, ALL),
    f("degrees", 1, 1, ALL),
    f("exp", 1, 1, ALL),
    f("floor", 1, 1, ALL),
    f("greatest", 2, N, ALL),
    f("least", 2, N, ALL),
    f("ln", 1, 1, ALL),
    f("log", 1, 2, ALL),
    f("log10", 1, 1, ALL),
    f("log2", 1, 1, ALL),
    f("mod", 2, 2, ALL),
    f("pi", 0, 0, ALL),
    f("pow", 2, 2, ALL),
    f("power", 2, 2, ALL),
    f("radians", 1, 1, ALL),
    f("rand", 0, 0, ALL),
    f("round", 1, 2, ALL),
    f("sign", 1, 1, ALL),
    f("sin", 1, 1, ALL),
    f("sqrt", 1, 1, ALL),
    f("tan", 1, 1, ALL),
    f("truncate", 2, 2, ALL),
    // dates and times
    f("now", 0, 0, ALL),
    f("sysdate", 0, 0, ALL),
    f("current_timestamp", 0, 0, ALL),
    f("localtime", 0, 0, ALL),
    f("localtimestamp", 0, 0, ALL),
    f("curdate", 0, 0, ALL),
    f("current_date", 0, 0, ALL),
    f("curtime", 0, 0, ALL),
    f("current_time", 0, 0, ALL),
    f("date", 1, 1, ALL),
    f("time", 1, 1, ALL),
    f("year", 1, 1, ALL),
    f("quarter", 1, 1, ALL),
    f("month", 1, 1, ALL),
    f("day", 1, 1, ALL),
    f("dayofmonth", 1, 1, ALL),
    f("dayofweek", 1, 1, ALL),
    f("dayofyear", 1, 1, ALL),
    f("weekday", 1, 1, ALL),
    f("hour", 1, 1, ALL),
    f("minute", 1, 1, ALL),
    f("second", 1, 1, ALL),
    f("dayname", 1, 1, ALL),
    f("monthname", 1, 1, ALL),
    f("last_day", 1, 1, ALL),
    f("datediff", 2, 2, ALL),
    f("to_days", 1, 1, ALL),
    f("from_days", 1, 1, ALL),
    f("unix_timestamp", 0, 1, ALL),
    f("from_unixtime", 1, 1, ALL),
    f("time_to_sec", 1, 1, ALL),
    f("sec_to_time", 1, 1, ALL),
    f("date_format", 2, 2, ALL),
    f("time_format", 2, 2, SM),
    f("str_to_date", 2, 2, M),
    f("week", 1, 2, M),
    f("weekofyear", 1, 1, M),
    f("yearweek", 1, 2, M),
    f("makedate", 2, 2, M),
    f("maketime", 3, 3, M),
    f("period_add", 2, 2, M),
    f("period_diff", 2, 2, M),
    f("timediff", 2, 2, M),
    f("addtime", 2, 2, M),
    f("subtime", 2, 2, M),
    f("microsecond", 1, 1, M),
    f("date_add", 2, 2, ALL),
    f("date_sub", 2, 2, ALL),
    f("adddate", 2, 2, ALL),
    f("subdate", 2, 2, ALL),
    // JSON
    f("json_length", 1, 1, ALL),
    f("json_array", 0, N, ALL),
    f("json_object", 0, N, ALL),
    f("json_extract", 2, 2, SM),
    f("json_valid", 1, 1, SM),
    f("json_type", 1, 1, SM),
    f("json_quote", 1, 1, SM),
    f("json_unquote", 1, 1, M),
    f("json_keys", 1, 2, M),
    f("json_contains", 2, 3, M),
    f("json_contains_path", 3, N, M),
    f("json_depth", 1, 1, M),
    f("json_search", 3, N, M),
    f("json_set", 3, N, SM),
    f("json_insert", 3, N, SM),
    f("json_replace", 3, N, SM),
    f("json_remove", 2, N, SM),
    f("json_merge_patch", 2, N, SM),
    f("json_merge_preserve", 2, N, M),
    f("json_array_append", 3, N, M),
    f("json_array_insert", 3, N, M),
    f("json_pretty", 1, 1, M),
    // control flow and conversion
    f("coalesce", 1, N, ALL),
    f("ifnull", 2, 2, ALL),
    f("nullif", 2, 2, ALL),
    f("isnull", 1, 1, ALL),
    f("if", 3, 3, ALL),
    f("cast", 1, 1, ALL),
    f("convert", 2, 2, ALL),
    f("bin", 1, 1, M),
    f("conv", 3, 3, M),
    f("match", 1, N, PM),
    // PostgreSQL's comments of tables and columns (its PgClass and PgAttribute views).
    f("obj_description", 1, 2, P),
    f("col_description", 2, 2, P),
];

/// The allow-listed function named `name` (any letter case).
pub fn lookup(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name.eq_ignore_ascii_case(name))
}

/// Whether the allow-listed function `name` aggregates rows.
pub fn is_aggregate(name: &str) -> bool {
    lookup(name).is_some_and(|f| f.kind == FnKind::Aggregate)
}

/// Whether `e` calls an aggregate outside a window.
pub fn contains_aggregate(e: &Expr) -> bool {
    match e {
        Expr::Func { name, args, .. } => is_aggregate(name) || args.iter().any(contains_aggregate),
        Expr::Window { .. } => false,
        _ => children(e).any(contains_aggregate),
    }
}

/// Whether `e` holds a window function.
pub fn contains_window(e: &Expr) -> bool {
    matches!(e, Expr::Window { .. } | Expr::RowNumber { .. }) || children(e).any(contains_window)
}

/// The direct sub-expressions of `e`.
fn children(e: &Expr) -> Box<dyn Iterator<Item = &Expr> + '_> {
    match e {
        Expr::Func { args, .. } => Box::new(args.iter()),
        Expr::TextLength(a) | Expr::JsonLength(a) | Expr::Cast(a, _) | Expr::IsNull(a) => {
            Box::new(std::iter::once(a.as_ref()))
        }
        Expr::Arith { lhs, rhs, .. } | Expr::Compare(lhs, _, rhs) => {
            Box::new([lhs.as_ref(), rhs.as_ref()].into_iter())
        }
        Expr::DateAdd { base, amount, .. } => {
            Box::new([base.as_ref(), amount.as_ref()].into_iter())
        }
        Expr::Case {
            operand,
            whens,
            otherwise,
        } => Box::new(
            operand
                .iter()
                .map(|b| b.as_ref())
                .chain(whens.iter().flat_map(|(w, t)| [w, t]))
                .chain(otherwise.iter().map(|b| b.as_ref())),
        ),
        Expr::Window {
            func, partition, ..
        } => Box::new(std::iter::once(func.as_ref()).chain(partition.iter())),
        Expr::Match { columns, .. } | Expr::Row(columns) => Box::new(columns.iter()),
        _ => Box::new(std::iter::empty()),
    }
}
