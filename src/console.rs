//! The web console at `/`: one HTML page with its script and styles inside, embedded in the
//! binary, so it works offline and needs no CDN. Its schema panel and completion read
//! `/console/schema.json`, built here from the current snapshot (not from `/openapi.json`,
//! whose exposure is a setting of its own); `/favicon.ico` is built in too, so a browser's
//! automatic request for it finds an icon rather than a 405.

use crate::app::AppState;
use apijet_core::{Method, Role};
use apijet_plan::schema::{ColumnKind, Table, SECRET_TABLES};
use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;

const PAGE: &str = include_str!("../assets/console.html");
const FAVICON: &[u8] = include_bytes!("../assets/favicon.ico");

/// The methods the `Access` table grants, in its column order.
const METHODS: [Method; 7] = [
    Method::Get,
    Method::Head,
    Method::Gets,
    Method::Heads,
    Method::Post,
    Method::Put,
    Method::Delete,
];

/// The roles a visitor can act as (ADMIN is refused with 403 whatever `Access` grants it).
const ROLES: [Role; 5] = [
    Role::Unknown,
    Role::Login,
    Role::Contact,
    Role::Circle,
    Role::Owner,
];

async fn page() -> Response {
    let mut r = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

async fn favicon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/x-icon"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        FAVICON,
    )
        .into_response()
}

/// `GET /console/schema.json`: what the schema panel shows.
async fn schema(State(state): State<Arc<AppState>>) -> Response {
    let snapshot = state.pipeline.snapshot();
    let tables = snapshot.schema.tables().map(|t| t.as_ref());
    let body = schema_document(tables, state.pipeline.options.debug);
    (
        [
            (header::CONTENT_TYPE, "application/json; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body.to_string(),
    )
        .into_response()
}

/// The tables a client may reach (those with an `Access` row; the configuration tables only
/// in debug mode; never `Verify`), each with its columns (no `_` column: those are never
/// answered) and, per role, the methods its `Access` row grants. Sorted by name.
fn schema_document<'a>(tables: impl Iterator<Item = &'a Table>, debug: bool) -> Json {
    let mut visible: Vec<&Table> = tables
        .filter(|t| t.access.is_some() && (debug || (!t.system && !t.debug_only)))
        .filter(|t| !SECRET_TABLES.contains(&t.api_name.as_str()))
        .collect();
    visible.sort_by(|a, b| a.api_name.cmp(&b.api_name));
    let tables: Vec<Json> = visible
        .iter()
        .map(|t| {
            let columns: Vec<Json> = t
                .columns
                .iter()
                .filter(|c| !c.name.starts_with('_'))
                .map(|c| json!({"name": c.name, "type": type_name(c.kind)}))
                .collect();
            let mut roles = Map::new();
            for role in ROLES {
                let methods: Vec<&str> = METHODS
                    .iter()
                    .filter(|m| t.roles(**m).contains(&role))
                    .map(|m| m.name())
                    .collect();
                if !methods.is_empty() {
                    roles.insert(role.name().to_string(), json!(methods));
                }
            }
            json!({"name": t.api_name, "columns": columns, "roles": roles})
        })
        .collect();
    json!({"debug": debug, "tables": tables})
}

pub(crate) fn type_name(kind: ColumnKind) -> &'static str {
    match kind {
        ColumnKind::Int => "integer",
        ColumnKind::Float => "number",
        ColumnKind::Decimal => "decimal",
        ColumnKind::Bool => "boolean",
        ColumnKind::Text => "text",
        ColumnKind::Json => "JSON",
        ColumnKind::Timestamp => "datetime",
        ColumnKind::Date => "date",
        ColumnKind::Time => "time",
        ColumnKind::Bytes => "bytes",
        ColumnKind::Other => "other",
    }
}

/// Adds `GET /` (and `/console`), `/console/schema.json` and `/favicon.ico` to the router.
pub fn routes(router: Router<Arc<AppState>>) -> Router<Arc<AppState>> {
    router
        .route("/", get(page))
        .route("/console", get(page))
        .route("/console/schema.json", get(schema))
        .route("/favicon.ico", get(favicon))
}

#[cfg(test)]
mod tests {
    use super::*;
    use apijet_plan::schema::Column;

    fn table(name: &str, system: bool, get: Vec<Role>) -> Table {
        let mut access: [Vec<Role>; 7] = Default::default();
        access[0] = get;
        access[4] = vec![Role::Owner];
        Table {
            api_name: name.into(),
            sql_name: name.into(),
            columns: vec![
                Column {
                    name: "id".into(),
                    kind: ColumnKind::Int,
                },
                Column {
                    name: "_password".into(),
                    kind: ColumnKind::Text,
                },
            ],
            keys: Vec::new(),
            access: Some(access),
            debug_only: false,
            system,
        }
    }

    #[test]
    fn the_schema_shows_reachable_tables_their_columns_and_each_roles_methods() {
        let tables = [
            table("User", false, vec![Role::Unknown, Role::Login]),
            table("Access", true, vec![Role::Unknown]),
            table("Verify", false, vec![Role::Unknown]),
        ];
        let doc = schema_document(tables.iter(), false);
        assert_eq!(
            doc["tables"],
            json!([{
                "name": "User",
                "columns": [{"name": "id", "type": "integer"}],
                "roles": {"UNKNOWN": ["GET"], "LOGIN": ["GET"], "OWNER": ["POST"]}
            }])
        );
        let debug = schema_document(tables.iter(), true);
        let names: Vec<&str> = debug["tables"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(
            names,
            ["Access", "User"],
            "system tables in debug, never Verify"
        );
    }
}
