//! `/openapi.json`: an OpenAPI 3.1 document built from the schema cache (tables and columns),
//! the `Access` rows (which roles may call which method on each table) and the `Request` rows
//! (the tags of private methods). Built once per snapshot, served as bytes, to whom the
//! `openapi` setting says (`crate::http`).
//!
//! Outside debug mode the document is the public face of the API: no system tables (`Access`,
//! `Request`, `Function`, …) nor tables their `Access` row keeps to debug mode, no `_` columns,
//! and of the `Request` rows only the tags a client calls, not their structures (which say
//! what a private request may touch and how it is checked). In debug mode it has everything
//! but `_` columns, which never leave the server.

use apijet_core::{Method, Role};
use apijet_plan::schema::{ColumnKind, SchemaCache, Table, SECRET_TABLES};
use apijet_plan::verify::RequestRule;
use serde_json::{json, Map, Value as Json};

const METHODS: [(Method, &str, &str); 8] = [
    (
        Method::Get,
        "get",
        "Read: public, anything the Access rows allow.",
    ),
    (
        Method::Head,
        "head",
        "Count: public, like get but answers counts.",
    ),
    (
        Method::Gets,
        "gets",
        "Private read: needs a login and a Request row for the tag.",
    ),
    (
        Method::Heads,
        "heads",
        "Private count: needs a login and a Request row for the tag.",
    ),
    (
        Method::Post,
        "post",
        "Insert: needs a login and a Request row for the tag.",
    ),
    (
        Method::Put,
        "put",
        "Update: needs a login and a Request row for the tag.",
    ),
    (
        Method::Delete,
        "delete",
        "Delete: needs a login and a Request row for the tag.",
    ),
    (
        Method::Crud,
        "crud",
        "Several methods in one call: objects declared with @post, @put, @delete, @gets…",
    ),
];

fn role_name(r: &Role) -> &'static str {
    match r {
        Role::Unknown => "UNKNOWN",
        Role::Login => "LOGIN",
        Role::Contact => "CONTACT",
        Role::Circle => "CIRCLE",
        Role::Owner => "OWNER",
        Role::Admin => "ADMIN",
    }
}

fn column_schema(kind: ColumnKind) -> Json {
    match kind {
        ColumnKind::Int => json!({"type": ["integer", "null"]}),
        ColumnKind::Float => json!({"type": ["number", "null"]}),
        ColumnKind::Decimal => {
            json!({"type": ["string", "null"], "description": "exact decimal, as a string"})
        }
        ColumnKind::Bool => json!({"type": ["boolean", "null"]}),
        ColumnKind::Json => json!({"description": "a JSON document"}),
        ColumnKind::Timestamp => {
            json!({"type": ["string", "null"], "description": "yyyy-MM-dd HH:mm:ss.S (UTC)"})
        }
        ColumnKind::Date => json!({"type": ["string", "null"], "format": "date"}),
        ColumnKind::Bytes => json!({"type": ["string", "null"], "contentEncoding": "base64"}),
        ColumnKind::Text | ColumnKind::Time | ColumnKind::Other => {
            json!({"type": ["string", "null"]})
        }
    }
}

/// Component names allow `[A-Za-z0-9._-]` only.
fn component_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether the document shows `t`: never a table of secrets (`Verify`), nor one without an
/// `Access` row; outside debug mode neither a system table, a debug-only one, nor one no role
/// may use at all.
pub(crate) fn visible(t: &Table, debug: bool) -> bool {
    let Some(access) = &t.access else {
        return false;
    };
    if SECRET_TABLES.contains(&t.api_name.as_str()) {
        return false;
    }
    debug || (!t.system && !t.debug_only && access.iter().any(|roles| !roles.is_empty()))
}

fn table_schema(t: &Table) -> Json {
    let mut props = Map::new();
    for c in &t.columns {
        // `_`-prefixed columns (passwords) are never answered.
        if !c.name.starts_with('_') {
            props.insert(c.name.clone(), column_schema(c.kind));
        }
    }
    let mut access = Map::new();
    for (method, name, _) in METHODS.iter().take(7) {
        let roles: Vec<&str> = t.roles(*method).iter().map(role_name).collect();
        access.insert(name.to_uppercase(), json!(roles));
    }
    json!({
        "type": "object",
        "description": format!("Table `{}`. x-apijson-access lists the roles allowed per method (Access row).", t.sql_name),
        "properties": props,
        "x-apijson-access": access,
    })
}

fn envelope() -> Json {
    json!({
        "type": "object",
        "description": "The APIJSON envelope: the answered objects by request key, then ok, code, msg and time. Errors come with HTTP 200 and their code here; HTTP-level refusals (404, 405, 408, 413, 503) keep their HTTP status.",
        "properties": {
            "ok": {"type": "boolean"},
            "code": {"type": "integer"},
            "msg": {"type": "string"},
            "time": {"type": "integer"}
        },
        "required": ["ok", "code", "msg"],
        "additionalProperties": true
    })
}

fn operation(id: &str, summary: &str, description: &str, request: Json, tags: &[&str]) -> Json {
    json!({
        "operationId": id,
        "summary": summary,
        "description": description,
        "tags": tags,
        "requestBody": {
            "required": true,
            "content": {"application/json": {"schema": request}}
        },
        "responses": {
            "200": {
                "description": "The APIJSON answer (also for errors: see code)",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/apijet.Envelope"}}}
            },
            "413": {
                "description": "The body is larger than max_body_bytes",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/apijet.Envelope"}}}
            }
        }
    })
}

fn simple_get(id: &str, summary: &str, content_type: &str) -> Json {
    json!({
        "get": {
            "operationId": id,
            "summary": summary,
            "responses": {"200": {"description": summary, "content": {content_type: {}}}}
        }
    })
}

/// The document, serialized.
pub fn document(schema: &SchemaCache, rules: &[RequestRule], debug: bool) -> bytes::Bytes {
    let mut tables: Vec<&Table> = schema
        .tables()
        .map(|t| t.as_ref())
        .filter(|t| visible(t, debug))
        .collect();
    tables.sort_by(|a, b| a.api_name.cmp(&b.api_name));
    let mut schemas = Map::new();
    schemas.insert("apijet.Envelope".into(), envelope());
    let mut request_props = Map::new();
    for t in &tables {
        let name = component_name(&t.api_name);
        schemas.insert(name.clone(), table_schema(t));
        request_props.insert(
            t.api_name.clone(),
            json!({"$ref": format!("#/components/schemas/{name}")}),
        );
        request_props.insert(
            format!("{}[]", t.api_name),
            json!({"type": "object", "description": format!("A list of {} rows: count, page, query and a {} object of conditions", t.api_name, t.api_name)}),
        );
    }
    request_props.insert(
        "[]".into(),
        json!({"type": "object", "description": "A list of objects joined by references (key@)"}),
    );
    schemas.insert(
        "apijet.Request".into(),
        json!({
            "type": "object",
            "description": "An APIJSON request: table objects with conditions (key{}, key~, key$, key<>, key@…), lists (Table[], []), and @column, @order, @group, @having, @combine, tag, format…",
            "properties": request_props,
            "additionalProperties": true
        }),
    );
    let request_ref = json!({"$ref": "#/components/schemas/apijet.Request"});

    let mut paths = Map::new();
    // Tags that name a table the document does not show are left out with it.
    let rules: Vec<&RequestRule> = rules
        .iter()
        .filter(|r| {
            let table = r.tag.trim_end_matches(":[]").trim_end_matches("[]");
            schema.table(table).is_none_or(|t| visible(t, debug))
        })
        .collect();
    for (method, name, description) in METHODS {
        let id = name.to_string();
        let structures: Vec<Json> = rules
            .iter()
            .filter(|r| debug && r.method == method)
            .map(|r| json!({"tag": r.tag, "version": r.version, "structure": r.structure}))
            .collect();
        let mut op = operation(
            &id,
            &format!("/{name}"),
            description,
            request_ref.clone(),
            &["APIJSON"],
        );
        if !structures.is_empty() {
            op["x-apijson-requests"] = Json::Array(structures);
        }
        paths.insert(format!("/{name}"), json!({ "post": op }));
    }
    // One path per private tag: `/{method}/{tag}` takes the content of the tag as its body.
    let mut tagged = rules;
    tagged.sort_by(|a, b| {
        (a.method.name(), &a.tag, a.version).cmp(&(b.method.name(), &b.tag, b.version))
    });
    for r in tagged {
        let Some((_, name, _)) = METHODS.iter().find(|(m, ..)| *m == r.method) else {
            continue;
        };
        if r.tag.contains(['{', '}', '/', '?', '#']) {
            continue;
        }
        let path = format!("/{name}/{}", r.tag);
        let entry = paths.entry(path).or_insert_with(|| json!({}));
        let id = component_name(&format!("{name}_{}", r.tag));
        let op = entry
            .as_object_mut()
            .map(|e| e.entry("post").or_insert_with(|| {
                operation(
                    &id,
                    &format!("/{name} with tag {}", r.tag),
                    "The body is the content of the tag; it must follow the structure of the Request row (listed in x-apijson-requests in debug mode).",
                    json!({"type": "object"}),
                    &["Request rows"],
                )
            }));
        if !debug {
            continue;
        }
        if let Some(op) = op {
            let list = op
                .as_object_mut()
                .map(|o| o.entry("x-apijson-requests").or_insert_with(|| json!([])));
            if let Some(Json::Array(list)) = list {
                list.push(json!({"version": r.version, "structure": r.structure}));
            }
        }
    }
    let login_body = json!({
        "type": "object",
        "properties": {
            "type": {"type": "integer"},
            "phone": {"type": "string"},
            "password": {"type": "string"},
            "remember": {"type": "boolean"}
        },
        "required": ["phone", "password"]
    });
    paths.insert(
        "/login".into(),
        json!({"post": operation("login", "Log in", "Checks phone and password against Privacy; answers a token and sets the apijet_token cookie.", login_body, &["Session"])}),
    );
    paths.insert(
        "/logout".into(),
        json!({"post": operation("logout", "Log out", "Clears the cookie.", json!({"type": "object"}), &["Session"])}),
    );
    paths.insert(
        "/register".into(),
        json!({"post": operation("register", "Register", "A POST with tag register; its Request row decides the shape.", json!({"type": "object"}), &["Session"])}),
    );
    paths.insert(
        "/health".into(),
        simple_get("health", "The process is alive", "application/json"),
    );
    paths.insert(
        "/ready".into(),
        simple_get(
            "ready",
            "The database answers and the schema is loaded",
            "application/json",
        ),
    );

    let doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "apijet",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "An APIJSON server. Every call is a POST of one JSON object; the answer has the same shape. Table schemas list the columns a client may read; x-apijson-access gives the roles per method from the Access table; in debug mode, x-apijson-requests gives the structures of the Request table.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"}
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "cookie": {"type": "apiKey", "in": "cookie", "name": "apijet_token"},
                "bearer": {"type": "http", "scheme": "bearer"}
            }
        }
    });
    bytes::Bytes::from(serde_json::to_vec(&doc).unwrap_or_default())
}
