//! The pipeline: every call through the stages, whatever its entry point, is three calls —
//! [`prepare`](Pipeline::prepare) (the body parsed and checked, a read's values in slots),
//! [`plan`](Pipeline::plan) (an [`Action`](plan::Action): a read from the plans kept by shape,
//! a write, or `/crud`) and [`run`](Pipeline::run) (admitted, then read on a replica or written
//! in a transaction, what it changed told). Around them, what every call shares: the database
//! (the primary and its read replicas) with its dialect, the snapshot of what the database says
//! the API is, the plan options, the ids of inserted rows, the write queue, the counters and
//! the generations of what writes changed ([`changes`]).

pub mod answer;
pub mod cache;
pub mod changes;
mod connect;
mod crud;
pub mod feed;
pub mod multiplexed;
pub mod plan;
pub mod prepare;
mod read;
pub mod run;
pub mod snapshot;

use crate::config::Config;
use crate::metrics::Metrics;
use apijet_core::{Method, Value, Visitor};
use apijet_exec::ids::IdGenerator;
use apijet_exec::queue::WriteQueue;
use apijet_exec::read::fetch_rows;
use apijet_exec::Backend;
use apijet_plan::schema::Table;
use apijet_plan::verify::ExistenceCheck;
use apijet_plan::{lookup, Context, PlanOptions};
use apijet_response::{failure, ApiError};
use apijet_sql::Dialect;
use arc_swap::ArcSwap;
use serde_json::{Map, Value as Json};
use snapshot::{load_snapshot, Snapshot};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The database, its snapshot and the plan options; built once at start-up.
pub struct Pipeline {
    pub backend: Arc<Backend>,
    /// Read replicas for GET and HEAD (none: everything on `backend`).
    replicas: Vec<Arc<Backend>>,
    next_replica: AtomicUsize,
    dialect: Box<dyn Dialect>,
    snapshot: ArcSwap<Snapshot>,
    pub options: PlanOptions,
    /// Ids for inserted rows.
    ids: IdGenerator,
    /// Most rows in one batch write.
    max_batch: usize,
    /// Group commit of single-row inserts, when on.
    queue: Option<WriteQueue>,
    /// Counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// The generations of what committed writes changed (live answers follow them).
    pub changes: changes::Changes,
    /// What every piece of work is admitted by: the ledger of what each client has under way.
    pub ledger: Arc<crate::ledger::Ledger>,
    /// Answers kept in memory while what they read does not move (none: `answer_cache_bytes`
    /// is 0).
    pub answers: Option<Arc<cache::AnswerCache<changes::Stamp>>>,
    /// What this instance hears of other instances' and programs' writes (found at start
    /// and on each reload).
    pub reach: tokio::sync::watch::Sender<feed::Reach>,
}

impl Pipeline {
    /// Connects to the database and its replicas, seeds the default SQLite database on first
    /// start, and loads the snapshot.
    pub async fn start(cfg: &Config) -> Result<Pipeline, String> {
        connect::start(cfg).await
    }

    /// Where a read runs: GET and HEAD go to the read replicas in turn, when there are any;
    /// everything else (private reads, the reads of `/crud`, logins) to the primary.
    pub(crate) fn reader(&self, method: Method) -> &Arc<Backend> {
        if self.replicas.is_empty() || !matches!(method, Method::Get | Method::Head) {
            return &self.backend;
        }
        let i = self.next_replica.fetch_add(1, Ordering::Relaxed);
        &self.replicas[i % self.replicas.len()]
    }

    /// What a request of `method` by `visitor` is verified and planned with on `snapshot`;
    /// `trusted` for the server's own (`/register`, accounts).
    pub(crate) fn context<'a>(
        &'a self,
        method: Method,
        visitor: Option<&'a Visitor>,
        snapshot: &'a Snapshot,
        trusted: bool,
    ) -> Context<'a> {
        Context {
            schema: &snapshot.schema,
            rules: &snapshot.rules,
            options: &self.options,
            method,
            visitor,
            trusted,
        }
    }

    /// The current snapshot; cheap, and stable for as long as the caller holds it.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Re-reads the schema and configuration tables and swaps them in; a failure keeps the old.
    pub async fn reload(&self) -> Result<(), String> {
        let fresh = load_snapshot(&self.backend, self.options.debug, self.max_batch).await?;
        // The triggers may have been installed or removed, or tables added, since.
        let every = self.reach.borrow().every;
        let reach = feed::reach(&self.backend, &fresh.schema, every).await;
        if let Some(answers) = &self.answers {
            answers.heard_by(reach.programs, reach.instances);
        }
        self.reach.send_replace(reach);
        self.snapshot.store(Arc::new(fresh));
        // Access and Request rules may have changed: every followed read is read again.
        self.changes.everything();
        if let Some(answers) = &self.answers {
            answers.clear();
        }
        Ok(())
    }

    /// The error envelope (server faults are logged once, here).
    pub fn failure(&self, e: &ApiError) -> Json {
        if e.client_left() {
            tracing::debug!("the client left before its answer was complete");
        } else if e.code() == 500 {
            tracing::error!(error = %e, "request failed");
        } else if e.is_database_refusal() {
            tracing::warn!(code = e.code(), error = %e, "the database refused a request");
        }
        failure(e, self.options.debug)
    }

    /// A write the server makes itself, without roles (an account endpoint, a sign-up): the
    /// caller made the checks, and `checks` are the structure's. The three stages, as for
    /// every call.
    pub async fn trusted_write(
        self: &Arc<Self>,
        method: Method,
        body: Map<String, Json>,
        checks: &[ExistenceCheck],
    ) -> Result<Map<String, Json>, ApiError> {
        let client = prepare::Client::default();
        let prepared = self.prepare_trusted(method, body, checks.to_vec())?;
        let action = self.plan(
            &prepared.snapshot,
            &prepared.asked,
            &client,
            plan::Purpose::Answer,
        )?;
        let answer = self
            .run(
                action,
                &client,
                run::Origin::Server,
                &mut Default::default(),
            )
            .await?;
        match answer {
            answer::Answer::Written { results, .. } => Ok(results),
            _ => Err(ApiError::Internal("a write answered as a read".into())),
        }
    }

    /// The rows of `table` where `key = value`, with `columns` (`json_outputs` of them
    /// answered as JSON), read on the primary as the server itself, without roles: the
    /// lookups of logins, verification codes and `/router` templates.
    pub async fn lookup(
        &self,
        table: &Table,
        columns: &[&str],
        (key, value): (&str, Value),
        json_outputs: &[String],
    ) -> Result<Vec<Map<String, Json>>, ApiError> {
        let select = lookup(table, columns, key, value)?;
        Ok(fetch_rows(&self.backend, self.dialect.as_ref(), &select, json_outputs).await?)
    }
}
