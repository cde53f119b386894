//! The layers around the middleware (CORS, compression), and the way around them for the
//! requests they add fixed headers to.
//!
//! Most API calls carry no `Origin` (no browser's cross-site call, no preflight) and no
//! `Accept-Encoding`. For them CORS adds what it adds to every such answer ([`super::cors`])
//! and compression only its `Vary` ([`super::compress`]): such a request goes straight to the
//! middleware, and its answer gets those headers in the order the layers would add them. The
//! two layers' services, their `Oneshot`s and futures around it cost a point lookup about as
//! much as the headers themselves. Every other request goes through the layers.

use super::compress::vary_as_compression;
use super::cors::{merge, Added};
use axum::extract::Request;
use axum::http::{header, Method};
use axum::response::Response;
use futures_util::future::Either;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::util::Oneshot;
use tower::ServiceExt;

/// `layered` (the CORS and compression layers over `plain`), and `plain` itself for the
/// requests those layers add fixed headers to. `plain` is always ready (the middleware over
/// the router): it is called without `poll_ready`. Shared by one `Arc`: the accept loop clones
/// the service for every request.
pub struct Layers<S, P>(Arc<Ways<S, P>>);

struct Ways<S, P> {
    layered: S,
    plain: P,
    /// What CORS adds to the answer of a request without `Origin`; none when CORS is off.
    cors: Option<Added>,
}

impl<S, P> Clone for Layers<S, P> {
    fn clone(&self) -> Self {
        Layers(Arc::clone(&self.0))
    }
}

impl<S, P> Layers<S, P> {
    pub fn new(layered: S, plain: P, cors: Option<Added>) -> Layers<S, P> {
        Layers(Arc::new(Ways {
            layered,
            plain,
            cors,
        }))
    }
}

impl<S, P> tower::Service<Request> for Layers<S, P>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone,
    P: tower::Service<Request, Response = Response, Error = Infallible> + Clone,
    P::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Oneshot<S, Request>, Plain<P::Future>>;

    /// Always ready: each call readies the clone of the way it takes.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let ways = &self.0;
        let h = req.headers();
        let cors_fixed = ways.cors.is_none()
            || (req.method() != Method::OPTIONS && !h.contains_key(header::ORIGIN));
        if !cors_fixed || h.contains_key(header::ACCEPT_ENCODING) {
            return Either::Left(ways.layered.clone().oneshot(req));
        }
        Either::Right(Plain {
            answer: ways.plain.clone().call(req),
            cors: ways.cors.clone(),
        })
    }
}

/// The answer of a request that went around the layers, with what they would add to it.
pub struct Plain<F> {
    answer: F,
    cors: Option<Added>,
}

impl<F> Future for Plain<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        Pin::new(&mut this.answer).poll(cx).map(|r| {
            r.map(|res| {
                let res = vary_as_compression(res);
                match &this.cors {
                    Some(added) => merge(res, added),
                    None => res,
                }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Layers;
    use crate::config::Config;
    use crate::http::compress::CompressWhenAsked;
    use crate::http::cors::CorsWhenAsked;
    use axum::body::Body;
    use axum::extract::Request;
    use axum::http::{header, HeaderName, HeaderValue};
    use axum::response::Response;
    use http_body_util::BodyExt;
    use std::convert::Infallible;
    use tower::ServiceExt;

    /// An inner service answering with `headers` and a body of `size` bytes.
    fn answering(
        headers: &'static [(&'static str, &'static str)],
        size: usize,
    ) -> impl tower::Service<Request, Response = Response, Error = Infallible, Future: Unpin> + Clone
    {
        tower::service_fn(move |_: Request| {
            let mut res = Response::new(Body::from(vec![b'x'; size]));
            for (name, value) in headers {
                res.headers_mut().append(
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                );
            }
            std::future::ready(Ok::<_, Infallible>(res))
        })
    }

    async fn seen(res: Response) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let headers = res
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_string()))
            .collect();
        let status = res.status().as_u16();
        let body = res.into_body().collect().await.expect("a body").to_bytes();
        (status, headers, body.to_vec())
    }

    /// Every request, whichever way it takes, is answered what the CORS and compression
    /// layers answer it: the same status, headers in the same order, the same body.
    #[tokio::test]
    async fn requests_around_the_layers_are_answered_as_through_them() {
        let answers: [(&'static [(&'static str, &'static str)], usize); 5] = [
            (&[], 0),
            (&[("content-type", "application/json; charset=utf-8")], 200),
            (&[("content-type", "image/png")], 200),
            (
                &[("content-type", "application/json"), ("vary", "cookie")],
                10,
            ),
            (
                &[
                    ("content-type", "application/json"),
                    ("vary", "accept-encoding"),
                    ("access-control-allow-credentials", "false"),
                ],
                100,
            ),
        ];
        let requests: [(&str, Option<&str>, Option<&str>); 6] = [
            ("POST", None, None),
            ("GET", None, None),
            ("POST", None, Some("gzip")),
            ("POST", Some("http://localhost:3000"), None),
            ("POST", Some("https://evil.example.com"), Some("br")),
            ("OPTIONS", None, None),
        ];
        for origins in [vec![], vec!["*"], vec!["http://localhost:3000"]] {
            let cfg = Config {
                cors_origins: origins.iter().map(|o| o.to_string()).collect(),
                ..Config::default()
            };
            for (headers, size) in answers {
                let inner = answering(headers, size);
                let compressed = CompressWhenAsked::new(inner.clone());
                let (layered, added) = match crate::http::middleware::cors(&cfg).expect("valid") {
                    Some(layer) => {
                        let cors = CorsWhenAsked::new(layer, compressed).await;
                        let added = cors.added();
                        (tower::util::Either::Left(cors), Some(added))
                    }
                    None => (tower::util::Either::Right(compressed), None),
                };
                let layers = Layers::new(layered.clone(), inner, added);
                for (method, origin, encoding) in requests {
                    let request = || {
                        let mut req = Request::new(Body::empty());
                        *req.method_mut() = method.parse().expect("method");
                        if let Some(o) = origin {
                            req.headers_mut()
                                .insert(header::ORIGIN, HeaderValue::from_static(o));
                        }
                        if let Some(e) = encoding {
                            req.headers_mut()
                                .insert(header::ACCEPT_ENCODING, HeaderValue::from_static(e));
                        }
                        req
                    };
                    let (Ok(a), Ok(b)) = (
                        layers.clone().oneshot(request()).await,
                        layered.clone().oneshot(request()).await,
                    );
                    assert_eq!(
                        seen(a).await,
                        seen(b).await,
                        "{origins:?} {headers:?} {size} {method} {origin:?} {encoding:?}"
                    );
                }
            }
        }
    }
}
