//! Reads the catalog and the `Access` table into a [`SchemaCache`] at start-up.

use crate::backend::Backend;
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_core::{Engine, Method, Role};
use apijet_plan::schema::{
    method_index, CatalogView, Column, ColumnKind, SchemaCache, Table, SYSTEM_TABLES,
};
use apijet_sql::Statement;
use serde_json::{Map, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

const SQLITE_COLUMNS: &str =
    "SELECT m.name AS t, p.name AS c, p.type AS ty FROM sqlite_master AS m \
     JOIN pragma_table_info(m.name) AS p WHERE m.type IN ('table', 'view') \
     AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.cid";

// The single-column unique keys: the primary key and the unique indexes of one column that
// hold for every row (not partial) and compare as `=` does on the column (binary collation).
// An equality on one of them finds at most one row through its index.
const SQLITE_KEYS: &str = "SELECT m.name AS t, x.name AS c FROM sqlite_master AS m \
     JOIN pragma_index_list(m.name) AS l JOIN pragma_index_xinfo(l.name) AS x \
     WHERE m.type = 'table' AND l.\"unique\" = 1 AND l.partial = 0 AND x.key = 1 \
     AND x.name IS NOT NULL AND x.coll = 'BINARY' \
     AND (SELECT count(*) FROM pragma_index_info(l.name)) = 1 \
     UNION SELECT m.name, p.name FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p \
     WHERE m.type = 'table' AND p.pk = 1 \
     AND (SELECT count(*) FROM pragma_table_info(m.name) WHERE pk > 0) = 1";

const PG_COLUMNS: &str = "SELECT c.table_name AS t, c.column_name AS c, c.data_type AS ty \
     FROM information_schema.columns AS c WHERE c.table_schema = current_schema() \
     ORDER BY c.table_name, c.ordinal_position";

// Every catalogue lookup names its database with a constant (`DATABASE()`), never with a
// column of another catalogue row: MariaDB's information_schema builds the rows of exactly the
// databases and tables a constant condition names and of every database otherwise, opening each
// table's definition. A correlated subquery over CHECK_CONSTRAINTS (one per column) read every
// database on the server per column: 1.4 s at start beside 100 other databases, 2 ms now.
const MYSQL_COLUMNS: &str = "SELECT c.TABLE_NAME AS t, c.COLUMN_NAME AS c, c.DATA_TYPE AS ty \
     FROM information_schema.COLUMNS AS c WHERE c.TABLE_SCHEMA = DATABASE() \
     ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION";

// MariaDB stores JSON as longtext with a json_valid() check; the check marks the column.
// MySQL before 8.0.16 has no CHECK_CONSTRAINTS: then no column is marked.
const MYSQL_JSON_CHECKS: &str = "SELECT k.TABLE_NAME AS t, k.CHECK_CLAUSE AS clause \
     FROM information_schema.CHECK_CONSTRAINTS AS k WHERE k.CONSTRAINT_SCHEMA = DATABASE()";

/// The columns of a catalogue view, under the lower-case names the reference's clients use
/// (MariaDB's `information_schema` spells them in capitals and matches them in any case).
/// PostgreSQL's catalogue columns of internal types (arrays, `pg_node_tree`, `regproc`, …)
/// are left out: they have no JSON form.
async fn catalog_columns(backend: &Backend, view: CatalogView) -> Result<Vec<Column>, ExecError> {
    let sql = match backend.engine() {
        Engine::Sqlite => {
            let columns = apijet_sql::catalog::sqlite_columns(view).unwrap_or_default();
            return Ok(columns
                .iter()
                .map(|(name, kind)| Column {
                    name: name.to_string(),
                    kind: *kind,
                })
                .collect());
        }
        Engine::Postgres => format!(
            "SELECT column_name AS c, data_type AS ty FROM information_schema.columns \
             WHERE table_schema = '{}' AND table_name = '{}' ORDER BY ordinal_position",
            view.schema_name(),
            view.table_name()
        ),
        Engine::MySql => format!(
            "SELECT LOWER(COLUMN_NAME) AS c, DATA_TYPE AS ty FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = 'information_schema' AND UPPER(TABLE_NAME) = '{}' \
             ORDER BY ORDINAL_POSITION",
            view.table_name().to_ascii_uppercase()
        ),
    };
    let mut out = Vec::new();
    for r in rows(backend, &sql, &[]).await? {
        let (Some(name), Some(ty)) = (
            r.get("c").and_then(Json::as_str),
            r.get("ty").and_then(Json::as_str),
        ) else {
            continue;
        };
        let kind = kind_of(ty);
        if kind == ColumnKind::Other && !matches!(ty, "name" | "oid") {
            continue;
        }
        out.push(Column {
            name: name.to_string(),
            kind,
        });
    }
    for (name, kind) in apijet_sql::catalog::added_columns(backend.engine(), view) {
        out.push(Column {
            name: name.to_string(),
            kind: *kind,
        });
    }
    Ok(out)
}

/// Whose catalogue an `Access` alias of the reference names, when apijet's engine has none
/// like it (the reference's SQL Server, Oracle and PostgreSQL views).
fn other_engines_catalogue(alias: &str) -> Option<&'static str> {
    Some(match alias {
        "SysTable" | "SysColumn" | "ExtendedProperty" => "a view of SQL Server's sys catalogue",
        "AllTable" | "AllColumn" | "AllTableComment" | "AllColumnComment" => {
            "a view of Oracle's ALL_ catalogue"
        }
        "PgClass" | "PgAttribute" => "a view of PostgreSQL's pg_catalog",
        _ => return None,
    })
}

async fn rows(
    backend: &Backend,
    sql: &str,
    json: &[String],
) -> Result<Vec<Map<String, Json>>, ExecError> {
    let mut sink = CollectSink::new(json);
    let stmt = Statement {
        sql: sql.to_string(),
        binds: Vec::new(),
        bounded: false,
    };
    backend.fetch(&stmt, &mut sink).await?;
    Ok(sink.rows)
}

/// How an engine's type name maps to a column kind.
pub fn kind_of(type_name: &str) -> ColumnKind {
    let t = type_name.to_ascii_lowercase();
    if t.contains("json") {
        ColumnKind::Json
    } else if t.contains("int") || t == "serial" || t == "bigserial" {
        ColumnKind::Int
    } else if t.contains("bool") || t == "bit" {
        ColumnKind::Bool
    } else if t.contains("dec") || t.contains("numeric") || t == "money" {
        ColumnKind::Decimal
    } else if t.contains("real") || t.contains("float") || t.contains("double") {
        ColumnKind::Float
    } else if t.contains("timestamp") || t.contains("datetime") {
        ColumnKind::Timestamp
    } else if t == "date" {
        ColumnKind::Date
    } else if t.starts_with("time") {
        ColumnKind::Time
    } else if t.contains("blob") || t.contains("binary") || t == "bytea" {
        ColumnKind::Bytes
    } else if t.contains("char") || t.contains("text") || t.contains("clob") || t.is_empty() {
        ColumnKind::Text
    } else {
        ColumnKind::Other
    }
}

fn roles_of(v: Option<&Json>) -> Result<Vec<Role>, String> {
    let list = match v {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(a)) => a.clone(),
        Some(Json::String(s)) => match serde_json::from_str::<Json>(s) {
            Ok(Json::Array(a)) => a,
            _ => s
                .split(',')
                .map(|x| Json::String(x.trim().to_string()))
                .collect(),
        },
        Some(other) => return Err(format!("role list {other} is not a JSON array")),
    };
    list.iter()
        .filter(|r| !matches!(r, Json::String(s) if s.is_empty()))
        .map(|r| {
            r.as_str()
                .and_then(|s| Role::parse(s.trim()))
                .ok_or_else(|| format!("unknown role {r}"))
        })
        .collect()
}

/// The columns that a check constraint declares JSON, `json_valid(`column`)` (MariaDB's JSON
/// type), as lower-case `(table, column)`: MariaDB compares names in any case.
fn json_checked_columns(checks: &[Map<String, Json>]) -> BTreeSet<(String, String)> {
    const CALL: &str = "json_valid(`";
    let mut out = BTreeSet::new();
    for k in checks {
        let (Some(table), Some(clause)) = (
            k.get("t").and_then(Json::as_str),
            k.get("clause").and_then(Json::as_str),
        ) else {
            continue;
        };
        let clause = clause.to_ascii_lowercase();
        for (at, _) in clause.match_indices(CALL) {
            let rest = &clause[at + CALL.len()..];
            if let Some(column) = rest.split_once("`)").map(|(c, _)| c) {
                out.insert((table.to_ascii_lowercase(), column.to_string()));
            }
        }
    }
    out
}

/// Introspects the database and reads `Access` into a schema cache.
pub async fn load_schema(backend: &Backend) -> Result<SchemaCache, ExecError> {
    backend.forget_outputs();
    let catalog = match backend.engine() {
        Engine::Sqlite => rows(backend, SQLITE_COLUMNS, &[]).await?,
        Engine::Postgres => rows(backend, PG_COLUMNS, &[]).await?,
        Engine::MySql => rows(backend, MYSQL_COLUMNS, &[]).await?,
    };
    let json_checked = match backend.engine() {
        Engine::MySql => json_checked_columns(
            &rows(backend, MYSQL_JSON_CHECKS, &[])
                .await
                .unwrap_or_default(),
        ),
        _ => BTreeSet::new(),
    };
    let key_rows = match backend.engine() {
        Engine::Sqlite => rows(backend, SQLITE_KEYS, &[]).await?,
        // Only SQLite's reads run where their cost must be known: the others need no keys.
        Engine::Postgres | Engine::MySql => Vec::new(),
    };
    let mut keys: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &key_rows {
        if let (Some(t), Some(c)) = (
            r.get("t").and_then(Json::as_str),
            r.get("c").and_then(Json::as_str),
        ) {
            keys.entry(t.to_string()).or_default().push(c.to_string());
        }
    }
    let mut tables: BTreeMap<String, Vec<Column>> = BTreeMap::new();
    for r in &catalog {
        let (Some(t), Some(c)) = (
            r.get("t").and_then(Json::as_str),
            r.get("c").and_then(Json::as_str),
        ) else {
            continue;
        };
        let ty = r.get("ty").and_then(Json::as_str).unwrap_or_default();
        let kind = if json_checked.contains(&(t.to_ascii_lowercase(), c.to_ascii_lowercase())) {
            ColumnKind::Json
        } else {
            kind_of(ty)
        };
        tables.entry(t.to_string()).or_default().push(Column {
            name: c.to_string(),
            kind,
        });
    }

    let mut cache = SchemaCache::new();
    if !tables.contains_key("Access") {
        cache
            .warnings
            .push("the database has no Access table: no table is reachable".into());
        return Ok(cache);
    }
    let dialect = backend.dialect();
    let mut sql = String::from("SELECT * FROM ");
    dialect.quote("Access", &mut sql);
    let methods = ["get", "head", "gets", "heads", "post", "put", "delete"];
    let json_cols: Vec<String> = methods.iter().map(|m| m.to_string()).collect();
    for row in rows(backend, &sql, &json_cols).await? {
        let id = row.get("id").map(Json::to_string).unwrap_or_default();
        let Some(name) = row.get("name").and_then(Json::as_str) else {
            cache
                .warnings
                .push(format!("Access row {id}: no name, skipped"));
            continue;
        };
        let api_name = row
            .get("alias")
            .and_then(Json::as_str)
            .filter(|a| !a.is_empty())
            .unwrap_or(name);
        let view = match tables.contains_key(name) {
            true => None,
            false => CatalogView::of(api_name, name, backend.capabilities()),
        };
        let columns = match (tables.get(name), view) {
            (Some(columns), _) => columns.clone(),
            (None, Some(view)) => catalog_columns(backend, view).await?,
            (None, None) => {
                cache
                    .warnings
                    .push(match other_engines_catalogue(api_name) {
                        Some(whose) => format!(
                            "Access row {id}: {api_name} is {whose}, which this engine does not \
                         have, skipped"
                        ),
                        None => format!("Access row {id}: table {name} does not exist, skipped"),
                    });
                continue;
            }
        };
        let mut access: [Vec<Role>; 7] = Default::default();
        let mut broken = None;
        for (i, m) in methods.iter().enumerate() {
            match roles_of(row.get(*m)) {
                Ok(r) => access[i] = r,
                Err(e) => broken = Some(format!("Access row {id}: {m}: {e}, skipped")),
            }
        }
        if let Some(w) = broken {
            cache.warnings.push(w);
            continue;
        }
        debug_assert_eq!(method_index(Method::Delete), 6);
        let debug_only = matches!(row.get("debug"), Some(Json::Number(n)) if n.as_i64() == Some(1))
            || matches!(row.get("debug"), Some(Json::Bool(true)));
        let table = Table {
            api_name: api_name.to_string(),
            sql_name: name.to_string(),
            columns,
            keys: keys.get(name).cloned().unwrap_or_default(),
            access: Some(access),
            debug_only,
            system: SYSTEM_TABLES.contains(&name),
        };
        match view {
            Some(view) => cache.insert_catalog_view(table, view),
            None => cache.insert(table),
        }
    }
    Ok(cache)
}

/// Reads the `Request` table's rows (skipping `debug = 1` rows outside debug mode); a database
/// without one has no private methods. Unusable rows are reported and skipped.
pub async fn load_request_rules(
    backend: &Backend,
    schema_has_request: bool,
    debug: bool,
) -> Result<(Vec<apijet_plan::verify::RequestRule>, Vec<String>), ExecError> {
    let mut warnings = Vec::new();
    if !schema_has_request {
        return Ok((Vec::new(), warnings));
    }
    let dialect = backend.dialect();
    let mut sql = String::from("SELECT * FROM ");
    dialect.quote("Request", &mut sql);
    let mut out = Vec::new();
    for row in rows(backend, &sql, &["structure".to_string()]).await? {
        let id = row.get("id").and_then(Json::as_i64).unwrap_or_default();
        if !debug && matches!(row.get("debug"), Some(Json::Number(n)) if n.as_i64() == Some(1)) {
            continue;
        }
        let method = row
            .get("method")
            .and_then(Json::as_str)
            .and_then(|m| Method::from_url(&m.to_ascii_lowercase()));
        let (Some(method), Some(tag)) = (method, row.get("tag").and_then(Json::as_str)) else {
            warnings.push(format!("Request row {id}: no valid method or tag, skipped"));
            continue;
        };
        let version = row
            .get("version")
            .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
            .unwrap_or(1);
        let structure = match row.get("structure") {
            Some(Json::String(s)) => serde_json::from_str(s).unwrap_or(Json::Null),
            Some(v) => v.clone(),
            None => Json::Null,
        };
        out.push(apijet_plan::verify::RequestRule {
            id,
            method,
            tag: tag.to_string(),
            version,
            structure,
        });
    }
    Ok((out, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(table: &str, clause: &str) -> Map<String, Json> {
        let mut row = Map::new();
        row.insert("t".into(), Json::from(table));
        row.insert("clause".into(), Json::from(clause));
        row
    }

    #[test]
    fn json_valid_checks_mark_their_columns_in_any_case() {
        let marked = json_checked_columns(&[
            check("Moment", "json_valid(`pictureList`)"),
            check("t", "`a` > 0 and JSON_VALID(`b`) and json_valid(`c`)"),
            check("u", "length(`d`) < 10"),
        ]);
        let want = [("moment", "picturelist"), ("t", "b"), ("t", "c")];
        assert_eq!(
            marked,
            want.iter()
                .map(|(t, c)| (t.to_string(), c.to_string()))
                .collect::<BTreeSet<_>>()
        );
    }
}
