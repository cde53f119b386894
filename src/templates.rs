//! `POST /router/{method}/{tag}`: the framework's mapped REST calls (protocol §14, apijson-
//! framework `APIJSONController.router`). A `Document` row whose `url` is `/{method}/{tag}`
//! holds an APIJSON request template in its `apijson` column; the client's body and URL
//! parameters are merged into it by dotted path (`"Moment[].page": 1` sets `page` inside
//! `Moment[]`) and the result runs as `method`.
//!
//! Version: `?version=N` picks the row with that version, else the nearest higher one;
//! none or `0` picks the newest. Without a template the call falls back to `/{method}/{tag}`
//! in debug mode (the reference's compatibility switch follows its DEBUG flag) and is refused
//! otherwise. A GET or HEAD needs a `Request` row for `(method, tag)`, as in the reference;
//! private methods are verified by that row after the merge.

use crate::pipeline::Pipeline;
use apijet_core::{Method, Value};
use apijet_plan::PlanError;
use apijet_request::{is_name, parse_body};
use apijet_response::ApiError;
use serde_json::{Map, Value as Json};

/// Deepest dotted path merged into a template.
const MAX_PATH_PARTS: usize = 8;

fn refused(msg: String) -> ApiError {
    ApiError::Plan(PlanError::Invalid(msg))
}

/// Sets `value` at the dotted `path` inside `target`, creating objects on the way.
fn put_path(target: &mut Map<String, Json>, path: &str, value: Json) -> Result<(), ApiError> {
    let parts: Vec<&str> = path.split('.').collect();
    if parts.len() > MAX_PATH_PARTS || parts.iter().any(|p| p.is_empty()) {
        return Err(refused(format!(
            "router: '{path}' is not a path of at most {MAX_PATH_PARTS} dot-separated keys"
        )));
    }
    let (last, parents) = parts.split_last().unwrap_or((&"", &[]));
    let mut node = target;
    for p in parents {
        let entry = node
            .entry(p.to_string())
            .or_insert_with(|| Json::Object(Map::new()));
        if !entry.is_object() {
            *entry = Json::Object(Map::new());
        }
        node = entry
            .as_object_mut()
            .ok_or_else(|| refused(format!("router: '{path}'")))?;
    }
    node.insert(last.to_string(), value);
    Ok(())
}

/// The APIJSON call a `/router/{method}/{tag}` call stands for.
pub enum Routed {
    /// The template, with the client's body and URL parameters merged into it: the call's
    /// request.
    Template(Map<String, Json>),
    /// No template, in debug mode: `/{method}/{tag}` with the client's body and `query`, the
    /// URL parameters still to merge into the root.
    Call {
        /// The URL parameters.
        query: Vec<(String, String)>,
    },
}

/// The call that `POST /router/{method}/{tag}` with `query` and `body` stands for: the
/// template of its `Document` row with the body and parameters merged in, or, in debug mode
/// and without a template, `/{method}/{tag}` itself.
pub async fn route(
    pipeline: &Pipeline,
    method: &str,
    tag: &str,
    query: &[(String, String)],
    body: &[u8],
) -> Result<Routed, ApiError> {
    let m = match Method::from_url(method) {
        Some(m) if m != Method::Crud => m,
        _ => return Err(ApiError::UnknownMethod(method.to_string())),
    };
    let debug = pipeline.options.debug;
    let name = if debug {
        tag.strip_suffix("[]").unwrap_or(tag)
    } else {
        tag
    };
    if !is_name(name) {
        return Err(refused(format!(
            "URL path /router/{method}/{{tag}}: '{tag}' is not a name"
        )));
    }
    let mut params: Vec<(String, String)> = query.to_vec();
    let version = match params.iter().position(|(k, _)| k == "version") {
        Some(i) => {
            let (_, v) = params.remove(i);
            v.trim()
                .parse::<i64>()
                .map_err(|_| refused(format!("router: version={v} is not an integer")))?
        }
        None => 0,
    };
    let Some(mut template) = template(pipeline, method, tag, version).await? else {
        if debug {
            return Ok(Routed::Call { query: params });
        }
        return Err(refused(format!(
            "URL path /router/{method}/{tag} has no route: add a Document row with url \
             /{method}/{tag} and its apijson template"
        )));
    };
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        body
    };
    let raw = parse_body(body)?;
    if m.is_public()
        && pipeline
            .snapshot()
            .rules
            .find(m, tag, Some(version))
            .is_none()
    {
        return Err(ApiError::Plan(PlanError::Forbidden(format!(
            "router: no Request row allows {} {tag}",
            method.to_ascii_uppercase()
        ))));
    }
    for (k, v) in raw {
        put_path(&mut template, &k, v)?;
    }
    for (k, v) in params {
        let value = serde_json::from_str(&v).unwrap_or(Json::String(v));
        put_path(&mut template, &k, value)?;
    }
    if !m.is_public() {
        template.insert("tag".into(), Json::String(tag.to_string()));
    }
    Ok(Routed::Template(template))
}

/// The newest (or the requested version's) template of `/{method}/{tag}`, if the database has
/// a `Document` table with one.
async fn template(
    pipeline: &Pipeline,
    method: &str,
    tag: &str,
    version: i64,
) -> Result<Option<Map<String, Json>>, ApiError> {
    let snapshot = pipeline.snapshot();
    let Some(table) = snapshot.schema.table("Document").cloned() else {
        return Ok(None);
    };
    if table.column("apijson").is_none() || table.column("url").is_none() {
        return Ok(None);
    }
    let versioned = table.column("version").is_some();
    let cols: Vec<&str> = if versioned {
        vec!["version", "apijson"]
    } else {
        vec!["apijson"]
    };
    let key = ("url", Value::Text(format!("/{method}/{tag}")));
    let rows = pipeline.lookup(&table, &cols, key, &[]).await?;
    let mut candidates: Vec<(i64, Map<String, Json>)> = rows
        .into_iter()
        .filter_map(|r| {
            let v = r.get("version").and_then(Json::as_i64).unwrap_or(0);
            let text = r.get("apijson")?.as_str()?.trim().to_string();
            match serde_json::from_str::<Json>(&text).ok()? {
                Json::Object(m) => Some((v, m)),
                _ => None,
            }
        })
        .collect();
    candidates.sort_by_key(|(v, _)| *v);
    let chosen = if version <= 0 {
        candidates.pop()
    } else {
        candidates.into_iter().find(|(v, _)| *v >= version)
    };
    Ok(chosen.map(|(_, m)| m))
}
