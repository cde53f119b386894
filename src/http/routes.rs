//! The routes: every path the server answers, and the handler of each.

use super::drain::Drain;
use super::{accounts, calls, ops};
use crate::app::AppState;
use crate::config::Config;
use axum::routing::post;
use axum::Router;
use std::sync::Arc;

/// The routes over a started state, without middleware (see [`super::serve`]).
pub fn routes(state: Arc<AppState>, cfg: &Config, drain: &Arc<Drain>) -> Router {
    let mut app = Router::new()
        .route("/login", post(accounts::login))
        .route("/logout", post(accounts::logout))
        .route("/register", post(accounts::register))
        .route("/reload", post(ops::reload))
        .route("/post/verify", post(accounts::post_verify))
        .route("/gets/verify", post(accounts::gets_verify))
        .route("/heads/verify", post(accounts::heads_verify))
        .route("/put/password", post(accounts::put_password))
        .route("/put/balance", post(accounts::put_balance))
        .route("/router/{method}/{tag}", post(calls::router_call))
        .route("/health", ops::health_route(drain))
        .route("/ready", ops::ready_route(drain))
        .route("/metrics", ops::metrics_route(cfg))
        .route("/openapi.json", ops::openapi_route(cfg))
        .route("/{method}", post(calls::call))
        .route(
            "/{method}/{tag}",
            post(calls::call_tag).get(calls::call_in_url),
        );
    if cfg.console {
        app = crate::console::routes(app);
    }
    if cfg.live {
        app = super::subscribe::routes(app);
    }
    app = crate::mcp::http::routes(app, &state, cfg);
    app.with_state(state)
}
