//! The HTTP edge: routes, and the APIJSON rule that every call that reached the parser is
//! answered with HTTP 200 and its code in the body. The middleware (CORS, limits, timeouts,
//! access log, metrics) is in `edge`, the accept loop in `server`.

use crate::account::routes::{address, Peer};
use crate::app::{Answer, AppState, Call};
use crate::config::Config;
use crate::config::OpenApiExposure;
use crate::edge::{self, Edge, Facts};
use crate::session::{not_logged_in, Sessions};
use apijet_plan::PlanError;
use apijet_response::stream::Chunk;
use apijet_response::ApiError;
use axum::body::Body;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures_util::{stream, StreamExt};
use std::sync::Arc;
use std::time::Duration;

type Shared = Arc<AppState>;
type Params = Query<Vec<(String, String)>>;

fn json_response(v: &serde_json::Value) -> Response {
    let started = std::time::Instant::now();
    let body = serde_json::to_vec(v).unwrap_or_default();
    let encode = started.elapsed();
    let mut r = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body,
    )
        .into_response();
    r.extensions_mut().insert(Facts {
        code: answer_code(v),
        encode: Some(encode),
        ..Facts::default()
    });
    r
}

/// The APIJSON code of an answer.
fn answer_code(v: &serde_json::Value) -> u16 {
    v.get("code")
        .and_then(serde_json::Value::as_u64)
        .map_or(200, |c| c.min(999) as u16)
}

/// Sends an answer. A streamed answer waits for its first chunk: an error before any data is
/// still a normal error envelope; an error after it aborts the body.
pub(crate) async fn send(state: &Shared, answer: Answer, mut facts: Facts) -> Response {
    let with_facts = |mut r: Response, mut facts: Facts| {
        if let Some(f) = r.extensions_mut().get_mut::<Facts>() {
            facts.code = f.code;
            facts.encode = f.encode;
            *f = facts;
        }
        r
    };
    let mut rx = match answer {
        Answer::Json(v) => return with_facts(json_response(&v), facts),
        Answer::Counted(v, statements) => {
            let mut r = json_response(&v);
            r.headers_mut()
                .insert("x-apijet-statements", HeaderValue::from(statements));
            facts.statements = Some(statements);
            if tracing::enabled!(tracing::Level::INFO) {
                facts.rows = Some(crate::observe::rows_in(&v, 0));
            }
            return with_facts(r, facts);
        }
        Answer::Bytes {
            body,
            statements,
            rows,
        } => {
            let mut r = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
                body,
            )
                .into_response();
            r.headers_mut()
                .insert("x-apijet-statements", HeaderValue::from(statements));
            facts.code = 200;
            facts.statements = Some(statements);
            facts.rows = Some(rows);
            r.extensions_mut().insert(facts);
            return r;
        }
        Answer::Stream(rx) => rx,
    };
    let mut statements = None;
    let first = loop {
        match rx.recv().await {
            Some(Chunk::Data(b)) => break b,
            Some(Chunk::Statements(n)) => statements = Some(n),
            Some(Chunk::Fail(e)) => return with_facts(json_response(&state.failure(&e)), facts),
            None => {
                let e = apijet_response::ApiError::Unsupported(
                    "the list stream ended unexpectedly".into(),
                );
                return with_facts(json_response(&state.failure(&e)), facts);
            }
        }
    };
    facts.code = 200;
    facts.statements = Some(statements.unwrap_or(1));
    let metrics = Arc::clone(&state.metrics);
    metrics.streamed_bytes(first.len() as u64);
    let rest = stream::unfold(rx, move |mut rx| {
        let metrics = Arc::clone(&metrics);
        async move {
            match rx.recv().await {
                Some(Chunk::Data(b)) => {
                    metrics.streamed_bytes(b.len() as u64);
                    Some((Ok(b), rx))
                }
                Some(Chunk::Fail(e)) => {
                    tracing::warn!(error = %e, "list failed after its first bytes; aborting the response");
                    Some((Err(std::io::Error::other(e.to_string())), rx))
                }
                // Only ever sent before the first data.
                Some(Chunk::Statements(_)) => Some((Ok(Bytes::new()), rx)),
                None => None,
            }
        }
    });
    // Fused: compression layers poll a body again after its end, which `unfold` forbids.
    let body = stream::iter([Ok::<_, std::io::Error>(first)])
        .chain(rest)
        .fuse();
    let mut r = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        Body::from_stream(body),
    )
        .into_response();
    if let Some(n) = statements {
        r.headers_mut()
            .insert("x-apijet-statements", HeaderValue::from(n));
    }
    r.extensions_mut().insert(facts);
    r
}

async fn call(
    State(s): State<Shared>,
    Path(method): Path<String>,
    Query(q): Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let visitor = s.sessions.visitor(&headers);
    let call = Call {
        method: &method,
        tag: None,
        query: &q,
        body: &body,
        visitor,
    };
    let mut facts = Facts::default();
    let answer = s.answer(call, &mut facts).await;
    send(&s, answer, facts).await
}

async fn call_tag(
    State(s): State<Shared>,
    Path((method, tag)): Path<(String, String)>,
    Query(q): Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        Bytes::from_static(b"{}")
    } else {
        body
    };
    let visitor = s.sessions.visitor(&headers);
    let call = Call {
        method: &method,
        tag: Some(&tag),
        query: &q,
        body: &body,
        visitor,
    };
    let mut facts = Facts::default();
    let answer = s.answer(call, &mut facts).await;
    send(&s, answer, facts).await
}

/// `GET /get/{url-encoded-json}` and `GET /head/{…}`: the request in the URL, for browsers and
/// quick checks. Only reads: a browser sends the `SameSite=Lax` login cookie along with a
/// cross-site top-level navigation, so any other method here would let a link on any site
/// write as its visitor. They answer 405, as the reference (which maps only `GET /get/…`).
async fn call_in_url(
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
        let mut r = edge::refusal(
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
    let visitor = s.sessions.visitor(&headers);
    let call = Call {
        method: &method,
        tag: None,
        query: &q,
        body: json.as_bytes(),
        visitor,
    };
    let mut facts = Facts::default();
    let answer = s.answer(call, &mut facts).await;
    // A browser or proxy revalidating a GET gets 304 when the data has not changed; `time`
    // changes on every answer, so it is left out of the tag.
    let tag = match &answer {
        Answer::Json(v) | Answer::Counted(v, _) => etag(v),
        Answer::Bytes { body, .. } => written_etag(body),
        Answer::Stream(_) => None,
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

/// A strong validator for a successful answer: a hash of it without `time`.
fn etag(answer: &serde_json::Value) -> Option<String> {
    let mut m = answer.as_object()?.clone();
    if m.get("code").and_then(serde_json::Value::as_i64) != Some(200) {
        return None;
    }
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

async fn login(State(s): State<Shared>, peer: Peer, body: Bytes) -> Response {
    match s.login(&body, address(peer)).await {
        Ok((answer, token, ttl)) => {
            let mut r = json_response(&answer);
            if let Ok(v) = HeaderValue::from_str(&Sessions::cookie(&token, ttl)) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(e) => {
            let mut r = json_response(&s.login_failure(&e));
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

async fn register(State(s): State<Shared>, peer: Peer, body: Bytes) -> Response {
    json_response(&s.register(&body, address(peer)).await)
}

/// Logout answers the bare envelope, as the reference records it, and clears the cookie.
async fn logout(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let answer = match s.sessions.visitor(&headers) {
        Some(_) => apijet_response::success(serde_json::Map::new(), false),
        None => s.failure(&not_logged_in()),
    };
    let mut r = json_response(&answer);
    if let Ok(v) = HeaderValue::from_str(&Sessions::clear_cookie()) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

async fn reload(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let answer = match s.sessions.visitor(&headers) {
        None => s.failure(&not_logged_in()),
        Some(v) if !s.admins.contains(&v.id) => s.failure(&ApiError::Plan(PlanError::Forbidden(
            "reload is only allowed to the admins listed in the configuration".into(),
        ))),
        Some(_) => match s.reload().await {
            Ok(()) => apijet_response::success(serde_json::Map::new(), false),
            Err(e) => s.failure(&ApiError::Unsupported(format!("reload failed: {e}"))),
        },
    };
    json_response(&answer)
}

/// `GET /health`: the process answers.
async fn health() -> Response {
    json_response(&apijet_response::success(serde_json::Map::new(), false))
}

/// `GET /ready`: the snapshot is loaded and the database answers a trivial query (503 when not).
async fn ready(State(s): State<Shared>) -> Response {
    let probe = apijet_sql::Statement {
        sql: "SELECT 1".into(),
        binds: Vec::new(),
    };
    let mut sink = apijet_exec::sink::CollectSink::new(&[]);
    let checked =
        tokio::time::timeout(Duration::from_secs(5), s.backend.fetch(&probe, &mut sink)).await;
    match checked {
        Ok(Ok(_)) => json_response(&apijet_response::success(serde_json::Map::new(), false)),
        Ok(Err(e)) => edge::refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the database does not answer: {e}"),
        ),
        Err(_) => edge::refusal(
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
            let mut r = edge::refusal(
                StatusCode::UNAUTHORIZED,
                "/metrics needs Authorization: Bearer with the metrics_token of this server",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    let exec = apijet_exec::stats::snapshot(&s.backend);
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(&exec),
    )
        .into_response()
}

/// A route that the configuration keeps closed: 404, naming the setting.
fn not_served(msg: &'static str) -> axum::routing::MethodRouter<Shared> {
    get(move || async move { edge::refusal(StatusCode::NOT_FOUND, msg) })
}

/// `GET /metrics`, behind `metrics_token` when it is set.
fn metrics_get(cfg: &Config) -> axum::routing::MethodRouter<Shared> {
    let token: Arc<str> = cfg.metrics_token.as_str().into();
    get(move |State(s): State<Shared>, headers: HeaderMap| {
        let token = Arc::clone(&token);
        async move { metrics(&s, &headers, &token) }
    })
}

/// `/metrics` on the API listener: only behind `metrics_token`.
fn metrics_route(cfg: &Config) -> axum::routing::MethodRouter<Shared> {
    if cfg.metrics_token.is_empty() {
        return not_served(
            "/metrics is not served on this listener: set metrics_token (and scrape with \
             Authorization: Bearer), or metrics_listen for a separate address",
        );
    }
    metrics_get(cfg)
}

/// `/openapi.json` as the `openapi` setting says.
fn openapi_route(cfg: &Config) -> axum::routing::MethodRouter<Shared> {
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
        s.snapshot().openapi.clone(),
    )
        .into_response()
}

/// The routes over a started state, without middleware (see [`serve`]).
pub fn router(state: Shared, cfg: &Config) -> Router {
    let mut app = Router::new()
        .route("/login", post(login))
        .route("/logout", post(logout))
        .route("/register", post(register))
        .route("/reload", post(reload))
        .route("/post/verify", post(crate::account::routes::post_verify))
        .route("/gets/verify", post(crate::account::routes::gets_verify))
        .route("/heads/verify", post(crate::account::routes::heads_verify))
        .route("/put/password", post(crate::account::routes::put_password))
        .route("/put/balance", post(crate::account::routes::put_balance))
        .route("/router/{method}/{tag}", post(crate::router::route))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", metrics_route(cfg))
        .route("/openapi.json", openapi_route(cfg))
        .route("/{method}", post(call))
        .route("/{method}/{tag}", post(call_tag).get(call_in_url));
    if cfg.console {
        app = crate::console::routes(app);
    }
    if cfg.live {
        app = crate::live::routes::routes(app);
    }
    app.with_state(state)
}

/// Starts the server and runs until SIGTERM or SIGINT, then finishes the requests in flight.
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
    crate::live::Live::start(&state);
    let engine = state.backend.engine().name();
    println!(
        "apijet listening on http://{addr}, serving {engine} database {}",
        redact(&cfg.db)
    );
    let limits = crate::server::Limits {
        header: Duration::from_millis(cfg.header_timeout_ms),
        idle: Duration::from_millis(cfg.idle_timeout_ms),
        max_connections: cfg.max_connections,
        probe_clients: state.backend.engine() == apijet_core::Engine::Sqlite,
    };
    let edge = Arc::new(Edge {
        metrics: Arc::clone(&state.metrics),
        max_body: cfg.max_body_bytes,
        body_timeout: Duration::from_millis(cfg.body_timeout_ms),
        slow: (cfg.slow_request_ms > 0).then(|| Duration::from_millis(cfg.slow_request_ms)),
        server_timing: cfg.server_timing,
    });
    // The middleware wraps the router rather than each route: a route's own layers would be
    // cloned, box by box, for every request that reaches it.
    let app = tower::ServiceBuilder::new()
        .option_layer(edge::cors(&cfg)?)
        // gzip, br or zstd when the client asks (Accept-Encoding); streamed lists are
        // compressed chunk by chunk, so memory stays flat.
        .layer(tower_http::compression::CompressionLayer::new())
        .layer(axum::middleware::from_fn_with_state(edge, edge::around))
        .layer(DefaultBodyLimit::max(cfg.max_body_bytes))
        .service(router(Arc::clone(&state), &cfg));
    crate::server::run(listener, app, limits, Arc::clone(&state.metrics), async {
        crate::server::stop_signal().await;
        // Live streams never end by themselves: they end now, so that the requests in
        // flight can finish.
        state.live.shutdown();
    })
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
            edge::refusal(
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
