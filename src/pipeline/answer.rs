//! What a call answers: a whole JSON document, or a list streaming from the database through
//! a bounded channel, produced by a task of its own.

use apijet_response::stream::Chunk;
use apijet_response::{success, ApiError};
use serde_json::{Map, Value as Json};
use std::sync::Arc;
use tokio::sync::mpsc;

/// An answer: a JSON document, or a list streaming from the database.
pub enum Answer {
    /// What a write (or `/crud`) answers, before the envelope: its objects in request order,
    /// their keys in their formatted spelling when `format`.
    Written {
        /// The objects.
        results: Map<String, Json>,
        /// `format`.
        format: bool,
    },
    /// The whole answer of a read, with the number of statements it ran.
    Counted(Json, usize),
    /// Chunks of a streamed list; the first one decides between data and an error envelope.
    Stream(mpsc::Receiver<Chunk>),
    /// The whole answer of a read already written as JSON (a point lookup; code 200).
    Bytes {
        /// The answer.
        body: bytes::Bytes,
        /// Statements it ran.
        statements: usize,
        /// Rows it holds.
        rows: u64,
    },
}

impl Answer {
    /// The answer as JSON, for a read the server made for itself ([`Purpose::Whole`]), which
    /// is always assembled whole.
    ///
    /// [`Purpose::Whole`]: super::plan::Purpose::Whole
    pub fn into_json(self) -> Result<Json, ApiError> {
        match self {
            Answer::Written { results, format } => Ok(success(results, format)),
            Answer::Counted(v, _) => Ok(v),
            Answer::Stream(_) | Answer::Bytes { .. } => Err(ApiError::Internal(
                "a whole answer was planned, and another form came".into(),
            )),
        }
    }
}

/// Chunks in flight per streamed answer: with ~32 KiB chunks this bounds a stream's buffer.
pub(crate) const STREAM_CHANNEL: usize = 2;

/// Runs the producer of a streamed answer in a task of its own, under the request's watch.
/// When the body is dropped (the client left), the producer is dropped with its statement
/// future, which cancels the statement; a SQLite statement, which runs on the thread, sees the
/// closed channel in its progress handler.
pub(crate) fn spawn_producer<F>(tx: mpsc::Sender<Chunk>, produce: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let probe = tx.clone();
    let watch = apijet_exec::cancel::current().with_client(Arc::new(move || probe.is_closed()));
    tokio::spawn(apijet_exec::cancel::watched(watch, async move {
        tokio::select! {
            () = produce => {}
            () = tx.closed() => {
                tracing::debug!("the client of a streamed answer left; its statement is stopped");
            }
        }
    }));
}
