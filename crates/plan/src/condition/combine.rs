//! `@combine`: how an object's conditions combine (protocol §4.4).
//!
//! The expression form (`"(a | !b) & c"`) needs exactly one space around `&` and `|`, as the
//! reference does: `"name~|tag~"` names one key `name~|tag~`, which then does not exist. The
//! legacy comma form (`"&a,|b,!c"`) is accepted too.

use crate::PlanError;

/// A parsed `@combine` value over condition keys.
#[derive(Debug, Clone, PartialEq)]
pub enum Combine {
    /// A condition key as sent.
    Key(String),
    /// Negation.
    Not(Box<Combine>),
    /// All of.
    And(Vec<Combine>),
    /// Any of.
    Or(Vec<Combine>),
}

impl Combine {
    /// Every key the expression mentions, in order.
    pub fn keys(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Combine::Key(k) => out.push(k),
            Combine::Not(c) => c.collect(out),
            Combine::And(cs) | Combine::Or(cs) => cs.iter().for_each(|c| c.collect(out)),
        }
    }
}

/// Parses a `@combine` string; parentheses may nest `max_depth` deep.
pub fn parse(text: &str, max_depth: usize) -> Result<Combine, PlanError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(PlanError::Invalid("@combine must not be empty".into()));
    }
    let expression_form = t.contains(" & ") || t.contains(" | ") || t.contains('(');
    if !expression_form && t.contains(',') {
        return Ok(legacy(t));
    }
    let mut p = P {
        s: t,
        i: 0,
        depth: 0,
        max_depth,
    };
    let c = p.or()?;
    if p.i < p.s.len() {
        return Err(PlanError::Invalid(format!(
            "@combine:'{text}' has unexpected text at '{}'",
            &p.s[p.i..]
        )));
    }
    Ok(c)
}

fn legacy(t: &str) -> Combine {
    let (mut ands, mut ors, mut nots) = (Vec::new(), Vec::new(), Vec::new());
    for item in t.split(',') {
        let item = item.trim();
        if let Some(k) = item.strip_prefix('&') {
            ands.push(Combine::Key(k.to_string()));
        } else if let Some(k) = item.strip_prefix('!') {
            nots.push(Combine::Key(k.to_string()));
        } else {
            ors.push(Combine::Key(item.trim_start_matches('|').to_string()));
        }
    }
    let mut parts = ands;
    if !ors.is_empty() {
        parts.push(Combine::Or(ors));
    }
    if !nots.is_empty() {
        parts.push(Combine::Not(Box::new(Combine::Or(nots))));
    }
    Combine::And(parts)
}

struct P<'a> {
    s: &'a str,
    i: usize,
    depth: usize,
    max_depth: usize,
}

impl P<'_> {
    fn rest(&self) -> &str {
        &self.s[self.i..]
    }

    fn or(&mut self) -> Result<Combine, PlanError> {
        let mut items = vec![self.and()?];
        while self.rest().starts_with(" | ") {
            self.i += 3;
            items.push(self.and()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Combine::Or(items)
        })
    }

    fn and(&mut self) -> Result<Combine, PlanError> {
        let mut items = vec![self.factor()?];
        while self.rest().starts_with(" & ") {
            self.i += 3;
            items.push(self.factor()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Combine::And(items)
        })
    }

    fn factor(&mut self) -> Result<Combine, PlanError> {
        // A run of `!` is read in a loop: only its parity matters.
        let mut negations = 0usize;
        while self.rest().starts_with('!') {
            self.i += 1;
            negations += 1;
        }
        let inner = self.operand()?;
        Ok(if negations % 2 == 1 {
            Combine::Not(Box::new(inner))
        } else {
            inner
        })
    }

    fn operand(&mut self) -> Result<Combine, PlanError> {
        if self.rest().starts_with('(') {
            self.i += 1;
            self.depth += 1;
            if self.depth > self.max_depth {
                return Err(PlanError::Limit(format!(
                    "@combine: parentheses nest deeper than the {} levels allowed (setting \
                     max_expr_depth)",
                    self.max_depth
                )));
            }
            let inner = self.or()?;
            self.depth -= 1;
            if !self.rest().starts_with(')') {
                return Err(PlanError::Invalid(format!(
                    "@combine:'{}' is missing a ')'",
                    self.s
                )));
            }
            self.i += 1;
            return Ok(inner);
        }
        let start = self.i;
        while self.i < self.s.len() {
            let r = self.rest();
            if r.starts_with(" & ") || r.starts_with(" | ") || r.starts_with(')') {
                break;
            }
            self.i += r.chars().next().map_or(1, char::len_utf8);
        }
        if start == self.i {
            return Err(PlanError::Invalid(format!(
                "@combine:'{}' has an empty operand",
                self.s
            )));
        }
        Ok(Combine::Key(self.s[start..self.i].to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_test(text: &str) -> Result<Combine, PlanError> {
        parse(text, 32)
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}a{}", "(".repeat(33), ")".repeat(33));
        assert!(matches!(parse(&deep, 32), Err(PlanError::Limit(_))));
        let ok = format!("{}a{}", "(".repeat(32), ")".repeat(32));
        assert_eq!(
            parse(&ok, 32).expect("32 levels parse"),
            Combine::Key("a".into())
        );
        let bangs = format!("{}a", "!".repeat(200_001));
        assert_eq!(
            parse(&bangs, 32).expect("negations parse"),
            Combine::Not(Box::new(Combine::Key("a".into())))
        );
    }

    #[test]
    fn expression_form() {
        let c = parse_test("(date> | !name!) & (contactIdList<> & name!)").expect("parses");
        assert_eq!(c.keys(), ["date>", "name!", "contactIdList<>", "name!"]);
        assert!(matches!(c, Combine::And(_)));
    }

    #[test]
    fn spacing_is_strict() {
        assert_eq!(
            parse_test("name~|tag~").expect("parses"),
            Combine::Key("name~|tag~".into())
        );
    }

    #[test]
    fn legacy_form() {
        let c = parse_test("&a,|b,!c").expect("parses");
        assert_eq!(c.keys(), ["a", "b", "c"]);
    }
}
