//! Middleware around every route: CORS, the request id and access log, metrics, the body limit
//! and timeout, the cache metadata of answers read with credentials, and JSON envelopes for the
//! refusals that happen before the APIJSON pipeline (413, 405, 404, an unparsable URL).

use super::reply::refusal;
use super::sent::ReadBody;
use crate::app::AppState;
use crate::config::Config;
use crate::metrics::{method_index, Metrics};
use crate::observe::Facts;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use http_body_util::BodyExt;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer};

/// The shared parts the middleware needs.
pub struct Edge {
    pub metrics: Arc<Metrics>,
    pub max_body: usize,
    pub body_timeout: Duration,
    pub slow: Option<Duration>,
    pub server_timing: bool,
}

/// `x-request-id`
pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The CORS layer, or none when `cors_origins` is empty. `*` echoes any origin and allows
/// credentials, as the reference's demo does (`allowedOriginPatterns("*")`,
/// `allowCredentials(true)`, `maxAge(3600)`).
pub fn cors(cfg: &Config) -> Result<Option<CorsLayer>, String> {
    if cfg.cors_origins.is_empty() {
        return Ok(None);
    }
    let origin = if cfg.cors_origins.iter().any(|o| o == "*") {
        AllowOrigin::mirror_request()
    } else {
        let list = cfg
            .cors_origins
            .iter()
            .map(|o| {
                HeaderValue::from_str(o.trim_end_matches('/'))
                    .map_err(|_| format!("cors_origins: '{o}' is not a valid origin"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(list)
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(origin)
            .allow_methods(AllowMethods::mirror_request())
            .allow_headers(AllowHeaders::mirror_request())
            .allow_credentials(true)
            .expose_headers([
                REQUEST_ID.clone(),
                HeaderName::from_static("x-apijet-statements"),
                HeaderName::from_static("server-timing"),
            ])
            .max_age(Duration::from_secs(3600)),
    ))
}

/// A request id: the client's `x-request-id` when it is short and printable, else a new one.
fn request_id(req: &Request) -> HeaderValue {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    if let Some(v) = req.headers().get(&REQUEST_ID) {
        let ok = v.len() <= 64 && v.as_bytes().iter().all(|b| b.is_ascii_graphic());
        if ok {
            return v.clone();
        }
    }
    static PREFIX: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() ^ std::process::id())
            .unwrap_or(0)
    });
    generated_id(*prefix, NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `{prefix:08x}-{n:x}`, written by hand: `format!` was a fifth of this middleware's own work.
fn generated_id(prefix: u32, n: u64) -> HeaderValue {
    let mut id = [0u8; 8 + 1 + 16];
    let mut len = 0;
    for shift in (0..8).rev() {
        id[len] = hex_digit(prefix >> (shift * 4));
        len += 1;
    }
    id[len] = b'-';
    len += 1;
    let digits = (64 - n.leading_zeros()).div_ceil(4).max(1);
    for shift in (0..digits).rev() {
        id[len] = hex_digit((n >> (shift * 4)) as u32);
        len += 1;
    }
    HeaderValue::from_bytes(&id[..len]).unwrap_or(HeaderValue::from_static("-"))
}

/// The lowercase hex digit of the low four bits of `v`.
fn hex_digit(v: u32) -> u8 {
    b"0123456789abcdef"[(v & 0xf) as usize]
}

/// A count in the access log: `-` when unknown.
struct Known(Option<u64>);

impl std::fmt::Display for Known {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("-"),
        }
    }
}

/// The middleware of every route, in one service around them: [`observe`] around
/// [`json_refusals`] around [`read_body`]. One hand-written service instead of
/// `axum::middleware::from_fn`, which boxes the inner service and its future once more for
/// every request (its `Next`), and clones the inner service twice.
/// `POST /{method}` without a query is answered here, after the body is read, by the
/// route's own handler ([`super::calls::direct_method`]); every other request goes on to
/// `inner`, the router.
#[derive(Clone)]
pub struct Around<S> {
    edge: Arc<Edge>,
    app: Arc<AppState>,
    inner: S,
}

impl<S> Around<S> {
    pub fn new(edge: Arc<Edge>, app: Arc<AppState>, inner: S) -> Around<S> {
        Around { edge, app, inner }
    }
}

impl<S> tower::Service<Request> for Around<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        // The service made ready answers; a clone takes its place for the next request.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let edge = Arc::clone(&self.edge);
        let app = Arc::clone(&self.app);
        Box::pin(async move {
            Ok(observe(&edge, req, |req| async {
                match read_body(&edge, &app, req, inner).await {
                    Read::Routed(response) => (json_refusals(response).await, None),
                    Read::Answered(response, facts) => (json_refusals(response).await, Some(facts)),
                }
            })
            .await)
        })
    }
}

/// Request id, access log, metrics, slow-request log and `Server-Timing`, from the facts
/// `inner` answers beside its response (the calls the middleware answers itself) or in it.
async fn observe<F, Fut>(edge: &Edge, req: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = (Response, Option<Box<Facts>>)>,
{
    let started = Instant::now();
    let id = request_id(&req);
    let path = req.uri().path();
    let segment = path.trim_start_matches('/').split('/').next().unwrap_or("");
    let method = method_index(segment);
    let log_path = tracing::enabled!(tracing::Level::INFO).then(|| path.to_string());
    let http_method = req.method().clone();
    let cacheable = matches!(http_method, Method::GET | Method::HEAD);
    let credentials = cacheable && carries_credentials(req.headers());
    let (mut response, beside) = inner(req).await;
    if cacheable {
        mark_private(&mut response, credentials);
    }
    let elapsed = started.elapsed();
    let facts = beside
        .map(|facts| *facts)
        .or_else(|| response.extensions_mut().remove::<Facts>())
        .unwrap_or(Facts {
            code: response.status().as_u16(),
            ..Facts::default()
        });
    edge.metrics.request(
        method,
        facts.table,
        facts.code,
        elapsed.as_secs_f64(),
        facts.statements,
    );
    let ms = elapsed.as_secs_f64() * 1000.0;
    if let Some(path) = log_path {
        tracing::info!(
            target: "apijet::access",
            id = %id.to_str().unwrap_or("-"),
            method = %http_method,
            path = %path,
            tables = %facts.tables.as_deref().filter(|t| !t.is_empty()).unwrap_or("-"),
            code = facts.code,
            ms = format_args!("{ms:.2}"),
            rows = %Known(facts.rows),
            statements = %Known(facts.statements.map(|s| s as u64)),
            "request"
        );
    }
    if edge.slow.is_some_and(|limit| elapsed >= limit) {
        edge.metrics.slow_request();
    }
    if edge.server_timing {
        let mut timing = format!("total;dur={ms:.2}");
        let stages = [
            ("parse", facts.parse),
            ("plan", facts.plan),
            ("exec", facts.exec),
            ("encode", facts.encode),
        ];
        for (name, took) in stages {
            if let Some(t) = took {
                timing.push_str(&format!(", {name};dur={:.3}", t.as_secs_f64() * 1000.0));
            }
        }
        if let Ok(v) = HeaderValue::from_str(&timing) {
            response.headers_mut().insert("server-timing", v);
        }
    }
    response.headers_mut().insert(REQUEST_ID.clone(), id);
    response
}

/// Whether a request carries a login (`Authorization`, or the login cookie): what it is
/// answered may then be the visitor's own.
fn carries_credentials(headers: &axum::http::HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION)
        || headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains(crate::accounts::session::COOKIE))
}

/// The cache metadata of a read's JSON answer (`GET /get/{json}`, `/head/{json}`): it varies
/// with `Authorization` and `Cookie` (another visitor may be answered other rows), and one
/// read with credentials is the visitor's alone (`Cache-Control: private`), so that no shared
/// cache hands it to anybody else.
fn mark_private(response: &mut Response, credentials: bool) {
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    // A 304 carries what its 200 would.
    if !json && response.status() != StatusCode::NOT_MODIFIED {
        return;
    }
    let h = response.headers_mut();
    h.append(
        header::VARY,
        HeaderValue::from_static("authorization, cookie"),
    );
    if credentials && !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private"));
    }
}

/// What [`read_body`] gave: the answer of a route (or a refusal), or of a call answered in
/// the middleware, with its facts beside it.
enum Read {
    Routed(Response),
    Answered(Response, Box<Facts>),
}

impl From<Response> for Read {
    fn from(response: Response) -> Read {
        Read::Routed(response)
    }
}

/// Reads the whole body within `max_body_bytes` and `body_timeout_ms`, so that handlers get
/// bytes and a slow or oversized upload is refused with an envelope before any work.
async fn read_body<S>(edge: &Edge, app: &Arc<AppState>, req: Request, mut inner: S) -> Read
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return answered(inner.call(req).await).into();
    }
    let too_big = || {
        let mut r = refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the request body is larger than max_body_bytes ({} bytes)",
                edge.max_body
            ),
        );
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        Read::Routed(r)
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // An oversized body is still read (and dropped), up to a few times the limit and for a
    // moment: closing on a client that is still sending resets the connection, and the client
    // would see a broken pipe instead of the 413.
    let discard = edge.max_body.saturating_mul(8).min(64 << 20) as u64;
    if declared.is_some_and(|n| n > discard) {
        return too_big();
    }
    let started = tokio::time::Instant::now();
    let deadline = started + edge.body_timeout;
    let (parts, mut body) = req.into_parts();
    let capacity = declared.map_or(0, |n| n.min(edge.max_body as u64) as usize);
    let mut bytes: Vec<u8> = Vec::with_capacity(capacity);
    let mut seen: u64 = 0;
    let mut oversized = declared.is_some_and(|n| n > edge.max_body as u64);
    loop {
        let until = if oversized {
            deadline.min(started + LINGER)
        } else {
            deadline
        };
        let frame = match tokio::time::timeout_at(until, body.frame()).await {
            Err(_) if oversized => return too_big(),
            Err(_) => {
                edge.metrics.timeout();
                let mut r = refusal(
                    StatusCode::REQUEST_TIMEOUT,
                    &format!(
                        "the request body did not arrive within body_timeout_ms ({} ms)",
                        edge.body_timeout.as_millis()
                    ),
                );
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                return r.into();
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return refusal(
                    StatusCode::BAD_REQUEST,
                    &format!("cannot read the request body: {e}"),
                )
                .into()
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen += data.len() as u64;
        if seen > edge.max_body as u64 {
            oversized = true;
            bytes = Vec::new();
        }
        if seen > discard {
            return too_big();
        }
        if !oversized {
            bytes.extend_from_slice(&data);
        }
    }
    if oversized {
        return too_big();
    }
    let bytes = Bytes::from(bytes);
    if let Some(method) = super::calls::direct_method(&parts) {
        // Boxed: the call's future is large, and the middleware's own is moved into its box.
        let (response, facts) = Box::pin(super::calls::call_direct(
            app,
            method,
            &parts.headers,
            &bytes,
        ))
        .await;
        return Read::Answered(response, facts);
    }
    let mut req = Request::from_parts(parts, Body::from(bytes.clone()));
    req.extensions_mut().insert(ReadBody(bytes));
    answered(inner.call(req).await).into()
}

fn answered(r: Result<Response, Infallible>) -> Response {
    match r {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// How long an oversized body is read and dropped before the 413 goes out anyway.
const LINGER: Duration = Duration::from_secs(2);

/// Any refusal that is not JSON yet (axum's 404, 405, 400 for an unparsable path or query,
/// 415…) becomes an APIJSON envelope with the same HTTP status.
async fn json_refusals(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match body.collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
        Err(_) => String::new(),
    };
    let reason = match status {
        StatusCode::NOT_FOUND => "no such route: the APIJSON methods are POST /get, /head, /gets, /heads, /post, /put, /delete, /crud (and GET /get/{json})".to_string(),
        StatusCode::METHOD_NOT_ALLOWED => "method not allowed on this route: APIJSON calls are POST".to_string(),
        _ if !text.trim().is_empty() => text.trim().chars().take(300).collect(),
        _ => status
            .canonical_reason()
            .unwrap_or("refused")
            .to_string(),
    };
    let mut r = refusal(status, &reason);
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            r.headers_mut().insert(name.clone(), value.clone());
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::generated_id;

    #[test]
    fn generated_ids_are_the_prefix_and_the_count_in_hex() {
        for (prefix, n) in [(0, 0), (0x1ae0_2227, 4), (u32::MAX, 0xabc), (7, u64::MAX)] {
            let id = generated_id(prefix, n);
            assert_eq!(
                id.to_str().ok(),
                Some(format!("{prefix:08x}-{n:x}").as_str())
            );
        }
    }
}
