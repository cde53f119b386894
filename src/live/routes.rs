//! `/subscribe`: a GET, GETS, HEAD or HEADS request as a stream of its answers.
//!
//! - `POST /subscribe` (GET) and `POST /subscribe/{method}` with the request as the body;
//! - `GET /subscribe/{json}` and `GET /subscribe/{method}/{json}` with the request in the URL,
//!   for the browser's `EventSource` (which can only GET, and sends the login cookie).
//!
//! The URL's one parameter is `patch=1`: later answers as JSON patches where possible. What
//! the first read refuses (a bad request, a missing login, `Access`, `Request`) is answered as
//! `/get` answers it, as JSON, and nothing is subscribed.

use super::answer::Written;
use super::registry::{Holder, Joining, Query, Refusal};
use super::stream::{event, EventStream};
use crate::app::AppState;
use apijet_core::Method;
use apijet_plan::PlanError;
use apijet_request::parse_body;
use apijet_response::ApiError;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

type Shared = Arc<AppState>;
type Params = axum::extract::Query<Vec<(String, String)>>;
type Peer = Option<axum::Extension<ConnectInfo<SocketAddr>>>;

/// The `/subscribe` routes.
pub fn routes(app: Router<Shared>) -> Router<Shared> {
    app.route("/subscribe", post(body_default))
        .route("/subscribe/{x}", post(body_method).get(url_default))
        .route("/subscribe/{method}/{json}", get(url_method))
}

async fn body_default(
    State(s): State<Shared>,
    peer: Peer,
    params: Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    subscribe(&s, "get", &body, &params, &headers, peer).await
}

async fn body_method(
    State(s): State<Shared>,
    Path(method): Path<String>,
    peer: Peer,
    params: Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    subscribe(&s, &method, &body, &params, &headers, peer).await
}

async fn url_default(
    State(s): State<Shared>,
    Path(json): Path<String>,
    peer: Peer,
    params: Params,
    headers: HeaderMap,
) -> Response {
    subscribe(&s, "get", json.as_bytes(), &params, &headers, peer).await
}

async fn url_method(
    State(s): State<Shared>,
    Path((method, json)): Path<(String, String)>,
    peer: Peer,
    params: Params,
    headers: HeaderMap,
) -> Response {
    subscribe(&s, &method, json.as_bytes(), &params, &headers, peer).await
}

fn json_answer(v: &serde_json::Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        serde_json::to_vec(v).unwrap_or_default(),
    )
        .into_response()
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
    body: &[u8],
    params: &[(String, String)],
    headers: &HeaderMap,
    peer: Peer,
) -> Response {
    let live = &s.live;
    let parsed = subscribable(method).and_then(|method| {
        let patch = wants_patch(params)?;
        let map = parse_body(body)?;
        Ok((method, patch, map))
    });
    let (method, patch, map) = match parsed {
        Ok(p) => p,
        Err(e) => return json_answer(&s.failure(&e)),
    };
    let (visitor, expires) = match s.sessions.visitor_until(headers) {
        Some((v, at)) => (Some(v), Some(at)),
        None => (None, None),
    };
    let holder = match (&visitor, &peer) {
        (Some(v), _) => Holder::User(v.id),
        (None, Some(p)) => Holder::Address(p.0 .0.ip()),
        (None, None) => Holder::Unknown,
    };
    let seat = match live.registry.seat(holder, &live.settings) {
        Ok(seat) => seat,
        Err(refusal) => {
            let msg = match refusal {
                Refusal::Instance(n) => format!(
                    "this server holds {n} open subscriptions, its limit (setting \
                     live_max_subscriptions): try again later or on another instance"
                ),
                Refusal::Visitor(n) => format!(
                    "you hold {n} open subscriptions, the limit per visitor (setting \
                     live_max_per_visitor): close one first"
                ),
            };
            return json_answer(&s.failure(&ApiError::TooManyRequests(msg)));
        }
    };
    let query = Query {
        method,
        map,
        visitor,
    };
    let read_at = Instant::now();
    let (answer, reads) = super::refetch::read_once(s, &query).await;
    let written = Written::of(answer);
    if written.code != 200 {
        // Refused as its GET is: nothing to follow.
        return json_answer(&serde_json::from_slice(&written.full()).unwrap_or_default());
    }
    let first_id = written.id.clone();
    let first = event(Some(&first_id), None, &written.full());
    let shape = super::refetch::shape_of(&query);
    let (shared, subscription) = live.registry.join(Joining {
        seat,
        query,
        shape,
        written,
        reads,
        read_at,
        patch,
    });
    live.wake.notify_one();
    let mut answers = shared.latest.subscribe();
    if answers.borrow().id != first_id {
        // A refetch published a newer answer since this one was read.
        answers.mark_changed();
    }
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    // A client that has this answer gets a comment instead, so that the stream is under way
    // at once.
    let first = if last_event_id == Some(first_id.as_str()) {
        Bytes::from_static(b":\n\n")
    } else {
        first
    };
    let stream = EventStream {
        first: Some(first),
        answers,
        sent: first_id,
        patch,
        expires,
        stop: live.stop.subscribe(),
        _subscription: subscription,
        heartbeat: live.settings.heartbeat,
        metrics: Arc::clone(&s.metrics),
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
