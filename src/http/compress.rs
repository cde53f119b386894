//! Compression (gzip, br or zstd) for the requests that ask for it with `Accept-Encoding`.
//!
//! tower-http's compression wraps every answer's body in an enum that holds each encoder's
//! state inline (about 6 KB), also when the client accepts no encoding and the body passes
//! through as it is; moved through the layers and polls on its way out, that cost every point
//! lookup ~10 % of its instructions. A request without `Accept-Encoding` goes around it here,
//! and gets what the compression layer would have given it: the body as it is, with
//! `Vary: accept-encoding` where a client that asks would have had it compressed.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use futures_util::future::{Either, MapOk, TryFutureExt};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::util::Oneshot;
use tower::ServiceExt;
use tower_http::compression::predicate::{DefaultPredicate, Predicate};
use tower_http::compression::{Compression, CompressionBody};

type Compressed = axum::http::Response<CompressionBody<Body>>;

/// `inner`, compressed for the requests that accept an encoding. Both ways are kept behind
/// one `Arc`: the accept loop clones the whole stack for every request, and each way held by
/// value was cloned (and dropped) with it, layer by layer.
pub struct CompressWhenAsked<S>(Arc<Ways<S>>);

struct Ways<S> {
    plain: S,
    compressed: Compression<S>,
}

impl<S> Clone for CompressWhenAsked<S> {
    fn clone(&self) -> Self {
        CompressWhenAsked(Arc::clone(&self.0))
    }
}

impl<S: Clone> CompressWhenAsked<S> {
    pub fn new(inner: S) -> CompressWhenAsked<S> {
        CompressWhenAsked(Arc::new(Ways {
            compressed: Compression::new(inner.clone()),
            plain: inner,
        }))
    }
}

impl<S> tower::Service<Request> for CompressWhenAsked<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<
        MapOk<Oneshot<Compression<S>, Request>, fn(Compressed) -> Response>,
        futures_util::future::Map<
            Oneshot<S, Request>,
            fn(Result<Response, Infallible>) -> Result<Response, Infallible>,
        >,
    >;

    /// Always ready: each call readies the clone of the way it takes (`oneshot`).
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        if req.headers().contains_key(header::ACCEPT_ENCODING) {
            // Boxed as it leaves the layer, so that the response moves as a pointer.
            let boxed: fn(Compressed) -> Response = |r| r.map(Body::new);
            Either::Left(self.0.compressed.clone().oneshot(req).map_ok(boxed))
        } else {
            let vary: fn(Result<Response, Infallible>) -> Result<Response, Infallible> =
                |r| r.map(vary_as_compression);
            Either::Right(futures_util::FutureExt::map(
                self.0.plain.clone().oneshot(req),
                vary,
            ))
        }
    }
}

/// The `Vary` the compression layer adds to an answer it would compress for a client that
/// asks (its own test: not encoded already, not a range, and the default predicate).
fn vary_as_compression(mut res: Response) -> Response {
    let compressible = !res.headers().contains_key(header::CONTENT_ENCODING)
        && !res.headers().contains_key(header::CONTENT_RANGE)
        && DefaultPredicate::new().should_compress(&res);
    let varies = res
        .headers()
        .get_all(header::VARY)
        .iter()
        .any(|v| contains_ignore_ascii_case(v.as_bytes(), b"accept-encoding"));
    if compressible && !varies {
        res.headers_mut()
            .append(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    res
}

fn contains_ignore_ascii_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}
