//! The one gate every column of a plan passes, whatever key, keyword or nesting named it.
//!
//! Rules about columns used to be checked on the request's spellings (condition keys, one
//! keyword at a time), so every new spelling was a new way around them: `@column`, `@having`,
//! `@order`, `@group`, `@key`, value expressions and subqueries all reached hidden columns. The
//! gate looks at the planner's output instead ([`Select`], [`Expr`], [`Pred`]): it walks a
//! statement, finds every column reference with the position it is used in, and asks
//! [`admit`] about each. A key form added later produces the same types and so passes the
//! same gate.
//!
//! The rule it enforces: a hidden column (`_password`, `_payPassword`: a name starting with
//! `_`) is never read. The single exception is the exact condition a private request's
//! `Request` structure names (MUST or REFUSE `!key`), e.g. the password check of a login: a
//! `column = value` conjunct of the object's own WHERE, which answers one yes or no per value
//! tried and nothing else. Anything else — a select item, a function argument, another
//! operator, OR or NOT, ON, GROUP BY, HAVING, ORDER BY, a subquery — is refused (403).

use crate::query::{CmpOp, Expr, Ident, OrderItem, Pred, Select, SelectItem, Source};
use crate::schema::Table;
use crate::PlanError;

/// Where a statement uses a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// In the select list, or inside a select-list expression.
    Output,
    /// `column = value` as a conjunct of WHERE: the form of a plain condition key.
    Equality,
    /// Anywhere else in WHERE: another operator, a function, OR, NOT, a length.
    Condition,
    /// In a join's ON.
    Join,
    /// In GROUP BY.
    Group,
    /// In HAVING.
    Having,
    /// In ORDER BY.
    Order,
}

impl Use {
    /// How a client wrote this use, for messages.
    fn spelled(self) -> &'static str {
        match self {
            Use::Output => "in the select list (@column)",
            Use::Equality | Use::Condition => "in a condition",
            Use::Join => "in a join condition (join, k@ references)",
            Use::Group => "in @group",
            Use::Having => "in @having",
            Use::Order => "in @order",
        }
    }
}

/// What a qualifier names in the statement that uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin<'s> {
    /// A table of the schema, by its SQL name.
    Table(&'s str),
    /// A derived table (a FROM or JOIN subquery): its columns are its select list's outputs,
    /// each of which passed the gate where it was made.
    Derived,
    /// No qualifier, or one the statement does not define.
    Unresolved,
}

/// One column reference of a statement.
#[derive(Debug, Clone, Copy)]
pub struct ColumnUse<'s> {
    /// The qualifier (the table's alias in its statement).
    pub qualifier: Option<&'s Ident>,
    /// The column.
    pub column: &'s Ident,
    /// What the qualifier names.
    pub origin: Origin<'s>,
    /// How the column is used.
    pub usage: Use,
    /// Inside a subquery or derived table, not in the statement's own clauses.
    pub nested: bool,
}

impl ColumnUse<'_> {
    /// A column of a schema table (or of an unknown source) whose name marks it hidden.
    pub fn is_hidden(&self) -> bool {
        self.column.as_str().starts_with('_') && self.origin != Origin::Derived
    }
}

/// What the gate knows of one object whose statement it checks: its alias, its table, and the
/// hidden columns it may compare with `=` (see [`crate::TablePlan::hidden_keys`]).
#[derive(Debug, Clone, Copy)]
pub struct Known<'p> {
    /// The object's alias in its statement.
    pub alias: &'p Ident,
    /// Its table.
    pub table: &'p Table,
    /// The exact keys on hidden columns its Request structure named.
    pub hidden_keys: &'p [String],
}

/// The gate's one question: may a statement made of the objects `known` use this column this
/// way? Hidden columns only as an [`Use::Equality`] of the object's own statement that its
/// structure granted; a column of a known table must exist in it.
pub fn admit(u: &ColumnUse<'_>, known: &[Known<'_>]) -> Result<(), PlanError> {
    // Every other position names columns the planner resolved through the schema; a join's ON
    // takes one from a reference path (`"id@": "/Moment/userId"`).
    if u.usage != Use::Join && !u.is_hidden() {
        return Ok(());
    }
    let object = u
        .qualifier
        .and_then(|q| known.iter().find(|k| k.alias == q))
        .filter(|k| matches!(u.origin, Origin::Table(sql) if sql == k.table.sql_name));
    if let (Some(k), false) = (object, u.nested) {
        if k.table.column(u.column.as_str()).is_none() {
            return Err(PlanError::UnknownColumn {
                table: k.table.api_name.clone(),
                column: u.column.to_string(),
            });
        }
    }
    if !u.is_hidden() {
        return Ok(());
    }
    let granted = u.usage == Use::Equality
        && !u.nested
        && object.is_some_and(|k| k.hidden_keys.iter().any(|c| c == u.column.as_str()));
    if granted {
        return Ok(());
    }
    let table = object.map_or("a subquery", |k| k.table.api_name.as_str());
    Err(hidden(table, u.column.as_str(), u.usage, u.nested))
}

fn hidden(table: &str, column: &str, usage: Use, nested: bool) -> PlanError {
    let place = if nested {
        "inside a subquery or @from@"
    } else {
        usage.spelled()
    };
    PlanError::Forbidden(format!(
        "{table}: {column} is a hidden column and cannot be used {place}: hidden columns are \
         never read; only a private request may compare one with =, as the exact key its \
         Request structure names (MUST or REFUSE !key)"
    ))
}

/// Passes every column reference of `select` through [`admit`].
pub fn admit_select(select: &Select, known: &[Known<'_>]) -> Result<(), PlanError> {
    Walker::new(&mut |u: ColumnUse<'_>| admit(&u, known)).select(select, false)
}

/// Every column reference of `select`, in the order the gate sees them.
pub fn uses(select: &Select) -> Vec<ColumnUse<'_>> {
    let mut out = Vec::new();
    let _ = Walker::new(&mut |u| {
        out.push(u);
        Ok(())
    })
    .select(select, false);
    out
}

/// An object's clauses before they are one statement: what [`admit_object`] checks.
pub(crate) struct ObjectParts<'p> {
    /// The object.
    pub known: Known<'p>,
    /// Its `@from@` subquery.
    pub from: Option<&'p Select>,
    /// Its select list.
    pub columns: &'p [SelectItem],
    /// GROUP BY.
    pub group: &'p [Expr],
    /// HAVING.
    pub having: Option<&'p Pred>,
    /// ORDER BY.
    pub order: &'p [OrderItem],
}

/// One condition of an object before its value is known.
pub(crate) struct PartCondition<'p> {
    /// The key as the client wrote it, for messages.
    pub key: &'p str,
    /// Its left side.
    pub lhs: &'p Expr,
    /// A plain `column: value` key on the column itself (see [`Use::Equality`]).
    pub exact: bool,
    /// Its subquery, if its value is one.
    pub subquery: Option<&'p Select>,
}

/// Passes an object's clauses through [`admit`] when it is planned, before references and
/// values complete it, so that a request is refused before any of its statements runs.
pub(crate) fn admit_object<'p>(
    parts: &ObjectParts<'p>,
    conds: impl Iterator<Item = PartCondition<'p>>,
) -> Result<(), PlanError> {
    let known = [parts.known];
    let mut visit = |u: ColumnUse<'_>| admit(&u, &known);
    let mut walk = Walker::new(&mut visit);
    match parts.from {
        Some(from) => {
            walk.select(from, true)?;
            walk.bind_origin(parts.known.alias, Origin::Derived);
        }
        None => walk.bind_origin(
            parts.known.alias,
            Origin::Table(&parts.known.table.sql_name),
        ),
    }
    for c in parts.columns {
        walk.expr(&c.expr, Use::Output)?;
    }
    for c in conds {
        let usage = if c.exact {
            Use::Equality
        } else {
            Use::Condition
        };
        walk.expr(c.lhs, usage).map_err(|e| match e {
            PlanError::Forbidden(m) => PlanError::Forbidden(format!("{}: {m}", c.key)),
            other => other,
        })?;
        if let Some(sub) = c.subquery {
            walk.select(sub, true)?;
        }
    }
    for g in parts.group {
        walk.expr(g, Use::Group)?;
    }
    if let Some(h) = parts.having {
        walk.pred(h, Use::Having, false)?;
    }
    walk.order(parts.order, Use::Order)
}

type Visit<'s, 'f> = &'f mut dyn FnMut(ColumnUse<'s>) -> Result<(), PlanError>;

/// Walks statements, resolving qualifiers against the aliases in scope. The trees it walks are
/// as deep as the planner's limits allow (expression depth, subquery depth), never deeper.
struct Walker<'s, 'f> {
    scopes: Vec<(&'s Ident, Origin<'s>)>,
    depth: usize,
    visit: Visit<'s, 'f>,
}

impl<'s, 'f> Walker<'s, 'f> {
    fn new(visit: Visit<'s, 'f>) -> Walker<'s, 'f> {
        Walker {
            scopes: Vec::new(),
            depth: 0,
            visit,
        }
    }

    /// Puts `alias` (reading from `source`) in scope for the clauses walked next.
    fn bind(&mut self, alias: &'s Ident, source: &'s Source) {
        let origin = match source {
            Source::Table(t) => Origin::Table(t.as_str()),
            Source::Select(_) => Origin::Derived,
            Source::Catalog(view) => Origin::Table(view.table_name()),
        };
        self.bind_origin(alias, origin);
    }

    /// Puts `alias` in scope as `origin`, for walking an object's clauses before they are one
    /// statement.
    fn bind_origin(&mut self, alias: &'s Ident, origin: Origin<'s>) {
        self.scopes.push((alias, origin));
    }

    fn source(&mut self, source: &'s Source) -> Result<(), PlanError> {
        match source {
            Source::Table(_) | Source::Catalog(_) => Ok(()),
            Source::Select(sub) => self.select(sub, true),
        }
    }

    /// A whole statement; `nested` when it is a subquery or derived table of another.
    fn select(&mut self, s: &'s Select, nested: bool) -> Result<(), PlanError> {
        let mark = self.scopes.len();
        self.depth += usize::from(nested);
        self.source(&s.source)?;
        for j in &s.joins {
            self.source(&j.source)?;
        }
        self.bind(&s.alias, &s.source);
        for j in &s.joins {
            self.bind(&j.alias, &j.source);
        }
        for j in &s.joins {
            self.pred(&j.on, Use::Join, false)?;
        }
        for c in &s.columns {
            self.expr(&c.expr, Use::Output)?;
        }
        if let Some(f) = &s.filter {
            self.pred(f, Use::Condition, true)?;
        }
        for g in &s.group {
            self.expr(g, Use::Group)?;
        }
        if let Some(h) = &s.having {
            self.pred(h, Use::Having, false)?;
        }
        self.order(&s.order, Use::Order)?;
        self.depth -= usize::from(nested);
        self.scopes.truncate(mark);
        Ok(())
    }

    fn order(&mut self, items: &'s [OrderItem], usage: Use) -> Result<(), PlanError> {
        for item in items {
            if let OrderItem::By(e, _) = item {
                self.expr(e, usage)?;
            }
        }
        Ok(())
    }

    /// A condition; `conjunct` while it is reached from WHERE through AND only.
    fn pred(&mut self, p: &'s Pred, usage: Use, conjunct: bool) -> Result<(), PlanError> {
        match p {
            Pred::And(ps) => ps.iter().try_for_each(|p| self.pred(p, usage, conjunct)),
            Pred::Or(ps) => ps.iter().try_for_each(|p| self.pred(p, usage, false)),
            Pred::Not(p) => self.pred(p, usage, false),
            Pred::Cmp(l, op, r) => {
                if let (true, Use::Condition, CmpOp::Eq, Expr::Column { .. }, true) =
                    (conjunct, usage, op, l, is_bound(r))
                {
                    return self.expr(l, Use::Equality);
                }
                self.expr(l, usage)?;
                self.expr(r, usage)
            }
            Pred::In(l, _)
            | Pred::Like(l, _)
            | Pred::Between(l, _, _)
            | Pred::IsNull(l)
            | Pred::JsonContains(l, _)
            | Pred::Regex { lhs: l, .. } => self.expr(l, usage),
            Pred::InSelect(l, sub) | Pred::CmpSelect(l, _, _, sub) => {
                self.expr(l, usage)?;
                self.select(sub, true)
            }
            Pred::Exists(sub) => self.select(sub, true),
            Pred::Raw(_) => Ok(()),
        }
    }

    fn expr(&mut self, e: &'s Expr, usage: Use) -> Result<(), PlanError> {
        match e {
            Expr::Column { table, name, .. } => {
                let origin = table
                    .as_ref()
                    .and_then(|q| self.scopes.iter().rev().find(|(a, _)| *a == q))
                    .map_or(Origin::Unresolved, |(_, o)| *o);
                (self.visit)(ColumnUse {
                    qualifier: table.as_ref(),
                    column: name,
                    origin,
                    usage,
                    nested: self.depth > 0,
                })
            }
            Expr::Alias(_) | Expr::Value(_) | Expr::Slot(_) | Expr::Star | Expr::Raw(_) => Ok(()),
            Expr::Func { args, .. } => args.iter().try_for_each(|a| self.expr(a, usage)),
            Expr::TextLength(x) | Expr::JsonLength(x) | Expr::Cast(x, _) | Expr::IsNull(x) => {
                self.expr(x, usage)
            }
            Expr::Arith { lhs, rhs, .. } | Expr::Compare(lhs, _, rhs) => {
                self.expr(lhs, usage)?;
                self.expr(rhs, usage)
            }
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => {
                if let Some(o) = operand {
                    self.expr(o, usage)?;
                }
                for (w, t) in whens {
                    self.expr(w, usage)?;
                    self.expr(t, usage)?;
                }
                match otherwise {
                    Some(o) => self.expr(o, usage),
                    None => Ok(()),
                }
            }
            Expr::Window {
                func,
                partition,
                order,
            } => {
                self.expr(func, usage)?;
                partition.iter().try_for_each(|p| self.expr(p, usage))?;
                self.order(order, usage)
            }
            Expr::RowNumber { partition, order } => {
                partition.iter().try_for_each(|p| self.expr(p, usage))?;
                self.order(order, usage)
            }
            Expr::DateAdd { base, amount, .. } => {
                self.expr(base, usage)?;
                self.expr(amount, usage)
            }
            Expr::Match { columns, .. } => columns.iter().try_for_each(|c| self.expr(c, usage)),
            Expr::Row(items) => items.iter().try_for_each(|c| self.expr(c, usage)),
        }
    }
}

/// A bound value (possibly cast by `@cast`): what a condition key's value becomes.
fn is_bound(e: &Expr) -> bool {
    match e {
        Expr::Value(_) | Expr::Slot(_) => true,
        Expr::Cast(inner, _) => matches!(**inner, Expr::Value(_) | Expr::Slot(_)),
        _ => false,
    }
}

#[cfg(test)]
mod hidden_columns;
#[cfg(test)]
mod subquery_roles;
