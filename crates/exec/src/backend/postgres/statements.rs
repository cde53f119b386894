//! Prepared statements per pooled connection, within a budget.
//!
//! PostgreSQL keeps every statement a connection prepared until it is closed: about 9 KiB of
//! server memory each, and one per distinct statement text a client could make. So each
//! connection keeps at most [`STATEMENTS_KEPT`] of them, the least recently used closed first,
//! and only those of at most `statement_cache_bytes` / [`STATEMENTS_KEPT`] bytes of text: a
//! longer one is prepared for its run and closed after it. A statement is closed when its last
//! handle is dropped (tokio-postgres sends `Close`), so forgetting it here is enough.

use super::super::STATEMENTS_KEPT;
use deadpool::managed::{Metrics, RecycleResult};
use std::collections::HashMap;
use std::sync::Mutex;
use tokio_postgres::{Error, Statement};

/// Makes the pool's connections: deadpool-postgres's, each with its own statements.
pub(super) struct PgManager(pub(super) deadpool_postgres::Manager);

/// A pooled connection.
pub(super) type Object = deadpool::managed::Object<PgManager>;

/// The pool.
pub(super) type Pool = deadpool::managed::Pool<PgManager>;

impl deadpool::managed::Manager for PgManager {
    type Type = PgConn;
    type Error = Error;

    async fn create(&self) -> Result<PgConn, Error> {
        Ok(PgConn {
            client: self.0.create().await?,
            kept: Mutex::new(Kept::default()),
        })
    }

    async fn recycle(&self, conn: &mut PgConn, metrics: &Metrics) -> RecycleResult<Error> {
        self.0.recycle(&mut conn.client, metrics).await
    }

    fn detach(&self, conn: &mut PgConn) {
        self.0.detach(&mut conn.client);
    }
}

/// A connection and the statements it keeps prepared.
pub struct PgConn {
    client: deadpool_postgres::ClientWrapper,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// Hashed with foldhash, seeded per process: SipHash over the statement's text was a
    /// visible part of every statement run, and at most [`STATEMENTS_KEPT`] texts are kept,
    /// which bounds what colliding texts can cost.
    by_text: HashMap<String, (Statement, u64), foldhash::fast::RandomState>,
    clock: u64,
}

impl std::ops::Deref for PgConn {
    type Target = tokio_postgres::Client;

    fn deref(&self) -> &tokio_postgres::Client {
        &self.client
    }
}

impl PgConn {
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The prepared statement of `sql`: the one kept, or a new one, kept when its text is at
    /// most `longest` bytes.
    pub(super) async fn prepare_kept(&self, sql: &str, longest: usize) -> Result<Statement, Error> {
        if sql.len() <= longest {
            let mut kept = self.kept();
            kept.clock += 1;
            let now = kept.clock;
            if let Some((statement, used)) = kept.by_text.get_mut(sql) {
                *used = now;
                return Ok(statement.clone());
            }
        }
        let statement = self.client.prepare(sql).await?;
        if sql.len() <= longest {
            let mut kept = self.kept();
            if kept.by_text.len() >= STATEMENTS_KEPT {
                let oldest = kept
                    .by_text
                    .iter()
                    .min_by_key(|(_, (_, used))| *used)
                    .map(|(text, _)| text.clone());
                if let Some(text) = oldest {
                    // Dropped here and by its last user: closed on the server.
                    kept.by_text.remove(&text);
                }
            }
            let now = kept.clock;
            kept.by_text
                .insert(sql.to_string(), (statement.clone(), now));
        }
        Ok(statement)
    }
}
