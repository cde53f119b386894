//! Whether a select's cost is bounded by its shape, whatever its values: the fact a backend
//! needs to run it where a statement of unknown cost may not run (SQLite on an async worker).

use super::{CmpOp, Expr, OrderItem, Pred, Select, Source};

impl Select {
    /// True when the select reads at most one row of one table, found by equality on one of
    /// `keys` (the table's single-column unique keys, from the schema cache), and touches only
    /// plain columns and bound values on the way: no function, expression, LIKE, regex, JSON
    /// test, raw SQL, subquery, join, group or derived table. Its steps are then few (one index
    /// search) and each is cheap (a comparison or a copy of a stored value), so that it ends
    /// in about the time of the row it reads. LIMIT and OFFSET do not matter: at most one row
    /// matches.
    ///
    /// Decided on the planned statement, not on the request's spellings, once per shape.
    pub fn is_key_lookup(&self, keys: &[String]) -> bool {
        if keys.is_empty()
            || self.distinct
            || !matches!(self.source, Source::Table(_))
            || !self.joins.is_empty()
            || !self.group.is_empty()
            || self.having.is_some()
        {
            return false;
        }
        let plain_columns = self.columns.iter().all(|c| self.is_column(&c.expr));
        let plain_order = self.order.iter().all(|o| match o {
            OrderItem::By(e, _) => self.is_column(e),
            OrderItem::Random => false,
        });
        let Some(filter) = &self.filter else {
            return false;
        };
        plain_columns && plain_order && self.is_cheap(filter) && self.pins_key(filter, keys)
    }

    /// A column of this select's one table.
    fn is_column(&self, e: &Expr) -> bool {
        matches!(e, Expr::Column { table, .. } if table.as_ref().is_none_or(|t| *t == self.alias))
    }

    /// A column or a bound value.
    fn is_plain(&self, e: &Expr) -> bool {
        self.is_column(e) || matches!(e, Expr::Value(_) | Expr::Slot(_))
    }

    /// A condition of comparisons of plain operands only, each cheap on one row.
    fn is_cheap(&self, p: &Pred) -> bool {
        match p {
            Pred::And(ps) | Pred::Or(ps) => ps.iter().all(|p| self.is_cheap(p)),
            Pred::Not(p) => self.is_cheap(p),
            Pred::Cmp(l, _, r) => self.is_plain(l) && self.is_plain(r),
            Pred::In(e, _) | Pred::Between(e, ..) | Pred::IsNull(e) => self.is_column(e),
            Pred::InSelect(..)
            | Pred::CmpSelect(..)
            | Pred::Exists(_)
            | Pred::Like(..)
            | Pred::Regex { .. }
            | Pred::JsonContains(..)
            | Pred::Raw(_) => false,
        }
    }

    /// Whether `p` requires (as one of its AND-ed conditions) one of `keys` to equal a value.
    fn pins_key(&self, p: &Pred, keys: &[String]) -> bool {
        match p {
            Pred::And(ps) => ps.iter().any(|p| self.pins_key(p, keys)),
            Pred::Cmp(l, CmpOp::Eq, r) => {
                let key = |e: &Expr| {
                    self.is_column(e)
                        && matches!(e, Expr::Column { name, .. } if keys.iter().any(|k| k == name.as_str()))
                };
                let value = |e: &Expr| matches!(e, Expr::Value(_) | Expr::Slot(_));
                (key(l) && value(r)) || (value(l) && key(r))
            }
            _ => false,
        }
    }
}
