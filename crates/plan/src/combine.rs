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

/// Parses a `@combine` string.
pub fn parse(text: &str) -> Result<Combine, PlanError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(PlanError::Invalid("@combine must not be empty".into()));
    }
    let expression_form = t.contains(" & ") || t.contains(" | ") || t.contains('(');
    if !expression_form && t.contains(',') {
        return Ok(legacy(t));
    }
    let mut p = P { s: t, i: 0 };
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
        if self.rest().starts_with('!') {
            self.i += 1;
            return Ok(Combine::Not(Box::new(self.factor()?)));
        }
        if self.rest().starts_with('(') {
            self.i += 1;
            let inner = self.or()?;
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

    #[test]
    fn expression_form() {
        let c = parse("(date> | !name!) & (contactIdList<> & name!)").expect("parses");
        assert_eq!(c.keys(), ["date>", "name!", "contactIdList<>", "name!"]);
        assert!(matches!(c, Combine::And(_)));
    }

    #[test]
    fn spacing_is_strict() {
        assert_eq!(
            parse("name~|tag~").expect("parses"),
            Combine::Key("name~|tag~".into())
        );
    }

    #[test]
    fn legacy_form() {
        let c = parse("&a,|b,!c").expect("parses");
        assert_eq!(c.keys(), ["a", "b", "c"]);
    }
}
