//! The one way an MCP tool call reaches the API: [`call`] hands the request object to the
//! application's request entry exactly as `POST /{method}` does: the pipeline's three stages
//! (the same parser, login checks, `Request` structures, plans, limits), admitted as an MCP
//! tool call (anonymous visitors' reads counted and timed as HTTP calls are), under the
//! caller's watch, stopped when the caller hangs up or cancels; then the answer is gathered and
//! sized for a model's context ([`super::fit`]). A refusal comes back as a tool error holding
//! the APIJSON envelope, its code and message, so the agent can correct the request.

use super::fit::{fit, unfinished, Fitted, Guide};
use super::{Caller, Settings};
use crate::app::AppState;
use crate::observe::Facts;
use crate::pipeline::answer::Answer;
use crate::pipeline::prepare::{Body, Call, Client};
use crate::pipeline::run::Origin;
use apijet_response::stream::Chunk;
use apijet_response::{refusal, success, ApiError};
use serde_json::{Map, Value as Json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What a tool answers: texts for the agent, and whether they say the call failed.
#[derive(Debug)]
pub(crate) struct ToolAnswer {
    pub is_error: bool,
    pub texts: Vec<String>,
}

impl ToolAnswer {
    /// A refusal before the request entry, as an APIJSON envelope with `code`.
    pub(crate) fn refused(code: u16, msg: &str) -> ToolAnswer {
        ToolAnswer {
            is_error: true,
            texts: vec![refusal(code, msg).to_string()],
        }
    }

    /// `answer` sized for a context of `max` bytes; an error when its code is not 200.
    pub(crate) fn sized(answer: &Json, max: usize, guide: Guide) -> ToolAnswer {
        let is_error = answer.get("code").and_then(Json::as_u64) != Some(200);
        match fit(answer, max, guide) {
            Fitted::Whole(text) => ToolAnswer {
                is_error,
                texts: vec![text],
            },
            Fitted::Cut { text, note } => ToolAnswer {
                is_error,
                texts: vec![note, text],
            },
            Fitted::TooLarge(msg) => ToolAnswer::refused(413, &msg),
        }
    }
}

/// Runs the APIJSON `method` (its URL name: `get`, `gets`, `post`, …) with `request` as
/// `caller`, until it ends or `cancelled` fires.
pub(crate) async fn call(
    state: &Arc<AppState>,
    settings: &Settings,
    method: &str,
    request: &Json,
    caller: &Caller,
    cancelled: &CancellationToken,
) -> ToolAnswer {
    let Json::Object(map) = request else {
        return ToolAnswer::refused(
            400,
            "the argument request must be a JSON object: the APIJSON request, e.g. \
             {\"User\":{\"id\":82001}}",
        );
    };
    let body = match serde_json::to_vec(request) {
        Ok(b) => b,
        Err(e) => return ToolAnswer::refused(400, &format!("the request is not JSON: {e}")),
    };
    // The HTTP edge bounds bodies before they are read; stdio has no edge.
    let max_body = settings.max_body_bytes;
    if body.len() > max_body {
        return ToolAnswer::refused(
            413,
            &format!("the request is larger than max_body_bytes ({max_body} bytes)"),
        );
    }
    let entry = Call {
        method,
        tag: None,
        query: &[],
        body: Body::Sent(&body),
    };
    let client = Client {
        visitor: caller.visitor.clone(),
        key: caller.client,
    };
    // The caller's watch (its socket, on SQLite) also stops statements when the call is
    // cancelled: a cancellation or hang-up reaches a statement already running.
    let probe = cancelled.clone();
    let watch = caller
        .watch
        .clone()
        .with_client(Arc::new(move || probe.is_cancelled()));
    // Streamed answers are read no further than this: past it the agent gets guidance, not
    // data, and a parsed answer costs several times its text.
    let max_answer = settings.max_answer_bytes;
    let limit = max_answer.saturating_mul(16).max(1 << 20);
    let work = apijet_exec::cancel::watched(watch, async {
        let mut facts = Facts::default();
        match state.answer(entry, &client, Origin::Tool, &mut facts).await {
            Ok(answer) => gather(state, answer, limit).await,
            Err(e) => Some(state.pipeline.failure(&e)),
        }
    });
    // Dropping `work` drops its statement, which cancels it in the database.
    let gathered = tokio::select! {
        gathered = work => gathered,
        () = cancelled.cancelled() => {
            return ToolAnswer::refused(499, "the call was cancelled");
        }
    };
    match gathered {
        Some(answer) => ToolAnswer::sized(&answer, max_answer, Guide::Request),
        None => ToolAnswer::refused(413, &unfinished(map, limit, max_answer)),
    }
}

/// The whole answer as JSON; `None` when its text passed `limit` bytes before it ended (the
/// stream is dropped there, which stops its statement).
async fn gather(state: &AppState, answer: Answer, limit: usize) -> Option<Json> {
    let body = match answer {
        Answer::Written { results, format } => return Some(success(results, format)),
        Answer::Counted(v, _) => return Some(v),
        Answer::Bytes { body, .. } => body.to_vec(),
        Answer::Stream(mut rx) => {
            let mut body = Vec::new();
            while let Some(chunk) = rx.recv().await {
                match chunk {
                    Chunk::Data(b) | Chunk::Cut(b) => {
                        if body.len() + b.len() > limit {
                            return None;
                        }
                        body.extend_from_slice(&b);
                    }
                    Chunk::Fail(e) => return Some(state.pipeline.failure(&e)),
                    Chunk::Statements(_) => {}
                }
            }
            body
        }
    };
    Some(match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => state.pipeline.failure(&ApiError::Internal(format!(
            "the answer could not be read back as JSON: {e}"
        ))),
    })
}

/// The request object a tool was given: its `request` argument.
pub(crate) fn request_argument(arguments: Option<&Map<String, Json>>) -> Result<&Json, String> {
    arguments.and_then(|a| a.get("request")).ok_or_else(|| {
        "the tool takes one argument, request: the APIJSON request object, e.g. \
             {\"request\":{\"User\":{\"id\":82001}}}"
            .to_string()
    })
}
