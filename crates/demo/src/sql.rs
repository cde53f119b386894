//! Per-engine spelling of identifiers and literals for the demo script.
//!
//! The demo rows are our own constants, so they are inlined as SQL literals instead of being
//! bound: the script is then a plain list of self-contained statements that any driver (or a
//! command-line client) can run one at a time. Every string still goes through [`quote_str`],
//! because the data deliberately contains quotes, backslashes and non-ASCII text to exercise
//! the server's encoding paths.

use apijet_core::Engine;

/// A literal value of one demo cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    /// SQL NULL.
    Null,
    /// An integer (ids, flags, versions).
    Int(i64),
    /// A decimal with two fractional digits, kept as cents so no float rounding creeps in.
    Cents(i64),
    /// Text, JSON text or a `YYYY-MM-DD HH:MM:SS` timestamp: all are string literals in SQL.
    Str(String),
}

impl Lit {
    /// A string literal from anything string-like.
    pub fn s(text: impl Into<String>) -> Lit {
        Lit::Str(text.into())
    }

    /// A nullable string literal.
    pub fn opt(text: Option<&str>) -> Lit {
        text.map_or(Lit::Null, Lit::s)
    }

    /// The JSON text of `value` as a string literal; compact, so every engine stores the same
    /// bytes (MySQL and PostgreSQL re-format JSON anyway, SQLite and MariaDB keep it verbatim).
    pub fn json(value: &serde_json::Value) -> Lit {
        Lit::Str(value.to_string())
    }

    /// The literal as SQL text for `engine`.
    pub fn render(&self, engine: Engine) -> String {
        match self {
            Lit::Null => "NULL".to_owned(),
            Lit::Int(n) => n.to_string(),
            Lit::Cents(c) => {
                let sign = if *c < 0 { "-" } else { "" };
                let abs = c.unsigned_abs();
                format!("{sign}{}.{:02}", abs / 100, abs % 100)
            }
            Lit::Str(s) => quote_str(engine, s),
        }
    }
}

/// Quotes an identifier. Always quoted, because the demo uses reserved words as names
/// (`User`, `get`, `delete`, `schema`, `date`, `Function`) and PostgreSQL folds unquoted names
/// to lower case while APIJSON names are case-sensitive (`contactIdList`).
pub fn ident(engine: Engine, name: &str) -> String {
    match engine {
        Engine::MySql => format!("`{}`", name.replace('`', "``")),
        Engine::Sqlite | Engine::Postgres => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

/// Quotes a string literal.
///
/// * SQLite: only `'` is special (doubled).
/// * PostgreSQL: `'` doubled; a string holding a backslash uses the `E'…'` form with the
///   backslash doubled, which reads the same whether `standard_conforming_strings` is on or off.
/// * MySQL/MariaDB: `'` doubled and `\` doubled, since backslash is an escape character there
///   (under the default `sql_mode`, i.e. without `NO_BACKSLASH_ESCAPES`).
pub fn quote_str(engine: Engine, s: &str) -> String {
    let quoted = s.replace('\'', "''");
    match engine {
        Engine::Sqlite => format!("'{quoted}'"),
        Engine::Postgres if s.contains('\\') => format!("E'{}'", quoted.replace('\\', "\\\\")),
        Engine::Postgres => format!("'{quoted}'"),
        Engine::MySql => format!("'{}'", quoted.replace('\\', "\\\\")),
    }
}

/// How many rows go into one multi-row `INSERT`: small enough to keep each statement far from
/// any packet or parameter limit, large enough that loading takes a handful of round trips.
pub const ROWS_PER_INSERT: usize = 50;

/// `INSERT INTO t (cols) VALUES (…), (…)` statements for `rows`, [`ROWS_PER_INSERT`] at a time.
pub fn inserts(engine: Engine, table: &str, columns: &[&str], rows: &[Vec<Lit>]) -> Vec<String> {
    let head = format!(
        "INSERT INTO {} ({}) VALUES ",
        ident(engine, table),
        columns
            .iter()
            .map(|c| ident(engine, c))
            .collect::<Vec<_>>()
            .join(", ")
    );
    rows.chunks(ROWS_PER_INSERT)
        .map(|chunk| {
            let values = chunk
                .iter()
                .map(|row| {
                    let cells = row.iter().map(|v| v.render(engine)).collect::<Vec<_>>();
                    format!("({})", cells.join(", "))
                })
                .collect::<Vec<_>>();
            format!("{head}{}", values.join(",\n"))
        })
        .collect()
}
