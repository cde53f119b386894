//! What a read depends on, taken from its planned statements: the tables every statement reads
//! (its FROM, its joins, every subquery and derived table, however a key spelled them), and
//! whether anything but those tables decides its answer.
//!
//! Live answers refetch a read when one of its tables was written; a dependency taken from the
//! request's keys would miss `@from@`, subqueries in conditions, joins and the tables Access
//! rules add, so it is taken here, from what the planner produced.

use crate::query::{Expr, OrderItem, Pred, Select, Source};
use std::collections::BTreeSet;

/// Functions whose value changes without any write: the clock and chance.
const VOLATILE: [&str; 10] = [
    "now",
    "sysdate",
    "current_timestamp",
    "localtime",
    "localtimestamp",
    "curdate",
    "current_date",
    "curtime",
    "current_time",
    "rand",
];

/// The dependencies of a read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    /// The SQL names of the tables its statements read.
    pub tables: BTreeSet<String>,
    /// A part apijet cannot see into (a configured raw SQL fragment, a stored procedure): a
    /// write to any table may change the answer.
    pub opaque: bool,
    /// The clock or chance decides part of it (`now()`, `rand()`): the answer may change
    /// without any write.
    pub volatile: bool,
}

impl Reads {
    /// Adds what `select` reads. The walk is as deep as the planner's limits on subqueries and
    /// expressions allow, never deeper.
    pub fn add(&mut self, select: &Select) {
        self.source(&select.source);
        for j in &select.joins {
            self.source(&j.source);
            self.pred(&j.on);
        }
        for c in &select.columns {
            self.expr(&c.expr);
        }
        if let Some(f) = &select.filter {
            self.pred(f);
        }
        for g in &select.group {
            self.expr(g);
        }
        if let Some(h) = &select.having {
            self.pred(h);
        }
        self.order(&select.order);
    }

    /// Adds everything `other` depends on.
    pub fn merge(&mut self, other: &Reads) {
        self.tables.extend(other.tables.iter().cloned());
        self.opaque |= other.opaque;
        self.volatile |= other.volatile;
    }

    /// Whether a write to `table` may change the answer.
    pub fn depends_on(&self, table: &str) -> bool {
        self.opaque || self.tables.contains(table)
    }

    fn source(&mut self, source: &Source) {
        match source {
            Source::Table(t) => {
                if !self.tables.contains(t.as_str()) {
                    self.tables.insert(t.as_str().to_string());
                }
            }
            Source::Select(sub) => self.add(sub),
            // The catalogue changes with the schema, which no write mark names.
            Source::Catalog(_) => self.opaque = true,
        }
    }

    fn order(&mut self, items: &[OrderItem]) {
        for item in items {
            match item {
                OrderItem::By(e, _) => self.expr(e),
                OrderItem::Random => self.volatile = true,
            }
        }
    }

    fn pred(&mut self, p: &Pred) {
        match p {
            Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|p| self.pred(p)),
            Pred::Not(p) => self.pred(p),
            Pred::Cmp(l, _, r) => {
                self.expr(l);
                self.expr(r);
            }
            Pred::In(l, _)
            | Pred::Like(l, _)
            | Pred::Between(l, _, _)
            | Pred::IsNull(l)
            | Pred::JsonContains(l, _)
            | Pred::Regex { lhs: l, .. } => self.expr(l),
            Pred::InSelect(l, sub) | Pred::CmpSelect(l, _, _, sub) => {
                self.expr(l);
                self.add(sub);
            }
            Pred::Exists(sub) => self.add(sub),
            Pred::Raw(_) => self.opaque = true,
        }
    }

    fn expr(&mut self, e: &Expr) {
        match e {
            Expr::Column { .. } | Expr::Alias(_) | Expr::Value(_) | Expr::Star => {}
            Expr::Raw(_) => self.opaque = true,
            Expr::Func { name, args, .. } => {
                if VOLATILE.contains(name) {
                    self.volatile = true;
                }
                args.iter().for_each(|a| self.expr(a));
            }
            Expr::TextLength(x) | Expr::JsonLength(x) | Expr::Cast(x, _) | Expr::IsNull(x) => {
                self.expr(x)
            }
            Expr::Arith { lhs, rhs, .. } | Expr::Compare(lhs, _, rhs) => {
                self.expr(lhs);
                self.expr(rhs);
            }
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => {
                operand.iter().for_each(|o| self.expr(o));
                for (w, t) in whens {
                    self.expr(w);
                    self.expr(t);
                }
                otherwise.iter().for_each(|o| self.expr(o));
            }
            Expr::Window {
                func,
                partition,
                order,
            } => {
                self.expr(func);
                partition.iter().for_each(|p| self.expr(p));
                self.order(order);
            }
            Expr::RowNumber { partition, order } => {
                partition.iter().for_each(|p| self.expr(p));
                self.order(order);
            }
            Expr::DateAdd { base, amount, .. } => {
                self.expr(base);
                self.expr(amount);
            }
            Expr::Match { columns, .. } | Expr::Row(columns) => {
                columns.iter().for_each(|c| self.expr(c))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Reads;
    use crate::gate::hidden_columns::plan;
    use apijet_core::Method;

    fn reads(body: &str) -> Reads {
        let mut r = Reads::default();
        r.add(&plan(Method::Get, body).expect("plans"));
        r
    }

    #[test]
    fn a_read_depends_on_the_tables_of_its_subqueries_and_derived_tables() {
        let plain = reads(r#"{"Moment":{"id":1}}"#);
        assert_eq!(plain.tables.iter().collect::<Vec<_>>(), ["Moment"]);
        assert!(!plain.opaque && !plain.volatile);
        let sub = reads(
            r#"{"Moment":{"userId{}@":{"from":"Privacy","Privacy":{"@column":"id","id>":0}}}}"#,
        );
        assert_eq!(
            sub.tables.iter().collect::<Vec<_>>(),
            ["Moment", "apijson_privacy"]
        );
        let from = reads(r#"{"Moment":{"@from@":{"from":"Privacy","Privacy":{"@column":"id"}}}}"#);
        assert!(from.tables.contains("apijson_privacy"), "{from:?}");
    }

    #[test]
    fn the_clock_and_chance_make_a_read_volatile() {
        assert!(reads(r#"{"Moment":{"@order":"rand()"}}"#).volatile);
        assert!(reads(r#"{"Moment":{"@column":"id;now():t"}}"#).volatile);
        assert!(!reads(r#"{"Moment":{"@column":"id;length(content):n"}}"#).volatile);
    }
}
