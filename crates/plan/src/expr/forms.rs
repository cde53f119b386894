//! The constructs with a grammar of their own: `CASE`, `OVER (…)`, `cast(x AS type)`,
//! `date_add(x, INTERVAL n unit)` and `match(…) AGAINST (…)`. Each counts one level of depth.

use super::{Names, Parser, Tok};
use crate::query::{CastType, Direction, Expr, IntervalUnit, OrderItem};
use crate::PlanError;
use apijet_core::Value;

impl<N: Names> Parser<'_, N> {
    /// `CASE [operand] WHEN … THEN … [ELSE …] END`, after `CASE`.
    pub(super) fn case(&mut self) -> Result<Expr, PlanError> {
        let operand = if self.at_keyword("when") {
            None
        } else {
            Some(Box::new(self.expr()?))
        };
        let mut whens = Vec::new();
        while self.at_keyword("when") {
            self.pos += 1;
            let cond = if operand.is_some() {
                self.expr()?
            } else {
                self.comparison()?
            };
            self.keyword("then")?;
            whens.push((cond, self.case_result()?));
        }
        if whens.is_empty() {
            return Err(self.err("CASE needs at least one WHEN … THEN …"));
        }
        let otherwise = if self.at_keyword("else") {
            self.pos += 1;
            Some(Box::new(self.case_result()?))
        } else {
            None
        };
        self.keyword("end")?;
        // `CASE sex WHEN '1' …`: MySQL compares a number column with a numeric text as
        // numbers; PostgreSQL refuses smallint = text. The text is bound as the number.
        if let Some(Expr::Column { kind, .. }) = operand.as_deref() {
            use crate::schema::ColumnKind;
            if matches!(
                kind,
                ColumnKind::Int | ColumnKind::Float | ColumnKind::Decimal
            ) {
                for (w, _) in &mut whens {
                    if let Expr::Value(apijet_core::Value::Text(t)) = w {
                        if let Some(n) = crate::expr::number(t.trim()) {
                            *w = Expr::Value(n);
                        }
                    }
                }
            }
        }
        Ok(Expr::Case {
            operand,
            whens,
            otherwise,
        })
    }

    /// What a `THEN` or `ELSE` answers: an expression, or, as the reference takes it, the
    /// unquoted text up to the next `WHEN`, `ELSE` or `END` (`WHEN '1' THEN 女`), bound as a
    /// value like an unquoted function argument.
    fn case_result(&mut self) -> Result<Expr, PlanError> {
        let start = self.pos;
        let depth = self.depth;
        let ends_here = |p: &Self| ["when", "else", "end"].iter().any(|k| p.at_keyword(k));
        match self.comparison() {
            Ok(e) if ends_here(self) => return Ok(e),
            Err(e @ (PlanError::Limit(_) | PlanError::UnknownFunction(_))) => return Err(e),
            _ => {}
        }
        self.depth = depth;
        self.pos = start;
        while self.peek().is_some() && !ends_here(self) {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.err("a value is missing after THEN or ELSE"));
        }
        let text = &self.src[self.toks[start].start..self.toks[self.pos - 1].end];
        if text.contains('\'') {
            return Err(self.err(&format!("'{text}' mixes quoted and unquoted text")));
        }
        self.key[start] = Some(format!("'{text}'"));
        for k in &mut self.key[start + 1..self.pos] {
            *k = Some(String::new());
        }
        Ok(Expr::Value(apijet_core::Value::Text(text.to_string())))
    }

    /// `OVER ( [PARTITION BY …] [ORDER BY … [ASC|DESC], …] )`, after `OVER (`.
    pub(super) fn window(&mut self, func: Expr) -> Result<Expr, PlanError> {
        self.descend()?;
        let mut partition = Vec::new();
        let mut order = Vec::new();
        if self.at_keyword("partition") {
            self.pos += 1;
            self.keyword("by")?;
            loop {
                partition.push(self.expr()?);
                if self.peek() != Some(&Tok::Comma) {
                    break;
                }
                self.pos += 1;
            }
        }
        if self.at_keyword("order") {
            self.pos += 1;
            self.keyword("by")?;
            loop {
                let e = self.expr()?;
                let dir = if self.at_keyword("asc") {
                    self.pos += 1;
                    Direction::Asc
                } else if self.at_keyword("desc") {
                    self.pos += 1;
                    Direction::Desc
                } else {
                    Direction::Default
                };
                order.push(OrderItem::By(e, dir));
                if self.peek() != Some(&Tok::Comma) {
                    break;
                }
                self.pos += 1;
            }
        }
        self.expect(Tok::RParen, ")")?;
        self.depth -= 1;
        Ok(Expr::Window {
            func: Box::new(func),
            partition,
            order,
        })
    }

    /// `cast(x AS type)` / `convert(x, type)`, after the `(`.
    pub(super) fn cast(&mut self, name: &str) -> Result<Expr, PlanError> {
        let inner = self.expr()?;
        if name == "cast" {
            self.keyword("as")?;
        } else {
            self.expect(Tok::Comma, ",")?;
        }
        let ty = match self.next() {
            Some(Tok::Name(t)) => t,
            _ => return Err(self.err("a type is expected")),
        };
        if self.at_keyword("integer") || self.at_keyword("int") {
            self.pos += 1;
        }
        let t = CastType::parse(&ty).ok_or_else(|| {
            self.err(&format!(
                "type {ty} is not supported; use {}",
                CastType::NAMES
            ))
        })?;
        self.expect(Tok::RParen, ")")?;
        Ok(Expr::Cast(Box::new(inner), t))
    }

    /// `date_add(x, INTERVAL n unit)`, `adddate(x, n)` and their subtracting twins.
    pub(super) fn date_add(&mut self, name: &str) -> Result<Expr, PlanError> {
        let base = self.arg()?;
        self.expect(Tok::Comma, ",")?;
        let (amount, unit) = if self.at_keyword("interval") {
            self.pos += 1;
            let amount = self.primary()?;
            let unit = match self.next() {
                Some(Tok::Name(u)) => IntervalUnit::parse(&u),
                _ => None,
            }
            .ok_or_else(|| {
                self.err("INTERVAL n UNIT needs a unit: SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR")
            })?;
            (amount, unit)
        } else if matches!(name, "adddate" | "subdate") {
            (self.expr()?, IntervalUnit::Day)
        } else {
            return Err(self.err(&format!(
                "{name} needs INTERVAL n UNIT as its second argument"
            )));
        };
        self.expect(Tok::RParen, ")")?;
        Ok(Expr::DateAdd {
            base: Box::new(base),
            amount: Box::new(amount),
            unit,
            subtract: matches!(name, "date_sub" | "subdate"),
        })
    }

    /// `match(col, …) AGAINST ('text' [IN NATURAL LANGUAGE MODE | IN BOOLEAN MODE])`.
    pub(super) fn full_text(&mut self) -> Result<Expr, PlanError> {
        let mut columns = Vec::new();
        loop {
            let e = self.primary()?;
            if !matches!(e, Expr::Column { .. }) {
                return Err(self.err("match() takes column names"));
            }
            columns.push(e);
            match self.next() {
                Some(Tok::Comma) => continue,
                Some(Tok::RParen) => break,
                _ => return Err(self.err("')' is missing")),
            }
        }
        self.keyword("against")?;
        self.expect(Tok::LParen, "(")?;
        let query = match self.next() {
            Some(Tok::Str(s)) => Value::Text(s),
            _ => return Err(self.err("AGAINST takes a quoted search text")),
        };
        let mut boolean = false;
        if self.at_keyword("in") {
            self.pos += 1;
            if self.at_keyword("boolean") {
                boolean = true;
                self.pos += 1;
            } else {
                self.keyword("natural")?;
                self.keyword("language")?;
            }
            self.keyword("mode")?;
        }
        self.expect(Tok::RParen, ")")?;
        Ok(Expr::Match {
            columns,
            query,
            boolean,
        })
    }
}
