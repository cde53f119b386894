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
/// asks (its own test: not encoded already, not a range, and the default predicate). Its
/// headers are read in one pass: an answer has a few, and a lookup by name for each of the
/// five this reads cost more than the pass.
pub(super) fn vary_as_compression(mut res: Response) -> Response {
    let mut encoded = false;
    let mut varies = false;
    let mut ty = None;
    let mut length = None;
    for (name, value) in res.headers() {
        if name == header::CONTENT_ENCODING || name == header::CONTENT_RANGE {
            encoded = true;
        } else if name == header::VARY {
            varies |= contains_ignore_ascii_case(value.as_bytes(), b"accept-encoding");
        } else if name == header::CONTENT_TYPE {
            // The first of each, as a lookup by name gives it.
            ty = ty.or(Some(value));
        } else if name == header::CONTENT_LENGTH {
            length = length.or(Some(value));
        }
    }
    if !encoded && !varies && compresses(&res, length, ty) {
        res.headers_mut()
            .append(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    res
}

/// tower-http's `DefaultPredicate` (a body of at least 32 bytes, or of unknown size, and not
/// gRPC, an image other than SVG or an event stream), reading the content type once rather
/// than once per excluded type.
#[cfg(test)]
fn default_predicate(res: &Response) -> bool {
    let headers = res.headers();
    compresses(
        res,
        headers.get(header::CONTENT_LENGTH),
        headers.get(header::CONTENT_TYPE),
    )
}

/// [`default_predicate`] of `res`, whose `Content-Length` and `Content-Type` are `length` and
/// `ty`.
fn compresses(res: &Response, length: Option<&HeaderValue>, ty: Option<&HeaderValue>) -> bool {
    let size = res.body().size_hint().exact().or_else(|| {
        length
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    });
    if size.is_some_and(|n: u64| n < 32) {
        return false;
    }
    let ty = ty.and_then(|v| v.to_str().ok()).unwrap_or_default();
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
    use super::{default_predicate, vary_as_compression};
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
                    let tower = DefaultPredicate::new().should_compress(&res);
                    assert_eq!(
                        default_predicate(&res),
                        tower,
                        "{ty:?}, {size} bytes, streamed: {streamed}"
                    );
                    // The one pass over the headers decides as the lookups by name do.
                    let varies = vary_as_compression(res)
                        .headers()
                        .get_all(header::VARY)
                        .iter()
                        .any(|v| v == "accept-encoding");
                    assert_eq!(varies, tower, "{ty:?}, {size} bytes, streamed: {streamed}");
                }
            }
        }
    }

    /// An answer already encoded, a range, or one that varies with the encoding already gets
    /// no `Vary` of its own; the first `Content-Type` decides, as a lookup by name reads it.
    #[test]
    fn what_the_answer_says_already_decides_its_vary() {
        let answer = |headers: &[(header::HeaderName, &'static str)]| {
            let mut res = Response::new(Body::from(vec![b'x'; 64]));
            for (name, value) in headers {
                res.headers_mut()
                    .append(name.clone(), header::HeaderValue::from_static(value));
            }
            vary_as_compression(res)
                .headers()
                .get_all(header::VARY)
                .iter()
                .filter(|v| v.as_bytes().eq_ignore_ascii_case(b"accept-encoding"))
                .count()
        };
        let json = (header::CONTENT_TYPE, "application/json");
        assert_eq!(answer(std::slice::from_ref(&json)), 1);
        assert_eq!(
            answer(&[json.clone(), (header::CONTENT_ENCODING, "gzip")]),
            0
        );
        assert_eq!(
            answer(&[json.clone(), (header::CONTENT_RANGE, "bytes 0-1/2")]),
            0
        );
        assert_eq!(
            answer(&[json.clone(), (header::VARY, "origin, Accept-Encoding")]),
            0
        );
        assert_eq!(answer(&[(header::VARY, "origin"), json.clone()]), 1);
        let first_image = [(header::CONTENT_TYPE, "image/png"), json];
        assert_eq!(answer(&first_image), 0);
    }
}
