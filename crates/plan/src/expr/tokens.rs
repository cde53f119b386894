//! The tokens of the expression language, with where each stands in the client's text.

use crate::query::{ArithOp, CmpOp};

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
    pub(crate) tok: Tok,
    pub(crate) start: usize,
    pub(crate) end: usize,
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
