//! The schema cache: what the database holds and who may touch it, read once at start-up.
//!
//! `exec` fills it by introspecting the catalog and reading the `Access` table; the planner
//! reads it for every request and never changes it. Identifiers in SQL come only from here.

use apijet_core::{Capabilities, Method, Role};
use std::collections::HashMap;
use std::sync::Arc;

/// How a column's values are read and written, independent of the engine's type names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// Integers of any width.
    Int,
    /// Floating point.
    Float,
    /// Exact decimals: answered as strings so no digit is lost.
    Decimal,
    /// Booleans.
    Bool,
    /// Text of any length.
    Text,
    /// JSON documents: answered as JSON values.
    Json,
    /// Date and time.
    Timestamp,
    /// Date only.
    Date,
    /// Time of day.
    Time,
    /// Binary data.
    Bytes,
    /// Anything else (answered as text).
    Other,
}

/// One column of a table.
#[derive(Debug, Clone)]
pub struct Column {
    /// The exact column name.
    pub name: String,
    /// How values are handled.
    pub kind: ColumnKind,
}

/// One table as the API sees it.
#[derive(Debug, Clone)]
pub struct Table {
    /// The name clients use (`Access.alias`, else `Access.name`).
    pub api_name: String,
    /// The real table name in the database.
    pub sql_name: String,
    /// Columns in the database's order.
    pub columns: Vec<Column>,
    /// The columns whose values are unique on their own (the primary key, single-column
    /// unique constraints and indexes), where the backend reads them from its catalogue
    /// (SQLite); empty where it does not. An equality on one finds at most one row.
    pub keys: Vec<String>,
    /// Roles allowed per method (indexed by [`method_index`]); `None` when the table has no
    /// `Access` row, which makes it unreachable.
    pub access: Option<[Vec<Role>; 7]>,
    /// `Access.debug = 1`: reachable only in debug mode.
    pub debug_only: bool,
    /// The configuration tables (`Access`, `Request`, `Function`, …) are never reachable
    /// outside debug mode, whatever their `Access` row says (protocol §13.1).
    pub system: bool,
}

impl Table {
    /// A table reachable outside debug mode that grants every method to `roles`: a schema
    /// described without a database (tests, tools).
    pub fn granted(
        api_name: &str,
        sql_name: &str,
        columns: &[(&str, ColumnKind)],
        roles: &[Role],
    ) -> Table {
        Table {
            api_name: api_name.into(),
            sql_name: sql_name.into(),
            columns: columns
                .iter()
                .map(|(name, kind)| Column {
                    name: (*name).into(),
                    kind: *kind,
                })
                .collect(),
            keys: Vec::new(),
            access: Some(std::array::from_fn(|_| roles.to_vec())),
            debug_only: false,
            system: false,
        }
    }

    /// The column named exactly `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The roles allowed for `method`.
    pub fn roles(&self, method: Method) -> &[Role] {
        match &self.access {
            Some(a) => &a[method_index(method)],
            None => &[],
        }
    }
}

/// The position of a method in [`Table::access`].
pub fn method_index(method: Method) -> usize {
    match method {
        Method::Get => 0,
        Method::Head => 1,
        Method::Gets => 2,
        Method::Heads => 3,
        Method::Post => 4,
        Method::Put => 5,
        Method::Delete | Method::Crud => 6,
    }
}

/// A view of the database's own catalogue that the reference serves under fixed names, when an
/// `Access` row names it: `Table` (`information_schema.tables`), `Column`
/// (`information_schema.columns`), and on PostgreSQL `PgClass` and `PgAttribute`
/// (`pg_catalog`). SQLite has no `information_schema`: `Table` and `Column` are read from its
/// catalogue there, with the same column names. APIAuto's data dictionary reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogView {
    /// The tables of the server.
    Tables,
    /// Their columns.
    Columns,
    /// PostgreSQL's `pg_catalog.pg_class` (table comments: `obj_description(oid)`).
    PgClass,
    /// PostgreSQL's `pg_catalog.pg_attribute` (column comments: `col_description(…)`).
    PgAttribute,
}

impl CatalogView {
    /// The view an `Access` row with this alias and name asks for on an engine that can do
    /// `engine`: the reference's fixed mapping (AbstractSQLConfig.TABLE_KEY_MAP), where the
    /// engine has it.
    pub fn of(alias: &str, name: &str, engine: Capabilities) -> Option<CatalogView> {
        let view = match alias {
            "Table" => CatalogView::Tables,
            "Column" => CatalogView::Columns,
            "PgClass" if engine.pg_catalog => CatalogView::PgClass,
            "PgAttribute" if engine.pg_catalog => CatalogView::PgAttribute,
            _ => return None,
        };
        name.eq_ignore_ascii_case(view.table_name()).then_some(view)
    }

    /// The catalogue table's own name (`tables`, `columns`, `pg_class`, `pg_attribute`).
    pub fn table_name(self) -> &'static str {
        match self {
            CatalogView::Tables => "tables",
            CatalogView::Columns => "columns",
            CatalogView::PgClass => "pg_class",
            CatalogView::PgAttribute => "pg_attribute",
        }
    }

    /// The schema holding it.
    pub fn schema_name(self) -> &'static str {
        match self {
            CatalogView::Tables | CatalogView::Columns => "information_schema",
            CatalogView::PgClass | CatalogView::PgAttribute => "pg_catalog",
        }
    }
}

/// The tables of one database, by API name.
#[derive(Debug, Default)]
pub struct SchemaCache {
    tables: HashMap<String, Arc<Table>>,
    /// Tables that are views of the catalogue, by API name.
    catalog: HashMap<String, CatalogView>,
    /// Rows that could not be used, with the reason, for the start-up log.
    pub warnings: Vec<String>,
}

/// Tables holding secrets only the server reads (verification codes): never reachable through
/// the API, not even in debug mode.
pub const SECRET_TABLES: [&str; 1] = ["Verify"];

/// Tables whose contents configure the server and so are hidden outside debug mode.
pub const SYSTEM_TABLES: [&str; 5] = ["Access", "Request", "Function", "Script", "Document"];

impl SchemaCache {
    /// An empty cache.
    pub fn new() -> SchemaCache {
        SchemaCache::default()
    }

    /// Adds a table under its API name.
    pub fn insert(&mut self, table: Table) {
        self.tables.insert(table.api_name.clone(), Arc::new(table));
    }

    /// Adds a view of the catalogue under its API name; it is reachable in debug mode only.
    pub fn insert_catalog_view(&mut self, table: Table, view: CatalogView) {
        self.catalog.insert(table.api_name.clone(), view);
        self.insert(Table {
            debug_only: true,
            system: true,
            ..table
        });
    }

    /// The catalogue view the table `api_name` reads, when it is one.
    pub fn catalog_view(&self, api_name: &str) -> Option<CatalogView> {
        self.catalog.get(api_name).copied()
    }

    /// The table clients call `api_name`.
    pub fn table(&self, api_name: &str) -> Option<&Arc<Table>> {
        self.tables.get(api_name)
    }

    /// All tables.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<Table>> {
        self.tables.values()
    }
}
