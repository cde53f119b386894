//! What `apijet demo` would destroy: the demo's tables that already exist in the target
//! database and hold rows. The command drops and recreates every demo table, so on a real
//! APIJSON database (which has tables of the same names) it would replace the user's rows;
//! without `--force` it refuses and names them instead.

use apijet_core::Engine;
use apijet_exec::sink::CollectSink;
use apijet_exec::Backend;
use apijet_sql::Statement;
use serde_json::Value as Json;

use super::schema::TABLES;
use super::sql::ident;

/// A demo table that exists in the database with rows in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occupied {
    /// The table as the database names it.
    pub name: String,
    /// Its row count.
    pub rows: u64,
}

/// The names of the tables `apijet demo` drops and recreates, in creation order.
pub fn demo_table_names() -> Vec<&'static str> {
    TABLES.iter().map(|t| t.name).collect()
}

/// The demo tables that exist in `backend`'s database and hold rows, in the demo's order.
pub async fn occupied_tables(backend: &Backend) -> Result<Vec<Occupied>, String> {
    let engine = backend.engine();
    let existing = rows_of(backend, catalog_query(engine)).await?;
    let existing: Vec<String> = existing
        .into_iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let mut out = Vec::new();
    for demo in TABLES.iter().map(|t| t.name) {
        // A DROP of `Comment` also drops `comment` on SQLite, and on MySQL where table names
        // are case-insensitive; PostgreSQL's quoted names are exact.
        let Some(name) = existing.iter().find(|e| match engine {
            Engine::Postgres => e.as_str() == demo,
            Engine::Sqlite | Engine::MySql => e.eq_ignore_ascii_case(demo),
        }) else {
            continue;
        };
        let count = format!("SELECT count(*) FROM {}", ident(engine, name));
        let rows = rows_of(backend, count)
            .await?
            .first()
            .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
            .unwrap_or(0);
        if rows > 0 {
            out.push(Occupied {
                name: name.clone(),
                rows,
            });
        }
    }
    Ok(out)
}

/// The refusal `apijet demo` answers when tables would lose rows.
pub fn refusal(occupied: &[Occupied]) -> String {
    let held: Vec<String> = occupied
        .iter()
        .map(|t| {
            let s = if t.rows == 1 { "" } else { "s" };
            format!("{} ({} row{s})", t.name, t.rows)
        })
        .collect();
    format!(
        "refusing to load the demo dataset: the database already holds APIJSON data in {}.\n\
         `apijet demo` drops and recreates the tables {}, so these rows would be lost. Nothing \
         was changed.\n  \
         To serve the database as it is:           apijet serve --db URL\n  \
         To replace its tables with the demo data: apijet demo --db URL --force",
        held.join(", "),
        demo_table_names().join(", ")
    )
}

/// The tables of the connection's database (schema) on `engine`.
fn catalog_query(engine: Engine) -> String {
    match engine {
        Engine::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table'".into(),
        Engine::Postgres => "SELECT table_name::text FROM information_schema.tables \
                             WHERE table_schema = current_schema()"
            .into(),
        Engine::MySql => "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                          WHERE table_schema = DATABASE()"
            .into(),
    }
}

/// The first column of every row `sql` answers.
async fn rows_of(backend: &Backend, sql: String) -> Result<Vec<Json>, String> {
    let stmt = Statement {
        sql,
        binds: Vec::new(),
        bounded: false,
    };
    let mut sink = CollectSink::new(&[]);
    backend
        .fetch(&stmt, &mut sink)
        .await
        .map_err(|e| format!("cannot read which tables the database holds: {e}"))?;
    Ok(sink
        .rows
        .into_iter()
        .filter_map(|row| row.into_iter().next().map(|(_, v)| v))
        .collect())
}
