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
use http_body::Body as _;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::util::Oneshot;
use tower::ServiceExt;
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
pub(super) fn vary_as_compression(mut res: Response) -> Response {
    let compressible = !res.headers().contains_key(header::CONTENT_ENCODING)
        && !res.headers().contains_key(header::CONTENT_RANGE)
        && default_predicate(&res);
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

/// tower-http's `DefaultPredicate` (a body of at least 32 bytes, or of unknown size, and not
/// gRPC, an image other than SVG or an event stream), reading the content type once rather
/// than once per excluded type.
fn default_predicate(res: &Response) -> bool {
    let size = res.body().size_hint().exact().or_else(|| {
        res.headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    });
    if size.is_some_and(|n: u64| n < 32) {
        return false;
    }
    let ty = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let grpc = ty.starts_with("application/grpc") && !ty.starts_with("application/grpc-web");
    let image = ty.starts_with("image/") && !ty.starts_with("image/svg+xml");
    !(grpc || image || ty.starts_with("text/event-stream"))
}

fn contains_ignore_ascii_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::default_predicate;
    use axum::body::Body;
    use axum::http::header;
    use axum::response::Response;
    use tower_http::compression::predicate::{DefaultPredicate, Predicate};

    #[test]
    fn the_predicate_agrees_with_tower_https_default_one() {
        let types = [
            None,
            Some("application/json; charset=utf-8"),
            Some("application/grpc"),
            Some("application/grpc+proto"),
            Some("application/grpc-web"),
            Some("application/grpc-web+proto"),
            Some("image/png"),
            Some("image/svg+xml"),
            Some("image/svg+xmlx"),
            Some("text/event-stream"),
            Some("text/event-streams"),
            Some("text/html"),
            Some(""),
        ];
        for ty in types {
            for size in [0usize, 1, 31, 32, 33, 4096] {
                for streamed in [false, true] {
                    let body = vec![b'x'; size];
                    let mut res = if streamed {
                        let chunks = futures_util::stream::iter([Ok::<_, std::io::Error>(
                            bytes::Bytes::from(body),
                        )]);
                        Response::new(Body::from_stream(chunks))
                    } else {
                        Response::new(Body::from(body))
                    };
                    if let Some(ty) = ty {
                        res.headers_mut()
                            .insert(header::CONTENT_TYPE, ty.parse().expect("a header value"));
                    }
                    if streamed && size == 4096 {
                        res.headers_mut().insert(
                            header::CONTENT_LENGTH,
                            size.to_string().parse().expect("a length"),
                        );
                    }
                    assert_eq!(
                        default_predicate(&res),
                        DefaultPredicate::new().should_compress(&res),
                        "{ty:?}, {size} bytes, streamed: {streamed}"
                    );
                }
            }
        }
    }
}
