//! The shared walk over a planned SELECT.

use crate::calls::{write_date_add, write_match};
use crate::dialect::{Dialect, LIST_KEY, LIST_VALUE};
use crate::Statement;
use apijet_core::Value;
use apijet_plan::functions::{contains_aggregate, contains_window};
use apijet_plan::query::{
    ArithOp, Direction, Expr, Join, JoinKind, OrderItem, Pred, Quantifier, Select, Source,
};
use apijet_plan::read::{ListKind, MultiplexPlan, MULTIPLEX_KEY};
use apijet_plan::schema::ColumnKind;
use apijet_plan::template::{Bind, StatementText};

/// Renders a SELECT for `dialect`.
pub fn render(dialect: &dyn Dialect, select: &Select) -> Statement {
    let mut w = Writer {
        d: dialect,
        binds: Vec::new(),
        listed: None,
    };
    let mut sql = String::with_capacity(256);
    w.select(select, &mut sql);
    Statement {
        sql,
        binds: w.values(),
        bounded: false,
    }
}

/// Renders a SELECT whose values are partly the request's slots ([`Expr::Slot`]): its text,
/// written once for every request of its shape, and where each bind comes from.
pub fn render_template(dialect: &dyn Dialect, select: &Select) -> StatementText {
    let mut w = Writer {
        d: dialect,
        binds: Vec::new(),
        listed: None,
    };
    let mut sql = String::with_capacity(256);
    w.select(select, &mut sql);
    StatementText {
        sql,
        binds: w.binds,
    }
}

/// Renders the plan of a shape over a list of one slot's values ([`MultiplexPlan`]) for listed
/// values of `kind`: its text, written once per shape and kind, and where each bind comes from
/// (the list's bind is its slot: the caller binds the list there as one JSON array text).
///
/// `SELECT rows.key, rows.<each output> FROM (SELECT listed.key, <the shape's outputs>,
/// ROW_NUMBER() OVER (PARTITION BY listed.key ORDER BY <its order>) AS row FROM <list> AS
/// listed CROSS JOIN <its source> WHERE <its filter, the slot read from listed.value>) AS rows
/// WHERE row > offset AND row <= offset + per_key ORDER BY key, row`: each key's page, in
/// order, each row led by its key.
pub fn render_multiplexed(
    dialect: &dyn Dialect,
    plan: &MultiplexPlan,
    kind: ListKind,
) -> StatementText {
    let mut w = Writer {
        d: dialect,
        binds: Vec::new(),
        listed: Some(plan.slot),
    };
    let mut sql = String::with_capacity(512);
    w.multiplexed(plan, kind, &mut sql);
    StatementText {
        sql,
        binds: w.binds,
    }
}

/// The alias of the joined list.
const LISTED: &str = "apijet~listed";
/// The alias of the numbered rows.
const ROWS: &str = "apijet~rows";
/// The column numbering each key's rows.
const ROW: &str = "apijet~row";

mod exprs;
mod writes;

pub use writes::{render_delete, render_insert, render_update};

struct Writer<'a> {
    d: &'a dyn Dialect,
    binds: Vec<Bind>,
    /// The slot of a multiplexed read, read from the joined list instead of bound.
    listed: Option<usize>,
}

impl Writer<'_> {
    fn bind(&mut self, v: &Value, out: &mut String) {
        self.binds.push(Bind::Value(v.clone()));
        self.d.placeholder(self.binds.len(), out);
    }

    fn bind_slot(&mut self, slot: usize, out: &mut String) {
        if self.listed == Some(slot) {
            self.d.quote(LISTED, out);
            out.push('.');
            self.d.quote(LIST_VALUE, out);
            return;
        }
        self.binds.push(Bind::Slot(slot));
        self.d.placeholder(self.binds.len(), out);
    }

    /// The binds as values: a statement rendered for one request has no slots.
    fn values(self) -> Vec<Value> {
        self.binds
            .into_iter()
            .map(|b| match b {
                Bind::Value(v) => v,
                Bind::Slot(_) => Value::Null,
            })
            .collect()
    }

    fn select(&mut self, s: &Select, out: &mut String) {
        out.push_str("SELECT ");
        if s.distinct {
            out.push_str("DISTINCT ");
        }
        // MySQL reads a HAVING without GROUP BY over rows that aggregate nothing as a second
        // WHERE; SQLite and PostgreSQL would make the query an aggregate. Writing it as WHERE
        // gives the same rows on every engine.
        let column_aggregates = s.columns.iter().any(|c| contains_aggregate(&c.expr));
        let having_as_filter = match &s.having {
            Some(h) if s.group.is_empty() && !column_aggregates && !pred_aggregates(h) => Some(h),
            _ => None,
        };
        let aggregate_query = !s.group.is_empty()
            || column_aggregates
            || (s.having.is_some() && having_as_filter.is_none());
        // MySQL answers a column that is neither grouped nor aggregated with the value of the
        // group's first row; PostgreSQL refuses such a query, so it is asked for that value.
        // A raw fragment is written as the operator configured it (it may aggregate).
        let first_of_group = |e: &Expr| {
            aggregate_query
                && self.d.groups_strictly()
                && !matches!(
                    e,
                    Expr::Value(_) | Expr::Slot(_) | Expr::Alias(_) | Expr::Star | Expr::Raw(_)
                )
                && !contains_aggregate(e)
                && !contains_window(e)
                && !s.group.contains(e)
        };
        for (i, item) in s.columns.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let wrap = first_of_group(&item.expr);
            if wrap {
                out.push_str("(array_agg(");
            }
            if matches!(item.expr, Expr::Compare(..) | Expr::IsNull(_)) {
                let mut b = String::new();
                self.expr(&item.expr, &mut b);
                self.d.truth_value(&b, out);
            } else {
                self.expr(&item.expr, out);
            }
            if wrap {
                out.push_str("))[1]");
            }
            out.push_str(" AS ");
            self.d.quote(item.alias.as_str(), out);
        }
        out.push_str(" FROM ");
        self.source(&s.source, out);
        out.push_str(" AS ");
        self.d.quote(s.alias.as_str(), out);
        for j in &s.joins {
            self.join(j, out);
        }
        let filter = s
            .filter
            .as_ref()
            .filter(|f| !matches!(f, Pred::And(v) if v.is_empty()));
        match (filter, having_as_filter) {
            (Some(f), Some(h)) => {
                out.push_str(" WHERE (");
                self.pred(f, out);
                out.push_str(") AND (");
                self.pred(h, out);
                out.push(')');
            }
            (Some(p), None) | (None, Some(p)) => {
                out.push_str(" WHERE ");
                self.pred(p, out);
            }
            (None, None) => {}
        }
        if s.group.is_empty()
            && aggregate_query
            && s.having.is_some()
            && self.d.having_needs_group()
        {
            // One group of all rows, as MySQL makes of a HAVING without GROUP BY.
            out.push_str(" GROUP BY (1 = 1)");
        }
        if !s.group.is_empty() {
            out.push_str(" GROUP BY ");
            for (i, g) in s.group.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                self.expr(g, out);
            }
        }
        if let (Some(h), None) = (&s.having, having_as_filter) {
            out.push_str(" HAVING ");
            self.pred(h, out);
        }
        if s.order
            .iter()
            .any(|o| matches!(o, OrderItem::By(e, _) if first_of_group(e)))
        {
            let order: Vec<OrderItem> = s
                .order
                .iter()
                .map(|o| match o {
                    OrderItem::By(e, dir) if first_of_group(e) => OrderItem::By(
                        Expr::Func {
                            name: "min",
                            args: vec![e.clone()],
                            distinct: false,
                        },
                        *dir,
                    ),
                    other => other.clone(),
                })
                .collect();
            self.order_by(&order, out);
        } else {
            self.order_by(&s.order, out);
        }
        if let Some(limit) = s.limit {
            out.push_str(" LIMIT ");
            out.push_str(&limit.to_string());
        }
        if s.offset > 0 {
            out.push_str(" OFFSET ");
            out.push_str(&s.offset.to_string());
        }
    }

    /// `table.column AS alias`, each quoted.
    fn column_as(&self, table: &str, column: &str, alias: &str, out: &mut String) {
        self.d.quote(table, out);
        out.push('.');
        self.d.quote(column, out);
        out.push_str(" AS ");
        self.d.quote(alias, out);
    }

    fn multiplexed(&mut self, plan: &MultiplexPlan, kind: ListKind, out: &mut String) {
        let s = &plan.select;
        out.push_str("SELECT ");
        self.column_as(ROWS, MULTIPLEX_KEY, MULTIPLEX_KEY, out);
        for item in &s.columns {
            out.push_str(", ");
            self.column_as(ROWS, item.alias.as_str(), item.alias.as_str(), out);
        }
        out.push_str(" FROM (SELECT ");
        self.column_as(LISTED, LIST_KEY, MULTIPLEX_KEY, out);
        for item in &s.columns {
            out.push_str(", ");
            if matches!(item.expr, Expr::Compare(..) | Expr::IsNull(_)) {
                let mut b = String::new();
                self.expr(&item.expr, &mut b);
                self.d.truth_value(&b, out);
            } else {
                self.expr(&item.expr, out);
            }
            out.push_str(" AS ");
            self.d.quote(item.alias.as_str(), out);
        }
        out.push_str(", ROW_NUMBER() OVER (PARTITION BY ");
        self.d.quote(LISTED, out);
        out.push('.');
        self.d.quote(LIST_KEY, out);
        self.order_by(&s.order, out);
        out.push_str(") AS ");
        self.d.quote(ROW, out);
        out.push_str(" FROM ");
        self.binds.push(Bind::Slot(plan.slot));
        self.d
            .listed_values(self.binds.len(), kind, plan.compared, out);
        out.push_str(" AS ");
        self.d.quote(LISTED, out);
        out.push_str(" CROSS JOIN ");
        self.source(&s.source, out);
        out.push_str(" AS ");
        self.d.quote(s.alias.as_str(), out);
        if let Some(f) = s
            .filter
            .as_ref()
            .filter(|f| !matches!(f, Pred::And(v) if v.is_empty()))
        {
            out.push_str(" WHERE ");
            self.pred(f, out);
        }
        out.push_str(") AS ");
        self.d.quote(ROWS, out);
        out.push_str(" WHERE ");
        self.d.quote(ROW, out);
        out.push_str(" > ");
        out.push_str(&plan.offset.to_string());
        out.push_str(" AND ");
        self.d.quote(ROW, out);
        out.push_str(" <= ");
        out.push_str(&plan.offset.saturating_add(plan.per_key).to_string());
        out.push_str(" ORDER BY ");
        self.d.quote(MULTIPLEX_KEY, out);
        out.push_str(", ");
        self.d.quote(ROW, out);
    }

    fn order_by(&mut self, order: &[OrderItem], out: &mut String) {
        if order.is_empty() {
            return;
        }
        out.push_str(" ORDER BY ");
        for (i, o) in order.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            match o {
                OrderItem::Random => out.push_str(self.d.random()),
                OrderItem::By(e, dir) => {
                    self.expr(e, out);
                    out.push_str(match dir {
                        Direction::Asc => " ASC",
                        Direction::Desc => " DESC",
                        Direction::Default => "",
                    });
                }
            }
        }
    }

    fn source(&mut self, src: &Source, out: &mut String) {
        match src {
            Source::Table(t) => self.d.quote(t.as_str(), out),
            Source::Catalog(view) => self.d.catalog(*view, out),
            Source::Select(s) => {
                out.push('(');
                self.select(s, out);
                out.push(')');
            }
        }
    }

    fn join(&mut self, j: &Join, out: &mut String) {
        out.push_str(match j.kind {
            JoinKind::Inner => " INNER JOIN ",
            JoinKind::Left => " LEFT JOIN ",
            JoinKind::Right => " RIGHT JOIN ",
        });
        self.source(&j.source, out);
        out.push_str(" AS ");
        self.d.quote(j.alias.as_str(), out);
        out.push_str(" ON ");
        self.pred(&j.on, out);
    }

    fn sub(&mut self, e: &Expr) -> String {
        let mut s = String::new();
        self.expr(e, &mut s);
        s
    }

    fn expr(&mut self, e: &Expr, out: &mut String) {
        match e {
            Expr::Column { table, name, .. } => {
                if let Some(t) = table {
                    self.d.quote(t.as_str(), out);
                    out.push('.');
                }
                self.d.quote(name.as_str(), out);
            }
            Expr::Alias(a) => self.d.quote(a.as_str(), out),
            Expr::Value(v) => self.bind(v, out),
            Expr::Slot(slot) => self.bind_slot(*slot, out),
            Expr::Star => out.push('*'),
            Expr::Raw(sql) => out.push_str(sql),
            Expr::Func {
                name,
                args,
                distinct,
            } => self.func(name, args, *distinct, out),
            Expr::Compare(l, op, r) => {
                out.push('(');
                self.expr(l, out);
                out.push(' ');
                out.push_str(op.sql());
                out.push(' ');
                self.expr(r, out);
                out.push(')');
            }
            Expr::IsNull(inner) => {
                out.push('(');
                self.expr(inner, out);
                out.push_str(" IS NULL)");
            }
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => self.case(operand.as_deref(), whens, otherwise.as_deref(), out),
            Expr::Window {
                func,
                partition,
                order,
            } => {
                self.expr(func, out);
                out.push(' ');
                self.over(partition, order, out);
            }
            Expr::DateAdd {
                base,
                amount,
                unit,
                subtract,
            } => {
                let b = self.arg(base);
                let n = self.arg(amount);
                write_date_add(self.d.engine(), &b, &n.sql, *unit, *subtract, out);
            }
            Expr::Match {
                columns,
                query,
                boolean,
            } => {
                let cols: Vec<String> = columns.iter().map(|c| self.sub(c)).collect();
                let q = self.typed_bind(query);
                write_match(self.d.engine(), &cols, &q, *boolean, out);
            }
            Expr::TextLength(inner) => {
                // A JSON or number column's length is its text's, as MySQL measures it.
                let arg = self.sub(inner);
                let kind = match &**inner {
                    Expr::Column { kind, .. } => *kind,
                    _ => ColumnKind::Other,
                };
                let mut text = String::new();
                self.d.as_text(&arg, kind, &mut text);
                self.d.text_length(&text, out);
            }
            Expr::JsonLength(inner) => {
                let arg = self.sub(inner);
                self.d.json_length(&arg, out);
            }
            Expr::Arith { lhs, op, rhs } => {
                // Literal operands are typed: PostgreSQL cannot infer `$1 + $2`.
                out.push('(');
                let l = self.arg(lhs);
                out.push_str(&l.sql);
                out.push_str(match op {
                    ArithOp::Add => " + ",
                    ArithOp::Sub => " - ",
                    ArithOp::Mul => " * ",
                    ArithOp::Div => " / ",
                    ArithOp::Mod => " % ",
                });
                let r = self.arg(rhs);
                out.push_str(&r.sql);
                out.push(')');
            }
            Expr::RowNumber { partition, order } => {
                out.push_str("row_number() ");
                self.over(partition, order, out);
            }
            Expr::Row(items) => {
                out.push('(');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let a = self.arg(item);
                    out.push_str(&a.sql);
                }
                out.push(')');
            }
            Expr::Cast(inner, t) => {
                out.push_str("CAST(");
                self.expr(inner, out);
                out.push_str(" AS ");
                out.push_str(self.d.cast_type(*t));
                out.push(')');
            }
        }
    }

    fn text_operand(&mut self, e: &Expr) -> String {
        let raw = self.sub(e);
        let mut s = String::new();
        match e {
            Expr::Column { kind, .. } => self.d.as_text(&raw, *kind, &mut s),
            _ => s = raw,
        }
        s
    }

    fn list(&mut self, items: &[Pred], joiner: &str, empty: &str, out: &mut String) {
        if items.is_empty() {
            out.push_str(empty);
            return;
        }
        if let [only] = items {
            return self.pred(only, out);
        }
        out.push('(');
        for (i, p) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(joiner);
            }
            self.pred(p, out);
        }
        out.push(')');
    }

    fn pred(&mut self, p: &Pred, out: &mut String) {
        match p {
            Pred::And(items) => self.list(items, " AND ", "(1=1)", out),
            Pred::Or(items) => self.list(items, " OR ", "(1=0)", out),
            Pred::Not(inner) => {
                out.push_str("NOT (");
                self.pred(inner, out);
                out.push(')');
            }
            Pred::Cmp(l, op, r) => {
                self.expr(l, out);
                out.push(' ');
                out.push_str(op.sql());
                out.push(' ');
                self.expr(r, out);
            }
            Pred::In(l, vals) => {
                self.expr(l, out);
                out.push_str(" IN (");
                for (i, v) in vals.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    self.bind(v, out);
                }
                out.push(')');
            }
            Pred::InSelect(l, s) => {
                self.expr(l, out);
                out.push_str(" IN (");
                self.select(s, out);
                out.push(')');
            }
            Pred::CmpSelect(l, op, q, s) => {
                self.expr(l, out);
                out.push(' ');
                out.push_str(op.sql());
                out.push_str(match q {
                    Some(Quantifier::Any) => " ANY (",
                    Some(Quantifier::All) => " ALL (",
                    None => " (",
                });
                self.select(s, out);
                out.push(')');
            }
            Pred::Exists(s) => {
                out.push_str("EXISTS (");
                self.select(s, out);
                out.push(')');
            }
            Pred::Like(l, pattern) => {
                let lhs = self.text_operand(l);
                out.push_str(&lhs);
                out.push_str(self.d.like());
                self.bind(pattern, out);
                out.push_str(self.d.like_escape());
            }
            Pred::Regex {
                lhs,
                pattern,
                case_insensitive,
            } => {
                let l = self.text_operand(lhs);
                let mut ph = String::new();
                self.bind(pattern, &mut ph);
                self.d.regex(&l, &ph, *case_insensitive, out);
            }
            Pred::Between(l, lo, hi) => {
                self.expr(l, out);
                out.push_str(" BETWEEN ");
                self.bind(lo, out);
                out.push_str(" AND ");
                self.bind(hi, out);
            }
            Pred::IsNull(l) => {
                self.expr(l, out);
                out.push_str(" IS NULL");
            }
            Pred::Raw(sql) => {
                out.push('(');
                out.push_str(sql);
                out.push(')');
            }
            Pred::JsonContains(l, json) => {
                let lhs = self.sub(l);
                let mut ph = String::new();
                self.bind(&Value::Text(json.clone()), &mut ph);
                out.push('(');
                out.push_str(&lhs);
                out.push_str(" IS NOT NULL AND ");
                self.d.json_contains(&lhs, &ph, out);
                out.push(')');
            }
        }
    }
}

/// Whether a HAVING condition aggregates (its depth is bounded by the planner).
fn pred_aggregates(p: &Pred) -> bool {
    match p {
        Pred::And(items) | Pred::Or(items) => items.iter().any(pred_aggregates),
        Pred::Not(inner) => pred_aggregates(inner),
        Pred::Cmp(l, _, r) => contains_aggregate(l) || contains_aggregate(r),
        _ => false,
    }
}
