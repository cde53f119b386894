//! The request entry: one APIJSON call, stage after stage (request → plan → exec → response):
//! the body parsed and merged with the tag and the URL parameters, the login checks, the
//! `Request` structures of private methods, then the write, the `/crud` parts or the read,
//! under the request's watch (anonymous visitors' limits and timeout) and the slow-request log.

use super::AppState;
use crate::observe::Facts;
use crate::pipeline::answer::Answer;
use apijet_core::{Method, Visitor};
use apijet_plan::verify::verify;
use apijet_plan::{PlanError, PlanOptions};
use apijet_request::{is_table_key, parse_body, Request};
use apijet_response::{success, ApiError};
use serde_json::{Map, Value as Json};
use std::sync::Arc;

/// One call as the HTTP edge received it.
pub struct Call<'a> {
    /// The `/{method}` segment.
    pub method: &'a str,
    /// The `/{method}/{tag}` segment.
    pub tag: Option<&'a str>,
    /// URL query parameters, merged into the root.
    pub query: &'a [(String, String)],
    /// The body.
    pub body: &'a [u8],
    /// Who is calling.
    pub visitor: Option<Visitor>,
    /// The client's address (anonymous reads are counted by it).
    pub peer: Option<std::net::IpAddr>,
}

impl AppState {
    /// Answers one APIJSON call; errors become the envelope with their code.
    pub async fn answer(self: &Arc<Self>, call: Call<'_>, facts: &mut Facts) -> Answer {
        let started = std::time::Instant::now();
        let (method, body) = (call.method, call.body);
        let mut watch = apijet_exec::cancel::current();
        if call.visitor.is_none() {
            watch = watch.with_timeout(self.anonymous.timeout, "anonymous_statement_timeout_ms");
        }
        // Boxed: the future of a call is moved through every layer of the HTTP stack, and
        // moving it costs what it weighs.
        let answer =
            match apijet_exec::cancel::watched(watch, Box::pin(self.run(call, facts))).await {
                Ok(a) => a,
                Err(e) => Answer::Json(self.pipeline.failure(&e)),
            };
        if let Some(slow) = self.slow.filter(|s| started.elapsed() >= *s) {
            // Its slow statements are logged with their plans where they run (exec).
            tracing::warn!(
                target: "apijet::slow",
                method,
                ms = started.elapsed().as_millis() as u64,
                threshold_ms = slow.as_millis() as u64,
                request = %String::from_utf8_lossy(&body[..body.len().min(2048)]),
                "slow request"
            );
        }
        answer
    }

    async fn run(self: &Arc<Self>, call: Call<'_>, facts: &mut Facts) -> Result<Answer, ApiError> {
        let method = Method::from_url(call.method)
            .ok_or_else(|| ApiError::UnknownMethod(call.method.to_string()))?;
        let started = std::time::Instant::now();
        let mut map = parse_body(call.body)?;
        facts.parse = Some(started.elapsed());
        if let Some(tag) = call.tag {
            map = wrap_tag(map, tag, method);
        }
        for (k, v) in call.query {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Json::String(v.clone()));
            map.insert(k.clone(), value);
        }
        crate::observe::note_tables(&self.pipeline.metrics, &map, facts);
        let visitor = call.visitor.as_ref();
        check_login_schema(visitor, &map, &self.pipeline.options)?;
        if !method.is_public() && visitor.is_none() {
            // Every private method needs a login before anything else (§13.2).
            return Err(PlanError::NotLoggedIn.into());
        }
        let pipeline = &self.pipeline;
        let snapshot = pipeline.snapshot();
        let map = match method {
            Method::Get | Method::Head => map,
            Method::Gets | Method::Heads => pipeline.verify(method, map, &snapshot)?,
            Method::Post | Method::Put | Method::Delete => {
                let verified = verify(map, &pipeline.context(method, visitor, &snapshot, false))?;
                let req = Request::from_map(verified.request)?;
                let plan = pipeline.plan_write(
                    &req,
                    &verified.checks,
                    method,
                    visitor,
                    &snapshot,
                    false,
                )?;
                if let Some(answer) = pipeline.queued(&plan, visitor, &snapshot).await? {
                    return Ok(Answer::Json(success(answer, req.format)));
                }
                let results = pipeline.write(&plan, visitor, &snapshot).await?;
                return Ok(Answer::Json(success(results, req.format)));
            }
            Method::Crud => return crate::crud::crud(pipeline, map, visitor, &snapshot).await,
        };
        // Held until the answer is complete, by the task of a streamed one.
        let permit = match (visitor, call.peer) {
            (None, Some(addr)) => self
                .anonymous
                .admit(addr)
                .map_err(ApiError::TooManyRequests)?,
            _ => None,
        };
        pipeline
            .read(map, method, visitor, snapshot, permit, facts)
            .await
    }
}

/// A login whose `defaults` named a schema this server does not serve: the reference reads
/// that schema for every request of the login without a `@schema` of its own, so such a
/// request is refused, naming it, rather than answered from another schema.
pub(crate) fn check_login_schema(
    visitor: Option<&Visitor>,
    map: &Map<String, Json>,
    options: &PlanOptions,
) -> Result<(), PlanError> {
    let Some(schema) = visitor.and_then(|v| v.foreign_schema.as_deref()) else {
        return Ok(());
    };
    if map.contains_key("@schema") {
        return Ok(());
    }
    Err(PlanError::Invalid(format!(
        "this login's defaults name @schema:\"{schema}\", which this server does not serve (it \
         serves {}): log in again with defaults.@schema naming it, or without it, or give the \
         request its own @schema",
        options.served.schemas.join(" / ")
    )))
}

/// The tag shortcut `/{method}/{tag}` (§1.3): the body is the content of the tag.
fn wrap_tag(body: Map<String, Json>, tag: &str, method: Method) -> Map<String, Json> {
    let mut out = Map::new();
    if body.contains_key(tag) || tag.ends_with(":[]") {
        out = body;
    } else if is_table_key(tag) {
        out.insert(tag.to_string(), Json::Object(body));
    } else if let Some(table) = tag.strip_suffix("[]").filter(|t| is_table_key(t)) {
        let key = if matches!(method, Method::Get | Method::Gets) {
            tag
        } else {
            table
        };
        out.insert(key.to_string(), Json::Object(body));
    } else {
        out = body;
    }
    out.insert("tag".into(), Json::String(tag.to_string()));
    out
}
