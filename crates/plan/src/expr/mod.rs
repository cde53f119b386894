//! The tiny expression language of `@column`, `@having`, `@key` and `{}` range strings.
//!
//! The reference splices these strings into SQL after a regex check. We parse them instead:
//! names must resolve to columns or aliases, functions must be on the allow-list, literals
//! become bound values. Whatever does not parse is refused with the offending text.

mod forms;
pub mod functions;
mod size;
mod tokens;

use crate::query::{ArithOp, CmpOp, Expr};
use crate::{ExprLimits, PlanError};
use apijet_core::{Capabilities, Value};
use functions::{contains_aggregate, FnKind};
pub(crate) use tokens::{tokenize, Tok, Token};

/// How names inside an expression become expressions.
pub(crate) trait Names {
    /// `name` as a column, alias or `@key` expression.
    fn resolve(&self, name: &str) -> Result<Expr, PlanError>;
    /// The bounds on the client's expressions.
    fn limits(&self) -> ExprLimits;
}

/// Refuses a client text longer than `max` bytes before any work is spent on it.
pub(crate) fn check_length(what: &str, text: &str, max: usize) -> Result<(), PlanError> {
    if text.len() > max {
        return Err(PlanError::Limit(format!(
            "{what}: {} bytes is longer than the {max} allowed (setting max_expr_length)",
            text.len()
        )));
    }
    Ok(())
}

/// Shortens a client text for an error message.
pub(crate) fn excerpt(text: &str) -> &str {
    match text.char_indices().nth(60) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// A recursive-descent parser whose recursion is bounded: every parenthesis, call, CASE,
/// window and chained operator counts one level against `max_depth`, so the tree it builds
/// (and every recursive walk over it later: rendering, cloning, dropping) is at most that deep.
///
/// Beside the expression it writes the item's text as the reference names an unaliased select
/// item (columns back-quoted, unquoted literal arguments quoted): [`Parser::key_text`].
pub(crate) struct Parser<'a, N: Names> {
    toks: Vec<Token>,
    /// How each token reads in the reference's text; `None` = as written.
    key: Vec<Option<String>>,
    pos: usize,
    names: &'a N,
    src: &'a str,
    depth: usize,
    max_depth: usize,
    engine: Capabilities,
    limits: ExprLimits,
}

fn is_word(t: &Tok) -> bool {
    matches!(t, Tok::Name(_) | Tok::Num(_) | Tok::Str(_))
}

impl<'a, N: Names> Parser<'a, N> {
    pub(crate) fn new(src: &'a str, names: &'a N) -> Result<Self, PlanError> {
        let limits = names.limits();
        check_length(excerpt(src), src, limits.max_length)?;
        let toks = tokenize(src).map_err(|e| PlanError::Invalid(format!("'{src}': {e}")))?;
        Ok(Parser {
            key: vec![None; toks.len()],
            toks,
            pos: 0,
            names,
            src,
            depth: 0,
            max_depth: limits.max_depth,
            engine: limits.engine,
            limits,
        })
    }

    fn descend(&mut self) -> Result<(), PlanError> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(PlanError::Limit(format!(
                "'{}' is nested deeper than the {} levels allowed (setting max_expr_depth)",
                excerpt(self.src),
                self.max_depth
            )));
        }
        Ok(())
    }

    fn err(&self, what: &str) -> PlanError {
        PlanError::Invalid(format!("'{}' is not a valid expression: {what}", self.src))
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    fn peek_at(&self, n: usize) -> Option<&Tok> {
        self.toks.get(self.pos + n).map(|t| &t.tok)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.tok.clone());
        self.pos += 1;
        t
    }

    /// Whether the next token is the keyword `kw`.
    fn at_keyword(&self, kw: &str) -> bool {
        matches!(self.peek(), Some(Tok::Name(n)) if n.eq_ignore_ascii_case(kw))
    }

    fn keyword(&mut self, kw: &str) -> Result<(), PlanError> {
        if self.at_keyword(kw) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(&format!("{kw} is expected")))
        }
    }

    fn expect(&mut self, tok: Tok, what: &str) -> Result<(), PlanError> {
        if self.peek() == Some(&tok) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(&format!("'{what}' is missing")))
        }
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    pub(crate) fn peek_cmp(&self) -> Option<CmpOp> {
        match self.peek() {
            Some(Tok::Cmp(op)) => Some(*op),
            _ => None,
        }
    }

    pub(crate) fn take_cmp(&mut self) -> Result<CmpOp, PlanError> {
        match self.next() {
            Some(Tok::Cmp(op)) => Ok(op),
            _ => Err(self.err("a comparison is expected")),
        }
    }

    /// The text the reference gives an unaliased select item: the client's text with columns
    /// back-quoted, unquoted literal arguments quoted, and no spaces but between words.
    pub(crate) fn key_text(&self) -> String {
        let mut out = String::with_capacity(self.src.len() + 8);
        let mut prev: Option<&Token> = None;
        for (t, key) in self.toks.iter().zip(&self.key) {
            let text = key.as_deref().unwrap_or(&self.src[t.start..t.end]);
            if text.is_empty() {
                continue;
            }
            if let Some(p) = prev {
                let spaced = p.end < t.start;
                if spaced && (is_word(&p.tok) || matches!(p.tok, Tok::RParen)) && is_word(&t.tok)
                    || spaced && is_word(&p.tok) && matches!(t.tok, Tok::LParen)
                {
                    out.push(' ');
                }
            }
            out.push_str(text);
            prev = Some(t);
        }
        out
    }

    /// An expression, optionally compared with another (`(toId)%3=0`, a CASE condition).
    pub(crate) fn comparison(&mut self) -> Result<Expr, PlanError> {
        let lhs = self.expr()?;
        match self.peek_cmp() {
            Some(op) => {
                self.pos += 1;
                self.descend()?;
                let rhs = self.expr()?;
                self.depth -= 1;
                Ok(Expr::Compare(Box::new(lhs), op, Box::new(rhs)))
            }
            None => Ok(lhs),
        }
    }

    /// Additive level.
    pub(crate) fn expr(&mut self) -> Result<Expr, PlanError> {
        let mut lhs = self.term()?;
        let base = self.depth;
        while let Some(Tok::Arith(op @ (ArithOp::Add | ArithOp::Sub))) = self.peek().cloned() {
            self.pos += 1;
            self.descend()?;
            let rhs = self.term()?;
            lhs = Expr::Arith {
                lhs: Box::new(lhs),
                op,
                rhs: Box::new(rhs),
            };
        }
        self.depth = base;
        Ok(lhs)
    }

    /// Continues an expression whose left operand is already known (`{}` items like `%5+1`).
    pub(crate) fn continue_expr(&mut self, lhs: Expr) -> Result<Expr, PlanError> {
        let mut lhs = lhs;
        let base = self.depth;
        loop {
            if matches!(self.peek(), Some(Tok::Arith(_) | Tok::Star)) {
                self.descend()?;
            }
            match self.peek().cloned() {
                Some(Tok::Arith(op @ (ArithOp::Mul | ArithOp::Div | ArithOp::Mod))) => {
                    self.pos += 1;
                    let rhs = self.primary()?;
                    lhs = Expr::Arith {
                        lhs: Box::new(lhs),
                        op,
                        rhs: Box::new(rhs),
                    };
                }
                Some(Tok::Star) => {
                    self.pos += 1;
                    let rhs = self.primary()?;
                    lhs = Expr::Arith {
                        lhs: Box::new(lhs),
                        op: ArithOp::Mul,
                        rhs: Box::new(rhs),
                    };
                }
                Some(Tok::Arith(op)) => {
                    self.pos += 1;
                    let rhs = self.term()?;
                    lhs = Expr::Arith {
                        lhs: Box::new(lhs),
                        op,
                        rhs: Box::new(rhs),
                    };
                }
                _ => {
                    self.depth = base;
                    return Ok(lhs);
                }
            }
        }
    }

    fn term(&mut self) -> Result<Expr, PlanError> {
        let mut lhs = self.primary()?;
        let base = self.depth;
        loop {
            let op = match self.peek() {
                Some(Tok::Arith(op @ (ArithOp::Mul | ArithOp::Div | ArithOp::Mod))) => *op,
                Some(Tok::Star) => ArithOp::Mul,
                _ => {
                    self.depth = base;
                    return Ok(lhs);
                }
            };
            self.pos += 1;
            self.descend()?;
            let rhs = self.primary()?;
            lhs = Expr::Arith {
                lhs: Box::new(lhs),
                op,
                rhs: Box::new(rhs),
            };
        }
    }

    fn primary(&mut self) -> Result<Expr, PlanError> {
        let at = self.pos;
        match self.next() {
            Some(Tok::Num(n)) => Ok(Expr::Value(number(&n).ok_or_else(|| self.err(&n))?)),
            Some(Tok::Arith(ArithOp::Sub)) => match self.next() {
                Some(Tok::Num(n)) => Ok(Expr::Value(
                    number(&format!("-{n}")).ok_or_else(|| self.err(&n))?,
                )),
                _ => Err(self.err("a number is expected after '-'")),
            },
            Some(Tok::Str(s)) => Ok(Expr::Value(Value::Text(s))),
            Some(Tok::LParen) => {
                self.descend()?;
                let inner = self.expr()?;
                // `(a,b)`: a row, as `@key` defines one to compare with a subquery's rows.
                let mut row = Vec::new();
                while self.peek() == Some(&Tok::Comma) {
                    self.pos += 1;
                    row.push(self.expr()?);
                }
                self.depth -= 1;
                match self.next() {
                    Some(Tok::RParen) if row.is_empty() => Ok(inner),
                    Some(Tok::RParen) => {
                        row.insert(0, inner);
                        Ok(Expr::Row(row))
                    }
                    _ => Err(self.err("')' is missing")),
                }
            }
            Some(Tok::Name(name)) => {
                let quoted = self.src.as_bytes().get(self.toks[at].start) == Some(&b'`');
                if !quoted && self.peek() == Some(&Tok::LParen) {
                    self.pos += 1;
                    self.descend()?;
                    let call = self.call(&name);
                    self.depth -= 1;
                    call
                } else if !quoted && name.eq_ignore_ascii_case("case") {
                    self.descend()?;
                    let case = self.case();
                    self.depth -= 1;
                    case
                } else if !quoted && name.eq_ignore_ascii_case("null") {
                    Ok(Expr::Value(Value::Null))
                } else {
                    let e = self.names.resolve(&name)?;
                    if matches!(e, Expr::Column { .. }) {
                        self.key[at] = Some(format!("`{name}`"));
                    }
                    Ok(e)
                }
            }
            _ => Err(self.err("a value, column or function is expected")),
        }
    }

    /// The index of the token that ends the argument starting at `from`: the next `,` or `)`
    /// outside parentheses (or the end of the text).
    fn arg_end(&self, from: usize) -> usize {
        let mut depth = 0usize;
        for (i, t) in self.toks.iter().enumerate().skip(from) {
            match t.tok {
                Tok::LParen => depth += 1,
                Tok::RParen if depth == 0 => return i,
                Tok::RParen => depth -= 1,
                Tok::Comma if depth == 0 => return i,
                _ => {}
            }
        }
        self.toks.len()
    }

    /// One function argument. As in the reference, an argument that is neither a column, a
    /// number, a quoted string nor an expression of those is an unquoted text literal
    /// (`date_format(date,%Y-%m-%d)`), bound like any other value.
    fn arg(&mut self) -> Result<Expr, PlanError> {
        let start = self.pos;
        let end = self.arg_end(start);
        if start == end {
            return Err(self.err("an argument is missing"));
        }
        let depth = self.depth;
        match self.comparison() {
            Ok(e) if self.pos == end => return Ok(e),
            Ok(_) => {}
            Err(e @ (PlanError::Invalid(_) | PlanError::UnknownColumn { .. })) => {
                // A lone name is a column, as in the reference: an unknown one is refused.
                if end == start + 1 && matches!(self.toks[start].tok, Tok::Name(_)) {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
        self.depth = depth;
        self.pos = end;
        let text = &self.src[self.toks[start].start..self.toks[end - 1].end];
        if text.split('.').all(apijet_request::is_name) {
            return Err(PlanError::Invalid(format!(
                "'{}': '{text}' names a column of another table; only this table's columns \
                 may be named",
                self.src
            )));
        }
        if text.contains('\'') {
            return Err(self.err(&format!("'{text}' mixes quoted and unquoted text")));
        }
        self.key[start] = Some(format!("'{text}'"));
        for k in &mut self.key[start + 1..end] {
            *k = Some(String::new());
        }
        Ok(Expr::Value(Value::Text(text.to_string())))
    }

    fn refuse_on_engine(&self, name: &str) -> PlanError {
        PlanError::Invalid(format!(
            "function {name} cannot be expressed on {}: the engine has no equivalent",
            self.engine.name
        ))
    }

    /// A function call, after its name and `(`: parsed, its value's size bounded (see
    /// [`size`]), and a concatenating aggregate stopped at the answer budget.
    fn call(&mut self, name: &str) -> Result<Expr, PlanError> {
        let start = self.pos.saturating_sub(2);
        let call = self.call_unbounded(name)?;
        let text = self
            .toks
            .get(start..self.pos)
            .and_then(|t| Some(&self.src[t.first()?.start..t.last()?.end]))
            .unwrap_or(self.src);
        size::check(&call, excerpt(text), &self.limits)?;
        Ok(stop_at_budget(call, self.limits.max_value_bytes))
    }

    fn call_unbounded(&mut self, name: &str) -> Result<Expr, PlanError> {
        let f =
            functions::lookup(name).ok_or_else(|| PlanError::UnknownFunction(name.to_string()))?;
        if !f.engines.has(self.engine.engine) {
            return Err(self.refuse_on_engine(f.name));
        }
        match f.name {
            "cast" | "convert" => return self.cast(f.name),
            "date_add" | "date_sub" | "adddate" | "subdate" => return self.date_add(f.name),
            "match" => return self.full_text(),
            _ => {}
        }
        let mut args = Vec::new();
        let mut distinct = false;
        if self.at_keyword("distinct") {
            if f.kind != FnKind::Aggregate {
                return Err(self.err(&format!(
                    "DISTINCT is only allowed in an aggregate, not in {}",
                    f.name
                )));
            }
            distinct = true;
            self.pos += 1;
        }
        if self.peek() == Some(&Tok::RParen) {
            self.pos += 1;
        } else {
            loop {
                if self.peek() == Some(&Tok::Star)
                    && matches!(self.peek_at(1), Some(Tok::RParen))
                    && f.name == "count"
                {
                    self.pos += 1;
                    args.push(Expr::Star);
                } else {
                    args.push(self.arg()?);
                }
                match self.next() {
                    Some(Tok::Comma) => continue,
                    Some(Tok::RParen) => break,
                    _ => return Err(self.err("')' is missing")),
                }
            }
        }
        if args.len() < f.min_args || args.len() > f.max_args {
            return Err(self.err(&format!(
                "{} takes {} argument(s), not {}",
                f.name,
                if f.min_args == f.max_args {
                    f.min_args.to_string()
                } else if f.max_args >= 64 {
                    format!("at least {}", f.min_args)
                } else {
                    format!("{} to {}", f.min_args, f.max_args)
                },
                args.len()
            )));
        }
        if f.kind == FnKind::Aggregate && args.iter().any(contains_aggregate) {
            return Err(self.err("an aggregate cannot contain another aggregate"));
        }
        if matches!(f.name, "date_format" | "time_format") && self.engine.translated_date_formats {
            match &args[1] {
                Expr::Value(Value::Text(fmt)) if date_format_supported(fmt) => {}
                _ => {
                    return Err(PlanError::Invalid(format!(
                        "{}: on {} the format must be a literal made of {}",
                        f.name, self.engine.name, DATE_FORMAT_SPECIFIERS
                    )))
                }
            }
        }
        let call = if f.name == "isnull" {
            Expr::IsNull(Box::new(args.remove(0)))
        } else {
            Expr::Func {
                name: f.name,
                args,
                distinct,
            }
        };
        if self.at_keyword("over") && matches!(self.peek_at(1), Some(Tok::LParen)) {
            if f.kind == FnKind::Scalar {
                return Err(self.err(&format!(
                    "{} is not an aggregate or window function",
                    f.name
                )));
            }
            self.pos += 2;
            return self.window(call);
        }
        if f.kind == FnKind::Window {
            return Err(self.err(&format!(
                "{}() needs OVER(PARTITION BY … ORDER BY …)",
                f.name
            )));
        }
        Ok(call)
    }
}

/// `group_concat` (alone or over a window) cut at `budget` characters, a value the answer's
/// budget refuses whenever it was cut: the database sends no more than that, whatever the rows.
/// MariaDB cuts at `group_concat_max_len` first, as the reference does.
fn stop_at_budget(call: Expr, budget: usize) -> Expr {
    let concatenates = |e: &Expr| {
        matches!(
            e,
            Expr::Func {
                name: "group_concat",
                ..
            }
        )
    };
    let wrap = match &call {
        Expr::Window { func, .. } => concatenates(func),
        e => concatenates(e),
    };
    if !wrap {
        return call;
    }
    Expr::Func {
        name: "left",
        args: vec![
            call,
            Expr::Value(Value::Int(i64::try_from(budget).unwrap_or(i64::MAX))),
        ],
        distinct: false,
    }
}

/// The MySQL `date_format` specifiers every engine can spell.
pub const DATE_FORMAT_SPECIFIERS: &str = "%Y %y %m %c %d %e %H %k %h %I %i %s %S %T %j %p %%";

/// Whether every `%` specifier of a MySQL date format is one PostgreSQL can spell.
fn date_format_supported(fmt: &str) -> bool {
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some(
                    'Y' | 'y' | 'm' | 'c' | 'd' | 'e' | 'H' | 'k' | 'h' | 'I' | 'i' | 's' | 'S'
                    | 'T' | 'j' | 'p' | '%',
                ) => {}
                _ => return false,
            }
        }
    }
    true
}

/// Parses an integer or decimal literal.
pub(crate) fn number(s: &str) -> Option<Value> {
    if let Ok(i) = s.parse::<i64>() {
        Some(Value::Int(i))
    } else {
        s.parse::<f64>().ok().map(Value::Float)
    }
}
