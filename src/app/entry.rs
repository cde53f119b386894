//! The request entry of the APIJSON calls (`/{method}`, `/{method}/{tag}`, `/get/{json}`,
//! `/router`, and an agent's MCP tool calls): the pipeline's three stages (prepare → plan →
//! run) for an answer to the client, and the slow-request log around them.

use super::AppState;
use crate::observe::Facts;
use crate::pipeline::answer::Answer;
use crate::pipeline::plan::Purpose;
use crate::pipeline::prepare::{Body, Call, Client};
use crate::pipeline::run::Origin;
use apijet_response::ApiError;
use std::sync::Arc;

impl AppState {
    /// Answers one APIJSON call by `client`, made as `origin` says (an HTTP call, an MCP tool
    /// call); an error stays typed for the edge to write.
    pub async fn answer(
        self: &Arc<Self>,
        call: Call<'_>,
        client: &Client,
        origin: Origin,
        facts: &mut Facts,
    ) -> Result<Answer, ApiError> {
        let started = self.slow.map(|_| std::time::Instant::now());
        let method = call.method;
        // What the log shows of the request, if it turns out slow: the body as sent, or a
        // copy of the object the pipeline takes.
        let body = match (&call.body, self.slow) {
            (_, None) => None,
            (Body::Sent(bytes), Some(_)) => Some(Logged::Sent(bytes)),
            (Body::Object(map), Some(_)) => Some(Logged::Object(map.clone())),
        };
        // Not boxed: what is large in it, the read, is boxed where it runs (`Pipeline::run`).
        let answer = self.stages(call, client, origin, facts).await;
        let took = started.map(|t| t.elapsed()).unwrap_or_default();
        if let (Some(slow), Some(body)) = (self.slow.filter(|s| took >= *s), body) {
            // Its slow statements are logged with their plans where they run (exec).
            tracing::warn!(
                target: "apijet::slow",
                method,
                ms = took.as_millis() as u64,
                threshold_ms = slow.as_millis() as u64,
                request = %body.text(),
                "slow request"
            );
        }
        answer
    }

    async fn stages(
        self: &Arc<Self>,
        call: Call<'_>,
        client: &Client,
        origin: Origin,
        facts: &mut Facts,
    ) -> Result<Answer, ApiError> {
        let pipeline = &self.pipeline;
        let prepared = pipeline.prepare(call, client, facts)?;
        let planning = facts.clock();
        let action = pipeline.plan(&prepared.snapshot, &prepared.asked, client, Purpose::Answer)?;
        facts.plan = planning.map(|t| t.elapsed());
        pipeline.run(action, client, origin, facts).await
    }
}

/// A call's body as the slow-request log shows it.
enum Logged<'a> {
    Sent(&'a [u8]),
    Object(serde_json::Map<String, serde_json::Value>),
}

impl Logged<'_> {
    /// Its first 2 KiB.
    fn text(&self) -> String {
        let mut text = match self {
            Logged::Sent(bytes) => {
                String::from_utf8_lossy(&bytes[..bytes.len().min(2048)]).into_owned()
            }
            Logged::Object(map) => serde_json::to_string(map).unwrap_or_default(),
        };
        let mut cut = text.len().min(2048);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text
    }
}
