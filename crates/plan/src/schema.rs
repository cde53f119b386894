//! The schema cache: what the database holds and who may touch it, read once at start-up.
//!
//! `exec` fills it by introspecting the catalog and reading the `Access` table; the planner
//! reads it for every request and never changes it. Identifiers in SQL come only from here.

use apijet_core::{Engine, Method, Role};
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

/// The tables of one database, by API name.
#[derive(Debug, Default)]
pub struct SchemaCache {
    tables: HashMap<String, Arc<Table>>,
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

    /// The table clients call `api_name`.
    pub fn table(&self, api_name: &str) -> Option<&Arc<Table>> {
        self.tables.get(api_name)
    }

    /// All tables.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<Table>> {
        self.tables.values()
    }
}

/// Start-up facts the planner needs about the engine.
#[derive(Debug, Clone, Copy)]
pub struct EngineInfo {
    /// The engine.
    pub engine: Engine,
}
