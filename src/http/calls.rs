//! The APIJSON calls: `POST /{method}`, `POST /{method}/{tag}`, `GET /get/{json}` and
//! `GET /head/{json}` (with validators for revalidation), and `POST /router/{method}/{tag}`
//! (`crate::templates`).

use super::accept;
use super::reply::{send, sent};
use super::sent::Sent;
use crate::app::AppState;
use crate::observe::Facts;
use crate::pipeline::answer::Answer;
use crate::pipeline::prepare::{Body, Call, Client};
use crate::pipeline::run::Origin;
use crate::templates::Routed;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

type Shared = Arc<AppState>;
type Params = Query<Vec<(String, String)>>;

pub async fn call(
    State(s): State<Shared>,
    Path(method): Path<String>,
    Query(q): Params,
    Sent { headers, body }: Sent,
) -> Response {
    with_facts(answer_call(&s, &method, None, &q, &headers, &body).await)
}

pub async fn call_tag(
    State(s): State<Shared>,
    Path((method, tag)): Path<(String, String)>,
    Query(q): Params,
    Sent { headers, body }: Sent,
) -> Response {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        Bytes::from_static(b"{}")
    } else {
        body
    };
    with_facts(answer_call(&s, &method, Some(&tag), &q, &headers, &body).await)
}

/// A route's answer, with its facts where the middleware reads them.
fn with_facts((mut r, facts): (Response, Box<Facts>)) -> Response {
    r.extensions_mut().insert(*facts);
    r
}

/// The method of a `POST /{method}` call the middleware answers itself, without the router:
/// an APIJSON method's name as the whole path, and no query. The router's matching, the URL
/// parameters it stores and the extractors were a tenth of a point lookup's work, and such a
/// call needs none of them: [`call_direct`] answers it by the same [`answer_call`] as the
/// route's. Anything else (a query, an encoded name, every other path) goes through the router.
pub(super) fn direct_method(parts: &Parts) -> Option<&str> {
    if parts.method != Method::POST || parts.uri.query().is_some() {
        return None;
    }
    let name = parts.uri.path().strip_prefix('/')?;
    apijet_core::Method::from_url(name).map(|_| name)
}

/// `POST /{method}` as [`call`] answers it, for a call [`direct_method`] names.
pub(super) async fn call_direct(
    s: &Shared,
    method: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> (Response, Box<Facts>) {
    answer_call(s, method, None, &[], headers, body).await
}

/// The client of a call: the visitor its headers name, and who the client is.
fn client(s: &AppState, headers: &HeaderMap) -> Client {
    Client {
        visitor: s.sessions.visitor(headers),
        key: accept::client(),
    }
}

/// Answers one APIJSON call.
async fn answer_call(
    s: &Shared,
    method: &str,
    tag: Option<&str>,
    query: &[(String, String)],
    headers: &HeaderMap,
    body: &[u8],
) -> (Response, Box<Facts>) {
    let call = Call {
        method,
        tag,
        query,
        body: Body::Sent(body),
    };
    let mut facts = Facts::timed(s.server_timing);
    let answer = s
        .answer(call, &client(s, headers), Origin::Call, &mut facts)
        .await;
    sent(s, answer, facts).await
}

/// `GET /get/{url-encoded-json}` and `GET /head/{…}`: the request in the URL, for browsers and
/// quick checks. Only reads: a browser sends the `SameSite=Lax` login cookie along with a
/// cross-site top-level navigation, so any other method here would let a link on any site
/// write as its visitor. They answer 405, as the reference (which maps only `GET /get/…`).
pub async fn call_in_url(
    State(s): State<Shared>,
    Path((method, json)): Path<(String, String)>,
    Query(q): Params,
    headers: HeaderMap,
) -> Response {
    let read = apijet_core::Method::from_url(&method);
    if !matches!(
        read,
        Some(apijet_core::Method::Get | apijet_core::Method::Head)
    ) {
        // Only a known method's name is echoed: the path is the client's.
        let name = read.map_or("{method}", |_| method.as_str());
        let mut r = super::reply::refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!(
                "GET serves only /get/… and /head/… (reads); send POST /{name} with the \
                 request as the body"
            ),
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let call = Call {
        method: &method,
        tag: None,
        query: &q,
        body: Body::Sent(json.as_bytes()),
    };
    let mut facts = Facts::timed(s.server_timing);
    let answer = s
        .answer(call, &client(&s, &headers), Origin::Call, &mut facts)
        .await;
    // A browser or proxy revalidating a GET gets 304 when the data has not changed; `time`
    // changes on every answer, so it is left out of the tag. Only a read's answer has one.
    let tag = match &answer {
        Ok(Answer::Counted(v, _)) => etag(v),
        Ok(Answer::Bytes { body, .. }) => written_etag(body),
        Ok(Answer::Stream(_) | Answer::Written { .. }) | Err(_) => None,
    };
    if let Some(tag) = &tag {
        let matches = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
        if matches {
            let mut r = StatusCode::NOT_MODIFIED.into_response();
            if let Ok(v) = HeaderValue::from_str(tag) {
                r.headers_mut().insert(header::ETAG, v);
            }
            return r;
        }
    }
    let mut r = send(&s, answer, facts).await;
    if let Some(v) = tag.and_then(|t| HeaderValue::from_str(&t).ok()) {
        r.headers_mut().insert(header::ETAG, v);
    }
    r
}

/// A strong validator for a read's answer (always a success): a hash of it without `time`.
fn etag(answer: &serde_json::Value) -> Option<String> {
    let mut m = answer.as_object()?.clone();
    m.remove("time");
    Some(etag_of(&serde_json::to_string(&m).ok()?))
}

/// The validator of an answer written as bytes (always a success): the same hash as [`etag`],
/// over the same text, which is the answer without its last member, `time`.
fn written_etag(body: &[u8]) -> Option<String> {
    let cut = body.windows(8).rposition(|w| w == b",\"time\":")?;
    let mut text = std::str::from_utf8(&body[..cut]).ok()?.to_string();
    text.push('}');
    Some(etag_of(&text))
}

fn etag_of(text: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    format!("\"{:016x}\"", h.finish())
}

/// `POST /router/{method}/{tag}`: the call its template stands for (`crate::templates`).
pub async fn router_call(
    State(s): State<Shared>,
    Path((method, tag)): Path<(String, String)>,
    Query(q): Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut facts = Facts::timed(s.server_timing);
    let client = client(&s, &headers);
    let answer = match crate::templates::route(&s.pipeline, &method, &tag, &q, &body).await {
        Ok(Routed::Template(template)) => {
            let call = Call {
                method: &method,
                tag: None,
                query: &[],
                body: Body::Object(template),
            };
            s.answer(call, &client, Origin::Call, &mut facts).await
        }
        Ok(Routed::Call { query }) => {
            let call = Call {
                method: &method,
                tag: Some(&tag),
                query: &query,
                body: Body::Sent(&body),
            };
            s.answer(call, &client, Origin::Call, &mut facts).await
        }
        Err(e) => Err(e),
    };
    send(&s, answer, facts).await
}
