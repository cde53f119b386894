//! `/mcp`: MCP's Streamable HTTP transport on the API's own listener, behind the same
//! middleware (body limit and timeout, CORS, the access log, connection limits). Stateless:
//! every POST carries its own request and its own `Authorization`, so instances behind a load
//! balancer share nothing, as for the rest of the API.

use super::{Caller, Mcp, Settings};
use crate::app::AppState;
use crate::config::Config;
use apijet_core::Visitor;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::response::Response;
use axum::routing::any;
use axum::Router;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

type Service = StreamableHttpService<Mcp, NeverSessionManager>;

/// Adds `/mcp` to the router, unless the `mcp` setting turns it off.
pub fn routes(
    router: Router<Arc<AppState>>,
    state: &Arc<AppState>,
    cfg: &Config,
) -> Router<Arc<AppState>> {
    if !cfg.mcp {
        return router;
    }
    let mcp = Mcp::new(Arc::clone(state), Settings::of(cfg), None);
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(cfg.max_body_bytes);
    // On a loopback address only loopback names are accepted as `Host` (a page of another
    // site cannot reach a local server through DNS rebinding); elsewhere the API answers any
    // name its clients use, and so does `/mcp`.
    if !listens_on_loopback(&cfg.listen) {
        config = config.disable_allowed_hosts();
    }
    let service: Service =
        StreamableHttpService::new(move || Ok(mcp.clone()), Default::default(), config);
    router.route(
        "/mcp",
        any(move |State(state): State<Arc<AppState>>, req: Request| {
            let service = service.clone();
            async move { handle(&state, &service, req).await }
        }),
    )
}

/// Puts the caller beside the request, as the tools will need it: the handler runs in a task
/// of its own, where the client's address and watch of this request are not at hand.
async fn handle(state: &AppState, service: &Service, mut req: Request) -> Response {
    let caller = Caller {
        visitor: bearer(state, req.headers()),
        client: crate::http::accept::client(),
        watch: apijet_exec::cancel::current(),
    };
    req.extensions_mut().insert(caller);
    service.handle(req).await.map(Body::new)
}

/// The visitor of a token in `Authorization` (`Bearer`, or a token of ours alone, as the
/// other endpoints read it). Not the login cookie: a browser sends it along with requests
/// another page makes, and an agent host never needs it.
fn bearer(state: &AppState, headers: &HeaderMap) -> Option<Visitor> {
    let mut only = HeaderMap::new();
    if let Some(v) = headers.get(header::AUTHORIZATION) {
        only.insert(header::AUTHORIZATION, v.clone());
    }
    state.sessions.visitor(&only)
}

fn listens_on_loopback(listen: &str) -> bool {
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
