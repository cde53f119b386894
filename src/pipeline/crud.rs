//! `/crud`'s body: its declarations (`"@post": "Comment"`, `"@gets": {"Privacy":
//! "Privacy-CIRCLE"}`) and its objects, each of which runs as the method its declaration gives
//! it (undeclared objects are GETs), verified against its own `Request` row. The pipeline
//! prepares every part before anything runs, runs the writes first in one transaction, and the
//! reads after them, on the primary, which has them.

use apijet_core::Method;
use apijet_plan::PlanError;
use apijet_response::ApiError;
use serde_json::{Map, Value as Json};

type Declaration = (String, Method, String, Map<String, Json>);

/// The declarations of a `/crud` body and its objects, in request order.
type CrudParts = (Vec<Declaration>, Vec<(String, Json)>);

/// Splits a `/crud` body into its declarations (`@post: "Comment"`, `@gets: {"Privacy":
/// "Privacy-CIRCLE"}` or `{"User": {"tag": …, "version": …}}`) and its objects.
pub(super) fn crud_parts(map: Map<String, Json>) -> Result<CrudParts, ApiError> {
    let mut declared = Vec::new();
    let mut objects = Vec::new();
    for (k, v) in map {
        let method = k.strip_prefix('@').and_then(Method::from_url);
        let Some(method) = method.filter(|m| *m != Method::Crud) else {
            objects.push((k, v));
            continue;
        };
        let bad = || {
            PlanError::Invalid(format!(
                "{k}: declare objects as \"Table,Table\" or {{\"Table\": \"tag\"}}"
            ))
        };
        match v {
            Json::String(list) => {
                for key in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let tag = if key.ends_with("[]") && method == Method::Post {
                        format!("{}:[]", key.trim_end_matches("[]"))
                    } else {
                        key.to_string()
                    };
                    declared.push((key.to_string(), method, tag, Map::new()));
                }
            }
            Json::Object(m) => {
                for (key, decl) in m {
                    match decl {
                        Json::String(tag) => declared.push((key, method, tag, Map::new())),
                        Json::Object(mut d) => {
                            let tag = d
                                .remove("tag")
                                .and_then(|t| t.as_str().map(str::to_string))
                                .unwrap_or_else(|| key.clone());
                            declared.push((key, method, tag, d));
                        }
                        _ => return Err(bad().into()),
                    }
                }
            }
            _ => return Err(bad().into()),
        }
    }
    Ok((declared, objects))
}
