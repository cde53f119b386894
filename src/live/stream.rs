//! The event stream of one subscriber (`text/event-stream`).
//!
//! - Every answer is an event whose `id` is its content's id. A client that reconnects with
//!   `Last-Event-ID` equal to the current answer's id is not sent it again.
//! - Later answers are sent only when they differ; a subscriber that reads slower than they
//!   change gets the newest only (the stream holds a `watch` receiver, not a queue).
//! - With patches on, an answer that follows the one the subscriber was last sent goes as
//!   `event: patch` (a JSON Patch against it); any other as a whole answer.
//! - A comment line every `live_heartbeat_ms` keeps proxies from closing an idle stream.
//! - `event: expired` ends the stream when the login it was opened with expires;
//!   `event: reconnect` when the server stops, after `retry:` (how long an EventSource waits
//!   before it reconnects, with `Last-Event-ID`, through the balancer to another instance).

use super::answer::LiveAnswer;
use super::registry::Subscription;
use crate::metrics::Metrics;
use bytes::Bytes;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior};

/// A subscriber's stream, before its first byte.
pub struct EventStream {
    /// The first event (none when the client already has the current answer).
    pub first: Option<Bytes>,
    /// Newer answers.
    pub answers: watch::Receiver<Arc<LiveAnswer>>,
    /// The id of the answer the client has.
    pub sent: String,
    /// Patches instead of whole answers, where the client has the base.
    pub patch: bool,
    /// When the login expires.
    pub expires: Option<SystemTime>,
    /// Set on shutdown.
    pub stop: watch::Receiver<bool>,
    /// Ends the subscription when the stream is dropped.
    pub _subscription: Subscription,
    pub heartbeat: Duration,
    pub metrics: Arc<Metrics>,
}

struct State {
    s: EventStream,
    heartbeat: Interval,
    expires: Option<Instant>,
    done: bool,
}

/// One event: `id`, `event` when not a plain message, and the data on one line (JSON text
/// holds no raw line breaks).
pub fn event(id: Option<&str>, kind: Option<&str>, data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 48);
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    if let Some(kind) = kind {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// Sent before `event: reconnect`: an EventSource reconnects this many milliseconds after the
/// stream ends (its default is a few seconds).
const RECONNECT_AFTER: &[u8] = b"retry: 500\n";

/// An envelope that ends a stream.
fn closing(kind: &str, code: u16, msg: &str) -> Bytes {
    let v = json!({"ok": false, "code": code, "msg": msg, "time": apijet_response::now_ms()});
    event(None, Some(kind), v.to_string().as_bytes())
}

impl EventStream {
    /// The stream as a response body.
    pub fn body(self) -> axum::body::Body {
        let period = self.heartbeat;
        let mut heartbeat = tokio::time::interval_at(Instant::now() + period, period);
        heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let expires = self.expires.map(|at| {
            let left = at
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            Instant::now() + left
        });
        let state = State {
            s: self,
            heartbeat,
            expires,
            done: false,
        };
        let events = futures_util::stream::unfold(state, |mut st| async move {
            let chunk = st.next().await?;
            Some((Ok::<_, std::convert::Infallible>(chunk), st))
        });
        axum::body::Body::from_stream(events)
    }
}

impl State {
    async fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        if let Some(first) = self.s.first.take() {
            self.s.metrics.live_pushed(1);
            return Some(first);
        }
        let far = Instant::now() + Duration::from_secs(86_400 * 365);
        loop {
            tokio::select! {
                biased;
                _ = self.s.stop.wait_for(|s| *s) => {
                    self.done = true;
                    let mut chunk = RECONNECT_AFTER.to_vec();
                    chunk.extend_from_slice(&closing(
                        "reconnect",
                        503,
                        "the server is stopping: reconnect (with Last-Event-ID) and another \
                         instance goes on",
                    ));
                    return Some(Bytes::from(chunk));
                }
                () = tokio::time::sleep_until(self.expires.unwrap_or(far)) => {
                    self.done = true;
                    return Some(closing(
                        "expired",
                        401,
                        "the login this subscription was opened with has expired: log in and \
                         subscribe again",
                    ));
                }
                changed = self.s.answers.changed() => {
                    if changed.is_err() {
                        self.done = true;
                        return None;
                    }
                    let answer = Arc::clone(&self.s.answers.borrow_and_update());
                    if answer.id == self.s.sent {
                        answer.seen();
                        continue;
                    }
                    // Held until every stream following it took it; one that is not held
                    // any more was replaced by a newer answer, which wakes this stream again.
                    let Some((full, patch)) = answer.take() else {
                        continue;
                    };
                    let chunk = match (&patch, self.s.patch) {
                        (Some((base, ops)), true) if *base == self.s.sent => {
                            event(Some(&answer.id), Some("patch"), ops)
                        }
                        _ => event(Some(&answer.id), None, &full),
                    };
                    self.s.sent.clone_from(&answer.id);
                    self.s.metrics.live_pushed(1);
                    return Some(chunk);
                }
                _ = self.heartbeat.tick() => return Some(Bytes::from_static(b":\n\n")),
            }
        }
    }
}
