//! What a read depends on, taken from its planned statements while the plan is built: the
//! tables every statement reads (its FROM, its joins, every subquery and derived table, however
//! a key spelled them, and the tables of the role's and `Access` rules' filters), and whether
//! anything but those tables decides its answer.
//!
//! A subscription to a read (live answers) is refetched when one of its tables was written; a
//! dependency taken from the request's keys would miss `@from@`, subqueries in conditions and
//! joins, so it is taken here, from what the planner produced. Tables are named by their SQL
//! names, as the write plan names what it changes and as PostgreSQL triggers name them: two API
//! names (`Access.alias`) of one table are one dependency.

use crate::condition::{CondSpec, Operand};
use crate::query::{Expr, OrderItem, Pred, Select, Source};
use crate::TablePlan;
use apijet_request::Op;
use serde_json::Value as Json;
use std::collections::BTreeSet;

/// The dependencies of a read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dependencies {
    /// The SQL names of the tables its statements read.
    pub tables: BTreeSet<String>,
    /// A part apijet cannot see into (a configured raw SQL fragment, a stored procedure, a
    /// catalogue view): a write to any table, or none, may change the answer.
    pub opaque: bool,
    /// The clock or chance decides part of it (`now()`, `rand()`): the answer may change
    /// without any write.
    pub volatile: bool,
    /// Slots whose value, a range expression (`"date{}": "now()>date"`), may call a function:
    /// the request's value there decides whether the read is volatile.
    pub expression_slots: Vec<usize>,
    /// The parts of the visitor its statements and functions read (a role's row filter, the
    /// owner ids a role lets conditions name, `getCurrentUser()`, the visitor functions).
    pub visitor: VisitorParts,
    /// `@explain` somewhere: the answer tells how it was read, not only what it holds.
    pub explained: bool,
}

/// The parts of the visitor an answer is decided by, beyond whether there is one (which
/// every plan is keyed by): two visitors equal in these parts get the same answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct VisitorParts {
    /// The visitor's id (OWNER and CIRCLE rows, `getCurrentUser()`, `getCurrentUserId()`).
    pub id: bool,
    /// The visitor's contacts (CONTACT and CIRCLE rows, `getCurrentContactIdList()`).
    pub contacts: bool,
}

impl VisitorParts {
    /// Adds the parts `role`'s row filter reads.
    pub(crate) fn note_role(&mut self, role: apijet_core::Role) {
        use apijet_core::Role;
        match role {
            Role::Unknown | Role::Login => {}
            Role::Owner => self.id = true,
            Role::Contact => self.contacts = true,
            // CIRCLE reads both; ADMIN is taken as reading everything it may be given.
            Role::Circle | Role::Admin => {
                self.id = true;
                self.contacts = true;
            }
        }
    }

    /// Adds the parts a remote function reads.
    pub(crate) fn note_call(&mut self, call: &crate::call::Planned) {
        use crate::call::Function;
        match call.as_ref().map(|c| c.function) {
            Ok(Function::GetCurrentUserId | Function::GetCurrentUserIdAsList) => self.id = true,
            Ok(Function::GetCurrentContactIdList) => self.contacts = true,
            _ => {}
        }
    }

    /// Adds `other`'s parts.
    pub fn merge(&mut self, other: VisitorParts) {
        self.id |= other.id;
        self.contacts |= other.contacts;
    }
}

impl Dependencies {
    /// Whether a write to the table of SQL name `table` may change the answer.
    pub fn depends_on(&self, table: &str) -> bool {
        self.opaque || self.tables.contains(table)
    }

    /// Whether the answer may change without any write, for a request with these slot
    /// `values`.
    pub fn volatile_with(&self, values: &[Json]) -> bool {
        self.volatile
            || self.expression_slots.iter().any(|&i| match values.get(i) {
                Some(Json::String(s)) => names_volatile_function(s),
                _ => false,
            })
    }

    /// Adds everything `other` depends on.
    pub fn merge(&mut self, other: &Dependencies) {
        self.tables.extend(other.tables.iter().cloned());
        self.opaque |= other.opaque;
        self.volatile |= other.volatile;
        for &slot in &other.expression_slots {
            if !self.expression_slots.contains(&slot) {
                self.expression_slots.push(slot);
            }
        }
        self.visitor.merge(other.visitor);
        self.explained |= other.explained;
    }

    /// Adds what the statements of a planned table object read: its source, select list,
    /// conditions (their subqueries, raw fragments and the values that may be expressions),
    /// the role's filter, grouping, ordering and stored procedures.
    pub(crate) fn note_object(&mut self, plan: &TablePlan) {
        match &plan.from {
            Some(sub) => self.add(sub),
            None => self.source(&plan.table_source()),
        }
        for c in &plan.columns {
            self.expr(&c.expr);
        }
        for c in &plan.conds {
            self.condition(c);
        }
        if let Some(p) = &plan.role_filter {
            self.pred(p);
        }
        if plan.role_filter.is_some() || plan.owner_reach.is_some() {
            self.visitor.note_role(plan.role);
        }
        self.explained |= plan.explain;
        plan.group.iter().for_each(|g| self.expr(g));
        if let Some(h) = &plan.having {
            self.pred(h);
        }
        self.order(&plan.order);
        if !plan.procedures.is_empty() {
            self.opaque = true;
        }
    }

    fn condition(&mut self, c: &CondSpec) {
        self.expr(&c.lhs);
        if let Operand::Function(call) = &c.operand {
            self.visitor.note_call(call);
        }
        match &c.operand {
            Operand::Subquery(sub, _) => self.add(sub),
            Operand::Raw(_) => self.opaque = true,
            // A range given as text is an expression, which may call any allowed function.
            Operand::Slot(i) if c.key.op == Op::In => self.expression_slots.push(*i),
            Operand::Literal(Json::String(s)) if c.key.op == Op::In => {
                self.volatile |= names_volatile_function(s)
            }
            // A value known only while the plan runs may be such a text too.
            Operand::Ref(_) | Operand::Function(_) if c.key.op == Op::In => self.volatile = true,
            _ => {}
        }
    }

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

    fn source(&mut self, source: &Source) {
        match source {
            Source::Table(t) => {
                if !self.tables.contains(t.as_str()) {
                    self.tables.insert(t.as_str().to_string());
                }
            }
            Source::Select(sub) => self.add(sub),
            // The catalogue changes with the schema, which no write names.
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
            Expr::Column { .. } | Expr::Alias(_) | Expr::Value(_) | Expr::Slot(_) | Expr::Star => {}
            Expr::Raw(_) => self.opaque = true,
            Expr::Func { name, args, .. } => {
                if crate::expr::functions::VOLATILE.contains(name) {
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

/// Whether an expression's text names a function whose value changes without any write.
fn names_volatile_function(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|word| {
            crate::expr::functions::VOLATILE
                .iter()
                .any(|f| f.eq_ignore_ascii_case(word))
        })
}
