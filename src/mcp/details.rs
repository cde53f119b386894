//! What `describe` shows that the schema snapshot does not hold: the comments of tables and
//! columns (the `detail` of their `Access` rows, the database's own comments), the `detail`
//! of each `Request` row, and the `Function` rows with their demos. Read by the server itself
//! once per snapshot, when the first `describe` needs them, bounded in rows and bytes, and kept
//! beside that snapshot only (a reload reads them again).

use crate::pipeline::snapshot::Snapshot;
use crate::pipeline::Pipeline;
use apijet_core::{Engine, Method};
use apijet_exec::sink::CollectSink;
use apijet_exec::Backend;
use apijet_sql::Statement;
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::OnceCell;

/// Most rows read from one configuration table or catalogue.
const MAX_ROWS: usize = 10_000;
/// Most bytes read from one of them.
const MAX_BYTES: usize = 4 << 20;
/// Longest comment kept, in bytes.
const MAX_COMMENT: usize = 1000;
/// Largest demo of a function kept, as JSON text.
const MAX_DEMO: usize = 4096;

/// The comments and rows [`describe`](super::describe) adds to the snapshot.
#[derive(Debug, Default)]
pub(crate) struct Details {
    /// Table comments by SQL name: the `Access` row's `detail`, else the database's.
    pub tables: HashMap<String, String>,
    /// Column comments by SQL table name and column.
    pub columns: HashMap<(String, String), String>,
    /// The `detail` of `Request` rows by method, tag and version.
    pub requests: HashMap<(Method, String, i64), String>,
    /// `Function` rows: name, arguments, returns, detail, demo; the methods they name.
    pub functions: Vec<FunctionDoc>,
}

/// One `Function` row as `describe` shows it.
#[derive(Debug)]
pub(crate) struct FunctionDoc {
    pub doc: Map<String, Json>,
    /// The methods its `methods` column allows (none: every method).
    pub methods: Vec<String>,
    /// `debug = 1`: shown only in debug mode.
    pub debug: bool,
}

/// The details of one snapshot, read once by whichever call comes first.
type Once = Arc<OnceCell<Arc<Details>>>;

/// The details of one snapshot at a time (the current one).
#[derive(Default)]
pub(crate) struct DetailsCache {
    slot: Mutex<Option<(Weak<Snapshot>, Once)>>,
}

impl DetailsCache {
    /// The details of `snapshot`: read now if no call read them yet (a failed read is
    /// retried by the next call, and answers none meanwhile).
    pub(crate) async fn of(&self, pipeline: &Pipeline, snapshot: &Arc<Snapshot>) -> Arc<Details> {
        let cell = {
            let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
            match &*slot {
                // The weak pointer keeps the old allocation, so an address is never reused
                // while it is compared.
                Some((of, cell)) if Weak::as_ptr(of) == Arc::as_ptr(snapshot) => Arc::clone(cell),
                _ => {
                    let cell = Arc::new(OnceCell::new());
                    *slot = Some((Arc::downgrade(snapshot), Arc::clone(&cell)));
                    cell
                }
            }
        };
        let read = cell
            .get_or_try_init(|| async { read(&pipeline.backend, snapshot).await.map(Arc::new) })
            .await;
        match read {
            Ok(details) => Arc::clone(details),
            Err(e) => {
                tracing::warn!(error = %e, "describe: the comments and Function rows could not be read");
                Arc::new(Details::default())
            }
        }
    }
}

async fn read(backend: &Backend, snapshot: &Snapshot) -> Result<Details, String> {
    let mut details = Details::default();
    for row in catalog_comments(backend).await? {
        let (Some(table), Some(comment)) = (text(&row, "t"), text(&row, "d")) else {
            continue;
        };
        match text(&row, "c") {
            Some(column) => details.columns.insert((table, column), comment),
            None => details.tables.insert(table, comment),
        };
    }
    let has = |name: &str| snapshot.schema.tables().any(|t| t.sql_name == name);
    // The Access table is always there when any table is.
    for row in all_rows(backend, "Access", &[]).await? {
        if let (Some(name), Some(detail)) = (text(&row, "name"), text(&row, "detail")) {
            details.tables.insert(name, detail);
        }
    }
    if has("Request") {
        for row in all_rows(backend, "Request", &[]).await? {
            let method =
                text(&row, "method").and_then(|m| Method::from_url(&m.to_ascii_lowercase()));
            let version = row
                .get("version")
                .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
                .unwrap_or(1);
            if let (Some(method), Some(tag), Some(detail)) =
                (method, text(&row, "tag"), text(&row, "detail"))
            {
                details.requests.insert((method, tag, version), detail);
            }
        }
    }
    if has("Function") {
        for row in all_rows(backend, "Function", &["demo".to_string()]).await? {
            if let Some(doc) = function_doc(&row) {
                details.functions.push(doc);
            }
        }
        details.functions.sort_by(|a, b| {
            a.doc
                .get("name")
                .map(Json::to_string)
                .cmp(&b.doc.get("name").map(Json::to_string))
        });
    }
    Ok(details)
}

fn function_doc(row: &Map<String, Json>) -> Option<FunctionDoc> {
    let name = text(row, "name")?;
    let mut doc = Map::new();
    doc.insert("name".into(), Json::String(name));
    for (key, shown) in [
        ("arguments", "arguments"),
        ("returnType", "returns"),
        ("detail", "detail"),
    ] {
        if let Some(v) = text(row, key) {
            doc.insert(shown.into(), Json::String(v));
        }
    }
    let demo = match row.get("demo") {
        Some(Json::String(s)) => serde_json::from_str(s).unwrap_or(Json::Null),
        Some(v) => v.clone(),
        None => Json::Null,
    };
    if !demo.is_null() && demo.to_string().len() <= MAX_DEMO {
        doc.insert("demo".into(), demo);
    }
    let methods = text(row, "methods")
        .map(|m| {
            m.split(',')
                .map(|x| x.trim().to_ascii_lowercase())
                .filter(|x| !x.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let debug = matches!(row.get("debug"), Some(Json::Number(n)) if n.as_i64() == Some(1))
        || matches!(row.get("debug"), Some(Json::Bool(true)));
    Some(FunctionDoc {
        doc,
        methods,
        debug,
    })
}

/// A non-empty text value of `row`, cut to [`MAX_COMMENT`] bytes.
fn text(row: &Map<String, Json>, key: &str) -> Option<String> {
    let s = match row.get(key)? {
        Json::String(s) => s.trim(),
        _ => return None,
    };
    if s.is_empty() {
        return None;
    }
    let mut end = s.len().min(MAX_COMMENT);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Some(s[..end].to_string())
}

/// Every row of the configuration table `table`, within the bounds.
async fn all_rows(
    backend: &Backend,
    table: &str,
    json: &[String],
) -> Result<Vec<Map<String, Json>>, String> {
    let mut sql = String::from("SELECT * FROM ");
    backend.dialect().quote(table, &mut sql);
    rows(backend, sql, json).await
}

async fn rows(
    backend: &Backend,
    sql: String,
    json: &[String],
) -> Result<Vec<Map<String, Json>>, String> {
    let mut sink = CollectSink::within(json, MAX_ROWS, MAX_BYTES);
    let stmt = Statement {
        sql,
        binds: Vec::new(),
        bounded: false,
    };
    backend
        .fetch(&stmt, &mut sink)
        .await
        .map_err(|e| e.to_string())?;
    Ok(sink.rows)
}

/// The comments the database keeps on the tables and columns of the served schema: `t`
/// (table), `c` (column; null for the table's own), `d` (comment). SQLite keeps none.
async fn catalog_comments(backend: &Backend) -> Result<Vec<Map<String, Json>>, String> {
    let sql = match backend.engine() {
        Engine::Sqlite => return Ok(Vec::new()),
        Engine::Postgres => {
            "SELECT c.relname AS t, a.attname AS c, d.description AS d \
             FROM pg_catalog.pg_description AS d \
             JOIN pg_catalog.pg_class AS c ON c.oid = d.objoid \
             JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace \
             LEFT JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid \
             AND a.attnum = d.objsubid AND d.objsubid > 0 \
             WHERE d.classoid = CAST('pg_catalog.pg_class' AS regclass) \
             AND n.nspname = current_schema() AND d.description <> ''"
        }
        Engine::MySql => {
            "SELECT TABLE_NAME AS t, COLUMN_NAME AS c, COLUMN_COMMENT AS d \
             FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() AND COLUMN_COMMENT <> '' \
             UNION ALL SELECT TABLE_NAME, NULL, TABLE_COMMENT FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_COMMENT <> ''"
        }
    };
    rows(backend, sql.to_string(), &[]).await
}
