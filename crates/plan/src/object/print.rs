//! The printed form of a table object's plan: its statement as planned, each condition with
//! where its value comes from (`$0` a request slot, `@/Moment/userId` a reference, `parents[0]`
//! the parent rows of a batch, `getCurrentUserId()` a function run first), before any value
//! decides what the condition becomes.

use super::joins::JoinPlan;
use super::TablePlan;
use crate::condition::combine::Combine;
use crate::condition::{CondSpec, Operand};
use crate::query::print::{Clauses, Joined};
use crate::query::Quantifier;
use apijet_core::Role;
use apijet_request::Op;
use std::fmt::{self, Display, Formatter};

/// A condition: its left side, its operator as the key writes it, and its value's source.
struct Cond<'a>(&'a CondSpec, &'a TablePlan);

impl Display for Cond<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let Cond(c, plan) = self;
        if c.key.op == Op::Exists {
            let not = if c.key.logic == apijet_request::Logic::Not {
                "NOT "
            } else {
                ""
            };
            return write!(f, "{not}EXISTS {}", c.operand);
        }
        write!(f, "{} {} {}", c.lhs, operator(c), c.operand)?;
        if let Some(t) = plan.casts.get(&c.key.raw) {
            write!(f, "::{t}")?;
        }
        if c.stringify {
            f.write_str(" @string")?;
        }
        if c.trim {
            f.write_str(" @trim")?;
        }
        Ok(())
    }
}

/// The operator of a condition as its key spells it after the column (`{}`, `!~`, `%$`),
/// `=` and `!=` for plain keys.
fn operator(c: &CondSpec) -> &str {
    let raw = c.key.raw.as_str();
    let after = raw
        .get(c.key.column.len() + usize::from(c.key.length.is_some())..)
        .unwrap_or("");
    match after.strip_suffix('@').unwrap_or(after) {
        "" => "=",
        "!" => "!=",
        op => op,
    }
}

/// Where a condition's value comes from.
impl Display for Operand {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Literal(v) => write!(f, "{v}"),
            Operand::Slot(i) => write!(f, "${i}"),
            Operand::Ref(path) => write!(f, "@{path}"),
            Operand::Function(Ok(call)) => write!(f, "{call}"),
            Operand::Function(Err(e)) => write!(f, "(error: {e})"),
            Operand::Parent(n) => write!(f, "parents[{n}]"),
            Operand::Subquery(s, q) => {
                let q = match q {
                    Some(Quantifier::Any) => "ANY ",
                    Some(Quantifier::All) => "ALL ",
                    None => "",
                };
                write!(f, "{q}({s})")
            }
            Operand::Raw(sql) => write!(f, "RAW[{sql}]"),
        }
    }
}

/// A `@combine` tree over the conditions it names.
struct Combined<'a>(&'a Combine, &'a TablePlan);

impl Display for Combined<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let Combined(c, plan) = self;
        let list = |f: &mut Formatter<'_>, cs: &[Combine], sep: &str| {
            let parts: Vec<String> = cs
                .iter()
                .map(|c| format!("({})", Combined(c, plan)))
                .collect();
            write!(f, "{}", Joined(&parts, sep))
        };
        match c {
            Combine::Key(k) => match plan.conds.iter().find(|c| c.key.raw == *k) {
                Some(cond) => write!(f, "{}", Cond(cond, plan)),
                None => write!(f, "{k}"),
            },
            Combine::Not(c) => write!(f, "NOT ({})", Combined(c, plan)),
            Combine::And(cs) => list(f, cs, " AND "),
            Combine::Or(cs) => list(f, cs, " OR "),
        }
    }
}

impl TablePlan {
    /// The conjuncts of the statement's WHERE that `keep` keeps, in the order they are put
    /// together: the keys always AND-ed, the role's filter, the others, `@combine`.
    fn where_parts(&self, keep: impl Fn(&CondSpec) -> bool) -> Vec<String> {
        let combined: Vec<&str> = self.combine.as_ref().map_or(Vec::new(), Combine::keys);
        let forced = self.conds.iter().filter(|c| self.is_forced(c) && keep(c));
        let plain = self
            .conds
            .iter()
            .filter(|c| !self.is_forced(c) && !combined.contains(&c.key.raw.as_str()) && keep(c));
        let mut parts: Vec<String> = forced.map(|c| Cond(c, self).to_string()).collect();
        parts.extend(self.role_filter.as_ref().map(ToString::to_string));
        parts.extend(plain.map(|c| Cond(c, self).to_string()));
        parts.extend(
            self.combine
                .as_ref()
                .map(|c| format!("({})", Combined(c, self))),
        );
        parts
    }
}

impl Display for TablePlan {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let distinct = if self.distinct { "DISTINCT " } else { "" };
        let source = match &self.from {
            Some(sub) => format!("({sub})"),
            None => self.table_source().to_string(),
        };
        write!(
            f,
            "SELECT {distinct}{} FROM {source} AS {}",
            Joined(&self.columns, ", "),
            self.alias
        )?;
        let parts = self.where_parts(|_| true);
        if !parts.is_empty() {
            write!(f, " WHERE {}", Joined(&parts, " AND "))?;
        }
        let order = self.default_order();
        let clauses = Clauses {
            group: &self.group,
            having: self.having.as_ref(),
            order: &order,
        };
        write!(f, "{clauses}")?;
        if !matches!(self.role, Role::Unknown | Role::Login) || self.role_filter.is_some() {
            write!(f, " [as {}]", self.role.name())?;
        }
        if self.explain {
            f.write_str(" [@explain]")?;
        }
        if self.drop {
            f.write_str(" [@drop]")?;
        }
        for (k, v) in &self.echoes {
            write!(f, " [echo {k}: {v}]")?;
        }
        for p in &self.procedures {
            let args: Vec<String> = p
                .args
                .iter()
                .map(|a| match a {
                    super::procedure::ProcArg::Key(k) => k.clone(),
                    super::procedure::ProcArg::Value(v) => v.to_string(),
                })
                .collect();
            write!(
                f,
                " [CALL {}({}) as {}]",
                p.name,
                args.join(", "),
                p.answer_key
            )?;
        }
        Ok(())
    }
}

/// A join as it composes the joined statement: its ON clause (the vice's references to the
/// main object and the ON object's conditions), the vice's own conditions (WHERE, combined as
/// the join character says), what it selects and what it adds to GROUP BY, HAVING and ORDER
/// BY.
impl Display for JoinPlan {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let is_ref = |c: &CondSpec| matches!(c.operand, Operand::Ref(_));
        let mut on: Vec<String> = self
            .vice
            .conds
            .iter()
            .filter(|c| is_ref(c))
            .map(|c| Cond(c, &self.vice).to_string())
            .collect();
        if let Some(o) = &self.on {
            on.extend(o.where_parts(|_| true));
        }
        write!(f, "ON {}", Joined(&on, " AND "))?;
        let own = self.vice.where_parts(|c| !is_ref(c));
        if !own.is_empty() {
            write!(f, " WHERE {}", Joined(&own, " AND "))?;
        }
        write!(f, " SELECTS {}", Joined(&self.columns, ", "))?;
        let clauses = Clauses {
            group: &self.group,
            having: self.having.as_ref(),
            order: &self.order,
        };
        write!(f, "{clauses}")?;
        if self.reads_own_statement() {
            write!(f, " [through {}]", self.vice)?;
        }
        Ok(())
    }
}
