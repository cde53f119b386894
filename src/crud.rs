//! `/crud`: several objects, each under the method its root declaration gives it, in one call.

use crate::pipeline::answer::Answer;
use crate::pipeline::snapshot::Snapshot;
use crate::pipeline::Pipeline;
use apijet_core::{Method, Visitor};
use apijet_exec::write::write_in;
use apijet_plan::verify::verify;
use apijet_plan::PlanError;
use apijet_request::Request;
use apijet_response::{success, ApiError};
use serde_json::{Map, Value as Json};

/// `/crud`: each object runs as the method its root declaration gives it (`@post`, `@gets`…;
/// undeclared objects are GETs), verified against its own `Request` row. The writes run first,
/// in one transaction; the reads follow and see them.
pub async fn crud(
    pipeline: &Pipeline,
    map: Map<String, Json>,
    visitor: Option<&Visitor>,
    snapshot: &Snapshot,
) -> Result<Answer, ApiError> {
    let (declared, objects) = crud_parts(map)?;
    // Every part is verified and parsed before anything runs, so a bad part refuses the
    // whole call with nothing written.
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    for (key, value) in objects {
        let (method, tag, extra) = declared
            .iter()
            .find(|(k, ..)| *k == key)
            .map(|(_, m, t, e)| (*m, t.clone(), e.clone()))
            .unwrap_or((Method::Get, key.clone(), Map::new()));
        let mut body = extra;
        body.insert("tag".into(), Json::String(tag));
        body.insert(key.clone(), value);
        if method.is_query() {
            let map = if method.is_public() {
                body
            } else {
                pipeline.verify(method, body, snapshot)?
            };
            reads.push((key, method, Request::from_map(map)?));
            continue;
        }
        let verified = verify(body, &pipeline.context(method, visitor, snapshot, false))?;
        let req = Request::from_map(verified.request)?;
        let plan = pipeline.plan_write(&req, &verified.checks, method, visitor, snapshot, false)?;
        writes.push((key, plan));
    }
    let mut answers: Vec<(String, Json)> = Vec::new();
    if !writes.is_empty() {
        // One transaction for every write, whatever its method; never the write queue,
        // whose group commit would make a POST outlive a later part that fails.
        let mut tx = pipeline.backend.begin().await?;
        let mut failed = None;
        let env = pipeline.write_env(visitor, snapshot);
        for (key, plan) in &writes {
            match write_in(&mut tx, plan, &env).await {
                Ok(outcome) => {
                    if let Some(v) = apijet_response::written(outcome).remove(key) {
                        answers.push((key.clone(), v));
                    }
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        match failed {
            None => {
                tx.commit().await?;
                writes.iter().for_each(|(_, plan)| pipeline.told(plan));
            }
            Some(e) => {
                let _ = tx.rollback().await;
                return Err(e.into());
            }
        }
    }
    for (key, method, req) in reads {
        // After the writes of the same call: the primary, which has them.
        let mut results = pipeline
            .read_members(req, method, visitor, snapshot)
            .await?;
        if let Some(v) = results.remove(&key) {
            answers.push((key, v));
        }
    }
    Ok(Answer::Json(success(answers.into_iter().collect(), false)))
}

type Declaration = (String, Method, String, Map<String, Json>);

/// The declarations of a `/crud` body and its objects, in request order.
type CrudParts = (Vec<Declaration>, Vec<(String, Json)>);

/// Splits a `/crud` body into its declarations (`@post: "Comment"`, `@gets: {"Privacy":
/// "Privacy-CIRCLE"}` or `{"User": {"tag": …, "version": …}}`) and its objects.
fn crud_parts(map: Map<String, Json>) -> Result<CrudParts, ApiError> {
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
