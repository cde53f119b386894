//! CORS (`cors_origins`) computed only for the requests it can differ for.
//!
//! tower-http's CORS layer builds a header map and runs an origin check for every request.
//! For a request without `Origin` that is not a preflight, what it adds depends on nothing in
//! the request (with the origin rules [`super::middleware::cors`] makes: a mirrored origin or
//! a list, both answering no origin to no `Origin`): the layer itself is asked once at
//! start-up, and those requests get its answer copied, as the layer merges it (`Vary`
//! appended, every other header replacing the response's). The others go through the layer.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::response::Response;
use futures_util::future::Either;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::util::Oneshot;
use tower::{Layer, ServiceExt};
use tower_http::cors::CorsLayer;

/// What CORS adds to every answer of a request without `Origin`, in its order.
pub(super) type Added = Arc<[(HeaderName, HeaderValue)]>;

/// `inner` behind `layer`, the layer run only where the request can change what it adds. Its
/// parts are kept behind one `Arc`: the accept loop clones the whole stack for every request,
/// and the layer and both ways held by value were cloned (and dropped) with it.
pub struct CorsWhenAsked<S>(Arc<Parts<S>>);

struct Parts<S> {
    full: tower_http::cors::Cors<S>,
    plain: S,
    /// What the layer adds to the answer of a request without `Origin`, in its order.
    added: Added,
}

impl<S> Clone for CorsWhenAsked<S> {
    fn clone(&self) -> Self {
        CorsWhenAsked(Arc::clone(&self.0))
    }
}

impl<S: Clone> CorsWhenAsked<S> {
    pub async fn new(layer: CorsLayer, inner: S) -> CorsWhenAsked<S> {
        CorsWhenAsked(Arc::new(Parts {
            added: added_without_origin(&layer).await,
            full: layer.layer(inner.clone()),
            plain: inner,
        }))
    }

    /// What the layer adds to the answer of a request without `Origin`.
    pub fn added(&self) -> Added {
        Arc::clone(&self.0.added)
    }
}

/// The headers `layer` adds to an answer without headers, for a POST without `Origin`.
async fn added_without_origin(layer: &CorsLayer) -> Added {
    let bare =
        tower::service_fn(|_: Request| async { Ok::<_, Infallible>(Response::new(Body::empty())) });
    let mut probe = Request::new(Body::empty());
    *probe.method_mut() = Method::POST;
    let answer = match layer.layer(bare).oneshot(probe).await {
        Ok(answer) => answer,
        Err(never) => match never {},
    };
    answer
        .headers()
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// Adds `added` to the answer as the CORS layer merges its headers.
pub(super) fn merge(mut res: Response, added: &[(HeaderName, HeaderValue)]) -> Response {
    let headers = res.headers_mut();
    let mut previous: Option<&HeaderName> = None;
    for (name, value) in added {
        if *name == header::VARY || previous == Some(name) {
            headers.append(name.clone(), value.clone());
        } else {
            headers.insert(name.clone(), value.clone());
        }
        previous = Some(name);
    }
    res
}

impl<S> tower::Service<Request> for CorsWhenAsked<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Oneshot<tower_http::cors::Cors<S>, Request>, Merged<Oneshot<S, Request>>>;

    /// Always ready: each call readies the clone of the way it takes (`oneshot`).
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let parts = &self.0;
        if req.method() == Method::OPTIONS || req.headers().contains_key(header::ORIGIN) {
            return Either::Left(parts.full.clone().oneshot(req));
        }
        Either::Right(Merged {
            answer: parts.plain.clone().oneshot(req),
            added: Arc::clone(&parts.added),
        })
    }
}

/// The answer of a request without `Origin`, with what the CORS layer adds to it.
pub struct Merged<F> {
    answer: F,
    added: Added,
}

impl<F> Future for Merged<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        Pin::new(&mut this.answer)
            .poll(cx)
            .map(|r| r.map(|res| merge(res, &this.added)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// An inner service answering with `headers`.
    fn answering(
        headers: &'static [(&'static str, &'static str)],
    ) -> impl tower::Service<Request, Response = Response, Error = Infallible, Future: Unpin> + Clone
    {
        tower::service_fn(move |_: Request| {
            let mut res = Response::new(Body::empty());
            for (name, value) in headers {
                res.headers_mut().append(
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                );
            }
            std::future::ready(Ok::<_, Infallible>(res))
        })
    }

    fn headers_of(res: &Response) -> Vec<(String, String)> {
        res.headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_string()))
            .collect()
    }

    /// Every request, with or without `Origin`, preflight or not, gets the headers the CORS
    /// layer itself gives, in its order, over answers that already carry some of them.
    #[tokio::test]
    async fn answers_carry_what_the_cors_layer_gives() {
        let answers: [&'static [(&'static str, &'static str)]; 4] = [
            &[],
            &[("vary", "accept-encoding")],
            &[
                ("vary", "accept-encoding"),
                ("vary", "cookie"),
                ("x-other", "1"),
            ],
            &[
                ("access-control-expose-headers", "x-mine"),
                ("access-control-allow-credentials", "false"),
                ("content-type", "application/json"),
            ],
        ];
        let requests: [(&str, Option<&str>); 5] = [
            ("POST", None),
            ("GET", None),
            ("POST", Some("http://localhost:3000")),
            ("POST", Some("https://evil.example.com")),
            ("OPTIONS", None),
        ];
        for origins in [
            vec!["*"],
            vec!["http://localhost:3000", "https://app.example.com"],
        ] {
            let cfg = Config {
                cors_origins: origins.iter().map(|o| o.to_string()).collect(),
                ..Config::default()
            };
            for headers in answers {
                let layer = crate::http::middleware::cors(&cfg)
                    .expect("valid")
                    .expect("on");
                let fast = CorsWhenAsked::new(layer.clone(), answering(headers)).await;
                let full = layer.layer(answering(headers));
                for (method, origin) in requests {
                    let request = || {
                        let mut req = Request::new(Body::empty());
                        *req.method_mut() = method.parse().expect("method");
                        if let Some(o) = origin {
                            req.headers_mut()
                                .insert(header::ORIGIN, HeaderValue::from_static(o));
                        }
                        req
                    };
                    let (Ok(a), Ok(b)) = (
                        fast.clone().oneshot(request()).await,
                        full.clone().oneshot(request()).await,
                    );
                    assert_eq!(
                        headers_of(&a),
                        headers_of(&b),
                        "{origins:?} {headers:?} {method} {origin:?}"
                    );
                }
            }
        }
    }
}
