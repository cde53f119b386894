//! The pipeline for one request, stage after stage: request → plan/exec → response.

use crate::accounts::session::Sessions;
use crate::accounts::Accounts;
use crate::config::Config;
use crate::observe::Facts;
use crate::pipeline::Pipeline;
pub use crate::snapshot::Snapshot;
use apijet_core::Method;
use apijet_core::Visitor;
use apijet_exec::write::write;
use apijet_plan::verify::verify;
use apijet_plan::{PlanError, PlanOptions};
use apijet_request::{is_table_key, parse_body, Request};
use apijet_response::stream::Chunk;
use apijet_response::{success, ApiError};
use serde_json::{Map, Value as Json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// An answer: a JSON document, or a list streaming from the database.
pub enum Answer {
    /// The whole answer.
    Json(Json),
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

/// Chunks in flight per streamed answer: with ~32 KiB chunks this bounds a stream's buffer.
pub(crate) const STREAM_CHANNEL: usize = 2;

/// What every request shares; built once at start-up: the pipeline, and the features around
/// it wired to it.
pub struct AppState {
    /// The database, its snapshot and the plan options.
    pub pipeline: Arc<Pipeline>,
    /// Who the visitor of a request is.
    pub sessions: Arc<Sessions>,
    /// The account endpoints: codes, logins, passwords, balances.
    pub accounts: Accounts,
    /// User ids allowed to `POST /reload`.
    pub admins: Vec<i64>,
    /// Counters for `/metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Requests slower than this are logged with their SQL and plan.
    slow: Option<Duration>,
    /// What visitors who are not logged in may cost at once.
    pub(crate) anonymous: Arc<crate::anonymous::AnonymousReads>,
}

/// The request entry reads and writes through the pipeline's fields and methods directly.
impl std::ops::Deref for AppState {
    type Target = Pipeline;

    fn deref(&self) -> &Pipeline {
        &self.pipeline
    }
}

impl AppState {
    /// Connects, seeds the default SQLite database on first start, loads the snapshot, and
    /// wires the features to the pipeline.
    pub async fn start(cfg: &Config) -> Result<AppState, String> {
        let pipeline = Arc::new(Pipeline::start(cfg).await?);
        let sessions = Arc::new(Sessions::new(cfg)?);
        let metrics = Arc::new(crate::metrics::Metrics::new(
            pipeline
                .snapshot()
                .schema
                .tables()
                .map(|t| t.api_name.as_str()),
        ));
        Ok(AppState {
            accounts: Accounts::new(cfg, Arc::clone(&pipeline), Arc::clone(&sessions)),
            pipeline,
            sessions,
            admins: cfg.admins.clone(),
            metrics,
            slow: (cfg.slow_request_ms > 0).then(|| Duration::from_millis(cfg.slow_request_ms)),
            anonymous: crate::anonymous::AnonymousReads::new(
                cfg.anonymous_reads_per_address,
                Duration::from_millis(cfg.anonymous_statement_timeout_ms),
            ),
        })
    }

    /// Answers one APIJSON call; errors become the envelope with their code.
    pub async fn answer(self: &Arc<Self>, call: Call<'_>, facts: &mut Facts) -> Answer {
        let started = std::time::Instant::now();
        let (method, body) = (call.method, call.body);
        let mut watch = apijet_exec::cancel::current();
        if call.visitor.is_none() {
            watch = watch.with_timeout(self.anonymous.timeout, "anonymous_statement_timeout_ms");
        }
        // Boxed: the future of a call is moved through every layer of the HTTP stack, and
        // moving it costs what it weighs.
        let answer =
            match apijet_exec::cancel::watched(watch, Box::pin(self.run(call, facts))).await {
                Ok(a) => a,
                Err(e) => Answer::Json(self.failure(&e)),
            };
        if let Some(slow) = self.slow.filter(|s| started.elapsed() >= *s) {
            // Its slow statements are logged with their plans where they run (exec).
            tracing::warn!(
                target: "apijet::slow",
                method,
                ms = started.elapsed().as_millis() as u64,
                threshold_ms = slow.as_millis() as u64,
                request = %String::from_utf8_lossy(&body[..body.len().min(2048)]),
                "slow request"
            );
        }
        answer
    }

    async fn run(self: &Arc<Self>, call: Call<'_>, facts: &mut Facts) -> Result<Answer, ApiError> {
        let method = Method::from_url(call.method)
            .ok_or_else(|| ApiError::UnknownMethod(call.method.to_string()))?;
        let started = std::time::Instant::now();
        let mut map = parse_body(call.body)?;
        facts.parse = Some(started.elapsed());
        if let Some(tag) = call.tag {
            map = wrap_tag(map, tag, method);
        }
        for (k, v) in call.query {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Json::String(v.clone()));
            map.insert(k.clone(), value);
        }
        crate::observe::note_tables(&self.metrics, &map, facts);
        let visitor = call.visitor.as_ref();
        check_login_schema(visitor, &map, &self.options)?;
        if !method.is_public() && visitor.is_none() {
            // Every private method needs a login before anything else (§13.2).
            return Err(PlanError::NotLoggedIn.into());
        }
        let snapshot = self.snapshot();
        let map = match method {
            Method::Get | Method::Head => map,
            Method::Gets | Method::Heads => self.verify(method, map, &snapshot)?,
            Method::Post | Method::Put | Method::Delete => {
                let verified = verify(method, map, &snapshot.rules)?;
                let req = Request::from_map(verified.request)?;
                let plan =
                    self.plan_write(&req, &verified.checks, method, visitor, &snapshot, false)?;
                if let Some(answer) = self.queued(&plan, visitor, &snapshot).await? {
                    return Ok(Answer::Json(success(answer, req.format)));
                }
                let env = self.write_env(visitor, &snapshot);
                let results = write(&plan, &env).await?;
                return Ok(Answer::Json(success(results, req.format)));
            }
            Method::Crud => return self.crud(map, visitor, &snapshot).await,
        };
        // Held until the answer is complete, by the task of a streamed one.
        let permit = match (visitor, call.peer) {
            (None, Some(addr)) => self
                .anonymous
                .admit(addr)
                .map_err(ApiError::TooManyRequests)?,
            _ => None,
        };
        self.read(map, method, visitor, snapshot, permit, facts)
            .await
    }
}

/// One call as the HTTP edge received it.
pub struct Call<'a> {
    /// The `/{method}` segment.
    pub method: &'a str,
    /// The `/{method}/{tag}` segment.
    pub tag: Option<&'a str>,
    /// URL query parameters, merged into the root.
    pub query: &'a [(String, String)],
    /// The body.
    pub body: &'a [u8],
    /// Who is calling.
    pub visitor: Option<Visitor>,
    /// The client's address (anonymous reads are counted by it).
    pub peer: Option<std::net::IpAddr>,
}

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

/// A login whose `defaults` named a schema this server does not serve: the reference reads
/// that schema for every request of the login without a `@schema` of its own, so such a
/// request is refused, naming it, rather than answered from another schema.
fn check_login_schema(
    visitor: Option<&Visitor>,
    map: &Map<String, Json>,
    options: &PlanOptions,
) -> Result<(), PlanError> {
    let Some(schema) = visitor.and_then(|v| v.foreign_schema.as_deref()) else {
        return Ok(());
    };
    if map.contains_key("@schema") {
        return Ok(());
    }
    Err(PlanError::Invalid(format!(
        "this login's defaults name @schema:\"{schema}\", which this server does not serve (it \
         serves {}): log in again with defaults.@schema naming it, or without it, or give the \
         request its own @schema",
        options.served.schemas.join(" / ")
    )))
}

/// The tag shortcut `/{method}/{tag}` (§1.3): the body is the content of the tag.
fn wrap_tag(body: Map<String, Json>, tag: &str, method: Method) -> Map<String, Json> {
    let mut out = Map::new();
    if body.contains_key(tag) || tag.ends_with(":[]") {
        out = body;
    } else if is_table_key(tag) {
        out.insert(tag.to_string(), Json::Object(body));
    } else if let Some(table) = tag.strip_suffix("[]").filter(|t| is_table_key(t)) {
        let key = if matches!(method, Method::Get | Method::Gets) {
            tag
        } else {
            table
        };
        out.insert(key.to_string(), Json::Object(body));
    } else {
        out = body;
    }
    out.insert("tag".into(), Json::String(tag.to_string()));
    out
}
