//! From an [`Answer`] to an HTTP response: HTTP 200 with the APIJSON code in the body, for
//! every call that reached the parser; a streamed answer waits for its first chunk, so that an
//! error before any data is still an error envelope, and one cut at its byte budget after its
//! first bytes ends with the envelope that says so.

use crate::app::AppState;
use crate::observe::Facts;
use crate::pipeline::answer::Answer;
use apijet_response::stream::Chunk;
use apijet_response::ApiError;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{stream, StreamExt};
use std::sync::Arc;

/// The headers of every answer, built once: a name or value given as text is parsed again on
/// every response.
static JSON_UTF8: HeaderValue = HeaderValue::from_static("application/json; charset=utf-8");
static STATEMENTS: HeaderName = HeaderName::from_static("x-apijet-statements");
static CACHE: HeaderName = HeaderName::from_static("x-apijet-cache");

/// `x-apijet-cache` of a read's answer, from its facts.
fn cache_header(r: &mut Response, facts: &Facts) {
    if let Some(outcome) = facts.cache {
        r.headers_mut()
            .insert(CACHE.clone(), HeaderValue::from_static(outcome));
    }
}

/// An HTTP 200 answer of JSON.
fn json_ok(body: impl Into<Body>) -> Response {
    let mut r = Response::new(body.into());
    // Room for the headers the answer gets on its way out (its own, the request id, `Vary`,
    // CORS): from the map's first size, six, it was grown and rehashed once per answer.
    r.headers_mut().reserve(12);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, JSON_UTF8.clone());
    r
}

/// A successful answer (code 200) of JSON.
pub fn json_response(v: &serde_json::Value) -> Response {
    written(v, 200)
}

/// The envelope of an error, with its code; server faults are logged (see
/// [`Pipeline::failure`](crate::pipeline::Pipeline::failure)).
pub fn failure_response(state: &AppState, e: &ApiError) -> Response {
    written(&state.pipeline.failure(e), e.code())
}

fn written(v: &serde_json::Value, code: u16) -> Response {
    let started = std::time::Instant::now();
    let body = serde_json::to_vec(v).unwrap_or_default();
    let encode = started.elapsed();
    let mut r = json_ok(body);
    r.extensions_mut().insert(Facts {
        code,
        encode: Some(encode),
        ..Facts::default()
    });
    r
}

/// Sends an answer, or the envelope of its error. A streamed answer waits for its first chunk:
/// an error before any data is still a normal error envelope; an error after it aborts the
/// body. Its facts go with it, for the access log and the metrics.
pub async fn send(state: &AppState, answer: Result<Answer, ApiError>, facts: Facts) -> Response {
    let (mut r, facts) = sent(state, answer, facts).await;
    r.extensions_mut().insert(*facts);
    r
}

/// As [`send`], with the facts beside the response: the middleware reads them there for the
/// calls it answers itself (in the response's extensions they took two allocations and a
/// lookup per answer). Boxed: they are moved through every future on their way out.
pub async fn sent(
    state: &AppState,
    answer: Result<Answer, ApiError>,
    mut facts: Facts,
) -> (Response, Box<Facts>) {
    // An envelope written from JSON carries the code and the encoding time of its own.
    let with_facts = |mut r: Response, mut facts: Facts| {
        if let Some(f) = r.extensions_mut().remove::<Facts>() {
            facts.code = f.code;
            facts.encode = f.encode;
        }
        (r, Box::new(facts))
    };
    let mut rx = match answer {
        Err(e) => return with_facts(failure_response(state, &e), facts),
        Ok(Answer::Written { results, format }) => {
            let v = apijet_response::success(results, format);
            return with_facts(json_response(&v), facts);
        }
        Ok(Answer::Counted(v, statements)) => {
            let mut r = json_response(&v);
            r.headers_mut()
                .insert(STATEMENTS.clone(), HeaderValue::from(statements));
            cache_header(&mut r, &facts);
            facts.statements = Some(statements);
            if tracing::enabled!(tracing::Level::INFO) {
                facts.rows = Some(crate::observe::rows_in(&v, 0));
            }
            return with_facts(r, facts);
        }
        Ok(Answer::Bytes {
            body,
            statements,
            rows,
        }) => {
            let mut r = json_ok(body);
            r.headers_mut()
                .insert(STATEMENTS.clone(), HeaderValue::from(statements));
            cache_header(&mut r, &facts);
            facts.code = 200;
            facts.statements = Some(statements);
            facts.rows = Some(rows);
            return (r, Box::new(facts));
        }
        Ok(Answer::Stream(rx)) => rx,
    };
    let mut statements = None;
    let first = loop {
        match rx.recv().await {
            Some(Chunk::Data(b) | Chunk::Cut(b)) => break b,
            Some(Chunk::Statements(n)) => statements = Some(n),
            Some(Chunk::Fail(e)) => return with_facts(failure_response(state, &e), facts),
            None => {
                let e = ApiError::Internal("the list stream ended unexpectedly".into());
                return with_facts(failure_response(state, &e), facts);
            }
        }
    };
    facts.code = 200;
    facts.statements = Some(statements.unwrap_or(1));
    let metrics = Arc::clone(&state.pipeline.metrics);
    metrics.streamed_bytes(first.len() as u64);
    // The receiver until the answer ended: a cut answer ends with its last bytes.
    let rest = stream::unfold(Some(rx), move |rx| {
        let metrics = Arc::clone(&metrics);
        async move {
            let mut rx = rx?;
            match rx.recv().await {
                Some(Chunk::Data(b)) => {
                    metrics.streamed_bytes(b.len() as u64);
                    Some((Ok(b), Some(rx)))
                }
                Some(Chunk::Cut(b)) => {
                    metrics.streamed_bytes(b.len() as u64);
                    Some((Ok(b), None))
                }
                Some(Chunk::Fail(e)) => {
                    tracing::warn!(error = %e, "list failed after its first bytes; aborting the response");
                    Some((Err(std::io::Error::other(e.to_string())), Some(rx)))
                }
                // Only ever sent before the first data.
                Some(Chunk::Statements(_)) => Some((Ok(Bytes::new()), Some(rx))),
                None => None,
            }
        }
    });
    // Fused: compression layers poll a body again after its end, which `unfold` forbids.
    let body = stream::iter([Ok::<_, std::io::Error>(first)])
        .chain(rest)
        .fuse();
    let mut r = json_ok(Body::from_stream(body));
    if let Some(n) = statements {
        r.headers_mut()
            .insert(STATEMENTS.clone(), HeaderValue::from(n));
    }
    cache_header(&mut r, &facts);
    (r, Box::new(facts))
}

/// The envelope of an HTTP-level refusal with `status`, as bytes.
pub fn envelope_bytes(status: u16, msg: &str) -> Vec<u8> {
    serde_json::to_vec(&apijet_response::refusal(status, msg)).unwrap_or_default()
}

/// An HTTP-level refusal as an APIJSON envelope, with the HTTP status kept.
pub fn refusal(status: StatusCode, msg: &str) -> Response {
    let mut r = (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        envelope_bytes(status.as_u16(), msg),
    )
        .into_response();
    r.extensions_mut().insert(Facts {
        code: status.as_u16(),
        ..Facts::default()
    });
    r
}
