//! The web console at `/`: one HTML page with its script and styles inside, embedded in the
//! binary, so it works offline and needs no CDN. It reads table names and columns for its
//! completion from `/openapi.json`.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

const PAGE: &str = include_str!("../assets/console.html");

async fn page() -> Response {
    let mut r = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// Adds `GET /` (and `/console`) to the router.
pub fn routes<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    router.route("/", get(page)).route("/console", get(page))
}
