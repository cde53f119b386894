//! The tiny expression language of `@column`, `@having`, `@key` and `{}` range strings.
//!
//! The reference splices these strings into SQL after a regex check. We parse them instead:
//! names must resolve to columns or aliases, functions must be on the allow-list, literals
//! become bound values. Whatever does not parse is refused with the offending text.

use crate::functions::{self, contains_aggregate, FnKind};
use crate::query::{ArithOp, CmpOp, Direction, Expr, IntervalUnit, OrderItem};
use crate::{ExprLimits, PlanError};
use apijet_core::{Engine, Value};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Name(String),
    Num(String),
    Str(String),
    LParen,
    RParen,
    Comma,
    Star,
    Arith(ArithOp),
    Cmp(CmpOp),
    /// Any other character: only valid inside an unquoted literal argument.
    Other,
}

/// A token and where it stands in the text.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    tok: Tok,
    start: usize,
    end: usize,
}

pub(crate) fn tokenize(s: &str) -> Result<Vec<Token>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let tok = match c {
            b' ' => {
                i += 1;
                continue;
            }
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b',' => Tok::Comma,
            b'*' => Tok::Star,
            b'+' => Tok::Arith(ArithOp::Add),
            b'-' => Tok::Arith(ArithOp::Sub),
            b'/' => Tok::Arith(ArithOp::Div),
            b'%' => Tok::Arith(ArithOp::Mod),
            b'=' => Tok::Cmp(CmpOp::Eq),
            b'!' if b.get(i + 1) == Some(&b'=') => {
                i += 1;
                Tok::Cmp(CmpOp::Ne)
            }
            b'<' | b'>' => {
                let (op, len) = match (c, b.get(i + 1)) {
                    (b'<', Some(b'=')) => (CmpOp::Le, 2),
                    (b'<', Some(b'>')) => (CmpOp::Ne, 2),
                    (b'>', Some(b'=')) => (CmpOp::Ge, 2),
                    (b'<', _) => (CmpOp::Lt, 1),
                    _ => (CmpOp::Gt, 1),
                };
                i += len - 1;
                Tok::Cmp(op)
            }
            b'\'' => {
                let from = i + 1;
                let end = s[from..]
                    .find('\'')
                    .ok_or_else(|| "unterminated string".to_string())?;
                i = from + end;
                Tok::Str(s[from..from + end].to_string())
            }
            b'0'..=b'9' | b'.' => {
                while i + 1 < b.len() && (b[i + 1].is_ascii_digit() || b[i + 1] == b'.') {
                    i += 1
                }
                Tok::Num(s[start..=i].to_string())
            }
            b'`' => {
                let from = i + 1;
                let end = s[from..]
                    .find('`')
                    .ok_or_else(|| "unterminated back-quoted name".to_string())?;
                i = from + end;
                Tok::Name(s[from..from + end].to_string())
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i + 1 < b.len() && (b[i + 1].is_ascii_alphanumeric() || b[i + 1] == b'_') {
                    i += 1
                }
                Tok::Name(s[start..=i].to_string())
            }
            c if c.is_ascii_control() => {
                return Err(format!("character '{}' is not allowed", c.escape_ascii()))
            }
            _ => {
                // A whole UTF-8 character, so that spans stay on character boundaries.
                let len = s[i..].chars().next().map_or(1, char::len_utf8);
                i += len - 1;
                Tok::Other
            }
        };
        i += 1;
        out.push(Token { tok, start, end: i });
    }
    Ok(out)
}

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
    engine: Engine,
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
                self.depth -= 1;
                match self.next() {
                    Some(Tok::RParen) => Ok(inner),
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

    /// `CASE [operand] WHEN … THEN … [ELSE …] END`, after `CASE`.
    fn case(&mut self) -> Result<Expr, PlanError> {
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
            whens.push((cond, self.comparison()?));
        }
        if whens.is_empty() {
            return Err(self.err("CASE needs at least one WHEN … THEN …"));
        }
        let otherwise = if self.at_keyword("else") {
            self.pos += 1;
            Some(Box::new(self.comparison()?))
        } else {
            None
        };
        self.keyword("end")?;
        Ok(Expr::Case {
            operand,
            whens,
            otherwise,
        })
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
            functions::engine_name(self.engine)
        ))
    }

    fn call(&mut self, name: &str) -> Result<Expr, PlanError> {
        let f =
            functions::lookup(name).ok_or_else(|| PlanError::UnknownFunction(name.to_string()))?;
        if !f.engines.has(self.engine) {
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
        if matches!(f.name, "date_format" | "time_format") && self.engine == Engine::Postgres {
            match &args[1] {
                Expr::Value(Value::Text(fmt)) if date_format_supported(fmt) => {}
                _ => {
                    return Err(PlanError::Invalid(format!(
                        "{}: on PostgreSQL the format must be a literal made of {}",
                        f.name, DATE_FORMAT_SPECIFIERS
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

    /// `OVER ( [PARTITION BY …] [ORDER BY … [ASC|DESC], …] )`, after `OVER (`.
    fn window(&mut self, func: Expr) -> Result<Expr, PlanError> {
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
    fn cast(&mut self, name: &str) -> Result<Expr, PlanError> {
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
        let t = crate::select_list::cast_type(&ty).ok_or_else(|| {
            self.err(&format!(
                "type {ty} is not supported; use {}",
                crate::select_list::CAST_TYPES
            ))
        })?;
        self.expect(Tok::RParen, ")")?;
        Ok(Expr::Cast(Box::new(inner), t))
    }

    /// `date_add(x, INTERVAL n unit)`, `adddate(x, n)` and their subtracting twins.
    fn date_add(&mut self, name: &str) -> Result<Expr, PlanError> {
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
    fn full_text(&mut self) -> Result<Expr, PlanError> {
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
