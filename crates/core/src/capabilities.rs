//! What an engine can do, for the stages that must know: one value per engine, chosen once by
//! the backend that serves it, so that code asks a capability (`caps.procedures`) rather than
//! comparing with an engine's name, which a new engine would pass silently.

use crate::Engine;

/// The capabilities of one engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The engine, for the tables that list per engine what it can express (the SQL
    /// functions): read with an exhaustive `match`, never compared.
    pub engine: Engine,
    /// Its name in messages.
    pub name: &'static str,
    /// Runs inside the server's process (an embedded file): no server of its own, so no read
    /// replicas and no database name in its URL, and its statements run on the server's own
    /// threads, where nothing else notices that a client left.
    pub in_process: bool,
    /// Output names longer than this many bytes come back cut (PostgreSQL's 63): such a name
    /// needs an alias.
    pub max_output_name_bytes: Option<usize>,
    /// GROUP BY answers its groups sorted by the grouped columns (MariaDB), so a grouped or
    /// DISTINCT list without `@order` needs no ORDER BY to answer in that order.
    pub sorted_groups: bool,
    /// Regular expressions run on a backtracking engine, where some patterns take exponential
    /// time: those are refused while planning.
    pub backtracking_regex: bool,
    /// `date_format`'s format is translated into the engine's own (PostgreSQL's `to_char`):
    /// it must be a literal made of the specifiers the translation knows.
    pub translated_date_formats: bool,
    /// PostgreSQL's catalogue (`pg_class`, `pg_attribute`), readable as the reference's
    /// `PgClass` and `PgAttribute` tables.
    pub pg_catalog: bool,
    /// Stored procedures (`CALL`).
    pub procedures: bool,
    /// The names `@database` may give for it, as the reference names the engine.
    pub database_names: &'static [&'static str],
    /// The schemas it serves whatever the URL names (`main`, `public`).
    pub default_schemas: &'static [&'static str],
}

impl Capabilities {
    /// Embedded SQLite.
    pub const SQLITE: Capabilities = Capabilities {
        engine: Engine::Sqlite,
        name: "SQLite",
        in_process: true,
        max_output_name_bytes: None,
        sorted_groups: false,
        backtracking_regex: false,
        translated_date_formats: false,
        pg_catalog: false,
        procedures: false,
        database_names: &["SQLITE"],
        default_schemas: &["main"],
    };

    /// PostgreSQL.
    pub const POSTGRES: Capabilities = Capabilities {
        engine: Engine::Postgres,
        name: "PostgreSQL",
        in_process: false,
        max_output_name_bytes: Some(63),
        sorted_groups: false,
        backtracking_regex: false,
        translated_date_formats: true,
        pg_catalog: true,
        procedures: true,
        database_names: &["POSTGRESQL"],
        default_schemas: &["public"],
    };

    /// MySQL and MariaDB.
    pub const MYSQL: Capabilities = Capabilities {
        engine: Engine::MySql,
        name: "MySQL/MariaDB",
        in_process: false,
        max_output_name_bytes: None,
        sorted_groups: true,
        backtracking_regex: true,
        translated_date_formats: false,
        pg_catalog: false,
        procedures: true,
        database_names: &["MYSQL", "MARIADB"],
        default_schemas: &[],
    };
}
