//! What a select becomes beside itself: the server's own lookups on one table, counts of its
//! rows, a total order for pages read in chunks, and the pages of many parents in one
//! statement.

use super::{CmpOp, Direction, Expr, Ident, OrderItem, Pred, Select, SelectItem, Source};
use apijet_core::Value;

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
