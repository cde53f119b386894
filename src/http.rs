//! The HTTP edge: routes, body limits, and the APIJSON rule that every call that reached the
//! parser is answered with HTTP 200 and its code in the body.

use crate::app::AppState;
use crate::config::Config;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use std::sync::Arc;

type Shared = Arc<AppState>;
type Params = Query<Vec<(String, String)>>;

fn json_response(v: &serde_json::Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn call(
    State(s): State<Shared>,
    Path(method): Path<String>,
    Query(q): Params,
    body: Bytes,
) -> Response {
    json_response(&s.answer(&method, None, &q, &body).await)
}

async fn call_tag(
    State(s): State<Shared>,
    Path((method, tag)): Path<(String, String)>,
    Query(q): Params,
    body: Bytes,
) -> Response {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        Bytes::from_static(b"{}")
    } else {
        body
    };
    json_response(&s.answer(&method, Some(&tag), &q, &body).await)
}

/// `GET /get/{url-encoded-json}`: the request in the URL, for browsers and quick checks.
async fn call_in_url(
    State(s): State<Shared>,
    Path((method, json)): Path<(String, String)>,
    Query(q): Params,
) -> Response {
    json_response(&s.answer(&method, None, &q, json.as_bytes()).await)
}

/// The router over a started state.
pub fn router(state: Shared, max_body: usize) -> Router {
    Router::new()
        .route("/{method}", post(call))
        .route("/{method}/{tag}", post(call_tag).get(call_in_url))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}

/// Starts the server and runs until it is stopped.
pub async fn serve(cfg: Config) -> Result<(), String> {
    let state = AppState::start(&cfg).await?;
    let engine = state.backend.engine().name();
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!(
        "apijet listening on http://{addr}, serving {engine} database {}",
        redact(&cfg.db)
    );
    axum::serve(listener, router(Arc::new(state), cfg.max_body_bytes))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| e.to_string())
}

/// The URL without its password, for logs.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}
