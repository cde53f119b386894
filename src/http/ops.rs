//! The operator's routes: `/reload`, `/health`, `/ready`, `/metrics` (behind its token) and
//! `/openapi.json` (as the `openapi` setting says).

use super::drain::Drain;
use super::reply::{failure_response, json_response};
use crate::accounts::session::not_logged_in;
use crate::app::AppState;
use crate::config::{Config, OpenApiExposure};
use apijet_plan::PlanError;
use apijet_response::ApiError;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;
use std::time::Duration;

type Shared = Arc<AppState>;

/// `POST /reload`: the admins of the configuration re-read the schema and the configuration
/// tables.
pub async fn reload(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let refusal = match s.sessions.visitor(&headers) {
        None => not_logged_in(),
        Some(v) if !s.admins.contains(&v.id) => ApiError::Plan(PlanError::Forbidden(
            "reload is only allowed to the admins listed in the configuration".into(),
        )),
        Some(_) => match s.reload().await {
            Ok(()) => {
                return json_response(&apijet_response::success(serde_json::Map::new(), false))
            }
            Err(e) => ApiError::Internal(format!("reload failed: {e}")),
        },
    };
    failure_response(&s, &refusal)
}

/// The answer of `/health` and `/ready` while the server drains: a balancer that checks either
/// stops sending it requests.
fn draining() -> Response {
    super::reply::refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        "draining: the server is stopping (SIGTERM) and still answers for drain_ms; send new \
         requests to another instance",
    )
}

/// `GET /health`: the process answers, and is not draining (503 when it is).
pub fn health_route(drain: &Arc<Drain>) -> axum::routing::MethodRouter<Shared> {
    let drain = Arc::clone(drain);
    get(move || {
        let draining = drain.is_draining();
        async move {
            if draining {
                return self::draining();
            }
            json_response(&apijet_response::success(serde_json::Map::new(), false))
        }
    })
}

/// `GET /ready`: not draining, the snapshot is loaded and the database answers a trivial query
/// (503 when not).
pub fn ready_route(drain: &Arc<Drain>) -> axum::routing::MethodRouter<Shared> {
    let drain = Arc::clone(drain);
    get(move |state: State<Shared>| {
        let draining = drain.is_draining();
        async move {
            if draining {
                return self::draining();
            }
            ready(state).await
        }
    })
}

async fn ready(State(s): State<Shared>) -> Response {
    let probe = apijet_sql::Statement {
        sql: "SELECT 1".into(),
        binds: Vec::new(),
        bounded: false,
    };
    let mut sink = apijet_exec::sink::CollectSink::new(&[]);
    let checked = tokio::time::timeout(
        Duration::from_secs(5),
        s.pipeline.backend.fetch(&probe, &mut sink),
    )
    .await;
    match checked {
        Ok(Ok(_)) => json_response(&apijet_response::success(serde_json::Map::new(), false)),
        Ok(Err(e)) => super::reply::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the database does not answer: {e}"),
        ),
        Err(_) => super::reply::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "the database did not answer within 5 s",
        ),
    }
}

/// `GET /metrics`: Prometheus text format, to whoever brings `metrics_token` (when it is set).
fn metrics(s: &AppState, headers: &HeaderMap, token: &str) -> Response {
    if !token.is_empty() {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        if !apijet_auth::constant_time_eq(given.trim().as_bytes(), token.as_bytes()) {
            let mut r = super::reply::refusal(
                StatusCode::UNAUTHORIZED,
                "/metrics needs Authorization: Bearer with the metrics_token of this server",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    let exec = apijet_exec::stats::snapshot(&s.pipeline.backend);
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.pipeline.metrics.render(&exec),
    )
        .into_response()
}

/// A route that the configuration keeps closed: 404, naming the setting.
fn not_served(msg: &'static str) -> axum::routing::MethodRouter<Shared> {
    get(move || async move { super::reply::refusal(StatusCode::NOT_FOUND, msg) })
}

/// `GET /metrics`, behind `metrics_token` when it is set.
pub fn metrics_get(cfg: &Config) -> axum::routing::MethodRouter<Shared> {
    let token: Arc<str> = cfg.metrics_token.as_str().into();
    get(move |State(s): State<Shared>, headers: HeaderMap| {
        let token = Arc::clone(&token);
        async move { metrics(&s, &headers, &token) }
    })
}

/// `/metrics` on the API listener: only behind `metrics_token`.
pub fn metrics_route(cfg: &Config) -> axum::routing::MethodRouter<Shared> {
    if cfg.metrics_token.is_empty() {
        return not_served(
            "/metrics is not served on this listener: set metrics_token (and scrape with \
             Authorization: Bearer), or metrics_listen for a separate address",
        );
    }
    metrics_get(cfg)
}

/// `/openapi.json` as the `openapi` setting says.
pub fn openapi_route(cfg: &Config) -> axum::routing::MethodRouter<Shared> {
    match cfg.openapi {
        OpenApiExposure::Public => get(openapi),
        OpenApiExposure::Debug if cfg.debug => get(openapi),
        OpenApiExposure::Debug => not_served(
            "/openapi.json is served only in debug mode on this server (setting openapi = \"debug\")",
        ),
        OpenApiExposure::Off => {
            not_served("/openapi.json is not served on this server (setting openapi = \"off\")")
        }
    }
}

/// `GET /openapi.json`: built with the snapshot, so it follows reloads.
async fn openapi(State(s): State<Shared>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        s.pipeline.snapshot().openapi.clone(),
    )
        .into_response()
}
