//! The HTTP handlers of the account endpoints (routes in `http`).

use super::{account_failure, AccountError};
use crate::app::AppState;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value as Json;
use std::sync::Arc;

type Shared = Arc<AppState>;

fn reply(r: Result<Json, AccountError>) -> Response {
    let v = match r {
        Ok(v) => v,
        Err(e) => account_failure(&e),
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        serde_json::to_vec(&v).unwrap_or_default(),
    )
        .into_response()
}

/// `POST /post/verify`.
pub async fn post_verify(
    State(s): State<Shared>,
    peer: Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    body: Bytes,
) -> Response {
    reply(s.post_verify(&body, peer.map(|p| p.0 .0.ip())).await)
}

/// `POST /gets/verify`.
pub async fn gets_verify(State(s): State<Shared>, body: Bytes) -> Response {
    reply(s.gets_verify(&body).await)
}

/// `POST /heads/verify`.
pub async fn heads_verify(State(s): State<Shared>, body: Bytes) -> Response {
    reply(s.heads_verify(&body).await)
}

/// `POST /put/password`.
pub async fn put_password(State(s): State<Shared>, body: Bytes) -> Response {
    reply(s.put_password(&body).await)
}

/// `POST /put/balance` (logged in).
pub async fn put_balance(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let visitor = s.sessions.visitor(&headers);
    reply(s.put_balance(&body, visitor.as_ref()).await)
}
