//! The HTTP handlers of the account endpoints (routes in `http`).

use super::AccountError;
use crate::app::AppState;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::Value as Json;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

type Shared = Arc<AppState>;

/// The client's address, when the server knows it (the failed-attempt limits count by it).
pub type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

/// The address of `peer`.
pub fn address(peer: Peer) -> Option<IpAddr> {
    peer.map(|p| p.0 .0.ip())
}

fn reply(s: &AppState, r: Result<Json, AccountError>) -> Response {
    let (v, wait) = match r {
        Ok(v) => (v, None),
        Err(e) => (s.account_failure(&e), e.retry_after()),
    };
    let mut r = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        serde_json::to_vec(&v).unwrap_or_default(),
    )
        .into_response();
    if let Some(wait) = wait {
        r.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(wait.as_secs().max(1)),
        );
    }
    r
}

/// `POST /post/verify`.
pub async fn post_verify(State(s): State<Shared>, peer: Peer, body: Bytes) -> Response {
    reply(&s, s.post_verify(&body, address(peer)).await)
}

/// `POST /gets/verify`.
pub async fn gets_verify(State(s): State<Shared>, body: Bytes) -> Response {
    reply(&s, s.gets_verify(&body).await)
}

/// `POST /heads/verify`.
pub async fn heads_verify(State(s): State<Shared>, peer: Peer, body: Bytes) -> Response {
    reply(&s, s.heads_verify(&body, address(peer)).await)
}

/// `POST /put/password`.
pub async fn put_password(State(s): State<Shared>, peer: Peer, body: Bytes) -> Response {
    reply(&s, s.put_password(&body, address(peer)).await)
}

/// `POST /put/balance` (logged in).
pub async fn put_balance(
    State(s): State<Shared>,
    peer: Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let visitor = s.sessions.visitor(&headers);
    reply(
        &s,
        s.put_balance(&body, visitor.as_ref(), address(peer)).await,
    )
}
