//! The printed form of planned statements: compact SQL-like text in no engine's dialect, for
//! printed plans (`ReadPlan` and `WritePlan` print with it) and messages. Identifiers are
//! written unquoted, request values as slots (`$0`), plan values as literals (`'text'`, `1`),
//! select-list aliases in parentheses (`(n)`), operator fragments as `RAW[…]`.

use super::{
    ArithOp, Assign, CastType, Delete, Direction, Expr, Insert, Join, JoinKind, OrderItem, Pred,
    Quantifier, Select, SelectItem, Source, Update,
};
use apijet_core::Value;
use std::fmt::{self, Display, Formatter, Write};

/// A list of items written with `sep` between them.
pub(crate) struct Joined<'a, T>(pub(crate) &'a [T], pub(crate) &'a str);

impl<T: Display> Display for Joined<'_, T> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(self.1)?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

/// A plan value as a literal.
pub(crate) struct Literal<'a>(pub(crate) &'a Value);

impl Display for Literal<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Text(s) => {
                f.write_char('\'')?;
                f.write_str(&s.replace('\'', "''"))?;
                f.write_char('\'')
            }
        }
    }
}

impl Display for ArithOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Mod => "%",
        })
    }
}

impl Display for CastType {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CastType::Date => "DATE",
            CastType::Timestamp => "TIMESTAMP",
            CastType::Time => "TIME",
            CastType::Integer => "INTEGER",
            CastType::Decimal => "DECIMAL",
            CastType::Text => "TEXT",
        })
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Column { table, name, .. } => match table {
                Some(t) => write!(f, "{t}.{name}"),
                None => write!(f, "{name}"),
            },
            Expr::Alias(a) => write!(f, "({a})"),
            Expr::Value(v) => write!(f, "{}", Literal(v)),
            Expr::Slot(i) => write!(f, "${i}"),
            Expr::Star => f.write_str("*"),
            Expr::Func {
                name,
                args,
                distinct,
            } => {
                let distinct = if *distinct { "DISTINCT " } else { "" };
                write!(f, "{name}({distinct}{})", Joined(args, ", "))
            }
            Expr::TextLength(e) => write!(f, "length({e})"),
            Expr::JsonLength(e) => write!(f, "json_length({e})"),
            Expr::Arith { lhs, op, rhs } => write!(f, "({lhs} {op} {rhs})"),
            Expr::Raw(sql) => write!(f, "RAW[{sql}]"),
            Expr::Cast(e, t) => write!(f, "CAST({e} AS {t})"),
            Expr::Compare(l, op, r) => write!(f, "({l} {} {r})", op.sql()),
            Expr::IsNull(e) => write!(f, "({e} IS NULL)"),
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => {
                f.write_str("CASE")?;
                if let Some(o) = operand {
                    write!(f, " {o}")?;
                }
                for (w, t) in whens {
                    write!(f, " WHEN {w} THEN {t}")?;
                }
                if let Some(e) = otherwise {
                    write!(f, " ELSE {e}")?;
                }
                f.write_str(" END")
            }
            Expr::Window {
                func,
                partition,
                order,
            } => write!(f, "{func} OVER ({})", Window(partition, order)),
            Expr::DateAdd {
                base,
                amount,
                unit,
                subtract,
            } => {
                let name = if *subtract { "date_sub" } else { "date_add" };
                write!(f, "{name}({base}, INTERVAL {amount} {})", unit.keyword())
            }
            Expr::Match {
                columns,
                query,
                boolean,
            } => {
                let mode = if *boolean { " IN BOOLEAN MODE" } else { "" };
                write!(
                    f,
                    "MATCH({}) AGAINST ({}{mode})",
                    Joined(columns, ", "),
                    Literal(query)
                )
            }
            Expr::Row(items) => write!(f, "({})", Joined(items, ", ")),
            Expr::RowNumber { partition, order } => {
                write!(f, "row_number() OVER ({})", Window(partition, order))
            }
        }
    }
}

/// `PARTITION BY … ORDER BY …` of a window.
struct Window<'a>(&'a [Expr], &'a [OrderItem]);

impl Display for Window<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if !self.0.is_empty() {
            write!(f, "PARTITION BY {}", Joined(self.0, ", "))?;
        }
        if !self.1.is_empty() {
            let sep = if self.0.is_empty() { "" } else { " " };
            write!(f, "{sep}ORDER BY {}", Joined(self.1, ", "))?;
        }
        Ok(())
    }
}

impl Display for OrderItem {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            OrderItem::By(e, Direction::Asc) => write!(f, "{e} ASC"),
            OrderItem::By(e, Direction::Desc) => write!(f, "{e} DESC"),
            OrderItem::By(e, Direction::Default) => write!(f, "{e}"),
            OrderItem::Random => f.write_str("rand()"),
        }
    }
}

impl Pred {
    /// Written as an operand of AND, OR or NOT: parenthesised unless it is one comparison.
    fn nested(&self) -> String {
        match self {
            Pred::And(ps) | Pred::Or(ps) if ps.len() > 1 => format!("({self})"),
            _ => self.to_string(),
        }
    }
}

impl Display for Pred {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let list = |f: &mut Formatter<'_>, ps: &[Pred], sep: &str, empty: &str| {
            if ps.is_empty() {
                return f.write_str(empty);
            }
            let parts: Vec<String> = ps.iter().map(Pred::nested).collect();
            write!(f, "{}", Joined(&parts, sep))
        };
        match self {
            Pred::And(ps) => list(f, ps, " AND ", "TRUE"),
            Pred::Or(ps) => list(f, ps, " OR ", "FALSE"),
            Pred::Not(p) => write!(f, "NOT {}", p.nested()),
            Pred::Cmp(l, op, r) => write!(f, "{l} {} {r}", op.sql()),
            Pred::In(e, vs) => {
                let vs: Vec<Literal<'_>> = vs.iter().map(Literal).collect();
                write!(f, "{e} IN ({})", Joined(&vs, ", "))
            }
            Pred::InSelect(e, s) => write!(f, "{e} IN ({s})"),
            Pred::CmpSelect(e, op, q, s) => {
                let q = match q {
                    Some(Quantifier::Any) => "ANY ",
                    Some(Quantifier::All) => "ALL ",
                    None => "",
                };
                write!(f, "{e} {} {q}({s})", op.sql())
            }
            Pred::Exists(s) => write!(f, "EXISTS ({s})"),
            Pred::Like(e, v) => write!(f, "{e} LIKE {}", Literal(v)),
            Pred::Regex {
                lhs,
                pattern,
                case_insensitive,
            } => {
                let op = if *case_insensitive { "~*" } else { "~" };
                write!(f, "{lhs} {op} {}", Literal(pattern))
            }
            Pred::Between(e, lo, hi) => {
                write!(f, "{e} BETWEEN {} AND {}", Literal(lo), Literal(hi))
            }
            Pred::IsNull(e) => write!(f, "{e} IS NULL"),
            Pred::JsonContains(e, json) => write!(f, "{e} CONTAINS {json}"),
            Pred::Raw(sql) => write!(f, "RAW[{sql}]"),
        }
    }
}

impl Display for SelectItem {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.expr {
            Expr::Column { name, .. } if *name == self.alias => write!(f, "{}", self.expr),
            e => write!(f, "{e} AS {}", self.alias),
        }
    }
}

impl Display for Source {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Source::Table(t) => write!(f, "{t}"),
            Source::Select(s) => write!(f, "({s})"),
            Source::Catalog(v) => write!(f, "{}.{}", v.schema_name(), v.table_name()),
        }
    }
}

impl Display for Join {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            JoinKind::Inner => "JOIN",
            JoinKind::Left => "LEFT JOIN",
            JoinKind::Right => "RIGHT JOIN",
        };
        write!(f, "{kind} {} AS {} ON {}", self.source, self.alias, self.on)
    }
}

/// The clauses after WHERE, written by every printed statement alike.
pub(crate) struct Clauses<'a> {
    pub(crate) group: &'a [Expr],
    pub(crate) having: Option<&'a Pred>,
    pub(crate) order: &'a [OrderItem],
}

impl Display for Clauses<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if !self.group.is_empty() {
            write!(f, " GROUP BY {}", Joined(self.group, ", "))?;
        }
        if let Some(h) = self.having {
            write!(f, " HAVING {h}")?;
        }
        if !self.order.is_empty() {
            write!(f, " ORDER BY {}", Joined(self.order, ", "))?;
        }
        Ok(())
    }
}

impl Display for Select {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let distinct = if self.distinct { "DISTINCT " } else { "" };
        write!(
            f,
            "SELECT {distinct}{} FROM {} AS {}",
            Joined(&self.columns, ", "),
            self.source,
            self.alias
        )?;
        for j in &self.joins {
            write!(f, " {j}")?;
        }
        if let Some(p) = &self.filter {
            write!(f, " WHERE {p}")?;
        }
        let clauses = Clauses {
            group: &self.group,
            having: self.having.as_ref(),
            order: &self.order,
        };
        write!(f, "{clauses}")?;
        if let Some(n) = self.limit {
            write!(f, " LIMIT {n}")?;
        }
        if self.offset > 0 {
            write!(f, " OFFSET {}", self.offset)?;
        }
        Ok(())
    }
}

impl Display for Insert {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "INSERT INTO {} ({})",
            self.table,
            Joined(&self.columns, ", ")
        )?;
        for (i, row) in self.rows.iter().enumerate() {
            let vs: Vec<Literal<'_>> = row.iter().map(Literal).collect();
            let sep = if i == 0 { " VALUES " } else { ", " };
            write!(f, "{sep}({})", Joined(&vs, ", "))?;
        }
        Ok(())
    }
}

impl Display for Assign {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Assign::Value(v) => write!(f, "{}", Literal(v)),
            Assign::Add(v) => write!(f, "+ {}", Literal(v)),
            Assign::Sub(v) => write!(f, "- {}", Literal(v)),
            Assign::Append(v) => write!(f, "|| {}", Literal(v)),
            Assign::RemoveText(v) => write!(f, "without {}", Literal(v)),
            Assign::Null => f.write_str("null"),
        }
    }
}

impl Display for Update {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let sets: Vec<String> = self
            .sets
            .iter()
            .map(|(c, a)| match a {
                Assign::Add(_) | Assign::Sub(_) | Assign::Append(_) | Assign::RemoveText(_) => {
                    format!("{c} = {c} {a}")
                }
                Assign::Value(_) | Assign::Null => format!("{c} = {a}"),
            })
            .collect();
        write!(
            f,
            "UPDATE {} SET {} WHERE {}",
            self.table,
            Joined(&sets, ", "),
            self.filter
        )?;
        if let Some(n) = self.limit {
            write!(f, " LIMIT {n}")?;
        }
        Ok(())
    }
}

impl Display for Delete {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "DELETE FROM {} WHERE {}", self.table, self.filter)?;
        if let Some(n) = self.limit {
            write!(f, " LIMIT {n}")?;
        }
        Ok(())
    }
}
