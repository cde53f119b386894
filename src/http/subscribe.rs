//! `/subscribe`: a GET, GETS, HEAD or HEADS request as a stream of its answers (live answers,
//! `crate::live`).
//!
//! - `POST /subscribe` (GET) and `POST /subscribe/{method}` with the request as the body;
//! - `GET /subscribe/{json}` and `GET /subscribe/{method}/{json}` with the request in the URL,
//!   for the browser's `EventSource` (which can only GET, and sends the login cookie).
//!
//! The URL's one parameter is `patch=1`: later answers as JSON patches where possible. What
//! the first read refuses (a bad request, a missing login, `Access`, `Request`) is answered as
//! `/get` answers it, as JSON, and nothing is subscribed.

use super::accept;
use super::reply::failure_response;
use crate::app::AppState;
use crate::live::registry::Holder;
use crate::live::subscribe::Subscribe;
use crate::pipeline::prepare::Client;
use apijet_core::Method;
use apijet_plan::PlanError;
use apijet_response::ApiError;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;

type Shared = Arc<AppState>;
type Params = axum::extract::Query<Vec<(String, String)>>;

/// The `/subscribe` routes.
pub fn routes(app: Router<Shared>) -> Router<Shared> {
    app.route("/subscribe", post(body_default))
        .route("/subscribe/{x}", post(body_method).get(url_default))
        .route("/subscribe/{method}/{json}", get(url_method))
}

async fn body_default(
    State(s): State<Shared>,
    params: Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    subscribe(&s, "get", body, &params, &headers).await
}

async fn body_method(
    State(s): State<Shared>,
    Path(method): Path<String>,
    params: Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    subscribe(&s, &method, body, &params, &headers).await
}

async fn url_default(
    State(s): State<Shared>,
    Path(json): Path<String>,
    params: Params,
    headers: HeaderMap,
) -> Response {
    subscribe(&s, "get", Bytes::from(json), &params, &headers).await
}

async fn url_method(
    State(s): State<Shared>,
    Path((method, json)): Path<(String, String)>,
    params: Params,
    headers: HeaderMap,
) -> Response {
    subscribe(&s, &method, Bytes::from(json), &params, &headers).await
}

/// Whether later answers go as patches: the `patch` parameter, the only one there is.
fn wants_patch(params: &[(String, String)]) -> Result<bool, ApiError> {
    let mut patch = false;
    for (k, v) in params {
        match (k.as_str(), v.as_str()) {
            ("patch", "1" | "true") => patch = true,
            ("patch", "0" | "false") => patch = false,
            ("patch", other) => {
                return Err(PlanError::Invalid(format!(
                    "/subscribe: patch={other} is neither 1 nor 0"
                ))
                .into())
            }
            (other, _) => {
                return Err(PlanError::Invalid(format!(
                    "/subscribe: the URL parameter {other} is not known; the only one is patch=1 \
                     (answers after the first as JSON patches); the request goes in the body or \
                     the path"
                ))
                .into())
            }
        }
    }
    Ok(patch)
}

fn subscribable(method: &str) -> Result<Method, ApiError> {
    match Method::from_url(method) {
        Some(m @ (Method::Get | Method::Gets | Method::Head | Method::Heads)) => Ok(m),
        _ => Err(PlanError::Invalid(format!(
            "/subscribe/{method}: only get, gets, head and heads can be subscribed to"
        ))
        .into()),
    }
}

async fn subscribe(
    s: &Shared,
    method: &str,
    body: Bytes,
    params: &[(String, String)],
    headers: &HeaderMap,
) -> Response {
    let (visitor, expires) = match s.sessions.visitor_until(headers) {
        Some((v, at)) => (Some(v), Some(at)),
        None => (None, None),
    };
    let (method, patch) = match subscribable(method).and_then(|m| Ok((m, wants_patch(params)?))) {
        Ok(p) => p,
        Err(e) => return failure_response(s, &e),
    };
    let key = accept::client();
    let holder = match (&visitor, key) {
        (Some(v), _) => Holder::User(v.id),
        (None, Some(client)) => Holder::Address(client.ip()),
        (None, None) => Holder::Unknown,
    };
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string());
    let subscription = Subscribe {
        method,
        body,
        client: Client { visitor, key },
        expires,
        holder,
        patch,
        last_event_id,
    };
    let stream = match s.live.subscribe(subscription).await {
        Ok(stream) => stream,
        Err(refusal) => return failure_response(s, &refusal),
    };
    let mut r = (StatusCode::OK, stream.body()).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // nginx buffers responses unless told not to.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}
