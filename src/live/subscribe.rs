//! A new subscription: prepared as its GET would be, counted against the limits, its first
//! answer read through the pipeline's stages, then joined to the result that identical
//! subscriptions share. What the call or its first read refuses (a bad request, a missing
//! login, `Access`, `Request`) is answered as `/get` answers it, and nothing is subscribed.

use super::answer::Written;
use super::registry::{Holder, Joining, Query, Refusal};
use super::stream::{event, EventStream};
use super::Live;
use crate::observe::Facts;
use crate::pipeline::plan::{Action, Purpose};
use crate::pipeline::prepare::{Asked, Body, Call, Client};
use crate::pipeline::run::Origin;
use apijet_core::Method;
use apijet_response::ApiError;
use bytes::Bytes;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// A subscription as the HTTP edge received it.
pub struct Subscribe {
    /// GET, GETS, HEAD or HEADS.
    pub method: Method,
    /// The request.
    pub body: Bytes,
    /// Who subscribes.
    pub client: Client,
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
    /// Opens a subscription: its event stream, or why it is refused.
    pub async fn subscribe(self: &Arc<Self>, s: Subscribe) -> Result<EventStream, ApiError> {
        let pipeline = &self.pipeline;
        let method = s.method.name().to_ascii_lowercase();
        let call = Call {
            method: &method,
            tag: None,
            query: &[],
            body: Body::Sent(&s.body),
        };
        let prepared = pipeline.prepare(call, &s.client, &mut Facts::default())?;
        let Asked::Read(read) = prepared.asked else {
            return Err(ApiError::Internal("a subscription is no read".into()));
        };
        let seat = self
            .registry
            .seat(s.holder, &self.settings)
            .map_err(|refusal| {
                ApiError::TooManyRequests(match refusal {
                    Refusal::Instance(n) => format!(
                        "this server holds {n} open subscriptions, its limit (setting \
                         live_max_subscriptions): try again later or on another instance"
                    ),
                    Refusal::Visitor(n) => format!(
                        "you hold {n} open subscriptions, the limit per visitor (setting \
                         live_max_per_visitor): close one first"
                    ),
                })
            })?;
        let query = Query::new(read, s.client, s.body);
        let seen = pipeline.changes.stamp();
        let read_at = Instant::now();
        let action = pipeline.plan_read(
            &prepared.snapshot,
            &query.read,
            &query.client,
            Purpose::Whole,
        )?;
        let deps = action.plan.dependencies().clone();
        let action = Action::Read(action);
        let mut facts = Facts::default();
        let answered = pipeline.run(action, &query.client, Origin::Subscribe, &mut facts);
        let written = Written::of(answered.await?.into_json()?);
        let first_id = written.id.clone();
        let first = event(Some(&first_id), None, &written.full());
        let joining = Joining {
            seat,
            query,
            written,
            deps,
            read_at,
            seen,
            patch: s.patch,
        };
        let (_, mut answers, subscription) =
            self.registry
                .join(joining, &pipeline.changes, self.settings.patch_bytes);
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
