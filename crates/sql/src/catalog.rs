//! The catalogue views (`Table`, `Column`) where `information_schema` alone does not give
//! what the reference's clients read: SQLite has none (its `sqlite_master` and
//! `pragma_table_info` as derived tables with the standard columns), and PostgreSQL's lacks
//! MySQL's `table_comment`, `column_comment` and `column_type` (added from `pg_catalog`), so
//! that `"column_comment[>":2` asks the same on every engine.
//!
//! Every view holds the served schema's tables alone (the database of the URL on MySQL, the
//! current schema on PostgreSQL): the catalogue of a server lists every database on it
//! (`mysql.servers`, `mysql.user`), which is no business of the API's clients, debug mode or
//! not.

use apijet_core::Engine;
use apijet_plan::schema::{CatalogView, ColumnKind};

const PG_TABLES: &str = "(SELECT t.*, obj_description(c.oid, 'pg_class') AS table_comment \
     FROM information_schema.tables AS t \
     LEFT JOIN pg_catalog.pg_namespace AS n ON n.nspname = t.table_schema \
     LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relname = t.table_name \
     WHERE t.table_schema = current_schema())";

const PG_COLUMNS: &str = "(SELECT k.*, col_description(c.oid, CAST(k.ordinal_position AS \
     integer)) AS column_comment, format_type(a.atttypid, a.atttypmod) AS column_type \
     FROM information_schema.columns AS k \
     LEFT JOIN pg_catalog.pg_namespace AS n ON n.nspname = k.table_schema \
     LEFT JOIN pg_catalog.pg_class AS c ON c.relnamespace = n.oid AND c.relname = k.table_name \
     LEFT JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid \
     AND a.attnum = k.ordinal_position WHERE k.table_schema = current_schema())";

const PG_CLASSES: &str = "(SELECT c.* FROM pg_catalog.pg_class AS c \
     WHERE c.relnamespace = CAST(current_schema() AS regnamespace))";

const PG_ATTRIBUTES: &str = "(SELECT a.* FROM pg_catalog.pg_attribute AS a \
     JOIN pg_catalog.pg_class AS c ON c.oid = a.attrelid \
     WHERE c.relnamespace = CAST(current_schema() AS regnamespace))";

const MYSQL_TABLES: &str =
    "(SELECT * FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE())";

const MYSQL_COLUMNS: &str =
    "(SELECT * FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE())";

/// The columns a catalogue view adds on `engine` to the engine's own (see the module).
pub fn added_columns(engine: Engine, view: CatalogView) -> &'static [(&'static str, ColumnKind)] {
    match (engine, view) {
        (Engine::Postgres, CatalogView::Tables) => &[("table_comment", ColumnKind::Text)],
        (Engine::Postgres, CatalogView::Columns) => &[
            ("column_comment", ColumnKind::Text),
            ("column_type", ColumnKind::Text),
        ],
        _ => &[],
    }
}

/// The derived table of a catalogue view on PostgreSQL.
pub(crate) fn postgres_source(view: CatalogView) -> &'static str {
    match view {
        CatalogView::Tables => PG_TABLES,
        CatalogView::Columns => PG_COLUMNS,
        CatalogView::PgClass => PG_CLASSES,
        CatalogView::PgAttribute => PG_ATTRIBUTES,
    }
}

/// The derived table of a catalogue view on MySQL and MariaDB (the PostgreSQL views are not
/// planned there).
pub(crate) fn mysql_source(view: CatalogView) -> &'static str {
    match view {
        CatalogView::Columns | CatalogView::PgAttribute => MYSQL_COLUMNS,
        CatalogView::Tables | CatalogView::PgClass => MYSQL_TABLES,
    }
}

const TABLES: &str = "(SELECT 'main' AS table_catalog, 'main' AS table_schema, m.name AS \
     table_name, CASE m.type WHEN 'view' THEN 'VIEW' ELSE 'BASE TABLE' END AS table_type, \
     '' AS table_comment FROM sqlite_master AS m WHERE m.type IN ('table', 'view') \
     AND m.name NOT LIKE 'sqlite_%')";

const COLUMNS: &str = "(SELECT 'main' AS table_catalog, 'main' AS table_schema, m.name AS \
     table_name, p.name AS column_name, p.cid + 1 AS ordinal_position, p.dflt_value AS \
     column_default, CASE WHEN p.\"notnull\" = 1 THEN 'NO' ELSE 'YES' END AS is_nullable, \
     lower(p.type) AS data_type, lower(p.type) AS column_type, CASE WHEN p.pk > 0 THEN 'PRI' \
     ELSE '' END AS column_key, '' AS column_comment FROM sqlite_master AS m \
     JOIN pragma_table_info(m.name) AS p WHERE m.type IN ('table', 'view') \
     AND m.name NOT LIKE 'sqlite_%')";

/// The columns of a catalogue view on SQLite, as its derived table answers them; `None`
/// for the views SQLite does not have (PostgreSQL's).
pub fn sqlite_columns(view: CatalogView) -> Option<&'static [(&'static str, ColumnKind)]> {
    use ColumnKind::{Int, Text};
    match view {
        CatalogView::Tables => Some(&[
            ("table_catalog", Text),
            ("table_schema", Text),
            ("table_name", Text),
            ("table_type", Text),
            ("table_comment", Text),
        ]),
        CatalogView::Columns => Some(&[
            ("table_catalog", Text),
            ("table_schema", Text),
            ("table_name", Text),
            ("column_name", Text),
            ("ordinal_position", Int),
            ("column_default", Text),
            ("is_nullable", Text),
            ("data_type", Text),
            ("column_type", Text),
            ("column_key", Text),
            ("column_comment", Text),
        ]),
        CatalogView::PgClass | CatalogView::PgAttribute => None,
    }
}

/// The derived table of a catalogue view on SQLite.
pub(crate) fn sqlite_source(view: CatalogView) -> &'static str {
    match view {
        CatalogView::Columns => COLUMNS,
        // The planner serves no other view on SQLite (`sqlite_columns`).
        _ => TABLES,
    }
}
