//! What differs between SQLite, PostgreSQL and MySQL/MariaDB.

use apijet_core::{Engine, Value};
use apijet_plan::query::CastType;
use apijet_plan::read::ListKind;
use apijet_plan::schema::{CatalogView, ColumnKind};

/// The engine-specific parts of rendering. Every method writes into `out`.
pub trait Dialect: Send + Sync {
    /// Quotes an identifier.
    fn quote(&self, ident: &str, out: &mut String);

    /// An identifier quoted, as a string of its own (for statements written once, not per
    /// request).
    fn quoted(&self, ident: &str) -> String {
        let mut out = String::new();
        self.quote(ident, &mut out);
        out
    }

    /// `text` as a string literal, for statements written once by the server itself (DDL),
    /// never for a client's values, which are bound.
    fn string_literal(&self, text: &str) -> String {
        format!("'{}'", text.replace('\'', "''"))
    }

    /// Writes a table of the values of a list bound as one JSON array text (bind number
    /// `n`): a derived table with the columns [`LIST_KEY`] (each value's position, from 0) and
    /// [`LIST_VALUE`] (the value, of `kind`, typed as a column of `compared` where the values
    /// are compared with one), for a multiplexed read.
    fn listed_values(
        &self,
        n: usize,
        kind: ListKind,
        compared: Option<ColumnKind>,
        out: &mut String,
    );

    /// Writes the placeholder for bind number `n` (1-based).
    fn placeholder(&self, n: usize, out: &mut String);

    /// Writes a view of the catalogue, of the served schema alone, as a statement's source.
    fn catalog(&self, view: CatalogView, out: &mut String) {
        out.push_str(crate::catalog::mysql_source(view));
    }

    /// `lhs` matches a regular expression given by placeholder `pattern`.
    fn regex(&self, lhs: &str, pattern: &str, case_insensitive: bool, out: &mut String);

    /// The operator for a case-insensitive LIKE (MySQL's default collation is case-insensitive,
    /// and the reference's answers assume it).
    fn like(&self) -> &'static str {
        " LIKE "
    }

    /// What follows a LIKE pattern: SQLite has no default escape character, the others use `\`.
    fn like_escape(&self) -> &'static str {
        ""
    }

    /// The JSON array in `lhs` contains the JSON value given by placeholder `value`.
    fn json_contains(&self, lhs: &str, value: &str, out: &mut String);

    /// Length of the JSON array in `arg`.
    fn json_length(&self, arg: &str, out: &mut String);

    /// Length of the text in `arg`, in bytes: MySQL's `length()`, which the reference's
    /// clients (`"name[>": 10`, `length(content)`) were written against.
    fn text_length(&self, arg: &str, out: &mut String) {
        out.push_str("length(");
        out.push_str(arg);
        out.push(')');
    }

    /// Text form of a column for regex and LIKE on non-text columns.
    fn as_text(&self, arg: &str, kind: ColumnKind, out: &mut String) {
        let _ = kind;
        out.push_str(arg);
    }

    /// What asks the engine for its plan of a statement, before the statement's text.
    fn explain(&self) -> &'static str {
        "EXPLAIN "
    }

    /// The function that orders rows randomly.
    fn random(&self) -> &'static str {
        "random()"
    }

    /// The engine (function calls are spelled per engine in `calls`).
    fn engine(&self) -> Engine;

    /// Writes the placeholder for bind number `n` where the engine cannot infer its type
    /// from the context (a function argument): PostgreSQL needs the literal's type.
    fn typed_placeholder(&self, n: usize, value: &Value, out: &mut String) {
        let _ = value;
        self.placeholder(n, out);
    }

    /// A comparison selected as a value: MySQL answers 1 or 0, as SQLite does.
    fn truth_value(&self, cond: &str, out: &mut String) {
        out.push_str(cond);
    }

    /// The engine refuses a selected column that is neither grouped nor aggregated.
    fn groups_strictly(&self) -> bool {
        false
    }

    /// The engine needs a GROUP BY for a HAVING that aggregates.
    fn having_needs_group(&self) -> bool {
        false
    }

    /// A MySQL date format in the engine's spelling, where it differs.
    fn date_format(&self, fmt: &str) -> Option<String> {
        let _ = fmt;
        None
    }

    /// The type name in `CAST(x AS type)`.
    fn cast_type(&self, t: CastType) -> &'static str;

    /// MySQL and MariaDB bound UPDATE and DELETE with `LIMIT n`, as the reference does.
    fn limits_writes(&self) -> bool {
        false
    }

    /// Text concatenation of two rendered operands.
    fn concat(&self, a: &str, b: &str, out: &mut String) {
        out.push_str(a);
        out.push_str(" || ");
        out.push_str(b);
    }

    /// Writes a rendered function call, adjusted where an engine's result differs.
    fn wrap_function(&self, name: &str, call: &str, out: &mut String) {
        let _ = name;
        out.push_str(call);
    }
}

/// SQLite.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sqlite;

/// PostgreSQL.
#[derive(Debug, Default, Clone, Copy)]
pub struct Postgres;

/// MySQL and MariaDB.
#[derive(Debug, Default, Clone, Copy)]
pub struct MySql {
    /// MariaDB (and MySQL before 8) use `REGEXP BINARY` for case-sensitive matching; MySQL 8
    /// rejects it for utf8mb4 and needs `regexp_like(…, 'c')`.
    pub mariadb: bool,
}

/// The dialect of an engine (`mariadb` only matters for MySQL).
pub fn dialect_for(engine: Engine, mariadb: bool) -> Box<dyn Dialect> {
    match engine {
        Engine::Sqlite => Box::new(Sqlite),
        Engine::Postgres => Box::new(Postgres),
        Engine::MySql => Box::new(MySql { mariadb }),
    }
}

/// The column of a list's table holding each value's position.
pub const LIST_KEY: &str = "apijet~key";

/// The column of a list's table holding each value.
pub const LIST_VALUE: &str = "apijet~value";

/// `o - 1 AS key, x AS value` over an ordinality `o` counted from 1 and a value column `x`.
fn list_columns(d: &dyn Dialect, value_cast: &str, out: &mut String) {
    out.push_str("(SELECT ");
    d.quote("o", out);
    out.push_str(" - 1 AS ");
    d.quote(LIST_KEY, out);
    out.push_str(", ");
    d.quote("x", out);
    out.push_str(value_cast);
    out.push_str(" AS ");
    d.quote(LIST_VALUE, out);
    out.push_str(" FROM ");
}

fn double_quote(ident: &str, out: &mut String) {
    quote_with(ident, '"', out)
}

/// `q`ident`q` with `q` doubled inside. Identifiers come from the schema and almost never hold
/// the quote, so the common case is one copy (pushing char by char cost a third of rendering).
fn quote_with(ident: &str, q: char, out: &mut String) {
    out.reserve(ident.len() + 2);
    out.push(q);
    if ident.contains(q) {
        for c in ident.chars() {
            if c == q {
                out.push(q);
            }
            out.push(c);
        }
    } else {
        out.push_str(ident);
    }
    out.push(q);
}

/// Writes `n` in decimal without a temporary string: a batch INSERT has thousands of
/// placeholders.
fn push_number(n: usize, out: &mut String) {
    use std::fmt::Write;
    let _ = write!(out, "{n}");
}

impl Dialect for Sqlite {
    fn listed_values(
        &self,
        n: usize,
        _kind: ListKind,
        _compared: Option<ColumnKind>,
        out: &mut String,
    ) {
        // json_each types each element as JSON does, and counts from 0.
        out.push_str("(SELECT \"key\" AS ");
        self.quote(LIST_KEY, out);
        out.push_str(", \"value\" AS ");
        self.quote(LIST_VALUE, out);
        out.push_str(" FROM json_each(");
        self.placeholder(n, out);
        out.push_str("))");
    }

    fn engine(&self) -> Engine {
        Engine::Sqlite
    }

    fn explain(&self) -> &'static str {
        "EXPLAIN QUERY PLAN "
    }

    fn catalog(&self, view: CatalogView, out: &mut String) {
        out.push_str(crate::catalog::sqlite_source(view));
    }

    fn having_needs_group(&self) -> bool {
        true
    }

    fn quote(&self, ident: &str, out: &mut String) {
        double_quote(ident, out)
    }

    fn placeholder(&self, n: usize, out: &mut String) {
        // Numbered, so that a dialect may write arguments in another order than they were bound.
        out.push('?');
        push_number(n, out);
    }

    fn regex(&self, lhs: &str, pattern: &str, case_insensitive: bool, out: &mut String) {
        // `regexp` and `regexp_ci` are registered on every connection by exec.
        out.push_str(if case_insensitive {
            "regexp_ci("
        } else {
            "regexp("
        });
        out.push_str(pattern);
        out.push_str(", ");
        out.push_str(lhs);
        out.push(')');
    }

    fn like_escape(&self) -> &'static str {
        " ESCAPE '\\'"
    }

    fn text_length(&self, arg: &str, out: &mut String) {
        out.push_str("length(CAST(");
        out.push_str(arg);
        out.push_str(" AS BLOB))");
    }

    fn json_contains(&self, lhs: &str, value: &str, out: &mut String) {
        out.push_str("EXISTS (SELECT 1 FROM json_each(");
        out.push_str(lhs);
        out.push_str(") WHERE json_each.value = json_extract(");
        out.push_str(value);
        out.push_str(", '$'))");
    }

    fn json_length(&self, arg: &str, out: &mut String) {
        out.push_str("json_array_length(");
        out.push_str(arg);
        out.push(')');
    }

    fn cast_type(&self, t: CastType) -> &'static str {
        match t {
            CastType::Date | CastType::Timestamp | CastType::Time | CastType::Text => "TEXT",
            CastType::Integer => "INTEGER",
            CastType::Decimal => "NUMERIC",
        }
    }
}

impl Dialect for Postgres {
    fn listed_values(
        &self,
        n: usize,
        kind: ListKind,
        compared: Option<ColumnKind>,
        out: &mut String,
    ) {
        // Typed as the column they are compared with, as a bound value would be inferred.
        let cast = match (compared, kind) {
            (Some(ColumnKind::Int), _) => "::int8",
            (Some(ColumnKind::Float | ColumnKind::Decimal), _) => "::numeric",
            (Some(ColumnKind::Text), _) => "",
            (_, ListKind::Int) => "::int8",
            (_, ListKind::Text) => "",
        };
        list_columns(self, cast, out);
        out.push_str("jsonb_array_elements_text(");
        self.placeholder(n, out);
        out.push_str("::text::jsonb) WITH ORDINALITY AS \"apijet~list\"(\"x\", \"o\"))");
    }

    fn catalog(&self, view: CatalogView, out: &mut String) {
        out.push_str(crate::catalog::postgres_source(view));
    }

    fn quote(&self, ident: &str, out: &mut String) {
        double_quote(ident, out)
    }

    fn placeholder(&self, n: usize, out: &mut String) {
        out.push('$');
        push_number(n, out);
    }

    fn regex(&self, lhs: &str, pattern: &str, case_insensitive: bool, out: &mut String) {
        out.push_str(lhs);
        out.push_str(if case_insensitive { " ~* " } else { " ~ " });
        out.push_str(pattern);
    }

    fn like(&self) -> &'static str {
        " ILIKE "
    }

    fn text_length(&self, arg: &str, out: &mut String) {
        out.push_str("octet_length(");
        out.push_str(arg);
        out.push(')');
    }

    fn json_contains(&self, lhs: &str, value: &str, out: &mut String) {
        // Wrapping the element in an array makes `@>` test membership, not sub-documents.
        out.push_str("CAST(");
        out.push_str(lhs);
        out.push_str(" AS jsonb) @> jsonb_build_array(CAST(");
        out.push_str(value);
        out.push_str(" AS jsonb))");
    }

    fn json_length(&self, arg: &str, out: &mut String) {
        out.push_str("jsonb_array_length(CAST(");
        out.push_str(arg);
        out.push_str(" AS jsonb))");
    }

    fn as_text(&self, arg: &str, kind: ColumnKind, out: &mut String) {
        if matches!(kind, ColumnKind::Text) {
            out.push_str(arg);
        } else {
            out.push_str("CAST(");
            out.push_str(arg);
            out.push_str(" AS text)");
        }
    }

    fn wrap_function(&self, name: &str, call: &str, out: &mut String) {
        // MySQL's avg() answers with 4 more decimal places than its input (div_precision_increment);
        // PostgreSQL's with up to 20. Rounding keeps the answers of both engines alike.
        if name == "avg" {
            out.push_str("round(CAST(");
            out.push_str(call);
            out.push_str(" AS numeric), 4)");
        } else {
            out.push_str(call);
        }
    }

    fn engine(&self) -> Engine {
        Engine::Postgres
    }

    fn typed_placeholder(&self, n: usize, value: &Value, out: &mut String) {
        self.placeholder(n, out);
        out.push_str(match value {
            Value::Null => "",
            Value::Bool(_) => "::boolean",
            Value::Int(i) if i32::try_from(*i).is_ok() => "::int4",
            Value::Int(_) => "::int8",
            Value::Float(_) => "::float8",
            Value::Text(_) => "::text",
        });
    }

    fn date_format(&self, fmt: &str) -> Option<String> {
        Some(crate::calls::postgres_date_format(fmt))
    }

    fn groups_strictly(&self) -> bool {
        true
    }

    fn truth_value(&self, cond: &str, out: &mut String) {
        out.push_str("CAST(");
        out.push_str(cond);
        out.push_str(" AS integer)");
    }

    fn cast_type(&self, t: CastType) -> &'static str {
        match t {
            CastType::Date => "date",
            CastType::Timestamp => "timestamp",
            CastType::Time => "time",
            CastType::Integer => "bigint",
            CastType::Decimal => "numeric",
            CastType::Text => "text",
        }
    }
}

impl Dialect for MySql {
    /// MariaDB and MySQL also read backslashes as escapes in a literal.
    fn string_literal(&self, text: &str) -> String {
        format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
    }

    fn listed_values(
        &self,
        n: usize,
        kind: ListKind,
        _compared: Option<ColumnKind>,
        out: &mut String,
    ) {
        list_columns(self, "", out);
        out.push_str("JSON_TABLE(");
        self.placeholder(n, out);
        out.push_str(", '$[*]' COLUMNS (`o` FOR ORDINALITY, `x` ");
        out.push_str(match kind {
            ListKind::Int => "BIGINT",
            // As long as the longest text listed (`MAX_LISTED_TEXT`): none is cut.
            ListKind::Text => "VARCHAR(255)",
        });
        out.push_str(" PATH '$')) AS `apijet~list`)");
    }

    fn engine(&self) -> Engine {
        Engine::MySql
    }

    fn quote(&self, ident: &str, out: &mut String) {
        quote_with(ident, '`', out);
    }

    fn placeholder(&self, _n: usize, out: &mut String) {
        out.push('?')
    }

    fn regex(&self, lhs: &str, pattern: &str, case_insensitive: bool, out: &mut String) {
        if self.mariadb {
            out.push_str(lhs);
            out.push_str(if case_insensitive {
                " REGEXP "
            } else {
                " REGEXP BINARY "
            });
            out.push_str(pattern);
        } else {
            out.push_str("regexp_like(");
            out.push_str(lhs);
            out.push_str(", ");
            out.push_str(pattern);
            out.push_str(if case_insensitive { ", 'i')" } else { ", 'c')" });
        }
    }

    fn json_contains(&self, lhs: &str, value: &str, out: &mut String) {
        out.push_str("json_contains(");
        out.push_str(lhs);
        out.push_str(", ");
        out.push_str(value);
        out.push(')');
    }

    fn json_length(&self, arg: &str, out: &mut String) {
        out.push_str("json_length(");
        out.push_str(arg);
        out.push(')');
    }

    fn random(&self) -> &'static str {
        "rand()"
    }

    fn limits_writes(&self) -> bool {
        true
    }

    fn concat(&self, a: &str, b: &str, out: &mut String) {
        out.push_str("concat(");
        out.push_str(a);
        out.push_str(", ");
        out.push_str(b);
        out.push(')');
    }

    fn cast_type(&self, t: CastType) -> &'static str {
        match t {
            CastType::Date => "DATE",
            CastType::Timestamp => "DATETIME",
            CastType::Time => "TIME",
            CastType::Integer => "SIGNED",
            CastType::Decimal => "DECIMAL(65,10)",
            CastType::Text => "CHAR",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_literal_reads_back_as_its_text_on_every_engine() {
        let text = r"it's a\b'\";
        assert_eq!(
            dialect_for(Engine::Sqlite, false).string_literal(text),
            r"'it''s a\b''\'"
        );
        assert_eq!(
            dialect_for(Engine::Postgres, false).string_literal(text),
            r"'it''s a\b''\'"
        );
        assert_eq!(
            dialect_for(Engine::MySql, true).string_literal(text),
            r"'it''s a\\b''\\'"
        );
    }
}
