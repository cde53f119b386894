//! Starting the server: the listeners, the middleware around the routes, the accept loop, a
//! separate `/metrics` listener when `metrics_listen` asks for one, and reloads on SIGHUP.

use super::compress::CompressWhenAsked;
use super::cors::CorsWhenAsked;
use super::drain::Drain;
use super::layers::Layers;
use super::middleware::{self, Edge};
use super::ops::metrics_get;
use super::routes::routes;
use crate::app::AppState;
use crate::config::Config;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::Router;
use std::sync::Arc;
use std::time::Duration;

type Shared = Arc<AppState>;

/// Starts the server and runs until SIGTERM (after draining, see [`super::drain`]) or SIGINT,
/// then finishes the requests in flight.
pub async fn serve(cfg: Config) -> Result<(), String> {
    // The port first: when it is taken, fail before any database is touched.
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .map_err(|e| listen_failure(&cfg.listen, &e))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let metrics_listener = match cfg.metrics_listen.as_str() {
        "" => None,
        at => Some(
            tokio::net::TcpListener::bind(at)
                .await
                .map_err(|e| format!("{} (setting metrics_listen)", listen_failure(at, &e)))?,
        ),
    };
    let state = Arc::new(AppState::start(&cfg).await?);
    if let Some(listener) = metrics_listener {
        serve_metrics(listener, Arc::clone(&state), &cfg);
    }
    reload_on_sighup(Arc::clone(&state));
    state.live.start();
    let engine = state.pipeline.backend.engine().name();
    println!(
        "apijet listening on http://{addr}, serving {engine} database {}",
        redact(&cfg.db)
    );
    let drain = Arc::new(Drain::new(Duration::from_millis(cfg.drain_ms)));
    let limits = super::accept::Limits {
        header: Duration::from_millis(cfg.header_timeout_ms),
        idle: Duration::from_millis(cfg.idle_timeout_ms),
        max_connections: cfg.max_connections,
        probe_clients: state.pipeline.backend.capabilities().in_process,
        trusted_proxies: Arc::new(crate::client::TrustedProxies::parse(&cfg.trusted_proxies)?),
    };
    let edge = Arc::new(Edge {
        metrics: Arc::clone(&state.pipeline.metrics),
        max_body: cfg.max_body_bytes,
        body_timeout: Duration::from_millis(cfg.body_timeout_ms),
        slow: (cfg.slow_request_ms > 0).then(|| Duration::from_millis(cfg.slow_request_ms)),
        server_timing: cfg.server_timing,
    });
    // The middleware wraps the router rather than each route: a route's own layers would be
    // cloned, box by box, for every request that reaches it.
    let routed = tower::Layer::layer(
        &DefaultBodyLimit::max(cfg.max_body_bytes),
        routes(Arc::clone(&state), &cfg, &drain),
    );
    let inner = middleware::Around::new(edge, Arc::clone(&state), routed);
    // gzip, br or zstd when the client asks (Accept-Encoding); streamed lists are
    // compressed chunk by chunk, so memory stays flat.
    let compressed = CompressWhenAsked::new(inner.clone());
    let (layered, cors_added) = match middleware::cors(&cfg)? {
        Some(layer) => {
            let cors = CorsWhenAsked::new(layer, compressed).await;
            let added = cors.added();
            (tower::util::Either::Left(cors), Some(added))
        }
        None => (tower::util::Either::Right(compressed), None),
    };
    let app = Layers::new(layered, inner, cors_added);
    super::accept::run(
        listener,
        app,
        limits,
        Arc::clone(&state.pipeline.metrics),
        Arc::clone(&drain),
        async {
            drain.stop_requested().await;
            // Live streams never end by themselves: they end now (their clients reconnect,
            // through the balancer, elsewhere), so that the requests in flight can finish.
            state.live.shutdown();
        },
    )
    .await;
    eprintln!("apijet: stopped");
    Ok(())
}

/// `metrics_listen`: a listener that serves `/metrics` alone (behind `metrics_token` when it
/// is set), for a scraper on a private network; it has none of the API listener's connection
/// limits, so it belongs on a private address. It ends with the process.
fn serve_metrics(listener: tokio::net::TcpListener, state: Shared, cfg: &Config) {
    if let Ok(at) = listener.local_addr() {
        println!("apijet metrics on http://{at}/metrics");
    }
    let app = Router::new()
        .route("/metrics", metrics_get(cfg))
        .fallback(|| async {
            super::reply::refusal(
                StatusCode::NOT_FOUND,
                "the metrics_listen address serves /metrics only",
            )
        })
        .with_state(state);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("apijet: the metrics listener stopped: {e}");
        }
    });
}

/// Why the listening socket could not be made, and what to do about it.
fn listen_failure(listen: &str, e: &std::io::Error) -> String {
    let hint = match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            "another process listens there: stop it, or choose another port with --listen \
             HOST:PORT"
        }
        std::io::ErrorKind::PermissionDenied => {
            "ports below 1024 need privileges: choose a port from 1024 up with --listen HOST:PORT"
        }
        std::io::ErrorKind::AddrNotAvailable => {
            "no network interface of this machine has that address: use 127.0.0.1 (this \
             machine only) or 0.0.0.0 (every interface)"
        }
        _ => "check the address given to --listen (HOST:PORT)",
    };
    format!("cannot listen on {listen}: {e}; {hint}")
}

/// SIGHUP re-reads the schema and configuration tables without stopping requests in flight.
fn reload_on_sighup(state: Shared) {
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return;
        };
        while hup.recv().await.is_some() {
            match state.reload().await {
                Ok(()) => eprintln!("apijet: reloaded on SIGHUP"),
                Err(e) => eprintln!("apijet: reload on SIGHUP failed, keeping the old tables: {e}"),
            }
        }
    });
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
