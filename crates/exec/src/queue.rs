//! Group commit: concurrent single-row inserts into one table share a transaction.
//!
//! A commit costs a disk flush; a thousand clients each inserting one row pay a thousand of
//! them. The write queue collects the rows that arrive for the same table (and the same
//! columns) and writes them with one multi-row INSERT in one transaction, flushing when it holds
//! `max_rows` rows or `max_wait` after its first row, whichever comes first (`max_wait` zero:
//! as soon as the rows already waiting are taken). Each client is
//! answered only after the transaction holding its row has committed, so an acknowledged row
//! is never lost. If the shared statement fails (one row breaks a constraint), every row is
//! retried in a transaction of its own: only the faulty row's client gets the error.

use crate::backend::{Backend, Tx};
use crate::write::{atomically, Atomic, Running};
use crate::ExecError;
use apijet_core::Value;
use apijet_plan::query::Insert;
use apijet_sql::{render_insert, Statement};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{timeout_at, Instant};

/// When a batch is written.
#[derive(Debug, Clone, Copy)]
pub struct QueueConfig {
    /// Rows that make a batch full.
    pub max_rows: usize,
    /// How long the first row of a batch waits for company.
    pub max_wait: Duration,
}

struct Job {
    values: Vec<Value>,
    reply: oneshot::Sender<Result<u64, ExecError>>,
}

/// A lane's table and columns: rows that can share one INSERT.
type LaneKey = (String, Vec<String>);

/// The queues, one per (table, columns).
pub struct WriteQueue {
    backend: Arc<Backend>,
    config: QueueConfig,
    lanes: Mutex<HashMap<LaneKey, mpsc::Sender<Job>>>,
}

impl WriteQueue {
    /// A queue writing through `backend`.
    pub fn new(backend: Arc<Backend>, config: QueueConfig) -> WriteQueue {
        WriteQueue {
            backend,
            config,
            lanes: Mutex::new(HashMap::new()),
        }
    }

    /// Inserts the one row of `insert` (planned from the schema) and waits until the
    /// transaction holding it has committed.
    pub async fn insert(&self, mut insert: Insert) -> Result<u64, ExecError> {
        let values = insert
            .rows
            .pop()
            .ok_or_else(|| ExecError::Invalid("an insert without a row".into()))?;
        let (reply, answer) = oneshot::channel();
        let lane = self.lane(insert)?;
        lane.send(Job { values, reply })
            .await
            .map_err(|_| ExecError::Connect("the write queue stopped".into()))?;
        answer
            .await
            .map_err(|_| ExecError::Connect("the write queue dropped a row".into()))?
    }

    fn lane(&self, template: Insert) -> Result<mpsc::Sender<Job>, ExecError> {
        let mut lanes = self
            .lanes
            .lock()
            .map_err(|_| ExecError::Connect("write queue lock poisoned".into()))?;
        let key = (
            template.table.as_str().to_string(),
            template
                .columns
                .iter()
                .map(|c| c.as_str().to_string())
                .collect(),
        );
        if let Some(tx) = lanes.get(&key).filter(|tx| !tx.is_closed()) {
            return Ok(tx.clone());
        }
        let (tx, rx) = mpsc::channel(self.config.max_rows * 4);
        tokio::spawn(run_lane(self.backend.clone(), self.config, template, rx));
        lanes.insert(key, tx.clone());
        Ok(tx)
    }
}

async fn run_lane(
    backend: Arc<Backend>,
    config: QueueConfig,
    template: Insert,
    mut rx: mpsc::Receiver<Job>,
) {
    let dialect = backend.dialect();
    while let Some(first) = rx.recv().await {
        let received = Instant::now();
        let deadline = Instant::now() + config.max_wait;
        let mut batch = vec![first];
        // Rows already waiting join at once; then the batch waits for company until its
        // deadline. With no wait at all, rows that arrive while one commit runs form the next
        // batch: no added latency for a lone client, and batches as large as the load makes.
        while batch.len() < config.max_rows {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        while batch.len() < config.max_rows && !config.max_wait.is_zero() {
            match timeout_at(deadline, rx.recv()).await {
                Ok(Some(job)) => batch.push(job),
                _ => break,
            }
        }
        crate::stats::queue_batch(batch.len(), received.elapsed().as_micros() as u64);
        let mut insert = template.clone();
        insert.rows = batch.iter().map(|j| j.values.clone()).collect();
        let stmt = render_insert(dialect.as_ref(), &insert);
        match write_once(&backend, &stmt).await {
            Ok(_) => {
                for job in batch {
                    let _ = job.reply.send(Ok(1));
                }
            }
            Err(_) if batch.len() > 1 => {
                // Someone's row broke the batch: give every row its own transaction.
                for job in batch {
                    let mut one = template.clone();
                    one.rows = vec![job.values];
                    let r = write_once(&backend, &render_insert(dialect.as_ref(), &one)).await;
                    let _ = job.reply.send(r);
                }
            }
            Err(e) => {
                if let Some(job) = batch.pop() {
                    let _ = job.reply.send(Err(e));
                }
            }
        }
    }
}

/// One batch's INSERT, in a transaction of its own.
struct Batch<'a>(&'a Statement);

impl Atomic for Batch<'_> {
    type Done = u64;

    fn run<'t>(&'t self, tx: &'t mut Tx<'_>) -> Running<'t, u64> {
        Box::pin(tx.execute(self.0))
    }
}

async fn write_once(backend: &Backend, stmt: &Statement) -> Result<u64, ExecError> {
    atomically(backend, &Batch(stmt)).await
}
