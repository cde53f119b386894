//! The tiny expression language of `@column`, `@having`, `@key` and `{}` range strings.
//!
//! The reference splices these strings into SQL after a regex check. We parse them instead:
//! names must resolve to columns or aliases, functions must be on the allow-list, literals
//! become bound values. Whatever does not parse is refused with the offending text.

use crate::query::{ArithOp, CmpOp, Expr};
use crate::{ExprLimits, PlanError};
use apijet_core::Value;

/// SQL functions a client may name (the reference's `SQL_FUNCTION_MAP`, narrowed to the ones
/// every engine has or a dialect can spell).
pub const FUNCTIONS: &[&str] = &[
    "count",
    "sum",
    "max",
    "min",
    "avg",
    "length",
    "char_length",
    "lower",
    "upper",
    "abs",
    "round",
    "floor",
    "ceil",
    "json_length",
    "concat",
    "substr",
    "substring",
    "trim",
    "ltrim",
    "rtrim",
    "coalesce",
    "ifnull",
    "replace",
    "now",
    "year",
    "month",
    "day",
    "date",
    "sign",
    "mod",
    "greatest",
    "least",
    "nullif",
];

/// Finds the allow-listed spelling of a function name.
pub fn function(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    FUNCTIONS.iter().copied().find(|f| *f == lower)
}

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
}

pub(crate) fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' => i += 1,
            b'(' => {
                out.push(Tok::LParen);
                i += 1
            }
            b')' => {
                out.push(Tok::RParen);
                i += 1
            }
            b',' => {
                out.push(Tok::Comma);
                i += 1
            }
            b'*' => {
                out.push(Tok::Star);
                i += 1
            }
            b'+' => {
                out.push(Tok::Arith(ArithOp::Add));
                i += 1
            }
            b'-' => {
                out.push(Tok::Arith(ArithOp::Sub));
                i += 1
            }
            b'/' => {
                out.push(Tok::Arith(ArithOp::Div));
                i += 1
            }
            b'%' => {
                out.push(Tok::Arith(ArithOp::Mod));
                i += 1
            }
            b'=' => {
                out.push(Tok::Cmp(CmpOp::Eq));
                i += 1
            }
            b'!' if b.get(i + 1) == Some(&b'=') => {
                out.push(Tok::Cmp(CmpOp::Ne));
                i += 2
            }
            b'<' | b'>' => {
                let (op, len) = match (c, b.get(i + 1)) {
                    (b'<', Some(b'=')) => (CmpOp::Le, 2),
                    (b'<', Some(b'>')) => (CmpOp::Ne, 2),
                    (b'>', Some(b'=')) => (CmpOp::Ge, 2),
                    (b'<', _) => (CmpOp::Lt, 1),
                    _ => (CmpOp::Gt, 1),
                };
                out.push(Tok::Cmp(op));
                i += len
            }
            b'\'' => {
                let start = i + 1;
                let end = s[start..]
                    .find('\'')
                    .ok_or_else(|| "unterminated string".to_string())?;
                out.push(Tok::Str(s[start..start + end].to_string()));
                i = start + end + 1
            }
            b'0'..=b'9' | b'.' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                    i += 1
                }
                out.push(Tok::Num(s[start..i].to_string()))
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c == b'`' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'`')
                {
                    i += 1
                }
                out.push(Tok::Name(s[start..i].replace('`', "")))
            }
            _ => return Err(format!("character '{}' is not allowed", c as char)),
        }
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

/// A recursive-descent parser whose recursion is bounded: every parenthesis, call and chained
/// operator counts one level against `max_depth`, so the tree it builds (and every recursive
/// walk over it later: rendering, cloning, dropping) is at most that deep.
pub(crate) struct Parser<'a, N: Names> {
    toks: Vec<Tok>,
    pos: usize,
    names: &'a N,
    src: &'a str,
    depth: usize,
    max_depth: usize,
}

impl<'a, N: Names> Parser<'a, N> {
    pub(crate) fn new(src: &'a str, names: &'a N) -> Result<Self, PlanError> {
        let limits = names.limits();
        check_length(excerpt(src), src, limits.max_length)?;
        let toks = tokenize(src).map_err(|e| PlanError::Invalid(format!("'{src}': {e}")))?;
        Ok(Parser {
            toks,
            pos: 0,
            names,
            src,
            depth: 0,
            max_depth: limits.max_depth,
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
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
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
                if self.peek() == Some(&Tok::LParen) {
                    self.pos += 1;
                    self.descend()?;
                    let call = self.call(&name);
                    self.depth -= 1;
                    call
                } else {
                    self.names.resolve(&name)
                }
            }
            _ => Err(self.err("a value, column or function is expected")),
        }
    }

    fn call(&mut self, name: &str) -> Result<Expr, PlanError> {
        let f = function(name).ok_or_else(|| PlanError::UnknownFunction(name.to_string()))?;
        let mut args = Vec::new();
        let mut distinct = false;
        if self.peek() == Some(&Tok::RParen) {
            self.pos += 1;
            return Ok(Expr::Func {
                name: f,
                args,
                distinct,
            });
        }
        if let Some(Tok::Name(n)) = self.peek() {
            if n.eq_ignore_ascii_case("distinct") {
                distinct = true;
                self.pos += 1;
            }
        }
        loop {
            if self.peek() == Some(&Tok::Star) {
                self.pos += 1;
                args.push(Expr::Star);
            } else {
                args.push(self.expr()?);
            }
            match self.next() {
                Some(Tok::Comma) => continue,
                Some(Tok::RParen) => break,
                _ => return Err(self.err("')' is missing")),
            }
        }
        Ok(Expr::Func {
            name: f,
            args,
            distinct,
        })
    }
}

/// Parses an integer or decimal literal.
pub(crate) fn number(s: &str) -> Option<Value> {
    if let Ok(i) = s.parse::<i64>() {
        Some(Value::Int(i))
    } else {
        s.parse::<f64>().ok().map(Value::Float)
    }
}
