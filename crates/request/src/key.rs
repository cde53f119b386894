//! The key grammar of protocol §3.2 and §5.1: which keys name tables, arrays, conditions.

use crate::RequestError;

/// `Table` or `Table:alias`: a key whose first character is an upper-case ASCII letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableKey {
    /// The API table name (before `:`).
    pub table: String,
    /// The alias after `:`, if any.
    pub alias: Option<String>,
}

impl TableKey {
    /// Parses `Table` / `Table:alias`; `None` when the key is not a table key.
    pub fn parse(key: &str) -> Option<TableKey> {
        if !is_table_key(key) {
            return None;
        }
        // By bytes: `:` is ASCII, so its place is a character boundary.
        Some(match key.bytes().position(|b| b == b':') {
            Some(at) => TableKey {
                table: key[..at].to_string(),
                alias: Some(key[at + 1..].to_string()),
            },
            None => TableKey {
                table: key.to_string(),
                alias: None,
            },
        })
    }

    /// The key as written: `Table` or `Table:alias`.
    pub fn text(&self) -> String {
        match &self.alias {
            Some(a) => format!("{}:{a}", self.table),
            None => self.table.clone(),
        }
    }

    /// The name the table is known by inside its SQL statement: the alias, else the table.
    pub fn sql_alias(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.table)
    }
}

/// `^[A-Z][0-9A-Za-z_.:]*$` (JSONMap.isTableKey).
pub fn is_table_key(key: &str) -> bool {
    // By bytes, through a table: every character it allows is ASCII, and every byte of any
    // other is not; every request asks this of its keys more than once.
    let [first, rest @ ..] = key.as_bytes() else {
        return false;
    };
    first.is_ascii_uppercase() && rest.iter().all(|&b| TABLE_KEY_BYTES[usize::from(b)])
}

/// The bytes a table key may have after its first.
const TABLE_KEY_BYTES: [bool; 256] = {
    let mut bytes = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        bytes[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b':';
        b += 1;
    }
    bytes
};

/// `^[A-Za-z_][0-9A-Za-z_]*$`: a plain column or identifier name.
pub fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What an array key (`[]`, `Table[]`, `Table-key[]`, `key:alias[]`) asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayKey {
    /// The text before `[]` (empty for `[]`), without any `:alias`.
    pub name: String,
    /// For `Table[]`: the table whose rows are the items (unwrapped).
    pub table: Option<String>,
    /// For `Table-a-b[]`: the path `a/b` inside the table row to extract per item.
    pub extract: Vec<String>,
}

impl ArrayKey {
    /// Parses a key ending in `[]`; `None` for other keys.
    pub fn parse(key: &str) -> Option<ArrayKey> {
        let name = key.strip_suffix("[]")?;
        let name = name.split_once(':').map_or(name, |(n, _)| n).to_string();
        let mut parts = name.split('-');
        let first = parts.next().unwrap_or_default();
        let table = is_table_key(first).then(|| first.to_string());
        let extract = if table.is_some() {
            parts.map(str::to_string).collect()
        } else {
            Vec::new()
        };
        Some(ArrayKey {
            name,
            table,
            extract,
        })
    }
}

/// The operator at the end of a condition key (protocol §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `k` — equality (or `!=` with the `!` logic).
    Eq,
    /// `k{}` — IN list, or a range/expression string.
    In,
    /// `k}{` — EXISTS subquery.
    Exists,
    /// `k<>` — JSON array contains.
    Contains,
    /// `k$` — LIKE with the client's own wildcards.
    Like,
    /// `k%$`, `k?%$`, `k%?$`, `k_$` … — LIKE with escaped value and added wildcards.
    LikeWrapped {
        /// The wildcard added before the value (`%`, `_` or none).
        left: Option<char>,
        /// The wildcard added after the value.
        right: Option<char>,
    },
    /// `k~` / `k*~` — regular expression (case-insensitive with `*`).
    Regex {
        /// `*~`
        case_insensitive: bool,
    },
    /// `k%` — BETWEEN.
    Between,
    /// `k>`
    Gt,
    /// `k>=`
    Ge,
    /// `k<`
    Lt,
    /// `k<=`
    Le,
    /// `k+` — PUT only: add to a number, append to a string or a JSON array.
    Add,
    /// `k-` — PUT only: subtract, remove a substring or JSON array elements.
    Sub,
}

/// `&`, `|` or `!` before the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logic {
    /// No logic character: the operator's default (OR for lists).
    Default,
    /// `&` — every item must match.
    And,
    /// `|` — any item may match.
    Or,
    /// `!` — negation.
    Not,
}

/// `[` or `{` right after the column name: apply a length function first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthFn {
    /// `k[…`: string length.
    Text,
    /// `k{…`: JSON array length.
    Json,
}

/// A parsed condition key such as `name!~`, `id{}@`, `contactIdList{{}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionKey {
    /// The key exactly as the client sent it (used by `@combine`, `@cast`, messages).
    pub raw: String,
    /// The column (or `@key` alias) name.
    pub column: String,
    /// Length function applied to the column.
    pub length: Option<LengthFn>,
    /// Logic character.
    pub logic: Logic,
    /// Operator.
    pub op: Op,
    /// Ends in `@`: the value is a reference path or a subquery.
    pub reference: bool,
}

impl ConditionKey {
    /// Parses a condition key from the end, as the reference does (AbstractSQLConfig.gainRealKey).
    pub fn parse(raw: &str) -> Result<ConditionKey, RequestError> {
        let key = ConditionKey::lenient(raw).ok_or_else(|| RequestError::BadKey {
            key: raw.to_string(),
            reason: "not a valid column name".to_string(),
        })?;
        if matches!(key.op, Op::Gt | Op::Ge | Op::Lt | Op::Le) && key.logic != Logic::Default {
            return Err(RequestError::LogicWithComparison {
                key: raw.to_string(),
            });
        }
        Ok(key)
    }

    /// The same grammar without the checks that only the planner needs (`id!>` still names
    /// `id` here); `None` when no column name is left once the suffixes are read.
    pub fn lenient(raw: &str) -> Option<ConditionKey> {
        let parts = KeyParts::of(raw)?;
        Some(ConditionKey {
            raw: raw.to_string(),
            column: parts.column.to_string(),
            length: parts.length,
            logic: parts.logic,
            op: parts.op,
            reference: parts.reference,
        })
    }

    /// The column any key of a table object names, whatever its operator or form
    /// (`balance+`, `_password$`, `id{}@`, `id!>`, `name[~`, `isPraised()`,
    /// `verifyIdList-()`), so that rules written for a column hold for every spelling of it.
    /// `None` for `@` keywords and keys that name no column (`Table[]`, `Moment[].page`).
    /// Borrowed from `raw`: the verifier compares keys with it for every row of a batch.
    pub fn column_of(raw: &str) -> Option<&str> {
        if raw.starts_with('@') {
            return None;
        }
        if let Some(function) = raw.strip_suffix("()") {
            let name = function.strip_suffix(['+', '-']).unwrap_or(function);
            return is_name(name).then_some(name);
        }
        KeyParts::of(raw).map(|k| k.column)
    }

    /// A plain `column: value` key: no operator, logic, length function or reference.
    pub fn is_plain(&self) -> bool {
        self.parts().is_plain()
    }

    /// This key's parts, borrowed.
    pub fn parts(&self) -> KeyParts<'_> {
        KeyParts {
            column: &self.column,
            length: self.length,
            logic: self.logic,
            op: self.op,
            reference: self.reference,
        }
    }
}

/// A condition key read from the end, its column borrowed from the key: what
/// [`ConditionKey::lenient`] reads, for callers that compare keys without keeping them (the
/// verifier, once per key and rule of every batch item).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyParts<'a> {
    /// The column (or `@key` alias) name.
    pub column: &'a str,
    /// Length function applied to the column.
    pub length: Option<LengthFn>,
    /// Logic character.
    pub logic: Logic,
    /// Operator.
    pub op: Op,
    /// Ends in `@`.
    pub reference: bool,
}

impl KeyParts<'_> {
    /// Parses from the end, as the reference does (AbstractSQLConfig.gainRealKey); `None`
    /// when no column name is left once the suffixes are read.
    pub fn of(raw: &str) -> Option<KeyParts<'_>> {
        if is_name(raw) {
            // No suffix character is a name character: most keys are plain `column`s.
            return Some(KeyParts {
                column: raw,
                length: None,
                logic: Logic::Default,
                op: Op::Eq,
                reference: false,
            });
        }
        Some(KeyParts::read(raw)).filter(|k| is_name(k.column))
    }

    /// Reads the suffixes of `raw` from the end, as [`KeyParts::of`] does, and keeps
    /// whatever is left before them as `column`, a name or not: the keys of rules that name
    /// another key rather than a column (`VERIFY` `balance+&{}` checks the key `balance+`).
    pub fn read(raw: &str) -> KeyParts<'_> {
        let mut rest = raw;
        let reference = if let Some(r) = rest.strip_suffix('@') {
            rest = r;
            true
        } else {
            false
        };
        let (op, mut body) = split_op(rest);
        let logic = match body.chars().last() {
            Some('&') => Logic::And,
            Some('|') => Logic::Or,
            Some('!') => Logic::Not,
            _ => Logic::Default,
        };
        if logic != Logic::Default {
            body = &body[..body.len() - 1];
        }
        let length = match body.chars().last() {
            Some('[') => Some(LengthFn::Text),
            Some('{') => Some(LengthFn::Json),
            _ => None,
        };
        if length.is_some() {
            body = &body[..body.len() - 1];
        }
        KeyParts {
            column: body,
            length,
            logic,
            op,
            reference,
        }
    }

    /// A plain `column: value` key: no operator, logic, length function or reference.
    pub fn is_plain(&self) -> bool {
        self.op == Op::Eq
            && self.logic == Logic::Default
            && self.length.is_none()
            && !self.reference
    }
}

/// Splits the operator suffix off a key (without its trailing `@`).
fn split_op(key: &str) -> (Op, &str) {
    if let Some(body) = key.strip_suffix('+') {
        if is_name(body) {
            return (Op::Add, body);
        }
    }
    if let Some(body) = key.strip_suffix('-') {
        if is_name(body) {
            return (Op::Sub, body);
        }
    }
    for (suffix, op) in [
        ("{}", Op::In),
        ("}{", Op::Exists),
        ("<>", Op::Contains),
        (">=", Op::Ge),
        ("<=", Op::Le),
        (
            "*~",
            Op::Regex {
                case_insensitive: true,
            },
        ),
        (
            "~",
            Op::Regex {
                case_insensitive: false,
            },
        ),
        (">", Op::Gt),
        ("<", Op::Lt),
    ] {
        if let Some(body) = key.strip_suffix(suffix) {
            return (op, body);
        }
    }
    if let Some(body) = key.strip_suffix('$') {
        // Two placeholder characters before `$` (`%`, `_` or `?` for none) select the wrapped
        // form: `%$` alone means both sides `%`.
        let b = body.as_bytes();
        let wild = |c: u8| matches!(c, b'%' | b'_' | b'?');
        let to_opt = |c: u8| (c != b'?').then_some(c as char);
        if b.len() >= 2 && wild(b[b.len() - 1]) && wild(b[b.len() - 2]) {
            let (l, r) = (b[b.len() - 2], b[b.len() - 1]);
            return (
                Op::LikeWrapped {
                    left: to_opt(l),
                    right: to_opt(r),
                },
                &body[..body.len() - 2],
            );
        }
        if b.last().is_some_and(|&c| c == b'%' || c == b'_') {
            let c = b[b.len() - 1] as char;
            return (
                Op::LikeWrapped {
                    left: Some(c),
                    right: Some(c),
                },
                &body[..body.len() - 1],
            );
        }
        return (Op::Like, body);
    }
    if let Some(body) = key.strip_suffix('%') {
        return (Op::Between, body);
    }
    (Op::Eq, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(s: &str) -> ConditionKey {
        ConditionKey::parse(s).expect(s)
    }

    #[test]
    fn condition_keys_parse_from_the_end() {
        assert_eq!(ck("id{}").op, Op::In);
        assert_eq!(ck("id!{}").logic, Logic::Not);
        assert_eq!(ck("id&{}").logic, Logic::And);
        assert_eq!(ck("name!~").logic, Logic::Not);
        assert_eq!(
            ck("name*~").op,
            Op::Regex {
                case_insensitive: true
            }
        );
        assert_eq!(ck("contactIdList{{}").length, Some(LengthFn::Json));
        assert_eq!(ck("name[>").length, Some(LengthFn::Text));
        assert_eq!(ck("name[>").op, Op::Gt);
        let r = ck("userId{}@");
        assert!(r.reference);
        assert_eq!((r.column.as_str(), r.op), ("userId", Op::In));
        assert_eq!(
            ck("name%$").op,
            Op::LikeWrapped {
                left: Some('%'),
                right: Some('%')
            }
        );
        assert_eq!(
            ck("name?%$").op,
            Op::LikeWrapped {
                left: None,
                right: Some('%')
            }
        );
        assert_eq!(ck("id%").op, Op::Between);
        assert_eq!(ck("tag!$").op, Op::Like);
        assert_eq!(ck("name!").logic, Logic::Not);
        assert_eq!(ck("id}{@").op, Op::Exists);
        assert_eq!(ck("balance+").op, Op::Add);
        assert_eq!(ck("praiseUserIdList-").op, Op::Sub);
    }

    #[test]
    fn every_key_form_names_its_column() {
        for key in [
            "balance",
            "balance+",
            "balance-",
            "balance$",
            "balance%",
            "balance~",
            "balance*~",
            "balance{}",
            "balance&{}",
            "balance|{}",
            "balance!{}",
            "balance!",
            "balance>",
            "balance>=",
            "balance<",
            "balance<=",
            "balance<>",
            "balance@",
            "balance()",
            "balance-()",
            "balance+()",
            "balance}{",
            "balance[",
            "balance[>",
            "balance{{}",
            "balance!>",
            "balance%$",
            "balance{}@",
        ] {
            assert_eq!(ConditionKey::column_of(key), Some("balance"), "{key}");
        }
        for key in ["@role", "Moment[]", "Moment[].page", "a b", ""] {
            assert_eq!(ConditionKey::column_of(key), None, "{key}");
        }
    }

    #[test]
    fn rule_keys_read_their_suffixes_off_any_key() {
        let r = KeyParts::read("balance+&{}");
        assert_eq!((r.column, r.logic, r.op), ("balance+", Logic::And, Op::In));
        let r = KeyParts::read("praiseUserIdList-[{}");
        assert_eq!(
            (r.column, r.length, r.op),
            ("praiseUserIdList-", Some(LengthFn::Text), Op::In)
        );
        let r = KeyParts::read("phone~");
        assert_eq!(
            (r.column, r.op),
            (
                "phone",
                Op::Regex {
                    case_insensitive: false
                }
            )
        );
        // Where what is left is a name, reading is parsing.
        for key in [
            "name$",
            "id!{}",
            "contactIdList{{}",
            "id}{@",
            "name%$",
            "x*~",
        ] {
            assert_eq!(KeyParts::of(key), Some(KeyParts::read(key)), "{key}");
        }
    }

    #[test]
    fn logic_with_comparison_is_rejected() {
        assert!(matches!(
            ConditionKey::parse("id!>"),
            Err(RequestError::LogicWithComparison { .. })
        ));
    }

    #[test]
    fn hostile_keys_are_rejected() {
        assert!(ConditionKey::parse("id;drop").is_err());
        assert!(ConditionKey::parse("id or 1=1").is_err());
    }

    #[test]
    fn array_keys() {
        let a = ArrayKey::parse("User-id[]").expect("array");
        assert_eq!(a.table.as_deref(), Some("User"));
        assert_eq!(a.extract, ["id"]);
        assert_eq!(ArrayKey::parse("[]").expect("array").table, None);
        assert!(ArrayKey::parse("User").is_none());
    }
}
