//! PostgreSQL through tokio-postgres and a deadpool pool.
//!
//! Parameters are sent in text format with types left for the server to infer, exactly as if
//! the client had written a quoted literal: `"id" = $1` gets `int8` and `"date" > $1` gets
//! `timestamp`, so one bound value works against any column type. Rows arrive in binary
//! format and are decoded straight into [`Cell`]s.

use super::{DbRole, STATEMENTS_KEPT};
use crate::cell::{recycle, Cell};
use crate::sink::RowSink;
use crate::{DbErrorKind, ExecError};
use apijet_core::Value;
use apijet_sql::Statement;
use bytes::BytesMut;
use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod};
use futures_util::{pin_mut, StreamExt};
use postgres_types::{Format, IsNull, ToSql, Type};
use std::error::Error;
use tokio_postgres::NoTls;

mod cells;
mod listen;
mod statements;

pub use listen::Listener;

use crate::fair::{FairSlots, Slot};
use cells::{PgKind, RawValue};
use statements::{Object, PgManager, Pool};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A pool of PostgreSQL connections.
pub struct PgBackend {
    pool: Pool,
    /// The pool's connections, shared fairly between clients (`crate::fair`).
    slots: Arc<FairSlots>,
    /// The longest statement text a connection keeps prepared
    /// (`statement_cache_bytes` / [`STATEMENTS_KEPT`]).
    kept_text: Arc<AtomicUsize>,
    /// How its connections are made, for a connection of its own ([`PgBackend::listen`]).
    config: tokio_postgres::Config,
}

impl PgBackend {
    /// Connects (and checks the connection) to `url`. A URL with several hosts is tried in
    /// order for every new connection (`target_session_attrs=read-write` skips standbys), and
    /// the pool drops connections that broke, so after a failover the next connections go to
    /// the new primary without a restart.
    ///
    /// A primary with read replicas commits with `synchronous_commit = remote_apply`: a write
    /// is acknowledged only once the synchronous standbys (`synchronous_standby_names`) have
    /// applied it, so the next read, on any replica and any instance, sees it.
    pub async fn connect(
        url: &str,
        pool_size: usize,
        timeout_ms: u64,
        role: DbRole,
    ) -> Result<PgBackend, ExecError> {
        let target = super::target::Target::of(apijet_core::Engine::Postgres, url);
        let mut cfg: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| target.bad_url(&cause(&e)))?;
        // Options of the URL come first, so apijet's own settings win.
        let mut options = cfg.get_options().map_or(String::new(), |o| format!("{o} "));
        options.push_str("-c TimeZone=UTC");
        if timeout_ms > 0 {
            options.push_str(&format!(" -c statement_timeout={timeout_ms}"));
        }
        if role == (DbRole::Primary { replicated: true }) {
            options.push_str(" -c synchronous_commit=remote_apply");
        }
        cfg.options(options);
        if cfg.get_connect_timeout().is_none() {
            // A host that drops packets must not hold a request (or the failover) forever.
            cfg.connect_timeout(std::time::Duration::from_secs(5));
        }
        let config = cfg.clone();
        let mgr = Manager::from_config(
            cfg,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(PgManager(mgr))
            .max_size(pool_size)
            .build()
            .map_err(|e| ExecError::Connect(e.to_string()))?;
        // Fail at start-up, not on the first request, when the database is unreachable.
        let client = pool.get().await.map_err(|e| target.failure(&cause(&e)))?;
        if role == (DbRole::Primary { replicated: true }) {
            let standbys = client
                .query_opt("SHOW synchronous_standby_names", &[])
                .await
                .ok()
                .flatten()
                .and_then(|r| r.try_get::<_, String>(0).ok())
                .unwrap_or_default();
            if standbys.trim().is_empty() {
                tracing::warn!(
                    "read_replicas are set but the primary has no synchronous_standby_names: \
                     a read on a replica may miss a write acknowledged just before \
                     (see docs/scale-out.md)"
                );
            }
        }
        drop(client);
        Ok(PgBackend {
            pool,
            slots: FairSlots::new(pool_size),
            config,
            kept_text: Arc::new(AtomicUsize::new(usize::MAX)),
        })
    }

    /// Keeps prepared only statements of at most `bytes` / [`STATEMENTS_KEPT`] bytes of
    /// text, at most [`STATEMENTS_KEPT`] per connection (`statement_cache_bytes`).
    pub fn set_statement_cache_bytes(&self, bytes: usize) {
        self.kept_text
            .store(bytes / STATEMENTS_KEPT, Ordering::Relaxed);
    }

    fn longest_kept(&self) -> usize {
        self.kept_text.load(Ordering::Relaxed)
    }

    /// Connections lent out and requests waiting for one.
    pub fn pool_status(&self) -> (i64, i64) {
        let s = self.pool.status();
        ((s.size - s.available) as i64, s.waiting as i64)
    }

    /// A pooled connection, once the client's fair share lets it have one.
    async fn connection(&self) -> Result<(Slot, Object), ExecError> {
        let slot = self.slots.acquire(crate::cancel::current().holder()).await;
        let client = self
            .pool
            .get()
            .await
            .map_err(|e| ExecError::Connect(e.to_string()))?;
        Ok((slot, client))
    }

    /// Runs a statement, feeding every row to `sink`.
    pub async fn fetch<S: RowSink>(
        &self,
        stmt: &Statement,
        sink: &mut S,
    ) -> Result<u64, ExecError> {
        let (_slot, client) = self.connection().await?;
        let running = Running(Some(client));
        let result = match &running.0 {
            Some(client) => fetch_on(client, self.longest_kept(), stmt, sink).await,
            None => Err(ExecError::Connect("no connection".into())),
        };
        if statement_ended(&result) {
            running.ended();
        }
        result
    }

    /// Starts a transaction on a connection of its own.
    pub async fn begin(&self) -> Result<PgTx, ExecError> {
        let (slot, client) = self.connection().await?;
        client.batch_execute("BEGIN").await.map_err(db_error)?;
        Ok(PgTx {
            _slot: slot,
            client: Some(client),
            running: false,
            longest_kept: self.longest_kept(),
        })
    }

    /// Runs statements that return no rows (schema set-up, demo data).
    pub async fn execute_script(&self, statements: &[String]) -> Result<(), ExecError> {
        let client = self
            .pool
            .get()
            .await
            .map_err(|e| ExecError::Connect(e.to_string()))?;
        for s in statements {
            client.batch_execute(s).await.map_err(db_error)?;
        }
        Ok(())
    }
}

/// An error with every cause under it: tokio-postgres says only "db error" at the top, and
/// the server's reason (wrong password, no such database) sits in its source.
fn cause(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// How many columns' kinds a statement keeps in place.
const FEW_COLUMNS: usize = 32;

/// Runs a statement on `client`, feeding every row to `sink`.
async fn fetch_on<S: RowSink>(
    client: &Object,
    longest_kept: usize,
    stmt: &Statement,
    sink: &mut S,
) -> Result<u64, ExecError> {
    let prepared = client
        .prepare_kept(&stmt.sql, longest_kept)
        .await
        .map_err(db_error)?;
    // The kinds of a statement's columns, in place when they are few (a lookup's are): a
    // vector of them, and one of the binds, were two allocations per statement.
    let columns = prepared.columns();
    let mut few = [PgKind::Text; FEW_COLUMNS];
    let many: Vec<PgKind>;
    let kinds: &[PgKind] = if columns.len() <= FEW_COLUMNS {
        for (kind, column) in few.iter_mut().zip(columns) {
            *kind = PgKind::of(column.type_());
        }
        &few[..columns.len()]
    } else {
        many = columns.iter().map(|c| PgKind::of(c.type_())).collect();
        &many
    };
    sink.columns(columns.iter().map(|c| c.name()));
    let rows = client
        .query_raw(&prepared, stmt.binds.iter().map(PgParam))
        .await
        .map_err(db_error)?;
    pin_mut!(rows);
    let mut spare: Vec<Cell<'static>> = Vec::with_capacity(kinds.len());
    let mut n = 0u64;
    while let Some(row) = rows.next().await {
        let mut cells: Vec<Cell<'_>> = recycle(spare);
        let row = row.map_err(db_error)?;
        for (i, kind) in kinds.iter().enumerate() {
            let raw: RawValue<'_> = row.try_get(i).map_err(db_error)?;
            let cell = match raw.0 {
                None => Cell::Null,
                Some(raw) => kind.decode(raw).map_err(|e| ExecError::Db {
                    kind: DbErrorKind::Other,
                    // Worded as tokio-postgres words its own decoding errors.
                    message: format!("error deserializing column {i}: {e}"),
                })?,
            };
            cells.push(cell);
        }
        sink.row(&cells).map_err(ExecError::from)?;
        spare = recycle(cells);
        n += 1;
        if sink.wants_flush() {
            sink.flush().await.map_err(ExecError::from)?;
        }
    }
    Ok(n)
}

/// A pooled connection with a statement under way (see [`crate::cancel`]). Dropped before
/// [`Running::ended`] (its request was dropped, its deadline passed, its sink stopped
/// reading), the statement may still run: it is cancelled.
struct Running(Option<Object>);

impl Running {
    /// The statement is over: the connection goes back to the pool as it is.
    fn ended(mut self) {
        self.0.take();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            cancel(client);
        }
    }
}

/// Whether a fetch's statement is over: it ran to its end or the server refused it. A fetch
/// that stopped reading (a client gone, a budget spent) left it running.
fn statement_ended(result: &Result<u64, ExecError>) -> bool {
    matches!(result, Ok(_) | Err(ExecError::Db { .. }))
}

/// Asks the server to cancel what `client` runs, again until the connection answers an empty
/// query (see [`crate::cancel::CANCEL_WAITS`]), then closes it. It leaves the pool at once, so
/// a cancel, which the server applies to whatever runs when it arrives, cannot land on another
/// request's statement. Closing also rolls back an open transaction.
fn cancel(client: Object) {
    let token = client.cancel_token();
    let detached = Object::take(client);
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        for wait in crate::cancel::CANCEL_WAITS {
            if let Err(e) = token.cancel_query(NoTls).await {
                tracing::warn!("cannot cancel a statement nobody waits for: {e}");
                break;
            }
            if tokio::time::timeout(wait, detached.simple_query(""))
                .await
                .is_ok()
            {
                break;
            }
        }
        drop(detached);
    });
}

/// An open transaction. Dropped unfinished (an error path, a cancelled request), it rolls back
/// before its connection goes back to the pool; dropped while a statement runs, the statement
/// is cancelled and the connection closed (which rolls back too).
pub struct PgTx {
    /// Its share of the pool, held until it ends.
    _slot: Slot,
    client: Option<Object>,
    /// A statement was started and has not ended.
    running: bool,
    /// The longest statement text kept prepared.
    longest_kept: usize,
}

impl PgTx {
    fn client(&self) -> Result<&Object, ExecError> {
        self.client
            .as_ref()
            .ok_or(ExecError::Connect("the transaction is closed".into()))
    }

    /// Runs a statement; returns the rows it changed.
    pub async fn execute(&mut self, stmt: &Statement) -> Result<u64, ExecError> {
        self.running = true;
        let client = self.client()?;
        let prepared = client
            .prepare_kept(&stmt.sql, self.longest_kept)
            .await
            .map_err(db_error)?;
        let params: Vec<PgParam<'_>> = stmt.binds.iter().map(PgParam).collect();
        let result = client
            .execute_raw(&prepared, params.iter())
            .await
            .map_err(db_error);
        self.running = false;
        result
    }

    /// Runs a query inside the transaction, feeding its rows to `sink`.
    pub async fn fetch<S: RowSink>(
        &mut self,
        stmt: &Statement,
        sink: &mut S,
    ) -> Result<u64, ExecError> {
        self.running = true;
        let result = fetch_on(self.client()?, self.longest_kept, stmt, sink).await;
        self.running = !statement_ended(&result);
        result
    }

    /// Commits.
    pub async fn commit(mut self) -> Result<(), ExecError> {
        if self.running {
            return Err(ExecError::Connect(
                "the transaction's last statement did not end".into(),
            ));
        }
        let client = self
            .client
            .take()
            .ok_or(ExecError::Connect("the transaction is closed".into()))?;
        client.batch_execute("COMMIT").await.map_err(db_error)
    }

    /// Rolls back.
    pub async fn rollback(mut self) -> Result<(), ExecError> {
        if self.running {
            // Dropping cancels the statement and closes the connection, which rolls back.
            return Ok(());
        }
        if let Some(client) = self.client.take() {
            client.batch_execute("ROLLBACK").await.map_err(db_error)?;
        }
        Ok(())
    }
}

impl Drop for PgTx {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        if self.running {
            cancel(client);
        } else if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = client.batch_execute("ROLLBACK").await;
            });
        }
    }
}

fn db_error(e: tokio_postgres::Error) -> ExecError {
    let kind = match e.code().map(|c| c.code()) {
        Some("2201B") => DbErrorKind::BadPattern,
        Some("42883" | "42704") => DbErrorKind::Unsupported,
        Some(c) if c.starts_with("22") => DbErrorKind::BadValue,
        Some("23505") => DbErrorKind::Unique,
        Some(c) if c.starts_with("23") => DbErrorKind::Constraint,
        Some("57014") => DbErrorKind::Timeout,
        Some(c) if c.starts_with("42") => DbErrorKind::Syntax,
        // Class 57P: the server is shutting down or not yet accepting statements; 25006: a
        // read-only transaction (a demoted primary after a failover).
        Some("57P01" | "57P02" | "57P03" | "25006") => DbErrorKind::Unavailable,
        _ if e.is_closed() => DbErrorKind::Connection,
        _ => DbErrorKind::Other,
    };
    let message = match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    };
    ExecError::Db { kind, message }
}

/// A bound value written in text format for whatever type the server inferred.
#[derive(Debug)]
struct PgParam<'a>(&'a Value);

impl ToSql for PgParam<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self.0 {
            Value::Null => return Ok(IsNull::Yes),
            Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
            Value::Float(f) => out.extend_from_slice(f.to_string().as_bytes()),
            Value::Text(s) => out.extend_from_slice(s.as_bytes()),
        }
        Ok(IsNull::No)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    fn encode_format(&self, _ty: &Type) -> Format {
        Format::Text
    }

    postgres_types::to_sql_checked!();
}
