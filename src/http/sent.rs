//! A call's headers and body as the handlers take them: the body the middleware already read,
//! or read here for a route the middleware did not read it for.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};

/// The body the middleware read (`read_body`), for [`Sent`] to take as it is (the request's body holds the
/// same bytes, for the `Bytes` extractor of other handlers).
#[derive(Clone)]
pub(super) struct ReadBody(pub(super) Bytes);

/// A call's headers and body, taken out of the request rather than copied: the `HeaderMap`
/// extractor clones the headers and the `Bytes` one collects the body a second time.
pub struct Sent {
    pub headers: axum::http::HeaderMap,
    pub body: Bytes,
}

impl<S: Send + Sync> FromRequest<S> for Sent {
    type Rejection = Response;

    async fn from_request(mut req: Request, state: &S) -> Result<Self, Response> {
        if let Some(ReadBody(body)) = req.extensions_mut().remove::<ReadBody>() {
            let (parts, _) = req.into_parts();
            return Ok(Sent {
                headers: parts.headers,
                body,
            });
        }
        let headers = req.headers().clone();
        let body = Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Sent { headers, body })
    }
}
