//! How large a value a client's expression can make, known before any SQL runs.
//!
//! A database builds a whole value before it sends any of it, and the drivers hold a whole row
//! before apijet sees a cell: a `repeat(s,20000000)` made a 640 MB cell in PostgreSQL, then in
//! the driver, before any budget could look at it. So every function call is given an upper
//! bound on the bytes of its value, from the bounds of its arguments, and a call whose bound
//! passes the answer budget (`max_answer_bytes`) is refused while planning.
//!
//! A bound is `fixed + stored × S`: `fixed` bytes known from the request (literals, the
//! widths of numbers and dates, counts given as numbers), plus `stored` whole values of columns
//! whose length the schema does not bound (text, JSON, binary), each counted as
//! `max_body_bytes` (S), the largest value a request can store. Functions that multiply
//! (`repeat`, `lpad`, `rpad`, `space`, `replace`) need their counts as numbers: a count read
//! from a column has no bound and is refused. Aggregates that concatenate rows
//! (`group_concat`) cannot know their row count; the planner stops them at the budget itself
//! (`left(…, max_answer_bytes)`, whose result is refused by the answer's budget when it was
//! cut), so they count as the whole budget.

use crate::query::{Expr, OrderItem};
use crate::schema::ColumnKind;
use crate::{ExprLimits, PlanError};
use apijet_core::Value;

/// Bytes of any number, date, time or boolean as the answer prints it (a generous width).
const SCALAR: u64 = 64;

/// Most bytes one character takes in UTF-8: `lpad(s,n,…)` makes `n` characters.
const CHAR_BYTES: u64 = 4;

/// How much longer than its format a formatted date can be (`%W` → `Wednesday`).
const FORMAT_GROWTH: u64 = 8;

/// An upper bound on the bytes of a value: `fixed + stored × (one stored value)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Size {
    fixed: u64,
    stored: u64,
}

impl Size {
    const ZERO: Size = Size::fixed(0);

    const fn fixed(bytes: u64) -> Size {
        Size {
            fixed: bytes,
            stored: 0,
        }
    }

    const STORED: Size = Size {
        fixed: 0,
        stored: 1,
    };

    fn plus(self, other: Size) -> Size {
        Size {
            fixed: self.fixed.saturating_add(other.fixed),
            stored: self.stored.saturating_add(other.stored),
        }
    }

    /// The larger of two bounds, part by part (a bound of either).
    fn max(self, other: Size) -> Size {
        Size {
            fixed: self.fixed.max(other.fixed),
            stored: self.stored.max(other.stored),
        }
    }

    fn times(self, n: u64) -> Size {
        Size {
            fixed: self.fixed.saturating_mul(n),
            stored: self.stored.saturating_mul(n),
        }
    }

    /// A bound of the product of two sizes; none when both hold stored values (the product
    /// of two unknown lengths has no bound).
    fn product(self, other: Size) -> Option<Size> {
        match (self.stored, other.stored) {
            (0, _) => Some(other.times(self.fixed)),
            (_, 0) => Some(self.times(other.fixed)),
            _ => None,
        }
    }

    fn divided(self, n: u64) -> Size {
        let n = n.max(1);
        Size {
            fixed: self.fixed.div_ceil(n),
            stored: self.stored.div_ceil(n),
        }
    }

    /// The bytes of this bound when a stored value is `stored_bytes`.
    fn bytes(self, stored_bytes: u64) -> u64 {
        self.fixed
            .saturating_add(self.stored.saturating_mul(stored_bytes))
    }
}

/// A number written as a literal argument, if it is one (counts below zero count as zero).
fn literal_count(e: &Expr) -> Option<u64> {
    match e {
        Expr::Value(Value::Int(n)) => Some((*n).max(0) as u64),
        Expr::Value(Value::Float(f)) if f.is_finite() => Some(f.max(0.0).ceil() as u64),
        Expr::Value(Value::Text(t)) => t.trim().parse::<u64>().ok(),
        _ => None,
    }
}

/// The length of a literal text argument, if it is one.
fn literal_length(e: &Expr) -> Option<u64> {
    match e {
        Expr::Value(Value::Text(t)) => Some(t.len() as u64),
        _ => None,
    }
}

/// What bounds are measured against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    /// The answer budget: what a concatenating aggregate counts as.
    pub budget: u64,
    /// The bytes one stored value counts as.
    pub stored: u64,
}

/// An upper bound on the bytes of `e`'s values, or `None` when it has none (a count read from
/// a column, the product of two stored values).
pub(crate) fn bound(e: &Expr, scale: Scale) -> Option<Size> {
    Some(match e {
        Expr::Value(Value::Text(t)) => Size::fixed(t.len() as u64),
        Expr::Value(_) | Expr::Slot(_) | Expr::Star | Expr::RowNumber { .. } => Size::fixed(SCALAR),
        Expr::Column { kind, .. } => match kind {
            ColumnKind::Int
            | ColumnKind::Float
            | ColumnKind::Bool
            | ColumnKind::Timestamp
            | ColumnKind::Date
            | ColumnKind::Time => Size::fixed(SCALAR),
            ColumnKind::Decimal
            | ColumnKind::Text
            | ColumnKind::Json
            | ColumnKind::Bytes
            | ColumnKind::Other => Size::STORED,
        },
        // A select-list alias: its own expression was bounded where it was written.
        Expr::Alias(_) => Size::STORED,
        Expr::Raw(sql) => Size::fixed(sql.len() as u64 + SCALAR),
        Expr::TextLength(_)
        | Expr::JsonLength(_)
        | Expr::Arith { .. }
        | Expr::Compare(..)
        | Expr::IsNull(_)
        | Expr::DateAdd { .. }
        | Expr::Match { .. } => Size::fixed(SCALAR),
        Expr::Cast(inner, _) => bound(inner, scale)?.max(Size::fixed(SCALAR)),
        Expr::Case {
            whens, otherwise, ..
        } => {
            let mut size = Size::ZERO;
            for (_, then) in whens {
                size = size.max(bound(then, scale)?);
            }
            if let Some(e) = otherwise {
                size = size.max(bound(e, scale)?);
            }
            size
        }
        Expr::Window { func, order, .. } => {
            // ORDER BY items inside a window do not reach the value.
            let _: &[OrderItem] = order;
            bound(func, scale)?
        }
        Expr::Func { name, args, .. } => call(name, args, scale)?,
        Expr::Row(items) => items
            .iter()
            .try_fold(Size::ZERO, |sum, e| Some(sum.plus(bound(e, scale)?)))?,
    })
}

/// The bound of the allow-listed function `name` over `args`.
fn call(name: &str, args: &[Expr], scale: Scale) -> Option<Size> {
    let arg = |i: usize| match args.get(i) {
        Some(a) => bound(a, scale),
        None => Some(Size::ZERO),
    };
    let all = || -> Option<Size> {
        args.iter()
            .try_fold(Size::ZERO, |sum, a| Some(sum.plus(bound(a, scale)?)))
    };
    let widest = |from: usize| -> Option<Size> {
        args.iter()
            .skip(from)
            .try_fold(Size::ZERO, |m, a| Some(m.max(bound(a, scale)?)))
    };
    Some(match name {
        // Values no longer than their first argument.
        "max" | "min" | "first_value" | "last_value" | "lower" | "upper" | "lcase" | "ucase"
        | "ltrim" | "rtrim" | "trim" | "reverse" | "mid" | "substr" | "substring"
        | "substring_index" | "json_unquote" | "json_keys" | "json_extract" | "json_search"
        | "json_remove" => arg(0)?,
        "left" | "right" => {
            let whole = arg(0)?;
            match literal_count(args.get(1)?) {
                Some(n) if n.saturating_mul(CHAR_BYTES) < whole.bytes(scale.stored) => {
                    Size::fixed(n.saturating_mul(CHAR_BYTES))
                }
                _ => whole,
            }
        }
        "json_quote" => arg(0)?.plus(Size::fixed(2)),
        // One of its arguments.
        "coalesce" | "ifnull" | "nullif" | "greatest" | "least" => widest(0)?,
        "if" => widest(1)?,
        "lag" | "lead" => arg(0)?.max(arg(2)?),
        // All of their arguments, with a little punctuation.
        "concat" => all()?,
        "concat_ws" => all()?.plus(arg(0)?.times(args.len() as u64)),
        "json_array"
        | "json_object"
        | "json_set"
        | "json_insert"
        | "json_replace"
        | "json_merge_patch"
        | "json_merge_preserve"
        | "json_array_append"
        | "json_array_insert" => all()?.plus(Size::fixed(4 * args.len() as u64 + 2)),
        "json_pretty" => arg(0)?.times(FORMAT_GROWTH),
        "insert" => arg(0)?.plus(arg(3)?),
        // Functions that multiply: their counts must be numbers.
        "repeat" => arg(0)?.times(literal_count(args.get(1)?)?),
        "space" => Size::fixed(literal_count(args.first()?)?),
        "lpad" | "rpad" => Size::fixed(literal_count(args.get(1)?)?.saturating_mul(CHAR_BYTES)),
        "replace" => {
            // Each match of `from` (at least one character, else nothing is replaced) may
            // become all of `to`.
            let whole = arg(0)?;
            let matches = whole.divided(args.get(1).and_then(literal_length).unwrap_or(1));
            whole.plus(matches.product(arg(2)?)?)
        }
        "date_format" | "time_format" => arg(1)?.times(FORMAT_GROWTH).plus(Size::fixed(SCALAR)),
        // Rows concatenated: stopped at the budget by the planner or the engine.
        "group_concat" | "json_arrayagg" | "json_objectagg" => Size::fixed(scale.budget),
        // Numbers, dates, times, booleans and short names.
        _ => Size::fixed(SCALAR),
    })
}

/// Refuses an expression whose values could pass the answer budget; `text` is the client's
/// text of it, for the message.
pub(crate) fn check(e: &Expr, text: &str, limits: &ExprLimits) -> Result<(), PlanError> {
    let scale = Scale {
        budget: limits.max_value_bytes as u64,
        stored: limits.stored_value_bytes as u64,
    };
    let (budget, stored) = (scale.budget, scale.stored);
    match bound(e, scale) {
        None => Err(PlanError::Limit(format!(
            "'{text}': the length of its value cannot be known before it runs (a count of \
             repeat, space, lpad or rpad read from a column, or a replacement by a stored value \
             in stored text), so it could pass max_answer_bytes ({budget} bytes): give counts \
             as numbers"
        ))),
        Some(size) if size.bytes(stored) > budget => Err(PlanError::Limit(format!(
            "'{text}': its value can reach {} bytes, more than max_answer_bytes ({budget}) \
             allows for a whole answer (each stored value of a text, JSON or binary column \
             counted as max_body_bytes, {stored} bytes)",
            size.bytes(stored)
        ))),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Ident;

    const B: Scale = Scale {
        budget: 16 << 20,
        stored: 1 << 20,
    };

    fn col(kind: ColumnKind) -> Expr {
        Expr::Column {
            table: None,
            name: Ident::new("c"),
            kind,
        }
    }

    fn f(name: &'static str, args: Vec<Expr>) -> Expr {
        Expr::Func {
            name,
            args,
            distinct: false,
        }
    }

    fn int(n: i64) -> Expr {
        Expr::Value(Value::Int(n))
    }

    fn text(s: &str) -> Expr {
        Expr::Value(Value::Text(s.into()))
    }

    #[test]
    fn multiplying_functions_multiply_their_bounds() {
        let s = col(ColumnKind::Text);
        assert_eq!(
            bound(&f("repeat", vec![s.clone(), int(3)]), B),
            Some(Size {
                fixed: 0,
                stored: 3
            })
        );
        assert_eq!(
            bound(&f("repeat", vec![text("ab"), int(1000)]), B),
            Some(Size::fixed(2000))
        );
        assert_eq!(bound(&f("space", vec![int(7)]), B), Some(Size::fixed(7)));
        assert_eq!(
            bound(&f("lpad", vec![s.clone(), int(10), text("x")]), B),
            Some(Size::fixed(40))
        );
        // A count from a column has no bound.
        assert_eq!(
            bound(&f("repeat", vec![s.clone(), col(ColumnKind::Int)]), B),
            None
        );
        // Nested: the bounds multiply.
        let nested = f(
            "repeat",
            vec![f("repeat", vec![text("a"), int(1000)]), int(1000)],
        );
        assert_eq!(bound(&nested, B), Some(Size::fixed(1_000_000)));
    }

    #[test]
    fn replace_grows_by_its_replacement_per_match() {
        let s = col(ColumnKind::Text);
        // Every character of s may become ten: s + 10 s.
        let r = f("replace", vec![s.clone(), text("a"), text("0123456789")]);
        assert_eq!(
            bound(&r, B),
            Some(Size {
                fixed: 0,
                stored: 11
            })
        );
        // Replaced by stored text: unbounded.
        let r = f("replace", vec![s.clone(), text("a"), s.clone()]);
        assert_eq!(bound(&r, B), None);
        // A literal replaced in a literal.
        let r = f("replace", vec![text("aaaa"), text("aa"), text("bbb")]);
        assert_eq!(bound(&r, B), Some(Size::fixed(4 + 2 * 3)));
    }

    #[test]
    fn the_check_names_the_budget_and_passes_ordinary_expressions() {
        let limits = ExprLimits::default();
        let s = col(ColumnKind::Text);
        let big = f("repeat", vec![s.clone(), int(20_000_000)]);
        let e = check(&big, "repeat(s,20000000)", &limits).expect_err("refused");
        let msg = e.to_string();
        assert!(msg.contains("max_answer_bytes"), "{msg}");
        assert!(msg.contains("max_body_bytes"), "{msg}");
        let unknown = f("space", vec![col(ColumnKind::Int)]);
        assert!(check(&unknown, "space(id)", &limits).is_err());
        for ok in [
            f("concat", vec![s.clone(), text("-"), col(ColumnKind::Int)]),
            f("repeat", vec![text("-"), int(80)]),
            f("upper", vec![f("substr", vec![s.clone(), int(1), int(3)])]),
            f(
                "date_format",
                vec![col(ColumnKind::Timestamp), text("%Y-%m-%d")],
            ),
            f("group_concat", vec![s.clone()]),
            f("lpad", vec![s.clone(), int(20), text("0")]),
        ] {
            check(&ok, "ok", &limits).expect("ordinary expressions pass");
        }
        // Seventeen stored values of a megabyte pass a 16 MiB budget.
        let many = f("concat", vec![s.clone(); 17]);
        assert!(check(&many, "concat(s,…)", &limits).is_err());
        let huge_literal = f("space", vec![int(17 << 20)]);
        assert!(check(&huge_literal, "space", &limits).is_err());
    }
}
