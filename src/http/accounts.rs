//! The account endpoints (`crate::accounts`): `/login`, `/logout`, `/register`, the
//! verification codes, `/put/password` and `/put/balance`. A refusal that says how long to wait
//! (429) carries `Retry-After`.

use super::accept::client;
use super::reply::{failure_response, json_response};
use crate::accounts::session::{not_logged_in, Sessions};
use crate::app::AppState;
use apijet_response::ApiError;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use serde_json::Value as Json;
use std::sync::Arc;

type Shared = Arc<AppState>;

/// The answer of an account endpoint: the envelope of its result, with `Retry-After` on a
/// refusal that says how long to wait.
fn reply(s: &AppState, r: Result<Json, ApiError>) -> Response {
    match r {
        Ok(v) => json_response(&v),
        Err(e) => {
            let mut r = failure_response(s, &e);
            if let Some(wait) = e.retry_after() {
                r.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(wait.as_secs().max(1)),
                );
            }
            r
        }
    }
}

/// `POST /login`: the answer, and the token as a cookie too.
pub async fn login(State(s): State<Shared>, body: Bytes) -> Response {
    let logged_in = match s.accounts.login(&body, client()).await {
        Ok(l) => l,
        Err(e) => return reply(&s, Err(e)),
    };
    let mut r = json_response(&logged_in.answer);
    if let Ok(v) = HeaderValue::from_str(&Sessions::cookie(&logged_in.token, logged_in.ttl)) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `POST /register`.
pub async fn register(State(s): State<Shared>, body: Bytes) -> Response {
    reply(&s, s.accounts.register(&body, client()).await)
}

/// `POST /logout` answers the bare envelope, as the reference records it, and clears the cookie.
pub async fn logout(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let mut r = match s.sessions.visitor(&headers) {
        Some(_) => json_response(&apijet_response::success(serde_json::Map::new(), false)),
        None => failure_response(&s, &not_logged_in()),
    };
    if let Ok(v) = HeaderValue::from_str(&Sessions::clear_cookie()) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `POST /post/verify`.
pub async fn post_verify(State(s): State<Shared>, body: Bytes) -> Response {
    reply(&s, s.accounts.post_verify(&body, client()).await)
}

/// `POST /gets/verify`.
pub async fn gets_verify(State(s): State<Shared>, body: Bytes) -> Response {
    reply(&s, s.accounts.gets_verify(&body).await)
}

/// `POST /heads/verify`.
pub async fn heads_verify(State(s): State<Shared>, body: Bytes) -> Response {
    reply(&s, s.accounts.heads_verify(&body, client()).await)
}

/// `POST /put/password`.
pub async fn put_password(State(s): State<Shared>, body: Bytes) -> Response {
    reply(&s, s.accounts.put_password(&body, client()).await)
}

/// `POST /put/balance` (logged in).
pub async fn put_balance(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let visitor = s.sessions.visitor(&headers);
    reply(
        &s,
        s.accounts
            .put_balance(&body, visitor.as_ref(), client())
            .await,
    )
}
