//! A new subscription: counted against the limits, its first answer read as its GET would be,
//! then joined to the result that identical subscriptions share. What the first read refuses
//! (a bad request, `Access`, `Request`) is answered as `/get` answers it, and nothing is
//! subscribed.

use super::answer::Written;
use super::registry::{Holder, Joining, Query, Refusal};
use super::stream::{event, EventStream};
use super::Live;
use apijet_core::{Method, Visitor};
use apijet_response::ApiError;
use bytes::Bytes;
use serde_json::{Map, Value as Json};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// A subscription as the HTTP edge received it.
pub struct Subscribe {
    /// GET, GETS, HEAD or HEADS.
    pub method: Method,
    /// The request.
    pub map: Map<String, Json>,
    /// Who subscribes.
    pub visitor: Option<Visitor>,
    /// When the visitor's login expires: the stream ends then.
    pub expires: Option<SystemTime>,
    /// Whom the per-visitor limit counts.
    pub holder: Holder,
    /// Later answers as JSON patches where possible.
    pub patch: bool,
    /// The id of the answer the client has (`Last-Event-ID`).
    pub last_event_id: Option<String>,
}

impl Live {
    /// Opens a subscription: its event stream, or the envelope that refuses it.
    pub async fn subscribe(self: &Arc<Self>, s: Subscribe) -> Result<EventStream, Json> {
        let pipeline = &self.pipeline;
        let seat = self
            .registry
            .seat(s.holder, &self.settings)
            .map_err(|refusal| {
                let msg = match refusal {
                    Refusal::Instance(n) => format!(
                        "this server holds {n} open subscriptions, its limit (setting \
                         live_max_subscriptions): try again later or on another instance"
                    ),
                    Refusal::Visitor(n) => format!(
                        "you hold {n} open subscriptions, the limit per visitor (setting \
                         live_max_per_visitor): close one first"
                    ),
                };
                pipeline.failure(&ApiError::TooManyRequests(msg))
            })?;
        let query =
            Query::new(pipeline, s.method, s.map, s.visitor).map_err(|e| pipeline.failure(&e))?;
        let read_at = Instant::now();
        let (answer, deps) = super::refetch::read_once(self, &query).await;
        let deps = match deps {
            Some(deps) if answer.get("code").and_then(Json::as_u64) == Some(200) => deps,
            // Refused as its GET is: nothing to follow.
            _ => return Err(answer),
        };
        let written = Written::of(answer);
        let first_id = written.id.clone();
        let first = event(Some(&first_id), None, &written.full());
        let joining = Joining {
            seat,
            query,
            written,
            deps,
            read_at,
            patch: s.patch,
        };
        let (_, mut answers, subscription) = self.registry.join(joining, self.settings.patch_bytes);
        self.wake.notify_one();
        if answers.borrow().id != first_id {
            // A refetch published a newer answer since this one was read.
            answers.mark_changed();
        }
        // A client that has this answer gets a comment instead, so that the stream is under
        // way at once.
        let first = if s.last_event_id.as_deref() == Some(first_id.as_str()) {
            Bytes::from_static(b":\n\n")
        } else {
            first
        };
        Ok(EventStream {
            first: Some(first),
            answers,
            sent: first_id,
            patch: s.patch,
            expires: s.expires,
            stop: self.stop.subscribe(),
            _subscription: subscription,
            heartbeat: self.settings.heartbeat,
            metrics: Arc::clone(&pipeline.metrics),
        })
    }
}
