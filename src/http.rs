//! The HTTP edge: routes, body limits, and the APIJSON rule that every call that reached the
//! parser is answered with HTTP 200 and its code in the body.

use crate::app::{Answer, AppState};
use crate::config::Config;
use apijet_response::stream::Chunk;
use axum::body::Body;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use futures_util::{stream, StreamExt};
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

/// Sends an answer. A streamed answer waits for its first chunk: an error before any data is
/// still a normal error envelope; an error after it aborts the body.
async fn send(state: &AppState, answer: Answer) -> Response {
    let mut rx = match answer {
        Answer::Json(v) => return json_response(&v),
        Answer::Stream(rx) => rx,
    };
    let first = match rx.recv().await {
        Some(Chunk::Data(b)) => b,
        Some(Chunk::Fail(e)) => return json_response(&state.failure(&e)),
        None => {
            let e =
                apijet_response::ApiError::Unsupported("the list stream ended unexpectedly".into());
            return json_response(&state.failure(&e));
        }
    };
    let rest = stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Some(Chunk::Data(b)) => Some((Ok(b), rx)),
            Some(Chunk::Fail(e)) => {
                tracing::warn!(error = %e, "list failed after its first bytes; aborting the response");
                Some((Err(std::io::Error::other(e.to_string())), rx))
            }
            None => None,
        }
    });
    let body = stream::iter([Ok::<_, std::io::Error>(first)]).chain(rest);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        Body::from_stream(body),
    )
        .into_response()
}

async fn call(
    State(s): State<Shared>,
    Path(method): Path<String>,
    Query(q): Params,
    body: Bytes,
) -> Response {
    send(&s, s.answer(&method, None, &q, &body).await).await
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
    send(&s, s.answer(&method, Some(&tag), &q, &body).await).await
}

/// `GET /get/{url-encoded-json}`: the request in the URL, for browsers and quick checks.
async fn call_in_url(
    State(s): State<Shared>,
    Path((method, json)): Path<(String, String)>,
    Query(q): Params,
) -> Response {
    send(&s, s.answer(&method, None, &q, json.as_bytes()).await).await
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
